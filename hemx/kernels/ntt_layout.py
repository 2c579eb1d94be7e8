"""Where the limbs sit in NTT data, and an NTT plan restricted to some of its limbs.

The part of an :class:`hemx.kernels.ntt.NTTPlan` that the JAX transforms (:mod:`hemx.kernels.ntt`) and the C++
ones (:mod:`hemx.kernels.native`) both read: validating data against a plan (:func:`limb_layout`) and selecting a
plan's limbs (:func:`select_limbs`, :func:`select_limb_dynamic`). It imports no other kernel module, so the native
kernels use it without importing :mod:`hemx.kernels.ntt`, which dispatches to them. The helpers read a plan by
its fields only (``n``, ``num_limbs``, ``method``, ``table``, ``forward`` / ``inverse`` stages, ``butterfly``
tables), so the plan type itself stays in :mod:`hemx.kernels.ntt` with the modular arithmetic it is made of.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from hemx.errors import ShapeError

#: The C++ radix-2/4 butterfly of :mod:`hemx.kernels.native` as an NTT method name (see :mod:`hemx.kernels.ntt`).
#: Its plans keep the ring's full ``(R, N)`` twiddle tables and select rows of them (``ButterflyTables.rows``).
NATIVE_METHOD = "native"


@dataclasses.dataclass(frozen=True)
class PermuteStage:
    """Explicit gather along the last axis: ``y[..., p] = x[..., perm[p]]`` with ``perm`` int ``(N,)``.

    The one NTT stage whose table is not indexed by limb (every limb is permuted alike), so limb selection
    leaves it whole."""

    perm: np.ndarray


jax.tree_util.register_dataclass(PermuteStage, data_fields=["perm"], meta_fields=[])


def with_limb_tables(plan, take, count: int):
    """The plan with ``take`` applied to every limb-indexed table (all but :class:`PermuteStage`'s map), now
    describing ``count`` limbs. ``take`` maps an array ``(L, ...)`` to ``(count, ...)``.

    A native plan keeps its full ``(R, N)`` twiddle tables and selects their rows (``ButterflyTables.rows``:
    int32 ``(count,)``), so the C++ kernels read the ring's tables in place."""

    def stage(st):
        return st if isinstance(st, PermuteStage) else jax.tree_util.tree_map(take, st)

    bt = plan.butterfly
    if bt is not None and plan.method == NATIVE_METHOD:  # keep the (R, N) twiddles, select their rows
        rows = bt.rows if bt.rows is not None else jnp.arange(plan.num_limbs, dtype=jnp.int32)
        bt = dataclasses.replace(bt, inv_last=jax.tree_util.tree_map(take, bt.inv_last),
                                 ninv=jax.tree_util.tree_map(take, bt.ninv), rows=take(rows))
    elif bt is not None:
        bt = jax.tree_util.tree_map(take, bt)
    return dataclasses.replace(
        plan,
        table=jax.tree_util.tree_map(take, plan.table),
        forward=tuple(stage(s) for s in plan.forward),
        inverse=tuple(stage(s) for s in plan.inverse),
        butterfly=bt,
        num_limbs=count,
    )


def select_limbs(plan, limbs):
    """The plan restricted to some limbs (works inside jit).

    ``limbs`` is a ``slice`` (a contiguous range: cheap slices that XLA fuses into the consumers) or a static
    tuple of limb indices (a gather).
    """
    if isinstance(limbs, slice):
        return with_limb_tables(plan, lambda a: a[limbs], len(range(*limbs.indices(plan.num_limbs))))
    idx = np.asarray(limbs, dtype=np.int32)
    return with_limb_tables(plan, lambda a: jnp.take(a, idx, axis=0), len(idx))


def select_limb_dynamic(plan, limb):
    """The plan of the single limb ``limb``, which may be traced (loops over towers inside jit)."""
    return with_limb_tables(plan, lambda a: jax.lax.dynamic_slice_in_dim(a, limb, 1, axis=0), 1)


class LimbLayout(NamedTuple):
    """Where the limb axis sits in NTT data: ``lead + (L,) + mid + (N,)``.

    ``limb_axis=-2`` (the default, batch-major ``(B, L, N)``) has ``mid = ()``; a limb-major batch
    ``(L, B, N)`` has ``lead = ()`` and ``mid = (B,)``. Tables indexed by limb broadcast over ``mid`` with
    :meth:`per_limb`.
    """

    lead: tuple[int, ...]
    mid: tuple[int, ...]
    nl: int

    def shape(self, *tail: int) -> tuple[int, ...]:
        """The data viewed as ``lead + (L,) + mid + tail``."""
        return self.lead + (self.nl,) + self.mid + tail

    def per_limb(self, a):
        """A limb-indexed table ``(L, ...)`` reshaped to broadcast over ``mid``: ``(L,) + (1,)*len(mid) + ...``."""
        return a.reshape((a.shape[0],) + (1,) * len(self.mid) + a.shape[1:])

    @property
    def mid_size(self) -> int:
        return int(np.prod(self.mid, dtype=np.int64))

    def modulus_table(self, plan):
        """The plan's modulus constants (its ``ModulusTable``, fields ``(L, 1)``), each shaped
        ``(L,) + (1,)*len(mid) + (1, 1)`` to broadcast over ``mid`` and two trailing axes."""
        return plan.table._make(self.per_limb(f.reshape(self.nl, 1, 1)) for f in plan.table)


def limb_layout(x, plan, limb_axis: int) -> LimbLayout:
    """Validate NTT data ``x`` (uint32, ``L = plan.num_limbs`` limbs on ``limb_axis``, ``N = plan.n`` last) and
    describe its layout; ShapeError says what is wrong."""
    shape = tuple(x.shape)
    if not isinstance(limb_axis, (int, np.integer)) or isinstance(limb_axis, bool):
        raise ShapeError(f"limb_axis must be an integer axis, got {limb_axis!r}")
    ax = int(limb_axis) + len(shape) if limb_axis < 0 else int(limb_axis)
    if len(shape) < 2 or not 0 <= ax <= len(shape) - 2:
        raise ShapeError(
            f"limb_axis {limb_axis} does not name an axis before the last (N) axis of data shaped {shape}"
        )
    if shape[ax] != plan.num_limbs or shape[-1] != plan.n:
        where = "(..., L, N)" if ax == len(shape) - 2 else f"L on axis {limb_axis} and N last"
        raise ShapeError(f"NTT data must be shaped {where} with L = {plan.num_limbs}, N = {plan.n}; got {shape}")
    if x.dtype != jnp.uint32:
        raise ShapeError(f"NTT data must be uint32 residues, got dtype {x.dtype}")
    return LimbLayout(shape[:ax], shape[ax + 1 : -1], plan.num_limbs)


__all__ = ["NATIVE_METHOD", "PermuteStage", "LimbLayout", "limb_layout", "with_limb_tables", "select_limbs",
           "select_limb_dynamic"]
