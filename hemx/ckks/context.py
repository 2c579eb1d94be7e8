"""The CKKS context: keys, encryption, decryption and every leveled operation, batched.

A :class:`Context` owns the parameters, the ``P + Q`` RNS ring (NTT plan and tables), the encoder and the
precomputed tables of rescaling and key switching for each level. Every operation accepts ciphertexts with any
leading batch shape and runs as one jit-compiled kernel call per shape (TensorFHE's operation-level batching).
"""

from __future__ import annotations

import itertools
import math
from functools import partial
from typing import Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from hemx.ckks import encoder
from hemx.ckks import keyswitch as ks
from hemx.ckks.ciphertext import Ciphertext, Plaintext
from hemx.ckks.keys import EvaluationKeys, KeySet, PublicKey, SecretKey, SwitchingKey
from hemx.ckks.params import CKKSParameters
from hemx.ckks.sampling import Sampler
from hemx.errors import (
    ContextMismatchError,
    KeyMismatchError,
    LevelError,
    ParameterError,
    ScaleMismatchError,
    SlotError,
)
from hemx.kernels import automorphism, bconv as bconv_kernels, modarith
from hemx.kernels import ntt as ntt_kernels
from hemx import plan as planner
from hemx.ring import RNSRing

_ids = itertools.count(1)
SCALE_RTOL = 1e-9

# ------------------------------------------------------------------------------------------------------------
# jitted kernels (module level: one compile per shape and static configuration, shared by contexts)
# ------------------------------------------------------------------------------------------------------------


@partial(jax.jit, static_argnames=("k", "n"))
def _add(a, b, plan, k, n):
    return modarith.add_mod(a, b, ks.limb_table(plan, k, k + n).q)


@partial(jax.jit, static_argnames=("k", "n"))
def _sub(a, b, plan, k, n):
    return modarith.sub_mod(a, b, ks.limb_table(plan, k, k + n).q)


@partial(jax.jit, static_argnames=("k", "n"))
def _neg(a, plan, k, n):
    return modarith.neg_mod(a, ks.limb_table(plan, k, k + n).q)


@partial(jax.jit, static_argnames=("k", "n"))
def _mul_elementwise(a, b, plan, k, n):
    return modarith.mul_barrett(a, b, ks.limb_table(plan, k, k + n))


@partial(jax.jit, static_argnames=("k", "n", "reduction"))
def _mul_known(a, w, plan, k, n, reduction):
    return modarith.mul_known(a, w, ks.limb_table(plan, k, k + n), reduction)


@partial(jax.jit, static_argnames=("k", "n"))
def _ntt_q(x, plan, k, n):
    return ntt_kernels.ntt(x, ks.limb_plan(plan, k, k + n))


@partial(jax.jit, static_argnames=("k", "n"))
def _intt_q(x, plan, k, n):
    return ntt_kernels.intt(x, ks.limb_plan(plan, k, k + n))


@partial(jax.jit, static_argnames=("k", "n"))
def _decrypt_core(ct, s, plan, k, n):
    table = ks.limb_table(plan, k, k + n)
    m = modarith.add_mod(ct[..., 0, :, :], modarith.mul_barrett(ct[..., 1, :, :], s[k : k + n], table), table.q)
    return ntt_kernels.intt(m, ks.limb_plan(plan, k, k + n))


@partial(jax.jit, static_argnames=("k", "n"))
def _tensor(a, b, plan, k, n):
    table = ks.limb_table(plan, k, k + n)
    a0, a1, b0, b1 = a[..., 0, :, :], a[..., 1, :, :], b[..., 0, :, :], b[..., 1, :, :]
    d0 = modarith.mul_barrett(a0, b0, table)
    d1 = modarith.add_mod(modarith.mul_barrett(a0, b1, table), modarith.mul_barrett(a1, b0, table), table.q)
    d2 = modarith.mul_barrett(a1, b1, table)
    return d0, d1, d2


_KS_STATIC = ("k", "n", "digits", "reduction", "dataflow")


@partial(jax.jit, static_argnames=_KS_STATIC)
def _relinearize(d0, d1, d2, key, plan, modup_plans, moddown_plan, p_inv, k, n, digits, reduction, dataflow):
    sw = ks.keyswitch(d2, key, plan, modup_plans, moddown_plan, p_inv, digits, k, n, reduction, dataflow)
    q = ks.limb_table(plan, k, k + n).q
    return jnp.stack([modarith.add_mod(d0, sw[..., 0, :, :], q), modarith.add_mod(d1, sw[..., 1, :, :], q)], axis=-3)


@partial(jax.jit, static_argnames=_KS_STATIC)
def _mul_relin(a, b, key, plan, modup_plans, moddown_plan, p_inv, k, n, digits, reduction, dataflow):
    d0, d1, d2 = _tensor(a, b, plan, k, n)
    return _relinearize(d0, d1, d2, key, plan, modup_plans, moddown_plan, p_inv, k, n, digits, reduction, dataflow)


@partial(jax.jit, static_argnames=_KS_STATIC)
def _mul_relin_rescale(a, b, key, plan, modup_plans, moddown_plan, p_inv, p_mod, fold_conv, fold_inv, k, n, digits,
                       reduction, dataflow):
    """``rescale(relinearize(a * b))`` with the rescale folded into ModDown (:class:`ks.RescaleFold`):
    ``(..., 2, n, N)`` x 2 -> ``(..., 2, n - drop, N)``."""
    d0, d1, d2 = _tensor(a, b, plan, k, n)
    fold = ks.RescaleFold(jnp.stack([d0, d1], axis=-3), p_mod, fold_conv, fold_inv)
    return ks.keyswitch(d2, key, plan, modup_plans, moddown_plan, p_inv, digits, k, n, reduction, dataflow,
                        fold=fold)


@partial(jax.jit, static_argnames=_KS_STATIC)
def _rotate_one(ct, index_map, key, plan, modup_plans, moddown_plan, p_inv, k, n, digits, reduction, dataflow):
    """One rotation with the chosen key-switching dataflow: ``(..., 2, n, N)``.

    The automorphism permutes the ciphertext's NTT slots first (it commutes exactly with the centered ModUp,
    and permuting ``n`` limbs is cheaper than permuting the ``D`` extended digits of ``k + n`` limbs)."""
    ct = automorphism.apply_ntt_automorphism(ct, index_map)
    sw = ks.keyswitch(ct[..., 1, :, :], key, plan, modup_plans, moddown_plan, p_inv, digits, k, n, reduction,
                      dataflow)
    q = ks.limb_table(plan, k, k + n).q
    return jnp.stack([modarith.add_mod(ct[..., 0, :, :], sw[..., 0, :, :], q), sw[..., 1, :, :]], axis=-3)


@partial(jax.jit, static_argnames=("k", "n", "digits", "reduction"))
def _rotate_hoisted(ct, index_maps, keys, plan, modup_plans, moddown_plan, p_inv, k, n, digits, reduction):
    """One ModUp of c1 shared by every Galois element: ``(..., 2, n, N) -> (R, ..., 2, n, N)``."""
    ext = ks.modup(ct[..., 1, :, :], plan, modup_plans, digits, k, n)
    q = ks.limb_table(plan, k, k + n).q
    outs = []
    for r in range(index_maps.shape[0]):
        idx = index_maps[r]
        acc = ks.inner_product(automorphism.apply_ntt_automorphism(ext, idx), keys[r], plan, k, n)
        sw = ks.moddown(acc, plan, moddown_plan, p_inv, k, n, reduction)
        c0 = automorphism.apply_ntt_automorphism(ct[..., 0, :, :], idx)
        outs.append(jnp.stack([modarith.add_mod(c0, sw[..., 0, :, :], q), sw[..., 1, :, :]], axis=-3))
    return jnp.stack(outs)


@partial(jax.jit, static_argnames=("k", "n", "drop", "reduction"))
def _rescale(x, plan, conv_plan, d_inv, k, n, drop, reduction):
    """Divide by the product ``D`` of the top ``drop`` primes of ``Q_l``, rounding, in one step (NTT domain)."""
    return ks.divide_by_dropped(x[..., : n - drop, :], x[..., n - drop : n, :], plan, (k, k + n - drop),
                                (k + n - drop, k + n), conv_plan, d_inv, reduction)


# ------------------------------------------------------------------------------------------------------------
# the context
# ------------------------------------------------------------------------------------------------------------


class Context:
    """CKKS with hemx's kernels for one parameter set.

    Args:
        params: a :class:`CKKSParameters`.
        slots: slots per ciphertext (power of two <= N/2, default N/2); fewer values are zero-padded.
        ntt: NTT method of the ring ("butterfly", "four_step", "mat3", "multilevel"); None: the planner's choice.
        reduction: modular reduction for known-operand products ("shoup", "montgomery", "barrett"); None: the
            planner's choice.
        keyswitch: key-switching dataflow, "mp" (Max-Parallel), "dc" (Digit-Centric) or "oc" (Output-Centric);
            all give identical results, they differ in working set and speed. Overridable per call. None: the
            planner's choice (Max-Parallel unless its working set exceeds the memory budget).
        sampler: randomness source; default the OS CSPRNG. ``Sampler.insecure_for_tests(seed)`` for tests only.
        planning: "measure" (time the unforced NTT choices once per machine and shape, cached) or "off" (static
            defaults); None: ``$HEMX_PLAN``, else "measure". Every variant gives identical results.
        ntt_split, bp: force the NTT split (``(R, C)`` or radices) and the BAT chunk width of matrix methods.
    """

    def __init__(
        self,
        params: CKKSParameters,
        *,
        slots: int | None = None,
        ntt: str | None = None,
        reduction: str | None = None,
        keyswitch: str | None = None,
        sampler: Sampler | None = None,
        planning: str | None = None,
        ntt_split: Sequence[int] | None = None,
        bp: int | None = None,
    ):
        if not isinstance(params, CKKSParameters):
            raise ParameterError("Context needs a CKKSParameters instance")
        self.params = params
        self.id = next(_ids)
        self.slots = encoder.check_slots(params.n, slots if slots is not None else params.n // 2)
        self.sampler = sampler or Sampler()
        self.num_special = len(params.special_moduli)
        self.basis = tuple(params.special_moduli) + tuple(params.moduli)  # P first, then Q
        forced_flow = None if keyswitch is None else self._check_dataflow(keyswitch)
        self.planned = planner.plan_ntt(params.n, self.basis, method=ntt, reduction=reduction, split=ntt_split,
                                        bp=bp, planning=planning)
        variant = self.planned.variant
        self.reduction = variant.reduction
        self.keyswitch = forced_flow or planner.choose_dataflow(params.n, self.num_special, params.num_limbs,
                                                                params.dnum)
        self.ring = RNSRing(params.n, self.basis, **variant.ring_kwargs())
        self.plan = self.ring.plan
        self._level_cache: dict[int, dict] = {}
        self._maps: dict[int, jax.Array] = {}

    def __repr__(self) -> str:
        return f"Context({self.params.describe()}, slots={self.slots}, ntt={self.plan.describe()!r})"

    # -------------------------------------------------------------------------------------------- tables
    def _limbs(self, level: int) -> int:
        return self.params.limbs_at_level(level)

    def _level_tables(self, level: int) -> dict:
        """Basis-conversion plans, P^-1 and rescaling constants for one level (built on first use)."""
        if level in self._level_cache:
            return self._level_cache[level]
        p = self.params
        n, k = self._limbs(level), self.num_special
        qs, ps = list(p.moduli[:n]), list(p.special_moduli)
        digits = tuple((lo, min(hi, n)) for lo, hi in p.digits() if lo < n)
        # Both conversions are centered. ModUp: the extended digit is then zero-mean; with [0, Q_d) digits the
        # term (digit * e_d) / P of the key-switching error has a fixed non-zero part per key, which piles
        # up in a few slots. ModDown: the division by P then rounds, and the conversion error is zero-mean.
        modup = tuple(
            jax.device_put(bconv_kernels.make_bconv_plan(qs[lo:hi], ps + qs[:lo] + qs[hi:], reduction=self.reduction,
                                                         centered=True))
            for lo, hi in digits
        )
        moddown = jax.device_put(bconv_kernels.make_bconv_plan(ps, qs, reduction=self.reduction, centered=True))
        big_p = math.prod(ps)
        p_inv = modarith.known_operand(
            np.array([[pow(big_p, -1, q)] for q in qs], dtype=np.int64), np.array(qs, np.int64).reshape(-1, 1)
        )
        drop = p.level_sizes[level] if level > 0 else 0
        rescale_plan = d_inv = p_mod = fold_conv = fold_inv = None
        if drop:  # rescaling divides by the product of the level's top primes: a centered conversion, like ModDown
            kept, dropped = qs[: n - drop], qs[n - drop :]
            kept_col = np.array(kept, np.int64).reshape(-1, 1)
            rescale_plan = bconv_kernels.make_bconv_plan(dropped, kept, reduction=self.reduction, centered=True)
            d_inv = modarith.known_operand(np.array([[pow(math.prod(dropped), -1, q)] for q in kept], np.int64),
                                           kept_col)
            # mul(..., rescale=True): ModDown and the rescale in one division by P * D (ks.RescaleFold)
            p_mod = modarith.known_operand(np.array([[big_p % q] for q in qs], np.int64),
                                           np.array(qs, np.int64).reshape(-1, 1))
            fold_conv = bconv_kernels.make_bconv_plan(ps + dropped, kept, reduction=self.reduction, centered=True)
            big_pd = big_p * math.prod(dropped)
            fold_inv = modarith.known_operand(np.array([[pow(big_pd, -1, q)] for q in kept], np.int64), kept_col)
        tables = {
            "n": n,
            "digits": digits,
            "modup": modup,
            "moddown": moddown,
            "p_inv": jax.device_put(p_inv),
            "drop": drop,
            "rescale": None if rescale_plan is None else jax.device_put(rescale_plan),
            "d_inv": None if d_inv is None else jax.device_put(d_inv),
            "p_mod": None if p_mod is None else jax.device_put(p_mod),
            "fold_conv": None if fold_conv is None else jax.device_put(fold_conv),
            "fold_inv": None if fold_inv is None else jax.device_put(fold_inv),
            "divisor": float(math.prod(qs[n - drop :])) if drop else None,
        }
        self._level_cache[level] = tables
        return tables

    @staticmethod
    def _check_dataflow(name: str) -> str:
        if name not in ks.DATAFLOWS:
            raise ParameterError(f"unknown key-switching dataflow {name!r}; choose one of {ks.DATAFLOWS}")
        return name

    def _index_map(self, g: int) -> jax.Array:
        if g not in self._maps:
            self._maps[g] = jnp.asarray(automorphism.ntt_index_map(self.params.n, g))
        return self._maps[g]

    def _residues(self, ints: np.ndarray, moduli: Sequence[int]) -> np.ndarray:
        """Integer coefficients ``(..., N)`` -> uint32 residues ``(..., len(moduli), N)``."""
        ints = np.asarray(ints)
        if ints.dtype == object:
            return np.stack([np.asarray(ints % q, dtype=np.int64) for q in moduli], axis=-2).astype(np.uint32)
        q = np.asarray(moduli, dtype=np.int64).reshape(-1, 1)
        return np.mod(ints[..., None, :].astype(np.int64), q).astype(np.uint32)

    def _to_ntt_q(self, ints: np.ndarray, level: int) -> jax.Array:
        n = self._limbs(level)
        res = jnp.asarray(self._residues(ints, self.params.moduli[:n]))
        return _ntt_q(res, self.plan, self.num_special, n)

    # -------------------------------------------------------------------------------------------- checks
    def _check_ct(self, ct, what: str = "ciphertext") -> Ciphertext:
        if not isinstance(ct, Ciphertext):
            raise ParameterError(f"{what} must be a hemx Ciphertext, got {type(ct).__name__}")
        if ct.context_id != self.id:
            raise ContextMismatchError(
                f"{what} belongs to another context; ciphertexts can only be combined with the context "
                "(and parameters) that created them"
            )
        return ct

    def _check_key(self, key, key_id: int | None = None):
        if getattr(key, "context_id", None) != self.id:
            raise ContextMismatchError("the key belongs to another context; generate keys with this context")
        if key_id is not None and key.key_id != key_id:
            raise KeyMismatchError(
                f"the key (key set {key.key_id}) is not the one the ciphertext was encrypted under "
                f"(key set {key_id})"
            )
        return key

    def _align(self, a: Ciphertext, b, check_scale: bool = True):
        """Bring two operands to the same level (dropping limbs of the higher one) and check scales."""
        level = min(a.level, b.level)
        a, b = self.drop_level(a, level), self._drop_any(b, level)
        if check_scale and not math.isclose(a.scale, b.scale, rel_tol=SCALE_RTOL):
            raise ScaleMismatchError(
                f"operands have different scales (2^{math.log2(a.scale):.4f} vs 2^{math.log2(b.scale):.4f}); "
                "rescale both the same number of times, or encode the plaintext at the ciphertext's scale"
            )
        return a, b

    def _drop_any(self, x, level: int):
        if isinstance(x, Ciphertext):
            return self.drop_level(x, level)
        if x.level == level:
            return x
        return x.replace(data=x.data[..., : self._limbs(level), :], level=level)

    # -------------------------------------------------------------------------------------------- keys
    def keygen(
        self,
        rotations: Iterable[int] | str = (),
        *,
        conjugation: bool = False,
        relin: bool = True,
    ) -> KeySet:
        """Generate a secret key and its public, relinearization and Galois keys.

        Args:
            rotations: slot rotation steps that get a Galois key; "power_of_two" gives 1, 2, 4, ... < slots
                (enough for :meth:`sum_slots`, and for any rotation by composition).
            conjugation: also generate the conjugation key.
            relin: generate the relinearization key (needed by :meth:`mul`).
        """
        p, smp = self.params, self.sampler
        key_id = next(_ids)
        s = smp.ternary((p.n,), p.hamming_weight)
        s_ntt = self.ring.ntt(self._residues(s.astype(np.int64), self.basis))
        secret = SecretKey(s, s_ntt, self.id, key_id)
        # public key over Q
        k, nq = self.num_special, p.num_limbs
        a = jnp.asarray(smp.uniform(p.moduli, (nq, p.n)))
        e = self._to_ntt_q(smp.gaussian((p.n,), p.sigma), p.max_level)
        b = _sub(e, _mul_elementwise(a, s_ntt[k:], self.plan, k, nq), self.plan, k, nq)
        public = PublicKey(jnp.stack([b, a]), self.id, key_id)
        relin_key = self._switching_key(s_ntt, _mul_elementwise(s_ntt, s_ntt, self.plan, 0, k + nq), "relin", None,
                                        key_id) if relin else None
        if isinstance(rotations, str):
            if rotations != "power_of_two":
                raise ParameterError("rotations must be a list of steps or 'power_of_two'")
            steps = []
            r = 1
            while r < self.slots:
                steps.append(r)
                r *= 2
        else:
            steps = [int(r) for r in rotations]
        galois = {}
        elements = {automorphism.galois_element(p.n, r % self.slots) for r in steps if r % self.slots}
        if conjugation:
            elements.add(automorphism.conjugation_element(p.n))
        for g in sorted(elements):
            s_g = automorphism.apply_ntt_automorphism(s_ntt, self._index_map(g))
            galois[g] = self._switching_key(s_ntt, s_g, "galois", g, key_id)
        return KeySet(public=public, relin=relin_key, galois=galois, context_id=self.id, key_id=key_id,
                      secret=secret)

    def _switching_key(self, s_ntt, s_src, kind: str, g: int | None, key_id: int) -> SwitchingKey:
        """Hybrid key from ``s_src`` to ``s``: per digit ``b_d = -a_d s + e_d + P g_d s_src`` over P + Q."""
        p, smp = self.params, self.sampler
        k, nq = self.num_special, p.num_limbs
        digits = p.digits()
        m = k + nq
        a = jnp.asarray(smp.uniform(self.basis, (len(digits), m, p.n)))
        e = self.ring.ntt(self._residues(smp.gaussian((len(digits), p.n), p.sigma), self.basis))
        big_p = math.prod(p.special_moduli)
        gadget = np.zeros((len(digits), m, 1), dtype=np.uint32)
        for d, (lo, hi) in enumerate(digits):
            for i in range(lo, hi):
                gadget[d, k + i, 0] = big_p % p.moduli[i]
        term = _mul_elementwise(jnp.broadcast_to(s_src, (len(digits), m, p.n)), jnp.asarray(
            np.broadcast_to(gadget, (len(digits), m, p.n))), self.plan, 0, m)
        b = _sub(_add(e, term, self.plan, 0, m), _mul_elementwise(a, s_ntt, self.plan, 0, m), self.plan, 0, m)
        return SwitchingKey(jnp.stack([b, a], axis=1), kind, g, self.id, key_id)

    # -------------------------------------------------------------------------------------------- encoding
    def _values(self, values) -> tuple[np.ndarray, bool]:
        z = np.asarray(values)
        if z.ndim == 0:
            z = z[None]
        if not (np.issubdtype(z.dtype, np.number) or z.dtype == bool):
            raise SlotError(f"values must be numbers, got dtype {z.dtype}")
        is_complex = np.iscomplexobj(z)
        if z.shape[-1] > self.slots:
            raise SlotError(
                f"{z.shape[-1]} values do not fit in {self.slots} slots; use a larger ring (N = "
                f"{self.params.n} gives at most {self.params.max_slots}) or split the data across ciphertexts"
            )
        if z.shape[-1] < self.slots:
            pad = np.zeros(z.shape[:-1] + (self.slots - z.shape[-1],), dtype=z.dtype)
            z = np.concatenate([z, pad], axis=-1)
        return z.astype(np.complex128), is_complex

    def encode(self, values, *, level: int | None = None, scale: float | None = None) -> Plaintext:
        """Encode ``(..., count)`` values (count <= slots) at ``level`` (default top) and ``scale``."""
        level = self.params.max_level if level is None else level
        self._limbs(level)
        scale = self.params.scale if scale is None else float(scale)
        z, is_complex = self._values(values)
        ints = encoder.encode(z, self.params.n, self.slots, scale)
        return Plaintext(self._to_ntt_q(ints, level), level, scale, self.slots, is_complex, self.id)

    def decode(self, pt: Plaintext) -> np.ndarray:
        """Decode a plaintext back to slot values."""
        if pt.context_id != self.id:
            raise ContextMismatchError("the plaintext belongs to another context")
        coeffs = _intt_q(pt.data, self.plan, self.num_special, self._limbs(pt.level))
        return self._finish_decode(np.asarray(coeffs), pt.level, pt.scale, pt.slots, pt.is_complex)

    def _finish_decode(self, residues: np.ndarray, level: int, scale: float, slots: int, is_complex: bool):
        qs = self.params.moduli[: self._limbs(level)]
        # enough limbs to hold scale * 2^40 with room to spare: their CRT gives the centered value exactly
        need = math.log2(scale) + 64
        count, bits = 0, 0.0
        while count < len(qs) and bits < need:
            bits += math.log2(qs[count])
            count += 1
        coeffs = _crt_centered_float(residues[..., :count, :], qs[:count])
        z = encoder.decode(coeffs, self.params.n, slots, scale)
        return z if is_complex else z.real

    # -------------------------------------------------------------------------------------------- encryption
    def encrypt(self, values, key) -> Ciphertext:
        """Encrypt ``(slots,)`` or ``(..., count)`` values with a public key (or a :class:`KeySet`) or a secret key.

        Randomness comes from the context's sampler (the OS CSPRNG by default).
        """
        if isinstance(key, KeySet):
            key = key.public
        if not isinstance(key, (PublicKey, SecretKey)):
            raise ParameterError("encrypt needs a PublicKey, a SecretKey or a KeySet")
        self._check_key(key)
        pt = values if isinstance(values, Plaintext) else self.encode(values)
        if pt.context_id != self.id:
            raise ContextMismatchError("the plaintext belongs to another context")
        p, smp = self.params, self.sampler
        level, n = pt.level, self._limbs(pt.level)
        k = self.num_special
        batch = pt.batch_shape
        e0 = self._to_ntt_q(smp.gaussian(batch + (p.n,), p.sigma), level)
        if isinstance(key, PublicKey):
            v = self._to_ntt_q(smp.ternary(batch + (p.n,)).astype(np.int64), level)
            e1 = self._to_ntt_q(smp.gaussian(batch + (p.n,), p.sigma), level)
            b, a = key.data[0, :n], key.data[1, :n]
            c0 = _add(_add(_mul_elementwise(v, b, self.plan, k, n), e0, self.plan, k, n), pt.data, self.plan, k, n)
            c1 = _add(_mul_elementwise(v, a, self.plan, k, n), e1, self.plan, k, n)
        else:
            a = jnp.asarray(smp.uniform(p.moduli[:n], batch + (n, p.n)))
            c1 = a
            c0 = _add(_sub(e0, _mul_elementwise(a, key.ntt[k : k + n], self.plan, k, n), self.plan, k, n),
                      pt.data, self.plan, k, n)
        data = jnp.stack([c0, c1], axis=-3)
        return Ciphertext(data, level, pt.scale, pt.slots, pt.is_complex, self.id, key.key_id)

    def decrypt(self, ct: Ciphertext, secret) -> np.ndarray:
        """Decrypt to numpy values ``(..., slots)`` (real unless complex values were encrypted)."""
        self._check_ct(ct)
        if isinstance(secret, KeySet):
            secret = secret.secret
        if not isinstance(secret, SecretKey):
            raise ParameterError("decrypt needs the SecretKey (or the KeySet holding it)")
        self._check_key(secret, ct.key_id)
        n = self._limbs(ct.level)
        m = _decrypt_core(ct.data, secret.ntt, self.plan, self.num_special, n)
        return self._finish_decode(np.asarray(m), ct.level, ct.scale, ct.slots, ct.is_complex)

    # -------------------------------------------------------------------------------------------- leveled ops
    def drop_level(self, ct: Ciphertext, level: int) -> Ciphertext:
        """The same ciphertext at a lower ``level`` (limbs dropped; no rescaling, scale unchanged)."""
        self._check_ct(ct)
        if level > ct.level:
            raise LevelError(f"cannot raise a ciphertext from level {ct.level} to {level}")
        if level == ct.level:
            return ct
        self._limbs(level)
        return ct.replace(data=ct.data[..., : self._limbs(level), :], level=level)

    def add(self, a: Ciphertext, b) -> Ciphertext:
        """``a + b`` for a ciphertext and a ciphertext, plaintext or scalar/array of values."""
        self._check_ct(a)
        if isinstance(b, Ciphertext):
            self._check_ct(b, "second ciphertext")
            self._same_keys(a, b)
            a, b = self._align(a, b)
            data = _add(a.data, b.data, self.plan, self.num_special, a.num_limbs)
            return a.replace(data=data, is_complex=a.is_complex or b.is_complex)
        pt = self._as_plaintext(b, a, scale=a.scale)
        a, pt = self._align(a, pt)
        n = a.num_limbs
        c0 = _add(a.data[..., 0, :, :], pt.data, self.plan, self.num_special, n)
        return a.replace(data=a.data.at[..., 0, :, :].set(c0), is_complex=a.is_complex or pt.is_complex)

    def sub(self, a: Ciphertext, b) -> Ciphertext:
        """``a - b`` (b: ciphertext, plaintext or values)."""
        return self.add(a, self.negate(b) if isinstance(b, Ciphertext) else self._negate_plain(b, a))

    def negate(self, a: Ciphertext) -> Ciphertext:
        self._check_ct(a)
        return a.replace(data=_neg(a.data, self.plan, self.num_special, a.num_limbs))

    def _negate_plain(self, b, like: Ciphertext) -> Plaintext:
        pt = self._as_plaintext(b, like, scale=like.scale)
        return pt.replace(data=_neg(pt.data, self.plan, self.num_special, pt.data.shape[-2]))

    def _as_plaintext(self, b, like: Ciphertext, scale: float) -> Plaintext:
        if isinstance(b, Plaintext):
            if b.context_id != self.id:
                raise ContextMismatchError("the plaintext belongs to another context")
            return b
        return self.encode(self._broadcast_values(b), level=like.level, scale=scale)

    def _broadcast_values(self, b):
        z = np.asarray(b)
        if z.ndim == 0:  # a scalar fills every slot
            return np.full(self.slots, z.item())
        return z

    def _same_keys(self, a: Ciphertext, b: Ciphertext):
        if a.key_id != b.key_id:
            raise KeyMismatchError("the ciphertexts are encrypted under different key sets")

    def mul(self, a: Ciphertext, b, keys: EvaluationKeys | SwitchingKey | None = None, *,
            rescale: bool = False, keyswitch: str | None = None) -> Ciphertext:
        """``a * b``: with a ciphertext (relinearized with ``keys``), a plaintext, or scalar/array values.

        Plain values are encoded at the scale of the primes the next rescale removes, so that
        ``rescale(mul(a, values))`` has exactly ``a``'s scale. With ``rescale=True`` the product is rescaled; for
        two ciphertexts the rescale is folded into the relinearization's ModDown (one rounding division by
        ``P`` times the level's primes; same level, scale and precision as ``rescale(mul(a, b))``, about a
        fifth faster, not bit-identical to it).
        ``keyswitch`` overrides the context's key-switching dataflow for this call.
        """
        self._check_ct(a)
        if isinstance(b, Ciphertext):
            self._check_ct(b, "second ciphertext")
            self._same_keys(a, b)
            a, b = self._align(a, b, check_scale=False)
            key = self._relin_key(keys, a)
            self._check_product_scale(a.scale * b.scale, a.level)
            t = self._level_tables(a.level)
            flow = self._check_dataflow(keyswitch or self.keyswitch)
            statics = dict(k=self.num_special, n=t["n"], digits=t["digits"], reduction=self.reduction, dataflow=flow)
            scale, is_complex = a.scale * b.scale, a.is_complex or b.is_complex
            if rescale and t["drop"]:  # relinearization and rescale in one ModDown
                data = _mul_relin_rescale(a.data, b.data, key.data, self.plan, t["modup"], t["moddown"],
                                          t["p_inv"], t["p_mod"], t["fold_conv"], t["fold_inv"], **statics)
                return a.replace(data=data, level=a.level - 1, scale=scale / t["divisor"], is_complex=is_complex)
            data = _mul_relin(a.data, b.data, key.data, self.plan, t["modup"], t["moddown"], t["p_inv"], **statics)
            out = a.replace(data=data, scale=scale, is_complex=is_complex)
        else:
            out = self._mul_plain(a, b)
        return self.rescale(out) if rescale else out

    def _mul_plain(self, a: Ciphertext, b) -> Ciphertext:
        if isinstance(b, Plaintext):
            if b.context_id != self.id:
                raise ContextMismatchError("the plaintext belongs to another context")
            pt = b
        else:
            t = self._level_tables(a.level)
            z = np.asarray(b)
            real_scalar = z.ndim == 0 and not np.iscomplexobj(z)
            if t["divisor"] is None:  # level 0: no rescale follows, only exact integers keep the scale
                if real_scalar and float(z) == round(float(z)):
                    return self._mul_scalar(a, float(z), 1.0)
                raise LevelError(
                    "no levels left: at level 0 a ciphertext can only be multiplied by integers (there is no "
                    "prime left to rescale by); multiply earlier, or use parameters with more levels"
                )
            if real_scalar:  # an integer constant, no encoding
                return self._mul_scalar(a, float(z), t["divisor"])
            pt = self.encode(self._broadcast_values(b), level=a.level, scale=t["divisor"])
        a, pt = self._align(a, pt, check_scale=False)
        self._check_product_scale(a.scale * pt.scale, a.level)
        data = _mul_elementwise(a.data, pt.data[..., None, :, :], self.plan, self.num_special, a.num_limbs)
        return a.replace(data=data, scale=a.scale * pt.scale, is_complex=a.is_complex or pt.is_complex)

    def _check_product_scale(self, scale: float, level: int) -> None:
        """A product whose scale reaches the modulus would wrap around: refuse it with a clear error."""
        log_q = sum(math.log2(q) for q in self.params.moduli[: self._limbs(level)])
        if math.log2(scale) >= log_q - 1:
            raise LevelError(
                f"the product would have scale 2^{math.log2(scale):.1f}, beyond the modulus at level {level} "
                f"(2^{log_q:.1f}); rescale the operands first, or use parameters with more levels"
            )

    def _mul_scalar(self, a: Ciphertext, value: float, scale: float) -> Ciphertext:
        self._check_product_scale(a.scale * scale, a.level)
        c = int(round(value * scale))
        n = a.num_limbs
        qs = np.array(self.params.moduli[:n], dtype=np.int64).reshape(-1, 1)
        w = jax.device_put(modarith.known_operand(np.array([[c % int(q)] for q in qs[:, 0]], np.int64), qs))
        data = _mul_known(a.data, w, self.plan, self.num_special, n, self.reduction)
        return a.replace(data=data, scale=a.scale * scale)

    def _relin_key(self, keys, ct: Ciphertext) -> SwitchingKey:
        if isinstance(keys, SwitchingKey):
            key = keys
        elif isinstance(keys, EvaluationKeys):
            key = keys.relin_key()
        else:
            raise ParameterError("ciphertext multiplication needs the relinearization key: ctx.mul(a, b, keys)")
        self._check_key(key, ct.key_id)
        if key.kind != "relin":
            raise ParameterError(f"expected a relinearization key, got a {key.kind} key")
        return key

    def rescale(self, ct: Ciphertext) -> Ciphertext:
        """Divide by the primes of the current level (one or two) with rounding; the level drops by one."""
        self._check_ct(ct)
        if ct.level == 0:
            raise LevelError("no levels left to rescale: the ciphertext is at level 0 (bootstrapping is not "
                             "available; use parameters with more levels)")
        t = self._level_tables(ct.level)
        data = _rescale(ct.data, self.plan, t["rescale"], t["d_inv"], k=self.num_special, n=t["n"], drop=t["drop"],
                        reduction=self.reduction)
        return ct.replace(data=data, level=ct.level - 1, scale=ct.scale / t["divisor"])

    def rotate(self, ct: Ciphertext, steps: int, keys, *, keyswitch: str | None = None) -> Ciphertext:
        """Rotate the slots left by ``steps`` (negative: right), like ``numpy.roll(values, -steps)``."""
        self._check_ct(ct)
        if int(steps) % ct.slots == 0:
            return ct
        g = automorphism.galois_element(self.params.n, int(steps) % ct.slots)  # steps are taken mod the slots
        return self._galois_one(ct, g, keys, f"rotation by {steps}", keyswitch)

    def conjugate(self, ct: Ciphertext, keys, *, keyswitch: str | None = None) -> Ciphertext:
        """Complex conjugation of every slot (needs ``keygen(conjugation=True)``)."""
        self._check_ct(ct)
        g = automorphism.conjugation_element(self.params.n)
        return self._galois_one(ct, g, keys, "conjugation", keyswitch)

    def _galois_one(self, ct: Ciphertext, g: int, keys, what: str, keyswitch: str | None) -> Ciphertext:
        key = self._galois_keys([g], keys, [what], ct)[0]
        t = self._level_tables(ct.level)
        flow = self._check_dataflow(keyswitch or self.keyswitch)
        data = _rotate_one(ct.data, self._index_map(g), key.data, self.plan, t["modup"], t["moddown"], t["p_inv"],
                           k=self.num_special, n=t["n"], digits=t["digits"], reduction=self.reduction,
                           dataflow=flow)
        return ct.replace(data=data)

    def rotate_many(self, ct: Ciphertext, steps: Sequence[int], keys) -> list[Ciphertext]:
        """Hoisted rotations: one ModUp of c1 shared by all ``steps``; returns one ciphertext per step."""
        self._check_ct(ct)
        steps = [int(s) for s in steps]
        out: list[Ciphertext | None] = [None] * len(steps)
        todo = [(i, s) for i, s in enumerate(steps) if s % ct.slots]
        for i, s in enumerate(steps):
            if s % ct.slots == 0:
                out[i] = ct
        if todo:
            gs = [automorphism.galois_element(self.params.n, s % ct.slots) for _, s in todo]
            rotated = self._galois(ct, gs, keys, [f"rotation by {s}" for _, s in todo])
            for (i, _), r in zip(todo, rotated):
                out[i] = r
        return out  # type: ignore[return-value]

    def _galois_keys(self, elements: Sequence[int], keys, what: Sequence[str], ct: Ciphertext) -> list[SwitchingKey]:
        if isinstance(keys, SwitchingKey):
            key_list = [keys] * len(elements)
            for key, g in zip(key_list, elements):
                if key.galois != g:
                    raise ParameterError(f"the given key is for Galois element {key.galois}, not {g}")
        elif isinstance(keys, EvaluationKeys):
            key_list = [keys.galois_key(g, w) for g, w in zip(elements, what)]
        else:
            raise ParameterError("rotation needs Galois keys: pass the KeySet / EvaluationKeys from keygen")
        for key in key_list:
            self._check_key(key, ct.key_id)
        return key_list

    def _galois(self, ct: Ciphertext, elements: Sequence[int], keys, what: Sequence[str]) -> list[Ciphertext]:
        """Hoisted automorphisms (Max-Parallel ModUp shared by all elements)."""
        key_list = self._galois_keys(elements, keys, what, ct)
        t = self._level_tables(ct.level)
        maps = jnp.stack([self._index_map(g) for g in elements])
        key_data = jnp.stack([key.data for key in key_list])
        data = _rotate_hoisted(ct.data, maps, key_data, self.plan, t["modup"], t["moddown"], t["p_inv"],
                               k=self.num_special, n=t["n"], digits=t["digits"], reduction=self.reduction)
        return [ct.replace(data=data[i]) for i in range(len(elements))]

    def sum_slots(self, ct: Ciphertext, keys) -> Ciphertext:
        """Every slot becomes the sum of all slots (log2(slots) rotations; needs power-of-two rotation keys)."""
        self._check_ct(ct)
        r = 1
        while r < ct.slots:
            ct = self.add(ct, self.rotate(ct, r, keys))
            r *= 2
        return ct


def _crt_centered_float(residues: np.ndarray, moduli: Sequence[int]) -> np.ndarray:
    """Centered CRT value of residues ``(..., k, N)`` as float64 ``(..., N)`` (balanced mixed radix, exact digits).

    Garner's algorithm with digits in ``(-q_i/2, q_i/2]``: ``x = d_0 + q_0 (d_1 + q_1 (d_2 + ...))``; all digit
    arithmetic is exact in int64, and the final Horner evaluation in float64 loses nothing for ``|x| << Q``.
    """
    qs = [int(q) for q in moduli]
    res = residues.astype(np.int64)
    digits = []
    for i, q in enumerate(qs):
        # value of the digits found so far, modulo q
        acc = np.zeros(res.shape[:-2] + res.shape[-1:], dtype=np.int64)
        weight = 1
        for j, d in enumerate(digits):
            acc = (acc + (d % q) * (weight % q)) % q
            weight *= qs[j]
        inv = pow(weight % q, -1, q) if i else 1
        d = ((res[..., i, :] - acc) % q) * inv % q
        d = np.where(d > q // 2, d - q, d)
        digits.append(d)
    out = np.zeros(digits[0].shape, dtype=np.float64)
    for q, d in zip(reversed(qs), reversed(digits)):
        out = out * q + d
    return out
