"""The CKKS context: the thin front that composes the encoder, key generator, encryptor, decryptor and evaluator.

A :class:`Context` owns the parameters, the ``P + Q`` RNS ring (NTT plan) and the placement, and builds one of
each part for them (each usable on its own, each in its own module):

* ``ctx.encoder``: :class:`hemx.ckks.encoding.Encoder` (``encode``, ``decode``, ``to_ntt_q``);
* ``ctx.key_generator``: :class:`hemx.ckks.key_generator.KeyGenerator` (``keygen``);
* ``ctx.encryptor`` / ``ctx.decryptor``: :class:`hemx.ckks.encryptor.Encryptor` / ``Decryptor``;
* ``ctx.evaluator``: :class:`hemx.ckks.operations.Evaluator`, every homomorphic operation, its per-level tables
  (``ctx.tables``) and its eager kernel dispatch (:mod:`hemx.ckks.dispatch`); placement on a mesh
  (:mod:`hemx.ckks.placement`) is the strategy it is given;
* ``ctx.scales``: :class:`hemx.ckks.scale_policy.ScalePolicy`, the managed scales of the levels.

The context's methods (``ctx.add``, ``ctx.mul``, ``ctx.encrypt``, ...) delegate to those parts, and its
module re-exports the names that moved with them (:func:`managed_scales`, :data:`SCALE_RTOL`,
:func:`resolve_key_storage`, ...). Ciphertexts and keys name their context by ``id`` (:func:`context_by_id`).
"""

from __future__ import annotations

import functools
import weakref
from typing import Sequence

from hemx import plan as planner
from hemx.ckks import checks
from hemx.ckks import placement as placement_mod
from hemx.ckks.dispatch import bound_callable as _bound_callable  # noqa: F401  (re-export: the shared compiled wrappers)
from hemx.ckks.encoding import Encoder
from hemx.ckks.encryptor import Decryptor, Encryptor
from hemx.ckks.key_generator import KEY_STORAGE, KeyGenerator, resolve_key_storage
from hemx.ckks.keys import new_id
from hemx.ckks.operations import Evaluator, check_dataflow
from hemx.ckks.params import CKKSParameters
from hemx.ckks.sampling import Sampler
from hemx.ckks.scale_policy import (AUTO_SCALE_MAX_RATIO, MIN_ALIGN_FACTOR, MIN_SCALE_MARGIN_BITS, SCALE_RTOL,
                                    ScalePolicy, managed_scales)
from hemx.errors import ParameterError
from hemx.ring import RNSRing

__all__ = ["AUTO_SCALE_MAX_RATIO", "Context", "KEY_STORAGE", "MIN_ALIGN_FACTOR", "MIN_SCALE_MARGIN_BITS",
           "SCALE_RTOL", "context_by_id", "managed_scales", "resolve_key_storage"]

_LIVE: "weakref.WeakValueDictionary[int, Context]" = weakref.WeakValueDictionary()


def context_by_id(context_id: int) -> "Context | None":
    """The live :class:`Context` whose ``id`` is ``context_id`` (ciphertexts and keys name theirs by id), else None."""
    return _LIVE.get(context_id)


def _delegate(part: str, target):
    """A method of :class:`Context` calling ``getattr(self, part).<target's name>`` (``target``'s docstring)."""
    name = target.__name__

    @functools.wraps(target)
    def method(self, *args, **kwargs):
        return getattr(getattr(self, part), name)(*args, **kwargs)

    return method


def _forward(part: str, name: str, doc: str) -> property:
    """A settable attribute of :class:`Context` that is ``getattr(self, part).name``."""
    return property(lambda self: getattr(getattr(self, part), name),
                    lambda self, value: setattr(getattr(self, part), name, value), doc=doc)


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

    Attributes:
        encoder, key_generator, encryptor, decryptor, evaluator: the parts (module docstring).
        params, id, slots, num_p, basis, placement, mesh, engine, planned, reduction, keyswitch, ring, plan,
        key_storage, tables, sampler, decryption_check: the settings and resources the parts share (``engine``: the
        :class:`hemx.plan.engine.EngineChoice`, whether the native kernels use the CPU's AMX tiles).
    """

    def __init__(self, params: CKKSParameters, *, slots: int | None = None, ntt: str | None = None,
                 reduction: str | None = None, keyswitch: str | None = None, sampler: Sampler | None = None,
                 planning: str | None = None, ntt_split: Sequence[int] | None = None, bp: int | None = None,
                 decryption_check: str = "raise", key_storage: str = "auto", mesh=None,
                 keyswitch_path: str = "auto"):
        if not isinstance(params, CKKSParameters):
            raise ParameterError("Context needs a CKKSParameters instance")
        checks.check_mode(decryption_check)
        self.params = params
        self.id = new_id()
        _LIVE[self.id] = self
        self.num_p = len(params.special_moduli)  # special (P) limbs
        self.basis = tuple(params.special_moduli) + tuple(params.moduli)  # P first, then Q
        self.placement = placement_mod.for_mesh(mesh, keyswitch_path=keyswitch_path)
        self.mesh = self.placement.mesh  # None on one device
        forced_flow = None if keyswitch is None else check_dataflow(keyswitch)
        method = self.placement.resolve_ntt(ntt, ntt_split=ntt_split)  # on a mesh: a pure-JAX NTT
        with self.placement.kernels():  # on a mesh: planned and resolved with the native kernels off
            self.engine = planner.plan_matrix_engine(planning=planning)  # first: the NTT plan's key names the ISA
            self.planned = planner.plan_ntt(params.n, self.basis, method=method, reduction=reduction,
                                            split=ntt_split, bp=bp, planning=planning)
            variant = self.planned.variant
            self.reduction = variant.reduction
            flow = forced_flow or planner.choose_dataflow(params.n, self.num_p, params.num_limbs, params.dnum)
            self.ring = RNSRing(params.n, self.basis, **variant.ring_kwargs())
            self.placement.adopt_ring(self.ring)
            self.key_storage = resolve_key_storage(key_storage)
        self.plan = self.ring.plan
        self.encoder = Encoder(params, self.plan, slots=slots, context_id=self.id, placement=self.placement)
        self.slots = self.encoder.slots
        self._scale_policy = self.encoder.scales
        self.encryptor = Encryptor(self.encoder, sampler=sampler)
        self.decryptor = Decryptor(self.encoder, decryption_check=decryption_check)
        # kernels go through self._run (looked up per call), so a hook set on the context sees every kernel
        self.evaluator = Evaluator(self.encoder, reduction=self.reduction, keyswitch=flow,
                                   run=lambda *args, **statics: self._run(*args, **statics))
        self.key_generator = KeyGenerator(self)

    def __repr__(self) -> str:
        where = self.placement.describe()
        return (f"Context({self.params.describe()}, slots={self.slots}, ntt={self.plan.describe()!r}"
                f"{', ' + where if where else ''})")

    def place(self, x):
        """A ciphertext, plaintext, key or key set (or a list of them) made elsewhere (e.g. deserialized) placed
        where this context keeps its arrays (:meth:`hemx.ckks.placement.Placement.place`: on a mesh, spread over
        its devices; on one device, as it is); anything else as is."""
        return self.placement.place(x)

    tables = _forward("evaluator", "tables", "The per-level tables (:class:`hemx.ckks.tables.TableCache`).")
    keyswitch = _forward("evaluator", "keyswitch", "The default key-switching dataflow.")
    sampler = _forward("encryptor", "sampler", "The randomness source of encryption and key generation.")
    decryption_check = _forward("decryptor", "decryption_check", "The default mode of :meth:`decrypt`'s check.")

    @property
    def scales(self) -> ScalePolicy:
        """The :class:`~hemx.ckks.scale_policy.ScalePolicy` of ``params`` (built from them when missing)."""
        policy = self.__dict__.get("_scale_policy")
        if policy is None or policy.params is not self.params:
            policy = self.__dict__["_scale_policy"] = ScalePolicy(self.params)
        return policy

    def _run(self, fn, data: tuple, tables: tuple, tag, **statics):
        """Every kernel of :attr:`evaluator` runs through here: :meth:`hemx.ckks.dispatch.Dispatcher.run`."""
        return self.evaluator.dispatch.run(fn, data, tables, tag, **statics)

    @property
    def _bound(self) -> dict:
        return self.evaluator.dispatch.bound

    def _elementwise_plan(self):
        return self.evaluator.dispatch.elementwise_plan()

    def _limbs(self, level: int) -> int:
        return self.params.limbs_at_level(level)

    # scales (ctx.scales)
    level_scale = _delegate("scales", ScalePolicy.level_scale)
    _divisor = _delegate("scales", ScalePolicy.divisor)
    _log_q = _delegate("scales", ScalePolicy.log_q)
    _in_band = _delegate("scales", ScalePolicy.in_band)
    _scale_factor = _delegate("scales", ScalePolicy.scale_factor)
    _check_product_scale = _delegate("scales", ScalePolicy.check_product_scale)
    _check_bound_fits = _delegate("scales", ScalePolicy.check_bound_fits)
    _check_result_scale = _delegate("scales", ScalePolicy.check_result_scale)
    # encoding (ctx.encoder), keys (ctx.key_generator), encryption (ctx.encryptor, ctx.decryptor)
    encode = _delegate("encoder", Encoder.encode)
    decode = _delegate("encoder", Encoder.decode)
    to_ntt_q = _delegate("encoder", Encoder.to_ntt_q)
    keygen = _delegate("key_generator", KeyGenerator.generate)
    encrypt = _delegate("encryptor", Encryptor.encrypt)
    decrypt = _delegate("decryptor", Decryptor.decrypt)
    # evaluation (ctx.evaluator)
    level_tables = _delegate("evaluator", Evaluator.level_tables)
    rescale_divisor = _delegate("evaluator", Evaluator.rescale_divisor)
    drop_level = _delegate("evaluator", Evaluator.drop_level)
    add = _delegate("evaluator", Evaluator.add)
    sub = _delegate("evaluator", Evaluator.sub)
    negate = _delegate("evaluator", Evaluator.negate)
    mul = _delegate("evaluator", Evaluator.mul)
    dot_plain = _delegate("evaluator", Evaluator.dot_plain)
    rescale = _delegate("evaluator", Evaluator.rescale)
    rotate = _delegate("evaluator", Evaluator.rotate)
    conjugate = _delegate("evaluator", Evaluator.conjugate)
    rotate_many = _delegate("evaluator", Evaluator.rotate_many)
    sum_slots = _delegate("evaluator", Evaluator.sum_slots)
    switch_key = _delegate("evaluator", Evaluator.switch_key)
    _check_ct = _delegate("evaluator", Evaluator._check_ct)
    _check_key = _delegate("evaluator", Evaluator._check_key)
    _galois_keys = _delegate("evaluator", Evaluator._galois_keys)
