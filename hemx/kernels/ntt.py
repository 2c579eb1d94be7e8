"""Negacyclic NTT kernels: radix-2 butterfly, 4-step, layout-invariant 3-step (MAT + BAT), multi-level.

Convention. For a polynomial ``a`` of degree < N and a primitive 2N-th root of unity ``psi`` mod q, the
negacyclic transform is ``A_k = sum_j a_j psi^((2k+1) j)`` (evaluation at the odd powers of psi). Every method
here returns the *bit-reversed* order: position ``p`` holds ``A_{brv(p)}``. Pointwise products in this domain
are negacyclic products of polynomials, and the automorphism index maps of the ring use this order
(:func:`evaluation_order`).

Methods (all exact, batched over leading axes and limbs; data ``(..., L, N)`` uint32):

* ``butterfly``: Cooley-Tukey forward / Gentleman-Sande inverse, one vectorized stage per bit (CROSS Alg. 3).
* ``four_step``: R-point matrix NTT on columns, twiddles, explicit transpose, C-point matrix NTT, explicit
  bit-reversal gather (the TensorFHE / GPU formulation); matrices through BAT.
* ``mat3``: CROSS's layout-invariant 3-step NTT: ``N = R*C`` viewed ``(R, C)``; the R-point step contracts the
  leading axis, the C-point step the trailing one (no transpose: MAT puts the known matrix on the side where
  the data already is), and the bit-reversal permutations are folded into the matrices' rows offline.
* ``multilevel``: the same layout-invariant scheme recursively, over small radices (WarpDrive-style, radix 16
  by default): ``N = n_1 * ... * n_t`` and one ``n_s``-point BAT matmul per level.
* ``native``: the butterfly's tables run by the C++ kernels of :mod:`hemx.kernels.native` (XLA FFI, CPU) where
  the program is lowered for CPU and the library is available; elsewhere (``jax.export`` for cuda / tpu, the
  library switched off) the JAX butterfly on the same tables (``jax.lax.platform_dependent``, bit-identical).

Derivation of the layout-invariant scheme (``j = sum_s j_s S_s`` with ``S_s = prod_{u>s} n_u``, output
``k = sum_s k_s P_s`` with ``P_s = prod_{u<s} n_u``): only the terms ``u <= s`` of ``j_s S_s k_u P_u`` survive
modulo N, so level s multiplies by the twiddle ``tau_s(k_<s, j_s) = psi^(S_s j_s (2 sum_{u<s} k_u P_u + 1))``
and then contracts ``j_s`` with the DFT matrix ``omega_{n_s}^(j_s k_s)`` (level 1 folds ``tau_1`` into its
matrix). Writing ``k_s = brv(k'_s)`` in the matrices' rows puts ``A_{brv(p)}`` at position
``p = sum_s k'_s S_s``. ``mat3`` is this scheme with two levels ``(R, C)``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import jax
import jax.extend.core as jex_core
from jax.interpreters import batching, mlir
import jax.numpy as jnp
import numpy as np

from hemx.errors import BackendError, ModulusError, ParameterError, ShapeError
from hemx.kernels import bat
from hemx.kernels.modarith import (
    REDUCTIONS,
    KnownOperand,
    ModulusTable,
    add_mod,
    known_operand,
    make_modulus_table,
    mul_known,
    sub_mod,
)
from hemx.kernels.ntt_layout import (
    NATIVE_METHOD,
    LimbLayout,
    PermuteStage,
    limb_layout,
    select_limb_dynamic,
    select_limbs,
    with_limb_tables,
)
from hemx.nt import bit_reverse_permutation, log2_exact, primitive_2nth_root, is_prime

METHODS: tuple[str, ...] = ("butterfly", "four_step", "mat3", "multilevel")
# NATIVE_METHOD ("native", from hemx.kernels.ntt_layout): the C++ radix-2/4 butterfly of hemx.kernels.native (XLA
# FFI, CPU only, optional at install): the butterfly method's tables and results, run natively where the program is
# lowered for CPU (the JAX butterfly elsewhere, so such a plan exports for cuda / tpu). Kept out of METHODS (the JAX
# methods).
ALL_METHODS: tuple[str, ...] = METHODS + (NATIVE_METHOD,)

#: (method, reduction) per backend when nothing is forced and nothing is measured (the planner's round one starts
#: here too): the matrix-engine NTT on GPU / TPU (int8 dots on tensor cores / the MXU; Montgomery on TPU, which has
#: no fast 32-bit high product), the butterfly on CPU -- where the native C++ NTT, when built, comes first
#: (:func:`default_method`).
STATIC_DEFAULTS: dict[str, tuple[str, str]] = {
    "cpu": ("butterfly", "shoup"),
    "gpu": ("mat3", "shoup"),
    "tpu": ("mat3", "montgomery"),
}
FALLBACK_DEFAULT = ("butterfly", "shoup")


def default_method(backend: str | None = None) -> tuple[str, str]:
    """The fastest exact (method, reduction) on ``backend`` (default: JAX's default backend) without measuring:
    the native C++ NTT on CPU where its library is available (8x the JAX butterfly at (30, 2^16), and a first call
    5-9x quicker: docs/results/native-cpu.md, docs/plan.md), else :data:`STATIC_DEFAULTS`. The one rule every entry
    point without an explicit ``ntt=`` follows (``RNSRing``, ``Context`` with planning off, the demos)."""
    backend = backend or jax.default_backend()
    if backend == "cpu":
        from hemx.kernels import native  # noqa: PLC0415 - optional library, loaded once

        if native.available():
            return NATIVE_METHOD, "shoup"
    return STATIC_DEFAULTS.get(backend, FALLBACK_DEFAULT)


# ----------------------------------------------------------------------------------------------------------
# host-side helpers
# ----------------------------------------------------------------------------------------------------------


def check_ntt_moduli(n: int, moduli: Sequence[int]) -> list[int]:
    """Validate ring degree and moduli for a negacyclic NTT; returns the moduli as ints."""
    log2_exact(n, "ring degree N")
    if n < 2:
        raise ParameterError(f"ring degree N must be at least 2, got {n}")
    qs = [int(q) for q in moduli]
    if not qs:
        raise ModulusError("at least one modulus is required")
    for q in qs:
        if q >= 1 << 31:
            raise ModulusError(f"modulus {q} has {q.bit_length()} bits; hemx words hold moduli below 2^31")
        if q % (2 * n) != 1:
            raise ModulusError(
                f"modulus {q} is not NTT-friendly for N = {n}: need q = 1 mod 2N = {2 * n} "
                f"(q mod 2N = {q % (2 * n)}); hemx.nt.ntt_primes(bits, count, N) lists suitable primes"
            )
        if not is_prime(q):
            raise ModulusError(f"modulus {q} is not prime")
    if len(set(qs)) != len(qs):
        raise ModulusError("moduli must be distinct")
    return qs


def psi_powers(n: int, q: int, psi: int | None = None) -> np.ndarray:
    """``psi^e mod q`` for ``e`` in ``[0, 2n)`` as uint64 (psi: a primitive 2n-th root; default from hemx.nt)."""
    if psi is None:
        psi = primitive_2nth_root(n, q)
    out = np.ones(2 * n, dtype=np.uint64)
    m, qq = 1, np.uint64(q)
    while m < 2 * n:  # doubling: out[m:2m] = out[:m] * psi^m
        step = min(m, 2 * n - m)
        out[m : m + step] = (out[:step] * np.uint64(pow(psi, m, q))) % qq
        m *= 2
    return out


def _pow_table(powers: np.ndarray, exps: np.ndarray, n: int) -> np.ndarray:
    """Gather ``psi^exps`` (exponents taken mod 2n, negatives allowed) from each limb's power table.

    ``powers`` is ``(L, 2n)``; ``exps`` any integer shape; result ``(L,) + exps.shape`` int64.
    """
    e = np.mod(exps, 2 * n).astype(np.int64)
    return powers[:, e].astype(np.int64)


def _scale(vals: np.ndarray, scalars: Sequence[int], moduli: Sequence[int]) -> np.ndarray:
    """Multiply each limb's values by a scalar mod q (vals ``(L, ...)``)."""
    out = np.empty_like(vals)
    for l, (s, q) in enumerate(zip(scalars, moduli)):
        out[l] = (vals[l].astype(np.uint64) * np.uint64(s % q)) % np.uint64(q)
    return out


def evaluation_order(n: int) -> np.ndarray:
    """Position -> k map of the NTT domain: position p holds ``A_k`` with ``k = order[p]`` (bit-reversed)."""
    return bit_reverse_permutation(n)


def default_split(n: int) -> tuple[int, int]:
    """(R, C) for mat3 / four_step: as square as possible, ``C >= R``."""
    logn = log2_exact(n, "ring degree N")
    r = 1 << (logn // 2)
    return r, n // r


def default_radices(n: int, max_radix: int = 16) -> tuple[int, ...]:
    """Radices for the multi-level method: powers of two <= max_radix, balanced, larger first."""
    logn = log2_exact(n, "ring degree N")
    logr = log2_exact(max_radix, "radix")
    if logr < 1:
        raise ParameterError("radix must be at least 2")
    levels = max(1, -(-logn // logr))
    base, extra = divmod(logn, levels)
    bits = [base + 1] * extra + [base] * (levels - extra)
    return tuple(1 << b for b in bits if b > 0) or (1,)


# ----------------------------------------------------------------------------------------------------------
# stage pytrees (a plan is data: a tuple of stages run by one executor)
# ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MatrixStage:
    """Contract axis V of the view ``(..., L, A, V, B)`` with a known matrix (BAT)."""

    mat: bat.BatMatrix
    a: int
    b: int


@dataclasses.dataclass(frozen=True)
class TwiddleStage:
    """Pointwise multiply by known twiddles ``(L, D1, D2)`` on the view ``(..., L, D1, D)`` (D2 = D or 1)."""

    tw: KnownOperand
    d1: int


@dataclasses.dataclass(frozen=True)
class TransposeStage:
    """Explicit transpose of the view ``(..., L, R, C)`` to ``(..., L, C, R)``."""

    r: int
    c: int


@dataclasses.dataclass(frozen=True)
class ButterflyTables:
    """Twiddles of the radix-2 transforms, ``(L, N)`` known operands in bit-reversed index order.

    ``fwd[i] = psi^brv(i)``; ``inv[i] = psi^-brv(i)``; the last inverse stage uses ``inv_last = psi^-1 / N``
    and ``ninv = 1 / N`` so no separate scaling pass is needed.

    ``rows`` (native plans only): None, or int32 ``(L,)``: limb ``l`` uses row ``rows[l]`` of ``fwd`` / ``inv``,
    which then keep the ring's full ``(R, N)`` tables. :func:`select_limbs` on a native plan selects rows
    instead of slicing the big tables, so the C++ kernels read the ring's tables in place (a sliced copy of
    both twiddle tables per call cost as much as the transform itself at N = 2^16).
    """

    fwd: KnownOperand
    inv: KnownOperand
    inv_last: KnownOperand
    ninv: KnownOperand
    rows: jax.Array | None = None


for _cls, _data, _meta in (
    (MatrixStage, ["mat"], ["a", "b"]),
    (TwiddleStage, ["tw"], ["d1"]),
    (TransposeStage, [], ["r", "c"]),
    (ButterflyTables, ["fwd", "inv", "inv_last", "ninv", "rows"], []),
):
    jax.tree_util.register_dataclass(_cls, data_fields=_data, meta_fields=_meta)


@dataclasses.dataclass(frozen=True)
class NTTPlan:
    """Everything one NTT method needs for a ring ``(N, moduli)``; a pytree (arrays are leaves).

    Attributes:
        table: modulus constants shaped ``(L, 1)``.
        forward / inverse: stage tuples (matrix methods) - empty for the butterfly.
        butterfly: twiddle tables (butterfly method) - None otherwise.
        method, n, num_limbs, reduction, bp, split: static description.
    """

    table: ModulusTable
    forward: tuple
    inverse: tuple
    butterfly: ButterflyTables | None
    method: str
    n: int
    num_limbs: int
    reduction: str
    bp: int
    split: tuple[int, ...]

    def describe(self) -> str:
        parts = f" split={'x'.join(map(str, self.split))}" if self.split else ""
        bp = f" bp={self.bp}" if self.method not in ("butterfly", NATIVE_METHOD) else ""
        return f"{self.method}{parts}{bp} reduction={self.reduction}"


jax.tree_util.register_dataclass(
    NTTPlan,
    data_fields=["table", "forward", "inverse", "butterfly"],
    meta_fields=["method", "n", "num_limbs", "reduction", "bp", "split"],
)


# ----------------------------------------------------------------------------------------------------------
# plan construction
# ----------------------------------------------------------------------------------------------------------


def subring_roots(n: int, moduli: Sequence[int], block: int) -> list[int]:
    """The ``psi`` of the subring ``Z[Y]/(Y^(n / block) + 1)``, ``Y = X^block``, inside the ring of degree ``n``:
    each modulus' default primitive 2n-th root to the power ``block`` (:func:`make_plan`'s ``psi``). With them the
    subring's transform of ``g`` equals the ring's transform of ``g(X^block)`` with each run of ``block`` equal
    values (the bit-reversed order keeps them consecutive) written once."""
    log2_exact(block, "subring block")
    if not 1 <= block < n:
        raise ParameterError(f"a subring block must be a power of two below N = {n}, got {block}")
    return [pow(primitive_2nth_root(n, int(q)), block, int(q)) for q in moduli]


def _known(vals: np.ndarray, moduli: Sequence[int]) -> KnownOperand:
    qcol = np.asarray(moduli, dtype=np.int64).reshape((-1,) + (1,) * (vals.ndim - 1))
    return known_operand(vals.astype(np.int64), qcol)


def _merge_reduction(reduction: str) -> str:
    # Shoup needs one operand per product known *element-wise*; BAT merges are plain reductions, so Shoup
    # plans merge with Barrett (as CROSS does: "Shoup ... is incompatible with BAT").
    return "montgomery" if reduction == "montgomery" else "barrett"


def _mixed_radix_stages(powers, n, qs, radices, reduction, bp, inverse: bool) -> tuple:
    """Stages of the layout-invariant mixed-radix NTT (forward or inverse) for ``radices``."""
    merge = _merge_reduction(reduction)
    t = len(radices)
    sizes_after = [int(np.prod(radices[s + 1 :], dtype=np.int64)) for s in range(t)]  # S_s
    sizes_before = [int(np.prod(radices[:s], dtype=np.int64)) for s in range(t)]  # P_s
    stages = []
    for s in range(t):
        ns, ss, ps = radices[s], sizes_after[s], sizes_before[s]
        k = bit_reverse_permutation(ns) if ns > 1 else np.zeros(1, np.int64)
        j = np.arange(ns)
        if s == 0:
            exps = ss * np.outer(2 * k + 1, j)  # M_1[k', j] = psi^(S_1 j (2 brv(k') + 1))
        else:
            exps = (2 * n // ns) * np.outer(k, j)  # M_s[k', j] = omega_{n_s}^(j brv(k'))
        if s > 0:
            p = bit_reverse_permutation(ps) if ps > 1 else np.zeros(1, np.int64)
            tw_exps = ss * np.outer(2 * p + 1, j)  # tau_s[p, j_s], shape (P_s, n_s)
            sign = -1 if inverse else 1
            tw = _pow_table(powers, sign * tw_exps, n).reshape(len(qs), ps * ns, 1)
            stages.append(TwiddleStage(_known(tw, qs), ps * ns))
        if inverse:  # (M^-1)[j, k'] = psi^-(...) / n_s
            vals = _scale(_pow_table(powers, -exps.T, n), [pow(ns, -1, q) for q in qs], qs)
        else:
            vals = _pow_table(powers, exps, n)
        stages.append(MatrixStage(bat.compile_known_matrix(vals, qs, bp, merge), ps, ss))
    if inverse:  # undo level t first: M_t^-1, tau_t^-1, ..., M_2^-1, tau_2^-1, M_1^-1
        stages.reverse()
    return tuple(stages)


def _four_step_stages(powers, n, qs, r, c, reduction, bp, inverse: bool) -> tuple:
    """TensorFHE-style 4-step: natural-order matrices, explicit transpose and bit-reversal gather."""
    merge = _merge_reduction(reduction)
    kr, jr = np.arange(r), np.arange(r)
    kc, jc = np.arange(c), np.arange(c)
    w1 = c * np.outer(2 * kr + 1, jr)  # R-point negacyclic, natural rows
    tw = np.outer(2 * kr + 1, jc)  # T[k1, c] = psi^(c (2 k1 + 1)), view (R, C)
    w3 = (2 * r) * np.outer(kc, jc)  # C-point cyclic, natural rows
    brv = bit_reverse_permutation(n)
    if not inverse:
        return (
            MatrixStage(bat.compile_known_matrix(_pow_table(powers, w1, n), qs, bp, merge), 1, c),
            TwiddleStage(_known(_pow_table(powers, tw, n), qs), r),
            TransposeStage(r, c),
            MatrixStage(bat.compile_known_matrix(_pow_table(powers, w3, n), qs, bp, merge), 1, r),
            PermuteStage(brv),
        )
    w3_inv = _scale(_pow_table(powers, -w3.T, n), [pow(c, -1, q) for q in qs], qs)
    w1_inv = _scale(_pow_table(powers, -w1.T, n), [pow(r, -1, q) for q in qs], qs)
    return (
        PermuteStage(brv),
        MatrixStage(bat.compile_known_matrix(w3_inv, qs, bp, merge), 1, r),
        TransposeStage(c, r),
        TwiddleStage(_known(_pow_table(powers, -tw, n), qs), r),
        MatrixStage(bat.compile_known_matrix(w1_inv, qs, bp, merge), 1, c),
    )


def _butterfly_tables(powers, n, qs) -> ButterflyTables:
    brv = bit_reverse_permutation(n)
    fwd = _pow_table(powers, brv, n)
    inv = _pow_table(powers, -brv, n)
    ninv = [pow(n, -1, q) for q in qs]
    return ButterflyTables(
        fwd=_known(fwd, qs),
        inv=_known(inv, qs),
        inv_last=_known(_scale(inv, ninv, qs), qs),
        ninv=_known(np.asarray(ninv, dtype=np.int64).reshape(-1, 1), qs),
    )


def make_plan(
    n: int,
    moduli: Sequence[int],
    method: str = "mat3",
    *,
    reduction: str = "shoup",
    bp: int = bat.DEFAULT_BP,
    split: Sequence[int] | None = None,
    max_radix: int = 16,
    psi: Sequence[int] | None = None,
) -> NTTPlan:
    """Precompute an NTT plan (host side, exact integers).

    Args:
        n: ring degree N (power of two).
        moduli: L distinct primes ``q = 1 mod 2N`` below 2^31.
        method: one of :data:`METHODS`, or ``"native"`` (the butterfly's tables for the C++ kernels of
            :mod:`hemx.kernels.native`; raises BackendError when they are unavailable here).
        reduction: "shoup", "montgomery" or "barrett" for the twiddle products (BAT merges use Montgomery
            when it is chosen, Barrett otherwise).
        bp: BAT chunk width (matrix methods).
        split: ``(R, C)`` for mat3 / four_step or the radix list for multilevel (product N).
        max_radix: largest radix when ``split`` is not given (multilevel).
        psi: one primitive 2n-th root of unity per modulus (default: :func:`hemx.nt.primitive_2nth_root`'s). A
            subring's plan takes the ring's roots to the power N / n: its transform of a polynomial in
            ``X^(N / n)`` is then the ring's, one value per run of ``N / n`` equal ones
            (:func:`subring_roots`).
    """
    qs = check_ntt_moduli(n, moduli)
    if method not in ALL_METHODS:
        raise ParameterError(f"unknown NTT method {method!r}; choose one of {ALL_METHODS}")
    if method == NATIVE_METHOD:
        from hemx.kernels import native  # noqa: PLC0415 - optional, loads the library

        if not native.available():
            raise BackendError(f"NTT method 'native' unavailable: {native.reason()}")
    if reduction not in REDUCTIONS:
        raise ParameterError(f"unknown reduction {reduction!r}; choose one of {REDUCTIONS}")
    bp = bat.check_bp(bp)
    if psi is None:
        psi = [None] * len(qs)
    else:
        psi = [int(r) for r in psi]
        if len(psi) != len(qs) or any(not 0 < r < q or pow(r, n, q) != q - 1 for r, q in zip(psi, qs)):
            raise ParameterError(f"psi must hold one primitive {2 * n}-th root of unity per modulus "
                                 f"({len(qs)}), got {len(psi)} values that are not all such roots")
    powers = np.stack([psi_powers(n, q, r) for q, r in zip(qs, psi)])
    table = make_modulus_table(qs)
    if method in ("butterfly", NATIVE_METHOD):
        return NTTPlan(table, (), (), _butterfly_tables(powers, n, qs), method, n, len(qs), reduction, bp, ())
    if split is None:
        split = default_split(n) if method in ("mat3", "four_step") else default_radices(n, max_radix)
    split = tuple(int(s) for s in split)
    for s in split:
        log2_exact(s, "split factor")
    if int(np.prod(split, dtype=np.int64)) != n:
        raise ParameterError(f"split {split} does not multiply to N = {n}")
    if method in ("mat3", "four_step") and len(split) != 2:
        raise ParameterError(f"{method} needs a split (R, C) with R * C = N, got {split}")
    if method == "four_step":
        r, c = split
        fwd = _four_step_stages(powers, n, qs, r, c, reduction, bp, inverse=False)
        inv = _four_step_stages(powers, n, qs, r, c, reduction, bp, inverse=True)
    else:
        fwd = _mixed_radix_stages(powers, n, qs, split, reduction, bp, inverse=False)
        inv = _mixed_radix_stages(powers, n, qs, split, reduction, bp, inverse=True)
    return NTTPlan(table, fwd, inv, None, method, n, len(qs), reduction, bp, split)


# ----------------------------------------------------------------------------------------------------------
# kernels
# ----------------------------------------------------------------------------------------------------------


# NTT data layout and limb selection (LimbLayout, limb_layout, select_limbs, select_limb_dynamic, PermuteStage) live in
# hemx.kernels.ntt_layout, which the native kernels read without importing this module; all stay importable from
# here. The older private names below are read by hemx.ckks.sharded_keyswitch and tests/parallel/test_export.py.
_layout = limb_layout
_with_limb_tables = with_limb_tables


def _run_stages(x, stages: tuple, plan: NTTPlan, lay: LimbLayout):
    n, nl = plan.n, plan.num_limbs
    tab = lay.modulus_table(plan)
    for st in stages:
        if isinstance(st, MatrixStage):
            v = st.mat.cols  # the mid axes are one more batch axis of the matrix product: fold them into A
            y = bat.apply_known(x.reshape(lay.lead + (nl, lay.mid_size * st.a, v, st.b)), st.mat)
            x = y.reshape(lay.shape(n))
        elif isinstance(st, TwiddleStage):
            tw = KnownOperand(*(lay.per_limb(f) for f in st.tw))
            x = mul_known(x.reshape(lay.shape(st.d1, n // st.d1)), tw, tab, plan.reduction).reshape(lay.shape(n))
        elif isinstance(st, TransposeStage):
            x = jnp.swapaxes(x.reshape(lay.shape(st.r, st.c)), -1, -2).reshape(lay.shape(n))
        elif isinstance(st, PermuteStage):
            x = jnp.take(x, st.perm, axis=-1)
        else:  # pragma: no cover - plans are built by make_plan only
            raise TypeError(f"unknown NTT stage {type(st).__name__}")
    return x


def _stage_twiddle(tw: KnownOperand, lo: int, hi: int, lay: LimbLayout) -> KnownOperand:
    return KnownOperand(*(lay.per_limb(f[:, lo:hi, None]) for f in tw))


def _butterfly_forward(x, plan: NTTPlan, lay: LimbLayout):
    n = plan.n
    tab = lay.modulus_table(plan)
    q = tab.q
    m = 1
    while m < n:
        half = n // (2 * m)
        y = x.reshape(lay.shape(m, 2, half))
        u, v = y[..., 0, :], y[..., 1, :]
        v = mul_known(v, _stage_twiddle(plan.butterfly.fwd, m, 2 * m, lay), tab, plan.reduction)
        x = jnp.stack([add_mod(u, v, q), sub_mod(u, v, q)], axis=-2).reshape(lay.shape(n))
        m *= 2
    return x


def _butterfly_inverse(x, plan: NTTPlan, lay: LimbLayout):
    n = plan.n
    tab = lay.modulus_table(plan)
    q = tab.q
    bt = plan.butterfly
    m = n // 2
    while m >= 1:
        half = n // (2 * m)
        y = x.reshape(lay.shape(m, 2, half))
        u, v = y[..., 0, :], y[..., 1, :]
        s, d = add_mod(u, v, q), sub_mod(u, v, q)
        if m == 1:  # fold the 1/N scaling into the last stage
            s = mul_known(s, KnownOperand(*(lay.per_limb(f[:, :, None]) for f in bt.ninv)), tab, plan.reduction)
            d = mul_known(d, _stage_twiddle(bt.inv_last, 1, 2, lay), tab, plan.reduction)
        else:
            d = mul_known(d, _stage_twiddle(bt.inv, m, 2 * m, lay), tab, plan.reduction)
        x = jnp.stack([s, d], axis=-2).reshape(lay.shape(n))
        m //= 2
    return x


def butterfly_tables_of(plan: NTTPlan) -> NTTPlan:
    """A native plan's tables as the JAX butterfly reads them: the rows it selects (``ButterflyTables.rows``) taken
    from its full ``(R, N)`` twiddle tables, so limb ``l`` of the result has row ``rows[l]`` (works inside jit).
    Any other plan, or a native plan without selected rows, is returned as it is."""
    bt = plan.butterfly
    if plan.method != NATIVE_METHOD or bt is None or bt.rows is None:
        return plan
    rows = jnp.asarray(bt.rows).astype(jnp.int32)
    take = lambda a: jnp.take(a, rows, axis=0, mode="clip")  # noqa: E731 - rows are in range by construction
    bt = dataclasses.replace(bt, fwd=jax.tree_util.tree_map(take, bt.fwd), inv=jax.tree_util.tree_map(take, bt.inv),
                             rows=None)
    return dataclasses.replace(plan, butterfly=bt)


@functools.partial(jax.jit, static_argnames=("inverse", "lay"))
def _butterfly_of_native(x, plan: NTTPlan, *, inverse: bool, lay: LimbLayout):
    # jitted: on_cpu traces this branch in CPU programs too, and a program with several transforms of one shape then
    # unrolls the butterfly once
    plan = butterfly_tables_of(plan)
    return _butterfly_inverse(x, plan, lay) if inverse else _butterfly_forward(x, plan, lay)


# A native plan's transform is one primitive whose lowering depends on the platform the program is lowered for:
# the C++ kernel (the custom call of hemx.kernels.native) on CPU, the JAX butterfly on the same tables everywhere
# else (jax.export for cuda / tpu holds no custom call). Unlike jax.lax.platform_dependent, which traces every
# branch, only the lowering for the platform at hand is ever traced: a CPU program does not unroll the butterfly
# it will not run (a boot_12 bootstrap traced in 7.5 s with platform_dependent, see docs/kernels.md).
_native_ntt_p = jex_core.Primitive("hemx_native_ntt")


def _native_cpu_lowered(x, plan, *, inverse: bool, limb_axis: int):
    from hemx.kernels import native  # noqa: PLC0415 - optional library, loaded once

    if native.available():
        return (native.intt if inverse else native.ntt)(x, plan, limb_axis)
    return _butterfly_of_native(x, plan, inverse=inverse, lay=limb_layout(x, plan, limb_axis))


def _native_default_lowered(x, plan, *, inverse: bool, limb_axis: int):
    return _butterfly_of_native(x, plan, inverse=inverse, lay=limb_layout(x, plan, limb_axis))


def _native_ntt_rule(fn):
    def rule(ctx, x, *leaves, treedef, inverse, limb_axis):
        def body(x, *leaves):
            return fn(x, jax.tree_util.tree_unflatten(treedef, leaves), inverse=inverse, limb_axis=limb_axis)

        return mlir.lower_fun(body, multiple_results=False)(ctx, x, *leaves)

    return rule


@functools.lru_cache(maxsize=None)
def _native_ntt_jitted(treedef, inverse: bool, limb_axis: int):
    return jax.jit(lambda x, *leaves: _native_ntt_p.bind(x, *leaves, treedef=treedef, inverse=inverse,
                                                         limb_axis=limb_axis))


def _native_ntt_batch(args, dims, *, treedef, inverse, limb_axis):
    """vmap: a batched ``x`` with shared tables is one bigger transform (leading axes are batch axes; ``limb_axis``
    is negative, so a new leading axis keeps its meaning); batched tables map the transform over the batch."""
    x, leaves = args[0], args[1:]
    if all(d is None for d in dims[1:]):
        return _native_ntt_p.bind(jnp.moveaxis(x, dims[0], 0), *leaves, treedef=treedef, inverse=inverse,
                                  limb_axis=limb_axis), 0
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [jnp.moveaxis(a, d, 0) if d is not None else jnp.broadcast_to(a, (size,) + a.shape)
             for a, d in zip(args, dims)]
    return jax.lax.map(lambda t: _native_ntt_p.bind(*t, treedef=treedef, inverse=inverse, limb_axis=limb_axis),
                       tuple(moved)), 0


_native_ntt_p.def_abstract_eval(lambda x, *leaves, **params: jax.core.ShapedArray(x.shape, x.dtype))
_native_ntt_p.def_impl(lambda *args, **params: _native_ntt_jitted(**params)(*args))
mlir.register_lowering(_native_ntt_p, _native_ntt_rule(_native_cpu_lowered), platform="cpu")
mlir.register_lowering(_native_ntt_p, _native_ntt_rule(_native_default_lowered))
batching.primitive_batchers[_native_ntt_p] = _native_ntt_batch


def _native_or_butterfly(x, plan: NTTPlan, lay: LimbLayout, limb_axis: int, *, inverse: bool):
    """A native plan's transform: the C++ kernel where the program is lowered for CPU and the library is available,
    the JAX butterfly on the same tables everywhere else (an export for cuda / tpu holds no custom call).
    Bit-identical (both exact). Where the library is unavailable here (not built, ``HEMX_NATIVE=0``, inside
    ``hemx.kernels.native.disabled()``) only the JAX butterfly is traced."""
    from hemx.kernels import native  # noqa: PLC0415 - optional library, loaded once

    if not native.available():
        return _butterfly_of_native(x, plan, inverse=inverse, lay=lay)
    leaves, treedef = jax.tree_util.tree_flatten(plan)
    return _native_ntt_p.bind(x, *leaves, treedef=treedef, inverse=inverse, limb_axis=limb_axis % x.ndim - x.ndim)


def ntt(x, plan: NTTPlan, limb_axis: int = -2):
    """Forward negacyclic NTT of uint32 residues; output in bit-reversed order, same shape.

    ``x`` is ``(..., L, N)`` by default (batch-major). ``limb_axis`` puts the limbs elsewhere before the last
    axis, e.g. ``limb_axis=0`` for a limb-major batch ``(L, B, N)`` (every limb's tables then serve its B
    polynomials in one pass; the result is bit-identical to transforming the transposed batch).
    """
    lay = limb_layout(x, plan, limb_axis)
    if plan.method == NATIVE_METHOD:
        return _native_or_butterfly(x, plan, lay, limb_axis, inverse=False)
    if plan.method == "butterfly":
        return _butterfly_forward(x, plan, lay)
    return _run_stages(x, plan.forward, plan, lay)


def intt(x, plan: NTTPlan, limb_axis: int = -2):
    """Inverse of :func:`ntt` (input in bit-reversed order, output coefficients in natural order)."""
    lay = limb_layout(x, plan, limb_axis)
    if plan.method == NATIVE_METHOD:
        return _native_or_butterfly(x, plan, lay, limb_axis, inverse=True)
    if plan.method == "butterfly":
        return _butterfly_inverse(x, plan, lay)
    return _run_stages(x, plan.inverse, plan, lay)
