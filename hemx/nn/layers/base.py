"""What every layer module of :mod:`hemx.nn.layers` shares: the :class:`LayerRule` a module registers, and the
small helpers of layer records (frozen float64 weights, pooled sizes, batched values).

A layer type is one module holding its frozen record (a dataclass), its output shape, its float64 reference and
its lowering to packed steps; the module ends with ``RULE = LayerRule(...)`` and :mod:`hemx.nn.layers` lists it
once. This module imports nothing of :mod:`hemx.nn`, so every other module may import it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from hemx.errors import ParameterError, ShapeError


@dataclasses.dataclass(frozen=True)
class LayerRule:
    """One layer type, as the graph, the reference and the ``pack`` pass read it.

    ``layer``: the record class. ``arity``: how many inputs a node of it reads. ``shape(layer, ins, where)``: the
    output shape from the input shapes (``ins``, one tuple per input; ``where`` names the node for errors), raising
    ShapeError on a mismatch. ``reference(layer, xs)``: the float64 output ``(B, *out_shape)`` from the batched
    inputs ``xs`` (one ``(B, *in_shape)`` array per input). ``lower(p, node, ins, lay)``: the packed steps, added to
    the ``pack`` pass's state ``p`` (:class:`hemx.nn.layers.lowering.Lowering`) for ``node`` reading the values
    named ``ins`` whose first has layout ``lay``; None for the Input. ``supported``: how the layer is named in the
    list of layers supported encrypted (``"Activation('relu')"``, ...).
    """

    layer: type
    arity: int
    shape: Callable
    reference: Callable
    lower: Callable | None
    supported: tuple[str, ...]


def frozen_array(a, name: str, ndim: int | None = None) -> np.ndarray:
    """``a`` as a read-only float64 copy with ``ndim`` axes (any when None); raises on non-finite values."""
    arr = np.array(a, dtype=np.float64, copy=True)
    if ndim is not None and arr.ndim != ndim:
        raise ShapeError(f"{name} must have {ndim} axes, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ParameterError(f"{name} holds non-finite values")
    arr.setflags(write=False)
    return arr


def pool_out(size: int, window: int, stride: int, where: str) -> int:
    """The output side of a ``window`` / ``stride`` sliding window over a side of ``size`` (no padding)."""
    if window < 1 or stride < 1 or size < window:
        raise ShapeError(f"{where}: window {window} / stride {stride} do not fit a side of {size}")
    return (size - window) // stride + 1


def unchanged_shape(layer, ins, where: str) -> tuple[int, ...]:
    """The output shape of an element-wise layer of one input: its input's."""
    return ins[0]


def pooled_shape(layer, ins, where: str) -> tuple[int, int, int]:
    """The output shape of a pool with ``layer.window`` / ``layer.stride`` over the image ``ins[0]``."""
    c, h, w = image_input(ins[0], where)
    return (c, pool_out(h, layer.window, layer.stride, where), pool_out(w, layer.window, layer.stride, where))


def image_input(x: tuple[int, ...], where: str) -> tuple[int, int, int]:
    """``x`` when it is an image shape ``(C, H, W)``, else a ShapeError."""
    if len(x) != 3:
        raise ShapeError(f"{where} needs a (C, H, W) input, got {x}")
    return x


def same_shapes(ins: list[tuple[int, ...]], where: str) -> tuple[int, ...]:
    """The common shape of two inputs of an element-wise layer, else a ShapeError."""
    if ins[0] != ins[1]:
        raise ShapeError(f"{where}: inputs of shapes {ins[0]} and {ins[1]}")
    return ins[0]


def windows(x: np.ndarray, window: int, stride: int, reduce) -> np.ndarray:
    """``reduce`` over the ``window x window`` patches of ``x`` ``(B, C, H, W)`` every ``stride`` pixels."""
    ho = (x.shape[2] - window) // stride + 1
    wo = (x.shape[3] - window) // stride + 1
    patches = [x[:, :, dy:dy + stride * (ho - 1) + 1:stride, dx:dx + stride * (wo - 1) + 1:stride]
               for dy in range(window) for dx in range(window)]
    return reduce(np.stack(patches), axis=0)


def batched(x, shape: tuple[int, ...], what: str) -> tuple[np.ndarray, bool]:
    """``x`` of ``shape`` or ``(B, *shape)`` as float64 ``(B, *shape)``, and whether it came without the batch axis."""
    x = np.asarray(x, dtype=np.float64)
    single = x.shape == tuple(shape)
    if single:
        x = x[None]
    if x.shape[1:] != tuple(shape):
        raise ShapeError(f"values of shape {x.shape} for {what} of shape {tuple(shape)} (or (B, *{tuple(shape)}))")
    return x, single


__all__ = ["LayerRule", "frozen_array", "pool_out", "unchanged_shape", "pooled_shape", "image_input", "same_shapes",
           "windows", "batched"]
