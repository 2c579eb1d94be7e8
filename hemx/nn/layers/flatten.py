"""Flatten: an image read as a vector, channel-first; encrypted, the same slots read as a vector (no step cost)."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ShapeError
from hemx.nn import packing
from hemx.nn import steps as ops
from hemx.nn.layers.base import LayerRule, image_input
from hemx.nn.steps import Step


@dataclasses.dataclass(frozen=True, eq=False)
class Flatten:
    """``(C, H, W) -> (C*H*W,)`` in channel-first (C-contiguous) order."""


def shape(layer: Flatten, ins, where: str) -> tuple[int, ...]:
    c, h, w = image_input(ins[0], where)
    return (c * h * w,)


def reference(layer: Flatten, xs) -> np.ndarray:
    """xs[0]: (B, C, H, W) -> (B, C*H*W)."""
    return xs[0].reshape(xs[0].shape[0], -1)


def lower(p, node, ins, lay) -> None:
    if lay.grid is None:
        raise ShapeError(f"node {node.name!r} (Flatten) needs an image input")
    flat = packing.Layout((int(np.prod(lay.shape)),), lay.slots, lay.positions.reshape(-1), lay.num_cts, None, 1,
                          lay.clean)
    p.add(Step(ops.Flatten(), node.name, tuple(ins), node.name, flat, ciphertexts=lay.num_cts),
          p.c.bounds.get(node.name))


RULE = LayerRule(Flatten, 1, shape, reference, lower, ("Flatten",))
