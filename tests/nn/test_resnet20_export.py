"""ResNet-20 at boot_16 as one exported program for cuda and tpu (issue 28), with nothing large made: the shipped
Fashion-MNIST ResNet-20 (``hemx.nn.models``, 10,044 plaintext products) compiled by :func:`hemx.nn.compile` (the
passes of ``hemx/nn/passes``) against a boot_16 Context (whose bootstrapper tables are built: 3.1 GiB), then its
:meth:`CompiledNetwork.run` (``hemx/nn/run.py``) traced with ``jax.ShapeDtypeStruct`` stand-ins for the keys (5.3
GiB of them, never generated), the ciphertext and the plaintext data of its linear layers and pools
(:meth:`CompiledNetwork.diagonals`: 2.46 GiB of float64 diagonals, never built), the context's tables (2.1 GiB)
lifted out as arguments (``hemx.nn.lift_constants``). Measured on the 2-core development machine: about 105 s in
all (trace 25 s, export 57 s), a peak of 3.9 GiB, a serialized module of 6.7 MiB."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hemx
from hemx import nn
from hemx.ckks import keygen as keygen_mod
from hemx.bench import resnet as resnet_bench
from tests.helpers.system import need_fashion_mnist

CUSTOM_CALL = re.compile(r"custom_call\s*@hemx_")
INT8_DOT = re.compile(r"stablehlo\.dot_general[^\n]*\(tensor<[^>]*xi8>, tensor<[^>]*xi8>\) -> tensor<[^>]*xi32>")
CONSTANT = re.compile(r'stablehlo\.constant dense<"0x([0-9A-Fa-f]*)">')


@pytest.mark.slow  # a boot_16 Context and its bootstrapper (~20 s, 3.1 GiB), tracing and lowering ResNet-20
def test_resnet20_boot16_exports_without_large_constants():
    need_fashion_mnist()  # calibrated on training images, as `hemx bench resnet` is
    graph, _ = resnet_bench.model()  # compiled as `hemx bench resnet` compiles it
    calibration, _ = resnet_bench.load("train", resnet_bench.CALIBRATION_IMAGES)
    ctx = hemx.Context(hemx.CKKSParameters.preset("boot_16"))
    net = nn.compile(graph, ctx, calibration=calibration)
    assert net.plan.plaintext_mults == 10_044 and net.plan.bootstrapped_ciphertexts == 10  # in 8 placements

    keys = jax.eval_shape(lambda: net.keygen(ctx).evaluation_keys())  # stand-ins: no key is made
    ct = keygen_mod.placeholder(ctx, batch=(net.input_layout.num_cts, 1), level=net.plan.input_level,
                                key_id=keys.key_id)
    data = net.diagonals(abstract=True)
    data_bytes = sum(int(np.prod(s.shape)) * 8 for entries in data.values() for s in entries.values())
    assert data_bytes > 2 << 30  # what would otherwise be built (and, encoded, ~11 times more as constants)

    program = nn.lift_constants(lambda c, k, d: net.run(ctx, k, c, diagonals=d), ct, keys, data)
    assert program.nbytes > 1 << 30 and program.kept_bytes < 4 << 20  # the context's tables are arguments too
    exported = jax.export.export(jax.jit(program.fn), platforms=["cuda", "tpu"])(program.constant_specs, ct, keys,
                                                                                 data)
    assert exported.platforms == ("cuda", "tpu")
    module = exported.mlir_module_serialized
    assert len(module) < 32 << 20, len(module)  # measured 6.7 MiB
    text = exported.mlir_module()
    assert not CUSTOM_CALL.search(text), "the export holds a hemx native custom call"
    assert INT8_DOT.search(text)
    assert max((len(h) // 2 for h in CONSTANT.findall(text)), default=0) < 1 << 20  # no large constant
    in_avals = {(a.shape, a.dtype) for a in exported.in_avals}
    assert all((s.shape, s.dtype) in in_avals for entries in data.values() for s in entries.values())
    (out,) = jax.tree_util.tree_leaves(exported.out_avals)
    limbs = ctx.params.limbs_at_level(net.plan.steps[-1].level_out)
    assert out.dtype == jnp.uint32 and out.shape == (net.output_layout.num_cts, 1, 2, limbs, ctx.params.n)
