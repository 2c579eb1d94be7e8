"""A whole compiled network as one XLA program (issue 28): hemx.nn's residual test network with its two bootstraps at
boot_12, with the switching keys and the linear layers' data (``net.diagonals()``, float64 slot values encoded inside
the program) as arguments: exported with ``jax.export`` for cuda and tpu from this CPU-only machine (no hemx native
custom call: those kernels are CPU-only; the BAT basis conversions' int8 dots present), with the context's tables
lifted out too (``hemx.nn.lift_constants``: a module of under 4 MB instead of 37-51 MB of constants), and under
``jax.jit`` on the CPU, bit-identical to the eager run."""

from __future__ import annotations

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hemx
from hemx import nn
from hemx.circuits import CKKSEvaluator
from hemx.errors import ParameterError, ShapeError
from hemx.nn import graph as G
from hemx.nn import packing

from tests.helpers.ckks_helpers import INSECURE
from tests.nn._models import boot12_residual_case

pytestmark = pytest.mark.filterwarnings(INSECURE)

CUSTOM_CALL = re.compile(r"custom_call\s*@hemx_")
INT8_DOT = re.compile(r"stablehlo\.dot_general[^\n]*\(tensor<[^>]*xi8>, tensor<[^>]*xi8>\) -> tensor<[^>]*xi32>")
MODULE_BYTES = 4 << 20  # measured 1.9 MB with the tables lifted (36.5 MB with them as constants, 51 MB before
# issue 28 with the encoded diagonals too)


def specs(tree):
    return jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), tree)


@pytest.fixture(scope="module")
def network_case():
    """The network of ``test_encrypted_residual_network_with_a_bootstrap_boot12`` (input at level 3, two bootstraps),
    its keys, one encrypted image, its layers' data and ``run(ct, keys, diagonals)`` (keys and data as arguments:
    closed over, they would be embedded in the program as constants), and the eager run without the data."""
    g, x, ctx, net = boot12_residual_case()
    assert net.plan.bootstraps == 2
    keys = net.keygen(ctx)
    ev = keys.evaluation_keys()
    ct = net.encrypt_input(ctx, keys, x)
    diagonals = net.diagonals()
    eager = net.run(ctx, ev, ct)

    def run(c, k, d):
        return net.run(ctx, k, c, diagonals=d)

    return dict(net=net, ctx=ctx, keys=keys, ev=ev, ct=ct, x=x, graph=g, run=run, diagonals=diagonals, eager=eager)


@pytest.fixture(scope="module")
def lifted(network_case):
    """The network traced once with stand-ins for the ciphertext, keys and data, its tables lifted."""
    case = network_case
    return nn.lift_constants(case["run"], specs(case["ct"]), specs(case["ev"]), case["net"].diagonals(abstract=True))


def test_diagonals_are_the_layers_data(network_case):
    """One entry per linear layer and pooling step, float64 slot values (not encoded plaintexts); the eager run
    with them is the run without them, bit for bit; data of another structure, shape or dtype is refused."""
    case = network_case
    net, ctx, ev, ct, d = case["net"], case["ctx"], case["ev"], case["ct"], case["diagonals"]
    steps = net.program_steps()
    assert [s.output for s in steps] == list(d) == ["bn1", "conv2", "pool", "fc"]
    for step in steps:
        entries = d[step.output]
        if step.kind == "linear":
            assert entries["diagonals"].shape == (step.op.plaintext_mults, net.plan.slots)
            assert ("bias" in entries) == (step.op.bias is not None)
        else:
            assert set(entries) == {"mask"}
        assert all(a.dtype == jnp.float64 for a in entries.values())
    assert specs(d) == net.diagonals(abstract=True)
    assert sum(s.plaintext_mults for s in steps) == net.plan.plaintext_mults
    with_data = net.run(ctx, ev, ct, diagonals=d)
    assert np.array_equal(np.asarray(with_data.data), np.asarray(case["eager"].data))

    conv2 = dict(d["conv2"])
    with pytest.raises(ParameterError, match="net.diagonals"):
        net.run(ctx, ev, ct, diagonals={k: v for k, v in d.items() if k != "conv2"})
    with pytest.raises(ShapeError, match="shape"):
        net.run(ctx, ev, ct, diagonals={**d, "conv2": {"diagonals": conv2["diagonals"][1:]}})
    with pytest.raises(ParameterError, match="float64"):
        net.run(ctx, ev, ct, diagonals={**d, "conv2": {"diagonals": conv2["diagonals"].astype(jnp.float32)}})


def test_encode_values_traced_and_eager():
    """The layers' encoder: decodes to the values (zero rows where ``pos`` leaves them), and traced (jitted,
    exported: no constant of the encoded size) gives the eager plaintext bit for bit."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", hemx.ckks.InsecureParametersWarning)
        params = hemx.CKKSParameters.preset("boot_12", allow_insecure=True)
    ctx = hemx.Context(params, slots=256)
    ev = CKKSEvaluator(ctx)
    rng = np.random.default_rng(2)
    values = rng.normal(size=(3, 256))
    pos = np.array([0, 2, 3], dtype=np.int32)
    level = 3
    scale = ctx.rescale_divisor(level)
    pt = packing.encode_values(ev, values, level=level, scale=scale, rows=5, pos=pos)
    want = np.zeros((5, 256))
    want[pos] = values
    assert (pt.level, pt.scale, pt.slots, pt.batch_shape) == (level, scale, 256, (5,))
    assert np.max(np.abs(ctx.decode(pt) - want)) < 1e-9
    fn = jax.jit(lambda v: packing.encode_values(ev, v, level=level, scale=scale, rows=5, pos=pos).data)
    assert np.array_equal(np.asarray(fn(values)), np.asarray(pt.data))

    def constant_bytes(rows: int) -> int:  # the program's constants (the ring's tables) do not grow with the data
        text = jax.export.export(jax.jit(lambda v: packing.encode_values(ev, v, level=level, scale=scale).data),
                                 platforms=["tpu"])(jax.ShapeDtypeStruct((rows, 256), jnp.float64)).mlir_module()
        assert not CUSTOM_CALL.search(text)
        return sum(len(h) // 2 for h in re.findall(r'stablehlo\.constant dense<"0x([0-9A-Fa-f]*)">', text))

    assert constant_bytes(2) == constant_bytes(40)


def test_encoded_diagonals_are_not_constants(network_case, lifted):
    """Traced with the data as arguments, the program's constants are the context's tables only: closing over the
    data instead adds at least every layer's encoded diagonals."""
    case = network_case
    net = case["net"]
    closed = nn.lift_constants(lambda c, k: net.run(case["ctx"], k, c), specs(case["ct"]), specs(case["ev"]))
    params = case["ctx"].params
    encoded = sum(s.op.plaintext_mults * params.limbs_at_level(s.level_in) * params.n * 4 for s in net.program_steps())
    assert closed.nbytes - lifted.nbytes >= encoded
    assert lifted.kept_bytes < 1 << 20  # what stays in the program: small constants


def test_lifted_program_is_the_network(network_case, lifted):
    """The lifted program (the recorded trace, evaluated eagerly) gives the eager run bit for bit; arguments of
    another structure are refused."""
    case = network_case
    out = lifted.fn(lifted.constants, case["ct"], case["ev"], case["diagonals"])
    assert np.array_equal(np.asarray(out.data), np.asarray(case["eager"].data))
    with pytest.raises(ParameterError, match="constants"):
        lifted.fn(lifted.constants[1:], case["ct"], case["ev"], case["diagonals"])
    with pytest.raises(ParameterError, match="structure"):
        lifted.fn(lifted.constants, case["ct"], case["ev"], {})


@pytest.mark.parametrize("platform", ("cuda", "tpu"))
def test_whole_network_exports_for_accelerators(network_case, lifted, platform):
    case = network_case
    net, ctx = case["net"], case["ctx"]
    d = net.diagonals(abstract=True)
    exported = jax.export.export(jax.jit(lifted.fn), platforms=[platform])(
        lifted.constant_specs, specs(case["ct"]), specs(case["ev"]), d)
    assert exported.platforms == (platform,)
    text = exported.mlir_module()
    assert not CUSTOM_CALL.search(text), f"{platform} export holds a hemx native custom call"
    assert INT8_DOT.search(text)
    assert len(exported.mlir_module_serialized) < MODULE_BYTES
    in_avals = [(a.shape, a.dtype) for a in exported.in_avals]
    for entries in d.values():  # the layers' data are arguments of the program
        assert all((s.shape, s.dtype) in in_avals for s in entries.values())
    (out,) = jax.tree_util.tree_leaves(exported.out_avals)
    limbs = ctx.params.limbs_at_level(net.plan.steps[-1].level_out)
    batch = case["x"].shape[0]  # the image batch axis follows the ciphertext axis
    assert out.dtype == jnp.uint32 and out.shape == (net.output_layout.num_cts, batch, 2, limbs, ctx.params.n)


@pytest.mark.slow  # one XLA program with two boot_12 bootstraps: about 2-4 min to compile on 2 cores
def test_whole_network_under_jit_is_the_eager_network(network_case):
    """``jax.jit`` of the network with the ciphertext, the keys and the layers' data as arguments: the eager run
    (without the data) bit for bit."""
    case = network_case
    jitted = jax.jit(case["run"])(case["ct"], case["ev"], case["diagonals"])
    assert np.array_equal(np.asarray(jitted.data), np.asarray(case["eager"].data))
    got = case["net"].decrypt_output(case["ctx"], case["keys"], jitted)
    want = G.reference(case["graph"], case["x"])
    assert float(np.max(np.abs(got - want)) / np.max(np.abs(want))) < 1e-2
