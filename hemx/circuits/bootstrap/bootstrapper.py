"""Packed CKKS bootstrapping: ModRaise, CoeffsToSlots, EvalMod, SlotsToCoeffs.

Pipeline for a ciphertext at level 0 with scale ``D`` holding slot values ``v`` (``|v| <= 1``), plaintext
polynomial ``m`` (``m ~ D v`` through the encoding):

1. **ModRaise.** The level-0 residues are lifted (INTT, centered basis conversion from the base primes to every
   other prime with the exact
   correction of its ``u q0`` term, NTT) to the top level. The ciphertext now decrypts to ``m + q0 I`` with an integer polynomial
   ``I`` (``|I| <= K``, :func:`~hemx.circuits.bootstrap.mod1.bound_for`) and is *read* at the scale
   ``S ~ q0 (K + 1)`` chosen below, so its slots are ``U (m + q0 I) / S`` (a reinterpretation: no arithmetic).
   **Sparse slots** (``s < N/2``): ``m`` lies in the subring ``Z[X^g]``, ``g = N / 2s``, but ``I`` is dense. The
   trace onto that subring, ``log2(g)`` rotations by ``s, 2s, .., N/4`` slots (over ``N/2``) each added to the
   running sum, keeps the ``X^(g j)`` coefficients times ``g`` and cancels every other one, so the sum is
   ``g (m + q0 I')`` with ``I'`` the subring part of ``I`` (still bounded by ``K``); ``1/g`` is folded into
   CoeffsToSlots' first factor. Every transform then works on ``s`` slots (``2s`` coefficients) instead of ``N/2``.
2. **CoeffsToSlots.** The inverse special FFT (:mod:`~hemx.circuits.bootstrap.dft`, ``cts_levels`` factors, one
   level each, built with :class:`~hemx.circuits.LinearTransform`) puts the coefficients into the slots,
   halved: ``x = c (B w) / 2`` with ``w_j = u_j + i u_{s+j}``, ``u = (m + q0 I) / q0`` and ``c = S / (q0 (K+1))``
   folded into the first factor, so the real and imaginary parts of ``2x`` are ``t = u / (K + 1)`` in [-1, 1].
   ``re = x + conj(x)`` and ``im = i (conj(x) - x)`` (a product by the monomial ``X^(N/2)``, exact) become a
   batch of two.
3. **EvalMod** (:class:`~hemx.circuits.bootstrap.mod1.EvalMod`). A product by the integer ``2^P`` and a rescale
   take the batch from ``S`` to exactly the scale ``E = q_(l-1)``, the rescale divisor of the level EvalMod
   starts at (``S = E * q_l / 2^P`` makes this exact), then ``sin(2 pi u)`` is a Chebyshev interpolant plus
   double angles, with ``E`` as its target scale too. ``E`` and not the context's scale ``D``: a product of two
   ciphertexts at scale ``s`` has scale ``s^2 / q`` after the rescale, so the Chebyshev powers ``T_(2^j)`` drift
   from ``s`` by ``(s / q)^(2^j)``. Where the level divisors are far from ``D`` (boot_16: the 28-bit primes
   = 1 mod 2^17 sit below 2^28, ``q`` is 2^55.4 .. 2^56) an input at ``D`` made intermediate scales fall to
   2^36 and constants round at 2^33: 2^-20 of relative noise, garbage after the ``q0 / D`` amplification.
   Starting at ``E`` the drift is only the ratio of neighbouring divisors (under a bit at boot_16).
4. **SlotsToCoeffs.** ``y_re + i y_im`` (again the monomial) goes through the forward special FFT
   (``stc_levels`` factors) with ``q0 / (2 pi D)`` folded into the last factor: the slots hold
   ``q0 sin(2 pi u) / (2 pi D) ~ m / D = v``.

Errors: the cubic term of the sine (``(2 pi)^2 / 6 * (D / q0)^2`` relative), the interpolation error and the
CKKS noise of EvalMod amplified by ``q0 / D``. Parameter sets for bootstrapping therefore choose the base
``q0 ~ 2^15..2^20 D`` (presets ``boot_*``).

Execution. Steps 1-4 run as **one compiled XLA program** (:attr:`Bootstrapper.compiled`). The circuit is traced
once per arguments' structure (level-0 shape and batch, key set; not the scale, which the circuit does not read) with the context's tables and the encoded
transforms lifted into arguments (:func:`hemx.circuits.lifted.lift_constants`), compiled, kept (the last
:data:`MAX_PROGRAMS`) and called. The result is bit for bit the eager one. Tracing costs in every process (about
12 s at ``boot_12`` on 2 cores); XLA's compilation is served from JAX's persistent cache in later processes. So
the default, ``"auto"``, compiles a structure once its eager calls have run for :data:`AUTO_AFTER_S` seconds, not
counting the time the eager calls spent tracing, lowering and compiling their own steps (a first eager call in a new
process is mostly that: first calls of 31-71 s at ``boot_12`` and 46 s at ``boot_16`` measured on a 2-vCPU Zen 4, which
counted would compile the circuit at every second call). So at ``boot_16`` (7-18 s eagerly) the third or fourth call is compiled, at ``boot_12`` (0.5 s
eagerly, 0.3 s compiled) about the fortieth, and a bootstrap run once or twice does not pay for a compilation. At ``boot_16`` on a 2-vCPU Zen 3 the program took 13.2 s against 18.1 s eagerly
(``hemx bench bootstrap``, alternated in one process), with 1.0 GiB of temporaries, traced and compiled in 42 s. Inside a caller's ``jax.jit`` trace, on a mesh, or
with ``compiled="never"`` the steps run eagerly (traced into the caller's program).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import threading
import time
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from hemx.circuits.bootstrap import dft
from hemx.circuits.bootstrap.parameters import (SUPPORTED_BOUND_AT_DEFAULT_RATIO, BootstrapParameters, BootstrapPlan,
                                                default_message_ratio)
from hemx.circuits.evaluator import CKKSEvaluator, SlotSimulator
from hemx.circuits.lifted import lift_constants
from hemx.circuits.lintrans import DEFAULT_HOISTING, HOISTING, LinearTransform
from hemx.ckks import Ciphertext, Context, EvaluationKeys, KeySet
from hemx.errors import BoundError, BoundWarning, LevelError, ParameterError, PerformanceWarning, external_stacklevel
from hemx.kernels import automorphism, bconv as bconv_kernels
from hemx.ring import RNSRing

META_BTS_BITS = 16  # error amplification of the second iteration (first-pass errors are ~2^-20)
#: ``Bootstrapper.compiled``: "auto" compiles a structure's program once its eager calls took AUTO_AFTER_S,
#: "always" at its first call, "never" runs eagerly
COMPILED = ("auto", "always", "never")
#: "auto": seconds the eager calls of one structure ran (their steps' own tracing and compilation not counted) after
#: which it is compiled: about what compiling the circuit costs (15-45 s on 2 cores), so a program is compiled once
#: the eager calls have taken as long as compiling would (at boot_16 the third or fourth call, at boot_12 about the
#: fortieth)
AUTO_AFTER_S = 20.0
#: compiled circuit programs a bootstrapper keeps (the oldest is dropped first)
MAX_PROGRAMS = 8
#: a program is run only when its temporaries fit this share of the memory available when it is compiled
MEMORY_SHARE = 0.6


@dataclasses.dataclass(frozen=True, eq=False)
class CircuitProgram:
    """The bootstrap circuit compiled for one arguments' structure: ``program(ct, keys)`` -> the refreshed
    ciphertext at the circuit's own scale (``Bootstrapper._refresh``, bit for bit; the caller reads it at the
    input's scale). ``constants``: the lifted tables it reads;
    ``compile_s``: tracing, lowering and compiling; ``temp_bytes``: XLA's temporaries per call."""

    executable: Any
    constants: tuple
    compile_s: float
    temp_bytes: int

    def __call__(self, ct: Ciphertext, keys: EvaluationKeys) -> Ciphertext:
        return self.executable(self.constants, ct, keys)


@dataclasses.dataclass
class ExecutionStats:
    """What :meth:`Bootstrapper.bootstrap` ran: circuits as compiled programs and eagerly, programs compiled and
    their total compilation seconds, programs not run because their temporaries did not fit; for the eager calls
    that ``"auto"`` timed, the seconds they ran (``eager_s``, what :data:`AUTO_AFTER_S` is compared with) and the
    seconds they spent tracing, lowering and compiling their steps (``eager_prepare_s``, not counted)."""

    compiled_calls: int = 0
    eager_calls: int = 0
    compilations: int = 0
    compile_s: float = 0.0
    too_large: int = 0
    eager_s: float = 0.0
    eager_prepare_s: float = 0.0


#: JAX's events for making a program: tracing, lowering, and XLA's compilation or the persistent cache's read (their
#: time spans can nest: a trace may compile what it calls on concrete values, so their union is what is counted)
_PREPARE_EVENTS = frozenset(("/jax/core/compile/jaxpr_trace_duration",
                             "/jax/core/compile/jaxpr_to_mlir_module_duration",
                             "/jax/core/compile/backend_compile_duration"))
_preparing = threading.local()  # .spans: a list of (start, end) while a _prepare_seconds block is open here
_listening = [False]


def _on_span(name: str, start: float, end: float, **_) -> None:
    spans = getattr(_preparing, "spans", None)
    if spans is not None and name in _PREPARE_EVENTS:
        spans.append((start, end))


def _union_seconds(spans: list[tuple[float, float]]) -> float:
    total, reach = 0.0, -math.inf
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


class _prepare_seconds:
    """``with _prepare_seconds() as spent: ...``: ``spent.seconds``, after the block, is the time this thread spent
    in it tracing, lowering and compiling programs (the union of JAX's monitoring time spans; synchronous dispatch
    compiles in the calling thread). Blocks nest: an outer block sees its inner blocks' spans too."""

    seconds = 0.0

    def __enter__(self):
        if not _listening[0]:
            jax.monitoring.register_event_time_span_listener(_on_span)
            _listening[0] = True
        self._outer = getattr(_preparing, "spans", None)
        _preparing.spans = []
        return self

    def __exit__(self, *exc) -> None:
        spans = _preparing.spans
        self.seconds = _union_seconds(spans)
        if self._outer is not None:
            self._outer.extend(spans)
        _preparing.spans = self._outer


def available_memory() -> int:
    """``MemAvailable`` in bytes (Linux), else a large number."""
    try:
        with open("/proc/meminfo") as f:
            return int(next(line for line in f if line.startswith("MemAvailable")).split()[1]) * 1024
    except (OSError, StopIteration, ValueError):
        return 1 << 60


class Bootstrapper:
    """Bootstrapping for one context, prepared once (transforms encoded, EvalMod fitted).

    Most code wants :func:`~hemx.circuits.bootstrap.bootstrapper_for` (the context's bootstrapper, built once) or
    :func:`~hemx.circuits.bootstrap.bootstrap`; build one directly for other choices.

    Args:
        ctx: the :class:`~hemx.Context`, full or sparse slots (``Context(params, slots=s)``): the transforms run
            on ``ctx.slots`` slots, after a trace onto the subring for sparse ones (module docstring).
        parameters: the :class:`~hemx.circuits.bootstrap.BootstrapParameters` of the bootstrap, for
            ``ctx.params`` and ``ctx.slots`` (None: ``BootstrapParameters.create(ctx.params, slots=ctx.slots)``
            with the keyword arguments below).
        k, double_angle, cts_levels, stc_levels, message_ratio: a convenience instead of ``parameters``: those
            given (not None) are passed to :meth:`BootstrapParameters.create
            <hemx.circuits.bootstrap.BootstrapParameters.create>`, which documents them and their defaults. ``message_ratio``: ``r``, the ratio ``R = q0 / D`` at which EvalMod sees the message,
            in bits (default 7 at N = 2^16, one more per halving of N). The input is multiplied by the integer
            ``2^(floor(log2(q0 / D)) - r)`` at level 0 (exact, no level used) and SlotsToCoeffs divides it out, so
            ``R`` lies in ``[2^r, 2^(r + 1))``. A smaller ratio amplifies CKKS noise less (more bits for
            spread-out values such as uniform random slots); a larger one shrinks the sine's cubic error
            ``(2 pi)^2 / 6 * c^3 / R^2`` on large message coefficients ``c`` (a constant vector of ones has
            ``c = 1``: about ``2^-13`` relative at ``R = 2^8``, ``2^-25`` at ``2^14``).
        hoisting: how CoeffsToSlots and SlotsToCoeffs evaluate their linear transforms (``"double"``: baby
            rotations, plaintext products and giant sums over the extended basis, one ModDown per giant rotation;
            ``"single"``: one ModUp for the baby rotations, a ModDown per rotation; ``"auto"``, the default:
            double on CPU with hemx's native kernels, single elsewhere; :mod:`hemx.circuits.lintrans`). An
            attribute: it may be changed after construction (A/B comparisons).
        compiled: how the circuit runs (module docstring, *Execution*): ``"auto"`` (default) as one compiled
            program once the eager calls with the same arguments' structure took :data:`AUTO_AFTER_S` seconds,
            ``"always"`` from the first call, ``"never"`` eagerly. The same result bit for bit. An attribute, like ``hoisting``; ``stats``
            (:class:`ExecutionStats`) counts what ran.

    Attributes:
        parameters: the :class:`~hemx.circuits.bootstrap.BootstrapParameters`; ``slots``, ``k``, ``evalmod``,
            ``plan``, ``message_ratio``, ``premultiply``, ``encapsulation_weight``, ``trace_steps`` and the scales
            (``evalmod_scale``, ``power``, ``raised_scale``) are its values.
        rotations: rotation steps over N/2 slots that :meth:`bootstrap` needs (plus the conjugation key): the
            built transforms' (below ``ctx.slots``) and, for sparse slots, the trace's ``trace_steps`` (equal to
            ``parameters.rotations``); ``galois_elements`` the same as Galois elements, and conjugation's, which
            ``ctx.keygen(bootstrap=bootstrapper)`` makes keys for.
        plan: the level budget (:class:`BootstrapPlan`); ``plan.output_level`` is the level of the result.
    """

    def __init__(self, ctx: Context, parameters: BootstrapParameters | None = None, *, k: int | None = None,
                 double_angle: int | None = None, cts_levels: int | None = None, stc_levels: int | None = None,
                 message_ratio: int | None = None, hoisting: str = DEFAULT_HOISTING, compiled: str = "auto"):
        if not isinstance(ctx, Context):
            raise ParameterError(f"expected a hemx.Context, got {type(ctx).__name__}")
        p = ctx.params
        if hoisting not in HOISTING:
            raise ParameterError(f"hoisting must be one of {HOISTING}, got {hoisting!r}")
        options = {name: v for name, v in (("k", k), ("double_angle", double_angle), ("cts_levels", cts_levels),
                                           ("stc_levels", stc_levels), ("message_ratio", message_ratio))
                   if v is not None}
        if parameters is None:
            parameters = BootstrapParameters.create(p, slots=ctx.slots, **options)
        elif options:
            raise ParameterError(f"pass either parameters or {', '.join(sorted(options))}, not both: the "
                                 "BootstrapParameters already fix them (BootstrapParameters.create(..., k=...))")
        elif not isinstance(parameters, BootstrapParameters):
            raise ParameterError("parameters must be a hemx.BootstrapParameters "
                                 f"(BootstrapParameters.create(ctx.params, slots=ctx.slots)), got {parameters!r:.80}")
        elif parameters.params != p or parameters.slots != max(2, int(ctx.slots)):
            raise ParameterError(
                f"these BootstrapParameters are for other parameters or another slot count ({parameters.slots} "
                f"slots; the context has {ctx.slots}): make them with BootstrapParameters.create(ctx.params, "
                "slots=ctx.slots)")
        if compiled not in COMPILED:
            raise ParameterError(f"compiled must be one of {COMPILED}, got {compiled!r}")
        bp = self.parameters = parameters
        self.ctx = ctx
        self.hoisting = hoisting
        self.compiled = compiled
        self.stats = ExecutionStats()
        # arguments' structure -> CircuitProgram (None: too large, runs eagerly); seconds of eager calls of the
        # structures not compiled yet ("auto")
        self._programs: collections.OrderedDict = collections.OrderedDict()
        self._seen: collections.OrderedDict = collections.OrderedDict()
        # Sparse slots (s < N/2): the trace onto Z[X^(N/2s)] after ModRaise (rotations by s 2^j over N/2 slots)
        # leaves a polynomial whose slots repeat with period s, so every transform runs on s slots.
        # (at least 2: the special FFT's smallest size; one slot is a 2-slot vector whose values repeat)
        self.slots = bp.slots
        #: rotation steps (over N/2 slots) of the trace that makes a sparse ModRaise result sparse again
        self.trace_steps = bp.trace_steps
        slot_ev = CKKSEvaluator(ctx, None, slots=self.slots)
        base_count = p.level_sizes[0]
        self.base_moduli = tuple(p.moduli[:base_count])
        self.q0 = bp.q0
        # a dense (or not very sparse) main secret is switched to an ephemeral sparse one around ModRaise
        self.encapsulation_weight = bp.encapsulation_weight
        self.k, self.evalmod, self.plan = bp.k, bp.evalmod, bp.plan
        self.design_scale = float(p.scale)  # the scale D the SlotsToCoeffs constant assumes
        self.message_ratio = bp.message_ratio
        #: the input is multiplied by 2^premultiply at level 0 (an exact integer product)
        self.premultiply = bp.premultiply
        top = p.max_level
        # EvalMod's input and target scale, the exponent P of the product before it, ModRaise's output scale S
        self.evalmod_scale, self.power, self.raised_scale = bp.evalmod_scale, bp.power, bp.raised_scale
        # CoeffsToSlots: F^-1 in cts_levels factors, c / 2 folded into the first one applied
        fold = self.raised_scale / (self.q0 * (self.k + 1)) / 2.0 / (p.n // (2 * self.slots))  # 1/g: the trace
        cts = dft.grouped_factors(self.slots, self.plan.cts_levels, inverse=True)
        cts[0] = dft.scaled(cts[0], fold)
        self.cts = [LinearTransform(slot_ev, f, level=top - i) for i, f in enumerate(cts)]
        # SlotsToCoeffs: F in stc_levels factors, q0 / (2 pi D) folded into the last one applied
        stc = dft.grouped_factors(self.slots, self.plan.stc_levels, inverse=False)
        stc[-1] = dft.scaled(stc[-1], self.q0 / (2.0 * math.pi * self.design_scale * 2.0 ** self.premultiply))
        stc_top = self.plan.output_level + self.plan.stc_levels
        # EvalMod's output scale is fixed by the parameters (its input is at exactly evalmod_scale): the slot
        # simulator's exact bookkeeping gives it, and the last factor's plaintexts land the result on D
        norm_level = top - self.plan.cts_levels  # level of the product by 2^P
        sim = SlotSimulator(p)
        y = self.eval_mod(sim, sim.encrypt(np.zeros(1), level=norm_level - 1, scale=self.evalmod_scale))
        last = self.plan.output_level + 1
        last_scale = self.design_scale * ctx.rescale_divisor(last) / y.scale
        self.stc = [LinearTransform(slot_ev, f, level=stc_top - i,
                                    plain_scale=last_scale if stc_top - i == last else None)
                    for i, f in enumerate(stc)]
        self.rotations = tuple(sorted({r for lt in self.cts + self.stc for r in lt.rotations} | set(self.trace_steps)))
        #: the Galois elements of those rotations over N/2 slots, and conjugation: ``keygen(bootstrap=self)``
        self.galois_elements = tuple(sorted({automorphism.galois_element(p.n, r) for r in self.rotations}
                                            | {automorphism.conjugation_element(p.n)}))
        # ModRaise: INTT over the base, centered conversion to the other primes, NTT over Q
        method = ctx.ring.ntt_method
        self._base_ring = RNSRing(p.n, self.base_moduli, ntt=method)
        self._q_ring = RNSRing(p.n, p.moduli, ntt=method)
        self._raise_plan = bconv_kernels.make_bconv_plan(self.base_moduli, p.moduli[base_count:], centered=True)
        rest = p.moduli[base_count:]
        self._base_q = jnp.asarray(np.array(self.base_moduli, np.int64).reshape(-1, 1))
        self._lift_p = jnp.asarray(np.array(rest, np.int64).reshape(-1, 1))
        q0 = math.prod(self.base_moduli)
        self._q0_mod_p = jnp.asarray(np.array([q0 % m for m in rest], np.int64).reshape(-1, 1))
        self._i_monomial = ctx.encode(np.full(self.slots, 1j), level=top, scale=1.0,
                                      slots=self.slots)  # X^(N/2): slots times i

    @property
    def params(self):
        """The context's CKKS parameters (what ``ctx.keygen(bootstrap=self)`` checks its own against)."""
        return self.ctx.params

    def __repr__(self) -> str:
        return (f"Bootstrapper(slots={self.slots}, K={self.k}, EvalMod degree {self.evalmod.degree} + "
                f"{self.evalmod.double_angle} double angles, levels {self.plan.top_level} -> "
                f"{self.plan.output_level}, rotation keys {len(self.rotations)})")

    # ---------------------------------------------------------------- steps
    def mod_raise(self, ct: Ciphertext) -> Ciphertext:
        """Level 0 -> top level (the ciphertext then decrypts to ``m + q0 I``), read at scale ``S``."""
        if ct.level != 0:
            raise LevelError(f"ModRaise takes a ciphertext at level 0, got level {ct.level}")
        coeffs = self._base_ring.intt(ct.data)
        lifted = bconv_kernels.bconv(coeffs, self._raise_plan)
        # the fast conversion gives X + u q0 with u = round(sum_i y_i / q_i) (y_i the centered scaled residues);
        # removing u q0 makes the lift exact, so the overflow I of ModRaise is only the one of c0 + c1 s
        y = bconv_kernels.scale_step(coeffs, self._raise_plan).astype(jnp.int64)
        q = self._base_q
        y = jnp.where(y > q // 2, y - q, y)
        u = jnp.round(jnp.sum(y.astype(jnp.float64) / q.astype(jnp.float64), axis=-2, keepdims=True))
        p = self._lift_p
        corr = (u.astype(jnp.int64) % p) * self._q0_mod_p % p  # (u mod p) * (q0 mod p) < 2^62
        lifted = ((lifted.astype(jnp.int64) - corr) % p).astype(jnp.uint32)
        data = self._q_ring.ntt(jnp.concatenate([coeffs, lifted], axis=-2))
        return ct.replace(data=data, level=self.plan.top_level, scale=self.raised_scale)

    def eval_mod(self, ev, t):
        """EvalMod on the stacked batch ``t`` (at :attr:`evalmod_scale`, the level after the product by 2^P), with
        any :mod:`hemx.circuits` evaluator (the :class:`SlotSimulator` included)."""
        return self.evalmod(ev, t, scale=self.evalmod_scale)

    def trace(self, ct: Ciphertext, keys) -> Ciphertext:
        """Sparse slots: the sum of ``ct``'s images under the rotations by multiples of ``s`` (over N/2 slots),
        in ``log2(N / 2s)`` doublings: the subring part of the plaintext times ``N / 2s`` (module docstring)."""
        ctx, slots = self.ctx, ct.slots
        full = ct.replace(slots=self.ctx.params.n // 2)
        for step in self.trace_steps:
            full = ctx.add(full, ctx.rotate(full, step, keys))
        return full.replace(slots=slots)

    def coeffs_to_slots(self, ev, ct):
        for lt in self.cts:
            ct = lt.apply(ct, ev.keys, hoisting=self.hoisting)
        return ct

    def slots_to_coeffs(self, ev, ct):
        for lt in self.stc:
            ct = lt.apply(ct, ev.keys, hoisting=self.hoisting)
        return ct

    @property
    def supported_bound(self) -> float:
        """The largest ``max |x|`` this bootstrapper supports (:attr:`BootstrapParameters.supported_bound`)."""
        return self.parameters.supported_bound

    def check_bound(self, ct: Ciphertext, on_bound: str = "raise") -> None:
        """:class:`BoundError` (or :class:`BoundWarning` with ``on_bound="warn"``) when ``ct.bound`` exceeds
        :attr:`supported_bound`; nothing for an unknown bound (None)."""
        if on_bound not in ("raise", "warn"):
            raise ParameterError(f"on_bound must be 'raise' or 'warn', got {on_bound!r}")
        if ct.bound is None or ct.bound <= self.supported_bound:
            return
        natural = self.parameters.natural_ratio
        best = SUPPORTED_BOUND_AT_DEFAULT_RATIO * 2.0 ** (natural - default_message_ratio(self.ctx.params.log_n))
        fix = (f"Pass message_ratio={natural} (supports {best:g}, about 2 bits less precision on small values), or "
               if ct.bound <= best and self.message_ratio < natural else "")
        factor = 2 ** math.ceil(math.log2(ct.bound / self.supported_bound))
        msg = (f"the ciphertext's bound max|x| <= {ct.bound:.6g} exceeds the {self.supported_bound:g} this bootstrap "
               f"supports (message ratio {self.message_ratio}): larger values lose precision quickly (40 -> 16 bits, "
               f"3000 -> garbage at the default ratio). {fix}{'m' if fix else 'M'}ultiply by 1 / {factor} while a "
               f"level is left (ctx.mul(ct, 1 / {factor})) and by {factor} after the bootstrap (ctx.mul(out, {factor}, "
               "plain_scale=1.0, rescale=False): an exact integer, no level); on_bound='warn' bootstraps anyway (a "
               "loose propagated bound can be tightened with ct.replace(bound=...))")
        if on_bound == "raise":
            raise BoundError(msg)
        warnings.warn(msg, BoundWarning, stacklevel=4)

    def bootstrap(self, ct: Ciphertext, keys: EvaluationKeys, *, iterations: int = 1,
                  refine_bits: int = META_BTS_BITS, on_bound: str = "raise", chunk: int | None = None) -> Ciphertext:
        """A fresh ciphertext at :attr:`plan.output_level` with the same slot values (any batch shape).

        ``ct`` may be at any level (it is dropped to level 0 first); its slot values must lie in [-1, 1].
        A batch is bootstrapped as one: every operation runs on the whole batch and reads each key once, and
        entry ``i`` of the result is bit for bit the bootstrap of entry ``i`` alone. ``chunk``: at most that many
        entries of the leading batch axis at a time (the circuit's intermediate values grow with the batch:
        at ``boot_16`` a pass of 4 peaked at 11.5 GiB with compact keys), the results concatenated; None: the
        whole batch at once.
        ``iterations=2`` bootstraps the error of the first result once more (META-BTS, Bae et al., ePrint
        2022/1167): ``e = out - ct`` at level 0 is multiplied by the integer ``2^refine_bits``, bootstrapped, and
        ``out - e' / 2^refine_bits`` is formed exactly (``out`` times ``2^refine_bits`` minus ``e'``, read at a
        ``2^refine_bits`` larger scale); twice the time, roughly ``refine_bits`` more bits.
        """
        ctx = self.ctx
        ctx.drop_level(ct, ct.level)  # context and type checks
        if isinstance(keys, KeySet):
            keys = keys.evaluation_keys()  # the secret is never needed (nor traced under jax.jit)
        if not isinstance(keys, EvaluationKeys):
            raise ParameterError("bootstrap needs the evaluation keys (KeySet from keygen)")
        if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or not 1 <= iterations <= 3:
            raise ParameterError(f"iterations must be 1, 2 or 3, got {iterations!r}")
        if isinstance(refine_bits, bool) or not isinstance(refine_bits, (int, np.integer)) or not 1 <= refine_bits <= 24:
            raise ParameterError(f"refine_bits must be an integer in [1, 24], got {refine_bits!r}")
        if ct.slots > self.slots:
            raise ParameterError(f"this bootstrapper runs {self.slots}-slot transforms: a ciphertext of {ct.slots} "
                                 "slots needs a context with at least that many (Context(params, slots=...))")
        if iterations > 1 and self.plan.output_level < 1:
            raise LevelError("iterated bootstrapping needs an output level >= 1 (to align the error at level 0)")
        if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1):
            raise ParameterError(f"chunk must be a positive integer (batch entries per pass) or None, got {chunk!r}")
        self.check_bound(ct, on_bound)
        if chunk is not None and ct.batch_shape and ct.batch_shape[0] > chunk:
            parts = [self.bootstrap(ct.replace(data=ct.data[i:i + chunk]), keys, iterations=iterations,
                                    refine_bits=refine_bits, on_bound=on_bound)
                     for i in range(0, ct.batch_shape[0], int(chunk))]
            return parts[0].replace(data=jnp.concatenate([p.data for p in parts]))
        ev = CKKSEvaluator(ctx, keys, slots=self.slots)
        # the context's placement chooses the kernels for the whole circuit, ModRaise's basis conversion included
        # (on a mesh: the JAX kernels, which shard; on one device: the native ones where available)
        with ctx.placement.kernels():
            # inside the circuit the values are not the message's (ModRaise adds q0 I): no bound until the output
            low = ctx.drop_level(ct, 0).replace(slots=self.slots, bound=None)
            out = self._circuit(ev, low)
            factor = float(2 ** int(refine_bits))
            for _ in range(iterations - 1):
                err = ctx.sub(out, low)  # level 0, at low's scale exactly (the higher operand is aligned down)
                # an integer product: values times 2^bits, same scale
                err = ctx.mul(err, factor, plain_scale=1.0, rescale=False)
                fix = self._circuit(ev, err)
                # out * 2^bits - e' * 2^bits / 2^bits, read at a 2^bits larger scale: out - e' / 2^bits exactly
                refined = ctx.sub(ctx.mul(out, factor, plain_scale=1.0, rescale=False), fix.replace(scale=out.scale))
                out = refined.replace(scale=refined.scale * factor)
        return out.replace(slots=ct.slots, bound=ct.bound)  # the same values: the input's bound

    def _circuit(self, ev, ct: Ciphertext) -> Ciphertext:
        """:meth:`_once`, as a compiled program where :attr:`compiled` says so (module docstring, *Execution*)."""
        if self.compiled not in COMPILED:
            raise ParameterError(f"compiled must be one of {COMPILED}, got {self.compiled!r}")
        leaves = jax.tree_util.tree_leaves((ct, ev.keys))
        if any(isinstance(x, jax.core.Tracer) for x in leaves):
            return self._once(ev, ct)  # traced into the caller's program
        if self.compiled == "never" or self.ctx.placement.mesh is not None:
            self.stats.eager_calls += 1
            return self._once(ev, ct)
        given, ct = ct, ct.replace(scale=self.design_scale)  # the program does not read the scale (_refresh)
        structure = (jax.tree_util.tree_structure((ct, ev.keys)), self.hoisting,
                     tuple((x.shape, str(x.dtype)) for x in leaves))
        if structure in self._programs:
            self._programs.move_to_end(structure)
            program = self._programs[structure]
        elif self.compiled == "auto" and self._seen.get(structure, 0.0) < AUTO_AFTER_S:
            # eager: the seconds it ran count towards the structure's compilation, the seconds its steps took to
            # trace and compile do not (they are paid once per process whether the circuit is compiled or not)
            start = time.perf_counter()
            with _prepare_seconds() as spent:
                out = jax.block_until_ready(self._once(ev, given))
            ran = max(0.0, time.perf_counter() - start - spent.seconds)
            self.stats.eager_s += ran
            self.stats.eager_prepare_s += spent.seconds
            self._seen[structure] = self._seen.pop(structure, 0.0) + ran
            while len(self._seen) > 4 * MAX_PROGRAMS:
                self._seen.popitem(last=False)
            self.stats.eager_calls += 1
            return out
        else:
            self._seen.pop(structure, None)
            program = self._programs[structure] = self._compile(ct, ev.keys)
            while len(self._programs) > MAX_PROGRAMS:
                self._programs.popitem(last=False)
        if program is None:
            self.stats.eager_calls += 1
            return self._once(ev, given)
        self.stats.compiled_calls += 1
        return self._read_as(program(ct, ev.keys), given)

    def _compile(self, ct: Ciphertext, keys: EvaluationKeys) -> CircuitProgram | None:
        """The circuit for ``ct``'s and ``keys``' structure, traced once with its tables lifted into arguments and
        compiled; None (with a :class:`PerformanceWarning`) when its temporaries would not fit in memory."""
        start = time.perf_counter()
        lifted = lift_constants(lambda c, k: self._refresh(CKKSEvaluator(self.ctx, k, slots=self.slots), c), ct, keys)
        executable = jax.jit(lifted.fn).lower(lifted.constants, ct, keys).compile()
        analysis = executable.memory_analysis()
        temp = int(getattr(analysis, "temp_size_in_bytes", 0) or 0)
        program = CircuitProgram(executable, lifted.constants, time.perf_counter() - start, temp)
        self.stats.compilations += 1
        self.stats.compile_s += program.compile_s
        available = available_memory()
        if temp > MEMORY_SHARE * available:
            self.stats.too_large += 1
            warnings.warn(f"the compiled bootstrap needs {temp / 2**30:.1f} GiB of temporaries, more than "
                          f"{MEMORY_SHARE:.0%} of the {available / 2**30:.1f} GiB available: it runs eagerly (the "
                          "same result, slower; a smaller batch or chunk= fits)", PerformanceWarning,
                          stacklevel=external_stacklevel())
            return None
        return program

    def _once(self, ev, ct: Ciphertext) -> Ciphertext:
        """The circuit on ``ct`` (level 0): :meth:`_refresh`, read at ``ct``'s scale."""
        return self._read_as(self._refresh(ev, ct), ct)

    def _read_as(self, out: Ciphertext, ct: Ciphertext) -> Ciphertext:
        # the result holds m / D at scale D; read it at the input's scale: m / in_scale, the input's values
        return out.replace(scale=out.scale * ct.scale / self.design_scale, is_complex=ct.is_complex)

    def _refresh(self, ev, ct: Ciphertext) -> Ciphertext:
        """Steps 1-4 on ``ct`` (level 0). Nothing here depends on ``ct.scale`` (ModRaise reads its result at
        :attr:`raised_scale`), so the compiled program serves every input scale (:meth:`_circuit`)."""
        ctx, keys = self.ctx, ev.keys
        if self.premultiply:  # the message to 2^-message_ratio of q0: an integer product, exact, no level
            ct = ctx.mul(ct, float(2 ** self.premultiply), plain_scale=1.0, rescale=False)
        if self.encapsulation_weight is not None:  # to the ephemeral sparse secret, at level 0 (cheap)
            ct = ctx.switch_key(ct, keys.switching_key("to_sparse", "bootstrapping"))
        x = self.mod_raise(ct)
        if self.encapsulation_weight is not None:  # back to the main secret, before any rotation key is used
            x = ctx.switch_key(x, keys.switching_key("from_sparse", "bootstrapping"))
        if self.trace_steps:  # sparse slots: back into the subring (ModRaise's overflow is dense)
            x = self.trace(x, keys)
        x = self.coeffs_to_slots(ev, x)
        conj = ctx.conjugate(x, keys)
        re = ctx.add(x, conj)
        im = ctx.mul(ctx.sub(conj, x), self._i_monomial, rescale=False, auto_scale=False)
        t = ev.stack([re, im])
        t = ctx.rescale(ctx.mul(t, 1.0, plain_scale=float(2 ** self.power), rescale=False, auto_scale=False))
        y = self.eval_mod(ev, t)
        y = ctx.add(ev.take(y, 0), ctx.mul(ev.take(y, 1), self._i_monomial, rescale=False, auto_scale=False))
        return self.slots_to_coeffs(ev, y)


__all__ = ["Bootstrapper", "CircuitProgram", "ExecutionStats", "AUTO_AFTER_S", "COMPILED", "MAX_PROGRAMS",
           "available_memory"]
