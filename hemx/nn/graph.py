"""The network IR of :mod:`hemx.nn`: a small, typed graph of layers, and its float64 reference.

Every front end (a traced JAX function, Keras ``.h5`` weights, the ready models) produces a :class:`Graph`; the
compiler (packing, level and bootstrap planning) consumes one. Tensors are channel-first without a batch axis:
an image is ``(C, H, W)``, a vector ``(F,)``. Front ends convert from NHWC.

A graph is a tuple of :class:`Node` in topological order; each node names its inputs by node name. The first node
is the :class:`Input`; the last node is the output. Weights are float64 numpy arrays, copied and made read-only.

:func:`reference` evaluates a graph in float64 with exact ReLU and max, on a batch ``(B, *input_shape)``: the
ground truth every packing, simulator and encrypted run is compared against. :meth:`Graph.shapes` infers every
node's output shape and raises :class:`~hemx.errors.ShapeError` on a mismatch.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence, Union

import numpy as np

from hemx.errors import ParameterError, ShapeError


def _frozen_array(a, name: str, ndim: int | None = None) -> np.ndarray:
    arr = np.array(a, dtype=np.float64, copy=True)
    if ndim is not None and arr.ndim != ndim:
        raise ShapeError(f"{name} must have {ndim} axes, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ParameterError(f"{name} holds non-finite values")
    arr.setflags(write=False)
    return arr


def _array_eq(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return a.shape == b.shape and bool(np.array_equal(a, b))


@dataclasses.dataclass(frozen=True, eq=False)
class Input:
    """The network input. ``shape``: ``(C, H, W)`` or ``(F,)``."""

    shape: tuple[int, ...]

    def __post_init__(self):
        shape = tuple(int(s) for s in self.shape)
        if len(shape) not in (1, 3) or min(shape) < 1:
            raise ShapeError(f"input shape must be (C, H, W) or (F,) with positive sizes, got {self.shape}")
        object.__setattr__(self, "shape", shape)


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
        object.__setattr__(self, "weight", _frozen_array(self.weight, "Conv2D weight", 4))
        if self.bias is not None:
            object.__setattr__(self, "bias", _frozen_array(self.bias, "Conv2D bias", 1))
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


@dataclasses.dataclass(frozen=True, eq=False)
class BatchNorm:
    """Per-channel affine ``y = x * scale + shift`` (inference batch-norm, already reduced); folded by the compiler."""

    scale: np.ndarray
    shift: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "scale", _frozen_array(self.scale, "BatchNorm scale", 1))
        object.__setattr__(self, "shift", _frozen_array(self.shift, "BatchNorm shift", 1))
        if self.scale.shape != self.shift.shape:
            raise ShapeError(f"BatchNorm scale {self.scale.shape} and shift {self.shift.shape} differ")

    @classmethod
    def from_statistics(cls, *, gamma, beta, mean, var, eps: float) -> "BatchNorm":
        gamma, beta, mean, var = (np.asarray(v, dtype=np.float64) for v in (gamma, beta, mean, var))
        scale = gamma / np.sqrt(var + eps)
        return cls(scale=scale, shift=beta - mean * scale)


@dataclasses.dataclass(frozen=True, eq=False)
class AvgPool2D:
    """Average over ``window x window`` patches every ``stride`` pixels, no padding."""

    window: int
    stride: int


@dataclasses.dataclass(frozen=True, eq=False)
class MaxPool2D:
    """Max over ``window x window`` patches every ``stride`` pixels, no padding (encrypted: by a sign approximation)."""

    window: int
    stride: int


@dataclasses.dataclass(frozen=True, eq=False)
class GlobalAvgPool:
    """``(C, H, W) -> (C,)``: the mean of each channel."""


@dataclasses.dataclass(frozen=True, eq=False)
class Flatten:
    """``(C, H, W) -> (C*H*W,)`` in channel-first (C-contiguous) order."""


@dataclasses.dataclass(frozen=True, eq=False)
class Dense:
    """``y = weight @ x + bias``; ``weight``: ``(F_out, F_in)``, ``bias``: ``(F_out,)`` or None."""

    weight: np.ndarray
    bias: np.ndarray | None = None

    def __post_init__(self):
        object.__setattr__(self, "weight", _frozen_array(self.weight, "Dense weight", 2))
        if self.bias is not None:
            object.__setattr__(self, "bias", _frozen_array(self.bias, "Dense bias", 1))
            if self.bias.shape[0] != self.weight.shape[0]:
                raise ShapeError(f"Dense bias has {self.bias.shape[0]} entries for {self.weight.shape[0]} outputs")


@dataclasses.dataclass(frozen=True, eq=False)
class Affine:
    """Element-wise ``y = x * scale + shift`` with scalars (input normalisation such as ``x / 255``)."""

    scale: float = 1.0
    shift: float = 0.0


@dataclasses.dataclass(frozen=True, eq=False)
class Add:
    """Element-wise sum of two inputs of one shape (residual connections)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Activation:
    """An element-wise activation.

    ``kind="relu"``: exact ReLU in the reference; the compiler approximates it (composite minimax sign).
    ``kind="poly"``: the polynomial ``sum(coeffs[k] * x**k)`` (power basis), exact in every backend.
    """

    kind: str
    coeffs: tuple[float, ...] | None = None

    def __post_init__(self):
        if self.kind not in ("relu", "poly"):
            raise ParameterError(f"Activation kind must be 'relu' or 'poly', got {self.kind!r}")
        if self.kind == "poly":
            if not self.coeffs:
                raise ParameterError("a 'poly' activation needs its coefficients")
            object.__setattr__(self, "coeffs", tuple(float(c) for c in self.coeffs))
        elif self.coeffs is not None:
            raise ParameterError("a 'relu' activation takes no coefficients")


Layer = Union[Input, Conv2D, BatchNorm, AvgPool2D, MaxPool2D, GlobalAvgPool, Flatten, Dense, Affine, Add, Activation]
LAYER_TYPES = (Input, Conv2D, BatchNorm, AvgPool2D, MaxPool2D, GlobalAvgPool, Flatten, Dense, Affine, Add, Activation)


@dataclasses.dataclass(frozen=True, eq=False)
class Node:
    """One layer applied to the outputs of the nodes named in ``inputs`` (none for the Input, two for Add)."""

    name: str
    layer: Layer
    inputs: tuple[str, ...] = ()

    def __post_init__(self):
        if not isinstance(self.layer, LAYER_TYPES):
            raise ParameterError(f"node {self.name!r}: {type(self.layer).__name__} is not a hemx.nn layer")
        object.__setattr__(self, "inputs", tuple(self.inputs))
        want = 0 if isinstance(self.layer, Input) else 2 if isinstance(self.layer, Add) else 1
        if len(self.inputs) != want:
            raise ShapeError(f"node {self.name!r} ({type(self.layer).__name__}) takes {want} inputs, "
                             f"got {len(self.inputs)}")


def _pool_out(size: int, window: int, stride: int, what: str) -> int:
    if window < 1 or stride < 1 or size < window:
        raise ShapeError(f"{what}: window {window} / stride {stride} do not fit a side of {size}")
    return (size - window) // stride + 1


def _out_shape(node: Node, ins: list[tuple[int, ...]]) -> tuple[int, ...]:
    layer = node.layer
    where = f"node {node.name!r} ({type(layer).__name__})"
    if isinstance(layer, Input):
        return layer.shape
    x = ins[0]
    if isinstance(layer, (Conv2D, AvgPool2D, MaxPool2D, GlobalAvgPool, Flatten)) and len(x) != 3:
        raise ShapeError(f"{where} needs a (C, H, W) input, got {x}")
    if isinstance(layer, Conv2D):
        c_out, c_in, kh, kw = layer.weight.shape
        if x[0] != c_in:
            raise ShapeError(f"{where}: weight expects {c_in} input channels, input has {x[0]}")
        (t, b), (l, r) = layer.padding
        h, w = x[1] + t + b, x[2] + l + r
        return (c_out, _pool_out(h, kh, layer.stride, where), _pool_out(w, kw, layer.stride, where))
    if isinstance(layer, BatchNorm):
        if layer.scale.shape[0] != x[0]:
            raise ShapeError(f"{where}: {layer.scale.shape[0]} channels for an input of {x[0]}")
        return x
    if isinstance(layer, (AvgPool2D, MaxPool2D)):
        return (x[0], _pool_out(x[1], layer.window, layer.stride, where),
                _pool_out(x[2], layer.window, layer.stride, where))
    if isinstance(layer, GlobalAvgPool):
        return (x[0],)
    if isinstance(layer, Flatten):
        return (x[0] * x[1] * x[2],)
    if isinstance(layer, Dense):
        if len(x) != 1 or x[0] != layer.weight.shape[1]:
            raise ShapeError(f"{where}: weight expects ({layer.weight.shape[1]},), input is {x}")
        return (layer.weight.shape[0],)
    if isinstance(layer, Add):
        if ins[0] != ins[1]:
            raise ShapeError(f"{where}: inputs of shapes {ins[0]} and {ins[1]}")
        return x
    return x  # Affine, Activation


@dataclasses.dataclass(frozen=True, eq=False)
class Graph:
    """A network: nodes in topological order, the first an :class:`Input`, the last the output."""

    nodes: tuple[Node, ...]

    def __post_init__(self):
        nodes = tuple(self.nodes)
        object.__setattr__(self, "nodes", nodes)
        if not nodes or not isinstance(nodes[0].layer, Input):
            raise ShapeError("a graph starts with its Input node")
        seen: set[str] = set()
        for node in nodes:
            if node.name in seen:
                raise ParameterError(f"two nodes are named {node.name!r}")
            if isinstance(node.layer, Input) and node is not nodes[0]:
                raise ShapeError("a graph has exactly one Input node, its first")
            for name in node.inputs:
                if name not in seen:
                    raise ShapeError(f"node {node.name!r} reads {name!r}, which is not an earlier node")
            seen.add(node.name)
        self.shapes()  # validates every shape

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.nodes[0].layer.shape

    @property
    def output(self) -> str:
        return self.nodes[-1].name

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Output shape of every node, by name; raises ShapeError on any mismatch."""
        out: dict[str, tuple[int, ...]] = {}
        for node in self.nodes:
            out[node.name] = _out_shape(node, [out[i] for i in node.inputs])
        return out

    def summary(self) -> str:
        shapes = self.shapes()
        lines = [f"{n.name:<20} {type(n.layer).__name__:<14} {str(n.inputs):<28} -> {shapes[n.name]}"
                 for n in self.nodes]
        return "\n".join(lines)


def sequential(input_shape: Sequence[int], layers: Sequence[Layer]) -> Graph:
    """A chain: ``Input(input_shape)`` then each layer on the previous one's output."""
    nodes = [Node("input", Input(tuple(input_shape)))]
    for i, layer in enumerate(layers):
        nodes.append(Node(f"{type(layer).__name__.lower()}_{i}", layer, (nodes[-1].name,)))
    return Graph(tuple(nodes))


# --- float64 reference ----------------------------------------------------------------------------------------

def _conv(x: np.ndarray, layer: Conv2D) -> np.ndarray:
    """x: (B, C_in, H, W) -> (B, C_out, H', W')."""
    (t, b), (l, r) = layer.padding
    x = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)))
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


def _pool(x: np.ndarray, window: int, stride: int, reduce) -> np.ndarray:
    ho = (x.shape[2] - window) // stride + 1
    wo = (x.shape[3] - window) // stride + 1
    patches = [x[:, :, dy:dy + stride * (ho - 1) + 1:stride, dx:dx + stride * (wo - 1) + 1:stride]
               for dy in range(window) for dx in range(window)]
    return reduce(np.stack(patches), axis=0)


def apply_layer(layer: Layer, xs: list[np.ndarray]) -> np.ndarray:
    """One layer in float64 on batched inputs ``(B, *shape)``."""
    x = xs[0]
    if isinstance(layer, Conv2D):
        return _conv(x, layer)
    if isinstance(layer, BatchNorm):
        return x * layer.scale[None, :, None, None] + layer.shift[None, :, None, None] if x.ndim == 4 \
            else x * layer.scale[None, :] + layer.shift[None, :]
    if isinstance(layer, AvgPool2D):
        return _pool(x, layer.window, layer.stride, np.mean)
    if isinstance(layer, MaxPool2D):
        return _pool(x, layer.window, layer.stride, np.max)
    if isinstance(layer, GlobalAvgPool):
        return x.mean(axis=(2, 3))
    if isinstance(layer, Flatten):
        return x.reshape(x.shape[0], -1)
    if isinstance(layer, Dense):
        y = x @ layer.weight.T
        return y + layer.bias[None, :] if layer.bias is not None else y
    if isinstance(layer, Affine):
        return x * layer.scale + layer.shift
    if isinstance(layer, Add):
        return xs[0] + xs[1]
    if isinstance(layer, Activation):
        if layer.kind == "relu":
            return np.maximum(x, 0.0)
        return np.polynomial.polynomial.polyval(x, np.array(layer.coeffs))
    raise ParameterError(f"no reference for {type(layer).__name__}")


def batched(x, shape: tuple[int, ...], what: str) -> tuple[np.ndarray, bool]:
    """``x`` of ``shape`` or ``(B, *shape)`` as float64 ``(B, *shape)``, and whether it came without the batch axis."""
    x = np.asarray(x, dtype=np.float64)
    single = x.shape == tuple(shape)
    if single:
        x = x[None]
    if x.shape[1:] != tuple(shape):
        raise ShapeError(f"values of shape {x.shape} for {what} of shape {tuple(shape)} (or (B, *{tuple(shape)}))")
    return x, single


def reference(graph: Graph, x, *, keep: bool = False):
    """Evaluate ``graph`` in float64 on ``x``: ``(B, *input_shape)`` (or one unbatched input).

    Returns the output ``(B, *output_shape)``; with ``keep=True`` a dict of every node's output instead.
    """
    x, single = batched(x, graph.input_shape, "a graph's input")
    values: dict[str, np.ndarray] = {}
    for node in graph.nodes:
        values[node.name] = x if isinstance(node.layer, Input) else \
            apply_layer(node.layer, [values[i] for i in node.inputs])
    if keep:
        return {k: (v[0] if single else v) for k, v in values.items()}
    out = values[graph.output]
    return out[0] if single else out
