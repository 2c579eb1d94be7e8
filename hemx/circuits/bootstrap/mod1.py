"""EvalMod: the homomorphic reduction modulo 1 of bootstrapping, as a scaled cosine plus double angles.

After CoeffsToSlots a slot holds ``t = u / (K + 1)`` with ``u = I + eps``: ``I`` an integer with ``|I| <= K``
(the multiple of ``q_0`` that ModRaise added) and ``eps = m / q_0`` the message, ``|eps| << 1``. EvalMod returns
``sin(2 pi u)``, which is ``2 pi eps`` up to ``O(eps^3)``:

    sin(2 pi u) = cos(2 pi (u - 1/4)) = C_r,   C_0 = cos(2 pi (u - 1/4) / 2^r),   C_{i+1} = 2 C_i^2 - 1

``C_0`` is a Chebyshev interpolant in ``t`` on [-1, 1] (:func:`hemx.circuits.evaluate_polynomial`), of the least
degree whose interpolation error is below :data:`TARGET_ERROR`; the ``r`` double angles each take one level and
double the relative error, so they trade depth in the polynomial for depth in squarings (Han-Ki, CT-RSA 2020;
Bossuat et al., Eurocrypt 2021).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from hemx.circuits.polynomial import chebyshev_coefficients, evaluate_polynomial, polynomial_depth
from hemx.errors import ParameterError

TARGET_ERROR = 2.0 ** -46  # interpolation error of C_0: near float64 evaluation noise at these degrees
MAX_DEGREE = 255


@dataclasses.dataclass(frozen=True)
class EvalMod:
    """A fixed EvalMod circuit.

    Attributes:
        k: bound on ``|I|`` (the input range is ``u`` in ``[-(K + 1), K + 1]``).
        double_angle: number ``r`` of double-angle steps.
        coefficients: Chebyshev coefficients of ``C_0`` as a function of ``t`` on [-1, 1].
        error: measured max interpolation error of ``C_0`` on a dense grid.
    """

    k: int
    double_angle: int
    coefficients: tuple[float, ...]
    error: float

    @classmethod
    def create(cls, k: int, *, double_angle: int = 3, max_degree: int = MAX_DEGREE,
               target_error: float = TARGET_ERROR) -> "EvalMod":
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ParameterError(f"the bound K on |I| must be a positive integer, got {k!r}")
        if isinstance(double_angle, bool) or not isinstance(double_angle, (int, np.integer)) or double_angle < 0:
            raise ParameterError(f"double_angle must be a non-negative integer, got {double_angle!r}")
        span = k + 1
        f = lambda t: np.cos(2.0 * np.pi * (span * t - 0.25) / 2.0 ** double_angle)  # noqa: E731
        grid = np.linspace(-1.0, 1.0, 20001)
        exact = f(grid)
        for degree in range(7, max_degree + 1, 2):
            c = chebyshev_coefficients(f, degree, (-1.0, 1.0))
            err = float(np.max(np.abs(np.polynomial.chebyshev.chebval(grid, c) - exact)))
            if err <= target_error:
                return cls(int(k), int(double_angle), tuple(float(v) for v in c), err)
        raise ParameterError(f"no Chebyshev interpolant of degree <= {max_degree} reaches {target_error:.1e} for "
                             f"K = {k} with {double_angle} double angles; use more double angles")

    @property
    def degree(self) -> int:
        return len(self.coefficients) - 1

    @property
    def depth(self) -> int:
        """Levels consumed (the input must be at the target scale: no change of variable)."""
        return polynomial_depth(self.coefficients, basis="chebyshev") + self.double_angle

    def __call__(self, ev, x, *, scale: float | None = None):
        """``sin(2 pi (K + 1) t)`` slot-wise for ``t`` in [-1, 1] (``x`` at the evaluator's default scale)."""
        y = evaluate_polynomial(ev, x, np.asarray(self.coefficients), basis="chebyshev", scale=scale)
        for _ in range(self.double_angle):
            sq = ev.mul(y, y)
            sq = ev.rescale(ev.add(sq, sq))
            y = ev.sub(sq, 1.0)
        return y

    def reference(self, t: np.ndarray) -> np.ndarray:
        """What the circuit computes, in float64 (for tests)."""
        y = np.polynomial.chebyshev.chebval(t, np.asarray(self.coefficients))
        for _ in range(self.double_angle):
            y = 2.0 * y * y - 1.0
        return y


def bound_for(hamming_weight: int | None, n: int, *, sigmas: float = 6.0, extra: int = 1) -> int:
    """A bound K on ``|I|`` for a ternary secret with ``hamming_weight`` non-zeros (all of ``n`` when None).

    ``I_j = (c_0 + c_1 s)_j / q_0`` rounded, with ``c_0, c_1`` uniform mod ``q_0``: a sum of ``h + 1`` terms
    uniform in [-1/2, 1/2], standard deviation ``sqrt((h + 1) / 12)``; ``sigmas`` of those over the ``n``
    coefficients, plus ``extra`` for the rounding (ModRaise's lift is exact).
    """
    h = n * 2 // 3 if hamming_weight is None else int(hamming_weight)
    return int(math.ceil(sigmas * math.sqrt((h + 1) / 12.0))) + int(extra)


__all__ = ["EvalMod", "bound_for", "TARGET_ERROR"]
