"""A value read by several linear maps has each baby rotation made once per run (hemx.nn.run.SharedRotations), and
the plan counts it once (hemx.nn.passes.plan.share_rotations).

Pinned: the key switches a run actually makes (counted on the slot simulator) equal the plan's, for an LSTM (its
input read by every gate of every step, its hidden state by the four gates) and for two dense maps of one value;
encrypted, the result is the same bit for bit as without sharing; and the counts fall where they should.
"""

from __future__ import annotations

import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.nn import graph as G
from hemx.nn import run as nn_run
from hemx.nn.compiler import compile

from tests.helpers.ckks_helpers import context_and_keys, small_params


class CountingSimulator:
    """A SlotSimulator that counts the rotations (key switches: non-zero steps) it makes."""

    def __init__(self, sim):
        self.sim = sim
        self.key_switches = 0

    def __getattr__(self, name):
        return getattr(self.sim, name)

    def _count(self, steps):
        self.key_switches += sum(1 for s in steps if int(s) % self.sim.slots)

    def rotate(self, x, steps):
        self._count([steps])
        return self.sim.rotate(x, steps)

    def rotate_many(self, x, steps):
        self._count(steps)
        return self.sim.rotate_many(x, steps)

    def rotate_stack(self, x, steps):
        self._count(steps)
        return self.sim.rotate_stack(x, steps)


def _two_maps(rng, n=16):
    """input (n,) -> two dense maps of it -> their sum: the first banded (diagonals 0, 1, 2), the second full, so
    the second reuses the first's baby rotations and makes the rest itself."""
    band = np.triu(np.tril(np.ones((n, n)), 2))  # W[j, k] for k - j in {0, 1, 2}
    nodes = (G.Node("input", G.Input((n,))),
             G.Node("a", G.Dense(rng.normal(size=(n, n)) * band / 3, rng.normal(size=n) * 0.1), ("input",)),
             G.Node("b", G.Dense(rng.normal(size=(n, n)) / n, None), ("input",)),
             G.Node("sum", G.Add(), ("a", "b")))
    return G.Graph(nodes)


def _lstm(rng, d=4, h=8, steps=2):
    lstm = G.LSTM(rng.normal(size=(d, 4 * h)) * 0.4, rng.normal(size=(h, 4 * h)) * 0.3, rng.normal(size=4 * h) * 0.1,
                  degree=7)
    return G.Graph((G.Node("input", G.Input((steps * d,))), G.Node("lstm", lstm, ("input",))))


def _unshared(steps):
    """What the maps rotate without sharing: each linear step's own baby and giant rotations."""
    return sum(s.op.map.key_switches if s.kind == "linear" else s.key_switches for s in steps)


@pytest.mark.parametrize("build, params", [(_two_maps, (10, 6)), (_lstm, (10, 30))], ids=["two-maps", "lstm"])
def test_run_makes_the_rotations_the_plan_counts(build, params):
    rng = np.random.default_rng(31)
    g = build(rng)
    x = rng.normal(size=(2, g.input_shape[0])) * 0.5
    sim = SlotSimulator(small_params(*params), slots=256)
    net = compile(g, sim, calibration=x, bootstrap=False)
    plan = net.plan
    counting = CountingSimulator(sim)
    out = net.decrypt_output(sim, None, net.run(counting, None, net.encrypt_input(sim, None, x)))
    assert counting.key_switches == plan.key_switches
    assert plan.key_switches < _unshared(plan.steps)  # something is shared
    assert np.max(np.abs(out - G.reference(g, x))) < 5e-2  # (degree-7 fits in the LSTM; exact maps otherwise)
    shared = [s for s in plan.steps if "rotations of its input shared" in s.note]
    assert shared and all(s.kind == "linear" and s.key_switches < s.op.map.key_switches for s in shared)


def test_lstm_shares_the_input_across_steps_and_the_hidden_state_across_gates():
    """Every x-map reads the network input, every h-map of a step the same hidden state: after the first of each,
    the others add only the baby rotations not made yet, plus their own giant steps."""
    rng = np.random.default_rng(32)
    g = _lstm(rng)
    x = rng.normal(size=(2, g.input_shape[0])) * 0.5
    net = compile(g, SlotSimulator(small_params(10, 30), slots=256), calibration=x, bootstrap=False)
    made = {}
    for s in net.plan.steps:
        if s.kind != "linear":
            continue
        babies = {(ji, r) for ji, r in s.op.baby_rotations()}
        new = babies - made.setdefault(s.inputs[0], set())
        giants = s.op.map.key_switches - len(babies)
        assert s.key_switches == len(new) + giants, s.output
        made[s.inputs[0]] |= babies
    readers = {}
    for s in net.plan.steps:
        if s.kind == "linear":
            readers.setdefault(s.inputs[0], []).append(s.output)
    assert len(readers["input"]) == 3 + 4  # t0: i, g, o (no f * c: c_0 = 0); t1: all four gates
    assert all(len(v) == 4 for k, v in readers.items() if k != "input")  # the gates of one step read one h


def test_encrypted_sharing_is_bit_identical(monkeypatch):
    """Two dense maps of one value on N = 2^11: with and without sharing, the same ciphertext bit for bit."""
    rng = np.random.default_rng(33)
    g = _two_maps(rng)
    x = rng.normal(size=(1, 16)) * 0.5
    net = compile(g, small_params(11, 4), calibration=x, bootstrap=False)
    ctx, keys = context_and_keys(11, 4, rotations=net.rotations)
    ct = net.encrypt_input(ctx, keys, x)
    shared = net.run(ctx, keys, ct)
    monkeypatch.setattr(nn_run, "_maps_rotations", lambda step: False)
    alone = net.run(ctx, keys, ct)
    assert np.array_equal(np.asarray(shared.data), np.asarray(alone.data))
    first, second = (s for s in net.plan.steps if s.kind == "linear")
    # the second map reuses some of the first's baby rotations and makes others: both paths of the sharing
    assert first.op.baby_rotations() & second.op.baby_rotations()
    assert second.op.baby_rotations() - first.op.baby_rotations()
    got = net.decrypt_output(ctx, keys, shared)
    assert np.max(np.abs(got - G.reference(g, x))) < 1e-4
