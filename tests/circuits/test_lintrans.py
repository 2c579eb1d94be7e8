"""Linear transforms (hemx.circuits.lintrans): diagonals and the baby/giant split against plain loops, the
simulated transform against ``M @ x``, encrypted transforms (dense at sparse slots, structured at full slots,
complex, batched) against numpy, key lists, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hemx.circuits import LinearTransform, SlotSimulator, bsgs_split, diagonals, linear_transform
from hemx.errors import LevelError, MissingKeyError, ParameterError

from tests.helpers.ckks_helpers import INSECURE, bits_of, context, context_and_keys, small_params, uniform

pytestmark = pytest.mark.filterwarnings(INSECURE)

LOG_N, LEVELS = 11, 2
SPARSE = 64  # slots of the dense-matrix context
MARGIN = 3.0
# Worst-slot bits measured on the development CPU (seeded; docs/results/circuits-cpu.md), asserted 3 bits lower.
MEASURED = {"dense64": 41.8, "banded_full": 40.7, "complex": 40.3}


def banded(rng, slots: int, offsets=(0, 1, 2, 5, -1, -3, 17, 100)) -> np.ndarray:
    m = np.zeros((slots, slots))
    i = np.arange(slots)
    for k in offsets:
        m[i, (i + k) % slots] = rng.uniform(-1, 1, slots)
    return m


@settings(max_examples=100, deadline=None)
@given(s=st.sampled_from([1, 2, 4, 8, 16, 32]), seed=st.integers(0, 2**32 - 1))
def test_diagonals_against_loops(s, seed):
    m = np.random.default_rng(seed).normal(size=(s, s))
    d = diagonals(m)
    for k in range(s):
        for i in range(s):
            assert d[k, i] == m[i, (i + k) % s]


@settings(max_examples=100, deadline=None)
@given(density=st.floats(0.01, 1.0), log_slots=st.integers(0, 7), seed=st.integers(0, 2**32 - 1),
       ratio=st.sampled_from([1.0, 2.0, 4.0]))
def test_simulated_transform_is_the_matrix_product(density, log_slots, seed, ratio):
    """Any sparsity pattern: M @ x exactly, one level, input scale kept, and the rotations used are the ones listed
    (so keygen(rotations=lt.rotations) is enough)."""
    slots = 1 << log_slots
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(slots, slots)) * (rng.random((slots, slots)) < density)
    if not m.any():
        m[0, 0] = 1.0
    sim = SlotSimulator(small_params(10, 2), slots=slots)
    lt = LinearTransform(sim, m, bsgs_ratio=ratio)
    x = sim.encrypt(rng.normal(size=slots))
    y = lt.apply(x)
    assert np.allclose(y.values, m @ x.values, rtol=0, atol=1e-12 * max(1, slots))
    assert y.level == x.level - 1 and math.isclose(y.scale, x.scale, rel_tol=1e-9)
    assert sim.rotations_used == set(lt.rotations)
    babies, giants = set(lt.baby_steps), set(lt.giant_steps)
    assert {(b + g) % slots for b in babies for g in giants} >= set(lt.indices)


def test_key_count_near_twice_sqrt_of_diagonals():
    for slots in (64, 256, 1024):
        n1 = bsgs_split(range(slots), slots, ratio=2.0)
        babies, giants = n1 - 1, slots // n1 - 1
        assert babies + giants <= 2 * math.sqrt(slots) + 1


@pytest.fixture(scope="module")
def dense_ctx():
    rng = np.random.default_rng(21)
    m = rng.uniform(-1, 1, (SPARSE, SPARSE))
    ctx = context(LOG_N, LEVELS, slots=SPARSE)
    lt = LinearTransform(ctx, m)
    ctx, keys = context_and_keys(LOG_N, LEVELS, slots=SPARSE, rotations=lt.rotations)
    return ctx, keys, lt, m


def test_dense_matrix_at_sparse_slots_hoisted_equals_unhoisted(dense_ctx):
    ctx, keys, lt, m = dense_ctx
    assert len(lt.indices) == SPARSE and len(lt.rotations) <= 2 * math.sqrt(SPARSE) + 1
    x = uniform(np.random.default_rng(22), SPARSE)
    ct = ctx.encrypt(x, keys)
    hoisted = lt.apply(ct, keys, hoisting="single")  # one ModUp shared by the baby rotations: the same ciphertext
    plain = lt.apply(ct, keys, hoisted=False)
    assert np.array_equal(np.asarray(hoisted.data), np.asarray(plain.data))
    # double hoisting agrees up to noise (tests/circuits/test_lintrans_hoisting.py)
    double = lt.apply(ct, keys, hoisting="double")
    assert bits_of(m @ x, ctx.decrypt(double, keys)).min_bits >= MEASURED["dense64"] - MARGIN
    assert hoisted.level == ct.level - 1 and hoisted.scale == pytest.approx(ct.scale, rel=1e-9)
    stats = bits_of(m @ x, ctx.decrypt(hoisted, keys))
    print("dense64", stats)
    assert stats.min_bits >= MEASURED["dense64"] - MARGIN


def test_structured_matrix_at_full_slots_batched_and_complex():
    rng = np.random.default_rng(23)
    ctx = context(LOG_N, LEVELS)
    m = banded(rng, ctx.slots)
    mc = m + 1j * banded(rng, ctx.slots, offsets=(0, 1, 100))
    lt, ltc = LinearTransform(ctx, m), LinearTransform(ctx, mc)
    assert set(lt.indices) == {k % ctx.slots for k in (0, 1, 2, 5, -1, -3, 17, 100)}
    ctx, keys = context_and_keys(LOG_N, LEVELS, rotations=tuple(sorted(set(lt.rotations) | set(ltc.rotations))))
    x = uniform(rng, (2, ctx.slots))
    out = lt.apply(ctx.encrypt(x, keys), keys)
    assert out.batch_shape == (2,)
    stats = bits_of(x @ m.T, ctx.decrypt(out, keys))
    print("banded_full", stats)
    assert stats.min_bits >= MEASURED["banded_full"] - MARGIN
    z = linear_transform(ctx, ctx.encrypt(x[0], keys), mc, keys)
    stats = bits_of(mc @ x[0], ctx.decrypt(z, keys))
    print("complex", stats)
    assert stats.min_bits >= MEASURED["complex"] - MARGIN


def test_bad_input(dense_ctx):
    ctx, keys, lt, m = dense_ctx
    for bad in (np.zeros((SPARSE, SPARSE)), np.ones((SPARSE, SPARSE + 1)), np.ones(SPARSE), [["a"]],
                np.full((SPARSE, SPARSE), np.inf)):
        with pytest.raises(ParameterError):
            LinearTransform(ctx, bad)
    with pytest.raises(ParameterError, match="bsgs_ratio"):
        LinearTransform(ctx, m, bsgs_ratio=0)
    for level in (-1, LEVELS + 1, 1.5):
        with pytest.raises(LevelError):
            LinearTransform(ctx, m, level=level)
    with pytest.raises(LevelError):
        LinearTransform(ctx, m, level=0)
    ct = ctx.encrypt(np.ones(SPARSE), keys)
    with pytest.raises(LevelError):
        lt.apply(ctx.drop_level(ct, 0), keys)
    _, few_keys = context_and_keys(LOG_N, LEVELS, slots=SPARSE, rotations=(1,))
    with pytest.raises(MissingKeyError):
        lt.apply(ct, few_keys)
    with pytest.raises(ParameterError, match="keys"):
        lt.apply(ct)
