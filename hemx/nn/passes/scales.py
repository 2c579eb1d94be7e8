"""Pass ``scales``: the scale every ReLU runs at, the range analysis, and the products of every polynomial.

* A ReLU's scaling ``x / B``, its sign stages and ``s'`` run at the scale ``T`` = the rescale divisor of its
  product's level, so that ``x * s'`` (``x`` at the context's scale ``S``) lands exactly on ``S`` after its
  rescale; every stage has input and output at ``T``, so no stage needs a normalizing product (the depths the levels
  pass planned hold, which is checked).
* With parameters, every value's calibrated bound times its scale must stay within half the modulus of its level
  (before its rescale: both sides times that level's primes), or :class:`~hemx.errors.OverflowBoundError` says
  what to change.
* ``ct_mults`` of a polynomial: its ciphertext products at its level and scale, counted on a simulator.
"""

from __future__ import annotations

import dataclasses
import math

from hemx.errors import LevelError, OverflowBoundError
from hemx.nn import steps as ops
from hemx.nn.passes.ir import Compilation


def scales(c: Compilation) -> Compilation:
    """``c.steps`` (copies) with the ReLUs' ``scale_target`` and the polynomials' ``ct_mults``; raises
    OverflowBoundError where a value does not fit its level's modulus."""
    steps = [dataclasses.replace(s) for s in c.steps]
    scale, params = c.target.scale, c.target.params
    for step in steps:
        if isinstance(step.op, ops.Mul):
            target = c.target.divisor(step.level_in)
            for other in steps:
                if other.group is not None and other.group == step.group and isinstance(other.op,
                                                                                          (ops.Affine, ops.Poly)):
                    other.scale_target = target
    if params is not None:
        for step in steps:
            b = c.value_bound.get(step.output.split("@")[0])
            s_out = step.scale_target if isinstance(step.op, ops.Poly) and step.scale_target is not None else scale
            if b is None:
                continue
            log_q = sum(math.log2(q) for q in params.moduli[: params.limbs_at_level(step.level_out)])
            need = math.log2(b) + math.log2(s_out)
            if need >= log_q - 1:
                raise OverflowBoundError(
                    f"step {step.output!r}: values up to {b:.4g} (calibrated, margin included) at scale "
                    f"2^{math.log2(s_out):.1f} need 2^{need:.1f}, beyond half the modulus at level {step.level_out} "
                    f"(2^{log_q - 1:.1f}); "
                    "scale the network's values down (an Affine(1/k) input layer, smaller weights) or use "
                    "parameters with a larger base prime")
    for step in steps:
        if isinstance(step.op, ops.Poly):
            s_in = step.scale_target or scale
            if step.op.depth_at(s_in) != step.depth:
                raise LevelError(f"internal: the depth of {step.output!r} changes with its scale")
            step.ct_mults = step.op.products(params, step.level_in, s_in) * step.ciphertexts
    return c.replace(steps=tuple(steps))


__all__ = ["scales"]
