"""Mesh validation and the placement rule of hemx's arrays.

Rule (:func:`spec_for`) for an array ``(*batch, *middle, limbs, N)``:

* the RNS limb axis (second to last) goes on the mesh axis ``"limbs"`` when its length is divisible by that
  axis's size, else that array is replicated along ``"limbs"`` (no padding: padded limbs would change the
  shapes every kernel and every table sees; a level whose limb count the axis does not divide simply runs
  with its limbs replicated, see ``docs/parallel.md``);
* the first batch axis goes on ``"batch"`` when its length is divisible by that axis's size, else the array is
  replicated along ``"batch"``; other batch axes and the middle axes (``2`` of a ciphertext, digits of a key)
  and ``N`` are not split.

An axis of size 1 always "divides", so a ``1 x 8`` mesh is pure limb sharding and ``8 x 1`` pure batch sharding.
"""

from __future__ import annotations

from typing import Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from hemx.errors import ParameterError

BATCH = "batch"
LIMBS = "limbs"
AXES: tuple[str, str] = (BATCH, LIMBS)


def check_mesh(mesh) -> Mesh:
    """``mesh`` if it is a ``jax.sharding.Mesh`` whose axes are exactly ``"batch"`` and ``"limbs"`` (either
    order, either of size 1); ParameterError otherwise.

    A mesh with explicit or manual axis types (``jax.make_mesh``'s default) is returned as the same mesh with
    auto axis types: hemx places its arrays with ``NamedSharding`` / ``with_sharding_constraint`` and lets XLA
    propagate shardings through its kernels (gathers, mixed-sharding operands), which explicit axes refuse
    with ``ShardingTypeError``. Same devices, same names, same placement: results are bit-identical.
    """
    if not isinstance(mesh, Mesh):
        raise ParameterError(f"mesh must be a jax.sharding.Mesh with axes {AXES}, got {type(mesh).__name__}")
    names = tuple(mesh.axis_names)
    if sorted(names) != sorted(AXES):
        raise ParameterError(f"the mesh's axes must be named {AXES} (either may have size 1); got {names}")
    if mesh.devices.size < 1:
        raise ParameterError("the mesh has no devices")
    return auto_axes(mesh)


def auto_axes(mesh: Mesh) -> Mesh:
    """``mesh`` with every axis of type ``jax.sharding.AxisType.Auto`` (itself when it already is)."""
    axis_type = getattr(jax.sharding, "AxisType", None)
    types = getattr(mesh, "axis_types", None)
    if axis_type is None or types is None or all(t == axis_type.Auto for t in types):
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(axis_type.Auto,) * len(mesh.axis_names))


def make_mesh(batch: int, limbs: int, devices: Sequence | None = None) -> Mesh:
    """A ``batch x limbs`` mesh over ``devices`` (default ``jax.devices()``, every process's devices)."""
    for name, size in ((BATCH, batch), (LIMBS, limbs)):
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ParameterError(f"mesh axis {name!r} needs a positive integer size, got {size!r}")
    devices = list(jax.devices() if devices is None else devices)
    if batch * limbs != len(devices):
        raise ParameterError(f"a {batch} x {limbs} mesh needs {batch * limbs} devices, {len(devices)} given")
    return Mesh(np.asarray(devices, dtype=object).reshape(batch, limbs), AXES)


def spec_for(shape: Sequence[int], mesh: Mesh, *, batch_dims: int) -> PartitionSpec:
    """The ``PartitionSpec`` of an array of ``shape`` whose first ``batch_dims`` axes are batch axes and whose
    second to last axis holds the RNS limbs (the rule in the module docstring)."""
    shape = tuple(int(s) for s in shape)
    spec: list = [None] * len(shape)
    sizes = dict(zip(mesh.axis_names, mesh.devices.shape))
    if len(shape) >= 2 and shape[-2] % sizes[LIMBS] == 0:
        spec[-2] = LIMBS
    if batch_dims > 0 and len(shape) - 2 >= 1 and shape[0] % sizes[BATCH] == 0:
        spec[0] = BATCH
    return PartitionSpec(*spec)


def sharding_for(shape: Sequence[int], mesh: Mesh, *, batch_dims: int) -> NamedSharding:
    return NamedSharding(mesh, spec_for(shape, mesh, batch_dims=batch_dims))


def place(x, mesh: Mesh, *, batch_dims: int):
    """``x`` placed by :func:`spec_for`: ``jax.lax.with_sharding_constraint`` inside a trace (XLA keeps the
    output spread and inserts the collectives), ``jax.device_put`` on concrete arrays (no copy when already
    placed so)."""
    sharding = sharding_for(x.shape, mesh, batch_dims=batch_dims)
    if isinstance(x, jax.core.Tracer):
        return jax.lax.with_sharding_constraint(x, sharding)
    if isinstance(x, jax.Array) and x.sharding == sharding:
        return x
    return jax.device_put(x, sharding)


def replicate(tree, mesh: Mesh):
    """Every array leaf of ``tree`` replicated on every device of ``mesh`` (tables, NTT plans)."""
    full = NamedSharding(mesh, PartitionSpec())

    def put(leaf):
        if isinstance(leaf, (jax.Array, np.ndarray)) and not isinstance(leaf, jax.core.Tracer):
            return jax.device_put(leaf, full)
        return leaf

    return jax.tree_util.tree_map(put, tree)


def placed_tree(tree, mesh: Mesh, *, batch_dims: int = 0):
    """Every array leaf of ``tree`` placed by :func:`place` (keys: ``batch_dims=0``)."""
    return jax.tree_util.tree_map(
        lambda leaf: place(leaf, mesh, batch_dims=batch_dims) if isinstance(leaf, jax.Array) else leaf, tree)
