"""The CKKS evaluator against numpy: encryption, batching, arithmetic, rescaling, rotations, conjugation.

Precision is measured on the decrypted slots as -log2 |got - want| of the worst slot. At N = 2^12 with scale
2^56 a fresh public-key encryption is good to about 40 bits; single operations are asserted at >= 35 bits
(products >= 34; sums of all slots, whose values are larger, >= 30), and the multiply-rescale-rotate chain down
to level 0 at the required >= 20 bits (with a tighter regression bound next to it).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import hemx
from hemx.ckks import Ciphertext
from hemx.ckks import evaluator
from hemx.kernels.automorphism import galois_element

from tests.helpers import expected
from tests.helpers.ckks_helpers import (
    FRESH_BITS,
    INSECURE,
    MAIN_LEVELS,
    MAIN_LOG_N,
    MAIN_ROTATIONS,
    MUL_BITS,
    check_bits,
    context_and_keys,
    main_context,
    small_params,
    uniform,
)

pytestmark = pytest.mark.filterwarnings(INSECURE)

FRESH = FRESH_BITS  # keys of tests/helpers/expected.py: fresh encryption and one cheap operation
MUL = MUL_BITS  # after one multiplication


@pytest.fixture(scope="module")
def main():
    return main_context()


@pytest.fixture(scope="module")
def data(main):
    ctx, keys = main
    rng = np.random.default_rng(2024)
    x, y = uniform(rng, ctx.slots), uniform(rng, ctx.slots)
    return x, y, ctx.encrypt(x, keys), ctx.encrypt(y, keys)


@pytest.fixture(scope="module")
def complex_data(main):
    ctx, keys = main
    rng = np.random.default_rng(99)
    z, w = uniform(rng, ctx.slots, complex_=True), uniform(rng, ctx.slots, complex_=True)
    return z, w, ctx.encrypt(z, keys), ctx.encrypt(w, keys)


# ------------------------------------------------------------------------------------------------ encryption
@pytest.mark.parametrize("which", ["keyset", "public", "secret"])
def test_encrypt_decrypt(main, which):
    ctx, keys = main
    x = uniform(np.random.default_rng(1), ctx.slots)
    key = {"keyset": keys, "public": keys.public, "secret": keys.secret}[which]
    ct = ctx.encrypt(x, key)
    p = ctx.params
    assert isinstance(ct, Ciphertext)
    # a fresh ciphertext is at the top level's managed scale (it follows the primes; ~ the parameters' scale)
    assert ct.level == p.max_level and ct.scale == ctx.level_scale(p.max_level) and ct.slots == ctx.slots
    assert not ct.is_complex and abs(math.log2(ct.scale) - p.log_scale) < 0.1
    assert ct.data.shape == (2, p.num_limbs, p.n) and ct.data.dtype == np.uint32
    assert ct.batch_shape == () and ct.num_limbs == p.num_limbs
    assert ct.key_id == keys.key_id and ct.context_id == ctx.id
    got = ctx.decrypt(ct, keys)
    assert got.shape == (ctx.slots,) and got.dtype == np.float64
    check_bits(f"encrypt/decrypt ({which} key)", x, got, FRESH)
    np.testing.assert_array_equal(got, ctx.decrypt(ct, keys.secret))


def test_encryption_is_randomized(main):
    ctx, keys = main
    x = np.ones(8)
    a, b = ctx.encrypt(x, keys), ctx.encrypt(x, keys)
    assert not np.array_equal(np.asarray(a.data), np.asarray(b.data))
    s1, s2 = ctx.encrypt(x, keys.secret), ctx.encrypt(x, keys.secret)
    assert not np.array_equal(np.asarray(s1.data), np.asarray(s2.data))


def test_encrypt_plaintext_short_vector_and_complex(main):
    ctx, keys = main
    rng = np.random.default_rng(3)
    short = uniform(rng, 100)
    got = ctx.decrypt(ctx.encrypt(short, keys), keys)
    assert got.shape == (ctx.slots,)
    check_bits("encrypt 100 values (zero-padded)", np.r_[short, np.zeros(ctx.slots - 100)], got, FRESH)
    z = uniform(rng, ctx.slots, complex_=True)
    ct = ctx.encrypt(ctx.encode(z), keys)  # a Plaintext is accepted too
    assert ct.is_complex
    got = ctx.decrypt(ct, keys)
    assert np.iscomplexobj(got)
    check_bits("encrypt complex", z, got, FRESH)


def test_encrypt_below_the_top_level(main):
    ctx, keys = main
    x = uniform(np.random.default_rng(4), ctx.slots)
    ct = ctx.encrypt(ctx.encode(x, level=1), keys)
    assert ct.level == 1 and ct.num_limbs == ctx.params.limbs_at_level(1)
    check_bits("encrypt at level 1", x, ctx.decrypt(ct, keys), FRESH)


def test_batch_of_eight(main):
    ctx, keys = main
    rng = np.random.default_rng(8)
    x, y = uniform(rng, (8, ctx.slots)), uniform(rng, (8, ctx.slots))
    a, b = ctx.encrypt(x, keys), ctx.encrypt(y, keys)
    assert a.batch_shape == (8,) and a.data.shape == (8, 2, ctx.params.num_limbs, ctx.params.n)
    got = ctx.decrypt(a, keys)
    assert got.shape == (8, ctx.slots)
    check_bits("batch 8 encrypt/decrypt", x, got, FRESH)
    # rows are independent encryptions
    assert not np.array_equal(np.asarray(a.data[0]), np.asarray(a.data[1]))
    check_bits("batch 8 add", x + y, ctx.decrypt(ctx.add(a, b), keys), FRESH)
    prod = ctx.mul(a, b, keys, rescale=True)
    assert prod.batch_shape == (8,) and prod.level == ctx.params.max_level - 1
    check_bits("batch 8 mul+relin+rescale", x * y, ctx.decrypt(prod, keys), MUL)
    check_bits("batch 8 rotate 3", np.roll(x, -3, axis=-1), ctx.decrypt(ctx.rotate(a, 3, keys), keys), FRESH)
    # an unbatched plaintext vector broadcasts over the batch
    v = uniform(rng, ctx.slots)
    check_bits("batch 8 + one vector", x + v, ctx.decrypt(ctx.add(a, v), keys), FRESH)
    # each row of the batched result matches the unbatched computation on that row
    single = ctx.mul(ctx.encrypt(x[5], keys), ctx.encrypt(y[5], keys), keys, rescale=True)
    assert single.batch_shape == ()
    np.testing.assert_allclose(ctx.decrypt(single, keys), ctx.decrypt(prod, keys)[5], atol=2.0 ** -expected.bound(MUL))


# ------------------------------------------------------------------------------------------------ add, sub, negate
def test_add_sub_negate_ciphertexts(main, data):
    ctx, keys = main
    x, y, a, b = data
    check_bits("ct + ct", x + y, ctx.decrypt(ctx.add(a, b), keys), FRESH)
    check_bits("ct - ct", x - y, ctx.decrypt(ctx.sub(a, b), keys), FRESH)
    check_bits("-ct", -x, ctx.decrypt(ctx.negate(a), keys), FRESH)
    np.testing.assert_array_equal(ctx.decrypt(ctx.sub(a, a), keys), np.zeros_like(x))  # exactly zero (measured)
    s = ctx.add(a, b)
    assert s.level == a.level and s.scale == a.scale and s.key_id == a.key_id


@pytest.mark.parametrize("kind", ["plaintext", "array", "short_array", "scalar", "int_scalar"])
def test_add_sub_plain_operands(main, data, kind):
    ctx, keys = main
    x, y, a, _ = data
    rng = np.random.default_rng(11)
    if kind == "plaintext":
        operand, value = ctx.encode(y), y
    elif kind == "array":
        operand, value = y, y
    elif kind == "short_array":
        v = uniform(rng, 10)
        operand, value = v, np.r_[v, np.zeros(ctx.slots - 10)]
    elif kind == "scalar":
        operand, value = -0.375, np.full(ctx.slots, -0.375)
    else:
        operand, value = 2, np.full(ctx.slots, 2.0)
    check_bits(f"ct + {kind}", x + value, ctx.decrypt(ctx.add(a, operand), keys), FRESH)
    check_bits(f"ct - {kind}", x - value, ctx.decrypt(ctx.sub(a, operand), keys), FRESH)


def test_add_complex_operands(main, data, complex_data):
    ctx, keys = main
    x, _, a, _ = data
    z, _, cz, _ = complex_data
    out = ctx.add(a, 0.5 - 0.25j)
    assert out.is_complex
    got = ctx.decrypt(out, keys)
    assert np.iscomplexobj(got)
    check_bits("real ct + complex scalar", x + (0.5 - 0.25j), got, FRESH)
    check_bits("real ct + complex ct", x + z, ctx.decrypt(ctx.add(a, cz), keys), FRESH)
    check_bits("complex ct - real array", z - x, ctx.decrypt(ctx.sub(cz, x), keys), FRESH)


# ------------------------------------------------------------------------------------------------ multiplication
def _coefficient_difference(ctx, a: Ciphertext, b: Ciphertext) -> np.ndarray:
    """``a - b`` in the coefficient domain, centered per limb: int64 ``(2, L, N)``."""
    qs = np.array(ctx.params.moduli[: a.num_limbs], dtype=object).reshape(-1, 1)
    ca, cb = (np.asarray(evaluator.intt_q(c.data, ctx.plan, num_p=ctx.num_p, num_q=c.num_limbs),
                         dtype=np.int64).astype(object) for c in (a, b))
    d = (ca - cb) % qs
    return np.where(d > qs // 2, d - qs, d).astype(np.int64)


def test_mul_ciphertexts_relin_rescale(main, data):
    ctx, keys = main
    x, y, a, b = data
    p = ctx.params
    raw = ctx.mul(a, b, keys, rescale=False)
    assert raw.level == p.max_level and raw.scale == a.scale * b.scale
    assert raw.data.shape == a.data.shape  # relinearized: two components
    check_bits("ct * ct (relin, no rescale)", x * y, ctx.decrypt(raw, keys), MUL)
    resc = ctx.rescale(raw)
    divisor = p.moduli[p.num_limbs - 1] * p.moduli[p.num_limbs - 2]
    assert resc.level == p.max_level - 1 and resc.num_limbs == p.limbs_at_level(p.max_level - 1)
    assert math.isclose(resc.scale, a.scale * b.scale / divisor, rel_tol=1e-12)
    check_bits("ct * ct (relin + rescale)", x * y, ctx.decrypt(resc, keys), MUL)
    direct = ctx.mul(a, b, keys, rescale=True)  # the rescale folded into the relinearization's ModDown
    assert direct.level == resc.level and direct.scale == resc.scale
    assert direct.num_limbs == resc.num_limbs and direct.is_complex == resc.is_complex
    check_bits("ct * ct (relin and rescale folded)", x * y, ctx.decrypt(direct, keys), MUL)
    # One rounding division by P * D instead of two: the two ciphertexts differ by a small integer polynomial
    # (the same integer in every limb), at most the approximate conversions' error, (k + drop) / 2 + 2.
    diff = _coefficient_difference(ctx, direct, resc)
    assert np.all(diff == diff[..., :1, :])
    bound = (ctx.num_p + ctx.params.level_sizes[p.max_level]) / 2 + 2
    assert 0 < np.abs(diff).max() <= bound
    check_bits("ct^2 (relin + rescale)", x * x, ctx.decrypt(ctx.mul(a, a, keys, rescale=True), keys), MUL)


def test_mul_complex_ciphertexts(main, complex_data):
    ctx, keys = main
    z, w, cz, cw = complex_data
    out = ctx.mul(cz, cw, keys, rescale=True)
    assert out.is_complex
    check_bits("complex ct * ct", z * w, ctx.decrypt(out, keys), MUL)


def test_mul_with_switching_key_and_evaluation_keys(main, data):
    ctx, keys = main
    x, y, a, b = data
    ev = keys.evaluation_keys()
    want = ctx.decrypt(ctx.mul(a, b, keys, rescale=True), keys)
    np.testing.assert_array_equal(want, ctx.decrypt(ctx.mul(a, b, ev, rescale=True), keys))
    np.testing.assert_array_equal(want, ctx.decrypt(ctx.mul(a, b, keys.relin, rescale=True), keys))


@pytest.mark.parametrize("kind", ["plaintext", "array", "real_scalar", "negative_scalar", "int_scalar",
                                  "complex_scalar", "zero"])
def test_mul_plain_operands(main, data, kind):
    ctx, keys = main
    x, y, a, _ = data
    operand, value = {
        "plaintext": (ctx.encode(y), y),
        "array": (y, y),
        "real_scalar": (2.5, 2.5),
        "negative_scalar": (-0.3, -0.3),
        "int_scalar": (3, 3.0),
        "complex_scalar": (0.5 - 1.5j, 0.5 - 1.5j),
        "zero": (0.0, 0.0),
    }[kind]
    out = ctx.mul(a, operand, rescale=True)  # no keys needed for plain products
    assert out.level == a.level - 1
    if kind != "plaintext":
        # plain values are encoded at the scale the rescale removes: the scale comes back exactly
        assert math.isclose(out.scale, a.scale, rel_tol=1e-12)
    assert out.is_complex == (kind == "complex_scalar")
    check_bits(f"ct * {kind}", x * value, ctx.decrypt(out, keys), MUL)


def test_mul_by_array_then_add_fresh_ciphertext(main, data):
    # the exact scale after a plain product + rescale lets the result meet a fresh ciphertext
    ctx, keys = main
    x, y, a, b = data
    prod = ctx.mul(a, y, rescale=True)
    out = ctx.add(prod, b)
    assert out.level == a.level - 1
    check_bits("ct * array + fresh ct", x * y + y, ctx.decrypt(out, keys), MUL)


# ------------------------------------------------------------------------------------------------ rotations
@pytest.mark.parametrize("steps", MAIN_ROTATIONS)
def test_rotate(main, data, steps):
    ctx, keys = main
    x, _, a, _ = data
    out = ctx.rotate(a, steps, keys)
    assert out.level == a.level and out.scale == a.scale and out.data.shape == a.data.shape
    check_bits(f"rotate {steps}", np.roll(x, -steps), ctx.decrypt(out, keys), FRESH)


def test_rotate_trivial_and_equivalent_steps(main, data):
    ctx, keys = main
    x, _, a, _ = data
    assert ctx.rotate(a, 0, None) is a  # no key needed
    assert ctx.rotate(a, ctx.slots, None) is a
    assert ctx.rotate(a, -2 * ctx.slots, None) is a
    # slots + 1 and 1 are the same rotation (and the same Galois element)
    check_bits("rotate slots+1", np.roll(x, -1), ctx.decrypt(ctx.rotate(a, ctx.slots + 1, keys), keys), FRESH)
    check_bits("rotate 1-slots", np.roll(x, -1), ctx.decrypt(ctx.rotate(a, 1 - ctx.slots, keys), keys), FRESH)


def test_rotate_complex(main, complex_data):
    ctx, keys = main
    z, _, cz, _ = complex_data
    check_bits("rotate complex -7", np.roll(z, 7), ctx.decrypt(ctx.rotate(cz, -7, keys), keys), FRESH)


def test_rotate_many_matches_single_rotations(main, data):
    ctx, keys = main
    x, _, a, _ = data
    steps = [1, -1, 0, 5, -7]
    many = ctx.rotate_many(a, steps, keys)
    assert len(many) == len(steps)
    assert many[2] is a
    for s, ct in zip(steps, many):
        got = ctx.decrypt(ct, keys)
        single = ctx.decrypt(ctx.rotate(a, s, keys), keys)
        np.testing.assert_allclose(got, single, rtol=0, atol=2.0 ** -expected.bound(FRESH))
        check_bits(f"rotate_many step {s}", np.roll(x, -s), got, FRESH)


def test_rotation_composes(main, data):
    ctx, keys = main
    x, _, a, _ = data
    out = ctx.rotate(ctx.rotate(ctx.rotate(a, 2, keys), 3, keys), -7, keys)
    check_bits("rotate 2 then 3 then -7", np.roll(x, 2), ctx.decrypt(out, keys), "n12/rotate_chain")


def test_conjugate(main, data, complex_data):
    ctx, keys = main
    x, _, a, _ = data
    z, _, cz, _ = complex_data
    out = ctx.conjugate(cz, keys)
    assert out.is_complex
    check_bits("conjugate complex", np.conj(z), ctx.decrypt(out, keys), FRESH)
    check_bits("conjugate real", x, ctx.decrypt(ctx.conjugate(a, keys), keys), FRESH)
    # real part through conjugation: (z + conj z) / 2
    re = ctx.mul(ctx.add(cz, out), 0.5, rescale=True)
    check_bits("(z + conj z) / 2", z.real, ctx.decrypt(re, keys).real, MUL)


@pytest.mark.parametrize("slots", [None, 64])
def test_sum_slots_power_of_two_keys(slots):
    ctx, keys = context_and_keys(MAIN_LOG_N, MAIN_LEVELS, slots=slots, rotations="power_of_two")
    # a Galois key for every power of two below the slot count (what sum_slots uses)
    needed = {galois_element(ctx.params.n, 1 << i) for i in range(int(math.log2(ctx.slots)))}
    assert needed <= set(keys.galois)
    x = uniform(np.random.default_rng(17), ctx.slots)
    out = ctx.sum_slots(ctx.encrypt(x, keys), keys)
    assert out.level == ctx.params.max_level
    check_bits(f"sum_slots ({ctx.slots} slots)", np.full(ctx.slots, x.sum()), ctx.decrypt(out, keys), "n12/sum_slots")


# ------------------------------------------------------------------------------------------------ levels
def test_rescale_and_drop_level_metadata(main, data):
    ctx, keys = main
    x, _, a, _ = data
    p = ctx.params
    assert ctx.drop_level(a, a.level) is a
    for level in range(p.max_level - 1, -1, -1):
        d = ctx.drop_level(a, level)
        assert d.level == level and d.scale == a.scale and d.num_limbs == p.limbs_at_level(level)
        np.testing.assert_array_equal(np.asarray(d.data), np.asarray(a.data[:, : d.num_limbs]))
        check_bits(f"drop_level to {level}", x, ctx.decrypt(d, keys), FRESH)


@pytest.mark.parametrize("level", range(MAIN_LEVELS))  # every level below the top
def test_operations_below_the_top(main, data, complex_data, level):
    ctx, keys = main
    x, y, a, b = data
    z, _, cz, _ = complex_data
    a, b, cz = ctx.drop_level(a, level), ctx.drop_level(b, level), ctx.drop_level(cz, level)
    tag = f"level {level}:"
    check_bits(f"{tag} ct + ct", x + y, ctx.decrypt(ctx.add(a, b), keys), FRESH)
    check_bits(f"{tag} ct - array", x - y, ctx.decrypt(ctx.sub(a, y), keys), FRESH)
    check_bits(f"{tag} -ct + 0.25", 0.25 - x, ctx.decrypt(ctx.add(ctx.negate(a), 0.25), keys), FRESH)
    check_bits(f"{tag} rotate 3", np.roll(x, -3), ctx.decrypt(ctx.rotate(a, 3, keys), keys), FRESH)
    check_bits(f"{tag} rotate -2", np.roll(x, 2), ctx.decrypt(ctx.rotate(a, -2, keys), keys), FRESH)
    check_bits(f"{tag} conjugate", np.conj(z), ctx.decrypt(ctx.conjugate(cz, keys), keys), FRESH)
    if level > 0:
        out = ctx.mul(a, b, keys, rescale=True)
        assert out.level == level - 1
        check_bits(f"{tag} ct * ct + rescale", x * y, ctx.decrypt(out, keys), MUL)
        out = ctx.mul(a, y, rescale=True)
        check_bits(f"{tag} ct * array + rescale", x * y, ctx.decrypt(out, keys), MUL)
        out = ctx.mul(a, -1.25, rescale=True)
        check_bits(f"{tag} ct * scalar + rescale", -1.25 * x, ctx.decrypt(out, keys), MUL)


def test_scalar_product_at_level_zero(main, data):
    """A level-0 ciphertext times a small integer scalar works (it is not silently garbage).

    At level 0 there is no prime left to rescale by; encoding the scalar at the full scale 2^56 would give a
    product at scale 2^112, beyond the 62-bit base modulus. ``mul`` multiplies by the integer instead.
    """
    ctx, keys = main
    x, _, a, _ = data
    a0 = ctx.drop_level(a, 0)
    out = ctx.mul(a0, 2.0, rescale=False)
    assert out.level == 0
    check_bits("level 0: ct * 2.0", 2 * x, ctx.decrypt(out, keys), "n12/level0_scalar")


# ------------------------------------------------------------------------------------------------ chains
CHAIN_STEPS = (1, -2, 3)


@pytest.mark.parametrize("log_n", [12, 13, 14])
def test_mul_rescale_rotate_chain_to_level_zero(log_n):
    if log_n == MAIN_LOG_N:
        ctx, keys = main_context()
    else:
        ctx, keys = context_and_keys(log_n, 3, rotations=CHAIN_STEPS)
    assert set(CHAIN_STEPS) <= set(MAIN_ROTATIONS)
    rng = np.random.default_rng(log_n)
    x = uniform(rng, ctx.slots)
    ct, want = ctx.encrypt(x, keys), x
    for steps in CHAIN_STEPS:
        y = uniform(rng, ctx.slots)
        ct = ctx.mul(ct, ctx.encrypt(y, keys), keys, rescale=True)
        ct = ctx.rotate(ct, steps, keys)
        want = np.roll(want * y, -steps)
        check_bits(f"chain N=2^{log_n} at level {ct.level}", want, ctx.decrypt(ct, keys), "chain/levels")
    assert ct.level == 0 and ct.num_limbs == ctx.params.limbs_at_level(0)
    stats = check_bits(f"chain N=2^{log_n} final (level 0)", want, ctx.decrypt(ct, keys), f"chain/n{log_n}")
    assert stats.min_bits >= 20  # the requirement (the table's bound above is the regression check)


# ------------------------------------------------------------------------------------------------ defaults
def test_default_context(monkeypatch):
    """The default configuration: the planner's NTT and reduction (the static defaults with planning off, as
    in this suite: the native NTT where its library is built, else the radix-2 butterfly; Shoup), OS randomness."""
    calls = []
    real = os.urandom

    def counting(count):
        calls.append(count)
        return real(count)

    monkeypatch.setattr(os, "urandom", counting)
    params = small_params(10, 1)
    ctx = hemx.Context(params)
    assert ctx.sampler.secure and ctx.slots == params.max_slots
    assert ctx.reduction == ctx.planned.variant.reduction and ctx.plan.method == ctx.planned.variant.method
    expected = ("native" if hemx.kernels.native.available() else "butterfly", "shoup")
    assert (ctx.plan.method, ctx.reduction) == expected  # HEMX_PLAN=off (tests/conftest.py)
    keys = ctx.keygen(relin=False)
    assert calls, "keygen must draw from os.urandom"
    before = len(calls)
    x = uniform(np.random.default_rng(21), ctx.slots)
    ct = ctx.encrypt(x, keys)
    assert len(calls) > before, "encrypt must draw from os.urandom"
    check_bits("default context encrypt/decrypt (N=2^10)", x, ctx.decrypt(ct, keys), "n10/default")
    check_bits("default context add", 2 * x + 1, ctx.decrypt(ctx.add(ctx.add(ct, ct), 1.0), keys), "n10/default")


def test_seeded_encryption_does_not_read_os_urandom(main, monkeypatch):
    ctx, keys = main

    def forbidden(count):
        raise AssertionError("seeded context read os.urandom")

    monkeypatch.setattr(os, "urandom", forbidden)
    assert not ctx.sampler.secure
    ctx.encrypt(np.ones(4), keys)


def test_sparse_rotation_by_equivalent_step():
    """With 64 slots, rotating by 65 is rotating by 1 (numpy.roll semantics, as for full packing).

    Full packing reduces the step modulo the slot count (5 has order N/2 = slots), so the key for step 1 serves
    step slots + 1 (see test_rotate_trivial_and_equivalent_steps). With sparse packing the Galois element is
    5^(steps mod N/2), so an equivalent step needs a key of its own.
    """
    ctx, keys = context_and_keys(MAIN_LOG_N, MAIN_LEVELS, slots=64, rotations=(1, -1))
    x = uniform(np.random.default_rng(23), 64)
    ct = ctx.encrypt(x, keys)
    check_bits("sparse rotate 1", np.roll(x, -1), ctx.decrypt(ctx.rotate(ct, 1, keys), keys), FRESH)
    check_bits("sparse rotate -1", np.roll(x, 1), ctx.decrypt(ctx.rotate(ct, -1, keys), keys), FRESH)
    check_bits("sparse rotate 65", np.roll(x, -65), ctx.decrypt(ctx.rotate(ct, 65, keys), keys), FRESH)
    check_bits("sparse rotate 63", np.roll(x, -63), ctx.decrypt(ctx.rotate(ct, 63, keys), keys), FRESH)
