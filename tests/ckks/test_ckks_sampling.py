"""Sampler: distributions of ternary, sparse ternary, Gaussian and uniform draws; CSPRNG use; determinism."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import hemx
from hemx.ckks import Sampler
from hemx.ckks.sampling import GAUSSIAN_TAIL
from hemx.errors import ParameterError

from tests.helpers.ckks_helpers import INSECURE, MAIN_LEVELS, MAIN_LOG_N, small_params

Q28 = 268369921  # an NTT-friendly 28-bit prime; uniform() itself accepts any bound up to 2^32
MODULI = (2147352577, 268369921, 97, 3 * 2 ** 30)  # the last one forces ~25% rejections


def sampler(kind: str, seed: int = 0) -> Sampler:
    return Sampler() if kind == "os" else Sampler.insecure_for_tests(seed)


KINDS = ["os", "seeded"]


# ------------------------------------------------------------------------------------------------ ternary
@pytest.mark.parametrize("kind", KINDS)
def test_ternary_values_and_frequencies(kind):
    count = 90_000
    t = sampler(kind, 11).ternary((3, count // 3))
    assert t.shape == (3, count // 3) and t.dtype == np.int8
    values, freq = np.unique(t, return_counts=True)
    assert values.tolist() == [-1, 0, 1]
    # each value has probability 1/3: standard deviation of a frequency is sqrt(2/9 / count) ~ 0.0016
    assert np.all(np.abs(freq / count - 1 / 3) < 0.012), freq / count
    assert abs(float(t.mean())) < 0.02


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("h", [1, 64, 1000, 1024])
def test_ternary_exact_hamming_weight(kind, h):
    rows, n = 40, 1024
    t = sampler(kind, h).ternary((rows, n), hamming_weight=h)
    assert t.shape == (rows, n) and t.dtype == np.int8
    assert set(np.unique(t).tolist()) <= {-1, 0, 1}
    assert np.all(np.count_nonzero(t, axis=1) == h)
    if h >= 64:
        signs = t[t != 0]
        assert abs(float(signs.mean())) < 0.1  # +1 and -1 equally likely
        # positions are random: different rows use different supports
        supports = {tuple(np.flatnonzero(row)) for row in t}
        assert len(supports) == rows or h == n
        # every position is hit about equally often over the rows
        if h < n:
            hits = np.count_nonzero(t, axis=0)
            assert hits.max() <= rows * h / n + 8 * math.sqrt(rows * h / n) + 2


def test_ternary_hamming_weight_on_leading_axes():
    t = Sampler.insecure_for_tests(3).ternary((2, 3, 256), hamming_weight=17)
    assert t.shape == (2, 3, 256)
    assert np.all(np.count_nonzero(t, axis=-1) == 17)


@pytest.mark.parametrize("h", [0, -1, 257])
def test_ternary_bad_hamming_weight(h):
    with pytest.raises(ParameterError, match="hamming weight"):
        Sampler.insecure_for_tests(0).ternary((4, 256), hamming_weight=h)


# ------------------------------------------------------------------------------------------------ gaussian
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sigma", [3.19, 10.0])
def test_gaussian_moments_and_clipping(kind, sigma):
    count = 200_001  # odd on purpose: Box-Muller makes pairs
    z = sampler(kind, 5).gaussian((count,), sigma)
    assert z.shape == (count,) and z.dtype == np.int64
    # rounded N(0, sigma^2) has variance sigma^2 + 1/12
    std = math.sqrt(sigma ** 2 + 1 / 12)
    assert abs(float(z.std()) / std - 1) < 0.01, z.std()
    assert abs(float(z.mean())) < 5 * sigma / math.sqrt(count)
    bound = math.floor(GAUSSIAN_TAIL * sigma)
    assert np.abs(z).max() <= bound
    # symmetric, and |z| <= m (m = floor(sigma)) exactly when the unrounded sample lies in (-m - 1/2, m + 1/2)
    assert abs(np.mean(z > 0) - np.mean(z < 0)) < 0.01
    m = math.floor(sigma)
    assert abs(np.mean(np.abs(z) <= m) - math.erf((m + 0.5) / (sigma * math.sqrt(2)))) < 0.005


def test_gaussian_shape():
    z = Sampler.insecure_for_tests(1).gaussian((3, 5, 7), 3.19)
    assert z.shape == (3, 5, 7) and z.dtype == np.int64


def test_gaussian_tail_is_clipped(monkeypatch):
    # All-zero random bytes give the smallest uniform u1 = 2^-54, i.e. a radius sqrt(2 ln 2^54) ~ 8.6 sigma,
    # far out in the tail: those samples must be clipped to floor(6 sigma).
    monkeypatch.setattr(os, "urandom", lambda count: bytes(count))
    sigma = 3.19
    z = Sampler().gaussian((64,), sigma)
    bound = math.floor(GAUSSIAN_TAIL * sigma)
    assert bound == 19
    assert np.abs(z).max() == bound
    assert np.all(z[:32] == bound)  # r cos(0): clipped
    assert np.all(z[32:] == 0)  # r sin(~0)


# ------------------------------------------------------------------------------------------------ uniform
@pytest.mark.parametrize("kind", KINDS)
def test_uniform_residues_below_each_modulus(kind):
    n = 4096
    u = sampler(kind, 9).uniform(MODULI, (3, len(MODULI), n))
    assert u.shape == (3, len(MODULI), n) and u.dtype == np.uint32
    for l, q in enumerate(MODULI):
        limb = u[:, l, :].astype(np.int64)
        assert limb.min() >= 0 and limb.max() < q
        # uniform on [0, q): mean q/2 (std of the mean ~ q / sqrt(12 * 3n))
        assert abs(float(limb.mean()) / q - 0.5) < 0.02
        # sixteen buckets floor(16 r / q) hold counts proportional to their sizes (chi-square, 15 d.o.f.)
        buckets = np.bincount((limb * 16 // q).ravel(), minlength=16)
        sizes = np.array([-(-(b + 1) * q // 16) - -(-b * q // 16) for b in range(16)])  # residues per bucket
        assert sizes.sum() == q
        expected = limb.size * sizes / q
        chi2 = float(((buckets - expected) ** 2 / expected).sum())
        assert chi2 < 60, (q, buckets)


def test_uniform_has_no_modulo_bias():
    # With q = 3 * 2^30, reducing a 32-bit word modulo q would put half of the mass in [0, 2^30).
    # Rejection sampling keeps the three thirds equal.
    q = 3 * 2 ** 30
    u = Sampler.insecure_for_tests(2).uniform([q], (1, 300_000)).astype(np.int64)
    thirds = np.bincount((u // 2 ** 30).ravel(), minlength=3) / u.size
    assert thirds.shape == (3,)
    assert np.all(np.abs(thirds - 1 / 3) < 0.01), thirds


def test_uniform_small_modulus_hits_every_residue():
    u = Sampler.insecure_for_tests(4).uniform([7], (1, 7000))
    counts = np.bincount(u.ravel(), minlength=7)
    assert counts.shape == (7,)
    assert np.all(np.abs(counts / 1000 - 1) < 0.2)


def test_uniform_shape_must_match_moduli():
    with pytest.raises(ParameterError, match="limbs"):
        Sampler.insecure_for_tests(0).uniform(MODULI, (2, 16))


# ------------------------------------------------------------------------------------------------ sources
def test_default_sampler_reads_os_urandom(monkeypatch):
    calls = []
    real = os.urandom

    def counting(count):
        calls.append(count)
        return real(count)

    monkeypatch.setattr(os, "urandom", counting)
    s = Sampler()
    assert s.secure
    s.ternary((100,))
    s.ternary((4, 64), hamming_weight=8)
    s.gaussian((100,), 3.19)
    s.uniform([Q28], (1, 100))
    assert len(calls) >= 4 and sum(calls) > 0


def test_seeded_sampler_does_not_touch_os_urandom(monkeypatch):
    def forbidden(count):
        raise AssertionError("the seeded test sampler must not read the OS CSPRNG")

    monkeypatch.setattr(os, "urandom", forbidden)
    s = Sampler.insecure_for_tests(1)
    assert not s.secure
    s.ternary((100,))
    s.gaussian((100,), 3.19)
    s.uniform([Q28], (1, 100))


def test_two_default_samplers_differ():
    a, b = Sampler(), Sampler()
    assert not np.array_equal(a.uniform([Q28], (1, 256)), b.uniform([Q28], (1, 256)))
    assert not np.array_equal(a.ternary((256,)), b.ternary((256,)))
    assert not np.array_equal(a.gaussian((256,), 3.19), b.gaussian((256,), 3.19))
    # consecutive draws from one sampler differ too
    assert not np.array_equal(a.uniform([Q28], (1, 256)), a.uniform([Q28], (1, 256)))


def _draws(s: Sampler):
    return (s.uniform(MODULI, (len(MODULI), 128)), s.ternary((256,)), s.ternary((2, 256), hamming_weight=30),
            s.gaussian((257,), 3.19))


def test_seeded_sampler_is_deterministic():
    first, again, other = _draws(Sampler.insecure_for_tests(42)), _draws(Sampler.insecure_for_tests(42)), \
        _draws(Sampler.insecure_for_tests(43))
    for x, y, z in zip(first, again, other):
        np.testing.assert_array_equal(x, y)
        assert not np.array_equal(x, z)


@pytest.mark.filterwarnings(INSECURE)
def test_context_sampler_default_is_secure():
    params = small_params(MAIN_LOG_N, MAIN_LEVELS)
    assert hemx.Context(params).sampler.secure
    assert not hemx.Context(params, sampler=Sampler.insecure_for_tests(0)).sampler.secure


@pytest.mark.filterwarnings(INSECURE)
def test_seeded_contexts_reproduce_keys_and_ciphertexts():
    params = small_params(MAIN_LOG_N, MAIN_LEVELS)
    out = []
    for _ in range(2):
        ctx = hemx.Context(params, sampler=Sampler.insecure_for_tests(1234))
        keys = ctx.keygen()
        ct = ctx.encrypt(np.linspace(-1, 1, 16), keys)
        out.append((keys.secret.coeffs, np.asarray(keys.public.data), np.asarray(keys.relin.data),
                    np.asarray(ct.data)))
    for x, y in zip(*out):
        np.testing.assert_array_equal(x, y)
    # secret: ternary, uniform (no Hamming weight configured)
    s = out[0][0]
    assert set(np.unique(s).tolist()) == {-1, 0, 1}
    assert 0.6 < np.count_nonzero(s) / s.size < 0.73
