"""LSTM: a long short-term memory layer over a sequence, unrolled into packed steps (one set per time step).

The record holds ``w_x`` ``(D, 4H)``, ``w_h`` ``(H, 4H)`` and ``bias`` ``(4H,)`` with the gates in the column
order **i, f, g, o** (input gate, forget gate, cell candidate, output gate: columns ``[0, H)``, ``[H, 2H)``,
``[2H, 3H)``, ``[3H, 4H)``). From ``h_0 = c_0 = 0``, for ``t = 0 .. T-1``::

    z = x_t @ w_x + h @ w_h + bias;  i, f, g, o = z[:H], z[H:2H], z[2H:3H], z[3H:]
    c = sigmoid(f) * c + sigmoid(i) * tanh(g);  h = sigmoid(o) * tanh(c)

The input is the sequence **flattened time-major**, a ``(T * D,)`` vector (``x[t, d]`` at feature ``t * D + d``;
the IR's tensors are ``(F,)`` vectors or ``(C, H, W)`` images, so ``(B, T, D)`` data is reshaped to
``(B, T * D)``); ``T`` follows from the input size. The output is the last hidden state ``h_T``, ``(H,)``.

Lowered, every time step is, per gate, one packed dense map of the whole input vector whose weight is zero outside
``x_t``'s ``D`` features (this selects ``x_t``: no slicing op, and the map holds only ``x_t``'s diagonals) plus,
after the first step, one dense map of ``h || h`` (:func:`doubled_hidden`: ``H`` diagonals instead of ``2H - 1``)
and their sum; the gates' sigmoid / tanh are one Chebyshev interpolant each (:func:`hemx.nn.activations.smooth_fit`,
of ``degree``) on the gate's range; the products are ciphertext products (the
:class:`~hemx.nn.layers.multiply.Multiply` op). All the ``H``-vectors share one layout (``f -> f``), so the
products need no rotation. The levels and bootstraps passes place levels and bootstraps between and inside the
time steps like any other steps.

The ranges the polynomials are fitted on: when the LSTM reads the network input and calibration data is given,
every gate's and the cell's ``max |x|`` over the calibration batch and all time steps, times the margin; else the
bound that holds for any input within the input's calibrated bound ``X``: ``sum_d |w_x[d, j]| X + sum_k |w_h[k, j]|
+ |bias_j|`` for gate column ``j`` (as ``|h| <= 1``) and ``T`` for the cell (as ``|c_t| <= |c_{t-1}| + 1``), both
with a 5% allowance for the polynomials' error.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ParameterError, ShapeError
from hemx.nn import activations as acts
from hemx.nn import packing
from hemx.nn import steps as ops
from hemx.nn.layers.activation import smooth_step
from hemx.nn.layers.base import LayerRule, frozen_array
from hemx.nn.layers.lowering import linear_step
from hemx.nn.steps import Step

#: the gates, in their column order
GATES = ("i", "f", "g", "o")
#: each gate's activation
GATE_KIND = {"i": "sigmoid", "f": "sigmoid", "g": "tanh", "o": "sigmoid"}
_ALLOWANCE = 1.05  # headroom of the derived ranges for the polynomials' error (|h|, |c| slightly above 1, t)


@dataclasses.dataclass(frozen=True, eq=False)
class LSTM:
    """An LSTM layer (module docstring): ``w_x`` ``(D, 4H)``, ``w_h`` ``(H, 4H)``, ``bias`` ``(4H,)`` (gates i, f,
    g, o); input ``(T * D,)`` (time-major), output the last hidden state ``(H,)``. ``degree``: of the sigmoid and
    tanh polynomials the compiler fits."""

    w_x: np.ndarray
    w_h: np.ndarray
    bias: np.ndarray
    degree: int = acts.DEFAULT_SMOOTH_DEGREE

    def __post_init__(self):
        object.__setattr__(self, "w_x", frozen_array(self.w_x, "LSTM w_x", 2))
        object.__setattr__(self, "w_h", frozen_array(self.w_h, "LSTM w_h", 2))
        object.__setattr__(self, "bias", frozen_array(self.bias, "LSTM bias", 1))
        h4 = self.w_h.shape[1]
        if h4 % 4 or self.w_h.shape != (h4 // 4, h4):
            raise ShapeError(f"LSTM w_h must be (H, 4H), got {self.w_h.shape}")
        if self.w_x.shape[1] != h4 or self.bias.shape != (h4,):
            raise ShapeError(f"LSTM w_x must be (D, {h4}) and bias ({h4},) for H = {h4 // 4}, got "
                             f"{self.w_x.shape} and {self.bias.shape}")
        object.__setattr__(self, "degree", acts.check_degree(self.degree, "the LSTM's sigmoid / tanh"))

    @property
    def hidden(self) -> int:
        return self.w_h.shape[0]

    @property
    def features(self) -> int:
        return self.w_x.shape[0]

    def gate(self, k: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gate ``k``'s columns: ``(w_x (D, H), w_h (H, H), bias (H,))``."""
        cols = slice(GATES.index(k) * self.hidden, (GATES.index(k) + 1) * self.hidden)
        return self.w_x[:, cols], self.w_h[:, cols], self.bias[cols]


def steps_of(layer: LSTM, size: int, where: str) -> int:
    """``T`` for an input vector of ``size`` features, else a ShapeError."""
    if size % layer.features:
        raise ShapeError(f"{where}: an input of {size} features is not a sequence of {layer.features}-vectors "
                         f"(the LSTM reads (T * {layer.features},), time-major)")
    return size // layer.features


def shape(layer: LSTM, ins, where: str) -> tuple[int, ...]:
    x = ins[0]
    if len(x) != 1:
        raise ShapeError(f"{where}: the LSTM reads a (T * D,) vector (the sequence, time-major), got {x}")
    steps_of(layer, x[0], where)
    return (layer.hidden,)


def unroll(layer: LSTM, x: np.ndarray) -> dict:
    """The float64 recurrence on ``x`` ``(B, T * D)``: ``{"z": (T, 4, B, H) gate pre-activations (i, f, g, o),
    "c": (T, B, H) cells, "h": (T, B, H) hidden states}``."""
    seq = x.reshape(x.shape[0], -1, layer.features)
    b, t_len = seq.shape[:2]
    h = np.zeros((b, layer.hidden))
    c = np.zeros((b, layer.hidden))
    zs, cs, hs = [], [], []
    sig, tanh = acts.SMOOTH["sigmoid"], acts.SMOOTH["tanh"]
    for t in range(t_len):
        z = seq[:, t] @ layer.w_x + h @ layer.w_h + layer.bias
        i, f, g, o = np.split(z, 4, axis=1)
        c = sig(f) * c + sig(i) * tanh(g)
        h = sig(o) * tanh(c)
        zs.append(np.stack([i, f, g, o]))
        cs.append(c)
        hs.append(h)
    return {"z": np.stack(zs), "c": np.stack(cs), "h": np.stack(hs)}


def reference(layer: LSTM, xs) -> np.ndarray:
    """xs[0]: (B, T * D) -> the last hidden state (B, H)."""
    return unroll(layer, xs[0])["h"][-1]


def ranges(p, node, t_len: int) -> tuple[dict, float]:
    """``({gate: bound of its pre-activation}, bound of the cell)`` the polynomials are fitted on (module
    docstring: calibrated when the LSTM reads the network input, else derived from the weights)."""
    layer, c = node.layer, p.c
    if c.calibration is not None and node.inputs[0] == c.nodes[0].name:
        x = np.asarray(c.calibration, dtype=np.float64).reshape(-1, t_len * layer.features)
        run = unroll(layer, x)
        tiny = 1e-12
        gates = {k: max(float(np.max(np.abs(run["z"][:, n]))), tiny) * c.margin for n, k in enumerate(GATES)}
        return gates, max(float(np.max(np.abs(run["c"]))), tiny) * c.margin
    x_bound = c.bounds.get(node.inputs[0])
    if x_bound is None:
        raise ParameterError(f"node {node.name!r} (LSTM): its sigmoid / tanh are fitted on the calibrated ranges: "
                             "pass calibration= to compile")
    gates = {}
    for k in GATES:
        w_x, w_h, bias = layer.gate(k)
        col = np.abs(w_x).sum(axis=0) * x_bound + np.abs(w_h).sum(axis=0) * _ALLOWANCE + np.abs(bias)
        gates[k] = max(float(np.max(col)), 1e-12)
    return gates, t_len * _ALLOWANCE


def _product(p, node, a: str, b: str, out: str, bound: float) -> None:
    """``out = a * b``: one ciphertext product per ciphertext (the Multiply op), the operands in one layout. ``a``
    is a polynomial of the group ``out`` (aimed at this product's rescale divisor; ``b`` at the context's scale), so
    ``out`` is at the context's scale exactly and sums of products need no alignment."""
    lay, other = p.layouts[a], p.layouts[b]
    p.add(Step(ops.Mul(), node.name, (a, b), out, lay.replace(clean=lay.clean or other.clean), depth=1,
               ciphertexts=lay.num_cts, ct_mults=lay.num_cts, group=out, note="a * b"), bound)


def _sum(p, node, a: str, b: str, out: str, bound: float) -> None:
    lay, other = p.layouts[a], p.layouts[b]
    p.add(Step(ops.Add(), node.name, (a, b), out, lay.replace(clean=lay.clean and other.clean),
               ciphertexts=lay.num_cts, note="a + b"), bound)


def doubled_hidden(p, node, h: str, pre: str) -> str | None:
    """``h || h``: the hidden state next to a copy of itself (one rotation and one sum), so that each recurrent map
    ``w_h`` needs ``H`` diagonals instead of ``2H - 1``: an ``H``-vector in a ring of more slots has no wrap-around,
    and with the copy every output ``j`` reads input ``k >= j`` at ``k`` and ``k < j`` at ``k + H``. The four gates
    share it (and its rotations: :func:`hemx.nn.passes.plan.share_rotations`). None where ``h`` is not one clean
    ciphertext holding ``h[k]`` at slot ``k`` with room for the copy: the maps then read ``h`` itself."""
    hid, lay = node.layer.hidden, p.layouts[h]
    if lay.num_cts != 1 or not lay.clean or 2 * hid > lay.slots or not np.array_equal(
            lay.positions.reshape(-1), np.arange(hid)):
        return None
    bound = p.value_bound.get(h)
    k = lay.slots - hid  # a rotation by -H: h[k] to slot H + k
    shifted = packing.Layout((hid,), lay.slots, np.arange(hid, 2 * hid, dtype=np.int64), 1)
    p.add(Step(ops.Rotate(k), node.name, (h,), f"{pre}/h_moved", shifted, rotations=(k,), key_switches=1,
               ciphertexts=1, note=f"h to slots {hid}..{2 * hid - 1}"), bound)
    p.add(Step(ops.Add(), node.name, (h, f"{pre}/h_moved"), f"{pre}/hh", packing.vector_layout(2 * hid, lay.slots),
               ciphertexts=1, note="h || h"), bound)
    return f"{pre}/hh"


def doubled_weight(m: np.ndarray) -> np.ndarray:
    """``(H, H)`` map ``y = m @ h`` -> the ``(H, 2H)`` map of ``h || h`` (:func:`doubled_hidden`) with the same
    output: ``m[j, k]`` at column ``k`` for ``k >= j`` and at column ``k + H`` for ``k < j``."""
    hid = m.shape[0]
    upper = np.triu(np.ones((hid, hid), dtype=bool))
    out = np.zeros((hid, 2 * hid))
    out[:, :hid] = np.where(upper, m, 0.0)
    out[:, hid:] = np.where(upper, 0.0, m)
    return out


def lower(p, node, ins, lay) -> None:
    """Per time step: the gates (dense maps of ``x_t`` and ``h``, their sum, the polynomial), ``c = f c + i g``,
    ``h = o tanh(c)``; the last ``h`` is the node's value."""
    layer, name = node.layer, node.name
    t_len = steps_of(layer, lay.shape[0], f"node {name!r} (LSTM)")
    gate_bound, cell_bound = ranges(p, node, t_len)
    fits = {k: acts.smooth_fit(GATE_KIND[k], gate_bound[k], layer.degree) for k in GATES}
    cell_fit = acts.smooth_fit("tanh", cell_bound, layer.degree)
    d, hid, ratio = layer.features, layer.hidden, p.c.bsgs_ratio
    h = c = None
    for t in range(t_len):
        pre = f"{name}/t{t}"
        act = {}
        hh = None if h is None or not np.any(layer.w_h) else doubled_hidden(p, node, h, pre)
        for k in GATES:
            if k == "f" and c is None:  # c_0 = 0: the first step has no f * c
                continue
            w_x, w_h, bias = layer.gate(k)
            select = np.zeros((hid, t_len * d))
            select[:, t * d:(t + 1) * d] = w_x.T  # x_t's features of the whole sequence
            z = f"{pre}/z{k}"
            recurrent = h is not None and bool(np.any(w_h))  # (a gate without recurrent weights reads x_t only)
            linear_step(p, node, (ins[0],), packing.dense_map(lay, select, bias, out_stride=1, bsgs_ratio=ratio),
                        out=f"{pre}/x{k}" if recurrent else z, bound=gate_bound[k])
            if recurrent:
                source, weight = (h, w_h.T) if hh is None else (hh, doubled_weight(w_h.T))
                linear_step(p, node, (source,), packing.dense_map(p.layouts[source], weight, None, out_stride=1,
                                                                  bsgs_ratio=ratio),
                            out=f"{pre}/h{k}", bound=gate_bound[k])
                _sum(p, node, f"{pre}/x{k}", f"{pre}/h{k}", z, gate_bound[k])
            act[k] = f"{pre}/{k}"
            # f and g are the first operands of the products f * c and g * i (their groups)
            group = {"f": f"{pre}/fc", "g": f"{pre}/c" if c is None else f"{pre}/ig"}.get(k)
            smooth_step(p, name, z, act[k], p.layouts[z], fits[k], group=group)
        # (a polynomial's output first in each product: the Poly op reserves a level for the product's other
        # operand when it is the second, which is what a ReLU's x * s'(x) needs and the products here do not)
        if c is None:
            c_new = f"{pre}/c"
            _product(p, node, act["g"], act["i"], c_new, cell_bound)
        else:
            _product(p, node, act["f"], c, f"{pre}/fc", cell_bound)
            _product(p, node, act["g"], act["i"], f"{pre}/ig", cell_bound)
            c_new = f"{pre}/c"
            _sum(p, node, f"{pre}/fc", f"{pre}/ig", c_new, cell_bound)
        c = c_new
        h = name if t == t_len - 1 else f"{pre}/h"
        smooth_step(p, name, c, f"{pre}/tanh_c", p.layouts[c], cell_fit, group=h)
        _product(p, node, f"{pre}/tanh_c", act["o"], h, _ALLOWANCE if h != name else
                 p.c.bounds.get(name, _ALLOWANCE))


RULE = LayerRule(LSTM, 1, shape, reference, lower, ("LSTM",))
