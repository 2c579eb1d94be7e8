"""Fast basis conversion (CROSS App. F2): from RNS basis ``{q_i}`` (L limbs) to ``{p_j}`` (L' limbs).

    out_j = ( sum_i [x_i * qhat_i^-1]_{q_i} * [qhat_i]_{p_j} ) mod p_j,      qhat_i = Q / q_i,  Q = prod q_i

(the standard "fast" conversion: ``out = X + u Q mod p_j`` for the CRT value ``X`` of ``x`` and some integer
``0 <= u < L``). With ``centered=True`` the bracket ``[.]_{q_i}`` is taken in ``(-q_i/2, q_i/2]`` instead: the
result is then ``X_c + u Q`` for the *centered* CRT value ``X_c`` and ``|u| <= L/2``, a zero-mean error, which is
what ModDown needs to round (rather than floor) its division by P. Step 1 is an element-wise product by a known constant (:func:`hemx.kernels.modarith.mul_known`).
Step 2, an ``(N, L, L')`` modular matmul, is computed two ways:

* ``bat``: one int8 matmul ``(L'*K, L*K + L) @ (L*K + L, N)``. The runtime operand ``y_i`` in ``[0, q_i)`` is
  split as ``c_i + q_i s_i`` with ``c_i`` centered (balanced digits) and ``s_i`` in ``{0, 1}``; the ``s_i`` rows
  meet the known column ``[qhat_i q_i]_{p_j}``, which makes the centered digits exact for *another* modulus.
* ``elementwise``: the plain baseline, ``L`` multiply-accumulate passes over ``(L', N)``.
"""

from __future__ import annotations

import dataclasses
from math import gcd, prod
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from hemx.errors import ModulusError, ParameterError, ShapeError
from hemx.kernels import bat
from hemx.kernels._x64 import require_x64
from hemx.kernels.modarith import (
    REDUCTIONS,
    KnownOperand,
    ModulusTable,
    add_mod,
    sub_mod,
    check_modulus,
    known_operand,
    make_modulus_table,
    mul_known,
)

BCONV_METHODS = ("bat", "elementwise", "native")

#: ``bconv(method="auto")`` converts from this many source limbs or fewer element-wise: the BAT matmul's int32
#: partial sums are 4x the size of the result, which costs more than a pass or two. Measured on the 2-core
#: CPU at N = 2^16 (30 limbs): rescaling by two primes 62.7 ms with BAT, 23.2 ms element-wise; a key switch
#: converting 10-limb digits is 1.7x slower element-wise.
ELEMENTWISE_MAX_SOURCES = 2

#: BAT conversions run their int8 GEMM in column blocks whose int32 output stays below this many bytes. On
#: XLA:CPU a larger temporary is fresh mmap'd memory on every call (glibc's mmap threshold is at most
#: 32 MiB), and touching it costs page faults: a (120 x 40) @ (40 x 131072) GEMM took 17.5 ms, against
#: 1.3 ms for 65536 columns. Measured on the 2-core CPU at N = 2^16 with 30 limbs (default malloc):
#: HE-Mult+Rescale 223 -> 164 ms and Rotate 200 -> 139 ms with 16 MiB blocks (8 MiB: 179 / 169 ms;
#: 32 MiB: 178 / 174 ms).
GEMM_BLOCK_BYTES = 16 << 20


@dataclasses.dataclass(frozen=True)
class BConvPlan:
    """Tables for converting ``(..., L, N)`` residues mod ``source`` to ``(..., L', N)`` mod ``target``.

    Attributes:
        src: modulus table of the source basis, ``(L, 1)``.
        dst: modulus table of the target basis, ``(L', 1)``.
        qhat_inv: known operand ``[qhat_i^-1]_{q_i}``, ``(L, 1)``.
        qhat_mod_p: known operands ``[qhat_i]_{p_j}``, ``(L, L', 1)`` (element-wise baseline).
        dense: int8 ``(L'*K, L*K + L)`` BAT matrix.
        merge: merge/reduction constants for the L' target moduli.
        corr: known operands ``[q_i qhat_i]_{p_j}``, ``(L, L', 1)`` (centering correction, element-wise path).
        num: chunks per residue K (static); reduction: method for known products (static).
        centered: whether step 1's result is used centered (static).
    """

    src: ModulusTable
    dst: ModulusTable
    qhat_inv: KnownOperand
    qhat_mod_p: KnownOperand
    corr: KnownOperand
    dense: np.ndarray
    merge: bat.MergeTable
    num: int
    reduction: str
    centered: bool


jax.tree_util.register_dataclass(
    BConvPlan,
    data_fields=["src", "dst", "qhat_inv", "qhat_mod_p", "corr", "dense", "merge"],
    meta_fields=["num", "reduction", "centered"],
)


def make_bconv_plan(
    source: Sequence[int], target: Sequence[int], *, bp: int = bat.DEFAULT_BP, reduction: str = "shoup",
    centered: bool = False,
) -> BConvPlan:
    """Precompute the conversion tables (host side, exact integers).

    Source and target moduli must be odd, below 2^31 and pairwise coprime (together). ``centered`` selects the
    centered variant (see the module docstring).
    """
    src = [check_modulus(q) for q in source]
    dst = [check_modulus(p) for p in target]
    if not src or not dst:
        raise ParameterError("basis conversion needs at least one source and one target modulus")
    allm = src + dst
    if len(set(allm)) != len(allm):
        raise ModulusError("source and target moduli must be distinct")
    for i, a in enumerate(allm):
        for b in allm[i + 1 :]:
            if gcd(a, b) != 1:
                raise ModulusError(f"basis-conversion moduli must be pairwise coprime; {a} and {b} share {gcd(a, b)}")
    big_q = prod(src)
    qhat = [big_q // q for q in src]
    qhat_inv = [pow(h % q, -1, q) for h, q in zip(qhat, src)]
    c = np.array([[h % p for p in dst] for h in qhat], dtype=np.int64)  # [qhat_i]_{p_j}, (L, L')
    corr = np.array([[(h * q) % p for p in dst] for h, q in zip(qhat, src)], dtype=np.int64)
    bp = bat.check_bp(bp)
    num = max(bat.num_chunks(m, bp) for m in allm)
    nl, nlp = len(src), len(dst)
    # columns: chunk j of centered y_i at v = i*K + j, then (uncentered variant) the L correction bits s_i
    extra = 0 if centered else nl
    vals = np.zeros((nlp, nl * num + extra), dtype=np.int64)
    pcol = np.asarray(dst, dtype=np.int64)
    for i in range(nl):
        cur = c[i].copy()
        for j in range(num):
            vals[:, i * num + j] = np.where(cur > pcol // 2, cur - pcol, cur)
            cur = (cur << bp) % pcol
        if not centered:
            vals[:, nl * num + i] = np.where(corr[i] > pcol // 2, corr[i] - pcol, corr[i])
    digits = bat._np_balanced_digits(vals, num, bp)  # (L', V, K_out)
    dense = np.ascontiguousarray(digits.transpose(0, 2, 1))
    bound = nl * num * (1 << (2 * bp - 2)) + extra * (1 << (bp - 1))
    merge = bat.make_merge_table(dst, bound, num, bp, "barrett")
    return BConvPlan(
        src=make_modulus_table(src),
        dst=make_modulus_table(dst),
        qhat_inv=known_operand(np.asarray(qhat_inv, np.int64).reshape(nl, 1), np.asarray(src, np.int64).reshape(nl, 1)),
        qhat_mod_p=known_operand(c.reshape(nl, nlp, 1), np.asarray(dst, np.int64).reshape(1, nlp, 1)),
        corr=known_operand(corr.reshape(nl, nlp, 1), np.asarray(dst, np.int64).reshape(1, nlp, 1)),
        dense=dense.reshape(nlp * num, nl * num + extra),
        merge=merge,
        num=num,
        reduction=reduction,
        centered=bool(centered),
    )


def _check(x, plan: BConvPlan):
    nl = plan.src.q.shape[0]
    if x.ndim < 2 or x.shape[-2] != nl:
        raise ShapeError(f"basis conversion input must be (..., {nl}, N) for {nl} source moduli; got {tuple(x.shape)}")
    if x.dtype != jnp.uint32:
        raise ShapeError(f"basis conversion input must be uint32 residues, got {x.dtype}")
    if plan.reduction not in REDUCTIONS:  # checked here too: the native kernel has no use for it
        raise ParameterError(f"unknown reduction {plan.reduction!r}; choose one of {REDUCTIONS}")


def scale_step(x, plan: BConvPlan):
    """Step 1: ``y_i = [x_i * qhat_i^-1]_{q_i}`` (element-wise, known operand), ``(..., L, N)``."""
    return mul_known(x, plan.qhat_inv, plan.src, plan.reduction)


def matmul_step_bat(y, plan: BConvPlan):
    """Step 2 through BAT: ``(..., L, N)`` in the source basis -> ``(..., L', N)`` in the target basis."""
    return matmul_step_bat_rows(bat_operand(y, plan), plan, 0, plan.dst.q.shape[0])


def bat_operand(y, plan: BConvPlan):
    """The int8 operand of the BAT step for ``y`` (after step 1): ``(..., L*K + L, N)``, target-independent."""
    digits = bat.decompose_operand(y, plan.src.q, plan.num, plan.merge.bp, axis=-2)  # (..., L, K, N)
    digits = digits.reshape(digits.shape[:-3] + (-1, digits.shape[-1]))
    if plan.centered:
        return digits
    bits = (y > (plan.src.q >> 1)).astype(jnp.int8)  # s_i: 1 where the centered digit used y_i - q_i
    return jnp.concatenate([digits, bits], axis=-2)


def matmul_step_bat_rows(operand, plan: BConvPlan, start, count: int):
    """Step 2 for the ``count`` target moduli from ``start`` on: ``(..., V, N) -> (..., count, N)``.

    ``operand`` comes from :func:`bat_operand`; ``start`` may be traced (loops over output towers inside jit),
    ``count`` is static. One int8 matmul with ``count * K`` rows of the dense matrix, then the exact merge.
    Leading axes are folded into the matmul's columns, so the backend sees one plain 2-D GEMM.
    """
    require_x64()
    k = plan.num
    # the operand is materialized first: fused into the matmul, its digit split is recomputed per output tile
    # (measured on XLA:CPU: a 10 -> 30 limb conversion at N = 2^16 took 12 ms fused, 2.8 ms materialized)
    lead, v, n = operand.shape[:-2], operand.shape[-2], operand.shape[-1]
    cols = jax.lax.optimization_barrier(jnp.moveaxis(operand, -2, 0).reshape(v, -1) if lead else operand)
    rows = jax.lax.dynamic_slice_in_dim(plan.dense, start * k, count * k, axis=0)  # (count*K, V)
    part = lambda a: jax.lax.dynamic_slice_in_dim(a, start, count, axis=0)  # noqa: E731
    merge = dataclasses.replace(plan.merge, q=part(plan.merge.q), offset=part(plan.merge.offset),
                                mu=part(plan.merge.mu), sa=part(plan.merge.sa), sb=part(plan.merge.sb),
                                qinv_neg=part(plan.merge.qinv_neg))
    # column blocks keep each int32 product (4 bytes per partial sum, K per residue) below GEMM_BLOCK_BYTES
    width = cols.shape[-1]
    block = max(1, min(width, GEMM_BLOCK_BYTES // (4 * count * k)))
    outs = []
    for lo in range(0, width, block):
        zc = jnp.matmul(rows, cols[:, lo : lo + block], preferred_element_type=jnp.int32).reshape(count, k, -1)
        outs.append(bat.merge_reduce(zc, merge, trailing=1))
    out = outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=-1)  # (count, B*N)
    return jnp.moveaxis(out.reshape((count,) + lead + (n,)), 0, -2) if lead else out


def matmul_step_elementwise(y, plan: BConvPlan):
    """Step 2 baseline: ``sum_i y_i * [qhat_i]_{p_j} mod p_j`` by L element-wise passes."""
    nl = plan.src.q.shape[0]
    acc = None
    for i in range(nl):
        yi = jnp.broadcast_to(y[..., i : i + 1, :], y.shape[:-2] + (plan.dst.q.shape[0], y.shape[-1]))
        # y_i < q_i may exceed p_j; Shoup/Montgomery accept any 32-bit input, Barrett needs it reduced first
        if plan.reduction == "barrett":
            yi = yi % plan.dst.q
        term = mul_known(yi, KnownOperand(*(f[i] for f in plan.qhat_mod_p)), plan.dst, plan.reduction)
        if plan.centered:  # y_i above q_i / 2 stands for y_i - q_i: subtract [q_i qhat_i]_{p_j}
            upper = y[..., i : i + 1, :] > (plan.src.q[i] >> 1)
            term = jnp.where(upper, sub_mod(term, plan.corr.value[i], plan.dst.q), term)
        acc = term if acc is None else add_mod(acc, term, plan.dst.q)
    return acc


def _bconv_jax(x, plan: BConvPlan, method: str):
    y = scale_step(x, plan)
    if method == "bat":
        return matmul_step_bat(y, plan)
    return matmul_step_elementwise(y, plan)


def bconv(x, plan: BConvPlan, method: str = "auto"):
    """Fast basis conversion of uint32 ``(..., L, N)`` residues to ``(..., L', N)`` (see module docstring).

    ``method``: "bat" (one int8 matmul), "elementwise" (L passes of known-operand products), "native" (the
    C++ kernel of :mod:`hemx.kernels.native`, CPU only; BackendError where unavailable) or "auto": the native
    kernel where the program runs on CPU and the native library is available (``hemx.kernels.native.on_cpu``:
    the choice is made when the program is lowered, so ``jax.export`` for cuda / tpu keeps the JAX path), and
    otherwise element-wise for at most :data:`ELEMENTWISE_MAX_SOURCES` source limbs, BAT above. All are exact
    and give the same result.
    """
    _check(x, plan)
    if method not in BCONV_METHODS + ("auto",):
        raise ParameterError(f"unknown basis-conversion method {method!r}; choose one of {BCONV_METHODS + ('auto',)}")
    if method in ("auto", "native"):
        from hemx.kernels import native  # noqa: PLC0415 - optional library, loaded once

        if method == "native":
            return native.bconv(x, plan)
        fallback = "elementwise" if plan.src.q.shape[0] <= ELEMENTWISE_MAX_SOURCES else "bat"
        return native.on_cpu(native.bconv, lambda v, pl: _bconv_jax(v, pl, fallback), x, plan)
    return _bconv_jax(x, plan, method)
