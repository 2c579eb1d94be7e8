"""One evaluator protocol for every circuit, and its two implementations.

A circuit (linear transform, polynomial, an app's whole model) is written once against :class:`Evaluator`:

* :class:`CKKSEvaluator` runs it on hemx ciphertexts (a :class:`~hemx.Context` and secret-free evaluation keys);
* :class:`SlotSimulator` runs it on cleartext numpy slot vectors with the *same* level and scale accounting
  (rescales divide the recorded scale by the same primes, levels run out at the same place, scale mismatches
  raise the same errors), so "is the packed algorithm right" is checked without encryption and "is CKKS precise
  enough" by comparing the two.

Values are batches of slot vectors: a :class:`~hemx.ckks.Ciphertext` with leading batch axes, or a
:class:`SimCiphertext` holding numpy ``(..., slots)``. Operations never rescale on their own: products return
at the product of the scales, and :meth:`Evaluator.rescale` divides by the level's primes (``mul(a, b,
rescale=True)`` asks for both at once: on ciphertexts one ModDown then relinearizes and rescales, one rounding).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Protocol, Sequence, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from hemx.ckks import Ciphertext, Context, EvaluationKeys, Plaintext
from hemx.ckks.params import CKKSParameters
from hemx.errors import LevelError, ParameterError, ScaleMismatchError, ShapeError

SCALE_RTOL = 1e-9  # as hemx.ckks: recorded scales that agree to this relative tolerance are equal


@runtime_checkable
class Evaluator(Protocol):
    """What circuits need from a backend. ``x`` is a backend value (ciphertext or simulated ciphertext)."""

    slots: int
    max_level: int
    default_scale: float

    def level(self, x) -> int: ...
    def scale(self, x) -> float: ...
    def with_scale(self, x, scale: float): ...  # reinterpret: same data, another recorded scale
    def rescale_divisor(self, level: int) -> float: ...
    def add(self, a, b): ...  # b: a value, or numbers encoded at a's scale
    def sub(self, a, b): ...
    def mul(self, a, b, *, rescale: bool = False): ...  # two values, relinearized; rescale=True: and rescaled
    def mul_const(self, x, value: float, *, plain_scale: float): ...  # round(value * plain_scale) times x
    def encode(self, values, *, level: int, scale: float, rows=None, pos=None): ...  # numbers (or traced) -> a
    # plaintext for mul_plain; ``rows``/``pos``: the values are those rows of a zero batch (place_rows)
    def mul_plain(self, x, plaintext): ...  # not rescaled
    def dot_plain(self, x, plaintexts): ...  # sum_k x[k] * plaintexts[k] (stacked x, one encode of k rows), not rescaled
    def rescale(self, x): ...
    def drop_level(self, x, level: int): ...
    def rotate(self, x, steps: int): ...
    def rotate_many(self, x, steps: Sequence[int]) -> list: ...
    def rotate_stack(self, x, steps: Sequence[int]): ...  # stack(rotate_many(x, steps)), hoisted, without the split
    def stack(self, xs: Sequence): ...  # values of one level and scale -> one value with a new leading axis
    def take(self, x, index: int): ...  # entry ``index`` of the leading batch axis
    def sum_leading(self, x): ...  # sum over the leading batch axis
    def ready(self, x): ...  # x, once computed (JAX dispatches asynchronously)


def place_rows(values, rows: int | None, pos):
    """``values`` ``(k, ...)`` as rows ``pos`` (``k`` distinct indices) of a batch ``(rows, ...)``, zeros elsewhere
    (numpy, or jax.numpy for traced values); ``values`` as they are without ``pos``."""
    if pos is None:
        return values
    pos = np.asarray(pos)
    if rows is None or pos.shape != np.shape(values)[:1] or pos.size and not 0 <= pos.min() <= pos.max() < rows:
        raise ShapeError(f"pos must give one row index in [0, rows) per row of the values; got pos of shape "
                         f"{pos.shape}, values {np.shape(values)}, rows={rows!r}")
    if isinstance(values, jax.core.Tracer):
        return jnp.zeros((rows,) + values.shape[1:], values.dtype).at[pos].set(values)
    values = np.asarray(values)
    out = np.zeros((rows,) + values.shape[1:], values.dtype)
    out[pos] = values
    return out


def as_evaluator(backend, keys=None) -> Evaluator:
    """A :class:`Context` (with its keys) or an :class:`Evaluator` -> an :class:`Evaluator`."""
    if isinstance(backend, Context):
        return CKKSEvaluator(backend, keys)
    if isinstance(backend, (CKKSEvaluator, SlotSimulator)):
        return backend
    if isinstance(backend, Evaluator):
        return backend
    raise ParameterError(f"expected a hemx.Context or a hemx.circuits evaluator, got {type(backend).__name__}")


# ------------------------------------------------------------------------------------------------------------
# CKKS
# ------------------------------------------------------------------------------------------------------------


class CKKSEvaluator:
    """The protocol on hemx ciphertexts.

    Args:
        ctx: the :class:`~hemx.Context` the ciphertexts belong to.
        keys: a :class:`~hemx.KeySet` or :class:`~hemx.ckks.EvaluationKeys` (relinearization and the Galois keys
            of the rotations used); None for circuits that need no key (additions, plaintext products).
    """

    def __init__(self, ctx: Context, keys: EvaluationKeys | None = None, *, slots: int | None = None):
        if not isinstance(ctx, Context):
            raise ParameterError(f"expected a hemx.Context, got {type(ctx).__name__}")
        if keys is not None and not isinstance(keys, EvaluationKeys):
            raise ParameterError(f"expected hemx keys (KeySet or EvaluationKeys), got {type(keys).__name__}")
        self.ctx, self.keys = ctx, keys
        # slots: the context's, or another power of two <= N/2 for circuits that treat a ciphertext as packed
        # more densely than its context (the full-slot transforms of bootstrapping a sparse ciphertext)
        self.slots = ctx.slots if slots is None else int(slots)
        if self.slots > ctx.params.max_slots or self.slots & (self.slots - 1):
            raise ParameterError(f"slots must be a power of two <= N/2 = {ctx.params.max_slots}, got {slots!r}")
        self.max_level = ctx.params.max_level
        self.default_scale = ctx.params.scale

    def _need_keys(self, what: str):
        if self.keys is None:
            raise ParameterError(f"{what} needs evaluation keys: pass the KeySet from ctx.keygen(...)")
        return self.keys

    @staticmethod
    def _ciphertext(x) -> Ciphertext:
        if not isinstance(x, Ciphertext):
            raise ParameterError(f"expected a hemx Ciphertext, got {type(x).__name__}")
        return x

    def level(self, x: Ciphertext) -> int:
        return self._ciphertext(x).level

    def scale(self, x: Ciphertext) -> float:
        return self._ciphertext(x).scale

    def with_scale(self, x: Ciphertext, scale: float) -> Ciphertext:
        return x.replace(scale=float(scale))

    def rescale_divisor(self, level: int) -> float:
        return self.ctx.rescale_divisor(level)

    def add(self, a, b):
        return self.ctx.add(a, b)

    def sub(self, a, b):
        return self.ctx.sub(a, b)

    def mul(self, a, b, *, rescale=False):
        # rescale=True fuses the rescale into the relinearization's ModDown (one rounding instead of two)
        return self.ctx.mul(a, b, self._need_keys("a ciphertext product"), rescale=bool(rescale), auto_scale=False)

    def mul_const(self, x, value, *, plain_scale):
        return self.ctx.mul(x, float(value), plain_scale=float(plain_scale), rescale=False, auto_scale=False)

    def encode(self, values, *, level, scale, rows=None, pos=None):
        """:meth:`Context.encode` at the evaluator's slot count (:func:`place_rows` first): host values are checked
        and encoded at concrete time, traced ones inside the program, by the same encoder bit for bit."""
        return self.ctx.encode(place_rows(values, rows, pos), level=level, scale=scale, slots=self.slots)

    def mul_plain(self, x, plaintext):
        return self.ctx.mul(x, plaintext, rescale=False, auto_scale=False)

    def dot_plain(self, x, plaintexts):
        return self.ctx.dot_plain(x, plaintexts)

    def rescale(self, x):
        return self.ctx.rescale(x)

    def drop_level(self, x, level):
        return self.ctx.drop_level(x, level)

    def rotate(self, x, steps):
        return self.ctx.rotate(x, int(steps), self._need_keys("a rotation"))

    def rotate_many(self, x, steps):
        return self.ctx.rotate_many(x, [int(s) for s in steps], self._need_keys("a rotation"))

    def rotate_stack(self, x, steps):
        return self.ctx.rotate_many(x, [int(s) for s in steps], self._need_keys("a rotation"), stacked=True)

    def stack(self, xs):
        first = xs[0]
        for other in xs[1:]:
            if (other.level, other.batch_shape) != (first.level, first.batch_shape) or not math.isclose(
                    other.scale, first.scale, rel_tol=SCALE_RTOL):
                raise LevelError("only ciphertexts of one level, scale and batch shape can be stacked")
        bounds = [c.bound for c in xs]
        bound = None if any(b is None for b in bounds) else max(bounds)  # the batch's bound: the largest
        return first.replace(data=jnp.stack([c.data for c in xs]), bound=bound)

    def take(self, x, index):
        return x.replace(data=x.data[index])

    def sum_leading(self, x):
        acc = self.take(x, 0)
        for i in range(1, x.batch_shape[0]):
            acc = self.ctx.add(acc, self.take(x, i))
        return acc

    def ready(self, x):
        jax.block_until_ready(x.data)
        return x


# ------------------------------------------------------------------------------------------------------------
# the slot simulator
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SimCiphertext:
    """A simulated ciphertext: slot values ``(..., slots)`` (float64 or complex128), level and recorded scale."""

    values: np.ndarray
    level: int
    scale: float

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape[:-1])


@dataclasses.dataclass(frozen=True)
class SimPlaintext:
    """A simulated plaintext: values ``(..., slots)`` at a level and scale."""

    values: np.ndarray
    level: int
    scale: float


class SlotSimulator:
    """The protocol on cleartext slot vectors, with CKKS's level and scale bookkeeping.

    Rotations are ``numpy.roll``; rescaling divides the recorded scale by the same primes as the context;
    additions of values at different scales raise :class:`~hemx.errors.ScaleMismatchError` exactly when the
    context would, and a rescale at level 0 raises :class:`~hemx.errors.LevelError`. ``rotations_used`` records
    every rotation step (to compare with a circuit's planned key list), ``products`` counts ciphertext
    products (relinearizations).

    Without parameters (``SlotSimulator(None, slots=..., max_level=...)``) the simulator is *exact*: levels are
    counted as in CKKS (a rescale at level 0 still raises), but every scale is 1, every rescale divides by 1 and
    constants are not rounded, so a circuit's packing and level plan are checked against numpy to the last bit
    (the apps' layout tests); with parameters, its scale accounting is checked as well.

    Args:
        params: the parameter set whose levels and primes are simulated, or None for the exact mode.
        slots: slots per vector (default N/2; required without parameters).
        max_level: the top level without parameters (default 0); with parameters it is theirs.
    """

    def __init__(self, params: CKKSParameters | None, *, slots: int | None = None, max_level: int | None = None):
        if params is None:
            if isinstance(slots, bool) or not isinstance(slots, (int, np.integer)) or slots < 1:
                raise ParameterError(f"a simulator without parameters needs slots >= 1, got {slots!r}")
            if max_level is not None and (isinstance(max_level, bool) or not isinstance(max_level, (int, np.integer))
                                          or max_level < 0):
                raise ParameterError(f"max_level must be an integer >= 0, got {max_level!r}")
            self.max_level = int(max_level or 0)
            self.default_scale = 1.0
        elif not isinstance(params, CKKSParameters):
            raise ParameterError(f"expected CKKSParameters (or None), got {type(params).__name__}")
        else:
            if max_level is not None:
                raise ParameterError("max_level applies only without parameters (they fix the levels)")
            self.max_level = params.max_level
            self.default_scale = params.scale
        self.params = params
        self.slots = int(slots if slots is not None else params.max_slots)
        self.rotations_used: set[int] = set()
        self.products = 0

    @classmethod
    def like(cls, ctx: Context) -> "SlotSimulator":
        """A simulator with the context's parameters and slot count."""
        return cls(ctx.params, slots=ctx.slots)

    def encrypt(self, values, *, level: int | None = None, scale: float | None = None) -> SimCiphertext:
        """Cleartext values ``(..., count)`` (count <= slots, zero-padded) as a simulated fresh ciphertext."""
        z = np.asarray(values)
        z = z.astype(np.complex128 if np.iscomplexobj(z) else np.float64)
        if z.ndim == 0:
            z = np.full(self.slots, z)
        if z.shape[-1] > self.slots:
            raise ParameterError(f"{z.shape[-1]} values do not fit in {self.slots} slots")
        if z.shape[-1] < self.slots:
            z = np.concatenate([z, np.zeros(z.shape[:-1] + (self.slots - z.shape[-1],), z.dtype)], axis=-1)
        level = self.max_level if level is None else self._check_level(int(level))
        return SimCiphertext(z, level, float(self.default_scale if scale is None else scale))

    def decrypt(self, x: SimCiphertext) -> np.ndarray:
        return np.array(x.values)

    # ---------------------------------------------------------------- protocol
    def level(self, x: SimCiphertext) -> int:
        return x.level

    def scale(self, x: SimCiphertext) -> float:
        return x.scale

    def with_scale(self, x: SimCiphertext, scale: float) -> SimCiphertext:
        # the data are unchanged, so the value read back changes by scale_old / scale_new
        return SimCiphertext(x.values * (x.scale / float(scale)), x.level, float(scale))

    def rescale_divisor(self, level: int) -> float:
        p = self.params
        if not 0 < level <= self.max_level:
            raise LevelError(f"no rescale at level {level} (levels 1..{self.max_level} have one)")
        if p is None:
            return 1.0  # exact mode
        return p.rescale_divisor(level)

    def _values(self, b) -> np.ndarray:
        z = np.asarray(b)
        if z.ndim == 0:
            return z
        if z.shape[-1] < self.slots:
            z = np.concatenate([z, np.zeros(z.shape[:-1] + (self.slots - z.shape[-1],), z.dtype)], axis=-1)
        return z

    def _check_level(self, level: int) -> int:
        if not 0 <= level <= self.max_level:
            raise LevelError(f"level {level} outside 0..{self.max_level}")
        return level

    def _same_scale(self, a: float, b: float):
        if not math.isclose(a, b, rel_tol=SCALE_RTOL):
            raise ScaleMismatchError(f"operands have different scales (2^{math.log2(a):.4f} vs 2^{math.log2(b):.4f})")

    def add(self, a: SimCiphertext, b) -> SimCiphertext:
        if isinstance(b, SimCiphertext):
            self._same_scale(a.scale, b.scale)
            return SimCiphertext(a.values + b.values, min(a.level, b.level), a.scale)
        if isinstance(b, SimPlaintext):
            self._same_scale(a.scale, b.scale)
            return SimCiphertext(a.values + b.values, min(a.level, b.level), a.scale)
        return SimCiphertext(a.values + self._values(b), a.level, a.scale)

    def sub(self, a: SimCiphertext, b) -> SimCiphertext:
        if isinstance(b, (SimCiphertext, SimPlaintext)):
            return self.add(a, dataclasses.replace(b, values=-b.values))
        return self.add(a, -self._values(b))

    def _product_scale(self, scale: float, level: int) -> float:
        if self.params is None:  # exact mode: no modulus to overflow
            return scale
        log_q = sum(math.log2(q) for q in self.params.moduli[: self.params.limbs_at_level(level)])
        if math.log2(scale) >= log_q - 1:
            raise LevelError(f"the product would have scale 2^{math.log2(scale):.1f}, beyond the modulus at "
                             f"level {level} (2^{log_q:.1f})")
        return scale

    def mul(self, a: SimCiphertext, b: SimCiphertext, *, rescale: bool = False) -> SimCiphertext:
        if not isinstance(b, SimCiphertext):
            raise ParameterError("mul takes two simulated ciphertexts; use mul_plain / mul_const for plain operands")
        self.products += 1
        level = min(a.level, b.level)
        out = SimCiphertext(a.values * b.values, level, self._product_scale(a.scale * b.scale, level))
        return self.rescale(out) if rescale else out

    def mul_const(self, x: SimCiphertext, value, *, plain_scale) -> SimCiphertext:
        if not (math.isfinite(plain_scale) and plain_scale > 0):
            raise ParameterError(f"plain_scale must be positive and finite, got {plain_scale!r}")
        c = float(value)
        if self.params is not None:
            c = round(c * plain_scale) / plain_scale  # the integer constant CKKS multiplies by
        return SimCiphertext(x.values * c, x.level, self._product_scale(x.scale * plain_scale, x.level))

    def encode(self, values, *, level, scale, rows=None, pos=None) -> SimPlaintext:
        values = place_rows(np.asarray(values), rows, pos)
        return SimPlaintext(self._values(values), self._check_level(int(level)), float(scale))

    def mul_plain(self, x: SimCiphertext, plaintext) -> SimCiphertext:
        if not isinstance(plaintext, SimPlaintext):
            raise ParameterError("mul_plain takes a plaintext from encode()")
        level = min(x.level, plaintext.level)
        return SimCiphertext(x.values * plaintext.values, level,
                             self._product_scale(x.scale * plaintext.scale, level))

    def dot_plain(self, x: SimCiphertext, plaintexts) -> SimCiphertext:
        """``sum_k x[k] * plaintexts[k]``: ``x`` ``(k, ..., slots)``, ``plaintexts`` from one :meth:`encode` of
        ``(k, slots)`` values."""
        if not isinstance(plaintexts, SimPlaintext):
            raise ParameterError("dot_plain takes a plaintext batch from encode()")
        xv, pv = x.values, plaintexts.values
        if xv.ndim < 2 or pv.ndim != 2 or pv.shape[0] != xv.shape[0]:
            raise ShapeError(f"dot_plain needs values (k, ..., slots) and plaintexts (k, slots) of the same k; got "
                             f"{xv.shape[:-1]} and {pv.shape[:-1]}")
        level = min(x.level, plaintexts.level)
        out = np.einsum("k...s,ks->...s", xv, pv)  # one pass, no (k, ..., slots) temporary (1.4-2x a Python loop)
        return SimCiphertext(out, level, self._product_scale(x.scale * plaintexts.scale, level))

    def rescale(self, x: SimCiphertext) -> SimCiphertext:
        if x.level == 0:
            raise LevelError("no levels left to rescale: the simulated ciphertext is at level 0")
        return SimCiphertext(x.values, x.level - 1, x.scale / self.rescale_divisor(x.level))

    def drop_level(self, x: SimCiphertext, level: int) -> SimCiphertext:
        if level > x.level:
            raise LevelError(f"cannot raise a ciphertext from level {x.level} to {level}")
        return SimCiphertext(x.values, self._check_level(int(level)), x.scale)

    def rotate(self, x: SimCiphertext, steps: int) -> SimCiphertext:
        steps = int(steps)
        if steps % self.slots:
            self.rotations_used.add(steps % self.slots)
        return SimCiphertext(np.roll(x.values, -steps, axis=-1), x.level, x.scale)

    def rotate_many(self, x: SimCiphertext, steps: Sequence[int]) -> list[SimCiphertext]:
        return [self.rotate(x, s) for s in steps]

    def rotate_stack(self, x: SimCiphertext, steps: Sequence[int]) -> SimCiphertext:
        """``stack(rotate_many(x, steps))``, each rotation copied straight into its row (no temporaries)."""
        v = x.values
        out = np.empty((len(steps),) + v.shape, dtype=v.dtype)
        for i, step in enumerate(steps):
            r = int(step) % self.slots
            if r:
                self.rotations_used.add(r)
            out[i, ..., : self.slots - r] = v[..., r:]
            out[i, ..., self.slots - r:] = v[..., :r]
        return SimCiphertext(out, x.level, x.scale)

    def stack(self, xs: Sequence[SimCiphertext]) -> SimCiphertext:
        first = xs[0]
        for other in xs[1:]:
            if other.level != first.level or other.batch_shape != first.batch_shape:
                raise LevelError("only values of one level and batch shape can be stacked")
            self._same_scale(first.scale, other.scale)
        return SimCiphertext(np.stack([x.values for x in xs]), first.level, first.scale)

    def take(self, x: SimCiphertext, index: int) -> SimCiphertext:
        return SimCiphertext(x.values[index], x.level, x.scale)

    def sum_leading(self, x: SimCiphertext) -> SimCiphertext:
        return SimCiphertext(x.values.sum(axis=0), x.level, x.scale)

    def ready(self, x: SimCiphertext) -> SimCiphertext:
        return x


def block_until_ready(x: Any) -> Any:
    """Wait for a ciphertext's arrays (JAX dispatches asynchronously); simulated values pass through."""
    if isinstance(x, Ciphertext):
        jax.block_until_ready(x.data)
    return x


__all__ = ["Evaluator", "CKKSEvaluator", "SlotSimulator", "SimCiphertext", "SimPlaintext", "as_evaluator",
           "block_until_ready", "place_rows", "Plaintext"]
