"""hemx.nn.passes: the compiler as a visible list of passes, each runnable and inspectable alone; the steps' ops."""

from __future__ import annotations

import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.errors import ParameterError
from hemx.nn import compiler, graph as G, steps as ops
from hemx.nn.passes import Compilation
from hemx.nn.passes.fold import fold, fold_nodes
from hemx.nn.passes.pack import PACKERS, SUPPORTED
from tests.helpers.ckks_helpers import small_params
from tests.nn._models import residual_graph


def _case():
    rng = np.random.default_rng(0)
    g = residual_graph(rng, act=(0.1, 0.5, 0.2))
    return g, SlotSimulator(small_params(10, 7), slots=256), rng.normal(size=(3, 2, 8, 8))


def test_compile_is_the_pipeline_and_keeps_every_output():
    g, sim, x = _case()
    names = tuple(p.__name__ for p in compiler.PIPELINE)
    assert names == ("fold", "calibrate", "pack", "levels", "bootstraps", "scales", "plan")
    net = compiler.compile(g, sim, calibration=x)
    assert tuple(name for name, _ in net.passes) == names
    outputs = dict(net.passes)
    assert all(isinstance(c, Compilation) for c in outputs.values())
    assert outputs["plan"].plan is net.plan
    assert [n.name for n in outputs["fold"].nodes] == [n.name for n in g.nodes if n.name != "conv1"]  # into bn1
    assert set(outputs["calibrate"].bounds) == {n.name for n in g.nodes}
    # a pass returns a new value: the pack pass's steps have no levels, the bootstraps pass's all of them
    assert all(s.level_in is None for s in outputs["pack"].steps)
    assert all(s.level_in is not None and s.level_out is not None for s in outputs["bootstraps"].steps)
    assert all(s.scale_target is None for s in outputs["bootstraps"].steps)


def test_passes_run_alone_give_the_same_plan():
    g, sim, x = _case()
    net = compiler.compile(g, sim, calibration=x)
    c = compiler.start(g, sim, calibration=x)
    for step in compiler.PIPELINE:
        c = step(c)
    rows = [(s.output, s.kind, s.inputs, s.level_in, s.level_out, s.depth, s.ct_mults) for s in c.plan.steps]
    assert rows == [(s.output, s.kind, s.inputs, s.level_in, s.level_out, s.depth, s.ct_mults)
                    for s in net.plan.steps]
    assert c.plan.summary() == net.plan.summary()


def test_steps_ask_their_op():
    g, sim, x = _case()
    net = compiler.compile(g, sim, calibration=x)
    for step in net.plan.steps:
        assert isinstance(step.op, ops.Op) and step.kind == step.op.kind
        if not isinstance(step.op, ops.Bootstrap):
            assert step.level_out == step.level_in - step.depth
    linear = [s for s in net.plan.steps if isinstance(s.op, ops.Linear)]
    assert [s.kind for s in linear] == ["linear", "linear", "gap", "linear"]
    assert all(s.op.depth == 1 and s.rotations == s.op.rotations for s in linear)
    assert net.program_steps() == tuple(linear)


def test_the_pack_table_covers_every_supported_layer():
    covered = {t.__name__ for t in PACKERS}
    assert {name.split("(")[0] for name in SUPPORTED} - {"Input"} == covered


def test_fold_is_the_only_folding():
    """The fold pass folds into the layer and keeps the batch norm's name; from_jax's bias folding is the same
    function keeping the layer's name; a producer with two readers is left alone."""
    rng = np.random.default_rng(2)
    conv = G.Conv2D(rng.normal(size=(3, 2, 3, 3)), rng.normal(size=3), 1, ((1, 1), (1, 1)))
    bn = G.BatchNorm(rng.uniform(0.5, 2, 3), rng.normal(size=3))
    nodes = (G.Node("input", G.Input((2, 4, 4))), G.Node("conv", conv, ("input",)), G.Node("bn", bn, ("conv",)))
    g = G.Graph(nodes)
    folded = fold(compiler.start(g, SlotSimulator(None, slots=64, max_level=4))).nodes
    assert [n.name for n in folded] == ["input", "bn"]
    assert np.array_equal(folded[1].layer.weight, conv.weight * bn.scale[:, None, None, None])
    assert np.array_equal(folded[1].layer.bias, conv.bias * bn.scale + bn.shift)
    kept, out = fold_nodes(nodes, "bn", keep="producer", onto_bias=False)  # from_jax: only onto a bias-less layer
    assert len(kept) == len(nodes) and all(a is b for a, b in zip(kept, nodes)) and out == "bn"
    bare = (nodes[0], G.Node("conv", G.Conv2D(conv.weight, None, 1, ((1, 1), (1, 1))), ("input",)), nodes[2])
    kept, out = fold_nodes(bare, "bn", keep="producer", scales=False)  # a scale: only with fold_batchnorm
    assert len(kept) == len(bare) and all(a is b for a, b in zip(kept, bare)) and out == "bn"
    shift = G.Node("bn", G.Affine(1.0, 0.25), ("conv",))
    kept, out = fold_nodes((*bare[:2], shift), "bn", keep="producer", affine=True, scales=False)
    assert [n.name for n in kept] == ["input", "conv"] and out == "conv"
    assert np.array_equal(kept[1].layer.bias, np.full(3, 0.25))
    two = (*nodes, G.Node("sum", G.Add(), ("bn", "conv")))
    assert [n.name for n in fold_nodes(two, "sum")[0]] == ["input", "conv", "bn", "sum"]


def test_start_checks_its_arguments():
    g, sim, _ = _case()
    with pytest.raises(ParameterError, match="margin"):
        compiler.start(g, sim, margin=0.5)
