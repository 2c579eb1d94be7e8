"""``hemx bench throughput``: batch-size sweeps for the NTT and HE-Mult (CROSS Fig. 11b), best batch reported.

Operation-level batching (TensorFHE §V) runs B independent inputs as one kernel call of shape ``(B, ..., L, N)``.
Throughput per batch is ``B / time``; it grows while the batch adds parallel work the device can absorb and
falls once the working set leaves the caches (CPU) or memory runs out. Each point: a warm-up call (compile),
then the median of ``repeats`` timed calls with ``jax.block_until_ready``.

* ``ntt``: forward NTT of ``(B, L, N)`` residues at a CROSS set, with the variant the planner picks for the
  set's shape (or a forced method); throughput in one-limb NTTs per second (``B * L / time``).
* ``mul``: HE-Mult with relinearization and rescale of B ciphertext pairs at a parameter set of
  :data:`hemx.bench.ops.SETS`; throughput in ciphertext products per second.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import jax
import numpy as np
from rich.console import Console

from hemx.bench.kernels import CROSS_SETS, _progress, _random_residues
from hemx.bench.report import BenchResult, render_table
from hemx.bench.timing import time_call
from hemx.kernels import ntt as ntt_kernels
from hemx.nt import ntt_primes

DEFAULT_NTT_BATCHES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_MUL_BATCHES = (1, 2, 4, 8, 16)
DEFAULT_MAX_ELEMENTS = 1 << 25  # residues per NTT input; larger batches are skipped


def sweep_ntt(
    sets: Iterable[str] = ("A", "B"),
    batches: Sequence[int] = DEFAULT_NTT_BATCHES,
    *,
    method: str | None = None,
    repeats: int = 5,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    console: Console | None = None,
    seed: int = 0,
) -> list[BenchResult]:
    """NTT throughput against the batch size for each CROSS set (planner's variant unless ``method``)."""
    from hemx.plan import plan_ntt

    console = console or Console()
    rng = np.random.default_rng(seed)
    fn = jax.jit(ntt_kernels.ntt)
    results = []
    sets = [s.upper() for s in sets]
    with _progress(console) as prog:
        task = prog.add_task("NTT batch sweep", total=len(sets) * len(batches))
        for s in sets:
            ks = CROSS_SETS[s]
            qs = ntt_primes(28, ks.limbs, ks.n)
            choice = plan_ntt(ks.n, qs, method=method)
            kw = choice.variant.ring_kwargs()
            plan = jax.device_put(ntt_kernels.make_plan(ks.n, qs, kw.pop("ntt"), **kw))
            for b in batches:
                prog.update(task, description=f"NTT set {s} batch {b}")
                params = {"set": s, "n": ks.n, "limbs": ks.limbs, "batch": b, "plan": plan.describe()}
                if b * ks.limbs * ks.n > max_elements:
                    results.append(BenchResult("throughput_ntt", "hemx", params, None,
                                               extra={"skipped": "over --max-elements"}))
                else:
                    x = _random_residues(rng, (b, ks.limbs, ks.n), qs)
                    t = time_call(fn, x, plan, repeats=repeats, min_time_s=0.2)
                    results.append(BenchResult("throughput_ntt", "hemx", params, t.median_s, t.min_s,
                                               b * ks.limbs / t.median_s, "NTT/s"))
                    del x
                prog.advance(task)
    return results


def sweep_mul(
    sets: Iterable[str] = ("A", "B"),
    batches: Sequence[int] = DEFAULT_MUL_BATCHES,
    *,
    ntt: str | None = None,
    repeats: int = 3,
    console: Console | None = None,
    seed: int = 0,
) -> list[BenchResult]:
    """HE-Mult (relinearize + rescale) throughput against the batch size for each parameter set."""
    from hemx.bench.ops import params_for
    from hemx.ckks import Context

    console = console or Console()
    rng = np.random.default_rng(seed)
    results = []
    sets = [s.upper() for s in sets]
    with _progress(console) as prog:
        task = prog.add_task("HE-Mult batch sweep", total=len(sets) * len(batches))
        for s in sets:
            params = params_for(s)
            ctx = Context(params, ntt=ntt)
            keys = ctx.keygen()
            for b in batches:
                prog.update(task, description=f"HE-Mult set {s} batch {b}")
                shape = (b, ctx.slots)
                a = ctx.encrypt(rng.uniform(-1, 1, shape), keys)
                c = ctx.encrypt(rng.uniform(-1, 1, shape), keys)
                t = time_call(lambda: ctx.mul(a, c, keys, rescale=True).data, repeats=repeats)
                results.append(BenchResult(
                    "throughput_mul", "hemx",
                    {"set": s, "n": params.n, "limbs": params.num_limbs, "batch": b, "ntt": ctx.plan.describe(),
                     "keyswitch": ctx.keyswitch},
                    t.median_s, t.min_s, b / t.median_s, "ct-mult/s"))
                del a, c
                prog.advance(task)
            del ctx, keys
    return results


def best_batches(results: Sequence[BenchResult]) -> dict[tuple[str, str], BenchResult]:
    """``{(suite, set): result}`` of the highest throughput per sweep."""
    best: dict[tuple[str, str], BenchResult] = {}
    for r in results:
        if r.throughput is None:
            continue
        key = (r.suite, r.params["set"])
        if key not in best or r.throughput > best[key].throughput:
            best[key] = r
    return best


def print_throughput_report(results: Sequence[BenchResult], console: Console | None = None) -> None:
    console = console or Console()
    best = best_batches(results)
    for suite, title, scale, unit in (("throughput_ntt", "NTT", 1e3, "K NTT/s"),
                                      ("throughput_mul", "HE-Mult + relin + rescale", 1.0, "ct-mult/s")):
        rows = []
        for r in results:
            if r.suite != suite:
                continue
            top = best.get((suite, r.params["set"]))
            one = next((x for x in results if x.suite == suite and x.params["set"] == r.params["set"]
                        and x.params["batch"] == 1 and x.throughput), None)
            rows.append([r.params["set"], r.params["n"], r.params["limbs"], r.params["batch"],
                         None if r.median_s is None else r.median_s * 1e3,
                         None if r.throughput is None else r.throughput / scale,
                         None if r.throughput is None or one is None else r.throughput / one.throughput,
                         "best" if top is r else ""])
        if rows:
            render_table(f"{title} throughput against the batch size (CROSS Fig. 11b)",
                         ["set", "N", "limbs", "batch", "ms per call", unit, "x batch 1", ""], rows, console)


def plot_throughput(results: Sequence[BenchResult], path: str) -> str:
    """Throughput against batch size, one line per (sweep, set), normalised to batch 1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for suite, label in (("throughput_ntt", "NTT"), ("throughput_mul", "HE-Mult")):
        for s in sorted({r.params["set"] for r in results if r.suite == suite}):
            pts = sorted((r.params["batch"], r.throughput) for r in results
                         if r.suite == suite and r.params["set"] == s and r.throughput)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] / pts[0][1] for p in pts], marker="o", label=f"{label} set {s}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel("throughput / throughput at the smallest batch")
    ax.grid(True, which="both", alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["sweep_ntt", "sweep_mul", "best_batches", "print_throughput_report", "plot_throughput"]
