"""Activation: an element-wise polynomial (exact everywhere), ReLU (exact in the reference; encrypted as
``x * s'(x / (F B))`` (``F``: ``compile(relu_domain=)``, the factor above the bound ``B`` it stays valid to) with
the composite minimax sign of :mod:`hemx.nn.activations`), or sigmoid / tanh (exact in the
reference; encrypted as one Chebyshev interpolant of ``degree`` on the calibrated input range ``[-B, B]``,
:func:`hemx.nn.activations.smooth_fit`, whose ``error`` bounds the approximation there)."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ParameterError
from hemx.nn import activations as acts
from hemx.nn import steps as ops
from hemx.nn.layers.base import LayerRule, unchanged_shape
from hemx.nn.layers.lowering import relu_steps
from hemx.nn.steps import Step


#: the activation kinds
KINDS = ("relu", "poly", "sigmoid", "tanh")


@dataclasses.dataclass(frozen=True, eq=False)
class Activation:
    """An element-wise activation.

    ``kind="relu"``: exact ReLU in the reference; the compiler approximates it (composite minimax sign).
    ``kind="poly"``: the polynomial ``sum(coeffs[k] * x**k)`` (power basis), exact in every backend.
    ``kind="sigmoid"`` / ``"tanh"``: exact in the reference; the compiler fits a polynomial of ``degree`` (default
    :data:`~hemx.nn.activations.DEFAULT_SMOOTH_DEGREE`) on the calibrated input range (needs calibration data).
    """

    kind: str
    coeffs: tuple[float, ...] | None = None
    degree: int | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ParameterError(f"Activation kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind in acts.SMOOTH:
            if self.coeffs is not None:
                raise ParameterError(f"a {self.kind!r} activation takes no coefficients (its degree: degree=)")
            degree = acts.DEFAULT_SMOOTH_DEGREE if self.degree is None else self.degree
            object.__setattr__(self, "degree", acts.check_degree(degree, f"a {self.kind!r} activation"))
            return
        if self.degree is not None:
            raise ParameterError(f"a {self.kind!r} activation takes no degree (only 'sigmoid' and 'tanh' do)")
        if self.kind == "poly":
            if not self.coeffs:
                raise ParameterError("a 'poly' activation needs its coefficients")
            object.__setattr__(self, "coeffs", tuple(float(c) for c in self.coeffs))
        elif self.coeffs is not None:
            raise ParameterError("a 'relu' activation takes no coefficients")


def reference(layer: Activation, xs) -> np.ndarray:
    """xs[0]: (B, *shape) -> the same shape."""
    if layer.kind == "relu":
        return np.maximum(xs[0], 0.0)
    if layer.kind in acts.SMOOTH:
        return acts.SMOOTH[layer.kind](xs[0])
    return np.polynomial.polynomial.polyval(xs[0], np.array(layer.coeffs))


def lower(p, node, ins, lay) -> None:
    layer = node.layer
    if layer.kind == "poly":
        coeffs = np.asarray(layer.coeffs)
        clean = lay.clean and coeffs[0] == 0.0
        p.add(Step(ops.Poly(coeffs), node.name, tuple(ins), node.name, lay.replace(clean=clean),
                   ciphertexts=lay.num_cts, note=f"degree {len(coeffs) - 1}"), p.c.bounds.get(node.name))
    elif layer.kind in acts.SMOOTH:
        fit = acts.smooth_fit(layer.kind, input_bound(p, node.inputs[0], node.name, layer.kind), layer.degree)
        smooth_step(p, node.name, ins[0], node.name, lay, fit)
    else:  # "relu" (Activation accepts no other kind)
        # scaled by 1 / (F B): valid up to relu_domain = F times the input's bound (hemx.nn.activations)
        relu_steps(p, node.name, node.name, ins[0], node.name, lay, lay,
                   p.c.relu_domain * p.c.bounds[node.inputs[0]], p.c.bounds.get(node.name))


def input_bound(p, value: str, node: str, kind: str) -> float:
    """The calibrated bound of ``value``, the input of a sigmoid / tanh of ``node``; a ParameterError without it."""
    bound = p.c.bounds.get(value)
    if bound is None:
        raise ParameterError(f"node {node!r}: a {kind} is fitted on its calibrated input range: pass "
                             "calibration= to compile")
    return float(bound)


def smooth_step(p, node: str, x: str, out: str, lay, fit: acts.SmoothFit, *, group: str | None = None) -> None:
    """The step of a fitted sigmoid / tanh (:class:`~hemx.nn.activations.SmoothFit`) of value ``x`` (layout ``lay``)
    into value ``out``, bounded by the polynomial's peak on ``[-B, B]``. ``group``: the product that reads it as its
    first operand (the scales pass aims the polynomial at that product's rescale divisor, so the product lands on
    the context's scale when its other operand is there)."""
    clean = lay.clean and fit.stage.coeffs[0] == 0.0
    p.add(Step(ops.Poly(fit.stage), node, (x,), out, lay.replace(clean=clean), ciphertexts=lay.num_cts, group=group,
               note=f"{fit.kind} degree {fit.degree} on [-{fit.bound:.3g}, {fit.bound:.3g}], error {fit.error:.2g}"),
          fit.peak * 1.01)


RULE = LayerRule(Activation, 1, unchanged_shape, reference, lower,
                 ("Activation('poly')", "Activation('relu')", "Activation('sigmoid')", "Activation('tanh')"))
