"""A :class:`~hemx.ckks.context.Context` on many devices: ``hemx.Context(params, mesh=mesh)``.

``mesh`` is a ``jax.sharding.Mesh`` with axes ``"batch"`` and ``"limbs"`` (:func:`hemx.parallel.check_mesh`).
The context it makes is a :class:`ShardedContext`: the same operations, whose every result is placed by
:func:`hemx.parallel.spec_for` (batch axis on ``"batch"``, RNS limb axis on ``"limbs"``, replicated along an
axis that does not divide the array). Outside a trace the result is put there with ``jax.device_put``; inside
``jax.jit`` / ``jax.export`` a ``jax.lax.with_sharding_constraint`` keeps it there, and XLA's SPMD partitioner
inserts the collectives for the steps that need every limb (INTT -> basis conversion in ModUp, ModDown,
rescale). The NTT plan and the per-level tables are replicated on every device of the mesh.

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
    """A :class:`TableCache` whose tables and index maps are replicated on every device of a mesh."""

    def __init__(self, params, *, reduction: str, mesh):
        super().__init__(params, reduction=reduction)
        self.mesh = mesh

    def _replicated(self, cache: dict, key, build):
        """``build(key)`` (which fills ``cache[key]`` on first use), replicated over the mesh once, when built."""
        fresh = key not in cache
        out = build(key)
        if fresh:
            with jax.ensure_compile_time_eval():
                out = cache[key] = parallel.replicate(out, self.mesh)
        return out

    def level(self, level: int):
        return self._replicated(self._levels, level, super().level)

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

    Built by ``hemx.Context(params, mesh=mesh, ...)``; every other argument is :class:`Context`'s.

    Attributes:
        mesh: the ``jax.sharding.Mesh``.
    """

    def __init__(self, params, *, mesh, ntt: str | None = None, **kwargs):
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
        self.tables = ShardedTableCache(params, reduction=self.reduction, mesh=mesh)

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
