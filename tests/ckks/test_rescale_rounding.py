"""Rescaling rounds: every coefficient of the rescaled ciphertext against Python-integer CRT and division.

Precision checks cannot see a rescale that floors instead of rounding (the error is one unit on coefficients
at scale 2^56), so this test reads the ciphertext's coefficients directly: for each coefficient X of (c0, c1)
at level l (centered CRT value modulo Q_l) the rescaled coefficient must be round(X / D) + u, where D is the
product of the dropped primes and u is the centered fast conversion's integer with |u| <= drop / 2, and the
u must average to zero (no floor bias).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hemx.ring import RNSRing

from tests.helpers import reference as ref
from tests.helpers.ckks_helpers import FAST_NTT, INSECURE, main_context, uniform

pytestmark = pytest.mark.filterwarnings(INSECURE)


def _coefficients(ctx, data, limbs):
    ring = RNSRing(ctx.params.n, ctx.params.moduli[:limbs], ntt=FAST_NTT)
    return np.asarray(ring.intt(data)).astype(np.int64)  # (2, limbs, N)


@pytest.mark.parametrize("level", [3, 1])
def test_rescale_rounds_every_coefficient(level):
    ctx, keys = main_context()
    p = ctx.params
    ct = ctx.drop_level(ctx.encrypt(uniform(np.random.default_rng(level), ctx.slots), keys), level)
    out = ctx.rescale(ct)
    src, kept = list(p.moduli[: ct.num_limbs]), list(p.moduli[: out.num_limbs])
    drop = len(src) - len(kept)
    assert drop == p.level_sizes[level] and out.level == level - 1
    big_d, big_q = math.prod(src[len(kept):]), math.prod(kept)
    before, after = _coefficients(ctx, ct.data, len(src)), _coefficients(ctx, out.data, len(kept))
    diffs = []
    for poly in range(2):
        for j in range(p.n):
            x = ref.crt_centered([int(v) for v in before[poly, :, j]], src)
            want = (2 * x + big_d) // (2 * big_d)  # round(x / D), halves up
            got = ref.crt([int(v) for v in after[poly, :, j]], kept)
            diffs.append(ref.centered(got - want, big_q))
    diffs = np.asarray(diffs)
    assert np.abs(diffs).max() <= drop // 2, np.unique(diffs, return_counts=True)
    # zero-mean: a floor instead of rounding shifts every coefficient by about -1/2 (8192 samples, sd <= 0.5)
    assert abs(diffs.mean()) < 0.05, diffs.mean()
