"""``hemx bench keyswitch``: the three key-switching dataflows measured on the real backend.

For one relinearization key switch at the top level of a parameter set: median latency, and the peak working
set of the compiled kernel. On CPU the working set is the temporary bytes XLA allocates
(``jax.jit(...).lower(...).compile().memory_analysis().temp_size_in_bytes``); on a GPU the device's peak
memory statistics are read as well. When :mod:`hemx.dataflow` is available its prediction for the same run
is reported beside the measurement.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Iterable, Sequence

import jax
import numpy as np
from rich.console import Console

from hemx.bench.kernels import _progress
from hemx.bench.report import BenchResult, render_table
from hemx.bench.timing import time_call
from hemx.ckks import CKKSParameters, Context
from hemx.ckks import keyswitch as ks
from hemx.ckks.security import InsecureParametersWarning

SETS = {"A": "set_a", "B": "set_b", "C": "set_c", "D": "set_d"}


def _compiled_memory(fn, *args) -> dict:
    compiled = jax.jit(fn).lower(*args).compile()
    mem = compiled.memory_analysis()
    if mem is None:  # pragma: no cover - backend dependent
        return {}
    return {
        "temp_bytes": int(mem.temp_size_in_bytes),
        "argument_bytes": int(mem.argument_size_in_bytes),
        "output_bytes": int(mem.output_size_in_bytes),
    }


def _device_peak() -> int | None:
    stats = getattr(jax.devices()[0], "memory_stats", lambda: None)()
    return int(stats["peak_bytes_in_use"]) if stats and "peak_bytes_in_use" in stats else None


def bench_keyswitch(
    sets: Iterable[str] = ("C", "D"),
    dataflows: Sequence[str] = ks.DATAFLOWS,
    *,
    repeats: int = 3,
    ntt: str = "butterfly",
    console: Console | None = None,
) -> list[BenchResult]:
    console = console or Console()
    sets = [s.upper() for s in sets]
    results = []
    try:
        from hemx import dataflow as model
    except ImportError:  # the model is optional here
        model = None
    with _progress(console) as prog:
        task = prog.add_task("key switching", total=len(sets) * len(dataflows))
        for s in sets:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", InsecureParametersWarning)
                params = CKKSParameters.preset(SETS[s], allow_insecure=True)
            ctx = Context(params, ntt=ntt)
            keys = ctx.keygen(rotations=())
            level = params.max_level
            t = ctx.level_tables(level)
            x = ctx.encrypt(np.random.default_rng(0).uniform(-1, 1, ctx.slots), keys).data[1]
            ref = None
            for flow in dataflows:
                prog.update(task, description=f"set {s}: {flow}")
                fn = partial(ks.keyswitch, num_p=ctx.num_p, reduction=ctx.reduction, dataflow=flow)
                args = (x, keys.relin.data, ctx.plan, t)
                mem = _compiled_memory(fn, *args)
                jitted = jax.jit(fn)
                out = np.asarray(jitted(*args))
                ref = out if ref is None else ref
                tm = time_call(jitted, *args, repeats=repeats)
                row = {"set": s, "n": params.n, "limbs": t.num_q, "special": ctx.num_p, "dnum": params.dnum,
                       "level": level, "dataflow": flow, **mem}
                peak = _device_peak()
                if peak is not None:
                    row["device_peak_bytes"] = peak
                extra = {"identical_to_first": bool(np.array_equal(out, ref))}
                if model is not None and hasattr(model, "predict"):
                    try:
                        extra["model"] = model.predict(params, flow, level=level)
                    except Exception as exc:  # report, do not hide
                        extra["model_error"] = f"{type(exc).__name__}: {exc}"
                results.append(BenchResult("keyswitch", flow, row, tm.median_s, tm.min_s, 1 / tm.median_s,
                                           "keyswitch/s", extra))
                prog.advance(task)
            del ctx, keys
    return results


def print_keyswitch_report(results: Sequence[BenchResult], console: Console | None = None) -> None:
    console = console or Console()
    rows = []
    for r in results:
        if r.suite != "keyswitch":
            continue
        mp = next((x for x in results if x.suite == "keyswitch" and x.params["set"] == r.params["set"]
                   and x.name == "mp"), None)
        temp = r.params.get("temp_bytes")
        mp_temp = mp.params.get("temp_bytes") if mp else None
        m = r.extra.get("model", {})
        rows.append([r.params["set"], r.params["n"], r.params["limbs"], r.name, r.median_s * 1e3,
                     (r.median_s / mp.median_s) if mp else None, temp / 2**20 if temp is not None else None,
                     (temp / mp_temp) if temp is not None and mp_temp else None,
                     m.get("working_set_mb"), m.get("dram_mb"), "yes" if r.extra.get("identical_to_first") else "NO"])
    render_table("Key switching dataflows (one relinearization key switch at the top level)",
                 ["set", "N", "limbs", "dataflow", "ms", "x MP time", "peak temp MiB", "x MP memory",
                  "model working set MB", "model DRAM MB", "identical"], rows, console)
