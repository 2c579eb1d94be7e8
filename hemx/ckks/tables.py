"""Per-level tables of a context: key switching (ModUp / ModDown), rescaling, and Galois index maps.

Everything here is host-side precomputation (exact Python integers and numpy) turned into device arrays, built
once per level and cached by :class:`TableCache`. The cache builds at concrete time even when its first use is
inside a ``jax.jit`` / ``jax.export`` trace (``jax.ensure_compile_time_eval``), so a trace never creates or
caches tracers and a whole circuit traces on a fresh context.

Cost (measured on the 2-core development CPU, under load): all levels of ``p16_l30`` (N = 2^16, 30 limbs,
15 levels) in 0.28 s and of ``set_d`` (N = 2^16, 51 limbs, 25 levels) in 0.42 s, against 4.9 s and 6.7 s to
build the context itself; a level is built on its first use.

Names: ``num_p`` is the number of special (P) limbs, ``num_q`` the number of ciphertext (Q) limbs at the
level; the extended basis is ``[p_0 .. p_{num_p-1}, q_0 .. q_{num_q-1}]`` (the context's ``P + Q`` ring).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np

from hemx.ckks.params import CKKSParameters
from hemx.kernels import automorphism, modarith
from hemx.kernels import bconv as bconv_kernels


@dataclasses.dataclass(frozen=True)
class LevelTables:
    """The tables of one level (a pytree: arrays are leaves; the limb layout is static metadata).

    Attributes (static):
        level: the level (``params.limbs_at_level(level) == num_q``).
        num_q: ciphertext limbs at this level.
        digits: key-switching digits ``((lo, hi), ...)`` as limb ranges, clipped to ``num_q``.
        drop: primes a rescale at this level removes (0 at level 0).
        divisor: their product as a float (None at level 0).
    Attributes (device arrays):
        modup: one centered basis conversion per digit (digit limbs -> the other limbs of ``Q_l P``).
        moddown: centered conversion ``P -> Q_l``.
        p_inv: known operand ``P^-1 mod q_i``, ``(num_q, 1)``.
        rescale: centered conversion from the dropped primes to the kept ones (None at level 0).
        d_inv: known operand ``D^-1 mod`` the kept primes (``D`` the dropped primes' product).
        p_mod: known operand ``P mod q_i`` (the rescale folded into ModDown, ``keyswitch.RescaleFold``).
        fold_conv: centered conversion ``P + dropped -> kept``.
        fold_inv: known operand ``(P D)^-1 mod`` the kept primes.
    """

    level: int
    num_q: int
    digits: tuple[tuple[int, int], ...]
    drop: int
    divisor: float | None
    modup: tuple[bconv_kernels.BConvPlan, ...]
    moddown: bconv_kernels.BConvPlan
    p_inv: modarith.KnownOperand
    rescale: bconv_kernels.BConvPlan | None = None
    d_inv: modarith.KnownOperand | None = None
    p_mod: modarith.KnownOperand | None = None
    fold_conv: bconv_kernels.BConvPlan | None = None
    fold_inv: modarith.KnownOperand | None = None


jax.tree_util.register_dataclass(
    LevelTables,
    data_fields=["modup", "moddown", "p_inv", "rescale", "d_inv", "p_mod", "fold_conv", "fold_inv"],
    meta_fields=["level", "num_q", "digits", "drop", "divisor"],
)


def _known(values, moduli) -> modarith.KnownOperand:
    """Known operand ``values[i] mod moduli[i]``, shaped ``(len(moduli), 1)``."""
    col = np.array(moduli, np.int64).reshape(-1, 1)
    return modarith.known_operand(np.array([[v % q] for v, q in zip(values, moduli)], np.int64), col)


def build_level_tables(params: CKKSParameters, level: int, *, reduction: str) -> LevelTables:
    """Build (host side) and place on the device the tables of ``level``."""
    num_q = params.limbs_at_level(level)
    qs, ps = list(params.moduli[:num_q]), list(params.special_moduli)
    digits = tuple((lo, min(hi, num_q)) for lo, hi in params.digits() if lo < num_q)
    # Both conversions are centered. ModUp: the extended digit is then zero-mean; with [0, Q_d) digits the
    # term (digit * e_d) / P of the key-switching error has a fixed non-zero part per key, which piles up in a
    # few slots. ModDown: the division by P then rounds, and the conversion error is zero-mean.
    modup = tuple(bconv_kernels.make_bconv_plan(qs[lo:hi], ps + qs[:lo] + qs[hi:], reduction=reduction,
                                                centered=True) for lo, hi in digits)
    moddown = bconv_kernels.make_bconv_plan(ps, qs, reduction=reduction, centered=True)
    big_p = math.prod(ps)
    fields = dict(level=level, num_q=num_q, digits=digits, drop=0, divisor=None, modup=modup, moddown=moddown,
                  p_inv=_known([pow(big_p, -1, q) for q in qs], qs))
    drop = params.level_sizes[level] if level > 0 else 0
    if drop:  # rescaling divides by the product of the level's top primes: a centered conversion, like ModDown
        kept, dropped = qs[: num_q - drop], qs[num_q - drop :]
        big_d = math.prod(dropped)
        fields.update(
            drop=drop,
            divisor=float(big_d),
            rescale=bconv_kernels.make_bconv_plan(dropped, kept, reduction=reduction, centered=True),
            d_inv=_known([pow(big_d, -1, q) for q in kept], kept),
            # mul(..., rescale=True): ModDown and the rescale in one division by P * D (keyswitch.RescaleFold)
            p_mod=_known([big_p % q for q in qs], qs),
            fold_conv=bconv_kernels.make_bconv_plan(ps + dropped, kept, reduction=reduction, centered=True),
            fold_inv=_known([pow(big_p * big_d, -1, q) for q in kept], kept),
        )
    return jax.device_put(LevelTables(**fields))


class TableCache:
    """Per-level tables and Galois index maps of one context, built on first use at concrete time.

    A first use inside a ``jax.jit`` trace builds under ``jax.ensure_compile_time_eval()``: the cache only ever
    holds concrete device arrays, and the trace sees them as constants.
    """

    def __init__(self, params: CKKSParameters, *, reduction: str):
        self.params = params
        self.reduction = reduction
        self._levels: dict[int, LevelTables] = {}
        self._maps: dict[int, jax.Array] = {}

    def level(self, level: int) -> LevelTables:
        """The tables of ``level`` (ParameterError outside ``[0, max_level]``)."""
        if level not in self._levels:
            self.params.limbs_at_level(level)  # validates the level
            with jax.ensure_compile_time_eval():
                self._levels[level] = build_level_tables(self.params, level, reduction=self.reduction)
        return self._levels[level]

    def index_map(self, g: int) -> jax.Array:
        """int32 ``(N,)`` index map of the automorphism ``X -> X^g`` in the NTT domain's order."""
        if g not in self._maps:
            with jax.ensure_compile_time_eval():
                self._maps[g] = jax.device_put(automorphism.ntt_index_map(self.params.n, g))
        return self._maps[g]

    def build_all(self) -> None:
        """Build every level's tables now (e.g. before tracing a circuit that reaches every level)."""
        for level in range(self.params.max_level + 1):
            self.level(level)

    def clear(self) -> None:
        """Forget every table (rebuilt on next use)."""
        self._levels = {}
        self._maps = {}

    def arrays(self) -> list:
        """Every cached leaf (for checks that no tracer was cached)."""
        return jax.tree_util.tree_leaves((self._levels, self._maps))


# ------------------------------------------------------------------------------------------ packed arguments
#: Leaves of at most this many elements are packed into one flat buffer per dtype (:func:`pack_tree`); larger
#: ones (e.g. the NTT's (L, N) twiddle tables) stay separate arguments, so no kernel reads a copied slice of them.
PACK_MAX_ELEMENTS = 1 << 12


@dataclasses.dataclass(frozen=True)
class PackedLayout:
    """Where each leaf of a packed pytree lives (static, hashable): ``slots[i] = (buffer, offset, shape)``, with
    ``offset == -1`` for a leaf passed whole as its own buffer."""

    treedef: object
    slots: tuple[tuple[int, int, tuple[int, ...]], ...]
    num_buffers: int


def pack_tree(tree, *, max_elements: int = PACK_MAX_ELEMENTS):
    """``(buffers, layout)``: the array leaves of ``tree`` as a few device arrays (one flat buffer per dtype for
    the small leaves, the large leaves as they are) and the static layout :func:`unpack_tree` rebuilds the tree
    from. A jitted call then takes a handful of arguments instead of one per leaf (each costs dispatch time).
    Concrete arrays only (built under ``jax.ensure_compile_time_eval``); raises TypeError for a non-array leaf.
    """
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    groups: dict[str, list[int]] = {}
    for i, leaf in enumerate(leaves):
        if not isinstance(leaf, (jax.Array, np.ndarray)) or isinstance(leaf, jax.core.Tracer):
            raise TypeError(f"pack_tree needs concrete array leaves, got {type(leaf).__name__}")
        if leaf.size <= max_elements:
            groups.setdefault(np.dtype(leaf.dtype).str, []).append(i)
    slots: list = [None] * len(leaves)
    buffers: list = []
    with jax.ensure_compile_time_eval():
        for idxs in groups.values():
            offset, parts = 0, []
            for i in idxs:
                host = np.asarray(leaves[i])
                slots[i] = (len(buffers), offset, tuple(host.shape))
                parts.append(host.reshape(-1))
                offset += host.size
            buffers.append(jax.device_put(np.concatenate(parts)))
        for i, leaf in enumerate(leaves):
            if slots[i] is None:
                slots[i] = (len(buffers), -1, tuple(leaf.shape))
                buffers.append(leaf if isinstance(leaf, jax.Array) else jax.device_put(leaf))
    return tuple(buffers), PackedLayout(treedef, tuple(slots), len(buffers))


def unpack_tree(buffers, layout: PackedLayout):
    """The pytree :func:`pack_tree` packed (static slices of the buffers; traceable, bit-identical leaves)."""
    leaves = []
    for b, offset, shape in layout.slots:
        buf = buffers[b]
        if offset < 0:
            leaves.append(buf)
        else:
            size = math.prod(shape)
            leaves.append(jax.lax.slice_in_dim(buf, offset, offset + size).reshape(shape))
    return jax.tree_util.tree_unflatten(layout.treedef, leaves)
