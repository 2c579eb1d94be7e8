"""``hemx bench plan``: the planner's choice beside every alternative it timed, per parameter set.

For each set the NTT candidates of the ring ``Context`` would build (special primes + ciphertext primes) are
timed (without a time budget by default, so the cache ends up complete), the table shows each variant's time
per one-limb NTT relative to the chosen one, and the key-switching dataflow choice is shown with its
working-set estimates against the memory budget.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from rich.console import Console

from hemx.bench.report import BenchResult, render_table


def _rings(sets: Iterable[str], log_ns: Sequence[int]) -> list[tuple[str, object]]:
    """(label, params or (n, moduli)) for each requested set and ring degree."""
    from hemx.bench.ops import params_for
    from hemx.nt import ntt_primes

    out: list[tuple[str, object]] = [(s.upper(), params_for(s)) for s in sets]
    for log_n in log_ns:
        n = 1 << int(log_n)
        out.append((f"2^{log_n}", (n, tuple(ntt_primes(31, 4, n)))))
    return out


def bench_plan(
    sets: Iterable[str] = ("A", "B", "C", "D"),
    *,
    log_ns: Sequence[int] = (),
    budget_s: float = math.inf,
    refresh: bool = False,
    repeats: int = 5,
    console: Console | None = None,
) -> list[BenchResult]:
    """Plan each ring and return one result per timed variant (``extra["chosen"]`` marks the choice)."""
    from hemx import plan
    from hemx.plan import cache, variants

    console = console or Console()
    results: list[BenchResult] = []
    for label, spec in _rings(sets, log_ns):
        if isinstance(spec, tuple):
            n, basis = spec
            flow_info = None
        else:
            n, basis = spec.n, tuple(spec.special_moduli) + tuple(spec.moduli)
            k, nq, dnum = len(spec.special_moduli), spec.num_limbs, spec.dnum
            budget = variants.memory_budget_bytes()
            flow_info = {"working_set_bytes": variants.keyswitch_working_set(n, k, nq, dnum),
                         "budget_bytes": budget,
                         "choice": variants.choose_dataflow(n, k, nq, dnum, budget_bytes=budget)}
        console.print(f"planning {label} (N = {n}) ...")
        choice = plan.plan_ntt(n, basis, budget_s=budget_s, refresh=refresh, repeats=repeats)
        entry = cache.lookup(cache.entry_key(choice.shape)) or {}
        limbs = choice.shape.get("limbs", 1)
        base = {"set": label, "n": n, "timed_limbs": limbs, "bits": choice.shape.get("bits"),
                "source": choice.source}
        for name, rec in sorted(entry.get("timings", {}).items(), key=lambda kv: kv[1]["seconds"]):
            results.append(BenchResult(
                "plan", name, dict(base), rec["seconds"], None, limbs / rec["seconds"], "NTT/s",
                {"chosen": name == choice.variant.label, "compile_s": rec["compile_s"],
                 "vs_chosen": rec["seconds"] / choice.timings[choice.variant.label]
                 if choice.variant.label in choice.timings else None}))
        for name, why in sorted(choice.skipped.items()):
            results.append(BenchResult("plan", name, dict(base), None, extra={"skipped": why}))
        if flow_info is not None:
            results.append(BenchResult("plan_dataflow", flow_info["choice"], dict(base), None, extra=flow_info))
    return results


def print_plan_report(results: Sequence[BenchResult], console: Console | None = None) -> None:
    console = console or Console()
    rows = []
    for r in results:
        if r.suite != "plan":
            continue
        if r.median_s is None:
            rows.append([r.params["set"], r.params["n"], r.name, None, None, None, r.extra.get("skipped", "")])
            continue
        per_limb_us = r.median_s / r.params["timed_limbs"] * 1e6
        rows.append([r.params["set"], r.params["n"], r.name, per_limb_us, r.extra["vs_chosen"], r.extra["compile_s"],
                     "CHOSEN" if r.extra["chosen"] else ""])
    render_table("NTT variants timed by the planner (forward NTT, per limb; x chosen > 1: slower than the choice)",
                 ["set", "N", "variant", "us / limb", "x chosen", "setup+compile s", "note"], rows, console)
    flows = [r for r in results if r.suite == "plan_dataflow"]
    if flows:
        mib = 1 << 20
        render_table("Key-switching dataflow (estimated working set of one key switch, top level, batch 1)",
                     ["set", "N", "MP MiB", "DC MiB", "OC MiB", "budget MiB", "choice"],
                     [[r.params["set"], r.params["n"], r.extra["working_set_bytes"]["mp"] / mib,
                       r.extra["working_set_bytes"]["dc"] / mib, r.extra["working_set_bytes"]["oc"] / mib,
                       None if r.extra["budget_bytes"] is None else r.extra["budget_bytes"] / mib, r.name]
                      for r in flows], console)


__all__ = ["bench_plan", "print_plan_report"]
