"""Rows, tables, JSON lines and plots for the CiFlow reproduction and for hemx parameter sets.

Every row is a flat dict with at least ``benchmark``, ``dataflow``, ``dram_mb`` and
``arithmetic_intensity``; ``table`` says which report it belongs to. Paper values sit beside the model's
under ``paper_*`` keys, with the relative error in percent.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Sequence

from hemx.dataflow.benchmarks import (
    BENCHMARKS, CIFLOW_SCRATCHPAD_MB, PAPER_TAB2, PAPER_TAB3, PAPER_TAB4, PAPER_TEXT, SWEEP_GBS,
)
from hemx.dataflow.model import GB, RPU_MODOPS, Analyzer, Machine
from hemx.dataflow.schedule import DATAFLOWS
from hemx.dataflow.shape import MIB, KeySwitchShape

TAB2_TOLERANCE = 0.15
# CiFlow Fig. 5 / Fig. 6: bandwidth at which OC with streamed keys matches the baseline
PAPER_STREAM_BASE = {"BTS3": PAPER_TEXT["bts3_oc_stream_base_gbs"], "ARK": PAPER_TEXT["ark_oc_stream_base_gbs"]}


def _err(model: float, paper: float) -> float:
    return round(100.0 * (model / paper - 1.0), 2)


def _names(benchmarks: Iterable[str] | None) -> list[str]:
    return list(BENCHMARKS) if benchmarks is None else [b.upper() for b in benchmarks]


# ---------------------------------------------------------------------------------------------- rows
def tab2_rows(machine: Machine | None = None, benchmarks: Iterable[str] | None = None,
              analyzer: Analyzer | None = None) -> list[dict[str, Any]]:
    """CiFlow Tab. II: DRAM MB (keys included) and arithmetic intensity per dataflow, 32 MB, keys streamed."""
    an = analyzer or Analyzer()
    machine = machine or Machine.create(CIFLOW_SCRATCHPAD_MB, keys="stream")
    # the paper's numbers are compared only under the paper's setting (32 MB of data memory, keys streamed)
    comparable = machine.keys == "stream" and machine.scratchpad_bytes == CIFLOW_SCRATCHPAD_MB * MIB
    rows = []
    for name in _names(benchmarks):
        shape = BENCHMARKS[name].shape()
        for flow in DATAFLOWS:
            res = an.analyze(shape, flow, machine)
            row = {"table": "tab2", **res.as_dict()}
            paper = PAPER_TAB2.get(name, {}).get(flow) if comparable else None
            if paper:
                row["paper_dram_mb"], row["paper_ai"] = paper
                row["dram_error_pct"] = _err(res.dram_mb, paper[0])
                row["ai_error_pct"] = _err(res.arithmetic_intensity, paper[1])
                row["within_15pct"] = abs(res.dram_mb / paper[0] - 1.0) <= TAB2_TOLERANCE
            rows.append(row)
    return rows


def tab2_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How many Tab. II cells are within 15 %, and whether OC < DC <= MP holds in every benchmark."""
    cells = [r for r in rows if "paper_dram_mb" in r]
    by = {}
    for r in rows:
        by.setdefault(r["benchmark"], {})[r["dataflow"]] = r["dram_mb"]
    order = {b: (v["OC"] < v["DC"] <= v["MP"]) for b, v in by.items() if set(v) >= {"MP", "DC", "OC"}}
    return {
        "cells": len(cells),
        "within_15pct": sum(bool(r["within_15pct"]) for r in cells),
        "misses": [f"{r['benchmark']}/{r['dataflow']} ({r['dram_error_pct']:+.1f}%)" for r in cells
                   if not r["within_15pct"]],
        "mean_abs_error_pct": round(sum(abs(r["dram_error_pct"]) for r in cells) / len(cells), 2) if cells else None,
        "order_oc_lt_dc_le_mp": order,
    }


def tab3_rows(machine: Machine | None = None, benchmarks: Iterable[str] | None = None,
              analyzer: Analyzer | None = None) -> list[dict[str, Any]]:
    """CiFlow Tab. III: evk size and temporary data, with each dataflow's working set beside them."""
    an = analyzer or Analyzer()
    machine = machine or Machine.create(CIFLOW_SCRATCHPAD_MB, keys="stream")
    rows = []
    for name in _names(benchmarks):
        b = BENCHMARKS[name]
        shape = b.shape()
        evk, temp = shape.evk_bytes / MIB, shape.temp_bytes / MIB
        p_evk, p_temp = PAPER_TAB3[name]
        for flow in DATAFLOWS:
            res = an.analyze(shape, flow, machine)
            rows.append({
                "table": "tab3", **res.as_dict(),
                "log_n": b.log_n, "alpha": b.alpha,
                "evk_mb": evk, "paper_evk_mb": p_evk, "evk_exact": evk == p_evk,
                "temp_mb": temp, "paper_temp_mb": p_temp, "temp_error_pct": _err(temp, p_temp),
            })
    return rows


def _oc_base(an: Analyzer, shape: KeySwitchShape, machine: Machine, target_s: float, lo: float = 0.5,
             hi: float | None = None) -> float:
    """Smallest bandwidth (GB/s) at which OC's runtime is at most ``target_s`` (runtime is monotone in it)."""
    def rt(gbs: float) -> float:
        return an.analyze(shape, "OC", machine.with_(bandwidth=gbs * GB)).timing.runtime_s

    hi = hi or machine.bandwidth / GB
    if rt(hi) > target_s:  # not even at the highest bandwidth tried
        return math.inf
    if rt(lo) <= target_s:
        return lo
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if rt(mid) <= target_s:
            hi = mid
        else:
            lo = mid
    return hi


def tab4_rows(modops: float = RPU_MODOPS, baseline_gbs: float = 64.0, scratchpad_mb: float = CIFLOW_SCRATCHPAD_MB,
              keys: str = "onchip", benchmarks: Iterable[str] | None = None,
              analyzer: Analyzer | None = None) -> list[dict[str, Any]]:
    """CiFlow Tab. IV: the bandwidth at which OC matches MP at 64 GB/s (keys on chip), and the speedup there."""
    an = analyzer or Analyzer()
    rows = []
    for name in _names(benchmarks):
        shape = BENCHMARKS[name].shape()
        base_m = Machine.create(scratchpad_mb, baseline_gbs, modops, keys)
        base = an.analyze(shape, "MP", base_m).timing.runtime_s
        bw = _oc_base(an, shape, base_m, base)
        at = base_m.with_(bandwidth=bw * GB) if math.isfinite(bw) else base_m
        oc = an.analyze(shape, "OC", at)
        mp = an.analyze(shape, "MP", at)
        stream_bw = _oc_base(an, shape, base_m.with_(keys="stream"), base, hi=4 * baseline_gbs)
        p = PAPER_TAB4[name]
        rows.append({
            "table": "tab4", **oc.as_dict(),
            "baseline_mp_ms": round(base * 1e3, 4),
            "oc_base_gbs": round(bw, 3), "saved_bw": round(baseline_gbs / bw, 3),
            "oc_ms": round(oc.timing.runtime_s * 1e3, 4), "mp_ms": round(mp.timing.runtime_s * 1e3, 4),
            "speedup": round(mp.timing.runtime_s / oc.timing.runtime_s, 3),
            "oc_idle_fraction": round(oc.timing.idle_fraction, 4),
            "mp_idle_fraction": round(mp.timing.idle_fraction, 4),
            "paper_oc_base_gbs": p[0], "paper_saved_bw": p[1], "paper_oc_ms": p[2], "paper_mp_ms": p[3],
            "paper_speedup": p[4],
            "oc_stream_base_gbs": round(stream_bw, 3),
            "paper_oc_stream_base_gbs": PAPER_STREAM_BASE.get(name),
        })
    return rows


def sweep_rows(bandwidths_gbs: Sequence[float] = SWEEP_GBS, keys: str = "onchip", modops: float = RPU_MODOPS,
               scratchpad_mb: float = CIFLOW_SCRATCHPAD_MB, benchmarks: Iterable[str] | None = None,
               shapes: Sequence[KeySwitchShape] | None = None,
               analyzer: Analyzer | None = None) -> list[dict[str, Any]]:
    """Runtime and idle time against DRAM bandwidth for every dataflow (CiFlow Fig. 4, 5 and 6)."""
    an = analyzer or Analyzer()
    shapes = list(shapes) if shapes is not None else [BENCHMARKS[n].shape() for n in _names(benchmarks)]
    rows = []
    for shape in shapes:
        for flow in DATAFLOWS:
            for gbs in bandwidths_gbs:
                m = Machine.create(scratchpad_mb, gbs, modops, keys)
                rows.append({"table": "sweep", **an.analyze(shape, flow, m).as_dict()})
    return rows


def params_rows(params, level: int | None = None, machine: Machine | None = None, word_bytes: int = 4,
                analyzer: Analyzer | None = None) -> list[dict[str, Any]]:
    """The same analysis for a hemx parameter set (one row per dataflow)."""
    an = analyzer or Analyzer()
    machine = machine or Machine()
    shape = KeySwitchShape.from_params(params, level, word_bytes=word_bytes)
    rows = []
    for flow in DATAFLOWS:
        res = an.analyze(shape, flow, machine)
        rows.append({"table": "params", **res.as_dict(), "level": params.max_level if level is None else level,
                     "temp_mb": round(shape.temp_bytes / MIB, 3)})
    return rows


# ---------------------------------------------------------------------------------------------- output
def json_lines(rows: Iterable[dict[str, Any]]) -> str:
    """One JSON object per row, one per line."""
    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v

    return "\n".join(json.dumps({k: clean(v) for k, v in r.items()}, sort_keys=False) for r in rows)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:,.2f}" if abs(v) < 1e5 else f"{v:,.0f}"
    return "" if v is None else str(v)


COLUMNS = {
    "tab2": [("benchmark", "bench"), ("dataflow", "flow"), ("dram_mb", "DRAM MB"), ("paper_dram_mb", "paper MB"),
             ("dram_error_pct", "err %"), ("within_15pct", "<=15%"), ("arithmetic_intensity", "AI"),
             ("paper_ai", "paper AI"), ("ai_error_pct", "AI err %"), ("spill_read_mb", "spill rd"),
             ("spill_write_mb", "spill wr"), ("evk_traffic_mb", "evk MB"), ("working_set_mb", "work set MB")],
    "tab3": [("benchmark", "bench"), ("log_n", "log N"), ("towers", "k_l"), ("special", "k_p"), ("dnum", "dnum"),
             ("alpha", "alpha"), ("evk_mb", "evk MB"), ("paper_evk_mb", "paper"), ("evk_exact", "exact"),
             ("temp_mb", "temp MB"), ("paper_temp_mb", "paper"), ("temp_error_pct", "err %"),
             ("dataflow", "flow"), ("working_set_mb", "work set MB")],
    "tab4": [("benchmark", "bench"), ("baseline_mp_ms", "MP@64 ms"), ("oc_base_gbs", "OC_base GB/s"),
             ("paper_oc_base_gbs", "paper"), ("saved_bw", "saved BW"), ("paper_saved_bw", "paper"),
             ("oc_ms", "OC ms"), ("paper_oc_ms", "paper"), ("mp_ms", "MP ms"), ("paper_mp_ms", "paper"),
             ("speedup", "speedup"), ("paper_speedup", "paper"), ("oc_idle_fraction", "OC idle"),
             ("mp_idle_fraction", "MP idle"), ("oc_stream_base_gbs", "OC_base keys streamed"),
             ("paper_oc_stream_base_gbs", "paper")],
    "sweep": [("benchmark", "bench"), ("dataflow", "flow"), ("bandwidth_gbs", "GB/s"), ("keys", "keys"),
              ("runtime_ms", "runtime ms"), ("compute_ms", "compute ms"), ("idle_fraction", "idle"),
              ("dram_mb", "DRAM MB"), ("arithmetic_intensity", "AI")],
    "params": [("benchmark", "params"), ("dataflow", "flow"), ("level", "level"), ("towers", "l"),
               ("special", "K"), ("dnum", "dnum"), ("dram_mb", "DRAM MB"), ("evk_traffic_mb", "evk MB"),
               ("spill_read_mb", "spill rd"), ("spill_write_mb", "spill wr"), ("working_set_mb", "work set MB"),
               ("scratchpad_peak_mb", "peak MB"), ("arithmetic_intensity", "AI"), ("runtime_ms", "runtime ms"),
               ("idle_fraction", "idle")],
}

TITLES = {
    "tab2": "CiFlow Tab. II: DRAM traffic (MiB, keys streamed) and arithmetic intensity (ops/byte)",
    "tab3": "CiFlow Tab. III: key and temporary sizes (MiB), with each dataflow's working set",
    "tab4": "CiFlow Tab. IV: bandwidth at which OC (keys on chip) matches MP at 64 GB/s",
    "sweep": "Runtime against DRAM bandwidth (CiFlow Fig. 4)",
    "params": "Key switching of a hemx parameter set",
}


def render_table(rows: Sequence[dict[str, Any]], table: str, console=None, title: str | None = None) -> None:
    """Print ``rows`` as a rich table with the columns registered for ``table``."""
    from rich.table import Table

    if console is None:
        from rich.console import Console

        console = Console()
    cols = [(k, h) for k, h in COLUMNS[table] if any(k in r for r in rows)]
    t = Table(title=title or TITLES.get(table, table))
    for _, h in cols:
        t.add_column(h, justify="right" if h not in ("bench", "flow", "params", "keys") else "left")
    for r in rows:
        t.add_row(*(_fmt(r.get(k)) for k, _ in cols))
    console.print(t)


def render_sweep(rows: Sequence[dict[str, Any]], console=None) -> None:
    """The sweep as one line per benchmark and dataflow, runtime (ms) and idle share per bandwidth."""
    from rich.table import Table

    if console is None:
        from rich.console import Console

        console = Console()
    bws = sorted({r["bandwidth_gbs"] for r in rows})
    keys = ", ".join(sorted({str(r.get("keys")) for r in rows}))
    t = Table(title=f"{TITLES['sweep']}: runtime ms (compute idle %), keys {keys}")
    t.add_column("bench", justify="left")
    t.add_column("flow", justify="left")
    for b in bws:
        t.add_column(f"{b:g} GB/s", justify="right")
    seen = list(dict.fromkeys((r["benchmark"], r["dataflow"]) for r in rows))
    for bench, flow in seen:
        cell = {r["bandwidth_gbs"]: r for r in rows if r["benchmark"] == bench and r["dataflow"] == flow}
        t.add_row(bench, flow, *(f"{cell[b]['runtime_ms']:.2f} ({100 * cell[b]['idle_fraction']:.0f}%)"
                                 if b in cell else "" for b in bws))
    console.print(t)


def plot_sweep(rows: Sequence[dict[str, Any]], path: str) -> str:
    """Runtime against bandwidth, one panel per benchmark, one line per dataflow (PNG or any matplotlib format)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    benches = list(dict.fromkeys(r["benchmark"] for r in rows))
    ncol = min(3, len(benches)) or 1
    nrow = -(-len(benches) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.3 * nrow), squeeze=False)
    styles = {"MP": ("tab:red", "o"), "DC": ("tab:blue", "s"), "OC": ("tab:green", "^")}
    for ax, b in zip(axes.flat, benches):
        for flow in DATAFLOWS:
            pts = sorted((r["bandwidth_gbs"], r["runtime_ms"]) for r in rows
                         if r["benchmark"] == b and r["dataflow"] == flow)
            if pts:
                color, marker = styles[flow]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=flow)
        ax.set_xscale("log", base=2)
        ax.set_title(b)
        ax.set_xlabel("DRAM bandwidth (GB/s)")
        ax.set_ylabel("key-switch runtime (ms)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    for ax in list(axes.flat)[len(benches):]:
        ax.set_visible(False)
    keys = {r.get("keys") for r in rows}
    fig.suptitle(f"hemx.dataflow model: runtime vs bandwidth (keys: {', '.join(sorted(k for k in keys if k))})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
