"""hemx.nn interleaved images (``compile(..., images_per_ciphertext=B)``): B images per ciphertext, slot ``s B + b``
holding slot ``s`` of image ``b``; every rotation of the single-image plan times B, every plaintext repeated B times.
Checked against the float64 reference on the slot simulator (exact, and with parameters), on ciphertexts of a small
insecure ring, with a ReLU and a bootstrap on the simulator, and B = 1 against the default plan."""

from __future__ import annotations

import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.errors import ParameterError, ShapeError
from hemx.nn import graph as G
from hemx.nn import packing
from hemx.nn.compiler import compile
from hemx.nn.run import InterleavedEvaluator

from tests.helpers.ckks_helpers import INSECURE, context_and_keys, small_params
from tests.nn._models import residual_graph

pytestmark = pytest.mark.filterwarnings(INSECURE)
RTOL = 1e-9
ENCRYPTED_RTOL = 1e-6


def _rel(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def _small_cnn(rng, *, channels: int = 3, side: int = 8, classes: int = 4) -> G.Graph:
    """conv 3x3 valid + bias -> square (x * x) -> avgpool 2x2 -> flatten -> dense -> square -> dense (the digits
    CNN's shape): depth 6."""
    conv = G.Conv2D(rng.normal(size=(channels, 1, 3, 3)) * 0.5, rng.normal(size=channels) * 0.1, 1, ((0, 0), (0, 0)))
    pooled = channels * ((side - 2) // 2) ** 2
    layers = [("conv", conv, "input"), ("sq1", G.Multiply(), "conv", "conv"), ("pool", G.AvgPool2D(2, 2), "sq1"),
              ("flat", G.Flatten(), "pool"),
              ("fc1", G.Dense(rng.normal(size=(6, pooled)) * 0.3, rng.normal(size=6) * 0.1), "flat"),
              ("sq2", G.Multiply(), "fc1", "fc1"),
              ("fc2", G.Dense(rng.normal(size=(classes, 6)) * 0.3, rng.normal(size=classes) * 0.1), "sq2")]
    return G.Graph((G.Node("input", G.Input((1, side, side))),)
                   + tuple(G.Node(name, layer, tuple(ins)) for name, layer, *ins in layers))


def test_interleave_round_trip_and_slot_order():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(2, 5, 8))  # 2 ciphertexts, 5 images, 8 slots each
    packed = packing.interleave(v, 4)
    assert packed.shape == (2, 2, 32)
    assert packed[1, 0, 3 * 4 + 2] == v[1, 2, 3] and packed[0, 1, 7 * 4 + 0] == v[0, 4, 7]
    assert not packed[:, 1, 1::4].any()  # images 5..7: padding zeros
    back = packing.deinterleave(packed, 4)
    assert back.shape == (2, 8, 8) and np.array_equal(back[:, :5], v)
    assert np.array_equal(packing.repeat_slots(np.arange(3.0), 2), [0, 0, 1, 1, 2, 2])
    assert packing.interleave(v[:, 0], 4).shape == (2, 32)


@pytest.mark.parametrize("images", [2, 4])
def test_small_cnn_on_the_simulator(images):
    rng = np.random.default_rng(1)
    g = _small_cnn(rng)
    x = rng.normal(size=(2 * images - 1, 1, 8, 8))  # the last ciphertext has one empty image
    params = small_params(10, 7)
    sim = SlotSimulator(params, slots=64 * images)
    net = compile(g, sim, calibration=x, images_per_ciphertext=images)
    single = compile(g, SlotSimulator(params, slots=64), calibration=x)
    assert net.images_per_ciphertext == images and net.plan.slots == 64 * images
    assert net.plan.rotations == tuple(sorted(r * images for r in single.plan.rotations))
    assert net.plan.rotation_levels == {r * images: v for r, v in single.plan.rotation_levels.items()}
    assert (net.plan.key_switches, net.plan.plaintext_mults) == (single.plan.key_switches, single.plan.plaintext_mults)
    ct = net.encrypt_input(sim, None, x)
    assert ct.values.shape == (net.input_layout.num_cts, 2, 64 * images)
    out = net.run(sim, None, ct)
    got = net.decrypt_output(sim, None, out)
    assert got.shape == (2 * images, 4)
    assert _rel(got[:len(x)], G.reference(g, x)) < RTOL
    assert {r % sim.slots for r in sim.rotations_used} <= set(net.rotations)


def test_residual_poly_network_with_parameters():
    """Conv + bn, polynomial activation, conv, residual add, global average pool, dense: 2 images per ciphertext."""
    rng = np.random.default_rng(2)
    g = residual_graph(rng, act=(0.1, 0.5, 0.2))
    x = rng.normal(size=(4, 2, 8, 8))
    sim = SlotSimulator(small_params(10, 7), slots=512)
    net = compile(g, sim, calibration=x, images_per_ciphertext=2)
    out = net.run(sim, None, net.encrypt_input(sim, None, x))
    assert _rel(net.decrypt_output(sim, None, out), G.reference(g, x)) < RTOL


def test_relu_with_a_bootstrap_on_the_simulator():
    """A ReLU (its affine shift, sign stages, product) and a bootstrap run on interleaved images as on one."""
    rng = np.random.default_rng(3)
    conv = G.Conv2D(rng.normal(size=(2, 2, 3, 3)) * 0.3, rng.normal(size=2) * 0.1, 1, ((1, 1), (1, 1)))
    g = G.sequential((2, 4, 4), [conv, G.Activation("relu"), G.Activation("relu"), G.GlobalAvgPool(),
                                 G.Dense(rng.normal(size=(3, 2)), None)])  # 2 x 16 ReLU levels: a bootstrap
    x = rng.normal(size=(4, 2, 4, 4))
    params = small_params(10, 20)
    net1 = compile(g, SlotSimulator(params, slots=64), calibration=x, bootstrap=True, bootstrap_level=12)
    sim = SlotSimulator(params, slots=256)
    net = compile(g, sim, calibration=x, bootstrap=True, bootstrap_level=12, images_per_ciphertext=4)
    assert net.plan.bootstraps == net1.plan.bootstraps >= 1
    got = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    sim1 = SlotSimulator(params, slots=64)
    want = net1.decrypt_output(sim1, None, net1.run(sim1, None, net1.encrypt_input(sim1, None, x)))
    assert _rel(got, want) < RTOL


def test_encrypted_small_cnn_small_ring():
    rng = np.random.default_rng(4)
    g = _small_cnn(rng)
    x = rng.normal(size=(16, 1, 8, 8)) * 0.3  # logits below 2: within level 0's modulus at scale 2^56
    params = small_params(11, 6)  # 1024 slots: 16 images of 64 slots per ciphertext
    net = compile(g, params, calibration=x, images_per_ciphertext=16)
    ctx, keys = context_and_keys(11, 6, rotations=net.rotations)
    ct = net.encrypt_input(ctx, keys, x)
    assert ct.batch_shape == (net.input_layout.num_cts, 1)
    got = net.decrypt_output(ctx, keys, net.run(ctx, keys, ct))
    err = _rel(got, G.reference(g, x))
    print(f"encrypted CNN, 16 images per ciphertext, N=2^11: relative error {err:.3g}")
    assert err < ENCRYPTED_RTOL


def test_default_is_one_image_per_ciphertext():
    rng = np.random.default_rng(5)
    g = residual_graph(rng, act=(0.1, 0.5, 0.2))
    x = rng.normal(size=(2, 2, 8, 8))
    sim = SlotSimulator(small_params(10, 7), slots=256)
    a = compile(g, sim, calibration=x)
    b = compile(g, sim, calibration=x, images_per_ciphertext=1)
    assert a.images_per_ciphertext == b.images_per_ciphertext == 1 and a.plan.slots == b.plan.slots == 256
    assert a.plan.summary() == b.plan.summary() and a.plan.rotation_levels == b.plan.rotation_levels
    assert (a.plan.rotations, a.plan.key_count, a.plan.key_bytes) == (b.plan.rotations, b.plan.key_count,
                                                                       b.plan.key_bytes)
    for sa, sb in zip(a.plan.steps, b.plan.steps):
        assert sa.layout.same_positions(sb.layout) and sa.rotations == sb.rotations
    ra = a.decrypt_output(sim, None, a.run(sim, None, a.encrypt_input(sim, None, x)))
    rb = b.decrypt_output(sim, None, b.run(sim, None, b.encrypt_input(sim, None, x)))
    assert np.array_equal(ra, rb)
    assert np.array_equal(a.encrypt_input(sim, None, x).values, a.input_layout.pack(x))


def test_bad_images_per_ciphertext():
    rng = np.random.default_rng(6)
    g = _small_cnn(rng)
    sim = SlotSimulator(small_params(10, 7), slots=256)
    for bad in (0, 3, -2, 1.5, True, 512):
        with pytest.raises(ParameterError, match="images_per_ciphertext"):
            compile(g, sim, images_per_ciphertext=bad)
    with pytest.raises(ParameterError, match=r"images_per_ciphertext <= 4"):
        compile(g, sim, images_per_ciphertext=8)  # 32 slots per image, an 8x8 grid needs 64
    with pytest.raises(ParameterError, match="power of two"):
        InterleavedEvaluator(sim, 3)
    with pytest.raises(ShapeError):
        packing.deinterleave(np.zeros((1, 2, 6)), 4)
