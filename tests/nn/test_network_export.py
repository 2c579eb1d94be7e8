"""A whole compiled network as one XLA program (issue 28): hemx.nn's residual test network with its two
bootstraps at boot_12, the switching keys as arguments of the program, exported with ``jax.export`` for cuda and
tpu from this CPU-only machine (no hemx native custom call: those kernels are CPU-only; the BAT basis
conversions' int8 dots present), and under ``jax.jit`` on the CPU, bit-identical to the eager run."""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hemx.nn import graph as G

from tests.helpers.ckks_helpers import INSECURE
from tests.nn._models import boot12_residual_case

pytestmark = pytest.mark.filterwarnings(INSECURE)

CUSTOM_CALL = re.compile(r"custom_call\s*@hemx_")
INT8_DOT = re.compile(r"stablehlo\.dot_general[^\n]*\(tensor<[^>]*xi8>, tensor<[^>]*xi8>\) -> tensor<[^>]*xi32>")


@pytest.fixture(scope="module")
def network_case():
    """The network of ``test_encrypted_residual_network_with_a_bootstrap_boot12`` (input at level 3, two bootstraps),
    its keys, one encrypted image and ``run(ct, relin, galois, switching)``: the network with the keys' arrays as
    arguments (closed over, they would be embedded in the program as constants)."""
    g, x, ctx, net = boot12_residual_case()
    assert net.plan.bootstraps == 2
    keys = net.keygen(ctx)
    ev = keys.evaluation_keys()
    ct = net.encrypt_input(ctx, keys, x)
    rep = dataclasses.replace

    def run(c, relin, galois, switching):
        k = rep(ev, relin=rep(ev.relin, data=relin), galois={e: rep(s, data=galois[e]) for e, s in ev.galois.items()},
                switching={n: rep(s, data=switching[n]) for n, s in ev.switching.items()})
        return net.run(ctx, k, c)

    args = (ev.relin.data, {e: s.data for e, s in ev.galois.items()}, {n: s.data for n, s in ev.switching.items()})
    return dict(net=net, ctx=ctx, keys=keys, ev=ev, ct=ct, x=x, graph=g, run=run, args=args)


@pytest.mark.parametrize("platform", ("cuda", "tpu"))
def test_whole_network_exports_for_accelerators(network_case, platform):
    case = network_case
    exported = jax.export.export(jax.jit(case["run"]), platforms=[platform])(case["ct"], *case["args"])
    assert exported.platforms == (platform,)
    text = exported.mlir_module()
    assert not CUSTOM_CALL.search(text), f"{platform} export holds a hemx native custom call"
    assert INT8_DOT.search(text)
    (out,) = jax.tree_util.tree_leaves(exported.out_avals)
    net, ctx = case["net"], case["ctx"]
    limbs = ctx.params.limbs_at_level(net.plan.steps[-1].level_out)
    batch = case["x"].shape[0]  # the image batch axis follows the ciphertext axis
    assert out.dtype == jnp.uint32 and out.shape == (net.output_layout.num_cts, batch, 2, limbs, ctx.params.n)


@pytest.mark.slow  # one XLA program with two boot_12 bootstraps: about 2-4 min to compile on 2 cores
def test_whole_network_under_jit_is_the_eager_network(network_case):
    case = network_case
    jitted = jax.jit(case["run"])(case["ct"], *case["args"])
    eager = case["net"].run(case["ctx"], case["ev"], case["ct"])
    assert np.array_equal(np.asarray(jitted.data), np.asarray(eager.data))
    got = case["net"].decrypt_output(case["ctx"], case["keys"], jitted)
    want = G.reference(case["graph"], case["x"])
    assert float(np.max(np.abs(got - want)) / np.max(np.abs(want))) < 1e-2
