"""The jitted kernels of CKKS evaluation on RNS residues (NTT domain), shared by every context.

Each function is ``jax.jit``-compiled once per array shape and static configuration. Arrays come first; the
static configuration is keyword-only: ``num_p`` (special limbs), ``num_q`` (ciphertext limbs at the level),
``reduction`` (known-operand reduction) and ``dataflow`` (key switching). Functions that need a level's tables
take its :class:`hemx.ckks.tables.LevelTables`, whose limb layout (``num_q``, digits, primes dropped by a
rescale) is static metadata of the pytree. ``plan`` is the context's NTT plan over the ``P + Q`` basis.

Shapes: a polynomial batch is ``(..., num_q, N)``, a ciphertext batch ``(..., 2, num_q, N)``, uint32.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from hemx.ckks import keyswitch as ks
from hemx.ckks import sharded_keyswitch as sks
from hemx.ckks.tables import LevelTables
from hemx.kernels import automorphism, modarith
from hemx.kernels import ntt as ntt_kernels


def _q_table(plan, num_p: int, num_q: int) -> modarith.ModulusTable:
    return ks.limb_table(plan, num_p, num_p + num_q)


@partial(jax.jit, static_argnames=("num_p", "num_q"))
def add(a, b, plan, *, num_p: int, num_q: int):
    """``a + b`` mod ``Q_l`` (broadcasting)."""
    return modarith.add_mod(a, b, _q_table(plan, num_p, num_q).q)


@partial(jax.jit, static_argnames=("num_p", "num_q"))
def sub(a, b, plan, *, num_p: int, num_q: int):
    return modarith.sub_mod(a, b, _q_table(plan, num_p, num_q).q)


@partial(jax.jit, static_argnames=("num_p", "num_q"))
def negate(a, plan, *, num_p: int, num_q: int):
    return modarith.neg_mod(a, _q_table(plan, num_p, num_q).q)


@partial(jax.jit, static_argnames=("num_p", "num_q"))
def mul_elementwise(a, b, plan, *, num_p: int, num_q: int):
    """Slot-wise (NTT-domain) product ``a * b`` over the limbs ``[num_p, num_p + num_q)`` of the plan."""
    return modarith.mul_barrett(a, b, _q_table(plan, num_p, num_q))


@partial(jax.jit, static_argnames=("num_p", "num_q", "reduction"))
def mul_known(a, w, plan, *, num_p: int, num_q: int, reduction: str):
    """``a * w`` for a precomputed known operand ``w`` (a constant per limb, ``(num_q, 1)``)."""
    return modarith.mul_known(a, w, _q_table(plan, num_p, num_q), reduction)


@partial(jax.jit, static_argnames=("num_p", "num_q"))
def ntt_q(x, plan, *, num_p: int, num_q: int):
    """Coefficients ``(..., num_q, N)`` over ``Q_l`` -> NTT domain."""
    return ntt_kernels.ntt(x, ks.limb_plan(plan, num_p, num_p + num_q))


@partial(jax.jit, static_argnames=("num_p", "num_q"))
def intt_q(x, plan, *, num_p: int, num_q: int):
    """NTT domain ``(..., num_q, N)`` over ``Q_l`` -> coefficients."""
    return ntt_kernels.intt(x, ks.limb_plan(plan, num_p, num_p + num_q))


@partial(jax.jit, static_argnames=("num_p", "num_q"))
def decrypt_core(ct, s, plan, *, num_p: int, num_q: int):
    """``c0 + c1 s`` in coefficients: ``(..., 2, num_q, N)`` and ``s`` over ``P + Q`` -> ``(..., num_q, N)``."""
    table = _q_table(plan, num_p, num_q)
    m = modarith.add_mod(ct[..., 0, :, :], modarith.mul_barrett(ct[..., 1, :, :], s[num_p : num_p + num_q], table),
                         table.q)
    return ntt_kernels.intt(m, ks.limb_plan(plan, num_p, num_p + num_q))


@partial(jax.jit, static_argnames=("num_p", "num_q"))
def tensor(a, b, plan, *, num_p: int, num_q: int):
    """``(d0, d1, d2)`` of the product of two ciphertext batches (before relinearization)."""
    table = _q_table(plan, num_p, num_q)
    a0, a1, b0, b1 = a[..., 0, :, :], a[..., 1, :, :], b[..., 0, :, :], b[..., 1, :, :]
    d0 = modarith.mul_barrett(a0, b0, table)
    d1 = modarith.add_mod(modarith.mul_barrett(a0, b1, table), modarith.mul_barrett(a1, b0, table), table.q)
    d2 = modarith.mul_barrett(a1, b1, table)
    return d0, d1, d2


_KS = ("num_p", "reduction", "dataflow")


def _keyswitch(x, key, plan, tables, **kwargs):
    """:func:`ks.keyswitch`, or its ``jax.shard_map`` form on a limb-sharded mesh when a sharded context's tables
    say so (:class:`hemx.ckks.sharded_keyswitch.ShardedLevelTables`: static metadata, so the jit cache keys on it)."""
    if isinstance(tables, sks.ShardedLevelTables):
        return sks.keyswitch(x, key, plan, tables, **kwargs)
    return ks.keyswitch(x, key, plan, tables, **kwargs)


@partial(jax.jit, static_argnames=_KS)
def relinearize(d0, d1, d2, key, plan, tables: LevelTables, *, num_p: int, reduction: str, dataflow: str):
    """``(d0, d1) + KeySwitch(d2)``: ``(..., 2, num_q, N)``."""
    sw = _keyswitch(d2, key, plan, tables, num_p=num_p, reduction=reduction, dataflow=dataflow)
    q = _q_table(plan, num_p, tables.num_q).q
    return jnp.stack([modarith.add_mod(d0, sw[..., 0, :, :], q), modarith.add_mod(d1, sw[..., 1, :, :], q)], axis=-3)


@partial(jax.jit, static_argnames=_KS)
def mul_relin(a, b, key, plan, tables: LevelTables, *, num_p: int, reduction: str, dataflow: str):
    """Relinearized product of two ciphertext batches at the tables' level."""
    d0, d1, d2 = tensor(a, b, plan, num_p=num_p, num_q=tables.num_q)
    return relinearize(d0, d1, d2, key, plan, tables, num_p=num_p, reduction=reduction, dataflow=dataflow)


@partial(jax.jit, static_argnames=_KS)
def mul_relin_rescale(a, b, key, plan, tables: LevelTables, *, num_p: int, reduction: str, dataflow: str):
    """``rescale(relinearize(a * b))`` with the rescale folded into ModDown (:class:`ks.RescaleFold`):
    ``(..., 2, num_q, N)`` x 2 -> ``(..., 2, num_q - drop, N)``."""
    d0, d1, d2 = tensor(a, b, plan, num_p=num_p, num_q=tables.num_q)
    fold = ks.RescaleFold(jnp.stack([d0, d1], axis=-3), tables.p_mod, tables.fold_conv, tables.fold_inv)
    return _keyswitch(d2, key, plan, tables, num_p=num_p, reduction=reduction, dataflow=dataflow, fold=fold)


@partial(jax.jit, static_argnames=_KS)
def rotate_one(ct, index_map, key, plan, tables: LevelTables, *, num_p: int, reduction: str, dataflow: str):
    """One rotation with the chosen key-switching dataflow: ``(..., 2, num_q, N)``.

    The automorphism permutes the ciphertext's NTT slots first (it commutes exactly with the centered ModUp,
    and permuting ``num_q`` limbs is cheaper than permuting the ``D`` extended digits of ``num_p + num_q``)."""
    ct = automorphism.apply_ntt_automorphism(ct, index_map)
    sw = _keyswitch(ct[..., 1, :, :], key, plan, tables, num_p=num_p, reduction=reduction, dataflow=dataflow)
    q = _q_table(plan, num_p, tables.num_q).q
    return jnp.stack([modarith.add_mod(ct[..., 0, :, :], sw[..., 0, :, :], q), sw[..., 1, :, :]], axis=-3)


@partial(jax.jit, static_argnames=("num_p", "reduction"))
def rotate_hoisted(ct, index_maps, keys, plan, tables: LevelTables, *, num_p: int, reduction: str):
    """One ModUp of c1 shared by every Galois element: ``(..., 2, num_q, N) -> (R, ..., 2, num_q, N)``."""
    if isinstance(tables, sks.ShardedLevelTables):
        return sks.rotate_hoisted(ct, index_maps, keys, plan, tables, num_p=num_p, reduction=reduction)
    num_q = tables.num_q
    ext = ks.modup(ct[..., 1, :, :], plan, tables.modup, digits=tables.digits, num_p=num_p, num_q=num_q)
    q = _q_table(plan, num_p, num_q).q
    outs = []
    for r in range(index_maps.shape[0]):
        idx = index_maps[r]
        acc = ks.inner_product(automorphism.apply_ntt_automorphism(ext, idx), keys[r], plan, num_p=num_p,
                               num_q=num_q)
        sw = ks.moddown(acc, plan, tables.moddown, tables.p_inv, num_p=num_p, num_q=num_q, reduction=reduction)
        c0 = automorphism.apply_ntt_automorphism(ct[..., 0, :, :], idx)
        outs.append(jnp.stack([modarith.add_mod(c0, sw[..., 0, :, :], q), sw[..., 1, :, :]], axis=-3))
    return jnp.stack(outs)


@partial(jax.jit, static_argnames=("num_p", "reduction"))
def rescale(x, plan, tables: LevelTables, *, num_p: int, reduction: str):
    """Divide by the product ``D`` of the level's top ``drop`` primes, rounding, in one step (NTT domain):
    ``(..., num_q, N) -> (..., num_q - drop, N)``."""
    if isinstance(tables, sks.ShardedLevelTables) and x.ndim >= 3:  # a ciphertext batch on a limb-sharded mesh
        return sks.rescale(x, plan, tables, num_p=num_p, reduction=reduction)
    num_q, drop = tables.num_q, tables.drop
    return ks.divide_by_dropped(x[..., : num_q - drop, :], x[..., num_q - drop : num_q, :], plan, tables.rescale,
                                tables.d_inv, keep=(num_p, num_p + num_q - drop),
                                drop=(num_p + num_q - drop, num_p + num_q), reduction=reduction)


def export_safety_checks() -> list:
    """``disabled_checks`` for ``jax.export.export(..., platforms=["cpu", ...])`` of CKKS operations.

    Where hemx's native CPU kernels are available the CPU lowering holds their XLA FFI custom calls
    (``hemx.kernels.native``), which ``jax.export`` refuses unless told to; such an export runs where the native
    library is loaded. Empty where the native kernels are not used (the export then holds no custom call).
    Exports for cuda / tpu alone never hold one and need no disabled check.
    """
    from hemx.kernels import native

    if not native.available():
        return []
    return [jax.export.DisabledSafetyCheck.custom_call(name) for name in sorted(getattr(native, "_TARGETS", {}))]
