"""Encryption (public or secret key) and decryption.

Functions of a :class:`hemx.ckks.context.Context`; its ``encrypt`` / ``decrypt`` methods are the front users
call. Randomness comes from the context's sampler.
"""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np

from hemx.ckks import checks, encoder, evaluator
from hemx.errors import DecryptionError, DecryptionWarning
from hemx.ckks.ciphertext import Ciphertext, Plaintext
from hemx.ckks.keys import PublicKey, SecretKey


def encrypt(ctx, pt: Plaintext, key: PublicKey | SecretKey) -> Ciphertext:
    """``(c0, c1)`` with ``c0 + c1 s = m + e`` over ``Q_level`` (NTT domain), for a checked plaintext and key.

    Public key ``(b, a)``: ``(v b + e0 + m, v a + e1)`` with ternary ``v``; secret key: ``(-a s + e0 + m, a)``
    with uniform ``a``."""
    p, smp = ctx.params, ctx.sampler
    level, num_q, num_p = pt.level, p.limbs_at_level(pt.level), ctx.num_p
    ops = dict(num_p=num_p, num_q=num_q)
    batch = pt.batch_shape
    e0 = ctx.to_ntt_q(smp.gaussian(batch + (p.n,), p.sigma), level)
    if isinstance(key, PublicKey):
        v = ctx.to_ntt_q(smp.ternary(batch + (p.n,)).astype(np.int64), level)
        e1 = ctx.to_ntt_q(smp.gaussian(batch + (p.n,), p.sigma), level)
        b, a = key.data[0, :num_q], key.data[1, :num_q]
        c0 = evaluator.add(evaluator.add(evaluator.mul_elementwise(v, b, ctx.plan, **ops), e0, ctx.plan, **ops),
                           pt.data, ctx.plan, **ops)
        c1 = evaluator.add(evaluator.mul_elementwise(v, a, ctx.plan, **ops), e1, ctx.plan, **ops)
    else:
        c1 = jnp.asarray(smp.uniform(p.moduli[:num_q], batch + (num_q, p.n)))
        a_s = evaluator.mul_elementwise(c1, key.ntt[num_p : num_p + num_q], ctx.plan, **ops)
        c0 = evaluator.add(evaluator.sub(e0, a_s, ctx.plan, **ops), pt.data, ctx.plan, **ops)
    data = jnp.stack([c0, c1], axis=-3)
    return Ciphertext(data, level, pt.scale, pt.slots, pt.is_complex, ctx.id, key.key_id, bound=pt.bound)


def decrypt(ctx, ct: Ciphertext, secret: SecretKey, check: str = "raise") -> np.ndarray:
    """Slot values ``(..., slots)`` of a checked ciphertext (real unless complex values were encrypted).

    ``check`` ("raise", "warn", "off"): the decryption check (:func:`hemx.ckks.checks.residue_check`) on the
    decrypted coefficients before decoding; a polynomial spread over the whole modulus (wrong key, altered data,
    an overflow) raises :class:`~hemx.errors.DecryptionError` or warns with
    :class:`~hemx.errors.DecryptionWarning`."""
    num_q = ctx.params.limbs_at_level(ct.level)
    m = np.asarray(evaluator.decrypt_core(ct.data, secret.ntt, ctx.plan, num_p=ctx.num_p, num_q=num_q))
    moduli = ctx.params.moduli[:num_q]
    if check != "off":
        ok, stats = checks.residue_check(m, moduli, n=ctx.params.n, slots=ct.slots, scale=ct.scale)
        if not ok:
            msg = (f"decryption check failed at level {ct.level}: {stats.reason}. The decrypted values would be "
                   "meaningless; pass decryption_check='warn' or 'off' to get them anyway")
            if check == "raise":
                raise DecryptionError(msg)
            warnings.warn(msg, DecryptionWarning, stacklevel=3)
    return encoder.decode_residues(m, moduli, n=ctx.params.n, slots=ct.slots, scale=ct.scale,
                                   is_complex=ct.is_complex)
