"""The slot <-> coefficient transforms of bootstrapping, as level-collapsed FFT factors.

With ``s`` slots, slot ``i`` of a plaintext is ``z_i = sum_{j<2s} m_j zeta^(5^i j)`` (``zeta = exp(i pi / 2s)``,
:mod:`hemx.ckks.encoder`). Writing ``w_j = m_j + i m_{s+j}`` (``zeta^(5^i s) = i``) gives ``z = U w`` with the
``s x s`` matrix ``U[i, j] = zeta^(5^i j)``. The special FFT factors ``U = F_log(s) ... F_1 B`` into a bit reversal
``B`` and butterfly stages ``F_t`` with three non-zero generalized diagonals each (offsets 0 and ``+-2^(t-1)``).

Bootstrapping never needs ``B``: CoeffsToSlots computes ``F^-1 z = B w`` (the coefficients, in bit-reversed
slot order), EvalMod works slot by slot, and SlotsToCoeffs computes ``F (B w') = U w'``. Consecutive stages are
multiplied into one factor per level (``2^(g+1) - 1`` diagonals for ``g`` stages), so each transform costs as
many levels as it has groups (:func:`grouped_factors`).

Diagonals use :mod:`hemx.circuits.lintrans`'s convention: ``M x = sum_k d_k * rot(x, k)``, ``rot(x, k)[i] =
x[i + k]``, ``d_k[i] = M[i, (i + k) mod s]``.
"""

from __future__ import annotations

from typing import Dict, Sequence

import numpy as np

from hemx.errors import ParameterError

Diagonals = Dict[int, np.ndarray]


def _twiddles(slots: int, half: int) -> np.ndarray:
    """``zeta^((5^j mod 4 len) * (s / len))`` for ``j < half``, ``len = 2 half`` (the stage's butterfly factors)."""
    m = 4 * slots
    length = 2 * half
    quarter = 4 * length
    rot = np.array([pow(5, j, m) for j in range(half)], dtype=np.int64)
    idx = (rot % quarter) * (m // quarter)
    return np.exp(2j * np.pi * idx / m)


def stage(slots: int, t: int, *, inverse: bool = False) -> Diagonals:
    """Diagonals of butterfly stage ``F_t`` (``t = 1 .. log2 s``), or of its inverse.

    ``F_t`` maps each block of ``2 h`` entries (``h = 2^(t-1)``) as ``(a_j, b_j) -> (a_j + w_j b_j, a_j - w_j b_j)``.
    """
    half = 1 << (t - 1)
    if not 1 <= t or 2 * half > slots:
        raise ParameterError(f"stage {t} does not exist for {slots} slots")
    w = np.tile(_twiddles(slots, half), slots // (2 * half))  # w_j for every block position j < h
    r = np.arange(slots)
    top = (r % (2 * half)) < half
    wr = np.empty(slots, dtype=np.complex128)
    wr[top] = w
    wr[~top] = w  # the bottom row j + h uses the same w_j as the top row j
    d0 = np.zeros(slots, np.complex128)
    dp = np.zeros(slots, np.complex128)
    dm = np.zeros(slots, np.complex128)
    if not inverse:  # top: a + w b ; bottom: a - w b
        d0[top], dp[top] = 1.0, wr[top]
        dm[~top], d0[~top] = 1.0, -wr[~top]
    else:  # top: (a + b) / 2 ; bottom: (a - b) / (2 w)
        d0[top], dp[top] = 0.5, 0.5
        dm[~top], d0[~top] = 0.5 / wr[~top], -0.5 / wr[~top]
    out: Diagonals = {}
    for k, d in ((0, d0), (half, dp), (-half, dm)):
        key = k % slots
        out[key] = out[key] + d if key in out else d
    return out


def compose(a: Diagonals, b: Diagonals, slots: int) -> Diagonals:
    """Diagonals of the product ``A B`` (``B`` applied first)."""
    out: Diagonals = {}
    for ka, da in a.items():
        for kb, db in b.items():
            key = (ka + kb) % slots
            term = da * np.roll(db, -ka)
            out[key] = out[key] + term if key in out else term
    return out


def scaled(a: Diagonals, factor: complex) -> Diagonals:
    return {k: d * factor for k, d in a.items()}


def split_stages(log_slots: int, levels: int) -> list[list[int]]:
    """Stages ``1 .. log_slots`` cut into ``levels`` consecutive groups, the larger groups first."""
    if not 1 <= levels:
        raise ParameterError(f"a transform needs at least one level, got {levels}")
    levels = min(levels, max(log_slots, 1))
    sizes = [log_slots // levels + (1 if i < log_slots % levels else 0) for i in range(levels)]
    groups, t = [], 1
    for size in sizes:
        groups.append(list(range(t, t + size)))
        t += size
    return groups


def grouped_factors(slots: int, levels: int, *, inverse: bool) -> list[Diagonals]:
    """The factors of ``F`` (``inverse=False``, SlotsToCoeffs) or ``F^-1`` (CoeffsToSlots), one per level, in the
    order they are applied."""
    log_slots = slots.bit_length() - 1
    if slots < 2 or 1 << log_slots != slots:
        raise ParameterError(f"bootstrapping transforms need a power-of-two slot count >= 2, got {slots}")
    factors = []
    for group in split_stages(log_slots, levels):
        if not inverse:  # F = F_L ... F_1: stage 1 first
            prod: Diagonals | None = None
            for t in group:
                prod = stage(slots, t) if prod is None else compose(stage(slots, t), prod, slots)
            factors.append(prod)
        else:
            prod = None
            for t in group:
                prod = stage(slots, t, inverse=True) if prod is None else compose(prod, stage(slots, t, inverse=True),
                                                                                  slots)
            factors.append(prod)
    if inverse:  # F^-1 = F_1^-1 ... F_L^-1: the last stages' group first
        factors.reverse()
    return factors


def dense(diags: Diagonals, slots: int) -> np.ndarray:
    """The ``(s, s)`` matrix of a diagonal dictionary (for tests and small sizes)."""
    m = np.zeros((slots, slots), np.complex128)
    i = np.arange(slots)
    for k, d in diags.items():
        m[i, (i + k) % slots] += d
    return m


def slot_matrix(slots: int) -> np.ndarray:
    """``U[i, j] = zeta^(5^i j)`` (for tests): slots ``z = U w`` with ``w_j = m_j + i m_{s+j}``."""
    e = np.array([pow(5, i, 4 * slots) for i in range(slots)], dtype=np.int64)
    return np.exp(1j * np.pi * np.outer(e, np.arange(slots)) / (2 * slots))


def bit_reverse(slots: int) -> np.ndarray:
    bits = slots.bit_length() - 1
    return np.array([int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(slots)], dtype=np.int64)


__all__ = ["stage", "compose", "scaled", "split_stages", "grouped_factors", "dense", "slot_matrix", "bit_reverse"]
