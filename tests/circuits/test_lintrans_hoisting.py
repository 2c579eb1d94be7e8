"""Double hoisting of BSGS linear transforms (issue 27; hemx.circuits.lintrans,
hemx.ckks.evaluator.bsgs_double_hoisted): the double-hoisted transform against the single-hoisted one and numpy
on a small ring (dense, banded, batched, complex, degenerate splits, a lower level, keys read whole or sliced,
under jit), fewer ModDowns in the compiled program, and the slot simulator's equivalent path (exact, same
levels, scales and rotations)."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hemx.circuits import LinearTransform, SlotSimulator
from hemx.errors import ParameterError

from tests.helpers.ckks_helpers import INSECURE, bits_of, context, context_and_keys, small_params, uniform

pytestmark = pytest.mark.filterwarnings(INSECURE)

LOG_N, LEVELS = 11, 2
SPARSE = 64
# the two orders differ only by CKKS noise: their worst slots must agree to this many bits (measured: < 0.5)
AGREE_BITS = 1.5


def banded(rng, slots: int, offsets) -> np.ndarray:
    m = np.zeros((slots, slots))
    i = np.arange(slots)
    for k in offsets:
        m[i, (i + k) % slots] = rng.uniform(-1, 1, slots)
    return m


def _keys_for(*lts, slots=None):
    rotations = tuple(sorted({r for lt in lts for r in lt.rotations}))
    return context_and_keys(LOG_N, LEVELS, slots=slots, rotations=rotations)


def _same_metadata(a, b):
    assert (a.level, a.slots, a.is_complex, a.batch_shape, a.bound) == (b.level, b.slots, b.is_complex,
                                                                        b.batch_shape, b.bound)
    assert math.isclose(a.scale, b.scale, rel_tol=1e-12)


def _compare(ctx, keys, lt, ct, want, label):
    double = lt.apply(ct, keys, hoisting="double")
    single = lt.apply(ct, keys, hoisting="single")
    _same_metadata(double, single)
    bd, bs = bits_of(want, ctx.decrypt(double, keys)), bits_of(want, ctx.decrypt(single, keys))
    print(label, "double", bd, "single", bs)
    assert bd.min_bits >= bs.min_bits - AGREE_BITS and bd.min_bits > 35
    return double, single


def test_dense_matrix_sparse_slots():
    rng = np.random.default_rng(31)
    m = rng.uniform(-1, 1, (SPARSE, SPARSE))
    lt = LinearTransform(context(LOG_N, LEVELS, slots=SPARSE), m)
    ctx, keys = _keys_for(lt, slots=SPARSE)
    x = uniform(rng, SPARSE)
    _compare(ctx, keys, lt, ctx.encrypt(x, keys), m @ x, "dense64")


@pytest.mark.parametrize("offsets,ratio", [
    ((0, 1, 2, 5, -1, -3, 17, 100), 2.0),  # babies and giants, the step 0 among both
    ((1, 2, 3), 2.0),  # no diagonal 0
    ((0,), 2.0),  # diagonal only: no rotation at all
    ((0, 64, 128, 512), 1.0),  # giant steps only (n1 = 1 would put every index in a giant)
    ((5, 9, 300), 64.0),  # baby steps only (a large giant cost)
])
def test_banded_full_slots_batched(offsets, ratio):
    rng = np.random.default_rng(32)
    ctx0 = context(LOG_N, LEVELS)
    m = banded(rng, ctx0.slots, offsets)
    lt = LinearTransform(ctx0, m, bsgs_ratio=ratio)
    ctx, keys = _keys_for(lt)
    x = uniform(rng, (2, ctx.slots))
    double, _ = _compare(ctx, keys, lt, ctx.encrypt(x, keys), x @ m.T, f"banded {offsets}")
    assert double.batch_shape == (2,)


def test_complex_matrix_and_a_lower_level():
    """Complex diagonals; a transform prepared at the top level applied at a lower one (its diagonals' Q rows
    dropped, the P rows unchanged), and a ciphertext above the transform's level (dropped first)."""
    rng = np.random.default_rng(33)
    ctx0 = context(LOG_N, LEVELS + 1)
    slots = ctx0.slots
    mc = banded(rng, slots, (0, 1, 100)) + 1j * banded(rng, slots, (0, 3, 700))
    lt = LinearTransform(ctx0, mc)
    ctx, keys = context_and_keys(LOG_N, LEVELS + 1, rotations=lt.rotations)
    x = uniform(rng, slots)
    ct = ctx.encrypt(x, keys)
    double, _ = _compare(ctx, keys, lt, ct, mc @ x, "complex")
    assert double.is_complex
    low = ctx.drop_level(ct, ct.level - 1)
    d, s = lt.apply(low, keys, hoisting="double"), lt.apply(low, keys, hoisting="single")
    _same_metadata(d, s)
    got = ctx.decrypt(d, keys)
    assert np.max(np.abs(got - ctx.decrypt(s, keys))) < 1e-8
    mid = LinearTransform(ctx, mc, level=ct.level - 1)
    d = mid.apply(ct, keys, hoisting="double")  # dropped to the transform's level first
    assert d.level == ct.level - 2 and bits_of(mc @ x, ctx.decrypt(d, keys)).min_bits > 35


def test_keys_read_whole_or_sliced_give_the_same_ciphertext(monkeypatch):
    """Below the top level the inner products either read a copy of each key sliced to the level's rows or the
    whole key against digits padded with zero rows (lintrans.FULL_KEY_ROWS / KEY_ROWS_SLACK): bit for bit equal."""
    from hemx.circuits import lintrans

    rng = np.random.default_rng(35)
    ctx0 = context(LOG_N, LEVELS + 1)
    m = banded(rng, ctx0.slots, (0, 1, 2, 5, -1, 17, 100))
    lt = LinearTransform(ctx0, m, level=LEVELS)
    ctx, keys = context_and_keys(LOG_N, LEVELS + 1, rotations=lt.rotations)
    ct = ctx.drop_level(ctx.encrypt(uniform(rng, (2, ctx.slots)), keys), LEVELS)
    out = {}
    for full in (True, False):
        monkeypatch.setattr(lintrans, "FULL_KEY_ROWS", full)
        out[full] = lt.apply(ct, keys, hoisting="double")
    assert np.array_equal(np.asarray(out[True].data), np.asarray(out[False].data))


def test_double_hoisting_under_jit_equals_eager_and_saves_moddowns():
    """Traced into one program it gives the eager ciphertext bit for bit; its compiled program divides fewer
    polynomials (ModDowns and rescales) than the single-hoisted one, with as many ModUps."""
    from hemx.bench.bootstrap_profile import compile_stage, custom_call_counts, custom_call_polys
    from hemx.kernels import native

    rng = np.random.default_rng(34)
    ntt = "butterfly" if native.has_fused_keyswitch() else "mat3"  # butterfly tables: the fused native kernels
    m = banded(rng, context(LOG_N, LEVELS).slots, (0, 1, 2, 3, 7, 40, 41, 300, 301, 302))
    lt = LinearTransform(context(LOG_N, LEVELS, ntt=ntt), m)
    ctx, keys = context_and_keys(LOG_N, LEVELS, rotations=lt.rotations, ntt=ntt)
    ct = ctx.encrypt(uniform(rng, ctx.slots), keys)
    eager = lt.apply(ct, keys, hoisting="double")
    jitted = jax.jit(lambda c: lt.apply(c, keys, hoisting="double"))(ct)
    assert np.array_equal(np.asarray(eager.data), np.asarray(jitted.data))
    _same_metadata(eager, jitted)
    if not native.has_fused_keyswitch():
        pytest.skip("the native key-switching kernels are not available: no custom calls to count")
    babies = sum(1 for b in lt.baby_steps if b)
    giants = sum(1 for g in lt.giant_steps if g)
    polys, modups = {}, {}
    for mode in ("single", "double"):
        prog = compile_stage(lambda c, mode=mode: lt.apply(c, keys, hoisting=mode), ct, ctx)
        polys[mode] = custom_call_polys(prog.hlo, "hemx_divide")
        modups[mode] = custom_call_counts(prog.hlo).get("hemx_modup", 0)
        assert prog.counts["key_switches"] == babies + giants
    assert modups["single"] == modups["double"] == 1 + giants
    # single: 2 per rotation, 2 per giant's rescale; double: c1 of each non-zero giant, one final division of 2
    assert polys["single"] == 2 * (babies + giants) + 2 * len(lt.giant_steps)
    assert polys["double"] == giants + 2


def test_auto_is_double_with_the_fused_native_passes_only():
    """The default ("auto"): double hoisting where the context's key switching runs the fused native passes
    (measured faster there), the single-hoisted ciphertext bit for bit elsewhere (the mat3 NTT: the JAX kernels)."""
    from hemx.ckks import keyswitch

    rng = np.random.default_rng(36)
    m = banded(rng, context(LOG_N, LEVELS).slots, (0, 1, 2, 40, 41))
    for ntt in ("mat3", "butterfly"):
        lt = LinearTransform(context(LOG_N, LEVELS, ntt=ntt), m)
        ctx, keys = context_and_keys(LOG_N, LEVELS, rotations=lt.rotations, ntt=ntt)
        lt = LinearTransform(ctx, m)
        ct = ctx.encrypt(uniform(rng, ctx.slots), keys)
        want = "double" if keyswitch.fused_passes(ctx.plan) else "single"
        assert np.array_equal(np.asarray(lt.apply(ct, keys).data),
                              np.asarray(lt.apply(ct, keys, hoisting=want).data)), ntt


def test_bad_hoisting_keyword():
    lt = LinearTransform(SlotSimulator(small_params(10, 2), slots=8), np.eye(8))
    x = SlotSimulator(small_params(10, 2), slots=8).encrypt(np.ones(8))
    for bad in ("triple", 2):
        with pytest.raises(ParameterError, match="hoisting"):
            lt.apply(x, hoisting=bad)
    with pytest.raises(ParameterError, match="contradicts"):
        lt.apply(x, hoisted=False, hoisting="double")


# ------------------------------------------------------------------------------------------------- simulator
@settings(max_examples=60, deadline=None)
@given(density=st.floats(0.01, 1.0), log_slots=st.integers(0, 7), seed=st.integers(0, 2**32 - 1),
       ratio=st.sampled_from([1.0, 2.0, 4.0]), exact=st.booleans())
def test_simulator_double_hoisting_equals_single(density, log_slots, seed, ratio, exact):
    """On the slot simulator the double-hoisted order (giants rotated before one rescale) is M @ x like the single
    one, at the same level and scale, with the same rotations; exact mode (no parameters) too."""
    slots = 1 << log_slots
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(slots, slots)) * (rng.random((slots, slots)) < density)
    if not m.any():
        m[0, 0] = 1.0
    x_values = rng.normal(size=slots)
    out = {}
    for mode in ("double", "single", "none"):
        sim = SlotSimulator(None, slots=slots, max_level=2) if exact else SlotSimulator(small_params(10, 2),
                                                                                       slots=slots)
        lt = LinearTransform(sim, m, bsgs_ratio=ratio)
        x = sim.encrypt(x_values)
        y = lt.apply(x, hoisting=mode)
        out[mode] = (y, set(sim.rotations_used))
        assert y.level == x.level - 1 and math.isclose(y.scale, x.scale, rel_tol=1e-9)
        assert sim.rotations_used == set(lt.rotations)
    (yd, rd), (ys, rs) = out["double"], out["single"]
    assert rd == rs and math.isclose(yd.scale, ys.scale, rel_tol=1e-12)
    assert np.allclose(yd.values, m @ x_values, rtol=0, atol=1e-12 * max(1, slots) * max(1, np.abs(m).max()))
    assert np.allclose(yd.values, ys.values, rtol=0, atol=1e-12 * max(1, slots) * max(1, np.abs(m).max()))
