"""hemx.nn.trace.from_jax: JAX functions (plain and Flax) -> Graph, checked against the function in float64."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hemx.errors import ParameterError
from hemx.nn import graph as G
from hemx.nn.trace import from_jax

jax.config.update("jax_enable_x64", True)


def _rel_err(graph, fn, x_nhwc, layout="NHWC"):
    want = np.asarray(fn(jnp.asarray(x_nhwc)))
    assert graph.data_layout == layout
    got = G.reference(graph, x_nhwc)  # the graph takes the model's layout
    if got.ndim == 4 and layout == "NHWC":  # an image output: the IR is channel-first
        got = np.transpose(got, (0, 2, 3, 1))
    assert got.shape == want.shape
    return np.max(np.abs(got - want)) / np.max(np.abs(want))


def _kinds(graph):
    return [type(n.layer).__name__ for n in graph.nodes]


def _bn(x, rng, c):
    mean, var = rng.normal(size=c) * 0.3, rng.uniform(0.5, 2.0, c)
    gamma, beta = rng.uniform(0.5, 1.5, c), rng.normal(size=c) * 0.2
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * gamma + beta


def test_cnn_every_layer_kind():
    """/255, conv + bias, batch-norm, ReLU, average pool, stride-2 conv with asymmetric padding, a polynomial
    activation written with mul/add/integer_pow, max pool, NHWC flatten into a dense layer, bias."""
    rng = np.random.default_rng(1)
    w1 = rng.normal(size=(3, 3, 3, 8)) * 0.3
    b1 = rng.normal(size=8)
    w2 = rng.normal(size=(3, 3, 8, 6)) * 0.2
    wd = rng.normal(size=(6 * 2 * 2, 5)) * 0.2
    bd = rng.normal(size=5)
    bn = (rng.normal(size=8) * 0.3, rng.uniform(0.5, 2.0, 8), rng.uniform(0.5, 1.5, 8), rng.normal(size=8) * 0.2)

    def fn(x):
        x = x / 255.0
        y = jax.lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + b1
        y = (y - bn[0]) / jnp.sqrt(bn[1] + 1e-3) * bn[2] + bn[3]
        y = jax.nn.relu(y)
        y = jax.lax.reduce_window(y, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0
        y = jax.lax.conv_general_dilated(y, w2, (2, 2), ((0, 1), (1, 0)), dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = 0.1 * y ** 2 + 0.5 * y - 0.25 + 0.05 * jax.lax.integer_pow(y, 3)
        y = jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        y = y.reshape(y.shape[0], -1)
        return y @ wd + bd

    x = rng.uniform(0, 255, size=(3, 16, 16, 3))
    g = from_jax(fn, x[:1])
    assert g.input_shape == (3, 16, 16)
    assert _kinds(g) == ["Input", "Affine", "Conv2D", "BatchNorm", "Activation", "AvgPool2D", "Conv2D", "Activation",
                         "MaxPool2D", "Flatten", "Dense"]
    conv1, bn1 = g.nodes[2].layer, g.nodes[3].layer
    assert conv1.bias is None  # the bias add and the batch-norm arithmetic are one per-channel affine
    assert conv1.padding == ((1, 1), (1, 1)) and conv1.stride == 1
    np.testing.assert_allclose(bn1.scale, bn[2] / np.sqrt(bn[1] + 1e-3), rtol=1e-15)
    np.testing.assert_allclose(bn1.shift, (b1 - bn[0]) * bn1.scale + bn[3], rtol=1e-14)
    assert g.nodes[1].layer.scale == 1 / 255.0
    conv2 = g.nodes[6].layer
    assert conv2.stride == 2 and conv2.padding == ((0, 1), (1, 0))
    act = g.nodes[7].layer
    assert act.kind == "poly" and np.allclose(act.coeffs, (-0.25, 0.5, 0.1, 0.05), rtol=0, atol=1e-15)
    assert g.nodes[10].layer.bias is not None
    assert _rel_err(g, fn, x) < 1e-12


def test_nchw_dimension_numbers_transpose_and_residual():
    """An NCHW model (OIHW kernels) fed NHWC through a transpose; a residual add, global mean, a dense layer on the
    image's channels (a 1x1 conv), ReLU through jit and a custom_jvp, jax.checkpoint, and a trailing bias."""
    rng = np.random.default_rng(2)
    w1 = rng.normal(size=(4, 2, 3, 3)) * 0.4  # OIHW
    w2 = rng.normal(size=(4, 4, 3, 3)) * 0.3
    w1x1 = rng.normal(size=(4, 6)) * 0.5
    wd, bd = rng.normal(size=(6, 3)), rng.normal(size=3)

    @jax.jit
    def block(h):
        y = jax.lax.conv_general_dilated(h, w2, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return jax.nn.relu(_bn(jnp.transpose(y, (0, 2, 3, 1)), np.random.default_rng(3), 4)).transpose(0, 3, 1, 2) + h

    def fn(x):
        x = jnp.transpose(x, (0, 3, 1, 2))
        h = jax.lax.conv_general_dilated(x, w1, (2, 2), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
        h = jax.checkpoint(jax.nn.relu)(h)
        h = block(h)
        h = jnp.transpose(h, (0, 2, 3, 1))  # back to NHWC
        h = h @ w1x1  # dense over channels = 1x1 conv
        h = jnp.square(h) * 0.125 + h
        return jnp.mean(h, axis=(1, 2)) @ wd + bd

    x = rng.normal(size=(2, 8, 8, 2))
    g = from_jax(fn, x[:1])
    kinds = _kinds(g)
    assert kinds.count("Add") == 1 and kinds.count("Conv2D") == 3 and "GlobalAvgPool" in kinds
    assert [n.layer.weight.shape for n in g.nodes if isinstance(n.layer, G.Conv2D)][2] == (6, 4, 1, 1)
    assert _rel_err(g, fn, x) < 1e-12


def test_nchw_input_layout_and_vectors():
    rng = np.random.default_rng(4)
    w = rng.normal(size=(3, 2, 3, 3))
    wd = rng.normal(size=(3 * 2 * 2, 4))

    def fn(x):  # NCHW in: flatten order is already channel-first, so the dense weight is kept as is
        y = jax.lax.conv_general_dilated(x, w, (2, 2), ((0, 0), (0, 0)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y.reshape(y.shape[0], -1) @ wd

    x = rng.normal(size=(2, 2, 5, 5))
    g = from_jax(fn, x[:1], input_layout="NCHW")
    assert g.input_shape == (2, 5, 5)
    np.testing.assert_array_equal(g.nodes[-1].layer.weight, wd.T)
    assert g.nodes[-1].layer.bias is None
    assert _rel_err(g, fn, x, layout="NCHW") < 1e-12

    m1, m2 = rng.normal(size=(6, 5)), rng.normal(size=(5, 2))
    vec = lambda v: (jnp.maximum(v @ m1 * 2.0 + 1.0, 0.0)) @ m2  # noqa: E731
    xv = rng.normal(size=(3, 6))
    gv = from_jax(vec, xv[:1])
    assert _kinds(gv) == ["Input", "Dense", "Affine", "Activation", "Dense"]
    np.testing.assert_allclose(G.reference(gv, xv), vec(xv), rtol=1e-13)
    gf = from_jax(vec, xv[:1], fold_batchnorm=True)  # * 2 + 1 folded into the first dense layer
    assert _kinds(gf) == ["Input", "Dense", "Activation", "Dense"]
    np.testing.assert_array_equal(gf.nodes[1].layer.bias, np.ones(5))
    np.testing.assert_array_equal(gf.nodes[1].layer.weight, 2 * m1.T)
    np.testing.assert_allclose(G.reference(gv, xv), vec(xv), rtol=1e-13)


def test_custom_vjp_and_shared_batchnorm():
    """A custom_vjp activation is inlined; a batch-norm output used twice (by a polynomial and a conv) is one node."""
    rng = np.random.default_rng(8)
    w1, w2 = rng.normal(size=(3, 3, 2, 3)), rng.normal(size=(3, 3, 3, 3))

    @jax.custom_vjp
    def act(z):
        return 0.5 * z + 0.125 * z * z

    act.defvjp(lambda z: (act(z), z), lambda z, g: (g * (0.5 + 0.25 * z),))

    def fn(x):
        y = _bn(jax.lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
                np.random.default_rng(9), 3)
        z = jax.lax.conv_general_dilated(y, w2, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return act(y) + z

    x = rng.normal(size=(2, 5, 5, 2))
    g = from_jax(fn, x[:1])
    assert _kinds(g).count("BatchNorm") == 1 and "Add" in _kinds(g)
    assert _rel_err(g, fn, x) < 1e-12


def test_fold_batchnorm():
    rng = np.random.default_rng(5)
    w = rng.normal(size=(3, 3, 2, 4))

    def fn(x):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.mean(jax.nn.relu(_bn(y, np.random.default_rng(6), 4)), axis=(1, 2))

    x = rng.normal(size=(2, 6, 6, 2))
    kept, folded = from_jax(fn, x[:1]), from_jax(fn, x[:1], fold_batchnorm=True)
    assert "BatchNorm" in _kinds(kept) and "BatchNorm" not in _kinds(folded)
    assert _rel_err(folded, fn, x) < 1e-12 and _rel_err(kept, fn, x) < 1e-12


@pytest.mark.parametrize("body, words", [
    (lambda x: jnp.exp(x), ["`exp`", "test_trace.py", "Supported:", "softmax"]),  # (tanh is an Activation now)
    (lambda x: x * jnp.transpose(x, (0, 2, 1, 3)), ["product of two different tensors"]),
    (lambda x: x - jnp.mean(x, axis=0), ["`reduce_sum`", "axes [0]"]),
    (lambda x: x + jnp.arange(8.0)[None, :, None, None], ["varies over the batch or the pixels"]),
    (lambda x: jax.lax.conv_general_dilated(np.ones((1, 10, 10, 8)), x, (1, 1), "VALID",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC")), ["kernel is not a constant"]),
    (lambda x: jax.lax.conv_general_dilated(x, np.ones((3, 3, 1, 2)), (1, 1), "SAME", rhs_dilation=(2, 2),
                                            dimension_numbers=("NHWC", "HWIO", "NHWC")), ["dilated"]),
    (lambda x: jnp.maximum(x, 1.0), ["only max(x, 0)"]),
])
def test_unsupported_is_an_error_naming_it(body, words):
    with pytest.raises(ParameterError) as e:
        from_jax(body, np.zeros((2, 8, 8, 1)))
    for w in words:
        assert w in str(e.value), str(e.value)


def test_flax_linen_module():
    """A small Flax linen CNN (Conv, BatchNorm with running averages, relu, avg_pool, Dense) imports exactly."""
    import flax.linen as nn

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(8, (3, 3), strides=(2, 2), padding="SAME")(x)
            x = nn.BatchNorm(use_running_average=True, epsilon=1e-5)(x)
            x = nn.relu(x)
            x = nn.Conv(8, (3, 3))(x)
            x = nn.avg_pool(x, (2, 2), strides=(2, 2))
            x = x * x * 0.25 + x
            x = x.reshape((x.shape[0], -1))
            return nn.Dense(10)(nn.Dense(16)(x))

    rng = np.random.default_rng(7)
    x = rng.normal(size=(3, 12, 12, 3))
    net = Net()
    shapes = jax.eval_shape(net.init, jax.random.PRNGKey(0), jnp.asarray(x[:1]))  # (a real init is slow op by op)
    variables = jax.tree_util.tree_map(lambda a: rng.normal(size=a.shape) * 0.3, shapes)
    variables["batch_stats"] = jax.tree_util.tree_map(lambda a: np.abs(a) + 0.5, variables["batch_stats"])

    def fn(inp):
        return net.apply(variables, inp)

    g = from_jax(fn, x[:1])
    assert _kinds(g) == ["Input", "Conv2D", "BatchNorm", "Activation", "Conv2D", "AvgPool2D", "Activation", "Flatten",
                         "Dense", "Dense"]
    assert _rel_err(g, fn, x) < 1e-12
