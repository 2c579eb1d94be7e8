"""hemx.apps.logreg's bootstrapping mode: training for more iterations than the chain holds, the weights and the
Nesterov vector bootstrapped when their levels run out.

The encrypted test trains 6 iterations on the test ring boot_12 (NOT secure; its chain grown to 8 user levels,
two iterations per bootstrap) with 64 samples, which crosses 2 bootstraps, and compares with plaintext training
(measured: max weight error 1.0e-7 to 1.5e-7, largest weight 0.22). Its cost is mostly XLA compilation of the
bootstrap: 3.1 CPU-minutes, 14 min wall on the 2-core machine at load average 9-14. The schedule, bad-input and
demo-summary tests are numpy only (seconds).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import hemx
from hemx.apps import logreg
from hemx.apps import _logreg_bootstrap as boot
from hemx.ckks import Sampler
from hemx.circuits.bootstrap import BootstrapParameters, bootstrapper_for
from hemx.errors import LevelError, ParameterError, SlotError

TRAIN, TEST, ITERATIONS = 64, 60, 6


@functools.lru_cache(maxsize=None)
def small_data() -> logreg.Dataset:
    return logreg.load_data(n_train=TRAIN, n_test=TEST)


def small_spec(iterations: int = ITERATIONS, learning_rate: float = logreg.BOOTSTRAP_LEARNING_RATE,
               bound: float = logreg.BOOTSTRAP_BOUND) -> logreg.LogRegSpec:
    return logreg.plan(TRAIN, small_data().n_features, iterations=iterations, learning_rate=learning_rate,
                       bound=bound)


# ------------------------------------------------------------------------------------------------------------
# the schedule and the simulated circuit (numpy only)
# ------------------------------------------------------------------------------------------------------------


def test_parameters_and_levels():
    spec = small_spec()
    params = logreg.bootstrap_parameters(spec)
    assert params.name == "boot_12" and params.n // 2 == spec.slots == 2048
    bt = BootstrapParameters.create(params, slots=spec.slots)  # the bootstrap bootstrapper_for builds
    assert boot.bootstrap_of(params, spec.slots) == bt and bt.depth == 15
    assert bt.output_level == params.max_level - bt.depth == 2 * spec.depth_per_iteration == 8
    assert "INSECURE" in logreg.insecure_note(params) and "boot_16" in logreg.insecure_note(params)
    big = logreg.plan(128, small_data().n_features, iterations=3)
    assert logreg.bootstrap_parameters(big).name == "boot_13"
    with pytest.raises(SlotError, match="test rings hold at most"):
        logreg.bootstrap_parameters(logreg.plan(455, 31, iterations=3))
    with pytest.raises(ParameterError, match="boot_16"):
        logreg.bootstrap_parameters(spec, secure=True, log_n=12)
    with pytest.raises(ParameterError, match="log_n in"):
        logreg.bootstrap_parameters(spec, log_n=14)


@pytest.mark.parametrize("iterations", [2, 3, 6, 11, 30])
def test_simulated_bootstrapped_training_equals_plaintext(iterations):
    """The packed circuit with bootstraps (exact simulator) gives the textbook algorithm's weights, the state
    stays within the bootstrap's range, and the schedule bootstraps when fewer than 4 levels are left (5 before the
    last iteration)."""
    data, spec = small_data(), small_spec(iterations)
    params = logreg.bootstrap_parameters(spec)
    plan = logreg.schedule_bootstrapping(data.x_train, data.y_train, spec, params)
    assert plan.top_level == plan.output_level == 8
    level, expected = 8, []  # levels by hand: 4 per iteration, 5 before the last (inference needs one)
    for t in range(1, iterations):
        if level < 4 + (t == iterations - 1):
            expected.append(t)
            level = 8
        level -= 4
    assert plan.refresh_at == tuple(expected)
    assert len(expected) == {2: 0, 3: 1, 6: 2, 11: 5, 30: 14}[iterations]
    assert 0 < plan.largest <= boot.STATE_TARGET and plan.largest > boot.STATE_TARGET / 2 or plan.shrink == 1.0
    w = logreg.simulate_training_bootstrapped(data.x_train, data.y_train, spec, plan)
    reference = logreg.train_plaintext(data.x_train, data.y_train, spec)
    assert np.max(np.abs(w - reference.weights)) < 1e-12 * max(1.0, np.max(np.abs(reference.weights)))
    # the same circuit without bootstrapping agrees where the chain holds it
    if iterations <= 3:
        assert np.allclose(logreg.simulate_training(data.x_train, data.y_train, spec), w, atol=1e-12)


def test_schedule_rejects_out_of_range_state():
    data = small_data()
    # learning rate 3 on the [-10, 10] sigmoid diverges over 30 Nesterov iterations: no shrink can help
    diverging = small_spec(30, learning_rate=3.0, bound=10.0)
    params = logreg.bootstrap_parameters(diverging)
    with pytest.raises(ParameterError, match="diverges|would need shrink"):
        logreg.schedule_bootstrapping(data.x_train, data.y_train, diverging, params)
    # an explicit shrink too small for the weights: the state would leave [-1, 1] at the first bootstrap
    spec = small_spec(30)
    with pytest.raises(ParameterError, match=r"before iteration 3 .* beyond the bootstrap's range"):
        logreg.schedule_bootstrapping(data.x_train, data.y_train, spec, logreg.bootstrap_parameters(spec), shrink=1.0)
    for bad in (3.0, 0.0, -2.0, float("inf"), True):
        with pytest.raises(ParameterError, match="power of two"):
            logreg.schedule_bootstrapping(data.x_train, data.y_train, spec, logreg.bootstrap_parameters(spec),
                                          shrink=bad)
    with pytest.raises(ParameterError, match="BootstrapSchedule"):  # checked before anything else
        logreg.train_encrypted_bootstrapped(None, None, None, spec, {"shrink": 8})
    with pytest.raises(LevelError, match="data_level"):
        boot.schedule(logreg.pack_training(data.x_train, data.y_train, spec), spec,
                      logreg.bootstrap_parameters(spec), data_level=3)


# ------------------------------------------------------------------------------------------------------------
# encrypted: 6 iterations crossing 2 bootstraps on boot_12
# ------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def encrypted_run():
    data, spec = small_data(), small_spec()
    params = logreg.bootstrap_parameters(spec)
    plan = logreg.schedule_bootstrapping(data.x_train, data.y_train, spec, params)
    ctx = hemx.Context(params, slots=spec.slots, ntt="mat3", sampler=Sampler.insecure_for_tests(14))
    keys = ctx.keygen(rotations=spec.rotation_steps, bootstrap=bootstrapper_for(ctx))
    server_keys = keys.evaluation_keys()
    ct_data = ctx.encrypt(logreg.pack_training(data.x_train, data.y_train, spec), keys.secret)
    log, seen = logreg.BootstrapLog(), []
    ct_w = logreg.train_encrypted_bootstrapped(ctx, server_keys, ct_data, spec, plan,
                                               progress=lambda *a: seen.append(a), log=log)
    ct_test = ctx.encrypt(logreg.pack_test(data.x_test, spec), keys.secret)
    ct_scores = logreg.predict_encrypted(ctx, server_keys, ct_w, ct_test, spec)
    return dict(data=data, spec=spec, plan=plan, ctx=ctx, keys=keys, server_keys=server_keys, ct_data=ct_data,
                ct_w=ct_w, log=log, seen=seen,
                weights=logreg.unpack_weights(ctx.decrypt(ct_w, keys.secret), spec),
                scores=logreg.unpack_scores(ctx.decrypt(ct_scores, keys.secret), spec, len(data.y_test)))


def test_encrypted_bootstrapped_training_matches_plaintext(encrypted_run):
    r = encrypted_run
    data, spec, plan, log = r["data"], r["spec"], r["plan"], r["log"]
    reference = logreg.train_plaintext(data.x_train, data.y_train, spec)
    error = float(np.max(np.abs(r["weights"] - reference.weights)))
    print(f"[logreg bootstrap] {spec.iterations} iterations, {log.count} bootstraps at {log.at} "
          f"({', '.join(f'{s:.1f}' for s in log.seconds)} s), shrink {plan.shrink:g}, max weight error {error:.2e} "
          f"(largest weight {np.max(np.abs(reference.weights)):.2f})")
    # the state was bootstrapped where the schedule says, twice, back to the bootstrap's output level
    assert log.count == 2 and tuple(log.at) == plan.refresh_at == (3, 5)
    assert log.level_after == plan.output_level == bootstrapper_for(r["ctx"]).plan.output_level
    assert all(level < spec.depth_per_iteration for level in log.level_before)
    assert ("bootstrap", 2, 2) in r["seen"] and ("train", ITERATIONS, ITERATIONS) in r["seen"]
    assert r["ct_w"].level >= spec.inference_depth
    # weights within 1e-3 of plaintext (the bootstrap keeps ~2^-18 of shrink = 8 in w / kappa); same predictions
    assert error < 1e-3
    plain_scores = data.x_test @ reference.weights
    assert np.max(np.abs(r["scores"] - plain_scores)) < 1e-2
    assert logreg.accuracy(r["scores"], data.y_test) == logreg.accuracy(plain_scores, data.y_test)
    assert np.array_equal(r["scores"] > 0, plain_scores > 0)


def test_encrypted_bootstrapped_bad_inputs(encrypted_run):
    r = encrypted_run
    data, spec, ctx = r["data"], r["spec"], r["ctx"]
    plan = r["plan"]
    # a schedule made for another ring's bootstrap output level
    other = logreg.BootstrapSchedule(plan.shrink, plan.top_level + 1, plan.output_level + 1, plan.refresh_at,
                                     plan.largest, plan.largest_state)
    with pytest.raises(LevelError, match="bootstrap returns level"):
        logreg.train_encrypted_bootstrapped(ctx, r["server_keys"], r["ct_data"], spec, other)
    # data below the schedule's starting level
    low = ctx.drop_level(r["ct_data"], plan.top_level - 1)
    with pytest.raises(LevelError):
        logreg.train_encrypted_bootstrapped(ctx, r["server_keys"], low, spec, plan)


# ------------------------------------------------------------------------------------------------------------
# the demo's choices and its summary (no encryption)
# ------------------------------------------------------------------------------------------------------------


def test_demo_switches_to_bootstrapping_beyond_the_chain():
    from hemx.cli import build_parser
    from hemx.demo import workloads

    # 12 iterations fit a 128-bit chain (N = 2^16, 45 levels); 13 do not, so the demo bootstraps
    assert not workloads.needs_bootstrapping(None) and not workloads.needs_bootstrapping(12)
    assert workloads.needs_bootstrapping(13) and workloads.needs_bootstrapping(30)
    with pytest.raises(ParameterError):
        workloads.needs_bootstrapping(0)
    with pytest.raises(ParameterError, match="boot_16"):
        workloads.run_logreg(iterations=3, bootstrap=False, secure=True)
    args = build_parser().parse_args(["demo", "--workload", "logreg", "--iterations", "30", "--secure"])
    assert (args.iterations, args.bootstrap, args.secure) == (30, False, True)
    assert build_parser().parse_args(["demo", "--workload", "logreg", "--bootstrap"]).bootstrap


def test_demo_summary_rows_for_bootstrapping():
    from hemx import demo

    summary = {"workload": "logreg", "mode": "bootstrapping", "backend": "cpu", "device": "cpu", "machine": "m",
               "parameters": "p", "ntt": "mat3", "security": "INSECURE test ring (boot_12)", "secure": False,
               "train_samples": 64, "test_samples": 114, "features": 31, "iterations": 30, "learning_rate": 0.2,
               "sigmoid": "degree 3 on [-16, 16]", "max_abs_z": 13.4, "accuracy_plaintext": 0.9,
               "accuracy_encrypted": 0.9, "agreement": 1.0, "max_abs_weight": 1.9, "max_abs_weight_error": 2e-6,
               "max_abs_score_error": 1e-5, "bootstraps": 14, "bootstrap_at_iterations": [3, 5],
               "bootstrap_seconds": [80.0, 3.0, 5.0], "bootstrap_median_s": 4.0, "iteration_median_s": 0.7,
               "iteration_mean_with_bootstraps_s": 3.1,
               "levels": {"chain": 23, "data": 8, "after_bootstrap": 8, "state_before_bootstrap": [0],
                          "weights_out": 3, "per_iteration": 4},
               "shrink": 64.0, "largest_state": 20.1, "largest_shrunk_state": 0.31,
               "latency_per_test_sample_ms": 9.0, "seconds": {"server training": 93.0}, "bytes": {"context": 100}}
    rows = dict(demo._summary_rows(summary))
    assert rows["security"].startswith("INSECURE")
    assert rows["bootstraps (weights + Nesterov vector)"] == "14, before iterations 3, 5"
    assert rows["time per bootstrap"].startswith("4.00 s median")
    assert rows["levels"].startswith("chain 23, 4 per iteration, data at 8, bootstrap [0] -> 8")
    assert rows["accuracy plaintext / encrypted"] == "90.00 % / 90.00 %"
