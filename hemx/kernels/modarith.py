"""Modular arithmetic on uint32 residues with per-limb moduli.

Arrays hold residues of a polynomial in RNS form, shaped ``(..., L, N)``; the modulus table holds one entry per
limb, shaped ``(L, 1)`` (any shape that broadcasts against the data works). Moduli are odd, ``3 <= q < 2^31``.

Reductions (all exact; "lazy" results are congruent to the true value and lie in the stated range):

=====================  ==================================  ==================  =========================
function               computes                            input range         output range
=====================  ==================================  ==================  =========================
add_mod / sub_mod      a + b, a - b                        [0, q)              [0, q)
mul_barrett            a * b                               a, b in [0, q)      [0, q)
mul_barrett_lazy       a * b                               a, b in [0, q)      [0, 3q)
mul_montgomery         a * b * 2^-32                       a*b < q * 2^32      [0, q)
mul_montgomery_lazy    a * b * 2^-32                       a*b < q * 2^32      [0, 2q)
mul_montgomery_split16 a * b * 2^-32 (uint32 ops only)     a*b < q * 2^32      [0, q)
mul_shoup              a * w   (w known, w' precomputed)   a < 2^32, w < q     [0, q)
mul_shoup_lazy         a * w                               a < 2^32, w < q     [0, 2q)
reduce_once            x mod q                             [0, 2q)             [0, q)
=====================  ==================================  ==================  =========================

``mul_known(a, operand, table, method)`` multiplies by a known operand (twiddle factor, CRT constant) whose
Barrett / Montgomery / Shoup forms were precomputed by :func:`known_operand`: this is where the reduction
algorithm is selected (CROSS Fig. 13). The 16-bit-split Montgomery path (CROSS Alg. 1) uses only 32-bit
multiplies, for backends without a 64-bit multiplier (TPU).
"""

from __future__ import annotations

from typing import Literal, NamedTuple, Sequence

import jax.numpy as jnp
import numpy as np

from hemx.errors import ModulusError, ParameterError, ShapeError

Reduction = Literal["barrett", "montgomery", "shoup"]
REDUCTIONS: tuple[str, ...] = ("barrett", "montgomery", "shoup")

_U32 = jnp.uint32
_U64 = jnp.uint64
MAX_MODULUS_BITS = 31


class ModulusTable(NamedTuple):
    """Per-limb constants of the moduli, each array shaped like the broadcast shape requested (e.g. ``(L, 1)``).

    Attributes:
        q: uint32 moduli.
        barrett_mu: uint64 ``floor(2^(2k) / q)`` with ``k = bitlength(q)``.
        barrett_sa: uint64 shift ``k - 1``.
        barrett_sb: uint64 shift ``k + 1``.
        mont_qinv_neg: uint32 ``-q^-1 mod 2^32``.
        mont_qinv: uint32 ``q^-1 mod 2^32`` (the form CROSS Alg. 1 uses).
        mont_r2: uint32 ``2^64 mod q`` (to enter Montgomery form).
    """

    q: np.ndarray
    barrett_mu: np.ndarray
    barrett_sa: np.ndarray
    barrett_sb: np.ndarray
    mont_qinv_neg: np.ndarray
    mont_qinv: np.ndarray
    mont_r2: np.ndarray


def check_modulus(q: int, *, odd: bool = True) -> int:
    """Validate a word-sized modulus; returns it as int. Raises ModulusError with the reason."""
    q = int(q)
    if q < 2:
        raise ModulusError(f"modulus must be at least 2, got {q}")
    if q >= 1 << MAX_MODULUS_BITS:
        raise ModulusError(
            f"modulus {q} has {q.bit_length()} bits; hemx words hold moduli below 2^{MAX_MODULUS_BITS}"
        )
    if odd and q % 2 == 0:
        raise ModulusError(f"modulus {q} is even; Montgomery reduction needs odd moduli")
    return q


def make_modulus_table(moduli: Sequence[int], shape: tuple[int, ...] | None = None) -> ModulusTable:
    """Host-side constants for ``moduli``; each field reshaped to ``shape`` (default ``(L, 1)``)."""
    qs = [check_modulus(q) for q in moduli]
    if shape is None:
        shape = (len(qs), 1)
    ks = [q.bit_length() for q in qs]

    def arr(vals, dtype):
        return np.asarray(vals, dtype=dtype).reshape(shape)

    return ModulusTable(
        q=arr(qs, np.uint32),
        barrett_mu=arr([(1 << (2 * k)) // q for q, k in zip(qs, ks)], np.uint64),
        barrett_sa=arr([k - 1 for k in ks], np.uint64),
        barrett_sb=arr([k + 1 for k in ks], np.uint64),
        mont_qinv_neg=arr([(-pow(q, -1, 1 << 32)) % (1 << 32) for q in qs], np.uint32),
        mont_qinv=arr([pow(q, -1, 1 << 32) for q in qs], np.uint32),
        mont_r2=arr([(1 << 64) % q for q in qs], np.uint32),
    )


# ----------------------------------------------------------------------------------------------------------
# addition
# ----------------------------------------------------------------------------------------------------------


def reduce_once(x, q):
    """``x mod q`` for ``x`` in ``[0, 2q)`` (one conditional subtraction). Works for uint32 and uint64."""
    q = q.astype(x.dtype) if hasattr(q, "astype") else q
    return jnp.where(x >= q, x - q, x)


def add_mod(a, b, q):
    """``(a + b) mod q`` for uint32 ``a, b`` in ``[0, q)``, ``q < 2^31``."""
    return reduce_once(a + b, q)


def sub_mod(a, b, q):
    """``(a - b) mod q`` for uint32 ``a, b`` in ``[0, q)``."""
    q = q.astype(_U32)
    return jnp.where(a >= b, a - b, a + q - b)


def neg_mod(a, q):
    """``(-a) mod q`` for uint32 ``a`` in ``[0, q)``."""
    q = q.astype(_U32)
    return jnp.where(a == 0, a, q - a)


# ----------------------------------------------------------------------------------------------------------
# Barrett
# ----------------------------------------------------------------------------------------------------------


def barrett_reduce_lazy(x, q, mu, sa, sb):
    """``x - floor(((x >> sa) * mu) >> sb) * q``: congruent to x, in ``[0, 3q)``.

    Exact for uint64 ``x < 2^n`` when ``mu = floor(2^n / q)``, ``sa = k - 1``, ``sb = n - k + 1``
    (``k = bitlength(q)``) and ``n <= k + 31`` so the product fits 64 bits.
    """
    x = x.astype(_U64)
    qhat = ((x >> sa) * mu) >> sb
    return x - qhat * q.astype(_U64)


def barrett_reduce(x, q, mu, sa, sb):
    """Full Barrett reduction of uint64 ``x`` (see :func:`barrett_reduce_lazy`) to uint32 in ``[0, q)``."""
    q64 = q.astype(_U64)
    r = barrett_reduce_lazy(x, q, mu, sa, sb)
    r = jnp.where(r >= q64, r - q64, r)
    r = jnp.where(r >= q64, r - q64, r)
    return r.astype(_U32)


def mul_barrett_lazy(a, b, t: ModulusTable):
    """``a * b mod q`` in ``[0, 3q)`` (uint64 result) for ``a, b`` in ``[0, q)``."""
    z = a.astype(_U64) * b.astype(_U64)
    return barrett_reduce_lazy(z, t.q, t.barrett_mu, t.barrett_sa, t.barrett_sb)


def mul_barrett(a, b, t: ModulusTable):
    """``a * b mod q`` in ``[0, q)`` for uint32 ``a, b`` in ``[0, q)`` (CROSS Alg. 4)."""
    z = a.astype(_U64) * b.astype(_U64)
    return barrett_reduce(z, t.q, t.barrett_mu, t.barrett_sa, t.barrett_sb)


# ----------------------------------------------------------------------------------------------------------
# residues of integer-valued floats (encoding)
# ----------------------------------------------------------------------------------------------------------

POW2_EXPONENTS = 1024  # float64 exponents: an integer-valued float is m * 2^e with |m| < 2^53 and 0 <= e < 1024 - 53


def pow2_table(moduli: Sequence[int]) -> np.ndarray:
    """``2^e mod q`` for ``e`` in ``[0, 1024)``: ``(len(moduli), 1024)`` uint32, for :func:`residues_from_float`."""
    return np.array([[pow(2, e, int(q)) for e in range(POW2_EXPONENTS)] for q in moduli], dtype=np.uint32)


def residues_from_float(c, pow2, t: ModulusTable):
    """Integer-valued float64 ``c`` ``(..., N)`` (any finite magnitude) -> uint32 residues ``(..., L, N)`` modulo
    the ``L`` moduli of ``t`` (fields ``(L, 1)``); ``pow2`` is :func:`pow2_table` of the same moduli.

    Exact: ``|c| = m 2^e`` with an integer ``m < 2^53`` (``m = |c|``, ``e = 0`` below 2^53), ``m mod q`` from a
    float quotient (exact to one unit, corrected), times ``2^e mod q`` (a table row) by Barrett, negated for
    ``c < 0``. The encoder's integer coefficients (``hemx.ckks.encoder.embed``) reach the NTT without Python
    integers or int64 divisions on the host.
    """
    a = jnp.abs(c)
    small = a < 2.0 ** 53
    mant, e = jnp.frexp(a)
    m = jnp.where(small, a, jnp.ldexp(mant, 53)).astype(jnp.int64)  # exact, < 2^53
    p = jnp.where(small, 0, e - 53).astype(jnp.int32)  # >= 1 where not small
    q64 = t.q.astype(jnp.int64)
    quot = jnp.floor(m.astype(jnp.float64)[..., None, :] / t.q.astype(jnp.float64)).astype(jnp.int64)
    r = m[..., None, :] - quot * q64  # |r| < 2q: the float quotient is off by at most one
    r = jnp.where(r < 0, r + q64, r)
    r = jnp.where(r >= q64, r - q64, r).astype(_U32)
    rows = jnp.arange(pow2.shape[0]).reshape(-1, 1)
    w = jnp.asarray(pow2)[rows, p[..., None, :]]  # (..., L, N): 2^p mod q
    out = mul_barrett(r, w, t)
    return jnp.where(c[..., None, :] < 0, neg_mod(out, t.q), out)


MUL_SUM_METHODS = ("jax", "native")


def _mul_sum_jax(a, b, t: ModulusTable):
    acc = None
    for d in range(a.shape[-3]):
        prod = mul_barrett(a[..., d, None, :, :], b[d], t).astype(_U64)
        acc = prod if acc is None else acc + prod
    return barrett_reduce(acc, t.q, t.barrett_mu, t.barrett_sa, t.barrett_sb)


def mul_sum(a, b, t: ModulusTable, method: str = "auto"):
    """``sum_d a[..., d, :, :] * b[d] mod q``, the key-switching inner product: ``a`` ``(..., D, m, N)`` uint32
    (e.g. the extended digits), ``b`` ``(D, K, m, N)`` uint32 (e.g. a switching key, ``K = 2``), residues in
    ``[0, q)``, ``t`` the table of the ``m`` moduli (fields ``(m, 1)``); returns ``(..., K, m, N)`` in ``[0, q)``.

    ``method``: "jax" (Barrett products summed in uint64, one reduction), "native" (the C++ kernel of
    :mod:`hemx.kernels.native`: Montgomery products, CPU only; BackendError where unavailable) or "auto": the
    native kernel where the program runs on CPU and the library is available (``native.on_cpu``), JAX
    otherwise. Both are exact and give the same result.
    """
    if a.ndim < 3 or b.ndim != 4 or b.shape[0] != a.shape[-3] or tuple(b.shape[2:]) != tuple(a.shape[-2:]):
        raise ShapeError(f"mul_sum needs a (..., D, m, N) and b (D, K, m, N); got {tuple(a.shape)} and {tuple(b.shape)}")
    if method == "jax":
        return _mul_sum_jax(a, b, t)
    if method not in MUL_SUM_METHODS + ("auto",):
        raise ParameterError(f"unknown mul_sum method {method!r}; choose one of {MUL_SUM_METHODS + ('auto',)}")
    from hemx.kernels import native  # noqa: PLC0415 - optional library, loaded once

    if method == "native":
        return native.inner_product(a, b, t.q)
    if a.dtype != _U32 or b.dtype != _U32:
        return _mul_sum_jax(a, b, t)
    return native.on_cpu(lambda x, y, tt: native.inner_product(x, y, tt.q), _mul_sum_jax, a, b, t)


def widen(x, block: int):
    """``(..., W) -> (..., W block)``: each entry repeated ``block`` times (a broadcast and a reshape, which XLA fuses
    into the consumer; ``jnp.repeat`` was measured 1.8x slower in a product and 2x on a whole bootstrap)."""
    if block == 1:
        return x
    return jnp.broadcast_to(x[..., None], x.shape + (block,)).reshape(x.shape[:-1] + (x.shape[-1] * block,))


def _plain_sums_jax(parts, diagonals, groups, t: ModulusTable):
    n = parts[0].shape[-1]
    outs = []
    for group in groups:
        acc = None
        for i, d in group:
            w = jnp.concatenate([widen(blk, n // blk.shape[-1]) for blk in diagonals[d]], axis=-2)
            prod = mul_barrett(parts[i], w, t)
            acc = prod if acc is None else add_mod(acc, prod, t.q)
        outs.append(acc)
    return tuple(outs)


def plain_sums(parts, diagonals, groups, t: ModulusTable, method: str = "auto"):
    """Grouped sums of plaintext products, ``out_g = sum over (i, d) in groups[g] of parts[i] * w_d mod q``: the
    giant steps' sums of a baby-step / giant-step transform.

    ``parts``: uint32 ``(..., K, m, N)`` arrays of one shape; ``diagonals``: per diagonal ``w_d`` a tuple of its row
    blocks ``(r_k, N / b_d)`` (rows summing to ``m``, blocks stacked in order; each entry stands for ``b_d`` equal
    consecutive residues, widened in the product, never stored); ``groups``: static tuple of non-empty tuples of
    ``(part, diagonal)`` indices; ``t``: the ``m`` moduli (fields ``(m, 1)``); residues in ``[0, q)``. Returns one
    ``(..., K, m, N)`` array per group, in ``[0, q)``.

    ``method``: "jax" (Barrett products, one fusion per group), "native" (:func:`hemx.kernels.native.plain_sums`:
    every group over a column chunk while the parts are in cache, CPU only; BackendError where unavailable) or "auto":
    native where the program runs on CPU and the library has the kernel, JAX otherwise. Both are exact."""
    parts, groups = tuple(parts), tuple(tuple(g) for g in groups)
    if method == "jax":
        return _plain_sums_jax(parts, diagonals, groups, t)
    if method not in PLAIN_SUM_METHODS + ("auto",):
        raise ParameterError(f"unknown plain_sums method {method!r}; choose one of {PLAIN_SUM_METHODS + ('auto',)}")
    from hemx.kernels import native  # noqa: PLC0415 - optional library, loaded once

    def run_native(xs, ws, tt):
        return native.plain_sums(xs, ws, groups, tt.q)

    if method == "native":
        return run_native(parts, diagonals, t)
    if not native.has_plain_sums() or any(x.dtype != _U32 for x in parts):
        return _plain_sums_jax(parts, diagonals, groups, t)
    return native.on_cpu(run_native, lambda xs, ws, tt: _plain_sums_jax(xs, ws, groups, tt), parts,
                         tuple(tuple(w) for w in diagonals), t)


PLAIN_SUM_METHODS = ("jax", "native")


# ----------------------------------------------------------------------------------------------------------
# Montgomery (R = 2^32)
# ----------------------------------------------------------------------------------------------------------


def montgomery_reduce_lazy(z, q, qinv_neg):
    """``z * 2^-32 mod q`` in ``[0, 2q)`` (uint32) for uint64 ``z < q * 2^32``."""
    z = z.astype(_U64)
    m = (z.astype(_U32) * qinv_neg.astype(_U32)).astype(_U64)  # z * (-q^-1) mod 2^32
    return ((z + m * q.astype(_U64)) >> 32).astype(_U32)


def mul_montgomery_lazy(a, b, t: ModulusTable):
    """``a * b * 2^-32 mod q`` in ``[0, 2q)`` for uint32 inputs with ``a * b < q * 2^32``."""
    return montgomery_reduce_lazy(a.astype(_U64) * b.astype(_U64), t.q, t.mont_qinv_neg)


def mul_montgomery(a, b, t: ModulusTable):
    """``a * b * 2^-32 mod q`` in ``[0, q)``. With ``b = w * 2^32 mod q`` this is ``a * w mod q``."""
    return reduce_once(mul_montgomery_lazy(a, b, t), t.q.astype(_U32))


def to_montgomery(a, t: ModulusTable):
    """``a * 2^32 mod q`` (enter Montgomery form) for ``a`` in ``[0, q)``."""
    return mul_montgomery(a, jnp.broadcast_to(t.mont_r2, jnp.shape(a)).astype(_U32), t)


def from_montgomery(a, t: ModulusTable):
    """``a * 2^-32 mod q`` (leave Montgomery form)."""
    return reduce_once(montgomery_reduce_lazy(a.astype(_U64), t.q, t.mont_qinv_neg), t.q.astype(_U32))


def mul_wide_split16(a, b):
    """Full 64-bit product of uint32 ``a, b`` as ``(hi, lo)`` uint32 words, using 16x16-bit multiplies only."""
    mask = _U32(0xFFFF)
    a_lo, a_hi = a & mask, a >> 16
    b_lo, b_hi = b & mask, b >> 16
    p_ll = a_lo * b_lo
    p_lh = a_lo * b_hi
    p_hl = a_hi * b_lo
    p_hh = a_hi * b_hi
    mid = (p_ll >> 16) + (p_lh & mask) + (p_hl & mask)  # < 3 * 2^16, no overflow
    lo = (p_ll & mask) | (mid << 16)
    hi = p_hh + (p_lh >> 16) + (p_hl >> 16) + (mid >> 16)
    return hi, lo


def mulhi_split16(a, b):
    """High 32 bits of the product of uint32 ``a, b`` using 16-bit multiplies (CROSS Alg. 1, lines 3-7)."""
    return mul_wide_split16(a, b)[0]


def montgomery_reduce_split16(z_hi, z_lo, q, qinv):
    """CROSS Alg. 1: ``z * 2^-32 mod q`` in ``[0, 2q)`` from ``z = z_hi * 2^32 + z_lo < q * 2^32``.

    Only 32-bit operations: ``t = z_lo * q^-1 mod 2^32``; since ``t * q = z_lo (mod 2^32)`` the low words
    cancel and ``(z - t q) / 2^32 = z_hi - mulhi(t, q)``, which lies in ``(-q, q)``; adding q gives the range.
    """
    q = q.astype(_U32)
    t = z_lo * qinv.astype(_U32)
    return z_hi + q - mulhi_split16(t, q)


def mul_montgomery_split16(a, b, t: ModulusTable):
    """``a * b * 2^-32 mod q`` in ``[0, q)`` computed with 32-bit operations only (no 64-bit multiply)."""
    hi, lo = mul_wide_split16(a.astype(_U32), b.astype(_U32))
    return reduce_once(montgomery_reduce_split16(hi, lo, t.q, t.mont_qinv), t.q.astype(_U32))


# ----------------------------------------------------------------------------------------------------------
# Shoup (one operand known in advance)
# ----------------------------------------------------------------------------------------------------------


def shoup_precompute(w, q) -> np.ndarray:
    """Host-side ``w' = floor(w * 2^32 / q)`` as uint32, for known operands ``w`` in ``[0, q)``."""
    w = np.asarray(w, dtype=np.uint64)
    q = np.asarray(q, dtype=np.uint64)
    if np.any(w >= q):
        raise ParameterError("Shoup operands must be reduced: w < q")
    return ((w << np.uint64(32)) // q).astype(np.uint32)


def mul_shoup_lazy(a, w, w_shoup, q):
    """``a * w mod q`` in ``[0, 2q)`` for uint32 ``a`` (any value) and known ``w < q`` with ``w' = shoup(w)``."""
    a = a.astype(_U32)
    hi = ((a.astype(_U64) * w_shoup.astype(_U64)) >> 32).astype(_U32)
    return a * w.astype(_U32) - hi * q.astype(_U32)  # exact mod 2^32; the true value is in [0, 2q)


def mul_shoup(a, w, w_shoup, q):
    """``a * w mod q`` in ``[0, q)`` (Shoup / Harvey multiplication by a precomputed operand)."""
    return reduce_once(mul_shoup_lazy(a, w, w_shoup, q), q.astype(_U32))


# ----------------------------------------------------------------------------------------------------------
# known operands: one entry point, reduction selected by name
# ----------------------------------------------------------------------------------------------------------


class KnownOperand(NamedTuple):
    """A known multiplicand precomputed for every reduction method (same shape as the operand).

    Attributes:
        value: uint32 ``w`` in ``[0, q)`` (Barrett).
        mont: uint32 ``w * 2^32 mod q`` (Montgomery).
        shoup: uint32 ``floor(w * 2^32 / q)`` (Shoup).
    """

    value: np.ndarray
    mont: np.ndarray
    shoup: np.ndarray


def known_operand(w, q) -> KnownOperand:
    """Precompute :class:`KnownOperand` for integer array ``w`` (any integers; reduced mod ``q``, which broadcasts)."""
    w = np.asarray(w)
    q = np.asarray(q)
    if w.dtype == object or q.dtype == object:
        q_obj = np.broadcast_to(q.astype(object), np.broadcast_shapes(w.shape, q.shape))
        value = np.asarray(w.astype(object) % q_obj, dtype=np.uint64)
    elif np.issubdtype(w.dtype, np.unsignedinteger):  # may exceed the int64 range
        value = np.mod(w.astype(np.uint64), q.astype(np.uint64))
    else:
        value = np.mod(w.astype(np.int64), q.astype(np.int64)).astype(np.uint64)
    qv = np.broadcast_to(q.astype(np.uint64), value.shape)
    if np.any(qv >= np.uint64(1 << MAX_MODULUS_BITS)):
        raise ModulusError(f"known operands need moduli below 2^{MAX_MODULUS_BITS}")
    shifted = value << np.uint64(32)  # w < 2^31, so w * 2^32 < 2^63 fits
    return KnownOperand(value.astype(np.uint32), (shifted % qv).astype(np.uint32), (shifted // qv).astype(np.uint32))


def mul_known(a, w: KnownOperand, t: ModulusTable, method: str = "shoup"):
    """``a * w mod q`` in ``[0, q)`` for uint32 ``a`` in ``[0, q)`` and a precomputed known operand ``w``."""
    if method == "shoup":
        return mul_shoup(a, w.value, w.shoup, t.q)
    if method == "montgomery":
        return mul_montgomery(a, w.mont, t)
    if method == "barrett":
        return mul_barrett(a, w.value, t)
    raise ParameterError(f"unknown reduction {method!r}; choose one of {REDUCTIONS}")


def mul_mod(a, b, t: ModulusTable, method: str = "barrett"):
    """``a * b mod q`` for two runtime operands in ``[0, q)``.

    ``barrett`` reduces the 64-bit product directly; ``montgomery`` computes ``(a * 2^32) * b * 2^-32``
    (two Montgomery multiplications). Shoup needs a known operand and is not available here.
    """
    if method == "barrett":
        return mul_barrett(a, b, t)
    if method == "montgomery":
        return mul_montgomery(to_montgomery(a, t), b, t)
    raise ParameterError(f"mul_mod of two runtime operands supports 'barrett' or 'montgomery', not {method!r}")
