"""Sound bounds (issue 37): interval arithmetic from the input domain (hemx.nn.passes.bounds) bounds every value
for every input in the domain; compile(bounds="sound") uses them, and the plan reports both kinds of bounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hemx.errors import ParameterError
from hemx.nn import compile, graph as G
from hemx.nn.passes.bounds import intervals, sound_bounds
from hemx.nn.passes.calibrate import calibrated_bounds
from tests.helpers.ckks_helpers import small_params
from hemx.circuits import SlotSimulator


def _graph(seed: int) -> G.Graph:
    """Every layer type with an interval rule: conv (padding, stride), batch norm, ReLU, max pool, residual add,
    a product, a polynomial, average pools, flatten, dense, affine, sigmoid, tanh."""
    rng = np.random.default_rng(seed)
    nodes = [G.Node("input", G.Input((2, 8, 8))),
             G.Node("c1", G.Conv2D(rng.normal(size=(3, 2, 3, 3)), rng.normal(size=3), 1, ((1, 1), (1, 1))), ("input",)),
             G.Node("bn", G.BatchNorm(rng.normal(size=3), rng.normal(size=3)), ("c1",)),
             G.Node("r1", G.Activation("relu"), ("bn",)),
             G.Node("c2", G.Conv2D(rng.normal(size=(3, 3, 3, 3)) * 0.3, None, 1, ((1, 1), (1, 1))), ("r1",)),
             G.Node("add", G.Add(), ("c2", "r1")),
             G.Node("sq", G.Multiply(), ("add", "c1")),
             G.Node("poly", G.Activation("poly", (0.1, -0.5, 0.3, -0.05)), ("sq",)),
             G.Node("mp", G.MaxPool2D(2, 2), ("poly",)),
             G.Node("ap", G.AvgPool2D(2, 2), ("mp",)),
             G.Node("flat", G.Flatten(), ("ap",)),
             G.Node("d1", G.Dense(rng.normal(size=(5, 12)), rng.normal(size=5)), ("flat",)),
             G.Node("aff", G.Affine(-0.7, 0.2), ("d1",)),
             G.Node("sig", G.Activation("sigmoid"), ("aff",)),
             G.Node("d2", G.Dense(rng.normal(size=(4, 5)), None), ("sig",)),
             G.Node("th", G.Activation("tanh"), ("d2",)),
             G.Node("gap_in", G.Dense(rng.normal(size=(3, 4)), None), ("th",))]
    return G.Graph(tuple(nodes))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 3), lo=st.floats(-2.0, 0.0), width=st.floats(0.0, 3.0), draw=st.integers(0, 2**31 - 1))
def test_no_input_in_the_domain_exceeds_the_intervals(seed, lo, width, draw):
    """Random inputs in [lo, hi] (uniform, and corners of the box: the extremes of affine maps) stay inside every
    node's interval."""
    g = _graph(seed)
    hi = lo + width
    box = intervals(g, (lo, hi))
    rng = np.random.default_rng(draw)
    x = np.concatenate([rng.uniform(lo, hi, (6, 2, 8, 8)), rng.choice([lo, hi], (6, 2, 8, 8))])
    kept = G.reference(g, x, keep=True)
    tol = 1e-9
    for name, v in kept.items():
        low, high = box[name]
        scale = 1.0 + np.max(np.abs(high)) + np.max(np.abs(low))
        assert np.all(v >= low - tol * scale) and np.all(v <= high + tol * scale), name


def test_intervals_are_exact_for_an_affine_map():
    """A conv's interval is reached: its corner inputs give its end points."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=(1, 1, 2, 2))
    g = G.sequential((1, 2, 2), [G.Conv2D(w, np.array([0.5]))])
    lo, hi = intervals(g, (0.0, 1.0))[g.output]
    assert np.isclose(hi.item(), np.clip(w, 0, None).sum() + 0.5)
    assert np.isclose(lo.item(), np.clip(w, None, 0).sum() + 0.5)


def test_sound_bounds_cover_the_calibrated_ones():
    g = _graph(1)
    x = np.random.default_rng(1).uniform(0.0, 1.0, (8, 2, 8, 8))
    sound, measured = sound_bounds(g, (0.0, 1.0)), calibrated_bounds(g, x, 1.0)
    assert all(sound[k] >= measured[k] * (1 - 1e-12) for k in measured)


def test_compile_sound_needs_no_calibration_and_reports_both():
    rng = np.random.default_rng(2)
    g = G.sequential((2, 4, 4), [G.Conv2D(rng.normal(size=(2, 2, 3, 3)) * 0.3, None, 1, ((1, 1), (1, 1))),
                                 G.Activation("relu"), G.Flatten(), G.Dense(rng.normal(size=(3, 32)) * 0.2)])
    sim = SlotSimulator(small_params(10, 20), slots=128)
    net = compile(g, sim, bounds="sound", input_domain=(0.0, 1.0))
    plan = net.plan
    assert plan.bounds_mode == "sound" and plan.bound_choices == {"sound": plan.bootstraps}
    (relu,) = plan.activations
    assert relu["kind"] == "relu" and relu["sound"] == relu["bound"] and relu["calibrated"] is None
    assert plan.worst_activation_error == relu["error"] > 0
    # the sound bound holds for every input in the domain: the ReLU model is within its error everywhere
    x = np.random.default_rng(3).uniform(0.0, 1.0, (4, 2, 4, 4))
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    assert np.max(np.abs(out - G.reference(g, x))) < 1e-2
    both = compile(g, sim, calibration=x, input_domain=(0.0, 1.0))
    assert both.plan.bounds_mode == "calibrated" and set(both.plan.bound_choices) == {"calibrated", "sound"}
    (row,) = both.plan.activations
    assert row["calibrated"] <= row["sound"] * 1.2 and row["bound"] == row["calibrated"]
    assert "sound" in both.plan.summary() and "worst-case activation error" in both.plan.summary()


def test_bad_domains_and_modes():
    g = _graph(0)
    sim = SlotSimulator(small_params(10, 20), slots=256)
    with pytest.raises(ParameterError, match="input_domain"):
        compile(g, sim, bounds="sound")
    with pytest.raises(ParameterError, match="lo <= hi"):
        intervals(g, (1.0, 0.0))
    with pytest.raises(ParameterError, match="'calibrated' or 'sound'"):
        compile(g, sim, bounds="measured", calibration=np.zeros((1, 2, 8, 8)))
    lstm = G.sequential((6,), [G.LSTM(np.ones((3, 8)), np.ones((2, 8)), np.zeros(8))])
    lo, hi = intervals(lstm, 1.0)[lstm.output]
    assert np.all(lo == -1.0) and np.all(hi == 1.0)


def test_a_layer_without_an_interval_rule_is_named():
    g = G.sequential((4,), [G.Dense(np.eye(4)), G.Activation("relu")])

    class Odd:  # a record without an interval rule, swapped in after the graph was checked
        pass

    object.__setattr__(g.nodes[-1], "layer", Odd())
    with pytest.raises(ParameterError, match=f"{g.nodes[-1].name!r}: no interval rule for Odd"):
        intervals(g, 1.0)
