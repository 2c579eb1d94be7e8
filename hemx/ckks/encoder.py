"""CKKS encoding: complex slot vectors <-> integer polynomials through the canonical embedding.

For ``s`` slots (a power of two, at most N/2) the message lives in the subring ``Z[Y]/(Y^(2s) + 1)`` with
``Y = X^(N / 2s)`` (sparse packing). Slot ``i`` is the evaluation at ``zeta^(5^i)`` with ``zeta = exp(i pi / 2s)``;
its conjugate slot the evaluation at ``zeta^(-5^i)``. Evaluations at all odd powers of zeta are a DFT of
``m_j zeta^j`` (the "special FFT" is numpy's FFT plus the twist), so encoding and decoding are O(N log N).
A rotation by r slots is the automorphism ``X -> X^(5^r)``, conjugation ``X -> X^(-1)``.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from hemx.ckks.validation import is_int
from hemx.errors import OverflowBoundError, ParameterError, SlotError
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
    if not is_int(slots) or not is_power_of_two(int(slots)) or not 1 <= slots <= n // 2:
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


def encode(values: np.ndarray, n: int, slots: int, scale: float, *, log_q: float | None = None) -> np.ndarray:
    """Slot values ``(..., slots)`` (real or complex) -> integer coefficients ``(..., N)``.

    Returns int64 when every coefficient fits below 2^62, else an object array of Python ints. With ``log_q``
    (``log2`` of the modulus the result is reduced by) a coefficient of magnitude ``q/2`` or more, which would
    wrap around, raises :class:`OverflowBoundError`.
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
    if log_q is not None and peak > 0 and math.log2(peak) >= log_q - 1:
        raise OverflowBoundError(
            f"the encoded values reach 2^{math.log2(peak):.1f} (|value| x scale, scale 2^{math.log2(scale):.1f}), "
            f"beyond q/2 = 2^{log_q - 1:.1f} of the modulus they are encoded at: they would wrap around. Use "
            "smaller values or a smaller scale, or encode at a higher level"
        )
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


# ------------------------------------------------------------------------------------------------------------
# integer polynomials <-> RNS residues (host side)
# ------------------------------------------------------------------------------------------------------------


def residues(ints: np.ndarray, moduli) -> np.ndarray:
    """Integer coefficients ``(..., N)`` (int64 or Python ints) -> uint32 residues ``(..., len(moduli), N)``."""
    ints = np.asarray(ints)
    if ints.dtype == object:
        return np.stack([np.asarray(ints % q, dtype=np.int64) for q in moduli], axis=-2).astype(np.uint32)
    q = np.asarray(moduli, dtype=np.int64).reshape(-1, 1)
    return np.mod(ints[..., None, :].astype(np.int64), q).astype(np.uint32)


def crt_centered_float(res: np.ndarray, moduli) -> np.ndarray:
    """Centered CRT value of residues ``(..., k, N)`` as float64 ``(..., N)`` (balanced mixed radix, exact digits).

    Garner's algorithm with digits in ``(-q_i/2, q_i/2]``: ``x = d_0 + q_0 (d_1 + q_1 (d_2 + ...))``; all digit
    arithmetic is exact in int64, and the final Horner evaluation in float64 loses nothing for ``|x| << Q``.
    """
    qs = [int(q) for q in moduli]
    res = res.astype(np.int64)
    digits = []
    for i, q in enumerate(qs):
        # value of the digits found so far, modulo q
        acc = np.zeros(res.shape[:-2] + res.shape[-1:], dtype=np.int64)
        weight = 1
        for j, d in enumerate(digits):
            acc = (acc + (d % q) * (weight % q)) % q
            weight *= qs[j]
        inv = pow(weight % q, -1, q) if i else 1
        d = ((res[..., i, :] - acc) % q) * inv % q
        d = np.where(d > q // 2, d - q, d)
        digits.append(d)
    out = np.zeros(digits[0].shape, dtype=np.float64)
    for q, d in zip(reversed(qs), reversed(digits)):
        out = out * q + d
    return out


def decode_residues(res: np.ndarray, moduli, *, n: int, slots: int, scale: float, is_complex: bool) -> np.ndarray:
    """Coefficient-domain residues ``(..., limbs, N)`` -> slot values ``(..., slots)``.

    Only as many limbs as hold ``scale * 2^64`` are combined: their centered CRT gives the value exactly."""
    need = np.log2(scale) + 64
    count, bits = 0, 0.0
    while count < len(moduli) and (bits < need or count == 0):  # at least one limb, whatever the scale
        bits += np.log2(moduli[count])
        count += 1
    coeffs = crt_centered_float(res[..., :count, :], moduli[:count])
    z = decode(coeffs, n, slots, scale)
    return z if is_complex else z.real


def slot_values(values, slots: int, n: int) -> tuple[np.ndarray, bool]:
    """``(..., count)`` numbers (count <= slots) -> complex128 ``(..., slots)`` zero-padded, and is_complex."""
    try:
        z = np.asarray(values)
    except (ValueError, TypeError) as e:  # ragged nesting
        raise ParameterError(f"values must be a (batch of) equal-length list(s) of numbers: {e}") from None
    if z.ndim == 0:
        z = z[None]
    if not (np.issubdtype(z.dtype, np.number) or z.dtype == bool):
        raise SlotError(f"values must be numbers, got dtype {z.dtype}")
    if z.size == 0:
        raise ParameterError(f"no values to encode (shape {z.shape}); give at least one number per ciphertext")
    is_complex = np.iscomplexobj(z)
    if z.shape[-1] > slots:
        raise SlotError(
            f"{z.shape[-1]} values do not fit in {slots} slots; use a larger ring (N = {n} gives at most "
            f"{n // 2}) or split the data across ciphertexts"
        )
    if z.shape[-1] < slots:
        pad = np.zeros(z.shape[:-1] + (slots - z.shape[-1],), dtype=z.dtype)
        z = np.concatenate([z, pad], axis=-1)
    return z.astype(np.complex128), is_complex
