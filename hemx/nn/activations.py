"""Polynomial approximations of the non-polynomial activations: sign and ReLU (max pooling uses ReLU:
``max(a, b) = b + relu(a - b)``, :mod:`hemx.nn.compiler`), and sigmoid and tanh (:func:`smooth_fit`: one
Chebyshev interpolant on the calibrated range ``[-B, B]``, for gated recurrent cells).

CKKS evaluates only additions and products, so ReLU is computed as ``relu(x) = x (1 + sign(x)) / 2`` with
``sign`` replaced by a *composite* of odd polynomials (Lee, Lee, Kim, No, "Minimax approximation of sign function
by composite polynomial", and their ResNet-20 of ICML'22, degrees 15/15/27):

* the input is first mapped to ``t = x / B`` (``B``: the calibrated bound of the activation's input), so the sign is
  needed on ``[-1, 1]`` only; inputs with ``|x| < eps B`` are not resolved (the gap);
* stage 1 is the odd minimax polynomial of ``sign`` on ``[eps, 1]`` (odd, so ``[-1, -eps]`` follows); it maps
  ``[eps, 1]`` into ``[1 - E_1, 1 + E_1]``, which, divided by ``1 + E_1``, is ``[a_2, 1]`` with ``a_2 >> eps``;
* stage ``i`` is the minimax polynomial of ``sign`` on ``[a_i, 1]``, and so on: the gap widens geometrically and
  the last stage's error ``E`` is the composite's error on ``[-1, -eps] u [eps, 1]``.

Each stage is found by the Remez exchange on the odd Chebyshev basis ``T_1, T_3, ..`` (float64, a dense grid for
the extrema) and is evaluated by :func:`hemx.circuits.evaluate_polynomial` in the Chebyshev basis on ``[-1, 1]``
(``B`` folded into the first stage's interval ``(-B, B)``: one level for the change of variable). The last stage
is folded with ``(1 + p) / 2``, so ReLU is ``x * s'(x)``: one ciphertext product more.

Default composite (:data:`DEFAULT_DEGREES` = 7, 7, 15, 15 at ``eps = 2^-10``), measured by :func:`sign_composite`
on a grid of 2^20 points (the figures ``SignComposite.error`` and ``.peak`` hold): ``|p(t) - sign(t)| <= 2^-10.36``
on ``[-1, -eps] u [eps, 1]``, ``max |p| <= 1 + 7.7e-4`` on ``[-1, 1]``; depth 3 + 3 + 4 + 4 = 14, plus 1 for the
change of variable and 1 for the product: 16 levels for a ReLU. On ``[-B, B]`` the ReLU error is at most
``B * max(E / 2, eps (1 + peak) / 2) ~ B * 2^-10`` (:func:`relu_error_bound`), plus the CKKS noise of the
evaluation. Lee et al.'s 15/15/27 reach only ``2^-2.2`` here at ``eps = 2^-12`` (``2^-7.3`` at ``2^-10``; both
refused by :func:`sign_composite`, whose error must be at most ``2 eps``): each stage widens the gap by a factor ~
its degree (12.6 for degree 15), so four stages of small degree beat three of larger degree at the same depth.
Other measured composites (error on the resolved set, depth of the stages):
``(15, 15, 15)`` at ``2^-8``: ``2^-14.1``, 12; ``(7, 15, 15, 15)`` at ``2^-10``: ``2^-19.5``, 15;
``(15, 15, 15, 15)`` at ``2^-12``: ``2^-11.5``, 16.

**Valid domain above the bound** (``compile(relu_domain=F)``, default :data:`DEFAULT_RELU_DOMAIN` = 4). A
calibrated bound ``B`` is a measurement: a held-out input can push an activation past it, where ``p(x / B)`` has
left ``[-1, 1]`` and diverges (degree ``D`` grows like ``|t|^D``). The runtime therefore scales by ``1 / S`` with
``S = F B``: ``t = x / S`` stays in ``[-1, 1]`` for every ``|x| <= F B``. Scaling alone would widen the unresolved
gap in ``x`` from ``2^-10 B`` to ``2^-10 F B``, so the composite is taken at a gap ``e = 2^-10 / F``
(:func:`domain_composite`, :data:`DOMAIN_COMPOSITES`). With ``E`` its error: for ``e S <= |x| <= S``,
``|relu~(x) - relu(x)| = |x| |p(t) - sign(t)| / 2 <= |x| E / 2``; for ``|x| < e S = 2^-10 B`` it is at most
``|x| (1 + peak) / 2 <= 2^-10 B (1 + peak) / 2``. So on all of ``[-F B, F B]`` the error is at most
``max(F B E / 2, 2^-10 B (1 + peak) / 2)``, which for the tabulated composites (``F E <= 2^-9.5``) is the same
``~2^-10 B`` as at ``F = 1`` (:func:`relu_error_bound` with ``domain=``). The price is the depth of a composite
with an ``F`` times narrower gap (each stage of degree ``d`` widens the gap by about ``d``):
``(15, 15, 15, 15)`` at ``2^-12`` (error ``2^-11.54``, depth 16) instead of ``(7, 7, 15, 15)`` at ``2^-10``
(depth 14): **2 levels per ReLU** (18 with the scaling and the product). ``F = 2``: ``(7, 15, 15, 15)`` at
``2^-11``, +1; ``F = 8``: ``(7, 7, 15, 15, 15)`` at ``2^-13``, +4. (The alternative, Cheon, Kim, Kim and Lee's
domain-extension polynomials, applies cheap odd polynomials first that fold ``[-L^n B, L^n B]`` into
``[-B, B]``, a few levels per factor ``L``; not implemented here.) Values beyond ``F B`` are the only ones a ReLU
or max comparison can get wrong; ``encrypt_input`` refuses inputs beyond the network's input bound.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import Sequence

import numpy as np

from hemx.circuits import evaluate_polynomial, polynomial_depth
from hemx.errors import AccuracyWarning, ParameterError, external_stacklevel

DEFAULT_DEGREES = (7, 7, 15, 15)
DEFAULT_EPS = 2.0 ** -10
#: the factor above the calibrated bound a compiled ReLU / max stays valid to by default (``compile(relu_domain=)``)
DEFAULT_RELU_DOMAIN = 4.0
#: the default composite for a valid domain ``F`` times the calibrated bound (:func:`domain_composite`): the input is
#: scaled by ``1 / (F B)`` and the gap shrunk to ``eps / F``, so the gap in ``x`` stays ``2^-10 B``; measured
#: errors ``2^-10.36`` / ``2^-10.94`` / ``2^-11.54`` / ``2^-15.19``, depths 14 / 15 / 16 / 18
DOMAIN_COMPOSITES = {1.0: ((7, 7, 15, 15), 2.0 ** -10), 2.0: ((7, 15, 15, 15), 2.0 ** -11),
                     4.0: ((15, 15, 15, 15), 2.0 ** -12), 8.0: ((7, 7, 15, 15, 15), 2.0 ** -13)}
#: :func:`sign_composite` refuses a composite whose error on the resolved set exceeds this many times its eps
MAX_ERROR_PER_EPS = 2.0
_GRID = 1 << 16  # points of the dense grid the Remez exchange searches for extrema
_CHECK_GRID = 1 << 20  # points the measured error and peak are taken on


# ------------------------------------------------------------------------------------------------------------
# Remez on the odd Chebyshev basis
# ------------------------------------------------------------------------------------------------------------


def _odd_basis(x: np.ndarray, terms: int) -> np.ndarray:
    """``T_1(x), T_3(x), .., T_{2 terms - 1}(x)``: ``(len(x), terms)``."""
    theta = np.arccos(np.clip(x, -1.0, 1.0))
    return np.cos(np.outer(theta, 2 * np.arange(terms) + 1))


def _odd_to_chebyshev(c_odd: np.ndarray) -> np.ndarray:
    """Odd-basis coefficients -> full Chebyshev coefficients ``c_0 .. c_d`` (zeros at even indices)."""
    out = np.zeros(2 * len(c_odd))
    out[1::2] = c_odd
    return out


def _remez_sign(degree: int, a: float, iterations: int = 60) -> tuple[np.ndarray, float]:
    """Odd degree-``degree`` minimax approximation of 1 on ``[a, 1]`` -> (odd Chebyshev coefficients, error)."""
    terms = (degree + 1) // 2
    # a grid dense near a (where the error oscillates fastest) and over the whole interval
    grid = np.unique(np.concatenate([a + (1 - a) * (1 - np.cos(np.linspace(0, np.pi, _GRID))) / 2,
                                     np.geomspace(a, 1.0, _GRID)]))
    basis = _odd_basis(grid, terms)
    # initial reference: Chebyshev extrema mapped to [a, 1]
    ref = a + (1 - a) * (1 - np.cos(np.pi * np.arange(terms + 1) / terms)) / 2
    best, best_err = None, math.inf
    for _ in range(iterations):
        m = np.hstack([_odd_basis(ref, terms), ((-1.0) ** np.arange(terms + 1))[:, None]])
        try:
            sol = np.linalg.solve(m, np.ones(terms + 1))
        except np.linalg.LinAlgError:
            break
        c = sol[:terms]
        err = basis @ c - 1.0
        peak = float(np.max(np.abs(err)))
        if peak < best_err:
            best, best_err = c, peak
        level = abs(sol[terms])
        if peak - level <= 1e-9 * max(peak, 1e-300):
            break
        # new reference: the extrema of the error, one per run of constant sign, alternating
        sign = np.sign(err)
        sign[sign == 0] = 1
        cuts = np.flatnonzero(np.diff(sign)) + 1
        runs = np.split(np.arange(len(grid)), cuts)
        ext = np.array([r[np.argmax(np.abs(err[r]))] for r in runs])
        while len(ext) > terms + 1:  # drop the smallest end extremum until the count fits
            if abs(err[ext[0]]) < abs(err[ext[-1]]):
                ext = ext[1:]
            else:
                ext = ext[:-1]
        if len(ext) < terms + 1:
            break
        ref = grid[ext]
    return best, best_err


@dataclasses.dataclass(frozen=True)
class SignComposite:
    """A composite odd polynomial ``p = p_k o .. o p_1`` approximating ``sign`` on ``[-1, -eps] u [eps, 1]``.

    Attributes:
        degrees: the stages' degrees.
        eps: the half-width of the unresolved gap around 0.
        stages: each stage's Chebyshev coefficients on ``[-1, 1]`` (``numpy.polynomial.chebyshev`` convention).
        error: measured ``max |p(t) - sign(t)|`` on ``[-1, -eps] u [eps, 1]`` (dense grid).
        peak: measured ``max |p(t)|`` on ``[-1, 1]``.
        depth: levels of the stages on ``[-1, 1]`` (without the change of variable ``x / B``).
    """

    degrees: tuple[int, ...]
    eps: float
    stages: tuple[np.ndarray, ...]
    error: float
    peak: float
    depth: int

    def __call__(self, t) -> np.ndarray:
        y = np.asarray(t, dtype=np.float64)
        for c in self.stages:
            y = np.polynomial.chebyshev.chebval(y, c)
        return y


def sign_composite(degrees: Sequence[int] = DEFAULT_DEGREES, eps: float = DEFAULT_EPS, *,
                   on_accuracy: str = "raise") -> SignComposite:
    """The minimax composite of the given odd ``degrees`` for the gap ``eps`` (cached; ~1 s for the default).

    The composite must resolve the sign to the accuracy ``eps`` names: its measured error on the resolved set
    ``[-1, -eps] u [eps, 1]`` (``SignComposite.error``) must be at most ``MAX_ERROR_PER_EPS * eps = 2 eps``. Then
    the ReLU error bound (:func:`relu_error_bound`, ``B max(error / 2, eps (1 + peak) / 2)``) is at most
    ``B eps max(1, (1 + peak) / 2)``, about ``eps B``; beyond it the bound is ``B error / 2``, set by degrees too
    small to reach ``eps`` (``(7, 7, 7, 3)`` at ``2^-10``: error ``2^-1.3``, a ReLU error bound of ``0.197 B``).
    The composites the module docstring lists meet it, except Lee et al.'s ``(15, 15, 27)`` at ``2^-12`` (error
    ``2^-2.2``). A composite that misses it raises :class:`~hemx.errors.ParameterError` that names the degrees,
    the error reached and the default composite; ``on_accuracy="warn"`` returns it with an
    :class:`~hemx.errors.AccuracyWarning` instead.
    """
    if on_accuracy not in ("raise", "warn"):
        raise ParameterError(f"on_accuracy must be 'raise' or 'warn', got {on_accuracy!r}")
    comp = _sign_composite(tuple(int(d) for d in degrees), eps)
    if comp.error > MAX_ERROR_PER_EPS * comp.eps:
        reached = relu_error_bound(1.0, comp)
        msg = (f"the sign composite of degrees {comp.degrees} does not reach its eps = 2^{math.log2(comp.eps):.2f}: "
               f"its error on [-1, -eps] u [eps, 1] is {comp.error:.3g} (2^{math.log2(comp.error):.2f}), above "
               f"{MAX_ERROR_PER_EPS:g} eps = {MAX_ERROR_PER_EPS * comp.eps:.3g}, so a ReLU's error bound is "
               f"{reached:.3g} B instead of about eps B. Use more stages or higher degrees (each stage widens the "
               "resolved set by about its degree), a larger eps, or the default sign_composite() (degrees "
               f"{DEFAULT_DEGREES} at eps = 2^{math.log2(DEFAULT_EPS):g}: error 2^-10.36); on_accuracy='warn' "
               "accepts it")
        if on_accuracy == "raise":
            raise ParameterError(msg)
        warnings.warn(msg, AccuracyWarning, stacklevel=external_stacklevel())
    return comp


@functools.lru_cache(maxsize=16)
def _sign_composite(degrees: tuple[int, ...], eps: float) -> SignComposite:
    """:func:`sign_composite` without its accuracy check (cached)."""
    if not degrees or any(d < 3 or d % 2 == 0 for d in degrees):
        raise ParameterError(f"sign composite degrees must be odd integers >= 3, got {degrees}")
    if not (isinstance(eps, float) and 0 < eps < 0.5):
        raise ParameterError(f"eps must be a float in (0, 0.5), got {eps!r}")
    a = float(eps)
    stages = []
    for i, d in enumerate(degrees):
        c, err = _remez_sign(d, a)
        if c is None or not math.isfinite(err) or err >= 1.0:
            raise ParameterError(f"no sign approximation of degree {d} found on [{a:.3g}, 1]")
        if i < len(degrees) - 1:  # normalize: [a, 1] -> [1 - err, 1 + err] -> [a', 1]
            c = c / (1.0 + err)
            a = (1.0 - err) / (1.0 + err)
        stages.append(_odd_to_chebyshev(c))
    comp = SignComposite(degrees, float(eps), tuple(stages), 0.0, 0.0, 0)
    t = np.linspace(eps, 1.0, _CHECK_GRID)
    error = float(np.max(np.abs(comp(t) - 1.0)))
    peak = float(np.max(np.abs(comp(np.linspace(0.0, 1.0, _CHECK_GRID)))))
    depth = sum(polynomial_depth(c, basis="chebyshev") for c in stages)
    for c in stages:
        c.setflags(write=False)
    return dataclasses.replace(comp, error=error, peak=peak, depth=depth)


def check_domain(domain) -> float:
    """A ReLU's valid-domain factor (``compile(relu_domain=)``) checked: a finite number >= 1."""
    if isinstance(domain, bool) or not isinstance(domain, (int, float, np.integer, np.floating)) or not (
            math.isfinite(domain) and domain >= 1.0):
        raise ParameterError(f"relu_domain must be a number >= 1 (the factor above the calibrated bound a ReLU stays "
                             f"valid to), got {domain!r}")
    return float(domain)


def domain_composite(domain: float = DEFAULT_RELU_DOMAIN) -> SignComposite:
    """The default sign composite for a ReLU valid up to ``domain`` times its calibrated bound ``B``.

    The runtime scales the input by ``1 / (F B)`` with ``F`` the smallest factor of :data:`DOMAIN_COMPOSITES` at
    least ``domain``, so inputs up to ``F B`` map into ``[-1, 1]``; that composite's gap is ``2^-10 / F``, so the
    unresolved gap in ``x`` stays ``2^-10 B`` as at ``F = 1``, and on ``[-B, B]`` the error bound stays about
    ``2^-10 B`` (:func:`relu_error_bound`). Its extra depth over ``F = 1``: 1 level at ``F = 2``, 2 at 4, 4 at 8.
    Larger domains: pass a composite (``compile(relu=sign_composite(degrees, eps))``).
    """
    domain = check_domain(domain)
    fits = [f for f in DOMAIN_COMPOSITES if f >= domain]
    if not fits:
        raise ParameterError(f"no default sign composite for relu_domain={domain:g} (at most "
                             f"{max(DOMAIN_COMPOSITES):g}): pass one, compile(relu=sign_composite(degrees, eps), "
                             f"relu_domain={domain:g}), with eps about 2^-10 / {domain:g}")
    degrees, eps = DOMAIN_COMPOSITES[min(fits)]
    return sign_composite(degrees, eps)


def relu_error_bound(bound: float, composite: SignComposite | None = None, *, domain: float = 1.0) -> float:
    """Worst ``|relu(x) - x (1 + p(x / S)) / 2|`` for ``x`` in ``[-B, B]`` with ``S = domain B`` the runtime's scale
    (the approximation alone, no CKKS noise); the composite defaults to :func:`domain_composite` of ``domain``.

    ``|x| >= eps S``: ``|x| |p - sign| / 2 <= B error / 2``; ``|x| < eps S``: ``|x| (1 + |p|) / 2 <= min(B, eps S)
    (1 + peak) / 2``. A 1e-3 relative margin covers extrema between the measuring grid's points. The error over
    the whole valid domain ``[-S, S]`` is ``relu_error_bound(S, composite)``.
    """
    domain = check_domain(domain)
    comp = composite or domain_composite(domain)
    if not (math.isfinite(bound) and bound > 0):
        raise ParameterError(f"the ReLU input bound must be a positive number, got {bound!r}")
    b = float(bound)
    return max(b * comp.error / 2.0, min(b, comp.eps * domain * b) * (1.0 + comp.peak) / 2.0) * (1.0 + 1e-3)


def relu_approx(x, bound: float, composite: SignComposite | None = None, *, domain: float = 1.0) -> np.ndarray:
    """The float64 model of the encrypted ReLU: ``x (1 + p(x / (domain B))) / 2`` (``x`` any shape); the composite
    defaults to :func:`domain_composite` of ``domain``."""
    domain = check_domain(domain)
    comp = composite or domain_composite(domain)
    x = np.asarray(x, dtype=np.float64)
    return x * (1.0 + comp(x / (domain * bound))) / 2.0


# ------------------------------------------------------------------------------------------------------------
# the stages as polynomials for evaluate_polynomial
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PolyStage:
    """One polynomial of an activation: Chebyshev ``coeffs`` on ``interval``."""

    coeffs: np.ndarray
    interval: tuple[float, float]

    def depth(self, *, input_scale: float | None = None, scale: float | None = None) -> int:
        return polynomial_depth(self.coeffs, basis="chebyshev", interval=self.interval, input_scale=input_scale,
                                scale=scale)

    def evaluate(self, ev, x, *, scale: float | None = None):
        return evaluate_polynomial(ev, x, self.coeffs, basis="chebyshev", interval=self.interval, scale=scale)


def relu_stages(bound: float, composite: SignComposite | None = None, *, domain: float = 1.0) -> list[PolyStage]:
    """The polynomials of ``s'(x) = (1 + p(x / (domain B))) / 2``; ReLU is then ``x * s'(x)`` (one product). The
    first stage's interval is ``(-domain B, domain B)``; the composite defaults to :func:`domain_composite`."""
    domain = check_domain(domain)
    comp = composite or domain_composite(domain)
    if not (math.isfinite(bound) and bound > 0):
        raise ParameterError(f"the ReLU input bound must be a positive number, got {bound!r}")
    scale = domain * float(bound)
    out = []
    for i, c in enumerate(comp.stages):
        c = np.array(c)
        if i == len(comp.stages) - 1:
            c = c / 2.0
            c[0] += 0.5
        out.append(PolyStage(c, (-scale, scale) if i == 0 else (-1.0, 1.0)))
    return out


# ------------------------------------------------------------------------------------------------------------
# smooth activations: sigmoid and tanh as Chebyshev interpolants on the calibrated range
# ------------------------------------------------------------------------------------------------------------

#: the smooth activations :func:`smooth_stage` fits, as float64 functions
SMOOTH = {"sigmoid": lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)), "tanh": np.tanh}
DEFAULT_SMOOTH_DEGREE = 15


@dataclasses.dataclass(frozen=True)
class SmoothFit:
    """A smooth activation ``kind`` (``"sigmoid"`` or ``"tanh"``) as one polynomial on ``[-B, B]``.

    ``stage``: the :class:`PolyStage` (Chebyshev coefficients on ``(-B, B)``); ``error``: ``max |p(x) - f(x)|`` on
    ``[-B, B]``, measured on a dense grid (2^16 points, plus a 1e-3 relative margin and 1e-15); ``peak``:
    ``max |p(x)|`` there. Outside ``[-B, B]`` the polynomial diverges: ``B`` must bound the input.
    """

    kind: str
    bound: float
    degree: int
    stage: PolyStage
    error: float
    peak: float

    def __call__(self, x) -> np.ndarray:
        """The float64 model of the encrypted activation: ``p(x)``; ``x`` any shape."""
        return np.polynomial.chebyshev.chebval(np.asarray(x, dtype=np.float64) / self.bound, self.stage.coeffs)


def check_degree(degree, what: str) -> int:
    """``degree`` of a fitted sigmoid / tanh checked: an integer from 1 to 63 (``what`` names its owner)."""
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or not 1 <= degree <= 63:
        raise ParameterError(f"{what}'s degree must be an integer from 1 to 63, got {degree!r}")
    return int(degree)


@functools.lru_cache(maxsize=64)
def smooth_fit(kind: str, bound: float, degree: int = DEFAULT_SMOOTH_DEGREE) -> SmoothFit:
    """The degree-``degree`` Chebyshev interpolant of ``kind`` (``"sigmoid"`` or ``"tanh"``) on ``[-bound, bound]``
    (at the ``degree + 1`` Chebyshev points; near-minimax for these analytic functions) and its measured error.

    The error falls geometrically with the degree and grows with ``bound`` (the poles of both functions sit at
    ``|Im x| = pi`` for sigmoid, ``pi / 2`` for tanh): measured at degree 15, sigmoid ``1.6e-9`` / ``6.2e-6`` /
    ``1.4e-3`` and tanh ``1.2e-5`` / ``2.8e-3`` / ``5.6e-2`` on ``[-2, 2]`` / ``[-4, 4]`` / ``[-8, 8]`` (degree 7:
    sigmoid ``3e-5`` / ``2e-3`` / ``3e-2``, tanh ``4e-3`` / ``6e-2`` / ``0.22``). Depth: that of a
    degree-``degree`` Chebyshev polynomial on ``(-B, B)`` (5 levels at degree 15, the change of variable included).
    """
    if kind not in SMOOTH:
        raise ParameterError(f"smooth activation kind must be one of {sorted(SMOOTH)}, got {kind!r}")
    degree = check_degree(degree, f"the {kind} polynomial")
    bound = float(bound)
    if not (math.isfinite(bound) and bound > 0):
        raise ParameterError(f"the {kind} input bound must be a positive number, got {bound!r}")
    f = SMOOTH[kind]
    nodes = np.cos(np.pi * (np.arange(degree + 1) + 0.5) / (degree + 1))
    coeffs = np.polynomial.chebyshev.chebfit(nodes, f(bound * nodes), int(degree))
    if kind == "tanh":  # odd: exact zeros at the even terms (a clean layout stays clean)
        coeffs[0::2] = 0.0
    else:  # sigmoid - 1/2 is odd
        coeffs[2::2] = 0.0
    coeffs.setflags(write=False)
    t = np.linspace(-1.0, 1.0, 1 << 16)
    p = np.polynomial.chebyshev.chebval(t, coeffs)
    error = float(np.max(np.abs(p - f(bound * t)))) * (1.0 + 1e-3) + 1e-15
    return SmoothFit(kind, bound, int(degree), PolyStage(coeffs, (-bound, bound)), error, float(np.max(np.abs(p))))


__all__ = ["SignComposite", "sign_composite", "domain_composite", "check_domain", "DEFAULT_RELU_DOMAIN",
           "DOMAIN_COMPOSITES", "relu_error_bound", "relu_approx", "relu_stages",
           "PolyStage", "DEFAULT_DEGREES", "DEFAULT_EPS", "SMOOTH", "DEFAULT_SMOOTH_DEGREE", "SmoothFit", "smooth_fit",
           "check_degree"]
