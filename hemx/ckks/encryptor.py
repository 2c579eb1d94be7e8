"""Encryption (public or secret key) and decryption: :class:`Encryptor` and :class:`Decryptor`.

Both work on the plaintexts of an :class:`~hemx.ckks.encoding.Encoder` (its parameters, NTT plan, context id and
placement); a :class:`~hemx.ckks.context.Context` holds one of each as ``ctx.encryptor`` and ``ctx.decryptor``.
Randomness comes from the encryptor's sampler (the OS CSPRNG by default).
"""

from __future__ import annotations

import math
import warnings

import jax.numpy as jnp
import numpy as np

from hemx.ckks import checks, encoder as encoder_mod, evaluator
from hemx.ckks import placement as placement_mod
from hemx.ckks.ciphertext import Ciphertext, Plaintext
from hemx.ckks.encoding import Encoder
from hemx.ckks.keys import KeySet, PublicKey, SecretKey
from hemx.ckks.operations import check_ciphertext, check_key
from hemx.ckks.sampling import Sampler
from hemx.ckks.scale_policy import peak
from hemx.ckks.validation import is_real
from hemx.errors import ContextMismatchError, DecryptionError, DecryptionWarning, ParameterError

on_placement = placement_mod.on_placement


class Encryptor:
    """Encrypts values or plaintexts of ``encoder`` under a public or secret key.

    Args:
        encoder: the :class:`~hemx.ckks.encoding.Encoder` (values are encoded with it; its context id and
            placement are the ciphertexts').
        sampler: randomness source (default the OS CSPRNG; ``Sampler.insecure_for_tests(seed)`` for tests only).
            Replaceable as ``encryptor.sampler``.
    """

    def __init__(self, encoder: Encoder, *, sampler: Sampler | None = None):
        self.encoder, self.params, self.placement = encoder, encoder.params, encoder.placement
        self.sampler = sampler or Sampler()

    def __repr__(self) -> str:
        return f"Encryptor({self.params.describe()})"

    @on_placement()
    def encrypt(self, values, key, *, bound: float | None = None) -> Ciphertext:
        """Encrypt ``(slots,)`` or ``(..., count)`` values with a public key (or a :class:`KeySet`) or a secret key.

        The ciphertext ``(..., 2, limbs, N)`` starts at the top level at the level's managed scale (on every
        preset, ``boot_*`` included: the whole chain is usable, see ``docs/ckks.md``) and carries ``bound``, public
        metadata like the scale: ``max |x|`` of the values rounded up to a power of two (static metadata is part
        of a jitted program's cache key: rounded, new data of the same range reuses the compiled program), or the
        given ``bound`` as it is (the client's declared bound on its data, at least ``max |x|``). Every operation
        propagates it, and a bootstrap checks it against the bound it supports.
        """
        if isinstance(key, KeySet):
            key = key.public
        if not isinstance(key, (PublicKey, SecretKey)):
            raise ParameterError("encrypt needs a PublicKey, a SecretKey or a KeySet")
        check_key(key, self.encoder.context_id)
        pt = values if isinstance(values, Plaintext) else self.encoder.encode(values)
        if pt.context_id != self.encoder.context_id:
            raise ContextMismatchError("the plaintext belongs to another context")
        if bound is not None:
            if not is_real(bound) or not math.isfinite(float(bound)) or float(bound) < 0:
                raise ParameterError(f"bound must be a finite number >= 0 (max |x| of the values), got {bound!r}")
            top = pt.bound if isinstance(values, Plaintext) else peak(values)
            if top is not None and float(bound) < top:
                raise ParameterError(f"bound={float(bound):.6g} is below max |x| = {top:.6g} of the values; give "
                                     "a bound at least as large as every value (or leave it out: max |x| is used)")
            pt = pt.replace(bound=float(bound))
        return self._encrypt(pt, key)

    def _encrypt(self, pt: Plaintext, key: PublicKey | SecretKey) -> Ciphertext:
        """``(c0, c1)`` with ``c0 + c1 s = m + e`` over ``Q_level`` (NTT domain), for a checked plaintext and key.

        Public key ``(b, a)``: ``(v b + e0 + m, v a + e1)`` with ternary ``v``; secret key: ``(-a s + e0 + m, a)``
        with uniform ``a``."""
        p, smp, enc, plan = self.params, self.sampler, self.encoder, self.encoder.plan
        level, num_q, num_p = pt.level, p.limbs_at_level(pt.level), enc.num_p
        ops = dict(num_p=num_p, num_q=num_q)
        batch = pt.batch_shape
        e0 = enc.to_ntt_q(smp.gaussian(batch + (p.n,), p.sigma), level)
        if isinstance(key, PublicKey):
            v = enc.to_ntt_q(smp.ternary(batch + (p.n,)).astype(np.int64), level)
            e1 = enc.to_ntt_q(smp.gaussian(batch + (p.n,), p.sigma), level)
            b, a = key.data[0, :num_q], key.data[1, :num_q]
            c0 = evaluator.add(evaluator.add(evaluator.mul_elementwise(v, b, plan, **ops), e0, plan, **ops),
                               pt.data, plan, **ops)
            c1 = evaluator.add(evaluator.mul_elementwise(v, a, plan, **ops), e1, plan, **ops)
        else:
            c1 = jnp.asarray(smp.uniform(p.moduli[:num_q], batch + (num_q, p.n)))
            a_s = evaluator.mul_elementwise(c1, key.ntt[num_p : num_p + num_q], plan, **ops)
            c0 = evaluator.add(evaluator.sub(e0, a_s, plan, **ops), pt.data, plan, **ops)
        data = jnp.stack([c0, c1], axis=-3)
        return Ciphertext(data, level, pt.scale, pt.slots, pt.is_complex, enc.context_id, key.key_id, bound=pt.bound)


class Decryptor:
    """Decrypts ciphertexts of ``encoder``'s context with the secret key.

    Args:
        encoder: the :class:`~hemx.ckks.encoding.Encoder` of the ciphertexts' context.
        decryption_check: "raise" (default), "warn" or "off": what :meth:`decrypt` does when the decrypted
            coefficients look like noise over the whole modulus (:class:`~hemx.errors.DecryptionError`).
    """

    def __init__(self, encoder: Encoder, *, decryption_check: str = "raise"):
        self.encoder, self.params, self.placement = encoder, encoder.params, encoder.placement
        self.decryption_check = checks.check_mode(decryption_check)

    def __repr__(self) -> str:
        return f"Decryptor({self.params.describe()}, decryption_check={self.decryption_check!r})"

    @on_placement(place=False)
    def decrypt(self, ct: Ciphertext, secret, *, decryption_check: str | None = None) -> np.ndarray:
        """Decrypt ``(..., 2, limbs, N)`` to numpy values ``(..., slots)`` (real unless complex values were
        encrypted).

        ``decryption_check`` overrides the decryptor's setting for this call: "raise" (the default setting)
        raises :class:`~hemx.errors.DecryptionError` when the decrypted polynomial is spread over the whole
        modulus instead of holding a message (the wrong secret key, altered ciphertext data, values x scale that
        overflowed the modulus), "warn" warns with :class:`~hemx.errors.DecryptionWarning`, "off" skips it. A
        plausibility check, not authentication: see ``docs/errors.md``.
        """
        mode = self.decryption_check if decryption_check is None else checks.check_mode(decryption_check)
        context_id = self.encoder.context_id
        check_ciphertext(ct, context_id)
        if isinstance(secret, KeySet):
            secret = secret.secret
        if not isinstance(secret, SecretKey):
            raise ParameterError("decrypt needs the SecretKey (or the KeySet holding it)")
        check_key(secret, context_id, ct.key_id)
        # a scale below the noise (a manual rescale too many): garbage values, refused like a failed check
        self.encoder.scales.check_result_scale(ct.scale, ct.level, "decrypt", mode)
        num_q = self.params.limbs_at_level(ct.level)
        m = np.asarray(evaluator.decrypt_core(ct.data, secret.ntt, self.encoder.plan, num_p=self.encoder.num_p,
                                              num_q=num_q))
        moduli = self.params.moduli[:num_q]
        if mode != "off":
            ok, stats = checks.residue_check(m, moduli, n=self.params.n, slots=ct.slots, scale=ct.scale)
            if not ok:
                msg = (f"decryption check failed at level {ct.level}: {stats.reason}. The decrypted values would "
                       "be meaningless; pass decryption_check='warn' or 'off' to get them anyway")
                if mode == "raise":
                    raise DecryptionError(msg)
                warnings.warn(msg, DecryptionWarning, stacklevel=3)
        return encoder_mod.decode_residues(m, moduli, n=self.params.n, slots=ct.slots, scale=ct.scale,
                                           is_complex=ct.is_complex)
