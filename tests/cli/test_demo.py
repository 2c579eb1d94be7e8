"""``hemx demo``: both workloads end to end through the client/server split (small insecure rings, the same
shapes as the apps' own tests so the compiled kernels are shared), the JSON summary, and the CLI wiring."""

import json
import warnings

import numpy as np
import pytest

from hemx import demo
from hemx.apps import cnn, logreg
from hemx.ckks import InsecureParametersWarning, Sampler
from hemx.demo import workloads
from hemx.errors import ParameterError

from tests.helpers.ckks_helpers import FAST_NTT, INSECURE, check_error, small_params


def _cnn_params():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return cnn.match_scale(small_params(11, cnn.DEPTH, prime_bits=24))


@pytest.mark.filterwarnings(INSECURE)
def test_cnn_demo_through_client_and_server(capsys):
    params = _cnn_params()
    net = cnn.compile_network(cnn.load_model(), params)  # what the demo runs
    per_ct = net.images_per_ciphertext
    assert per_ct == params.n // 2 // 64
    summary = demo.run("cnn", as_json=True, num_images=2 * per_ct - 3, params=params, ntt=FAST_NTT,
                       sampler=Sampler.insecure_for_tests(21))
    printed = json.loads(capsys.readouterr().out)
    assert printed["workload"] == "cnn" and printed["ok"] is True
    assert summary["images"] == 2 * per_ct - 3 and summary["ciphertexts"] == 2
    assert len(summary["batch_seconds"]) == 2  # one ciphertext per server call by default
    assert summary["rotation_keys"] == len(net.rotations)
    # 47 rotations and 5 relinearizations (the digits CNN's two squares over its ciphertexts), as before hemx.nn ran it
    assert summary["key_switches_per_ciphertext"] == net.plan.key_switches + net.plan.ct_mults == 52
    assert "server warm-up" in summary["seconds"] and summary["first_batch_includes_compilation"] is False
    assert summary["agreement"] == 1.0
    check_error("demo cnn logits", summary["max_abs_logit_error"], "demo/cnn_logits")
    assert summary["accuracy_encrypted"] == summary["accuracy_plaintext"]
    sizes = summary["bytes"]
    assert sizes["evaluation_keys"] > sizes["request_ciphertext"] > sizes["reply_ciphertext"] > 0
    for key in ("backend", "device", "machine", "latency_per_image_ms", "seconds"):
        assert key in printed


@pytest.mark.filterwarnings(INSECURE)
def test_logreg_demo_through_client_and_server(capsys):
    data = logreg.load_data(n_train=32, n_test=40)
    spec = logreg.plan(len(data.y_train), data.n_features, iterations=3)
    params = spec.recommended_parameters(log_n=11, allow_insecure=True)
    stages = []
    summary = workloads.run_logreg(iterations=3, data=data, params=params, ntt=FAST_NTT,
                                   sampler=Sampler.insecure_for_tests(22),
                                   update=lambda stage, done, total: stages.append((stage, done, total)))
    assert summary["iterations"] == 3 and len(summary["iteration_seconds"]) == 3
    assert abs(summary["accuracy_encrypted"] - summary["accuracy_plaintext"]) <= 0.01
    assert summary["agreement"] == 1.0  # measured: every test prediction agrees
    check_error("demo logreg weights", summary["max_abs_weight_error"], "demo/logreg_weights")
    assert ("server: training", 3, 3) in stages and stages[-1][0] == "client: decrypt"
    assert summary["bytes"]["train_ciphertext"] > summary["bytes"]["weights_ciphertext"] > 0


def test_demo_rejects_bad_options():
    with pytest.raises(ValueError, match="unknown workload") as info:
        demo.run("nope")
    assert type(info.value) is ValueError
    with pytest.raises(ParameterError):
        workloads.run_cnn(num_images=0)
    with pytest.raises(ParameterError):
        workloads.run_cnn(ciphertexts_per_batch=0)


def test_cli_demo_options():
    from hemx.cli import build_parser

    args = build_parser().parse_args(["demo", "--workload", "logreg", "--iterations", "2", "--json"])
    assert (args.workload, args.iterations, args.json) == ("logreg", 2, True)
    assert build_parser().parse_args(["demo"]).workload == "cnn"
    assert build_parser().parse_args(["demo", "--no-warm-up"]).no_warm_up
    with pytest.raises(SystemExit):
        build_parser().parse_args(["demo", "--workload", "bogus"])


def test_summary_rows_render_every_field():
    summary = {"workload": "cnn", "backend": "cpu", "device": "cpu", "machine": "m", "parameters": "p", "ntt": "x",
               "images": 3, "ciphertexts": 1, "images_per_ciphertext": 128, "accuracy_plaintext": 1.0,
               "accuracy_encrypted": 1.0, "agreement": 1.0, "max_abs_logit_error": 1e-9,
               "latency_per_batch_s": 1.0, "latency_per_image_ms": 7.8, "batch_seconds": [2.0],
               "key_switches_per_ciphertext": 52, "seconds": {"a": 1.0}, "bytes": {"evaluation_keys": 3 << 20}}
    rows = dict(demo._summary_rows(summary))
    assert rows["size: evaluation keys"] == "3.0 MiB" and rows["latency per image (steady)"] == "7.8 ms"
    assert np.isclose(float(rows["time: a"].split()[0]), 1.0)


def test_cli_reexecs_once_with_the_allocator_tuning(monkeypatch):
    import os
    import subprocess
    import sys

    from hemx import allocator, cli

    calls = []
    monkeypatch.setattr(os, "execve", lambda *a: calls.append(a))
    cli.tune_allocator(["info"])  # in-process calls (argv given) never re-execute
    every_key = ":".join(f"{key}=0" for key, _ in allocator.TUNABLES)
    monkeypatch.setenv("GLIBC_TUNABLES", every_key)
    cli.tune_allocator(None)  # the user's own settings win: nothing left to add
    assert calls == []
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0")
    cli.tune_allocator(None)  # a key the user set is kept, the others are added
    assert len(calls) == 1
    tunables = calls[0][2]["GLIBC_TUNABLES"].split(":")
    assert tunables[0] == "glibc.malloc.hugetlb=0" and len(tunables) == len(allocator.TUNABLES)
    assert {t.split("=")[0] for t in tunables} == {key for key, _ in allocator.TUNABLES}
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "HEMX_MALLOC_TUNING")}
    out = subprocess.run([sys.executable, "-m", "hemx", "info", "--json"], capture_output=True, text=True, env=env,
                         check=True)
    assert json.loads(out.stdout)["glibc_tunables"] == allocator.merged_tunables("")
    env["HEMX_MALLOC_TUNING"] = "0"
    out = subprocess.run([sys.executable, "-m", "hemx", "info", "--json"], capture_output=True, text=True, env=env,
                         check=True)
    assert json.loads(out.stdout)["glibc_tunables"] == ""


def _helr_result(acc_enc: float, acc_float: float) -> dict:
    """A result of the fields :func:`hemx.apps.logreg.run_preset` returns (the boot_16 run itself is ~10 minutes
    and 11 GiB: measured in ``hemx bench helr``, docs/apps-logreg.md)."""
    return {"preset": "helr", "spec": "s", "parameters": "boot_16", "security": "128-bit", "samples": 256,
            "features": 197, "test_samples": 10, "batch_size": 128, "n_batches": 2, "batches_used": 2,
            "iterations": 2, "sigmoid": "degree 3 on [-8, 8]", "seconds": {"keygen": 1.0, "train": 2.0},
            "ms_per_iteration": 1000.0, "bootstraps": 1, "bootstrap_at": [1], "bootstrap_s": [3.5],
            "keys": {"count": 47, "bytes": 3 << 30, "storage": "compact"},
            "accuracy": {"encrypted": acc_enc, "float64": acc_float}, "auc": {"encrypted": 0.8, "float64": 0.8},
            "agreement": 0.9, "weight_error": 1e-4, "max_abs_weight": 0.5}


@pytest.mark.parametrize("acc_enc, ok", [(0.765, True), (0.755, False)])
def test_demo_helr_runs_the_preset_and_judges_accuracy(monkeypatch, capsys, acc_enc, ok):
    from hemx.cli import main

    calls = []

    def fake_run_preset(preset, *, iterations=None, n_train=None, ntt=None, sampler=None, progress=None):
        calls.append((preset, iterations, n_train))
        progress("train", 1, 2)
        progress("bootstrap", 1, 1)
        return _helr_result(acc_enc, 0.77)

    monkeypatch.setattr(logreg, "run_preset", fake_run_preset)
    rc = main(["demo", "--workload", "helr", "--iterations", "2", "--json"])
    printed = json.loads(capsys.readouterr().out)
    assert calls == [("helr", 2, None)]
    assert printed["workload"] == "helr" and printed["ok"] is ok and rc == (0 if ok else 1)  # within one point
    rows = dict(demo._summary_rows(printed))
    assert rows["test accuracy encrypted / float64"] == f"{100 * acc_enc:.2f} % / 77.00 %"
    assert rows["keys"] == "47, 3.0 GiB (compact)" and rows["bootstraps"] == "1 before iterations 1 (3.5 s)"
    assert main(["demo", "--workload", "helr", "--images", "3"]) == 2 and calls == [("helr", 2, None)]
    assert "--images does not apply to --workload helr" in capsys.readouterr().err
