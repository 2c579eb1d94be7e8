"""Affine: ``x * scale + shift`` with scalars, lowered to one constant product (none for a pure shift)."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.nn import steps as ops
from hemx.nn.layers.base import LayerRule, unchanged_shape
from hemx.nn.steps import Step


@dataclasses.dataclass(frozen=True, eq=False)
class Affine:
    """Element-wise ``y = x * scale + shift`` with scalars (input normalisation such as ``x / 255``)."""

    scale: float = 1.0
    shift: float = 0.0


def reference(layer: Affine, xs) -> np.ndarray:
    """xs[0]: (B, *shape) -> the same shape."""
    return xs[0] * layer.scale + layer.shift


def lower(p, node, ins, lay) -> None:
    layer = node.layer
    depth = 0 if layer.scale == 1.0 else 1
    p.add(Step(ops.Affine(float(layer.scale), float(layer.shift), depth=depth), node.name, tuple(ins), node.name,
               lay, depth=depth, ciphertexts=lay.num_cts, note=f"x*{layer.scale:g}+{layer.shift:g}"),
          p.c.bounds.get(node.name))


RULE = LayerRule(Affine, 1, unchanged_shape, reference, lower, ("Affine",))
