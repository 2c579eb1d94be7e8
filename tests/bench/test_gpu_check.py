"""``scripts/gpu-check.sh`` / ``hemx bench gpu`` (hemx/bench/gpu.py) on the CPU: the quick run's JSON and markdown,
the exit status (0 only when every exactness check holds, 1 when one is made to fail), the time budget skipping
stages with a recorded reason, the docs page rendered from the JSON, and bad command-line input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hemx.bench import gpu
from hemx.cli import main
from hemx.kernels.ntt import METHODS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "gpu-check.sh")


def _run(args, env_extra=None, cwd=None):
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop(gpu.INJECT_ENV, None)
    env.update(env_extra or {})
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check")
    proc = _run([str(out / "results"), "--quick"], cwd=str(out))  # OUTDIR relative to the caller's directory too
    return proc, out / "results"


def test_quick_run_exits_0_and_checks_every_method_bit_for_bit(quick_run):
    proc, out = quick_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "device: " in proc.stdout and "JAX " in proc.stdout and "memory: " in proc.stdout
    doc = json.loads((out / gpu.JSON_NAME).read_text())
    assert doc["ok"] is True and doc["config"] == "quick" and doc["tool"] == "hemx bench gpu"
    assert doc["device"]["jax"] and doc["device"]["backend"] == "cpu" and doc["device"]["host_memory_bytes"] > 0
    checks = doc["exactness"]["checks"]
    assert doc["exactness"]["ok"] and all(c["ok"] for c in checks)
    for n in (1 << 10, 1 << 12):
        for method in METHODS:
            for kind in ("ntt", "intt"):
                [c] = [c for c in checks if (c["kind"], c["name"], c["n"]) == (kind, method, n)]
                assert c["device_vs_cpu_differing_words"] == 0 and c["words"] == 2 * 2 * n
        bats = [c for c in checks if c["kind"] == "bat" and c["n"] == n]
        assert len(bats) == 2 and all(c["cpu_vs_reference_differing_words"] == 0 for c in bats)
    assert list(doc["stages"]) == list(gpu.STAGES)
    assert doc["stages"]["exactness"]["status"] == "ok"


def test_quick_run_measures_ntt_ops_and_plan(quick_run):
    _, out = quick_run
    doc = json.loads((out / gpu.JSON_NAME).read_text())
    ntt = doc["ntt"]
    assert {r["name"] for r in ntt} == set(METHODS)
    assert {r["params"]["n"] for r in ntt} == {1 << 10, 1 << 11, 1 << 12}
    measured = [r for r in ntt if r["median_s"] is not None]
    assert measured, "no NTT configuration was measured within the quick budget"
    for r in measured:
        assert r["k_ntt_per_s"] == pytest.approx(r["params"]["batch"] * r["params"]["limbs"] / r["median_s"] / 1e3)
    assert all(r["extra"]["skipped"].startswith("time budget") for r in ntt if r["median_s"] is None)
    ops = {(r["params"]["op"], r["params"]["batch"]): r for r in doc["ops"] if r["median_s"] is not None}
    for op in ("mul_rescale", "rotate", "rescale"):
        assert ops[(op, 1)]["median_s"] > 0 and ops[(op, 2)]["throughput"] > 0
    assert ops[("mul_rescale", 1)]["extra"]["precision_min_bits"] > 15
    plan = doc["plan"]
    assert plan["chosen"] and plan["wisdom_exists"]
    assert plan["wisdom"] == str(out / "wisdom" / "plans.json") and (out / "wisdom" / "plans.json").exists()
    assert doc["stages"]["bootstrap"]["status"] == "skipped" and doc["bootstrap"]["skipped"]


def test_quick_run_markdown_and_docs_page(quick_run, tmp_path):
    _, out = quick_run
    md = (out / gpu.MD_NAME).read_text()
    for heading in ("## Exactness", "## NTT throughput", "## HE operations", "## Packed bootstrapping",
                    "## Planner's choices", "## Stages"):
        assert heading in md
    assert "**held**: 20 of 20 checks" in md
    assert "| WarpDrive, A100 (published) | – | – | 12,181 | 4,675 | 2,088 | 1,009 | 468 |" in md
    assert "| Cheddar RTX 4090 (L=48) (published) | 2^16 | | 533 | | 476 | 68 | |" in md
    assert "| hemx set A (" in md and "| hemx mat3 |" in md
    proc = _run(["--render", str(out), "--docs", str(tmp_path / "docs")])
    assert proc.returncode == 0, proc.stderr
    page = tmp_path / "docs" / "gpu-cpu.md"
    assert page.read_text() == md  # the docs page is the run's markdown, rendered again from its JSON


def test_a_mismatch_fails_the_check_and_the_budget_skips_stages(tmp_path):
    out = tmp_path / "bad"
    proc = _run([str(out), "--quick", "--budget", "1"], env_extra={gpu.INJECT_ENV: "mismatch"})
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "FAIL ntt butterfly N=1024" in proc.stdout and "exactness FAILED" in proc.stdout
    doc = json.loads((out / gpu.JSON_NAME).read_text())
    assert doc["ok"] is False and doc["exactness"]["ok"] is False
    failed = [c for c in doc["exactness"]["checks"] if not c["ok"]]
    assert len(failed) == 1 and failed[0]["injected"] and failed[0]["device_vs_cpu_differing_words"] == 1
    assert doc["stages"]["exactness"]["status"] == "failed" and "ntt butterfly N=1024" in \
        doc["stages"]["exactness"]["reason"]
    for stage in ("ntt", "plan", "ops"):  # exactness ran whole; every later stage was out of time
        assert doc["stages"][stage]["status"] == "skipped", doc["stages"]
        assert doc["stages"][stage]["reason"].startswith("time budget")
    assert "**FAILED**: 19 of 20 checks" in (out / gpu.MD_NAME).read_text()


def test_schedule_is_cumulative():
    now = [100.0]
    sched = gpu.Schedule(gpu.FULL, 420.0, clock=lambda: now[0])
    assert sched.left("exactness") == pytest.approx(60.0)
    assert sched.left("ntt") == pytest.approx(170.0)
    assert sched.left("bootstrap") == pytest.approx(420.0)
    stop = sched.stopper("ntt", reserve_s=2.0)
    assert stop() is None
    now[0] = 100.0 + 169.0  # a slow exactness stage eats into the NTT stage, not into the whole budget
    assert stop().startswith("time budget: stage 'ntt'")
    assert sched.left("ops") == pytest.approx(60 + 110 + 40 + 90 - 169.0)


def test_device_slug():
    assert gpu.device_slug({"backend": "gpu", "device_kind": "NVIDIA H100 80GB HBM3"}) == "nvidia-h100-80gb-hbm3"
    assert gpu.device_slug({"backend": "cpu", "device_kind": "cpu"}) == "cpu"


@pytest.mark.parametrize("argv, message", [
    (["bench", "gpu"], "missing OUTDIR"),
    (["bench", "gpu", "OUT", "--render", "x.json"], "not both"),
    (["bench", "gpu", "--render", "/nonexistent/gpu-check.json"], "no such result file"),
    (["bench", "gpu", "OUT", "--budget", "-5"], "positive number of seconds"),
    (["bench", "gpu", "OUT", "--budget", "nan"], "positive number of seconds"),
])
def test_bad_input_is_a_clear_error(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "OUT").exists()


def test_bad_paths_are_clear_errors(tmp_path, capsys):
    afile = tmp_path / "file"
    afile.write_text("not a directory")
    assert main(["bench", "gpu", str(afile), "--quick"]) == 2
    assert "is not a directory" in capsys.readouterr().err
    notours = tmp_path / "other.json"
    notours.write_text(json.dumps({"suite": "ops"}))
    assert main(["bench", "gpu", "--render", str(notours)]) == 2
    assert "not a 'hemx bench gpu' result" in capsys.readouterr().err
    assert main(["bench", "gpu", "--render", str(afile)]) == 2
    assert "cannot read" in capsys.readouterr().err
