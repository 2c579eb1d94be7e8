"""Add: the element-wise sum of two tensors of one shape (residual connections); a level-aligned sum (no level)."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.nn import steps as ops
from hemx.nn.layers.base import LayerRule, same_shapes
from hemx.nn.layers.lowering import second_operand
from hemx.nn.steps import Step


@dataclasses.dataclass(frozen=True, eq=False)
class Add:
    """Element-wise sum of two inputs of one shape (residual connections)."""


def shape(layer: Add, ins, where: str) -> tuple[int, ...]:
    return same_shapes(ins, where)


def reference(layer: Add, xs) -> np.ndarray:
    """xs: two (B, *shape) -> (B, *shape)."""
    return xs[0] + xs[1]


def lower(p, node, ins, lay) -> None:
    other = second_operand(p, node, ins, lay)
    p.add(Step(ops.Add(), node.name, tuple(ins), node.name, lay.replace(clean=lay.clean and other.clean),
               ciphertexts=lay.num_cts), p.c.bounds.get(node.name))


RULE = LayerRule(Add, 2, shape, reference, lower, ("Add",))
