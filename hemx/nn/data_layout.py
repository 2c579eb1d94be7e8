"""The data layout of a network's image input: ``"NCHW"`` (channel first, as PyTorch and ONNX models take images)
or ``"NHWC"`` (channel last, as JAX / Flax and Keras models take them).

Inside :mod:`hemx.nn` an image is channel-first ``(C, H, W)`` (the IR, its packing and its reference). A
:class:`~hemx.nn.graph.Graph` records the layout of the model it came from (:attr:`Graph.data_layout
<hemx.nn.graph.Graph.data_layout>`: NHWC from :func:`~hemx.nn.from_jax` and :func:`~hemx.nn.from_keras_h5`, NCHW
from :func:`~hemx.nn.from_onnx` and, by default, for a hand-built graph), and every function that takes the
network's input (:func:`~hemx.nn.reference`, ``compile(calibration=...)``, ``CompiledNetwork.encrypt_input`` /
``pack_input``, :func:`~hemx.nn.infer.infer`) takes it in that layout and transposes it once, with
:func:`to_channel_first`. The layout cannot be told from an array's shape when ``C == H == W`` (8 channels on 8x8
images): it is the model's own, never guessed. Vectors ``(F,)`` (and sequences, flattened) have no layout.
"""

from __future__ import annotations

import numpy as np

from hemx.errors import ParameterError, ShapeError

#: the layouts an image input can have
LAYOUTS = ("NCHW", "NHWC")


def check_layout(layout) -> str:
    """``layout`` checked: one of :data:`LAYOUTS`."""
    if layout not in LAYOUTS:
        raise ParameterError(f"a data layout is 'NCHW' (channel first: PyTorch, ONNX) or 'NHWC' (channel last: JAX, "
                             f"Keras), got {layout!r}")
    return layout


def model_shape(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    """The shape of one input in ``layout`` for the channel-first ``shape``: ``(C, H, W)`` -> ``(H, W, C)`` for
    NHWC; vectors and NCHW images unchanged."""
    shape = tuple(int(d) for d in shape)
    if len(shape) == 3 and check_layout(layout) == "NHWC":
        return shape[1], shape[2], shape[0]
    return shape


def to_channel_first(x, shape: tuple[int, ...], layout: str, *, what: str = "the input") -> tuple[np.ndarray, bool]:
    """A network input in ``layout`` -> float64 channel-first ``(B, *shape)``, and whether it came as one input.

    ``x``: one input (:func:`model_shape` of ``shape``) or a batch of them; ``shape``: the channel-first input
    shape (``(C, H, W)`` or ``(F,)``). Any other shape raises :class:`~hemx.errors.ShapeError` naming the layout
    expected and, when the array would fit with its channel axis moved, the transpose that moves it.
    """
    want = model_shape(shape, layout)
    x = np.asarray(x, dtype=np.float64)
    single = x.shape == want
    if single:
        x = x[None]
    if x.shape[1:] != want:
        raise ShapeError(_mismatch(x.shape, tuple(shape), layout, what))
    if len(want) == 3 and layout == "NHWC":
        x = x.transpose(0, 3, 1, 2)
    return x, single


def to_layout(x, layout: str) -> np.ndarray:
    """Channel-first images ``(B, C, H, W)`` (or one ``(C, H, W)``) -> the same images in ``layout`` (for data
    held channel-first, e.g. a dataset, fed to an NHWC model); anything else is returned as it is."""
    x = np.asarray(x)
    if check_layout(layout) == "NHWC" and x.ndim in (3, 4):
        return np.moveaxis(x, -3, -1)
    return x


def _mismatch(got: tuple[int, ...], shape: tuple[int, ...], layout: str, what: str) -> str:
    """The message for an input of shape ``got`` that does not fit ``shape`` (channel-first) in ``layout``."""
    want = model_shape(shape, layout)
    if len(shape) != 3:
        return f"{what}: got shape {got} for a network expecting vectors (B, {shape[0]}) or one ({shape[0]},)"
    axes = "(B, H, W, C)" if layout == "NHWC" else "(B, C, H, W)"
    dims = ", ".join(str(d) for d in want)
    msg = f"{what}: got shape {got} for an {layout} model expecting {axes} = (B, {dims}) or one image {want}"
    other = model_shape(shape, "NHWC" if layout == "NCHW" else "NCHW")
    if len(got) in (3, 4) and tuple(got[-3:]) == other:
        batch = len(got) == 4
        if layout == "NHWC":
            move, perm = "last", (0, 2, 3, 1) if batch else (1, 2, 0)
        else:
            move, perm = "first", (0, 3, 1, 2) if batch else (2, 0, 1)
        msg += f": move the channel axis {move} (x.transpose{perm})"
    return msg


__all__ = ["LAYOUTS", "check_layout", "model_shape", "to_channel_first", "to_layout"]
