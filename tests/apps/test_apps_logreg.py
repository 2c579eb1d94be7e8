"""hemx.apps.logreg: sigmoid fit, packing and rotation sums, the packed circuit against the textbook algorithm
(numpy), and one encrypted training + inference on a reduced subset compared with plaintext.

The encrypted test uses a small insecure ring (N = 2^11, 9 levels) and 3 iterations; its cost is mostly XLA
compilation (each level has its own kernel shapes). Everything else is numpy and takes well under a second.
"""

from __future__ import annotations

import functools
import math
import pathlib
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import hemx
from hemx.apps import logreg
from hemx.apps import _logreg_circuit as circuit
from hemx.apps._logreg_layout import Layout
from hemx.circuits import SlotSimulator
from hemx.ckks import EvaluationKeys, InsecureParametersWarning, Sampler
from hemx.errors import LevelError, MissingKeyError, ParameterError, ShapeError, SlotError

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "apps-logreg.md"

# reduced encrypted run: 32 training samples x 31 columns fill N = 2^11 (1024 slots = 32 rows x 32 columns)
SMALL_LOG_N = 11
SMALL_TRAIN, SMALL_TEST, SMALL_ITERATIONS = 32, 40, 3


@functools.lru_cache(maxsize=None)
def full_data() -> logreg.Dataset:
    return logreg.load_data()


@functools.lru_cache(maxsize=None)
def small_data() -> logreg.Dataset:
    return logreg.load_data(n_train=SMALL_TRAIN, n_test=SMALL_TEST)


# ------------------------------------------------------------------------------------------------------------
# data and sigmoid polynomial
# ------------------------------------------------------------------------------------------------------------


def test_load_data_split_and_range():
    data = full_data()
    assert data.x_train.shape == (455, 31) and data.x_test.shape == (114, 31)
    assert data.feature_names[-1] == "bias" and len(data.feature_names) == 31
    assert np.all(data.x_train[:, -1] == 1.0) and np.all(data.x_test[:, -1] == 1.0)
    assert np.max(np.abs(data.x_train)) <= 1.0 and np.max(np.abs(data.x_test)) <= 1.0
    # stratified: both parts keep the table's benign share (357 / 569)
    assert abs(data.y_train.mean() - 357 / 569) < 0.01 and abs(data.y_test.mean() - 357 / 569) < 0.01
    again = logreg.load_data()
    assert np.array_equal(again.x_train, data.x_train) and np.array_equal(again.y_test, data.y_test)
    small = logreg.load_data(n_train=20, n_test=10, n_features=5)
    assert small.x_train.shape == (20, 6) and small.x_test.shape == (10, 6)


@pytest.mark.parametrize("degree,bound", [(1, 8.0), (3, 8.0), (3, 10.0), (5, 10.0), (7, 12.0)])
def test_sigmoid_fit_matches_numpy_polyfit(degree, bound):
    """The odd least-squares fit equals a full polynomial fit (numpy) on the same grid: even terms vanish."""
    poly = logreg.fit_sigmoid(degree, bound)
    grid = np.linspace(-bound, bound, 4001)
    full = np.polynomial.polynomial.polyfit(grid, 1.0 / (1.0 + np.exp(-grid)), degree)
    assert abs(full[0] - 0.5) < 1e-9
    assert np.allclose(full[2::2], 0.0, atol=1e-9)
    assert np.allclose(full[1::2], poly.odd_coeffs, rtol=1e-6, atol=0)


@pytest.mark.parametrize("degree,bound,worst", [(3, 8.0, 0.115), (3, 10.0, 0.136), (5, 10.0, 0.083),
                                                (7, 10.0, 0.050)])
def test_sigmoid_error_on_interval(degree, bound, worst):
    poly = logreg.fit_sigmoid(degree, bound)
    x = np.linspace(-bound, bound, 100_003)
    err = np.max(np.abs(poly(x) - 1.0 / (1.0 + np.exp(-x))))
    print(f"[sigmoid] degree {degree} on [-{bound:g}, {bound:g}]: max error {err:.4f}")
    assert err < worst
    assert math.isclose(poly.max_error(), err, rel_tol=1e-3)
    assert np.allclose(poly(-x), 1.0 - poly(x))  # odd around 1/2, like the sigmoid


# ------------------------------------------------------------------------------------------------------------
# packing and the rotation sums, simulated with numpy.roll
# ------------------------------------------------------------------------------------------------------------


@settings(deadline=None)
@given(log_rows=st.integers(0, 4), log_cols=st.integers(0, 4), seed=st.integers(0, 2**31))
def test_rotation_sums_on_packed_matrix(log_rows, log_cols, seed):
    rng = np.random.default_rng(seed)
    layout = Layout(1 << log_rows, 1 << log_cols)
    n, d = int(rng.integers(1, layout.rows + 1)), int(rng.integers(1, layout.cols + 1))
    m = rng.uniform(-1, 1, (n, d))
    padded = np.zeros((layout.rows, layout.cols))
    padded[:n, :d] = m
    ev = SlotSimulator(None, slots=layout.slots)  # exact mode: no parameters, level 0
    packed = ev.encrypt(layout.pack(m))
    assert np.array_equal(packed.values.reshape(layout.rows, layout.cols), padded)

    per_row = circuit.column_sums(ev, packed, layout).values
    assert np.allclose(layout.first_column(per_row, layout.rows), padded.sum(axis=1))

    spread = circuit.replicate_first_column(ev, ev.encrypt(layout.pack(m) * layout.first_column_mask()), layout)
    assert np.allclose(spread.values.reshape(layout.rows, layout.cols), np.repeat(padded[:, :1], layout.cols, 1))

    total = circuit.row_sums(ev, packed, layout).values.reshape(layout.rows, layout.cols)
    assert np.allclose(total, np.broadcast_to(padded.sum(axis=0), total.shape))
    assert ev.rotations_used <= {s % layout.slots for s in layout.rotation_steps}


def test_pack_training_folds_labels_and_kappa():
    data = small_data()
    spec = logreg.plan(SMALL_TRAIN, data.n_features, slots=1 << (SMALL_LOG_N - 1))
    grid = logreg.pack_training(data.x_train, data.y_train, spec).reshape(spec.layout.rows, spec.layout.cols)
    sign = np.where(data.y_train == 1, 1.0, -1.0)
    assert np.allclose(grid[:, : data.n_features], spec.kappa * sign[:, None] * data.x_train)
    assert np.all(grid[:, data.n_features :] == 0.0)
    assert math.isclose(spec.kappa, math.sqrt(spec.learning_rate / SMALL_TRAIN))
    test = logreg.pack_test(data.x_test, spec)
    assert test.shape == (2, spec.slots)  # 40 samples in blocks of 32 rows
    assert np.allclose(spec.layout.first_column(test, SMALL_TEST), spec.kappa * data.x_test[:, 0])


# ------------------------------------------------------------------------------------------------------------
# the algorithm: textbook form, packed circuit, plan
# ------------------------------------------------------------------------------------------------------------


def test_nesterov_gammas_by_hand():
    lam1 = (1 + math.sqrt(5)) / 2
    lam2 = (1 + math.sqrt(1 + 4 * lam1 * lam1)) / 2
    lam3 = (1 + math.sqrt(1 + 4 * lam2 * lam2)) / 2
    assert np.allclose(logreg.nesterov_gammas(3), [0.0, (1 - lam1) / lam2, (1 - lam2) / lam3])


def test_train_plaintext_against_explicit_steps():
    data = full_data()
    spec = logreg.plan(455, 31, iterations=3, learning_rate=2.0, degree=3, bound=8.0)
    x, lr, poly = data.x_train, 2.0, spec.sigmoid
    z_mat = np.where(data.y_train == 1, 1.0, -1.0)[:, None] * x

    def step(v):
        s = 0.5 - poly.odd_coeffs[0] * (z_mat @ v) - poly.odd_coeffs[1] * (z_mat @ v) ** 3  # p(-z), by hand
        return v + lr * (s[:, None] * z_mat).sum(axis=0) / len(z_mat)

    w1 = lr * 0.5 * z_mat.mean(axis=0)
    w2 = step(w1)
    g1 = spec.gammas[1]
    w3 = step((1 - g1) * w2 + g1 * w1)
    assert np.allclose(logreg.train_plaintext(x, data.y_train, spec).weights, w3, rtol=1e-12, atol=1e-12)
    plain = logreg.plan(455, 31, iterations=3, learning_rate=2.0, bound=8.0, nesterov=False)
    assert np.allclose(logreg.train_plaintext(x, data.y_train, plain).weights, step(w2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("degree", [1, 3, 5, 7])
@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("iterations", [1, 2, 4])
def test_packed_circuit_matches_textbook(degree, nesterov, iterations):
    """The server's circuit on numpy slots gives the textbook weights, uses exactly the planned depth and
    rotations, and leaves the same weights in every row."""
    data = full_data()
    spec = logreg.plan(455, 31, iterations=iterations, degree=degree, nesterov=nesterov)
    want = logreg.train_plaintext(data.x_train, data.y_train, spec).weights
    ev = SlotSimulator(None, slots=spec.slots, max_level=spec.training_depth)
    out = circuit.train(ev, ev.encrypt(logreg.pack_training(data.x_train, data.y_train, spec)),
                        gammas=spec.gammas, poly=spec.sigmoid, layout=spec.layout)
    assert out.level == 0  # the planned depth is exactly what training consumed
    grid = out.values.reshape(spec.layout.rows, spec.layout.cols)
    assert np.allclose(grid, grid[0], atol=1e-12)
    assert np.allclose(logreg.unpack_weights(out.values, spec), want, rtol=1e-10, atol=1e-12)
    expected_steps = set(spec.layout.row_sum_steps) if iterations == 1 else set(spec.rotation_steps)
    assert ev.rotations_used == {s % spec.slots for s in expected_steps}
    assert np.allclose(logreg.simulate_training(data.x_train, data.y_train, spec), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("degree,iterations", [(3, 5), (7, 3), (3, 1)])
def test_packed_circuit_scale_accounting(degree, iterations):
    """With the recommended parameters the simulator follows CKKS's scales (real primes, rounded constants):
    every addition meets equal scales, the weights come out at exactly the parameters' scale and level 0, and
    only the constants' rounding separates them from the textbook weights."""
    data = full_data()
    spec = logreg.plan(455, 31, iterations=iterations, degree=degree)
    params = spec.recommended_parameters()
    ev = SlotSimulator(params, slots=spec.slots)
    fresh = ev.encrypt(logreg.pack_training(data.x_train, data.y_train, spec))
    assert fresh.level == spec.levels_needed
    out = circuit.train(ev, fresh, gammas=spec.gammas, poly=spec.sigmoid, layout=spec.layout)
    assert out.level == spec.inference_depth and math.isclose(out.scale, params.scale, rel_tol=1e-9)
    want = logreg.train_plaintext(data.x_train, data.y_train, spec).weights
    assert np.allclose(logreg.unpack_weights(ev.decrypt(out), spec), want, rtol=0, atol=1e-8)
    scores = circuit.predict(ev, out, ev.encrypt(logreg.pack_test(data.x_test, spec)), spec.layout)
    assert scores.level == 0
    got = logreg.unpack_scores(ev.decrypt(scores), spec, len(data.y_test))
    assert np.allclose(got, data.x_test @ want, rtol=0, atol=1e-7)


def test_default_plan_accuracy_and_parameters():
    data = full_data()
    spec = logreg.plan(455, 31)
    assert (spec.iterations, spec.depth_per_iteration, spec.levels_needed) == (5, 4, 17)
    assert spec.layout == Layout(512, 32) and len(spec.rotation_steps) == 19
    model = logreg.train_plaintext(data.x_train, data.y_train, spec)
    acc = logreg.accuracy(data.x_test @ model.weights, data.y_test)
    print(f"[logreg] default plan, plaintext test accuracy {acc:.4f}, max |z| {model.max_abs_z:.2f}")
    assert acc >= 0.93
    params = spec.recommended_parameters()
    assert params.secure and params.log_n == 15 and params.max_level == 17 and params.dnum == 3
    assert params.log_qp <= hemx.ckks.max_log_qp(params.n)


def test_recommended_parameters_grow_with_iterations():
    six = logreg.plan(455, 31, iterations=6).recommended_parameters()
    seven = logreg.plan(455, 31, iterations=7).recommended_parameters()
    assert (six.log_n, six.max_level, six.secure) == (15, 21, True)
    assert (seven.log_n, seven.max_level, seven.secure) == (16, 25, True)  # N = 2^15 would need dnum 27
    assert seven.dnum <= logreg.MAX_DNUM and six.dnum <= logreg.MAX_DNUM


def test_plan_and_packing_errors():
    data = small_data()
    with pytest.raises(ParameterError):
        logreg.plan(32, 31, iterations=0)
    with pytest.raises(ParameterError):
        logreg.plan(32, 31, degree=4)
    with pytest.raises(ParameterError):
        logreg.plan(32, 31, learning_rate=-1.0)
    with pytest.raises(SlotError):
        logreg.plan(64, 31, slots=1024)  # 1024 slots hold 32 rows of 32
    with pytest.raises(ParameterError):
        logreg.plan(455, 31, iterations=13).recommended_parameters()  # 49 levels: beyond N = 2^16
    with pytest.raises(ParameterError):
        logreg.load_data(n_train=1)
    spec = logreg.plan(SMALL_TRAIN, data.n_features, slots=1024)
    with pytest.raises(ShapeError):
        logreg.pack_training(data.x_train[:, :-1], data.y_train, spec)
    with pytest.raises(ShapeError):
        logreg.pack_training(data.x_train[:-1], data.y_train[:-1], spec)
    with pytest.raises(ParameterError):
        logreg.pack_training(data.x_train, 2 * data.y_train, spec)
    bad = data.x_train.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ParameterError):
        logreg.pack_training(bad, data.y_train, spec)


# ------------------------------------------------------------------------------------------------------------
# encrypted: reduced subset, small insecure ring
# ------------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def encrypted_setup():
    data = small_data()
    spec = logreg.plan(SMALL_TRAIN, data.n_features, iterations=SMALL_ITERATIONS, slots=1 << (SMALL_LOG_N - 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = spec.recommended_parameters(log_n=SMALL_LOG_N, allow_insecure=True)
    ctx = hemx.Context(params, slots=spec.slots, sampler=Sampler.insecure_for_tests(7))
    keys = ctx.keygen(rotations=spec.rotation_steps)
    ct_data = ctx.encrypt(logreg.pack_training(data.x_train, data.y_train, spec), keys.public)
    return data, spec, ctx, keys, ct_data


def test_encrypted_training_and_inference_match_plaintext():
    data, spec, ctx, keys, ct_data = encrypted_setup()
    server_keys = keys.evaluation_keys()
    assert not isinstance(server_keys, hemx.KeySet)  # the server never holds the secret
    seen = []
    ct_w = logreg.train_encrypted(ctx, server_keys, ct_data, spec, progress=lambda *a: seen.append(a))
    assert seen == [("train", t, SMALL_ITERATIONS) for t in range(1, SMALL_ITERATIONS + 1)]
    assert ct_w.level == ctx.params.max_level - spec.training_depth == spec.inference_depth

    reference = logreg.train_plaintext(data.x_train, data.y_train, spec)
    w_enc = logreg.unpack_weights(ctx.decrypt(ct_w, keys.secret), spec)
    w_err = np.max(np.abs(w_enc - reference.weights))
    print(f"[logreg] encrypted weights: max error {w_err:.2e} (largest weight "
          f"{np.max(np.abs(reference.weights)):.3f}, max |z| {reference.max_abs_z:.2f})")
    assert w_err < 2e-4  # measured ~2e-5 at scale 2^31

    ct_test = ctx.encrypt(logreg.pack_test(data.x_test, spec), keys.public)
    ct_scores = logreg.predict_encrypted(ctx, server_keys, ct_w, ct_test, spec)
    scores = logreg.unpack_scores(ctx.decrypt(ct_scores, keys.secret), spec, SMALL_TEST)
    want = data.x_test @ reference.weights
    s_err = np.max(np.abs(scores - want))
    acc_enc, acc_plain = logreg.accuracy(scores, data.y_test), logreg.accuracy(want, data.y_test)
    print(f"[logreg] encrypted scores: max error {s_err:.2e}; accuracy encrypted {acc_enc:.3f}, "
          f"plaintext {acc_plain:.3f}")
    assert s_err < 1e-3
    assert abs(acc_enc - acc_plain) <= 0.01
    assert acc_plain >= 0.8  # the reduced model still learned something


def test_encrypted_input_errors():
    data, spec, ctx, keys, ct_data = encrypted_setup()
    server_keys = keys.evaluation_keys()
    no_rotations = EvaluationKeys(server_keys.public, server_keys.relin, {}, server_keys.context_id,
                                  server_keys.key_id)
    with pytest.raises(MissingKeyError):
        logreg.train_encrypted(ctx, no_rotations, ct_data, spec)
    with pytest.raises(LevelError):
        logreg.train_encrypted(ctx, server_keys, ctx.drop_level(ct_data, spec.training_depth - 1), spec)
    other = logreg.plan(16, data.n_features, slots=512)
    with pytest.raises(SlotError):
        logreg.train_encrypted(ctx, server_keys, ct_data, other)
    with pytest.raises(ParameterError):
        logreg.train_encrypted(ctx, server_keys, np.zeros(spec.slots), spec)
    with pytest.raises(LevelError):
        logreg.predict_encrypted(ctx, server_keys, ctx.drop_level(ct_data, 0), ct_data, spec)


def test_run_driver_reduced():
    """``run`` on the reduced configuration (same shapes as above, so the compiled kernels are reused)."""
    _, spec, ctx, _, _ = encrypted_setup()
    stages = []
    report = logreg.run(iterations=SMALL_ITERATIONS, data=small_data(), params=ctx.params,
                        sampler=Sampler.insecure_for_tests(11), progress=lambda *a: stages.append(a))
    assert [a for a in stages if a[0] == "train"] == [("train", t, 3) for t in range(4)]
    assert {a[0] for a in stages} == {"keygen", "encrypt", "train", "predict", "decrypt"}
    assert report.spec == spec and (report.n_train, report.n_test) == (SMALL_TRAIN, SMALL_TEST)
    assert report.weight_error < 2e-4 and report.score_error < 1e-3 and report.prediction_agreement == 1.0
    assert report.accuracy_encrypted == report.accuracy_plaintext
    plain = logreg.train_plaintext(small_data().x_train, small_data().y_train, spec)
    assert np.array_equal(report.weights_plaintext, plain.weights)
    assert len(report.timings["iterations"]) == SMALL_ITERATIONS
    assert report.sizes["galois_keys"] == len(spec.rotation_steps)
    assert report.sizes["train_ciphertext"] == 2 * ctx.params.num_limbs * ctx.params.n * 4
    summary = report.to_dict()
    assert summary["spec"] == spec.describe() and len(summary["weights_encrypted"]) == spec.n_features


def test_guide_example_runs():
    """The python example of docs/apps-logreg.md (the same reduced configuration: compiled kernels are shared
    with the test above)."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert blocks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        for i, code in enumerate(blocks):
            exec(compile(code, f"apps-logreg.md[{i}]", "exec"), {"__name__": f"doc_{i}"})
