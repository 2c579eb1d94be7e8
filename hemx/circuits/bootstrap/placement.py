"""Where to bootstrap on a level chain: the lazy rule, the one decision every planner that places bootstraps makes.

A value at level ``l`` read by a step that needs ``n`` levels of it is bootstrapped right before that step when
``l < n``, and not earlier (:func:`bootstrap_before`). Every bootstrap returns the same level, so along a chain
(each step reads the previous step's result) the lazy rule places the fewest bootstraps: it bootstraps only when it
must, and until its next bootstrap its level is at least that of any other placement with as many bootstraps so far
(:func:`chain_bootstraps`). ``hemx.nn``'s bootstrap pass applies the rule to every input of every step of a
network (and looks ahead for the branches, where bootstrapping early can serve several readers); the
bootstrapped logistic-regression training applies it to its state, a chain of iterations.

Pure functions of integers: no parameters, no context.
"""

from __future__ import annotations

import operator
from typing import Sequence

from hemx.errors import LevelError, ParameterError

NO_BOOTSTRAP_ADVICE = "use more levels or a boot_* preset (hemx.CKKSParameters.preset('boot_16'))"


def _level(name: str, value) -> int:
    try:
        out = operator.index(value)
    except TypeError:
        out = -1
    if isinstance(value, bool) or out < 0:
        raise ParameterError(f"{name} must be a non-negative integer, got {value!r}")
    return out


def bootstrap_before(level: int, need: int, *, output_level: int | None, what: str = "the step",
                     value: str = "its input", advice: str = "use parameters with more levels after bootstrapping"
                     ) -> bool:
    """Whether a value at ``level`` is bootstrapped right before a step that needs ``need`` of its levels.

    Args:
        level: the value's level; need: the levels the step needs of it.
        output_level: the level a bootstrap returns (None: the parameters cannot bootstrap).
        what, value: the step and the value, as the error messages name them; advice: what an error message
            suggests when a bootstrap returns fewer levels than the step needs.

    Returns:
        ``level < need``.

    Raises:
        LevelError: the value must be bootstrapped and cannot be (``output_level`` None), or a bootstrap would not
        give the step enough levels (``output_level < need``).
    """
    level, need = _level("level", level), _level("need", need)
    if level >= need:
        return False
    if output_level is None:
        raise LevelError(f"{what} needs {need} levels, {value} is at level {level}; these parameters cannot "
                         f"bootstrap: {NO_BOOTSTRAP_ADVICE}")
    if _level("output_level", output_level) < need:
        raise LevelError(f"{what} needs {need} levels, more than a bootstrap returns ({output_level}): {advice}")
    return True


def chain_bootstraps(start_level: int, needs: Sequence[int], costs: Sequence[int], *,
                     output_level: int | None) -> tuple[int, ...]:
    """The lazy placement on a chain: the indices of the steps before which the chain's value is bootstrapped.

    Args:
        start_level: the value's level before step 0.
        needs: ``(S,)`` levels step ``i`` needs of its input; costs: ``(S,)`` levels step ``i`` consumes
            (``0 <= costs[i] <= needs[i]``).
        output_level: the level a bootstrap returns (None: the parameters cannot bootstrap).

    Returns:
        the step indices, ascending: the fewest bootstraps that keep every step's need.

    Raises:
        ParameterError: ``needs`` and ``costs`` differ in length, or a cost is negative or above its need;
        LevelError: as :func:`bootstrap_before`, for the first step that cannot get its levels.
    """
    level = _level("start_level", start_level)
    needs, costs = list(needs), list(costs)
    if len(needs) != len(costs):
        raise ParameterError(f"needs and costs must have one entry per step, got {len(needs)} and {len(costs)}")
    placed = []
    for i, (need, cost) in enumerate(zip(needs, costs)):
        need, cost = _level(f"needs[{i}]", need), _level(f"costs[{i}]", cost)
        if cost > need:
            raise ParameterError(f"step {i} consumes {cost} levels but needs only {need}: a step needs at least "
                                 "the levels it consumes")
        if bootstrap_before(level, need, output_level=output_level, what=f"step {i}"):
            placed.append(i)
            level = int(output_level)
        level -= cost
    return tuple(placed)


__all__ = ["bootstrap_before", "chain_bootstraps"]
