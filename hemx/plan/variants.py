"""The exact variants the planner chooses among, and the static defaults used when planning is off.

Every variant here computes bit-identical results; they differ only in speed (and working set). A variant is
plain data (a frozen dataclass that round-trips through JSON), so a choice can be cached, printed and forced.

* :class:`NTTVariant`: NTT method, its split (``(R, C)`` for mat3 / four_step, the radix list for multilevel),
  the BAT chunk width ``bp`` and the modular reduction of known-operand products.
* :func:`family_candidates` / :func:`refinements`: the two rounds of the NTT search (one default variant per
  method first, then the neighbours of the fastest: other reductions, splits and chunk widths).
* :func:`choose_dataflow`: the key-switching dataflow from a working-set estimate and a memory budget (it is
  not timed: compiling three key-switching kernels costs far more than the planner may spend).
"""

from __future__ import annotations

import dataclasses
import os

from hemx.errors import ParameterError
from hemx.kernels import bat
from hemx.kernels import ntt as ntt_kernels
from hemx.kernels.modarith import REDUCTIONS
from hemx.nt import log2_exact

NTT_METHODS: tuple[str, ...] = ntt_kernels.METHODS
#: The native C++ NTT (hemx.kernels.native): a candidate only where its library is available; reduction Shoup.
NATIVE_METHOD = ntt_kernels.NATIVE_METHOD
ALL_METHODS: tuple[str, ...] = ntt_kernels.ALL_METHODS
NO_SPLIT_METHODS = ("butterfly", NATIVE_METHOD)
DATAFLOWS: tuple[str, ...] = ("mp", "dc", "oc")
MATRIX_METHODS = ("four_step", "mat3", "multilevel")

#: What a context uses when planning is off, per JAX backend (not measured: documented defaults; the planner
#: times the variants wherever it can run them), except that on CPU the native NTT takes precedence where it is
#: available (:func:`static_default`).
#:
#: * cpu: the radix-2 butterfly with Shoup products, the fastest exact JAX NTT measured on the development CPU
#:   (docs/results/kernels-cpu.md).
#: * gpu and tpu: the matrix-engine NTT (CROSS's layout-invariant ``mat3``), whose work is int8 x int8 -> int32
#:   matmuls (BAT) that tensor cores and the MXU run natively; a few large GEMMs per transform (R x C, about
#:   256 x 256 at N = 2^16) rather than the butterfly's log N element-wise passes. Reductions: Shoup on GPUs,
#:   which multiply 32-bit words with a native high product, Montgomery on TPUs (CROSS's choice: no fast
#:   64-bit products there). ``four_step`` (TensorFHE) and ``multilevel`` (WarpDrive) are the other matrix
#:   variants; the planner compares them all where it can time.
STATIC_DEFAULTS = ntt_kernels.STATIC_DEFAULTS  # (the rule lives with the kernels: RNSRing uses it too)
FALLBACK_DEFAULT = ntt_kernels.FALLBACK_DEFAULT


@dataclasses.dataclass(frozen=True)
class NTTVariant:
    """One exact NTT configuration of a ring.

    Attributes:
        method: one of :data:`NTT_METHODS`.
        reduction: "shoup", "montgomery" or "barrett" (known-operand products; BAT merges use Montgomery when
            it is chosen, Barrett otherwise).
        split: ``(R, C)`` for mat3 / four_step, radices for multilevel, ``()`` for the butterfly.
        bp: BAT chunk width (matrix methods; 8 for the butterfly, where it is unused).
    """

    method: str
    reduction: str
    split: tuple[int, ...] = ()
    bp: int = bat.DEFAULT_BP

    def __post_init__(self):
        if self.method not in ALL_METHODS:
            raise ParameterError(f"unknown NTT method {self.method!r}; choose one of {ALL_METHODS}")
        if self.reduction not in REDUCTIONS:
            raise ParameterError(f"unknown reduction {self.reduction!r}; choose one of {REDUCTIONS}")
        if self.method == NATIVE_METHOD and self.reduction != "shoup":
            raise ParameterError("the native NTT uses Shoup products only (reduction='shoup')")
        object.__setattr__(self, "split", tuple(int(s) for s in self.split))
        object.__setattr__(self, "bp", bat.check_bp(self.bp))

    @property
    def label(self) -> str:
        """Short readable name, e.g. ``mat3 256x256 bp8 / shoup`` or ``butterfly / shoup``."""
        if self.method in NO_SPLIT_METHODS:
            return f"{self.method} / {self.reduction}"
        return f"{self.method} {'x'.join(map(str, self.split))} bp{self.bp} / {self.reduction}"

    def ring_kwargs(self) -> dict:
        """Keyword arguments of ``RNSRing`` / ``make_plan`` (``ntt=`` is the method)."""
        kw: dict = {"ntt": self.method, "reduction": self.reduction, "bp": self.bp}
        if self.split:
            kw["split"] = self.split
        return kw

    def to_json(self) -> dict:
        return {"method": self.method, "reduction": self.reduction, "split": list(self.split), "bp": self.bp}

    @classmethod
    def from_json(cls, data: dict) -> "NTTVariant":
        return cls(str(data["method"]), str(data["reduction"]), tuple(data.get("split", ())),
                   int(data.get("bp", bat.DEFAULT_BP)))


@dataclasses.dataclass(frozen=True)
class Constraints:
    """Choices forced by the caller (None: the planner decides)."""

    method: str | None = None
    reduction: str | None = None
    split: tuple[int, ...] | None = None
    bp: int | None = None

    def __post_init__(self):
        if self.method is not None and self.method not in ALL_METHODS:
            raise ParameterError(f"unknown NTT method {self.method!r}; choose one of {ALL_METHODS}")
        if self.reduction is not None and self.reduction not in REDUCTIONS:
            raise ParameterError(f"unknown reduction {self.reduction!r}; choose one of {REDUCTIONS}")
        if self.split is not None:
            object.__setattr__(self, "split", tuple(int(s) for s in self.split))
        if self.bp is not None:
            object.__setattr__(self, "bp", bat.check_bp(self.bp))

    def allows(self, v: NTTVariant) -> bool:
        """True when ``v`` agrees with every forced field."""
        return ((self.method is None or v.method == self.method)
                and (self.reduction is None or v.reduction == self.reduction)
                and (self.split is None or v.method in NO_SPLIT_METHODS or v.split == self.split)
                and (self.bp is None or v.method in NO_SPLIT_METHODS or v.bp == self.bp))

    @property
    def complete(self) -> bool:
        """Everything that matters is forced: nothing is left to plan."""
        if self.method is None or self.reduction is None:
            return False
        return self.method in NO_SPLIT_METHODS or (self.split is not None and self.bp is not None)


def static_default(backend: str) -> tuple[str, str]:
    """(method, reduction) used when planning is off on ``backend``.

    On CPU the native C++ NTT where its library is available (:func:`native_available`), else
    :data:`STATIC_DEFAULTS`. Measured on the development CPU: 8x faster than the JAX butterfly at (30, 2^16)
    (docs/results/native-cpu.md), and a first call 5-9x quicker because the custom call replaces the unrolled
    butterfly's HLO (docs/plan.md). On other backends the custom call does not exist.
    """
    return ntt_kernels.default_method(backend)


def default_split(method: str, n: int) -> tuple[int, ...]:
    """The split ``make_plan`` would use for ``method`` at ring degree ``n``."""
    if method in NO_SPLIT_METHODS:
        return ()
    if method in ("mat3", "four_step"):
        return tuple(ntt_kernels.default_split(n))
    return tuple(ntt_kernels.default_radices(n))


def make_variant(method: str, reduction: str, n: int, c: Constraints) -> NTTVariant:
    """The variant of ``method`` with ``reduction`` and the forced (else default) split and bp."""
    if method in NO_SPLIT_METHODS:
        return NTTVariant(method, reduction)
    split = c.split if c.split is not None else default_split(method, n)
    return NTTVariant(method, reduction, split, c.bp if c.bp is not None else bat.DEFAULT_BP)


def native_available() -> bool:
    """True when the native NTT can run here (``hemx.kernels.native.available()``)."""
    from hemx.kernels import native  # noqa: PLC0415 - loads the optional library once

    return native.available()


def _native_allowed(c: Constraints, backend: str) -> bool:
    """The native NTT fits the constraints (no forced split, Shoup or no forced reduction) and runs here."""
    return c.split is None and c.reduction in (None, "shoup") and backend == "cpu" and native_available()


def constrained_default(backend: str, c: Constraints) -> tuple[str, str]:
    """(method, reduction) of the static default under constraints ``c``: :func:`static_default`, except that
    the native NTT gives way to :data:`STATIC_DEFAULTS` where a forced split or reduction excludes it."""
    method, reduction = static_default(backend)
    if method == NATIVE_METHOD and not _native_allowed(c, backend):
        method, reduction = STATIC_DEFAULTS.get(backend, FALLBACK_DEFAULT)
    return method, reduction


def family_candidates(n: int, c: Constraints, backend: str) -> list[NTTVariant]:
    """Round one: one variant per allowed method, the static default first (it is always measured).

    The native NTT is a candidate where its library is available, unless the constraints exclude it (a forced
    split, or a forced reduction other than Shoup): first when it is the static default, else last.
    """
    default_method, default_reduction = constrained_default(backend, c)
    reduction = c.reduction or default_reduction
    methods = [c.method] if c.method else [default_method] + [m for m in NTT_METHODS if m != default_method]
    if c.split is not None and c.method is None:  # a forced split only fits some methods
        methods = [m for m in methods if _split_fits(m, c.split, n)]
    if not methods:
        raise ParameterError(f"no NTT method accepts the split {c.split} at N = {n}")
    out = [make_variant(m, "shoup" if m == NATIVE_METHOD else reduction, n, c) for m in methods]
    if c.method is None and _native_allowed(c, backend) and NATIVE_METHOD not in methods:
        out.append(make_variant(NATIVE_METHOD, "shoup", n, c))
    return out


def _split_fits(method: str, split: tuple[int, ...], n: int) -> bool:
    prod = 1
    for s in split:
        prod *= s
    if prod != n:
        return False
    return len(split) == 2 if method in ("mat3", "four_step") else method == "multilevel"


def _two_factor_splits(n: int) -> list[tuple[int, int]]:
    """``(R, C)`` with R * C = n, the default and its two neighbours (a factor of 2 moved)."""
    r, c = ntt_kernels.default_split(n)
    out = [(r, c), (r // 2, c * 2), (r * 2, c // 2)]
    return list(dict.fromkeys(s for s in out if s[0] >= 2 and s[1] >= 2))


def split_candidates(method: str, n: int) -> list[tuple[int, ...]]:
    """Splits worth timing for a matrix method at ring degree ``n`` (the default first)."""
    if method in ("mat3", "four_step"):
        return list(_two_factor_splits(n))
    return list(dict.fromkeys(tuple(ntt_kernels.default_radices(n, r)) for r in (16, 32, 8, 64) if r <= n))


def refinements(best: NTTVariant, n: int, c: Constraints) -> list[NTTVariant]:
    """Round two: neighbours of the fastest family member that the constraints leave open.

    Other reductions; for matrix methods also other splits (a factor of two moved between R and C, or
    radix 8 / 32 for multilevel) and a narrower chunk width.
    """
    out: list[NTTVariant] = []
    if best.method == NATIVE_METHOD:  # one configuration: nothing to refine
        return out
    if c.reduction is None:
        out += [dataclasses.replace(best, reduction=r) for r in REDUCTIONS if r != best.reduction]
    if best.method in MATRIX_METHODS:
        if c.split is None:
            out += [dataclasses.replace(best, split=s) for s in split_candidates(best.method, n) if s != best.split]
        if c.bp is None:
            out += [dataclasses.replace(best, bp=b) for b in (7,) if b != best.bp]
    return [v for v in dict.fromkeys(out) if c.allows(v)]


# ----------------------------------------------------------------------------------------------------------
# key-switching dataflow: a working-set estimate against a memory budget
# ----------------------------------------------------------------------------------------------------------


def keyswitch_working_set(n: int, num_special: int, num_q: int, dnum: int, *, batch: int = 1,
                          chunks: int = 4) -> dict[str, int]:
    """Estimated peak temporary bytes of one key switch per dataflow (top level, ``batch`` polynomials).

    The estimate counts the buffers that dominate XLA's compiled temporaries on CPU
    (docs/results/keyswitch-cpu.md): the ModDown conversion's int64 partial sums ``2 * n * K * N * 8`` bytes
    (shared by MP and DC), plus the extended digits and the running key-product sum over ``Q_l P``: all ``D``
    digits, ``(D + 2) * (k + n) * N * 4`` (MP), or one digit, ``3 * (k + n) * N * 4`` (DC); OC keeps one
    tower's values, ``(2 + K) * N * 8`` bytes per digit.
    """
    m = num_special + num_q
    merge = 2 * num_q * chunks * n * 8
    return {
        "mp": batch * ((dnum + 2) * m * n * 4 + merge),
        "dc": batch * (3 * m * n * 4 + merge),
        "oc": batch * dnum * (2 + chunks) * n * 8,
    }


def memory_budget_bytes(fraction: float = 0.5) -> int | None:
    """``fraction`` of the device memory limit (accelerators) or of the available host memory (CPU)."""
    import jax

    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # pragma: no cover - backend dependent
        stats = None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"] * fraction)
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * fraction)
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None


def choose_dataflow(n: int, num_special: int, num_q: int, dnum: int, *, budget_bytes: int | None = None,
                    batch: int = 1) -> str:
    """Max-Parallel when its estimated working set fits the budget (it is the fastest measured on CPU), else
    Digit-Centric, else Output-Centric (the smallest working set). ``budget_bytes=None`` reads the device."""
    budget = memory_budget_bytes() if budget_bytes is None else int(budget_bytes)
    if budget is None:
        return "mp"
    sizes = keyswitch_working_set(n, num_special, num_q, dnum, batch=batch)
    for flow in ("mp", "dc"):
        if sizes[flow] <= budget:
            return flow
    return "oc"


def check_ring_degree(n: int) -> int:
    """Validate a ring degree for planning (power of two, at least 2)."""
    log2_exact(n, "ring degree N")
    if n < 2:
        raise ParameterError(f"ring degree N must be at least 2, got {n}")
    return int(n)


__all__ = [
    "NTTVariant", "Constraints", "NTT_METHODS", "ALL_METHODS", "NATIVE_METHOD", "native_available", "DATAFLOWS", "STATIC_DEFAULTS", "static_default", "constrained_default", "default_split",
    "make_variant", "family_candidates", "refinements", "split_candidates", "keyswitch_working_set",
    "memory_budget_bytes", "choose_dataflow", "check_ring_degree",
]
