"""MaxPool2D: the max of sliding windows; encrypted as separable comparisons ``max(a, b) = b + relu(a - b)``."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ParameterError, ShapeError
from hemx.nn import packing
from hemx.nn import steps as ops
from hemx.nn.layers.base import LayerRule, pooled_shape, windows
from hemx.nn.layers.lowering import relu_steps
from hemx.nn.steps import Step


@dataclasses.dataclass(frozen=True, eq=False)
class MaxPool2D:
    """Max over ``window x window`` patches every ``stride`` pixels, no padding (encrypted: by a sign approximation)."""

    window: int
    stride: int


def reference(layer: MaxPool2D, xs) -> np.ndarray:
    """xs[0]: (B, C, H, W) -> (B, C, H', W'), the exact max."""
    return windows(xs[0], layer.window, layer.stride, np.max)


def lower(p, node, ins, lay) -> None:
    if lay.grid is None:
        raise ShapeError("needs an image (C, H, W) input")
    if node.inputs[0] not in p.c.bounds:
        raise ParameterError("MaxPool2D needs calibration data (compile(..., calibration=x_batch)): "
                             "each comparison is a ReLU of a difference, scaled by its bound")
    _maxpool_steps(p, node.name, ins[0], node.name, lay, node.layer, p.c.bounds[node.inputs[0]])


def _maxpool_steps(p, node: str, x: str, out: str, lay: packing.Layout, layer: MaxPool2D, b_in: float) -> None:
    """Max over ``window x window`` patches: separable, along rows then columns, each a chain of
    ``max(a, rot(a, k)) = rot(a, k) + relu(a - rot(a, k))`` with overlapping doubling shifts (``ceil(log2 w)``
    comparisons per axis); the result sits at the stride's grid points (a gap ``g * stride`` layout, other slots
    unclean). Differences are bounded by ``2 B``; each comparison's ReLU is scaled by ``1 / (2 F B)`` (``F``:
    ``c.relu_domain``), so inputs up to ``F B`` compare right."""
    c, h, w = lay.shape
    window, stride = layer.window, layer.stride
    ho, wo = (h - window) // stride + 1, (w - window) // stride + 1
    out_lay = packing.conv_output_layout(lay, c, (ho, wo), stride).replace(clean=False)
    work = lay.replace(clean=False)
    g, wg = lay.gap, lay.grid[1]
    cur = x
    chain = []
    for axis, unit in (("row", g), ("col", g * wg)):
        cover = 1
        while cover < window:
            shift = min(cover, window - cover)
            chain.append((axis, cover, unit * shift))
            cover += shift
    for n, (axis, cover, k) in enumerate(chain):
        prefix = f"{node}/{axis}{cover}"
        rot = f"{prefix}/rot"
        p.add(Step(ops.Rotate(k), node, (cur,), rot, work, rotations=(k,), key_switches=lay.num_cts,
                   ciphertexts=lay.num_cts, note=f"shift {k}"), b_in)
        diff = f"{prefix}/diff"
        p.add(Step(ops.Sub(), node, (cur, rot), diff, work, ciphertexts=lay.num_cts), 2.0 * b_in)
        relu = f"{prefix}/relu"
        relu_steps(p, node, prefix, diff, relu, work, work, 2.0 * b_in * p.c.relu_domain, 2.0 * b_in)
        last = n == len(chain) - 1
        nxt = out if last else f"{prefix}/max"
        p.add(Step(ops.Add(), node, (rot, relu), nxt, out_lay if last else work, ciphertexts=lay.num_cts,
                   note="max(a, b) = b + relu(a - b)"), b_in)
        cur = nxt


RULE = LayerRule(MaxPool2D, 1, pooled_shape, reference, lower, ("MaxPool2D",))
