"""One layout per model (issue 37): a compiled network takes its input in the layout of the model it came from
(NHWC for from_jax / Keras, NCHW for ONNX and hand-built graphs) in the reference, ``compile(calibration=...)``,
``encrypt_input``, the simulator and ``infer``; a shape that does not fit names the axis to move."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.errors import ParameterError, ShapeError
from hemx.nn import graph as G
from hemx.nn.compiler import compile  # noqa: A004
from hemx.nn.data_layout import model_shape, to_channel_first, to_layout
from hemx.nn.infer import infer
from hemx.nn.trace import from_jax

from tests.helpers.ckks_helpers import small_params


def _cnn(rng, c_in: int):
    """An NHWC JAX CNN: 3x3 conv (c_in -> 4), a polynomial activation, a global average pool, a dense layer."""
    w = rng.normal(size=(3, 3, c_in, 4)) * 0.3  # HWIO
    b = rng.normal(size=4) * 0.1
    wd = rng.normal(size=(4, 3))

    def fn(x):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = y + b
        y = y / 2 + y * y / 8
        return jnp.mean(y, axis=(1, 2)) @ wd

    return fn


def _rel(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b))))


def test_nhwc_model_with_8_channels_on_8x8_images_in_the_simulator():
    """C == H == W: an NCHW array has the NHWC shape, so only the model's own layout can tell them apart. The NHWC
    array (as the JAX function takes it) gives the function's logits through compile, encrypt_input, the simulator
    and infer; the same values read channel-first give other logits."""
    rng = np.random.default_rng(0)
    fn = _cnn(rng, 8)
    x = rng.normal(size=(3, 8, 8, 8))
    with jax.enable_x64(True):
        g = from_jax(fn, x[:1])
        want = np.asarray(fn(jnp.asarray(x)))
    assert g.data_layout == "NHWC" and g.input_shape == g.model_input_shape == (8, 8, 8)
    assert _rel(G.reference(g, x), want) < 1e-12
    assert _rel(G.reference(g, x.transpose(0, 3, 1, 2)), want) > 1e-2  # the old, channel-first reading is wrong

    sim = SlotSimulator(small_params(10, 7), slots=512)
    net = compile(g, sim, calibration=x)
    assert net.data_layout == "NHWC" and net.input_shape == (8, 8, 8)
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    assert _rel(out, want) < 1e-9
    one = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x[1])))  # one image
    assert _rel(one, want[1]) < 1e-9
    assert _rel(infer(net, sim, x, batch=2).logits, want) < 1e-9
    # the calibration was read NHWC too: its bound is the NHWC batch's, and the transposed batch compiles to other
    # bounds for the values after the convolution
    assert net.input_bound == pytest.approx(1.2 * np.max(np.abs(x)))
    other = compile(g, sim, calibration=x.transpose(0, 3, 1, 2))
    assert other.bounds != net.bounds


def test_a_channel_axis_in_the_wrong_place_is_named():
    rng = np.random.default_rng(1)
    fn = _cnn(rng, 3)
    x = rng.normal(size=(2, 8, 8, 3))
    with jax.enable_x64(True):
        g = from_jax(fn, x[:1])
    nchw = x.transpose(0, 3, 1, 2)
    move_last = r"NHWC model expecting \(B, H, W, C\) = \(B, 8, 8, 3\).*move the channel axis last " \
                r"\(x\.transpose\(0, 2, 3, 1\)\)"
    with pytest.raises(ShapeError, match="a graph's input: got shape \\(2, 3, 8, 8\\) .*" + move_last):
        G.reference(g, nchw)
    with pytest.raises(ShapeError, match=r"move the channel axis last \(x\.transpose\(1, 2, 0\)\)"):
        G.reference(g, nchw[0])
    sim = SlotSimulator(small_params(10, 7), slots=256)
    with pytest.raises(ShapeError, match="calibration data: .*" + move_last):
        compile(g, sim, calibration=nchw)
    net = compile(g, sim, calibration=x)
    with pytest.raises(ShapeError, match="the network's input: .*" + move_last):
        net.encrypt_input(sim, None, nchw)
    with pytest.raises(ShapeError, match="infer's images: .*" + move_last):
        infer(net, sim, nchw)
    with pytest.raises(ParameterError, match=r"add the batch axis"):
        infer(net, sim, x[0])
    # a shape that no transpose fixes: the layout expected, no axis to move
    with pytest.raises(ShapeError, match=r"expecting \(B, H, W, C\) = \(B, 8, 8, 3\)") as err:
        net.encrypt_input(sim, None, np.zeros((2, 8, 7, 3)))
    assert "move" not in str(err.value)

    # an NCHW graph (hand-built, or from_jax(..., input_layout="NCHW")) fed NHWC images: move it first
    h = G.sequential((3, 8, 8), [G.GlobalAvgPool(), G.Dense(rng.normal(size=(2, 3)), None)])
    assert h.data_layout == "NCHW"
    with pytest.raises(ShapeError, match=r"NCHW model expecting \(B, C, H, W\) = \(B, 3, 8, 8\).*move the channel "
                                         r"axis first \(x\.transpose\(0, 3, 1, 2\)\)"):
        G.reference(h, x)
    np.testing.assert_allclose(G.reference(h, nchw), G.reference(G.sequential(
        (3, 8, 8), [G.GlobalAvgPool(), h.nodes[-1].layer], data_layout="NHWC"), x), rtol=1e-13)


def test_layout_is_recorded_and_checked():
    rng = np.random.default_rng(2)
    w = rng.normal(size=(2, 3, 3, 3))

    def nchw_fn(x):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return jnp.mean(y, axis=(2, 3))

    x = rng.normal(size=(2, 3, 6, 6))
    with jax.enable_x64(True):
        g = from_jax(nchw_fn, x[:1], input_layout="NCHW")
        want = np.asarray(nchw_fn(jnp.asarray(x)))
    assert g.data_layout == "NCHW" and g.model_input_shape == (3, 6, 6)
    assert _rel(G.reference(g, x), want) < 1e-12
    v = G.sequential((5,), [G.Dense(rng.normal(size=(2, 5)), None)], data_layout="NHWC")  # vectors: no layout
    u = G.sequential((5,), [v.nodes[1].layer])
    np.testing.assert_array_equal(G.reference(v, np.ones((3, 5))), G.reference(u, np.ones((3, 5))))
    with pytest.raises(ShapeError, match=r"vectors \(B, 5\)"):
        G.reference(v, np.ones((3, 4)))
    with pytest.raises(ParameterError, match="'NCHW' .* or 'NHWC'"):
        G.Graph(g.nodes, "NWHC")
    with pytest.raises(ParameterError, match="input_layout must be 'NHWC' or 'NCHW'"):
        from_jax(nchw_fn, x[:1], input_layout="CHW")


def test_helpers():
    assert model_shape((3, 32, 32), "NHWC") == (32, 32, 3) and model_shape((3, 32, 32), "NCHW") == (3, 32, 32)
    assert model_shape((10,), "NHWC") == (10,)
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)  # channel-first
    nhwc = to_layout(x, "NHWC")
    assert nhwc.shape == (2, 4, 5, 3) and to_layout(x[0], "NHWC").shape == (4, 5, 3)
    back, single = to_channel_first(nhwc, (3, 4, 5), "NHWC")
    assert not single and np.array_equal(back, x)
    back, single = to_channel_first(nhwc[1], (3, 4, 5), "NHWC")
    assert single and np.array_equal(back[0], x[1])
    assert np.array_equal(to_layout(x, "NCHW"), x)
