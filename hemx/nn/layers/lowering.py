"""What the layers' lowerings share: the ``pack`` pass's state (:class:`Lowering`), one packed linear map as a
step (:func:`linear_step`), and the steps of a ReLU (:func:`relu_steps`, used by the activation and the max pool).

A layer's ``lower(p, node, ins, lay)`` appends its steps with ``p.add(step, bound)``: ``node`` the graph node,
``ins`` the names of its input values, ``lay`` the first input's :class:`~hemx.nn.packing.Layout`
(``p.layouts[name]`` has every value's).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ShapeError
from hemx.nn import activations as acts
from hemx.nn import packing
from hemx.nn import steps as ops
from hemx.nn.steps import Step


@dataclasses.dataclass
class Lowering:
    """The steps so far, the layout and bound of every value, and the compilation the lowerings read
    (``c.bounds``, ``c.bsgs_ratio``, ``c.composite``: a :class:`~hemx.nn.passes.ir.Compilation`)."""

    c: object
    steps: list = dataclasses.field(default_factory=list)
    layouts: dict = dataclasses.field(default_factory=dict)
    value_bound: dict = dataclasses.field(default_factory=dict)

    def add(self, step: Step, bound) -> None:
        self.steps.append(step)
        self.layouts[step.output] = step.layout
        self.value_bound[step.output] = bound


def linear_step(p: Lowering, node, ins, packed, *, out: str | None = None, bound=None) -> None:
    """One step for a packed diagonal map (:class:`~hemx.nn.packing.DiagonalMap`) of ``node``: one level. Its
    output is the value ``node.name`` with the node's calibrated bound, or ``out`` bounded by ``bound`` (a value
    inside a layer of several steps)."""
    if out is None:
        out, bound = node.name, p.c.bounds.get(node.name)
    p.add(Step(ops.Linear(packed, kind="linear"), node.name, tuple(ins), out, packed.out_layout, 1,
               rotations=packed.rotations, key_switches=packed.key_switches, plaintext_mults=packed.plaintext_mults,
               ciphertexts=packed.in_layout.num_cts, note=f"n1={packed.n1}, " + packed.out_layout.describe()),
          bound)


def second_operand(p: Lowering, node, ins, lay: packing.Layout) -> packing.Layout:
    """The layout of the second input of an element-wise layer of two tensors, which must hold its values in the
    same slots as the first (``lay``); else a ShapeError that says how to align them."""
    other = p.layouts[ins[1]]
    if not lay.same_positions(other):
        raise ShapeError(f"node {node.name!r} ({type(node.layer).__name__}): its operands have different slot "
                         f"layouts ({lay.describe()} vs {other.describe()}); both branches must reach the same "
                         "gap/grid (e.g. a strided shortcut conv for a strided main path)")
    return other


def relu_steps(p: Lowering, node: str, prefix: str, x: str, out: str, lay: packing.Layout,
               out_lay: packing.Layout, b_in: float, out_bound) -> None:
    """The steps of ``relu(x) = x * s'(x / B)``: the scaling (its own step, one level, so a bootstrap can fall
    between it and the first stage), the sign stages, the product. ``prefix`` groups them (their scale target)."""
    stages = acts.relu_stages(1.0, p.c.composite)
    prev = f"{prefix}/scaled"
    p.add(Step(ops.Affine(1.0 / b_in, depth=1), node, (x,), prev, lay.replace(clean=False), depth=1,
               ciphertexts=lay.num_cts, group=prefix, note=f"x/{b_in:.3g}"), 1.0)
    partial = np.linspace(-1.0, 1.0, 4097)
    for k, stage in enumerate(stages):
        name = f"{prefix}/sign{k + 1}" if k < len(stages) - 1 else f"{prefix}/half_step"
        partial = np.polynomial.chebyshev.chebval(partial, stage.coeffs)
        p.add(Step(ops.Poly(stage), node, (prev,), name, lay.replace(clean=False), ciphertexts=lay.num_cts,
                   group=prefix, note=f"sign stage {k + 1}, degree {len(stage.coeffs) - 1}"),
              float(np.max(np.abs(partial))) * 1.01)
        prev = name
    p.add(Step(ops.Mul(), node, (x, prev), out, out_lay, depth=1, ciphertexts=lay.num_cts, ct_mults=lay.num_cts,
               group=prefix, note="x * (1 + sign) / 2"), out_bound)


__all__ = ["Lowering", "linear_step", "second_operand", "relu_steps"]
