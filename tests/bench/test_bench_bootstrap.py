"""hemx bench bootstrap: a worker process per side and slot count, figures filled in, the plot written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

from hemx.bench import bootstrap as bb
from hemx.ckks import CKKSParameters, Context, InsecureParametersWarning


def test_bench_bootstrap_sparse_slots_json_and_plot(tmp_path):
    """The whole command on the small boot_12 ring, 64 sparse slots (one worker process)."""
    plot = tmp_path / "boot.png"
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "hemx", "bench", "bootstrap", "--preset", "boot_12", "--sides",
                           "hemx", "--repeats", "1", "--slots", "64", "--out", str(out), "--plot", str(plot)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert plot.stat().st_size > 10_000
    (path,) = [os.path.join(out, f) for f in os.listdir(out) if f.startswith("bootstrap-")]
    (row,) = json.load(open(path))["results"]
    e = row["extra"]
    assert (row["name"], row["params"]["slots"], e["slots"], e["level_after"]) == ("hemx", 64, 64, 3)
    assert e["message_ratio"] == 11 and 59.9 < e["evalmod_scale_bits"] <= 60.0
    assert e["min_bits"] >= 20.0 and e["mean_bits"] > e["min_bits"]  # tests/circuits/test_bootstrap.py pins more
    assert e["median_s"] > 0 and e["first_s"] >= e["median_s"] and e["key_bytes"] > 0
    # the key count is the sparse circuit's: its rotations and conjugation, relinearization, two encapsulation keys
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        ctx = Context(CKKSParameters.preset("boot_12", allow_insecure=True), slots=64)
    assert e["keys"] == len(ctx.bootstrapper().galois_elements) + 1 + 2


def test_bad_slots_are_refused_with_a_clear_error():
    proc = subprocess.run([sys.executable, "-m", "hemx", "bench", "bootstrap", "--preset", "boot_12", "--slots",
                           "full,100"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "powers of two" in (proc.stderr + proc.stdout)
    assert "Traceback" not in proc.stderr


def test_plot_skips_failed_sides(tmp_path):
    ok = bb.BenchResult("bootstrap", "hemx", {"slots": 2048}, 1.0, 0.9,
                        extra={"slots": 2048, "median_s": 1.0, "min_bits": 20.0, "mean_bits": 23.0})
    failed = bb.BenchResult("bootstrap", "desilofhe", {}, None, None, extra={"side": "desilofhe", "error": "x"})
    path = bb.plot([ok, failed], str(tmp_path / "p.png"))
    assert os.path.getsize(path) > 5_000
