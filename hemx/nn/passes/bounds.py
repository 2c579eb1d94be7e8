"""Sound value bounds: interval arithmetic through a :class:`~hemx.nn.graph.Graph` from an input domain.

Every value is held as per-element intervals ``[lo, hi]`` (arrays of the node's output shape), propagated node by
node so that no input inside the domain can give a value outside its interval:

* affine maps (Conv2D, Dense, BatchNorm, Affine) in centre / radius form: for ``y = W x + b`` and ``x`` in
  ``[c - r, c + r]``, ``y`` lies in ``[W c + b - |W| r, W c + b + |W| r]`` (exact per element: each output is one
  row of ``W``, which reaches ``|W| r`` at the corner of the box its signs pick);
* monotone maps (AvgPool2D, GlobalAvgPool, Flatten, MaxPool2D, ReLU, sigmoid, tanh): ``[f(lo), f(hi)]``;
* Add: ``[lo_a + lo_b, hi_a + hi_b]``; Multiply: the smallest and largest of the four corner products;
* a polynomial activation: its exact range on each interval, from the end points and the real roots of its
  derivative that fall inside;
* an LSTM: its hidden state is ``o tanh(c)`` with the gate ``o`` in ``(0, 1)``: ``[-1, 1]`` (its gates' ranges are
  derived from its input's bound by :mod:`hemx.nn.layers.lstm`).

A layer type without a rule raises :class:`~hemx.errors.ParameterError` naming it. :func:`sound_bounds` gives
``{node: max(|lo|, |hi|)}``: the bounds the ``calibrate`` pass uses under ``compile(bounds="sound")``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ParameterError
from hemx.nn import activations as acts
from hemx.nn.graph import (
    LSTM, Activation, Add, Affine, AvgPool2D, BatchNorm, Conv2D, Dense, Flatten, GlobalAvgPool, Graph, Input,
    MaxPool2D, Multiply, apply_layer,
)

_MONOTONE = (AvgPool2D, GlobalAvgPool, Flatten, MaxPool2D)


def check_domain(domain, graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """``input_domain`` -> ``(lo, hi)``, each ``(1, *input_shape)``: a positive number ``b`` (``[-b, b]``), a pair
    ``(lo, hi)`` of numbers, or a pair of arrays of the input's shape; a ParameterError otherwise."""
    if domain is None:
        raise ParameterError("bounds='sound' derives every bound from the input domain: pass input_domain=(lo, hi) "
                             "(e.g. (0.0, 1.0) for pixels) or a bound b for [-b, b]")
    if isinstance(domain, (int, float, np.integer, np.floating)) and not isinstance(domain, bool):
        lo, hi = -float(domain), float(domain)
    elif isinstance(domain, (tuple, list)) and len(domain) == 2:
        lo, hi = domain
    else:
        raise ParameterError(f"input_domain must be a bound b or a pair (lo, hi), got {domain!r}")
    try:
        lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), graph.input_shape)[None]
        hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), graph.input_shape)[None]
    except (TypeError, ValueError) as e:
        raise ParameterError(f"input_domain's ends must be numbers or arrays of the input shape "
                             f"{graph.input_shape}: {e}") from None
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo <= hi)):
        raise ParameterError("input_domain must be finite with lo <= hi")
    return lo, hi


def _affine(layer, lo, hi):
    centre, radius = (lo + hi) / 2.0, (hi - lo) / 2.0
    if isinstance(layer, (Conv2D, Dense)):
        absolute = dataclasses.replace(layer, weight=np.abs(layer.weight), bias=None)
    elif isinstance(layer, BatchNorm):
        absolute = dataclasses.replace(layer, scale=np.abs(layer.scale), shift=np.zeros_like(layer.shift))
    else:  # Affine
        absolute = dataclasses.replace(layer, scale=abs(layer.scale), shift=0.0)
    c = apply_layer(layer, [centre])
    r = apply_layer(absolute, [radius])
    return c - r, c + r


def _poly_range(coeffs, lo, hi):
    """The exact range of the power-basis polynomial ``coeffs`` on each interval ``[lo, hi]`` (element-wise)."""
    poly = np.polynomial.Polynomial(np.asarray(coeffs, dtype=np.float64))
    ends = [poly(lo), poly(hi)]
    low, high = np.minimum(*ends), np.maximum(*ends)
    for root in poly.deriv().roots() if poly.degree() >= 2 else ():
        if abs(root.imag) > 1e-12 * max(1.0, abs(root.real)):
            continue
        x = float(root.real)
        inside = (lo <= x) & (x <= hi)
        v = poly(x)
        low = np.where(inside, np.minimum(low, v), low)
        high = np.where(inside, np.maximum(high, v), high)
    return low, high


def _activation(layer: Activation, lo, hi):
    if layer.kind == "poly":
        return _poly_range(layer.coeffs, lo, hi)
    f = (lambda x: np.maximum(x, 0.0)) if layer.kind == "relu" else acts.SMOOTH[layer.kind]
    return f(lo), f(hi)


def intervals(graph: Graph, domain) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{node: (lo, hi)}``, each ``(1, *node shape)``: every value's interval over all inputs in ``domain``
    (:func:`check_domain`); a ParameterError naming a node whose layer has no interval rule."""
    lo, hi = check_domain(domain, graph)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for node in graph.nodes:
        layer = node.layer
        ins = [out[i] for i in node.inputs]
        if isinstance(layer, Input):
            out[node.name] = (lo, hi)
        elif isinstance(layer, (Conv2D, Dense, BatchNorm, Affine)):
            out[node.name] = _affine(layer, *ins[0])
        elif isinstance(layer, _MONOTONE):
            out[node.name] = (apply_layer(layer, [ins[0][0]]), apply_layer(layer, [ins[0][1]]))
        elif isinstance(layer, Activation):
            out[node.name] = _activation(layer, *ins[0])
        elif isinstance(layer, Add):
            out[node.name] = (ins[0][0] + ins[1][0], ins[0][1] + ins[1][1])
        elif isinstance(layer, Multiply):
            (al, ah), (bl, bh) = ins
            corners = np.stack([al * bl, al * bh, ah * bl, ah * bh])
            out[node.name] = (corners.min(axis=0), corners.max(axis=0))
        elif isinstance(layer, LSTM):
            out[node.name] = (-np.ones((1, layer.hidden)), np.ones((1, layer.hidden)))
        else:
            raise ParameterError(f"node {node.name!r}: no interval rule for {type(layer).__name__}, so "
                                 "bounds='sound' cannot bound it; compile with calibrated bounds (calibration=)")
    return out


def sound_bounds(graph: Graph, domain) -> dict[str, float]:
    """``{node: max |x|}`` over every input in ``domain`` (:func:`intervals`), at least ``1e-12``."""
    return {k: max(float(np.max(np.abs(lo))), float(np.max(np.abs(hi))), 1e-12)
            for k, (lo, hi) in intervals(graph, domain).items()}


__all__ = ["intervals", "sound_bounds", "check_domain"]
