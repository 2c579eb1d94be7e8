"""CKKS encoding: complex slot vectors <-> integer polynomials through the canonical embedding.

For ``s`` slots (a power of two, at most N/2) the message lives in the subring ``Z[Y]/(Y^(2s) + 1)`` with
``Y = X^(N / 2s)`` (sparse packing). Slot ``i`` is the evaluation at ``zeta^(5^i)`` with ``zeta = exp(i pi / 2s)``;
its conjugate slot the evaluation at ``zeta^(-5^i)``. Evaluations at all odd powers of zeta are a DFT of
``m_j zeta^j`` (the "special FFT" is numpy's FFT plus the twist), so encoding and decoding are O(N log N).
A rotation by r slots is the automorphism ``X -> X^(5^r)``, conjugation ``X -> X^(-1)``.

The encoder is :func:`encode_ntt`: slot values (real or complex, host or traced) -> NTT-domain residues
(``Context.encode``, the circuits' evaluators and the networks' layers all encode through it, so an encoding is the
same computation eager and inside a traced program). :func:`embed` / :func:`encode` are the numpy
canonical embedding: the float reference the tests hold it to, and the integer polynomials of the encoding tests.
"""

from __future__ import annotations

import math
from functools import lru_cache, partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hemx.ckks import evaluator as ckks_evaluator
from hemx.ckks.validation import is_int
from hemx.errors import OverflowBoundError, ParameterError, ShapeError, SlotError
from hemx.kernels import modarith
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


@lru_cache(maxsize=None)
def _embed_tables(slots: int) -> tuple[np.ndarray, np.ndarray]:
    """(``perm``: index ``j < 2s`` -> slot ``i`` (``k_i``) or ``s + i`` (``kc_i``, the conjugate), the DFT's post-twist
    ``conj(zeta^j) / 2s``)."""
    k, kc, twist = _slot_tables(slots)
    perm = np.empty(2 * slots, dtype=np.int64)
    perm[k] = np.arange(slots)
    perm[kc] = slots + np.arange(slots)
    return perm, np.conj(twist) / (2 * slots)


def _fft_times(a: np.ndarray, cw: np.ndarray, part: str) -> np.ndarray:
    """``Re`` (``part="re"``) or ``Im`` of ``fft(a) * cw`` for real rows ``a`` of even length ``m``, from the
    half-length :func:`numpy.fft.rfft` ``H``: ``fft(a)[j] = conj(H[m - j])`` above ``m / 2``."""
    m = a.shape[-1]
    h = np.fft.rfft(a, axis=-1)
    hr, hi = h.real, h.imag
    cr, ci = cw.real, cw.imag
    lo, up = slice(0, m // 2 + 1), slice(m // 2 + 1, m)
    mr, mi = hr[..., m // 2 - 1:0:-1], hi[..., m // 2 - 1:0:-1]  # H[m - j] for j in (m/2, m)
    out = np.empty(a.shape, dtype=np.float64)
    if part == "re":
        out[..., lo] = hr * cr[lo] - hi * ci[lo]
        out[..., up] = mr * cr[up] + mi * ci[up]
    else:
        out[..., lo] = hr * ci[lo] + hi * cr[lo]
        out[..., up] = mr * ci[up] - mi * cr[up]
    return out


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


def embed(values: np.ndarray, n: int, slots: int, scale: float, *, log_q: float | None = None) -> np.ndarray:
    """Slot values ``(..., slots)`` (real or complex) -> the rounded integer coefficients ``(..., N)``, held exactly
    as integer-valued float64 (a float of magnitude 2^53 or more is already an integer, so rounding is exact there).

    :func:`encode` gives the same integers as int64 / Python ints; :func:`float_residues` reduces these directly.
    With ``log_q`` (``log2`` of the modulus the result is reduced by) a coefficient of magnitude ``q/2`` or more,
    which would wrap around, raises :class:`OverflowBoundError`.
    """
    slots = check_slots(n, slots)
    z = np.asarray(values)
    if z.shape[-1:] != (slots,):
        raise SlotError(f"expected {slots} slot values on the last axis, got shape {z.shape}")
    perm, cw = _embed_tables(slots)
    m = 2 * slots
    # evaluations at the odd powers of zeta: slot i at index k_i, its conjugate at kc_i (one gather, perm); the
    # DFT of a real vector comes from a half-length real FFT (its other half is the conjugate mirror)
    if np.iscomplexobj(z) and np.any(z.imag):
        z = z.astype(np.complex128)
        # Re((FA + i FB) cw) = Re(FA cw) - Im(FB cw), with FA, FB the DFTs of the real and imaginary parts
        coeffs = _fft_times(np.take(z.real, perm % slots, axis=-1), cw, "re")
        coeffs -= _fft_times(np.take(np.concatenate([z.imag, -z.imag], axis=-1), perm, axis=-1), cw, "im")
    else:
        real = np.asarray(z.real if np.iscomplexobj(z) else z, dtype=np.float64)
        coeffs = _fft_times(np.take(real, perm % slots, axis=-1), cw, "re")
    coeffs *= scale
    check_peak(float(np.max(np.abs(coeffs))) if coeffs.size else 0.0, scale, log_q)
    np.rint(coeffs, out=coeffs)
    if n == m:
        return coeffs
    out = np.zeros(z.shape[:-1] + (n,), dtype=np.float64)
    out[..., :: n // m] = coeffs
    return out


def check_peak(peak: float, scale: float, log_q: float | None) -> None:
    """The encoder's value checks on ``peak``, the largest ``|coefficient|`` of an encoding before rounding
    (``|value| x scale`` through the embedding): finite (:class:`SlotError`), and with ``log_q`` (``log2`` of the
    modulus the coefficients are reduced by) below ``q/2``, beyond which they would wrap around
    (:class:`OverflowBoundError`)."""
    if not math.isfinite(peak):
        raise SlotError("values are not finite")
    if log_q is not None and peak > 0 and math.log2(peak) >= log_q - 1:
        raise OverflowBoundError(
            f"the encoded values reach 2^{math.log2(peak):.1f} (|value| x scale, scale 2^{math.log2(scale):.1f}), "
            f"beyond q/2 = 2^{log_q - 1:.1f} of the modulus they are encoded at: they would wrap around. Use "
            "smaller values or a smaller scale, or encode at a higher level"
        )


def encode(values: np.ndarray, n: int, slots: int, scale: float, *, log_q: float | None = None) -> np.ndarray:
    """Slot values ``(..., slots)`` (real or complex) -> integer coefficients ``(..., N)``.

    Returns int64 when every coefficient fits below 2^62, else an object array of Python ints (the integers of
    :func:`embed`). ``log_q``: as for :func:`embed`.
    """
    coeffs = embed(values, n, slots, scale, log_q=log_q)
    if not coeffs.size or float(np.max(np.abs(coeffs))) < 2.0 ** 62:
        return coeffs.astype(np.int64)
    return np.vectorize(int, otypes=[object])(coeffs)


def decode(coeffs: np.ndarray, n: int, slots: int, scale: float) -> np.ndarray:
    """Real coefficients ``(..., N)`` (already centered, as float) -> complex slot values ``(..., slots)``."""
    slots = check_slots(n, slots)
    k, _, twist = _slot_tables(slots)
    m = 2 * slots
    c = np.asarray(coeffs, dtype=np.float64)[..., :: n // m] / scale
    evals = np.fft.ifft(c * twist, axis=-1) * m
    return evals[..., k]


# ------------------------------------------------------------------------------------------------------------
# the encoder: slot values -> NTT-domain residues (eager, or inside a traced program)
# ------------------------------------------------------------------------------------------------------------


class EmbedTables(NamedTuple):
    """The canonical embedding at ``s`` slots as :func:`encode_ntt` reads it: host arrays of ``m = 2s`` entries,
    one per odd power ``zeta^(2j + 1)`` (:func:`embed_tables`).

    Attributes:
        gather: ``(m,)`` int32, the slot evaluated there (slot ``i`` at ``j = (5^i - 1) / 2``, and conjugated at
            ``j = (2m - 5^i - 1) / 2``).
        conj: ``(m,)`` bool, where the slot is read conjugated.
        cr, ci: ``(m,)`` float64, the real and imaginary parts of the DFT's post-twist ``conj(zeta^j) / m``.
    """

    gather: np.ndarray
    conj: np.ndarray
    cr: np.ndarray
    ci: np.ndarray


@lru_cache(maxsize=None)
def embed_tables(slots: int) -> EmbedTables:
    """:class:`EmbedTables` at ``slots`` (read-only host arrays, built once per slot count)."""
    perm, cw = _embed_tables(slots)
    tables = EmbedTables((perm % slots).astype(np.int32), perm >= slots, np.ascontiguousarray(cw.real),
                         np.ascontiguousarray(cw.imag))
    for a in tables:
        a.setflags(write=False)
    return tables


@lru_cache(maxsize=64)
def pow2_table(moduli: tuple[int, ...]) -> np.ndarray:
    """:func:`hemx.kernels.modarith.pow2_table` of ``moduli`` (``2^e mod q``, ``(len(moduli), 1024)`` uint32;
    read-only, built once per modulus chain): the residue table :func:`encode_ntt` takes, its first ``num_q``
    rows for the first ``num_q`` moduli."""
    table = modarith.pow2_table(moduli)
    table.setflags(write=False)
    return table


def _spectrum(values, tables: EmbedTables):
    """Real and imaginary parts ``(..., m)`` of the DFT of the slot values gathered at the ``m`` odd powers of
    zeta (conjugated where ``tables.conj``). Real values (their conjugates are themselves): a half-length real
    FFT, the other half its conjugate mirror; complex values: the full complex FFT."""
    m = tables.gather.shape[0]
    if jnp.iscomplexobj(values):
        a = jnp.take(values.astype(jnp.complex128), tables.gather, axis=-1)
        h = jnp.fft.fft(jnp.where(tables.conj, jnp.conj(a), a), axis=-1)
        return jnp.real(h), jnp.imag(h)
    h = jnp.fft.rfft(jnp.take(values.astype(jnp.float64), tables.gather, axis=-1), axis=-1)
    hr, hi = jnp.real(h), jnp.imag(h)
    mirror = slice(m // 2 - 1, 0, -1)  # fft[j] = conj(rfft[m - j]) for j in (m/2, m)
    return jnp.concatenate([hr, hr[..., mirror]], axis=-1), jnp.concatenate([hi, -hi[..., mirror]], axis=-1)


@partial(jax.jit, static_argnames=("n",))
def embed_coeffs(values, scale, tables: EmbedTables, *, n: int):
    """Slot values ``(..., slots)`` -> ``(coeffs, peak)``: the encoded integer polynomial's coefficients
    ``(..., N)`` as integer-valued float64, and the largest ``|coefficient|`` before rounding (a float64 scalar,
    for :func:`check_peak`; inf if any is not finite). The embedding step of :func:`encode_ntt` (see there)."""
    m = tables.gather.shape[0]
    if values.shape[-1:] != (m // 2,):
        raise ShapeError(f"expected {m // 2} slot values on the last axis (the tables' slots), got shape "
                         f"{values.shape}")
    re, im = _spectrum(values, tables)
    # the products apart from their difference (no fused multiply-add): the same rounding in any program
    pr, pi = jax.lax.optimization_barrier((re * tables.cr, im * tables.ci))
    coeffs = (pr - pi) * scale  # Re(spectrum x twist) x scale
    # a reduction's max need not propagate NaN (XLA's CPU min/max): non-finite coefficients make the peak inf
    peak = jnp.where(jnp.all(jnp.isfinite(coeffs)), jnp.max(jnp.abs(coeffs), initial=0.0), jnp.inf)
    coeffs = jnp.round(coeffs)  # half to even, as numpy's rint
    if n != m:  # the subring Z[Y]/(Y^m + 1), Y = X^(N / m): coefficient j at N / m * j, zeros between
        pad = [(0, 0)] * coeffs.ndim + [(0, n // m - 1)]
        coeffs = jnp.pad(coeffs[..., None], pad).reshape(coeffs.shape[:-1] + (n,))
    return coeffs, peak


def encode_ntt(values, scale, tables: EmbedTables, pow2, plan, *, n: int, num_p: int, num_q: int):
    """The CKKS encoder: slot values ``(..., slots)`` -> ``(residues, peak)``: the encoded integer polynomial's
    NTT-domain residues ``(..., num_q, N)`` uint32 modulo the first ``num_q`` limbs after the ``num_p`` special
    ones of ``plan`` (a level's ``Q_l``: ``num_p`` the context's; the special primes ``P``: ``num_p=0``, ``num_q``
    their count), and ``peak``, the largest ``|coefficient|`` before rounding (a float64 scalar, for
    :func:`check_peak`). Eager, or inside a ``jax.jit`` trace (traced values and tables are encoded in the
    program).

    ``values``: real (float64) or complex (complex128) ``(..., slots)``, ``slots = len(tables.gather) / 2``; the
    dtype selects the path (a real FFT of half the length for real values), nothing else differs. ``scale``: the
    encoding scale (a float). ``tables``: :func:`embed_tables` of ``slots``; ``pow2``: :func:`pow2_table` rows of
    those ``num_q`` moduli; ``plan``: the context's NTT plan (``ctx.plan``). Static: ``n`` (the ring degree N),
    ``num_p``, ``num_q``.

    Two jitted steps: the canonical embedding (:func:`embed_coeffs`: a gather, an FFT, the twist, times the scale,
    rounded half to even to integer-valued float64 (above 2^53 every float is one), spread over the ring by
    ``X -> X^(N / 2s)``; compiled once per slot count, dtype and batch shape), then exact residues and the NTT in
    the kernel (:func:`hemx.ckks.evaluator.float_ntt_q`, compiled once per limb count and batch shape, whatever the
    slots). Between them the coefficients are integers: compiled apart (eager) or into one program (traced), the
    result is the same bit for bit, the twist's products being formed apart from their difference (an
    optimization barrier: no fused multiply-add, whatever XLA fuses around them). Against the numpy reference
    (:func:`embed`, another FFT's rounding) the integers differ by one in a few coefficients below 2^48, and within
    the float64 embedding's precision (2^-52 of the largest) above: far below the CKKS noise."""
    coeffs, peak = embed_coeffs(values, scale, tables, n=n)
    return ckks_evaluator.float_ntt_q(coeffs, pow2, plan, num_p=num_p, num_q=num_q), peak


# ------------------------------------------------------------------------------------------------------------
# integer polynomials <-> RNS residues (host side)
# ------------------------------------------------------------------------------------------------------------


def residues(ints: np.ndarray, moduli) -> np.ndarray:
    """Integer coefficients ``(..., N)`` (int64 or Python ints) -> uint32 residues ``(..., len(moduli), N)``."""
    ints = np.asarray(ints)
    if ints.dtype == object:
        return np.stack([np.asarray(ints % q, dtype=np.int64) for q in moduli], axis=-2).astype(np.uint32)
    q = np.asarray(moduli, dtype=np.int64).reshape(-1, 1)
    x = ints[..., None, :].astype(np.int64)
    if x.size and int(np.max(np.abs(ints))) < int(np.min(q)):  # small values (secrets, errors): no division
        return np.where(x < 0, x + q, x).astype(np.uint32)
    return np.mod(x, q).astype(np.uint32)


_FLOAT_INT64 = 2.0 ** 62  # below it an integer-valued float converts to int64 exactly


def float_residues(coeffs: np.ndarray, moduli) -> np.ndarray:
    """Integer-valued float64 coefficients ``(..., N)`` (from :func:`embed`) -> uint32 residues
    ``(..., len(moduli), N)``, exact for every finite magnitude and moduli below 2^32.

    Below 2^62 a coefficient converts to int64 exactly. Above, it is ``m * 2^e`` with an integer ``|m| < 2^53``
    and ``e >= 10`` (:func:`numpy.frexp`), so its residue is ``(m mod q) (2^e mod q) mod q``: the same integers
    as :func:`residues` of :func:`encode`'s Python ints, without them."""
    c = np.asarray(coeffs, dtype=np.float64)
    qs = tuple(int(q) for q in moduli)
    if not np.all(np.isfinite(c)):
        raise ParameterError("coefficients must be finite")
    if any(not 1 < q < 2**32 for q in qs):
        raise ParameterError("float_residues needs moduli in (1, 2^32)")
    q = np.asarray(qs, dtype=np.int64).reshape(-1, 1)
    big = np.abs(c) >= _FLOAT_INT64
    small = np.where(big, 0.0, c).astype(np.int64)
    out = np.mod(small[..., None, :], q)
    if np.any(big):
        mant, expo = np.frexp(np.where(big, c, 0.0))
        m = np.ldexp(mant, 53).astype(np.int64)  # exact: |mant| in [0.5, 1)
        e = np.where(big, expo - 53, 0).astype(np.int64)  # >= 10 where big
        pw = pow2_table(qs).astype(np.uint64)  # (k, 1024)
        w = pw[np.arange(len(qs)).reshape(-1, 1), e[..., None, :]]  # (..., k, N): 2^e mod q
        mm = np.mod(m[..., None, :], q).astype(np.uint64)  # in [0, q)
        prod = np.mod(mm * w, q.astype(np.uint64)).astype(np.int64)  # < 2^64: both factors below 2^32
        out = np.where(big[..., None, :], prod, out)
    return out.astype(np.uint32)


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
    """``(..., count)`` numbers (count <= slots) -> ``(..., slots)`` zero-padded (complex128 for complex values,
    float64 otherwise: :func:`encode_ntt`'s two paths), and is_complex. Traced values (``jax.core.Tracer``, an
    argument of a ``jax.jit`` program) are shaped the same way and stay traced."""
    traced = isinstance(values, jax.core.Tracer)
    xp = jnp if traced else np
    if traced:
        z = values
    else:
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
    is_complex = bool(np.iscomplexobj(z))
    if z.shape[-1] > slots:
        raise SlotError(
            f"{z.shape[-1]} values do not fit in {slots} slots; use a larger ring (N = {n} gives at most "
            f"{n // 2}) or split the data across ciphertexts"
        )
    z = z.astype(np.complex128 if is_complex else np.float64)
    if z.shape[-1] < slots:
        z = xp.concatenate([z, xp.zeros(z.shape[:-1] + (slots - z.shape[-1],), dtype=z.dtype)], axis=-1)
    return z, is_complex
