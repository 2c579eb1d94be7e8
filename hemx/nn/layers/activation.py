"""Activation: an element-wise polynomial (exact everywhere) or ReLU (exact in the reference; encrypted as
``x * s'(x / B)`` with the composite minimax sign of :mod:`hemx.nn.activations`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ParameterError
from hemx.nn import steps as ops
from hemx.nn.layers.base import LayerRule, unchanged_shape
from hemx.nn.layers.lowering import relu_steps
from hemx.nn.steps import Step


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


def reference(layer: Activation, xs) -> np.ndarray:
    """xs[0]: (B, *shape) -> the same shape."""
    if layer.kind == "relu":
        return np.maximum(xs[0], 0.0)
    return np.polynomial.polynomial.polyval(xs[0], np.array(layer.coeffs))


def lower(p, node, ins, lay) -> None:
    layer = node.layer
    if layer.kind == "poly":
        coeffs = np.asarray(layer.coeffs)
        clean = lay.clean and coeffs[0] == 0.0
        p.add(Step(ops.Poly(coeffs), node.name, tuple(ins), node.name, lay.replace(clean=clean),
                   ciphertexts=lay.num_cts, note=f"degree {len(coeffs) - 1}"), p.c.bounds.get(node.name))
    else:  # "relu" (Activation accepts no other kind)
        relu_steps(p, node.name, node.name, ins[0], node.name, lay, lay, p.c.bounds[node.inputs[0]],
                   p.c.bounds.get(node.name))


RULE = LayerRule(Activation, 1, unchanged_shape, reference, lower, ("Activation('poly')", "Activation('relu')"))
