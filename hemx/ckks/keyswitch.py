"""Hybrid key switching on the ring kernels, in three dataflows with bit-identical results (CiFlow §IV).

Data layout: the extended basis of level l is ``[p_0 .. p_{k-1}, q_0 .. q_{n-1}]`` (special primes first), so
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
  sum (an optimization barrier chains the digits so they run in sequence);
* ``oc`` Output-Centric: one output tower (or a tile of ``oc_tile`` towers) at a time. For each tower ``t``
  of ``Q_l P`` and each digit, the digit's basis conversion to that tower only and a one-tower NTT (or, for
  the digit holding ``t``, the input itself), multiplied into the key row and accumulated in place; the P
  towers first, then each Q tower immediately followed by its own ModDown. The target-independent halves
  (INTT, step 1 and the BAT digit operands) are computed once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from hemx.kernels import bconv as bconv_kernels
from hemx.kernels import modarith
from hemx.kernels import ntt as ntt_kernels


def limb_plan(plan, start: int, stop: int):
    """The context plan restricted to the limb range ``[start, stop)`` of the ``P + Q`` basis."""
    return ntt_kernels.select_limbs(plan, slice(start, stop))


def limb_table(plan, start: int, stop: int) -> modarith.ModulusTable:
    return modarith.ModulusTable(*(f[start:stop] for f in plan.table))


DATAFLOWS = ("mp", "dc", "oc")


def _modup_digit(x_coef, x_ntt, plan, bplan, lo: int, hi: int, k: int, n: int):
    """One digit extended to ``Q_l P`` (NTT domain): ``(..., k + n, N)``; the digit's own limbs are ``x_ntt``."""
    conv = bconv_kernels.bconv(x_coef[..., lo:hi, :], bplan)  # (..., k + n - (hi - lo), N): P, Q_<lo, Q_>=hi
    parts = [ntt_kernels.ntt(conv[..., : k + lo, :], limb_plan(plan, 0, k + lo)), x_ntt[..., lo:hi, :]]
    if hi < n:
        parts.append(ntt_kernels.ntt(conv[..., k + lo :, :], limb_plan(plan, k + hi, k + n)))
    return jnp.concatenate(parts, axis=-2)


def modup(x_ntt, plan, modup_plans, digits, num_special: int, num_q: int):
    """Extended digits of ``x`` over ``Q_l P``: ``(..., D, k + n, N)`` in the NTT domain.

    Args:
        x_ntt: ``(..., n, N)`` over ``Q_l`` (``n = num_q``).
        plan: the context's NTT plan over ``P + Q``.
        modup_plans: one basis-conversion plan per digit (digit limbs -> the other limbs of ``Q_l P``).
        digits: static ``((lo, hi), ...)`` limb ranges of the digits, clipped to ``n``.
    """
    k, n = num_special, num_q
    x_coef = ntt_kernels.intt(x_ntt, limb_plan(plan, k, k + n))
    exts = [_modup_digit(x_coef, x_ntt, plan, bplan, lo, hi, k, n) for (lo, hi), bplan in zip(digits, modup_plans)]
    return jnp.stack(exts, axis=-3)


def inner_product(ext, key, plan, num_special: int, num_q: int):
    """``sum_d ext_d * (b_d, a_d)`` over ``Q_l P``: ``(..., D, m, N) x (D, 2, M, N) -> (..., 2, m, N)``."""
    m = num_special + num_q
    table = limb_table(plan, 0, m)
    key = key[..., :m, :]
    acc = None
    for d in range(ext.shape[-3]):
        prod = modarith.mul_barrett(ext[..., d, None, :, :], key[d], table).astype(jnp.uint64)
        acc = prod if acc is None else acc + prod
    return modarith.barrett_reduce(acc, table.q, table.barrett_mu, table.barrett_sa, table.barrett_sb)


def moddown(acc, plan, moddown_plan, p_inv, num_special: int, num_q: int, reduction: str):
    """``(acc - Conv_{P->Q}([acc]_P)) * P^-1`` over ``Q_l``: ``(..., m, N) -> (..., n, N)`` (NTT domain)."""
    k, n = num_special, num_q
    p_coef = ntt_kernels.intt(acc[..., :k, :], limb_plan(plan, 0, k))
    conv = bconv_kernels.bconv(p_coef, moddown_plan)
    conv_ntt = ntt_kernels.ntt(conv, limb_plan(plan, k, k + n))
    table = limb_table(plan, k, k + n)
    diff = modarith.sub_mod(acc[..., k:, :], conv_ntt, table.q)
    return modarith.mul_known(diff, p_inv, table, reduction)


def _permute(x, index_map):
    return x if index_map is None else jnp.take(x, index_map, axis=-1)


def keyswitch_mp(x_ntt, key, plan, modup_plans, moddown_plan, p_inv, digits, k, n, reduction, index_map=None):
    """Max-Parallel: all extended digits at once, then the inner product, then ModDown."""
    ext = _permute(modup(x_ntt, plan, modup_plans, digits, k, n), index_map)
    acc = inner_product(ext, key, plan, k, n)
    return moddown(acc, plan, moddown_plan, p_inv, k, n, reduction)


def keyswitch_dc(x_ntt, key, plan, modup_plans, moddown_plan, p_inv, digits, k, n, reduction, index_map=None):
    """Digit-Centric: digit by digit through ModUp, NTT and the key product into a running sum."""
    m = k + n
    table = limb_table(plan, 0, m)
    x_coef = ntt_kernels.intt(x_ntt, limb_plan(plan, k, k + n))
    acc = None
    for d, ((lo, hi), bplan) in enumerate(zip(digits, modup_plans)):
        ext = _permute(_modup_digit(x_coef, x_ntt, plan, bplan, lo, hi, k, n), index_map)
        prod = modarith.mul_barrett(ext[..., None, :, :], key[d, :, :m], table)
        acc = prod if acc is None else modarith.add_mod(acc, prod, table.q)
        # the next digit may start only when this one is folded into the sum: one digit live at a time
        acc, x_coef = jax.lax.optimization_barrier((acc, x_coef))
    return moddown(acc, plan, moddown_plan, p_inv, k, n, reduction)


def _ranges_outside(t0: int, t1: int, lo: int, hi: int) -> list[tuple[int, int]]:
    """Parts of the tower range ``[t0, t1)`` outside ``[lo, hi)`` (static ints)."""
    out = []
    if t0 < min(t1, lo):
        out.append((t0, min(t1, lo)))
    if max(t0, hi) < t1:
        out.append((max(t0, hi), t1))
    return out


def _tiles(start: int, stop: int, tile: int) -> list[tuple[int, int]]:
    return [(t, min(t + tile, stop)) for t in range(start, stop, tile)]


def keyswitch_oc(x_ntt, key, plan, modup_plans, moddown_plan, p_inv, digits, k, n, reduction, index_map=None,
                 tile: int = 1):
    """Output-Centric: output towers one tile at a time (``tile`` towers, 1 = one tower as in CiFlow).

    The schedule is static: for tile ``[t0, t1)`` of ``Q_l P`` and each digit, only the towers outside the
    digit are converted (BAT rows of those targets) and transformed; the digit's own towers are the input
    itself. Key products accumulate in place. The P tiles come first; then each Q tile is followed at once
    by its ModDown. An optimization barrier chains the tiles so one tile's temporaries are live at a time.
    """
    m = k + n
    x_coef = ntt_kernels.intt(x_ntt, limb_plan(plan, k, k + n))
    operands = [bconv_kernels.bat_operand(bconv_kernels.scale_step(x_coef[..., lo:hi, :], bp), bp)
                for (lo, hi), bp in zip(digits, modup_plans)]
    # the plan travels through the barrier chain too, so each tile slices its tables when it runs
    carry = (x_ntt, operands, plan)

    def tile_acc(t0, t1, carry):
        """Key products of towers ``[t0, t1)`` summed over the digits: ``(..., 2, t1 - t0, N)``."""
        xin, ops, plan = carry
        tab = limb_table(plan, t0, t1)
        acc = None
        for d, ((lo, hi), bp) in enumerate(zip(digits, modup_plans)):
            pieces = []
            own = (max(t0, k + lo), min(t1, k + hi))
            for a, b in sorted(_ranges_outside(t0, t1, k + lo, k + hi) + ([own] if own[0] < own[1] else [])):
                if (a, b) == own:
                    pieces.append(xin[..., a - k : b - k, :])
                    continue
                ta, tb = (a, b) if b <= k + lo else (a - (hi - lo), b - (hi - lo))  # target rows in bp
                conv = bconv_kernels.matmul_step_bat_rows(ops[d], bp, ta, tb)
                pieces.append(ntt_kernels.ntt(conv, limb_plan(plan, a, b)))
            val = _permute(jnp.concatenate(pieces, axis=-2) if len(pieces) > 1 else pieces[0], index_map)
            # b and a halves sliced separately: each a contiguous block of the key (a strided slice of both
            # makes XLA copy the whole key)
            prod = jnp.stack([modarith.mul_barrett(val, key[d, j, t0:t1], tab) for j in (0, 1)], axis=-3)
            acc = prod if acc is None else modarith.add_mod(acc, prod, tab.q)
        return acc

    tile = max(1, int(tile))
    p_parts = []
    for t0, t1 in _tiles(0, k, tile):
        p_parts.append(tile_acc(t0, t1, carry))
        p_parts[-1], carry = jax.lax.optimization_barrier((p_parts[-1], carry))
    p_acc = jnp.concatenate(p_parts, axis=-2) if len(p_parts) > 1 else p_parts[0]
    p_coef = ntt_kernels.intt(p_acc, limb_plan(plan, 0, k))
    p_operand = bconv_kernels.bat_operand(bconv_kernels.scale_step(p_coef, moddown_plan), moddown_plan)
    outs = []
    for t0, t1 in _tiles(k, m, tile):
        acc = tile_acc(t0, t1, carry)
        tplan = carry[2]
        conv = bconv_kernels.matmul_step_bat_rows(p_operand, moddown_plan, t0 - k, t1 - k)  # (..., 2, T, N)
        conv = ntt_kernels.ntt(conv, limb_plan(tplan, t0, t1))
        tab = limb_table(tplan, t0, t1)
        diff = modarith.sub_mod(acc, conv, tab.q)
        pinv = modarith.KnownOperand(*(f[t0 - k : t1 - k] for f in p_inv))
        outs.append(modarith.mul_known(diff, pinv, tab, reduction))
        outs[-1], carry, p_operand = jax.lax.optimization_barrier((outs[-1], carry, p_operand))
    return jnp.concatenate(outs, axis=-2) if len(outs) > 1 else outs[0]


_SCHEDULES = {"mp": keyswitch_mp, "dc": keyswitch_dc, "oc": keyswitch_oc}


def keyswitch(x_ntt, key, plan, modup_plans, moddown_plan, p_inv, digits, num_special: int, num_q: int,
              reduction: str, dataflow: str = "mp", index_map=None, oc_tile: int = 1):
    """Switch ``x`` (a polynomial multiplying the source key) to the key's target: ``(..., 2, n, N)``.

    ``index_map`` applies a Galois automorphism (NTT-domain gather) to the extended digits first: the
    key switch of a rotation, with the automorphism commuted past ModUp.
    """
    fn = _SCHEDULES[dataflow]
    extra = {"tile": oc_tile} if dataflow == "oc" else {}
    return fn(x_ntt, key, plan, modup_plans, moddown_plan, p_inv, digits, num_special, num_q, reduction, index_map,
              **extra)
