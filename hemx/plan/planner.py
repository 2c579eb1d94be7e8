"""The NTT planner: time the exact variants once per machine and shape, remember the fastest.

:func:`plan_ntt` answers "which NTT method, split, chunk width and reduction should a ring of degree N with
these moduli use here?". Fields the caller forces are kept; the others are decided

* ``planning="off"`` (or ``HEMX_PLAN=off``): from :data:`hemx.plan.variants.STATIC_DEFAULTS`, no timing;
* ``planning="measure"`` (the default, or ``HEMX_PLAN=measure``): from the plan cache when it already holds
  timings for the candidates, else by timing them now and storing the timings.

What is timed: the forward NTT of one representative limb batch, ``(limbs, N)`` uint32 with
``limbs = clip(2^20 / N, 1, 16)`` freshly generated primes of the ring's largest word size (the per-limb cost
of a batch that engages every core without leaving the cache hierarchy's outer levels for long). Each
candidate is compiled, run once untimed, then timed ``repeats`` times with ``jax.block_until_ready``; the
fastest call counts (on a shared machine other work only adds time). The search has two rounds (one default
variant per method; then the fastest one's other reductions, splits and chunk widths); when the winner is not
the static default, the two are re-timed back to back and the median of the paired ratios decides. There is
a time budget (``HEMX_PLAN_BUDGET_S``, default
:data:`DEFAULT_BUDGET_S` seconds of planning per call, compilation included): a candidate whose estimated cost
would overrun it is left for a later call, so first use stays within seconds and later calls complete the
table. ``hemx bench plan`` times every candidate without a budget.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
import warnings
from typing import Callable, Sequence

import jax
import numpy as np

from hemx.errors import HemxError, ParameterError
from hemx.kernels import ntt as ntt_kernels
from hemx.nt import ntt_primes
from hemx.plan import cache
from hemx.plan.variants import (
    Constraints,
    NTTVariant,
    check_ring_degree,
    family_candidates,
    make_variant,
    refinements,
    constrained_default,
)

MODES: tuple[str, ...] = ("measure", "off")
MODE_ENV = "HEMX_PLAN"
BUDGET_ENV = "HEMX_PLAN_BUDGET_S"
DEFAULT_BUDGET_S = 3.0
COMPLETE_BUDGET_S = 60.0  # the default budget while the persistent compilation cache is on
DEFAULT_REPEATS = 5
TIMED_ELEMENTS = 1 << 20  # residues in the representative limb batch
MAX_TIMED_LIMBS = 16
UNKNOWN_COST_S = 0.5  # assumed cost of a candidate of a method not timed yet on this shape


@dataclasses.dataclass(frozen=True)
class PlanChoice:
    """The planner's answer for one ring.

    Attributes:
        variant: the chosen :class:`NTTVariant`.
        source: "forced" (everything was given), "static" (planning off), "cache" (all needed timings were
            in the plan cache) or "measured" (some were timed in this call).
        shape: what was timed: ``{"n", "limbs", "bits"}`` (empty unless measured / cached).
        timings: ``{label: seconds}`` of the timed candidates that satisfy the constraints.
        skipped: ``{label: reason}`` of candidates not timed (over the budget) or that failed.
    """

    variant: NTTVariant
    source: str
    shape: dict = dataclasses.field(default_factory=dict)
    timings: dict = dataclasses.field(default_factory=dict)
    skipped: dict = dataclasses.field(default_factory=dict)

    def describe(self) -> str:
        extra = ""
        if self.timings:
            extra = f", {len(self.timings)} variant(s) timed" + (f", {len(self.skipped)} left" if self.skipped else "")
        return f"{self.variant.label} ({self.source}{extra})"


def planning_mode(planning: str | None = None) -> str:
    """The effective planning mode: the argument, else ``$HEMX_PLAN``, else "measure"."""
    mode = planning if planning is not None else os.environ.get(MODE_ENV, "measure")
    mode = str(mode).strip().lower()
    if mode not in MODES:
        raise ParameterError(f"planning mode must be one of {MODES} (argument planning= or ${MODE_ENV}), got {mode!r}")
    return mode


def planning_budget(budget_s: float | None = None) -> float:
    """Seconds one planning call may spend: the argument, else ``$HEMX_PLAN_BUDGET_S``, else the default.

    The default is :data:`DEFAULT_BUDGET_S`, or :data:`COMPLETE_BUDGET_S` while JAX's persistent compilation
    cache is on (``import hemx`` turns it on, see :mod:`hemx.compilation_cache`): the chosen variant is part of
    every compiled program, so a search finished by instalments, whose choice changes in a later process, makes
    that process compile everything again (measured: the second ``hemx demo`` recompiled its whole circuit,
    ~20 s on the 2-core CPU), while finishing the search on first use costs a few seconds once.
    """
    if budget_s is None:
        raw = os.environ.get(BUDGET_ENV)
        if raw is None:
            cached = bool(jax.config.jax_compilation_cache_dir) and jax.config.jax_enable_compilation_cache
            return COMPLETE_BUDGET_S if cached else DEFAULT_BUDGET_S
        try:
            budget_s = float(raw)
        except ValueError as exc:
            raise ParameterError(f"${BUDGET_ENV} must be a number of seconds, got {raw!r}") from exc
    if not budget_s >= 0:  # also rejects NaN
        raise ParameterError(f"the planning budget must be a non-negative number of seconds, got {budget_s!r}")
    return float(budget_s)


def timed_shape(n: int, moduli: Sequence[int]) -> dict:
    """The representative shape timed for a ring: ``{"n", "limbs", "bits"}`` (see the module docstring)."""
    qs = [int(q) for q in moduli]
    if not qs:
        raise ParameterError("planning needs at least one modulus")
    limbs = int(min(MAX_TIMED_LIMBS, max(1, TIMED_ELEMENTS // n)))
    return {"n": int(n), "limbs": limbs, "bits": max(q.bit_length() for q in qs)}


def timing_moduli(shape: dict, fallback: Sequence[int]) -> list[int]:
    """``shape["limbs"]`` NTT primes of ``shape["bits"]`` bits (the ring's own moduli if too few exist)."""
    try:
        return ntt_primes(shape["bits"], shape["limbs"], shape["n"])
    except HemxError:
        qs = sorted((int(q) for q in fallback), key=lambda q: -q.bit_length())
        return qs[: shape["limbs"]]


_ntt_jit = jax.jit(ntt_kernels.ntt)


def prepare_variant(variant: NTTVariant, n: int, moduli: Sequence[int], *, seed: int = 0
                    ) -> tuple[Callable[[], None], float]:
    """Build and compile ``variant`` for ``(len(moduli), n)`` random residues and run it once.

    Returns a zero-argument runner of the compiled forward NTT (it waits for the result) and the seconds spent
    building, compiling and warming up.
    """
    start = time.perf_counter()
    kw = variant.ring_kwargs()
    plan = jax.device_put(ntt_kernels.make_plan(n, moduli, kw.pop("ntt"), **kw))
    qs = np.asarray(moduli, dtype=np.uint64).reshape(-1, 1)
    raw = np.random.default_rng(seed).integers(0, 1 << 62, size=(len(moduli), n), dtype=np.uint64)
    x = jax.device_put((raw % qs).astype(np.uint32))
    compiled = _ntt_jit.lower(x, plan).compile()

    def run() -> None:
        jax.block_until_ready(compiled(x, plan))

    run()  # warm-up, untimed
    return run, time.perf_counter() - start


def _samples(run: Callable[[], None], repeats: int) -> list[float]:
    out = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        run()
        out.append(time.perf_counter() - t0)
    return out


def measure_variant(variant: NTTVariant, n: int, moduli: Sequence[int], *, repeats: int = DEFAULT_REPEATS,
                    seed: int = 0) -> tuple[float, float, Callable[[], None]]:
    """(fastest of ``repeats`` timed forward NTTs, setup seconds, the runner) for ``(len(moduli), n)``.

    The fastest call estimates the kernel's own time best on a shared machine, where other work only ever
    adds time. The runner lets the search re-time finalists against each other (:func:`duel`).
    """
    run, setup = prepare_variant(variant, n, moduli, seed=seed)
    return min(_samples(run, repeats)), setup, run


def duel(first: Callable[[], None], second: Callable[[], None], rounds: int) -> float:
    """Median over ``rounds`` of time(first) / time(second), the two run back to back each round."""
    ratios = []
    for _ in range(max(1, rounds)):
        a = _samples(first, 1)[0]
        b = _samples(second, 1)[0]
        ratios.append(a / b)
    return statistics.median(ratios)


#: A timing function: variant -> (seconds, setup seconds) or (seconds, setup seconds, runner). A runner
#: (zero-argument callable) lets the search re-time the finalists against each other.
Measure = Callable[[NTTVariant], tuple]


def _best(entry: dict, c: Constraints) -> NTTVariant | None:
    timed = [(rec["seconds"], NTTVariant.from_json(rec["variant"])) for rec in entry["timings"].values()]
    timed = [(s, v) for s, v in timed if c.allows(v)]
    return min(timed, key=lambda sv: sv[0])[1] if timed else None


def search(c: Constraints, n: int, backend: str, entry: dict, measure: Measure, budget_s: float,
           repeats: int = DEFAULT_REPEATS) -> int:
    """Time the missing candidates of both rounds into ``entry`` (in place); returns how many were timed.

    ``entry`` holds ``timings`` ``{label: {"variant", "seconds", "compile_s"}}`` and ``failed``
    ``{label: reason}``; ``entry["skipped"]`` is rewritten with the candidates left over the budget.
    """
    start = time.perf_counter()
    timings, failed = entry.setdefault("timings", {}), entry.setdefault("failed", {})
    skipped: dict[str, str] = {}
    runners: dict[str, Callable[[], None]] = {}
    timed = 0

    def cost(method: str) -> float:
        seen = [rec["compile_s"] + rec["seconds"] * (repeats + 1) for rec in timings.values()
                if rec["variant"]["method"] == method]
        return max(seen) if seen else UNKNOWN_COST_S

    def consider(candidates: list[NTTVariant]) -> None:
        nonlocal timed
        for v in candidates:
            if v.label in timings or v.label in failed:
                continue
            anything = any(c.allows(NTTVariant.from_json(r["variant"])) for r in timings.values())
            if anything and time.perf_counter() - start + cost(v.method) > budget_s:
                skipped[v.label] = f"over the planning budget of {budget_s:g} s"
                continue
            try:
                result = measure(v)
            except HemxError as exc:  # a variant this ring cannot use (e.g. an overflow bound): not a choice
                failed[v.label] = f"{type(exc).__name__}: {exc}"
                continue
            timings[v.label] = {"variant": v.to_json(), "seconds": float(result[0]), "compile_s": float(result[1])}
            if len(result) > 2:
                runners[v.label] = result[2]
            timed += 1

    families = family_candidates(n, c, backend)
    consider(families)
    best_family = _best({"timings": {k: r for k, r in timings.items()
                                     if NTTVariant.from_json(r["variant"]) in families}}, c)
    # Refine once per shape: once every neighbour of the best family is timed, a later call with the cache
    # filled must not start timing another family's neighbours only because a duel or a noisy round reordered
    # the families. (Neighbours left over the budget are still timed by later calls.)
    refined = entry.setdefault("refined", {})  # constraints (as text) -> the family refined under them
    if best_family is not None and repr(c) not in refined:
        neighbours = refinements(best_family, n, c)
        consider(neighbours)
        if all(v.label in timings or v.label in failed for v in neighbours):
            refined[repr(c)] = best_family.label
    # The finalists, re-timed back to back: when the fastest is not the default, it must also beat the default
    # in a duel (the median of paired ratios), so a burst of load during one measurement cannot decide.
    # A loser's time is replaced by the duel's verdict and the next fastest is tried, until the default or a
    # duel winner is the fastest.
    default, duels = families[0], []
    while True:
        best = _best(entry, c)
        if (best is None or best == default or best.label not in runners or default.label not in runners
                or best.label in (d["finalist"] for d in duels)):
            break
        ratio = duel(runners[best.label], runners[default.label], 2 * repeats + 1)
        timings[best.label]["seconds"] = timings[default.label]["seconds"] * ratio
        duels.append({"finalist": best.label, "default": default.label, "time_ratio": ratio})
    if duels:
        entry["duels"] = duels
    entry["skipped"] = skipped
    return timed


_memo: dict[tuple, PlanChoice] = {}


def _checked_entry(entry) -> dict:
    """A cached entry if it has the expected structure; else an empty one (with a warning)."""
    if entry is None:
        return {}
    try:
        for rec in entry.get("timings", {}).values():
            NTTVariant.from_json(rec["variant"])
            float(rec["seconds"]), float(rec["compile_s"])
        if not isinstance(entry.get("failed", {}), dict):
            raise TypeError("failed must be a mapping")
    except (KeyError, TypeError, ValueError, AttributeError, HemxError) as exc:
        warnings.warn(f"ignoring a malformed plan-cache entry ({type(exc).__name__}: {exc}); it will be rewritten",
                      cache.PlanCacheWarning, stacklevel=3)
        return {}
    return dict(entry)


def clear_memo() -> None:
    """Forget the in-process answers (the cache file is untouched)."""
    _memo.clear()


def plan_ntt(
    n: int,
    moduli: Sequence[int],
    *,
    method: str | None = None,
    reduction: str | None = None,
    split: Sequence[int] | None = None,
    bp: int | None = None,
    planning: str | None = None,
    budget_s: float | None = None,
    repeats: int = DEFAULT_REPEATS,
    refresh: bool = False,
    measure: Measure | None = None,
) -> PlanChoice:
    """Choose the NTT variant of a ring ``(n, moduli)``; forced fields are kept (see the module docstring).

    Args:
        n: ring degree N.
        moduli: the ring's moduli (only their largest bit length matters to the timing).
        method, reduction, split, bp: forced choices (None: the planner decides).
        planning: "measure" or "off" (default ``$HEMX_PLAN``, else "measure").
        budget_s: seconds of planning allowed in this call (default ``$HEMX_PLAN_BUDGET_S`` or 3 s).
        repeats: timed calls per candidate (median).
        refresh: forget the cached timings of this shape and time again.
        measure: replacement timing function ``variant -> (seconds, setup_seconds[, runner])`` (tests).
    """
    n = check_ring_degree(n)
    c = Constraints(method, reduction, None if split is None else tuple(split), bp)
    mode = planning_mode(planning)
    backend = jax.default_backend()
    if c.complete:
        return PlanChoice(make_variant(c.method, c.reduction, n, c), "forced")
    if mode == "off":
        default_method, default_reduction = constrained_default(backend, c)
        return PlanChoice(make_variant(c.method or default_method, c.reduction or default_reduction, n, c), "static")
    shape = timed_shape(n, moduli)
    key = cache.entry_key(shape)
    memo_key = (cache.cache_path(), key, c)
    if not refresh and measure is None and memo_key in _memo:
        return _memo[memo_key]
    entry = {} if refresh else _checked_entry(cache.lookup(key))
    entry["shape"] = shape
    if measure is None:
        qs = timing_moduli(shape, moduli)

        def measure(v: NTTVariant) -> tuple:
            return measure_variant(v, n, qs, repeats=repeats)

    timed = search(c, n, backend, entry, measure, planning_budget(budget_s), repeats)
    if timed or refresh:
        cache.store(key, entry)
    best = _best(entry, c)
    if best is None:  # every candidate failed: fall back to the static choice, which make_plan will check
        default_method, default_reduction = constrained_default(backend, c)
        best = make_variant(c.method or default_method, c.reduction or default_reduction, n, c)
    timings = {label: rec["seconds"] for label, rec in entry["timings"].items()
               if c.allows(NTTVariant.from_json(rec["variant"]))}
    skipped = dict(entry.get("skipped", {}), **entry.get("failed", {}))
    choice = PlanChoice(best, "measured" if timed else "cache", shape, timings, skipped)
    _memo[memo_key] = choice
    return choice


__all__ = ["PlanChoice", "plan_ntt", "planning_mode", "planning_budget", "timed_shape", "measure_variant",
           "prepare_variant", "duel", "search", "clear_memo", "MODES", "DEFAULT_BUDGET_S"]
