"""``hemx bench polymul``: polynomial products mod any q, matmul method vs NTT method vs a numpy baseline.

Cases follow the paper's Table 1 (PQC: n = 2^8..2^10, <= 60-bit q; FHE: n = 2^10..2^14, 32..54-bit q; ZKP:
384..768-bit q at degrees the O(n^2) method can run here, and the ``zkp`` preset, n = 2^16 with a 256-bit q).
Methods, all exact and end to end (host integer arrays in, host integer arrays out):

* ``matmul``: :func:`hemx.polymul.polymul` (int8 matmuls over the planner's residue base), optionally with
  Karatsuba levels (``matmul-k1``...);
* ``ntt``: the same product through an RNS of 31-bit NTT primes and :class:`hemx.ring.RNSRing` (works for any q;
  the "NTT-friendly" column says whether q itself would allow a direct NTT);
* ``numpy``: exact float64 FFT convolution on small limbs (host numpy).

``batch`` a polynomials share one b (paper §2.2: one matmul for all of them); times are per call, throughput is
products per second.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
from typing import Iterable, Sequence

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from hemx.bench.report import BenchResult, render_table, save_results
from hemx.bench.timing import machine_label, time_call
from hemx.errors import HemxError, ParameterError
from hemx.nt import is_prime
from hemx.polymul import PRESETS, make_plan, polymul

#: BLS12-381 base-field prime (381 bits) and a 768-bit modulus (2^768 - 2^384 + 1 style, odd composite allowed)
BLS381_P = int(
    "1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab", 16
)
Q768 = (1 << 768) - (1 << 384) + 1


def _prime_below(bits: int) -> int:
    c = (1 << bits) - 1
    while not is_prime(c):
        c -= 2
    return c


@dataclasses.dataclass(frozen=True)
class BenchCase:
    """A benchmark size: ring degree, modulus, ring type and the Table 1 family it stands for."""

    name: str
    family: str
    n: int
    q: int
    ring: str = "negacyclic"

    @property
    def q_bits(self) -> int:
        return self.q.bit_length()

    @property
    def ntt_friendly(self) -> bool:
        """Could this q carry a direct length-n negacyclic NTT (prime, q = 1 mod 2n, below 2^31 for hemx words)?"""
        n = self.n
        return self.ring == "negacyclic" and self.q < 2**31 and (self.q - 1) % (2 * n) == 0 and is_prime(self.q)


def default_cases() -> dict[str, BenchCase]:
    """The Table 1 grid, smallest first."""
    cases = [
        BenchCase("kyber", "PQC", PRESETS["kyber"].n, PRESETS["kyber"].q),
        BenchCase("dilithium", "PQC", PRESETS["dilithium"].n, PRESETS["dilithium"].q),
        BenchCase("pqc-1024-60", "PQC", 1024, _prime_below(60)),
        BenchCase("fhe-1024-32", "FHE", 1024, _prime_below(32)),
        BenchCase("fhe-4096-54", "FHE", 4096, PRESETS["fhe"].q),
        BenchCase("fhe", "FHE", PRESETS["fhe"].n, PRESETS["fhe"].q),
        BenchCase("zkp-4096-381", "ZKP", 4096, BLS381_P, "cyclic"),
        BenchCase("zkp-4096-768", "ZKP", 4096, Q768, "cyclic"),
        BenchCase("zkp", "ZKP", PRESETS["zkp"].n, PRESETS["zkp"].q, PRESETS["zkp"].ring),
    ]
    return {c.name: c for c in cases}


CASES = default_cases()
QUICK_CASES = ("kyber", "dilithium", "fhe-1024-32", "zkp-4096-381")
METHODS = ("matmul", "ntt", "numpy")
#: skip batched configurations whose matmul work exceeds this many multiply-adds (keeps the sweep bounded)
DEFAULT_MAX_MACS = 2e12


def _rand(q: int, shape: tuple[int, ...], rng: random.Random) -> np.ndarray:
    flat = [rng.randrange(q) for _ in range(int(np.prod(shape)))]
    if q.bit_length() <= 63:
        return np.asarray(flat, dtype=np.int64).reshape(shape)
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(shape)


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), console=console, transient=False,
    )


def bench_polymul(
    cases: Iterable[BenchCase],
    *,
    methods: Sequence[str] = METHODS,
    batches: Sequence[int] = (1, 16),
    karatsuba: Sequence[int] = (),
    repeats: int = 3,
    max_macs: float = DEFAULT_MAX_MACS,
    console: Console | None = None,
    seed: int = 0,
) -> list[BenchResult]:
    """Time every (case, batch, method); results are checked equal across methods before timing.

    Args:
        cases: sizes to run.
        methods: any of ``matmul``, ``ntt``, ``numpy``.
        batches: a polynomials per call (all sharing one b).
        karatsuba: extra Karatsuba levels to time for the matmul method (``matmul-k<L>``).
        repeats: timed calls per configuration (after one untimed warm-up call that also compiles).
        max_macs: skip batched matmul configurations above this many multiply-adds (batch 1 always runs).
    """
    console = console or Console()
    rng = random.Random(seed)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ParameterError(f"unknown method(s) {unknown}; choose from {METHODS}")
    variants = [(m, 0) for m in methods] + [("matmul", lv) for lv in karatsuba if lv > 0]
    configs = [(c, b, v) for c in cases for b in batches for v in variants]
    results: list[BenchResult] = []
    refs: dict = {}
    with _progress(console) as prog:
        task = prog.add_task("polymul", total=len(configs))
        for case, batch, (method, level) in configs:
            name = method if not level else f"matmul-k{level}"
            prog.update(task, description=f"{case.name} batch {batch} {name}")
            params = {"case": case.name, "family": case.family, "n": case.n, "q_bits": case.q_bits,
                      "ring": case.ring, "batch": batch}
            extra: dict = {"ntt_friendly": case.ntt_friendly}
            plan = None
            if method == "matmul":
                if level and case.n % (1 << level):
                    prog.advance(task)
                    continue
                plan = make_plan(case.n, case.q, case.ring, rows=batch, karatsuba=level)
                extra.update(plan=plan.describe(), channels=plan.channels, base=plan.base.describe())
                if batch > 1 and plan.macs > max_macs:
                    results.append(BenchResult("polymul", name, params, None, extra={**extra, "skipped": "max-macs"}))
                    prog.advance(task)
                    continue
            key = (case.name, batch)
            if key not in refs:
                refs[key] = (_rand(case.q, (batch, case.n), rng), _rand(case.q, (case.n,), rng), None)
            a, b, want = refs[key]
            kw = {"ring": case.ring, "method": method}
            if level:
                kw["karatsuba"] = level
            got = polymul(a, b, case.q, **kw)
            if want is None:
                refs[key] = (a, b, got)
            elif not np.array_equal(np.asarray(got, dtype=object), np.asarray(want, dtype=object)):
                raise HemxError(f"{name} disagrees with the first method on {case.name}")  # pragma: no cover
            t = time_call(lambda: polymul(a, b, case.q, **kw), repeats=repeats, warmup=1, min_time_s=0.2)
            if plan is not None:
                extra["gops"] = 2 * plan.macs / t.median_s / 1e9
            results.append(BenchResult("polymul", name, params, t.median_s, t.min_s, batch / t.median_s,
                                       "products/s", extra))
            prog.advance(task)
    return results


def _by(results: Sequence[BenchResult]) -> dict:
    out: dict = {}
    for r in results:
        key = (r.params["case"], r.params["batch"])
        out.setdefault(key, {})[r.name] = r
    return out


def summary_rows(results: Sequence[BenchResult]) -> list[list]:
    """One row per (case, batch): milliseconds per call of each method, the fastest, and matmul's ratios."""
    rows = []
    for (case, batch), by_m in _by(results).items():
        any_r = next(iter(by_m.values()))
        p = any_r.params
        mm = by_m.get("matmul")
        ms = {m: (r.median_s * 1e3 if r.median_s else None) for m, r in by_m.items()}
        timed = {m: v for m, v in ms.items() if v is not None}
        best = min(timed, key=timed.get) if timed else "-"
        kbest = min((m for m in timed if m.startswith("matmul-k")), key=timed.get, default=None)
        vs_ntt = (timed["ntt"] / timed["matmul"]) if mm and "ntt" in timed and "matmul" in timed else None
        vs_np = (timed["numpy"] / timed["matmul"]) if mm and "numpy" in timed and "matmul" in timed else None
        rows.append([
            case, p["n"], p["q_bits"], p["ring"][:4], batch,
            (mm.extra.get("channels") if mm else None),
            ms.get("matmul"), (f"{timed[kbest]:.3g} ({kbest[-2:]})" if kbest else "-"),
            ms.get("ntt"), ms.get("numpy"), best, vs_ntt, vs_np,
            (mm.extra.get("gops") if mm else None),
        ])
    return rows


SUMMARY_COLUMNS = ["case", "n", "q bits", "ring", "batch", "channels", "matmul ms", "karatsuba ms", "ntt ms",
                   "numpy ms", "fastest", "ntt/matmul", "numpy/matmul", "matmul G op/s"]


def print_report(results: Sequence[BenchResult], console: Console | None = None) -> None:
    render_table("Polynomial multiplication mod q: ms per call (batch a's sharing one b), ratios > 1: matmul wins",
                 SUMMARY_COLUMNS, summary_rows(results), console)


def plot_results(results: Sequence[BenchResult], path: str) -> str:
    """Time per product (log scale) for each case and method, one panel per batch size; writes a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = sorted({r.params["batch"] for r in results})
    cases = list(dict.fromkeys(r.params["case"] for r in results))
    names = list(dict.fromkeys(r.name for r in results))
    fig, axes = plt.subplots(1, len(batches), figsize=(6 * len(batches), 4.5), squeeze=False)
    for ax, batch in zip(axes[0], batches):
        for name in names:
            xs, ys = [], []
            for i, c in enumerate(cases):
                r = next((r for r in results if r.name == name and r.params["case"] == c
                          and r.params["batch"] == batch and r.median_s), None)
                if r:
                    xs.append(i)
                    ys.append(r.median_s / batch * 1e3)
            if xs:
                ax.plot(xs, ys, marker="o", label=name)
        ax.set_yscale("log")
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(cases, rotation=40, ha="right", fontsize=8)
        ax.set_ylabel("ms per product")
        ax.set_title(f"batch {batch}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"hemx polymul, {machine_label()}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _int_list(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError as exc:
        raise ParameterError(f"expected a comma-separated list of integers, got {text!r}") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``hemx bench polymul``."""
    parser.add_argument("--sizes", "--presets", dest="sizes", default=",".join(CASES),
                        help=f"comma list of cases (default: all): {', '.join(CASES)}")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma list of: matmul, ntt, numpy")
    parser.add_argument("--batches", default="1,16", help="a polynomials per call, sharing one b")
    parser.add_argument("--karatsuba", default="", help="extra Karatsuba levels to time for matmul, e.g. 1,2")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per configuration")
    parser.add_argument("--max-macs", type=float, default=DEFAULT_MAX_MACS,
                        help="skip batched matmul configurations above this many multiply-adds")
    parser.add_argument("--plot", default=None, metavar="PATH", help="write a PNG plot here")
    parser.add_argument("--out", default="bench-results", help="directory for the result JSON")
    parser.add_argument("--quick", action="store_true",
                        help=f"small sweep: {', '.join(QUICK_CASES)}; batches 1,8; 2 repeats")
    parser.add_argument("--seed", type=int, default=0)


def run_cli(args) -> int:
    """Run ``hemx bench polymul`` with parsed ``args``; prints the table, saves JSON (and a plot). Returns 0."""
    console = Console() if sys.stdout.isatty() else Console(width=200)  # keep the table readable in logs
    names = list(QUICK_CASES) if args.quick else [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in names if s not in CASES]
    if unknown:
        raise ParameterError(f"unknown size(s) {unknown}; choose from {list(CASES)}")
    batches = [1, 8] if args.quick else _int_list(args.batches)
    repeats = 2 if args.quick else args.repeats
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    levels = _int_list(args.karatsuba) if args.karatsuba else []
    console.print(f"[bold]hemx bench polymul[/] on {machine_label()}")
    results = bench_polymul([CASES[s] for s in names], methods=methods, batches=batches, karatsuba=levels,
                            repeats=repeats, max_macs=args.max_macs, console=console, seed=args.seed)
    print_report(results, console)
    path = save_results(results, "polymul", args.out, meta={"argv": sys.argv[1:], "cases": names,
                                                            "batches": batches, "methods": methods})
    console.print(f"results written to {path}")
    if args.plot:
        console.print(f"plot written to {plot_results(results, args.plot)}")
    return 0
