"""Hybrid key switching for every digit count and every level: relinearization and rotation.

Parameters: N = 2^10, a base of four 31-bit primes and two levels of two 28-bit primes, i.e. 8 limbs (levels
0, 1, 2 hold 4, 6 and 8 of them). Every dnum from 1 (one digit, 8 special primes) to 8 (one limb per digit, a
single special prime) is used, including the layouts where 8 limbs do not split evenly (dnum 3: 3 + 3 + 2,
dnum 5: 2 + 2 + 2 + 1 + 1, ...). Below the top level the digits are cut short (at level 0 with dnum 3 only the
digits (0, 3) and (3, 4) remain), which is what these tests exercise.

The four-prime base (124 bits) holds a product of two scale-2^56 values even at level 0, so every level can
check a relinearized product without rescaling; values are compared with numpy at >= 30 bits (observed ~40).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from hemx.ckks import keygen as keygen_mod
from hemx.kernels import native
from tests.helpers.ckks_helpers import INSECURE, check_bits, context_and_keys, main_context, uniform

pytestmark = pytest.mark.filterwarnings(INSECURE)

LOG_N = 10
LEVELS = 2
BASE = (31, 31, 31, 31)
LIMBS = len(BASE) + 2 * LEVELS  # 8
DNUMS = list(range(1, LIMBS + 1))
BELOW_TOP = list(range(LEVELS))  # levels 0 and 1
BITS = {"relin": "n10ks/relin", "rotate": "n10ks/rotate"}  # keys of tests/helpers/expected.py

CASES = [(d, l) for d in DNUMS for l in BELOW_TOP]
IDS = [f"dnum{d}-level{l}" for d, l in CASES]


@functools.lru_cache(maxsize=None)
def setup(dnum: int):
    """Context, keys (relinearization + rotation by 1) and two fresh top-level ciphertexts for one dnum."""
    ctx, keys = context_and_keys(LOG_N, LEVELS, dnum=dnum, base_bits=BASE, seed=100 + dnum, rotations=(1,))
    rng = np.random.default_rng(dnum)
    x, y = uniform(rng, ctx.slots), uniform(rng, ctx.slots)
    return ctx, keys, x, y, ctx.encrypt(x, keys), ctx.encrypt(y, keys)


@pytest.mark.parametrize("dnum", DNUMS)
def test_key_layout(dnum):
    ctx, keys, *_ = setup(dnum)
    p = ctx.params
    assert p.num_limbs == LIMBS and p.dnum == dnum
    alpha = math.ceil(LIMBS / dnum)
    assert len(p.special_moduli) == alpha == p.alpha
    digits = p.digits()
    assert len(digits) == dnum and sum(hi - lo for lo, hi in digits) == LIMBS
    # one (b, a) pair per digit over the whole P + Q basis; a compact key (the default with the native kernels)
    # holds the b halves and the 8-word stream key of its a halves
    halves = 1 if ctx.key_storage == "compact" else 2
    assert ctx.key_storage == ("compact" if native.has_seeded_keys() else "full")
    assert keys.relin.data.shape == (dnum, halves, alpha + LIMBS, p.n)
    assert keys.relin.compact == (halves == 1) and (keys.relin.stream is None) == (halves == 2)
    assert keygen_mod.full_key(ctx, keys.relin).data.shape == (dnum, 2, alpha + LIMBS, p.n)
    assert keys.relin.kind == "relin"
    (g, rot), = keys.galois.items()
    assert rot.data.shape == keys.relin.data.shape and rot.kind == "galois" and rot.galois == g
    # hybrid key switching needs P to exceed every digit's modulus
    big_p = math.prod(p.special_moduli)
    for lo, hi in digits:
        assert big_p > math.prod(p.moduli[lo:hi])


@pytest.mark.parametrize("dnum, level", CASES, ids=IDS)
def test_relinearized_mul(dnum, level):
    ctx, keys, x, y, a, b = setup(dnum)
    a, b = ctx.drop_level(a, level), ctx.drop_level(b, level)
    out = ctx.mul(a, b, keys, rescale=False)
    assert out.level == level and out.data.shape == a.data.shape
    check_bits(f"keyswitch relin dnum={dnum} level={level}", x * y, ctx.decrypt(out, keys), BITS["relin"])


@pytest.mark.parametrize("dnum, level", CASES, ids=IDS)
def test_rotation(dnum, level):
    ctx, keys, x, _, a, _ = setup(dnum)
    a = ctx.drop_level(a, level)
    out = ctx.rotate(a, 1, keys)
    assert out.level == level
    check_bits(f"keyswitch rotate dnum={dnum} level={level}", np.roll(x, -1), ctx.decrypt(out, keys), BITS["rotate"])


def _outlier_gap(errors: np.ndarray) -> tuple[float, int]:
    """log2(worst / median) of the absolute slot errors, and the worst slot."""
    e = np.abs(errors)
    return float(np.log2(e.max() / np.median(e))), int(e.argmax())


@pytest.mark.parametrize("steps", [1, -1])
def test_rotation_error_has_no_outlier_slots(steps):
    """Key-switching error must behave like noise in the slots, not pile up in a few of them.

    Four secret-key encryptions of zero (N = 2^12, 8 limbs, dnum 3) are rotated and decrypted; the signed slot
    errors are averaged, which shrinks random noise but keeps any systematic part. For zero-mean noise the worst
    of the 2048 slots lies ~2.5 bits above the median (the fresh ciphertexts show exactly that). A bias in the
    coefficient error e(X) shows up as e(X) ~ -mu (1 + X + ... + X^(N-1)) s(X), whose value at the slot
    whose root is closest to 1 (slot 0) is larger by ~2N/pi; that slot then dominates the error by many bits,
    and at N = 2^16 (set D) it costs ~10 bits of worst-slot precision (see test_ckks_slow.py).
    """
    ctx, keys = main_context()
    zero = np.zeros(ctx.slots)
    fresh, rotated = [], []
    for _ in range(4):
        ct = ctx.encrypt(zero, keys.secret)
        fresh.append(ctx.decrypt(ct, keys))
        rotated.append(ctx.decrypt(ctx.rotate(ct, steps, keys), keys))
    fresh_gap, _ = _outlier_gap(np.mean(fresh, axis=0))
    gap, worst = _outlier_gap(np.mean(rotated, axis=0))
    print(f"[outliers] fresh: worst slot {fresh_gap:.1f} bits above median; rotate {steps}: {gap:.1f} bits "
          f"(slot {worst})")
    assert fresh_gap < 4.0
    assert gap < 4.5, (f"rotation by {steps}: the worst slot error (slot {worst}) is {gap:.1f} bits above the "
                       f"median slot error; zero-mean noise gives ~2.5 bits (fresh: {fresh_gap:.1f})")
