"""Key generation: the secret key and its public, relinearization and Galois (rotation, conjugation) keys.

Functions of a :class:`hemx.ckks.context.Context` (its parameters, ring, sampler and tables); the context's
``keygen`` method is the front users call.
"""

from __future__ import annotations

import math
from typing import Iterable

import jax.numpy as jnp
import numpy as np

from hemx.ckks import encoder, evaluator
from hemx.ckks.keys import KeySet, PublicKey, SecretKey, SwitchingKey, new_id
from hemx.ckks.sampling import expand_seed
from hemx.ckks.validation import check_int
from hemx.errors import ParameterError
from hemx.kernels import automorphism

def rotation_steps(rotations: Iterable[int] | str, slots: int) -> list[int]:
    """The steps of ``keygen(rotations=...)``: a list, or "power_of_two" (1, 2, 4, ... < slots)."""
    if isinstance(rotations, str):
        if rotations != "power_of_two":
            raise ParameterError("rotations must be a list of steps or 'power_of_two'")
        return [1 << i for i in range(max(slots - 1, 0).bit_length())]
    if isinstance(rotations, bytes) or not isinstance(rotations, Iterable):
        raise ParameterError(f"rotations must be a list of integer steps or 'power_of_two', got {rotations!r}")
    return [check_int("a rotation step", r) for r in rotations]


def generate_keys(ctx, rotations: Iterable[int] | str = (), *, conjugation: bool = False,
                  relin: bool = True, galois_elements: Iterable[int] = (),
                  encapsulation_weight: int | None = None) -> KeySet:
    """Secret key ``s`` (ternary), public key over Q, and the requested switching keys (see ``Context.keygen``)."""
    p, smp = ctx.params, ctx.sampler
    num_p, num_q = ctx.num_p, p.num_limbs
    key_id = new_id()
    s = smp.ternary((p.n,), p.hamming_weight)
    s_ntt = ctx.ring.ntt(encoder.residues(s.astype(np.int64), ctx.basis))
    secret = SecretKey(s, s_ntt, ctx.id, key_id)
    a = jnp.asarray(smp.uniform(p.moduli, (num_q, p.n)))
    e = ctx.to_ntt_q(smp.gaussian((p.n,), p.sigma), p.max_level)
    b = evaluator.sub(e, evaluator.mul_elementwise(a, s_ntt[num_p:], ctx.plan, num_p=num_p, num_q=num_q), ctx.plan,
                      num_p=num_p, num_q=num_q)
    public = PublicKey(jnp.stack([b, a]), ctx.id, key_id)
    relin_key = None
    if relin:
        s2 = evaluator.mul_elementwise(s_ntt, s_ntt, ctx.plan, num_p=0, num_q=num_p + num_q)
        relin_key = switching_key(ctx, s_ntt, s2, kind="relin", galois=None, key_id=key_id)
    elements = {automorphism.galois_element(p.n, r % ctx.slots) for r in rotation_steps(rotations, ctx.slots)
                if r % ctx.slots}
    if conjugation:
        elements.add(automorphism.conjugation_element(p.n))
    for g in galois_elements:  # raw automorphisms X -> X^g (e.g. full-slot rotations of a sparse context)
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or int(g) % 2 == 0 or not 1 < g < 2 * p.n:
            raise ParameterError(f"a Galois element must be an odd integer in (1, 2N = {2 * p.n}), got {g!r}")
        elements.add(int(g))
    galois = {}
    for g in sorted(elements):
        s_g = automorphism.apply_ntt_automorphism(s_ntt, ctx.tables.index_map(g))
        galois[g] = switching_key(ctx, s_ntt, s_g, kind="galois", galois=g, key_id=key_id)
    switching = {}
    if encapsulation_weight is not None:
        # an ephemeral sparse secret s' and the keys s -> s' and s' -> s (bootstrapping switches to s' just before
        # ModRaise, so the overflow q0 I stays small, and back right after it); s' itself is discarded
        sparse = smp.ternary((p.n,), int(encapsulation_weight))
        sparse_ntt = ctx.ring.ntt(encoder.residues(sparse.astype(np.int64), ctx.basis))
        switching["to_sparse"] = switching_key(ctx, sparse_ntt, s_ntt, kind="to_sparse", galois=None, key_id=key_id)
        switching["from_sparse"] = switching_key(ctx, s_ntt, sparse_ntt, kind="from_sparse", galois=None,
                                                 key_id=key_id)
    return KeySet(public=public, relin=relin_key, galois=galois, context_id=ctx.id, key_id=key_id,
                  switching=switching, secret=secret)


def switching_key(ctx, s_ntt, s_src, *, kind: str, galois: int | None, key_id: int) -> SwitchingKey:
    """Hybrid key from ``s_src`` to ``s``: per digit ``b_d = -a_d s + e_d + P g_d s_src`` over ``P + Q``,
    uint32 ``(D, 2, num_p + L, N)``. The uniform ``a_d`` are expanded from a fresh 32-byte seed, kept on the key
    (serialization stores ``b_d`` and the seed)."""
    p, smp = ctx.params, ctx.sampler
    digits = p.digits()
    num_p, m = ctx.num_p, ctx.num_p + p.num_limbs
    seed = smp.seed()
    a = jnp.asarray(uniform_half(seed, ctx.basis, p.n, len(digits)))
    e = ctx.ring.ntt(encoder.residues(smp.gaussian((len(digits), p.n), p.sigma), ctx.basis))
    big_p = math.prod(p.special_moduli)
    gadget = np.zeros((len(digits), m, 1), dtype=np.uint32)
    for d, (lo, hi) in enumerate(digits):
        for i in range(lo, hi):
            gadget[d, num_p + i, 0] = big_p % p.moduli[i]
    full = dict(num_p=0, num_q=m)
    term = evaluator.mul_elementwise(jnp.broadcast_to(s_src, (len(digits), m, p.n)),
                                     jnp.asarray(np.broadcast_to(gadget, (len(digits), m, p.n))), ctx.plan, **full)
    b = evaluator.sub(evaluator.add(e, term, ctx.plan, **full), evaluator.mul_elementwise(a, s_ntt, ctx.plan, **full),
                      ctx.plan, **full)
    return SwitchingKey(jnp.stack([b, a], axis=1), kind, galois, ctx.id, key_id, seed=seed)


def uniform_half(seed: bytes, basis, n: int, digits: int) -> np.ndarray:
    """The ``a_d`` of a seeded switching key: uint32 ``(digits, len(basis), n)`` over ``basis`` (P first, then Q),
    NTT domain (a uniform polynomial is uniform in either domain; the values are stored as they are)."""
    return expand_seed(seed, basis, n, digits)
