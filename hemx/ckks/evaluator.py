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


@partial(jax.jit, static_argnames=("num_p", "num_q"))
def dot_plain(a, b, plan, *, num_p: int, num_q: int):
    """``sum_k a[k] * b[k]`` (NTT domain) over ``Q_l``: ciphertexts ``a`` ``(k, ..., 2, num_q, N)`` and plaintexts
    ``b`` ``(k, num_q, N)`` -> ``(..., 2, num_q, N)``, with one reduction of the summed products (the key-switching
    inner product :func:`hemx.kernels.modarith.mul_sum`, native on the CPU)."""
    k = a.shape[0]
    out = modarith.mul_sum(b, a.reshape((k, -1) + a.shape[-2:]), _q_table(plan, num_p, num_q))
    return out.reshape(a.shape[1:])


@partial(jax.jit, static_argnames=("num_p", "num_q", "reduction"))
def mul_known(a, w, plan, *, num_p: int, num_q: int, reduction: str):
    """``a * w`` for a precomputed known operand ``w`` (a constant per limb, ``(num_q, 1)``)."""
    return modarith.mul_known(a, w, _q_table(plan, num_p, num_q), reduction)


@partial(jax.jit, static_argnames=("num_p", "num_q"))
def ntt_q(x, plan, *, num_p: int, num_q: int):
    """Coefficients ``(..., num_q, N)`` over ``Q_l`` -> NTT domain."""
    return ntt_kernels.ntt(x, ks.limb_plan(plan, num_p, num_p + num_q))


@partial(jax.jit, static_argnames=("num_p", "num_q"))
def float_ntt_q(coeffs, pow2, plan, *, num_p: int, num_q: int):
    """Integer-valued float64 coefficients ``(..., N)`` (the encoder's) -> NTT-domain residues ``(..., num_q, N)``
    over ``Q_l`` (``pow2``: :func:`hemx.kernels.modarith.pow2_table` of those ``num_q`` moduli)."""
    res = modarith.residues_from_float(coeffs, pow2, _q_table(plan, num_p, num_q))
    return ntt_kernels.ntt(res, ks.limb_plan(plan, num_p, num_p + num_q))


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
    and permuting ``num_q`` limbs is cheaper than permuting the ``D`` extended digits of ``num_p + num_q``). With
    the Max-Parallel dataflow on one device it is fused: ModUp reads ``c1`` in place through the map and ModDown
    adds the permuted ``c0`` as it writes the result (natively: three calls, no automorphism, slice or stacking
    pass of their own; bit-identical to the steps apart)."""
    if dataflow == "mp" and not isinstance(tables, sks.ShardedLevelTables):
        num_q = tables.num_q
        ext = ks.modup(ct, plan, tables.modup, digits=tables.digits, num_p=num_p, num_q=num_q, part=1,
                       index_map=index_map)
        acc = ks.inner_product(ext, key, plan, num_p=num_p, num_q=num_q)
        return ks.moddown(acc, plan, tables.moddown, tables.p_inv, num_p=num_p, num_q=num_q, reduction=reduction,
                          addend=ct, addend_part=0, index_map=index_map)
    ct = automorphism.apply_ntt_automorphism(ct, index_map)
    sw = _keyswitch(ct[..., 1, :, :], key, plan, tables, num_p=num_p, reduction=reduction, dataflow=dataflow)
    q = _q_table(plan, num_p, tables.num_q).q
    return jnp.stack([modarith.add_mod(ct[..., 0, :, :], sw[..., 0, :, :], q), sw[..., 1, :, :]], axis=-3)


@partial(jax.jit, static_argnames=("num_p", "reduction"))
def rotate_hoisted(ct, index_maps, keys, plan, tables: LevelTables, *, num_p: int, reduction: str):
    """One ModUp of c1 shared by every Galois element: ``(..., 2, num_q, N) -> (R, ..., 2, num_q, N)``.

    ``keys``: the ``R`` switching keys, stacked ``(R, D, 2, M, N)``, or a tuple of their
    :class:`~hemx.ckks.keys.KeyMaterial` (or ``(D_r, 2, M_r, N)`` arrays; read in place, each at least this level's
    digits and rows; compact keys generate their uniform halves in the product)."""
    if isinstance(tables, sks.ShardedLevelTables):
        return sks.rotate_hoisted(ct, index_maps, keys, plan, tables, num_p=num_p, reduction=reduction)
    num_q = tables.num_q
    ext = ks.modup(ct, plan, tables.modup, digits=tables.digits, num_p=num_p, num_q=num_q, part=1)
    outs = []
    for r in range(index_maps.shape[0]):
        idx = index_maps[r]  # the digits permuted inside the product (nothing permuted stored, natively)
        acc = ks.inner_product(ext, keys[r], plan, num_p=num_p, num_q=num_q, index_map=idx)
        # c0's automorphism and its sum with the switched pair inside ModDown (natively one pass)
        outs.append(ks.moddown(acc, plan, tables.moddown, tables.p_inv, num_p=num_p, num_q=num_q,
                               reduction=reduction, addend=ct, addend_part=0, index_map=idx))
    return jnp.stack(outs)


def _switch_extended(ext, key, plan, *, num_p: int, num_q: int, full_rows: bool, index_map=None):
    """``sum_d x_d * key_d`` over ``Q_l P`` without the ModDown: ``(..., D, m, N) -> (..., 2, m, N)``, ``x_d`` the
    digits ``ext`` permuted by ``index_map`` (None: as they are).

    ``full_rows`` (only where the one-pass native key product is missing, :func:`hemx.ckks.keyswitch.reads_keys_in_place`):
    ``ext`` has already been padded with zero rows to the (full) key's ``num_p + L`` rows, so the key is read whole,
    in place (no sliced copy of it for the native call); the result's rows past ``m`` are zero and are dropped by
    the consumer."""
    key = ks.as_material(key)
    if not full_rows:
        return ks.inner_product(ext, key, plan, num_p=num_p, num_q=num_q, index_map=index_map)
    if index_map is not None:
        ext = automorphism.apply_ntt_automorphism(ext, index_map)
    out = modarith.mul_sum(ext, key.data[: ext.shape[-3]], ks.limb_table(plan, 0, key.rows))
    return out[..., : num_p + num_q, :]


def _pad_rows(ext, rows: int):
    pad = [(0, 0)] * ext.ndim
    pad[-2] = (0, rows - ext.shape[-2])
    return jnp.pad(ext, pad)


widen = modarith.widen  # re-exported: the diagonals' widening (hemx.kernels.modarith.widen)


@partial(jax.jit, static_argnames=("structure", "num_p", "reduction", "full_key_rows", "blocks"))
def bsgs_double_hoisted(ct, baby_maps, baby_keys, giant_maps, giant_keys, plain_p, plain_q, plan,
                        tables: LevelTables, *, structure, num_p: int, reduction: str, full_key_rows: bool = False,
                        blocks: tuple | None = None):
    """A baby-step / giant-step linear transform with double hoisting (Bossuat et al., EUROCRYPT 2021, Sec. 4):
    ``sum_g rot_g(sum_b pt_(g,b) * rot_b(ct))``, rescaled once: ``(..., 2, num_q, N) -> (..., 2, num_q - drop, N)``.

    * Baby steps: one ModUp of ``c1``; each non-zero baby rotation is its key's inner product with the permuted
      extended digits plus ``P phi_b(c0)``, kept over ``Q_l P`` (no ModDown): ``P rot_b(ct)`` up to the
      key-switching error. The baby step 0 (the input itself) stays over ``Q_l`` with an implicit factor ``P``.
    * Every giant's sum of plaintext products is formed over ``Q_l P`` (the diagonals' P rows ``plain_p`` beside
      their Q rows ``plain_q``) by one :func:`hemx.kernels.modarith.plain_sums` call for all the giants: natively,
      one pass over the babies, each column chunk summed for every giant while it is in cache.
    * A non-zero giant rotation ModDowns only the sum's ``c1`` (one polynomial), switches it (one ModUp, one inner
      product, no ModDown) and permutes the sum's ``c0`` over ``Q_l P``.
    * One division by ``P D`` at the end (``D`` the level's top primes: the rescale folded into the last ModDown,
      :class:`hemx.ckks.keyswitch.RescaleFold`): one rounding for the whole transform.

    ModDowns: one polynomial per non-zero giant plus one 2-polynomial division, instead of two polynomials per
    rotation plus a 2-polynomial rescale per giant (:meth:`hemx.Context.rotate_many` and ``rotate`` per giant).

    Args:
        ct: ``(..., 2, num_q, N)`` at the tables' level.
        baby_maps, baby_keys: tuples of the non-zero baby rotations' index maps ``(N,)`` and keys
            (:class:`~hemx.ckks.keys.KeyMaterial`, or full ``(D, 2, num_p + L, N)`` arrays); ``giant_maps``,
            ``giant_keys`` the same for the non-zero giant rotations.
        plain_p, plain_q: tuples of the diagonals' residues over ``P`` ``(num_p, N)`` and ``Q_l`` ``(num_q, N)``.
        structure: static ``((giant, ((baby, diagonal), ...)), ...)``: per giant step its index into
            ``giant_maps`` (-1 for the step 0), and its terms: the baby's index into ``baby_maps`` (-1 for 0) and
            the diagonal's index into ``plain_p`` / ``plain_q``.
        full_key_rows: pad the extended digits with zero rows to the keys' full ``num_p + L`` rows, so the inner
            products read the keys in place instead of a copy sliced to the level (same result; full keys only).
        blocks: static, per diagonal: its rows ``plain_p[d]`` / ``plain_q[d]`` are ``(., N / blocks[d])``, each
            entry standing for ``blocks[d]`` equal consecutive NTT values (a diagonal periodic in the slots; widened
            inside the product, never stored); None: every diagonal at full width.
    """
    num_q = tables.num_q
    m = num_p + num_q
    tab_p, tab_q, tab_m = ks.limb_table(plan, 0, num_p), _q_table(plan, num_p, num_q), ks.limb_table(plan, 0, m)
    c0 = ct[..., 0, :, :]
    # Diagonals kept at their periods are widened inside the products that read them (a broadcast XLA fuses)
    blocks = blocks or (1,) * len(plain_q)
    wide = widen
    mk = dict(digits=tables.digits, num_p=num_p, num_q=num_q)
    sw = dict(num_p=num_p, num_q=num_q, full_rows=full_key_rows)
    some_key = (baby_keys or giant_keys or (None,))[0]
    rows = m if some_key is None else ks.as_material(some_key).rows
    p_mod = tables.p_mod.value  # P mod q_i, (num_q, 1)
    perm = automorphism.apply_ntt_automorphism

    # After its giant rotation an extended ciphertext over Q_l P is kept as its four parts (c0 over P, c0 over Q_l,
    # c1 over P, c1 over Q_l), so the sums run on the P and Q rows separately and nothing is concatenated on the way.
    def extend(x, part=None, idx=None):  # ModUp (of a part, through a map), padded to the keys' rows if read whole
        ext = ks.modup(x, plan, tables.modup, part=part, index_map=idx, **mk)
        return _pad_rows(ext, rows) if full_key_rows and rows > m else ext

    def switch(ext, key, idx=None):  # the inner product over Q_l P, no ModDown: parts (k0P, k0Q, k1P, k1Q)
        k = _switch_extended(ext, key, plan, index_map=idx, **sw)
        return [k[..., 0, :num_p, :], k[..., 0, num_p:, :], k[..., 1, :num_p, :], k[..., 1, num_p:, :]]

    def add_parts(a, b):
        if a is None:
            return b
        return [modarith.add_mod(x, y, t.q) for x, y, t in zip(a, b, (tab_p, tab_q, tab_p, tab_q))]

    babies = []  # P rot_b(ct) over Q_l P, (..., 2, m, N) each
    if baby_maps:
        ext = extend(ct, part=1)  # c1 read in place
        for idx, key in zip(baby_maps, baby_keys):
            k = _switch_extended(ext, key, plan, index_map=idx, **sw)  # the digits permuted inside the product
            c0q = modarith.add_mod(k[..., 0, num_p:, :], modarith.mul_barrett(perm(c0, idx), p_mod, tab_q), tab_q.q)
            babies.append(k.at[..., 0, num_p:, :].set(c0q))  # + P phi(c0)
    # every giant's sum of baby products at once (one pass over the babies for all the giants, natively), each
    # diagonal as its P and Q rows
    groups = tuple(tuple((baby, d) for baby, d in terms if baby >= 0) for _, terms in structure)
    summed = [g for g, terms in enumerate(groups) if terms]
    sums = dict(zip(summed, modarith.plain_sums(
        babies, tuple(zip(plain_p, plain_q)), tuple(groups[g] for g in summed), tab_m))) if summed else {}
    out_ext = out_c = None  # parts over Q_l P; (c0, c1) over Q_l with the implicit factor P
    for g, (giant, terms) in enumerate(structure):
        c_acc = None
        for baby, d in terms:
            if baby < 0:  # the baby step 0: the input itself, over Q_l
                term = modarith.mul_barrett(ct, wide(plain_q[d], blocks[d]), tab_q)
                c_acc = term if c_acc is None else modarith.add_mod(c_acc, term, tab_q.q)
        s_g = sums.get(g)
        ext_acc = None if s_g is None else [s_g[..., 0, :num_p, :], s_g[..., 0, num_p:, :], s_g[..., 1, :num_p, :],
                                            s_g[..., 1, num_p:, :]]
        if giant >= 0:  # rotate the giant's sum: a ModDown of its c1 only, switched without a ModDown
            idx = giant_maps[giant]
            if ext_acc is None:  # only the baby step 0: an ordinary rotation of c_acc, kept over Q_l P
                c0p, c0q = None, modarith.mul_barrett(c_acc[..., 0, :, :], p_mod, tab_q)
                c1_sum = c_acc[..., 1, :, :]
            else:
                c0p, c0q = ext_acc[0], ext_acc[1]
                c1_sum = ks.moddown(s_g[..., 1, :, :], plan, tables.moddown, tables.p_inv, num_p=num_p, num_q=num_q,
                                    reduction=reduction)
                if c_acc is not None:
                    c0q = modarith.add_mod(c0q, modarith.mul_barrett(c_acc[..., 0, :, :], p_mod, tab_q), tab_q.q)
                    c1_sum = modarith.add_mod(c1_sum, c_acc[..., 1, :, :], tab_q.q)
            k = switch(extend(c1_sum, idx=idx), giant_keys[giant])  # its automorphism inside the ModUp
            if c0p is not None:
                k[0] = modarith.add_mod(k[0], perm(c0p, idx), tab_p.q)
            k[1] = modarith.add_mod(k[1], perm(c0q, idx), tab_q.q)
            ext_acc, c_acc = k, None
        out_ext = out_ext if ext_acc is None else add_parts(out_ext, ext_acc)
        if c_acc is not None:
            out_c = c_acc if out_c is None else modarith.add_mod(out_c, c_acc, tab_q.q)
    if out_ext is None:  # only the diagonal 0 (no rotation): a plain rescale
        return rescale(out_c, plan, tables, num_p=num_p, reduction=reduction)
    if out_c is None:
        out_c = jnp.zeros(ct.shape, jnp.uint32)
    # the four parts written into the accumulator by slices (a concatenation of them became one fusion that XLA:CPU
    # runs on one thread, with the last giant's products inside: with diagonals kept at their periods it took 40%
    # of a transform, measured at boot_16)
    acc = jnp.zeros(out_ext[1].shape[:-2] + (2, m, out_ext[1].shape[-1]), jnp.uint32)
    for half in (0, 1):
        acc = acc.at[..., half, :num_p, :].set(out_ext[2 * half]).at[..., half, num_p:, :].set(out_ext[2 * half + 1])
    fold = ks.RescaleFold(out_c, tables.p_mod, tables.fold_conv, tables.fold_inv)
    return ks.finish(acc, plan, tables.moddown, tables.p_inv, num_p=num_p, num_q=num_q, reduction=reduction,
                     fold=fold)


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
    names = set(getattr(native, "_TARGETS", {})) | set(getattr(native, "_OPTIONAL_TARGETS", {}))
    return [jax.export.DisabledSafetyCheck.custom_call(name) for name in sorted(names)]
