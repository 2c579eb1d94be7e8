"""The JAX front end of :mod:`hemx.nn`: trace any JAX function into a :class:`~hemx.nn.graph.Graph`.

Why a jaxpr front end: every JAX-ecosystem model (Flax linen/nnx, Haiku, Equinox, Stax, a plain function closing
over its weights) ends up as the same small set of ``jax.lax`` primitives once traced with ``jax.make_jaxpr``.
Pattern-matching that jaxpr imports all of them with one piece of code and no dependency on any of those libraries
(Flax is used only in a test); a per-library importer would need each library installed and would break with each
library's parameter layout. The cost is that the front end sees arithmetic, not layers: batch-norm arrives as
``(x - mean) * rsqrt(var + eps) * gamma + beta``, an average pool as a window sum and a division, and so on. This
module recognises those patterns.

:func:`from_jax` ``(fn, example_input)`` traces ``fn(x)`` for a batched ``x`` (NHWC images by default, or
``(B, F)`` vectors) and interprets the jaxpr symbolically:

* every equation whose inputs are all constants (weights, statistics, ``rsqrt(var + eps)``, broadcasts) is
  evaluated (constant folding);
* an element-wise expression of one tensor is kept lazy as ``P(s * x + t)``: ``s, t`` per-channel vectors (bias
  adds, batch-norm arithmetic) and ``P`` a polynomial with scalar coefficients (``x * x``, ``integer_pow``,
  ``square``, multiplication / addition / division by scalars). It becomes nodes only where something else consumes
  it: ``s, t`` as :class:`BatchNorm` (per-channel) or :class:`Affine` (scalar, e.g. ``x / 255``), ``P`` as
  ``Activation("poly", coeffs)``. So a conv bias followed by batch-norm arithmetic is one BatchNorm, and a shift
  alone right after a convolution or dense layer becomes its bias (``fold_batchnorm=True`` folds scales too).
* ``conv_general_dilated`` (any dimension numbers, e.g. NHWC/HWIO or NCHW/OIHW; equal strides 1 or 2 on both axes;
  explicit non-negative padding; no dilation or groups) -> :class:`Conv2D`;
* ``dot_general`` with a constant matrix -> :class:`Dense` (on a vector) or a 1x1 :class:`Conv2D` (contracting
  the channels of an image, as ``flax.linen.Dense`` on NHWC does);
* ``reduce_window_sum`` (then a division by the window size) -> :class:`AvgPool2D`; ``reduce_window_max`` ->
  :class:`MaxPool2D`; ``reduce_sum`` over H and W (``jnp.mean``) -> :class:`GlobalAvgPool`;
* ``reshape`` of an image to ``(B, -1)`` (or ``squeeze`` of 1x1 spatial axes) -> :class:`Flatten`. The IR flattens
  channel-first; the jaxpr's flatten order (HWC for NHWC) is kept as a feature permutation and applied to the next
  dense layer's weight (and per-feature constants), so no permutation node is needed;
* ``logistic`` (``jax.nn.sigmoid``) / ``tanh`` -> ``Activation("sigmoid")`` / ``Activation("tanh")`` (fitted
  polynomials when compiled);
* a ``(B, T, D)`` input is a sequence (the graph input ``(T * D,)``, time-major); ``jax.lax.scan`` of an LSTM cell
  over its time axis (``z = x_t @ W_x + h @ W_h + b``, the gates split or computed apart in any order,
  ``c = sigmoid(f) * c + sigmoid(i) * tanh(g)``, ``h = sigmoid(o) * tanh(c)``, carries ``(h, c)`` or ``(c, h)``
  from zeros: a plain JAX cell, Flax's ``LSTMCell`` / ``OptimizedLSTMCell`` under ``nn.RNN``) -> :class:`LSTM`,
  its value the final ``h`` (the final carry, or the last of the stacked outputs); the cell is matched
  symbolically and then checked by running it once against the LSTM formula;
* ``transpose`` only relabels axes; ``max(x, 0)`` -> ``Activation("relu")``; the sum of two different tensors ->
  :class:`Add`; the product of two different tensors of one shape -> :class:`Multiply` (of one tensor: a
  polynomial, above);
* ``jit``/``pjit``, ``closed_call``, ``core_call``, ``custom_jvp_call``, ``custom_vjp_call``, ``remat``/
  ``checkpoint`` are inlined.

Anything else raises :class:`~hemx.errors.ParameterError` naming the primitive, its source location, and the
supported set. Batch statistics (batch-norm in training mode) are rejected, since they reduce over the batch axis.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import numpy as np

from hemx.errors import ParameterError, ShapeError
from hemx.nn.graph import (
    LSTM, Activation, Add, Affine, AvgPool2D, BatchNorm, Conv2D, Dense, Flatten, GlobalAvgPool, Graph, Input,
    MaxPool2D, Multiply, Node,
)
from hemx.nn.passes.fold import fold_nodes

__all__ = ["from_jax", "SUPPORTED"]

SUPPORTED = (
    "conv_general_dilated (stride 1/2, explicit padding, no dilation/groups), dot_general with a constant matrix, "
    "add/sub/mul/div/neg by constants (scalars or per-channel: bias, batch-norm, x/255), add of two tensors "
    "(residual), mul of two tensors of one shape (element-wise product), mul/square/integer_pow of one tensor "
    "(polynomial activations), max(x, 0) (ReLU), logistic / tanh (sigmoid / tanh activations), "
    "scan of an LSTM cell over the time axis of a (B, T, D) sequence from zero carries (LSTM), "
    "reduce_window_sum (+ div: average pool), reduce_window_max (max pool), reduce_sum / reduce_max over H and W "
    "(global pools), reshape/squeeze to (B, features) (flatten), transpose, convert_element_type, copy, and inlined "
    "jit/pjit/closed_call/core_call/custom_jvp_call/custom_vjp_call/remat; any computation on constants only"
)

_INLINE = {"pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr",
           "remat", "checkpoint", "remat2", "custom_lin"}
_IDENTITY = {"convert_element_type", "copy", "copy_p", "reduce_precision", "optimization_barrier"}
#: what may read a sequence (B, T, D) input: the LSTM scan, transposes, element-wise arithmetic
_SEQUENCE_OPS = {"scan", "transpose", "add", "sub", "mul", "div", "neg"} | _IDENTITY


# --- symbolic values --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, eq=False)
class _Tensor:
    """A graph node's output as the jaxpr sees it.

    ``roles``: the role of each jaxpr axis, "N" (batch), "C", "H", "W" for images, "N", "F" for vectors.
    ``order`` (vectors only): jaxpr feature ``j`` holds IR feature ``order[j]`` (None: identity).
    """

    name: str
    roles: tuple[str, ...]
    jshape: tuple[int, ...]
    order: np.ndarray | None = None

    @property
    def image(self) -> bool:
        return "H" in self.roles

    @property
    def channels(self) -> int:
        return self.jshape[self.roles.index("C" if self.image else "F")]

    def axis(self, role: str) -> int:
        return self.roles.index(role)

    def same_layout(self, other: "_Tensor") -> bool:
        if self.roles != other.roles or self.jshape != other.jshape:
            return False
        if self.order is None or other.order is None:
            return self.order is None and other.order is None
        return bool(np.array_equal(self.order, other.order))


def _poly_trim(p):
    p = list(p)
    while len(p) > 2 and p[-1] == 0.0:
        p.pop()
    while len(p) < 2:
        p.append(0.0)
    return tuple(float(c) for c in p)


def _poly_add(a, b):
    n = max(len(a), len(b))
    return _poly_trim([(a[i] if i < len(a) else 0.0) + (b[i] if i < len(b) else 0.0) for i in range(n)])


def _poly_mul(a, b):
    out = [0.0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i + j] += x * y
    return _poly_trim(out)


def _degree(p) -> int:
    return max((k for k, c in enumerate(p) if c != 0.0), default=0)


_ID = (0.0, 1.0)


@dataclasses.dataclass(eq=False)
class _Value:
    """The lazy element-wise expression ``P(s * base + t)`` (``s, t`` per IR channel, ``P`` scalar power basis)."""

    base: _Tensor
    s: np.ndarray
    t: np.ndarray
    p: tuple[float, ...] = _ID
    cached: _Tensor | None = None

    @classmethod
    def of(cls, tensor: _Tensor) -> "_Value":
        c = tensor.channels
        return cls(tensor, np.ones(c), np.zeros(c), _ID, tensor)

    def root_is_identity(self) -> bool:
        return bool(np.all(self.s == 1.0) and np.all(self.t == 0.0))

    def same_root(self, other: "_Value") -> bool:
        return (self.base.name == other.base.name and self.base.same_layout(other.base)
                and np.array_equal(self.s, other.s) and np.array_equal(self.t, other.t))

    def folded_root(self) -> tuple[np.ndarray, np.ndarray]:
        """``(s', t')`` with ``P(s x + t) = s' x + t'``; only for degree <= 1."""
        p0, p1 = self.p[0], self.p[1]
        return p1 * self.s, p0 + p1 * self.t

    def with_p(self, p) -> "_Value":
        return _Value(self.base, self.s, self.t, _poly_trim(p))


# --- LSTM cells under jax.lax.scan --------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, eq=False)
class _Unsupported:
    """A value the graph cannot hold (an LSTM scan's final cell state or its stacked per-step outputs)."""

    what: str


@dataclasses.dataclass(frozen=True, eq=False)
class _Stacked:
    """The stacked hidden states of an LSTM scan (axes of ``roles``, "T" the time axis): only the last time step
    (``last``: the time axis sliced to it) becomes a graph value, the LSTM node ``name``'s."""

    name: str
    roles: tuple[str, ...]
    jshape: tuple[int, ...]
    last: bool = False


@dataclasses.dataclass(frozen=True, eq=False)
class _Lin:
    """``x_t @ wx + h @ wh + b`` in a scanned cell: ``wx`` ``(D, n)``, ``wh`` ``(H, n)`` (None: no ``h`` term),
    ``b`` ``(n,)``."""

    wx: np.ndarray
    wh: np.ndarray | None
    b: np.ndarray

    def columns(self, start: int, stop: int) -> "_Lin":
        return _Lin(self.wx[:, start:stop], None if self.wh is None else self.wh[:, start:stop], self.b[start:stop])

    def plus(self, other: "_Lin") -> "_Lin":
        wh = other.wh if self.wh is None else self.wh if other.wh is None else self.wh + other.wh
        return _Lin(self.wx + other.wx, wh, self.b + other.b)


@dataclasses.dataclass(frozen=True, eq=False)
class _Sym:
    """A symbolic value of a scanned cell: ``kind`` ``"carry"`` (``args``: its index), ``"sigmoid"`` / ``"tanh"``
    (of a :class:`_Lin` or a sum), ``"mul"`` / ``"add"`` (of two symbols)."""

    kind: str
    args: tuple


class _CellMatcher:
    """Reads the body of ``jax.lax.scan`` as an LSTM cell ``(h, c), x_t -> (h', c')`` (carries in either order)."""

    def __init__(self, fail: Callable, d: int):
        self.fail, self.d = fail, d
        self.h_index: int | None = None

    def run(self, jaxpr, consts: list, args: list) -> list:
        env = dict(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))

        def read(var):
            return np.asarray(var.val) if type(var).__name__ == "Literal" else env[var]

        for eqn in jaxpr.eqns:
            outs = self.equation(eqn, [read(v) for v in eqn.invars])
            outs = outs if eqn.primitive.multiple_results else [outs]
            for var, val in zip(eqn.outvars, outs):
                env[var] = val
        return [read(v) for v in jaxpr.outvars]

    def equation(self, eqn, ins):
        prim = eqn.primitive.name
        if prim in _INLINE:
            sub = next((eqn.params[k] for k in ("jaxpr", "call_jaxpr", "fun_jaxpr") if k in eqn.params), None)
            if sub is None or not hasattr(sub, "jaxpr"):
                self.fail(f"the LSTM cell calls `{prim}` without a closed sub-jaxpr")
            outs = self.run(sub.jaxpr, [np.asarray(c) for c in sub.consts], list(ins))
            return outs if eqn.primitive.multiple_results else outs[0]
        if all(isinstance(v, np.ndarray) for v in ins):
            out = eqn.primitive.bind(*ins, **eqn.params)
            return [np.asarray(o) for o in out] if eqn.primitive.multiple_results else np.asarray(out)
        if prim in _IDENTITY:
            return ins[0]
        out_shape = tuple(eqn.outvars[0].aval.shape)
        a = ins[0]
        if prim == "broadcast_in_dim" and isinstance(a, (_Lin, _Sym)) and tuple(eqn.params["shape"]) == \
                tuple(eqn.invars[0].aval.shape):
            return a
        if prim == "dot_general":
            (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
            v, w = ins
            if lb or rb or tuple(lc) != (1,) or tuple(rc) != (0,) or not isinstance(w, np.ndarray):
                self.fail("the LSTM cell's products must be x_t @ W and h @ W with constant W")
            w = np.asarray(w, dtype=np.float64)
            if isinstance(v, _Lin):
                return _Lin(v.wx @ w, None if v.wh is None else v.wh @ w, v.b @ w)
            if isinstance(v, _Sym) and v.kind == "carry":
                if self.h_index not in (None, v.args[0]):
                    self.fail("both carries of the scan are multiplied by weights (an LSTM cell's c is not)")
                self.h_index = v.args[0]
                return _Lin(np.zeros((self.d, w.shape[1])), w, np.zeros(w.shape[1]))
        if prim in ("add", "add_any", "sub"):
            b = ins[1]
            sign = -1.0 if prim == "sub" else 1.0
            if isinstance(a, _Lin) and isinstance(b, _Lin):
                return a.plus(b if sign > 0 else _Lin(-b.wx, None if b.wh is None else -b.wh, -b.b))
            if isinstance(a, _Lin) and isinstance(b, np.ndarray) and b.size in (1, a.b.size):
                return _Lin(a.wx, a.wh, a.b + sign * np.broadcast_to(b.reshape(-1), a.b.shape))
            if prim != "sub" and isinstance(a, _Sym) and isinstance(b, _Sym):
                return _Sym("add", (a, b))
        if prim == "split" and isinstance(a, _Lin) and eqn.params["axis"] == len(out_shape) - 1:
            edges = np.cumsum([0] + [int(s) for s in eqn.params["sizes"]])
            return [a.columns(int(s), int(e)) for s, e in zip(edges[:-1], edges[1:])]
        if prim == "slice" and isinstance(a, _Lin) and eqn.params.get("strides") in (None, (1, 1)):
            start, limit = eqn.params["start_indices"], eqn.params["limit_indices"]
            if start[0] == 0 and limit[0] == out_shape[0]:
                return a.columns(int(start[1]), int(limit[1]))
        if prim in ("logistic", "tanh") and isinstance(a, (_Lin, _Sym)):
            return _Sym("sigmoid" if prim == "logistic" else "tanh", (a,))
        if prim == "mul" and all(isinstance(v, _Sym) for v in ins):
            return _Sym("mul", tuple(ins))
        self.fail(f"`{prim}` in the scanned cell is not part of an LSTM cell (z = x_t @ W_x + h @ W_h + b; "
                  "i, f, g, o = split(z, 4); c = sigmoid(f) * c + sigmoid(i) * tanh(g); h = sigmoid(o) * tanh(c))")


def _gate(s, kind: str) -> _Lin | None:
    """The gate's pre-activation when ``s`` is ``kind(lin)``."""
    if isinstance(s, _Sym) and s.kind == kind and isinstance(s.args[0], _Lin):
        return s.args[0]
    return None


def _pair(s, kind: str, first, second):
    """``(first(a), second(b))`` of ``s = kind(a, b)`` in either order, or None."""
    if not isinstance(s, _Sym) or s.kind != kind:
        return None
    a, b = s.args
    for x, y in ((a, b), (b, a)):
        fx, sy = first(x), second(y)
        if fx is not None and sy is not None:
            return fx, sy
    return None


def _match_lstm(fail: Callable, body, consts: list, d: int, h: int):
    """``(w_x (D, 4H), w_h (H, 4H), bias (4H,), index of h among the two carries)`` of the scan body ``body`` (a
    ClosedJaxpr over ``consts``, the carries and ``x_t``) when it is an LSTM cell, gates ordered i, f, g, o; else
    ``fail``. The match is checked by running the body once on random values against the LSTM formula."""
    m = _CellMatcher(fail, d)
    carries = [_Sym("carry", (0,)), _Sym("carry", (1,))]
    outs = m.run(body.jaxpr, [np.asarray(c) for c in body.consts],
                 list(consts) + carries + [_Lin(np.eye(d), None, np.zeros(d))])
    if m.h_index is None:
        fail("the scanned cell never multiplies a carry by weights (no h @ W_h: not an LSTM cell)")
    hi, ci = m.h_index, 1 - m.h_index
    new_h, new_c = outs[hi], outs[ci]
    sig = lambda s: _gate(s, "sigmoid")  # noqa: E731
    cell = lambda s: s if isinstance(s, _Sym) and s.kind == "carry" and s.args[0] == ci else None  # noqa: E731
    fc = lambda s: _pair(s, "mul", sig, cell)  # noqa: E731
    ig = lambda s: _pair(s, "mul", sig, lambda t: _gate(t, "tanh"))  # noqa: E731
    c_parts = _pair(new_c, "add", fc, ig)
    tanh_c = lambda s: s if isinstance(s, _Sym) and s.kind == "tanh" and s.args[0] is new_c else True  # noqa: E731
    h_parts = _pair(new_h, "mul", sig, lambda s: None if tanh_c(s) is True else s)
    if c_parts is None or h_parts is None:
        fail("the scanned cell does not compute c' = sigmoid(f) * c + sigmoid(i) * tanh(g) and "
             "h' = sigmoid(o) * tanh(c') as its carries (an LSTM cell, carries (h, c) or (c, h))")
    if any(o is not new_h for o in outs[2:]):
        fail("the scanned cell's per-step output is not its new hidden state h'")
    (lin_f, _), (lin_i, lin_g) = c_parts
    lin_o = h_parts[0]
    gates = (lin_i, lin_f, lin_g, lin_o)
    if any(g.b.shape != (h,) for g in gates):
        fail(f"gates of widths {[g.b.shape[0] for g in gates]} for a hidden state of {h}")
    w_x = np.concatenate([g.wx for g in gates], axis=1)
    w_h = np.concatenate([np.zeros((h, h)) if g.wh is None else g.wh for g in gates], axis=1)
    bias = np.concatenate([g.b for g in gates])
    # the check: the body on random values against the LSTM formula (what the pattern does not see, e.g. an
    # extra term folded away, shows here)
    rng = np.random.default_rng(0)
    hv, cv, xv = rng.normal(size=(2, h)), rng.normal(size=(2, h)), rng.normal(size=(2, d))
    carry = [None, None]
    carry[hi], carry[ci] = hv, cv
    got = jax.core.eval_jaxpr(body.jaxpr, body.consts, *consts, *carry, xv)
    sigmoid = lambda v: 0.5 * (1.0 + np.tanh(0.5 * v))  # noqa: E731
    zi, zf, zg, zo = np.split(xv @ w_x + hv @ w_h + bias, 4, axis=1)
    c_want = sigmoid(zf) * cv + sigmoid(zi) * np.tanh(zg)
    h_want = sigmoid(zo) * np.tanh(c_want)
    for name, g_val, want in (("h", got[hi], h_want), ("c", got[ci], c_want)):
        if not np.allclose(np.asarray(g_val, dtype=np.float64), want, rtol=1e-6, atol=1e-6):
            fail(f"the scanned cell's {name}' differs from the LSTM formula it was matched to")
    return w_x, w_h, bias, hi


# --- the interpreter -------------------------------------------------------------------------------------------

def _is_key(v) -> bool:
    """A typed PRNG key (Flax's RNN splits one while tracing): a constant kept as a JAX array."""
    return isinstance(v, jax.Array) and jax.dtypes.issubdtype(v.dtype, jax.dtypes.prng_key)


def _constant(v):
    return v if _is_key(v) else np.asarray(v)


def _where(eqn) -> str:
    try:
        from jax._src import source_info_util

        return source_info_util.summarize(eqn.source_info) or "unknown location"
    except Exception:  # pragma: no cover - private API moved
        return "unknown location"


class _Builder:
    def __init__(self, fold_batchnorm: bool):
        self.nodes: list[Node] = []
        self.count: dict[str, int] = {}
        self.fold_batchnorm = fold_batchnorm
        self.roots: dict[tuple, str] = {}
        self.eqn = None

    # errors ---------------------------------------------------------------------------------------------------
    def fail(self, why: str):
        eqn = self.eqn
        prim = eqn.primitive.name if eqn is not None else "?"
        where = _where(eqn) if eqn is not None else "?"
        raise ParameterError(f"from_jax: cannot import `{prim}` at {where}: {why}. Supported: {SUPPORTED}.")

    # nodes ----------------------------------------------------------------------------------------------------
    def add(self, prefix: str, layer, inputs: tuple[str, ...]) -> str:
        i = self.count.get(prefix, 0)
        self.count[prefix] = i + 1
        name = f"{prefix}{i}"
        self.nodes.append(Node(name, layer, inputs))
        return name

    def materialize(self, v: _Value) -> _Tensor:
        if v.cached is not None:
            return v.cached
        base, p = v.base, v.p
        if not v.root_is_identity() or _degree(p) <= 1:
            if _degree(p) <= 1:
                s, t = v.folded_root()
                p = _ID
            else:
                s, t = v.s, v.t
            if not (np.all(s == 1.0) and np.all(t == 0.0)):
                key = (base.name, base.roles, s.tobytes(), t.tobytes())  # one node per affine of one tensor
                if key not in self.roots:
                    if np.all(s == s[0]) and np.all(t == t[0]):
                        self.roots[key] = self.add("affine", Affine(float(s[0]), float(t[0])), (base.name,))
                    elif "T" in base.roles:
                        self.fail("per-feature constants on a sequence (B, T, D) (only scalars; or fold them into "
                                  "the LSTM's input weights)")
                    else:
                        self.roots[key] = self.add("bn", BatchNorm(scale=s, shift=t), (base.name,))
                base = dataclasses.replace(base, name=self.roots[key])
        if p != _ID:
            base = dataclasses.replace(base, name=self.add("act", Activation("poly", p), (base.name,)))
        v.cached = base
        return base

    # constants ------------------------------------------------------------------------------------------------
    def per_channel(self, const: np.ndarray, tensor: _Tensor) -> np.ndarray:
        """A constant combined element-wise with ``tensor``, as one value per IR channel (or feature)."""
        const = np.asarray(const, dtype=np.float64)
        try:
            if np.broadcast_shapes(const.shape, tensor.jshape) != tensor.jshape:
                raise ValueError
            full = np.broadcast_to(const, tensor.jshape)
        except ValueError:
            self.fail(f"a constant of shape {const.shape} broadcasts the tensor of shape {tensor.jshape}")
        c_axis = tensor.axis("C" if tensor.image else "F")
        flat = np.moveaxis(full, c_axis, 0).reshape(full.shape[c_axis], -1)
        if not np.all(flat == flat[:, :1]):
            self.fail("a constant that varies over the batch or the pixels (only scalars and per-channel "
                      "constants are layers)")
        v = flat[:, 0].copy()
        if tensor.order is not None:
            out = np.empty_like(v)
            out[tensor.order] = v
            v = out
        return v

    # element-wise arithmetic ----------------------------------------------------------------------------------
    def scale_shift(self, v: _Value, mul: np.ndarray | None, shift: np.ndarray | None) -> _Value:
        """``v * mul + shift`` with per-channel vectors (scalars when uniform)."""
        if mul is not None and np.all(mul == mul[0]):
            v = v.with_p([c * float(mul[0]) for c in v.p])
            mul = None
        if shift is not None and np.all(shift == shift[0]):
            p = list(v.p)
            p[0] += float(shift[0])
            v = v.with_p(p)
            shift = None
        if mul is None and shift is None:
            return v
        if _degree(v.p) <= 1:
            s, t = v.folded_root()
            base = v.base
        else:
            base, s, t = self.materialize(v), 1.0, 0.0
            s, t = np.full(base.channels, s), np.full(base.channels, t)
        if mul is not None:
            s, t = s * mul, t * mul
        if shift is not None:
            t = t + shift
        return _Value(base, s, t, _ID)

    def add_values(self, a: _Value, b: _Value, sign: float) -> _Value:
        if a.same_root(b):
            return a.with_p(_poly_add(a.p, [sign * c for c in b.p]))
        if (a.base.name == b.base.name and a.base.same_layout(b.base) and _degree(a.p) <= 1
                and _degree(b.p) <= 1):
            sa, ta = a.folded_root()
            sb, tb = b.folded_root()
            return _Value(a.base, sa + sign * sb, ta + sign * tb, _ID)
        if sign < 0:
            b = self.scale_shift(b, np.full(b.base.channels, -1.0), None)
        ta, tb = self.materialize(a), self.materialize(b)
        if not ta.same_layout(tb):
            self.fail(f"adding tensors of different layouts {ta.roles}{ta.jshape} and {tb.roles}{tb.jshape}")
        name = self.add("add", Add(), (ta.name, tb.name))
        return _Value.of(dataclasses.replace(ta, name=name))

    def mul_values(self, a: _Value, b: _Value) -> _Value:
        if not a.same_root(b):
            ta, tb = self.materialize(a), self.materialize(b)
            if not ta.same_layout(tb):
                self.fail(f"the product of two different tensors of layouts {ta.roles}{ta.jshape} and "
                          f"{tb.roles}{tb.jshape} (only tensors of one layout multiply element-wise)")
            if ta.name != tb.name:  # two different tensors of one layout: their element-wise product
                return _Value.of(dataclasses.replace(ta, name=self.add("mul", Multiply(), (ta.name, tb.name))))
            a, b = _Value.of(ta), _Value.of(tb)
        return a.with_p(_poly_mul(a.p, b.p))

    def power(self, v: _Value, n) -> _Value:
        if float(n) != int(n) or int(n) < 1:
            self.fail(f"the power {n} (only positive integer powers are polynomials)")
        acc: tuple[float, ...] = (1.0,)
        for _ in range(int(n)):
            acc = _poly_mul(acc, v.p)
        return v.with_p(acc)

    # layers ---------------------------------------------------------------------------------------------------
    def conv(self, x: _Tensor, w: np.ndarray, params) -> _Value:
        if not x.image:
            self.fail(f"a convolution of a tensor of roles {x.roles}")
        if any(d != 1 for d in params["lhs_dilation"]) or any(d != 1 for d in params["rhs_dilation"]):
            self.fail("a dilated convolution")
        if params["feature_group_count"] != 1 or params["batch_group_count"] != 1:
            self.fail("a grouped (or depthwise) convolution")
        dn = params["dimension_numbers"]
        lhs, rhs, out = dn.lhs_spec, dn.rhs_spec, dn.out_spec
        if x.roles[lhs[0]] != "N" or x.roles[lhs[1]] != "C":
            self.fail("dimension numbers that do not match the tensor's batch / channel axes")
        sh = 0 if x.roles[lhs[2]] == "H" else 1
        sw = 1 - sh
        strides = params["window_strides"]
        if strides[sh] != strides[sw] or strides[sh] not in (1, 2):
            self.fail(f"strides {tuple(strides)} (only equal strides 1 or 2)")
        pad = params["padding"]
        if isinstance(pad, str):
            self.fail(f"symbolic padding {pad!r}")
        padding = (tuple(int(v) for v in pad[sh]), tuple(int(v) for v in pad[sw]))
        if min(padding[0] + padding[1]) < 0:
            self.fail(f"negative padding {padding}")
        weight = np.transpose(np.asarray(w, dtype=np.float64), (rhs[0], rhs[1], rhs[2 + sh], rhs[2 + sw]))
        name = self.add("conv", Conv2D(weight, None, int(strides[sh]), padding), (x.name,))
        roles = [""] * 4
        roles[out[0]], roles[out[1]], roles[out[2 + sh]], roles[out[2 + sw]] = "N", "C", "H", "W"
        return _Value.of(_Tensor(name, tuple(roles), tuple(self.eqn.outvars[0].aval.shape)))

    def dot(self, v: _Value, w: np.ndarray, tensor_is_lhs: bool, params) -> _Value:
        (lc, rc), (lb, rb) = params["dimension_numbers"]
        if len(lb) or len(rb):
            self.fail("a batched dot_general")
        tc, wc = (lc, rc) if tensor_is_lhs else (rc, lc)
        w = np.asarray(w, dtype=np.float64)
        if w.ndim != 2 or len(wc) != 1 or len(tc) != 1:
            self.fail(f"a contraction with a constant of shape {w.shape} (only a matrix, one contracted axis)")
        wmat = np.moveaxis(w, wc[0], 0)  # (F_in, F_out)
        x = self.materialize(v)
        out_shape = tuple(self.eqn.outvars[0].aval.shape)
        if x.image:
            if x.roles[tc[0]] != "C":
                self.fail("a dot_general over an image axis other than the channels")
            name = self.add("conv", Conv2D(wmat.T[:, :, None, None]), (x.name,))
            rest = tuple(r for r in x.roles if r != "C")
            roles = rest + ("C",) if tensor_is_lhs else ("C",) + rest
            return _Value.of(_Tensor(name, roles, out_shape))
        if x.roles[tc[0]] != "F":
            self.fail("a dot_general over the batch axis")
        weight = wmat.T.copy()
        if x.order is not None:
            weight = np.empty_like(weight)
            weight[:, x.order] = wmat.T
        name = self.add("dense", Dense(weight), (x.name,))
        roles = ("N", "F") if tensor_is_lhs else ("F", "N")
        return _Value.of(_Tensor(name, roles, out_shape))

    def window(self, x: _Tensor, params, kind: str) -> _Value:
        if not x.image:
            self.fail("a window reduction of a vector")
        dims, strides = params["window_dimensions"], params["window_strides"]
        if any(tuple(p) != (0, 0) for p in params["padding"]):
            self.fail(f"a padded pooling window {params['padding']}")
        if any(d != 1 for d in params["base_dilation"]) or any(d != 1 for d in params["window_dilation"]):
            self.fail("a dilated pooling window")
        h, w, n, c = x.axis("H"), x.axis("W"), x.axis("N"), x.axis("C")
        if dims[n] != 1 or dims[c] != 1 or strides[n] != 1 or strides[c] != 1:
            self.fail("a pooling window over the batch or channel axis")
        if dims[h] != dims[w] or strides[h] != strides[w]:
            self.fail(f"a non-square pooling window {tuple(dims)} / strides {tuple(strides)}")
        k, s = int(dims[h]), int(strides[h])
        layer = AvgPool2D(k, s) if kind == "sum" else MaxPool2D(k, s)
        name = self.add("avgpool" if kind == "sum" else "maxpool", layer, (x.name,))
        out = _Value.of(dataclasses.replace(x, name=name, jshape=tuple(self.eqn.outvars[0].aval.shape)))
        return out.with_p((0.0, float(k * k))) if kind == "sum" else out

    def reduce(self, x: _Tensor, axes, kind: str) -> _Value:
        axes = set(int(a) for a in axes)
        if not x.image or axes != {x.axis("H"), x.axis("W")}:
            self.fail(f"a reduction over axes {sorted(axes)} of roles {x.roles} (only over H and W of an image)")
        roles = tuple(("F" if r == "C" else r) for i, r in enumerate(x.roles) if i not in axes)
        out_shape = tuple(self.eqn.outvars[0].aval.shape)
        hh, ww = x.jshape[x.axis("H")], x.jshape[x.axis("W")]
        if kind == "sum":
            name = self.add("gap", GlobalAvgPool(), (x.name,))
            return _Value.of(_Tensor(name, roles, out_shape)).with_p((0.0, float(hh * ww)))
        if hh != ww:
            self.fail(f"a global max over a non-square {hh}x{ww} image")
        pooled = self.add("maxpool", MaxPool2D(hh, 1), (x.name,))
        name = self.add("flatten", Flatten(), (pooled,))
        return _Value.of(_Tensor(name, roles, out_shape))

    def flatten(self, x: _Tensor, out_shape: tuple[int, ...]) -> _Value:
        if not x.image:
            if out_shape == x.jshape:
                return _Value.of(x)
            self.fail(f"a reshape of a vector {x.jshape} to {out_shape}")
        if out_shape == x.jshape:
            return _Value.of(x)
        n = x.jshape[x.axis("N")]
        if x.roles[0] != "N" or len(out_shape) != 2 or out_shape[0] != n:
            self.fail(f"a reshape of an image {x.roles}{x.jshape} to {out_shape} (only flattening to (B, -1))")
        c, h, w = (x.jshape[x.axis(r)] for r in "CHW")
        ir_index = np.arange(c * h * w).reshape(c, h, w)
        order = np.transpose(ir_index, ["CHW".index(r) for r in x.roles[1:]]).ravel()
        name = self.add("flatten", Flatten(), (x.name,))
        identity = np.array_equal(order, np.arange(order.size))
        return _Value.of(_Tensor(name, ("N", "F"), out_shape, None if identity else order))

    # the walk -------------------------------------------------------------------------------------------------
    def run(self, jaxpr, consts, args) -> list:
        env: dict = {}

        def read(var):
            if type(var).__name__ == "Literal":
                return np.asarray(var.val)
            return env[var]

        for var, val in zip(jaxpr.constvars, consts):
            env[var] = np.asarray(val)
        for var, val in zip(jaxpr.invars, args):
            env[var] = val
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            self.eqn = eqn
            outs = self.equation(eqn, ins)
            if not eqn.primitive.multiple_results:
                outs = [outs]
            for var, val in zip(eqn.outvars, outs):
                if type(var).__name__ != "DropVar":
                    env[var] = val
        return [read(v) for v in jaxpr.outvars]

    def inline(self, eqn, ins):
        sub = None
        for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
            if key in eqn.params:
                sub = eqn.params[key]
                break
        if sub is None:
            self.fail("a call without a sub-jaxpr")
        if hasattr(sub, "consts") and hasattr(sub, "jaxpr"):
            jaxpr, consts = sub.jaxpr, sub.consts
        else:
            jaxpr, consts = sub, ()
        if len(jaxpr.invars) != len(ins):
            self.fail(f"a call with {len(ins)} arguments for {len(jaxpr.invars)} parameters")
        outer = self.eqn
        outs = self.run(jaxpr, consts, ins)
        self.eqn = outer
        return outs if eqn.primitive.multiple_results else outs[0]

    def equation(self, eqn, ins):
        prim = eqn.primitive.name
        if prim in _INLINE:
            return self.inline(eqn, ins)
        stacked = next((v for v in ins if isinstance(v, _Stacked)), None)
        if stacked is not None:
            return self.stacked(eqn, stacked)
        dropped = next((v for v in ins if isinstance(v, _Unsupported)), None)
        if dropped is not None:
            self.fail(f"{dropped.what} is used (of an LSTM scan only the final hidden state h is a graph value)")
        if prim not in _SEQUENCE_OPS and any(isinstance(v, _Value) and "T" in v.base.roles for v in ins):
            self.fail("a sequence (B, T, D) is read only by an LSTM cell under jax.lax.scan over its time axis "
                      "(and by element-wise scalar arithmetic and transposes before it)")
        if prim == "scan":
            return self.scan(eqn, ins)
        if all(isinstance(v, np.ndarray) or _is_key(v) for v in ins):
            try:
                out = eqn.primitive.bind(*ins, **eqn.params)
            except Exception as e:  # pragma: no cover - depends on the primitive
                self.fail(f"constant folding failed ({type(e).__name__}: {e})")
            return [_constant(o) for o in out] if eqn.primitive.multiple_results else _constant(out)
        if prim in _IDENTITY:
            new_dtype = eqn.params.get("new_dtype")
            if new_dtype is not None and not np.issubdtype(np.dtype(new_dtype), np.floating):
                self.fail(f"a conversion of a tensor to {np.dtype(new_dtype)}")
            return ins[0] if len(ins) == 1 else list(ins)
        if prim in ("add", "add_any", "sub"):
            sign = -1.0 if prim == "sub" else 1.0
            a, b = ins
            if isinstance(a, _Value) and isinstance(b, _Value):
                return self.add_values(a, b, sign)
            if isinstance(a, _Value):
                return self.scale_shift(a, None, sign * self.per_channel(b, a.base))
            neg = self.scale_shift(b, np.full(b.base.channels, sign), None)
            return self.scale_shift(neg, None, self.per_channel(a, b.base))
        if prim == "neg":
            return self.scale_shift(ins[0], np.full(ins[0].base.channels, -1.0), None)
        if prim == "mul":
            a, b = ins
            if isinstance(a, _Value) and isinstance(b, _Value):
                return self.mul_values(a, b)
            v, c = (a, b) if isinstance(a, _Value) else (b, a)
            return self.scale_shift(v, self.per_channel(c, v.base), None)
        if prim == "div":
            a, b = ins
            if not isinstance(a, _Value) or isinstance(b, _Value):
                self.fail("a division by a tensor (only division by constants)")
            c = self.per_channel(b, a.base)
            if np.any(c == 0):
                self.fail("a division by zero")
            if np.all(c == c[0]):
                return a.with_p([x / float(c[0]) for x in a.p])
            return self.scale_shift(a, 1.0 / c, None)
        if prim == "square":
            return self.power(ins[0], 2)
        if prim == "integer_pow":
            return self.power(ins[0], eqn.params["y"])
        if prim == "pow":
            a, b = ins
            if isinstance(b, _Value) or np.asarray(b).size != 1 or not isinstance(a, _Value):
                self.fail("a power with a tensor exponent")
            return self.power(a, float(np.asarray(b).ravel()[0]))
        if prim == "max":
            a, b = ins
            if isinstance(a, _Value) and isinstance(b, _Value):
                self.fail("the maximum of two tensors")
            v, c = (a, b) if isinstance(a, _Value) else (b, a)
            if np.any(np.asarray(c) != 0):
                self.fail("max(x, c) with c != 0 (only max(x, 0), the ReLU)")
            x = self.materialize(v)
            return _Value.of(dataclasses.replace(x, name=self.add("relu", Activation("relu"), (x.name,))))
        if prim == "transpose":  # only relabels axes: s, t are per IR channel and P is scalar
            v, perm = ins[0], eqn.params["permutation"]

            def relabel(x: _Tensor) -> _Tensor:
                return dataclasses.replace(x, roles=tuple(x.roles[i] for i in perm),
                                           jshape=tuple(x.jshape[i] for i in perm))

            return _Value(relabel(v.base), v.s, v.t, v.p, None if v.cached is None else relabel(v.cached))
        if prim == "conv_general_dilated":
            lhs, rhs = ins
            if not isinstance(lhs, _Value) or isinstance(rhs, _Value):
                self.fail("a convolution whose kernel is not a constant")
            return self.conv(self.materialize(lhs), rhs, eqn.params)
        if prim == "dot_general":
            a, b = ins
            if isinstance(a, _Value) and isinstance(b, _Value):
                self.fail("a product of two tensors")
            return self.dot(a, b, True, eqn.params) if isinstance(a, _Value) else self.dot(b, a, False, eqn.params)
        if prim in ("reduce_window_sum", "reduce_window_max"):
            return self.window(self.materialize(ins[0]), eqn.params, prim.split("_")[-1])
        if prim in ("reduce_sum", "reduce_max"):
            return self.reduce(self.materialize(ins[0]), eqn.params["axes"], prim.split("_")[-1])
        if prim == "reshape":
            if eqn.params.get("dimensions") is not None:
                self.fail("a reshape with a dimension permutation")
            return self.flatten(self.materialize(ins[0]), tuple(eqn.outvars[0].aval.shape))
        if prim == "squeeze":
            x = self.materialize(ins[0])
            dims = set(int(d) for d in eqn.params["dimensions"])
            if x.image and dims == {x.axis("H"), x.axis("W")}:
                roles = tuple(("F" if r == "C" else r) for i, r in enumerate(x.roles) if i not in dims)
                name = self.add("flatten", Flatten(), (x.name,))
                return _Value.of(_Tensor(name, roles, tuple(eqn.outvars[0].aval.shape)))
            self.fail(f"a squeeze of axes {sorted(dims)} of roles {x.roles}")
        if prim == "broadcast_in_dim":
            x = ins[0]
            if tuple(eqn.params["shape"]) == x.base.jshape:
                return x
            self.fail("a broadcast of a tensor")
        if prim in ("logistic", "tanh"):
            x = self.materialize(ins[0])
            kind = "sigmoid" if prim == "logistic" else "tanh"
            return _Value.of(dataclasses.replace(x, name=self.add(kind, Activation(kind), (x.name,))))
        hint = ""
        if prim in ("exp", "log", "log_softmax", "reduce_logsumexp"):
            hint = " (softmax is not HE-friendly: drop a final softmax, argmax is unchanged)"
        self.fail(f"primitive `{prim}` on a tensor is not a supported layer{hint}")

    def scan(self, eqn, ins) -> list:
        """An LSTM cell scanned over the time axis of the sequence -> an :class:`LSTM` node; the scan's outputs are
        the final hidden state (a graph value) and values that fail when used (the cell state, stacked outputs)."""
        params = eqn.params
        nc, ncar = int(params["num_consts"]), int(params["num_carry"])
        consts, carry, xs = list(ins[:nc]), list(ins[nc:nc + ncar]), list(ins[nc + ncar:])
        if params.get("reverse"):
            self.fail("a reversed scan (an LSTM reads the sequence forward)")
        if (ncar != 2 or len(xs) != 1 or not isinstance(xs[0], _Value)
                or not all(isinstance(v, np.ndarray) for v in consts + carry)):
            self.fail("a scan that is not an LSTM over the input sequence (constant weights, the two carries h and "
                      "c starting as constants, the sequence as the one scanned input)")
        if any(np.any(v != 0) for v in carry):
            self.fail("an LSTM scan from a nonzero initial state (h_0 = c_0 = 0 only)")
        seq = self.materialize(xs[0])
        if seq.roles != ("T", "N", "F"):
            self.fail(f"a scan over the axis of role {seq.roles[0]!r} of a tensor of roles {seq.roles} (scan over "
                      "the time axis of the (B, T, D) input: jax.lax.scan(cell, init, jnp.swapaxes(x, 0, 1)))")
        hidden = int(eqn.invars[nc].aval.shape[-1])
        w_x, w_h, bias, hi = _match_lstm(self.fail, params["jaxpr"], consts, seq.jshape[2], hidden)
        name = self.add("lstm", LSTM(w_x, w_h, bias), (seq.name,))
        out: list = [None, None]
        out[hi] = _Value.of(_Tensor(name, ("N", "F"), (seq.jshape[1], hidden)))
        out[1 - hi] = _Unsupported("the final cell state c of an LSTM scan")
        batch = seq.jshape[1]
        return out + [_Stacked(name, ("T", "N", "F"), (seq.jshape[0], batch, hidden))] * (len(eqn.outvars) - 2)

    def stacked(self, eqn, ys: _Stacked):
        """A transpose of the stacked hidden states, the slice of their last time step, its squeeze: ``h_T``."""
        prim, t_axis = eqn.primitive.name, ys.roles.index("T")
        if prim == "transpose":
            perm = eqn.params["permutation"]
            return _Stacked(ys.name, tuple(ys.roles[i] for i in perm), tuple(ys.jshape[i] for i in perm), ys.last)
        if prim == "slice" and not ys.last and eqn.params.get("strides") in (None, (1,) * len(ys.roles)):
            start, limit = tuple(eqn.params["start_indices"]), tuple(eqn.params["limit_indices"])
            t_len = ys.jshape[t_axis]
            if all((a, b) == ((t_len - 1, t_len) if i == t_axis else (0, ys.jshape[i]))
                   for i, (a, b) in enumerate(zip(start, limit))):
                return _Stacked(ys.name, ys.roles, tuple(eqn.outvars[0].aval.shape), True)
        if prim == "squeeze" and ys.last and tuple(eqn.params["dimensions"]) == (t_axis,):
            roles = tuple(r for r in ys.roles if r != "T")
            return _Value.of(_Tensor(ys.name, roles, tuple(eqn.outvars[0].aval.shape)))
        self.fail("the stacked hidden states of an LSTM scan are used other than for their last time step "
                  "(ys[-1], the final hidden state)")

    # post-passes ----------------------------------------------------------------------------------------------
    def finish(self, output: str, data_layout: str) -> Graph:
        # a bias add (lazy shift) after a bias-less conv / dense becomes its bias; batch-norm scales fold too with
        # fold_batchnorm (the fold pass's folding: hemx.nn.passes.fold)
        out, output = fold_nodes(self.nodes, output, keep="producer", affine=True, scales=self.fold_batchnorm,
                                 onto_bias=False)
        # keep only what the output depends on
        need = {output}
        for n in reversed(out):
            if n.name in need:
                need.update(n.inputs)
        kept = [n for n in out if n.name in need or isinstance(n.layer, Input)]
        if kept[-1].name != output:
            raise ShapeError("from_jax: internal error, the output is not the last node")  # pragma: no cover
        return Graph(tuple(kept), data_layout)


def from_jax(fn: Callable, example_input, *, input_layout: str = "NHWC", fold_batchnorm: bool = False) -> Graph:
    """Trace ``fn(x)`` with ``jax.make_jaxpr`` on ``example_input`` and import it as a :class:`Graph`.

    ``example_input``: a batched array, ``(B, H, W, C)`` for ``input_layout="NHWC"`` (``(B, C, H, W)`` for
    ``"NCHW"``) or ``(B, F)`` vectors; only its shape and dtype matter (trace in float64 with x64 enabled for a
    float64-exact import). ``fn`` returns one array ``(B, ...)``; its weights are constants of the trace (closed
    over, e.g. ``lambda x: model.apply(variables, x)``). ``fold_batchnorm=True`` folds batch-norms that follow a
    convolution / dense layer into its weights; by default they stay :class:`BatchNorm` nodes (per-channel shifts
    alone always become biases).

    The graph records ``input_layout`` (:attr:`Graph.data_layout <hemx.nn.graph.Graph.data_layout>`): its
    reference, ``compile(calibration=...)``, ``encrypt_input`` and :func:`~hemx.nn.infer.infer` take images as
    ``fn`` does, ``(B, H, W, C)`` for NHWC. Its nodes, and any image output, are channel-first ``(C, H, W)``.
    Raises :class:`~hemx.errors.ParameterError` for a primitive or pattern that is not a supported layer.
    """
    example = jax.ShapeDtypeStruct(np.shape(example_input), getattr(example_input, "dtype", np.float64))
    shape = tuple(example.shape)
    if input_layout not in ("NHWC", "NCHW"):
        raise ParameterError(f"input_layout must be 'NHWC' or 'NCHW', got {input_layout!r}")
    if len(shape) == 4:
        roles = ("N", "H", "W", "C") if input_layout == "NHWC" else ("N", "C", "H", "W")
        ir_shape = tuple(shape[roles.index(r)] for r in "CHW")
    elif len(shape) == 2:
        roles, ir_shape = ("N", "F"), (shape[1],)
    elif len(shape) == 3:  # a sequence: the graph input is (T * D,), time-major (hemx.nn.layers.lstm)
        roles, ir_shape = ("N", "T", "F"), (shape[1] * shape[2],)
    else:
        raise ShapeError(f"from_jax: example input must be (B, H, W, C), (B, C, H, W), (B, F) or a sequence "
                         f"(B, T, D), got {shape}")
    closed = jax.make_jaxpr(fn)(example)
    if len(closed.jaxpr.invars) != 1:
        raise ParameterError(f"from_jax: fn must take one array, its jaxpr has {len(closed.jaxpr.invars)} inputs")
    if len(closed.jaxpr.outvars) != 1:
        raise ParameterError(f"from_jax: fn must return one array, it returns {len(closed.jaxpr.outvars)}")
    builder = _Builder(fold_batchnorm)
    builder.nodes.append(Node("input", Input(ir_shape)))
    x = _Value.of(_Tensor("input", roles, shape))
    (out,) = builder.run(closed.jaxpr, closed.consts, [x])
    if isinstance(out, (_Unsupported, _Stacked)):
        what = out.what if isinstance(out, _Unsupported) else "the stacked hidden states of an LSTM scan"
        raise ParameterError(f"from_jax: the output is {what}; return the final hidden state h (or ys[-1])")
    if not isinstance(out, _Value):
        raise ParameterError("from_jax: the output does not depend on the input")
    builder.eqn = None
    result = builder.materialize(out)
    if result.roles[0] != "N":
        raise ParameterError(f"from_jax: the output's first axis must be the batch, its roles are {result.roles}")
    if result.order is not None:
        # a flattened image returned as is: the IR output is channel-first; tell the caller rather than permute
        raise ParameterError("from_jax: the output is a flattened image in the jaxpr's (not channel-first) order; "
                             "end the function with a dense layer or return the image")
    return builder.finish(result.name, input_layout)
