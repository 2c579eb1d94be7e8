"""``hemx bench kernels``: NTT throughput per method, BAT vs baseline, basis conversion, modular reduction.

Suites and what they reproduce:

* ``ntt``: NTT/s per method (butterfly, four_step, mat3, multilevel) at the CROSS Tab. IV sets A-D (N, limbs,
  28-bit primes) and batch sizes 1..64 (CROSS Fig. 11b). Throughput counts one-limb NTTs: batch * L / time.
* ``bat``: exact ``(H x V) @ (V x W) mod q`` through BAT vs the sparse Toeplitz baseline, CROSS Tab. V shapes.
* ``bconv``: basis conversion with BAT vs the element-wise baseline, CROSS Tab. VI shapes (N = 2^16).
* ``modred``: Barrett vs Montgomery vs Shoup for VecModMul and for the NTT at set D (CROSS Fig. 13).
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Callable, Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from hemx.bench.report import BenchResult, render_table
from hemx.bench.timing import time_call
from hemx.errors import ParameterError
from hemx.kernels import bat, bconv, modarith
from hemx.kernels import ntt as ntt_kernels
from hemx.nt import ntt_primes


@dataclasses.dataclass(frozen=True)
class KernelSet:
    """A CROSS Tab. IV parameter set for kernel benchmarks: ring degree and number of 28-bit limbs."""

    name: str
    log_n: int
    limbs: int

    @property
    def n(self) -> int:
        return 1 << self.log_n


CROSS_SETS = {
    "A": KernelSet("A", 12, 4),
    "B": KernelSet("B", 13, 8),
    "C": KernelSet("C", 14, 15),
    "D": KernelSet("D", 16, 51),
}

# CROSS Tab. V: (H, V, W) of M_{HxV} @ M_{VxW} mod q
TAB_V_SHAPES = [
    (512, 256, 256),
    (1024, 256, 256),
    (2048, 256, 256),
    (4096, 256, 256),
    (1024, 512, 512),
    (2048, 512, 512),
    (1024, 1024, 1024),
    (2048, 1024, 1024),
    (2048, 2048, 2048),
]

# CROSS Tab. VI: (limbs in, limbs out, N)
TAB_VI_SHAPES = [(12, 28, 1 << 16), (12, 36, 1 << 16), (16, 40, 1 << 16), (24, 56, 1 << 16)]

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_MAX_ELEMENTS = 1 << 26  # skip NTT configs with more than 64 Mi residues (256 MiB) per input


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def _random_residues(rng: np.random.Generator, shape: tuple[int, ...], moduli: Sequence[int]) -> jax.Array:
    qs = np.asarray(moduli, dtype=np.uint64).reshape(-1, 1)
    raw = rng.integers(0, 1 << 62, size=shape, dtype=np.uint64)
    return jnp.asarray((raw % qs).astype(np.uint32))


# ----------------------------------------------------------------------------------------------------------
# NTT
# ----------------------------------------------------------------------------------------------------------


def bench_ntt(
    sets: Iterable[str] = ("A", "B", "C", "D"),
    methods: Iterable[str] = ntt_kernels.METHODS,
    batches: Iterable[int] = DEFAULT_BATCHES,
    *,
    reduction: str = "shoup",
    repeats: int = 5,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    console: Console | None = None,
    seed: int = 0,
) -> list[BenchResult]:
    """Forward-NTT throughput for each (set, method, batch)."""
    console = console or Console()
    rng = np.random.default_rng(seed)
    configs = [(CROSS_SETS[s.upper()], m, b) for s in sets for m in methods for b in batches]
    results: list[BenchResult] = []
    fn = jax.jit(ntt_kernels.ntt)
    plans: dict = {}
    with _progress(console) as prog:
        task = prog.add_task("NTT", total=len(configs))
        for ks, method, batch in configs:
            prog.update(task, description=f"NTT set {ks.name} {method} batch {batch}")
            elems = batch * ks.limbs * ks.n
            params = {"set": ks.name, "n": ks.n, "limbs": ks.limbs, "batch": batch, "reduction": reduction}
            if elems > max_elements:
                results.append(BenchResult("ntt", method, params, None, extra={"skipped": "over --max-elements"}))
                prog.advance(task)
                continue
            key = (ks.name, method)
            if key not in plans:
                qs = ntt_primes(28, ks.limbs, ks.n)
                plans[key] = (qs, jax.device_put(ntt_kernels.make_plan(ks.n, qs, method, reduction=reduction)))
            qs, plan = plans[key]
            x = _random_residues(rng, (batch, ks.limbs, ks.n), qs)
            t = time_call(fn, x, plan, repeats=repeats, min_time_s=0.2)
            ntts = batch * ks.limbs
            params["plan"] = plan.describe()
            results.append(BenchResult("ntt", method, params, t.median_s, t.min_s, ntts / t.median_s, "NTT/s"))
            del x
            prog.advance(task)
    return results


def ntt_summary_rows(results: Sequence[BenchResult]) -> list[list]:
    """Best batch per (set, method): rows for the summary table."""
    best: dict = {}
    for r in results:
        if r.suite != "ntt" or r.throughput is None:
            continue
        key = (r.params["set"], r.name)
        if key not in best or r.throughput > best[key].throughput:
            best[key] = r
    rows = []
    for (s, m), r in sorted(best.items()):
        one = next(
            (x for x in results if x.suite == "ntt" and x.name == m and x.params["set"] == s and x.params["batch"] == 1
             and x.throughput), None)
        plan = r.params.get("plan", "")
        split = next((t.split("=", 1)[1] for t in plan.split() if t.startswith("split=")), "-")
        rows.append([s, r.params["n"], r.params["limbs"], m, (one.throughput / 1e3) if one else None,
                     r.throughput / 1e3, r.params["batch"], split])
    return rows


# ----------------------------------------------------------------------------------------------------------
# BAT vs Toeplitz baseline
# ----------------------------------------------------------------------------------------------------------


def bench_bat(
    shapes: Iterable[tuple[int, int, int]] = TAB_V_SHAPES, *, repeats: int = 5, bp: int = 8,
    console: Console | None = None, seed: int = 0,
) -> list[BenchResult]:
    """``(H x V) @ (V x W) mod q`` (28-bit prime q): BAT dense int8 matmul vs the sparse Toeplitz baseline."""
    console = console or Console()
    rng = np.random.default_rng(seed)
    q = ntt_primes(28, 1, 1 << 12)[0]
    shapes = list(shapes)
    results = []
    run_bat, run_toe = jax.jit(bat.apply_known), jax.jit(bat.apply_toeplitz)
    with _progress(console) as prog:
        task = prog.add_task("BAT", total=len(shapes))
        for h, v, w in shapes:
            prog.update(task, description=f"BAT {h}x{v}x{w}")
            a = rng.integers(0, q, size=(h, v), dtype=np.int64)
            x = _random_residues(rng, (1, 1, v, w), [q])
            kb = jax.device_put(bat.compile_known_matrix(a, [q], bp))
            kt = jax.device_put(bat.compile_toeplitz_matrix(a, [q], bp))
            tb = time_call(run_bat, x, kb, repeats=repeats, min_time_s=0.2)
            tt = time_call(run_toe, x, kt, repeats=repeats, min_time_s=0.2)
            k = kb.num
            params = {"H": h, "V": v, "W": w, "q_bits": q.bit_length(), "bp": bp, "K": k}
            ops_bat = 2 * (h * k) * (v * k) * w
            ops_toe = 2 * (h * (2 * k - 1)) * (v * k) * w
            results.append(BenchResult("bat", "toeplitz", params, tt.median_s, tt.min_s, ops_toe / tt.median_s,
                                       "int8 op/s"))
            results.append(BenchResult("bat", "bat", params, tb.median_s, tb.min_s, ops_bat / tb.median_s,
                                       "int8 op/s", {"speedup_vs_toeplitz": tt.median_s / tb.median_s}))
            prog.advance(task)
    return results


# ----------------------------------------------------------------------------------------------------------
# basis conversion
# ----------------------------------------------------------------------------------------------------------


def bench_bconv(
    shapes: Iterable[tuple[int, int, int]] = TAB_VI_SHAPES, *, repeats: int = 5, reduction: str = "shoup",
    console: Console | None = None, seed: int = 0,
) -> list[BenchResult]:
    """Basis conversion ``(l, N) -> (l', N)``: BAT matmul vs element-wise baseline (28-bit primes)."""
    console = console or Console()
    rng = np.random.default_rng(seed)
    shapes = list(shapes)
    results = []
    fns = {m: jax.jit(partial(bconv.bconv, method=m)) for m in bconv.BCONV_METHODS}
    with _progress(console) as prog:
        task = prog.add_task("BConv", total=len(shapes))
        for l_in, l_out, n in shapes:
            prog.update(task, description=f"BConv {l_in}->{l_out} N={n}")
            # 28-bit primes; Tab. VI needs up to 80 distinct ones, more than exist = 1 mod 2^17 below 2^28
            primes = ntt_primes(28, l_in + l_out, 1 << 12)
            plan = jax.device_put(bconv.make_bconv_plan(primes[:l_in], primes[l_in:], reduction=reduction))
            x = _random_residues(rng, (l_in, n), primes[:l_in])
            times = {m: time_call(f, x, plan, repeats=repeats, min_time_s=0.2) for m, f in fns.items()}
            params = {"limbs_in": l_in, "limbs_out": l_out, "n": n, "reduction": reduction}
            base = times["elementwise"].median_s
            for m, t in times.items():
                extra = {"speedup_vs_elementwise": base / t.median_s} if m == "bat" else {}
                results.append(BenchResult("bconv", m, params, t.median_s, t.min_s, n / t.median_s, "coeff/s", extra))
            prog.advance(task)
    return results


# ----------------------------------------------------------------------------------------------------------
# modular reduction ablation (CROSS Fig. 13)
# ----------------------------------------------------------------------------------------------------------


def bench_modred(
    batches: Iterable[int] = (1, 2, 4, 8), *, set_name: str = "D", ntt_methods: Iterable[str] = ("butterfly", "mat3"),
    repeats: int = 5, console: Console | None = None, seed: int = 0,
) -> list[BenchResult]:
    """VecModMul by a known operand and the NTT, with Barrett / Montgomery / Shoup, at one CROSS set."""
    console = console or Console()
    rng = np.random.default_rng(seed)
    ks = CROSS_SETS[set_name.upper()]
    qs = ntt_primes(28, ks.limbs, ks.n)
    table = modarith.make_modulus_table(qs)
    w = modarith.known_operand(rng.integers(0, 1 << 62, size=(ks.limbs, ks.n), dtype=np.int64),
                               np.asarray(qs, np.int64).reshape(-1, 1))
    batches = list(batches)
    ntt_methods = list(ntt_methods)
    total = len(batches) * 3 * (1 + len(ntt_methods))
    results = []
    vec = jax.jit(modarith.mul_known, static_argnames="method")
    ntt_fn = jax.jit(ntt_kernels.ntt)
    with _progress(console) as prog:
        task = prog.add_task("mod. reduction", total=total)
        plans = {(m, r): jax.device_put(ntt_kernels.make_plan(ks.n, qs, m, reduction=r))
                 for m in ntt_methods for r in modarith.REDUCTIONS}
        for batch in batches:
            x = _random_residues(rng, (batch, ks.limbs, ks.n), qs)
            for red in modarith.REDUCTIONS:
                prog.update(task, description=f"VecModMul {red} batch {batch}")
                t = time_call(lambda a: vec(a, w, table, method=red), x, repeats=repeats, min_time_s=0.2)
                params = {"set": ks.name, "n": ks.n, "limbs": ks.limbs, "batch": batch, "kernel": "vecmodmul"}
                results.append(BenchResult("modred", red, params, t.median_s, t.min_s, x.size / t.median_s, "mulmod/s"))
                prog.advance(task)
                for m in ntt_methods:
                    prog.update(task, description=f"NTT {m} {red} batch {batch}")
                    t = time_call(ntt_fn, x, plans[(m, red)], repeats=repeats, min_time_s=0.2)
                    params = {"set": ks.name, "n": ks.n, "limbs": ks.limbs, "batch": batch, "kernel": f"ntt-{m}"}
                    results.append(BenchResult("modred", red, params, t.median_s, t.min_s,
                                               batch * ks.limbs / t.median_s, "NTT/s"))
                    prog.advance(task)
    return results


# ----------------------------------------------------------------------------------------------------------
# report
# ----------------------------------------------------------------------------------------------------------


def print_report(results: Sequence[BenchResult], console: Console | None = None) -> None:
    """Print one table per suite present in ``results``."""
    console = console or Console()
    suites = {r.suite for r in results}
    if "ntt" in suites:
        render_table(
            "NTT throughput (K one-limb NTT/s): batch 1 and best batch",
            ["set", "N", "limbs", "method", "K NTT/s b=1", "K NTT/s best", "best b", "split"],
            ntt_summary_rows(results), console)
    if "bat" in suites:
        rows = []
        for r in results:
            if r.suite == "bat" and r.name == "bat":
                base = next(x for x in results if x.suite == "bat" and x.name == "toeplitz" and x.params == r.params)
                p = r.params
                rows.append([p["H"], p["V"], p["W"], base.median_s * 1e6, r.median_s * 1e6,
                             r.extra["speedup_vs_toeplitz"], r.throughput / 1e9])
        render_table("BAT vs sparse Toeplitz baseline, (HxV)@(VxW) mod q (CROSS Tab. V shapes)",
                     ["H", "V", "W", "baseline us", "BAT us", "speedup", "BAT G int8 op/s"], rows, console)
    if "bconv" in suites:
        rows = []
        for r in results:
            if r.suite == "bconv" and r.name == "bat":
                base = next(x for x in results if x.suite == "bconv" and x.name == "elementwise" and x.params == r.params)
                p = r.params
                rows.append([p["limbs_in"], p["limbs_out"], p["n"], base.median_s * 1e6, r.median_s * 1e6,
                             r.extra["speedup_vs_elementwise"]])
        render_table("Basis conversion, BAT vs element-wise (CROSS Tab. VI shapes)",
                     ["l", "l'", "N", "baseline us", "BAT us", "speedup"], rows, console)
    if "modred" in suites:
        rows = []
        for r in results:
            if r.suite == "modred":
                p = r.params
                scale, unit = (1e3, "K NTT/s") if r.unit == "NTT/s" else (1e6, "M mulmod/s")
                rows.append([p["kernel"], p["batch"], r.name, r.median_s * 1e3, r.throughput / scale, unit])
        render_table("Modular reduction ablation (CROSS Fig. 13), set " + next(
            r.params["set"] for r in results if r.suite == "modred"),
            ["kernel", "batch", "method", "ms", "throughput", "unit"], rows, console)


SUITES: dict[str, Callable[..., list[BenchResult]]] = {
    "ntt": bench_ntt,
    "bat": bench_bat,
    "bconv": bench_bconv,
    "modred": bench_modred,
}


def parse_int_list(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError as exc:
        raise ParameterError(f"expected a comma-separated list of integers, got {text!r}") from exc
