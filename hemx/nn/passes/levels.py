"""Pass ``levels``: what every step costs in levels and needs from its inputs, before any bootstrap is placed.

* ``depth``: the levels a step consumes (its op's, a polynomial's at the context's scale);
* ``needs``: for each input, the levels it must still hold (a step's depth; a ReLU's last sign stage also the
  level of the product that reads it) and whose bootstrap prescale, if any, needs one more
  (:mod:`~hemx.nn.passes.bootstraps` adds it);
* ``level_cap``: polynomials run only on the levels whose primes are within ``2^0.5`` of the scale (``poly_cap``;
  their input is dropped there). The ``boot_*`` presets' levels above the bootstrap's output hold 26- and 30-bit
  primes sized for the bootstrap circuit, and powers computed there drift away from the scale (``r^(2^k)``) until
  their constants lose precision; linear layers keep exact scales at any level, so they still use those levels.
"""

from __future__ import annotations

import dataclasses
import math

from hemx.nn.passes.ir import Compilation, Target


def poly_cap(target: Target) -> int | None:
    """The highest level up to which every level's primes are within 2^0.5 of the scale (None: all of them)."""
    if target.params is None:
        return None
    for level in range(1, target.params.max_level + 1):
        if abs(math.log2(target.divisor(level) / target.scale)) > 0.5:
            return level - 1
    return None


def levels(c: Compilation) -> Compilation:
    """``c.steps`` (copies) with ``depth``, ``needs`` and ``level_cap`` set; ``c.poly_cap``."""
    cap = poly_cap(c.target)
    steps = [dataclasses.replace(s) for s in c.steps]
    for step in steps:
        step.depth = step.op.depth_at(c.target.scale)
        step.level_cap = cap if step.op.scale_exact else None
    for i, step in enumerate(steps):
        step.needs = step.op.needs(step, steps[i + 1] if i + 1 < len(steps) else None)
    return c.replace(steps=tuple(steps), poly_cap=cap)


__all__ = ["levels", "poly_cap"]
