"""The matrix-engine planner: run the native kernels' matrix products on the CPU's AMX tiles only where that was
measured faster here, and bit-exact.

The native library's ``amx`` instruction set is its AVX-512 kernels with the basis conversion (BAT: the products by
the known matrix ``[qhat_i]_{p_j}`` as int8 tile matmuls) on AMX-INT8 tiles. It is never picked by the library
itself; :func:`plan_matrix_engine` picks it, once per process, when

* the native kernels are available, ``HEMX_NATIVE_ISA`` forces nothing, and this CPU runs ``amx`` (AMX-INT8, and
  the kernel granted the tile state);
* planning is on (``HEMX_PLAN`` / ``planning`` not "off"), and
* the conversions of key switching's shapes (a digit of 10 limbs to 30 targets, 10 to 20, uncentered and
  centered) gave the same words as the scalar kernels, and ran faster with the tiles than without, timed here
  (interleaved, median of ``repeats`` rounds; or from the plan cache, where such timings of this machine and
  library build are kept).

Every path gives identical results, so the choice is only about speed; ``hemx info`` and :attr:`EngineChoice`
say what was picked and why. ``docs/kernels.md`` ("The matrix engine") has the design and the figures.
"""

from __future__ import annotations

import dataclasses
import statistics
import time

import numpy as np

from hemx.plan import cache
from hemx.plan.planner import planning_mode

#: The timed conversions: (source limbs, target limbs, centered), at ring degree :data:`TIMED_N`.
TIMED_SHAPES: tuple[tuple[int, int, bool], ...] = ((10, 30, False), (10, 30, True), (10, 20, True))
TIMED_N = 1 << 14
DEFAULT_REPEATS = 7
ENGINE_ISA = "amx"
#: The tiles must win by at least this factor (1.02: 2 % faster) to be chosen.
MIN_SPEEDUP = 1.02


@dataclasses.dataclass(frozen=True)
class EngineChoice:
    """What :func:`plan_matrix_engine` decided.

    Attributes:
        isa: the native instruction set now active ("amx", "avx512", ...; "none" without native kernels).
        source: "forced" (``HEMX_NATIVE_ISA``), "unavailable" (no native kernels, or no AMX here), "static"
            (planning off), "cache" or "measured".
        timings: ``{isa: seconds}`` of the timed conversions (all shapes together), when timed or cached.
        reason: one line saying why.
    """

    isa: str
    source: str
    timings: dict = dataclasses.field(default_factory=dict)
    reason: str = ""

    def describe(self) -> str:
        times = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in sorted(self.timings.items()))
        return f"{self.isa} ({self.source}{': ' + times if times else ''}){'; ' + self.reason if self.reason else ''}"


_memo: dict = {}


def clear_memo() -> None:
    """Forget this process's choice (the next :func:`plan_matrix_engine` decides again)."""
    _memo.clear()


def _native():
    from hemx.kernels import native  # noqa: PLC0415 - optional library, loaded once

    return native


def _inputs(rng, n: int, shape: tuple[int, int, bool]):
    import jax.numpy as jnp  # noqa: PLC0415

    from hemx.kernels import bconv as BC  # noqa: PLC0415
    from hemx.nt import ntt_primes  # noqa: PLC0415

    src_count, dst_count, centered = shape
    qs = ntt_primes(28, src_count + dst_count, n)
    plan = BC.make_bconv_plan(qs[:src_count], qs[src_count:], centered=centered)
    x = np.stack([rng.integers(0, q, n) for q in qs[:src_count]]).astype(np.uint32)
    x[:, :3] = np.asarray([[0, q - 1, q // 2] for q in qs[:src_count]], np.uint32)  # edge values
    return jnp.asarray(x), plan


def measure_engines(isas: tuple[str, ...], *, n: int = TIMED_N, repeats: int = DEFAULT_REPEATS,
                    reference: str = "scalar") -> tuple[dict, bool]:
    """Time the conversions of :data:`TIMED_SHAPES` under each of ``isas`` (interleaved rounds, median of the
    per-round sums) and compare every output with the ``reference`` instruction set's. Returns
    ``({isa: seconds}, all_equal)``; the active instruction set is restored."""
    import jax  # noqa: PLC0415

    from hemx.kernels import bconv as BC  # noqa: PLC0415

    native = _native()
    active = native.isa()
    rng = np.random.default_rng(0)
    cases = [_inputs(rng, n, s) for s in TIMED_SHAPES]
    fn = jax.jit(lambda v, p: BC.bconv(v, p, method="native"))
    equal = True
    samples = {isa: [] for isa in isas}
    try:
        for isa in (reference,) + tuple(isas):  # warm-up (compiles once: the ISA is read when the kernel runs)
            native.select_isa(isa)
            outs = [np.asarray(fn(x, p)) for x, p in cases]
            if isa == reference:
                want = outs
            else:
                equal &= all(np.array_equal(a, b) for a, b in zip(outs, want))
        for _ in range(repeats):
            for isa in isas:
                native.select_isa(isa)
                t0 = time.perf_counter()
                for x, p in cases:
                    jax.block_until_ready(fn(x, p))
                samples[isa].append(time.perf_counter() - t0)
    finally:
        native.select_isa(active)
    return {isa: statistics.median(v) for isa, v in samples.items()}, bool(equal)


def plan_matrix_engine(*, planning: str | None = None, refresh: bool = False) -> EngineChoice:
    """Decide, once per process, whether the native kernels run their basis conversions on AMX tiles (module
    docstring), switch the library to that choice and return it. ``refresh``: time again (ignore the memo and the
    plan cache)."""
    native = _native()
    if not native.available():
        return EngineChoice("none", "unavailable", reason=native.reason())
    forced = native.isa_forced()
    if forced:
        return EngineChoice(native.isa(), "forced", reason=forced)
    mode = planning_mode(planning)
    memo_key = (cache.cache_path(), mode)
    if not refresh and memo_key in _memo:
        choice = _memo[memo_key]
        if choice.isa != "none" and native.isa() != choice.isa:
            native.select_isa(choice.isa)  # e.g. after set_isa("auto") handed the choice back
        return choice
    runnable = native.runnable_isas()
    vector = next((isa for isa in runnable if isa != ENGINE_ISA), "scalar")
    if ENGINE_ISA not in runnable:
        why = ("this native library was built without the AMX kernels" if ENGINE_ISA not in native.built_isas()
               else "this CPU has no AMX-INT8 tiles (or the kernel did not grant them to this process)")
        choice = EngineChoice(native.isa(), "unavailable", reason=why)
        _memo[memo_key] = choice
        return choice
    if mode == "off":
        native.select_isa(vector)
        choice = EngineChoice(vector, "static", reason="planning is off: the vector kernels")
        _memo[memo_key] = choice
        return choice
    env = dict(cache.environment_key(), native=native.build_id())
    key = cache.entry_key({"kind": "matrix_engine", "n": TIMED_N, "shapes": [list(s) for s in TIMED_SHAPES]}, env)
    entry = None if refresh else cache.lookup(key)
    source = "cache"
    if not _valid_entry(entry, vector):
        timings, equal = measure_engines((vector, ENGINE_ISA))
        entry = {"timings": timings, "equal": equal}
        cache.store(key, entry)
        source = "measured"
    timings, equal = entry["timings"], entry["equal"]
    speedup = timings[vector] / timings[ENGINE_ISA]
    if not equal:
        pick, why = vector, "the tile conversions differed from the scalar kernels' (a defect: please report it)"
    elif speedup >= MIN_SPEEDUP:
        pick, why = ENGINE_ISA, f"the tiles were {speedup:.2f}x faster than {vector}"
    else:
        pick, why = vector, f"the tiles were not faster ({speedup:.2f}x against {vector})"
    native.select_isa(pick)
    choice = EngineChoice(pick, source, dict(timings), why)
    _memo[memo_key] = choice
    return choice


def _valid_entry(entry, vector: str) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("equal"), bool):
        return False
    t = entry.get("timings")
    return (isinstance(t, dict) and all(isinstance(t.get(k), (int, float)) and t.get(k) > 0
                                        for k in (vector, ENGINE_ISA)))


__all__ = ["EngineChoice", "plan_matrix_engine", "measure_engines", "clear_memo", "TIMED_SHAPES", "TIMED_N",
           "ENGINE_ISA", "MIN_SPEEDUP"]
