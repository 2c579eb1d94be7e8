"""AvgPool2D: the mean of sliding windows, lowered to one packed diagonal map (one level)."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.nn import packing
from hemx.nn.layers.base import LayerRule, pooled_shape, windows
from hemx.nn.layers.lowering import linear_step


@dataclasses.dataclass(frozen=True, eq=False)
class AvgPool2D:
    """Average over ``window x window`` patches every ``stride`` pixels, no padding."""

    window: int
    stride: int


def reference(layer: AvgPool2D, xs) -> np.ndarray:
    """xs[0]: (B, C, H, W) -> (B, C, H', W')."""
    return windows(xs[0], layer.window, layer.stride, np.mean)


def lower(p, node, ins, lay) -> None:
    linear_step(p, node, ins, packing.avgpool_map(lay, node.layer.window, node.layer.stride,
                                                  bsgs_ratio=p.c.bsgs_ratio))


RULE = LayerRule(AvgPool2D, 1, pooled_shape, reference, lower, ("AvgPool2D",))
