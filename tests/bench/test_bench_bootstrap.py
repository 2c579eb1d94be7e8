"""hemx bench bootstrap: a worker process per side and slot count, figures filled in, the plot written."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import warnings

import pytest

from hemx.bench import bootstrap as bb
from hemx.bench import bootstrap_profile as bp
from hemx.ckks import CKKSParameters, Context, InsecureParametersWarning
from hemx.circuits.bootstrap import BootstrapParameters, bootstrapper_for


def test_bench_bootstrap_sparse_slots_json_and_plot(tmp_path):
    """The whole command on the small boot_12 ring, 64 sparse slots (one worker process), a batch of 4 beside one
    ciphertext alone, the batch in passes of 2; the circuit compiled (the row's time) and eager beside it."""
    plot = tmp_path / "boot.png"
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "hemx", "bench", "bootstrap", "--preset", "boot_12", "--sides",
                           "hemx", "--repeats", "1", "--slots", "64", "--batch", "4", "--chunk", "2", "--out", str(out),
                           "--plot", str(plot)],
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
    assert (e["batch"], e["chunk"], row["params"]["batch"]) == (4, 2, 4) and e["single_s"] > 0
    assert e["amortized_s"] == pytest.approx(e["median_s"] / 4) and e["batch_gain"] > 0
    assert "s per ct" in proc.stdout and "one alone s" in proc.stdout
    cpu = e["cpu"]  # CPU time and page faults of one timed batch call
    assert cpu["user_s"] > 0 and cpu["system_s"] >= 0 and 0 <= cpu["system_share"] < 1 and cpu["page_faults"] >= 0
    assert "hemx: CPU per call" in proc.stdout and "% in the kernel" in proc.stdout
    # --execution both (the default): the compiled circuit timed, the eager one alternately, the two equal
    assert e["execution"] == "both" and e["compile_s"] > 0 and e["eager_median_s"] > 0
    assert e["compiled_bit_exact"] is True
    assert e["compiled_speedup"] == pytest.approx(e["eager_median_s"] / e["median_s"])
    assert "the circuit as one compiled program" in proc.stdout and "bit-exact True" in proc.stdout
    assert e["matrix_engine"]  # which native kernels ran (planning is off in the tests: the vector ones, no A/B)
    # the key count is the sparse circuit's: its rotations and conjugation, relinearization, two encapsulation keys
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        boot = BootstrapParameters.create(CKKSParameters.preset("boot_12", allow_insecure=True), slots=64)
    assert e["keys"] == len(boot.galois_elements) + 1 + 2 == boot.key_count + 1


def test_engine_line_reports_the_tiles_against_the_vector_kernels():
    from hemx.bench.bootstrap import engine_ab_partner, engine_line
    from hemx.plan.engine import EngineChoice

    assert engine_ab_partner(EngineChoice("avx512", "static")) is None  # no tiles in use: nothing to compare
    assert engine_line({"matrix_engine": "avx512 (static)"}) == ""
    row = {"matrix_engine": "amx (cache)", "vector_isa": "avx512", "vector_median_s": 9.58, "engine_speedup": 1.16,
           "engine_bit_exact": True}
    line = engine_line(row)
    assert "on avx512" in line and "9.58 s" in line and "1.16x faster" in line and "bit-exact True" in line


def test_bad_slots_are_refused_with_a_clear_error():
    proc = subprocess.run([sys.executable, "-m", "hemx", "bench", "bootstrap", "--preset", "boot_12", "--slots",
                           "full,100"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "powers of two" in (proc.stderr + proc.stdout)
    assert "Traceback" not in proc.stderr


def test_bad_execution_is_refused_with_a_clear_error():
    from hemx.errors import ParameterError

    with pytest.raises(ParameterError, match="execution must be one of"):
        bb.bench_bootstrap(preset="boot_12", sides=("hemx",), execution="jit")


def test_bad_batch_is_refused_with_a_clear_error():
    for bad in (0, -2, True):
        with pytest.raises(bb.ParameterError, match="batch"):
            bb.bench_bootstrap(preset="boot_12", sides=("hemx",), batch=bad)
    with pytest.raises(bb.ParameterError, match="without batch"):
        bb.bench_bootstrap(preset="boot_12", sides=("hemx",), batch=4, profile=True)
    with pytest.raises(bb.ParameterError, match="chunk"):
        bb.bench_bootstrap(preset="boot_12", sides=("hemx",), batch=4, chunk=0)
    proc = subprocess.run([sys.executable, "-m", "hemx", "bench", "bootstrap", "--preset", "boot_12", "--sides",
                           "hemx", "--batch", "0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "batch" in (proc.stderr + proc.stdout)
    assert "Traceback" not in proc.stderr


def test_key_storages_run_one_process_each(monkeypatch):
    """``--key-storage compact,full``: hemx once per slot count and storage, the peers once, each row labelled."""
    calls = []

    def fake_run_side(side, **kw):
        calls.append((side, kw["slots"], kw["key_storage"]))
        return {"side": side, "slots": kw["slots"] or 2048, "median_s": 1.0, "key_storage": kw["key_storage"]}

    monkeypatch.setattr(bb, "run_side", fake_run_side)
    res = bb.bench_bootstrap(preset="boot_12", sides=("hemx", "desilofhe"), slots=(None, 64),
                             key_storage=("compact", "full"))
    assert calls == [("hemx", None, "compact"), ("hemx", None, "full"), ("hemx", 64, "compact"),
                     ("hemx", 64, "full"), ("desilofhe", None, "auto")]
    assert [r.extra["key_storage"] for r in res] == ["compact", "full", "compact", "full", "auto"]
    with pytest.raises(bb.ParameterError, match="key_storage"):
        bb.bench_bootstrap(preset="boot_12", sides=("hemx",), key_storage=("compact", "seeded"))
    proc = subprocess.run([sys.executable, "-m", "hemx", "bench", "bootstrap", "--preset", "boot_12", "--sides",
                           "hemx", "--key-storage", "compact,bogus"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "key_storage" in (proc.stderr + proc.stdout)
    assert "Traceback" not in proc.stderr


def test_plot_skips_failed_sides(tmp_path):
    ok = bb.BenchResult("bootstrap", "hemx", {"slots": 2048}, 1.0, 0.9,
                        extra={"slots": 2048, "median_s": 1.0, "min_bits": 20.0, "mean_bits": 23.0})
    failed = bb.BenchResult("bootstrap", "desilofhe", {}, None, None, extra={"side": "desilofhe", "error": "x"})
    path = bb.plot([ok, failed], str(tmp_path / "p.png"))
    assert os.path.getsize(path) > 5_000


# ------------------------------------------------------------------------------------------- --profile (issue 27)
def _expected_switches(shapes) -> tuple[int, int]:
    """(key switches, ModUps) of BSGS transforms: every non-zero baby and giant step is a key switch; the babies
    of a transform share one ModUp (a hoisted batch), each giant has its own."""
    ks = sum(t["baby_rotations"] + t["giant_rotations"] for t in shapes)
    modups = sum((t["baby_rotations"] > 0) + t["giant_rotations"] for t in shapes)
    return ks, modups


def test_bench_bootstrap_profile_boot_12(tmp_path):
    """hemx bench bootstrap --profile on boot_12, full slots: stage programs reproduce the bootstrap, exact operation
    counts per stage (against the transforms' BSGS shapes and the compiled programs' native ModUp calls), stage
    times adding up to the whole, kernel kinds from the trace."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "hemx", "bench", "bootstrap", "--preset", "boot_12", "--profile",
                           "--repeats", "5", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "key switches" in proc.stdout and "kernel kinds" in proc.stdout
    (path,) = [os.path.join(out, f) for f in os.listdir(out) if f.startswith("bootstrap-profile-")]
    (row,) = json.load(open(path))["results"]
    e = row["extra"]
    prof = e["profile"]
    stages = {r["stage"]: r for r in prof["stages"]}
    assert list(stages) == ["ModRaise", "CoeffsToSlots", "EvalMod", "SlotsToCoeffs"]  # full slots: no trace
    assert all(r["bit_exact_vs_eager"] and r["median_s"] > 0 for r in stages.values())
    assert e["min_bits"] >= 20.0 and e["level_after"] == 3
    c = {name: r["counts"] for name, r in stages.items()}
    # ModRaise: the two encapsulation switches (to the sparse secret and back), no rotation
    assert c["ModRaise"].get("switch_keys") == 2 == c["ModRaise"]["key_switches"]
    ks, modups = _expected_switches(prof["bsgs"]["CoeffsToSlots"])
    assert (c["CoeffsToSlots"]["key_switches"], c["CoeffsToSlots"]["modups"]) == (ks + 1, modups + 1)  # + conj
    assert c["CoeffsToSlots"]["conjugations"] == 1
    ks, modups = _expected_switches(prof["bsgs"]["SlotsToCoeffs"])
    assert (c["SlotsToCoeffs"]["key_switches"], c["SlotsToCoeffs"]["modups"]) == (ks, modups)
    ev = c["EvalMod"]
    assert ev["key_switches"] == ev["relinearizations"] == ev["modups"] > 0 and ev.get("rotations", 0) == 0
    total = sum(r.get("key_switches", 0) for r in c.values())
    assert prof["whole_jit_counts"]["key_switches"] == total and prof["whole_jit_bit_exact"]
    for name, r in stages.items():  # the compiled programs hold one native ModUp per counted ModUp
        if r["custom_calls"]:  # (the native library is optional)
            assert r["custom_calls"].get("hemx_modup", 0) == r["counts"]["modups"], name
    # the stages add up to the whole: on a shared machine (CI runs two suite processes on two cores) a single sample
    # of a 0.12 s program was 1.58x off, so five repeats and the fastest of each (the statistic load disturbs least);
    # the bound is the same as for the published medians (docs/results/bootstrap-profile-cpu.md), which are tighter
    assert 0.5 < prof["stage_sum_min_ratio"] < 1.5
    assert prof["stage_sum_min_s"] <= prof["stage_sum_s"] and prof["repeats"] == 5
    busy = sum(r["kinds_s"][k] for r in stages.values() for k in bp.KINDS)
    assert busy > 0 and sum(r["kinds_s"]["_events"] for r in stages.values()) > 100


def test_profile_stages_sparse_slots_reproduce_the_bootstrap():
    """64 slots at boot_12: the stage cut includes the subring trace (log2(N / 2s) rotations) and, chained eagerly,
    gives the bootstrap's ciphertext bit for bit; counting works eagerly too."""
    import jax
    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        ctx = Context(CKKSParameters.preset("boot_12", allow_insecure=True), slots=64)
    bt = bootstrapper_for(ctx)
    keys = ctx.keygen(bootstrap=bt)
    evk = keys.evaluation_keys()
    ct = ctx.drop_level(ctx.encrypt(np.random.default_rng(3).uniform(-1, 1, 64), keys), 0)
    stages = bp.stage_functions(bt, evk)
    assert [s for s, _ in stages] == ["ModRaise", "SubringTrace", "CoeffsToSlots", "EvalMod", "SlotsToCoeffs"]
    x, counts = ct, {}
    for name, fn in stages:
        with bp.count_ops(ctx) as c:
            x = jax.block_until_ready(fn(x))
        counts[name] = dict(c)
    assert "_run" not in ctx.__dict__  # the counter is removed again
    want = bt.bootstrap(ct, evk)
    assert np.array_equal(np.asarray(x.data), np.asarray(want.data)) and (x.level, x.scale) == (want.level, want.scale)
    assert counts["SubringTrace"]["rotations"] == counts["SubringTrace"]["key_switches"] == len(bt.trace_steps) == 5


def test_hlo_instruction_kinds():
    hlo = """ENTRY %main {
  %ffi_call.3 = u32[3,52,4096]{2,1,0} custom-call(%a, %b), custom_call_target="hemx_modup", api_version=API_VERSION_TYPED_FFI
  %wrapped_slice.5 = u32[3,2,50,4096]{3,2,1,0} fusion(%c), kind=kLoop, calls=%wrapped_slice_computation.5
  %add_select_fusion.1 = u32[2,50,4096]{2,1,0} fusion(%d, %e), kind=kLoop, calls=%fused_computation.1
  %ffi_call.7 = u32[2,52,4096]{2,1,0} custom-call(%a, %k, %s, %q, %m), custom_call_target="hemx_key_product"
  ROOT %ffi_call.9 = u32[2,48,4096]{2,1,0} custom-call(%f), custom_call_target="hemx_divide"
}"""
    kinds = bp.hlo_instructions(hlo)
    assert kinds == {"ffi_call.3": "ModUp (fused)", "wrapped_slice.5": "copies", "add_select_fusion.1": "element-wise",
                     "ffi_call.7": "inner product", "ffi_call.9": "ModDown / rescale (fused)"}
    assert bp.custom_call_counts(hlo) == {"hemx_modup": 1, "hemx_key_product": 1, "hemx_divide": 1}


# ------------------------------------------------------------------------------------------ Lattigo beside
LATTIGO_REPORT = pathlib.Path(__file__).parent / "data" / "lattigo_report_logn12.txt"  # a real run (-logn 12)


def test_lattigo_report_is_parsed():
    from hemx.bench import bootstrap as bb

    row = bb.parse_lattigo(LATTIGO_REPORT.read_text())
    assert row["keygen_s"] == 1.49 and row["key_bytes"] == 285290453 and row["slots"] == 2048
    assert row["first_s"] == 0.612 and row["median_s"] == pytest.approx((1.392 + 0.584) / 2)
    assert row["min_s"] == 0.584 and row["min_bits"] == 25.01 and row["mean_bits"] == pytest.approx(27.10)
    assert (row["level_after"], row["max_level"], row["runs"]) == (9, 9, 3) and row["peak_rss_gib"] == 0.567
    assert "error" in bb.parse_lattigo("keygen: total 1 s\n")


def test_lattigo_side_runs_the_program_it_is_given(tmp_path, monkeypatch):
    """The side runs $HEMX_LATTIGO_BENCH with the preset, the runs and GOMAXPROCS; without it, a clear error."""
    from hemx.bench import bootstrap as bb

    fake = tmp_path / "bench"
    log = tmp_path / "argv"
    fake.write_text(f"#!/bin/sh\necho \"$@ GOMAXPROCS=$GOMAXPROCS\" > {log}\ncat {LATTIGO_REPORT}\n")
    fake.chmod(0o755)
    monkeypatch.setenv(bb.LATTIGO_ENV, str(fake))
    (result,) = bb.bench_bootstrap(sides=("lattigo",), repeats=3, threads=2, lattigo_params="N16QP1546H192H32")
    assert log.read_text().split() == ["-params", "N16QP1546H192H32", "-runs", "3", "GOMAXPROCS=2"]
    assert result.name == "lattigo" and result.params["preset"] == "N16QP1546H192H32"
    assert result.extra["min_bits"] == 25.01 and result.median_s == pytest.approx(0.988)
    monkeypatch.setenv(bb.LATTIGO_ENV, str(tmp_path / "missing"))
    (missing,) = bb.bench_bootstrap(sides=("lattigo",), repeats=2)
    assert bb.LATTIGO_ENV in missing.extra["error"]


def test_cpu_usage_spans_add_and_split_per_call():
    from hemx.bench.timing import CpuUsage, cpu_usage

    before = cpu_usage()
    sum(i * i for i in range(300_000))  # user time
    span = cpu_usage() - before
    assert span.user_s >= 0 and span.minor_faults >= 0
    a, b = CpuUsage(3.0, 1.0, 10, 2), CpuUsage(1.0, 1.0, 4, 0)
    assert a + b == CpuUsage(4.0, 2.0, 14, 2) and (a + b) - b == a
    assert a.per_call(2) == {"user_s": 1.5, "system_s": 0.5, "system_share": 0.25, "page_faults": 6.0}
    assert CpuUsage(0.0, 0.0, 0, 0).per_call(0)["system_share"] == 0.0
    assert bb.cpu_line(a.per_call(1)) == ("CPU per call 3.00 s user + 1.00 s system (25.0 % in the kernel), "
                                          "12 page faults") and bb.cpu_line(None) == ""
