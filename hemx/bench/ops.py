"""``hemx bench ops``: latency and batched throughput of HE-Add, HE-Mult, Rescale and Rotate (CROSS Tab. VIII).

For each parameter set: hemx at batch 1 (latency) and at batch B (throughput, one kernel call for the whole
batch), and every installed peer at the same N and the nearest log Q it supports, measured in the same run.
"""

from __future__ import annotations

import math
import warnings
from typing import Iterable, Sequence

import jax
import numpy as np
from rich.console import Console

from hemx.bench.kernels import _progress
from hemx.bench.peers import ADAPTERS, OPS
from hemx.bench.report import BenchResult, render_table
from hemx.bench.timing import time_call
from hemx.ckks import CKKSParameters, Context, precision_stats
from hemx.ckks.security import InsecureParametersWarning

OP_LABELS = {
    "add": "HE-Add",
    "mul": "HE-Mult (relin)",
    "rescale": "Rescale",
    "mul_rescale": "HE-Mult+Rescale",
    "rotate": "Rotate",
}
SETS = {"A": "set_a", "B": "set_b", "C": "set_c", "D": "set_d"}


def _hemx_ops(ctx: Context, keys, a, b, prod) -> dict:
    return {
        "add": lambda: ctx.add(a, b).data,
        "mul": lambda: ctx.mul(a, b, keys).data,
        "rescale": lambda: ctx.rescale(prod).data,
        "mul_rescale": lambda: ctx.mul(a, b, keys, rescale=True).data,
        "rotate": lambda: ctx.rotate(a, 1, keys).data,
    }


def bench_ops(
    sets: Iterable[str] = ("A", "B", "C", "D"),
    *,
    batch: int = 8,
    repeats: int = 3,
    peers: Sequence[str] = ("desilofhe", "tenseal"),
    threads: int = 2,
    ntt: str = "butterfly",
    console: Console | None = None,
) -> list[BenchResult]:
    """Time the HE operations for each set; returns one result per (library, set, op, batch)."""
    console = console or Console()
    sets = [s.upper() for s in sets]
    results: list[BenchResult] = []
    adapters = []
    for name in peers:
        cls = ADAPTERS[name]
        missing = cls.available()
        if missing:
            console.print(f"[yellow]peer {name}: {missing}; skipped[/]")
            continue
        adapters.append(cls(threads) if name == "desilofhe" else cls())
    with _progress(console) as prog:
        task = prog.add_task("HE ops", total=len(sets) * (2 + len(adapters)))
        for s in sets:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", InsecureParametersWarning)
                params = CKKSParameters.preset(SETS[s], allow_insecure=True)
            base = {"set": s, "n": params.n, "log_q": round(params.log_q, 1), "log_qp": round(params.log_qp, 1),
                    "limbs": params.num_limbs, "dnum": params.dnum, "levels": params.max_level}
            prog.update(task, description=f"set {s}: keys")
            ctx = Context(params, ntt=ntt)
            keys = ctx.keygen(rotations=[1])
            rng = np.random.default_rng(0)
            for bsz in (1, batch):
                prog.update(task, description=f"set {s}: hemx batch {bsz}")
                shape = (ctx.slots,) if bsz == 1 else (bsz, ctx.slots)
                x, y = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape)
                a, b = ctx.encrypt(x, keys), ctx.encrypt(y, keys)
                prod = ctx.mul(a, b, keys)
                prec = precision_stats(x * y, ctx.decrypt(ctx.rescale(prod), keys))
                for op, fn in _hemx_ops(ctx, keys, a, b, prod).items():
                    t = time_call(fn, repeats=repeats)
                    params_row = dict(base, batch=bsz, op=op, ntt=ctx.plan.describe(), threads="XLA (all cores)")
                    extra = {"precision_min_bits": prec.min_bits} if op == "mul_rescale" else {}
                    results.append(BenchResult("ops", "hemx", params_row, t.median_s, t.min_s, bsz / t.median_s,
                                               "ct-op/s", extra))
                del a, b, prod
                prog.advance(task)
            del ctx, keys
            for ad in adapters:
                prog.update(task, description=f"set {s}: {ad.name}")
                setup = ad.setup(params.n, params.max_level)
                if setup is None:
                    results.append(BenchResult("ops", ad.name, dict(base, batch=1, op="-"), None,
                                               extra={"skipped": f"{ad.name} has no configuration at N={params.n}"}))
                    prog.advance(task)
                    continue
                for op in OPS:
                    fn = setup.ops.get(op)
                    row = dict(base, batch=1, op=op, peer_n=setup.n, peer_levels=setup.levels,
                               peer_log_q=setup.log_q, peer_note=setup.note)
                    if fn is None:
                        results.append(BenchResult("ops", ad.name, row, None, extra={"skipped": "no such primitive"}))
                        continue
                    t = time_call(fn, repeats=repeats, warmup=1)
                    extra = {"precision_min_bits": setup.precision_bits} if op == "mul_rescale" else {}
                    results.append(BenchResult("ops", ad.name, row, t.median_s, t.min_s, 1 / t.median_s,
                                               "ct-op/s", extra))
                prog.advance(task)
    return results


def print_ops_report(results: Sequence[BenchResult], console: Console | None = None, batch: int = 8) -> None:
    console = console or Console()
    libs = sorted({r.name for r in results if r.suite == "ops" and r.name != "hemx"})
    sets = sorted({r.params["set"] for r in results if r.suite == "ops"})
    rows = []
    for s in sets:
        for op in OPS:
            def lat(lib, b=1):
                for r in results:
                    if (r.suite == "ops" and r.name == lib and r.params.get("set") == s and r.params.get("op") == op
                            and r.params.get("batch") == b and r.median_s is not None):
                        return r
                return None
            h1, hb = lat("hemx"), lat("hemx", batch)
            if h1 is None:
                continue
            row = [s, h1.params["n"], OP_LABELS[op], h1.median_s * 1e3,
                   (hb.median_s / batch * 1e3) if hb else None]
            for lib in libs:
                p = lat(lib)
                row += [p.median_s * 1e3 if p else None, (p.median_s / h1.median_s) if p else None]
            rows.append(row)
    cols = ["set", "N", "op", "hemx ms (b=1)", f"hemx ms/ct (b={batch})"]
    for lib in libs:
        cols += [f"{lib} ms", f"{lib}/hemx"]
    render_table("HE operation latency (same run; ratio > 1 means hemx is faster)", cols, rows, console)
    notes = {}
    for r in results:
        if r.suite == "ops" and r.name != "hemx":
            key = (r.name, r.params.get("set"))
            if "peer_note" in r.params:
                notes[key] = f"N={r.params['peer_n']}, {r.params['peer_levels']} levels; {r.params['peer_note']}"
            elif "skipped" in r.extra:
                notes.setdefault(key, r.extra["skipped"])
    for (lib, s), note in sorted(notes.items()):
        console.print(f"  {lib}, set {s}: {note}")


def plot_ops(results: Sequence[BenchResult], path: str) -> str:
    """Latency against N per operation, hemx and peers (log-log), saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(OPS), figsize=(4 * len(OPS), 3.6), squeeze=False)
    libs = sorted({r.name for r in results if r.suite == "ops"})
    colors = {lib: f"C{i}" for i, lib in enumerate(libs)}  # one colour per library in every panel
    for ax, op in zip(axes[0], OPS):
        for lib in libs:
            pts = sorted((r.params["n"], r.median_s * 1e3) for r in results
                         if r.suite == "ops" and r.name == lib and r.params.get("op") == op
                         and r.params.get("batch") == 1 and r.median_s is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=lib, color=colors[lib])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(OP_LABELS[op])
        ax.set_xlabel("N")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("latency (ms)")
    handles = [plt.Line2D([], [], color=colors[lib], marker="o", label=lib) for lib in libs]
    fig.legend(handles=handles, loc="upper right", ncol=len(libs))
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
