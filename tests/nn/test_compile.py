"""hemx.nn.compiler: plans (levels, bootstraps, rotation keys), the compiled networks on the slot simulator against
hemx.nn.graph.reference (and against the float64 model of the ReLU approximation), encrypted runs on a small
insecure ring (and with a bootstrap on boot_12), the ResNet-20 plan at boot_16, and the errors of bad input."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import hemx
from hemx.circuits import SlotSimulator
from hemx.ckks import SwitchingKey
from hemx.errors import LevelError, OverflowBoundError, ParameterError, ShapeError
from hemx.nn import activations as A
from hemx.nn import graph as G
from hemx.nn.compiler import CompiledNetwork, Plan, compile

from tests.helpers.ckks_helpers import INSECURE, context_and_keys, small_params
from tests.nn._models import boot12_residual_case, residual_graph, resnet20_graph

pytestmark = pytest.mark.filterwarnings(INSECURE)
RTOL = 1e-9  # simulator with parameters: exact scales, constants rounded to 2^-56 relative
ENCRYPTED_RTOL = 1e-6  # measured ~1e-9 (N = 2^11, scale 2^56) and ~3e-6 after a boot_12 bootstrap


def _rel(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def _model_reference(graph: G.Graph, net: CompiledNetwork, x) -> np.ndarray:
    """The reference with every ReLU replaced by its float64 model x (1 + p(x / (F B))) / 2, B the compiled bound, F
    the network's relu_domain, p its composite."""
    values = {}
    for node in graph.nodes:
        if isinstance(node.layer, G.Input):
            values[node.name] = x
        elif isinstance(node.layer, G.Activation) and node.layer.kind == "relu":
            values[node.name] = A.relu_approx(values[node.inputs[0]], net.bounds[node.inputs[0]], net.plan.composite,
                                              domain=net.plan.relu_domain)
        elif isinstance(node.layer, G.MaxPool2D):
            values[node.name] = _maxpool_model(values[node.inputs[0]], node.layer, 2.0 * net.bounds[node.inputs[0]],
                                               net.plan)
        else:
            values[node.name] = G.apply_layer(node.layer, [values[i] for i in node.inputs])
    return values[graph.output]


def _maxpool_model(x, layer: G.MaxPool2D, bound: float, plan: Plan) -> np.ndarray:
    """The packed max pool in float64 (rows then columns, max(a, b) = b + relu~(a - b) with doubling shifts): the
    model ``hemx bench heldout`` runs held-out images through, so these tests also hold it to the simulator."""
    from hemx.bench.heldout import maxpool_model as packed_maxpool

    return packed_maxpool(x, layer, bound, plan.composite, plan.relu_domain)


def _check_plan(plan: Plan):
    """Levels chain: every step's input level is its inputs' output level, outputs never below 0."""
    out_level = {"input": plan.input_level}
    for s in plan.steps:
        lin = min(out_level[v] for v in s.inputs)
        if s.kind == "poly" and plan.poly_level is not None:
            lin = min(lin, plan.poly_level)  # polynomials drop to the levels whose primes match the scale
        assert s.level_in == lin, s.output
        if s.kind == "bootstrap":
            assert s.level_out == plan.bootstrap_level
        elif s.kind == "mul":
            assert s.level_out == s.level_in - 1
        else:
            assert s.level_out == s.level_in - s.depth
        assert s.level_out >= 0
        out_level[s.output] = s.level_out
    assert plan.bootstraps == sum(s.kind == "bootstrap" for s in plan.steps)


def test_residual_poly_network_on_the_simulator():
    rng = np.random.default_rng(0)
    g = residual_graph(rng, act=(0.1, 0.5, 0.2))
    x = rng.normal(size=(3, 2, 8, 8))
    sim = SlotSimulator(small_params(10, 7), slots=256)
    net = compile(g, sim, calibration=x)
    _check_plan(net.plan)
    assert [s.kind for s in net.plan.steps] == ["linear", "poly", "linear", "add", "gap", "linear"]
    assert net.plan.steps[0].node == "bn1"  # conv1 + bn1 folded
    assert net.plan.bootstraps == 0 and net.plan.steps[-1].level_out == 1
    out = net.run(sim, None, net.encrypt_input(sim, None, x))
    assert _rel(net.decrypt_output(sim, None, out), G.reference(g, x)) < RTOL
    assert {r % 256 for r in sim.rotations_used} <= set(net.rotations)
    assert "rotation keys" in net.plan.summary() and net.plan.key_count == 1 + len(net.rotations)


def test_linear_network_on_the_exact_simulator():
    """Affine, conv stride 2, standalone batch norm (its conv has two readers), avg pool, flatten, dense."""
    rng = np.random.default_rng(1)
    conv = G.Conv2D(rng.normal(size=(3, 2, 3, 3)), rng.normal(size=3), 2, ((1, 1), (1, 1)))
    nodes = [G.Node("input", G.Input((2, 8, 8))),
             G.Node("norm", G.Affine(1 / 4, -0.5), ("input",)),
             G.Node("conv", conv, ("norm",)),
             G.Node("bn", G.BatchNorm(rng.uniform(0.5, 2, 3), rng.normal(size=3)), ("conv",)),
             G.Node("res", G.Add(), ("bn", "conv")),
             G.Node("pool", G.AvgPool2D(2, 2), ("res",)),
             G.Node("flat", G.Flatten(), ("pool",)),
             G.Node("fc", G.Dense(rng.normal(size=(4, 12)), rng.normal(size=4)), ("flat",))]
    g = G.Graph(tuple(nodes))
    sim = SlotSimulator(None, slots=128, max_level=6)
    x = rng.normal(size=(2, 2, 8, 8))
    net = compile(g, sim)
    _check_plan(net.plan)
    assert net.plan.steps[2].kind == "linear" and net.plan.steps[2].node == "bn"  # standalone, not folded
    out = net.run(sim, None, net.encrypt_input(sim, None, x))
    assert _rel(net.decrypt_output(sim, None, out), G.reference(g, x)) < RTOL


def test_relu_network_with_bootstraps_on_the_simulator():
    """Stride-2 conv with a strided shortcut, two ReLUs, bootstraps placed by the planner (simulated: the level is
    reset); equal to the ReLU model to 1e-9 and to the exact reference within the ReLU's error."""
    rng = np.random.default_rng(2)
    nodes = [G.Node("input", G.Input((2, 8, 8))),
             G.Node("c1", G.Conv2D(rng.normal(size=(4, 2, 3, 3)) * 0.3, rng.normal(size=4) * 0.1, 1,
                                   ((1, 1), (1, 1))), ("input",)),
             G.Node("r1", G.Activation("relu"), ("c1",)),
             G.Node("c2", G.Conv2D(rng.normal(size=(4, 4, 3, 3)) * 0.2, None, 2, ((1, 1), (1, 1))), ("r1",)),
             G.Node("sc", G.Conv2D(rng.normal(size=(4, 4, 1, 1)) * 0.2, None, 2, ((0, 0), (0, 0))), ("r1",)),
             G.Node("add", G.Add(), ("c2", "sc")),
             G.Node("r2", G.Activation("relu"), ("add",)),
             G.Node("gap", G.GlobalAvgPool(), ("r2",)),
             G.Node("fc", G.Dense(rng.normal(size=(3, 4)), rng.normal(size=3)), ("gap",))]
    g = G.Graph(tuple(nodes))
    x = rng.normal(size=(3, 2, 8, 8))
    sim = SlotSimulator(small_params(10, 20), slots=256)
    net = compile(g, sim, calibration=x, bootstrap=True, bootstrap_level=12)
    _check_plan(net.plan)
    assert net.plan.bootstraps == 2  # 2 x 16 ReLU levels + 4 linear layers over 20 + 12 + 12
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    assert _rel(out, _model_reference(g, net, x)) < RTOL
    assert _rel(out, G.reference(g, x)) < 1e-2


@pytest.mark.parametrize("window,stride,side", [(2, 2, 8), (3, 2, 9), (3, 1, 6)])
def test_maxpool_on_the_simulator(window, stride, side):
    """max(a, b) = b + relu(a - b), rows then columns: equal to its float64 model to 1e-9 and to the exact max pool
    within the ReLU's error."""
    rng = np.random.default_rng(window * 10 + side)
    pooled = (side - window) // stride + 1
    g = G.sequential((2, side, side), [G.Conv2D(rng.normal(size=(3, 2, 3, 3)), None, 1, ((1, 1), (1, 1))),
                                       G.MaxPool2D(window, stride), G.Flatten(),
                                       G.Dense(rng.normal(size=(4, 3 * pooled * pooled)) * 0.1)])
    x = rng.normal(size=(2, 2, side, side))
    sim = SlotSimulator(small_params(10, 20), slots=512)
    net = compile(g, sim, calibration=x, bootstrap=True, bootstrap_level=18)
    _check_plan(net.plan)
    comparisons = 2 * (window - 1).bit_length()
    assert sum(s.kind == "mul" for s in net.plan.steps) == comparisons
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    assert _rel(out, _model_reference(g, net, x)) < RTOL
    assert _rel(out, G.reference(g, x)) < 1e-3


def test_small_resnet_with_bootstraps_and_prescaling_on_boot16_levels():
    """A ResNet-20-shaped network (width 2, 8x8 images) on boot_16's levels (10 after a bootstrap); large
    calibrated bounds force the scaling of bootstrap inputs (x / 2^k before, x 2^k after)."""
    rng = np.random.default_rng(3)
    g = resnet20_graph(rng, width=2, side=8, classes=3)
    x = rng.uniform(0, 40, (2, 3, 8, 8))
    params = hemx.CKKSParameters.preset("boot_16")
    sim = SlotSimulator(params, slots=512)
    net = compile(g, sim, calibration=x)
    _check_plan(net.plan)
    assert net.plan.bootstrap_level == 10 and net.plan.bootstraps >= 19 * 2 - 2
    assert any(s.kind == "bootstrap" and s.factor > 1 for s in net.plan.steps)
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    assert _rel(out, _model_reference(g, net, x)) < RTOL


def test_resnet20_plan_at_boot16():
    """The plan of ResNet-20 (32x32, 16/32/64 channels) at boot_16's parameters, before any key."""
    rng = np.random.default_rng(4)
    g = resnet20_graph(rng)
    net = compile(g, hemx.CKKSParameters.preset("boot_16"), calibration=rng.uniform(0, 1, (4, 3, 32, 32)))
    plan = net.plan
    _check_plan(plan)
    print(plan.summary())
    convs = [s for s in plan.steps if s.kind == "linear"]
    assert len(convs) == 21 + 1  # 19 3x3 convs, 2 shortcut convs, the dense layer
    # inputs at the bootstrap's output level: no more bootstraps than from the top, keys for levels <= 10 only
    assert plan.input_level == 10 and plan.bootstrap_level == 10
    assert max(plan.rotation_levels.values()) == 10 and set(plan.rotation_levels) == set(plan.rotations)
    top = compile(g, hemx.CKKSParameters.preset("boot_16"), calibration=rng.uniform(0, 1, (4, 3, 32, 32)),
                  input_level=25)
    assert top.plan.input_level == 25 and top.plan.bootstraps >= plan.bootstraps
    assert max(top.plan.rotation_levels.values()) == 25
    assert 33 <= plan.bootstraps <= 40  # 19 ReLUs of 16 levels + 21 convs over 10 levels per bootstrap: >= 33
    assert len(plan.rotations) < 120 and plan.key_bytes is None  # bootstrap keys: counted with a Context
    stage3 = [s for s in plan.steps if s.node.startswith("s3") and s.kind == "linear"]
    assert all(s.layout.num_cts == 2 and s.layout.gap == 4 for s in stage3)


def test_encrypted_residual_network_small_ring():
    rng = np.random.default_rng(5)
    g = residual_graph(rng, act=(0.1, 0.5, 0.2))
    x = rng.normal(size=(2, 2, 8, 8))
    params = small_params(11, 6)
    net = compile(g, params, calibration=x)
    ctx, keys = context_and_keys(11, 6, rotations=net.rotations)
    assert ctx.params.moduli == params.moduli
    out = net.run(ctx, keys, net.encrypt_input(ctx, keys, x))
    got = net.decrypt_output(ctx, keys, out)
    err = _rel(got, G.reference(g, x))
    print(f"encrypted residual network, N=2^11: relative error {err:.3g}")
    assert err < ENCRYPTED_RTOL


def test_encrypted_relu_small_ring():
    """A ReLU on ciphertexts (scaling, sign stages at the product's scale, product): with a small composite (3, 3)
    so it fits 6 levels; equal to the composite's float64 model to CKKS precision."""
    comp = A.sign_composite((3, 3), 0.25)
    rng = np.random.default_rng(8)
    g = G.sequential((2, 4, 4), [G.Activation("relu")])
    x = rng.normal(size=(2, 2, 4, 4))
    net = compile(g, small_params(11, 6), calibration=x, relu=comp)
    assert [s.kind for s in net.plan.steps] == ["affine", "poly", "poly", "mul"] and net.plan.steps[-1].level_out == 0
    ctx, keys = context_and_keys(11, 6, rotations=net.rotations)
    got = net.decrypt_output(ctx, keys, net.run(ctx, keys, net.encrypt_input(ctx, keys, x)))
    want = A.relu_approx(x, net.bounds["input"], comp)
    err = _rel(got, want)
    print(f"encrypted ReLU, N=2^11: relative error {err:.3g}")
    assert err < ENCRYPTED_RTOL


@pytest.mark.slow  # 38 s on an idle 2-core machine, 65-95 s while others run: boot_12 keys and two bootstraps
def test_encrypted_residual_network_with_a_bootstrap_boot12():
    """The same network at boot_12 with the input at level 3 (3 levels after a bootstrap too): the activation's
    output needs scaling before a bootstrap (a level in reserve), so the planner bootstraps bn1 and the sum."""
    g, x, ctx, net = boot12_residual_case()
    assert net.plan.bootstraps == 2 and net.plan.boot_key_count is not None and net.plan.key_bytes is not None
    keys = net.keygen(ctx)
    made = [k for k in jax.tree_util.tree_leaves(keys.evaluation_keys(), is_leaf=lambda k: isinstance(k, SwitchingKey))
            if isinstance(k, SwitchingKey)]
    assert len(made) == net.plan.key_count
    assert net.plan.key_bytes == sum(k.nbytes for k in made)  # the plan's estimate is exact, compact or full
    out = net.run(ctx, keys, net.encrypt_input(ctx, keys, x))
    err = _rel(net.decrypt_output(ctx, keys, out), G.reference(g, x))
    print(f"encrypted residual network with a bootstrap, boot_12: relative error {err:.3g}")
    assert err < ENCRYPTED_RTOL


def test_bad_input():
    rng = np.random.default_rng(7)
    g = residual_graph(rng)
    sim = SlotSimulator(small_params(10, 7), slots=256)
    with pytest.raises(ParameterError, match="Graph"):
        compile("net", sim)
    with pytest.raises(ParameterError, match="CKKSParameters"):
        compile(g, 42)
    with pytest.raises(ShapeError, match="calibration"):
        compile(g, sim, calibration=np.zeros((2, 3, 8, 8)))
    pooled = G.sequential((1, 4, 4), [G.MaxPool2D(2, 2)])
    with pytest.raises(ParameterError, match="MaxPool2D needs calibration"):
        compile(pooled, sim)
    relu = G.sequential((1, 4, 4), [G.Activation("relu")])
    with pytest.raises(ParameterError, match="calibration"):
        compile(relu, sim)
    with pytest.raises(LevelError, match="cannot bootstrap"):
        compile(g, SlotSimulator(small_params(10, 3), slots=256), calibration=rng.normal(size=(2, 2, 8, 8)))
    strided = G.Graph((G.Node("input", G.Input((2, 8, 8))),
                       G.Node("c", G.Conv2D(np.ones((2, 2, 5, 5)), None, 1), ("input",)),  # 4x4 at gap 1
                       G.Node("p", G.AvgPool2D(2, 2), ("input",)),  # 4x4 at gap 2
                       G.Node("a", G.Add(), ("c", "p"))))
    with pytest.raises(ShapeError, match="different slot layouts"):
        compile(strided, sim)
    with pytest.raises(OverflowBoundError, match="base prime"):  # base 2^62, scale 2^56: values below 32 at level 0
        compile(g, sim, calibration=rng.normal(size=(2, 2, 8, 8)) * 300, input_level=6)
    net = compile(g, sim, calibration=rng.normal(size=(2, 2, 8, 8)))
    with pytest.raises(ShapeError):
        net.encrypt_input(sim, None, np.zeros((2, 3, 8, 8)))
    with pytest.raises(LevelError, match="level"):
        net.run(sim, None, sim.encrypt(net.input_layout.pack(np.zeros((2, 8, 8))), level=2))
    odd = G.Node("odd", G.Affine(), ("input",))
    object.__setattr__(odd, "layer", object())  # a layer type hemx.nn does not know (e.g. from a newer IR)
    with pytest.raises(ParameterError, match="not supported encrypted; supported: Input, Conv2D"):
        compile(G.Graph((g.nodes[0], odd)), sim)
    other = SlotSimulator(small_params(10, 8), slots=256)
    with pytest.raises(ParameterError, match="other parameters"):
        net.run(other, None, net.encrypt_input(other, None, np.zeros((2, 8, 8))))
