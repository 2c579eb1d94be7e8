"""hemx.kernels.ntt: every method and reduction against the naive O(N^2) negacyclic transform."""

from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import reference as ref
from hemx import nt
from hemx.errors import ModulusError, ParameterError, ShapeError
from hemx.kernels import ntt as K

METHODS = ["butterfly", "four_step", "mat3", "multilevel"]
REDUCTIONS = ["shoup", "montgomery", "barrett"]
assert sorted(METHODS) == sorted(K.METHODS)

_ntt = jax.jit(K.ntt)
_intt = jax.jit(K.intt)


@lru_cache(maxsize=None)
def moduli_for(n: int, bits: tuple[int, ...] = (31, 26, 20)) -> tuple[int, ...]:
    """One NTT-friendly prime per requested size (distinct since the sizes differ)."""
    return tuple(nt.ntt_primes(b, 1, n)[0] for b in bits)


@lru_cache(maxsize=None)
def psi_for(n: int, q: int) -> int:
    return ref.psi(n, q)


def random_residues(shape, qs, seed):
    """uint32 (..., L, N) with entry [..., l, :] uniform in [0, q_l)."""
    rng = np.random.default_rng(seed)
    lead, (nl, n) = shape[:-2], shape[-2:]
    assert nl == len(qs)
    return np.stack([rng.integers(0, q, size=lead + (n,)) for q in qs], axis=-2).astype(np.uint32)


@lru_cache(maxsize=None)
def naive_case(n: int):
    """A fixed (L, N) input with edge values and its naive bit-reversed negacyclic NTT."""
    qs = moduli_for(n)
    x = random_residues((len(qs), n), qs, seed=n)
    x[:, 0] = np.asarray(qs, dtype=np.uint32) - 1
    if n > 2:
        x[:, 1] = 0
        x[:, -1] = np.asarray(qs, dtype=np.uint32) - 1
    want = np.asarray([ref.ntt_naive(x[l].tolist(), q, psi_for(n, q)) for l, q in enumerate(qs)], dtype=np.int64)
    return qs, x, want


def assert_forward_matches_naive(x, qs, out, positions=None):
    """Check ``out`` (..., L, N) against direct evaluation ``A_brv(p)`` at the given positions (all if None)."""
    x = np.asarray(x)
    out = np.asarray(out)
    n = x.shape[-1]
    bits = ref.log2(n)
    flat_x = x.reshape(-1, len(qs), n)
    flat_o = out.reshape(-1, len(qs), n)
    pos = range(n) if positions is None else positions
    for t in range(flat_x.shape[0]):
        for l, q in enumerate(qs):
            w = psi_for(n, q)
            coeffs = flat_x[t, l].tolist()
            for p in pos:
                assert int(flat_o[t, l, p]) == ref.ntt_eval(coeffs, q, w, ref.bit_reverse(p, bits)), (t, l, p)


# ----------------------------------------------------------------------------------------------------------
# forward transform vs the naive reference, N = 2 .. 256, every method x reduction
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("logn", range(1, 9))
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("method", METHODS)
def test_forward_matches_naive(method, reduction, logn):
    n = 1 << logn
    qs, x, want = naive_case(n)
    plan = K.make_plan(n, qs, method, reduction=reduction)
    out = _ntt(jnp.asarray(x), plan)
    assert out.dtype == jnp.uint32 and out.shape == x.shape
    np.testing.assert_array_equal(np.asarray(out).astype(np.int64), want)


@lru_cache(maxsize=None)
def _user_size_plan(logn: int, method: str, reduction: str):
    n = 1 << logn
    qs = moduli_for(n, (28, 31))
    return qs, K.make_plan(n, qs, method, reduction=reduction)


@settings(deadline=None)
@given(
    logn=st.sampled_from([12, 16]),  # the ring degrees of CROSS sets A and D (users run up to 2^16)
    method=st.sampled_from(METHODS),
    seed=st.integers(0, 2**32 - 1),
)
def test_forward_at_user_sizes_matches_direct_evaluation(logn, method, seed):
    """Property at the sizes users run: random residues (with the edges 0 and q - 1); one random NTT slot and
    the last checked against direct evaluation in Python integers; the inverse gives the input back. (The
    reductions are crossed with every method at N <= 256 above; here Shoup, the default, keeps it to 8 plans.)"""
    qs, plan = _user_size_plan(logn, method, "shoup")
    n = 1 << logn
    x = random_residues((len(qs), n), qs, seed)
    x[:, 0], x[:, -1] = 0, np.asarray(qs, np.uint32) - 1
    out = _ntt(jnp.asarray(x), plan)
    positions = [n - 1, int(np.random.default_rng(seed).integers(0, n))]
    assert_forward_matches_naive(x, qs, out, positions)
    np.testing.assert_array_equal(np.asarray(_intt(out, plan)), x)


@pytest.mark.parametrize("logn", [1, 4, 7])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("method", METHODS)
def test_inverse_of_naive_spectrum(method, reduction, logn):
    """intt maps the naive spectrum (bit-reversed order) back to the coefficients."""
    n = 1 << logn
    qs, x, want = naive_case(n)
    plan = K.make_plan(n, qs, method, reduction=reduction)
    back = _intt(jnp.asarray(want.astype(np.uint32)), plan)
    assert back.dtype == jnp.uint32
    np.testing.assert_array_equal(np.asarray(back), x)


# ----------------------------------------------------------------------------------------------------------
# round trip with batch axes up to N = 2^12, plus spot checks of the forward values at large N
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method,reduction",
    [(m, "shoup") for m in METHODS]
    + [("butterfly", "montgomery"), ("four_step", "barrett"), ("mat3", "barrett"), ("multilevel", "montgomery")],
)
def test_round_trip_batched(method, reduction):
    logn = 12
    n = 1 << logn
    qs = moduli_for(n, (31, 28))
    shape = (2, 3, len(qs), n)
    x = random_residues(shape, qs, seed=logn)
    x[0, 0] = 0
    x[1, 2] = np.asarray(qs, np.uint32).reshape(-1, 1) - 1
    plan = K.make_plan(n, qs, method, reduction=reduction)
    fx = _ntt(jnp.asarray(x), plan)
    assert fx.shape == shape and fx.dtype == jnp.uint32
    back = np.asarray(_intt(fx, plan))
    np.testing.assert_array_equal(back, x)
    fxn = np.asarray(fx)
    assert not fxn[0, 0].any()
    # the ring's forward values, spot-checked by direct evaluation (independent of every kernel)
    rng = np.random.default_rng(logn)
    positions = [0, 1, n - 1] + [int(p) for p in rng.integers(0, n, size=3)]
    assert_forward_matches_naive(x[:, 1:2], qs, fxn[:, 1:2], positions)
    assert_forward_matches_naive(x[1, 2], qs, fxn[1, 2], positions)


@pytest.mark.parametrize("logn", [11])
def test_all_methods_agree(logn):
    n = 1 << logn
    qs = moduli_for(n, (30, 29, 24))
    x = jnp.asarray(random_residues((2, len(qs), n), qs, seed=99))
    outs = {}
    combos = [(m, "shoup") for m in METHODS]
    for method, reduction in combos:
        plan = K.make_plan(n, qs, method, reduction=reduction)
        outs[(method, reduction)] = np.asarray(_ntt(x, plan))
    first = outs[("butterfly", "shoup")]
    for key, val in outs.items():
        np.testing.assert_array_equal(val, first, err_msg=str(key))
    assert_forward_matches_naive(x, qs, first, positions=[0, 5, n // 2, n - 1])


# ----------------------------------------------------------------------------------------------------------
# splits, radices, chunk widths
# ----------------------------------------------------------------------------------------------------------

_N_SPLIT = 64


def _check_plan(plan, n):
    qs, x, want = naive_case(n)
    out = _ntt(jnp.asarray(x), plan)
    np.testing.assert_array_equal(np.asarray(out).astype(np.int64), want, err_msg=plan.describe())
    np.testing.assert_array_equal(np.asarray(_intt(out, plan)), x, err_msg=plan.describe())


@pytest.mark.parametrize(
    "method,split",
    [("mat3", s) for s in [(1, 64), (2, 32), (4, 16), (8, 8), (16, 4), (32, 2), (64, 1)]]
    + [("four_step", s) for s in [(1, 64), (4, 16), (32, 2), (64, 1)]],
)
def test_two_level_splits(method, split):
    n = _N_SPLIT
    plan = K.make_plan(n, moduli_for(n), method, split=split, reduction="montgomery" if split[0] == 4 else "shoup")
    assert plan.split == split
    _check_plan(plan, n)


@pytest.mark.parametrize(
    "radices", [(2,) * 6, (4, 4, 4), (2, 4, 8), (8, 4, 2), (64,), (1, 64), (4, 1, 16)]
)
def test_multilevel_radix_lists(radices):
    n = _N_SPLIT
    plan = K.make_plan(n, moduli_for(n), "multilevel", split=radices, reduction="barrett")
    _check_plan(plan, n)


@pytest.mark.parametrize("max_radix", [4, 8, 32])
def test_multilevel_max_radix(max_radix):
    n = 256
    plan = K.make_plan(n, moduli_for(n), "multilevel", max_radix=max_radix)
    assert all(r <= max_radix for r in plan.split)
    assert int(np.prod(plan.split)) == n
    _check_plan(plan, n)


@pytest.mark.parametrize(
    "method,bp",
    [("mat3", 7), ("mat3", 6), ("mat3", 4), ("four_step", 6), ("four_step", 5), ("multilevel", 7), ("multilevel", 5)],
)
def test_chunk_width_variants(method, bp):
    n = _N_SPLIT
    reduction = REDUCTIONS[bp % 3]
    plan = K.make_plan(n, moduli_for(n), method, bp=bp, reduction=reduction)
    assert plan.bp == bp
    _check_plan(plan, n)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("method", METHODS)
def test_edge_inputs_zero_and_all_max(method, reduction):
    n = 128
    qs = moduli_for(n)
    plan = K.make_plan(n, qs, method, reduction=reduction)
    zero = np.zeros((len(qs), n), np.uint32)
    np.testing.assert_array_equal(np.asarray(_ntt(jnp.asarray(zero), plan)), zero)
    np.testing.assert_array_equal(np.asarray(_intt(jnp.asarray(zero), plan)), zero)
    top = np.repeat(np.asarray(qs, np.uint32).reshape(-1, 1) - 1, n, axis=1)
    out = _ntt(jnp.asarray(top), plan)
    assert_forward_matches_naive(top, qs, out)
    np.testing.assert_array_equal(np.asarray(_intt(out, plan)), top)
    # intt of an all-(q-1) spectrum: forward of the result must give it back
    inv = _intt(jnp.asarray(top), plan)
    np.testing.assert_array_equal(np.asarray(_ntt(inv, plan)), top)


def test_constant_and_monomial_spectra():
    """ntt(1) is all ones; ntt(X) at position p is psi^(2 brv(p) + 1)."""
    n = 32
    qs = moduli_for(n)
    one = np.zeros((len(qs), n), np.uint32)
    one[:, 0] = 1
    x = np.zeros((len(qs), n), np.uint32)
    x[:, 1] = 1
    for method in METHODS:
        plan = K.make_plan(n, qs, method)
        np.testing.assert_array_equal(np.asarray(_ntt(jnp.asarray(one), plan)), np.ones_like(one))
        fx = np.asarray(_ntt(jnp.asarray(x), plan))
        for l, q in enumerate(qs):
            w = psi_for(n, q)
            assert fx[l].tolist() == [pow(w, 2 * ref.bit_reverse(p, 5) + 1, q) for p in range(n)], method


def test_single_limb_and_many_limbs():
    n = 16
    qs_many = tuple(nt.ntt_primes(31, 6, n)) + tuple(nt.ntt_primes(22, 2, n))
    for qs, methods in [(qs_many[:1], ["butterfly"]), (qs_many, METHODS)]:
        x = random_residues((len(qs), n), qs, seed=len(qs))
        for method in methods:
            plan = K.make_plan(n, qs, method)
            out = _ntt(jnp.asarray(x), plan)
            assert_forward_matches_naive(x, qs, out)
            np.testing.assert_array_equal(np.asarray(_intt(out, plan)), x)


def test_unjitted_call_matches():
    n = 8
    qs, x, want = naive_case(n)
    plan = K.make_plan(n, qs, "multilevel")
    out = K.ntt(jnp.asarray(x), plan)
    np.testing.assert_array_equal(np.asarray(out).astype(np.int64), want)
    np.testing.assert_array_equal(np.asarray(K.intt(out, plan)), x)


def test_evaluation_order_is_bit_reversal():
    for n in (2, 16, 1024):
        order = K.evaluation_order(n)
        assert [int(v) for v in order] == [ref.bit_reverse(p, ref.log2(n)) for p in range(n)]


def test_psi_powers():
    n = 64
    q = moduli_for(n)[0]
    p = K.psi_powers(n, q)
    w = psi_for(n, q)
    assert [int(v) for v in p] == [pow(w, e, q) for e in range(2 * n)]


# ----------------------------------------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [3, 12, 0, -8, 1])
def test_bad_ring_degree(n):
    with pytest.raises(ParameterError):
        K.make_plan(n, [97], "butterfly")


def _composite_ntt_friendly(n):
    for k in range(1, 10**6):
        q = 2 * n * k + 1
        if not ref.is_prime(q):
            return q
    raise AssertionError


@pytest.mark.parametrize("method", METHODS)
def test_bad_moduli(method):
    n = 64
    good = moduli_for(n)
    with pytest.raises(ModulusError):  # q != 1 mod 2N
        K.make_plan(n, [good[0], 97], method)
    with pytest.raises(ModulusError):  # friendly for N/2 only
        q_half = next(q for q in nt.ntt_primes(30, 20, n // 2) if q % (2 * n) != 1)
        K.make_plan(n, [q_half], method)
    big = next(q for q in nt.ntt_primes(32, 50, n) if q >= 2**31)
    with pytest.raises(ModulusError):  # too large for 32-bit words
        K.make_plan(n, [big], method)
    with pytest.raises(ModulusError):  # composite
        K.make_plan(n, [_composite_ntt_friendly(n)], method)
    with pytest.raises(ModulusError):  # duplicates
        K.make_plan(n, [good[0], good[1], good[0]], method)
    with pytest.raises(ModulusError):  # none
        K.make_plan(n, [], method)


def test_bad_splits_and_options():
    n = 64
    qs = moduli_for(n)
    for method in ("mat3", "four_step"):
        for split in [(4, 8), (8, 16), (3, 21), (4, 4, 4), (64,), (0, 64)]:
            with pytest.raises(ParameterError):
                K.make_plan(n, qs, method, split=split)
    for radices in [(4, 4), (3, 3, 7), (4, 4, 8), (6, 8)]:
        with pytest.raises(ParameterError):
            K.make_plan(n, qs, "multilevel", split=radices)
    for max_radix in (1, 3, 12, 0):
        with pytest.raises(ParameterError):
            K.make_plan(n, qs, "multilevel", max_radix=max_radix)
    with pytest.raises(ParameterError):
        K.make_plan(n, qs, "fft")
    with pytest.raises(ParameterError):
        K.make_plan(n, qs, "mat3", reduction="karatsuba")
    with pytest.raises(ParameterError):
        K.make_plan(n, qs, "butterfly", reduction="karatsuba")
    for bp in (1, 9):
        with pytest.raises(ParameterError):
            K.make_plan(n, qs, "mat3", bp=bp)


@pytest.mark.parametrize("method", METHODS)
def test_data_shape_and_dtype_errors(method):
    n = 16
    qs = moduli_for(n)
    plan = K.make_plan(n, qs, method)
    ok = np.zeros((len(qs), n), np.uint32)
    bad = [
        np.zeros((len(qs) + 1, n), np.uint32),
        np.zeros((len(qs) - 1, n), np.uint32),
        np.zeros((len(qs), 2 * n), np.uint32),
        np.zeros((n,), np.uint32),
        np.zeros((2, len(qs), n // 2), np.uint32),
        ok.astype(np.int32),
        ok.astype(np.uint64),
        ok.astype(np.int64),
        ok.astype(np.float32),
    ]
    for arr in bad:
        for fn in (K.ntt, K.intt):
            with pytest.raises(ShapeError):
                fn(jnp.asarray(arr), plan)


# ------------------------------------------------------------------------------------------- subring plans
@settings(deadline=None, max_examples=25)
@given(logn=st.integers(2, 9), log_block=st.integers(1, 8), method=st.sampled_from(["butterfly", "mat3"]),
       seed=st.integers(0, 2**32 - 1))
def test_subring_plan_is_the_ring_transform_once_per_run(logn, log_block, method, seed):
    """A plan of degree N / b on the ring's roots to the power b (``subring_roots``): its transform of ``g`` is the
    ring's transform of ``g(X^b)`` with each run of b equal values written once, against Python integers (the
    ring's root to the power b, the naive bit-reversed evaluation) and against the ring's own plan."""
    n, block = 1 << logn, 1 << min(log_block, logn - 1)
    qs = moduli_for(n)
    small = n // block
    g = random_residues((len(qs), small), qs, seed)
    g[:, 0] = np.asarray(qs, np.uint32) - 1
    plan = K.make_plan(small, qs, method if small >= 4 else "butterfly", psi=K.subring_roots(n, qs, block))
    out = np.asarray(_ntt(jnp.asarray(g), plan))
    for l, q in enumerate(qs):
        want = ref.ntt_naive([int(v) for v in g[l]], q, pow(psi_for(n, q), block, q))
        assert out[l].tolist() == want
    spread = np.zeros((len(qs), n), np.uint32)
    spread[:, ::block] = g
    full = np.asarray(_ntt(jnp.asarray(spread), K.make_plan(n, qs, "butterfly")))
    np.testing.assert_array_equal(full, np.repeat(out, block, axis=-1))
    np.testing.assert_array_equal(np.asarray(_intt(jnp.asarray(out), plan)), g)


def test_subring_roots_and_psi_errors():
    qs = moduli_for(16)
    assert K.subring_roots(16, qs, 4) == [pow(psi_for(16, q), 4, q) for q in qs]
    with pytest.raises(ParameterError, match="block"):
        K.subring_roots(16, qs, 16)
    with pytest.raises(ParameterError, match="power of two"):
        K.subring_roots(16, qs, 3)
    with pytest.raises(ParameterError, match="primitive 8-th root"):
        K.make_plan(4, qs, "butterfly", psi=[1] * len(qs))  # not primitive
    with pytest.raises(ParameterError, match="primitive"):
        K.make_plan(4, qs, "butterfly", psi=K.subring_roots(16, qs, 4)[:1])  # one root short
