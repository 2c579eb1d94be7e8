"""CKKS encoding: complex slot vectors <-> integer polynomials through the canonical embedding.

For ``s`` slots (a power of two, at most N/2) the message lives in the subring ``Z[Y]/(Y^(2s) + 1)`` with
``Y = X^(N / 2s)`` (sparse packing). Slot ``i`` is the evaluation at ``zeta^(5^i)`` with ``zeta = exp(i pi / 2s)``;
its conjugate slot the evaluation at ``zeta^(-5^i)``. Evaluations at all odd powers of zeta are a DFT of
``m_j zeta^j`` (the "special FFT" is numpy's FFT plus the twist), so encoding and decoding are O(N log N).
A rotation by r slots is the automorphism ``X -> X^(5^r)``, conjugation ``X -> X^(-1)``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from hemx.errors import SlotError
from hemx.nt import is_power_of_two


@lru_cache(maxsize=None)
def _slot_tables(slots: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(index of slot i among the 2s odd exponents, index of its conjugate, twist zeta^j for j < 2s)."""
    m = 2 * slots  # sub-ring degree
    e = np.array([pow(5, i, 2 * m) for i in range(slots)], dtype=np.int64)
    k = (e - 1) // 2
    kc = (2 * m - e - 1) // 2
    twist = np.exp(1j * np.pi * np.arange(m) / m)
    return k, kc, twist


def check_slots(n: int, slots: int) -> int:
    if not is_power_of_two(slots) or not 1 <= slots <= n // 2:
        raise SlotError(f"slot count must be a power of two in [1, N/2 = {n // 2}], got {slots}")
    return int(slots)


def slots_for(n: int, count: int) -> int:
    """Smallest valid slot count holding ``count`` values (sparse packing)."""
    if count > n // 2:
        raise SlotError(f"{count} values do not fit: N = {n} gives at most {n // 2} slots")
    s = 1
    while s < count:
        s *= 2
    return s


def encode(values: np.ndarray, n: int, slots: int, scale: float) -> np.ndarray:
    """Slot values ``(..., slots)`` (real or complex) -> integer coefficients ``(..., N)``.

    Returns int64 when every coefficient fits below 2^62, else an object array of Python ints.
    """
    slots = check_slots(n, slots)
    z = np.asarray(values, dtype=np.complex128)
    if z.shape[-1] != slots:
        raise SlotError(f"expected {slots} slot values on the last axis, got shape {z.shape}")
    k, kc, twist = _slot_tables(slots)
    m = 2 * slots
    evals = np.zeros(z.shape[:-1] + (m,), dtype=np.complex128)
    evals[..., k] = z
    evals[..., kc] = np.conj(z)
    coeffs = (np.fft.fft(evals, axis=-1) / m * np.conj(twist)).real * scale
    if not np.all(np.isfinite(coeffs)):
        raise SlotError("values are not finite")
    gap = n // m
    peak = float(np.max(np.abs(coeffs))) if coeffs.size else 0.0
    if peak < 2.0 ** 62:
        out = np.zeros(z.shape[:-1] + (n,), dtype=np.int64)
        out[..., ::gap] = np.rint(coeffs).astype(np.int64)
        return out
    out = np.zeros(z.shape[:-1] + (n,), dtype=object)
    out[..., ::gap] = np.vectorize(lambda v: int(round(v)), otypes=[object])(coeffs)
    return out


def decode(coeffs: np.ndarray, n: int, slots: int, scale: float) -> np.ndarray:
    """Real coefficients ``(..., N)`` (already centered, as float) -> complex slot values ``(..., slots)``."""
    slots = check_slots(n, slots)
    k, _, twist = _slot_tables(slots)
    m = 2 * slots
    c = np.asarray(coeffs, dtype=np.float64)[..., :: n // m] / scale
    evals = np.fft.ifft(c * twist, axis=-1) * m
    return evals[..., k]
