"""``hemx bench bootstrap``: bootstrapping latency, precision, levels and keys, hemx beside desilofhe and Lattigo.

Each library runs in its own process (``python -m hemx.bench.bootstrap --worker hemx|desilofhe|lattigo ...``), one after
the other, so that both key sets never share the memory of a small machine; each worker prints one JSON line.
For every side: key generation time, key count and bytes, the first bootstrap (compilation included for hemx),
the median of ``repeats`` bootstraps, the worst and mean precision in bits against the encrypted values
(uniform in [-1, 1], ``-log2 |got - want|`` computed here), and the level left for the user. hemx runs once per
slot count asked for (full ``N/2`` slots, and sparse ones such as 2^10: ``Context(params, slots=...)``);
desilofhe's CPU engine bootstraps full slots only. :func:`plot` draws latency and precision side by side.

Lattigo (Go) is a peer built outside hemx: its bootstrapping benchmark program (``docs/compare-peers.md`` says how
to build Lattigo v6.2.0's offline; its recipe is the one the issue measured with) is run from the path in
``$HEMX_LATTIGO_BENCH`` with ``-params <preset> -runs <repeats>`` and ``GOMAXPROCS=<threads>``, and its report is
parsed into the same fields (its presets: ``N16QP1546H192H32``, sparse secret, the default;
``N16QP1767H32768H32``, dense, ~17 GiB). It computes on about one core whatever ``GOMAXPROCS`` says.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np

from hemx.bench.report import BenchResult, render_table
from hemx.bench.timing import CpuUsage, cpu_usage, peak_rss_gib
from hemx.ckks.precision import precision_stats
from hemx.errors import ParameterError

SIDES = ("hemx", "desilofhe", "lattigo")
LATTIGO_ENV = "HEMX_LATTIGO_BENCH"  # path of Lattigo's bootstrapping benchmark program
LATTIGO_PARAMS = ("N16QP1546H192H32", "N16QP1767H32768H32")


KEY_STORAGE = ("auto", "compact", "full")
#: hemx's bootstrap circuit timed as one compiled program, eagerly, or both (compiled the headline, eager beside)
EXECUTION = ("both", "compiled", "eager")


def _hemx_worker(preset: str, repeats: int, iterations: int, seed: int, slots: int | None = None,
                 key_storage: str = "auto", batch: int = 1, chunk: int | None = None,
                 execution: str = "both") -> dict:
    """One process's bootstraps. ``execution``: the circuit as one compiled program (``Bootstrapper.compiled =
    "always"``; ``first_s`` then includes its tracing and compilation, ``compile_s`` is that alone), eagerly, or
    ``"both"``: ``median_s`` the compiled program's, ``eager_median_s`` the eager circuit's timed alternately with it
    in the same process (after its own warm-up), ``compiled_speedup`` their ratio and ``compiled_bit_exact``
    whether the two results are equal bit for bit. ``batch > 1``: ``batch`` ciphertexts bootstrapped in one call (one batch axis:
    every key read once per call) alternated with one of them alone, both after a warm-up; ``median_s`` is the
    batch's latency, ``amortized_s`` that divided by ``batch``, ``single_s`` the one-at-a-time latency of the same
    run, and the precision is over every slot of the batch; ``first_s`` is the first call's (compilation
    included), on the first chunk only when the chunks are of one size. ``chunk``: the batch bootstrapped that
    many at a time (:meth:`~hemx.circuits.bootstrap.Bootstrapper.bootstrap`), for batches whose intermediates
    exceed memory."""
    import jax

    from hemx.ckks import CKKSParameters, Context, InsecureParametersWarning
    from hemx.circuits.bootstrap import bootstrapper_for
    from hemx.kernels import native

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = CKKSParameters.preset(preset, allow_insecure=True)
    ctx = Context(params, slots=slots, key_storage=key_storage)
    start = time.perf_counter()
    bt = bootstrapper_for(ctx)
    prepare_s = time.perf_counter() - start
    start = time.perf_counter()
    keys = ctx.keygen(bootstrap=bt)
    switching = [keys.relin, *keys.galois.values(), *keys.switching.values()]
    jax.block_until_ready([k.data for k in switching])
    keygen_s = time.perf_counter() - start
    key_bytes = sum(k.nbytes for k in switching)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (batch, ctx.slots) if batch > 1 else ctx.slots)
    ct = ctx.drop_level(ctx.encrypt(x, keys), 0)
    one = ct.replace(data=ct.data[0]) if batch > 1 else None
    evk = keys.evaluation_keys()

    def timed(c, mode: str = "never" if execution == "eager" else "always"):
        bt.compiled = mode
        start = time.perf_counter()
        result = jax.block_until_ready(bt.bootstrap(c, evk, iterations=iterations, chunk=chunk))
        return result, time.perf_counter() - start

    # the first call compiles; where the chunks are of one size, the first chunk alone compiles every shape the
    # batch runs
    even = chunk is not None and batch > chunk and batch % chunk == 0
    out, first_s = timed(ct.replace(data=ct.data[:chunk]) if even else ct)
    compile_s = bt.stats.compile_s
    if one is not None:
        timed(one)  # its warm-up (compilation for the batch-free shapes)
    both = execution == "both"
    if both:
        timed(ct, "never")  # the eager circuit's warm-up (its operations' own XLA programs)
    # where the planner put the basis conversions on AMX tiles: the same program with the vector kernels alongside
    # (the native instruction set is read when a kernel runs, so one compiled program serves both)
    engine = ctx.engine
    vector = engine_ab_partner(engine)
    times, single, eager, vector_times = [], [], [], []
    usage = CpuUsage(0.0, 0.0, 0, 0)  # the timed batch calls': user / system seconds, page faults
    for _ in range(repeats):  # alternated: the batch, one ciphertext alone and the eager circuit see one machine
        before = cpu_usage()
        out, t = timed(ct)
        usage = usage + (cpu_usage() - before)
        times.append(t)
        if one is not None:
            single.append(timed(one)[1])
        if both:
            eager_out, t = timed(ct, "never")
            eager.append(t)
        if vector:
            native.select_isa(vector)
            try:
                vector_out, t = timed(ct)
            finally:
                native.select_isa(engine.isa)
            vector_times.append(t)
    executed = {"execution": execution, "compile_s": compile_s if execution != "eager" else None,
                "matrix_engine": engine.describe()}
    if vector:
        executed.update(vector_isa=vector, vector_median_s=statistics.median(vector_times),
                        engine_speedup=statistics.median(vector_times) / statistics.median(times),
                        engine_bit_exact=bool(np.array_equal(np.asarray(out.data), np.asarray(vector_out.data))))
    if both:
        executed.update(eager_median_s=statistics.median(eager),
                        compiled_speedup=statistics.median(eager) / statistics.median(times),
                        compiled_bit_exact=bool(np.array_equal(np.asarray(out.data), np.asarray(eager_out.data))))
    prec = precision_stats(x, ctx.decrypt(out, keys))
    batched = {}
    if one is not None:
        batched = {"single_s": statistics.median(single), "amortized_s": statistics.median(times) / batch,
                   "batch_gain": statistics.median(single) * batch / statistics.median(times)}
    return {"side": "hemx", "params": params.describe(), "n": params.n, "slots": ctx.slots,
            "log_qp": params.log_qp, "ntt": ctx.plan.describe(), "iterations": iterations,
            "prepare_s": prepare_s, "keygen_s": keygen_s, "keys": len(switching), "key_bytes": key_bytes,
            "first_s": first_s, "median_s": statistics.median(times), "min_s": min(times),
            "min_bits": prec.min_bits, "mean_bits": prec.mean_bits, "level_after": out.level,
            "max_level": params.max_level, "bootstrap": repr(bt), "message_ratio": bt.message_ratio,
            "evalmod_scale_bits": float(np.log2(bt.evalmod_scale)), "key_storage": ctx.key_storage,
            "transform_bytes": sum(lt.nbytes for lt in bt.cts + bt.stc), "peak_rss_gib": peak_rss_gib(),
            "batch": batch, "chunk": chunk, **batched, **executed, "cpu": usage.per_call(repeats)}


def desilo_key_kind() -> str:
    """desilofhe's bootstrap key set for this machine: "full" (``create_bootstrap_key``, every rotation key
    precomputed) needs more than 24 GiB at N = 2^16 (its worker was OOM-killed at 24.3 GB resident here); "small"
    (``create_small_bootstrap_key`` plus a roll key) fits. Full where the machine has 32 GiB or more."""
    try:
        with open("/proc/meminfo") as f:
            total_kib = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
    except (OSError, StopIteration, ValueError):
        return "small"
    return "full" if total_kib >= 32 * 2**20 else "small"


def _desilo_worker(repeats: int, threads: int, seed: int, keys: str = "full") -> dict:
    import desilofhe

    engine = desilofhe.Engine(mode="cpu", bootstrap=True, thread_count=threads)
    start = time.perf_counter()
    sk = engine.create_secret_key()
    pk = engine.create_public_key(sk)
    relin = engine.create_relinearization_key(sk)
    conj = engine.create_conjugation_key(sk)
    if keys == "small":
        roll = engine.create_roll_key(sk)
        small = engine.create_small_bootstrap_key(sk)
        boot_args = (roll, small)
        key_bytes = len(engine.serialize_small_bootstrap_key(small)) + len(engine.serialize_roll_key(roll))
    else:
        boot_key = engine.create_bootstrap_key(sk)
        boot_args = (boot_key,)
        key_bytes = len(engine.serialize_bootstrap_key(boot_key))
    keygen_s = time.perf_counter() - start
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, engine.slot_count)
    ct = engine.encrypt(x, pk, level=0)
    start = time.perf_counter()
    out = engine.bootstrap(ct, relin, conj, *boot_args)
    first_s = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = engine.bootstrap(ct, relin, conj, *boot_args)
        times.append(time.perf_counter() - start)
    prec = precision_stats(x, engine.decrypt(out, sk))
    return {"side": "desilofhe", "slots": engine.slot_count, "max_level": engine.max_level, "threads": threads,
            "keys": keys, "keygen_s": keygen_s, "first_s": first_s, "median_s": statistics.median(times),
            "min_s": min(times), "min_bits": prec.min_bits, "mean_bits": prec.mean_bits, "level_after": out.level,
            "key_bytes": key_bytes, "peak_rss_gib": peak_rss_gib()}


_LATTIGO_LINES = {
    "keygen_s": re.compile(r"^keygen: total ([0-9.]+) s"),
    "key_bytes": re.compile(r"^evaluation keys: .*BinarySize = [0-9.]+ GiB \((\d+) bytes\)"),
    "precompute_s": re.compile(r"^bootstrapping\.NewEvaluator .*: ([0-9.]+) s"),
    "slots": re.compile(r"^input: (\d+) slots"),
    "after": re.compile(r"^after bootstrap: level (\d+) of (\d+)"),
    "peak_rss_gib": re.compile(r"peak RSS \(getrusage\) = ([0-9.]+) GiB"),
}
_LATTIGO_RUN = re.compile(r"^run (\d+): bootstrap ([0-9.]+) s; precision worst ([0-9.]+) bits, mean ([0-9.]+) bits")


def parse_lattigo(text: str) -> dict:
    """The fields of :func:`_hemx_worker`'s row from the Lattigo benchmark program's report."""
    row: dict = {"side": "lattigo"}
    runs = []
    for line in text.splitlines():
        line = line.strip()
        m = _LATTIGO_RUN.match(line)
        if m:
            runs.append((float(m.group(2)), float(m.group(3)), float(m.group(4))))
            continue
        for key, pattern in _LATTIGO_LINES.items():
            m = pattern.search(line)
            if m:
                if key == "after":
                    row["level_after"], row["max_level"] = int(m.group(1)), int(m.group(2))
                elif key in ("key_bytes", "slots"):
                    row[key] = int(m.group(1))
                else:
                    row[key] = float(m.group(1))
    if not runs:
        return {"side": "lattigo", "error": "no 'run i: bootstrap ...' line in Lattigo's report:\n" + text[-1500:]}
    times = [t for t, _, _ in runs]
    row.update(first_s=times[0], median_s=statistics.median(times[1:] or times), min_s=min(times),
               min_bits=min(b for _, b, _ in runs), mean_bits=statistics.mean(m for _, _, m in runs), runs=len(runs))
    return row


def _lattigo_worker(repeats: int, threads: int, params: str, timeout_s: float = 3600.0) -> dict:
    binary = os.environ.get(LATTIGO_ENV, "")
    if not binary or not os.access(binary, os.X_OK):
        return {"side": "lattigo", "error": f"set {LATTIGO_ENV} to Lattigo's bootstrapping benchmark program "
                                            "(docs/compare-peers.md: how to build it offline)"}
    if params not in LATTIGO_PARAMS:
        return {"side": "lattigo", "error": f"Lattigo parameters must be one of {LATTIGO_PARAMS}, got {params!r}"}
    env = dict(os.environ, GOMAXPROCS=str(threads))
    env.setdefault("GOMEMLIMIT", "16GiB" if params == LATTIGO_PARAMS[1] else "13GiB")
    proc = subprocess.run([binary, "-params", params, "-runs", str(max(int(repeats), 2))], capture_output=True,
                          text=True, env=env, timeout=timeout_s)
    if proc.returncode != 0:
        return {"side": "lattigo", "error": (proc.stderr or proc.stdout)[-2000:] or f"exit {proc.returncode}"}
    row = parse_lattigo(proc.stdout)
    row.update(threads=threads, params=params)
    return row


def run_side(side: str, *, preset: str, repeats: int, iterations: int, threads: int, seed: int = 1,
             slots: int | None = None, timeout_s: float = 3600.0, profile: bool = False,
             lattigo_params: str = LATTIGO_PARAMS[0], key_storage: str = "auto", batch: int = 1,
             chunk: int | None = None, execution: str = "both") -> dict:
    """One side in a fresh process limited to ``threads`` CPUs; its JSON result (or ``{"error": ...}``).

    ``slots``: hemx's slot count (None: full ``N/2``). ``profile`` (hemx only): the stage / kernel-kind profile of
    :mod:`hemx.bench.bootstrap_profile` instead of the plain timing. ``key_storage`` (hemx only): how the worker's
    context holds switching keys (``Context(key_storage=...)``: "auto", "compact" or "full"). ``batch`` (hemx
    only): ciphertexts per bootstrap call, timed beside one alone; ``execution`` (hemx only): compiled, eager or both
    (:func:`_hemx_worker`)."""
    cmd = [sys.executable, "-m", "hemx.bench.bootstrap", "--worker", side, "--preset", preset,
           "--repeats", str(repeats), "--iterations", str(iterations), "--threads", str(threads),
           "--seed", str(seed)]
    if slots is not None:
        cmd += ["--slots", str(int(slots))]
    if side == "hemx" and not profile:
        cmd += ["--key-storage", key_storage, "--batch", str(int(batch)), "--execution", execution]
        if chunk is not None:
            cmd += ["--chunk", str(int(chunk))]
    env = dict(os.environ)
    if profile:
        from hemx.bench.bootstrap_profile import PROFILE_XLA_FLAGS

        cmd += ["--profile"]
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {PROFILE_XLA_FLAGS}".strip()
    if side == "desilofhe":
        cmd += ["--desilo-keys", desilo_key_kind()]
    if side == "lattigo":
        cmd += ["--lattigo-params", lattigo_params]
    try:
        cpus = sorted(os.sched_getaffinity(0))[:threads]
        pre = lambda: os.sched_setaffinity(0, cpus)  # noqa: E731
    except AttributeError:  # pragma: no cover - non-Linux
        pre = None
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s, preexec_fn=pre)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    why = (proc.stderr or proc.stdout)[-2000:]
    if proc.returncode < 0:  # killed by a signal: SIGKILL is what the kernel's OOM killer sends
        why += f"\nworker killed by signal {-proc.returncode} (SIGKILL: likely out of memory)"
    return {"side": side, "error": why or f"worker exited with status {proc.returncode} and no output"}


def bench_bootstrap(*, preset: str = "boot_16", sides=("hemx", "desilofhe"), repeats: int = 3, iterations: int = 1,
                    threads: int = 2, slots=(None,), console=None, profile: bool = False,
                    lattigo_params: str = LATTIGO_PARAMS[0], key_storage="auto", batch: int = 1,
                    chunk: int | None = None, execution: str = "both") -> list[BenchResult]:
    """Each side (hemx once per entry of ``slots``, None meaning full slots, and per key storage) in its own
    process, in turn.

    ``key_storage``: one of "auto", "compact", "full" or a sequence of them (hemx only: one process each, e.g.
    ``("compact", "full")`` for the A/B of compact switching keys in one run).

    ``batch``: hemx only, that many ciphertexts per bootstrap call (one batch axis), timed alternately with one
    ciphertext alone in the same process: latency, amortized seconds per ciphertext and the gain over one at a
    time. Peers bootstrap one ciphertext at a time. ``chunk``: the batch that many ciphertexts per pass (memory).

    ``execution``: hemx only, its circuit as one compiled program (the default way a bootstrap runs once it
    repeats), eagerly, or ``"both"`` (default): the compiled program's latency is the row's median, the eager
    circuit's is timed alternately with it in the same process (``eager_median_s``, ``compiled_speedup``).

    ``profile``: hemx only, one iteration, the per-stage / per-kernel-kind profile
    (:mod:`hemx.bench.bootstrap_profile`; :func:`hemx.bench.bootstrap_profile.print_profile` prints it)."""
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ParameterError(f"batch must be a positive integer (ciphertexts per bootstrap call), got {batch!r}")
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1):
        raise ParameterError(f"chunk must be a positive integer (ciphertexts per pass) or None, got {chunk!r}")
    if profile and batch > 1:
        raise ParameterError("the profile times one ciphertext's stages: run it without batch")
    if execution not in EXECUTION:
        raise ParameterError(f"execution must be one of {EXECUTION}, got {execution!r}")
    if profile:
        sides, iterations = ("hemx",), 1
    storages = (key_storage,) if isinstance(key_storage, str) else tuple(key_storage)
    bad = [k for k in storages if k not in KEY_STORAGE]
    if bad or not storages:
        raise ParameterError(f"key_storage must be one or more of {KEY_STORAGE}, got {key_storage!r}")
    results = []
    runs = [(side, s, k) for side in sides for s in (slots if side == "hemx" else (None,))
            for k in (storages if side == "hemx" else ("auto",))]
    for i, (side, s, k) in enumerate(runs, 1):
        if console is not None:
            what = ("full slots" if s is None else f"{s} slots") + (f", {k} keys" if side == "hemx" else "")
            what += f", a batch of {batch} beside one alone" if side == "hemx" and batch > 1 else ""
            console.print(f"[dim]({i}/{len(runs)}) {side}, {what}: key generation and bootstraps in a separate "
                          "process...[/]")
        row = run_side(side, preset=preset, repeats=repeats, iterations=iterations, threads=threads, slots=s,
                       profile=profile, lattigo_params=lattigo_params, key_storage=k,
                       batch=batch if side == "hemx" else 1, chunk=chunk if side == "hemx" else None,
                       execution=execution)
        peer_preset = lattigo_params if side == "lattigo" else "default"
        results.append(BenchResult("bootstrap", side, {"preset": preset if side == "hemx" else peer_preset,
                                                        "threads": threads, "slots": row.get("slots", s),
                                                        "batch": row.get("batch", 1)},
                                   row.get("median_s"), row.get("min_s"), extra=row))
    return results


def plot(results: list[BenchResult], path: str) -> str:
    """Median latency and worst / mean precision per library and slot count (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in results if "error" not in r.extra and r.extra.get("median_s") is not None]
    labels = [f"{r.name}\n{r.extra.get('slots')} slots" for r in ok]
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(10, 4))
    xs = np.arange(len(ok))
    ax_t.bar(xs, [r.extra["median_s"] for r in ok], color="tab:blue")
    ax_t.set_xticks(xs, labels)
    ax_t.set_ylabel("median bootstrap latency (s)")
    ax_t.set_title("latency")
    width = 0.38
    ax_b.bar(xs - width / 2, [r.extra["min_bits"] for r in ok], width, label="worst slot")
    ax_b.bar(xs + width / 2, [r.extra["mean_bits"] for r in ok], width, label="mean")
    ax_b.set_xticks(xs, labels)
    ax_b.set_ylabel("precision (bits)")
    ax_b.set_title("precision")
    ax_b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def print_report(results: list[BenchResult], console) -> None:
    rows = []
    for r in results:
        e = r.extra
        if "error" in e:
            last = (e["error"] or "").strip().splitlines()
            rows.append((r.name, "error: " + (last[-1][:80] if last else "worker died without output (out of "
                                              "memory? see dmesg)"), "", "", "", "", "", "", "", "", "", "", "",
                         ""))
            continue
        rows.append((r.name, e.get("slots"), e.get("key_storage", ""), e.get("keygen_s"),
                     e.get("key_bytes", 0) / 2**30, e.get("peak_rss_gib"), e.get("first_s"), e.get("batch", 1),
                     e.get("median_s"), e.get("amortized_s", e.get("median_s")), e.get("single_s", ""),
                     e.get("min_bits"), e.get("mean_bits"), f"{e.get('level_after')} / {e.get('max_level')}"))
    render_table("bootstrapping", ["library", "slots", "keys", "keygen s", "key GiB", "peak RSS GiB", "first s",
                                   "batch", "median s (call)", "s per ct", "one alone s", "min bits", "mean bits",
                                   "level after / max"], rows, console)
    for r in results:
        line = cpu_line(r.extra.get("cpu"))
        if line:
            console.print(f"{r.name}: {line}")
        for line in (execution_line(r.extra), engine_line(r.extra)):
            if line:
                console.print(f"{r.name}: {line}")


def engine_ab_partner(engine) -> str | None:
    """The vector instruction set to time beside ``engine`` (a :class:`hemx.plan.engine.EngineChoice`) when it put
    the basis conversions on AMX tiles, else None (nothing to compare)."""
    from hemx.kernels import native
    from hemx.plan.engine import ENGINE_ISA

    if engine.isa != ENGINE_ISA:
        return None
    return next((isa for isa in native.runnable_isas() if isa != ENGINE_ISA), None)


def engine_line(row: dict) -> str:
    """The matrix engine's same-process A/B (the AMX tiles against the vector kernels), as a line; "" without one."""
    if "vector_median_s" not in row:
        return ""
    return (f"basis conversions on AMX tiles; the same program on {row['vector_isa']} alternately: "
            f"{row['vector_median_s']:.2f} s, the tiles {row['engine_speedup']:.2f}x faster, "
            f"bit-exact {row['engine_bit_exact']} (planner: {row['matrix_engine']})")


def execution_line(row: dict) -> str:
    """How hemx's circuit ran (one compiled program, eagerly, or both timed alternately), as a line."""
    how = row.get("execution")
    if how is None or "error" in row:
        return ""
    if how == "eager":
        return "the circuit ran eagerly (--execution eager)"
    line = f"the circuit as one compiled program (traced and compiled in {row['compile_s']:.1f} s)"
    if how == "both":
        line += (f"; eager in the same process {row['eager_median_s']:.2f} s: compiled {row['compiled_speedup']:.2f}x "
                 f"faster, bit-exact {row['compiled_bit_exact']}")
    return line


def cpu_line(cpu: dict | None) -> str:
    """One timed call's CPU time and page faults, as a line (hemx's worker reports them; the peers do not)."""
    if not cpu:
        return ""
    return (f"CPU per call {cpu['user_s']:.2f} s user + {cpu['system_s']:.2f} s system "
            f"({100 * cpu['system_share']:.1f} % in the kernel), {cpu['page_faults']:,.0f} page faults")


def _main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m hemx.bench.bootstrap")
    ap.add_argument("--worker", choices=SIDES, required=True)
    ap.add_argument("--preset", default="boot_16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slots", type=int, default=None)
    ap.add_argument("--desilo-keys", choices=("full", "small"), default="full")
    ap.add_argument("--lattigo-params", choices=LATTIGO_PARAMS, default=LATTIGO_PARAMS[0])
    ap.add_argument("--profile", action="store_true", help="hemx: per-stage / per-kernel-kind profile")
    ap.add_argument("--key-storage", choices=KEY_STORAGE, default="auto")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=None)
    ap.add_argument("--execution", choices=EXECUTION, default="both")
    a = ap.parse_args(argv)
    if a.profile:
        from hemx.bench.bootstrap_profile import profile_worker

        row = profile_worker(a.preset, a.repeats, a.seed, a.slots)
    elif a.worker == "hemx":
        row = _hemx_worker(a.preset, a.repeats, a.iterations, a.seed, a.slots, a.key_storage, a.batch, a.chunk,
                           a.execution)
    elif a.worker == "lattigo":
        row = _lattigo_worker(a.repeats, a.threads, a.lattigo_params)
    else:
        row = _desilo_worker(a.repeats, a.threads, a.seed, a.desilo_keys)
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(_main())


__all__ = ["bench_bootstrap", "run_side", "print_report", "plot", "desilo_key_kind", "parse_lattigo", "SIDES",
           "LATTIGO_ENV", "LATTIGO_PARAMS", "EXECUTION", "execution_line", "engine_line", "engine_ab_partner"]
