"""Conv2D: a 2-D cross-correlation, lowered to one packed diagonal map (one level)."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ParameterError, ShapeError
from hemx.nn import packing
from hemx.nn.layers.base import LayerRule, frozen_array, image_input, pool_out
from hemx.nn.layers.lowering import linear_step


@dataclasses.dataclass(frozen=True, eq=False)
class Conv2D:
    """2-D cross-correlation (as ``jax.lax.conv_general_dilated``), one input.

    ``weight``: ``(C_out, C_in, KH, KW)``; ``bias``: ``(C_out,)`` or None; ``stride``: 1 or 2 (both axes);
    ``padding``: ``((top, bottom), (left, right))`` zero padding.
    """

    weight: np.ndarray
    bias: np.ndarray | None = None
    stride: int = 1
    padding: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0))

    def __post_init__(self):
        object.__setattr__(self, "weight", frozen_array(self.weight, "Conv2D weight", 4))
        if self.bias is not None:
            object.__setattr__(self, "bias", frozen_array(self.bias, "Conv2D bias", 1))
            if self.bias.shape[0] != self.weight.shape[0]:
                raise ShapeError(f"Conv2D bias has {self.bias.shape[0]} entries for {self.weight.shape[0]} channels")
        if int(self.stride) not in (1, 2):
            raise ParameterError(f"Conv2D stride must be 1 or 2, got {self.stride}")
        object.__setattr__(self, "stride", int(self.stride))
        try:
            (t, b), (l, r) = self.padding
            pad = ((int(t), int(b)), (int(l), int(r)))
        except (TypeError, ValueError):
            raise ShapeError(f"Conv2D padding must be ((top, bottom), (left, right)), got {self.padding!r}") from None
        if min(pad[0] + pad[1]) < 0:
            raise ShapeError(f"Conv2D padding must be non-negative, got {pad}")
        object.__setattr__(self, "padding", pad)


def shape(layer: Conv2D, ins, where: str) -> tuple[int, ...]:
    x = image_input(ins[0], where)
    c_out, c_in, kh, kw = layer.weight.shape
    if x[0] != c_in:
        raise ShapeError(f"{where}: weight expects {c_in} input channels, input has {x[0]}")
    (t, b), (l, r) = layer.padding
    h, w = x[1] + t + b, x[2] + l + r
    return (c_out, pool_out(h, kh, layer.stride, where), pool_out(w, kw, layer.stride, where))


def reference(layer: Conv2D, xs) -> np.ndarray:
    """xs[0]: (B, C_in, H, W) -> (B, C_out, H', W')."""
    (t, b), (l, r) = layer.padding
    x = np.pad(xs[0], ((0, 0), (0, 0), (t, b), (l, r)))
    c_out, c_in, kh, kw = layer.weight.shape
    s = layer.stride
    ho = (x.shape[2] - kh) // s + 1
    wo = (x.shape[3] - kw) // s + 1
    out = np.zeros((x.shape[0], c_out, ho, wo))
    for dy in range(kh):
        for dx in range(kw):
            patch = x[:, :, dy:dy + s * (ho - 1) + 1:s, dx:dx + s * (wo - 1) + 1:s]
            out += np.einsum("bchw,oc->bohw", patch, layer.weight[:, :, dy, dx])
    if layer.bias is not None:
        out += layer.bias[None, :, None, None]
    return out


def lower(p, node, ins, lay) -> None:
    layer = node.layer
    linear_step(p, node, ins, packing.conv_map(lay, layer.weight, layer.bias, layer.stride, layer.padding,
                                               bsgs_ratio=p.c.bsgs_ratio))


RULE = LayerRule(Conv2D, 1, shape, reference, lower, ("Conv2D",))
