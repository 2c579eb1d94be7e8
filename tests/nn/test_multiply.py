"""hemx.nn.layers.multiply: the element-wise product of two tensors, the layer added as one module plus one
from_jax rule; traced from JAX and checked against the function in float64, on the slot simulator and encrypted on
a small ring (no bootstrap)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.errors import ShapeError
from hemx.nn import graph as G
from hemx.nn.compiler import compile
from hemx.nn.layers import REGISTRY, rule_for
from hemx.nn.trace import from_jax

from tests.helpers.ckks_helpers import INSECURE, context_and_keys, small_params

jax.config.update("jax_enable_x64", True)
pytestmark = pytest.mark.filterwarnings(INSECURE)


def _rel(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def _gated(rng, f_in=6, f_out=4):
    """``f(x) = (x @ w1 + b1) * (x @ w2 + b2)`` on ``(B, f_in)`` vectors: a gate of two dense layers."""
    w1, w2 = rng.normal(size=(f_in, f_out)) * 0.5, rng.normal(size=(f_in, f_out)) * 0.5
    b1, b2 = rng.normal(size=f_out) * 0.1, rng.normal(size=f_out) * 0.1
    return lambda x: (x @ w1 + b1) * (x @ w2 + b2)


def _gated_cnn(rng):
    """``conv1(x) * conv2(x)`` on NHWC images, then the channel means and a dense layer."""
    k1, k2 = rng.normal(size=(3, 3, 2, 3)) * 0.3, rng.normal(size=(3, 3, 2, 3)) * 0.3
    wd = rng.normal(size=(3, 2))

    def fn(x):
        conv = lambda k: jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",  # noqa: E731
                                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.mean(conv(k1) * conv(k2), axis=(1, 2)) @ wd

    return fn


def test_multiply_is_one_registered_layer():
    rule = REGISTRY[G.Multiply]
    assert rule_for(G.Multiply()) is rule and rule.arity == 2 and rule.supported == ("Multiply",)
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(G.apply_layer(G.Multiply(), [a, a + 1]), a * (a + 1))
    nodes = (G.Node("input", G.Input((3,))), G.Node("d", G.Dense(np.ones((2, 3))), ("input",)),
             G.Node("m", G.Multiply(), ("input", "d")))
    with pytest.raises(ShapeError, match="inputs of shapes"):
        G.Graph(nodes)
    with pytest.raises(ShapeError, match="takes 2 inputs"):
        G.Node("m", G.Multiply(), ("input",))


def test_from_jax_product_of_two_tensors_and_square_of_one():
    rng = np.random.default_rng(0)
    fn = _gated(rng)
    x = rng.normal(size=(3, 6))
    g = from_jax(fn, x[:1])
    assert [type(n.layer).__name__ for n in g.nodes] == ["Input", "Dense", "Dense", "Multiply"]
    assert _rel(G.reference(g, x), np.asarray(fn(jnp.asarray(x)))) < 1e-12
    # the product of one tensor with itself stays a polynomial activation (two traced dense layers, as in
    # (v @ w) * (v @ w), are two tensors: a Multiply)
    w = rng.normal(size=(6, 4))

    def square(v):
        h = v @ w
        return h * h

    sq = from_jax(square, x[:1])
    assert [type(n.layer).__name__ for n in sq.nodes] == ["Input", "Dense", "Activation"]
    assert sq.nodes[-1].layer.coeffs == (0.0, 0.0, 1.0)


def test_gated_networks_on_the_simulator():
    rng = np.random.default_rng(1)
    sim = SlotSimulator(small_params(10, 7), slots=256)
    fn = _gated(rng)
    x = rng.normal(size=(3, 6))
    g = from_jax(fn, x[:1])
    net = compile(g, sim, calibration=x)
    assert [s.kind for s in net.plan.steps] == ["linear", "linear", "mul"]
    mul = net.plan.steps[-1]
    assert mul.level_out == mul.level_in - 1 and mul.ct_mults == 1 and net.plan.bootstraps == 0
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    assert _rel(out, np.asarray(fn(jnp.asarray(x)))) < 1e-9

    fn = _gated_cnn(rng)
    x = rng.normal(size=(2, 6, 6, 2))
    g = from_jax(fn, x[:1])
    assert "Multiply" in [type(n.layer).__name__ for n in g.nodes]
    net = compile(g, sim, calibration=x)  # NHWC, as the traced function takes it
    assert [s.kind for s in net.plan.steps] == ["linear", "linear", "mul", "gap", "linear"]
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    assert _rel(out, np.asarray(fn(jnp.asarray(x)))) < 1e-9


def test_encrypted_gated_network_small_ring():
    """Dense * dense on ciphertexts: two linear levels and the product's one, within 6 levels, no bootstrap."""
    rng = np.random.default_rng(2)
    fn = _gated(rng)
    x = rng.normal(size=(2, 6))
    _check_encrypted(fn, from_jax(fn, x[:1]), x, "dense * dense")


def _check_encrypted(fn, g, x, what: str) -> None:
    """``g`` (traced from ``fn``) compiled for N = 2^11 with 6 levels (no bootstrap), run encrypted on ``x``: the
    result within 1e-6 (relative) of ``fn`` in float64."""
    net = compile(g, small_params(11, 6), calibration=x)
    assert net.plan.bootstraps == 0
    ctx, keys = context_and_keys(11, 6, rotations=net.rotations)
    got = net.decrypt_output(ctx, keys, net.run(ctx, keys, net.encrypt_input(ctx, keys, x)))
    err = _rel(got, np.asarray(fn(jnp.asarray(x))))
    print(f"encrypted {what}, N=2^11: relative error {err:.3g}")
    assert err < 1e-6


def test_product_then_residual_add_encrypted():
    """``d1(x) * d2(x) + d3(x)``: the product leaves the rescale at scale ``S^2 / q`` (not the context's ``S``) and
    one level lower than ``d3``'s output; the addition after it must align both (scale and level) and still give
    the float64 result, encrypted on a small ring."""
    rng = np.random.default_rng(3)
    gate = _gated(rng)
    w3 = rng.normal(size=(6, 4)) * 0.5

    def fn(x):
        return gate(x) + x @ w3

    x = rng.normal(size=(2, 6))
    g = from_jax(fn, x[:1])
    kinds = [type(n.layer).__name__ for n in g.nodes]
    assert kinds.count("Multiply") == 1 and kinds[-1] == "Add", kinds
    _check_encrypted(fn, g, x, "dense * dense + dense")
