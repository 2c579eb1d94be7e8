"""GlobalAvgPool: the mean of each channel, lowered to a mask and a rotate-and-sum (one level)."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.nn import packing
from hemx.nn import steps as ops
from hemx.nn.layers.base import LayerRule, image_input
from hemx.nn.steps import Step


@dataclasses.dataclass(frozen=True, eq=False)
class GlobalAvgPool:
    """``(C, H, W) -> (C,)``: the mean of each channel."""


def shape(layer: GlobalAvgPool, ins, where: str) -> tuple[int, ...]:
    return (image_input(ins[0], where)[0],)


def reference(layer: GlobalAvgPool, xs) -> np.ndarray:
    """xs[0]: (B, C, H, W) -> (B, C)."""
    return xs[0].mean(axis=(2, 3))


def lower(p, node, ins, lay) -> None:
    packed = packing.GlobalAvgPoolOp(lay)
    p.add(Step(ops.Linear(packed, kind="gap"), node.name, tuple(ins), node.name, packed.out_layout, 1,
               rotations=packed.rotations, key_switches=packed.key_switches, plaintext_mults=packed.plaintext_mults,
               ciphertexts=lay.num_cts), p.c.bounds.get(node.name))


RULE = LayerRule(GlobalAvgPool, 1, shape, reference, lower, ("GlobalAvgPool",))
