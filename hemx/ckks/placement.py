"""Where a :class:`~hemx.ckks.context.Context`'s arrays live: a placement strategy the context is built with.

``Context(params, mesh=None)`` holds :data:`SINGLE_DEVICE` (arrays wherever JAX puts them, the native CPU
kernels where they are available); ``Context(params, mesh=mesh)`` holds a :class:`MeshPlacement` (:func:`for_mesh`
builds either). The context asks its placement, and nothing else, about the mesh: which NTT method it may use
(:meth:`Placement.resolve_ntt`, :meth:`Placement.adopt_ring`), which table cache it reads (and so which key-switch
implementation its kernels run: :meth:`Placement.table_cache`), which kernels its operations trace
(:meth:`Placement.kernels`), where each result goes (:meth:`Placement.place`), and how the keys of hoisted
rotations are handed to the kernel (:meth:`Placement.hoisted_key_data`). The context hands its placement to its
parts (:class:`~hemx.ckks.operations.Evaluator`, :class:`~hemx.ckks.encoding.Encoder`, ...), whose public
operations :func:`on_placement` wraps.

On a mesh. ``mesh`` is a ``jax.sharding.Mesh`` with axes ``"batch"`` and ``"limbs"``
(:func:`hemx.parallel.check_mesh`). Every result of the context's public operations is placed by
:func:`hemx.parallel.spec_for` (batch axis on ``"batch"``, RNS limb axis on ``"limbs"``, replicated along an axis
that does not divide the array). Outside a trace the result is put there with ``jax.device_put``; inside
``jax.jit`` / ``jax.export`` a ``jax.lax.with_sharding_constraint`` keeps it there. The NTT plan and the
per-level tables are replicated on every device of the mesh.

Collectives. Every key switch (relinearization, with or without the folded rescale, rotation, conjugation,
``switch_key``, hoisted rotations) and every separate ``rescale`` runs as a hand-written ``jax.shard_map`` program
(:mod:`hemx.ckks.sharded_keyswitch`: the key stays where it is, each device computes the accumulator rows of its
key block, and all-gathers / collective permutes move exactly the towers the steps need) when the mesh's
``"limbs"`` axis has ``D > 1`` devices and ``D`` divides the key's ``P + L`` rows; otherwise (``D == 1``, or the
key replicated because ``D`` does not divide its rows), and for everything else (the tensor product, additions),
XLA's SPMD partitioner inserts the collectives. ``keyswitch_path="partitioner"`` forces the partitioner for key
switches and rescales too (for comparison). The evaluator takes the ``shard_map`` path exactly when the level
tables it is given are :class:`~hemx.ckks.sharded_keyswitch.ShardedLevelTables`, which only
:class:`ShardedTableCache` (the mesh placement's table cache) builds.

The kernels are the same as on one device and every one is exact, so results are bit-identical to a
single-device context with the same parameters, NTT method and sampler.

Native kernels: hemx's C++ custom calls (:mod:`hemx.kernels.native`) have no partitioning rule, so under a
mesh XLA would gather their operands to every device and run them whole (correct, but no parallelism), or
refuse them. A mesh context therefore never uses them: its NTT is a pure-JAX method (the planner's non-native
variants; ``ntt="native"`` raises ParameterError), and its operations are traced with the native dispatch
switched off (:func:`hemx.kernels.native.disabled`), so the "auto" inner product, basis conversion and
automorphism take their JAX paths. See ``docs/parallel.md``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import ContextManager, Protocol, Sequence

import jax
import jax.numpy as jnp

from hemx import parallel
from hemx.ckks import keygen as keygen_mod
from hemx.ckks import keyswitch as ks
from hemx.ckks import sharded_keyswitch as sks
from hemx.ckks.ciphertext import Ciphertext, Plaintext
from hemx.ckks.keys import KeySet, PublicKey, SecretKey, SwitchingKey
from hemx.ckks.params import CKKSParameters
from hemx.ckks.tables import TableCache
from hemx.errors import ParameterError
from hemx.kernels import native
from hemx.kernels import ntt as ntt_kernels

#: The NTT method of a mesh context when none is forced: CROSS's layout-invariant matrix NTT (pure JAX, the
#: matrix-engine path; every method is exact, so the choice only changes speed).
DEFAULT_MESH_NTT = "mat3"


def check_keyswitch_path(path: str) -> str:
    """``path`` if it is one of :data:`hemx.ckks.sharded_keyswitch.PATHS`; ParameterError otherwise."""
    if path not in sks.PATHS:
        raise ParameterError(f"keyswitch_path must be one of {sks.PATHS}, got {path!r}")
    return path


class Placement(Protocol):
    """What a :class:`~hemx.ckks.context.Context` asks about where its arrays live (module docstring).

    Attributes:
        mesh: the ``jax.sharding.Mesh``, or None on one device.
    """

    mesh: object | None

    def kernels(self) -> ContextManager[None]:
        """The block the context's operations (and its construction) run in."""

    def resolve_ntt(self, ntt: str | None, *, ntt_split) -> str | None:
        """The NTT method to ask the planner for, given the context's ``ntt`` and ``ntt_split`` arguments."""

    def adopt_ring(self, ring) -> None:
        """Check the planned ring's NTT plan and put it where the kernels read it (``ring.plan``)."""

    def table_cache(self, params: CKKSParameters, *, reduction: str) -> TableCache:
        """The context's per-level table cache."""

    def place(self, x):
        """A ciphertext, plaintext, key, key set (or a list of them) where this placement keeps it; anything
        else as is."""

    def hoisted_key_data(self, keys: Sequence[SwitchingKey], *, params: CKKSParameters, plan, level: int):
        """The key operand of a hoisted rotation of a ciphertext at ``level`` by one key per Galois element."""

    def describe(self) -> str:
        """Extra text for the context's ``repr`` ("" on one device)."""


class SingleDevice:
    """One device: arrays stay where JAX puts them, the native kernels run where available, nothing is
    replicated, and the keys of hoisted rotations are read in place. Use :data:`SINGLE_DEVICE`."""

    mesh = None

    def kernels(self) -> ContextManager[None]:
        return contextlib.nullcontext()

    def resolve_ntt(self, ntt: str | None, *, ntt_split) -> str | None:
        return ntt

    def adopt_ring(self, ring) -> None:
        return None

    def table_cache(self, params: CKKSParameters, *, reduction: str) -> TableCache:
        return TableCache(params, reduction=reduction)

    def place(self, x):
        return x

    def hoisted_key_data(self, keys: Sequence[SwitchingKey], *, params: CKKSParameters, plan, level: int):
        """A tuple of the keys' materials, each read in place (a stacked copy of 32 keys at boot_16 is 1.5 GiB)."""
        return tuple(key.material for key in keys)

    def describe(self) -> str:
        return ""

    def __repr__(self) -> str:
        return "SingleDevice()"


#: The placement of every context made without a mesh (stateless, shared).
SINGLE_DEVICE = SingleDevice()


def on_placement(*, place: bool = True):
    """Decorator of the public operations of the CKKS parts (:class:`~hemx.ckks.operations.Evaluator`,
    :class:`~hemx.ckks.encoding.Encoder`, ...), whose ``self.placement`` is their placement: on a mesh the
    operation runs inside the placement's kernel block (:meth:`Placement.kernels`: the native kernels off) and,
    with ``place``, its result (ciphertext, plaintext, key set, or a list of them) is placed (:meth:`Placement.place`;
    inner calls, e.g. ``sub`` -> ``add``, are placed too); on one device the operation is called as it is."""

    def wrap(method):
        @functools.wraps(method)
        def op(self, *args, **kwargs):
            where = self.placement
            if where.mesh is None:
                return method(self, *args, **kwargs)
            with where.kernels():
                out = method(self, *args, **kwargs)
                return where.place(out) if place else out

        return op

    return wrap


class MeshPlacement:
    """Ciphertexts, plaintexts and keys spread over a device mesh (module docstring).

    Args:
        mesh: a ``jax.sharding.Mesh`` with axes ``"batch"`` and ``"limbs"`` (ParameterError otherwise; explicit
            axis types are converted to auto ones, :func:`hemx.parallel.check_mesh`).
        keyswitch_path: "auto" (default; the ``jax.shard_map`` key switch of :mod:`hemx.ckks.sharded_keyswitch`
            where the mesh's ``"limbs"`` axis has ``D > 1`` devices and ``D`` divides the key's ``P + L`` rows,
            XLA's partitioner otherwise), "shard_map" (the same) or "partitioner" (always XLA's partitioner; for
            comparison). The initial setting of the table cache's ``keyswitch_path``, settable there later.
    """

    def __init__(self, mesh, *, keyswitch_path: str = "auto"):
        self.mesh = parallel.check_mesh(mesh)
        self.keyswitch_path = check_keyswitch_path(keyswitch_path)

    def kernels(self) -> ContextManager[None]:
        """The native custom calls switched off (no partitioning rule): kernels traced here take their JAX paths."""
        return native.disabled()

    def resolve_ntt(self, ntt: str | None, *, ntt_split) -> str | None:
        """A pure-JAX method: ``"native"`` raises ParameterError; None (with no forced split) is
        :data:`DEFAULT_MESH_NTT`."""
        if ntt == ntt_kernels.NATIVE_METHOD:
            raise ParameterError("the native NTT is a CPU custom call without a partitioning rule; a context on a "
                                 f"mesh needs a pure-JAX method, one of {ntt_kernels.METHODS}")
        if ntt is None and ntt_split is None:
            return DEFAULT_MESH_NTT
        return ntt

    def adopt_ring(self, ring) -> None:
        """The ring's NTT plan replicated on every device of the mesh."""
        if ring.plan.method == ntt_kernels.NATIVE_METHOD:  # defensive: the planner never picks it when disabled
            raise ParameterError("a context on a mesh cannot use the native NTT")
        ring.plan = parallel.replicate(ring.plan, self.mesh)

    def table_cache(self, params: CKKSParameters, *, reduction: str) -> TableCache:
        return ShardedTableCache(params, reduction=reduction, mesh=self.mesh, keyswitch_path=self.keyswitch_path)

    def place(self, x):
        """``x`` placed by :func:`hemx.parallel.spec_for`: a ciphertext ``(*batch, 2, limbs, N)`` and a plaintext
        ``(*batch, limbs, N)`` on both axes, keys (no batch axis) on ``"limbs"``; key sets and lists entry by entry."""
        mesh = self.mesh
        if isinstance(x, Ciphertext):
            return x.replace(data=parallel.place(x.data, mesh, batch_dims=x.data.ndim - 3))
        if isinstance(x, Plaintext):
            return x.replace(data=parallel.place(x.data, mesh, batch_dims=x.data.ndim - 2))
        if isinstance(x, (PublicKey, SwitchingKey)):
            return dataclasses.replace(x, data=parallel.place(x.data, mesh, batch_dims=0))
        if isinstance(x, SecretKey):
            return dataclasses.replace(x, ntt=parallel.place(x.ntt, mesh, batch_dims=0))
        if isinstance(x, KeySet):
            return dataclasses.replace(
                x, public=self.place(x.public), relin=None if x.relin is None else self.place(x.relin),
                galois={g: self.place(k) for g, k in x.galois.items()},
                switching={n: self.place(k) for n, k in x.switching.items()},
                secret=None if x.secret is None else self.place(x.secret))
        if isinstance(x, list):
            return [self.place(v) for v in x]
        return x

    def hoisted_key_data(self, keys: Sequence[SwitchingKey], *, params: CKKSParameters, plan, level: int):
        """One stacked array ``(len(keys), digits, 2, rows, N)`` (what the partitioner and the ``shard_map`` key
        switch take): the keys as they are when they all have one shape and are full, else the digits and rows
        ``level`` reads of each (keys of several levels, or compact keys expanded)."""
        if len({key.data.shape for key in keys}) == 1 and not any(key.compact for key in keys):
            return jnp.stack([key.data for key in keys])
        num_d, m = keygen_mod.key_dims(params, level)
        return jnp.stack([ks.key_rows(key.material, plan, digits=num_d, rows=m) for key in keys])

    def describe(self) -> str:
        shape = dict(zip(self.mesh.axis_names, self.mesh.devices.shape))
        return f"mesh={shape}"

    def __repr__(self) -> str:
        return f"MeshPlacement({self.describe()}, keyswitch_path={self.keyswitch_path!r})"


def for_mesh(mesh, *, keyswitch_path: str = "auto") -> Placement:
    """The placement of ``Context(params, mesh=mesh, keyswitch_path=...)``: :data:`SINGLE_DEVICE` for
    ``mesh=None`` (where ``keyswitch_path`` must stay "auto": it chooses how a mesh's key switches run), else a
    :class:`MeshPlacement`."""
    if mesh is None:
        if check_keyswitch_path(keyswitch_path) != "auto":
            raise ParameterError(f"keyswitch_path={keyswitch_path!r} chooses how key switches run on a mesh; "
                                 "pass mesh= as well, or leave keyswitch_path out")
        return SINGLE_DEVICE
    return MeshPlacement(mesh, keyswitch_path=keyswitch_path)


class ShardedTableCache(TableCache):
    """A :class:`TableCache` whose tables and index maps are replicated on every device of a mesh.

    ``keyswitch_path`` (:data:`hemx.ckks.sharded_keyswitch.PATHS`, settable): with "auto" or "shard_map", where
    :func:`~hemx.ckks.sharded_keyswitch.uses_shard_map` holds, :meth:`level` returns
    :class:`~hemx.ckks.sharded_keyswitch.ShardedLevelTables` (the level's tables plus the row tables of the
    ``shard_map`` key switch, built here at concrete time and replicated), which make the evaluator switch keys
    by ``jax.shard_map``; with "partitioner", or where the rule fails, the plain tables (XLA's partitioner).
    """

    def __init__(self, params: CKKSParameters, *, reduction: str, mesh, keyswitch_path: str = "auto"):
        super().__init__(params, reduction=reduction)
        self.mesh = mesh
        self.keyswitch_path = keyswitch_path
        self._sharded: dict = {}

    @property
    def keyswitch_path(self) -> str:
        return self._keyswitch_path

    @keyswitch_path.setter
    def keyswitch_path(self, path: str) -> None:
        self._keyswitch_path = check_keyswitch_path(path)

    def shard_spec(self):
        """The :class:`~hemx.ckks.sharded_keyswitch.ShardSpec` of the shard_map key switch, or None where the
        partitioner path is used (``keyswitch_path="partitioner"``, ``D == 1``, or ``D`` not dividing ``P + L``)."""
        num_p = len(self.params.special_moduli)
        rows = num_p + self.params.num_limbs
        if self.keyswitch_path == "partitioner" or not sks.uses_shard_map(self.mesh, rows):
            return None
        d = dict(zip(self.mesh.axis_names, self.mesh.devices.shape))[parallel.LIMBS]
        return sks.ShardSpec(self.mesh, int(d), rows, num_p)

    def clear(self) -> None:
        super().clear()
        self._sharded = {}

    def arrays(self) -> list:
        return super().arrays() + jax.tree_util.tree_leaves(self._sharded)

    def _replicated(self, cache: dict, key, build):
        """``build(key)`` (which fills ``cache[key]`` on first use), replicated over the mesh once, when built."""
        fresh = key not in cache
        out = build(key)
        if fresh:
            with jax.ensure_compile_time_eval():
                out = cache[key] = parallel.replicate(out, self.mesh)
        return out

    def level(self, level: int):
        base = self._replicated(self._levels, level, super().level)
        spec = self.shard_spec()
        if spec is None:
            return base
        key = (level, spec)
        if key not in self._sharded:
            with jax.ensure_compile_time_eval():
                rows = sks.build_row_tables(self.params, base, reduction=self.reduction)
                self._sharded[key] = sks.ShardedLevelTables(base, parallel.replicate(rows, self.mesh),
                                                            spec)
        return self._sharded[key]

    def index_map(self, g: int):
        return self._replicated(self._maps, g, super().index_map)
