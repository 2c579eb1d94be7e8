"""Decryption check: is a decrypted polynomial plausibly the encoding of a message, or noise over all of Z_q?

After decryption (``m' = c0 + c1 s mod q``, centred into ``(-q/2, q/2]``) and before decoding, the
coefficients of a correct ciphertext are ``m + e``: the scaled message plus a small error, so they stay far
below ``q/2`` (CKKS needs ``|m| << q`` or the message wraps). A wrong secret key, tampered residues, a
ciphertext relabelled with another key set's tag, or a computation whose values overflowed the modulus give
``c0 + c1 s'`` that is (close to) uniform on ``Z_q``: centred coefficients spread over the whole range, with
``max |c| ~ q/2`` and a median around ``q/4``.

:func:`coefficient_check` is a pure function of the centred coefficients, ``log2 q`` and the scale;
:func:`residue_check` applies it to decrypted RNS residues and is wired into ``Context.decrypt``
(``decryption_check="raise" | "warn" | "off"``, raising :class:`hemx.errors.DecryptionError`). It compares, on a
log2 scale, a high percentile and the maximum of ``|c|`` with ``q/2``. A uniform polynomial has its 99th percentile at ``0.99 q/2`` (a margin of ~0.015 bits)
and even its median at ``q/4`` (1 bit below ``q/2``); a correct one sits many bits below (the margin is
``log2 q - log2(scale * max|value|) - 1`` bits, at least several bits in every sensible parameter set).

What it cannot see: a *valid* ciphertext of another message under the right key (a server can always return
some other well-formed ciphertext: this is a plausibility check, not authentication), errors that stay small
(a slightly wrong scale, a wrong rotation step, precision loss), and overflows that wrap only a few
coefficients by a little. See ``docs/errors.md``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from hemx.errors import ParameterError, ShapeError

# A correct ciphertext must keep at least this many bits between its 99th-percentile coefficient and q/2.
# Uniform noise on Z_q has a margin of about log2(1 / 0.99) = 0.015 bits at the 99th percentile.
DEFAULT_MARGIN_BITS = 1.0
DEFAULT_PERCENTILE = 99.0


@dataclasses.dataclass(frozen=True)
class CoefficientStats:
    """What :func:`coefficient_check` measured (all in bits, log2 of magnitudes).

    Attributes:
        log_half_q: ``log2(q / 2)``.
        log_max: ``log2(max |c|)`` (``-inf`` for an all-zero polynomial).
        log_percentile: ``log2`` of the ``percentile``-th percentile of ``|c|``.
        percentile: the percentile used.
        margin_bits: ``log_half_q - log_percentile``: how far below ``q/2`` the bulk of the coefficients is.
        expected_log_max: ``log2(scale)`` plus one bit, the size of a message of magnitude about 1 (a hint
            for the error message, not part of the decision).
        count: number of coefficients examined.
        reason: empty when ``ok``, else a sentence naming the likely causes.
    """

    log_half_q: float
    log_max: float
    log_percentile: float
    percentile: float
    margin_bits: float
    expected_log_max: float
    count: int
    reason: str = ""


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else float("-inf")


def coefficient_check(coeffs_centered_float, log_q: float, *, scale: float,
                      margin_bits: float = DEFAULT_MARGIN_BITS,
                      percentile: float = DEFAULT_PERCENTILE, log_unit: float = 0.0) -> tuple[bool, CoefficientStats]:
    """Decide whether decrypted coefficients look like a message (``ok``) or like noise spread over ``Z_q``.

    Args:
        coeffs_centered_float: the decrypted polynomial's coefficients, centred into ``(-q/2, q/2]``, as floats
            (any shape ``(..., N)``; every coefficient is examined together). Real numbers; non-finite values
            make the result not ok.
        log_q: ``log2`` of the modulus at the ciphertext's level (product of its limbs), > 1.
        scale: the ciphertext's scale (positive, finite); only used for the report.
        margin_bits: the ``percentile``-th percentile of ``|c|`` must be at least this many bits below ``q/2``.
        percentile: in (0, 100].
        log_unit: the coefficients are given in units of ``2^log_unit`` (e.g. ``c / q`` with ``log_unit = log_q``,
            for moduli beyond the float range); default 0, the coefficients themselves.

    Returns:
        ``(ok, stats)``: ``ok`` is False when the coefficients are spread up to ``q/2`` (a wrong key, tampered
        data or an overflow), with ``stats.reason`` saying so.

    Raises:
        ParameterError: ``log_q``, ``scale``, ``margin_bits`` or ``percentile`` out of range.
        ShapeError: no coefficients, or a non-real array.
    """
    if isinstance(log_q, bool) or not isinstance(log_q, (int, float, np.integer, np.floating)) \
            or not math.isfinite(log_q) or log_q <= 1:
        raise ParameterError(f"log_q must be a finite number of bits > 1, got {log_q!r}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)) \
            or not math.isfinite(scale) or scale <= 0:
        raise ParameterError(f"scale must be a positive finite number, got {scale!r}")
    if isinstance(margin_bits, bool) or not isinstance(margin_bits, (int, float)) or not 0 <= margin_bits < log_q:
        raise ParameterError(f"margin_bits must be in [0, log_q), got {margin_bits!r}")
    if isinstance(percentile, bool) or not isinstance(percentile, (int, float)) or not 0 < percentile <= 100:
        raise ParameterError(f"percentile must be in (0, 100], got {percentile!r}")
    if isinstance(log_unit, bool) or not isinstance(log_unit, (int, float, np.integer, np.floating)) \
            or not math.isfinite(log_unit):
        raise ParameterError(f"log_unit must be a finite number, got {log_unit!r}")
    c = np.asarray(coeffs_centered_float)
    if c.dtype == object or np.iscomplexobj(c) or not (np.issubdtype(c.dtype, np.number) or c.dtype == bool):
        raise ShapeError(f"coefficients must be a real numeric array, got dtype {c.dtype}")
    if c.size == 0:
        raise ShapeError("no coefficients to check")
    a = np.abs(c.astype(np.float64, copy=False)).ravel()
    log_half_q = float(log_q) - 1.0
    expected = _log2(float(scale)) + 1.0
    if not np.all(np.isfinite(a)):
        stats = CoefficientStats(log_half_q, float("inf"), float("inf"), float(percentile), float("-inf"), expected,
                                 int(a.size), "the decrypted coefficients are not finite")
        return False, stats
    log_max = _log2(float(a.max())) + float(log_unit)
    log_pct = _log2(float(np.percentile(a, percentile))) + float(log_unit)
    margin = log_half_q - log_pct
    reason = ""
    if margin < margin_bits:
        reason = (
            f"the decrypted coefficients reach 2^{log_pct:.1f} at the {percentile:g}th percentile, within "
            f"{max(margin, 0):.2f} bits of q/2 = 2^{log_half_q:.1f} (a message at this scale is about "
            f"2^{expected:.1f}): they look uniform modulo q. Likely causes: the wrong secret key (or a ciphertext "
            "under another key set), altered ciphertext data, or values x scale that overflowed the modulus at "
            "this level (rescale earlier, lower the scale or keep values smaller)"
        )
    stats = CoefficientStats(log_half_q, log_max, log_pct, float(percentile), margin, expected, int(a.size), reason)
    return not reason, stats


# ------------------------------------------------------------------------------------------------------------
# the check on decrypted RNS residues (wired into Context.decrypt)
# ------------------------------------------------------------------------------------------------------------

DECRYPTION_CHECK_MODES = ("raise", "warn", "off")
# coefficients sampled per ciphertext for the "whole polynomial" test (a wrong key randomizes every coefficient)
SAMPLE_COEFFS = 256


def check_mode(mode) -> str:
    if not isinstance(mode, str) or mode not in DECRYPTION_CHECK_MODES:
        raise ParameterError(f"decryption_check must be one of {DECRYPTION_CHECK_MODES}, got {mode!r}")
    return mode


def _fraction(res: np.ndarray, moduli) -> np.ndarray:
    """``x / Q`` centred into ``[-1/2, 1/2]`` for residues ``(..., k, cols)`` of ``x`` modulo ``Q = prod(moduli)``.

    ``x/Q = sum_i [r_i (Q/q_i)^-1 mod q_i] / q_i (mod 1)``: k exact int64 products and a float sum (absolute
    error about ``k^2 2^-53``, i.e. values below ``Q 2^-40`` read as about that; far from ``q/2`` either way).
    """
    qs = [int(q) for q in moduli]
    big_q = math.prod(qs)
    inv = np.array([pow((big_q // q) % q, -1, q) if len(qs) > 1 else 1 for q in qs], dtype=np.int64)
    q_arr = np.array(qs, dtype=np.int64)
    shape = (len(qs), 1)
    terms = (res.astype(np.int64) * inv.reshape(shape)) % q_arr.reshape(shape)
    t = np.sum(terms / q_arr.reshape(shape).astype(np.float64), axis=-2)
    return t - np.rint(t)


def residue_check(res: np.ndarray, moduli, *, n: int, slots: int, scale: float,
                  margin_bits: float = DEFAULT_MARGIN_BITS,
                  percentile: float = DEFAULT_PERCENTILE) -> tuple[bool, CoefficientStats | None]:
    """The decryption check on coefficient-domain residues ``(..., k, N)`` of ``c0 + c1 s`` modulo ``moduli``.

    Each ciphertext of the batch is judged on its own, twice: on the coefficients that carry its slots (stride
    ``N / 2 slots``; an overflow wraps those) and on up to :data:`SAMPLE_COEFFS` coefficients spread over the
    polynomial (a wrong key randomizes all of them). ``(True, None)`` when every ciphertext passes, else
    ``(False, stats)`` of the worst one (see :func:`coefficient_check`). Host-side numpy on the residues that
    decryption transfers anyway; about ``k`` multiply-adds per examined coefficient.
    """
    res = np.asarray(res)
    log_q = float(sum(math.log2(int(q)) for q in moduli))
    gap = max(n // (2 * slots), 1)
    groups = [res[..., ::gap]]
    if n // gap < SAMPLE_COEFFS:
        groups.append(res[..., :: max(n // SAMPLE_COEFFS, 1)])
    worst, worst_margin = None, float("inf")
    for g in groups:
        t = np.abs(_fraction(g, moduli))
        flat = t.reshape(-1, t.shape[-1])
        pct = np.percentile(flat, percentile, axis=-1)
        i = int(np.argmax(pct))
        margin = -1.0 - (math.log2(pct[i]) if pct[i] > 0 else float("-inf"))  # log2(Q/2) - log2(pct * Q)
        if margin < worst_margin:
            worst, worst_margin = flat[i], margin
    if worst_margin >= margin_bits:
        return True, None
    return coefficient_check(worst, log_q, scale=scale, margin_bits=margin_bits, percentile=percentile,
                             log_unit=log_q)


__all__ = ["CoefficientStats", "coefficient_check", "residue_check", "check_mode", "DEFAULT_MARGIN_BITS",
           "DEFAULT_PERCENTILE", "DECRYPTION_CHECK_MODES"]
