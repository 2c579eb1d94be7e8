"""Polynomial evaluation on ciphertexts: power and Chebyshev bases, baby-step/giant-step, exact scales.

``p(x) = sum_k c_k B_k(x)`` with ``B_k(x) = x^k`` (``basis="monomial"``) or ``B_k = T_k(t)``,
``t = (2x - a - b) / (b - a)`` (``basis="chebyshev"`` on ``interval=(a, b)``; ``numpy.polynomial.chebyshev``'s
convention). Coefficients are in ascending order.

Algorithm (Paterson–Stockmeyer in the form of Bossuat et al., Eurocrypt 2021, and Lattigo):

* the variable ``B_1`` is ``x`` itself for the monomial basis and the interval ``(-1, 1)``; otherwise
  ``t = alpha x + beta`` is one constant product (one level) that also puts ``B_1`` at exactly the target scale
  (scales square along the powers, so ``B_1`` must start at the target);
* the baby steps ``B_1 .. B_{2^l - 1}`` and the giant steps ``B_{2^l}, B_{2^{l+1}}, ..`` are computed with
  depth ``ceil(log2 k)`` for ``B_k`` (``T_{a+b} = 2 T_a T_b - T_{a-b}``, ``x^{a+b} = x^a x^b``); only the powers
  a polynomial uses are computed, so odd or even polynomials take the cheaper path by themselves;
* ``p`` is divided recursively by the largest giant step (``p = q B_m + r``; for Chebyshev
  ``q_0 = c_m``, ``q_j = 2 c_{m+j}``, ``r_{m-j} = c_{m-j} - c_{m+j}``) down to baby polynomials
  ``sum_j c_j B_j``, sums of constant products;
* the split ``l`` is the largest one whose depth is the least possible: baby polynomials of degree below
  ``2^l`` cost ``l + 1`` levels, so ``l = 1`` reaches ``ceil(log2(degree + 1))`` for any polynomial, and a
  larger ``l`` (fewer ciphertext products) is taken where the degree leaves room;
* **scales are exact**: every sub-polynomial is evaluated for a *target scale* chosen so that its product with
  the giant step, rescaled, lands on the parent's target; constants are multiplied as integers
  ``round(c * plain_scale)`` with the plain scale that makes each term land on that target, so every addition
  is between operands of the same scale and the result has the requested scale (the context's default scale
  unless ``scale=`` says otherwise).

Depth: ``ceil(log2(degree + 1))``, plus one for the change of variable; :func:`polynomial_depth` gives the
figure for given coefficients and options.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from hemx.circuits.evaluator import as_evaluator
from hemx.errors import LevelError, ParameterError

BASES = ("monomial", "chebyshev")
ZERO_RTOL = 1e-14  # coefficients below this fraction of the largest one count as zero (odd/even detection)


# ------------------------------------------------------------------------------------------------------------
# coefficients
# ------------------------------------------------------------------------------------------------------------


def chebyshev_coefficients(f: Callable[[np.ndarray], np.ndarray], degree: int,
                           interval: Sequence[float] = (-1.0, 1.0)) -> np.ndarray:
    """Coefficients ``c_0 .. c_degree`` of the Chebyshev interpolant of ``f`` on ``interval``.

    ``f`` is sampled at the ``degree + 1`` Chebyshev nodes of the first kind mapped to ``[a, b]``; the result
    follows ``numpy.polynomial.chebyshev`` (``sum c_k T_k(t)``, ``t = (2x - a - b) / (b - a)``).

    Args:
        f: a vectorized function of a float64 array (numpy ufuncs, ``np.tanh``, ...).
        degree: polynomial degree >= 1.
        interval: ``(a, b)`` with ``a < b``.

    Returns:
        float64 (or complex128 if ``f`` is complex) ``(degree + 1,)``.
    """
    degree = _check_degree(degree)
    a, b = _check_interval(interval)
    count = degree + 1
    theta = np.pi * (np.arange(count) + 0.5) / count
    x = 0.5 * (b - a) * np.cos(theta) + 0.5 * (a + b)
    y = np.asarray(f(x))
    if y.shape != x.shape or not (np.issubdtype(y.dtype, np.number)):
        raise ParameterError(f"f must map a float64 array of shape {x.shape} to numbers of the same shape, "
                             f"got {y.dtype} {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ParameterError(f"f is not finite on the interval {tuple(interval)}")
    c = (2.0 / count) * (np.cos(np.outer(np.arange(count), theta)) @ y)
    c[0] *= 0.5
    return c


def _check_degree(degree) -> int:
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise ParameterError(f"degree must be an integer >= 1, got {degree!r}")
    return int(degree)


def _check_interval(interval) -> tuple[float, float]:
    try:
        a, b = (float(v) for v in interval)
    except (TypeError, ValueError):
        raise ParameterError(f"interval must be a pair (a, b) of numbers, got {interval!r}") from None
    if not (math.isfinite(a) and math.isfinite(b) and a < b):
        raise ParameterError(f"interval must satisfy a < b (finite), got {interval!r}")
    return a, b


def _check_coefficients(coefficients) -> np.ndarray:
    try:
        c = np.asarray(coefficients)
    except (TypeError, ValueError):
        raise ParameterError("coefficients must be a 1-D sequence of real numbers") from None
    if c.ndim != 1 or c.size == 0 or not np.issubdtype(c.dtype, np.number) or c.dtype == bool:
        raise ParameterError(f"coefficients must be a non-empty 1-D sequence of real numbers, got {c.dtype} {c.shape}")
    if np.iscomplexobj(c):
        raise ParameterError("complex coefficients are not supported: evaluate the real and imaginary parts "
                             "separately")
    c = c.astype(np.float64)
    if not np.all(np.isfinite(c)):
        raise ParameterError("coefficients must be finite")
    big = np.max(np.abs(c))
    c = np.where(np.abs(c) <= ZERO_RTOL * big, 0.0, c)
    nz = np.flatnonzero(c)
    if nz.size == 0 or nz[-1] == 0:
        raise ParameterError("the polynomial is constant: it needs degree >= 1 (a non-zero coefficient of x^1 "
                             "or above)")
    return c[: nz[-1] + 1]


# ------------------------------------------------------------------------------------------------------------
# structure: splits, depths
# ------------------------------------------------------------------------------------------------------------


def _trim(c: np.ndarray) -> np.ndarray:
    nz = np.flatnonzero(c)
    return c[: nz[-1] + 1] if nz.size else c[:0]


def _split(c: np.ndarray, m: int, basis: str) -> tuple[np.ndarray, np.ndarray]:
    """``p = q B_m + r`` for ``m <= degree < 2m``."""
    if basis == "monomial":
        return _trim(c[m:].copy()), _trim(c[:m].copy())
    q = c[m:].copy()
    q[1:] *= 2.0
    r = c[:m].copy()
    r[m - np.arange(1, len(c) - m)] -= c[m + 1:]
    return _trim(q), _trim(r)


def _power_depth(k: int) -> int:
    return (int(k) - 1).bit_length()  # ceil(log2 k)


class _Plan:
    """The baby/giant split for one coefficient vector: baby polynomials have degree < ``2^log_split``."""

    def __init__(self, c: np.ndarray, basis: str, log_split: int):
        self.basis = basis
        self.log_split = log_split
        self.baby_limit = 1 << log_split

    @classmethod
    def choose(cls, c: np.ndarray, basis: str, log_split: int | None) -> "_Plan":
        """The given split, or the most balanced one (fewest products) among those of least depth."""
        log_degree = (len(c) - 1).bit_length()  # ceil(log2(degree + 1))
        if log_split is not None:
            if isinstance(log_split, bool) or not isinstance(log_split, (int, np.integer)) or log_split < 1:
                raise ParameterError(f"log_split must be an integer >= 1, got {log_split!r}")
            return cls(c, basis, int(log_split))
        least = cls(c, basis, 1).depth(c)
        for s in range(max(1, (log_degree + 1) // 2), 1, -1):
            plan = cls(c, basis, s)
            if plan.depth(c) <= least:
                return plan
        return cls(c, basis, 1)

    def giant(self, degree: int) -> int:
        return 1 << (degree.bit_length() - 1)  # largest power of two <= degree (>= baby_limit here)

    def depth(self, c: np.ndarray) -> float:
        """Levels below ``B_1`` that evaluating ``c`` consumes (``-inf`` for a constant)."""
        degree = len(c) - 1
        if degree < 1:
            return -math.inf
        if degree < self.baby_limit:
            return max(_power_depth(j) for j in np.flatnonzero(c) if j >= 1) + 1
        m = self.giant(degree)
        q, r = _split(c, m, self.basis)
        product = max(self.depth(q), _power_depth(m)) + 1
        return max(product, self.depth(r))


def _needs_normalizing(basis: str, interval, input_scale: float, target: float, log_degree: int) -> bool:
    """Whether ``B_1`` must be brought to the target scale with a constant product (one level).

    Powers square their scale ratio to the target (``B_2k`` has scale ``s_k^2 / q``), so a ratio ``r`` on ``B_1``
    becomes ``r^(2^(D-1))`` on the largest power. ``x`` is used as it is only when it is already ``B_1`` (the
    monomial basis or the interval ``(-1, 1)``) and its scale drifts the largest power by at most a factor 2.
    """
    if basis == "chebyshev" and tuple(interval) != (-1.0, 1.0):
        return True
    drift = abs(math.log2(input_scale / target)) * (1 << max(log_degree - 1, 0))
    return drift > 1.0


def polynomial_depth(coefficients, *, basis: str = "monomial", interval: Sequence[float] | None = None,
                     log_split: int | None = None, input_scale: float | None = None,
                     scale: float | None = None) -> int:
    """Levels :func:`evaluate_polynomial` consumes for these coefficients and options.

    ``ceil(log2(degree + 1))`` for the default split, plus one when ``x`` must first be mapped to the Chebyshev
    interval or brought to the target scale (``input_scale`` and ``scale`` default to equal); a larger
    ``log_split`` may add one more in exchange for fewer ciphertext products.
    """
    if basis not in BASES:
        raise ParameterError(f"basis must be one of {BASES}, got {basis!r}")
    c = _check_coefficients(coefficients)
    interval = _check_interval((-1.0, 1.0) if interval is None else interval)
    plan = _Plan.choose(c, basis, log_split)
    extra = 0
    if scale is not None or input_scale is not None:
        target = float(scale if scale is not None else input_scale)
        extra = int(_needs_normalizing(basis, interval, float(input_scale or target), target,
                                       (len(c) - 1).bit_length()))
    elif basis == "chebyshev" and interval != (-1.0, 1.0):
        extra = 1
    return int(plan.depth(c)) + extra


# ------------------------------------------------------------------------------------------------------------
# evaluation
# ------------------------------------------------------------------------------------------------------------


class _Evaluation:
    def __init__(self, ev, t1, basis: str, plan: _Plan):
        self.ev, self.basis, self.plan = ev, basis, plan
        self.powers = {1: t1}

    # ---------------------------------------------------------------- power basis
    def power(self, k: int):
        if k in self.powers:
            return self.powers[k]
        ev = self.ev
        a = 1 << (_power_depth(k) - 1)  # largest power of two < k
        b = k - a
        prod = ev.mul(self.power(a), self.power(b))
        if self.basis == "chebyshev":
            prod = ev.add(prod, prod)  # 2 T_a T_b, exact
        prod = ev.rescale(prod)
        if self.basis == "chebyshev":
            if a == b:
                prod = ev.sub(prod, 1.0)  # T_2a = 2 T_a^2 - T_0
            else:
                prod = ev.sub(prod, self.at(self.power(a - b), ev.level(prod), ev.scale(prod)))
        self.powers[k] = prod
        return prod

    def at(self, x, level: int, scale: float):
        """``x`` at exactly ``level`` and ``scale`` (a constant product and a rescale if the scale differs)."""
        ev = self.ev
        if math.isclose(ev.scale(x), scale, rel_tol=1e-9):
            return ev.drop_level(x, level) if ev.level(x) > level else x
        if ev.level(x) <= level:
            raise LevelError("internal: a power to realign has no level to spare")  # excluded by the depths
        x = ev.drop_level(x, level + 1)
        x = ev.mul_const(x, 1.0, plain_scale=scale * ev.rescale_divisor(level + 1) / ev.scale(x))
        return ev.rescale(x)

    def level_of(self, c: np.ndarray) -> float:
        """Level of the result of :meth:`evaluate` (``inf`` for a constant), from the powers' levels."""
        degree = len(c) - 1
        if degree < 1:
            return math.inf
        ev = self.ev
        if degree < self.plan.baby_limit:
            return min(ev.level(self.power(int(j))) for j in np.flatnonzero(c) if j >= 1) - 1
        m = self.plan.giant(degree)
        q, r = _split(c, m, self.basis)
        product = min(self.level_of(q), ev.level(self.power(m))) - 1
        return min(product, self.level_of(r))

    # ---------------------------------------------------------------- recursion
    def evaluate(self, c: np.ndarray, target: float):
        """``sum c_k B_k`` at scale ``target``: a value, or a Python float for a constant polynomial."""
        degree = len(c) - 1
        if degree < 1:
            return float(c[0]) if degree == 0 else 0.0
        ev = self.ev
        if degree < self.plan.baby_limit:
            terms = [int(j) for j in np.flatnonzero(c) if j >= 1]
            level = min(ev.level(self.power(j)) for j in terms)
            divisor = ev.rescale_divisor(level)
            acc = None
            for j in terms:
                x = ev.drop_level(self.power(j), level)
                term = ev.mul_const(x, c[j], plain_scale=target * divisor / ev.scale(x))
                acc = term if acc is None else ev.add(acc, term)
            acc = ev.rescale(acc)
            return ev.add(acc, float(c[0])) if c[0] else acc
        m = self.plan.giant(degree)
        q, r = _split(c, m, self.basis)
        giant = self.power(m)
        if len(q) - 1 < 1:  # q is a constant: c * B_m
            level = ev.level(giant)
            prod = ev.mul_const(giant, float(q[0]) if len(q) else 0.0,
                                plain_scale=target * ev.rescale_divisor(level) / ev.scale(giant))
            prod = ev.rescale(prod)
        else:
            level = int(min(self.level_of(q), ev.level(giant)))
            qv = self.evaluate(q, target * ev.rescale_divisor(level) / ev.scale(giant))
            prod = ev.rescale(ev.mul(ev.drop_level(qv, level), ev.drop_level(giant, level)))
        rv = self.evaluate(r, target)
        if isinstance(rv, float):
            return ev.add(prod, rv) if rv else prod
        return ev.add(prod, rv)


def evaluate_polynomial(backend, x, coefficients, keys=None, *, basis: str = "monomial",
                        interval: Sequence[float] | None = None, scale: float | None = None,
                        log_split: int | None = None):
    """``p(x)`` slot-wise on a ciphertext (or a batch of them).

    Args:
        backend: a :class:`~hemx.Context` or a :mod:`hemx.circuits` evaluator (e.g. the :class:`SlotSimulator`).
        x: the input ciphertext ``(..., 2, limbs, N)`` (any level with enough levels left).
        coefficients: ``c_0 .. c_d`` in ascending order (real).
        keys: the :class:`~hemx.KeySet` / evaluation keys (relinearization); None with a simulator.
        basis: "monomial" (``sum c_k x^k``) or "chebyshev" (``sum c_k T_k(t)``, ``t`` mapped from ``interval``).
        interval: ``(a, b)`` for the Chebyshev basis (default ``(-1, 1)``); values outside it are extrapolated
            (Chebyshev polynomials grow fast there).
        scale: scale of the result (default: the context's default scale).
        log_split: baby polynomials have degree < ``2^log_split``; default: the largest split of least depth.

    Returns:
        A ciphertext at scale ``scale``, ``polynomial_depth(...)`` levels below ``x``.

    Raises:
        LevelError: ``x`` has fewer levels left than the polynomial's depth.
        ParameterError: bad coefficients, basis, interval or split.
    """
    ev = as_evaluator(backend, keys)
    if basis not in BASES:
        raise ParameterError(f"basis must be one of {BASES}, got {basis!r}")
    c = _check_coefficients(coefficients)
    if interval is not None and basis != "chebyshev":
        raise ParameterError("interval applies to the Chebyshev basis only (basis='chebyshev')")
    a, b = _check_interval((-1.0, 1.0) if interval is None else interval)
    target = float(ev.default_scale if scale is None else scale)
    if not (math.isfinite(target) and target > 1):
        raise ParameterError(f"scale must be a finite number > 1, got {scale!r}")
    plan = _Plan.choose(c, basis, log_split)
    normalize = _needs_normalizing(basis, (a, b), ev.scale(x), target, (len(c) - 1).bit_length())
    depth = int(plan.depth(c)) + int(normalize)
    if ev.level(x) < depth:
        raise LevelError(f"a degree-{len(c) - 1} polynomial ({basis} basis) needs {depth} levels; the ciphertext "
                         f"has {ev.level(x)} left (bootstrap or use parameters with more levels)")
    t1 = x
    if normalize:  # t = alpha x + beta at exactly the target scale: one constant product and a rescale
        alpha, beta = 2.0 / (b - a), -(a + b) / (b - a)
        level = ev.level(x)
        t1 = ev.rescale(ev.mul_const(x, alpha, plain_scale=target * ev.rescale_divisor(level) / ev.scale(x)))
        if beta:
            t1 = ev.add(t1, beta)
    out = _Evaluation(ev, t1, basis, plan).evaluate(c, target)
    return _with_bound(out, x, c, basis, a, b)


def _with_bound(out, x, c: np.ndarray, basis: str, a: float, b: float):
    """``out`` (a hemx Ciphertext) with a sound bound on ``|p(x)|`` from ``x.bound`` (Ciphertext.bound):
    ``sum |c_k| B^k`` (monomial), ``sum |c_k| T_k(max(1, |t|))`` with ``|t| <= (2 B + |a + b|) / (b - a)``
    (Chebyshev: ``|T_k| <= 1`` on [-1, 1], ``T_k(|t|)`` beyond). The smaller of it and the bound the operations
    propagated. Anything else (a simulator's ciphertext, an unknown bound) is returned as it is."""
    bound_in = getattr(x, "bound", None)
    if not hasattr(out, "bound") or bound_in is None:
        return out
    mags = np.abs(np.asarray(c, dtype=np.float64))
    with np.errstate(all="ignore"):  # a huge input bound overflows: then the propagated bound (or None) stays
        if basis == "chebyshev":
            reach = max(1.0, (2.0 * bound_in + abs(a + b)) / (b - a))
            bound = float(np.polynomial.chebyshev.chebval(reach, mags))
        else:
            bound = float(np.polynomial.polynomial.polyval(bound_in, mags))
    if not math.isfinite(bound):
        return out
    return out.replace(bound=bound if out.bound is None else min(bound, out.bound))


__all__ = ["evaluate_polynomial", "chebyshev_coefficients", "polynomial_depth", "BASES"]
