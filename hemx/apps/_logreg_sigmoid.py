"""Least-squares odd polynomials for the logistic sigmoid on a symmetric interval.

``sigma(x) - 1/2`` is an odd function, so its best L2 approximation on ``[-B, B]`` by polynomials of degree
``d`` uses only odd powers: ``sigma(x) ~ 1/2 + c_1 x + c_3 x^3 + ... + c_d x^d``. The fit is a discrete least
squares on a fine uniform grid (a close stand-in for the continuous L2 fit), solved in the variable ``x / B``
for conditioning. Outside ``[-B, B]`` the polynomial diverges: the interval must cover the inner products the
training meets (``hemx.apps.logreg`` reports the largest one of the plaintext run).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ParameterError

SUPPORTED_DEGREES = (1, 3, 5, 7)
FIT_POINTS = 4001


def sigmoid(x) -> np.ndarray:
    """The exact logistic function ``1 / (1 + exp(-x))`` (float64, overflow-safe)."""
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * (1.0 + np.tanh(0.5 * x))


@dataclasses.dataclass(frozen=True)
class SigmoidPoly:
    """``sigma(x) ~ 1/2 + sum_k odd_coeffs[k] * x^(2k+1)`` on ``[-bound, bound]``.

    Attributes:
        degree: odd degree (1, 3, 5 or 7).
        bound: half-width B of the fitting interval.
        odd_coeffs: ``(c_1, c_3, ..., c_degree)`` as Python floats.
    """

    degree: int
    bound: float
    odd_coeffs: tuple[float, ...]

    def __call__(self, x) -> np.ndarray:
        """Evaluate the polynomial: float64 array shaped like ``x``."""
        x = np.asarray(x, dtype=np.float64)
        out = np.full(x.shape, 0.5)
        for k, c in enumerate(self.odd_coeffs):
            out = out + c * x ** (2 * k + 1)
        return out

    def max_error(self, points: int = 20001) -> float:
        """Largest ``|sigma(x) - p(x)|`` on a uniform grid of ``[-bound, bound]``."""
        grid = np.linspace(-self.bound, self.bound, points)
        return float(np.max(np.abs(sigmoid(grid) - self(grid))))


def fit_sigmoid(degree: int = 3, bound: float = 8.0) -> SigmoidPoly:
    """Least-squares odd polynomial of ``degree`` for the sigmoid on ``[-bound, bound]``."""
    if degree not in SUPPORTED_DEGREES:
        raise ParameterError(f"sigmoid degree must be one of {SUPPORTED_DEGREES}, got {degree!r}")
    if not np.isfinite(bound) or not bound > 0:
        raise ParameterError(f"the sigmoid interval bound must be positive, got {bound!r}")
    bound = float(bound)
    t = np.linspace(-1.0, 1.0, FIT_POINTS)  # x / bound
    powers = np.arange(1, degree + 1, 2)
    basis = t[:, None] ** powers[None, :]
    target = sigmoid(bound * t) - 0.5
    scaled, *_ = np.linalg.lstsq(basis, target, rcond=None)
    coeffs = tuple(float(a / bound ** p) for a, p in zip(scaled, powers))
    return SigmoidPoly(int(degree), bound, coeffs)
