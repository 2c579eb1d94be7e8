"""BatchNorm: a per-channel affine map; folded into the layer before it by the ``fold`` pass, otherwise lowered
to a one-diagonal packed map (one level)."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ShapeError
from hemx.nn import packing
from hemx.nn.layers.base import LayerRule, frozen_array
from hemx.nn.layers.lowering import linear_step


@dataclasses.dataclass(frozen=True, eq=False)
class BatchNorm:
    """Per-channel affine ``y = x * scale + shift`` (inference batch-norm, already reduced); folded by the compiler."""

    scale: np.ndarray
    shift: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "scale", frozen_array(self.scale, "BatchNorm scale", 1))
        object.__setattr__(self, "shift", frozen_array(self.shift, "BatchNorm shift", 1))
        if self.scale.shape != self.shift.shape:
            raise ShapeError(f"BatchNorm scale {self.scale.shape} and shift {self.shift.shape} differ")

    @classmethod
    def from_statistics(cls, *, gamma, beta, mean, var, eps: float) -> "BatchNorm":
        gamma, beta, mean, var = (np.asarray(v, dtype=np.float64) for v in (gamma, beta, mean, var))
        scale = gamma / np.sqrt(var + eps)
        return cls(scale=scale, shift=beta - mean * scale)


def shape(layer: BatchNorm, ins, where: str) -> tuple[int, ...]:
    x = ins[0]
    if layer.scale.shape[0] != x[0]:
        raise ShapeError(f"{where}: {layer.scale.shape[0]} channels for an input of {x[0]}")
    return x


def reference(layer: BatchNorm, xs) -> np.ndarray:
    """xs[0]: (B, C, H, W) or (B, F) -> the same shape."""
    x = xs[0]
    if x.ndim == 4:
        return x * layer.scale[None, :, None, None] + layer.shift[None, :, None, None]
    return x * layer.scale[None, :] + layer.shift[None, :]


def lower(p, node, ins, lay) -> None:
    linear_step(p, node, ins, packing.channel_affine_map(lay, node.layer.scale, node.layer.shift,
                                                         bsgs_ratio=p.c.bsgs_ratio))


RULE = LayerRule(BatchNorm, 1, shape, reference, lower, ("BatchNorm",))
