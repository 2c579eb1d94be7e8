"""``hemx bench kernels``: NTT throughput per method, BAT vs baseline, basis conversion, modular reduction.

Suites and what they reproduce:

* ``ntt``: NTT/s per method (butterfly, four_step, mat3, multilevel) at the CROSS Tab. IV sets A-D (N, limbs,
  28-bit primes) and batch sizes 1..64 (CROSS Fig. 11b). Throughput counts one-limb NTTs: batch * L / time.
* ``bat``: exact ``(H x V) @ (V x W) mod q`` through BAT vs the sparse Toeplitz baseline, CROSS Tab. V shapes.
* ``bconv``: basis conversion with BAT vs the element-wise baseline, CROSS Tab. VI shapes (N = 2^16).
* ``modred``: Barrett vs Montgomery vs Shoup for VecModMul and for the NTT at set D (CROSS Fig. 13).
* ``layout``: a batched NTT in the batch-major ``(B, L, N)`` layout of hemx's data against the limb-major
  ``(L, B, N)`` one (native, and converted to and back), interleaved.

NTT and BAT rows carry ``extra["work"]`` (int8 ops, modular multiplies, compulsory bytes; see
:mod:`hemx.bench.roofline`), from which :func:`hemx.bench.roofline.annotate` derives the fraction of the
machine's measured roofline each reaches. :func:`bench_ntt_peers` times the peers' NTT of a ciphertext beside
hemx's NTT of the same number of limbs, interleaved.
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

from hemx.bench import roofline
from hemx.bench.report import BenchResult, render_table
from hemx.bench.timing import time_call, time_interleaved
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
    sets: Iterable[str | KernelSet] = ("A", "B", "C", "D"),
    methods: Iterable[str] = ntt_kernels.METHODS,
    batches: Iterable[int] = DEFAULT_BATCHES,
    *,
    reduction: str = "shoup",
    repeats: int = 5,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    console: Console | None = None,
    seed: int = 0,
    stop: Callable[[], str | None] | None = None,
    plans: dict | None = None,
) -> list[BenchResult]:
    """Forward-NTT throughput for each (set, method, batch).

    ``sets``: CROSS set names or :class:`KernelSet` values. ``stop``: asked before each configuration; a reason
    (string) skips it with that reason recorded (a time budget, e.g. ``hemx bench gpu``). ``plans``: a dict that
    keeps the device-resident NTT plans between calls (keyed by set name and method).
    """
    console = console or Console()
    rng = np.random.default_rng(seed)
    kernel_sets = [s if isinstance(s, KernelSet) else CROSS_SETS[s.upper()] for s in sets]
    configs = [(ks, m, b) for ks in kernel_sets for m in methods for b in batches]
    results: list[BenchResult] = []
    fn = jax.jit(ntt_kernels.ntt)
    plans = {} if plans is None else plans
    x, x_key = None, None
    with _progress(console) as prog:
        task = prog.add_task("NTT", total=len(configs))
        for ks, method, batch in configs:
            prog.update(task, description=f"NTT set {ks.name} {method} batch {batch}")
            elems = batch * ks.limbs * ks.n
            params = {"set": ks.name, "n": ks.n, "limbs": ks.limbs, "batch": batch, "reduction": reduction}
            why = "over --max-elements" if elems > max_elements else (stop() if stop is not None else None)
            if why:
                results.append(BenchResult("ntt", method, params, None, extra={"skipped": why}))
                prog.advance(task)
                continue
            key = (ks.name, ks.n, ks.limbs, method, reduction)
            if key not in plans:
                qs = ntt_primes(28, ks.limbs, ks.n)
                plans[key] = (qs, jax.device_put(ntt_kernels.make_plan(ks.n, qs, method, reduction=reduction)))
            qs, plan = plans[key]
            if x_key != (ks, batch):  # one input per (set, batch), shared by the methods that follow
                x, x_key = None, (ks, batch)
                x = _random_residues(rng, (batch, ks.limbs, ks.n), qs)
            t = time_call(fn, x, plan, repeats=repeats, min_time_s=0.2)
            ntts = batch * ks.limbs
            params["plan"] = plan.describe()
            results.append(BenchResult("ntt", method, params, t.median_s, t.min_s, ntts / t.median_s, "NTT/s",
                                       {"work": roofline.ntt_work(plan, batch).as_dict()}))
            prog.advance(task)
    return results


def bench_ntt_peers(
    sets: Iterable[str] = ("A", "B", "C", "D"),
    peers: Sequence[str] = ("desilofhe", "tenseal"),
    *,
    threads: int = 2,
    repeats: int = 5,
    console: Console | None = None,
    seed: int = 0,
) -> list[BenchResult]:
    """The peers' NTT of one ciphertext beside hemx's NTT (the planner's variant) of the same limb count.

    Each peer transforms its own ciphertext at the set's N (2 polynomials x its limbs, 64-bit words); hemx
    transforms ``(transforms, N)`` 28-bit residues with the variant ``hemx.plan`` chooses for that shape. The
    two are timed round-robin; throughput is one-limb NTTs per second, and the ratio is peer time / hemx time.
    """
    from hemx.bench.peers import available_adapters
    from hemx.plan import plan_ntt

    console = console or Console()
    rng = np.random.default_rng(seed)
    adapters = available_adapters(peers, threads, lambda msg: console.print(f"[yellow]{msg}[/]"))
    results: list[BenchResult] = []
    fn = jax.jit(ntt_kernels.ntt)
    for name in sets:
        ks = CROSS_SETS[name.upper()]
        for ad in adapters:
            kernel = ad.ntt_setup(ks.n, max(1, ks.limbs // 2 - 1))
            params = {"set": ks.name, "n": ks.n, "peer": ad.name}
            if kernel is None:
                results.append(BenchResult("ntt_peers", ad.name, params, None,
                                           extra={"skipped": f"{ad.name} has no configuration at N={ks.n}"}))
                continue
            qs = ntt_primes(28, kernel.transforms, ks.n)
            choice = plan_ntt(ks.n, qs)
            kw = choice.variant.ring_kwargs()
            plan = jax.device_put(ntt_kernels.make_plan(ks.n, qs, kw.pop("ntt"), **kw))
            x = _random_residues(rng, (kernel.transforms, ks.n), qs)
            times = time_interleaved({"hemx": lambda: fn(x, plan), ad.name: kernel.run}, repeats=repeats)
            params.update(limbs=kernel.transforms, plan=plan.describe(), peer_note=kernel.note)
            th, tp = times["hemx"], times[ad.name]
            results.append(BenchResult("ntt_peers", "hemx", dict(params), th.median_s, th.min_s,
                                       kernel.transforms / th.median_s, "NTT/s",
                                       {"work": roofline.ntt_work(plan, 1).as_dict(), "interleaved": True}))
            results.append(BenchResult("ntt_peers", ad.name, dict(params), tp.median_s, tp.min_s,
                                       kernel.transforms / tp.median_s, "NTT/s",
                                       {"ratio_to_hemx": tp.median_s / th.median_s, "interleaved": True}))
    return results


LAYOUTS = ("bln", "lbn", "lbn_converted")


def bench_layout(
    sets: Iterable[str] = ("A", "B", "C", "D"),
    methods: Iterable[str] = ("butterfly", "mat3"),
    batches: Iterable[int] = (2, 4, 16),
    *,
    reduction: str = "shoup",
    repeats: int = 5,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    console: Console | None = None,
    seed: int = 0,
) -> list[BenchResult]:
    """Batch layout of a batched NTT: batch-major ``(B, L, N)`` against limb-major ``(L, B, N)``.

    Three calls on the same residues, timed round-robin: ``bln`` (the layout of hemx's ciphertexts),
    ``lbn`` (data already limb-major, ``ntt(..., limb_axis=0)``) and ``lbn_converted`` (batch-major data
    transposed to limb-major, transformed, and transposed back: what a context would pay to use the other
    layout inside one operation). The outputs are checked bit-identical. Batch 1 is skipped (both layouts
    are the same array).
    """
    console = console or Console()
    rng = np.random.default_rng(seed)
    configs = [(CROSS_SETS[s.upper()], m, b) for s in sets for m in methods for b in batches if b > 1]
    fwd = jax.jit(ntt_kernels.ntt)
    fwd_lbn = jax.jit(partial(ntt_kernels.ntt, limb_axis=0))
    converted = jax.jit(lambda x, plan: jnp.swapaxes(ntt_kernels.ntt(jnp.swapaxes(x, 0, 1), plan, limb_axis=0), 0, 1))
    results: list[BenchResult] = []
    with _progress(console) as prog:
        task = prog.add_task("NTT layout", total=len(configs))
        for ks, method, batch in configs:
            prog.update(task, description=f"NTT layout set {ks.name} {method} batch {batch}")
            params = {"set": ks.name, "n": ks.n, "limbs": ks.limbs, "batch": batch, "method": method,
                      "reduction": reduction}
            if batch * ks.limbs * ks.n > max_elements:
                for name in LAYOUTS:
                    results.append(BenchResult("layout", name, dict(params), None,
                                               extra={"skipped": "over --max-elements"}))
                prog.advance(task)
                continue
            qs = ntt_primes(28, ks.limbs, ks.n)
            plan = jax.device_put(ntt_kernels.make_plan(ks.n, qs, method, reduction=reduction))
            x = _random_residues(rng, (batch, ks.limbs, ks.n), qs)
            xt = jnp.swapaxes(x, 0, 1).copy()
            want = np.asarray(fwd(x, plan))
            for name, got in (("lbn", np.swapaxes(np.asarray(fwd_lbn(xt, plan)), 0, 1)),
                              ("lbn_converted", np.asarray(converted(x, plan)))):
                if not np.array_equal(got, want):  # pragma: no cover - the tests hold this
                    raise AssertionError(f"NTT layout {name} differs from (B, L, N) at set {ks.name} {method}")
            times = time_interleaved({"bln": lambda: fwd(x, plan), "lbn": lambda: fwd_lbn(xt, plan),
                                      "lbn_converted": lambda: converted(x, plan)}, repeats=repeats)
            params["plan"] = plan.describe()
            for name in LAYOUTS:
                t = times[name]
                results.append(BenchResult("layout", name, dict(params), t.median_s, t.min_s,
                                           batch * ks.limbs / t.median_s, "NTT/s",
                                           {"ratio_to_bln": t.median_s / times["bln"].median_s,
                                            "interleaved": True}))
            del x, xt
            prog.advance(task)
    return results


def layout_rows(results: Sequence[BenchResult]) -> list[list]:
    """One row per (set, method, batch): the three layouts' times and their ratios to ``(B, L, N)``."""
    rows = []
    for r in results:
        if r.suite != "layout" or r.name != "bln":
            continue
        p = r.params
        if r.median_s is None:
            rows.append([p["set"], p["n"], p["limbs"], p["method"], p["batch"], None, None, None, None, None])
            continue
        other = {x.name: x for x in results if x.suite == "layout" and x.params == p}
        lbn, conv = other["lbn"], other["lbn_converted"]
        rows.append([p["set"], p["n"], p["limbs"], p["method"], p["batch"], r.median_s * 1e3, lbn.median_s * 1e3,
                     lbn.extra["ratio_to_bln"], conv.median_s * 1e3, conv.extra["ratio_to_bln"]])
    return rows


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


def ntt_roofline_rows(results: Sequence[BenchResult]) -> list[list]:
    """Batch 1 and the best batch per (set, method) with their roofline figures."""
    rows = []
    groups: dict = {}
    for r in results:
        if r.suite == "ntt" and r.throughput and "roofline" in r.extra:
            groups.setdefault((r.params["set"], r.name), []).append(r)
    for (s, m), rs in sorted(groups.items()):
        best = max(rs, key=lambda r: r.throughput)
        picks = [r for r in rs if r.params["batch"] == 1] + ([best] if best.params["batch"] != 1 else [])
        for r in picks:
            rl = r.extra["roofline"]
            rows.append([s, r.params["n"], r.params["limbs"], m, r.params["batch"], r.median_s * 1e3,
                         rl["int8_ops_per_s"] / 1e9, rl["mulmods_per_s"] / 1e6, rl["bound"], rl["roofline_s"] * 1e3,
                         100 * rl["fraction"]])
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
                                       "int8 op/s", {"speedup_vs_toeplitz": tt.median_s / tb.median_s,
                                                     "work": roofline.bat_work(h, v, w, k).as_dict()}))
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
        if any("roofline" in r.extra for r in results if r.suite == "ntt"):
            render_table("NTT against the roofline (batch 1 and best batch per set and method)",
                         ["set", "N", "limbs", "method", "batch", "ms", "G int8 op/s", "M mulmod/s", "bound",
                          "roofline ms", "% roofline"], ntt_roofline_rows(results), console)
    if "ntt_peers" in suites:
        rows = []
        for r in results:
            if r.suite == "ntt_peers" and r.name != "hemx":
                if r.median_s is None:
                    rows.append([r.params["set"], r.params["n"], r.name, None, None, None, None, r.extra["skipped"]])
                    continue
                h = next(x for x in results if x.suite == "ntt_peers" and x.name == "hemx" and x.params == r.params)
                rows.append([r.params["set"], r.params["n"], r.name, r.params["limbs"], h.throughput / 1e3,
                             r.throughput / 1e3, r.extra["ratio_to_hemx"], h.params["plan"]])
        render_table("NTT of one ciphertext's limbs, hemx vs peers (same run, interleaved; ratio > 1: hemx faster)",
                     ["set", "N", "peer", "limbs", "hemx K NTT/s", "peer K NTT/s", "peer/hemx time", "hemx plan"],
                     rows, console)
    if "layout" in suites:
        render_table("Batched NTT, batch-major (B, L, N) vs limb-major (L, B, N), interleaved (ratio < 1: faster)",
                     ["set", "N", "limbs", "method", "batch", "(B,L,N) ms", "(L,B,N) ms", "ratio",
                      "converted ms", "ratio"], layout_rows(results), console)
    if "bat" in suites:
        rows = []
        for r in results:
            if r.suite == "bat" and r.name == "bat":
                base = next(x for x in results if x.suite == "bat" and x.name == "toeplitz" and x.params == r.params)
                p = r.params
                rl = r.extra.get("roofline", {})
                rows.append([p["H"], p["V"], p["W"], base.median_s * 1e6, r.median_s * 1e6,
                             r.extra["speedup_vs_toeplitz"], r.throughput / 1e9,
                             100 * rl["fraction"] if rl else None])
        render_table("BAT vs sparse Toeplitz baseline, (HxV)@(VxW) mod q (CROSS Tab. V shapes)",
                     ["H", "V", "W", "baseline us", "BAT us", "speedup", "BAT G int8 op/s", "% roofline"], rows,
                     console)
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


def print_peaks(peaks: roofline.Peaks, console: Console | None = None) -> None:
    render_table("Machine peaks (roofline ceilings, measured in this run)", ["peak", "value", "how"], [
        ["int8 matmul", f"{peaks.int8_ops / 1e9:.1f} G op/s", peaks.detail.get("int8_dot", "")],
        ["modular multiply", f"{peaks.mulmod / 1e6:.0f} M mulmod/s", "mul_known (Shoup), best of 2^20 / 2^22"],
        ["memory bandwidth", f"{peaks.bandwidth / 1e9:.1f} GB/s", peaks.detail.get("bandwidth_copy", "")],
    ], console)


def plot_kernels(results: Sequence[BenchResult], path: str) -> str:
    """NTT throughput against N per method at batch 1 (and peers' NTT when measured), and % of the roofline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ntt = [r for r in results if r.suite == "ntt" and r.throughput and r.params.get("batch") == 1]
    names = sorted({r.name for r in ntt}) + sorted({r.name for r in results if r.suite == "ntt_peers"
                                                   and r.name != "hemx" and r.throughput})
    colors = {name: f"C{i}" for i, name in enumerate(names)}
    for m in sorted({r.name for r in ntt}):
        pts = sorted((r.params["n"], r.throughput / 1e3, 100 * r.extra.get("roofline", {}).get("fraction", 0))
                     for r in ntt if r.name == m)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"hemx {m}", color=colors[m])
        if any(p[2] for p in pts):
            ax2.plot([p[0] for p in pts], [p[2] for p in pts], marker="o", label=m, color=colors[m])
    for peer in sorted({r.name for r in results if r.suite == "ntt_peers" and r.name != "hemx" and r.throughput}):
        pts = sorted((r.params["n"], r.throughput / 1e3) for r in results
                     if r.suite == "ntt_peers" and r.name == peer and r.throughput)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="s", linestyle="--", label=peer,
                color=colors[peer])
    for a, title, ylabel in ((ax, "NTT throughput, batch 1", "K one-limb NTT/s"),
                             (ax2, "NTT, % of the roofline of the method", "% of roofline")):
        a.set_xscale("log", base=2)
        a.set_xlabel("N")
        a.set_ylabel(ylabel)
        a.set_title(title)
        a.grid(True, which="both", alpha=0.3)
        if a.lines:
            a.legend(fontsize=8)
    ax.set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _bench_native(**kw) -> list[BenchResult]:
    from hemx.bench.native import bench_native  # noqa: PLC0415 - optional library

    return bench_native(**kw)


def _bench_key_product(**kw) -> list[BenchResult]:
    from hemx.bench.native import bench_key_product  # noqa: PLC0415 - optional library

    return bench_key_product(**kw)


def _bench_engine(**kw) -> list[BenchResult]:
    from hemx.bench.engine import bench_engine  # noqa: PLC0415 - optional library

    return bench_engine(**kw)


SUITES: dict[str, Callable[..., list[BenchResult]]] = {
    "native": _bench_native,
    "engine": _bench_engine,
    "keyproduct": _bench_key_product,
    "ntt": bench_ntt,
    "bat": bench_bat,
    "bconv": bench_bconv,
    "modred": bench_modred,
    "layout": bench_layout,
}


def parse_int_list(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError as exc:
        raise ParameterError(f"expected a comma-separated list of integers, got {text!r}") from exc
