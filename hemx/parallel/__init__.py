"""Meshes and shardings for hemx's arrays: ciphertexts ``(batch..., 2, limbs, N)``, plaintexts
``(batch..., limbs, N)`` and keys ``(..., limbs, N)`` on a ``jax.sharding.Mesh`` with axes ``"batch"`` and
``"limbs"`` (see ``docs/parallel.md``). JAX's own machinery only: ``NamedSharding`` placement, and
``jax.lax.with_sharding_constraint`` inside a trace, so XLA's SPMD partitioner inserts the collectives.
"""

from hemx.parallel.mesh import (
    AXES,
    BATCH,
    LIMBS,
    check_mesh,
    make_mesh,
    place,
    placed_tree,
    replicate,
    sharding_for,
    spec_for,
)
from hemx.parallel.traffic import (
    KINDS as COLLECTIVE_KINDS, Collective, TrafficSummary, by_operation, collectives, summarize,
)

__all__ = ["AXES", "BATCH", "LIMBS", "check_mesh", "make_mesh", "place", "placed_tree", "replicate",
           "sharding_for", "spec_for",
           "COLLECTIVE_KINDS", "Collective", "TrafficSummary", "by_operation", "collectives",
           "summarize"]
