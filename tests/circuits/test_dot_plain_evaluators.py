"""``Evaluator.dot_plain`` and ``Evaluator.rotate_stack`` on both backends: the slot simulator computes exactly what
the encrypted evaluator decrypts to (numpy reference), and refuses bad operands with hemx errors."""

from __future__ import annotations

import numpy as np
import pytest

from hemx.circuits import CKKSEvaluator, SlotSimulator
from hemx.errors import ParameterError, ShapeError

from tests.helpers.ckks_helpers import context_and_keys, uniform


def test_both_backends_agree_with_numpy():
    ctx, keys = context_and_keys(10, 4, rotations=(2, 5))
    enc = CKKSEvaluator(ctx, keys)
    sim = SlotSimulator(ctx.params, slots=ctx.slots)
    rng = np.random.default_rng(0)
    x = uniform(rng, (3, ctx.slots))  # a batch of three inputs
    steps = (0, 2, 5)
    diags = uniform(rng, (len(steps), ctx.slots))
    want = sum(np.roll(x, -s, axis=-1) * diags[i] for i, s in enumerate(steps))
    level = ctx.params.max_level
    results = []
    for ev, value in ((enc, ctx.encrypt(ctx.encode(x, level=level), keys)), (sim, sim.encrypt(x, level=level, scale=ctx.level_scale(level)))):
        babies = ev.rotate_stack(value, steps)
        assert ev.level(babies) == level
        out = ev.rescale(ev.dot_plain(babies, ev.encode(diags, level=level, scale=ev.rescale_divisor(level))))
        results.append(out)
    got_enc = ctx.decrypt(results[0], keys)
    got_sim = sim.decrypt(results[1])
    assert np.max(np.abs(got_sim - want)) < 1e-12
    assert np.max(np.abs(got_enc - want)) < 1e-3
    assert results[0].scale == pytest.approx(results[1].scale, rel=1e-12)


def test_simulator_dot_plain_refuses_bad_operands():
    sim = SlotSimulator(None, slots=8, max_level=3)
    x = sim.encrypt(np.ones((2, 8)), level=3)
    with pytest.raises(ParameterError, match="plaintext batch"):
        sim.dot_plain(x, np.ones((2, 8)))
    with pytest.raises(ShapeError, match="same k"):
        sim.dot_plain(x, sim.encode(np.ones((3, 8)), level=3, scale=1.0))
    with pytest.raises(ShapeError, match="same k"):
        sim.dot_plain(sim.encrypt(np.ones(8), level=3), sim.encode(np.ones((1, 8)), level=3, scale=1.0))


def test_simulator_rotate_stack_is_the_stack_of_rotations():
    sim = SlotSimulator(None, slots=16, max_level=2)
    x = sim.encrypt(np.arange(2 * 16, dtype=np.float64).reshape(2, 16), level=2)
    steps = (0, 1, 5, 16, -3, 33)
    got = sim.rotate_stack(x, steps)
    assert got.values.shape == (len(steps), 2, 16) and got.level == 2
    for i, s in enumerate(steps):
        assert np.array_equal(got.values[i], np.roll(x.values, -s, axis=-1))
    assert sim.rotations_used >= {1, 5, 13}
