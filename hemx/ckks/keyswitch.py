"""Hybrid key switching on the ring kernels (the Max-Parallel order: each stage over all towers).

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
"""

from __future__ import annotations

import jax.numpy as jnp

from hemx.kernels import bconv as bconv_kernels
from hemx.kernels import modarith
from hemx.kernels import ntt as ntt_kernels


def limb_plan(plan, start: int, stop: int):
    """The context plan restricted to the limb range ``[start, stop)`` of the ``P + Q`` basis."""
    return ntt_kernels.select_limbs(plan, slice(start, stop))


def limb_table(plan, start: int, stop: int) -> modarith.ModulusTable:
    return modarith.ModulusTable(*(f[start:stop] for f in plan.table))


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
    exts = []
    for (lo, hi), bplan in zip(digits, modup_plans):
        conv = bconv_kernels.bconv(x_coef[..., lo:hi, :], bplan)  # (..., k + n - (hi - lo), N): P, Q_<lo, Q_>=hi
        parts = [ntt_kernels.ntt(conv[..., : k + lo, :], limb_plan(plan, 0, k + lo)), x_ntt[..., lo:hi, :]]
        if hi < n:
            parts.append(ntt_kernels.ntt(conv[..., k + lo :, :], limb_plan(plan, k + hi, k + n)))
        exts.append(jnp.concatenate(parts, axis=-2))
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


def keyswitch(x_ntt, key, plan, modup_plans, moddown_plan, p_inv, digits, num_special: int, num_q: int,
              reduction: str):
    """Switch ``x`` (a polynomial multiplying the source key) to the key's target: ``(..., 2, n, N)``."""
    ext = modup(x_ntt, plan, modup_plans, digits, num_special, num_q)
    acc = inner_product(ext, key, plan, num_special, num_q)
    return moddown(acc, plan, moddown_plan, p_inv, num_special, num_q, reduction)
