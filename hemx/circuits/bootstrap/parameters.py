"""What a bootstrap of given CKKS parameters is, before anything is encoded: :class:`BootstrapParameters`.

Everything here follows from the :class:`~hemx.CKKSParameters` and a few choices (slot count, EvalMod, levels of
the transforms, message ratio): the bound K on ModRaise's overflow, the EvalMod circuit, the level plan and the
scales of the pipeline (:mod:`hemx.circuits.bootstrap.bootstrapper`), and the rotation keys, found from the
non-zero diagonals of the special-FFT factors (:mod:`hemx.circuits.bootstrap.dft`) split as
:class:`~hemx.circuits.LinearTransform` splits them. No context, no keys, no encoding: a compiler can plan a
network's levels and key budget from it, and ``ctx.keygen(bootstrap=bp)`` makes the keys the bootstrap needs.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from hemx.circuits.bootstrap import dft
from hemx.circuits.bootstrap.mod1 import EvalMod, bound_for
from hemx.circuits.lintrans import bsgs_steps
from hemx.ckks import encoder
from hemx.ckks import keygen as ckks_keygen
from hemx.ckks.context import resolve_key_storage
from hemx.ckks.params import CKKSParameters
from hemx.errors import LevelError, ParameterError
from hemx.kernels import automorphism

DEFAULT_CTS_LEVELS = 3
DEFAULT_STC_LEVELS = 3
EPHEMERAL_WEIGHT = 32  # non-zeros of the sparse secret ModRaise runs under (Lattigo and OpenFHE use 32)
MESSAGE_RATIO_BITS_AT_2_16 = 7  # log2(q0 / D) EvalMod sees at N = 2^16 (Lattigo's default LogMessageRatio is 8)
# max |x| a bootstrap supports at the default message ratio, doubling per bit of ratio above it. Measured at boot_12
# (uniform values in [-B, B], full slots, worst slot, absolute bits): ratio 11 (default) B = 1, 2, 4: 24.0, 24.3,
# 24.2; B = 8: 22.9; 16: 20.0; 32: 16.7; 40: 15.8 (3000: garbage). Ratio 13: 22.1 for B <= 16, 20.7 at 32, 19.7 at
# 40. Up to 8 (32 at ratio 13) the sine's cubic term costs at most ~1.4 bits; beyond, 2-3 bits per doubling.
SUPPORTED_BOUND_AT_DEFAULT_RATIO = 8.0


def default_message_ratio(log_n: int) -> int:
    """The default ``log2(q0 / D)`` EvalMod works at: 7 at N = 2^16, one bit more per halving of N.

    The bootstrap's error has two parts that move in opposite directions with the ratio ``R = q0 / D``:
    - CKKS noise at EvalMod's input, amplified by ``(K + 1) R`` and by ``sqrt(N)`` when SlotsToCoeffs turns
      coefficient errors into slot errors: it grows with ``R`` and with ``N``;
    - the sine's cubic term, ``(2 pi)^2 / 6 * c^3 / R^2`` on a coefficient ``c`` of the message: it shrinks with
      ``R``. For uniform slot values the coefficients are ``~ 1 / sqrt(3N)``, smaller at larger ``N``.
    Balancing the two gives a smaller ratio at larger rings (Lattigo shifts its default the same way). Measured
    at boot_16 (uniform values, mean / worst bits): ratio 8 gives 24.0 / 20.9, ratio 7 gives 25.0 / 21.9; a
    constant vector of ones loses to the cubic term, 12.8 bits at ratio 7 (docs/bootstrap.md).
    """
    return MESSAGE_RATIO_BITS_AT_2_16 + max(0, 16 - int(log_n))


@dataclasses.dataclass(frozen=True)
class BootstrapPlan:
    """Levels of the bootstrapping circuit (top first) and what is left for the user."""

    top_level: int
    cts_levels: int
    evalmod_depth: int
    stc_levels: int

    @property
    def depth(self) -> int:
        """Levels the bootstrap consumes after ModRaise (the product by 2^P included)."""
        return self.cts_levels + 1 + self.evalmod_depth + self.stc_levels

    @property
    def output_level(self) -> int:
        return self.top_level - self.depth


def choose_evalmod(k: int, double_angle: int | None = None) -> EvalMod:
    """The EvalMod circuit for the overflow bound ``k``: with ``double_angle`` double angles, or (None) the choice
    of least depth, then least degree, over 1 to 5 double angles."""
    if double_angle is not None:
        return EvalMod.create(k, double_angle=double_angle)
    best = None
    for r in range(1, 6):
        try:
            cand = EvalMod.create(k, double_angle=r)
        except ParameterError:
            continue
        if best is None or (cand.depth, cand.degree) < (best.depth, best.degree):
            best = cand
    if best is None:
        raise ParameterError(f"no EvalMod approximation found for K = {k}")
    return best


@functools.lru_cache(maxsize=64)
def transform_rotations(slots: int, levels: int, *, inverse: bool) -> tuple[int, ...]:
    """Rotation steps (below ``slots``) of CoeffsToSlots (``inverse=True``) or SlotsToCoeffs in ``levels`` factors:
    each factor's non-zero diagonals (:func:`~hemx.circuits.bootstrap.dft.grouped_factors`, host numpy) split into
    baby and giant steps as :class:`~hemx.circuits.LinearTransform` splits them. Nothing is encoded."""
    steps: set[int] = set()
    for factor in dft.grouped_factors(slots, levels, inverse=inverse):
        nonzero = [k for k, d in factor.items() if np.any(np.abs(d) > 0)]
        steps.update(bsgs_steps(nonzero, slots)[3])
    return tuple(sorted(steps))


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class BootstrapParameters:
    """A checked, immutable description of one bootstrap of ``params`` (:meth:`create`; module docstring).

    Fields (the choices; :meth:`create` fills the defaults, and constructing one directly checks them the same way):
        params: the :class:`~hemx.CKKSParameters`.
        slots: ``s``, the slot count the transforms run on (a power of two, ``2 <= s <= N/2``; a sparse context's
            slot count, at least 2).
        k: bound on ModRaise's overflow ``|I|``.
        evalmod: the :class:`~hemx.circuits.bootstrap.EvalMod` circuit (for this ``k``).
        cts_levels, stc_levels: levels (FFT factors) of CoeffsToSlots and SlotsToCoeffs.
        message_ratio: ``log2(q0 / D)`` EvalMod sees the message at, in ``[1, natural_ratio]``.
        encapsulation_weight: non-zeros of the ephemeral sparse secret ModRaise runs under (None: the main secret
            is sparse enough, no switch).

    Derived (computed on construction):
        plan: the level budget (:class:`BootstrapPlan`); ``depth``, ``top_level``, ``output_level`` read it.
        q0: the base modulus (product of the level-0 primes), as a float.
        premultiply: the input is multiplied by ``2^premultiply`` at level 0 (``natural_ratio - message_ratio``).
        evalmod_scale: EvalMod's input and target scale (the rescale divisor of the level it starts at).
        power: ``P``, the exponent of the integer product before EvalMod; ``raised_scale``: ``S``, the scale
            ModRaise's output is read at (``evalmod_scale * q_l / 2^P``).
        trace_steps: rotation steps (over N/2 slots) of the trace of a sparse bootstrap (empty at full slots).
        rotations: every rotation step (over N/2 slots) the bootstrap uses: the transforms' (below ``slots``) and
            the trace's, sorted.
        galois_elements: those rotations' Galois elements and the conjugation's, sorted: what
            ``ctx.keygen(bootstrap=...)`` makes keys for.
    """

    params: CKKSParameters
    slots: int
    k: int
    evalmod: EvalMod
    cts_levels: int = DEFAULT_CTS_LEVELS
    stc_levels: int = DEFAULT_STC_LEVELS
    message_ratio: int | None = None
    encapsulation_weight: int | None = EPHEMERAL_WEIGHT
    plan: BootstrapPlan = dataclasses.field(init=False, compare=False)
    q0: float = dataclasses.field(init=False, compare=False, repr=False)
    premultiply: int = dataclasses.field(init=False, compare=False, repr=False)
    evalmod_scale: float = dataclasses.field(init=False, compare=False, repr=False)
    power: int = dataclasses.field(init=False, compare=False, repr=False)
    raised_scale: float = dataclasses.field(init=False, compare=False, repr=False)
    trace_steps: tuple[int, ...] = dataclasses.field(init=False, compare=False, repr=False)
    rotations: tuple[int, ...] = dataclasses.field(init=False, compare=False, repr=False)
    galois_elements: tuple[int, ...] = dataclasses.field(init=False, compare=False, repr=False)

    @classmethod
    def create(cls, params: CKKSParameters, *, slots: int | None = None, k: int | None = None,
               double_angle: int | None = None, cts_levels: int = DEFAULT_CTS_LEVELS,
               stc_levels: int = DEFAULT_STC_LEVELS, message_ratio: int | None = None) -> "BootstrapParameters":
        """The bootstrap of ``params`` with these choices (defaults as :class:`~hemx.circuits.bootstrap.Bootstrapper`).

        Args:
            params: the CKKS parameters (a ``boot_*`` preset, or any chain with enough levels).
            slots: the context's slot count (None: ``N/2``, full slots); one slot runs the 2-slot transforms.
            k: bound on ModRaise's overflow ``|I|``; default from the secret's Hamming weight (:func:`bound_for`):
                the main secret's if it has at most :data:`EPHEMERAL_WEIGHT` non-zeros, else the ephemeral sparse
                secret's (sparse-secret encapsulation).
            double_angle: double-angle steps of EvalMod; default: the choice of least depth, then least degree.
            cts_levels, stc_levels: levels (FFT factors) of CoeffsToSlots and SlotsToCoeffs.
            message_ratio: ``log2(q0 / D)`` at EvalMod (default :func:`default_message_ratio`, at most the
                parameters' own ``floor(log2(q0 / D))``).

        Raises:
            ParameterError: a bad value (slot count, levels, ratio, K); LevelError: the parameters have too few
            levels for the bootstrap.
        """
        if not isinstance(params, CKKSParameters):
            raise ParameterError(f"expected hemx.CKKSParameters, got {type(params).__name__}")
        slots = params.n // 2 if slots is None else encoder.check_slots(params.n, slots)
        sparse_main = params.hamming_weight is not None and params.hamming_weight <= EPHEMERAL_WEIGHT
        weight = params.hamming_weight if sparse_main else EPHEMERAL_WEIGHT
        k = bound_for(weight, params.n) if k is None else _positive_int("k", k)
        return cls(params, max(2, int(slots)), k, choose_evalmod(k, double_angle),
                   cts_levels=cts_levels, stc_levels=stc_levels, message_ratio=message_ratio,
                   encapsulation_weight=None if sparse_main else EPHEMERAL_WEIGHT)

    def __post_init__(self):
        p = self.params
        if not isinstance(p, CKKSParameters):
            raise ParameterError(f"expected hemx.CKKSParameters, got {type(p).__name__}")
        slots = encoder.check_slots(p.n, self.slots)
        if slots < 2:
            raise ParameterError("the bootstrapping transforms run on at least 2 slots (a 1-slot context: 2)")
        k = _positive_int("k", self.k)
        if not isinstance(self.evalmod, EvalMod) or self.evalmod.k != k:
            raise ParameterError(f"evalmod must be an EvalMod for K = {k} (EvalMod.create(k, ...)), got "
                                 f"{self.evalmod!r:.80}")
        cts, stc = _positive_int("cts_levels", self.cts_levels), _positive_int("stc_levels", self.stc_levels)
        weight = self.encapsulation_weight
        if weight is not None:
            weight = _positive_int("encapsulation_weight", weight)
        plan = BootstrapPlan(p.max_level, cts, self.evalmod.depth, stc)
        if plan.output_level < 0:
            raise LevelError(
                f"bootstrapping needs {plan.depth} levels (CoeffsToSlots {cts}, scaling 1, EvalMod "
                f"{self.evalmod.depth}, SlotsToCoeffs {stc}); the parameters have {p.max_level}: use a "
                "boot_* preset or more levels")
        q0 = float(math.prod(p.moduli[:p.level_sizes[0]]))
        natural = int(math.floor(math.log2(q0 / float(p.scale))))
        ratio = self.message_ratio
        if ratio is None:
            ratio = min(default_message_ratio(p.log_n), natural)
        elif isinstance(ratio, bool) or not isinstance(ratio, (int, np.integer)) or not 1 <= ratio <= natural:
            raise ParameterError(f"message_ratio must be an integer in [1, {natural}] (log2(q0 / scale) of these "
                                 f"parameters), got {ratio!r}")
        norm_level = plan.top_level - plan.cts_levels  # level of the product by 2^P
        # EvalMod's input and target scale: the divisor of the level it starts at, so the Chebyshev powers keep
        # their scales near the level divisors (an input at the context's scale drifts by (scale / q)^(2^j))
        evalmod_scale = p.rescale_divisor(norm_level - 1)
        divisor = p.rescale_divisor(norm_level)
        power = int(round(math.log2(evalmod_scale * divisor / (q0 * (k + 1)))))
        if power < 1:
            raise ParameterError("the base q0 is too large for this scale: bootstrapping needs "
                                 "q0 (K + 1) < scale * q_l")
        n = p.n
        trace = tuple(slots << j for j in range(int(math.log2(n // 2 // slots))))
        rotations = tuple(sorted(set(transform_rotations(slots, cts, inverse=True))
                                 | set(transform_rotations(slots, stc, inverse=False)) | set(trace)))
        elements = tuple(sorted({automorphism.galois_element(n, r) for r in rotations}
                                | {automorphism.conjugation_element(n)}))
        values = dict(slots=slots, k=k, cts_levels=cts, stc_levels=stc, message_ratio=int(ratio),
                      encapsulation_weight=weight, plan=plan, q0=q0, premultiply=natural - int(ratio),
                      evalmod_scale=evalmod_scale, power=power, raised_scale=evalmod_scale * divisor / 2.0 ** power,
                      trace_steps=trace, rotations=rotations, galois_elements=elements)
        for name, value in values.items():
            object.__setattr__(self, name, value)

    # ---------------------------------------------------------------- derived values
    @property
    def depth(self) -> int:
        """Levels the bootstrap consumes after ModRaise."""
        return self.plan.depth

    @property
    def top_level(self) -> int:
        """The level ModRaise lifts to (the parameters' top level)."""
        return self.plan.top_level

    @property
    def output_level(self) -> int:
        """The level of the bootstrap's result."""
        return self.plan.output_level

    @property
    def double_angle(self) -> int:
        return self.evalmod.double_angle

    @property
    def degree(self) -> int:
        """Degree of EvalMod's Chebyshev interpolant."""
        return self.evalmod.degree

    @property
    def natural_ratio(self) -> int:
        """``floor(log2(q0 / D))``: the largest message ratio these parameters allow."""
        return self.premultiply + self.message_ratio

    @property
    def supported_bound(self) -> float:
        """The largest ``max |x|`` this bootstrap supports (its message ratio; ``SUPPORTED_BOUND_AT_DEFAULT_RATIO``
        at the ring's default ratio, doubling per bit above it): beyond it the sine's cubic term costs precision
        quickly (measured at boot_12: 8 -> 22.9 bits, 40 -> 15.8, 3000 -> garbage)."""
        return SUPPORTED_BOUND_AT_DEFAULT_RATIO * 2.0 ** (self.message_ratio - default_message_ratio(self.params.log_n))

    @property
    def key_count(self) -> int:
        """Switching keys the bootstrap adds: one per Galois element (rotations and conjugation) and the two
        encapsulation keys (s -> s', s' -> s) where ModRaise runs under an ephemeral secret. The
        relinearization key, which any product needs, is not counted."""
        return len(self.galois_elements) + (2 if self.encapsulation_weight is not None else 0)

    def key_bytes(self, *, key_storage: str = "auto") -> int:
        """Bytes of the :attr:`key_count` keys, each serving every level (:func:`hemx.ckks.keygen.key_bytes`):
        ``key_storage`` as ``Context(key_storage=...)`` ("auto": compact where the native kernels expand the
        keys' uniform halves, full elsewhere)."""
        compact = resolve_key_storage(key_storage) == "compact"
        return self.key_count * ckks_keygen.key_bytes(self.params, compact=compact)

    def __repr__(self) -> str:
        return (f"BootstrapParameters(N=2^{self.params.log_n}, slots={self.slots}, K={self.k}, EvalMod degree "
                f"{self.degree} + {self.double_angle} double angles, levels {self.top_level} -> {self.output_level}, "
                f"message ratio {self.message_ratio}, {len(self.rotations)} rotations, {self.key_count} keys)")


__all__ = ["BootstrapParameters", "BootstrapPlan", "choose_evalmod", "default_message_ratio", "transform_rotations",
           "DEFAULT_CTS_LEVELS", "DEFAULT_STC_LEVELS", "EPHEMERAL_WEIGHT", "SUPPORTED_BOUND_AT_DEFAULT_RATIO"]
