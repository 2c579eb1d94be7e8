"""The ONNX front end of :mod:`hemx.nn`: an ONNX graph (opset 13 or later) -> :class:`~hemx.nn.graph.Graph`.

Reads the model with the ``onnx`` package only (``pip install 'hemx[onnx]'``; imported when :func:`from_onnx` is
called, so :mod:`hemx` imports without it). The graph takes one NCHW image ``(N, C, H, W)``, one vector batch
``(N, F)`` or one sequence batch ``(N, T, D)`` / ``(T, N, D)`` for an LSTM (below), with the batch dimension
symbolic or fixed and the others fixed; weights are initializers or ``Constant`` nodes, as exporters
(``torch.onnx.export``, tf2onnx, ...) write them.

The importer only pattern-matches ONNX nodes into layers (:data:`SUPPORTED_OPS`); it folds nothing: a
``BatchNormalization`` after a ``Conv`` stays a :class:`BatchNorm` node, folded by the compiler's ``fold`` pass.

* ``Conv`` (2-D, ``group`` 1, dilation 1, equal strides 1 or 2, explicit ``pads`` or ``auto_pad``) ->
  :class:`Conv2D` (its weight is already ``(C_out, C_in, KH, KW)``);
* ``Gemm`` (``transA`` 0; ``alpha`` / ``beta`` applied) and ``MatMul`` with a constant matrix, on a vector ->
  :class:`Dense`; an ``Add`` of a per-feature (per-channel) constant right after a bias-less ``MatMul`` / ``Gemm``
  / ``Conv`` that nothing else reads becomes its bias;
* ``BatchNormalization`` (inference) -> :class:`BatchNorm`; ``Relu`` -> ``Activation("relu")``;
* element-wise arithmetic of one tensor with scalar constants (``Mul``, ``Add``, ``Sub``, ``Div`` by a constant,
  ``Neg``, ``Pow`` by a positive integer, and ``Mul`` / ``Add`` of two expressions of the same tensor) is kept as a
  polynomial of that tensor and becomes one node where something else reads it: ``Activation("poly", coeffs)``
  (``x*x``, ``Pow(x, 2)``, ``0.5*x + x*x/32``, ...), or :class:`Affine` for degree 1 (``a*x + b``, e.g.
  ``x / 255``); ``Mul`` / ``Add`` of a per-channel constant -> :class:`BatchNorm` (scale or shift only);
* ``AveragePool`` / ``MaxPool`` (square window, equal strides, no padding, dilation 1) -> :class:`AvgPool2D` /
  :class:`MaxPool2D`; ``GlobalAveragePool`` -> :class:`GlobalAvgPool` (its ``(N, C, 1, 1)`` output is the IR's
  ``(C,)``);
* ``Flatten`` (axis 1) and ``Reshape`` to ``(N, -1)`` -> :class:`Flatten` (ONNX flattens NCHW channel-first, as
  the IR does; no permutation);
* ``Add`` of two tensors (residuals) -> :class:`Add`; ``Mul`` of two tensors -> :class:`Multiply`;
* ``LSTM`` (forward, one direction, default activations Sigmoid / Tanh / Tanh, no peepholes, clip or
  ``input_forget``, absent or zero initial states and ``sequence_lens`` absent) reading the graph's sequence input
  -> :class:`LSTM` (ONNX's gate order i, o, f, c reordered to the layer's i, f, g, o; ``B``'s two halves summed).
  Only its last hidden state is a tensor: ``Y_h``, or ``Y``'s last time step, reached by ``Squeeze`` (of the
  direction axis), ``Transpose``, ``Gather`` / ``Slice`` of the last time step (as ``torch.onnx.export`` writes
  ``h_n[-1]`` and ``output[:, -1]`` / ``output[-1]``), ending as the ``(N, H)`` vector batch; ``Y_c`` is refused;
* ``Constant`` and ``Identity``; ``Shape`` (its batch entry read as 1: exporters use it to size the zero initial
  states), ``Gather``, ``Unsqueeze``, ``Squeeze``, ``Concat``, ``Slice``, ``Transpose``, ``ConstantOfShape`` on
  constants; any node whose inputs are all constants is evaluated.

A sequence input ``(N, T, D)`` or ``(T, N, D)`` (3-D) feeds one or more LSTMs, directly or through a ``Transpose``
of its first two axes; which of its first two axes is time follows from the LSTM's ``layout`` (0: ``X`` is ``(T, N,
D)``; 1: ``(N, T, D)``) and the transposes. The imported graph's input is then the sequence flattened time-major,
``(T * D,)``: feed it ``x.reshape(N, T * D)`` for ``(N, T, D)`` data and ``x.transpose(1, 0, 2).reshape(N, T * D)``
for ``(T, N, D)`` data.

Any other op, or a supported op with unsupported attributes, raises :class:`~hemx.errors.ParameterError` naming
the op type, the node and the supported ops.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from hemx.errors import ParameterError
from hemx.nn.graph import (
    LSTM, Activation, Add, Affine, AvgPool2D, BatchNorm, Conv2D, Dense, Flatten, GlobalAvgPool, Graph, Input,
    MaxPool2D, Multiply, Node,
)

__all__ = ["from_onnx", "SUPPORTED_OPS", "MIN_OPSET"]

MIN_OPSET = 13

SUPPORTED_OPS = ("Conv", "Gemm", "MatMul", "BatchNormalization", "Relu", "Add", "Sub", "Mul", "Div", "Neg", "Pow",
                 "AveragePool", "GlobalAveragePool", "MaxPool", "Flatten", "Reshape", "Constant", "Identity", "LSTM",
                 "Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Transpose", "ConstantOfShape")
# the ops that rearrange shapes: evaluated on constants, and (Squeeze, Transpose, Gather, Slice, Flatten, Reshape)
# applied to an LSTM's outputs or (Transpose) to the sequence input
_SHAPE_OPS = ("Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Transpose", "ConstantOfShape")

_ID = (0.0, 1.0)  # the polynomial x


# --- symbolic values ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Tensor:
    """A graph node's output. ``shape``: its ONNX shape without the batch axis; ``flat``: its IR shape is a vector
    (``(C, 1, 1)`` after a global pool is the IR's ``(C,)``)."""

    name: str
    shape: tuple[int, ...]
    flat: bool = False


@dataclasses.dataclass(frozen=True)
class _Value:
    """``p(tensor)``: a polynomial with scalar power-basis coefficients ``p`` of a node's output, not yet a node."""

    tensor: _Tensor
    p: tuple[float, ...] = _ID


@dataclasses.dataclass(frozen=True)
class _Seq:
    """The graph's sequence input, ONNX ``dims`` ``(d0, d1, D)`` (``None`` where symbolic; one of ``d0``, ``d1`` is
    the batch, the other time), or a ``Transpose`` of it exchanging the first two axes (``swapped``)."""

    dims: tuple
    swapped: bool = False


@dataclasses.dataclass(frozen=True)
class _Steps:
    """An output of LSTM node ``node`` (``H`` ``hidden``, ``T`` ``steps``), its axes labelled: ``"T"`` the time
    steps, ``"t"`` the last one only (size 1), ``"dir"`` the direction (size 1), ``"B"`` the batch, ``"H"`` the
    hidden units. ``("B", "H")`` is the last hidden state ``(N, H)``, the node's output."""

    node: str
    axes: tuple[str, ...]
    hidden: int
    steps: int

    def size(self, label: str) -> int | None:
        return {"T": self.steps, "t": 1, "dir": 1, "H": self.hidden}.get(label)


def _trim(p) -> tuple[float, ...]:
    p = [float(c) for c in p]
    while len(p) > 1 and p[-1] == 0.0:
        p.pop()
    return tuple(p)


def _poly_add(a, b) -> tuple[float, ...]:
    n = max(len(a), len(b))
    return _trim([(a[i] if i < len(a) else 0.0) + (b[i] if i < len(b) else 0.0) for i in range(n)])


def _poly_mul(a, b) -> tuple[float, ...]:
    out = [0.0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i + j] += x * y
    return _trim(out)


def _batched(shape: tuple[int, ...]) -> str:
    """An ONNX shape without its batch axis, written with it: ``(N, C, H, W)``."""
    return f"(N, {', '.join(map(str, shape))})"


def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


class _Importer:
    def __init__(self, numpy_helper):
        self.numpy_helper = numpy_helper
        self.nodes: list[Node] = []
        self.values: dict[str, object] = {}  # ONNX tensor name -> np.ndarray (constant) or _Value
        self.readers: dict[str, int] = {}  # ONNX tensor name -> how many node inputs (and graph outputs) read it
        self.made: dict[tuple, _Tensor] = {}  # (tensor name, polynomial) -> its node's output
        self.used: set[str] = set()
        self.count: dict[str, int] = {}  # unnamed ONNX nodes per name prefix
        self.onnx_node = None
        self.seq_input: tuple[int, int] | None = None  # (time axis, T) of the sequence input, once an LSTM read it
        self.refused: dict[str, str] = {}  # ONNX tensor name -> why it cannot be read

    # errors and names -------------------------------------------------------------------------------------------
    def where(self) -> str:
        n = self.onnx_node
        return f"node {n.name or '(unnamed)'!r} (op {n.op_type})" if n is not None else "the graph"

    def fail(self, why: str):
        raise ParameterError(f"from_onnx: {self.where()}: {why}. Supported ops: {', '.join(SUPPORTED_OPS)}")

    def add(self, stem: str, layer, inputs: tuple[str, ...]) -> str:
        stem = "".join(ch if ch.isalnum() or ch in "_-./:" else "_" for ch in stem) or "node"
        name, i = stem, 1
        while name in self.used:
            name, i = f"{stem}_{i}", i + 1
        self.used.add(name)
        self.nodes.append(Node(name, layer, inputs))
        return name

    def own_name(self, prefix: str) -> str:
        """The ONNX node's name, or ``<prefix><k>`` for an unnamed one (:meth:`add` makes names unique)."""
        n = self.onnx_node
        if n is not None and n.name:
            return n.name
        k = self.count.get(prefix, 0)
        self.count[prefix] = k + 1
        return f"{prefix}{k}"

    # reading values ---------------------------------------------------------------------------------------------
    def read(self, name: str):
        if name in self.refused:
            self.fail(f"reads {name!r}, {self.refused[name]}")
        if name not in self.values:
            self.fail(f"reads {name!r}, which no earlier node, initializer or graph input produces (is the graph "
                      f"topologically sorted?)")
        return self.values[name]

    def const(self, name: str, what: str) -> np.ndarray:
        v = self.read(name)
        if not isinstance(v, np.ndarray):
            self.fail(f"its {what} ({name!r}) must be a constant (an initializer or a Constant node), not computed "
                      f"from the input")
        return v

    def tensor(self, name: str) -> _Tensor:
        v = self.read(name)
        if isinstance(v, _Seq):
            self.fail(f"reads the sequence input {name!r} (only an LSTM reads it, directly or after a Transpose of "
                      f"its first two axes)")
        if isinstance(v, _Steps):
            self.fail(f"reads {name!r}, an LSTM output of axes {v.axes} (only its last hidden state (N, H) is a "
                      f"tensor: Y_h or Y's last time step, its size-1 axes squeezed)")
        if isinstance(v, np.ndarray):
            self.fail(f"its input {name!r} is a constant where a tensor computed from the graph input is needed")
        return self.materialize(v)

    def materialize(self, v: _Value) -> _Tensor:
        p = _trim(v.p)
        if p == _ID:
            return v.tensor
        key = (v.tensor.name, p)
        if key not in self.made:
            if len(p) == 1:
                self.fail(f"the expression is the constant {p[0]} (it does not depend on the input)")
            layer = Affine(p[1], p[0]) if len(p) == 2 else Activation("poly", p)
            stem = "affine" if len(p) == 2 else "act"
            self.made[key] = dataclasses.replace(v.tensor, name=self.add(f"{v.tensor.name}/{stem}", layer,
                                                                          (v.tensor.name,)))
        return self.made[key]

    def per_channel(self, c: np.ndarray, t: _Tensor) -> np.ndarray | float:
        """A constant combined element-wise with ``t``: a float when it is one scalar, else one value per channel
        (the axis after the batch)."""
        full_shape = (1, *t.shape)
        try:
            if np.broadcast_shapes(c.shape, full_shape) != full_shape:
                raise ValueError
        except ValueError:
            self.fail(f"a constant of shape {c.shape} broadcasts the tensor of shape {_batched(t.shape)}")
        full = np.broadcast_to(c, full_shape)[0]
        if np.all(full == full.flat[0]):
            return float(full.flat[0])
        flat = full.reshape(full.shape[0], -1)
        if not np.all(flat == flat[:, :1]):
            self.fail("a constant that varies over the pixels (only scalars and per-channel constants are layers)")
        return flat[:, 0].copy()

    # element-wise arithmetic ------------------------------------------------------------------------------------
    def scale(self, v: _Value, c: np.ndarray) -> _Value:
        k = self.per_channel(c, v.tensor)
        if isinstance(k, float):
            return _Value(v.tensor, _trim([k * a for a in v.p]))
        t = self.materialize(v)
        return _Value(dataclasses.replace(t, name=self.add(self.own_name("mul"), BatchNorm(k, np.zeros_like(k)),
                                                           (t.name,))))

    def shift(self, v: _Value, c: np.ndarray) -> _Value:
        k = self.per_channel(c, v.tensor)
        if isinstance(k, float):
            return _Value(v.tensor, _poly_add(v.p, (k,)))
        t = self.materialize(v)
        node = next((n for n in self.nodes if n.name == t.name), None)
        layer = node.layer if node is not None else None
        bias_less = isinstance(layer, (Conv2D, Dense)) and layer.bias is None
        if bias_less and self.readers.get(self.tensor_source(t), 0) == 1 and k.shape[0] == layer.weight.shape[0]:
            # MatMul / Gemm / Conv + Add: the shift is the layer's bias
            new = dataclasses.replace(layer, bias=k)
            self.nodes[self.nodes.index(node)] = Node(node.name, new, node.inputs)
            return _Value(t)
        return _Value(dataclasses.replace(t, name=self.add(self.own_name("add"), BatchNorm(np.ones_like(k), k),
                                                           (t.name,))))

    def tensor_source(self, t: _Tensor) -> str | None:
        """The ONNX tensor name whose value is exactly the node output ``t`` (for its reader count)."""
        for name, v in self.values.items():
            if isinstance(v, _Value) and v.tensor == t and _trim(v.p) == _ID:
                return name
        return None

    def add_values(self, a, b, sign: float):
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return a + sign * b
        if isinstance(b, np.ndarray):
            return self.shift(a, sign * b)
        if isinstance(a, np.ndarray):
            return self.shift(_Value(b.tensor, _trim([sign * c for c in b.p])), a)
        if a.tensor == b.tensor:
            return _Value(a.tensor, _poly_add(a.p, [sign * c for c in b.p]))
        if sign < 0:
            b = _Value(b.tensor, _trim([-c for c in b.p]))
        ta, tb = self.materialize(a), self.materialize(b)
        if ta.shape != tb.shape:
            self.fail(f"adds tensors of shapes {ta.shape} and {tb.shape} (only tensors of one shape add)")
        return _Value(dataclasses.replace(ta, name=self.add(self.own_name("add"), Add(), (ta.name, tb.name))))

    def mul_values(self, a, b):
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return a * b
        if isinstance(a, np.ndarray):
            a, b = b, a
        if isinstance(b, np.ndarray):
            return self.scale(a, b)
        if a.tensor == b.tensor:
            return _Value(a.tensor, _poly_mul(a.p, b.p))
        ta, tb = self.materialize(a), self.materialize(b)
        if ta.shape != tb.shape:
            self.fail(f"multiplies tensors of shapes {ta.shape} and {tb.shape} (only tensors of one shape multiply "
                      f"element-wise)")
        return _Value(dataclasses.replace(ta, name=self.add(self.own_name("mul"), Multiply(), (ta.name, tb.name))))

    # layers -------------------------------------------------------------------------------------------------------
    def image(self, name: str) -> _Tensor:
        t = self.tensor(name)
        if len(t.shape) != 3 or t.flat:
            self.fail(f"needs an image (N, C, H, W) input, got {_batched(t.shape)}")
        return t

    def vector(self, name: str) -> _Tensor:
        t = self.tensor(name)
        if len(t.shape) != 1:
            self.fail(f"needs a vector (N, F) input (add a Flatten), got {_batched(t.shape)}")
        return t

    def window(self, attrs: dict, kernel=None) -> tuple[tuple[int, ...], int, tuple[int, ...]]:
        """``(kernel_shape, stride, pads)`` of a 2-D Conv / pool (``kernel``: the conv weight's, when given)."""
        k = tuple(int(v) for v in attrs.get("kernel_shape", kernel or ()))
        if len(k) != 2 or kernel is not None and k != tuple(kernel):
            weight = "" if kernel is None else f", the weight's {tuple(kernel)}"
            self.fail(f"kernel_shape {k} (only 2-D{weight})")
        s = tuple(int(v) for v in attrs.get("strides", (1, 1)))
        d = tuple(int(v) for v in attrs.get("dilations", (1, 1)))
        pads = tuple(int(v) for v in attrs.get("pads", (0, 0, 0, 0)))
        if d != (1, 1):
            self.fail(f"dilations {d} (only 1)")
        if len(s) != 2 or s[0] != s[1]:
            self.fail(f"strides {s} (only equal strides on both axes)")
        if len(pads) != 4 or min(pads) < 0:
            self.fail(f"pads {pads} (only 4 non-negative pads)")
        return k, s[0], pads

    def auto_pad(self, attrs: dict, pads, size: tuple[int, int], k: tuple[int, int], s: int):
        mode = _text(attrs.get("auto_pad", "NOTSET"))
        if mode in ("NOTSET", ""):
            return pads
        if mode == "VALID":
            return (0, 0, 0, 0)
        if mode not in ("SAME_UPPER", "SAME_LOWER"):
            self.fail(f"auto_pad {mode!r}")
        out = []
        for n, kk in zip(size, k):
            total = max((-(-n // s) - 1) * s + kk - n, 0)
            small = total // 2
            out.append((small, total - small) if mode == "SAME_UPPER" else (total - small, small))
        return (out[0][0], out[1][0], out[0][1], out[1][1])

    def conv(self, onnx_node, attrs) -> _Value:
        ins = list(onnx_node.input)
        x = self.image(ins[0])
        w = self.const(ins[1], "weight")
        b = self.const(ins[2], "bias") if len(ins) > 2 and ins[2] else None
        if w.ndim != 4:
            self.fail(f"a weight of shape {w.shape} (only 2-D convolutions: (C_out, C_in, KH, KW))")
        if int(attrs.get("group", 1)) != 1:
            self.fail(f"group {attrs['group']} (only 1: no grouped or depthwise convolutions)")
        if w.shape[1] != x.shape[0]:
            self.fail(f"a weight for {w.shape[1]} input channels on an input of {x.shape[0]}")
        _, s, pads = self.window(attrs, kernel=w.shape[2:])
        if s not in (1, 2):
            self.fail(f"strides ({s}, {s}) (only 1 or 2)")
        pads = self.auto_pad(attrs, pads, x.shape[1:], w.shape[2:], s)
        padding = ((pads[0], pads[2]), (pads[1], pads[3]))
        h = (x.shape[1] + pads[0] + pads[2] - w.shape[2]) // s + 1
        wd = (x.shape[2] + pads[1] + pads[3] - w.shape[3]) // s + 1
        name = self.add(self.own_name("conv"), Conv2D(w, b, s, padding), (x.name,))
        return _Value(_Tensor(name, (w.shape[0], h, wd)))

    def dense(self, x: _Tensor, weight: np.ndarray, bias) -> _Value:
        if weight.ndim != 2 or weight.shape[1] != x.shape[0]:
            self.fail(f"a matrix of shape {weight.shape[::-1]} for vectors of {x.shape[0]} features")
        name = self.add(self.own_name("dense"), Dense(weight, bias), (x.name,))
        return _Value(_Tensor(name, (weight.shape[0],)))

    def pool(self, onnx_node, attrs, kind) -> _Value:
        x = self.image(onnx_node.input[0])
        (k, k2), s, pads = self.window(attrs)
        if k != k2:
            self.fail(f"a {k}x{k2} window (only square windows)")
        pads = self.auto_pad(attrs, pads, x.shape[1:], (k, k), s)
        if any(pads):
            self.fail(f"pads {pads} (only unpadded pools)")
        if len(onnx_node.output) > 1 and any(onnx_node.output[1:]):
            self.fail("a second output (the max's indices)")
        h, w = (x.shape[1] - k) // s + 1, (x.shape[2] - k) // s + 1
        if int(attrs.get("ceil_mode", 0)) and ((x.shape[1] - k) % s or (x.shape[2] - k) % s):
            self.fail("ceil_mode 1 where the windows do not fit exactly")
        if k == 1 and s == 1:  # a 1x1 window with stride 1 (converters keep Keras's pool_size=1): the identity
            return _Value(x)
        name = self.add(self.own_name(kind.__name__.lower()), kind(k, s), (x.name,))
        return _Value(_Tensor(name, (x.shape[0], h, w)))

    def flatten(self, name: str) -> _Value:
        t = self.tensor(name)
        size = int(np.prod(t.shape))
        if len(t.shape) == 1 or t.flat:  # a vector, or a global pool's (C, 1, 1)
            return _Value(_Tensor(t.name, (size,)))
        return _Value(_Tensor(self.add(self.own_name("flatten"), Flatten(), (t.name,)), (size,)))

    # sequences -----------------------------------------------------------------------------------------------------
    def lstm(self, n, attrs, ins) -> None:
        """An ONNX LSTM -> an :class:`LSTM` node reading the sequence input; its outputs ``Y`` and ``Y_h`` become
        :class:`_Steps` (``Y_c``: refused)."""
        x = self.read(ins[0])
        if not isinstance(x, _Seq):
            self.fail("its input X is not the graph's sequence input (N, T, D) / (T, N, D) (only an LSTM on the "
                      "graph input, directly or after a Transpose of its first two axes: no stacked LSTMs)")
        direction = _text(attrs.get("direction", "forward"))
        if direction != "forward":
            self.fail(f"direction {direction!r} (only 'forward': no reverse or bidirectional LSTM)")
        acts = [_text(a).lower() for a in attrs.get("activations", [])]
        if acts and acts != ["sigmoid", "tanh", "tanh"]:
            self.fail(f"activations {acts} (only the default Sigmoid, Tanh, Tanh)")
        if "clip" in attrs:
            self.fail(f"clip {attrs['clip']} (only no clipping)")
        if int(attrs.get("input_forget", 0)):
            self.fail("input_forget 1 (only 0: separate input and forget gates)")
        layout = int(attrs.get("layout", 0))
        if layout not in (0, 1):
            self.fail(f"layout {layout} (only 0 or 1)")
        w, r = self.const(ins[1], "weight W"), self.const(ins[2], "recurrence weight R")
        hid = int(attrs.get("hidden_size", r.shape[-1] if r.ndim == 3 else 0))
        d = x.dims[2]
        if w.shape != (1, 4 * hid, d) or r.shape != (1, 4 * hid, hid):
            self.fail(f"W {w.shape} and R {r.shape} (only one direction: W (1, {4 * hid}, {d}) and R (1, {4 * hid}, "
                      f"{hid}) for hidden_size {hid} on {d} input features)")
        bias = np.zeros(8 * hid)
        optional = ins + [""] * (8 - len(ins))
        if optional[3]:
            b = self.const(optional[3], "bias B")
            if b.shape != (1, 8 * hid):
                self.fail(f"B {b.shape} (only (1, {8 * hid}))")
            bias = b[0]
        if optional[4]:
            self.fail("sequence_lens (only full-length sequences: leave it out)")
        for k, what in ((5, "initial_h"), (6, "initial_c"), (7, "peepholes P")):
            if optional[k] and np.any(self.const(optional[k], what)):
                self.fail(f"a nonzero {what} (only zero or absent initial states and no peepholes)")
        # which axis of the graph input is time: X's time axis (0 for layout 0), through the transposes
        t_axis = (1 if layout else 0) ^ int(x.swapped)
        steps = x.dims[t_axis]
        if steps is None:
            self.fail(f"the sequence input's time axis {t_axis} (of {list(x.dims)}) is symbolic (only the batch axis "
                      f"is; the other must be fixed)")
        if self.seq_input is None:
            self.seq_input = (t_axis, steps)
            self.nodes.insert(0, Node("input", Input((steps * d,))))
        elif self.seq_input != (t_axis, steps):
            self.fail(f"reads the sequence input with time on axis {t_axis}, an earlier LSTM on axis "
                      f"{self.seq_input[0]}")

        def hemx_order(m: np.ndarray) -> np.ndarray:  # ONNX's gate blocks i, o, f, c -> i, f, g(=c), o
            i, o, f, c = np.split(m, 4, axis=0)
            return np.concatenate([i, f, c, o], axis=0)

        layer = LSTM(hemx_order(w[0]).T, hemx_order(r[0]).T, hemx_order(bias[:4 * hid] + bias[4 * hid:]))
        name = self.add(self.own_name("lstm"), layer, ("input",))
        outs = list(n.output) + [""] * (3 - len(n.output))
        y_axes, h_axes = (("B", "T", "dir", "H"), ("B", "dir", "H")) if layout else (("T", "dir", "B", "H"),
                                                                                     ("dir", "B", "H"))
        for out, axes in ((outs[0], y_axes), (outs[1], h_axes)):
            if out:
                self.values[out] = _Steps(name, axes, hid, steps)
        if outs[2]:
            self.refused[outs[2]] = "the LSTM's cell state Y_c (only Y and Y_h)"

    def shape_op(self, op: str, attrs: dict, ins: list, args: list):
        """``Transpose`` of the sequence input, ``Shape`` of a tensor, and ``Squeeze`` / ``Transpose`` / ``Gather``
        / ``Slice`` / ``Flatten`` / ``Reshape`` of an LSTM output (the rest of :data:`_SHAPE_OPS` on constants only:
        :meth:`fold`)."""
        v = args[0]
        if op == "Shape":
            if isinstance(v, _Seq):
                dims = [1 if d is None else d for d in v.dims]
                return np.array(dims[1::-1] + dims[2:] if v.swapped else dims, dtype=np.int64)
            if isinstance(v, _Steps):
                return np.array([1 if a == "B" else v.size(a) for a in v.axes], dtype=np.int64)
            return np.array((1, *v.tensor.shape), dtype=np.int64)  # (a _Value: constants were folded)
        if isinstance(v, _Seq):
            perm = [int(p) for p in attrs.get("perm", (2, 1, 0))]
            if op != "Transpose" or perm not in ([1, 0, 2], [0, 1, 2]):
                self.tensor(ins[0])  # fails: only an LSTM reads the sequence
            return _Seq(v.dims, v.swapped ^ (perm == [1, 0, 2]))
        if not isinstance(v, _Steps):
            self.fail("this op on a tensor computed from the input (only on constants and LSTM outputs)")
        axes = list(v.axes)

        def axis_list(k: int, attr: str) -> list[int] | None:
            src = self.const(ins[k], attr) if len(ins) > k and ins[k] else attrs.get(attr)
            return None if src is None else [int(a) % len(axes) for a in np.ravel(src)]

        if op == "Transpose":
            perm = [int(p) for p in attrs.get("perm", range(len(axes) - 1, -1, -1))]
            axes = [axes[p] for p in perm]
        elif op == "Squeeze":
            which = axis_list(1, "axes")
            if which is None:
                which = [k for k, a in enumerate(axes) if v.size(a) == 1]
            for k in which:
                if v.size(axes[k]) != 1:
                    self.fail(f"squeezes axis {k} of the LSTM output of axes {tuple(axes)}, not of size 1")
            axes = [a for k, a in enumerate(axes) if k not in which]
        elif op == "Gather":
            k = int(attrs.get("axis", 0)) % len(axes)
            idx = self.const(ins[1], "indices")
            size = v.size(axes[k])
            if axes[k] not in ("T", "t", "dir") or idx.size != 1 or int(idx.flat[0]) % size != size - 1:
                self.fail(f"gathers {idx.ravel()[:4]} on axis {k} of the LSTM output of axes {tuple(axes)} (only its "
                          f"last time step or its one direction)")
            axes = axes[:k] + axes[k + 1:] if idx.ndim == 0 else axes[:k] + ["t" if axes[k] == "T" else axes[k]] \
                + axes[k + 1:]
        elif op == "Slice":
            starts, ends = self.const(ins[1], "starts"), self.const(ins[2], "ends")
            which = axis_list(3, "axes") or list(range(starts.size))
            step = self.const(ins[4], "steps") if len(ins) > 4 and ins[4] else np.ones(starts.size, dtype=np.int64)
            for k, a, b, s in zip(which, starts.ravel(), ends.ravel(), step.ravel()):
                size = v.size(axes[k])
                if size is None or int(s) != 1:
                    self.fail(f"slices axis {k} ({axes[k]}) of the LSTM output of axes {tuple(axes)} (only a "
                              f"step-1 slice of the time, direction or hidden axis)")
                lo = max(int(a) + size if int(a) < 0 else int(a), 0)
                hi = min(int(b) + size if int(b) < 0 else int(b), size)
                if (lo, hi) == (size - 1, size) and axes[k] == "T":
                    axes[k] = "t"
                elif (lo, hi) != (0, size):
                    self.fail(f"slices [{lo}, {hi}) of axis {k} ({axes[k]}) of the LSTM output of axes "
                              f"{tuple(axes)} (only the last time step or a whole axis)")
        else:  # Flatten / Reshape: (N, H) when the other axes are of size 1 and the batch comes first
            kept = [a for a in axes if v.size(a) != 1]
            target = [int(d) for d in self.const(ins[1], "shape")] if op == "Reshape" else None
            if op == "Flatten" and int(attrs.get("axis", 1)) != 1 or axes[0] != "B" or kept != ["B", "H"] \
                    or target is not None and (len(target) != 2 or target[1] not in (v.hidden, -1)
                                               or target[1] == -1 and target[0] < 1):
                self.fail(f"a {op} of the LSTM output of axes {tuple(axes)} (only to (N, H), the batch first)")
            axes = ["B", "H"]
        if tuple(axes) == ("B", "H"):
            return _Value(_Tensor(v.node, (v.hidden,)))
        return dataclasses.replace(v, axes=tuple(axes))

    def node(self, n) -> None:
        op, attrs, ins = n.op_type, _attrs(n), list(n.input)
        if n.domain not in ("", "ai.onnx"):
            self.fail(f"an op of domain {n.domain!r} (only the default domain)")
        if op == "Constant":
            if "value" not in attrs and not any(k in attrs for k in ("value_float", "value_floats", "value_int",
                                                                     "value_ints")):
                self.fail(f"a Constant of attributes {sorted(attrs)}")
            if "value" in attrs:
                out = self.numpy_helper.to_array(attrs["value"])
            else:
                out = np.asarray(next(attrs[k] for k in ("value_float", "value_floats", "value_int", "value_ints")
                                      if k in attrs))
            self.values[n.output[0]] = np.asarray(out, dtype=np.float64) if out.dtype.kind == "f" else out
            return
        if op not in SUPPORTED_OPS:
            self.fail("this op is not supported")
        if op == "LSTM":
            self.lstm(n, attrs, ins)
            return
        args = [self.read(i) if i else None for i in ins]
        if len(n.output) > 1 and any(n.output[1:]) and op not in ("MaxPool",):
            self.fail(f"{len(n.output)} outputs (only one)")
        out = n.output[0]
        if op == "Identity":
            self.values[out] = args[0]
            return
        if all(a is None or isinstance(a, np.ndarray) for a in args) and op in (
                "Add", "Sub", "Mul", "Div", "Neg", "Pow", "Reshape", "Flatten", *_SHAPE_OPS):
            self.values[out] = self.fold(op, attrs, args)
            return
        if op in _SHAPE_OPS or op in ("Flatten", "Reshape") and isinstance(args[0], (_Seq, _Steps)):
            self.values[out] = self.shape_op(op, attrs, ins, args)
            return
        for a, i in zip(args, ins):
            if isinstance(a, (_Seq, _Steps)):
                self.tensor(i)  # fails, naming what reads the sequence / the LSTM output
        if op == "Conv":
            v = self.conv(n, attrs)
        elif op == "Gemm":
            if int(attrs.get("transA", 0)):
                self.fail("transA 1 (only the input as the left operand, untransposed)")
            x = self.vector(ins[0])
            b = self.const(ins[1], "matrix B") * float(attrs.get("alpha", 1.0))
            weight = b if int(attrs.get("transB", 0)) else b.T
            bias = None
            if len(ins) > 2 and ins[2]:
                c = self.const(ins[2], "bias C") * float(attrs.get("beta", 1.0))
                try:
                    bias = np.broadcast_to(c, (1, weight.shape[0]))[0]
                except ValueError:
                    self.fail(f"a bias C of shape {c.shape} for {weight.shape[0]} outputs")
            v = self.dense(x, weight, bias)
        elif op == "MatMul":
            if isinstance(args[0], np.ndarray):
                self.fail("a constant left operand (only input @ constant matrix)")
            x = self.vector(ins[0])
            v = self.dense(x, self.const(ins[1], "matrix").T, None)
        elif op == "BatchNormalization":
            if int(attrs.get("training_mode", 0)):
                self.fail("training_mode 1 (only inference: running statistics)")
            x = self.tensor(ins[0])
            gamma, beta, mean, var = (self.const(i, w) for i, w in zip(ins[1:5], ("scale", "B", "mean", "var")))
            bn = BatchNorm.from_statistics(gamma=gamma, beta=beta, mean=mean, var=var,
                                           eps=float(attrs.get("epsilon", 1e-5)))
            v = _Value(dataclasses.replace(x, name=self.add(self.own_name("bn"), bn, (x.name,))))
        elif op == "Relu":
            x = self.tensor(ins[0])
            v = _Value(dataclasses.replace(x, name=self.add(self.own_name("relu"), Activation("relu"), (x.name,))))
        elif op in ("Add", "Sub"):
            v = self.add_values(args[0], args[1], 1.0 if op == "Add" else -1.0)
        elif op == "Mul":
            v = self.mul_values(args[0], args[1])
        elif op == "Div":
            if not isinstance(args[1], np.ndarray) or not np.all(args[1] != 0):
                self.fail("a division by a tensor or by zero (only by non-zero constants)")
            v = self.mul_values(args[0], 1.0 / args[1])
        elif op == "Neg":
            v = _Value(args[0].tensor, _trim([-c for c in args[0].p]))
        elif op == "Pow":
            e = self.const(ins[1], "exponent")
            if e.size != 1 or float(e.flat[0]) != int(e.flat[0]) or int(e.flat[0]) < 1:
                self.fail(f"the exponent {e.ravel()[:4]} (only one positive integer: a polynomial)")
            p = (1.0,)
            for _ in range(int(e.flat[0])):
                p = _poly_mul(p, args[0].p)
            v = _Value(args[0].tensor, p)
        elif op in ("AveragePool", "MaxPool"):
            v = self.pool(n, attrs, AvgPool2D if op == "AveragePool" else MaxPool2D)
        elif op == "GlobalAveragePool":
            x = self.image(ins[0])
            v = _Value(_Tensor(self.add(self.own_name("gap"), GlobalAvgPool(), (x.name,)), (x.shape[0], 1, 1), True))
        elif op == "Flatten":
            if int(attrs.get("axis", 1)) != 1:
                self.fail(f"axis {attrs['axis']} (only 1: keep the batch axis)")
            v = self.flatten(ins[0])
        else:  # Reshape
            shape = [int(d) for d in self.const(ins[1], "shape")]
            t = self.tensor(ins[0])
            size = int(np.prod(t.shape))
            batch = shape[0] if shape else None
            if tuple(shape[1:]) == t.shape and batch is not None and batch >= -1:
                v = _Value(t)
            elif len(shape) == 2 and (shape[1] == size and batch >= -1 or shape[1] == -1 and batch >= 0):
                v = self.flatten(ins[0])
            else:
                self.fail(f"a reshape of {_batched(t.shape)} to {shape} (only to (N, -1): a flatten)")
        self.values[out] = v

    def fold(self, op: str, attrs: dict, args: list) -> np.ndarray:
        """An op on constants only, evaluated (float64)."""
        a = args[0]
        if op in _SHAPE_OPS:
            return np.asarray(self.fold_shape(op, attrs, args))
        if op == "Add":
            return a + args[1]
        if op == "Sub":
            return a - args[1]
        if op == "Mul":
            return a * args[1]
        if op == "Div":
            return a / args[1] if a.dtype.kind == "f" or args[1].dtype.kind == "f" else a // args[1]
        if op == "Neg":
            return -a
        if op == "Pow":
            return np.power(a, args[1])
        if op == "Flatten":
            axis = int(attrs.get("axis", 1)) % max(a.ndim, 1)
            return a.reshape(int(np.prod(a.shape[:axis])), -1)
        shape = [int(d) for d in args[1]]
        shape = [a.shape[i] if d == 0 and not int(attrs.get("allowzero", 0)) else d for i, d in enumerate(shape)]
        return a.reshape(shape)


    def fold_shape(self, op: str, attrs: dict, args: list) -> np.ndarray:
        a = args[0]

        def axes_of(k: int, ndim: int) -> list[int] | None:
            src = args[k] if len(args) > k and args[k] is not None else attrs.get("axes")
            return None if src is None else sorted(int(x) % ndim for x in np.ravel(src))

        if op == "Shape":
            return np.array(a.shape, dtype=np.int64)
        if op == "Gather":
            return np.take(a, args[1].astype(np.int64), axis=int(attrs.get("axis", 0)))
        if op == "Unsqueeze":
            for k in axes_of(1, a.ndim + np.ravel(args[1] if len(args) > 1 and args[1] is not None
                                                  else attrs["axes"]).size):
                a = np.expand_dims(a, k)
            return a
        if op == "Squeeze":
            which = axes_of(1, a.ndim)
            return np.squeeze(a, axis=None if which is None else tuple(which))
        if op == "Concat":
            return np.concatenate(args, axis=int(attrs["axis"]))
        if op == "Transpose":
            return np.transpose(a, attrs.get("perm"))
        if op == "ConstantOfShape":
            fill = self.numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1)
            return np.full([int(d) for d in a], fill.ravel()[0], dtype=np.float64 if fill.dtype.kind == "f"
                           else fill.dtype)
        # Slice
        starts, ends = args[1], args[2]
        which = [int(x) % a.ndim for x in (args[3] if len(args) > 3 and args[3] is not None
                                           else range(starts.size))]
        steps = args[4] if len(args) > 4 and args[4] is not None else np.ones(starts.size, dtype=np.int64)
        index = [slice(None)] * a.ndim
        for k, lo, hi, st in zip(which, starts, ends, steps):
            index[k] = slice(int(lo), int(hi), int(st))
        return a[tuple(index)]


def _load(path_or_model):
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise ParameterError("from_onnx needs the onnx package: pip install 'hemx[onnx]' (requirements.lock pins "
                             "onnx and onnxruntime; `make venv` installs them)") from None
    if isinstance(path_or_model, onnx.ModelProto):
        return path_or_model, numpy_helper
    if isinstance(path_or_model, (bytes, bytearray)):
        return onnx.load_from_string(bytes(path_or_model)), numpy_helper
    if isinstance(path_or_model, (str, os.PathLike)):
        if not os.path.isfile(path_or_model):
            raise ParameterError(f"from_onnx: no file at {os.fspath(path_or_model)!r}")
        return onnx.load(os.fspath(path_or_model)), numpy_helper
    raise ParameterError(f"from_onnx takes a path, the bytes of a model or an onnx.ModelProto, got "
                         f"{type(path_or_model).__name__}")


def from_onnx(path_or_model) -> Graph:
    """Import an ONNX model (a path to a ``.onnx`` file, its bytes, or an ``onnx.ModelProto``) as a :class:`Graph`.

    The model has one input, NCHW images ``(N, C, H, W)``, vectors ``(N, F)`` or sequences ``(N, T, D)`` / ``(T, N,
    D)`` read by LSTMs (``N`` symbolic or fixed), and one output; its default-domain opset is 13 or later. The
    graph's ``data_layout`` is NCHW, as the model's: its input is ``(C, H, W)``, ``(F,)`` or, for a sequence,
    ``(T * D,)``: the sequence flattened time-major, so feed it ``x.reshape(N, T * D)`` for ``(N, T, D)`` data and
    ``x.transpose(1, 0, 2).reshape(N, T * D)`` for ``(T, N, D)`` data (which axis is time follows from the LSTM's
    ``layout``, module docstring). It computes what the ONNX model computes (a ``GlobalAveragePool`` output ``(N,
    C, 1, 1)`` is ``(C,)``). See the module docstring for the supported ops; anything else raises
    :class:`~hemx.errors.ParameterError` naming the op type, the node and the supported ops.
    """
    model, numpy_helper = _load(path_or_model)
    opsets = {op.domain or "ai.onnx": int(op.version) for op in model.opset_import}
    opset = opsets.get("ai.onnx")
    if opset is None or opset < MIN_OPSET:
        raise ParameterError(f"from_onnx: the model's opset is {opset} (only {MIN_OPSET} or later): re-export it with "
                             f"opset_version={MIN_OPSET} or later, or convert it with onnx.version_converter")
    g = model.graph
    imp = _Importer(numpy_helper)
    for init in g.initializer:
        arr = numpy_helper.to_array(init)
        imp.values[init.name] = np.asarray(arr, dtype=np.float64) if arr.dtype.kind == "f" else np.asarray(arr)
    inputs = [i for i in g.input if i.name not in imp.values]
    if len(inputs) != 1:
        raise ParameterError(f"from_onnx: the model has {len(inputs)} inputs {[i.name for i in inputs]} (only one)")
    if len(g.output) != 1:
        raise ParameterError(f"from_onnx: the model has {len(g.output)} outputs (only one)")
    inp = inputs[0]
    dims = [d.dim_value if d.HasField("dim_value") else None for d in inp.type.tensor_type.shape.dim]
    if len(dims) == 3:  # a sequence: its Input node comes with the first LSTM that reads it (which axis is time)
        if dims[2] is None or sum(d is None for d in dims[:2]) > 1 or any(d is not None and d < 1 for d in dims):
            raise ParameterError(f"from_onnx: sequence input {inp.name!r} of shape {dims} (only (N, T, D) or (T, N, "
                                 f"D) with T and D fixed)")
        imp.values[inp.name] = _Seq(tuple(dims))
    elif len(dims) not in (2, 4) or any(d is None or d < 1 for d in dims[1:]):
        raise ParameterError(f"from_onnx: input {inp.name!r} of shape {dims} (only (N, C, H, W) or (N, F) with "
                             f"fixed sizes after the batch, or a sequence (N, T, D) / (T, N, D) read by an LSTM)")
    else:
        shape = tuple(int(d) for d in dims[1:])
        imp.nodes.append(Node("input", Input(shape)))
        imp.values[inp.name] = _Value(_Tensor("input", shape))
    imp.used.add("input")
    for n in g.node:
        for i in n.input:
            imp.readers[i] = imp.readers.get(i, 0) + 1
    imp.readers[g.output[0].name] = imp.readers.get(g.output[0].name, 0) + 1
    for n in g.node:
        imp.onnx_node = n
        imp.node(n)
    imp.onnx_node = None
    out = imp.read(g.output[0].name)
    if isinstance(out, np.ndarray):
        raise ParameterError("from_onnx: the output does not depend on the input")
    if not any(isinstance(n.layer, Input) for n in imp.nodes):
        raise ParameterError(f"from_onnx: no LSTM reads the sequence input {inp.name!r} (a 3-D input is a sequence "
                             f"for an LSTM)")
    result = imp.tensor(g.output[0].name)
    need = {result.name}
    for node in reversed(imp.nodes):
        if node.name in need:
            need.update(node.inputs)
    return Graph(tuple(n for n in imp.nodes if n.name in need or isinstance(n.layer, Input)), "NCHW")
