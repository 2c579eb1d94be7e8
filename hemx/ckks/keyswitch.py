"""Hybrid key switching on the ring kernels, in three dataflows with bit-identical results (CiFlow §IV).

Data layout: the extended basis of level l is ``[p_0 .. p_{num_p-1}, q_0 .. q_{num_q-1}]`` (special primes first), so
``Q_l``, ``P`` and ``Q_l P`` are all contiguous limb ranges of the context's ``P + Q`` ring and every table is
a slice. A switching key holds one ``(b_d, a_d)`` pair per digit over the full ``P + Q`` basis:
``b_d = -a_d s + e_d + P g_d s'`` with the gadget ``g_d = 1 mod q_i`` for the limbs of digit d and 0 for the
others. At level l the digits follow the *key's* decomposition, restricted to the limbs still present.

Steps (input: ``x`` in the NTT domain over ``Q_l``):
1. INTT to coefficients;
2. ModUp of each digit: basis conversion from the digit's limbs to ``P`` and the other limbs of ``Q_l``;
3. NTT of the converted limbs (the digit's own limbs are ``x`` itself);
4. inner product with the key over ``Q_l P``;
5. ModDown: ``(acc - Conv_{P -> Q_l}([acc]_P)) * P^-1 mod Q_l``.

Dataflows (the order in which towers go through those steps; every step is exact modular arithmetic, so the
three give identical ciphertexts):

* ``mp`` Max-Parallel: each step over all digits and towers before the next (largest working set: all
  ``D`` extended digits at once);
* ``dc`` Digit-Centric: one digit at a time through ModUp, NTT and the key product, adding into a running
  sum (each digit's conversion is made data-dependent on the sum so far, so the digits run in sequence);
* ``oc`` Output-Centric: one tile of output towers at a time (CiFlow's schedule with one tower per step when
  ``tile=1``; by default a tile is half a digit wide). For each tile of ``Q_l P`` and each digit, the
  digit's basis conversion to the tile's towers only and their NTT (or, for the digit holding the tile, the
  input itself), multiplied into the key rows and accumulated in place; the P tiles first, then each Q tile
  immediately followed by its own ModDown. The target-independent halves (INTT, step 1 and the BAT digit
  operands) are computed once.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from hemx.ckks.keys import KeyMaterial
from hemx.errors import ParameterError
from hemx.kernels import automorphism
from hemx.kernels import bconv as bconv_kernels
from hemx.kernels import modarith
from hemx.kernels import native
from hemx.kernels import ntt as ntt_kernels
from hemx.kernels import prng


def limb_plan(plan, start: int, stop: int):
    """The context plan restricted to the limb range ``[start, stop)`` of the ``P + Q`` basis."""
    return ntt_kernels.select_limbs(plan, slice(start, stop))


def limb_table(plan, start: int, stop: int) -> modarith.ModulusTable:
    return modarith.ModulusTable(*(f[start:stop] for f in plan.table))


DATAFLOWS = ("mp", "dc", "oc")


def _modup_digit(x_coef, x_ntt, plan, bplan, *, lo: int, hi: int, num_p: int, num_q: int):
    """One digit extended to ``Q_l P`` (NTT domain): ``(..., num_p + num_q, N)``; the digit's own limbs are ``x_ntt``."""
    conv = bconv_kernels.bconv(x_coef[..., lo:hi, :], bplan)  # (..., num_p + num_q - (hi - lo), N): P, Q_<lo, Q_>=hi
    parts = [ntt_kernels.ntt(conv[..., : num_p + lo, :], limb_plan(plan, 0, num_p + lo)), x_ntt[..., lo:hi, :]]
    if hi < num_q:
        parts.append(ntt_kernels.ntt(conv[..., num_p + lo :, :], limb_plan(plan, num_p + hi, num_p + num_q)))
    return jnp.concatenate(parts, axis=-2)


def _fusable(plan) -> bool:
    """Whether the fused native passes (:func:`hemx.kernels.native.modup` / ``divide_by_dropped``) can run ``plan``'s
    transforms: it has butterfly tables ("native" or "butterfly" plans), and the library here has the passes
    (``native.has_fused_keyswitch``; False where it is unavailable or disabled). They then run where the program
    is lowered for CPU (``native.on_cpu``); the JAX path everywhere else."""
    return plan.butterfly is not None and native.has_fused_keyswitch()


def fused_passes(plan) -> bool:
    """Public form of the check above: whether key switching on ``plan`` runs the fused native ModUp / ModDown
    passes on CPU (what :func:`hemx.circuits.lintrans` chooses its default hoisting by)."""
    return _fusable(plan)


def _modup_jax(x_ntt, plan, modup_plans, *, digits, num_p: int, num_q: int):
    x_coef = ntt_kernels.intt(x_ntt, limb_plan(plan, num_p, num_p + num_q))
    exts = [_modup_digit(x_coef, x_ntt, plan, bplan, lo=lo, hi=hi, num_p=num_p, num_q=num_q)
            for (lo, hi), bplan in zip(digits, modup_plans)]
    return jnp.stack(exts, axis=-3)


def modup(x_ntt, plan, modup_plans, *, digits, num_p: int, num_q: int, part: int | None = None, index_map=None):
    """Extended digits of ``x`` over ``Q_l P``: ``(..., D, num_p + num_q, N)`` in the NTT domain.

    Args:
        x_ntt: ``(..., num_q, N)`` over ``Q_l``; with ``part``, ``(..., P, num_q, N)`` of which
            ``x_ntt[..., part, :, :]`` is extended (a ciphertext's ``c1``).
        plan: the context's NTT plan over ``P + Q``.
        modup_plans: one basis-conversion plan per digit (digit limbs -> the other limbs of ``Q_l P``).
        digits: static ``((lo, hi), ...)`` limb ranges of the digits, clipped to ``num_q``.
        part: static part index, or None (``x_ntt`` is the data itself).
        index_map: an automorphism's ``(N,)`` map applied to the data first (a rotation's), or None.

    On CPU with the native library and a plan with butterfly tables this is one fused custom call
    (:func:`hemx.kernels.native.modup`, writing the digits in place, the part read in place and permuted as it is
    copied); elsewhere the JAX kernels after the slice and the automorphism. Bit-identical.
    """
    kw = dict(digits=tuple(digits), num_p=num_p, num_q=num_q)
    modup_plans = tuple(modup_plans)

    def jax_fn(x, pl, mps, imap):
        x = x if part is None else x[..., part, :, :]
        x = x if imap is None else automorphism.apply_ntt_automorphism(x, imap)
        return _modup_jax(x, pl, mps, **kw)

    if not _fusable(plan):
        return jax_fn(x_ntt, plan, modup_plans, index_map)
    return native.on_cpu(lambda x, pl, mps, imap: native.modup(x, pl, mps, digits=kw["digits"], num_p=num_p,
                                                               part=part, index_map=imap),
                         jax_fn, x_ntt, plan, modup_plans, index_map)


def as_material(key) -> KeyMaterial:
    """A kernel's key argument as :class:`~hemx.ckks.keys.KeyMaterial` (a bare ``(D, 2, M, N)`` array is a full
    key; a bare ``(D, 1, M, N)`` one, a compact key's data without its stream key, is refused)."""
    if isinstance(key, KeyMaterial):
        return key
    if len(key.shape) == 4 and key.shape[1] == 1:
        raise ParameterError("a compact switching key's data holds its b halves only: pass key.material (the data "
                             "and its stream key), not key.data")
    return KeyMaterial(key)


def key_rows(key, plan, *, digits: int, rows: int):
    """The key's pairs ``(b_d, a_d)`` for its first ``digits`` digits and ``rows`` rows, ``(digits, 2, rows, N)``:
    read from a full key; for a compact key its ``b_d`` and the uniform rows generated from its stream key (JAX, any
    backend; for the dataflows and paths that multiply key rows themselves)."""
    key = as_material(key)
    if key.stream is None:
        return key.data[:digits, :, :rows, :]
    q = limb_table(plan, 0, rows).q.reshape(-1)
    a = prng.uniform_rows(key.stream, q, digits=digits, n=key.data.shape[-1], xof=key.xof)
    return jnp.stack([key.data[:digits, 0, :rows, :], a], axis=1)


def key_array(key, plan):
    """The whole key as one ``(D, 2, M, N)`` array: a full key's data, or a compact key expanded (for the limb-sharded
    key switch, which places and slices key rows itself)."""
    key = as_material(key)
    if key.stream is None:
        return key.data
    return key_rows(key, plan, digits=key.digits, rows=key.rows)


def reads_keys_in_place() -> bool:
    """Whether key switching here runs the one-pass native key product (:func:`hemx.kernels.native.key_product`):
    keys read in place at any level, compact keys' halves generated, hoisted rotations' digits permuted on the fly.
    Callers then skip the workarounds for the older path (padding digits to a key's rows to avoid sliced copies)."""
    return native.has_seeded_keys()


def inner_product(ext, key, plan, *, num_p: int, num_q: int, index_map=None):
    """``sum_d x_d * (b_d, a_d)`` over ``Q_l P``: ``(..., D, m, N) x key -> (..., 2, m, N)``, ``x_d`` the digits ``ext``
    or, with ``index_map`` (an automorphism's ``(N,)`` map), the digits permuted by it (a hoisted rotation).

    ``key``: :class:`~hemx.ckks.keys.KeyMaterial` (or a full key's ``(D_k, 2, M, N)`` array) with at least the
    ``D`` digits and ``m = num_p + num_q`` rows of ``ext``: its leading digits and rows are read. On CPU with the
    native library this is one pass (:func:`hemx.kernels.native.key_product`): the key read in place, a compact
    key's uniform halves generated as it goes, the digits read through the map (nothing permuted or sliced is
    stored). Elsewhere the JAX kernels: the automorphism, the key rows (a compact key's expanded,
    :func:`key_rows`), the inner product. Bit-identical."""
    m = num_p + num_q
    table = limb_table(plan, 0, m)
    key = as_material(key)
    digits = ext.shape[-3]  # the digits present at this level (a lower level has fewer)

    def jax_fn(x, k, tab, imap):
        if imap is not None:
            x = automorphism.apply_ntt_automorphism(x, imap)
        rows = k.data[:digits, ..., :m, :] if k.stream is None else key_rows(k, plan, digits=digits, rows=m)
        return modarith.mul_sum(x, rows, tab)

    if not reads_keys_in_place():
        return jax_fn(ext, key, table, index_map)
    return native.on_cpu(lambda x, k, tab, imap: native.key_product(x, k.data, tab.q, stream=k.stream, index_map=imap,
                                                                    xof=k.xof),
                         jax_fn, ext, key, table, index_map)


def _ranges_plan(plan, ranges: tuple[tuple[int, int], ...]):
    """The plan restricted to the union of limb ranges (one range: a cheap slice; several: a gather)."""
    if len(ranges) == 1:
        return limb_plan(plan, *ranges[0])
    return ntt_kernels.select_limbs(plan, tuple(i for a, b in ranges for i in range(a, b)))


def _divide_jax(keep_ntt, drop_ntt, plan, conv_plan, inv, *, keep, ranges, reduction: str):
    coef = ntt_kernels.intt(drop_ntt, _ranges_plan(plan, ranges))
    conv = ntt_kernels.ntt(bconv_kernels.bconv(coef, conv_plan), limb_plan(plan, *keep))
    table = limb_table(plan, *keep)
    return modarith.mul_known(modarith.sub_mod(keep_ntt, conv, table.q), inv, table, reduction)


def _divide_native(x, plan, conv_plan, inv, *, keep_rows, drop_rows, keep, ranges, **addend):
    """:func:`divide_by_dropped` as one native call on rows of one array ``x`` ``(..., M, N)``; ``addend``: the
    kernel's optional addend (``addend``, ``addend_part``, ``index_map``: :func:`moddown`)."""
    return native.divide_by_dropped(x, limb_plan(plan, *keep), _ranges_plan(plan, ranges), conv_plan, inv,
                                    keep_rows=tuple(keep_rows), drop_rows=tuple(drop_rows), **addend)


def _drop_ranges(drop) -> tuple[tuple[int, int], ...]:
    return tuple(tuple(r) for r in drop) if isinstance(drop[0], tuple) else (tuple(drop),)


def divide_by_dropped(keep_ntt, drop_ntt, plan, conv_plan, inv, *, keep: tuple[int, int], drop, reduction: str):
    """``(x - Conv_{D->K}([x]_D)) * D^-1`` over the kept limbs: rounding division by the product ``D`` of the
    dropped limbs (NTT domain in and out). ModDown is this with ``D = P``; rescaling with ``D`` = the top
    primes of ``Q_l``; a product rescaled right after its relinearization with ``D = P`` and those primes
    (:class:`RescaleFold`). ``keep`` is a limb range of the ``P + Q`` plan, ``drop`` a range or a tuple of
    ranges (the dropped limbs in the order of ``drop_ntt``); ``conv_plan`` is the centered conversion
    ``D -> K`` (so the division rounds), ``inv`` the known operand ``D^-1 mod k_j``.

    Shapes: ``keep_ntt`` ``(..., |K|, N)``, ``drop_ntt`` ``(..., |D|, N)`` -> ``(..., |K|, N)``.

    On CPU with the native library and a plan with butterfly tables: one fused custom call
    (:func:`hemx.kernels.native.divide_by_dropped`) on ``[keep_ntt, drop_ntt]`` (XLA folds that concatenation
    when both are adjacent slices of one array, as in a rescale); elsewhere the JAX kernels. Bit-identical.
    """
    ranges = _drop_ranges(drop)
    jax_fn = lambda k, d, pl, cp, iv: _divide_jax(k, d, pl, cp, iv, keep=keep, ranges=ranges,  # noqa: E731
                                                  reduction=reduction)
    if not _fusable(plan):
        return jax_fn(keep_ntt, drop_ntt, plan, conv_plan, inv)
    nk, nd = keep_ntt.shape[-2], drop_ntt.shape[-2]

    def native_fn(k, d, pl, cp, iv):
        return _divide_native(jnp.concatenate([k, d], axis=-2), pl, cp, iv, keep_rows=range(nk),
                              drop_rows=range(nk, nk + nd), keep=keep, ranges=ranges)

    return native.on_cpu(native_fn, jax_fn, keep_ntt, drop_ntt, plan, conv_plan, inv)


class RescaleFold(NamedTuple):
    """A rescale folded into the key switch's ModDown (``Context.mul(..., rescale=True)``).

    The relinearized product ``d + ModDown(acc)`` followed by a rescale by the product ``D`` of the level's
    top primes is computed as one rounding division ``(acc + P d) / (P D)``: the key switch's accumulator
    over ``Q_l P`` plus ``P`` times the addend ``d`` (the product's ``(d0, d1)``) on the ``Q_l`` limbs, then a
    single centered conversion from ``P`` and ``D`` to the kept limbs. That is one INTT, one conversion and
    one NTT of the kept limbs instead of two of each (about a fifth of an HE-Mult+Rescale at N = 2^16). The
    result is the exactly rounded quotient up to the conversion's small error, like the two-step path, but
    not bit-identical to it (one rounding instead of two).

    Attributes (arrays are pytree leaves):
        addend: ``(..., 2, num_q, N)`` NTT-domain terms added to the switched pair.
        p_mod: known operand ``P mod q_i`` over ``Q_l``, ``(num_q, 1)``.
        conv: centered basis conversion ``P + D -> K`` (``K``: ``Q_l`` without its top ``drop`` primes).
        inv: known operand ``(P D)^-1 mod k_j``, ``(num_q - drop, 1)``.
    """

    addend: jax.Array
    p_mod: modarith.KnownOperand
    conv: bconv_kernels.BConvPlan
    inv: modarith.KnownOperand

    def kept(self) -> int:
        """Number of limbs left after the division (static: a table shape)."""
        return self.inv.value.shape[0]


def _fold_addend(fold: RescaleFold, plan, *, a: int, b: int, num_p: int, reduction: str):
    """``P * addend`` on the towers ``[a, b)`` of ``Q_l P`` (all ``Q`` towers, ``a >= num_p``)."""
    tab = limb_table(plan, a, b)
    pm = modarith.KnownOperand(*(f[a - num_p : b - num_p] for f in fold.p_mod))
    return modarith.mul_known(fold.addend[..., a - num_p : b - num_p, :], pm, tab, reduction)


def _finish_fold_jax(acc, fold, plan, *, num_p: int, num_q: int, reduction: str):
    kept = fold.kept()
    addend = _fold_addend(fold, plan, a=num_p, b=num_p + num_q, num_p=num_p, reduction=reduction)
    y = modarith.add_mod(acc[..., num_p:, :], addend, limb_table(plan, num_p, num_p + num_q).q)
    dropped = jnp.concatenate([acc[..., :num_p, :], y[..., kept:, :]], axis=-2)
    return _divide_jax(y[..., :kept, :], dropped, plan, fold.conv, fold.inv, keep=(num_p, num_p + kept),
                       ranges=((0, num_p), (num_p + kept, num_p + num_q)), reduction=reduction)


def _finish_fold_native(acc, fold, plan, *, num_p: int, num_q: int, reduction: str):
    """The folded division as one native call on ``[acc_P, acc_Q + P addend]`` (one XLA fusion writes it)."""
    kept, m = fold.kept(), num_p + num_q
    addend = _fold_addend(fold, plan, a=num_p, b=m, num_p=num_p, reduction=reduction)
    y = modarith.add_mod(acc[..., num_p:, :], addend, limb_table(plan, num_p, m).q)
    z = jnp.concatenate([acc[..., :num_p, :], y], axis=-2)
    return _divide_native(z, plan, fold.conv, fold.inv, keep_rows=range(num_p, num_p + kept),
                          drop_rows=tuple(range(num_p)) + tuple(range(num_p + kept, m)), keep=(num_p, num_p + kept),
                          ranges=((0, num_p), (num_p + kept, m)))


def finish(acc, plan, moddown_plan, p_inv, *, num_p: int, num_q: int, reduction: str,
           fold: RescaleFold | None = None):
    """The last step of a key switch on the full accumulator ``acc`` ``(..., 2, num_p + num_q, N)``: ModDown to
    ``(..., 2, num_q, N)``, or with ``fold`` the folded ModDown and rescale to ``(..., 2, num_q - drop, N)``."""
    if fold is None:
        return moddown(acc, plan, moddown_plan, p_inv, num_p=num_p, num_q=num_q, reduction=reduction)
    kw = dict(num_p=num_p, num_q=num_q, reduction=reduction)
    if not _fusable(plan):
        return _finish_fold_jax(acc, fold, plan, **kw)
    return native.on_cpu(lambda a, f, pl: _finish_fold_native(a, f, pl, **kw),
                         lambda a, f, pl: _finish_fold_jax(a, f, pl, **kw), acc, fold, plan)


def moddown(acc, plan, moddown_plan, p_inv, *, num_p: int, num_q: int, reduction: str, addend=None,
            addend_part: int = 0, index_map=None):
    """``(acc - Conv_{P->Q}([acc]_P)) * P^-1`` over ``Q_l``: ``(..., m, N) -> (..., num_q, N)`` (NTT domain).

    With ``addend`` ``(..., A, num_q, N)`` beside ``acc`` ``(..., S, m, N)``: the result's first part gets
    ``addend[..., addend_part, :, :]`` added mod ``q``, permuted by ``index_map`` ``(N,)`` where one is given (a
    rotation's ``c0 + ModDown(acc_0), ModDown(acc_1)`` with its automorphism of ``c0``).

    Native (CPU, library available, butterfly tables): one fused call on ``acc``'s rows, the addend read in place
    and added as the result is written, no sliced copies or stacking."""
    m = num_p + num_q
    kw = dict(keep=(num_p, m), ranges=((0, num_p),))
    if addend is None and index_map is not None:
        raise ParameterError("moddown: an index map permutes the addend; give one or neither")

    def jax_fn(a, pl, cp, iv, add, imap):
        out = _divide_jax(a[..., num_p:, :], a[..., :num_p, :], pl, cp, iv, reduction=reduction, **kw)
        if add is None:
            return out
        c0 = add[..., addend_part, :, :]
        c0 = c0 if imap is None else automorphism.apply_ntt_automorphism(c0, imap)
        first = modarith.add_mod(c0, out[..., 0, :, :], limb_table(pl, num_p, m).q)
        return jnp.concatenate([first[..., None, :, :], out[..., 1:, :, :]], axis=-3)

    def native_fn(a, pl, cp, iv, add, imap):
        return _divide_native(a, pl, cp, iv, keep_rows=range(num_p, m), drop_rows=range(num_p), **kw, addend=add,
                              addend_part=addend_part, index_map=imap)

    if not _fusable(plan):
        return jax_fn(acc, plan, moddown_plan, p_inv, addend, index_map)
    return native.on_cpu(native_fn, jax_fn, acc, plan, moddown_plan, p_inv, addend, index_map)


def _after(token, bplan):
    """``bplan`` with its BAT matrix made data-dependent on ``token`` (uint32 residues, all below 2^31), so
    XLA cannot start the conversion before ``token`` exists. This is how the DC and OC schedules run their
    steps in order: ``optimization_barrier`` does not order independent work on XLA:CPU, whose scheduler
    then hoists every conversion to the start and keeps all their results live."""
    if token is None:
        return bplan
    zero = (jnp.max(token[..., :1, :1]) >> 31).astype(bplan.dense.dtype)  # always 0, opaque to the compiler
    return dataclasses.replace(bplan, dense=bplan.dense + zero)


def keyswitch_mp(x_ntt, key, plan, modup_plans, moddown_plan, p_inv, *, digits, num_p, num_q, reduction, fold=None):
    """Max-Parallel: all extended digits at once, then the inner product, then ModDown."""
    ext = modup(x_ntt, plan, modup_plans, digits=digits, num_p=num_p, num_q=num_q)
    acc = inner_product(ext, key, plan, num_p=num_p, num_q=num_q)
    return finish(acc, plan, moddown_plan, p_inv, num_p=num_p, num_q=num_q, reduction=reduction, fold=fold)


def keyswitch_dc(x_ntt, key, plan, modup_plans, moddown_plan, p_inv, *, digits, num_p, num_q, reduction, fold=None):
    """Digit-Centric: digit by digit through ModUp, NTT and the key product into a running sum."""
    m = num_p + num_q
    table = limb_table(plan, 0, m)
    key = key_rows(key, plan, digits=len(digits), rows=m)
    x_coef = ntt_kernels.intt(x_ntt, limb_plan(plan, num_p, num_p + num_q))
    acc = None
    for d, ((lo, hi), bplan) in enumerate(zip(digits, modup_plans)):
        # the next digit starts only when this one is folded into the sum: one digit live at a time
        ext = _modup_digit(x_coef, x_ntt, plan, _after(acc, bplan), lo=lo, hi=hi, num_p=num_p, num_q=num_q)
        prod = modarith.mul_barrett(ext[..., None, :, :], key[d, :, :m], table)
        acc = prod if acc is None else modarith.add_mod(acc, prod, table.q)
    return finish(acc, plan, moddown_plan, p_inv, num_p=num_p, num_q=num_q, reduction=reduction, fold=fold)


def output_tiles(digits, num_p: int, tile: int | None, split: int | None = None
                 ) -> tuple[tuple[int, int, int | None], ...]:
    """Output towers of ``Q_l P`` grouped into tiles: ``((start, stop, own_digit), ...)`` in basis order.

    A tile never straddles the P block or a digit, so inside a tile every digit is either converted or (the
    digit holding the tile, ``own_digit``; None for P) bypassed. ``tile`` is the most towers per tile; None
    means half a digit (``ceil(num_p / 2)``), 1 gives CiFlow's one-tower-at-a-time schedule. Wider
    tiles mean fewer, larger kernels (faster on CPU, quicker to compile) and a larger working set. ``split``
    is a tower index no tile straddles either (a folded rescale drops the towers from there on).
    """
    num_p = num_p
    size = max(1, -(-num_p // 2)) if tile is None else int(tile)
    if size < 1:
        raise ParameterError(f"output-centric tile must hold at least one tower, got {tile}")
    groups = [(0, num_p, None)] + [(num_p + lo, num_p + hi, d) for d, (lo, hi) in enumerate(digits)]
    if split is not None:
        groups = [(a, b, d) for start, stop, d in groups
                  for a, b in ((start, min(stop, split)), (max(start, split), stop)) if a < b]
    return tuple((a, min(a + size, stop), own) for start, stop, own in groups for a in range(start, stop, size))


def keyswitch_oc(x_ntt, key, plan, modup_plans, moddown_plan, p_inv, *, digits, num_p, num_q, reduction, tile=None,
                 fold=None):
    """Output-Centric: one tile of output towers at a time (``tile`` towers; see :func:`output_tiles`).

    For each tile of ``Q_l P`` and each digit: the digit's basis conversion to the tile's towers only and
    their NTT, or, for the digit holding the tile, the input itself (bypass); multiplied into the key rows and
    accumulated in place. The P tiles first (their sum is ModDown's input; with a folded rescale, then the
    tiles of the dropped top primes, plus ``P`` times the addend); then each kept Q tile, immediately
    followed by its own ModDown. The tiles run in order, so one tile's temporaries are live at a time; the
    target-independent halves (INTT, the BAT digit operands) are computed once.
    """
    kept = num_q if fold is None else fold.kept()
    conv_plan, inv = (moddown_plan, p_inv) if fold is None else (fold.conv, fold.inv)
    key = key_rows(key, plan, digits=len(digits), rows=num_p + num_q)
    x_coef = ntt_kernels.intt(x_ntt, limb_plan(plan, num_p, num_p + num_q))
    operands = [bconv_kernels.bat_operand(bconv_kernels.scale_step(x_coef[..., lo:hi, :], bp), bp)
                for (lo, hi), bp in zip(digits, modup_plans)]
    tiles = output_tiles(digits, num_p, tile, split=num_p + kept)
    dropped_tiles = [t for t in tiles if t[2] is None or t[0] >= num_p + kept]  # P, then the rescaled-away primes
    kept_tiles = [t for t in tiles if t[2] is not None and t[0] < num_p + kept]

    def key_product(a, b, own, token, down=None):
        """Towers ``[a, b)`` of the key product summed over the digits: ``(..., 2, b - a, N)``.

        The converted digits (and ``down``, ModDown's conversion of a Q tile, ``(..., 2, T, N)``) are stacked
        so one NTT call transforms them all: small NTTs run well below the per-limb rate of a wide one on CPU.
        Returns the product and the transformed ``down`` (None without it).
        """
        tab = limb_table(plan, a, b)
        conv = []
        for d, ((lo, hi), bp) in enumerate(zip(digits, modup_plans)):
            if d != own:
                first = a if a < num_p + lo else a - (hi - lo)  # the tile's index among the digit's targets
                conv.append(bconv_kernels.matmul_step_bat_rows(operands[d], _after(token, bp), first, b - a))
        parts = conv + ([] if down is None else [down[..., 0, :, :], down[..., 1, :, :]])
        if parts:  # (one digit and no ModDown part: nothing to transform)
            vals = ntt_kernels.ntt(jnp.stack(parts, axis=-3), limb_plan(plan, a, b))  # (..., D' [+ 2], T, N)
        acc, j = None, 0
        for d in range(len(digits)):
            if d == own:  # the digit holding the tile: the input itself
                val = x_ntt[..., a - num_p : b - num_p, :]
            else:
                val, j = vals[..., j, :, :], j + 1
            prod = modarith.mul_barrett(val[..., None, :, :], key[d, :, a:b], tab)
            acc = prod if acc is None else modarith.add_mod(acc, prod, tab.q)
        if fold is not None and a >= num_p:  # a Q tile of a folded rescale: plus P * addend
            acc = modarith.add_mod(acc, _fold_addend(fold, plan, a=a, b=b, num_p=num_p, reduction=reduction), tab.q)
        return acc, (None if down is None else vals[..., len(conv) :, :, :])

    # Each tile's work is made data-dependent on the previous tile's result (``token``), so the tiles run in
    # order and one tile's temporaries are live at a time.
    parts, token = [], None
    for a, b, own in dropped_tiles:
        token, _ = key_product(a, b, own, token)
        parts.append(token)
    ranges = ((0, num_p),) if kept == num_q else ((0, num_p), (num_p + kept, num_p + num_q))
    d_coef = ntt_kernels.intt(jnp.concatenate(parts, axis=-2), _ranges_plan(plan, ranges))
    d_operand = bconv_kernels.bat_operand(bconv_kernels.scale_step(d_coef, conv_plan), conv_plan)
    out = jnp.zeros(x_ntt.shape[:-2] + (2, kept, x_ntt.shape[-1]), jnp.uint32)  # filled tile by tile, in place
    for a, b, own in kept_tiles:
        down = bconv_kernels.matmul_step_bat_rows(d_operand, _after(token, conv_plan), a - num_p, b - a)
        acc, down = key_product(a, b, own, token, down)  # down: (..., 2, T, N), NTT domain
        tab = limb_table(plan, a, b)
        inv_t = modarith.KnownOperand(*(f[a - num_p : b - num_p] for f in inv))
        token = modarith.mul_known(modarith.sub_mod(acc, down, tab.q), inv_t, tab, reduction)
        out = jax.lax.dynamic_update_slice_in_dim(out, token, a - num_p, axis=-2)
    return out


_SCHEDULES = {"mp": keyswitch_mp, "dc": keyswitch_dc, "oc": keyswitch_oc}


def keyswitch(x_ntt, key, plan, tables, *, num_p: int, reduction: str, dataflow: str = "mp",
              oc_tile: int | None = None, fold: RescaleFold | None = None):
    """Switch ``x`` (a polynomial multiplying the source key) to the key's target: ``(..., 2, num_q, N)``.

    Args:
        x_ntt: ``(..., num_q, N)`` over ``Q_l`` (NTT domain).
        key: the switching key's :class:`~hemx.ckks.keys.KeyMaterial` (or a full key's ``(D, 2, num_p + L, N)``
            array), with at least this level's digits and rows.
        plan: the context's NTT plan over ``P + Q``.
        tables: the level's :class:`hemx.ckks.tables.LevelTables` (digits, ``num_q``, ModUp/ModDown plans).
        num_p: number of special (P) limbs; reduction: known-operand reduction; dataflow: "mp", "dc", "oc".

    With ``fold`` (:class:`RescaleFold`) the result is ``(fold.addend + switched) / D`` rounded, over the
    ``num_q - drop`` kept limbs: a relinearization and the rescale after it in one ModDown.

    A rotation applies its Galois automorphism to the ciphertext first (a permutation of the NTT slots of
    ``num_q`` limbs; it commutes exactly with the centered ModUp), then switches ``c1``; hoisted rotations
    (``Context.rotate_many``) permute the extended digits instead, after one shared ModUp.
    """
    extra = {"tile": oc_tile} if dataflow == "oc" else {}
    if dataflow not in _SCHEDULES:
        raise ParameterError(f"unknown key-switching dataflow {dataflow!r}; choose one of {DATAFLOWS}")
    return _SCHEDULES[dataflow](x_ntt, key, plan, tables.modup, tables.moddown, tables.p_inv, digits=tables.digits,
                                num_p=num_p, num_q=tables.num_q, reduction=reduction, fold=fold, **extra)
