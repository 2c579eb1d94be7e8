"""Polynomial evaluation (hemx.circuits.polynomial): structure in the slot simulator against numpy, precision
and exact levels/scales on ciphertexts, bad input.

Oracles are numpy's own polynomial modules (``numpy.polynomial.polynomial.polyval``,
``numpy.polynomial.chebyshev.chebval`` / ``chebinterpolate``), never hemx; precision is computed here
(``tests.helpers.ckks_helpers.bits_of``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numpy.polynomial import chebyshev as npcheb
from numpy.polynomial import polynomial as nppoly

import hemx
from hemx.circuits import SlotSimulator, chebyshev_coefficients, evaluate_polynomial, polynomial_depth
from hemx.circuits.polynomial import _split
from hemx.errors import LevelError, ParameterError

from tests.helpers.ckks_helpers import INSECURE, bits_of, context_and_keys, small_params, uniform

pytestmark = pytest.mark.filterwarnings(INSECURE)

LOG_N, LEVELS = 11, 7
# Worst-slot bits measured on the development CPU (seeded; docs/results/circuits-cpu.md), asserted 3 bits lower.
MARGIN = 3.0
MEASURED = {
    "sigmoid31_vs_poly": 42.9,  # CKKS error alone: decrypted p(x) against numpy's p(x)
    "sigmoid31_vs_sigmoid": 18.3,  # with the approximation error (3e-6 at degree 31): against the sigmoid
    "cubic": 40.5,
    "odd15": 37.0,
}


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x)))


def ceil_log2(k: int) -> int:
    return (k - 1).bit_length()


@pytest.fixture(scope="module")
def sim():
    return SlotSimulator(small_params(LOG_N, 9))


# ------------------------------------------------------------------------------------------------- structure


@settings(max_examples=100, deadline=None)
@given(degree=st.integers(1, 70), seed=st.integers(0, 2**32 - 1), basis=st.sampled_from(["monomial", "chebyshev"]),
       parity=st.sampled_from(["any", "odd", "even"]))
def test_simulated_polynomial_matches_numpy(sim, degree, seed, basis, parity):
    """Any degree, either basis, odd/even/general: the circuit computes p(x) and uses exactly the planned depth,
    which is ceil(log2(degree + 1)) (the least possible), and lands on the target scale."""
    rng = np.random.default_rng(seed)
    c = rng.normal(size=degree + 1)
    if parity == "odd":
        c[0::2] = 0.0
    elif parity == "even":
        c[1::2] = 0.0
    if not np.any(c[1:]):
        c[-1] = 1.0
    c = c[: np.flatnonzero(c)[-1] + 1]
    x = rng.uniform(-1, 1, sim.slots)
    fresh = sim.encrypt(x)
    out = evaluate_polynomial(sim, fresh, c, basis=basis)
    want = npcheb.chebval(x, c) if basis == "chebyshev" else nppoly.polyval(x, c)
    assert np.max(np.abs(out.values - want)) <= 1e-11 * max(1.0, np.max(np.abs(c)) * len(c))
    depth = polynomial_depth(c, basis=basis)
    assert depth == ceil_log2(len(c))
    assert fresh.level - out.level == depth
    assert math.isclose(out.scale, sim.default_scale, rel_tol=1e-9)


@settings(max_examples=100, deadline=None)
@given(degree=st.integers(1, 80), seed=st.integers(0, 2**32 - 1))
def test_chebyshev_division(degree, seed):
    """p = q T_m + r (the recursion's split) holds as polynomials, checked with numpy's Chebyshev arithmetic."""
    c = np.random.default_rng(seed).normal(size=degree + 1)
    m = 1 << (degree.bit_length() - 1)
    q, r = _split(c, m, "chebyshev")
    t = np.linspace(-1, 1, 33)
    lhs = npcheb.chebval(t, c)
    rhs = npcheb.chebval(t, q) * npcheb.chebval(t, [0] * m + [1]) + (npcheb.chebval(t, r) if len(r) else 0.0)
    assert np.max(np.abs(lhs - rhs)) <= 1e-12 * np.sum(np.abs(c))


@pytest.mark.parametrize("degree,interval", [(1, (-1, 1)), (7, (0, 3)), (31, (-8, 8)), (119, (-8, 8))])
def test_chebyshev_coefficients_match_numpy_interpolation(degree, interval):
    a, b = interval
    f = lambda x: sigmoid(x) + 0.1 * x  # noqa: E731
    got = chebyshev_coefficients(f, degree, interval)
    want = npcheb.chebinterpolate(lambda t: f(0.5 * (b - a) * t + 0.5 * (a + b)), degree)
    assert np.allclose(got, want, rtol=0, atol=1e-13)


def test_interval_and_scale_change_cost_one_level(sim):
    """The change of variable (or an input far from the target scale) is one constant product: +1 level."""
    c = chebyshev_coefficients(sigmoid, 31, (-8, 8))
    x = np.random.default_rng(3).uniform(-8, 8, sim.slots)
    fresh = sim.encrypt(x)
    out = evaluate_polynomial(sim, fresh, c, basis="chebyshev", interval=(-8, 8))
    assert fresh.level - out.level == polynomial_depth(c, basis="chebyshev", interval=(-8, 8)) == 6
    assert np.max(np.abs(out.values - npcheb.chebval(x / 8, c))) < 1e-12
    far = sim.encrypt(x / 8, scale=2.0 ** 50)
    out = evaluate_polynomial(sim, far, c, basis="chebyshev")
    assert far.level - out.level == 6 and math.isclose(out.scale, sim.default_scale, rel_tol=1e-9)


def test_larger_split_trades_depth_for_products(sim):
    c = np.random.default_rng(4).normal(size=32)
    x = np.random.default_rng(5).uniform(-1, 1, sim.slots)
    counts = {}
    for log_split in (1, 3):
        s = SlotSimulator(sim.params)
        out = evaluate_polynomial(s, s.encrypt(x), c, basis="chebyshev", log_split=log_split)
        assert np.max(np.abs(out.values - npcheb.chebval(x, c))) < 1e-11
        counts[log_split] = (s.params.max_level - out.level, s.products)
    assert counts[1][0] == 5 and counts[3][0] == 6  # least depth vs one more level
    assert counts[3][1] < counts[1][1]  # ... for fewer ciphertext products


# ------------------------------------------------------------------------------------------------- ciphertexts


@pytest.fixture(scope="module")
def enc():
    ctx, keys = context_and_keys(LOG_N, LEVELS)
    return ctx, keys


def test_sigmoid_degree_31_on_ciphertexts(enc):
    ctx, keys = enc
    rng = np.random.default_rng(11)
    x = rng.uniform(-8, 8, ctx.slots)
    c = chebyshev_coefficients(sigmoid, 31, (-8, 8))
    ct = ctx.encrypt(x, keys)
    out = evaluate_polynomial(ctx, ct, c, keys, basis="chebyshev", interval=(-8, 8))
    assert ct.level - out.level == 6  # ceil(log2(32)) + 1 for the change of variable
    assert out.scale == pytest.approx(ctx.params.scale, rel=1e-9)
    got = ctx.decrypt(out, keys)
    vs_poly = bits_of(npcheb.chebval(x / 8, c), got)
    vs_sigmoid = bits_of(sigmoid(x), got)
    print("sigmoid31", vs_poly, vs_sigmoid)
    assert vs_poly.min_bits >= MEASURED["sigmoid31_vs_poly"] - MARGIN
    assert vs_sigmoid.min_bits >= MEASURED["sigmoid31_vs_sigmoid"] - MARGIN


def test_naive_cubic_and_odd_polynomial(enc):
    ctx, keys = enc
    rng = np.random.default_rng(12)
    x = uniform(rng, (2, ctx.slots))  # a batch of two ciphertexts
    ct = ctx.encrypt(x, keys)
    cubic = [0.25, -0.5, 0.0, 1.0]
    out = evaluate_polynomial(ctx, ct, cubic, keys)
    assert out.batch_shape == (2,) and ct.level - out.level == 2
    stats = bits_of(nppoly.polyval(x, cubic), ctx.decrypt(out, keys))
    print("cubic", stats)
    assert stats.min_bits >= MEASURED["cubic"] - MARGIN
    odd = np.zeros(16)
    odd[1::2] = rng.normal(size=8) / np.arange(1, 9)
    out = evaluate_polynomial(ctx, ctx.encrypt(x[0], keys), odd, keys, basis="chebyshev")
    assert ct.level - out.level == 4
    stats = bits_of(npcheb.chebval(x[0], odd), ctx.decrypt(out, keys))
    print("odd15", stats)
    assert stats.min_bits >= MEASURED["odd15"] - MARGIN


def test_complex_slots(enc):
    ctx, keys = enc
    rng = np.random.default_rng(13)
    z = 0.7 * uniform(rng, ctx.slots, complex_=True)
    out = evaluate_polynomial(ctx, ctx.encrypt(z, keys), [0.5, 1.0, 0.5], keys)
    got = ctx.decrypt(out, keys)
    assert np.iscomplexobj(got)
    assert bits_of(0.5 + z + 0.5 * z * z, got).min_bits >= MEASURED["cubic"] - MARGIN


def test_bad_input(enc):
    ctx, keys = enc
    ct = ctx.encrypt(np.zeros(4), keys)
    with pytest.raises(LevelError, match="needs 8 levels"):
        evaluate_polynomial(ctx, ct, np.ones(200), keys)
    low = ctx.drop_level(ct, 1)
    with pytest.raises(LevelError):
        evaluate_polynomial(ctx, low, [0, 0, 0, 1], keys)
    for bad in ([], [1.0], [[1, 2]], ["a", "b"], [1, float("nan")], [1, 1j]):
        with pytest.raises(ParameterError):
            evaluate_polynomial(ctx, ct, bad, keys)
    with pytest.raises(ParameterError, match="basis"):
        evaluate_polynomial(ctx, ct, [0, 1], keys, basis="legendre")
    with pytest.raises(ParameterError, match="interval"):
        evaluate_polynomial(ctx, ct, [0, 1], keys, interval=(-2, 2))
    with pytest.raises(ParameterError, match="interval"):
        evaluate_polynomial(ctx, ct, [0, 1], keys, basis="chebyshev", interval=(2, -2))
    with pytest.raises(ParameterError, match="log_split"):
        evaluate_polynomial(ctx, ct, [0, 1, 1], keys, log_split=0)
    with pytest.raises(ParameterError, match="keys"):
        evaluate_polynomial(ctx, ct, [0, 0, 1], None)
    with pytest.raises(ParameterError):
        evaluate_polynomial("not a context", ct, [0, 1], keys)
    with pytest.raises(ParameterError):
        chebyshev_coefficients(np.log, 7, (-1, 1))  # not finite on the interval
    with pytest.raises(ParameterError):
        chebyshev_coefficients(np.sin, 0)
