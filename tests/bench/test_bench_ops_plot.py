"""hemx bench ops: the dispatch setting, the pure-JAX-kernel rows and the latency-vs-N plot (no timing checked)."""

from __future__ import annotations

import json

import pytest

from hemx.bench import ops as ob
from hemx.bench.report import BenchResult, load_results, save_results
from hemx.errors import ParameterError


def _row(name, n, op, ms, **params):
    return BenchResult("ops", name, dict(set="X", n=n, op=op, batch=1, **params), ms / 1e3, ms / 1e3)


def test_dispatch_mode_is_checked_and_reported():
    with pytest.raises(ParameterError):
        ob.set_cpu_dispatch("eager")
    # this process already has its JAX client: the setting in effect is reported, not changed
    assert ob.set_cpu_dispatch("sync") in ob.DISPATCH_MODES


def test_plot_draws_native_jax_and_peers_against_n(tmp_path):
    results = []
    for n, scale in ((1 << 12, 1), (1 << 13, 2), (1 << 14, 4)):
        for op in ("add", "mul_rescale", "rotate"):
            results.append(_row("hemx", n, op, 0.1 * scale, native=True))
            results.append(_row(ob.JAX_KERNELS, n, op, 0.3 * scale, native=False))
            if n < 1 << 14:  # a peer without a point at some N: left out, no error
                results.append(_row("tenseal", n, op, 0.2 * scale))
    results.append(BenchResult("ops", "desilofhe", dict(set="X", n=4096, op="rotate", batch=1), None))  # skipped
    path = ob.plot_ops(results, str(tmp_path / "ops.png"), ops=("add", "mul_rescale", "rotate"), title="t")
    assert (tmp_path / "ops.png").stat().st_size > 1000 and path.endswith("ops.png")
    assert ob._series_label(results, "hemx") == "hemx, native kernels"
    assert ob._series_label(results, ob.JAX_KERNELS) == "hemx, pure-JAX kernels"
    with pytest.raises(ParameterError):
        ob.plot_ops([], str(tmp_path / "none.png"))


def test_results_round_trip_through_json(tmp_path):
    results = [_row("hemx", 4096, "add", 0.1, native=True, dispatch="sync")]
    path = save_results(results, "ops", str(tmp_path))
    assert json.load(open(path))["results"][0]["params"]["dispatch"] == "sync"
    assert load_results(path) == results


def test_jax_kernel_rows_come_from_a_fresh_process_without_native_kernels():
    with pytest.raises(ParameterError):
        ob.bench_jax_kernels(["nope"])
    rows = ob.bench_jax_kernels(["A"], repeats=1, threads=None)
    assert {r.name for r in rows} == {ob.JAX_KERNELS}
    assert {r.params["op"] for r in rows} == set(ob.OPS)
    assert all(r.params["native"] is False and r.params["batch"] == 1 and r.median_s > 0 for r in rows)
