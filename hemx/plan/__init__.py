"""The planner: choose among hemx's exact kernel variants per machine and shape, and remember the choice.

Like FFTW's planner and wisdom: every variant gives bit-identical results, so the choice is only about speed.
:func:`plan_ntt` picks the NTT method, split, chunk width and reduction of a ring by timing them once (or from
static defaults when planning is off) and caches the timings in the user's cache directory;
:func:`choose_dataflow` picks the key-switching dataflow from a working-set estimate and a memory budget;
:func:`plan_matrix_engine` whether the native kernels run their basis conversions on the CPU's AMX tiles.
``hemx.Context`` calls them for every choice its caller did not force. See ``docs/plan.md``.
"""

from hemx.plan.cache import PlanCacheWarning, cache_path, reset as reset_cache
from hemx.plan.engine import EngineChoice, plan_matrix_engine
from hemx.plan.planner import (
    DEFAULT_BUDGET_S,
    MODES,
    PlanChoice,
    clear_memo,
    measure_variant,
    plan_ntt,
    planning_budget,
    planning_mode,
    timed_shape,
)
from hemx.plan.variants import (
    DATAFLOWS,
    STATIC_DEFAULTS,
    Constraints,
    NTTVariant,
    choose_dataflow,
    keyswitch_working_set,
    static_default,
)

__all__ = [
    "plan_ntt", "PlanChoice", "plan_matrix_engine", "EngineChoice", "NTTVariant", "Constraints", "choose_dataflow", "keyswitch_working_set",
    "planning_mode", "planning_budget", "timed_shape", "measure_variant", "static_default", "clear_memo",
    "cache_path", "reset_cache", "PlanCacheWarning", "MODES", "DATAFLOWS", "STATIC_DEFAULTS", "DEFAULT_BUDGET_S",
]
