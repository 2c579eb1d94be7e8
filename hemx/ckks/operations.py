"""The CKKS evaluator: every homomorphic operation on ciphertexts of one parameter set.

:class:`Evaluator` checks its operands (context, keys, levels, scales, batch shapes), tracks level, scale and
magnitude bound (:mod:`hemx.ckks.scale_policy`), and runs :mod:`hemx.ckks.evaluator`'s jitted kernels through an
eager :class:`~hemx.ckks.dispatch.Dispatcher`. Placement on a mesh is a strategy it is given
(:mod:`hemx.ckks.placement`): every public operation runs in the placement's kernel block and places its
result. Every operation accepts ciphertexts with any leading batch shape (TensorFHE's operation-level batching)
and traces under ``jax.jit`` and ``jax.export``.

Scales: ``add`` / ``sub`` align operands whose scales differ by less than ``AUTO_SCALE_MAX_RATIO`` (they were
divided by different primes) exactly, with an integer constant folded into a rescale
(:meth:`Evaluator._match_scales`); farther apart scales raise ``ScaleMismatchError``.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from hemx.ckks import evaluator
from hemx.ckks import keyswitch as ks
from hemx.ckks import placement as placement_mod
from hemx.ckks.ciphertext import Ciphertext, Plaintext
from hemx.ckks.dispatch import Dispatcher
from hemx.ckks.encoding import Encoder
from hemx.ckks.keys import EvaluationKeys, SwitchingKey
from hemx.ckks.scale_policy import (AUTO_SCALE_MAX_RATIO, MIN_ALIGN_FACTOR, SCALE_RTOL, add_bounds,
                                    mul_bounds)
from hemx.ckks.tables import LevelTables, TableCache
from hemx.ckks.validation import check_int, is_int
from hemx.errors import (ContextMismatchError, KeyMismatchError, LevelError, OverflowBoundError, ParameterError,
                         ScaleMismatchError, ShapeError, SlotError)
from hemx.kernels import automorphism, modarith

on_placement = placement_mod.on_placement


def check_dataflow(name: str) -> str:
    """``name`` if it is a key-switching dataflow of :data:`hemx.ckks.keyswitch.DATAFLOWS`; ParameterError else."""
    if name not in ks.DATAFLOWS:
        raise ParameterError(f"unknown key-switching dataflow {name!r}; choose one of {ks.DATAFLOWS}")
    return name


def check_ciphertext(ct, context_id: int, what: str = "ciphertext") -> Ciphertext:
    """``ct`` if it is a :class:`Ciphertext` of the context ``context_id`` (ParameterError / ContextMismatchError)."""
    if not isinstance(ct, Ciphertext):
        raise ParameterError(f"{what} must be a hemx Ciphertext, got {type(ct).__name__}")
    if ct.context_id != context_id:
        raise ContextMismatchError(
            f"{what} belongs to another context; ciphertexts can only be combined with the context "
            "(and parameters) that created them"
        )
    return ct


def check_key(key, context_id: int, key_id: int | None = None, level: int | None = None):
    """``key`` if it belongs to context ``context_id``, to key set ``key_id`` and serves ``level`` (None: unchecked)."""
    if getattr(key, "context_id", None) != context_id:
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


def with_data(ct, data, **changes):
    """``ct.replace(data=data, **changes)`` without ``dataclasses.replace``'s per-call field introspection (a few
    microseconds, a tenth of an HE-Add at N = 2^12): a copy of the frozen dataclass's attributes."""
    out = object.__new__(type(ct))
    out.__dict__.update(ct.__dict__, data=data, **changes)
    return out


class Evaluator:
    """The homomorphic operations for one parameter set (module docstring).

    Args:
        encoder: the :class:`~hemx.ckks.encoding.Encoder` plain operands are encoded with; its parameters, NTT
            plan, slot count and context id are the evaluator's.
        tables: the per-level tables (:class:`hemx.ckks.tables.TableCache`; default built from the parameters;
            on a mesh the placement's :meth:`~hemx.ckks.placement.Placement.table_cache`). Replaceable.
        reduction: modular reduction of known-operand products ("shoup", "montgomery", "barrett"; the plan's).
        keyswitch: the default key-switching dataflow ("mp", "dc" or "oc"), overridable per call.
        placement: the placement strategy (default: the encoder's).
        run: the function kernels are dispatched through, ``run(fn, data, tables, tag, **statics)`` (default this
            evaluator's own :meth:`Dispatcher.run <hemx.ckks.dispatch.Dispatcher.run>`; a context passes its
            ``_run``, so a hook on the context sees every kernel).
    """

    def __init__(self, encoder: Encoder, *, tables: TableCache | None = None, reduction: str,
                 keyswitch: str = "mp", placement=None, run: Callable | None = None):
        self.encoder, self.params, self.plan = encoder, encoder.params, encoder.plan
        self.context_id, self.slots, self.num_p, self.scales = (encoder.context_id, encoder.slots, encoder.num_p,
                                                                encoder.scales)
        self.placement = encoder.placement if placement is None else placement
        self.reduction, self.keyswitch = reduction, check_dataflow(keyswitch)
        self.tables = self.placement.table_cache(self.params, reduction=reduction) if tables is None else tables
        self.dispatch = Dispatcher(self.plan, eager=self.placement.mesh is None)
        self.run = self.dispatch.run if run is None else run

    def __repr__(self) -> str:
        return f"Evaluator({self.params.describe()}, slots={self.slots}, keyswitch={self.keyswitch!r})"

    def _limbs(self, level: int) -> int:
        return self.params.limbs_at_level(level)

    def _elementwise_plan(self):
        return self.dispatch.elementwise_plan()

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

    def _check_ct(self, ct, what: str = "ciphertext") -> Ciphertext:
        return check_ciphertext(ct, self.context_id, what)

    def _check_key(self, key, key_id: int | None = None, level: int | None = None):
        return check_key(key, self.context_id, key_id, level)

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
        factor = lo.scale * self.scales.divisor(lo.level + 1) / hi.scale if a.level != b.level else 0.0
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

    @on_placement()
    def switch_key(self, ct: Ciphertext, key: SwitchingKey, *, keyswitch: str | None = None) -> Ciphertext:
        """Key switching with any switching key (``ct`` under the key's source secret -> under its target)."""
        self._check_ct(ct)
        if not isinstance(key, SwitchingKey):
            raise ParameterError(f"switch_key needs a SwitchingKey, got {type(key).__name__}")
        self._check_key(key, ct.key_id, ct.level)
        flow = check_dataflow(keyswitch or self.keyswitch)
        data = self.run(evaluator.rotate_one, (ct.data, self.tables.index_map(1), key.material),
                         (self.plan, self.tables.level(ct.level)), ct.level, num_p=self.num_p,
                         reduction=self.reduction, dataflow=flow)  # the identity automorphism: a plain key switch
        return ct.replace(data=data)

    # -------------------------------------------------------------------------------------------- leveled ops
    @on_placement()
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

    @on_placement()
    def add(self, a: Ciphertext, b) -> Ciphertext:
        """``a + b`` for a ciphertext and a ciphertext, plaintext or scalar/array of values."""
        self._check_ct(a)
        if isinstance(b, Ciphertext):
            self._check_ct(b, "second ciphertext")
            self._same_keys(a, b)
            if a.level != b.level or a.scale != b.scale or a.data.shape != b.data.shape:  # else nothing to align
                self._check_batches(a.batch_shape, b.batch_shape)
                a, b = self._match_scales(a, b)
            data = self.run(evaluator.add, (a.data, b.data), (self._elementwise_plan(),), "ew", num_p=self.num_p,
                             num_q=a.data.shape[-2])
            return with_data(a, data, is_complex=a.is_complex or b.is_complex, bound=add_bounds(a.bound, b.bound))
        pt = self._as_plaintext(b, a, scale=a.scale)
        if self._check_batches(a.batch_shape, pt.batch_shape) != a.batch_shape:
            raise ShapeError(
                f"the plain operand has batch shape {pt.batch_shape} (values shape {pt.batch_shape + (pt.slots,)}), "
                f"which does not fit the ciphertext's batch shape {a.batch_shape}: give at most {a.slots} values "
                "per ciphertext, batched like the ciphertext"
            )
        a, pt = self._align(a, pt)
        n = a.num_limbs
        c0 = self.run(evaluator.add, (a.data[..., 0, :, :], pt.data), (self._elementwise_plan(),), "ew",
                       num_p=self.num_p, num_q=n)
        return a.replace(data=a.data.at[..., 0, :, :].set(c0), is_complex=a.is_complex or pt.is_complex,
                         bound=add_bounds(a.bound, pt.bound))

    @on_placement()
    def sub(self, a: Ciphertext, b) -> Ciphertext:
        """``a - b`` (b: ciphertext, plaintext or values)."""
        return self.add(a, self.negate(b) if isinstance(b, Ciphertext) else self._negate_plain(b, a))

    @on_placement()
    def negate(self, a: Ciphertext) -> Ciphertext:
        self._check_ct(a)
        return a.replace(data=self.run(evaluator.negate, (a.data,), (self._elementwise_plan(),), "ew",
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
            if b.context_id != self.context_id:
                raise ContextMismatchError("the plaintext belongs to another context")
            return b
        return self.encoder.encode(self._broadcast_values(b), level=like.level, scale=scale)

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

    @on_placement()
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
            plain_scale = self.scales.check_plain_scale(plain_scale)
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
                c = self.scales.scale_factor(a.scale * b.scale, a.level)
                if c > 1:  # the product would fall below half the managed scale: an exact integer lifts it
                    a = self._mul_scalar(a, 1.0, float(c))
            self.scales.check_product_scale(a.scale * b.scale, a.level)
            flow = check_dataflow(keyswitch or self.keyswitch)
            statics = dict(num_p=self.num_p, reduction=self.reduction, dataflow=flow)
            scale, is_complex = a.scale * b.scale, a.is_complex or b.is_complex
            bound = mul_bounds(a.bound, b.bound)
            if auto_scale:
                self.scales.check_bound_fits(bound, scale, a.level, "the product")
            if rescale and t.drop:  # relinearization and rescale in one ModDown
                self.scales.check_result_scale(scale / t.divisor, a.level - 1, "the product's rescale")
                data = self.run(evaluator.mul_relin_rescale, (a.data, b.data, key.material), (self.plan, t), a.level,
                                 **statics)
                return with_data(a, data, level=a.level - 1, scale=scale / t.divisor, is_complex=is_complex,
                                  bound=bound)
            data = self.run(evaluator.mul_relin, (a.data, b.data, key.material), (self.plan, t), a.level, **statics)
            out = with_data(a, data, scale=scale, is_complex=is_complex, bound=bound)
        else:
            out = self._mul_plain(a, b, plain_scale, auto_scale)
            if rescale and a.level == 0 and out.scale == a.scale:  # an integer product at level 0: nothing to divide
                return out
        return self.rescale(out) if rescale else out

    def _managed_operands(self, a: Ciphertext, b: Ciphertext) -> tuple[Ciphertext, Ciphertext]:
        """For a product at ``min`` of the levels: the higher operand, when its scale is off the band of that level
        (a fresh ciphertext of the top level dropped to a level whose primes are other sizes), is brought to it at
        ``level_scale`` exactly (``rescale(ct * c)`` from one level above, an exact large integer ``c``)."""
        low, high, swap = (a, b, False) if a.level < b.level else (b, a, True)
        if not self.scales.in_band(high.scale, low.level):
            target = self.scales.level_scale(low.level)
            if target * self.scales.divisor(low.level + 1) / high.scale >= MIN_ALIGN_FACTOR:
                high = self._rescale_to(self.drop_level(high, low.level + 1), target)
        return (high, low) if swap else (low, high)

    def _mul_plain(self, a: Ciphertext, b, plain_scale: float | None = None, auto_scale: bool = False) -> Ciphertext:
        if isinstance(b, Plaintext):
            if b.context_id != self.context_id:
                raise ContextMismatchError("the plaintext belongs to another context")
            pt = b
        else:
            t = self.tables.level(a.level)
            z = self._plain_values(b)
            real_scalar = z.ndim == 0 and not np.iscomplexobj(z)
            if plain_scale is not None:
                if real_scalar:
                    return self._mul_scalar(a, float(z), plain_scale)
                self.scales.check_product_scale(a.scale * plain_scale, a.level)
                pt = self.encoder.encode(self._broadcast_values(b), level=a.level, scale=plain_scale)
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
                if auto_scale and not self.scales.in_band(a.scale, a.level - 1):
                    target = self.scales.level_scale(a.level - 1) * t.divisor / a.scale
                if real_scalar:  # an integer constant, no encoding
                    return self._mul_scalar(a, float(z), target)
                pt = self.encoder.encode(self._broadcast_values(b), level=a.level, scale=target)
        self._check_batches(a.batch_shape, pt.batch_shape)
        a, pt = self._align(a, pt, check_scale=False)
        self.scales.check_product_scale(a.scale * pt.scale, a.level)
        if auto_scale:
            self.scales.check_bound_fits(mul_bounds(a.bound, pt.bound), a.scale * pt.scale, a.level, "the product")
        data = self.run(evaluator.mul_elementwise, (a.data, pt.data[..., None, :, :]), (self._elementwise_plan(),),
                         "ew", num_p=self.num_p, num_q=a.num_limbs)
        return a.replace(data=data, scale=a.scale * pt.scale, is_complex=a.is_complex or pt.is_complex,
                         bound=mul_bounds(a.bound, pt.bound))

    @on_placement()
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
        if pt.context_id != self.context_id:
            raise ContextMismatchError("the plaintext belongs to another context")
        if not ct.batch_shape or len(pt.batch_shape) != 1 or pt.batch_shape[0] != ct.batch_shape[0]:
            raise ShapeError(f"dot_plain needs a ciphertext batch (k, ...) and a plaintext batch (k,) of the same k; "
                             f"got batch shapes {ct.batch_shape} and {pt.batch_shape}")
        if ct.slots != pt.slots:
            raise SlotError(f"the ciphertext has {ct.slots} slots and the plaintext {pt.slots}")
        ct, pt = self._align(ct, pt, check_scale=False)
        scale = ct.scale * pt.scale
        self.scales.check_product_scale(scale, ct.level)
        bound = mul_bounds(ct.bound, pt.bound)
        data = self.run(evaluator.dot_plain, (ct.data, pt.data), (self._elementwise_plan(),), "ew",
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

    def _mul_scalar(self, a: Ciphertext, value: float, scale: float) -> Ciphertext:
        self.scales.check_product_scale(a.scale * scale, a.level)
        product = value * scale
        if not math.isfinite(product):
            raise SlotError(f"values are not finite: {value!r} x scale 2^{math.log2(scale):.1f} overflows a float")
        c = int(round(product))
        log_q = self.scales.log_q(a.num_limbs)
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
        data = self.run(evaluator.mul_known, (a.data, w), (self._elementwise_plan(),), "ew", num_p=self.num_p,
                         num_q=n, reduction=self.reduction)
        return a.replace(data=data, scale=a.scale * scale, bound=mul_bounds(a.bound, abs(value)))

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

    @on_placement()
    def rescale(self, ct: Ciphertext) -> Ciphertext:
        """Divide by the primes of the current level (one or two) with rounding; the level drops by one."""
        self._check_ct(ct)
        if ct.level == 0:
            raise LevelError("no levels left to rescale: the ciphertext is at level 0 (bootstrapping is not "
                             "available; use parameters with more levels)")
        t = self.tables.level(ct.level)
        if not ct.scale / t.divisor >= 2.0 ** -30:  # nothing left of any value (and far from float underflow)
            self.scales.check_result_scale(ct.scale / t.divisor, ct.level - 1, "rescale")
        data = self.run(evaluator.rescale, (ct.data,), (self.plan, t), ct.level, num_p=self.num_p,
                         reduction=self.reduction)
        return with_data(ct, data, level=ct.level - 1, scale=ct.scale / t.divisor)

    @on_placement()
    def rotate(self, ct: Ciphertext, steps: int, keys, *, keyswitch: str | None = None) -> Ciphertext:
        """Rotate the slots left by ``steps`` (negative: right), like ``numpy.roll(values, -steps)``."""
        self._check_ct(ct)
        steps = check_int("rotation steps", steps)
        if steps % ct.slots == 0:
            return ct
        g = automorphism.galois_element(self.params.n, steps % ct.slots)  # steps are taken mod the slots
        return self._galois_one(ct, g, keys, f"rotation by {steps}", keyswitch)

    @on_placement()
    def conjugate(self, ct: Ciphertext, keys, *, keyswitch: str | None = None) -> Ciphertext:
        """Complex conjugation of every slot (needs ``keygen(conjugation=True)``)."""
        self._check_ct(ct)
        g = automorphism.conjugation_element(self.params.n)
        return self._galois_one(ct, g, keys, "conjugation", keyswitch)

    def _galois_one(self, ct: Ciphertext, g: int, keys, what: str, keyswitch: str | None) -> Ciphertext:
        key = self._galois_keys([g], keys, [what], ct)[0]
        flow = check_dataflow(keyswitch or self.keyswitch)
        data = self.run(evaluator.rotate_one, (ct.data, self.tables.index_map(g), key.material),
                         (self.plan, self.tables.level(ct.level)), ct.level, num_p=self.num_p,
                         reduction=self.reduction, dataflow=flow)
        return with_data(ct, data)

    @on_placement()
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
        return self.run(evaluator.rotate_hoisted, (ct.data, maps, key_data), (self.plan, self.tables.level(ct.level)),
                         ct.level, num_p=self.num_p, reduction=self.reduction)

    @on_placement()
    def sum_slots(self, ct: Ciphertext, keys) -> Ciphertext:
        """Every slot becomes the sum of all slots (log2(slots) rotations; needs power-of-two rotation keys)."""
        self._check_ct(ct)
        r = 1
        while r < ct.slots:
            ct = self.add(ct, self.rotate(ct, r, keys))
            r *= 2
        return ct