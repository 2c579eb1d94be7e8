"""First call against steady call in a new process with new keys: ``jax.jit`` beside ``hemx.jit`` (issue 26).

``hemx bench first-call`` runs each case in two fresh processes that share a new temporary ``HEMX_CACHE_DIR``:

1. process 1 (cold): keys from seed 1, then a second key set (seed 2) in the same process;
2. processes 2, 3, ... (warm, ``--warm-processes``): new keys each, the programs of process 1 on disk.

For ``jax.jit`` the program is found in JAX's persistent compilation cache after tracing and lowering; for
``hemx.jit`` it is loaded (``Program.prepare``, timed apart) without either. Each process prints one
``HEMX_SUMMARY`` JSON line (``python -m hemx.bench.first_call CASE MODE SEED [SEED2]``): first and steady call
times, compilations / cache loads (JAX's monitoring events), traces of the circuit, decryption errors.

Cases: ``mul_rotate`` (HE-Mult + rescale + Rotate by 1, CROSS set C, N = 2^14, 15 limbs) and ``boot_12``
(a bootstrap at the ``boot_12`` preset, N = 2^12). Both use ``planning="off"`` (the same kernels in every process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

CASES = ("mul_rotate", "boot_12")
MODES = ("jax", "program")


def worker(case: str, mode: str, seeds: list[int]) -> dict:
    """One process: the case's circuit jitted by ``mode``, called a few times for each key set of ``seeds``."""
    import jax
    import numpy as np

    from hemx import compilation_cache
    from hemx.ckks import CKKSParameters, Context, InsecureParametersWarning, Sampler
    from hemx.circuits.bootstrap import bootstrap, bootstrapper_for
    from hemx.circuits.program import jit as hemx_jit

    if case not in CASES or mode not in MODES:
        raise SystemExit(f"case must be one of {CASES} and mode one of {MODES}, got {case!r} {mode!r}")
    warnings.simplefilter("ignore", InsecureParametersWarning)
    events = {"misses": 0, "hits": 0}

    def listen(event, **_):
        if event == "/jax/compilation_cache/cache_misses":
            events["misses"] += 1
        elif event == "/jax/compilation_cache/cache_hits":
            events["hits"] += 1

    jax.monitoring.register_event_listener(listen)
    summary: dict = {"case": case, "mode": mode, "cache": compilation_cache.status().as_dict(), "key_sets": []}
    traces = [0]
    preset = "set_c" if case == "mul_rotate" else "boot_12"
    params = CKKSParameters.preset(preset, allow_insecure=True)
    ctx = Context(params, planning="off", sampler=Sampler.insecure_for_tests(seeds[0]))
    summary["params"] = params.describe()

    def circuit(a, keys):
        traces[0] += 1
        if case == "mul_rotate":
            return ctx.rotate(ctx.mul(a, a, keys, rescale=True), 1, keys)
        return bootstrap(ctx, a, keys)

    jitted = jax.jit(circuit) if mode == "jax" else hemx_jit(circuit)
    rng = np.random.default_rng(seeds[0])
    for index, seed in enumerate(seeds):
        if index:
            ctx.sampler = Sampler.insecure_for_tests(seed)
        keys = ctx.keygen(rotations=[1]) if case == "mul_rotate" else ctx.keygen(bootstrap=bootstrapper_for(ctx))
        x = rng.uniform(-1, 1, ctx.slots)
        ct = ctx.encrypt(x, keys)
        if case != "mul_rotate":
            ct = ctx.drop_level(ct, 0)
        jax.block_until_ready(ct.data)  # encryption is dispatched asynchronously: not part of the first call
        want = np.roll(x * x, -1) if case == "mul_rotate" else x
        before = dict(events)
        prepare = None
        if mode == "program":
            start = time.perf_counter()
            prepare = {"how": jitted.prepare(ct, keys), "seconds": time.perf_counter() - start}
        times = []
        for _ in range(4 if case == "mul_rotate" else 3):
            start = time.perf_counter()
            out = jitted(ct, keys)
            jax.block_until_ready(out.data)
            times.append(time.perf_counter() - start)
        record = {
            "seed": seed, "first_s": times[0], "steady_s": float(np.median(times[1:])), "prepare": prepare,
            "compiles": events["misses"] - before["misses"], "cache_loads": events["hits"] - before["hits"],
            "traces_so_far": traces[0], "max_error": float(np.max(np.abs(ctx.decrypt(out, keys) - want))),
            "key_id": keys.key_id, "out_key_id": out.key_id,
        }
        if mode == "program":
            s = jitted.stats
            record["program"] = {"compiled": s.compiled, "loaded": s.loaded, "written": s.written,
                                 "persistent": jitted.persistent, "reason": jitted.reason}
        summary["key_sets"].append(record)
    return summary


def run_process(case: str, mode: str, seeds, cache_dir: str, timeout: float = 1800) -> dict:
    """Run :func:`worker` in a fresh Python process with ``HEMX_CACHE_DIR=cache_dir``; its summary."""
    env = dict(os.environ, HEMX_CACHE_DIR=str(cache_dir), HEMX_COMPILATION_CACHE="1", HEMX_PROGRAMS="1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-m", "hemx.bench.first_call", case, mode, *map(str, seeds)],
                          env=env, capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("HEMX_SUMMARY ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"first-call worker {case}/{mode} failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1].split(" ", 1)[1])


def bench(cases=CASES, modes=MODES, console=None, *, warm_processes: int = 1) -> list[dict]:
    """Per case and mode: one cold process, then ``warm_processes`` new processes with new keys; rows for the
    report (the warm figures are medians over the warm processes, with the range of first / steady)."""
    import statistics

    rows = []
    for case in cases:
        for mode in modes:
            with tempfile.TemporaryDirectory(prefix="hemx-first-call-") as tmp:
                if console is not None:
                    console.print(f"[dim]{case} / {mode}: cold process...[/dim]")
                cold = run_process(case, mode, [1, 2], tmp)
                warm = []
                for i in range(warm_processes):
                    if console is not None:
                        console.print(f"[dim]{case} / {mode}: warm process {i + 1}/{warm_processes}...[/dim]")
                    warm.append(run_process(case, mode, [3 + i], tmp)["key_sets"][0])
            first, second = cold["key_sets"]

            def load(record) -> float:
                return (record["prepare"] or {}).get("seconds") or 0.0

            ratios = [w["first_s"] / w["steady_s"] for w in warm]
            rows.append({
                "case": case, "mode": mode, "warm_processes": warm_processes,
                "cold_first_s": first["first_s"] + load(first),
                "second_key_set_s": second["first_s"] + load(second),
                "warm_prepare_s": statistics.median(load(w) for w in warm) if mode == "program" else None,
                "warm_first_s": statistics.median(w["first_s"] for w in warm),
                "warm_steady_s": statistics.median(w["steady_s"] for w in warm),
                "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
                "ratio_with_load": statistics.median((w["first_s"] + load(w)) / w["steady_s"] for w in warm),
                "warm_compiles": max(w["compiles"] for w in warm), "warm_program": [w.get("program") for w in warm],
                "max_error": max([first["max_error"], second["max_error"]] + [w["max_error"] for w in warm]),
            })
    return rows


def print_report(rows: list[dict], console) -> None:
    from rich.table import Table

    table = Table(title="First call in a new process with new keys (warm caches), against steady calls "
                  "(medians over the warm processes)")
    for col in ("case", "jit", "process 1 first s", "2nd key set s", "process 2 load s", "process 2 first s",
                "steady s", "first / steady (range)", "(load + first) / steady", "XLA compiles in 2"):
        table.add_column(col)
    for r in rows:
        load = "-" if r["warm_prepare_s"] is None else f"{r['warm_prepare_s']:.3f}"
        table.add_row(r["case"], "jax.jit" if r["mode"] == "jax" else "hemx.jit", f"{r['cold_first_s']:.3f}",
                      f"{r['second_key_set_s']:.3f}", load, f"{r['warm_first_s']:.3f}", f"{r['warm_steady_s']:.3f}",
                      f"{r['ratio']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})", f"{r['ratio_with_load']:.2f}",
                      str(r["warm_compiles"]))
    console.print(table)


def add_arguments(p) -> None:
    p.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--warm-processes", type=int, default=3, help="new processes with new keys after the cold one "
                   "(the warm figures are their medians)")
    p.add_argument("--json", default="", help="also write the rows to this JSON file")


def run_cli(args) -> int:
    from rich.console import Console

    from hemx.bench.report import write_json

    console = Console()
    if args.warm_processes < 1:
        raise SystemExit("--warm-processes must be at least 1")
    rows = bench(args.cases, args.modes, console, warm_processes=args.warm_processes)
    print_report(rows, console)
    if args.json:
        write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    result = worker(sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]])
    sys.stdout.write("HEMX_SUMMARY " + json.dumps(result) + "\n")
