"""The CKKS context: the thin front that composes parameters, tables, key generation, encryption and evaluation.

A :class:`Context` owns the parameters, the ``P + Q`` RNS ring (NTT plan and tables) and the per-level tables
(:mod:`hemx.ckks.tables`). Key generation lives in :mod:`hemx.ckks.keygen`, encryption and decryption in
:mod:`hemx.ckks.encryptor`, encoding in :mod:`hemx.ckks.encoder`, the jitted kernels in
:mod:`hemx.ckks.evaluator`; the methods here check their inputs, track level and scale, and call those. Every
operation accepts ciphertexts with any leading batch shape and runs as one jit-compiled kernel call per shape
(TensorFHE's operation-level batching), and every evaluation operation traces under ``jax.jit`` and
``jax.export`` on a fresh context (tables are built at concrete time, see :class:`tables.TableCache`).

Scales: ``add`` / ``sub`` align operands whose scales differ by less than ``AUTO_SCALE_MAX_RATIO`` (they were
divided by different primes) exactly, with an integer constant folded into a rescale
(:meth:`Context._match_scales`); farther apart scales raise ``ScaleMismatchError``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
import weakref
from typing import Iterable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from hemx.ckks import checks, encoder, encryptor, evaluator, keygen as keygen_mod
from hemx.ckks import keyswitch as ks
from hemx.ckks import placement as placement_mod
from hemx.ckks.ciphertext import Ciphertext, Plaintext
from hemx.ckks.keys import EvaluationKeys, KeySet, PublicKey, SecretKey, SwitchingKey, new_id
from hemx.ckks.params import CKKSParameters
from hemx.ckks.sampling import Sampler
from hemx.ckks.tables import LevelTables, pack_tree, unpack_tree
from hemx.ckks.validation import check_int, is_int, is_real
from hemx.errors import (
    ContextMismatchError,
    DecryptionWarning,
    KeyMismatchError,
    LevelError,
    OverflowBoundError,
    ParameterError,
    PrecisionError,
    ScaleMismatchError,
    ShapeError,
    SlotError,
)
from hemx.kernels import automorphism, modarith, native
from hemx import plan as planner
from hemx.ring import RNSRing

SCALE_RTOL = 1e-9
#: How switching keys are held in memory (``Context(..., key_storage=...)``): "compact" keeps each key's b halves
#: and a 32-byte stream key, its uniform halves generated inside every key switch (half the memory; the native CPU
#: kernels generate them as they go, other backends expand them first); "full" keeps both halves; "auto" is compact
#: where the native kernels have the seeded inner product, full elsewhere.
KEY_STORAGE = ("auto", "compact", "full")

def resolve_key_storage(storage: str = "auto") -> str:
    """How a Context made with ``key_storage=storage`` holds switching keys: "compact" or "full" ("auto": compact
    where the native kernels generate the uniform halves inside the key switch, full elsewhere)."""
    if storage not in KEY_STORAGE:
        raise ParameterError(f"key_storage must be one of {KEY_STORAGE}, got {storage!r}")
    if storage == "auto":
        return "compact" if native.has_seeded_keys() else "full"
    return storage


@functools.lru_cache(maxsize=256)
def _bound_callable(fn, layouts: tuple, statics: tuple):
    """``jax.jit`` of ``fn(*data, *trees, **statics)`` taking each tree as the packed buffers of its layout.

    Shared by every context whose trees have the same layouts (structure, shapes, static metadata), so contexts
    with equal parameters share compiled programs, as the evaluator's own jitted functions do. Built only from
    hashable static values; ``fn`` is one of :mod:`hemx.ckks.evaluator`'s jitted kernels, traced inside.
    """
    kwargs = dict(statics)
    total = sum(layout.num_buffers for layout in layouts)

    def run(*args):
        cut = len(args) - total
        data, rest = args[:cut], args[cut:]
        trees, pos = [], 0
        for layout in layouts:
            trees.append(unpack_tree(rest[pos : pos + layout.num_buffers], layout))
            pos += layout.num_buffers
        return fn(*data, *trees, **kwargs)

    run.__name__ = f"bound_{getattr(fn, '__name__', 'op')}"
    return jax.jit(run)


def _on_placement(*, place: bool = True):
    """Decorator of :class:`Context`'s public operations: on a mesh (``ctx.mesh`` set) the operation runs inside
    its placement's kernel block (:meth:`hemx.ckks.placement.Placement.kernels`: the native kernels off) and, with
    ``place``, its result (ciphertext, plaintext, key set, or a list of them) is placed
    (:meth:`~hemx.ckks.placement.Placement.place`; inner calls, e.g. ``sub`` -> ``add``, are placed too); on one
    device the operation is called as it is."""

    def wrap(method):
        @functools.wraps(method)
        def op(self, *args, **kwargs):
            if self.mesh is None:
                return method(self, *args, **kwargs)
            with self.placement.kernels():
                out = method(self, *args, **kwargs)
                return self.placement.place(out) if place else out

        return op

    return wrap


def _with_data(ct, data, **changes):
    """``ct.replace(data=data, **changes)`` without ``dataclasses.replace``'s per-call field introspection (a few
    microseconds, a tenth of an HE-Add at N = 2^12): a copy of the frozen dataclass's attributes."""
    out = object.__new__(type(ct))
    out.__dict__.update(ct.__dict__, data=data, **changes)
    return out


def managed_scales(params: CKKSParameters) -> tuple[float, ...]:
    """:meth:`Context.level_scale` of every level, level 0 first: ``T_0 = params.scale``,
    ``T_l = min(D_l, sqrt(T_{l-1} D_l))`` with ``D_l`` the product of the primes of level ``l``."""
    scales, pos = [float(params.scale)], params.level_sizes[0]
    for size in params.level_sizes[1:]:
        d = float(math.prod(params.moduli[pos : pos + size]))
        scales.append(min(d, math.sqrt(scales[-1] * d)))
        pos += size
    return tuple(scales)


def _peak(values) -> float:
    """``max |value|`` of host values (0 for none)."""
    z = np.abs(np.asarray(values))
    return float(np.max(z)) if z.size else 0.0


def _round_bound(peak: float) -> float:
    """``peak`` rounded up to a power of two (0 stays 0): a sound bound that takes few distinct values."""
    return 2.0 ** math.ceil(math.log2(peak)) if peak > 0 else 0.0


def _add_bounds(a, b):
    """Bound of a sum (None if either is unknown, or if it overflows a float: static metadata stays comparable)."""
    out = None if a is None or b is None else float(a) + float(b)
    return out if out is not None and math.isfinite(out) else None


def _mul_bounds(a, b):
    """Bound of a product (None if either is unknown, or if it overflows a float)."""
    out = None if a is None or b is None else float(a) * float(b)
    return out if out is not None and math.isfinite(out) else None


# a scale below this many bits over the noise (~ sqrt(N) after a rescale) leaves too little precision: refused
MIN_SCALE_MARGIN_BITS = 10
# aligning a ciphertext to another scale with rescale(ct * c) records the target scale; the integer c's rounding
# changes the true scale by a relative 0.5 / c, so c must be at least this large (far below every noise)
MIN_ALIGN_FACTOR = 2.0 ** 40

# add/sub align the scales of two ciphertexts automatically when they differ by less than this factor (scales
# divided by different primes differ by ~2^0.001 per rescale); beyond it the scales are genuinely different.
AUTO_SCALE_MAX_RATIO = 2.0


_LIVE: "weakref.WeakValueDictionary[int, Context]" = weakref.WeakValueDictionary()


def context_by_id(context_id: int) -> "Context | None":
    """The live :class:`Context` whose ``id`` is ``context_id`` (ciphertexts and keys name theirs by id), else None."""
    return _LIVE.get(context_id)


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
        decryption_check: "raise" (default), "warn" or "off": what :meth:`decrypt` does when the decrypted
            coefficients look like noise over the whole modulus (:class:`~hemx.errors.DecryptionError`).
        key_storage: "auto" (default), "compact" or "full": how :meth:`keygen` and loaded keys hold switching keys
            in memory (:data:`KEY_STORAGE`; compact keys are half the bytes: the uniform halves are generated inside
            each key switch from a stream key). The resolved choice is ``ctx.key_storage``; results are identical.
        mesh: a ``jax.sharding.Mesh`` with axes "batch" and "limbs": ciphertexts, plaintexts and keys are then
            spread over the mesh's devices by a :class:`hemx.ckks.placement.MeshPlacement` (``ctx.placement``;
            ``docs/parallel.md``): every public operation places its result there, the NTT is a pure-JAX method
            (None: "mat3"; "native" raises ParameterError) and the native kernels are off. None (default): one
            device (:data:`hemx.ckks.placement.SINGLE_DEVICE`).
        keyswitch_path: with ``mesh``: "auto" (default; the ``jax.shard_map`` key switch where its rule holds),
            "shard_map" (the same) or "partitioner" (XLA's SPMD partitioner; for comparison). See
            :class:`hemx.ckks.placement.MeshPlacement`; settable later as ``ctx.tables.keyswitch_path``.
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
        decryption_check: str = "raise",
        key_storage: str = "auto",
        mesh=None,
        keyswitch_path: str = "auto",
    ):
        if not isinstance(params, CKKSParameters):
            raise ParameterError("Context needs a CKKSParameters instance")
        self.decryption_check = checks.check_mode(decryption_check)
        self.params = params
        self.id = new_id()
        _LIVE[self.id] = self
        self.slots = encoder.check_slots(params.n, slots if slots is not None else params.n // 2)
        self.sampler = sampler or Sampler()
        self.num_p = len(params.special_moduli)  # special (P) limbs
        self.basis = tuple(params.special_moduli) + tuple(params.moduli)  # P first, then Q
        self.placement = placement_mod.for_mesh(mesh, keyswitch_path=keyswitch_path)
        self.mesh = self.placement.mesh  # None on one device
        forced_flow = None if keyswitch is None else self._check_dataflow(keyswitch)
        method = self.placement.resolve_ntt(ntt, ntt_split=ntt_split)  # on a mesh: a pure-JAX NTT
        with self.placement.kernels():  # on a mesh: planned and resolved with the native kernels off
            self.planned = planner.plan_ntt(params.n, self.basis, method=method, reduction=reduction,
                                            split=ntt_split, bp=bp, planning=planning)
            variant = self.planned.variant
            self.reduction = variant.reduction
            self.keyswitch = forced_flow or planner.choose_dataflow(params.n, self.num_p, params.num_limbs,
                                                                    params.dnum)
            self.ring = RNSRing(params.n, self.basis, **variant.ring_kwargs())
            self.placement.adopt_ring(self.ring)
            self.key_storage = self._check_key_storage(key_storage)
        self.plan = self.ring.plan
        self.tables = self.placement.table_cache(params, reduction=self.reduction)  # per-level, built on first use
        self._bound: dict = {}  # eager dispatch: (kernel, tables key, statics) -> (tables, jitted, buffers)

    def __repr__(self) -> str:
        where = self.placement.describe()
        return (f"Context({self.params.describe()}, slots={self.slots}, ntt={self.plan.describe()!r}"
                f"{', ' + where if where else ''})")

    def place(self, x):
        """A ciphertext, plaintext, key or key set (or a list of them) made elsewhere (e.g. deserialized) placed
        where this context keeps its arrays (:meth:`hemx.ckks.placement.Placement.place`: on a mesh, spread over
        its devices; on one device, as it is); anything else as is."""
        return self.placement.place(x)

    # -------------------------------------------------------------------------------------------- tables
    def _limbs(self, level: int) -> int:
        return self.params.limbs_at_level(level)

    def level_tables(self, level: int) -> LevelTables:
        """The key-switching and rescaling tables of ``level`` (built on first use, also inside a trace)."""
        return self.tables.level(level)

    def rescale_divisor(self, level: int) -> float:
        """The product of the primes a rescale at ``level`` removes (one or two primes), as a float.

        Raises LevelError at level 0 (nothing left to rescale by)."""
        self._limbs(level)
        if level == 0:
            raise LevelError("level 0 has no prime left to rescale by")
        return self.tables.level(level).divisor

    def level_scale(self, level: int) -> float:
        """The scale ciphertexts are managed at on ``level`` (FLEXIBLEAUTO-style: it follows the primes dropped).

        ``T_0`` is the parameters' scale and ``T_l = min(D_l, sqrt(T_{l-1} D_l))`` with ``D_l`` the product of the
        primes a rescale at ``l`` removes, so a product of two operands at scale ``<= T_l``, times a small integer
        ``c >= 1`` and rescaled, lands in ``(T_{l-1} / 2, T_{l-1}]`` on every chain (the primes of a level need not
        match the scale: the ``boot_*`` presets' 52- and 60-bit levels, 28-bit primes well below 2^28 at
        N = 2^16). Fresh encodings use ``T_level``; :meth:`mul` keeps every result in that band."""
        self._limbs(level)
        scales = self.__dict__.get("_level_scales")
        if scales is None:
            scales = self.__dict__["_level_scales"] = managed_scales(self.params)
        return scales[int(level)]

    def _divisor(self, level: int) -> float:
        """``D_level`` from the parameters (no tables built); 1.0 at level 0."""
        pos = self._limbs(level - 1) if level else 0
        return float(math.prod(self.params.moduli[pos : self._limbs(level)])) if level else 1.0

    # -------------------------------------------------------------------------------------------- dispatch
    def _elementwise_plan(self):
        """The plan without its NTT tables (modulus constants only), for the element-wise kernels, which read
        nothing else (:func:`hemx.ckks.evaluator.add` & co. use ``plan.table``; a kernel that needed the NTT
        tables would fail on ``butterfly=None`` rather than compute anything else). Cached per plan."""
        cached = self.__dict__.get("_ew_plan")
        if cached is None or cached[0] is not self.plan:
            view = dataclasses.replace(self.plan, forward=(), inverse=(), butterfly=None)
            cached = self.__dict__["_ew_plan"] = (self.plan, view)
        return cached[1]

    def _run(self, fn, data: tuple, tables: tuple, tag, **statics):
        """``fn(*data, *tables, **statics)`` (an :mod:`~hemx.ckks.evaluator` kernel), dispatched cheaply when eager.

        A jitted call pays for every flattened argument (a level's tables are ~190 arrays, the plan ~20), which
        at N = 2^12 is a third of an HE-Mult. Eagerly (no argument a tracer, one device), the tables are packed
        once into a few buffers (:func:`hemx.ckks.tables.pack_tree`) and the kernel runs through a jitted
        wrapper that unpacks them by static slices: the same computation, bit-identical results. ``tag`` names
        the tables (e.g. the level) in the cache key; the entry is rebuilt when the tables are other objects
        (a cleared or replaced table cache). Under a trace (``jax.jit``, ``vmap``, ``export``) and on a
        mesh the kernel is called as it is, so nothing is built or cached inside a trace.
        """
        if self.mesh is None and not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(data)):
            key = (fn, tag, *statics.values())
            bound = self.__dict__.setdefault("_bound", {})
            entry = bound.get(key)
            if entry is None or not all(x is y for x, y in zip(entry[0], tables)):
                entry = bound[key] = self._bind(fn, tables, statics)
            return entry[1](*data, *entry[2])
        return fn(*data, *tables, **statics)

    @staticmethod
    def _bind(fn, tables: tuple, statics: dict):
        """``(tables, jitted, buffers)`` for :meth:`_run` (packing at concrete time)."""
        with jax.ensure_compile_time_eval():
            packed = [pack_tree(t) for t in tables]
        buffers = tuple(b for bufs, _ in packed for b in bufs)
        jitted = _bound_callable(fn, tuple(layout for _, layout in packed), tuple(statics.items()))
        return tuple(tables), jitted, buffers

    @staticmethod
    def _check_key_storage(storage) -> str:
        """``key_storage`` resolved: "compact" or "full" ("auto": compact where the native kernels generate the
        uniform halves inside the key switch, full elsewhere)."""
        return resolve_key_storage(storage)

    @staticmethod
    def _check_dataflow(name: str) -> str:
        if name not in ks.DATAFLOWS:
            raise ParameterError(f"unknown key-switching dataflow {name!r}; choose one of {ks.DATAFLOWS}")
        return name

    def to_ntt_q(self, ints: np.ndarray, level: int) -> jax.Array:
        """Integer coefficients ``(..., N)`` -> uint32 NTT-domain residues ``(..., limbs, N)`` over ``Q_level``.

        ``ints``: int64 or Python ints, or integer-valued float64 (:func:`hemx.ckks.encoder.embed`'s output, reduced
        exactly at any magnitude by :func:`~hemx.ckks.encoder.float_residues`)."""
        num_q = self._limbs(level)
        moduli = self.params.moduli[:num_q]
        ints = np.asarray(ints)
        if ints.dtype == np.float64:  # the residues are formed in the kernel (no host integers)
            if not np.all(np.isfinite(ints)):
                raise ParameterError("coefficients must be finite")
            pow2 = self.__dict__.get("_pow2")
            if pow2 is None:
                pow2 = self.__dict__["_pow2"] = modarith.pow2_table(self.params.moduli)
            return evaluator.float_ntt_q(jnp.asarray(ints), pow2[:num_q], self.plan, num_p=self.num_p, num_q=num_q)
        res = jnp.asarray(encoder.residues(ints, moduli))
        return evaluator.ntt_q(res, self.plan, num_p=self.num_p, num_q=num_q)

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

    def _check_key(self, key, key_id: int | None = None, level: int | None = None):
        if getattr(key, "context_id", None) != self.id:
            raise ContextMismatchError("the key belongs to another context; generate keys with this context")
        if key_id is not None and key.key_id != key_id:
            raise KeyMismatchError(
                f"the key (key set {key.key_id}) is not the one the ciphertext was encrypted under "
                f"(key set {key_id})"
            )
        served = getattr(key, "level", None)
        if level is not None and served is not None and level > served:
            what = f"Galois key {key.galois}" if key.kind == "galois" else f"{key.kind} key"
            raise LevelError(
                f"the {what} serves ciphertexts up to level {served}, this one is at level {level}: drop it to "
                f"level {served} first (ctx.drop_level), or generate the key with a higher rotation_level"
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

    def _match_scales(self, a: Ciphertext, b: Ciphertext) -> tuple[Ciphertext, Ciphertext]:
        """Two ciphertexts at one level and one scale, for add/sub (automatic scale alignment).

        Equal scales: the higher operand drops limbs. Scales within a factor ``AUTO_SCALE_MAX_RATIO`` (they were
        divided by different primes): at different levels, the higher operand is brought to one level above
        the lower, multiplied by the integer ``c = round(s_low * D / s_high)`` and rescaled by the level's
        primes ``D``, landing exactly at the lower operand's level and scale (no level is lost); at the same
        level ``l > 0``, ``b`` is aligned that way to ``a``'s scale and ``a`` drops to level ``l - 1`` (one level
        is spent). The integer's rounding changes the scale by a relative ``<= 2^-50``, far below the noise.
        """
        if math.isclose(a.scale, b.scale, rel_tol=SCALE_RTOL):
            return self._align(a, b)
        ratio = a.scale / b.scale
        # at different levels, farther apart scales are aligned the same way when the integer c of the alignment is
        # large enough to be exact (c ~ D * s_low / s_high >= MIN_ALIGN_FACTOR): the managed scales of levels with
        # primes of other sizes (boot_* presets) differ by a few bits. At one level, managed scales are within 2x.
        lo, hi = (a, b) if a.level <= b.level else (b, a)
        factor = lo.scale * self._divisor(lo.level + 1) / hi.scale if a.level != b.level else 0.0
        if not (1 / AUTO_SCALE_MAX_RATIO <= ratio <= AUTO_SCALE_MAX_RATIO or factor >= MIN_ALIGN_FACTOR):
            raise ScaleMismatchError(
                f"operands have different scales (2^{math.log2(a.scale):.4f} vs 2^{math.log2(b.scale):.4f}); "
                "rescale both the same number of times, or encode the plaintext at the ciphertext's scale"
            )
        if a.level == b.level:
            if a.level == 0:
                raise ScaleMismatchError(
                    f"operands have different scales (2^{math.log2(a.scale):.4f} vs 2^{math.log2(b.scale):.4f}) "
                    "at level 0, where no prime is left to align them; align them at a higher level"
                )
            return self.drop_level(a, a.level - 1), self._rescale_to(b, a.scale)
        if a.level > b.level:
            return self._rescale_to(self.drop_level(a, b.level + 1), b.scale), b
        return a, self._rescale_to(self.drop_level(b, a.level + 1), a.scale)

    def _rescale_to(self, ct: Ciphertext, target: float) -> Ciphertext:
        """``rescale(ct * c)`` with the integer ``c`` that makes its scale ``target`` (level drops by one)."""
        divisor = self.tables.level(ct.level).divisor
        out = self.rescale(self._mul_scalar(ct, 1.0, target * divisor / ct.scale))
        return out.replace(scale=target)

    def _drop_any(self, x, level: int):
        if isinstance(x, Ciphertext):
            return self.drop_level(x, level)
        if x.level == level:
            return x
        return x.replace(data=x.data[..., : self._limbs(level), :], level=level)

    # -------------------------------------------------------------------------------------------- keys
    @_on_placement()
    def keygen(
        self,
        rotations: Iterable[int] | str = (),
        *,
        conjugation: bool = False,
        relin: bool = True,
        galois_elements: Iterable[int] = (),
        bootstrap: keygen_mod.BootstrapKeys | None = None,
        sum_slots: bool = False,
        for_circuits: Iterable = (),
        rotation_level: int | Mapping[int, int] | None = None,
    ) -> KeySet:
        """Generate a secret key and its public, relinearization and Galois keys.

        Args:
            rotations: slot rotation steps that get a Galois key; "power_of_two" gives 1, 2, 4, ... < slots
                (enough for :meth:`sum_slots`, and for any rotation by composition).
            conjugation: also generate the conjugation key.
            relin: generate the relinearization key (needed by :meth:`mul`).
            galois_elements: raw Galois elements ``g`` (automorphisms ``X -> X^g``) that also get a key.
            bootstrap: also every key a bootstrap needs (its rotations, the conjugation key and, where it switches
                to an ephemeral sparse secret, the encapsulation keys), read from a value describing it
                (:class:`hemx.ckks.keygen.BootstrapKeys`: ``hemx.BootstrapParameters.create(ctx.params,
                slots=ctx.slots)`` or a bootstrapper, ``hemx.circuits.bootstrap.bootstrapper_for(ctx)``). ``True``
                raises :class:`~hemx.errors.ParameterError` saying so.
            sum_slots: also the power-of-two rotation keys :meth:`sum_slots` needs.
            for_circuits: circuits the keys must serve; their rotation, conjugation and bootstrapping keys are
                added (:func:`hemx.ckks.keygen.plan_keys`): ``LinearTransform`` objects, bootstraps (as
                ``bootstrap=``), ``"sum_slots"``, a function ``fn(ct, keys)`` (traced once, abstractly, on a fresh
                top-level ciphertext) or a tuple ``(fn, *example_args)`` (traced as ``fn(*example_args, keys)``;
                example ciphertexts may be ``hemx.ckks.keygen.placeholder(ctx, ...)``); a traced bootstrap also
                needs the bootstrap itself here or in ``bootstrap=`` (for its encapsulation keys). See
                ``docs/jit.md``.
            rotation_level: the highest level the rotation and conjugation keys asked for here serve (None: every
                level), or a mapping ``{step: level}`` for some rotation steps (the others serve every level).
                Such a key holds only that level's digits and limbs: at ``boot_16``'s level 10 a quarter of a full
                key's bytes. A ciphertext above it raises :class:`~hemx.errors.LevelError`. A bootstrap's own keys
                (``bootstrap=...``) always serve every level.
        """
        per_step: dict[int, int] = {}
        if isinstance(rotation_level, Mapping):
            per_step = {check_int("a rotation step", r): check_int("rotation_level", v)
                        for r, v in rotation_level.items()}
            for v in per_step.values():
                self._limbs(v)  # ParameterError beyond the chain
            rotation_level = None
        elif rotation_level is not None:
            rotation_level = check_int("rotation_level", rotation_level)
            self._limbs(rotation_level)  # ParameterError beyond the chain
        steps = keygen_mod.rotation_steps(rotations, self.slots)
        elements = list(galois_elements)
        if sum_slots:
            steps += keygen_mod.rotation_steps("power_of_two", self.slots)
        planned_boots, switching = [], set()
        if for_circuits is not None and (callable(for_circuits) or isinstance(for_circuits, str) or for_circuits):
            more_steps, more_elements, planned_boots, switching = keygen_mod.plan_keys(self, for_circuits)
            steps += more_steps
            elements += sorted(more_elements)
        boot = keygen_mod.bootstrap_keys(self, bootstrap, planned_boots, switching)
        rotations = sorted(set(steps))
        weight = None
        levelled: dict[int, int] = {}
        if rotation_level is not None:
            asked = {automorphism.galois_element(self.params.n, r % self.slots) for r in rotations if r % self.slots}
            asked |= {int(g) for g in elements if isinstance(g, (int, np.integer)) and not isinstance(g, bool)}
            if conjugation:
                asked.add(automorphism.conjugation_element(self.params.n))
            levelled = dict.fromkeys(asked, rotation_level)
        for r, v in per_step.items():
            if r % self.slots:
                g = automorphism.galois_element(self.params.n, r % self.slots)
                levelled[g] = max(v, levelled.get(g, v))
        if boot is not None:
            boot_elements, weight = boot
            elements += list(boot_elements)
            for g in boot_elements:  # the bootstrap's keys serve every level
                levelled.pop(g, None)
            levelled.pop(automorphism.conjugation_element(self.params.n), None)
            relin = True
        return keygen_mod.generate_keys(self, rotations, conjugation=conjugation, relin=relin,
                                        galois_elements=elements, encapsulation_weight=weight, levels=levelled)

    @_on_placement()
    def switch_key(self, ct: Ciphertext, key: SwitchingKey, *, keyswitch: str | None = None) -> Ciphertext:
        """Key switching with any switching key (``ct`` under the key's source secret -> under its target)."""
        self._check_ct(ct)
        if not isinstance(key, SwitchingKey):
            raise ParameterError(f"switch_key needs a SwitchingKey, got {type(key).__name__}")
        self._check_key(key, ct.key_id, ct.level)
        flow = self._check_dataflow(keyswitch or self.keyswitch)
        data = self._run(evaluator.rotate_one, (ct.data, self.tables.index_map(1), key.material),
                         (self.plan, self.tables.level(ct.level)), ct.level, num_p=self.num_p,
                         reduction=self.reduction, dataflow=flow)  # the identity automorphism: a plain key switch
        return ct.replace(data=data)

    # -------------------------------------------------------------------------------------------- encoding
    @_on_placement()
    def encode(self, values, *, level: int | None = None, scale: float | None = None,
               slots: int | None = None) -> Plaintext:
        """Encode ``(..., count)`` values (count <= slots; real or complex) at ``level`` (default top) and
        ``scale`` (default :meth:`level_scale` of the level) -> a plaintext ``(..., limbs, N)``. The plaintext's
        ``bound`` is ``max |value|`` rounded up to a power of two.

        ``slots`` overrides the context's slot count (a power of two <= N/2), e.g. full-slot plaintexts for the
        bootstrapping transforms of a sparse context.

        The encoder is :func:`hemx.ckks.encoder.encode_ntt`. Host values are encoded at concrete time, also inside
        a ``jax.jit`` trace (where the plaintext enters the program as a constant), and checked: finite, and within
        half the level's modulus once scaled (:class:`~hemx.errors.SlotError`,
        :class:`~hemx.errors.OverflowBoundError`). Traced values (an argument of the program) are encoded inside
        the program by the same function, bit for bit the plaintext of the same values given on the host; they
        cannot be checked, and the plaintext's ``bound`` is None (unknown)."""
        level = self.params.max_level if level is None else level
        num_q = self._limbs(level)
        level = int(level)
        # default: the managed scale of the level (level_scale; the parameters' scale at level 0)
        scale = self.level_scale(level) if scale is None else self._check_encode_scale(scale)
        slots = self.slots if slots is None else encoder.check_slots(self.params.n, slots)
        z, is_complex = encoder.slot_values(values, slots, self.params.n)
        tables, pow2 = encoder.embed_tables(slots), encoder.pow2_table(self.params.moduli)[:num_q]

        def encode():
            return encoder.encode_ntt(z, scale, tables, pow2, self.plan, n=self.params.n, num_p=self.num_p,
                                      num_q=num_q)

        if isinstance(z, jax.core.Tracer):  # traced values: encoded inside the program
            return Plaintext(encode()[0], level, scale, slots, is_complex, self.id)
        # host values: encoded at concrete time even inside a jit trace, where they enter as a constant (an NTT
        # of a constant in the trace would make XLA constant-fold it, which is very slow to compile)
        with jax.ensure_compile_time_eval():
            data, peak = encode()
        encoder.check_peak(float(peak), scale, self._log_q(num_q))
        return Plaintext(data, level, scale, slots, is_complex, self.id, bound=_round_bound(_peak(z)))

    @staticmethod
    def _check_encode_scale(scale) -> float:
        if not is_real(scale):
            raise ParameterError(f"scale must be a positive finite number, got {scale!r}")
        value = float(scale)
        if math.isinf(value) and value > 0:
            raise OverflowBoundError("scale must be finite: an infinite scale fits no modulus")
        if not (math.isfinite(value) and value > 0):
            raise ParameterError(f"scale must be a positive finite number, got {scale!r}")
        return value

    def _log_q(self, num_q: int) -> float:
        """``log2`` of the product of the first ``num_q`` ciphertext primes (cached)."""
        cache = self.__dict__.setdefault("_log_q_cache", {})
        if num_q not in cache:
            cache[num_q] = sum(math.log2(q) for q in self.params.moduli[:num_q])
        return cache[num_q]

    @_on_placement(place=False)
    def decode(self, pt: Plaintext) -> np.ndarray:
        """Decode a plaintext back to slot values."""
        if pt.context_id != self.id:
            raise ContextMismatchError("the plaintext belongs to another context")
        num_q = self._limbs(pt.level)
        coeffs = evaluator.intt_q(pt.data, self.plan, num_p=self.num_p, num_q=num_q)
        return encoder.decode_residues(np.asarray(coeffs), self.params.moduli[:num_q], n=self.params.n,
                                       slots=pt.slots, scale=pt.scale, is_complex=pt.is_complex)

    # -------------------------------------------------------------------------------------------- encryption
    @_on_placement()
    def encrypt(self, values, key, *, bound: float | None = None) -> Ciphertext:
        """Encrypt ``(slots,)`` or ``(..., count)`` values with a public key (or a :class:`KeySet`) or a secret key.

        Randomness comes from the context's sampler (the OS CSPRNG by default). The ciphertext starts at the top
        level at :meth:`level_scale` (on every preset, ``boot_*`` included: the whole chain is usable, see
        ``docs/ckks.md``) and carries ``bound``, public metadata like the scale: ``max |x|`` of the values rounded
        up to a power of two (static metadata is part of a jitted program's cache key: rounded, new data of the
        same range reuses the compiled program), or the given ``bound`` as it is (the client's declared bound on
        its data, at least ``max |x|``). Every operation propagates it, and a bootstrap checks it against the
        bound it supports.
        """
        if isinstance(key, KeySet):
            key = key.public
        if not isinstance(key, (PublicKey, SecretKey)):
            raise ParameterError("encrypt needs a PublicKey, a SecretKey or a KeySet")
        self._check_key(key)
        pt = values if isinstance(values, Plaintext) else self.encode(values)
        if pt.context_id != self.id:
            raise ContextMismatchError("the plaintext belongs to another context")
        if bound is not None:
            if not is_real(bound) or not math.isfinite(float(bound)) or float(bound) < 0:
                raise ParameterError(f"bound must be a finite number >= 0 (max |x| of the values), got {bound!r}")
            peak = pt.bound if isinstance(values, Plaintext) else _peak(values)
            if peak is not None and float(bound) < peak:
                raise ParameterError(f"bound={float(bound):.6g} is below max |x| = {peak:.6g} of the values; give "
                                     "a bound at least as large as every value (or leave it out: max |x| is used)")
            pt = pt.replace(bound=float(bound))
        return encryptor.encrypt(self, pt, key)

    @_on_placement(place=False)
    def decrypt(self, ct: Ciphertext, secret, *, decryption_check: str | None = None) -> np.ndarray:
        """Decrypt to numpy values ``(..., slots)`` (real unless complex values were encrypted).

        ``decryption_check`` overrides the context's setting for this call: "raise" (the default setting) raises
        :class:`~hemx.errors.DecryptionError` when the decrypted polynomial is spread over the whole modulus
        instead of holding a message (the wrong secret key, altered ciphertext data, values x scale that
        overflowed the modulus), "warn" warns with :class:`~hemx.errors.DecryptionWarning`, "off" skips it. A
        plausibility check, not authentication: see ``docs/errors.md``.
        """
        mode = self.decryption_check if decryption_check is None else checks.check_mode(decryption_check)
        self._check_ct(ct)
        if isinstance(secret, KeySet):
            secret = secret.secret
        if not isinstance(secret, SecretKey):
            raise ParameterError("decrypt needs the SecretKey (or the KeySet holding it)")
        self._check_key(secret, ct.key_id)
        # a scale below the noise (a manual rescale too many): garbage values, refused like a failed check
        self._check_result_scale(ct.scale, ct.level, "decrypt", mode)
        return encryptor.decrypt(self, ct, secret, mode)

    # -------------------------------------------------------------------------------------------- leveled ops
    @_on_placement()
    def drop_level(self, ct: Ciphertext, level: int) -> Ciphertext:
        """The same ciphertext at a lower ``level`` (limbs dropped; no rescaling, scale unchanged)."""
        self._check_ct(ct)
        if not is_int(level):
            raise LevelError(f"drop_level needs an integer level in [0, {ct.level}], got {level!r}")
        level = int(level)
        if level > ct.level:
            raise LevelError(f"cannot raise a ciphertext from level {ct.level} to {level}")
        if level == ct.level:
            return ct
        self._limbs(level)
        return ct.replace(data=ct.data[..., : self._limbs(level), :], level=level)

    @_on_placement()
    def add(self, a: Ciphertext, b) -> Ciphertext:
        """``a + b`` for a ciphertext and a ciphertext, plaintext or scalar/array of values."""
        self._check_ct(a)
        if isinstance(b, Ciphertext):
            self._check_ct(b, "second ciphertext")
            self._same_keys(a, b)
            if a.level != b.level or a.scale != b.scale or a.data.shape != b.data.shape:  # else nothing to align
                self._check_batches(a.batch_shape, b.batch_shape)
                a, b = self._match_scales(a, b)
            data = self._run(evaluator.add, (a.data, b.data), (self._elementwise_plan(),), "ew", num_p=self.num_p,
                             num_q=a.data.shape[-2])
            return _with_data(a, data, is_complex=a.is_complex or b.is_complex, bound=_add_bounds(a.bound, b.bound))
        pt = self._as_plaintext(b, a, scale=a.scale)
        if self._check_batches(a.batch_shape, pt.batch_shape) != a.batch_shape:
            raise ShapeError(
                f"the plain operand has batch shape {pt.batch_shape} (values shape {pt.batch_shape + (pt.slots,)}), "
                f"which does not fit the ciphertext's batch shape {a.batch_shape}: give at most {a.slots} values "
                "per ciphertext, batched like the ciphertext"
            )
        a, pt = self._align(a, pt)
        n = a.num_limbs
        c0 = self._run(evaluator.add, (a.data[..., 0, :, :], pt.data), (self._elementwise_plan(),), "ew",
                       num_p=self.num_p, num_q=n)
        return a.replace(data=a.data.at[..., 0, :, :].set(c0), is_complex=a.is_complex or pt.is_complex,
                         bound=_add_bounds(a.bound, pt.bound))

    @_on_placement()
    def sub(self, a: Ciphertext, b) -> Ciphertext:
        """``a - b`` (b: ciphertext, plaintext or values)."""
        return self.add(a, self.negate(b) if isinstance(b, Ciphertext) else self._negate_plain(b, a))

    @_on_placement()
    def negate(self, a: Ciphertext) -> Ciphertext:
        self._check_ct(a)
        return a.replace(data=self._run(evaluator.negate, (a.data,), (self._elementwise_plan(),), "ew",
                                        num_p=self.num_p, num_q=a.num_limbs))

    def _negate_plain(self, b, like: Ciphertext) -> Plaintext:
        pt = self._as_plaintext(b, like, scale=like.scale)
        negate = lambda: pt.replace(  # noqa: E731
            data=evaluator.negate(pt.data, self.plan, num_p=self.num_p, num_q=pt.data.shape[-2]))
        if isinstance(b, Plaintext):
            return negate()
        with jax.ensure_compile_time_eval():  # host values: a constant, also inside a trace
            return negate()

    def _as_plaintext(self, b, like: Ciphertext, scale: float) -> Plaintext:
        if isinstance(b, Plaintext):
            if b.context_id != self.id:
                raise ContextMismatchError("the plaintext belongs to another context")
            return b
        return self.encode(self._broadcast_values(b), level=like.level, scale=scale)

    def _broadcast_values(self, b):
        z = self._plain_values(b)
        if z.ndim == 0:  # a scalar fills every slot
            return np.full(self.slots, z.item())
        return z

    @staticmethod
    def _check_batches(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
        """The broadcast batch shape of two operands, or ShapeError."""
        try:
            return tuple(np.broadcast_shapes(a, b))
        except ValueError:
            raise ShapeError(f"the operands' batch shapes {a} and {b} do not broadcast together") from None

    def _same_keys(self, a: Ciphertext, b: Ciphertext):
        if a.key_id != b.key_id:
            raise KeyMismatchError("the ciphertexts are encrypted under different key sets")

    @_on_placement()
    def mul(self, a: Ciphertext, b, keys: EvaluationKeys | SwitchingKey | None = None, *,
            rescale: bool = True, keyswitch: str | None = None, plain_scale: float | None = None,
            auto_scale: bool = True) -> Ciphertext:
        """``a * b``: with a ciphertext (relinearized with ``keys``), a plaintext, or scalar/array values.

        The product is rescaled by default (``rescale=False``: left at the operands' level, rescale it yourself);
        for two ciphertexts the rescale is folded into the relinearization's ModDown (one rounding division by
        ``P`` times the level's primes; same level, scale and precision as ``rescale(mul(a, b, rescale=False))``,
        about a fifth faster, not bit-identical to it). ``keyswitch`` overrides the context's key-switching
        dataflow for this call.

        Scales are managed (``auto_scale=True``, the default; OpenFHE's FLEXIBLEAUTO is the model): the result
        lands in ``(T / 2, T]`` with ``T = level_scale(level - 1)`` on every chain, whatever the sizes of the
        primes dropped. A ciphertext operand at a higher level whose scale is off its level's band is first
        brought to this level at ``level_scale`` exactly (one of its own levels, none of the result's); the
        product is multiplied by the integer ``c = floor(T D / (s_a s_b)) >= 1`` (exact, no level) when it would
        otherwise fall below ``T / 2``. Plain values are encoded at the scale of the primes the next rescale
        removes (so ``rescale(mul(a, values, rescale=False))`` has exactly ``a``'s scale) when ``a``'s scale is in
        the band of the level below, else at the scale that lands on ``T``.
        ``auto_scale=False``: none of this (the raw product ``s_a s_b``, plain values at the divisor), for
        circuits that plan their own scales (:mod:`hemx.circuits`).

        ``plain_scale`` (plain operands only) is the scale plain values are encoded at instead; a real scalar
        becomes the integer constant ``round(value * plain_scale)``, so any target scale is reachable exactly:
        ``mul(ct, c, plain_scale=t * rescale_divisor(level) / ct.scale)`` has scale ``t``.
        """
        self._check_ct(a)
        if plain_scale is not None:
            if isinstance(b, (Ciphertext, Plaintext)):
                raise ParameterError("plain_scale applies to plain values (scalars, arrays); a plaintext or "
                                     "ciphertext operand carries its own scale")
            plain_scale = self._check_plain_scale(plain_scale)
        if isinstance(b, Ciphertext):
            self._check_ct(b, "second ciphertext")
            self._same_keys(a, b)
            if a.level != b.level or a.data.shape != b.data.shape:  # else nothing to align
                self._check_batches(a.batch_shape, b.batch_shape)
                if auto_scale and a.level != b.level:
                    a, b = self._managed_operands(a, b)
                a, b = self._align(a, b, check_scale=False)
            key = self._relin_key(keys, a)
            if rescale and a.level == 0:
                raise LevelError("no levels left: the product of two ciphertexts at level 0 cannot be rescaled "
                                 "(no prime left to divide by); multiply earlier, bootstrap, or use parameters "
                                 "with more levels")
            t = self.tables.level(a.level)
            if auto_scale and a.level > 0:
                c = self._scale_factor(a.scale * b.scale, a.level)
                if c > 1:  # the product would fall below half the managed scale: an exact integer lifts it
                    a = self._mul_scalar(a, 1.0, float(c))
            self._check_product_scale(a.scale * b.scale, a.level)
            flow = self._check_dataflow(keyswitch or self.keyswitch)
            statics = dict(num_p=self.num_p, reduction=self.reduction, dataflow=flow)
            scale, is_complex = a.scale * b.scale, a.is_complex or b.is_complex
            bound = _mul_bounds(a.bound, b.bound)
            if auto_scale:
                self._check_bound_fits(bound, scale, a.level, "the product")
            if rescale and t.drop:  # relinearization and rescale in one ModDown
                self._check_result_scale(scale / t.divisor, a.level - 1, "the product's rescale")
                data = self._run(evaluator.mul_relin_rescale, (a.data, b.data, key.material), (self.plan, t), a.level,
                                 **statics)
                return _with_data(a, data, level=a.level - 1, scale=scale / t.divisor, is_complex=is_complex,
                                  bound=bound)
            data = self._run(evaluator.mul_relin, (a.data, b.data, key.material), (self.plan, t), a.level, **statics)
            out = _with_data(a, data, scale=scale, is_complex=is_complex, bound=bound)
        else:
            out = self._mul_plain(a, b, plain_scale, auto_scale)
            if rescale and a.level == 0 and out.scale == a.scale:  # an integer product at level 0: nothing to divide
                return out
        return self.rescale(out) if rescale else out

    def _in_band(self, scale: float, level: int) -> bool:
        """``scale`` in the managed band ``(T / 2, T]`` of ``level`` (a relative 1e-9 of float slack above)."""
        target = self.level_scale(level)
        return target / 2 < scale <= target * (1 + 1e-9)

    def _scale_factor(self, product_scale: float, level: int) -> int:
        """The integer ``c >= 1`` that brings ``product_scale * c / D_level`` into the band of ``level - 1``."""
        x = self.level_scale(level - 1) * self._divisor(level) / product_scale
        return max(1, int(math.floor(x * (1 + 1e-9))))

    def _managed_operands(self, a: Ciphertext, b: Ciphertext) -> tuple[Ciphertext, Ciphertext]:
        """For a product at ``min`` of the levels: the higher operand, when its scale is off the band of that level
        (a fresh ciphertext of the top level dropped to a level whose primes are other sizes), is brought to it at
        ``level_scale`` exactly (``rescale(ct * c)`` from one level above, an exact large integer ``c``)."""
        low, high, swap = (a, b, False) if a.level < b.level else (b, a, True)
        if not self._in_band(high.scale, low.level):
            target = self.level_scale(low.level)
            if target * self._divisor(low.level + 1) / high.scale >= MIN_ALIGN_FACTOR:
                high = self._rescale_to(self.drop_level(high, low.level + 1), target)
        return (high, low) if swap else (low, high)

    @staticmethod
    def _check_plain_scale(scale) -> float:
        try:
            value = float(scale)
        except (TypeError, ValueError):
            raise ParameterError(f"plain_scale must be a positive finite number, got {scale!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise ParameterError(f"plain_scale must be a positive finite number, got {scale!r}")
        return value

    def _mul_plain(self, a: Ciphertext, b, plain_scale: float | None = None, auto_scale: bool = False) -> Ciphertext:
        if isinstance(b, Plaintext):
            if b.context_id != self.id:
                raise ContextMismatchError("the plaintext belongs to another context")
            pt = b
        else:
            t = self.tables.level(a.level)
            z = self._plain_values(b)
            real_scalar = z.ndim == 0 and not np.iscomplexobj(z)
            if plain_scale is not None:
                if real_scalar:
                    return self._mul_scalar(a, float(z), plain_scale)
                self._check_product_scale(a.scale * plain_scale, a.level)
                pt = self.encode(self._broadcast_values(b), level=a.level, scale=plain_scale)
            elif t.divisor is None:  # level 0: no rescale follows, only exact integers keep the scale
                if real_scalar and float(z) == round(float(z)):
                    return self._mul_scalar(a, float(z), 1.0)
                raise LevelError(
                    "no levels left: at level 0 a ciphertext can only be multiplied by integers (there is no "
                    "prime left to rescale by); multiply earlier, or use parameters with more levels"
                )
            else:
                # the divisor keeps a's scale through the rescale; managed, a scale off the band of the level
                # below is brought onto its level_scale instead
                target = t.divisor
                if auto_scale and not self._in_band(a.scale, a.level - 1):
                    target = self.level_scale(a.level - 1) * t.divisor / a.scale
                if real_scalar:  # an integer constant, no encoding
                    return self._mul_scalar(a, float(z), target)
                pt = self.encode(self._broadcast_values(b), level=a.level, scale=target)
        self._check_batches(a.batch_shape, pt.batch_shape)
        a, pt = self._align(a, pt, check_scale=False)
        self._check_product_scale(a.scale * pt.scale, a.level)
        if auto_scale:
            self._check_bound_fits(_mul_bounds(a.bound, pt.bound), a.scale * pt.scale, a.level, "the product")
        data = self._run(evaluator.mul_elementwise, (a.data, pt.data[..., None, :, :]), (self._elementwise_plan(),),
                         "ew", num_p=self.num_p, num_q=a.num_limbs)
        return a.replace(data=data, scale=a.scale * pt.scale, is_complex=a.is_complex or pt.is_complex,
                         bound=_mul_bounds(a.bound, pt.bound))

    @_on_placement()
    def dot_plain(self, ct: Ciphertext, pt: Plaintext) -> Ciphertext:
        """``sum_k ct[k] * pt[k]``, not rescaled: ``ct`` a ciphertext batch with a leading axis of ``k`` (e.g. from
        stacking ``k`` ciphertexts), ``pt`` a plaintext batch of shape ``(k,)`` (one :meth:`encode` of ``k`` rows).

        The same result, bit for bit, as adding ``mul(ct[k], pt[k], rescale=False, auto_scale=False)`` over ``k``,
        in one pass with one reduction (the sum of plaintext products of a baby-step/giant-step linear map). The
        operands meet at the lower level; the scale is ``ct.scale * pt.scale``. Returns ``ct``'s batch shape
        without its leading axis.
        """
        self._check_ct(ct)
        if not isinstance(pt, Plaintext):
            raise ParameterError(f"dot_plain takes a hemx Plaintext (a batch from encode), got {type(pt).__name__}")
        if pt.context_id != self.id:
            raise ContextMismatchError("the plaintext belongs to another context")
        if not ct.batch_shape or len(pt.batch_shape) != 1 or pt.batch_shape[0] != ct.batch_shape[0]:
            raise ShapeError(f"dot_plain needs a ciphertext batch (k, ...) and a plaintext batch (k,) of the same k; "
                             f"got batch shapes {ct.batch_shape} and {pt.batch_shape}")
        if ct.slots != pt.slots:
            raise SlotError(f"the ciphertext has {ct.slots} slots and the plaintext {pt.slots}")
        ct, pt = self._align(ct, pt, check_scale=False)
        scale = ct.scale * pt.scale
        self._check_product_scale(scale, ct.level)
        bound = _mul_bounds(ct.bound, pt.bound)
        data = self._run(evaluator.dot_plain, (ct.data, pt.data), (self._elementwise_plan(),), "ew",
                         num_p=self.num_p, num_q=ct.num_limbs)
        return ct.replace(data=data, scale=scale, is_complex=ct.is_complex or pt.is_complex,
                          bound=None if bound is None else bound * ct.batch_shape[0])

    @staticmethod
    def _plain_values(b) -> np.ndarray:
        """Plain operand values as an array of finite numbers (SlotError otherwise; the encoder's wording)."""
        try:
            z = np.asarray(b)
        except (ValueError, TypeError) as e:
            raise ParameterError(f"plain values must be a (batch of) equal-length list(s) of numbers: {e}") from None
        if not (np.issubdtype(z.dtype, np.number) or z.dtype == bool):
            raise SlotError(f"values must be numbers, got {b!r}" if z.ndim == 0 else
                            f"values must be numbers, got dtype {z.dtype}")
        if np.issubdtype(z.dtype, np.inexact) and not np.all(np.isfinite(z)):
            raise SlotError("values are not finite")
        return z

    def _check_product_scale(self, scale: float, level: int) -> None:
        """A product whose scale reaches the modulus would wrap around: refuse it with a clear error."""
        log_q = self._log_q(self._limbs(level))
        if not (scale > 0 and math.isfinite(scale)):
            raise PrecisionError(f"the product would have scale {scale!r} (the operands' scales under- or "
                                 "overflowed a float); rescale less often, or encode at a scale near level_scale")
        if math.log2(scale) >= log_q - 1:
            raise LevelError(
                f"the product would have scale 2^{math.log2(scale):.1f}, beyond the modulus at level {level} "
                f"(2^{log_q:.1f}); rescale the operands first, or use parameters with more levels"
            )

    def _check_bound_fits(self, bound, scale: float, level: int, what: str) -> None:
        """Refuse a result whose magnitude bound times its scale may reach half the modulus at ``level``: it would
        wrap around and decrypt to garbage with no error. The bound is the public, propagated ``max |value|``
        (rounded up to powers of two at encryption), so this can refuse a result whose true values would have
        fitted; an unknown bound (None) is not checked. Managed operations only (``auto_scale``): circuits that
        plan their own scales (:mod:`hemx.circuits`) keep their own range analysis."""
        if bound is None or not bound > 0:
            return
        log_q = self._log_q(self._limbs(level))
        need = math.log2(bound) + math.log2(scale)
        if need >= log_q - 1:
            raise OverflowBoundError(
                f"{what} may reach |x| = {bound:.4g} at scale 2^{math.log2(scale):.1f}: 2^{need:.1f}, beyond half "
                f"the modulus at level {level} (2^{log_q - 1:.1f}); it would decrypt to garbage. Scale the values "
                "down before encrypting (x / k, and multiply the result back by k^degree), or use parameters with "
                "a larger base prime; a tighter bound at encryption (encrypt(..., bound=)) helps when the data's "
                "true range is known to be smaller"
            )

    def _mul_scalar(self, a: Ciphertext, value: float, scale: float) -> Ciphertext:
        self._check_product_scale(a.scale * scale, a.level)
        product = value * scale
        if not math.isfinite(product):
            raise SlotError(f"values are not finite: {value!r} x scale 2^{math.log2(scale):.1f} overflows a float")
        c = int(round(product))
        log_q = self._log_q(a.num_limbs)
        if c and math.log2(abs(c)) >= log_q - 1:
            raise OverflowBoundError(
                f"the constant {value!r} at scale 2^{math.log2(scale):.1f} is 2^{math.log2(abs(c)):.1f}, beyond "
                f"q/2 = 2^{log_q - 1:.1f} at level {a.level}: it would wrap around. Multiply by a smaller constant "
                "or at a higher level"
            )
        n = a.num_limbs
        qs = np.array(self.params.moduli[:n], dtype=np.int64).reshape(-1, 1)
        with jax.ensure_compile_time_eval():
            w = jax.device_put(modarith.known_operand(np.array([[c % int(q)] for q in qs[:, 0]], np.int64), qs))
        data = self._run(evaluator.mul_known, (a.data, w), (self._elementwise_plan(),), "ew", num_p=self.num_p,
                         num_q=n, reduction=self.reduction)
        return a.replace(data=data, scale=a.scale * scale, bound=_mul_bounds(a.bound, abs(value)))

    def _relin_key(self, keys, ct: Ciphertext) -> SwitchingKey:
        if isinstance(keys, SwitchingKey):
            key = keys
        elif isinstance(keys, EvaluationKeys):
            key = keys.relin_key()
        else:
            raise ParameterError("ciphertext multiplication needs the relinearization key: ctx.mul(a, b, keys)")
        self._check_key(key, ct.key_id, ct.level)
        if key.kind != "relin":
            raise ParameterError(f"expected a relinearization key, got a {key.kind} key")
        return key

    @_on_placement()
    def rescale(self, ct: Ciphertext) -> Ciphertext:
        """Divide by the primes of the current level (one or two) with rounding; the level drops by one."""
        self._check_ct(ct)
        if ct.level == 0:
            raise LevelError("no levels left to rescale: the ciphertext is at level 0 (bootstrapping is not "
                             "available; use parameters with more levels)")
        t = self.tables.level(ct.level)
        if not ct.scale / t.divisor >= 2.0 ** -30:  # nothing left of any value (and far from float underflow)
            self._check_result_scale(ct.scale / t.divisor, ct.level - 1, "rescale")
        data = self._run(evaluator.rescale, (ct.data,), (self.plan, t), ct.level, num_p=self.num_p,
                         reduction=self.reduction)
        return _with_data(ct, data, level=ct.level - 1, scale=ct.scale / t.divisor)

    def _check_result_scale(self, scale: float, level: int, what: str, mode: str = "raise") -> None:
        """A scale too small to hold the values above the noise: PrecisionError (never silent garbage); ``mode``
        "warn" warns (:class:`~hemx.errors.DecryptionWarning`), "off" does nothing."""
        floor = self.params.log_n / 2 + MIN_SCALE_MARGIN_BITS
        if mode == "off" or (scale > 0 and math.log2(scale) >= floor):
            return
        shown = f"2^{math.log2(scale):.1f}" if scale > 0 else f"{scale!r}"
        msg = (f"{what}: scale {shown} at level {level} is below 2^{floor:g} (the noise after a rescale is "
               f"~2^{self.params.log_n / 2:g}): the values would be garbage. Multiply with ctx.mul(a, b, keys) "
               "(the default rescale=True keeps every scale at level_scale(level)), rescale only products, or "
               "encode plain operands at a larger scale")
        if mode == "warn":
            warnings.warn(msg, DecryptionWarning, stacklevel=4)
            return
        raise PrecisionError(msg)

    @_on_placement()
    def rotate(self, ct: Ciphertext, steps: int, keys, *, keyswitch: str | None = None) -> Ciphertext:
        """Rotate the slots left by ``steps`` (negative: right), like ``numpy.roll(values, -steps)``."""
        self._check_ct(ct)
        steps = check_int("rotation steps", steps)
        if steps % ct.slots == 0:
            return ct
        g = automorphism.galois_element(self.params.n, steps % ct.slots)  # steps are taken mod the slots
        return self._galois_one(ct, g, keys, f"rotation by {steps}", keyswitch)

    @_on_placement()
    def conjugate(self, ct: Ciphertext, keys, *, keyswitch: str | None = None) -> Ciphertext:
        """Complex conjugation of every slot (needs ``keygen(conjugation=True)``)."""
        self._check_ct(ct)
        g = automorphism.conjugation_element(self.params.n)
        return self._galois_one(ct, g, keys, "conjugation", keyswitch)

    def _galois_one(self, ct: Ciphertext, g: int, keys, what: str, keyswitch: str | None) -> Ciphertext:
        key = self._galois_keys([g], keys, [what], ct)[0]
        flow = self._check_dataflow(keyswitch or self.keyswitch)
        data = self._run(evaluator.rotate_one, (ct.data, self.tables.index_map(g), key.material),
                         (self.plan, self.tables.level(ct.level)), ct.level, num_p=self.num_p,
                         reduction=self.reduction, dataflow=flow)
        return _with_data(ct, data)

    @_on_placement()
    def rotate_many(self, ct: Ciphertext, steps: Sequence[int], keys, *,
                    stacked: bool = False) -> list[Ciphertext] | Ciphertext:
        """Hoisted rotations: one ModUp of c1 shared by all ``steps``; returns one ciphertext per step.

        ``stacked=True``: one ciphertext batch with a new leading axis, entry ``i`` the rotation by ``steps[i]``
        (a step of 0 is ``ct`` itself), without splitting the hoisted batch into separate arrays."""
        self._check_ct(ct)
        if isinstance(steps, (str, bytes)) or not isinstance(steps, Iterable):
            raise ParameterError(f"rotate_many needs a list of integer steps, got {steps!r}")
        steps = [check_int("rotation steps", s) for s in steps]
        todo = [(i, s) for i, s in enumerate(steps) if s % ct.slots]
        data = None
        if todo:
            gs = [automorphism.galois_element(self.params.n, s % ct.slots) for _, s in todo]
            data = self._galois_data(ct, gs, keys, [f"rotation by {s}" for _, s in todo])
        if stacked:
            if not steps:
                raise ParameterError("rotate_many(stacked=True) needs at least one step")
            if len(todo) == len(steps):
                out = data
            else:  # the unrotated entries are ct itself
                pool = ct.data[None] if data is None else jnp.concatenate([ct.data[None], data])
                order, k = [], 1
                for s in steps:
                    if s % ct.slots:
                        order.append(k)
                        k += 1
                    else:
                        order.append(0)
                out = jnp.take(pool, jnp.asarray(order), axis=0)
            return ct.replace(data=out)
        result: list[Ciphertext] = [ct] * len(steps)
        for j, (i, _) in enumerate(todo):
            result[i] = ct.replace(data=data[j])
        return result

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
            self._check_key(key, ct.key_id, ct.level)
        return key_list

    def _galois_data(self, ct: Ciphertext, elements: Sequence[int], keys, what: Sequence[str]) -> jax.Array:
        """Hoisted automorphisms (Max-Parallel ModUp shared by all elements): ``(len(elements), *ct.data.shape)``."""
        key_list = self._galois_keys(elements, keys, what, ct)
        maps = jnp.stack([self.tables.index_map(g) for g in elements])
        key_data = self.placement.hoisted_key_data(key_list, params=self.params, plan=self.plan, level=ct.level)
        return self._run(evaluator.rotate_hoisted, (ct.data, maps, key_data), (self.plan, self.tables.level(ct.level)),
                         ct.level, num_p=self.num_p, reduction=self.reduction)

    @_on_placement()
    def sum_slots(self, ct: Ciphertext, keys) -> Ciphertext:
        """Every slot becomes the sum of all slots (log2(slots) rotations; needs power-of-two rotation keys)."""
        self._check_ct(ct)
        r = 1
        while r < ct.slots:
            ct = self.add(ct, self.rotate(ct, r, keys))
            r *= 2
        return ct
