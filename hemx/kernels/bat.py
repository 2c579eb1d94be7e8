"""Basis-Aligned Transformation (CROSS §IV-A, Alg. 2 and 5): exact modular matmuls as int8 matmuls.

A product ``A @ B mod q`` whose left operand ``A`` (H x V) is known in advance (twiddle factors, basis
conversion constants) is computed as

1. offline, ``A`` becomes the dense int8 matrix ``A_dense`` of shape ``(H*K, V*K)``: block ``(h, v)`` holds in
   column ``j`` the ``K`` chunks of ``A[h, v] * 2^(bp*j) mod q``. The high-basis contributions are thus folded
   back into the low ``K`` output chunks at compile time (the "BAT" step), instead of the ``2K - 1`` partial
   sums of the sparse Toeplitz baseline;
2. at run time ``B`` is split into ``K`` chunks per entry (``B_dense`` of shape ``(V*K, W)``);
3. one int8 x int8 -> int32 matmul ``A_dense @ B_dense`` gives, per output entry, ``K`` partial sums;
4. the partial sums are merged (``sum_i z_i 2^(bp*i)``, exact in int64) and reduced mod q once.

Chunks are *balanced* signed digits in ``[-2^(bp-1), 2^(bp-1))`` of the *centered* residue in
``(-q/2, q/2]``: int8 x int8 dots with int32 accumulation are the fast matmul path on CPUs (AMX/VNNI), GPUs and
TPUs, unlike unsigned 8-bit dots. ``K`` is the fewest digits that hold ``q/2``: 4 for 25- to 31-bit moduli at
``bp = 8``.

Exactness bound (checked when a plan is built; :class:`hemx.errors.OverflowBoundError` beyond it):

* int32 accumulation: ``V * K * 2^(2bp-2) < 2^31``, i.e. ``V * K < 2^17`` at ``bp = 8``;
* merge width: the offset merged value ``x < 2^n`` must satisfy ``n <= bitlength(q) + 31`` (Barrett with
  64-bit products) or ``x < q * 2^32`` (Montgomery). At ``bp = 8`` with 28-bit moduli this allows any
  ``V < 2^15``.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from hemx.errors import OverflowBoundError, ParameterError, ShapeError
from hemx.kernels._x64 import require_x64
from hemx.kernels.modarith import (
    add_mod,
    barrett_reduce,
    check_modulus,
    montgomery_reduce_lazy,
    mul_shoup,
    reduce_once,
    shoup_precompute,
)

DEFAULT_BP = 8
_MERGE_REDUCTIONS = ("barrett", "montgomery")


# ----------------------------------------------------------------------------------------------------------
# chunks
# ----------------------------------------------------------------------------------------------------------


def balanced_range(num_chunks: int, bp: int) -> tuple[int, int]:
    """Smallest and largest integers representable by ``num_chunks`` balanced ``bp``-bit digits."""
    geo = ((1 << (bp * num_chunks)) - 1) // ((1 << bp) - 1)
    return -(1 << (bp - 1)) * geo, ((1 << (bp - 1)) - 1) * geo


def check_bp(bp: int) -> int:
    """Validate the chunk width: 2..8 bits, so digits fit int8."""
    if not isinstance(bp, (int, np.integer)) or not 2 <= int(bp) <= 8:
        raise ParameterError(f"chunk width bp must be an integer in [2, 8] (digits are int8), got {bp!r}")
    return int(bp)


def num_chunks(q: int, bp: int = DEFAULT_BP) -> int:
    """K: the fewest balanced ``bp``-bit digits that hold every centered residue mod ``q``."""
    bp = check_bp(bp)
    lo_needed, hi_needed = -((q - 1) // 2), q // 2
    k = 1
    while True:
        lo, hi = balanced_range(k, bp)
        if lo <= lo_needed and hi >= hi_needed:
            return k
        k += 1


def centered_u32(x, q):
    """uint32 residues in ``[0, q)`` -> int32 representatives in ``(-q/2, q/2]``."""
    q = jnp.asarray(q).astype(jnp.uint32)
    xi = x.astype(jnp.int32)
    return jnp.where(x > (q >> 1), xi - q.astype(jnp.int32), xi)


def chunk_decompose(x, num: int, bp: int = DEFAULT_BP, axis: int = -1):
    """Balanced digits of signed integers: ``x = sum_k d_k 2^(bp*k)``, ``d_k`` in ``[-2^(bp-1), 2^(bp-1))``.

    Args:
        x: int32 (or int64) array whose values lie in :func:`balanced_range` ``(num, bp)``.
        num: number of digits K.
        bp: digit width in bits.
        axis: where the new digit axis of length K goes in the result.
    Returns:
        int8 array of ``x.shape`` with a K-long axis inserted at ``axis``.
    """
    if bp == 8 and num <= 4 and x.dtype == jnp.int32:
        return _byte_digits(x, num, axis)
    half = 1 << (bp - 1)
    mask = (1 << bp) - 1
    x = x.astype(jnp.int64)  # (x - d) may leave the int32 range before the shift brings it back
    digits = []
    for _ in range(num):
        d = ((x + half) & mask) - half
        digits.append(d.astype(jnp.int8))
        x = (x - d) >> bp
    return jnp.stack(digits, axis=axis)


def _byte_digits(x, num: int, axis: int):
    """Fast path of :func:`chunk_decompose` for 8-bit digits of int32 values.

    ``x + sum_k 128 * 256^k = sum_k (d_k + 128) 256^k`` with every ``d_k + 128`` in ``[0, 256)``, so the bytes
    of that sum (little-endian bitcast) minus 128 are the balanced digits; ``byte ^ 0x80`` read as int8 is
    exactly ``byte - 128``. One add, one bitcast and one xor instead of ``num`` rounds of shifts and masks.
    """
    bias = sum(128 << (8 * k) for k in range(num))
    u = (x + jnp.int32(bias - (1 << 32) if bias >= 1 << 31 else bias)).astype(jnp.uint32)
    b = jax.lax.bitcast_convert_type(u, jnp.uint8)[..., :num]
    d = jax.lax.bitcast_convert_type(b ^ jnp.uint8(0x80), jnp.int8)
    return jnp.moveaxis(d, -1, axis)


def chunk_merge(chunks, bp: int = DEFAULT_BP, axis: int = -1):
    """Inverse of :func:`chunk_decompose`: ``sum_k chunks[k] * 2^(bp*k)`` along ``axis``, exact in int64."""
    require_x64()
    chunks = jnp.moveaxis(chunks, axis, -1).astype(jnp.int64)
    weights = jnp.asarray([1 << (bp * k) for k in range(chunks.shape[-1])], dtype=jnp.int64)
    return jnp.sum(chunks * weights, axis=-1)


def _np_balanced_digits(x: np.ndarray, num: int, bp: int) -> np.ndarray:
    """Host version of :func:`chunk_decompose` on int64 numpy arrays; digit axis last."""
    half, mask = 1 << (bp - 1), (1 << bp) - 1
    x = x.astype(np.int64)
    out = np.empty(x.shape + (num,), dtype=np.int8)
    for k in range(num):
        d = ((x + half) & mask) - half
        out[..., k] = d
        x = (x - d) >> bp
    if np.any(x != 0):
        raise OverflowBoundError(f"value does not fit {num} balanced {bp}-bit digits")
    return out


def _np_centered(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.where(x > q // 2, x - q, x)


# ----------------------------------------------------------------------------------------------------------
# merge + reduce
# ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MergeTable:
    """Per-output-modulus constants to merge ``C`` partial sums and reduce them exactly.

    Array fields are 1-D over the output moduli (length ``M``); kernels reshape them to broadcast.

    Attributes:
        q: uint32 output moduli.
        offset: int64 multiple of q added so the merged value is non-negative.
        mu, sa, sb: uint64 wide-Barrett constants for merged values below ``2^n``.
        qinv_neg: uint32 ``-q^-1 mod 2^32`` (Montgomery merge).
        bp: chunk width (static).
        chunks: number of partial sums merged, C (static).
        reduction: "barrett" or "montgomery" (static).
    """

    q: np.ndarray
    offset: np.ndarray
    mu: np.ndarray
    sa: np.ndarray
    sb: np.ndarray
    qinv_neg: np.ndarray
    bp: int
    chunks: int
    reduction: str


jax.tree_util.register_dataclass(
    MergeTable, data_fields=["q", "offset", "mu", "sa", "sb", "qinv_neg"], meta_fields=["bp", "chunks", "reduction"]
)


def make_merge_table(moduli: Sequence[int], partial_bound: int, chunks: int, bp: int, reduction: str) -> MergeTable:
    """Constants for merging ``chunks`` partial sums each bounded by ``|z| <= partial_bound``.

    Raises OverflowBoundError when the int32 accumulator or the 64-bit merge would overflow.
    """
    if reduction not in _MERGE_REDUCTIONS:
        raise ParameterError(f"BAT merge reduction must be one of {_MERGE_REDUCTIONS}, got {reduction!r}")
    if partial_bound >= 1 << 31:
        raise OverflowBoundError(
            f"BAT partial sums can reach {partial_bound} >= 2^31 and would overflow the int32 accumulator; "
            "use a shorter contraction (split the matrix) or a smaller chunk width bp"
        )
    merged_bound = partial_bound * sum(1 << (bp * i) for i in range(chunks))
    qs = [check_modulus(q, odd=(reduction == "montgomery")) for q in moduli]
    offs, mus, sas, sbs, qinvs = [], [], [], [], []
    for q in qs:
        k = q.bit_length()
        off = -(-merged_bound // q) * q
        n = (2 * off).bit_length()
        if reduction == "barrett" and n > k + 31:
            raise OverflowBoundError(
                f"BAT merged values need {n} bits, beyond the {k + 31} bits exact Barrett reduction handles for "
                f"the {k}-bit modulus {q}; use a shorter contraction or a smaller chunk width bp"
            )
        if reduction == "montgomery" and 2 * off > q << 32:
            raise OverflowBoundError(
                f"BAT merged values reach {2 * off}, beyond q * 2^32 for Montgomery reduction with modulus {q}"
            )
        offs.append(off)
        mus.append((1 << n) // q)
        sas.append(k - 1)
        sbs.append(n - k + 1)
        qinvs.append((-pow(q, -1, 1 << 32)) % (1 << 32) if q % 2 else 0)
    return MergeTable(
        q=np.asarray(qs, np.uint32),
        offset=np.asarray(offs, np.int64),
        mu=np.asarray(mus, np.uint64),
        sa=np.asarray(sas, np.uint64),
        sb=np.asarray(sbs, np.uint64),
        qinv_neg=np.asarray(qinvs, np.uint32),
        bp=bp,
        chunks=chunks,
        reduction=reduction,
    )


def _per_modulus(a, trailing: int):
    """Reshape a 1-D per-modulus array ``(M,)`` to ``(M, 1, ..., 1)`` with ``trailing`` ones."""
    return jnp.reshape(a, (-1,) + (1,) * trailing)


def merge_reduce(zc, table: MergeTable, trailing: int):
    """Merge partial sums and reduce: ``(sum_i zc[..., i, :] 2^(bp*i)) mod q``.

    Args:
        zc: int32 ``(..., M, *S, C, B)``: the modulus axis M sits ``trailing + 1`` axes before the end of the
            merged result; C is the partial-sum axis (second to last), B the last axis.
        table: constants from :func:`make_merge_table`.
        trailing: number of axes after M in the *result* ``(..., M, *S, B)`` (``len(S) + 1``).
    Returns:
        uint32 ``(..., M, *S, B)`` in ``[0, q)``.
    """
    require_x64()
    z = chunk_merge(zc, table.bp, axis=-2)
    x = (z + _per_modulus(table.offset, trailing)).astype(jnp.uint64)
    q = _per_modulus(table.q, trailing)
    if table.reduction == "barrett":
        return barrett_reduce(
            x, q, _per_modulus(table.mu, trailing), _per_modulus(table.sa, trailing), _per_modulus(table.sb, trailing)
        )
    return reduce_once(montgomery_reduce_lazy(x, q, _per_modulus(table.qinv_neg, trailing)), q.astype(jnp.uint32))


# ----------------------------------------------------------------------------------------------------------
# known-matrix plans
# ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BatMatrix:
    """A known matrix per modulus, compiled offline for BAT.

    Attributes:
        dense: int8 ``(M, H*K, V*K)``; row ``h*K + i`` is output chunk i of row h, column ``v*K + j`` input
            chunk j of column v.
        merge: how the K output chunks are merged and reduced.
        num: K (static).
        rows: H (static).
        cols: V (static).
    """

    dense: np.ndarray
    merge: MergeTable
    num: int
    rows: int
    cols: int


jax.tree_util.register_dataclass(BatMatrix, data_fields=["dense", "merge"], meta_fields=["num", "rows", "cols"])


def compile_known_matrix(
    a, moduli: Sequence[int], bp: int = DEFAULT_BP, reduction: str = "barrett", num: int | None = None
) -> BatMatrix:
    """OFFLINECOMPILELEFT of CROSS Alg. 2 with signed digits, batched over moduli.

    Args:
        a: integer array ``(M, H, V)`` (or ``(H, V)`` with one modulus) of residues in ``[0, q_m)``.
        moduli: the M moduli.
        bp: chunk width.
        reduction: "barrett" merge, or "montgomery" (the factor ``2^32`` is folded into ``a`` here).
        num: number of chunks K (default: enough for the largest modulus).
    """
    bp = check_bp(bp)
    qs = [int(q) for q in moduli]
    a = np.asarray(a, dtype=np.int64)
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3 or a.shape[0] != len(qs):
        raise ShapeError(f"known matrix must be (M, H, V) for {len(qs)} moduli, got shape {a.shape}")
    qcol = np.asarray(qs, dtype=np.int64).reshape(-1, 1, 1)
    if np.any(a < 0) or np.any(a >= qcol):
        raise ParameterError("known matrix entries must be residues in [0, q)")
    if num is None:
        num = max(num_chunks(q, bp) for q in qs)
    if reduction == "montgomery":
        a = np.asarray((a.astype(object) * (1 << 32)) % qcol.astype(object), dtype=np.int64)
    m, h, v = a.shape
    shifted = np.empty((m, h, v, num), dtype=np.int64)  # a * 2^(bp*j) mod q, then centered
    cur = a.copy()
    for j in range(num):
        shifted[..., j] = _np_centered(cur, qcol)
        cur = (cur << bp) % qcol
    digits = _np_balanced_digits(shifted, num, bp)  # (m, h, v, j, i)
    dense = np.ascontiguousarray(digits.transpose(0, 1, 4, 2, 3)).reshape(m, h * num, v * num)
    bound = v * num * (1 << (2 * bp - 2))
    return BatMatrix(dense, make_merge_table(qs, bound, num, bp, reduction), num, h, v)


def decompose_operand(x, q, num: int, bp: int, axis: int):
    """Runtime side (RUNTIMECOMPILERIGHT): centered balanced digits of uint32 residues ``x`` mod ``q``."""
    return chunk_decompose(centered_u32(x, q), num, bp, axis=axis)


def apply_known(x, mat: BatMatrix):
    """Multiply a known matrix into one axis of ``x``, exactly mod each limb's modulus.

    Args:
        x: uint32 ``(..., M, A, V, B)`` residues (limb axis M matching the compiled moduli).
        mat: compiled ``(M, H*K, V*K)`` matrix.
    Returns:
        uint32 ``(..., M, A, H, B)`` with ``y[..., m, a, h, b] = sum_v A_m[h, v] x[..., m, a, v, b] mod q_m``.
    """
    require_x64()
    if x.shape[-2] != mat.cols or x.shape[-4] != mat.dense.shape[0]:
        raise ShapeError(
            f"apply_known: data {x.shape} does not match a ({mat.dense.shape[0]} moduli, {mat.rows}x{mat.cols}) matrix"
        )
    k, bp = mat.num, mat.merge.bp
    q = _per_modulus(mat.merge.q, 3)
    d = decompose_operand(x, q, k, bp, axis=-2)  # (..., M, A, V, K, B)
    d = d.reshape(d.shape[:-3] + (mat.cols * k, d.shape[-1]))
    zc = jnp.einsum("mhv,...mavb->...mahb", mat.dense, d, preferred_element_type=jnp.int32)
    zc = zc.reshape(zc.shape[:-2] + (mat.rows, k, zc.shape[-1]))
    return merge_reduce(zc, mat.merge, trailing=3)


# ----------------------------------------------------------------------------------------------------------
# sparse Toeplitz baseline (CROSS Fig. 7, step 1): 2K-1 partial sums, no offline folding
# ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ToeplitzMatrix:
    """Baseline compiled form: int8 ``(M, H*(2K-1), V*K)`` Toeplitz blocks of the digits of ``A``.

    ``low`` merges partial sums 0..K-1, ``high`` merges K..2K-2 (None when K = 1: no high sums); the result is
    ``low + high * 2^(bp*K)``.
    """

    dense: np.ndarray
    low: MergeTable
    high: MergeTable | None
    shift: np.ndarray  # uint32 2^(bp*K) mod q
    shift_shoup: np.ndarray  # its Shoup constant
    num: int
    rows: int
    cols: int


jax.tree_util.register_dataclass(
    ToeplitzMatrix, data_fields=["dense", "low", "high", "shift", "shift_shoup"], meta_fields=["num", "rows", "cols"]
)


def compile_toeplitz_matrix(a, moduli: Sequence[int], bp: int = DEFAULT_BP) -> ToeplitzMatrix:
    """Baseline: chunk ``A`` without reducing shifted chunks, giving a sparse Toeplitz (2K-1)xK block per entry."""
    bp = check_bp(bp)
    qs = [int(q) for q in moduli]
    a = np.asarray(a, dtype=np.int64)
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3 or a.shape[0] != len(qs):
        raise ShapeError(f"known matrix must be (M, H, V) for {len(qs)} moduli, got shape {a.shape}")
    qcol = np.asarray(qs, dtype=np.int64).reshape(-1, 1, 1)
    if np.any(a < 0) or np.any(a >= qcol):
        raise ParameterError("known matrix entries must be residues in [0, q)")
    num = max(num_chunks(q, bp) for q in qs)
    shift = [(1 << (bp * num)) % q for q in qs]
    m, h, v = a.shape
    digits = _np_balanced_digits(_np_centered(a, qcol), num, bp)  # (m, h, v, i)
    rows = 2 * num - 1
    blocks = np.zeros((m, h, rows, v, num), dtype=np.int8)
    for j in range(num):  # input chunk j of b meets digit i of a at output basis t = i + j
        for i in range(num):
            blocks[:, :, i + j, :, j] = digits[..., i]
    dense = blocks.reshape(m, h * rows, v * num)
    bound = v * num * (1 << (2 * bp - 2))
    return ToeplitzMatrix(
        dense=dense,
        low=make_merge_table(qs, bound, num, bp, "barrett"),
        high=make_merge_table(qs, bound, num - 1, bp, "barrett") if num > 1 else None,
        shift=np.asarray(shift, np.uint32),
        shift_shoup=shoup_precompute(shift, qs),
        num=num,
        rows=h,
        cols=v,
    )


def apply_toeplitz(x, mat: ToeplitzMatrix):
    """Baseline counterpart of :func:`apply_known` (same shapes and result)."""
    require_x64()
    k, bp = mat.num, mat.low.bp
    q = _per_modulus(mat.low.q, 3)
    d = decompose_operand(x, q, k, bp, axis=-2)
    d = d.reshape(d.shape[:-3] + (mat.cols * k, d.shape[-1]))
    zc = jnp.einsum("mhv,...mavb->...mahb", mat.dense, d, preferred_element_type=jnp.int32)
    zc = zc.reshape(zc.shape[:-2] + (mat.rows, 2 * k - 1, zc.shape[-1]))
    low = merge_reduce(zc[..., :k, :], mat.low, trailing=3)
    if mat.high is None:
        return low
    high = merge_reduce(zc[..., k:, :], mat.high, trailing=3)
    high = mul_shoup(high, _per_modulus(mat.shift, 3), _per_modulus(mat.shift_shoup, 3), q)
    return add_mod(low, high, q)


# ----------------------------------------------------------------------------------------------------------
# user entry point
# ----------------------------------------------------------------------------------------------------------


def _as_residue_matrix(x, q: int, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.integer):
        try:
            arr = np.asarray(x, dtype=np.int64)
        except (OverflowError, TypeError, ValueError) as exc:
            raise ParameterError(f"{name} must hold integers in [0, q)") from exc
    if arr.size and (arr.min() < 0 or arr.max() >= q):
        raise ParameterError(f"{name} entries must lie in [0, q) = [0, {q}); reduce them first")
    return arr


def modmatmul(a, b, q: int, bp: int = DEFAULT_BP, reduction: str = "barrett", method: str = "bat"):
    """Exact ``(a @ b) mod q`` through int8 chunk matmuls.

    ``a`` (H x V) is treated as the known operand and compiled offline; ``b`` has shape ``(..., V, W)``.
    Entries must be residues in ``[0, q)``; any ``2 <= q < 2^31`` works (prime or not; odd for Montgomery).

    Args:
        a: integer array ``(H, V)``.
        b: integer array ``(..., V, W)``.
        q: modulus.
        bp: chunk width in bits (2..8).
        reduction: "barrett" or "montgomery" merge.
        method: "bat" (dense BAT matrix) or "toeplitz" (sparse baseline, CROSS Fig. 7 step 1).
    Returns:
        uint32 jax array ``(..., H, W)``.
    Raises:
        OverflowBoundError beyond the exactness bound; ShapeError / ParameterError / ModulusError on bad input.
    """
    q = check_modulus(q, odd=(reduction == "montgomery"))
    a_arr = _as_residue_matrix(a, q, "a")
    b_arr = _as_residue_matrix(b, q, "b")
    if a_arr.ndim != 2 or b_arr.ndim < 2 or a_arr.shape[1] != b_arr.shape[-2]:
        raise ShapeError(f"modmatmul needs a (H, V) and b (..., V, W); got {a_arr.shape} and {b_arr.shape}")
    if method == "bat":
        mat = compile_known_matrix(a_arr, [q], bp, reduction)
        fn = apply_known
    elif method == "toeplitz":
        mat = compile_toeplitz_matrix(a_arr, [q], bp)
        fn = apply_toeplitz
    else:
        raise ParameterError(f"method must be 'bat' or 'toeplitz', got {method!r}")
    x = jnp.asarray(b_arr.astype(np.uint32))[..., None, None, :, :]  # (..., M=1, A=1, V, W)
    return jax.jit(fn)(x, mat)[..., 0, 0, :, :]
