"""A product whose scale reaches the remaining modulus is refused (issue 37): two ciphertexts at level 0 (scale
2^56 each, 2^112 together, over a 62-bit modulus) raise ``LevelError`` with and without rescale, on every way
there (fresh, after a chain of managed products, mixed levels, a plaintext operand, the circuits' evaluator), and
the legal products next to them still pass."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hemx.circuits import CKKSEvaluator
from hemx.errors import LevelError

from tests.helpers.ckks_helpers import INSECURE, context_and_keys

pytestmark = pytest.mark.filterwarnings(INSECURE)

LOG_N, LEVELS = 11, 3
BEYOND = r"the product would have scale 2\^112\.0, beyond the modulus at level 0 \(2\^62\.0\); rescale the operands"


@pytest.fixture(scope="module")
def case():
    ctx, keys = context_and_keys(LOG_N, LEVELS)
    x = np.linspace(-1.0, 1.0, ctx.slots)
    return ctx, keys, x, ctx.encrypt(x, keys)


def test_level0_product_refused_without_rescale(case):
    ctx, keys, _, ct = case
    low = ctx.drop_level(ct, 0)
    assert low.level == 0 and round(math.log2(low.scale)) == 56
    assert round(sum(math.log2(q) for q in ctx.params.moduli[: ctx.params.limbs_at_level(0)])) == 62
    with pytest.raises(LevelError, match=BEYOND):
        ctx.mul(low, low, keys, rescale=False)
    with pytest.raises(LevelError, match=BEYOND):
        ctx.mul(low, low, keys.evaluation_keys(), rescale=False, auto_scale=False)
    with pytest.raises(LevelError, match=BEYOND):  # a level-3 operand meets a level-0 one: the product is at 0
        ctx.mul(ct, low, keys, rescale=False)
    with pytest.raises(LevelError, match=BEYOND):  # a plaintext at the ciphertext's scale
        ctx.mul(low, ctx.encode(np.ones(4), level=0, scale=low.scale), rescale=False)
    with pytest.raises(LevelError, match=BEYOND):  # the circuits' evaluator (scales planned by the caller)
        CKKSEvaluator(ctx, keys).mul(low, low)


def test_level0_product_refused_with_rescale(case):
    ctx, keys, _, ct = case
    low = ctx.drop_level(ct, 0)
    with pytest.raises(LevelError, match="no levels left"):
        ctx.mul(low, low, keys, rescale=True)
    with pytest.raises(LevelError, match="no levels left"):
        CKKSEvaluator(ctx, keys).mul(low, low, rescale=True)


def test_level0_after_managed_products_refused(case):
    """Down to level 0 through managed products (scales following the primes dropped), then one product more."""
    ctx, keys, _, ct = case
    r = ct
    for _ in range(LEVELS):
        r = ctx.mul(r, r, keys)
    assert r.level == 0
    with pytest.raises(LevelError, match="beyond the modulus at level 0"):
        ctx.mul(r, r, keys, rescale=False)
    with pytest.raises(LevelError, match="no levels left"):
        ctx.mul(r, r, keys)


def test_legal_products_still_pass(case):
    """At level 1 the modulus (2^118) holds the scale 2^112: the product is accepted, rescaled or not, and right;
    at level 0 a product by an integer constant keeps the scale and is accepted too."""
    ctx, keys, x, ct = case
    one = ctx.drop_level(ct, 1)
    raw = ctx.mul(one, one, keys, rescale=False)
    assert raw.level == 1 and math.isclose(math.log2(raw.scale), 112.0, abs_tol=0.01)
    for out in (ctx.rescale(raw), ctx.mul(one, one, keys)):
        assert out.level == 0
        assert np.max(np.abs(ctx.decrypt(out, keys).real[: x.size] - x * x)) < 1e-6
    low = ctx.drop_level(ct, 0)
    tripled = ctx.mul(low, 3, rescale=False)
    assert tripled.level == 0 and tripled.scale == low.scale
    assert np.max(np.abs(ctx.decrypt(tripled, keys).real[: x.size] - 3 * x)) < 1e-6
