"""Pass ``bootstraps``: bootstrap placement, and with it the level of every value.

The steps are walked in order with the level of every value. A step whose input has fewer levels left than the
step needs (:mod:`~hemx.nn.passes.levels`) gets that input bootstrapped first (the lazy rule,
:func:`hemx.circuits.bootstrap.placement.bootstrap_before`: as late as possible, optimal for a chain, where each
bootstrap resets to the same level; at a branch the bootstrapped value serves every later reader). Before each
step (but a product) the walk also tries bootstrapping each of its inputs *now* (its other readers then get the
fresh levels too) and keeps that choice when the lazy rule, rolled out over the rest of the network, needs more
bootstraps.

A value whose bound exceeds ``boot_bound`` is multiplied by ``1 / 2^k`` before its bootstrap and by the exact
integer ``2^k`` after, so values keep a level in reserve for that product. A bootstrapped value gets a new name,
``"<value>@bt<k>"``, and its readers read that.
"""

from __future__ import annotations

import dataclasses
import math

from hemx.circuits.bootstrap.placement import bootstrap_before
from hemx.errors import LevelError
from hemx.nn import steps as ops
from hemx.nn.passes.ir import Compilation
from hemx.nn.steps import Step


_ADVICE = "use parameters with more levels after bootstrapping, or a sign composite of smaller degrees (relu=...)"


class _Infeasible(Exception):
    pass


class _Walk:
    """The level of every value along the steps, bootstrapping where the lazy rule (or a forced choice) says."""

    def __init__(self, c: Compilation):
        self.steps = c.steps
        self.boot_level = c.boot_level
        self.boot_bound = c.boot_bound
        self.value_bound = c.value_bound
        self.output_value = c.output_value

    def prescale(self, v: str) -> float:
        b = self.value_bound.get(v)
        if b is None or b <= self.boot_bound:
            return 1.0
        return float(2 ** math.ceil(math.log2(b / self.boot_bound)))

    def reserve(self, v: str | None) -> int:
        if v is None or self.boot_level is None or v == self.output_value:
            return 0
        return 1 if self.prescale(v) > 1.0 else 0

    def can_boot(self, v: str, level: int) -> bool:
        return level >= (1 if self.prescale(v) > 1.0 else 0)

    def step(self, i: int, levels: dict, forced: str | None, on_boot=None) -> int:
        """Apply step i (bootstrapping ``forced`` first, then whatever the lazy rule needs): bootstraps used."""
        used = 0
        step = self.steps[i]

        def boot(v: str) -> None:
            nonlocal used
            if not self.can_boot(v, levels[v]):
                raise _Infeasible(v)
            levels[v] = self.boot_level
            used += 1
            if on_boot:
                on_boot(v)

        if forced is not None:
            boot(forced)
        for v, base, reserved in step.needs:
            if bootstrap_before(levels[v], base + self.reserve(reserved), output_level=self.boot_level,
                                what=f"step {step.output!r} ({step.kind})", value=f"its input {v!r}",
                                advice=_ADVICE):
                boot(v)
        levels[step.output] = self.run_level(step, levels) - step.depth
        if levels[step.output] < 0:
            raise LevelError(f"step {step.output!r} ({step.kind}) needs more levels than its input can have")
        return used

    @staticmethod
    def run_level(step: Step, levels: dict) -> int:
        """The level a step runs at: its inputs' lowest, at most its cap."""
        lin = min(levels[v] for v in step.inputs)
        return lin if step.level_cap is None else min(lin, step.level_cap)

    def rollout(self, i: int, levels: dict, forced: str | None) -> float:
        """Bootstraps the lazy rule uses from step i on (after bootstrapping ``forced``); inf: infeasible."""
        levels = dict(levels)
        total = 0
        try:
            total += self.step(i, levels, forced)
            for k in range(i + 1, len(self.steps)):
                total += self.step(k, levels, None)
        except _Infeasible:
            return math.inf
        return total


def bootstraps(c: Compilation) -> Compilation:
    """``c.steps`` (copies) with ``level_in`` / ``level_out`` set, inputs renamed to bootstrapped values, and a
    bootstrap step (:class:`~hemx.nn.steps.Bootstrap`) before each reader that needs one."""
    walk = _Walk(c)
    boot_level = c.boot_level
    levels: dict[str, int] = {"input": c.input_level}
    current: dict[str, str] = {"input": "input"}
    out: list[Step] = []
    count = 0
    levels_before: dict[str, int] = {}

    def record_boot(v: str) -> None:
        nonlocal count
        f = walk.prescale(v)
        count += 1
        new = f"{v}@bt{count}"
        lay = c.layouts[v]
        out.append(Step(ops.Bootstrap(boot_level, f), v.split("/")[0], (current[v],), new, lay, depth=0,
                        level_in=levels_before[v], level_out=boot_level, ciphertexts=lay.num_cts,
                        note=f"x/{f:g} before, x{f:g} after" if f > 1 else ""))
        current[v] = new
        levels_before[v] = levels[v]

    for i, step in enumerate(c.steps):
        choice = None
        if boot_level is not None and step.op.early_bootstrap:
            best = walk.rollout(i, levels, None)
            for v in dict.fromkeys(step.inputs):
                if levels[v] < boot_level and walk.can_boot(v, levels[v]):
                    alt = walk.rollout(i, levels, v)
                    if alt < best:
                        best, choice = alt, v
        levels_before = dict(levels)
        try:
            walk.step(i, levels, choice, on_boot=record_boot)
        except _Infeasible as e:
            raise LevelError(f"step {step.output!r}: value {e.args[0]!r} must be scaled below {c.boot_bound:g} "
                             "before its bootstrap but has no level left for it: raise boot_bound or add levels"
                             ) from None
        placed = dataclasses.replace(step, inputs=tuple(current[v] for v in step.inputs),
                                     level_in=walk.run_level(step, levels), level_out=levels[step.output])
        current[step.output] = step.output
        out.append(placed)
    return c.replace(steps=tuple(out))


__all__ = ["bootstraps"]
