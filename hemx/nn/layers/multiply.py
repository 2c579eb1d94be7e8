"""Multiply: the element-wise product of two tensors of one shape (the gates of recurrent cells, ``a * b`` of two
activations); encrypted, one ciphertext-ciphertext product per ciphertext (relinearized and rescaled: one level,
the relinearization key), both operands dropped to their common level first."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.nn import steps as ops
from hemx.nn.layers.base import LayerRule, same_shapes
from hemx.nn.layers.lowering import second_operand
from hemx.nn.steps import Step


@dataclasses.dataclass(frozen=True, eq=False)
class Multiply:
    """Element-wise product of two inputs of one shape."""


def shape(layer: Multiply, ins, where: str) -> tuple[int, ...]:
    return same_shapes(ins, where)


def reference(layer: Multiply, xs) -> np.ndarray:
    """xs: two (B, *shape) -> (B, *shape)."""
    return xs[0] * xs[1]


def lower(p, node, ins, lay) -> None:
    other = second_operand(p, node, ins, lay)
    p.add(Step(ops.Mul(), node.name, tuple(ins), node.name, lay.replace(clean=lay.clean or other.clean), depth=1,
               ciphertexts=lay.num_cts, ct_mults=lay.num_cts, note="a * b"), p.c.bounds.get(node.name))


RULE = LayerRule(Multiply, 2, shape, reference, lower, ("Multiply",))
