"""Automatic scale alignment in add/sub, and exact target scales through ``mul(..., plain_scale=...)``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hemx.errors import LevelError, ParameterError, ScaleMismatchError

from tests.helpers.ckks_helpers import (
    INSECURE, MAIN_LEVELS, MAIN_LOG_N, check_bits, context_and_keys, main_context, uniform,
)

pytestmark = pytest.mark.filterwarnings(INSECURE)

# Formulas of three multiplicative levels lose a few bits to the repeated products; ~38-40 bits are observed.
FORMULA_BITS = 35


@pytest.fixture(scope="module")
def main():
    return main_context()


@pytest.fixture(scope="module")
def data(main):
    ctx, keys = main
    rng = np.random.default_rng(2024)
    x = uniform(rng, ctx.slots)
    return x, ctx.encrypt(x, keys)


def test_rescale_divisor(main):
    ctx, _ = main
    p = ctx.params
    for level in range(1, p.max_level + 1):
        n = p.limbs_at_level(level)
        dropped = p.moduli[n - p.level_sizes[level] : n]
        assert ctx.rescale_divisor(level) == float(math.prod(dropped))
    with pytest.raises(LevelError):
        ctx.rescale_divisor(0)


def test_plain_scale_reaches_any_target(main, data):
    ctx, keys = main
    x, ct = data
    level = ct.level
    for target in (2.0 ** 40, 2.0 ** 50 * 1.37):
        c = ctx.mul(ct, -0.75, plain_scale=target * ctx.rescale_divisor(level) / ct.scale, rescale=True)
        assert c.level == level - 1
        assert math.isclose(c.scale, target, rel_tol=1e-12)
        # the rescale's rounding noise (~2^12 in the worst slot at N = 2^12) bounds the precision at scale t
        check_bits(f"scalar at target 2^{math.log2(target):.2f}", -0.75 * x, ctx.decrypt(c, keys),
                   math.log2(target) - 15)
    # arrays are encoded at plain_scale
    w = np.linspace(-2, 2, ctx.slots)
    c = ctx.mul(ct, w, plain_scale=2.0 ** 30, rescale=False)
    assert math.isclose(c.scale, ct.scale * 2.0 ** 30, rel_tol=1e-12)
    check_bits("array at plain_scale 2^30", w * x, ctx.decrypt(c, keys), 22)  # encoding rounding at 2^30


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan, "big"])
def test_plain_scale_validated(main, data, bad):
    ctx, _ = main
    with pytest.raises(ParameterError, match="plain_scale"):
        ctx.mul(data[1], 0.5, plain_scale=bad, rescale=False)


def test_plain_scale_errors(main, data):
    ctx, keys = main
    x, ct = data
    with pytest.raises(ParameterError, match="plain operands|plain values"):
        ctx.mul(ct, ct, keys, plain_scale=2.0 ** 20, rescale=False)
    with pytest.raises(ParameterError, match="plain values"):
        ctx.mul(ct, ctx.encode(x), plain_scale=2.0 ** 20, rescale=False)
    with pytest.raises(LevelError, match="beyond the modulus"):  # the product would wrap around
        ctx.mul(ct, 0.5, plain_scale=2.0 ** 400, rescale=False)


def test_naive_variance():
    """E[x^2] - E[x]^2 written naively: the two terms were rescaled through different primes."""
    ctx, keys = context_and_keys(MAIN_LOG_N, MAIN_LEVELS, slots=64, rotations="power_of_two")
    x = uniform(np.random.default_rng(5), ctx.slots)
    ct = ctx.encrypt(x, keys)
    n = ctx.slots
    ex2 = ctx.mul(ctx.sum_slots(ctx.mul(ct, ct, keys, rescale=True), keys), 1.0 / n, rescale=True)
    mean = ctx.mul(ctx.sum_slots(ct, keys), 1.0 / n, rescale=True)
    sq = ctx.mul(mean, mean, keys, rescale=True)
    # same level, scales s^2 / D_3 and s^2 / D_2: ex2 is aligned to sq's scale, spending one level
    assert sq.level == ex2.level and sq.scale != ex2.scale
    var = ctx.sub(ex2, sq)
    assert var.level == sq.level - 1 and var.scale == ex2.scale
    check_bits("naive variance", np.full(n, np.var(x)), ctx.decrypt(var, keys), FORMULA_BITS)
    # different levels (E[x]^2 against a fresh-level term): aligned without spending a level
    mean2 = ctx.mul(mean, mean, keys, rescale=True)
    top = ctx.sub(ctx.mul(ct, 1.0, rescale=True), mean2)  # level 2 vs level 1
    assert top.level == mean2.level and top.scale == mean2.scale
    check_bits("x - mean^2", x - np.mean(x) ** 2, ctx.decrypt(top, keys), FORMULA_BITS)


def test_naive_cubic(main, data):
    """x^3 - 0.5 x + 0.25 with plain mul/add: three terms at three levels and scales."""
    ctx, keys = main
    x, ct = data
    x2 = ctx.mul(ct, ct, keys, rescale=True)
    x3 = ctx.mul(x2, ct, keys, rescale=True)
    out = ctx.add(ctx.sub(x3, ctx.mul(ct, 0.5, rescale=True)), 0.25)
    assert out.level == x3.level
    check_bits("naive cubic", x ** 3 - 0.5 * x + 0.25, ctx.decrypt(out, keys), FORMULA_BITS)
    # the same at one level: x^2 and 0.5 x, both at the managed scale of their level (mul keeps them in its band):
    # equal scales add at that level; scales that still differ are aligned by spending one level
    half = ctx.mul(ct, 0.5, rescale=True)
    y = ctx.add(x2, half)
    assert y.scale == x2.scale
    assert y.level == (x2.level if half.scale == x2.scale else x2.level - 1)
    check_bits("x^2 + 0.5x, same level", x ** 2 + 0.5 * x, ctx.decrypt(y, keys), FORMULA_BITS)
    # operand order does not matter
    z = ctx.add(ctx.mul(ct, 0.5, rescale=True), x2)
    check_bits("0.5x + x^2, same level", x ** 2 + 0.5 * x, ctx.decrypt(z, keys), FORMULA_BITS)


def test_genuinely_different_scales_raise(main, data):
    ctx, keys = main
    x, ct = data
    unrescaled = ctx.mul(ct, ct, keys, rescale=False)  # scale 2^112
    for op in (ctx.add, ctx.sub):
        with pytest.raises(ScaleMismatchError, match="different scales"):
            op(unrescaled, ct)
        with pytest.raises(ScaleMismatchError, match="different scales"):
            op(ct, unrescaled)


def test_level_zero_same_level_mismatch_raises(main, data):
    ctx, keys = main
    x, ct = data
    a = ctx.drop_level(ct, 1)
    b = ctx.mul(a, 1.0, plain_scale=1.001 * ctx.rescale_divisor(1), rescale=True)  # level 0, scale 1.001 s
    with pytest.raises(ScaleMismatchError, match="level 0"):
        ctx.add(ctx.drop_level(ct, 0), b)
    check_bits("aligned from above", 2 * x, ctx.decrypt(ctx.add(ct, b), keys), FORMULA_BITS)
