"""hemx.nn.packing: every packed linear layer on the exact SlotSimulator against jax.lax.conv_general_dilated and
the float64 reference of hemx.nn.graph (relative error 1e-9: the exact simulator only rounds in float64)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.errors import LevelError, ParameterError, ShapeError
from hemx.nn import graph as G
from hemx.nn import packing

RTOL = 1e-9


def _run(op, layout, x, *, levels=2):
    """Pack x, apply op on an exact simulator, unpack: (B, *out_shape)."""
    sim = SlotSimulator(None, slots=layout.slots, max_level=levels)
    cts = [sim.encrypt(v) for v in layout.pack(x)]
    outs = op.apply(sim, cts)
    assert all(o.level == levels - 1 for o in outs)
    assert {s % layout.slots for s in sim.rotations_used} <= set(op.rotations)
    return op.out_layout.unpack(np.stack([o.values for o in outs])), sim


def _lax_conv(x, w, b, stride, padding):
    y = jax.lax.conv_general_dilated(jax.numpy.asarray(x), jax.numpy.asarray(w), (stride, stride), padding,
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    y = np.asarray(y)
    return y if b is None else y + b[None, :, None, None]


def _rel(got, want):
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))


CONV_CASES = [
    # c_in, c_out, h, w, k, stride, padding, slots
    (3, 5, 8, 8, 3, 1, ((1, 1), (1, 1)), 256),  # 2 output ciphertexts
    (4, 6, 7, 6, 3, 2, ((1, 1), (1, 1)), 128),  # odd sizes, stride 2, 2 -> 3 ciphertexts
    (2, 3, 8, 8, 1, 2, ((0, 0), (0, 0)), 64),  # 1x1 stride-2 shortcut, one block per ciphertext
    (3, 4, 9, 9, 5, 1, ((2, 1), (0, 2)), 512),  # 5x5, asymmetric padding, 16x16 grid
    (16, 8, 8, 8, 3, 2, ((1, 1), (1, 1)), 1024),  # C_in > C_out, 16 channels in one ciphertext
    (2, 2, 6, 6, 3, 1, ((0, 0), (0, 0)), 64),  # valid convolution
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_matches_lax_and_reference(case):
    c_in, c_out, h, w, k, stride, padding, slots = case
    rng = np.random.default_rng(sum(case[:6]))
    weight, bias = rng.normal(size=(c_out, c_in, k, k)), rng.normal(size=c_out)
    x = rng.normal(size=(2, c_in, h, w))
    layout = packing.image_layout((c_in, h, w), slots)
    op = packing.conv_map(layout, weight, bias, stride, padding)
    got, _ = _run(op, layout, x)
    want = _lax_conv(x, weight, bias, stride, padding)
    assert got.shape == want.shape
    assert _rel(got, want) < RTOL
    assert _rel(got, G.reference(G.sequential((c_in, h, w), [G.Conv2D(weight, bias, stride, padding)]), x)) < RTOL
    assert op.out_layout.gap == stride and op.out_layout.clean
    assert op.plaintext_mults == sum(len(v) for v in op.structure.values())


def test_two_stride2_convs_reach_gap_4():
    """Stride 2 twice: the output sits on the input's grid at gap 4, no repacking, still exact."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(1, 3, 16, 16))
    w1, w2 = rng.normal(size=(4, 3, 3, 3)), rng.normal(size=(8, 4, 3, 3))
    pad = ((1, 1), (1, 1))
    layout = packing.image_layout((3, 16, 16), 1024)
    op1 = packing.conv_map(layout, w1, None, 2, pad)
    op2 = packing.conv_map(op1.out_layout, w2, None, 2, pad)
    sim = SlotSimulator(None, slots=1024, max_level=2)
    h = op2.apply(sim, op1.apply(sim, [sim.encrypt(v) for v in layout.pack(x)]))
    got = op2.out_layout.unpack(np.stack([v.values for v in h]))
    want = _lax_conv(_lax_conv(x, w1, None, 2, pad), w2, None, 2, pad)
    assert op2.out_layout.gap == 4 and op2.out_layout.grid == (16, 16) and got.shape == (1, 8, 4, 4)
    assert _rel(got, want) < RTOL


def test_diagonal_map_dense_matrix_is_the_conv():
    rng = np.random.default_rng(5)
    layout = packing.image_layout((2, 4, 4), 64)
    w = rng.normal(size=(3, 2, 3, 3))
    op = packing.conv_map(layout, w, None, 1, ((1, 1), (1, 1)))
    x = rng.normal(size=(2, 4, 4))
    y = op.dense() @ layout.pack(x).reshape(-1)
    want = _lax_conv(x[None], w, None, 1, ((1, 1), (1, 1)))[0]
    assert _rel(op.out_layout.unpack(y.reshape(op.out_layout.num_cts, 64)), want) < RTOL
    # outside the output positions the product is exactly zero: outputs are clean
    mask = np.ones(op.out_layout.num_cts * 64, bool)
    mask[op.out_layout.positions.reshape(-1)] = False
    assert np.all(y[mask] == 0.0)


@pytest.mark.parametrize("window,stride,side", [(2, 2, 8), (3, 1, 7), (3, 2, 9)])
def test_avgpool(window, stride, side):
    rng = np.random.default_rng(window * 10 + stride)
    x = rng.normal(size=(2, 3, side, side))
    layout = packing.image_layout((3, side, side), 256)
    op = packing.avgpool_map(layout, window, stride)
    got, _ = _run(op, layout, x)
    assert _rel(got, G.reference(G.sequential((3, side, side), [G.AvgPool2D(window, stride)]), x)) < RTOL


@pytest.mark.parametrize("shape,slots", [((4, 8, 8), 256), ((3, 5, 6), 64), ((6, 4, 4), 32)])
def test_global_avg_pool_then_dense(shape, slots):
    rng = np.random.default_rng(len(shape) + slots)
    x = rng.normal(size=(2,) + shape)
    wd, bd = rng.normal(size=(5, shape[0])), rng.normal(size=5)
    layout = packing.image_layout(shape, slots)
    gap = packing.GlobalAvgPoolOp(layout)
    dense = packing.dense_map(gap.out_layout, wd, bd)
    sim = SlotSimulator(None, slots=slots, max_level=3)
    h = dense.apply(sim, gap.apply(sim, [sim.encrypt(v) for v in layout.pack(x)]))
    got = dense.out_layout.unpack(np.stack([v.values for v in h]))
    ref = G.reference(G.sequential(shape, [G.GlobalAvgPool(), G.Dense(wd, bd)]), x)
    assert _rel(got, ref) < RTOL
    assert h[0].level == 1 and not gap.out_layout.clean
    if layout.num_cts == 1:  # inputs a block apart: the output takes that spacing, F_in + F_out - 1 diagonals at most
        assert dense.plaintext_mults <= shape[0] + 5 - 1


def test_flatten_dense_and_vector_batchnorm():
    rng = np.random.default_rng(11)
    x = rng.normal(size=(3, 2, 4, 4))
    wd, bd = rng.normal(size=(6, 32)), rng.normal(size=6)
    scale, shift = rng.uniform(0.5, 2, 6), rng.normal(size=6)
    layout = packing.image_layout((2, 4, 4), 64)
    flat = packing.Layout((32,), 64, layout.positions.reshape(-1), layout.num_cts, None, 1, True)
    dense = packing.dense_map(flat, wd, bd)
    bn = packing.channel_affine_map(dense.out_layout, scale, shift)
    sim = SlotSimulator(None, slots=64, max_level=2)
    h = bn.apply(sim, dense.apply(sim, [sim.encrypt(v) for v in layout.pack(x)]))
    got = bn.out_layout.unpack(np.stack([v.values for v in h]))
    ref = G.reference(G.sequential((2, 4, 4), [G.Flatten(), G.Dense(wd, bd), G.BatchNorm(scale, shift)]), x)
    assert _rel(got, ref) < RTOL and bn.plaintext_mults == 1 and bn.key_switches == 0


def test_image_batchnorm_is_one_diagonal():
    rng = np.random.default_rng(12)
    x = rng.normal(size=(2, 3, 4, 4))
    scale, shift = rng.uniform(0.5, 2, 3), rng.normal(size=3)
    layout = packing.image_layout((3, 4, 4), 32)  # two channels per ciphertext: 2 ciphertexts
    op = packing.channel_affine_map(layout, scale, shift)
    got, _ = _run(op, layout, x)
    assert _rel(got, G.reference(G.sequential((3, 4, 4), [G.BatchNorm(scale, shift)]), x)) < RTOL
    assert op.plaintext_mults == 2 and op.key_switches == 0


def test_layout_pack_unpack_roundtrip():
    rng = np.random.default_rng(13)
    layout = packing.image_layout((5, 3, 7), 64, gap=1)
    x = rng.normal(size=(4, 5, 3, 7))
    packed = layout.pack(x)
    assert packed.shape == (layout.num_cts, 4, 64) and layout.grid == (4, 8)
    assert np.array_equal(layout.unpack(packed), x)
    assert np.array_equal(layout.unpack(layout.pack(x[0])), x[0])
    assert np.count_nonzero(packed) == x.size  # other slots zero


def test_bad_input():
    layout = packing.image_layout((2, 4, 4), 64)
    with pytest.raises(ShapeError, match="input channels"):
        packing.conv_map(layout, np.ones((3, 5, 3, 3)), None, 1, ((1, 1), (1, 1)))
    with pytest.raises(ShapeError):
        layout.pack(np.ones((2, 4, 5)))
    with pytest.raises(ShapeError, match="vector"):
        packing.dense_map(layout, np.ones((2, 32)), None)
    with pytest.raises(ParameterError, match="does not fit"):
        packing.image_layout((1, 32, 32), 512)
    with pytest.raises(ParameterError, match="padding"):
        packing.conv_map(layout, np.ones((2, 2, 1, 1)), None, 1, ((3, 3), (0, 0)))
    with pytest.raises(ParameterError, match="all zero"):
        packing.conv_map(layout, np.zeros((2, 2, 3, 3)), None, 1, ((1, 1), (1, 1)))
    with pytest.raises(ParameterError, match="power of two"):
        packing.image_layout((1, 4, 4), 48)
    op = packing.conv_map(layout, np.ones((2, 2, 3, 3)), None, 1, ((1, 1), (1, 1)))
    sim = SlotSimulator(None, slots=64, max_level=1)
    with pytest.raises(LevelError):
        op.apply(sim, [sim.encrypt(np.zeros(64), level=0)])


def test_dense_after_a_wide_spacing_fills_one_ciphertext():
    """Features 32 slots apart (as after the last convolution of a CIFAR CNN, 1024 apart at N = 2^16) into 64
    outputs: spacing them 32 apart would take 8 ciphertexts; the map picks a spacing that fits one."""
    slots, f_in, f_out = 256, 8, 64
    layout = packing.vector_layout(f_in, slots, stride=32)
    rng = np.random.default_rng(11)
    w, b = rng.normal(size=(f_out, f_in)), rng.normal(size=f_out)
    op = packing.dense_map(layout, w, b)
    assert op.out_layout.num_cts == 1
    x = rng.normal(size=(3, f_in))
    got, _ = _run(op, layout, x)
    assert _rel(got, x @ w.T + b) < RTOL
    forced = packing.dense_map(layout, w, b, out_stride=32)  # the input's spacing, as before: 8 ciphertexts
    assert forced.out_layout.num_cts == 8
    assert _rel(_run(forced, layout, x)[0], x @ w.T + b) < RTOL
