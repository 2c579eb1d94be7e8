"""Dense: a matrix product plus bias, lowered to one packed diagonal map (one level)."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ShapeError
from hemx.nn import packing
from hemx.nn.layers.base import LayerRule, frozen_array
from hemx.nn.layers.lowering import linear_step


@dataclasses.dataclass(frozen=True, eq=False)
class Dense:
    """``y = weight @ x + bias``; ``weight``: ``(F_out, F_in)``, ``bias``: ``(F_out,)`` or None."""

    weight: np.ndarray
    bias: np.ndarray | None = None

    def __post_init__(self):
        object.__setattr__(self, "weight", frozen_array(self.weight, "Dense weight", 2))
        if self.bias is not None:
            object.__setattr__(self, "bias", frozen_array(self.bias, "Dense bias", 1))
            if self.bias.shape[0] != self.weight.shape[0]:
                raise ShapeError(f"Dense bias has {self.bias.shape[0]} entries for {self.weight.shape[0]} outputs")


def shape(layer: Dense, ins, where: str) -> tuple[int, ...]:
    x = ins[0]
    if len(x) != 1 or x[0] != layer.weight.shape[1]:
        raise ShapeError(f"{where}: weight expects ({layer.weight.shape[1]},), input is {x}")
    return (layer.weight.shape[0],)


def reference(layer: Dense, xs) -> np.ndarray:
    """xs[0]: (B, F_in) -> (B, F_out)."""
    y = xs[0] @ layer.weight.T
    return y + layer.bias[None, :] if layer.bias is not None else y


def lower(p, node, ins, lay) -> None:
    linear_step(p, node, ins, packing.dense_map(lay, node.layer.weight, node.layer.bias, bsgs_ratio=p.c.bsgs_ratio))


RULE = LayerRule(Dense, 1, shape, reference, lower, ("Dense",))
