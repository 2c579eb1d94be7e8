"""A :class:`~hemx.ckks.context.Context` on many devices: ``hemx.Context(params, mesh=mesh)``.

``mesh`` is a ``jax.sharding.Mesh`` with axes ``"batch"`` and ``"limbs"`` (:func:`hemx.parallel.check_mesh`).
The context it makes is a :class:`ShardedContext`: the same operations, whose every result is placed by
:func:`hemx.parallel.spec_for` (batch axis on ``"batch"``, RNS limb axis on ``"limbs"``, replicated along an
axis that does not divide the array). Outside a trace the result is put there with ``jax.device_put``; inside
``jax.jit`` / ``jax.export`` a ``jax.lax.with_sharding_constraint`` keeps it there. The NTT plan and the
per-level tables are replicated on every device of the mesh.

Collectives. Every key switch (relinearization, with or without the folded rescale, rotation, conjugation,
``switch_key``, hoisted rotations) and every separate ``rescale`` runs as a hand-written ``jax.shard_map`` program
(:mod:`hemx.ckks.sharded_keyswitch`: the key stays where it is, each device computes the accumulator rows of its
key block, and all-gathers / collective permutes move exactly the towers the steps need) when the mesh's
``"limbs"`` axis has ``D > 1`` devices and ``D`` divides the key's ``P + L`` rows; otherwise (``D == 1``, or the
key replicated because ``D`` does not divide its rows), and for everything else (the tensor product, additions),
XLA's SPMD partitioner inserts the collectives. ``keyswitch_path="partitioner"``
forces the partitioner for key switches and rescales too (for comparison).

The kernels are the same as on one device and every one is exact, so results are bit-identical to an unsharded
context with the same parameters, NTT method and sampler.

Native kernels: hemx's C++ custom calls (:mod:`hemx.kernels.native`) have no partitioning rule, so under a
mesh XLA would gather their operands to every device and run them whole (correct, but no parallelism), or
refuse them. A sharded context therefore never uses them: its NTT is a pure-JAX method (the planner's
non-native variants; ``ntt="native"`` raises ParameterError), and its kernels are traced with the native
dispatch switched off (:func:`hemx.kernels.native.disabled`), so the "auto" inner product, basis conversion
and automorphism take their JAX paths. See ``docs/parallel.md``.
"""

from __future__ import annotations

import dataclasses
import functools

import jax

from hemx import parallel
from hemx.ckks import sharded_keyswitch as sks
from hemx.ckks.ciphertext import Ciphertext, Plaintext
from hemx.ckks.context import Context
from hemx.ckks.keys import KeySet, PublicKey, SecretKey, SwitchingKey
from hemx.ckks.tables import TableCache
from hemx.errors import ParameterError
from hemx.kernels import native
from hemx.kernels import ntt as ntt_kernels

#: The NTT method of a sharded context when none is forced: CROSS's layout-invariant matrix NTT (pure JAX,
#: the matrix-engine path; every method is exact, so the choice only changes speed).
DEFAULT_SHARDED_NTT = "mat3"


class ShardedTableCache(TableCache):
    """A :class:`TableCache` whose tables and index maps are replicated on every device of a mesh.

    ``keyswitch_path`` (:data:`hemx.ckks.sharded_keyswitch.PATHS`): with "auto" or "shard_map", where
    :func:`~hemx.ckks.sharded_keyswitch.uses_shard_map` holds, :meth:`level` returns
    :class:`~hemx.ckks.sharded_keyswitch.ShardedLevelTables` (the level's tables plus the row tables of the
    ``shard_map`` key switch, built here at concrete time and replicated), which make the evaluator switch keys
    by ``jax.shard_map``; with "partitioner", or where the rule fails, the plain tables (XLA's partitioner).
    """

    def __init__(self, params, *, reduction: str, mesh, keyswitch_path: str = "auto"):
        super().__init__(params, reduction=reduction)
        self.mesh = mesh
        if keyswitch_path not in sks.PATHS:
            raise ParameterError(f"keyswitch_path must be one of {sks.PATHS}, got {keyswitch_path!r}")
        self.keyswitch_path = keyswitch_path
        self._sharded: dict = {}

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


def _jax_kernels(method):
    """Run ``method`` with hemx's native custom calls switched off (the sharded context's kernels)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with native.disabled():
            return method(self, *args, **kwargs)

    return wrapper


class ShardedContext(Context):
    """:class:`Context` whose ciphertexts, plaintexts and keys live on a device mesh (module docstring).

    Built by ``hemx.Context(params, mesh=mesh, ...)``; every other argument is :class:`Context`'s, plus
    ``keyswitch_path``: "auto" (default; the ``jax.shard_map`` key switch of :mod:`hemx.ckks.sharded_keyswitch`
    where the mesh's ``"limbs"`` axis has ``D > 1`` devices and ``D`` divides the key's ``P + L`` rows, XLA's
    partitioner otherwise), "shard_map" (the same) or "partitioner" (always XLA's partitioner; for comparison).
    Settable later through ``ctx.tables.keyswitch_path``.

    Attributes:
        mesh: the ``jax.sharding.Mesh``.
    """

    def __init__(self, params, *, mesh, ntt: str | None = None, keyswitch_path: str = "auto", **kwargs):
        mesh = parallel.check_mesh(mesh)
        if ntt == ntt_kernels.NATIVE_METHOD:
            raise ParameterError("the native NTT is a CPU custom call without a partitioning rule; a sharded "
                                 f"context needs a pure-JAX method, one of {ntt_kernels.METHODS}")
        if ntt is None and kwargs.get("ntt_split") is None:
            ntt = DEFAULT_SHARDED_NTT
        with native.disabled():
            super().__init__(params, ntt=ntt, **kwargs)
        if self.plan.method == ntt_kernels.NATIVE_METHOD:  # defensive: the planner never picks it when disabled
            raise ParameterError("a sharded context cannot use the native NTT")
        self.mesh = mesh
        self.ring.plan = parallel.replicate(self.ring.plan, mesh)
        self.plan = self.ring.plan
        self.tables = ShardedTableCache(params, reduction=self.reduction, mesh=mesh, keyswitch_path=keyswitch_path)

    def __repr__(self) -> str:
        shape = dict(zip(self.mesh.axis_names, self.mesh.devices.shape))
        return f"{super().__repr__()[:-1]}, mesh={shape})"

    # ------------------------------------------------------------------ placement
    def place(self, x):
        """A ciphertext, plaintext, key or key set placed on the mesh (module docstring); anything else as is."""
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

    # ------------------------------------------------------------------ every public operation, placed
    @_jax_kernels
    def keygen(self, *args, **kwargs):
        return self.place(super().keygen(*args, **kwargs))

    @_jax_kernels
    def encode(self, *args, **kwargs):
        return self.place(super().encode(*args, **kwargs))

    @_jax_kernels
    def decode(self, *args, **kwargs):
        return super().decode(*args, **kwargs)

    @_jax_kernels
    def encrypt(self, *args, **kwargs):
        return self.place(super().encrypt(*args, **kwargs))

    @_jax_kernels
    def decrypt(self, *args, **kwargs):
        return super().decrypt(*args, **kwargs)


def _placed_op(name):
    base = getattr(Context, name)

    @functools.wraps(base)
    def op(self, *args, **kwargs):
        with native.disabled():
            return self.place(base(self, *args, **kwargs))

    return op


# Every evaluation operation of Context: its result placed (inner calls, e.g. sub -> add, are placed too).
PLACED_OPERATIONS = ("drop_level", "add", "sub", "negate", "mul", "rescale", "rotate", "rotate_many", "conjugate",
                     "switch_key", "sum_slots", "bootstrap")
for _name in PLACED_OPERATIONS:
    setattr(ShardedContext, _name, _placed_op(_name))
del _name
