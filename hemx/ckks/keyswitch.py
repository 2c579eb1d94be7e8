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
* ``oc`` Output-Centric: one output tower at a time (a ``lax.map`` over towers). For each tower ``t``
  of ``Q_l P`` and each digit, the digit's basis conversion to that tower only and a one-tower NTT (or, for
  the digit holding ``t``, the input itself), multiplied into the key row and accumulated in place; the P
  towers first, then each Q tower immediately followed by its own ModDown. The target-independent halves
  (INTT, step 1 and the BAT digit operands) are computed once.
"""

from __future__ import annotations

from functools import partial

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


def _one_limb_table(plan, limb) -> modarith.ModulusTable:
    return modarith.ModulusTable(*(jax.lax.dynamic_slice_in_dim(f, limb, 1, axis=0) for f in plan.table))


def keyswitch_oc(x_ntt, key, plan, modup_plans, moddown_plan, p_inv, digits, k, n, reduction, index_map=None):
    """Output-Centric: one output tower at a time (a loop over towers, so one tower's temporaries are live).

    For tower ``t`` of ``Q_l P`` and each digit: the digit's basis conversion to that tower only and a
    one-tower NTT, or, for the digit holding ``t``, the input itself (bypass); multiplied into the key row and
    accumulated in place. The P towers first; then each Q tower, immediately followed by its own ModDown.
    """
    x_coef = ntt_kernels.intt(x_ntt, limb_plan(plan, k, k + n))
    operands = [bconv_kernels.bat_operand(bconv_kernels.scale_step(x_coef[..., lo:hi, :], bp), bp)
                for (lo, hi), bp in zip(digits, modup_plans)]
    lead, size = x_ntt.shape[:-2], x_ntt.shape[-1]

    def tower_acc(t, own_digit):
        """Key product of tower ``t`` summed over the digits: ``(..., 2, N)``. ``own_digit`` (static) is the
        digit holding ``t`` (None for the P towers): its value is the input itself, no conversion."""
        tab = _one_limb_table(plan, t)
        one = ntt_kernels.select_limb_dynamic(plan, t)
        acc = jnp.zeros(lead + (2, size), jnp.uint32)
        for d, ((lo, hi), bp) in enumerate(zip(digits, modup_plans)):
            if d == own_digit:
                val = jax.lax.dynamic_index_in_dim(x_ntt, t - k, axis=-2, keepdims=True)
            else:
                target = jnp.where(t < k + lo, t, t - (hi - lo))  # index among the digit's conversion targets
                val = ntt_kernels.ntt(bconv_kernels.matmul_step_bat_one(operands[d], bp, target), one)
            val = _permute(val, index_map)  # (..., 1, N)
            # one slice of the key itself: indexing key[d] first would copy a whole digit of the key per tower
            keyrow = jax.lax.dynamic_slice(key, (d, 0, t, 0), (1, 2, 1, size))[0, :, 0, :]  # (2, N)
            acc = modarith.add_mod(acc, modarith.mul_barrett(val, keyrow, tab), tab.q)
        return acc

    def towers_last(rows):  # (towers, ..., 2, N) -> (..., 2, towers, N)
        return jnp.moveaxis(rows, 0, -2)

    p_acc = towers_last(jax.lax.map(lambda t: tower_acc(t, None), jnp.arange(k)))
    p_coef = ntt_kernels.intt(p_acc, limb_plan(plan, 0, k))
    p_operand = bconv_kernels.bat_operand(bconv_kernels.scale_step(p_coef, moddown_plan), moddown_plan)

    def q_tower(i, own_digit):
        t = k + i
        tab = _one_limb_table(plan, t)
        conv = bconv_kernels.matmul_step_bat_one(p_operand, moddown_plan, i)  # (..., 2, 1, N)
        conv = ntt_kernels.ntt(conv, ntt_kernels.select_limb_dynamic(plan, t))[..., 0, :]
        diff = modarith.sub_mod(tower_acc(t, own_digit), conv, tab.q)
        pinv = modarith.KnownOperand(*(jax.lax.dynamic_slice_in_dim(f, i, 1, axis=0) for f in p_inv))
        return modarith.mul_known(diff, pinv, tab, reduction)

    # the Q towers digit by digit, so the bypassed digit is known when tracing (no data-dependent branch)
    parts = [towers_last(jax.lax.map(partial(q_tower, own_digit=d), jnp.arange(lo, hi)))
             for d, (lo, hi) in enumerate(digits)]
    return jnp.concatenate(parts, axis=-2) if len(parts) > 1 else parts[0]


_SCHEDULES = {"mp": keyswitch_mp, "dc": keyswitch_dc, "oc": keyswitch_oc}


def keyswitch(x_ntt, key, plan, modup_plans, moddown_plan, p_inv, digits, num_special: int, num_q: int,
              reduction: str, dataflow: str = "mp", index_map=None):
    """Switch ``x`` (a polynomial multiplying the source key) to the key's target: ``(..., 2, n, N)``.

    ``index_map`` applies a Galois automorphism (NTT-domain gather) to the extended digits first: the
    key switch of a rotation, with the automorphism commuted past ModUp.
    """
    return _SCHEDULES[dataflow](x_ntt, key, plan, modup_plans, moddown_plan, p_inv, digits, num_special, num_q,
                                reduction, index_map)
