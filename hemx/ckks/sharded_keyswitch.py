"""Key switching on a limb-sharded mesh with hand-written collectives (``jax.shard_map``): "key-aligned owner
computes". Used on a context with a mesh (:class:`hemx.ckks.placement.MeshPlacement`, whose table cache builds
:class:`ShardedLevelTables`) for every key switch (relinearization in ``mul``, with or without the folded rescale,
``rotate``, ``conjugate``, ``switch_key``, hoisted ``rotate_many``) when the
mesh's ``"limbs"`` axis has ``D > 1`` devices and ``D`` divides the switching key's rows ``M = P + L`` (so the
key is limb-sharded by :func:`hemx.parallel.spec_for`); otherwise XLA's SPMD partitioner places the collectives
(the rule is :func:`uses_shard_map`).

Layouts (global row ids over the context's ``P + Q`` basis, special primes first):

* a key (``(dnum, 2, M, N)``) is split in contiguous blocks of ``c = M / D`` rows: device ``k`` holds rows
  ``R_k = [k c, (k + 1) c)``. The key never moves: device ``k`` computes the accumulator ``sum_d ext_d * key_d``
  for exactly the rows ``R_k`` at every level (rows at or beyond ``P + Q_l`` at a lower level are valid
  conversions to primes the ciphertext no longer has, computed and discarded);
* a ciphertext ``(..., 2, num_q, N)`` is in its standard layout: blocks of ``num_q / D`` rows where ``D``
  divides ``num_q``, else replicated along ``"limbs"`` (the placement rule of ``docs/parallel.md``).

Steps of one key switch of ``x`` (``(..., num_q, N)``, NTT domain), per device ``k``:

1. local INTT of its ``x`` rows;
2. ModUp exchange: the coefficient towers of the digits travel to every device (MP / OC: one ``all_gather`` of
   all ``num_q`` towers; DC: one exchange per digit just before its conversion, so only one digit is live);
3. per digit, the basis conversion from the digit's towers to the rows ``R_k`` (a conversion plan to *all* ``M``
   rows, dynamically sliced at ``k c``; a row of the digit itself takes the digit's own tower), the NTT of the
   block, the key product with the local key block, summed over the digits: the accumulator rows ``R_k``;
4. ModDown exchange: the ``P`` towers of the accumulator (with a folded rescale also the dropped top towers of
   ``acc + P d``), after a local INTT, travel from their owners to every device (collective permutes);
5. per device, the centered conversion ``P (+ dropped) -> R_k``, NTT, ``(acc - conv) * P^-1`` on its rows;
6. output exchange: the rows go from the key-aligned blocks to the ciphertext's standard layout (collective
   permutes of the rows whose owner differs; to every device when the output is replicated).

With the folded rescale (``mul(..., rescale=True)``, :class:`hemx.ckks.keyswitch.RescaleFold`) the addend ``d``
(the product's ``(d0, d1)``) goes from the input's layout to the key rows first (the rows whose owners differ),
``acc + P d`` is formed there, and step 4 also carries its dropped top towers: the same single rounding
division by ``P D`` as one device.

Every step is exact modular arithmetic on the same values as one device (the conversions are the same centered
conversions from the same source towers), so the results are bit-identical to an unsharded context.

A separate rescale (:func:`rescale`, ``Context.rescale`` on a context whose tables are
:class:`ShardedLevelTables`) is one exchange (:func:`rescale_routes`: the dropped rows of both polynomials to
every device without them, plus the kept rows whose owner differs between the input's and the output's standard
layouts), then per device the INTT of the dropped rows, the centered conversion to the device's output rows only
(the level's ``rescale`` plan sliced at them), NTT and ``(x - conv) * D^-1``: bit-identical to
:func:`hemx.ckks.keyswitch.divide_by_dropped` on one device.

Exchanges (:func:`routes`): for a source layout (the global rows each device holds) and a destination layout
(the rows each device wants), every wanted row is taken from the device itself if it has it, else from its
owner; the transfers are grouped by device offset ``j - k mod D`` and by the number of rows a pair moves into
collective permutes (each a partial permutation of the devices moving equal pieces, so nothing is padded); an
exchange in which every device wants every other device's whole block is one ``all_gather``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec

from hemx import parallel
from hemx.ckks import keyswitch as ks
from hemx.ckks.tables import LevelTables
from hemx.kernels import automorphism, modarith
from hemx.kernels import bconv as bconv_kernels
from hemx.kernels import ntt as ntt_kernels

LIMBS = parallel.LIMBS

#: Key-switching paths of a sharded context: "shard_map" (this module, where :func:`uses_shard_map` allows it),
#: "partitioner" (XLA's SPMD partitioner places the collectives), "auto" (= "shard_map" where allowed).
PATHS = ("auto", "shard_map", "partitioner")


# ------------------------------------------------------------------------------------------------ tables
@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """Static description of the sharded key switch (hashable: part of the jit cache key).

    Attributes:
        mesh: the ``jax.sharding.Mesh``; devices: ``D``, the size of its ``"limbs"`` axis;
        rows: ``M = P + L``, the key's rows; num_p: ``P``'s limb count.
    """

    mesh: Any
    devices: int
    rows: int
    num_p: int

    @property
    def block(self) -> int:
        """Key rows per device, ``c = M / D``."""
        return self.rows // self.devices


@dataclasses.dataclass(frozen=True)
class RowTables:
    """Conversion plans and known operands over *all* ``M`` rows of ``P + Q`` (sliced per device in a trace).

    Attributes:
        modup: per digit, the centered conversion from the digit's towers at this level to all ``M`` rows
            (rows of the digit itself hold another row's constants: they are replaced by the digit's own tower).
        moddown: centered conversion ``P -> `` all rows (``P`` rows: unused).
        fold: centered conversion ``P + dropped -> `` all rows (None at level 0).
        p_inv: ``P^-1 mod`` each ``Q`` row, ``(M, 1)`` (0 on ``P`` rows).
        fold_inv: ``(P D)^-1`` on the kept rows, ``(M, 1)`` (0 elsewhere; None at level 0).
        p_mod: ``P mod q_i`` on the ``Q`` rows, ``(M, 1)``.
    """

    modup: tuple
    moddown: bconv_kernels.BConvPlan
    p_inv: modarith.KnownOperand
    p_mod: modarith.KnownOperand
    fold: bconv_kernels.BConvPlan | None = None
    fold_inv: modarith.KnownOperand | None = None


jax.tree_util.register_dataclass(RowTables, data_fields=["modup", "moddown", "p_inv", "p_mod", "fold", "fold_inv"],
                                meta_fields=[])


@dataclasses.dataclass(frozen=True)
class ShardedLevelTables:
    """A level's :class:`LevelTables` (``base``; every attribute not found here is read from it) plus the
    :class:`RowTables` of the shard_map key switch and its static :class:`ShardSpec`. The evaluator takes the
    shard_map path exactly when its tables are of this type."""

    base: LevelTables
    rows: RowTables
    shard: ShardSpec

    def __getattr__(self, name):
        if name in ("base", "rows", "shard"):  # not yet set (during unpickling / construction)
            raise AttributeError(name)
        return getattr(self.base, name)


jax.tree_util.register_dataclass(ShardedLevelTables, data_fields=["base", "rows"], meta_fields=["shard"])


def uses_shard_map(mesh, num_rows: int) -> bool:
    """The rule: the shard_map key switch runs when the mesh's ``"limbs"`` axis has ``D > 1`` devices and ``D``
    divides the key's ``num_rows = P + L`` rows (the key is then limb-sharded; otherwise it is replicated and
    the partitioner path is kept)."""
    d = dict(zip(mesh.axis_names, mesh.devices.shape))[LIMBS]
    return d > 1 and num_rows % d == 0


def _known_rows(values: dict[int, int], basis) -> modarith.KnownOperand:
    """Known operand ``(M, 1)``: ``values[i] mod basis[i]`` on the rows listed, 0 on the others."""
    col = np.asarray(basis, np.int64).reshape(-1, 1)
    vals = np.array([[values.get(i, 0) % q] for i, q in enumerate(basis)], np.int64)
    return modarith.known_operand(vals, col)


def rows_plan(source, basis, *, reduction: str) -> bconv_kernels.BConvPlan:
    """The centered conversion ``source -> basis`` over every row of ``basis`` (host side).

    Rows of ``basis`` that are in ``source`` get the constants of another row (their outputs are meaningless;
    callers replace them by the source tower itself, which is what an exact conversion of a tower to its own
    modulus gives). Built from :func:`hemx.kernels.bconv.make_bconv_plan` to the other rows by repeating rows.
    """
    src = set(int(q) for q in source)
    others = [q for q in basis if int(q) not in src]
    plan = bconv_kernels.make_bconv_plan(list(source), others, reduction=reduction, centered=True)
    pos = {q: i for i, q in enumerate(others)}
    idx = np.array([pos.get(q, 0) for q in basis], np.int64)
    k = plan.num
    dense_idx = (idx[:, None] * k + np.arange(k)[None, :]).reshape(-1)
    take = lambda a: np.asarray(a)[idx]  # noqa: E731
    merge = dataclasses.replace(plan.merge, q=take(plan.merge.q), offset=take(plan.merge.offset),
                                mu=take(plan.merge.mu), sa=take(plan.merge.sa), sb=take(plan.merge.sb),
                                qinv_neg=take(plan.merge.qinv_neg))
    return dataclasses.replace(plan, dst=modarith.ModulusTable(*(take(f) for f in plan.dst)),
                               dense=np.ascontiguousarray(np.asarray(plan.dense)[dense_idx]), merge=merge,
                               qhat_mod_p=None, corr=None)


def build_row_tables(params, base: LevelTables, *, reduction: str) -> RowTables:
    """The :class:`RowTables` of ``base``'s level (host side; call outside any trace, then place them)."""
    num_q = base.num_q
    ps, qs = list(params.special_moduli), list(params.moduli)
    basis = ps + qs
    num_p = len(ps)
    modup = tuple(rows_plan(qs[lo:hi], basis, reduction=reduction) for lo, hi in base.digits)
    big_p = math.prod(ps)
    q_rows = {num_p + i: None for i in range(num_q)}
    fields = dict(modup=modup, moddown=rows_plan(ps, basis, reduction=reduction),
                  p_inv=_known_rows({r: pow(big_p, -1, basis[r]) for r in q_rows}, basis),
                  p_mod=_known_rows({r: big_p for r in q_rows}, basis))
    if base.drop:
        kept = num_q - base.drop
        big_d = math.prod(qs[kept:num_q])
        kept_rows = range(num_p, num_p + kept)
        fields.update(fold=rows_plan(ps + qs[kept:num_q], basis, reduction=reduction),
                      fold_inv=_known_rows({r: pow(big_p * big_d, -1, basis[r]) for r in kept_rows}, basis))
    return RowTables(**fields)


# ------------------------------------------------------------------------------------------------ exchanges
@dataclasses.dataclass(frozen=True)
class Routes:
    """A static exchange plan (:func:`routes`).

    Attributes:
        n_dst: rows of every device's destination buffer.
        local: int32 ``(D, n_dst)``: the local source row of each destination row, -1 where it comes from
            elsewhere (or from nowhere: zero).
        rounds: ``((perm, send, recv), ...)``: one collective permute each; ``perm`` the ``(source, target)``
            pairs, ``send`` int32 ``(D, w)`` the local rows a source sends, ``recv`` int32 ``(D, w)`` where a target
            puts them (``n_dst``: padding, dropped).
        gather: None, or int32 ``(n_dst,)``: the exchange is one tiled ``all_gather`` followed by this row
            selection (every device wants every other device's whole block).
        received_rows: rows received summed over devices (the volume, for the traffic model and tests).
    """

    n_dst: int
    local: np.ndarray
    rounds: tuple
    gather: np.ndarray | None
    received_rows: int


@functools.lru_cache(maxsize=1024)
def routes(src: tuple, dst: tuple) -> Routes:
    """Exchange plan from ``src`` (per device, the global row id of each local row; -1: no row) to ``dst`` (per
    device, the global row ids it wants, all of one length; a row nobody holds comes out zero). Static
    (host-side ints, cached)."""
    d = len(src)
    n_dst = len(dst[0])
    owner: dict[int, tuple[int, int]] = {}
    for k in range(d):
        for t, g in enumerate(src[k]):
            if g >= 0:
                owner.setdefault(g, (k, t))
    where = [{g: t for t, g in enumerate(src[k]) if g >= 0} for k in range(d)]
    local = np.full((d, n_dst), -1, np.int32)
    moves: dict[int, list[tuple[int, int, int, int]]] = {}  # offset -> [(k, j, src row, dst pos)]
    for j in range(d):
        for p, g in enumerate(dst[j]):
            if g in where[j]:
                local[j, p] = where[j][g]
            elif g in owner:
                k, t = owner[g]
                moves.setdefault((j - k) % d, []).append((k, j, t, p))
    received = sum(len(m) for m in moves.values())
    wanted = [set(x) for x in dst]
    whole = all(len(set(dst[j])) == len(dst[j]) for j in range(d))
    if (moves and all(dst[j] == dst[0] for j in range(d)) and whole
            and all(g >= 0 and g in wanted[0] for k in range(d) for g in src[k])
            and all(len(src[k]) == len(src[0]) for k in range(d))):
        flat = [g for k in range(d) for g in src[k]]
        if len(set(flat)) == len(flat):  # every block is wanted whole by every device: one all_gather
            pos = {g: i for i, g in enumerate(flat)}
            gather = np.array([pos.get(g, -1) for g in dst[0]], np.int32)
            if (gather >= 0).all():
                return Routes(n_dst, local, (), gather, (d - 1) * len(flat))
    rounds = []
    for off in sorted(moves):
        per_src: dict[int, list] = {}
        for k, j, t, p in moves[off]:
            per_src.setdefault(k, []).append((j, t, p))
        by_width: dict[int, list] = {}  # pairs moving the same number of rows share a permute: no padding
        for k, lst in sorted(per_src.items()):
            by_width.setdefault(len(lst), []).append((k, lst))
        for w, pairs in sorted(by_width.items()):
            send = np.zeros((d, w), np.int32)
            recv = np.full((d, w), n_dst, np.int32)
            perm = []
            for k, lst in pairs:
                j = lst[0][0]
                perm.append((k, j))
                for i, (_, t, p) in enumerate(lst):
                    send[k, i] = t
                    recv[j, i] = p
            rounds.append((tuple(perm), send, recv))
    return Routes(n_dst, local, tuple(rounds), None, received)


def exchange(x, r: Routes, k):
    """Run :class:`Routes` ``r`` inside ``shard_map`` on device ``k`` (``lax.axis_index``): ``x`` ``(..., c, N)``
    (the device's source rows) -> ``(..., r.n_dst, N)``."""
    if r.gather is not None:
        full = jax.lax.all_gather(x, LIMBS, axis=x.ndim - 2, tiled=True)
        return jnp.take(full, jnp.asarray(r.gather), axis=-2)
    idx = jnp.asarray(r.local)[k]  # (n_dst,)
    out = jnp.take(x, jnp.clip(idx, 0, x.shape[-2] - 1), axis=-2)
    out = jnp.where((idx >= 0)[:, None], out, jnp.zeros((), x.dtype))
    for perm, send, recv in r.rounds:
        piece = jnp.take(x, jnp.asarray(send)[k], axis=-2)
        got = jax.lax.ppermute(piece, LIMBS, perm)
        out = out.at[..., jnp.asarray(recv)[k], :].add(got, mode="drop")  # disjoint rows: an exact assembly
    return out


def std_layout(n: int, devices: int, offset: int) -> tuple:
    """Global rows per device of an ``n``-row ciphertext block starting at row ``offset`` in its standard
    layout: contiguous blocks where ``devices`` divides ``n``, else every row on every device."""
    if n % devices == 0:
        b = n // devices
        return tuple(tuple(range(offset + k * b, offset + (k + 1) * b)) for k in range(devices))
    return (tuple(range(offset, offset + n)),) * devices


def key_layout(spec: ShardSpec) -> tuple:
    c = spec.block
    return tuple(tuple(range(k * c, (k + 1) * c)) for k in range(spec.devices))


def _start(n: int, devices: int, offset: int, k):
    """First global row of device ``k``'s block in :func:`std_layout` (static where replicated)."""
    return offset + k * (n // devices) if n % devices == 0 else offset


def _plan_rows(plan, start, count: int):
    if isinstance(start, int):
        return ks.limb_plan(plan, start, start + count)
    return ntt_kernels._with_limb_tables(plan, lambda a: jax.lax.dynamic_slice_in_dim(a, start, count, 0), count)


def _rows(tree, start, count: int):
    """Rows ``[start, start + count)`` of a per-row table (ModulusTable / KnownOperand; ``start`` may be traced)."""
    if isinstance(start, int):
        return jax.tree_util.tree_map(lambda a: a[start : start + count], tree)
    return jax.tree_util.tree_map(lambda a: jax.lax.dynamic_slice_in_dim(a, start, count, 0), tree)


# ------------------------------------------------------------------------------------------------ the body
def _convert_block(coef, bp, start, count: int, own_lo: int | None = None):
    """Conversion of ``coef`` (the source towers, coefficients) to the ``count`` rows from global row ``start``;
    with ``own_lo`` (the global row of ``coef``'s first tower) rows of the source take its own towers."""
    op = bconv_kernels.bat_operand(bconv_kernels.scale_step(coef, bp), bp)
    return _rows_from_operand(op, coef, bp, start, count, own_lo)


def _rows_from_operand(op, coef, bp, start, count: int, own_lo: int | None):
    conv = bconv_kernels.matmul_step_bat_rows(op, bp, start, count)
    if own_lo is None:
        return conv
    rel = start + jnp.arange(count) - own_lo
    own = jnp.take(coef, jnp.clip(rel, 0, coef.shape[-2] - 1), axis=-2)
    return jnp.where(((rel >= 0) & (rel < coef.shape[-2]))[:, None], own, conv)


def _modup_block(coef_q, plan, rt, spec, digits, *, dataflow: str, k, gather_digit, key, tile):
    """The accumulator ``sum_d ext_d key_d`` over the device's key rows ``R_k``: ``(..., 2, c, N)``."""
    c, num_p = spec.block, spec.num_p
    s = k * c
    tab = _rows(plan.table, s, c)
    blk = _plan_rows(plan, s, c)
    if dataflow == "dc":  # digit by digit: exchange, convert, NTT, multiply, add
        acc = None
        for d, ((lo, hi), bp) in enumerate(zip(digits, rt.modup)):
            coef = gather_digit(lo, hi, acc)
            ext = ntt_kernels.ntt(_convert_block(coef, ks._after(acc, bp), s, c, num_p + lo), blk)
            prod = modarith.mul_barrett(ext[..., None, :, :], key[d], tab)
            acc = prod if acc is None else modarith.add_mod(acc, prod, tab.q)
        return acc
    coef_all = coef_q  # every Q tower, gathered once
    if dataflow == "mp":
        ext = jnp.stack([_convert_block(coef_all[..., lo:hi, :], bp, s, c, num_p + lo)
                         for (lo, hi), bp in zip(digits, rt.modup)], axis=-3)
        return modarith.mul_sum(ntt_kernels.ntt(ext, blk), key[: len(digits)], tab)
    # oc: the device's rows in tiles, one tile's conversions, NTT and key product at a time
    ops = [bconv_kernels.bat_operand(bconv_kernels.scale_step(coef_all[..., lo:hi, :], bp), bp)
           for (lo, hi), bp in zip(digits, rt.modup)]
    size = max(1, -(-num_p // 2)) if tile is None else int(tile)
    parts, token = [], None
    for a in range(0, c, size):
        t = min(size, c - a)
        vals = jnp.stack([_rows_from_operand(op, coef_all[..., lo:hi, :], ks._after(token, bp), s + a, t,
                                             num_p + lo)
                          for op, (lo, hi), bp in zip(ops, digits, rt.modup)], axis=-3)
        vals = ntt_kernels.ntt(vals, _plan_rows(plan, s + a, t))
        token = modarith.mul_sum(vals, key[: len(digits), :, a : a + t], _rows(plan.table, s + a, t))
        parts.append(token)
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-2)


def _moddown_block(acc, plan, rt, spec, *, k, num_q: int, kept: int, reduction: str, folded: bool = False):
    """ModDown of the accumulator rows ``R_k`` (``(..., 2, c, N)``, NTT domain; ``folded``: ``acc + P d``, divided
    by ``P D`` with the folded rescale): meaningful on the kept ``Q`` rows of the block."""
    c, num_p, d = spec.block, spec.num_p, spec.devices
    s = k * c
    tab = _rows(plan.table, s, c)
    blk = _plan_rows(plan, s, c)
    drop_ids = tuple(range(num_p)) + tuple(range(num_p + kept, num_p + num_q))
    coef = ntt_kernels.intt(acc, blk)
    dropped = exchange(coef, routes(key_layout(spec), (drop_ids,) * d), k)  # (..., 2, P [+ r], N): every device
    cp, inv = (rt.fold, rt.fold_inv) if folded else (rt.moddown, rt.p_inv)
    conv = ntt_kernels.ntt(_convert_block(dropped, cp, s, c), blk)
    return modarith.mul_known(modarith.sub_mod(acc, conv, tab.q), _rows(inv, s, c), tab, reduction)


def _local_keyswitch(x, key, addend, plan, rt, *, spec: ShardSpec, digits, num_q: int, kept: int,
                     dataflow: str, reduction: str, tile, index_maps=None):
    """The per-device program. ``x`` ``(..., b, N)`` the device's input rows; ``key`` ``(dnum, 2, c, N)``
    (with ``index_maps``: ``(R, dnum, 2, c, N)``); ``addend`` ``(..., 2, b, N)`` or None. Returns the device's
    rows of ``(..., 2, kept, N)`` in the standard layout (hoisted: ``(R, ..., 2, num_q, N)``)."""
    d, num_p = spec.devices, spec.num_p
    k = jax.lax.axis_index(LIMBS)
    std_src = std_layout(num_q, d, num_p)
    x0 = _start(num_q, d, num_p, k)
    b = len(std_src[0])
    coef = ntt_kernels.intt(x, _plan_rows(plan, x0, b))
    if dataflow == "dc" and index_maps is None:
        def gather_digit(lo, hi, token):
            src = coef if token is None else coef + (jnp.max(token[..., :1, :1]) >> 31)  # in order after token
            return exchange(src, routes(std_src, (tuple(range(num_p + lo, num_p + hi)),) * d), k)
        coef_q = None
    else:
        gather_digit = None
        coef_q = exchange(coef, routes(std_src, (tuple(range(num_p, num_p + num_q)),) * d), k)
    out_dst = std_layout(kept, d, num_p)
    out_routes = routes(key_layout(spec), out_dst)
    if index_maps is not None:  # hoisted rotations: one ModUp, R key products and ModDowns
        c = spec.block
        s = k * c
        tab = _rows(plan.table, s, c)
        ext = jnp.stack([_convert_block(coef_q[..., lo:hi, :], bp, s, c, num_p + lo)
                         for (lo, hi), bp in zip(digits, rt.modup)], axis=-3)
        ext = ntt_kernels.ntt(ext, _plan_rows(plan, s, c))
        outs = []
        for r in range(index_maps.shape[0]):
            acc = modarith.mul_sum(automorphism.apply_ntt_automorphism(ext, index_maps[r]), key[r, : len(digits)],
                                   tab)
            blk = _moddown_block(acc, plan, rt, spec, k=k, num_q=num_q, kept=num_q, reduction=reduction)
            outs.append(exchange(blk, out_routes, k))
        return jnp.stack(outs)
    acc = _modup_block(coef_q, plan, rt, spec, digits, dataflow=dataflow, k=k, gather_digit=gather_digit, key=key,
                       tile=tile)
    if addend is not None:  # folded rescale: acc + P d on the key rows (d moved from the input's layout)
        c = spec.block
        want = tuple(tuple(g if num_p <= g < num_p + num_q else -1 for g in blk) for blk in key_layout(spec))
        d_blk = exchange(addend, routes(std_src, want), k)  # (..., 2, c, N), zero outside Q_l
        tab = _rows(plan.table, k * c, c)
        acc = modarith.add_mod(acc, modarith.mul_known(d_blk, _rows(rt.p_mod, k * c, c), tab, reduction), tab.q)
    blk = _moddown_block(acc, plan, rt, spec, k=k, num_q=num_q, kept=kept, reduction=reduction,
                         folded=addend is not None)
    return exchange(blk, out_routes, k)


def _specs(lead: tuple, rows: int, mesh, extra: int = 0) -> PartitionSpec:
    """Spec of ``lead + (2,)*extra + (rows, N)`` by :func:`hemx.parallel.spec_for`."""
    return parallel.spec_for(lead + (2,) * extra + (rows, 1), mesh, batch_dims=len(lead))


def keyswitch(x_ntt, key, plan, tables: ShardedLevelTables, *, num_p: int, reduction: str, dataflow: str = "mp",
              oc_tile: int | None = None, fold: ks.RescaleFold | None = None):
    """:func:`hemx.ckks.keyswitch.keyswitch` on the mesh of ``tables.shard`` by ``jax.shard_map`` (module
    docstring). Same arguments and result: ``x_ntt`` ``(..., num_q, N)``, ``key`` ``(dnum, 2, M, N)`` ->
    ``(..., 2, num_q, N)``, or with ``fold`` ``(fold.addend + switched) / D`` over ``(..., 2, num_q - drop, N)``.
    Bit-identical to one device."""
    if dataflow not in ks.DATAFLOWS:
        return ks.keyswitch(x_ntt, key, plan, tables, num_p=num_p, reduction=reduction, dataflow=dataflow)
    key = ks.key_array(key, plan)
    spec = tables.shard
    mesh, num_q = spec.mesh, tables.num_q
    lead = tuple(x_ntt.shape[:-2])
    kept = num_q if fold is None else fold.kept()
    body = functools.partial(_local_keyswitch, spec=spec, digits=tuple(tables.digits), num_q=num_q, kept=kept,
                             dataflow=dataflow, reduction=reduction, tile=oc_tile)
    key_spec = PartitionSpec(None, None, LIMBS, None)
    x_spec = _specs(lead, num_q, mesh)
    out_spec = _specs(lead, kept, mesh, 1)
    if fold is None:
        fn = jax.shard_map(lambda x, kk, pl, rt: body(x, kk, None, pl, rt), mesh=mesh,
                           in_specs=(x_spec, key_spec, PartitionSpec(), PartitionSpec()), out_specs=out_spec,
                           check_vma=False)
        return fn(x_ntt, key, plan, tables.rows)
    fn = jax.shard_map(body, mesh=mesh, in_specs=(x_spec, key_spec, _specs(lead, num_q, mesh, 1), PartitionSpec(),
                                                  PartitionSpec()), out_specs=out_spec, check_vma=False)
    return fn(x_ntt, key, fold.addend, plan, tables.rows)


def rescale_routes(num_q: int, drop: int, devices: int, num_p: int) -> Routes:
    """The one exchange of a standalone rescale (:func:`rescale`): from the ``num_q``-row standard layout, every
    device gets the ``drop`` dropped top rows and the kept rows of its block in the ``num_q - drop``-row standard
    layout (destination: its output rows, then the dropped rows)."""
    kept = num_q - drop
    drop_ids = tuple(range(num_p + kept, num_p + num_q))
    dst = tuple(blk + drop_ids for blk in std_layout(kept, devices, num_p))
    return routes(std_layout(num_q, devices, num_p), dst)


def _local_rescale(x, plan, conv_plan, inv, *, devices: int, num_p: int, num_q: int, drop: int, reduction: str):
    """The per-device rescale: ``x`` ``(..., b, N)`` the device's rows of the input -> its rows of the output."""
    k = jax.lax.axis_index(LIMBS)
    kept = num_q - drop
    r = rescale_routes(num_q, drop, devices, num_p)
    out_n = r.n_dst - drop
    buf = exchange(x, r, k)  # (..., out_n + drop, N): the output rows, then the dropped rows
    s = _start(kept, devices, 0, k)  # the device's first output row among the kept rows (static if replicated)
    dropped = ntt_kernels.intt(buf[..., out_n:, :], ks.limb_plan(plan, num_p + kept, num_p + num_q))
    tab = _rows(plan.table, num_p + s, out_n)
    conv = ntt_kernels.ntt(_convert_block(dropped, conv_plan, s, out_n), _plan_rows(plan, num_p + s, out_n))
    return modarith.mul_known(modarith.sub_mod(buf[..., :out_n, :], conv, tab.q), _rows(inv, s, out_n), tab,
                              reduction)


def rescale(x, plan, tables: ShardedLevelTables, *, num_p: int, reduction: str):
    """:func:`hemx.ckks.evaluator.rescale` of a ciphertext batch ``(..., 2, num_q, N)`` on the mesh of
    ``tables.shard`` by ``jax.shard_map`` -> ``(..., 2, num_q - drop, N)``, input and output in their standard
    layouts. One exchange (:func:`rescale_routes`: the dropped rows of both polynomials to every device that
    lacks them, plus the kept rows whose owner changes between the two layouts), then locally the INTT of the
    dropped rows, the centered conversion to the device's output rows (the level's ``rescale`` plan sliced at
    them), NTT and ``(x - conv) * D^-1``: bit-identical to :func:`hemx.ckks.keyswitch.divide_by_dropped` on one
    device. Used where the key switch uses shard_map (the tables say so: :func:`uses_shard_map`)."""
    spec = tables.shard
    num_q, drop = tables.num_q, tables.drop
    lead = tuple(x.shape[:-3])
    body = functools.partial(_local_rescale, devices=spec.devices, num_p=num_p, num_q=num_q, drop=drop,
                             reduction=reduction)
    fn = jax.shard_map(body, mesh=spec.mesh,
                       in_specs=(_specs(lead, num_q, spec.mesh, 1), PartitionSpec(), PartitionSpec(), PartitionSpec()),
                       out_specs=_specs(lead, num_q - drop, spec.mesh, 1), check_vma=False)
    return fn(x, plan, tables.rescale, tables.d_inv)


def rotate_hoisted(ct, index_maps, keys, plan, tables: ShardedLevelTables, *, num_p: int, reduction: str):
    """:func:`hemx.ckks.evaluator.rotate_hoisted` with the key switches by ``jax.shard_map``: one ModUp of c1 (the
    MP exchange), then per Galois element the local key product, ModDown and output exchange. ``ct``
    ``(..., 2, num_q, N)``, ``keys`` ``(R, dnum, 2, M, N)`` -> ``(R, ..., 2, num_q, N)``. Bit-identical."""
    if isinstance(keys, (tuple, list)):
        keys = jnp.stack([ks.key_array(k, plan) for k in keys])
    spec = tables.shard
    mesh, num_q = spec.mesh, tables.num_q
    lead = tuple(ct.shape[:-3])
    body = functools.partial(_local_keyswitch, spec=spec, digits=tuple(tables.digits), num_q=num_q, kept=num_q,
                             dataflow="mp", reduction=reduction, tile=None)
    out_spec = PartitionSpec(None, *_specs(lead, num_q, mesh, 1))
    fn = jax.shard_map(lambda x, kk, im, pl, rt: body(x, kk, None, pl, rt, index_maps=im), mesh=mesh,
                       in_specs=(_specs(lead, num_q, mesh), PartitionSpec(None, None, None, LIMBS, None),
                                 PartitionSpec(), PartitionSpec(), PartitionSpec()), out_specs=out_spec,
                       check_vma=False)
    sw = fn(ct[..., 1, :, :], keys, index_maps, plan, tables.rows)
    q = ks.limb_table(plan, num_p, num_p + num_q).q
    outs = []
    for r in range(index_maps.shape[0]):
        c0 = automorphism.apply_ntt_automorphism(ct[..., 0, :, :], index_maps[r])
        outs.append(jnp.stack([modarith.add_mod(c0, sw[r, ..., 0, :, :], q), sw[r, ..., 1, :, :]], axis=-3))
    return jnp.stack(outs)
