"""hemx.apps.cnn: plaintext model, packed layout (simulated with numpy rolls) and encrypted inference.

The layout tests run the packed circuit on cleartext slot vectors (rotations as ``np.roll``) and compare with
an independent loop-based forward pass; the encrypted tests run one ciphertext of test images on a small,
insecure ring (N = 2^11, allowed in tests only) with a seeded sampler.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings

import numpy as np
import pytest

import hemx
from hemx.apps import cnn
from hemx.apps import _cnn_circuit as circuit
from hemx.apps import _cnn_layout as layout
from hemx.circuits import SlotSimulator
from hemx.ckks import InsecureParametersWarning, Sampler
from hemx.errors import (
    LevelError,
    MissingKeyError,
    ParameterError,
    SerializationError,
    ShapeError,
    SlotError,
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


# ------------------------------------------------------------------------------------------------ layout (numpy)


@pytest.mark.parametrize("slots", [64, 256, 8192])
def test_simulated_circuit_equals_plaintext_bundled(slots):
    model = cnn.load_model()
    _, x_test, _, _ = digits()
    images = x_test[:100]  # 100 images: a partial last ciphertext at every slot count
    spec = cnn.plan(model, slots)
    packed = cnn.pack_images(images, spec)
    assert packed.shape == (spec.num_ciphertexts(100), slots)
    got = cnn.unpack_logits(cnn.simulate_packed(model, spec, packed), spec, 100)
    np.testing.assert_allclose(got, loop_forward(model, images), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("channels, hidden", [(1, 1), (3, 10), (2, 64), (5, 33)])
def test_simulated_circuit_equals_plaintext_random_models(channels, hidden):
    rng = np.random.default_rng(channels * 100 + hidden)
    model = random_model(rng, channels, hidden)
    images = rng.integers(0, 17, (40, 8, 8)).astype(float)
    spec = cnn.plan(model, 512)
    got = cnn.unpack_logits(cnn.simulate_packed(model, spec, cnn.pack_images(images, spec)), spec, 40)
    np.testing.assert_allclose(got, loop_forward(model, images), rtol=1e-10, atol=1e-10)


def test_pack_and_unpack_slot_positions():
    model = cnn.load_model()
    spec = cnn.plan(model, 256)  # B = 4 images per ciphertext
    rng = np.random.default_rng(0)
    images = rng.integers(0, 17, (6, 8, 8)).astype(float)
    packed = cnn.pack_images(images, spec)
    assert packed.shape == (2, 256)
    for n in range(8):
        ct, b = divmod(n, 4)
        for p in range(64):
            want = images[n].reshape(-1)[p] / 16.0 if n < 6 else 0.0
            assert packed[ct, p * 4 + b] == want
    slots = rng.normal(size=(2, 256))
    logits = cnn.unpack_logits(slots, spec, 7)
    for n in range(7):
        ct, b = divmod(n, 4)
        np.testing.assert_array_equal(logits[n], [slots[ct, k * 4 + b] for k in range(10)])
    with pytest.raises(ShapeError):
        cnn.unpack_logits(np.zeros((2, 128)), spec)
    with pytest.raises(ShapeError):
        cnn.unpack_logits(slots, spec, 9)


@pytest.mark.parametrize("baby", [1, 4, 16])
def test_bsgs_matvec_matches_matrix_product(baby):
    rng = np.random.default_rng(baby)
    structure = rng.random((64, 64)) < 0.05
    matrices = rng.normal(size=(3, 64, 64)) * structure
    chosen = layout.plan_matvec(structure, 3)
    plan = layout.MatVecPlan(baby, chosen.diagonals, tuple(sorted({d // baby for d in chosen.diagonals})))
    spec = dataclasses.replace(cnn.plan(cnn.load_model(), 128), fc1=plan)
    x = rng.normal(size=(3, 2, 64))  # (channel, ciphertext, position)
    slots = np.repeat(x, spec.images_per_ciphertext, axis=-1)  # every image of a ciphertext alike
    diagonals = np.repeat(layout.bsgs_diagonals(matrices, plan), 2, axis=-1)[:, :, :, None, :]
    sim = SlotSimulator(None, slots=128, max_level=1)
    out = circuit._matvec(sim, sim.encrypt(slots), circuit.encode_diagonals(sim, diagonals, plan, 1), plan,
                          spec.images_per_ciphertext)
    got = sim.decrypt(out)
    want = np.einsum("cij,ckj->ki", matrices, x)
    np.testing.assert_allclose(got[:, ::2], want, rtol=1e-12, atol=1e-12)
    assert got.shape == (2, 128) and out.level == 0  # one level
    assert sim.rotations_used == {r * spec.images_per_ciphertext for r in plan.rotations}


@pytest.mark.parametrize("fast", [False, True])
def test_simulated_circuit_scale_accounting(fast):
    """With the recommended parameters the simulator follows CKKS's scales (real primes): every addition meets
    equal scales, the five layers take the input from level 5 to 0, the rotations are exactly the planned keys,
    and the logits are those of the independent forward pass."""
    model = cnn.load_model()
    params = cnn.recommended_parameters(fast=fast)
    sim = SlotSimulator(params)
    spec = cnn.plan(model, sim.slots)
    _, x_test, _, _ = digits()
    images = x_test[:200]
    tables = circuit.encode_tables(sim, cnn.circuit_tables(model, spec), spec, spec.depth)
    out = circuit.run_circuit(sim, sim.encrypt(cnn.pack_images(images, spec)), tables, spec)
    assert out.level == 0 and abs(np.log2(out.scale) - params.log_scale) < 0.5
    assert sim.rotations_used == {r % sim.slots for r in spec.rotations} and sim.products == 2
    got = cnn.unpack_logits(sim.decrypt(out), spec, len(images))
    np.testing.assert_allclose(got, loop_forward(model, images), rtol=1e-10, atol=1e-10)


def test_plan_rotations_and_cost():
    model = cnn.load_model()
    spec = cnn.plan(model, 8192)
    b = spec.images_per_ciphertext
    assert b == 128
    assert all(r % b == 0 and 0 < r < 8192 for r in spec.rotations)
    assert {o * b for o in cnn.CONV_OFFSETS if o} <= set(spec.rotations)
    for fc, channels in ((spec.fc1, model.channels), (spec.fc2, 1)):
        assert {s * b for s in fc.rotations} <= set(spec.rotations)
        for baby in (1, 2, 4, 8, 16, 32, 64):  # the planner's choice costs no more than any other baby step
            other = layout.MatVecPlan(baby, fc.diagonals, tuple(sorted({d // baby for d in fc.diagonals})))
            assert fc.key_switches(channels) <= other.key_switches(channels)
    assert spec.fc2.diagonals == tuple(range(32)) + tuple(range(55, 64))  # rows 0..9, columns 0..31
    with pytest.raises(SlotError):
        cnn.plan(model, 32)
    with pytest.raises(SlotError):
        cnn.plan(model, 96)
    big = random_model(np.random.default_rng(0), 1, 65)
    with pytest.raises(ParameterError):
        cnn.plan(big, 128)
    other = random_model(np.random.default_rng(0), 2, 8)
    with pytest.raises(ShapeError):
        cnn.simulate_packed(other, spec, np.zeros((1, 8192)))


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
    """Context (N = 2^11, 5 levels of two 24-bit primes, insecure), keys, model, spec: built once."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = cnn.match_scale(small_params(TEST_LOG_N, cnn.DEPTH, prime_bits=24))
    ctx = hemx.Context(params, ntt=FAST_NTT, sampler=Sampler.insecure_for_tests(11))
    model = cnn.load_model()
    spec = cnn.plan(model, ctx.slots)
    keys = ctx.keygen(rotations=spec.rotations)
    return params, ctx, keys, model, spec


@functools.lru_cache(maxsize=None)
def encrypted_run():
    params, ctx, keys, model, spec = small_setup()
    _, x_test, _, _ = digits()
    images = x_test[: spec.images_per_ciphertext]
    cts = ctx.encrypt(cnn.pack_images(images, spec), keys.public)
    layers = []
    out = cnn.infer_encrypted(ctx, keys.evaluation_keys(), cts, model, spec,
                              progress=lambda name, done, total: layers.append((name, done, total)))
    return images, cts, out, layers


@pytest.mark.filterwarnings(INSECURE)
def test_encrypted_inference_matches_plaintext():
    params, ctx, keys, model, spec = small_setup()
    images, cts, out, layers = encrypted_run()
    assert cts.batch_shape == (1,) and out.batch_shape == (1,) and out.level == 0
    assert [name for name, _, _ in layers] == list(cnn.LAYERS)
    logits = cnn.unpack_logits(ctx.decrypt(out, keys.secret), spec, len(images))
    want = loop_forward(model, images)
    error = np.max(np.abs(logits - want))
    check_error(f"cnn {len(images)} images, max |logit error|", error, "cnn/logits")
    np.testing.assert_array_equal(np.argmax(logits, axis=1), np.argmax(want, axis=1))


@pytest.mark.filterwarnings(INSECURE)
def test_encrypted_single_ciphertext_and_reused_encoding():
    params, ctx, keys, model, spec = small_setup()
    images, cts, out, _ = encrypted_run()
    encoded = cnn.encode_model(ctx, model, spec)
    single = cts.replace(data=cts.data[0])
    again = cnn.infer_encrypted(ctx, keys.evaluation_keys(), single, model, spec, encoded=encoded)
    assert again.batch_shape == ()
    np.testing.assert_array_equal(np.asarray(again.data), np.asarray(out.data[0]))  # same computation, exactly


@pytest.mark.filterwarnings(INSECURE)
def test_encrypted_inference_errors():
    params, ctx, keys, model, spec = small_setup()
    _, cts, _, _ = encrypted_run()
    server = keys.evaluation_keys()
    with pytest.raises(LevelError):
        cnn.infer_encrypted(ctx, server, ctx.drop_level(cts, cnn.DEPTH - 1), model, spec)
    with pytest.raises(ShapeError):
        cnn.infer_encrypted(ctx, server, cts.replace(data=cts.data[None]), model, spec)
    with pytest.raises(SlotError):
        cnn.infer_encrypted(ctx, server, cts, model, cnn.plan(model, 128))
    with pytest.raises(ParameterError):
        cnn.infer_encrypted(ctx, server, np.zeros(4), model, spec)
    with pytest.raises(ParameterError):
        cnn.infer_encrypted(ctx, "keys", cts, model, spec)
    other_model = random_model(np.random.default_rng(1), 2, 8)
    with pytest.raises(ShapeError):
        cnn.infer_encrypted(ctx, server, cts, other_model, spec)
    wrong = dataclasses.replace(spec, fc2=spec.fc1)
    with pytest.raises(ParameterError):
        cnn.infer_encrypted(ctx, server, cts, model, spec, encoded=cnn.encode_model(ctx, model, wrong))
    no_rotations = ctx.keygen(rotations=[])
    with pytest.raises(MissingKeyError):
        cnn.infer_encrypted(ctx, no_rotations.evaluation_keys(), ctx.encrypt(np.zeros(ctx.slots), no_rotations),
                            model, spec)


@pytest.mark.filterwarnings(INSECURE)
def test_run_demo_on_a_small_ring():
    params, _, _, _, spec = small_setup()
    stages = []
    report = cnn.run_demo(spec.images_per_ciphertext, params=params, ntt=FAST_NTT,
                          sampler=Sampler.insecure_for_tests(12),
                          progress=lambda stage, done, total: stages.append((stage, done, total)))
    assert report.num_images == report.images_per_ciphertext == 16 and report.num_ciphertexts == 1
    assert report.agreement == 1.0
    check_error("cnn run_demo logits", np.max(np.abs(report.logits - report.plain_logits)), "cnn/demo_logits")
    assert report.encrypted_accuracy == report.plain_accuracy
    assert report.logits.shape == report.plain_logits.shape == (16, 10)
    assert [s for s, done, total in stages if done == total] == list(cnn.STAGES)
    assert report.rotation_keys == len(spec.rotations) and len(report.infer_batches_s) == 1
    with pytest.raises(ParameterError):
        cnn.run_demo(0, params=params)
