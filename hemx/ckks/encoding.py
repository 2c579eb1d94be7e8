"""The CKKS encoder: slot values <-> plaintexts ``(..., limbs, N)`` for one parameter set and NTT plan.

:class:`Encoder` is the front of :mod:`hemx.ckks.encoder`'s functions (the canonical embedding, the exact
residue reduction and the decoding): it checks the values and the scale, encodes at a level's managed scale
(:class:`~hemx.ckks.scale_policy.ScalePolicy`) and tags the plaintext with its context's id. A
:class:`~hemx.ckks.context.Context` holds one as ``ctx.encoder``; it can also be built on its own from the
parameters and an NTT plan.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from hemx.ckks import encoder, evaluator
from hemx.ckks import placement as placement_mod
from hemx.ckks.ciphertext import Plaintext
from hemx.ckks.params import CKKSParameters
from hemx.ckks.scale_policy import ScalePolicy, peak, round_bound
from hemx.errors import ContextMismatchError, ParameterError
from hemx.kernels import modarith

on_placement = placement_mod.on_placement


class Encoder:
    """Encodes and decodes slot values for one parameter set.

    Args:
        params: the :class:`CKKSParameters`.
        plan: the NTT plan of the ``P + Q`` ring (``Context.plan``: ``RNSRing(params.n, P + Q moduli).plan``).
        slots: slots per plaintext (power of two <= N/2, default N/2); fewer values are zero-padded.
        context_id: the id plaintexts are tagged with (a context's ``id``; 0 for a free-standing encoder).
        placement: where results are placed (:mod:`hemx.ckks.placement`; default one device).
    """

    def __init__(self, params: CKKSParameters, plan, *, slots: int | None = None, context_id: int = 0,
                 placement=placement_mod.SINGLE_DEVICE):
        if not isinstance(params, CKKSParameters):
            raise ParameterError("Encoder needs a CKKSParameters instance")
        self.params, self.plan, self.context_id, self.placement = params, plan, context_id, placement
        self.slots = encoder.check_slots(params.n, slots if slots is not None else params.n // 2)
        self.num_p = len(params.special_moduli)
        self.scales = ScalePolicy(params)
        self._pow2 = None

    def __repr__(self) -> str:
        return f"Encoder({self.params.describe()}, slots={self.slots})"

    @on_placement()
    def encode(self, values, *, level: int | None = None, scale: float | None = None,
               slots: int | None = None) -> Plaintext:
        """Encode ``(..., count)`` values (count <= slots; real or complex) at ``level`` (default top) and
        ``scale`` (default the level's managed scale, :meth:`ScalePolicy.level_scale`) -> a plaintext
        ``(..., limbs, N)``. The plaintext's ``bound`` is ``max |value|`` rounded up to a power of two.

        ``slots`` overrides the encoder's slot count (a power of two <= N/2), e.g. full-slot plaintexts for the
        bootstrapping transforms of a sparse context.

        The encoder is :func:`hemx.ckks.encoder.encode_ntt`. Host values are encoded at concrete time, also inside
        a ``jax.jit`` trace (where the plaintext enters the program as a constant), and checked: finite, and within
        half the level's modulus once scaled (:class:`~hemx.errors.SlotError`,
        :class:`~hemx.errors.OverflowBoundError`). Traced values (an argument of the program) are encoded inside
        the program by the same function, bit for bit the plaintext of the same values given on the host; they
        cannot be checked, and the plaintext's ``bound`` is None (unknown)."""
        level = self.params.max_level if level is None else level
        num_q = self.params.limbs_at_level(level)
        level = int(level)
        scale = self.scales.level_scale(level) if scale is None else self.scales.check_encode_scale(scale)
        slots = self.slots if slots is None else encoder.check_slots(self.params.n, slots)
        z, is_complex = encoder.slot_values(values, slots, self.params.n)
        tables, pow2 = encoder.embed_tables(slots), encoder.pow2_table(self.params.moduli)[:num_q]

        def encode():
            return encoder.encode_ntt(z, scale, tables, pow2, self.plan, n=self.params.n, num_p=self.num_p,
                                      num_q=num_q)

        if isinstance(z, jax.core.Tracer):  # traced values: encoded inside the program
            return Plaintext(encode()[0], level, scale, slots, is_complex, self.context_id)
        # host values: encoded at concrete time even inside a jit trace, where they enter as a constant (an NTT
        # of a constant in the trace would make XLA constant-fold it, which is very slow to compile)
        with jax.ensure_compile_time_eval():
            data, top = encode()
        encoder.check_peak(float(top), scale, self.scales.log_q(num_q))
        return Plaintext(data, level, scale, slots, is_complex, self.context_id, bound=round_bound(peak(z)))

    @on_placement(place=False)
    def decode(self, pt: Plaintext) -> np.ndarray:
        """Decode a plaintext ``(..., limbs, N)`` back to slot values ``(..., slots)``."""
        if pt.context_id != self.context_id:
            raise ContextMismatchError("the plaintext belongs to another context")
        num_q = self.params.limbs_at_level(pt.level)
        coeffs = evaluator.intt_q(pt.data, self.plan, num_p=self.num_p, num_q=num_q)
        return encoder.decode_residues(np.asarray(coeffs), self.params.moduli[:num_q], n=self.params.n,
                                       slots=pt.slots, scale=pt.scale, is_complex=pt.is_complex)

    def to_ntt_q(self, ints: np.ndarray, level: int) -> jax.Array:
        """Integer coefficients ``(..., N)`` -> uint32 NTT-domain residues ``(..., limbs, N)`` over ``Q_level``.

        ``ints``: int64 or Python ints, or integer-valued float64 (:func:`hemx.ckks.encoder.embed`'s output, reduced
        exactly at any magnitude by :func:`~hemx.ckks.encoder.float_residues`)."""
        num_q = self.params.limbs_at_level(level)
        ints = np.asarray(ints)
        if ints.dtype == np.float64:  # the residues are formed in the kernel (no host integers)
            if not np.all(np.isfinite(ints)):
                raise ParameterError("coefficients must be finite")
            if self._pow2 is None:
                self._pow2 = modarith.pow2_table(self.params.moduli)
            return evaluator.float_ntt_q(jnp.asarray(ints), self._pow2[:num_q], self.plan, num_p=self.num_p,
                                         num_q=num_q)
        res = jnp.asarray(encoder.residues(ints, self.params.moduli[:num_q]))
        return evaluator.ntt_q(res, self.plan, num_p=self.num_p, num_q=num_q)
