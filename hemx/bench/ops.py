"""``hemx bench ops``: latency and batched throughput of HE-Add, HE-Mult, Rescale and Rotate (CROSS Tab. VIII),
and the latency of 16 rotations of one ciphertext (steps 1..16) as one hoisted batch (``rotate16``).

For each parameter set: hemx at batch 1 (latency) and at batch B (throughput, one kernel call for the whole
batch). With peers, every installed peer is built at the same N and the nearest log Q it supports, and each
operation is timed round-robin (hemx, peer, hemx, peer, ...) in the same process, so load on a shared machine
hits both alike.

Dispatch: each timed call is waited for, so what counts is latency. JAX's CPU client runs a computation on a
worker thread by default (asynchronous dispatch), and waking that thread after the peer's call costs tens of
microseconds, more than a whole HE-Add at N = 2^12; ``bench_ops(dispatch="sync")`` (the default) therefore
creates the CPU client with ``jax_cpu_enable_async_dispatch=False`` (computations run inline in the calling
thread) when the process has not created it yet. The mode in effect is recorded per row (``dispatch``).
``rotate16`` is hemx's ``Context.rotate_many(ct, 1..16, keys, stacked=True)`` (one ModUp of the ciphertext shared
by the 16 key switches, the results as one array), beside each peer's fastest equivalent (:mod:`hemx.bench.peers`);
it is timed at batch 1 only. The rotations' precision (worst slot, bits, against ``numpy.roll``) is recorded per
``rotate`` and ``rotate16`` row (``precision_min_bits``), for hemx and for each peer.
``jax_kernels=True`` also times hemx with
its pure-JAX kernels (``HEMX_NATIVE=0``) in a fresh process, rows named ``hemx-jax``.
"""

from __future__ import annotations

import os
import warnings
from typing import Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console

from hemx.bench.kernels import _progress
from hemx.bench.peers import OPS, ROTATE_MANY_STEPS, available_adapters
from hemx.bench.report import BenchResult, render_table
from hemx.bench.timing import time_interleaved
from hemx.ckks import CKKSParameters, Context, precision_stats
from hemx.ckks.security import InsecureParametersWarning
from hemx.errors import ParameterError
from hemx.kernels import native

OP_LABELS = {
    "add": "HE-Add",
    "mul": "HE-Mult (relin)",
    "rescale": "Rescale",
    "mul_rescale": "HE-Mult+Rescale",
    "rotate": "Rotate",
    "rotate16": "Rotate x16 (hoisted)",
}
BATCH1_ONLY = frozenset({"rotate16"})  # operations timed at batch 1 only (latency of one ciphertext's rotations)
#: CROSS Tab. IV sets A-D, and two sets for the side-by-side comparison with peers: N = 2^16 with 30 limbs
#: (two 31-bit base primes + 14 levels of two 28-bit primes, dnum 3, log QP ~ 1156: 128-bit secure) and
#: N = 2^15, the largest ring TenSEAL (SEAL at 128 bits) accepts (hemx's secure_15: 24 limbs, log QP ~ 802).
SETS = {"A": "set_a", "B": "set_b", "C": "set_c", "D": "set_d", "P16": "p16_l30", "P15": "secure_15"}
EXTRA_PRESETS = {"p16_l30": dict(log_n=16, levels=14, base_bits=(31, 31), dnum=3)}


def params_for(set_name: str) -> CKKSParameters:
    """The parameters of a benchmark set name (a key of :data:`SETS`)."""
    key = set_name.upper()
    if key not in SETS:
        raise ParameterError(f"unknown set {set_name!r}; choose from {sorted(SETS)}")
    name = SETS[key]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        if name in EXTRA_PRESETS:
            return CKKSParameters.create(name=name, allow_insecure=True, **EXTRA_PRESETS[name])
        return CKKSParameters.preset(name, allow_insecure=True)


def _process_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


@jax.jit
def _one_pass(x):
    """One element-wise pass: read every residue once, write one output (``x + 1``)."""
    return x + jnp.uint32(1)


def _hemx_ops(ctx: Context, keys, a, b, prod) -> dict:
    return {
        "add": lambda: ctx.add(a, b).data,
        "mul": lambda: ctx.mul(a, b, keys, rescale=False).data,
        "rescale": lambda: ctx.rescale(prod).data,
        "mul_rescale": lambda: ctx.mul(a, b, keys, rescale=True).data,
        "rotate": lambda: ctx.rotate(a, 1, keys).data,
        "rotate16": lambda: ctx.rotate_many(a, ROTATE_MANY_STEPS, keys, stacked=True).data,
    }


def _rotation_precision(ctx: Context, keys, a, x) -> dict[str, float]:
    """Worst-slot bits of hemx's ``rotate`` and ``rotate16`` results against ``numpy.roll`` (batch-1 ``a`` of ``x``)."""
    one = ctx.decrypt(ctx.rotate(a, 1, keys), keys)
    many = ctx.decrypt(ctx.rotate_many(a, ROTATE_MANY_STEPS, keys, stacked=True), keys)
    want = np.stack([np.roll(x, -k) for k in ROTATE_MANY_STEPS])
    return {"rotate": precision_stats(np.roll(x, -1), one).min_bits, "rotate16": precision_stats(want, many).min_bits}


DISPATCH_MODES = ("sync", "async")
JAX_KERNELS = "hemx-jax"  # the result name of hemx timed with its pure-JAX kernels (HEMX_NATIVE=0)


def _backend_created() -> bool:
    try:
        from jax._src import xla_bridge  # noqa: PLC0415 - private: whether a JAX client exists yet

        return bool(getattr(xla_bridge, "_backends", True))
    except ImportError:  # pragma: no cover - a JAX without the module: assume created, change nothing
        return True


def set_cpu_dispatch(mode: str) -> str:
    """Ask for synchronous or asynchronous CPU dispatch (module docstring); returns the mode in effect.

    Only possible before this process creates its JAX client; afterwards the current setting stays.
    """
    if mode not in DISPATCH_MODES:
        raise ParameterError(f"unknown dispatch mode {mode!r}; choose from {DISPATCH_MODES}")
    if not _backend_created():
        jax.config.update("jax_cpu_enable_async_dispatch", mode == "async")
    return "async" if jax.config.values.get("jax_cpu_enable_async_dispatch", True) else "sync"


def batch_sizes(batch: int) -> tuple[int, ...]:
    """The batch sizes ``bench_ops`` times: 1, then ``batch`` (batch 1 once when ``batch == 1``)."""
    return tuple(dict.fromkeys((1, batch)))


def bench_ops(
    sets: Iterable[str] = ("A", "B", "C", "D"),
    *,
    batch: int = 8,
    repeats: int = 3,
    peers: Sequence[str] = (),
    threads: int = 2,
    ntt: str | None = None,
    console: Console | None = None,
    dispatch: str = "sync",
    jax_kernels: bool = False,
    isa: str | None = None,
) -> list[BenchResult]:
    """Time the HE operations for each set; returns one result per (library, set, op, batch).

    ``ntt=None`` lets the planner choose the NTT (``hemx.Context`` default). Peers are timed interleaved
    with hemx at batch 1 (``time_interleaved``); ``threads`` is the thread count given to peers that take
    one (the caller pins the process to that many CPUs, see :func:`hemx.bench.timing.limit_threads`).
    ``dispatch``: JAX's CPU dispatch for the timed calls (module docstring). ``jax_kernels``: also hemx with
    its pure-JAX kernels, batch 1, in a fresh process per run (:func:`bench_jax_kernels`). ``isa``: the native
    kernels' instruction set for this run ("avx512", "avx2", "scalar", ...; :func:`hemx.kernels.native.set_isa`,
    the previous one restored afterwards); ``None`` keeps the current one (``HEMX_NATIVE_ISA`` or the best).
    The instruction set in effect is recorded per hemx row (``isa``; ``None`` without the native kernels).
    The plan cache's key names the native build, not the instruction set: an NTT planned here under a forced
    ``isa`` is reused by later runs under another (use a separate ``HEMX_CACHE_DIR`` per instruction set).
    """
    dispatch = set_cpu_dispatch(dispatch)  # first: loading the native library below creates the JAX client
    if isa is not None:
        previous = native.isa()  # BackendError when the native kernels are unavailable: nothing to force
        native.set_isa(isa)
        try:
            return bench_ops(sets, batch=batch, repeats=repeats, peers=peers, threads=threads, ntt=ntt,
                             console=console, dispatch=dispatch, jax_kernels=jax_kernels)
        finally:
            native.set_isa(previous)
    console = console or Console()
    sets = [s.upper() for s in sets]
    param_sets = {s: params_for(s) for s in sets}
    results: list[BenchResult] = []
    adapters = available_adapters(peers, threads, lambda msg: console.print(f"[yellow]{msg}[/]"))
    with _progress(console) as prog:
        batches = batch_sizes(batch)
        task = prog.add_task("HE ops", total=len(sets) * (len(batches) + len(adapters)))
        for s in sets:
            params = param_sets[s]
            base = {"set": s, "n": params.n, "log_q": round(params.log_q, 1), "log_qp": round(params.log_qp, 1),
                    "limbs": params.num_limbs, "dnum": params.dnum, "levels": params.max_level}
            prog.update(task, description=f"set {s}: keys")
            ctx = Context(params, ntt=ntt)
            keys = ctx.keygen(rotations=list(ROTATE_MANY_STEPS))
            rng = np.random.default_rng(0)
            hemx_row = dict(base, ntt=ctx.plan.describe(), planner=ctx.planned.source, keyswitch=ctx.keyswitch,
                            threads=f"XLA on {_process_cpus()} CPU(s)", dispatch=dispatch,
                            native=native.available(), isa=native.isa() if native.available() else None)
            setups = []
            for ad in adapters:
                prog.update(task, description=f"set {s}: {ad.name} setup")
                setups.append((ad, ad.setup(params.n, params.max_level)))
                prog.advance(task)
            for bsz in batches:
                prog.update(task, description=f"set {s}: batch {bsz}")
                shape = (ctx.slots,) if bsz == 1 else (bsz, ctx.slots)
                x, y = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape)
                a, b = ctx.encrypt(x, keys), ctx.encrypt(y, keys)
                prod = ctx.mul(a, b, keys, rescale=False)
                prec = precision_stats(x * y, ctx.decrypt(ctx.rescale(prod), keys))
                rot_prec = _rotation_precision(ctx, keys, a, x) if bsz == 1 else {}
                for op, fn in _hemx_ops(ctx, keys, a, b, prod).items():
                    if op in BATCH1_ONLY and bsz != 1:
                        continue
                    peer_fns = {ad.name: setup.ops.get(op) for ad, setup in setups if setup is not None}
                    peer_fns = {k: f for k, f in peer_fns.items() if f is not None} if bsz == 1 else {}
                    if op == "add":  # one element-wise pass over the same ciphertext: the floor of an HE-Add
                        peer_fns = {"pass": lambda: _one_pass(a.data), **peer_fns}
                    times = time_interleaved({"hemx": fn, **peer_fns}, repeats=repeats)
                    extra = {"precision_min_bits": prec.min_bits} if op == "mul_rescale" else {}
                    if op in rot_prec:
                        extra["precision_min_bits"] = rot_prec[op]
                    t = times["hemx"]
                    if "pass" in times:
                        extra.update(elementwise_pass_s=times["pass"].median_s,
                                     add_over_pass=t.median_s / times["pass"].median_s)
                    results.append(BenchResult("ops", "hemx", dict(hemx_row, batch=bsz, op=op), t.median_s, t.min_s,
                                               bsz / t.median_s, "ct-op/s",
                                               dict(extra, interleaved=len(times) > 1)))
                    for ad, setup in setups:
                        if bsz != 1:
                            continue
                        row = dict(base, batch=1, op=op)
                        if setup is None:
                            results.append(BenchResult("ops", ad.name, row, None,
                                                       extra={"skipped": f"{ad.name} has no configuration at "
                                                                         f"N={params.n}"}))
                            continue
                        if op not in setup.ops:  # the adapter leaves this operation out: no row
                            continue
                        row.update(peer_n=setup.n, peer_levels=setup.levels, peer_log_q=setup.log_q,
                                   peer_note=setup.note)
                        if ad.name not in times:
                            results.append(BenchResult("ops", ad.name, row, None, extra={"skipped": "no such primitive"}))
                            continue
                        pt = times[ad.name]
                        pextra = {"precision_min_bits": setup.precision_bits} if op == "mul_rescale" else {}
                        if op in setup.precision:
                            pextra["precision_min_bits"] = setup.precision[op]
                        results.append(BenchResult("ops", ad.name, row, pt.median_s, pt.min_s, 1 / pt.median_s,
                                                   "ct-op/s", dict(pextra, interleaved=True,
                                                                   ratio_to_hemx=pt.median_s / t.median_s)))
                del a, b, prod
                prog.advance(task)
            del ctx, keys, setups
    if jax_kernels:
        console.print("hemx with its pure-JAX kernels (HEMX_NATIVE=0), in a fresh process")
        results += bench_jax_kernels(sets, repeats=repeats, threads=threads, ntt=ntt, dispatch=dispatch)
    return results


def bench_jax_kernels(sets: Iterable[str], *, repeats: int = 3, threads: int | None = 2, ntt: str | None = None,
                      dispatch: str = "sync") -> list[BenchResult]:
    """hemx's batch-1 HE operations with the native kernels switched off (``HEMX_NATIVE=0``), in a fresh process
    pinned to ``threads`` CPUs; the rows are named :data:`JAX_KERNELS` (not interleaved with anything)."""
    import json
    import subprocess
    import sys

    sets = [s.upper() for s in sets]
    for s in sets:
        params_for(s)  # an unknown set fails here, not in the subprocess
    code = ("import io, json, sys; from rich.console import Console; from hemx.bench.timing import limit_threads; "
            "from hemx.bench.ops import bench_ops; "
            f"limit_threads({threads!r}); "
            f"rs = bench_ops({sets!r}, batch=1, repeats={int(repeats)}, ntt={ntt!r}, dispatch={dispatch!r}, "
            "console=Console(file=io.StringIO())); "
            "print(json.dumps([r.as_dict() for r in rs], default=str))")
    env = dict(os.environ, HEMX_NATIVE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"the pure-JAX run failed:\n{out.stderr[-2000:]}")
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    return [BenchResult(**dict(r, name=JAX_KERNELS)) for r in rows if r["name"] == "hemx"]


# ------------------------------------------------------------------------------------------ compile time

COMPILE_OPS = ("mul", "rotate", "poly")
COMPILE_LABELS = {"mul": "HE-Mult (relin)", "rotate": "Rotate", "poly": "poly deg 7 (eager)"}
POLY_COEFFICIENTS = (0.1, 0.9, -0.3, 0.2, 0.05, -0.1, 0.02, 0.01)  # degree 7, monomial basis: depth 3
_COMPILE_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace_s",
                   "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
                   "/jax/core/compile/backend_compile_duration": "backend_s"}


def compile_probe(set_name: str, op: str, repeats: int = 3) -> dict:
    """In this (fresh) process: the first call of ``op`` against its steady latency, with JAX's compile events.

    ``first_s`` is the first call (tracing, lowering, XLA compilation or loading it from the persistent cache,
    running); ``compile_s = first_s - steady_s``. ``trace_s`` / ``lower_s`` / ``backend_s`` are JAX's own
    durations during the first call (``backend_s``: compiling, or reading the persistent cache on a hit), and
    ``hits`` / ``misses`` its persistent-cache events. Meaningful only in a process that has not run ``op``.
    """
    import time

    from jax import monitoring

    if op not in COMPILE_OPS:
        raise ParameterError(f"unknown operation {op!r}; choose from {COMPILE_OPS}")
    stats = {"trace_s": 0.0, "lower_s": 0.0, "backend_s": 0.0, "hits": 0, "misses": 0, "programs": 0}
    recording = [False]

    def on_duration(name, seconds, **_):
        if recording[0] and name in _COMPILE_EVENTS:
            stats[_COMPILE_EVENTS[name]] += seconds
            stats["programs"] += name.endswith("backend_compile_duration")

    def on_event(name, **_):
        if recording[0] and name.endswith(("/cache_hits", "/cache_misses")):
            stats["hits" if name.endswith("hits") else "misses"] += 1

    monitoring.register_event_duration_secs_listener(on_duration)
    monitoring.register_event_listener(on_event)
    params = params_for(set_name)
    ctx = Context(params)
    keys = ctx.keygen(rotations=[1])
    rng = np.random.default_rng(0)
    a, b = (ctx.encrypt(rng.uniform(-1, 1, ctx.slots), keys) for _ in range(2))
    jax.block_until_ready((a.data, b.data))
    if op == "poly":
        from hemx.circuits import evaluate_polynomial

        fn = lambda: evaluate_polynomial(ctx, a, POLY_COEFFICIENTS, keys).data  # noqa: E731
    else:
        fn = _hemx_ops(ctx, keys, a, b, None)[op]
    recording[0] = True
    start = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - start
    recording[0] = False
    steady = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        steady.append(time.perf_counter() - start)
    steady_s = float(np.median(steady))
    return {"set": set_name, "op": op, "n": params.n, "limbs": params.num_limbs, "ntt": ctx.plan.describe(),
            "first_s": first, "steady_s": steady_s, "compile_s": first - steady_s, **stats}


def bench_compile(sets: Iterable[str] = ("P16",), *, ops: Sequence[str] = COMPILE_OPS, repeats: int = 3,
                  console: Console | None = None) -> list[BenchResult]:
    """Compile time of each operation with a cold and a warm persistent compilation cache.

    Every (set, op) runs :func:`compile_probe` in two fresh processes that share a new temporary cache
    directory (hemx's thresholds: every program is cached): the first compiles (cold), the second loads what the
    first wrote (warm). Planner choices come from the user's plan cache as usual (the same in both processes).
    One result per (set, op, cache) with ``median_s`` = steady latency and ``extra["compile_s"]`` = first call
    minus steady.
    """
    import json
    import subprocess
    import sys
    import tempfile

    from hemx.compilation_cache import MIN_COMPILE_TIME_S, MIN_ENTRY_SIZE_BYTES

    console = console or Console()
    bad = [op for op in ops if op not in COMPILE_OPS]
    if bad:
        raise ParameterError(f"unknown operation(s) {bad}; choose from {COMPILE_OPS}")
    results = []
    with _progress(console) as prog:
        sets = [s.upper() for s in sets]
        for s in sets:
            params_for(s)  # an unknown set fails here, not in a subprocess
        task = prog.add_task("compile time", total=2 * len(sets) * len(ops))
        for s in sets:
            for op in ops:
                with tempfile.TemporaryDirectory(prefix="hemx-compile-bench-") as tmp:
                    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=tmp,
                               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=str(MIN_COMPILE_TIME_S),
                               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=str(MIN_ENTRY_SIZE_BYTES))
                    code = ("import json; from hemx.bench.ops import compile_probe; "
                            f"print(json.dumps(compile_probe({s!r}, {op!r}, {int(repeats)})))")
                    for cache in ("cold", "warm"):
                        prog.update(task, description=f"set {s}: {op}, {cache} cache")
                        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
                        if out.returncode != 0:
                            raise RuntimeError(f"compile probe {s}/{op} ({cache}) failed:\n{out.stderr[-2000:]}")
                        r = json.loads(out.stdout.strip().splitlines()[-1])
                        row = {"set": s, "n": r["n"], "limbs": r["limbs"], "op": op, "cache": cache, "ntt": r["ntt"]}
                        results.append(BenchResult("compile", "hemx", row, r["steady_s"], extra={
                            k: r[k] for k in ("first_s", "compile_s", "trace_s", "lower_s", "backend_s", "hits",
                                              "misses", "programs")}))
                        prog.advance(task)
    return results


def print_compile_report(results: Sequence[BenchResult], console: Console | None = None) -> None:
    console = console or Console()
    rows = []
    for r in results:
        if r.suite != "compile":
            continue
        e = r.extra
        rows.append([r.params["set"], r.params["n"], COMPILE_LABELS[r.params["op"]], r.params["cache"],
                     e["first_s"], r.median_s * 1e3, e["compile_s"], e["trace_s"], e["lower_s"], e["backend_s"],
                     f"{e['programs']} ({e['hits']} hits)"])
    render_table("First call vs steady (compile = first - steady; trace/lower/backend: JAX's events in the first "
                 "call; backend = XLA compile, or the cache read on a hit)",
                 ["set", "N", "op", "cache", "first s", "steady ms", "compile s", "trace s", "lower s", "backend s",
                  "programs"], rows, console)


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
    for s in sets:
        for op in ("rotate", "rotate16"):
            bits = {r.name: r.extra["precision_min_bits"] for r in results
                    if r.suite == "ops" and r.params.get("set") == s and r.params.get("op") == op
                    and r.params.get("batch") == 1 and "precision_min_bits" in r.extra}
            if bits:
                console.print(f"  {OP_LABELS[op]} precision, set {s} (worst slot vs numpy.roll): "
                              + ", ".join(f"{lib} {b:.1f} bits" for lib, b in sorted(bits.items())))
    for r in results:
        if r.suite == "ops" and r.name == "hemx" and "add_over_pass" in r.extra:
            console.print(f"  hemx HE-Add, set {r.params['set']} batch {r.params['batch']}: "
                          f"{r.extra['add_over_pass']:.2f}x one element-wise pass over the same ciphertext "
                          f"({r.extra['elementwise_pass_s'] * 1e3:.3f} ms)")


SERIES_LABELS = {"hemx": "hemx", JAX_KERNELS: "hemx, pure-JAX kernels", "desilofhe": "desilofhe",
                 "tenseal": "TenSEAL (SEAL)"}
SERIES_STYLE = {"hemx": ("C0", "o", "-"), JAX_KERNELS: ("C0", "s", "--"), "desilofhe": ("C1", "^", "-"),
                "tenseal": ("C2", "D", "-")}


def _series_label(results: Sequence[BenchResult], lib: str) -> str:
    if lib == "hemx":
        flags = {r.params.get("native") for r in results if r.suite == "ops" and r.name == "hemx"}
        if flags == {True}:
            return "hemx, native kernels"
        if flags == {False}:
            return "hemx, pure-JAX kernels"
    return SERIES_LABELS.get(lib, lib)


def plot_ops(results: Sequence[BenchResult], path: str, ops: Sequence[str] | None = None, title: str = "") -> str:
    """Batch-1 latency against N, one panel per operation, one line per library (log-log), saved as PNG.

    Libraries: hemx (labelled by whether its native kernels ran), ``hemx-jax`` (hemx with its pure-JAX kernels,
    :func:`bench_jax_kernels`) and the peers. A library without a point at some N (TenSEAL has no 128-bit
    parameters at N = 2^16; desilofhe has no separate HE-Mult or Rescale) simply has none there.
    ``ops``: the operations to draw (default: every operation with a result).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results if r.suite == "ops" and r.params.get("batch") == 1 and r.median_s is not None]
    ops = [op for op in (ops or OPS) if any(r.params.get("op") == op for r in rows)]
    if not ops:
        raise ParameterError("no batch-1 HE-operation results to plot")
    order = ["hemx", JAX_KERNELS, "desilofhe", "tenseal"]
    libs = sorted({r.name for r in rows}, key=lambda x: (order.index(x) if x in order else len(order), x))
    fig, axes = plt.subplots(1, len(ops), figsize=(4.2 * len(ops), 3.8), squeeze=False)
    extra = iter(f"C{i}" for i in range(3, 10))
    style = {lib: SERIES_STYLE.get(lib) or (next(extra), "o", "-") for lib in libs}
    for ax, op in zip(axes[0], ops):
        for lib in libs:
            pts = sorted((r.params["n"], r.median_s * 1e3) for r in rows if r.name == lib and r.params.get("op") == op)
            if pts:
                color, marker, line = style[lib]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, linestyle=line, color=color)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(OP_LABELS[op])
        ax.set_xlabel("N (ring degree)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("latency, batch 1 (ms, median)")
    handles = [plt.Line2D([], [], color=style[lib][0], marker=style[lib][1], linestyle=style[lib][2],
                          label=_series_label(rows, lib)) for lib in libs]
    fig.legend(handles=handles, loc="upper center", ncol=len(libs), frameon=False)
    if title:
        fig.suptitle(title, y=0.02, fontsize=8, va="bottom")
    fig.tight_layout(rect=(0, 0.04 if title else 0, 1, 0.9))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
