"""``hemx bench gpu``: the one-shot check of whatever accelerator JAX sees, in one short command.

Made for the short windows in which a machine with a GPU is lent (about 15 minutes in all, nothing installable):
``scripts/gpu-check.sh OUTDIR`` (``PYTHONPATH`` at the checkout, no install step) runs, in this order and each
stage against a time budget (whole run: under 8 minutes):

1. the device: kind, JAX version, device and host memory;
2. exactness, always and first: every NTT method (forward and inverse) and BAT's modular matmul on the device
   against the same computation on the CPU (``jax.devices("cpu")``), bit for bit, at N = 2^12 and 2^16 (the NTT
   also against its own inverse, BAT also against exact integer arithmetic on the host);
3. NTT throughput per method at N = 2^12..2^16 and batch 1..64, in K NTT/s per limb (the unit of TensorFHE's and
   WarpDrive's tables), via :func:`hemx.bench.kernels.bench_ntt`;
4. the planner's choices on the device (:func:`hemx.bench.plan.bench_plan`), kept as wisdom in ``OUTDIR/wisdom``
   (``HEMX_CACHE_DIR``), so the next stages use them;
5. HE-Mult(+Rescale), Rotate and Rescale latency at set D and P16 and batched throughput
   (:func:`hemx.bench.ops.bench_ops`);
6. one ``boot_16`` bootstrap, latency and precision, in a worker process killed when its budget runs out
   (:func:`hemx.bench.bootstrap.run_side`).

It writes ``OUTDIR/gpu-check.json`` and ``OUTDIR/gpu-check.md`` (the figures beside the published ones listed
in docs/architecture.md, "Published figures") and exits 0 only if every exactness check held. A stage whose budget has run out is skipped
with the reason recorded; the stage budgets are cumulative (time an early stage leaves unused goes to the later
ones). ``--quick`` runs the same stages at small sizes (N = 2^10..2^12, set A, no bootstrap) on the CPU, for CI.
:func:`write_docs` renders ``docs/results/gpu-<device>.md`` from a run's JSON.

``HEMX_GPU_CHECK_INJECT=mismatch`` flips one bit of the first device result before it is compared: only for the
test that proves a mismatch makes the command fail.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import os
import platform
import re
import time
import traceback
from typing import Callable

import numpy as np

from hemx.errors import HemxError, ParameterError

INJECT_ENV = "HEMX_GPU_CHECK_INJECT"
JSON_NAME = "gpu-check.json"
MD_NAME = "gpu-check.md"
FORMAT = 1

#: Published figures, other hardware (the papers' tables; docs/architecture.md, "Published figures").
PUBLISHED_NTT = {  # K NTT/s, one limb, by log2 N
    "TensorFHE, A100": {12: 910, 13: 450, 14: 209, 15: 99, 16: 48},
    "WarpDrive, A100": {12: 12181, 13: 4675, 14: 2088, 15: 1009, 16: 468},
    "CROSS, TPU v6e-8": {12: 14668, 13: 3850, 14: 793},
}
PUBLISHED_OPS = [  # (who, HE-Mult, Rotate, Rescale) in µs at N = 2^16
    ("WarpDrive A100 (L=34)", 4284, 4341, 241),
    ("Cheddar RTX 4090 (L=48)", 533, 476, 68),
    ("CROSS TPU v6e-8, set D", 509, 414, 77),
    ("OpenFHE, 16-core CPU, set D", 417651, 397798, 22670),
    ("CROSS on the same CPU, set D", 132472, 72741, 27281),
]
PUBLISHED_BOOT = [  # packed bootstrapping, N = 2^16
    ("Cheddar, H100", 0.031), ("WarpDrive, A100", 0.121), ("TensorFHE, A100", 0.250),
    ("Lattigo paper, CPU", 18.0), ("OpenFHE 1.2.3, CPU, 1 thread", 45.4),
]


@dataclasses.dataclass(frozen=True)
class CheckConfig:
    """Sizes and budgets of one run (:data:`FULL` on an accelerator, :data:`QUICK` for CI on the CPU)."""

    name: str
    exact_log_ns: tuple[int, ...]
    exact_limbs: int
    ntt_limbs: dict  # log2 N -> limbs of the throughput sweep
    batches: tuple[int, ...]  # in the order they are run: the most telling first, so a cut budget drops the rest
    ops_sets: tuple[str, ...]
    ops_batch: int
    plan_sets: tuple[str, ...]
    plan_log_ns: tuple[int, ...]
    boot_preset: str | None
    repeats: int
    budget_s: float
    shares: dict  # stage -> planned seconds (cumulative schedule, scaled to budget_s)
    max_elements: int


FULL = CheckConfig(
    name="full", exact_log_ns=(12, 16), exact_limbs=3,
    ntt_limbs={12: 4, 13: 8, 14: 15, 15: 24, 16: 51},  # CROSS Tab. IV sets A-D, N = 2^15 as hemx's secure_15
    batches=(64, 1, 16, 4, 32, 8, 2), ops_sets=("D", "P16"), ops_batch=8, plan_sets=("D", "P16"),
    plan_log_ns=(12, 13, 14, 15), boot_preset="boot_16", repeats=3, budget_s=420.0,
    shares={"exactness": 60, "ntt": 110, "plan": 40, "ops": 90, "bootstrap": 120}, max_elements=1 << 28,
)
QUICK = CheckConfig(
    name="quick", exact_log_ns=(10, 12), exact_limbs=2, ntt_limbs={10: 2, 11: 2, 12: 2}, batches=(4, 1),
    ops_sets=("A",), ops_batch=2, plan_sets=(), plan_log_ns=(10,), boot_preset=None, repeats=2, budget_s=100.0,
    shares={"exactness": 30, "ntt": 25, "plan": 10, "ops": 35, "bootstrap": 0}, max_elements=1 << 22,
)
STAGES = ("exactness", "ntt", "plan", "ops", "bootstrap")


class Schedule:
    """Cumulative stage deadlines: stage k must end by ``start + (shares of stages 0..k) * scale``."""

    def __init__(self, config: CheckConfig, budget_s: float, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.start = clock()
        self.end = self.start + budget_s
        total = sum(config.shares.values()) or 1.0
        acc, self.deadlines = 0.0, {}
        for stage in STAGES:
            acc += config.shares.get(stage, 0)
            self.deadlines[stage] = self.start + budget_s * acc / total

    def left(self, stage: str) -> float:
        return min(self.deadlines[stage], self.end) - self.clock()

    def stopper(self, stage: str, reserve_s: float = 0.0) -> Callable[[], str | None]:
        """A ``stop`` callback: the reason to skip once the stage has less than ``reserve_s`` seconds left."""

        def stop() -> str | None:
            left = self.left(stage)
            return None if left > reserve_s else f"time budget: stage '{stage}' out of time ({max(left, 0):.0f} s left)"

        return stop


# ------------------------------------------------------------------------------------------------ the device


def _host_memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def device_info() -> dict:
    """Backend, device kind and count, device memory (bytes, when the backend says), host memory, versions."""
    import importlib.metadata

    import jax

    from hemx.bench.timing import machine_info

    dev = jax.devices()[0]
    try:
        stats = dev.memory_stats() or {}
    except Exception:  # noqa: BLE001 - a backend without memory statistics
        stats = {}
    try:
        jaxlib = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - unusual installs
        jaxlib = "?"
    return {
        "backend": jax.default_backend(), "device_kind": str(dev.device_kind), "device_count": jax.device_count(),
        "platform": dev.platform, "jax": jax.__version__, "jaxlib": jaxlib, "python": platform.python_version(),
        "device_memory_bytes": stats.get("bytes_limit"), "device_memory_in_use_bytes": stats.get("bytes_in_use"),
        "host_memory_bytes": _host_memory_bytes(), "machine": machine_info(),
    }


def device_slug(info: dict) -> str:
    """A file-name-safe device name: ``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``; CPUs -> ``cpu``."""
    if info.get("backend") == "cpu":
        return "cpu"
    slug = re.sub(r"[^a-z0-9]+", "-", str(info.get("device_kind", "device")).lower()).strip("-")
    return slug or "device"


# ------------------------------------------------------------------------------------------------ exactness


def _exact_modmatmul(a: np.ndarray, b: np.ndarray, q: int) -> np.ndarray:
    """``(a @ b) mod q`` in int64 without overflow (b split in 16-bit halves); a, b residues below 2^31, V <= 2^8."""
    a = a.astype(np.int64)
    lo, hi = (b & 0xFFFF).astype(np.int64), (b >> 16).astype(np.int64)
    return (((a @ hi) % q) * 65536 + (a @ lo)) % q


def _corrupt(arr: np.ndarray) -> np.ndarray:
    out = np.array(arr, copy=True)
    out.flat[0] ^= 1
    return out


def check_exactness(log_ns, limbs: int, *, inject: str = "", seed: int = 0, log=print) -> list[dict]:
    """Each NTT method (forward and inverse) and BAT's modmatmul on the default device against the CPU, bit for bit.

    Returns one dict per check with ``ok`` and, when it failed, how many words differ. ``inject="mismatch"``
    flips one bit of the first device result (tests only).
    """
    import jax

    from hemx.kernels import bat
    from hemx.kernels import ntt as ntt_kernels
    from hemx.nt import ntt_primes

    dev, cpu = jax.devices()[0], jax.devices("cpu")[0]
    same = dev == cpu
    rng = np.random.default_rng(seed)
    fwd, inv = jax.jit(ntt_kernels.ntt), jax.jit(ntt_kernels.intt)
    checks: list[dict] = []
    pending_inject = inject == "mismatch"

    def record(kind: str, name: str, n: int, got: dict[str, np.ndarray], want_host: np.ndarray | None, **extra):
        nonlocal pending_inject
        if pending_inject:
            got["device"] = _corrupt(got["device"])
            pending_inject = False
            extra["injected"] = True
        diff = int(np.count_nonzero(got["device"] != got["cpu"]))
        row = {"kind": kind, "name": name, "n": n, "device_vs_cpu_differing_words": diff,
               "words": int(got["cpu"].size), "same_device": same, **extra}
        ok = diff == 0
        if want_host is not None:
            host_diff = int(np.count_nonzero(got["cpu"] != want_host))
            row["cpu_vs_reference_differing_words"] = host_diff
            ok = ok and host_diff == 0
        row["ok"] = bool(ok)
        checks.append(row)
        log(f"  {'ok  ' if ok else 'FAIL'} {kind} {name} N={n}: {diff} of {row['words']} words differ device/cpu")

    for log_n in log_ns:
        n = 1 << int(log_n)
        qs = ntt_primes(28, limbs, n)
        x = (rng.integers(0, 1 << 62, size=(2, limbs, n), dtype=np.uint64)
             % np.asarray(qs, dtype=np.uint64).reshape(-1, 1)).astype(np.uint32)
        for method in ntt_kernels.METHODS:
            plan = ntt_kernels.make_plan(n, qs, method)
            f_out, i_out = {}, {}
            for label, d in (("device", dev), ("cpu", cpu)):
                p, xd = jax.device_put(plan, d), jax.device_put(x, d)
                y = fwd(xd, p)
                f_out[label] = np.asarray(y)
                i_out[label] = np.asarray(inv(y, p))
            record("ntt", method, n, f_out, None, limbs=limbs, plan=plan.describe())
            record("intt", method, n, i_out, x, limbs=limbs, plan=plan.describe())  # reference: the input
        side = 1 << (int(log_n) // 2)  # a (R x R) known matrix on (R x N/R) data: mat3's shape at this N
        for bits, reduction in ((28, "barrett"), (31, "montgomery")):
            q = ntt_primes(bits, 1, n)[0]
            a = rng.integers(0, q, size=(side, side), dtype=np.int64)
            b = rng.integers(0, q, size=(side, n // side), dtype=np.int64)
            out = {}
            for label, d in (("device", dev), ("cpu", cpu)):
                with jax.default_device(d):
                    out[label] = np.asarray(bat.modmatmul(a, b, q, reduction=reduction))
            record("bat", f"modmatmul {reduction} q<2^{bits}", n, out, _exact_modmatmul(a, b, q).astype(np.uint32),
                   shape=[side, side, n // side])
    return checks


# ------------------------------------------------------------------------------------------------ stages


def _ntt_stage(config: CheckConfig, schedule: Schedule, console) -> list[dict]:
    from hemx.bench.kernels import KernelSet, bench_ntt

    sets = [KernelSet(f"2^{k}", k, limbs) for k, limbs in sorted(config.ntt_limbs.items())]
    stop = schedule.stopper("ntt", reserve_s=2.0)
    plans: dict = {}
    rows = []
    for batch in config.batches:  # one batch size across every N and method, then the next
        rows += bench_ntt(sets, batches=(batch,), repeats=config.repeats, max_elements=config.max_elements,
                          console=console, stop=stop, plans=plans)
    out = []
    for r in rows:
        d = r.as_dict()
        d["k_ntt_per_s"] = None if r.throughput is None else r.throughput / 1e3
        d["extra"].pop("work", None)
        out.append(d)
    return out


def _plan_stage(config: CheckConfig, schedule: Schedule, console) -> dict:
    from hemx import plan
    from hemx.bench.plan import bench_plan

    rings = [("set", s) for s in config.plan_sets] + [("log_n", k) for k in config.plan_log_ns]
    rows, skipped = [], []
    for i, (kind, value) in enumerate(rings):
        left = schedule.left("plan")
        if left < 3.0:
            skipped.append({"ring": f"{kind} {value}", "skipped": f"time budget: {max(left, 0):.0f} s left"})
            continue
        budget = max(1.0, left / (len(rings) - i))
        got = bench_plan([value] if kind == "set" else [], log_ns=[value] if kind == "log_n" else [],
                         budget_s=budget, repeats=config.repeats, console=console)
        rows += [r.as_dict() for r in got]
    chosen = [{"set": r["params"]["set"], "n": r["params"]["n"], "variant": r["name"],
               "us_per_limb": r["median_s"] / r["params"]["timed_limbs"] * 1e6}
              for r in rows if r["suite"] == "plan" and r["extra"].get("chosen")]
    return {"rows": rows, "chosen": chosen, "skipped": skipped, "wisdom": plan.cache_path(),
            "wisdom_exists": os.path.exists(plan.cache_path())}


def _ops_worker(set_name: str, batch: int, repeats: int, timeout_s: float) -> list[dict]:
    """``bench_ops`` for one set in a fresh process (so the time box holds: it is killed at ``timeout_s``)."""
    import subprocess
    import sys

    code = ("import io, json; from rich.console import Console; from hemx.bench.ops import bench_ops; "
            f"rs = bench_ops([{set_name!r}], batch={int(batch)}, repeats={int(repeats)}, "
            "console=Console(file=io.StringIO())); print(json.dumps([r.as_dict() for r in rs], default=str))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"bench_ops({set_name}) worker failed (status {proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(lines[-1])


def _ops_stage(config: CheckConfig, schedule: Schedule, console) -> list[dict]:
    import subprocess

    rows = []
    for s in config.ops_sets:
        left = schedule.left("ops")
        why = f"time budget: {max(left, 0):.0f} s left" if left < 15.0 else None
        if why is None:
            console.print(f"set {s}: keys, HE operations at batch 1 and {config.ops_batch} (worker, at most "
                          f"{left:.0f} s)")
            try:
                rows += _ops_worker(s, config.ops_batch, config.repeats, left)
                continue
            except subprocess.TimeoutExpired:
                why = f"time budget: the worker ran past {left:.0f} s and was stopped"
        rows.append({"suite": "ops", "name": "hemx", "params": {"set": s}, "median_s": None,
                     "extra": {"skipped": why}})
    return rows


def _bootstrap_stage(config: CheckConfig, schedule: Schedule, console) -> dict:
    import subprocess

    from hemx.bench.bootstrap import run_side

    if config.boot_preset is None:
        return {"skipped": "not in this configuration (quick: a bootstrap compiles for minutes on a small CPU)"}
    left = schedule.left("bootstrap")
    if left < 30.0:
        return {"preset": config.boot_preset, "skipped": f"time budget: {max(left, 0):.0f} s left"}
    console.print(f"{config.boot_preset}: keys and one bootstrap in a worker process (at most {left:.0f} s)")
    try:
        row = run_side("hemx", preset=config.boot_preset, repeats=1, iterations=1, threads=os.cpu_count() or 1,
                       timeout_s=left)
    except subprocess.TimeoutExpired:
        return {"preset": config.boot_preset, "skipped": f"time budget: the worker ran past {left:.0f} s and was "
                                                         "stopped"}
    row["preset"] = config.boot_preset
    return row


STAGE_FUNCS = {"ntt": _ntt_stage, "plan": _plan_stage, "ops": _ops_stage, "bootstrap": _bootstrap_stage}


def run_check(outdir: str, *, quick: bool = False, budget_s: float | None = None, console=None,
              inject: str | None = None) -> tuple[int, dict]:
    """Run every stage (module docstring); write the JSON and markdown into ``outdir``.

    Returns ``(exit code, document)``: 0 only if every exactness check held, 1 otherwise.
    """
    from rich.console import Console

    config = QUICK if quick else FULL
    budget = config.budget_s if budget_s is None else float(budget_s)
    if not budget > 0 or not math.isfinite(budget):
        raise ParameterError(f"the time budget must be a positive number of seconds, got {budget_s!r}")
    if os.path.exists(outdir) and not os.path.isdir(outdir):
        raise HemxError(f"output directory {outdir!r} exists and is not a directory")
    os.makedirs(outdir, exist_ok=True)
    inject = os.environ.get(INJECT_ENV, "") if inject is None else inject
    console = console or Console()
    # the planner measures on this device, and its wisdom goes with the run's results (later stages and their
    # worker processes read it from there)
    override = {"HEMX_CACHE_DIR": os.path.abspath(os.path.join(outdir, "wisdom")), "HEMX_PLAN": "measure"}
    saved = {k: os.environ.get(k) for k in override}
    os.environ.update(override)
    try:
        return _run(outdir, config, budget, console, inject, quick)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run(outdir: str, config: CheckConfig, budget: float, console, inject: str, quick: bool) -> tuple[int, dict]:
    import jax

    from hemx import kernels  # noqa: F401 - 64-bit JAX types (the package itself also sets the compilation cache)
    from hemx.bench.ops import _backend_created

    if quick and "JAX_PLATFORMS" not in os.environ and not _backend_created():
        jax.config.update("jax_platforms", "cpu")  # quick: the CPU, unless JAX_PLATFORMS names a platform

    schedule = Schedule(config, budget)
    info = device_info()
    mem = info["device_memory_bytes"]
    console.print(f"device: {info['device_kind']} x{info['device_count']} ({info['backend']}), JAX {info['jax']} "
                  f"(jaxlib {info['jaxlib']}), Python {info['python']}")
    console.print(f"memory: device {'unknown' if mem is None else f'{mem / 2**30:.1f} GiB'}, host "
                  f"{(info['host_memory_bytes'] or 0) / 2**30:.1f} GiB; budget {budget:.0f} s ({config.name})")
    doc: dict = {"format": FORMAT, "tool": "hemx bench gpu", "config": config.name, "budget_s": budget,
                 "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                 "device": info, "stages": {}}

    start = time.monotonic()
    console.print(f"exactness: every NTT method and BAT on {info['device_kind']} against the CPU, bit for bit")
    try:
        checks = check_exactness(config.exact_log_ns, config.exact_limbs, inject=inject,
                                 log=lambda m: console.print(m, highlight=False))
        exact_ok = bool(checks) and all(c["ok"] for c in checks)
        doc["stages"]["exactness"] = {"status": "ok" if exact_ok else "failed", "seconds": time.monotonic() - start}
        if not exact_ok:
            bad = [f"{c['kind']} {c['name']} N={c['n']}" for c in checks if not c["ok"]]
            doc["stages"]["exactness"]["reason"] = f"{len(bad)} check(s) failed: " + ", ".join(bad)
    except Exception as exc:  # noqa: BLE001 - recorded; the exit code says the check did not hold
        checks, exact_ok = [], False
        doc["stages"]["exactness"] = {"status": "error", "seconds": time.monotonic() - start,
                                      "reason": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    doc["exactness"] = {"ok": exact_ok, "checks": checks}

    for stage in ("ntt", "plan", "ops", "bootstrap"):
        start = time.monotonic()
        console.print(f"[bold]{stage}[/] ({max(schedule.left(stage), 0):.0f} s budgeted)")
        try:
            doc[stage] = STAGE_FUNCS[stage](config, schedule, console)
            status = "ok"
            if _all_skipped(doc[stage]):
                status = "skipped"
            elif isinstance(doc[stage], dict) and isinstance(doc[stage].get("skipped"), list):
                status = "partial" if doc[stage]["skipped"] else "ok"
            elif isinstance(doc[stage], dict) and doc[stage].get("skipped"):
                status = "skipped"
            elif isinstance(doc[stage], dict) and doc[stage].get("error"):
                status = "error"
            elif _any_skipped(doc[stage]):
                status = "partial"
            doc["stages"][stage] = {"status": status, "seconds": time.monotonic() - start}
            if status in ("skipped", "partial", "error"):
                doc["stages"][stage]["reason"] = _reasons(doc[stage])
        except Exception as exc:  # noqa: BLE001 - one broken stage must not lose the others' figures
            doc[stage] = None
            doc["stages"][stage] = {"status": "error", "seconds": time.monotonic() - start,
                                    "reason": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
            console.print(f"[red]{stage} failed: {type(exc).__name__}: {exc}[/]")
        _write(outdir, doc)  # after every stage: a run cut short still leaves what it measured
    doc["total_s"] = time.monotonic() - schedule.start
    doc["ok"] = exact_ok
    _write(outdir, doc)
    console.print(f"wrote {os.path.join(outdir, JSON_NAME)} and {os.path.join(outdir, MD_NAME)} "
                  f"in {doc['total_s']:.0f} s; exactness {'held' if exact_ok else 'FAILED'}")
    return (0 if exact_ok else 1), doc


def _reasons(part) -> str:
    """Why (part of) a stage was skipped or failed, in one line."""
    if isinstance(part, dict):
        skipped = part.get("skipped")
        if isinstance(skipped, list):
            return "; ".join(sorted({str(x.get("skipped", "")) for x in skipped if isinstance(x, dict)}))
        if skipped:
            return str(skipped)
        err = str(part.get("error") or "").strip().splitlines()
        return err[-1] if err else ""
    if isinstance(part, list):
        found = {(r.get("extra") or {}).get("skipped") for r in part if isinstance(r, dict)}
        return "; ".join(sorted(str(f) for f in found if f))
    return ""


def _all_skipped(part) -> bool:
    if isinstance(part, list):
        return bool(part) and all(isinstance(r, dict) and (r.get("extra") or {}).get("skipped") for r in part)
    if isinstance(part, dict) and isinstance(part.get("skipped"), list):
        return bool(part["skipped"]) and not part.get("rows")
    return False


def _any_skipped(part) -> bool:
    if isinstance(part, list):
        return any(isinstance(r, dict) and (r.get("extra") or {}).get("skipped") for r in part)
    if isinstance(part, dict):
        return bool(part.get("skipped"))
    return False


def _write(outdir: str, doc: dict) -> None:
    from hemx.bench.report import write_json

    write_json(os.path.join(outdir, JSON_NAME), doc)
    with open(os.path.join(outdir, MD_NAME), "w", encoding="utf-8") as fh:
        fh.write(render_markdown(doc))


# ------------------------------------------------------------------------------------------------ markdown


def _num(v, digits: int = 0) -> str:
    if v is None:
        return "–"
    return f"{v:,.{digits}f}"


def render_markdown(doc: dict) -> str:
    """The run's figures beside the published ones (docs/architecture.md, "Published figures"), as markdown."""
    info = doc.get("device", {})
    mem = info.get("device_memory_bytes")
    lines = [f"# hemx on {info.get('device_kind', '?')} ({info.get('backend', '?')})", "",
             f"`hemx bench gpu` ({doc.get('config')} configuration), {doc.get('created_utc')}: JAX {info.get('jax')} "
             f"(jaxlib {info.get('jaxlib')}), Python {info.get('python')}, {info.get('device_count')} device(s), "
             f"device memory {'unknown' if mem is None else f'{mem / 2**30:.1f} GiB'}. Budget "
             f"{doc.get('budget_s', 0):.0f} s, total {doc.get('total_s', 0):.0f} s.", ""]
    ex = doc.get("exactness") or {}
    checks = ex.get("checks", [])
    failed = [c for c in checks if not c.get("ok")]
    lines += ["## Exactness (device against CPU, bit for bit)", "",
              f"**{'held' if ex.get('ok') else 'FAILED'}**: {len(checks) - len(failed)} of {len(checks)} checks "
              "(every NTT method forward and inverse, BAT modmatmul; inverse and BAT also against the exact "
              "reference).", ""]
    if checks and checks[0].get("same_device"):
        lines += ["The default device is the CPU here: device and CPU results come from the same backend.", ""]
    lines += ["| check | method | N | words | differing (device/cpu) | ok |", "|---|---|---|---|---|---|"]
    for c in checks:
        lines.append(f"| {c['kind']} | {c['name']} | {c['n']} | {c['words']} | "
                     f"{c['device_vs_cpu_differing_words']} | {'yes' if c['ok'] else '**NO**'} |")
    lines += [""] + _ntt_markdown(doc.get("ntt") or []) + _ops_markdown(doc.get("ops") or [])
    lines += _boot_markdown(doc.get("bootstrap")) + _plan_markdown(doc.get("plan"))
    lines += ["## Stages", "", "| stage | status | seconds | note |", "|---|---|---|---|"]
    for stage, st in (doc.get("stages") or {}).items():
        lines.append(f"| {stage} | {st.get('status')} | {st.get('seconds', 0):.1f} | {st.get('reason', '')} |")
    lines.append("")
    return "\n".join(lines)


def _ntt_markdown(rows: list[dict]) -> list[str]:
    measured = [r for r in rows if r.get("median_s") is not None]
    skipped = [r for r in rows if r.get("median_s") is None]
    log_ns = sorted({int(math.log2(r["params"]["n"])) for r in rows}) or [12, 13, 14, 15, 16]
    all_ns = sorted(set(log_ns) | {12, 13, 14, 15, 16})
    out = ["## NTT throughput, K NTT/s (one limb; best over batch sizes, batch in brackets)", "",
           "| method / source | " + " | ".join(f"N=2^{k}" for k in all_ns) + " |",
           "|---" * (len(all_ns) + 1) + "|"]
    methods = list(dict.fromkeys(r["name"] for r in rows))
    for m in methods:
        cells = []
        for k in all_ns:
            cand = [r for r in measured if r["name"] == m and r["params"]["n"] == 1 << k]
            best = max(cand, key=lambda r: r["k_ntt_per_s"], default=None)
            cells.append("–" if best is None else f"{_num(best['k_ntt_per_s'])} ({best['params']['batch']})")
        out.append(f"| hemx {m} | " + " | ".join(cells) + " |")
    for who, figs in PUBLISHED_NTT.items():
        out.append(f"| {who} (published) | " + " | ".join(_num(figs.get(k)) for k in all_ns) + " |")
    if measured:
        batches = sorted({r["params"]["batch"] for r in measured})
        out += ["", "Every measured configuration, K NTT/s (limbs per N: "
                + ", ".join(sorted({f"2^{int(math.log2(r['params']['n']))}: {r['params']['limbs']}"
                                    for r in measured})) + "):", "",
                "| method | N | " + " | ".join(f"batch {b}" for b in batches) + " |",
                "|---|---" + "|---" * len(batches) + "|"]
        for m in methods:
            for k in log_ns:
                by_b = {r["params"]["batch"]: r["k_ntt_per_s"] for r in measured
                        if r["name"] == m and r["params"]["n"] == 1 << k}
                if by_b:
                    out.append(f"| {m} | 2^{k} | " + " | ".join(_num(by_b.get(b)) for b in batches) + " |")
    if skipped:
        reasons = sorted({r["extra"].get("skipped", "") for r in skipped})
        out += ["", f"{len(skipped)} configuration(s) skipped: " + "; ".join(reasons)]
    return out + [""]


def _ops_markdown(rows: list[dict]) -> list[str]:
    out = ["## HE operations, µs (batch 1; batched: µs per ciphertext)", "",
           "| set / source | N | limbs | HE-Mult | HE-Mult+Rescale | Rotate | Rescale | batched HE-Mult+Rescale |",
           "|---|---|---|---|---|---|---|---|"]
    sets = list(dict.fromkeys(r["params"]["set"] for r in rows if r.get("name") == "hemx"))
    skipped = []
    for s in sets:
        mine = [r for r in rows if r.get("name") == "hemx" and r["params"]["set"] == s]
        if all(r.get("median_s") is None for r in mine):
            skipped.append(f"{s}: {mine[0]['extra'].get('skipped', '')}")
            continue

        def us(op, batch=1):
            hit = [r for r in mine if r["params"].get("op") == op and r["params"].get("batch") == batch]
            return None if not hit or hit[0]["median_s"] is None else hit[0]["median_s"] / batch * 1e6

        p = mine[0]["params"]
        batched = max((r["params"]["batch"] for r in mine if r["params"].get("batch")), default=1)
        out.append(f"| hemx set {s} ({p.get('ntt', '')}) | 2^{int(math.log2(p['n']))} | {p['limbs']} | "
                   f"{_num(us('mul'))} | {_num(us('mul_rescale'))} | {_num(us('rotate'))} | {_num(us('rescale'))} | "
                   + (f"{_num(us('mul_rescale', batched))} (batch {batched})" if batched > 1 else "–") + " |")
    for who, mul, rot, resc in PUBLISHED_OPS:
        out.append(f"| {who} (published) | 2^16 | | {_num(mul)} | | {_num(rot)} | {_num(resc)} | |")
    out += ["", "The published HE-Mult includes relinearization (hemx's HE-Mult column); set D is CROSS Tab. IV "
                "(N = 2^16, 51 limbs, dnum 3), P16 is N = 2^16 with 30 limbs."]
    if skipped:
        out += ["", "Skipped: " + "; ".join(skipped)]
    return out + [""]


def _boot_markdown(boot) -> list[str]:
    out = ["## Packed bootstrapping", "", "| who | N | latency s | precision (worst / mean bits) |", "|---|---|---|---|"]
    if not boot:
        out.append("| hemx | | not run (stage failed) | |")
    elif boot.get("skipped") or boot.get("error"):
        why = boot.get("skipped") or (boot.get("error") or "").strip().splitlines()[-1:]
        why = why[0] if isinstance(why, list) and why else why
        out.append(f"| hemx {boot.get('preset') or 'bootstrap'} | | not measured: {why} | |")
    else:
        out.append(f"| hemx {boot['preset']} (first call {boot.get('first_s', 0):.1f} s, keys "
                   f"{boot.get('keygen_s', 0):.1f} s) | 2^{int(math.log2(boot['n']))} | {boot['median_s']:.3f} | "
                   f"{boot['min_bits']:.1f} / {boot['mean_bits']:.1f} |")
    for who, secs in PUBLISHED_BOOT:
        out.append(f"| {who} (published) | 2^16 | {secs:g} | |")
    return out + [""]


def _plan_markdown(plan) -> list[str]:
    out = ["## Planner's choices (saved as wisdom)", ""]
    if not plan:
        return out + ["not run", ""]
    out += ["| ring | N | chosen NTT variant | µs per limb |", "|---|---|---|---|"]
    for c in plan.get("chosen", []):
        out.append(f"| {c['set']} | {c['n']} | {c['variant']} | {c['us_per_limb']:.1f} |")
    for s in plan.get("skipped", []):
        out.append(f"| {s['ring']} | | skipped: {s['skipped']} | |")
    out += ["", f"Wisdom file: `{plan.get('wisdom')}`" + ("" if plan.get("wisdom_exists") else " (not written)")]
    return out + [""]


def load_document(path: str) -> dict:
    """A run's JSON (:data:`JSON_NAME`, or a directory holding it), checked to be one."""
    if os.path.isdir(path):
        path = os.path.join(path, JSON_NAME)
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError as exc:
        raise HemxError(f"no such result file: {path}") from exc
    except (OSError, ValueError) as exc:
        raise HemxError(f"cannot read {path} as a hemx bench gpu result: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("tool") != "hemx bench gpu" or "device" not in doc:
        raise HemxError(f"{path} is not a 'hemx bench gpu' result (no tool/device fields)")
    return doc


def write_docs(path: str, docs_dir: str = os.path.join("docs", "results")) -> str:
    """Render ``docs_dir/gpu-<device>.md`` from a run's JSON; returns the path written."""
    doc = load_document(path)
    os.makedirs(docs_dir, exist_ok=True)
    out = os.path.join(docs_dir, f"gpu-{device_slug(doc['device'])}.md")
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(render_markdown(doc))
    return out


__all__ = ["run_check", "check_exactness", "render_markdown", "write_docs", "load_document", "device_info",
           "device_slug", "FULL", "QUICK", "CheckConfig", "Schedule", "INJECT_ENV", "JSON_NAME", "MD_NAME"]
