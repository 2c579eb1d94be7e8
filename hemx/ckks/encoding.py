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
from hemx.kernels import ntt as ntt_kernels

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
        self._subplans: dict = {}  # block -> the subring's NTT plan (encode_compact)

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

    def encode_compact(self, values, *, level: int, scale: float, slots: int | None = None,
                       special: bool = False) -> tuple[np.ndarray, list, list | None]:
        """Encode host values ``(count, slots)`` row by row, each at its period: ``(blocks, plaintexts, special)``.

        Row ``i``'s integer polynomial (the one :meth:`encode` makes, bit for bit) is a polynomial in ``X^b``,
        ``b = blocks[i]`` the largest such power of two (at most N/2): a row whose slot values repeat with period p
        has ``b >= N / 2p``. Its NTT values then come in runs of ``b`` equal ones; ``plaintexts[i]`` holds one value
        per run, data ``(limbs, N / b)`` (:func:`hemx.ckks.evaluator.widen` by ``b`` gives :meth:`encode`'s
        plaintext exactly). They are computed in the subring ``Z[Y]/(Y^(N/b) + 1)`` (an NTT of ``N / b`` points on
        the ring's roots to the power ``b``, :func:`hemx.kernels.ntt.subring_roots`), so a row of period p costs
        ``2p / N`` of a full encoding. ``special``: also the residues modulo the special primes ``P``, data
        ``(num_p, N / b)`` per row (double-hoisted products are formed over ``Q_l P``); else None. The checks and
        the ``bound`` are :meth:`encode`'s (one bound for the batch). Host values only (a linear transform's
        diagonals); one device (the rows are placed as :meth:`encode` places a plaintext, not sharded)."""
        level = int(level)
        num_q = self.params.limbs_at_level(level)
        scale = self.scales.check_encode_scale(scale)
        slots = self.slots if slots is None else encoder.check_slots(self.params.n, slots)
        z, is_complex = encoder.slot_values(values, slots, self.params.n)
        if isinstance(z, jax.core.Tracer) or z.ndim != 2:
            raise ParameterError("encode_compact takes host values (count, slots), not traced ones or another shape")
        n = self.params.n
        with jax.ensure_compile_time_eval():
            coeffs, top = encoder.embed_coeffs(z, scale, encoder.embed_tables(slots), n=n)
        encoder.check_peak(float(top), scale, self.scales.log_q(num_q))
        host = np.asarray(coeffs)
        blocks = subring_blocks(host)
        pow2 = encoder.pow2_table(tuple(self.params.moduli))[:num_q]
        pow2_p = encoder.pow2_table(tuple(self.params.special_moduli)) if special and self.num_p else None
        meta = dict(level=level, scale=scale, slots=slots, is_complex=is_complex, context_id=self.context_id,
                    bound=round_bound(peak(z)))
        plaintexts: list = [None] * len(host)
        residues_p: list | None = [None] * len(host) if pow2_p is not None else None
        for block in np.unique(blocks):
            rows = np.nonzero(blocks == block)[0]
            plan = self._subring_plan(int(block))
            c = jnp.asarray(host[rows, :: int(block)])
            with jax.ensure_compile_time_eval():
                data = np.asarray(evaluator.float_ntt_q(c, pow2, plan, num_p=self.num_p, num_q=num_q))
                data_p = (None if pow2_p is None else
                          np.asarray(evaluator.float_ntt_q(c, pow2_p, plan, num_p=0, num_q=self.num_p)))
            for j, r in enumerate(rows):  # host rows of one transfer, each put back on the device
                plaintexts[r] = Plaintext(jnp.asarray(data[j]), **meta)
                if data_p is not None:
                    residues_p[r] = jnp.asarray(data_p[j])
        return blocks, plaintexts, residues_p

    def _subring_plan(self, block: int):
        """The NTT plan of the subring of degree N / block over the plan's limbs (P then Q), on the ring's roots to
        the power ``block``: the native kernel's tables where the ring's plan is native, the JAX butterfly's
        otherwise (every method gives the same values). Built once per block."""
        plans = self._subplans
        if block == 1:
            return self.plan
        if block not in plans:
            n = self.params.n
            moduli = [int(q) for q in np.asarray(self.plan.table.q).ravel()]
            native = self.plan.method == ntt_kernels.NATIVE_METHOD
            method = ntt_kernels.NATIVE_METHOD if native else "butterfly"
            plans[block] = ntt_kernels.make_plan(n // block, moduli, method, reduction=self.plan.reduction,
                                                 psi=ntt_kernels.subring_roots(n, moduli, block))
        return plans[block]

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


def subring_blocks(coeffs: np.ndarray) -> np.ndarray:
    """Per row of integer coefficients ``(count, N)``: the largest power of two ``b <= N / 2`` such that every
    non-zero coefficient sits at a multiple of ``b`` (the row is a polynomial in ``X^b``), as an int64 array."""
    coeffs = np.asarray(coeffs)
    n = coeffs.shape[-1]
    idx = np.arange(n, dtype=np.int64)
    low = np.where(idx == 0, n, idx & -idx)  # the largest power of two dividing each index (n for index 0)
    masked = np.where(coeffs != 0, low[None, :], n)
    return np.minimum(masked.min(axis=1), n // 2).astype(np.int64)
