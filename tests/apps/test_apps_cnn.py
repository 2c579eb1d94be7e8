"""hemx.apps.cnn: plaintext model, the hemx.nn network of it (interleaved images) and encrypted inference.

The layout tests run the compiled network on cleartext slot vectors (hemx.circuits.SlotSimulator: rotations as
``np.roll``) and compare with an independent loop-based forward pass; the encrypted tests run one ciphertext of
test images on a small, insecure ring (N = 2^11, allowed in tests only) with a seeded sampler.
"""

from __future__ import annotations

import functools
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import hemx
from hemx.apps import cnn
from hemx.circuits import SlotSimulator
from hemx.demo import workloads
from hemx.ckks import InsecureParametersWarning, Sampler
from hemx.errors import (
    LevelError,
    MissingKeyError,
    ParameterError,
    SerializationError,
    ShapeError,
)

from tests.helpers.ckks_helpers import FAST_NTT, INSECURE, check_error, small_params

TEST_LOG_N = 11  # 1024 slots: 16 images per ciphertext


@functools.lru_cache(maxsize=None)
def digits():
    return cnn.digits_split()


def random_model(rng: np.random.Generator, channels: int, hidden: int) -> cnn.CNNModel:
    return cnn.CNNModel(
        conv_w=rng.normal(0, 0.5, (channels, 3, 3)),
        conv_b=rng.normal(0, 0.1, channels),
        fc1_w=rng.normal(0, 0.3, (hidden, channels, 3, 3)),
        fc1_b=rng.normal(0, 0.1, hidden),
        fc2_w=rng.normal(0, 0.3, (10, hidden)),
        fc2_b=rng.normal(0, 0.1, 10),
    )


def loop_forward(model: cnn.CNNModel, images: np.ndarray) -> np.ndarray:
    """Independent reference: the CNN written with explicit loops (float64)."""
    out = np.zeros((len(images), 10))
    for n, image in enumerate(images):
        x = image / 16.0
        pooled = np.zeros((model.channels, 3, 3))
        for c in range(model.channels):
            conv = np.zeros((6, 6))
            for i in range(6):
                for j in range(6):
                    conv[i, j] = np.sum(x[i : i + 3, j : j + 3] * model.conv_w[c]) + model.conv_b[c]
            act = conv ** 2
            for i in range(3):
                for j in range(3):
                    pooled[c, i, j] = act[2 * i : 2 * i + 2, 2 * j : 2 * j + 2].mean()
        hidden = np.array([np.sum(model.fc1_w[h] * pooled) + model.fc1_b[h] for h in range(model.hidden)]) ** 2
        out[n] = model.fc2_w @ hidden + model.fc2_b
    return out


# ------------------------------------------------------------------------------------------------ plaintext model


def test_bundled_model_accuracy_and_bounds():
    model = cnn.load_model()
    _, x_test, _, y_test = digits()
    assert (model.channels, model.hidden) == (4, 32)
    assert len(x_test) == 360
    accuracy = np.mean(cnn.predict(model, x_test) == y_test)
    assert accuracy >= 0.95, accuracy
    assert cnn.value_bounds(model)[-1] == pytest.approx(cnn.OUTPUT_BOUND, rel=1e-12)
    # the bound really bounds: every test logit (and the extreme images) lies inside it
    extremes = np.stack([np.zeros((8, 8)), np.full((8, 8), 16.0)])
    logits = cnn.plaintext_forward(model, np.concatenate([x_test, extremes]))
    assert np.abs(logits).max() <= cnn.OUTPUT_BOUND


def test_plaintext_forward_matches_loops():
    rng = np.random.default_rng(3)
    _, x_test, _, _ = digits()
    for model in (cnn.load_model(), random_model(rng, 2, 7)):
        want = loop_forward(model, x_test[:12])
        np.testing.assert_allclose(cnn.plaintext_forward(model, x_test[:12]), want, rtol=1e-12, atol=1e-12)
        # flat (n, 64) images are accepted too
        np.testing.assert_allclose(cnn.plaintext_forward(model, x_test[:12].reshape(12, 64)), want, rtol=1e-12,
                                   atol=1e-12)


def test_train_model_small_run_is_deterministic_and_normalized():
    x_train, x_test, y_train, y_test = digits()
    a = cnn.train_model(channels=2, hidden=12, steps=150, seed=5)
    b = cnn.train_model(channels=2, hidden=12, steps=150, seed=5)
    for name, value in a.as_dict().items():
        np.testing.assert_array_equal(value, b.as_dict()[name])
    assert cnn.value_bounds(a)[-1] == pytest.approx(cnn.OUTPUT_BOUND)
    assert np.mean(cnn.predict(a, x_test) == y_test) > 0.8  # 150 steps; the bundled model trains 2000
    with pytest.raises(ParameterError):
        cnn.train_model(hidden=65)
    with pytest.raises(ParameterError):
        cnn.train_model(channels=0)
    with pytest.raises(ShapeError):
        cnn.train_model(images=x_train[:10], labels=y_train[:9], steps=1)


def test_save_load_roundtrip_and_bad_files(tmp_path):
    model = cnn.load_model()
    path = tmp_path / "w.npz"
    cnn.save_model(model, path)
    back = cnn.load_model(path)
    for name, value in model.as_dict().items():
        np.testing.assert_array_equal(back.as_dict()[name], value)
    with pytest.raises(SerializationError):
        cnn.load_model(tmp_path / "missing.npz")
    np.savez(tmp_path / "partial.npz", format_version=np.array(1), conv_w=model.conv_w)
    with pytest.raises(SerializationError):
        cnn.load_model(tmp_path / "partial.npz")
    np.savez(tmp_path / "version.npz", format_version=np.array(99), **model.as_dict())
    with pytest.raises(SerializationError):
        cnn.load_model(tmp_path / "version.npz")
    np.savez(tmp_path / "objects.npz", format_version=np.array(1), **{**model.as_dict(),
                                                                      "conv_b": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(SerializationError):  # pickled objects are refused, never unpickled
        cnn.load_model(tmp_path / "objects.npz")
    with open(tmp_path / "array.npy", "wb") as f:
        np.save(f, np.zeros(3))
    with pytest.raises(SerializationError):
        cnn.load_model(tmp_path / "array.npy")
    (tmp_path / "garbage.npz").write_bytes(b"not a zip file")
    with pytest.raises(SerializationError):
        cnn.load_model(tmp_path / "garbage.npz")
    np.savez(tmp_path / "shape.npz", format_version=np.array(1), **{**model.as_dict(), "fc2_b": np.zeros(3)})
    with pytest.raises(SerializationError):
        cnn.load_model(tmp_path / "shape.npz")


def test_model_and_image_validation():
    model = cnn.load_model()
    weights = model.as_dict()
    with pytest.raises(ShapeError):
        cnn.CNNModel(**{**weights, "fc1_b": np.zeros(5)})
    with pytest.raises(ShapeError):
        cnn.CNNModel(**{**weights, "conv_w": np.zeros((4, 5, 5))})
    with pytest.raises(ParameterError):
        cnn.CNNModel(**{**weights, "fc2_b": np.full(10, np.nan)})
    with pytest.raises(ShapeError):
        cnn.CNNModel(**{**weights, "conv_b": np.zeros(4, dtype=complex)})
    with pytest.raises(ShapeError):
        cnn.plaintext_forward(model, np.zeros((3, 7, 8)))
    with pytest.raises(ShapeError):
        cnn.plaintext_forward(model, np.zeros((0, 8, 8)))
    with pytest.raises(ParameterError):
        cnn.plaintext_forward(model, np.full((1, 8, 8), 17.0))
    with pytest.raises(ParameterError):
        cnn.plaintext_forward(model, np.full((1, 8, 8), -1.0))
    with pytest.raises(ParameterError):
        cnn.plaintext_forward(model, np.full((1, 8, 8), np.nan))
    with pytest.raises(ParameterError):
        cnn.plaintext_forward("model", np.zeros((1, 8, 8)))


# ------------------------------------------------------------------------------------ layout (cleartext simulator)


def exact_network(model: cnn.CNNModel, slots: int):
    """The compiled network and a cleartext simulator (exact, levels counted) with ``slots`` slots."""
    sim = SlotSimulator(None, slots=slots, max_level=cnn.DEPTH)
    return cnn.compile_network(model, sim), sim


def run_exact(model: cnn.CNNModel, slots: int, images: np.ndarray) -> np.ndarray:
    net, sim = exact_network(model, slots)
    packed = net.pack_input(images[:, None])
    per_ct = net.images_per_ciphertext
    assert packed.shape == (1, -(-len(images) // per_ct), slots)
    out = net.run(sim, None, net.encrypt_input(sim, None, images[:, None]))
    assert out.level == 0  # the five levels, no more
    return net.decrypt_output(sim, None, out)[:len(images)]


@pytest.mark.parametrize("slots", [64, 256, 8192])
def test_simulated_network_equals_plaintext_bundled(slots):
    model = cnn.load_model()
    images = digits()[1][:100]  # 100 images: a partial last ciphertext at every slot count above 64
    np.testing.assert_allclose(run_exact(model, slots, images), loop_forward(model, images), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("channels, hidden", [(1, 1), (3, 10), (2, 64), (5, 33)])
def test_simulated_network_equals_plaintext_random_models(channels, hidden):
    rng = np.random.default_rng(channels * 100 + hidden)
    model = random_model(rng, channels, hidden)
    images = rng.integers(0, 17, (40, 8, 8)).astype(float)
    np.testing.assert_allclose(run_exact(model, 512, images), loop_forward(model, images), rtol=1e-10, atol=1e-10)


def test_pack_and_decode_slot_positions():
    """Slot ``p * B + b`` of ciphertext ``c`` holds pixel ``p`` (raw: the 1/16 is in the kernels) of image
    ``c * B + b``; logit ``k`` of that image comes back from slot ``k * B + b``."""
    net, _ = exact_network(cnn.load_model(), 256)  # B = 4 images per ciphertext
    assert net.images_per_ciphertext == 4
    rng = np.random.default_rng(0)
    images = rng.integers(0, 17, (6, 8, 8)).astype(float)
    packed = net.pack_input(images[:, None])
    assert packed.shape == (1, 2, 256)
    for n in range(8):
        ct, b = divmod(n, 4)
        for p in range(64):
            want = images[n].reshape(-1)[p] if n < 6 else 0.0
            assert packed[0, ct, p * 4 + b] == want
    slots = rng.normal(size=(1, 2, 256))
    logits = net.decode_output(slots)
    assert logits.shape == (8, 10)  # every image slot of the two ciphertexts (the caller keeps the first n)
    for n in range(8):
        ct, b = divmod(n, 4)
        np.testing.assert_array_equal(logits[n], [slots[0, ct, k * 4 + b] for k in range(10)])
    with pytest.raises(ShapeError):
        net.decode_output(np.zeros((2, 128)))
    with pytest.raises(ShapeError):
        net.decode_output(np.zeros((1, 2, 3, 256)))


@pytest.mark.parametrize("fast", [False, True])
def test_simulated_network_scale_accounting(fast):
    """With the recommended parameters the simulator follows CKKS's scales (real primes): every addition meets
    equal scales, the five layers take the input from level 5 to 0, the rotations are exactly the compiled keys,
    the ciphertext products those of the plan, and the logits are those of the independent forward pass."""
    model = cnn.load_model()
    params = cnn.recommended_parameters(fast=fast)
    net = cnn.compile_network(model, params)
    sim = SlotSimulator(params, slots=net.plan.slots)
    images = digits()[1][:200]
    out = net.run(sim, None, net.encrypt_input(sim, None, images[:, None]))
    assert out.level == 0 and abs(np.log2(out.scale) - params.log_scale) < 0.5
    assert sim.rotations_used == set(net.rotations) and sim.products == net.plan.ct_mults == 5
    got = net.decrypt_output(sim, None, out)[:len(images)]
    np.testing.assert_allclose(got, loop_forward(model, images), rtol=1e-10, atol=1e-10)


def test_network_rotations_and_cost():
    model = cnn.load_model()
    net = cnn.compile_network(model, cnn.recommended_parameters())
    b = net.images_per_ciphertext
    assert b == 128 and net.plan.slots == 8192
    assert all(r % b == 0 and 0 < r < 8192 for r in net.rotations)
    conv_offsets = {dy * 8 + dx for dy in range(3) for dx in range(3)} - {0}
    assert {o * b for o in conv_offsets} <= set(net.rotations)  # the convolution's window, per image
    assert len(net.rotations) == 25  # as many keys as the old hand-written circuit
    # key switches per ciphertext as the old circuit's BSGS plan (baby steps 4 and 8): rotations conv 8, fc1 27
    # (12 babies + 15 giants), fc2 12 (7 + 5), and one relinearization per squared ciphertext (4 + 1): 52
    rotations = {s.output: s.key_switches for s in net.plan.steps if s.key_switches}
    assert rotations == {"conv": 8, "fc1": 27, "fc2": 12}
    assert net.plan.key_switches + net.plan.ct_mults == 52
    assert net.plan.input_level == cnn.DEPTH and net.plan.steps[-1].level_out == 0 and net.plan.bootstraps == 0
    with pytest.raises(ParameterError):  # fewer slots than one image's 64
        cnn.compile_network(model, SlotSimulator(None, slots=32, max_level=cnn.DEPTH))
    with pytest.raises(ParameterError):
        cnn.compile_network(model, "params")
    with pytest.raises(ParameterError):
        cnn.compile_network("model", cnn.recommended_parameters())
    with pytest.raises(LevelError):  # too few levels for the five layers
        cnn.compile_network(model, SlotSimulator(None, slots=64, max_level=cnn.DEPTH - 1))


def test_depth_and_layers_come_from_the_plan():
    assert cnn.LAYERS == ("conv", "square1", "fc1", "square2", "fc2") and cnn.DEPTH == 5
    assert cnn.network_layers(random_model(np.random.default_rng(2), 3, 7)) == cnn.LAYERS


def test_recommended_parameters_are_secure_and_fit():
    model = cnn.load_model()
    for fast in (False, True):
        params = cnn.recommended_parameters(fast=fast)
        assert params.secure and not params.allow_insecure
        assert params.n == 2 ** 14 and params.max_level == cnn.DEPTH
        cnn.check_capacity(params, model)
    with pytest.raises(ParameterError):
        cnn.recommended_parameters(log_n=13)
    loud = cnn.CNNModel(**{**model.as_dict(), "fc2_w": model.fc2_w * 100, "fc2_b": model.fc2_b * 100})
    with pytest.raises(ParameterError, match="fc2"):
        cnn.check_capacity(cnn.recommended_parameters(), loud)
    with pytest.raises(LevelError):
        cnn.check_capacity(hemx.CKKSParameters.preset("secure_13"), model)


# ------------------------------------------------------------------------------------------------ encrypted


@functools.lru_cache(maxsize=None)
def small_setup():
    """Context (N = 2^11, 5 levels of two 24-bit primes, insecure), keys, model, compiled network: built once."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = cnn.match_scale(small_params(TEST_LOG_N, cnn.DEPTH, prime_bits=24))
    ctx = hemx.Context(params, ntt=FAST_NTT, sampler=Sampler.insecure_for_tests(11))
    model = cnn.load_model()
    net = cnn.compile_network(model, params)
    keys = ctx.keygen(rotations=net.rotations)
    return params, ctx, keys, model, net


@functools.lru_cache(maxsize=None)
def encrypted_run():
    """One ciphertext of 16 test images through the network; the plaintexts it encoded are kept."""
    params, ctx, keys, model, net = small_setup()
    images = digits()[1][: net.images_per_ciphertext]
    ct = net.encrypt_input(ctx, keys.public, images[:, None])
    steps, kept = [], {}
    out = net.run(ctx, keys.evaluation_keys(), ct, plaintexts=kept,
                  progress=lambda done, total, step: steps.append(step))
    return images, ct, out, steps, kept


@pytest.mark.filterwarnings(INSECURE)
def test_encrypted_inference_matches_plaintext():
    params, ctx, keys, model, net = small_setup()
    images, ct, out, steps, _ = encrypted_run()
    assert net.images_per_ciphertext == 16
    assert ct.batch_shape == (1, 1) and out.batch_shape == (1, 1) and out.level == 0  # (input cts, batch)
    assert [s.output for s in steps if s.level_out < s.level_in] == list(cnn.LAYERS)
    logits = net.decrypt_output(ctx, keys.secret, out)[:len(images)]
    want = loop_forward(model, images)
    error = np.max(np.abs(logits - want))
    check_error(f"cnn {len(images)} images, max |logit error|", error, "cnn/logits")
    np.testing.assert_array_equal(np.argmax(logits, axis=1), np.argmax(want, axis=1))


@pytest.mark.filterwarnings(INSECURE)
def test_encrypted_single_ciphertext_and_reused_encoding():
    """A ciphertext without the batch axis, reusing the plaintexts the first run encoded: the same computation,
    bit for bit."""
    params, ctx, keys, model, net = small_setup()
    images, ct, out, _, kept = encrypted_run()
    assert kept and all(kept.values())
    single = ct.replace(data=ct.data[:, 0])
    again = net.run(ctx, keys.evaluation_keys(), single, plaintexts=kept)
    assert again.batch_shape == (1,)
    np.testing.assert_array_equal(np.asarray(again.data), np.asarray(out.data[:, 0]))


@pytest.mark.filterwarnings(INSECURE)
def test_encrypted_inference_errors():
    params, ctx, keys, model, net = small_setup()
    _, ct, _, _, _ = encrypted_run()
    server = keys.evaluation_keys()
    with pytest.raises(LevelError):
        net.run(ctx, server, ctx.drop_level(ct, cnn.DEPTH - 1))
    with pytest.raises(ShapeError):  # two input ciphertexts where the network takes one
        net.run(ctx, server, ct.replace(data=jnp.concatenate([ct.data, ct.data])))
    with pytest.raises(ParameterError):  # compiled for other parameters (more slots)
        cnn.compile_network(model, cnn.recommended_parameters()).run(ctx, server, ct)
    with pytest.raises(ParameterError):
        net.run(ctx, server, ct, plaintexts=[])
    no_rotations = ctx.keygen(rotations=[])
    with pytest.raises(MissingKeyError):
        net.run(ctx, no_rotations.evaluation_keys(), net.encrypt_input(ctx, no_rotations.public, digits()[1][:1, None]))


@pytest.mark.filterwarnings(INSECURE)
def test_demo_workload_on_a_small_ring():
    """The whole client/server flow (hemx demo cnn) on one ciphertext of 16 images, with its progress stages."""
    params, _, _, _, net = small_setup()
    stages = []
    report = workloads.run_cnn(num_images=net.images_per_ciphertext, params=params, ntt=FAST_NTT,
                               sampler=Sampler.insecure_for_tests(12), warm_up=False,
                               update=lambda stage, done, total: stages.append((stage, done, total)))
    assert report["images"] == report["images_per_ciphertext"] == 16 and report["ciphertexts"] == 1
    assert report["agreement"] == 1.0
    check_error("cnn demo logits", report["max_abs_logit_error"], "cnn/demo_logits")
    assert report["accuracy_encrypted"] == report["accuracy_plaintext"]
    done = [s for s, d, total in stages if d == total]
    assert done == ["model", "client: keygen", "server: set-up", "client: encrypt", "server: inference",
                    "client: decrypt"]
    assert report["rotation_keys"] == len(net.rotations) and len(report["batch_seconds"]) == 1
    with pytest.raises(ParameterError):
        workloads.run_cnn(num_images=0, params=params)


# ------------------------------------------------------------------------------------- the hemx.nn network (demo)


@pytest.mark.parametrize("channels, hidden", [(None, None), (3, 10), (5, 33)])
def test_network_graph_equals_plaintext(channels, hidden):
    """The graph (1/16 folded into the kernels, pooling into fc1) computes the model, bundled and random."""
    from hemx.nn import graph as G

    model = cnn.load_model() if channels is None else random_model(np.random.default_rng(channels), channels, hidden)
    images = digits()[1][:20]
    g = cnn.network_graph(model)
    np.testing.assert_allclose(G.reference(g, images[:, None]), loop_forward(model, images), rtol=1e-12, atol=1e-12)
    with pytest.raises(ParameterError):
        cnn.network_graph("model")


def test_compiled_network_on_the_simulator_all_test_images():
    """cnn_14 (8192 slots): 128 interleaved images per ciphertext, depth 5 (the parameters' levels), and every
    test image's logits equal the plaintext model's (accuracy 96.67 %)."""
    model, params = cnn.load_model(), cnn.recommended_parameters()
    net = cnn.compile_network(model, params)
    assert net.images_per_ciphertext == 128 and net.plan.slots == 8192 and net.plan.input_level == 5
    assert net.plan.steps[-1].level_out == 0 and net.plan.bootstraps == 0
    _, x_test, _, y_test = digits()
    sim = SlotSimulator(params, slots=net.plan.slots)
    ct = net.encrypt_input(sim, None, x_test[:, None])
    assert ct.values.shape == (1, 3, 8192)  # 360 images in 3 ciphertexts
    logits = net.decrypt_output(sim, None, net.run(sim, None, ct))[:len(x_test)]
    want = cnn.plaintext_forward(model, x_test)
    np.testing.assert_allclose(logits, want, rtol=1e-9, atol=1e-9)
    assert np.mean(np.argmax(logits, axis=1) == y_test) == np.mean(np.argmax(want, axis=1) == y_test)
