"""HELR at scale in hemx.apps.logreg: the Fashion-MNIST two-class loader, mini-batch training (one ciphertext per
batch, iteration t on batch t mod B) against the float64 algorithm on the same mini-batches, the "helr" preset's
plan (boot_16, 128 batches of 128, 6 bootstraps in 14 iterations, simulated), bad options, and the bench's options.

The encrypted test trains 3 iterations on 3 mini-batches (16 samples x 7 pixels + bias each) on an insecure
N = 2^11 ring with 9 levels (depth-bounded, no bootstrap: the smallest bootstrapped ring, boot_12, costs about
14 minutes of XLA compilation here, tests/apps/test_logreg_bootstrap.py); about a minute, mostly compilation. The
bootstrapped mini-batch circuit is checked on the exact slot simulator at the preset's full size. Everything else
is numpy (the Fashion-MNIST files are read in about a second).
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

import hemx
from hemx.apps import logreg
from hemx.apps._logreg_data import downsample
from hemx.ckks import InsecureParametersWarning, Sampler
from hemx.errors import HemxError, ParameterError, ShapeError, SlotError

# the encrypted run: 3 mini-batches of 16 samples, 7 central pixels + bias (8 slots per sample), 3 iterations
ENC_BATCH, ENC_BATCHES, ENC_ITERATIONS, ENC_LOG_N = 16, 3, 3, 11
ENC_PIXELS = (5 * 14 + 6, 6 * 14 + 6, 7 * 14 + 6, 8 * 14 + 6, 7 * 14 + 3, 7 * 14 + 10, 10 * 14 + 7)


@functools.lru_cache(maxsize=None)
def fashion() -> logreg.Dataset:
    return logreg.load_fashion_mnist()


@functools.lru_cache(maxsize=None)
def helr_spec() -> logreg.LogRegSpec:
    cfg = logreg.PRESETS["helr"]
    return logreg.plan(cfg.n_train, fashion().n_features, iterations=cfg.iterations, learning_rate=cfg.learning_rate,
                       degree=cfg.degree, bound=cfg.bound, batch_size=cfg.batch_size)


def few_pixels(count: int) -> logreg.Dataset:
    """``count`` training samples with 7 pixels and the bias (the test set likewise, first 200)."""
    data = fashion()
    keep = list(ENC_PIXELS) + [data.n_features - 1]
    return logreg.Dataset(data.x_train[:count, keep], data.y_train[:count], data.x_test[:200, keep],
                          data.y_test[:200], tuple(data.feature_names[k] for k in keep))


def batchwise_reference(x, y, spec) -> np.ndarray:
    """The mini-batch algorithm written out independently: batch t mod B, Nesterov, the spec's polynomial."""
    w = v = np.zeros(x.shape[1])
    b = spec.batch_size
    for t, gamma in enumerate(logreg.nesterov_gammas(spec.iterations)):
        k = t % (len(y) // b)
        xb, yb = x[k * b:(k + 1) * b], 2.0 * y[k * b:(k + 1) * b] - 1.0
        z = yb * (xb @ v)
        w_next = v + spec.learning_rate * np.mean((spec.sigmoid(-z) * yb)[:, None] * xb, axis=0)
        v, w = (1.0 - gamma) * w_next + gamma * w, w_next
    return w


# ------------------------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------------------------


def test_fashion_mnist_two_class_loader():
    data = fashion()
    assert data.x_train.shape == (16384, 197) and data.x_test.shape == (4000, 197)  # all 4 x 1000 test images
    assert data.feature_names[-1] == "bias" and data.feature_names[0] == "pixel_0_0" and len(data.feature_names) == 197
    assert np.all(data.x_train[:, -1] == 1.0) and np.max(np.abs(data.x_train)) <= 1.0
    assert np.allclose(data.x_train[:, :-1].mean(axis=0), 0.0, atol=1e-12)  # centred by the training mean
    assert set(np.unique(data.y_train)) == {0, 1} and abs(data.y_train.mean() - 0.5) < 0.02
    assert data.y_test.mean() == 0.5
    # labels: 1 for Shirt (6) and Coat (4), 0 for T-shirt/top (0) and Pullover (2), as in the raw test file
    from hemx.nn.data import fashion_mnist

    images, labels = fashion_mnist("test")
    chosen = np.flatnonzero(np.isin(labels, (0, 2, 4, 6)))
    assert np.array_equal(data.y_test, np.isin(labels[chosen], (4, 6)).astype(np.int64))
    block = images[chosen[0], 4:6, 10:12].astype(np.float64).mean() / 255.0  # pixel (2, 5) is a 2x2 mean
    assert np.isclose(downsample(images[chosen[:1]])[0, 2 * 14 + 5], block)
    # the training order is random and fixed by the seed; consecutive batches mix both classes
    again = logreg.load_fashion_mnist(n_train=256, n_test=10)
    assert np.array_equal(again.y_train, data.y_train[:256]) and again.x_test.shape == (10, 197)
    assert all(0.2 < data.y_train[k * 128:(k + 1) * 128].mean() < 0.8 for k in range(128))
    other = logreg.load_fashion_mnist(n_train=100, n_test=50, negative=(0,), positive=(6,), random_state=3)
    assert other.x_train.shape == (100, 197) and other.y_test.shape == (50,)


def test_fashion_mnist_bad_options():
    with pytest.raises(ParameterError, match="both sides"):
        logreg.load_fashion_mnist(negative=(0, 6), positive=(6,))
    with pytest.raises(ParameterError, match="0..9"):
        logreg.load_fashion_mnist(negative=(10,))
    with pytest.raises(ParameterError, match="distinct"):
        logreg.load_fashion_mnist(positive=())
    with pytest.raises(ParameterError, match="n_train"):
        logreg.load_fashion_mnist(n_train=24001)
    with pytest.raises(ParameterError):
        logreg.load_fashion_mnist(negative="shirt")


def test_auc_matches_sklearn():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 500)
    scores = np.round(rng.normal(size=500) + y, 1)  # rounded: many ties
    assert abs(logreg.auc(scores, y) - roc_auc_score(y, scores)) < 1e-12
    with pytest.raises(ParameterError, match="both classes"):
        logreg.auc(scores, np.ones(500))
    with pytest.raises(ShapeError):
        logreg.auc(scores[:-1], y)


# ------------------------------------------------------------------------------------------------------------
# mini-batches: plan, packing, float64 and the slot simulation
# ------------------------------------------------------------------------------------------------------------


def test_helr_preset_plan_and_parameters():
    spec = helr_spec()
    assert (spec.n_samples, spec.batch_size, spec.n_batches) == (16384, 128, 128)
    assert (spec.layout.rows, spec.layout.cols, spec.slots) == (128, 256, 2 ** 15)
    assert spec.kappa == np.sqrt(2.0 / 128) and spec.sigmoid.degree == 3
    assert [spec.batch_of(t) for t in (0, 13, 127, 128, 130)] == [0, 13, 127, 0, 2]
    assert "128 mini-batches of 128" in spec.describe()
    with warnings.catch_warnings():
        warnings.simplefilter("error", InsecureParametersWarning)  # no insecure opt-in anywhere
        params = logreg.bootstrap_parameters(spec, secure=True)
    assert params.name == "boot_16" and params.log_n == 16 and not params.allow_insecure
    assert params.log_qp <= hemx.ckks.max_log_qp(params.n)
    assert "128-bit" in logreg.insecure_note(params)


def test_helr_bootstrapped_simulation_equals_float64():
    """The packed, bootstrapped mini-batch circuit of the full preset (exact slot simulator, boot_16's levels) gives
    the float64 weights; 6 bootstraps in 14 iterations; the float64 model learns the task."""
    data, spec = fashion(), helr_spec()
    params = logreg.bootstrap_parameters(spec, secure=True)
    plan = logreg.schedule_bootstrapping(data.x_train, data.y_train, spec, params)
    assert plan.top_level == plan.output_level == 10 and plan.refresh_at == (3, 5, 7, 9, 11, 13)
    assert plan.largest <= 0.5
    reference = logreg.train_plaintext(data.x_train, data.y_train, spec)
    assert np.allclose(reference.weights, batchwise_reference(data.x_train, data.y_train, spec), atol=1e-12)
    assert reference.max_abs_z < spec.sigmoid.bound
    w = logreg.simulate_training_bootstrapped(data.x_train, data.y_train, spec, plan)
    assert np.max(np.abs(w - reference.weights)) < 1e-12
    scores = data.x_test @ reference.weights
    assert logreg.accuracy(scores, data.y_test) > 0.75 and logreg.auc(scores, data.y_test) > 0.82


@pytest.mark.parametrize("batch_size,iterations", [(16, 3), (16, 7), (48, 4), (8, 9)])
def test_minibatch_simulation_equals_float64(batch_size, iterations):
    data = few_pixels(48)
    spec = logreg.plan(48, data.n_features, iterations=iterations, batch_size=batch_size)
    assert spec.n_batches == 48 // batch_size and spec.layout.rows == 1 << (batch_size - 1).bit_length()
    packed = logreg.pack_training_batches(data.x_train, data.y_train, spec)
    assert packed.shape == (spec.n_batches, spec.slots)
    wide = logreg.plan(48, data.n_features, iterations=iterations, batch_size=batch_size, slots=1024)
    assert logreg.pack_training_batches(data.x_train, data.y_train, wide).shape == (spec.n_batches, 1024)
    reference = logreg.train_plaintext(data.x_train, data.y_train, spec)
    assert np.allclose(reference.weights, batchwise_reference(data.x_train, data.y_train, spec), atol=1e-12)
    if iterations <= 4:  # the depth-bounded circuit (no bootstrapping)
        w = logreg.simulate_training(data.x_train, data.y_train, spec)
        assert np.max(np.abs(w - reference.weights)) < 1e-12
    # the mini-batches matter: full-batch training differs
    full = logreg.plan(48, data.n_features, iterations=iterations)
    if spec.n_batches > 1:
        assert not np.allclose(logreg.train_plaintext(data.x_train, data.y_train, full).weights, reference.weights)


def test_minibatch_bad_options():
    data = few_pixels(48)
    with pytest.raises(ParameterError, match="divisor"):
        logreg.plan(48, data.n_features, batch_size=10)
    with pytest.raises(ParameterError, match="divisor"):
        logreg.plan(48, data.n_features, batch_size=0)
    with pytest.raises(SlotError, match="per batch"):
        logreg.plan(48, data.n_features, batch_size=16, slots=64)
    spec = logreg.plan(48, data.n_features, batch_size=16)
    with pytest.raises(ShapeError, match="pack_training_batches"):
        logreg.pack_training(data.x_train, data.y_train, spec)
    with pytest.raises(ShapeError):
        logreg.pack_training_batches(data.x_train[:32], data.y_train[:32], spec)
    with pytest.raises(ParameterError, match="unknown preset"):
        logreg.run_preset("huge")
    with pytest.raises(ParameterError, match="divisor"):  # the helr preset's batches are 128
        logreg.run_preset("helr", n_train=200)


# ------------------------------------------------------------------------------------------------------------
# encrypted: 3 mini-batches, 3 iterations on a small insecure ring
# ------------------------------------------------------------------------------------------------------------


def test_encrypted_minibatch_training_matches_float64():
    data = few_pixels(ENC_BATCH * ENC_BATCHES)
    spec = logreg.plan(len(data.y_train), data.n_features, iterations=ENC_ITERATIONS, batch_size=ENC_BATCH,
                       slots=1 << (ENC_LOG_N - 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = spec.recommended_parameters(log_n=ENC_LOG_N, allow_insecure=True)
    ctx = hemx.Context(params, slots=spec.slots, sampler=Sampler.insecure_for_tests(21))
    keys = ctx.keygen(rotations=spec.rotation_steps)
    server_keys = keys.evaluation_keys()
    cts = [ctx.encrypt(row, keys.secret) for row in logreg.pack_training_batches(data.x_train, data.y_train, spec)]
    with pytest.raises(ShapeError, match="3 mini-batches"):
        logreg.train_encrypted(ctx, server_keys, cts[:2], spec)
    with pytest.raises(ShapeError, match="3 mini-batches"):
        logreg.train_encrypted(ctx, server_keys, cts[0], spec)
    ct_w = logreg.train_encrypted(ctx, server_keys, cts, spec)
    assert ct_w.level == params.max_level - spec.training_depth
    w_enc = logreg.unpack_weights(ctx.decrypt(ct_w, keys.secret), spec)
    reference = logreg.train_plaintext(data.x_train, data.y_train, spec)
    assert np.allclose(logreg.simulate_training(data.x_train, data.y_train, spec), reference.weights, atol=1e-12)
    err = float(np.max(np.abs(w_enc - reference.weights)))
    print(f"[helr] 3 mini-batches, 3 iterations at N = 2^{ENC_LOG_N}: max weight error {err:.2e} "
          f"(largest weight {np.max(np.abs(reference.weights)):.3f})")
    assert err < 2e-4  # the breast-cancer run's tolerance at scale 2^31 (tests/apps/test_apps_logreg.py)
    scores_enc, scores_plain = data.x_test @ w_enc, data.x_test @ reference.weights
    assert abs(logreg.accuracy(scores_enc, data.y_test) - logreg.accuracy(scores_plain, data.y_test)) <= 0.01
    assert abs(logreg.auc(scores_enc, data.y_test) - logreg.auc(scores_plain, data.y_test)) < 1e-3


# ------------------------------------------------------------------------------------------------------------
# the bench's options
# ------------------------------------------------------------------------------------------------------------


def test_bench_helr_options():
    from hemx.bench import helr
    from hemx.cli import build_parser

    args = build_parser().parse_args(["bench", "helr", "--small", "--iterations", "3", "--samples", "256"])
    assert (args.small, args.iterations, args.samples, args.func) == (True, 3, 256, helr.run_cli)
    args = build_parser().parse_args(["bench", "helr"])
    assert (args.small, args.iterations, args.samples) == (False, None, None)
    for bad in (["--iterations", "0"], ["--samples", "-5"]):
        with pytest.raises(HemxError, match="positive"):
            helr.run_cli(build_parser().parse_args(["bench", "helr", *bad]))
    assert helr._main(["--iterations", "0"]) == 2
