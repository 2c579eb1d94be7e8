"""``EncryptedArray``: CKKS ciphertexts that behave like numpy arrays.

An :class:`EncryptedArray` wraps one :class:`~hemx.Ciphertext` (any batch shape) with the :class:`~hemx.Context`
it belongs to and the key set it was encrypted under, and gives it numpy's operators and broadcasting::

    a = hemx.EncryptedArray.encrypt(ctx, x, keys)     # x: (..., slots) numbers
    y = (a * b + 0.5 * a).roll(1).sum()               # rescaled, level- and scale-aligned, rotated by the keys
    y.decrypt()                                       # numpy, like (x * z + 0.5 * x) rolled and summed

Logical shape: ``batch_shape + (slots,)``, the batch axes being the ciphertext's leading axes (independent
ciphertexts) and the last axis the slots of each one. Reductions over the slots (:meth:`sum`, :meth:`dot`) leave
the total in *every* slot (rotations and additions), so a reduced array (shape ``batch_shape``, or
``batch_shape + (1,)`` with ``keepdims=True``) still broadcasts against full vectors exactly like numpy's scalars.

numpy's own functions and ufuncs dispatch here too (``np.sum(a, axis=-1)``, ``np.mean``, ``np.dot``, ``np.roll``,
``np.polyval``, ``np.add``, ``np.multiply``...); what has no meaning on encrypted values (``out=``, ``where=``,
comparisons, other numpy functions) raises :class:`~hemx.errors.UnsupportedOperationError` saying what is supported.
:meth:`EncryptedArray.roll` keeps numpy's sign (element ``i`` moves to ``i + k``), the opposite of the
function-style ``ctx.rotate(ct, k)`` (a left rotation).

Everything is built on the public :class:`~hemx.Context` API (``add``, ``sub``, ``negate``, ``mul`` with
``rescale=True``, ``rotate``, ``conjugate``, ``drop_level``) and on :class:`~hemx.circuits.LinearTransform` and
:func:`~hemx.circuits.evaluate_polynomial`, so level alignment, scale management and error checks are the
context's. The function-style API keeps working; :attr:`EncryptedArray.ciphertext` is the wrapped ciphertext.

An :class:`EncryptedArray` is a pytree (its leaf: the ciphertext's residue array; the context and, while key sets
are not pytrees themselves, the keys are static data compared by identity), so functions that take and return
arrays run under ``jax.jit``.

Layer: :mod:`hemx.circuits` (it uses linear transforms and polynomial evaluation).
"""

from __future__ import annotations

import collections
import hashlib
import math
import numbers
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from hemx.circuits.bootstrap import bootstrapper_for
from hemx.circuits.lintrans import LinearTransform
from hemx.circuits.polynomial import evaluate_polynomial
from hemx.ckks import Ciphertext, Context, EvaluationKeys, KeySet, Plaintext
from hemx.errors import (ContextMismatchError, KeyMismatchError, LevelError, MissingKeyError, ParameterError,
                         ShapeError, UnsupportedOperationError)
from hemx.kernels import automorphism

# what the last logical axis is: the slots, one replicated value kept as a size-1 axis, or no axis (replicated)
_FULL, _ONE, _NONE = "slots", "one", "none"

_COMPARE = ("homomorphic encryption cannot compare encrypted values: a comparison would need the secret key. "
            "Decrypt first (a.decrypt()), or approximate a step function with a.polyval(...)")

_LT_CACHE: collections.OrderedDict = collections.OrderedDict()  # prepared matrices, (ctx id, level, digest) -> LT
_LT_CACHE_SIZE = 16


class _Static:
    """Static pytree data compared by identity (key sets hold arrays and dicts: neither hashable nor comparable)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, _Static) and other.value is self.value

    def __hash__(self):
        return id(self.value)

    def __repr__(self):
        return f"_Static({type(self.value).__name__})"


def _keys_are_pytree(keys) -> bool:
    """Whether ``keys`` is a registered pytree with array leaves (then it travels as jit arguments)."""
    leaves = jax.tree_util.tree_leaves(keys)
    return not (len(leaves) == 1 and leaves[0] is keys)


class EncryptedArray:
    """A batch of CKKS ciphertexts with numpy's operators.

    Args:
        ciphertext: a :class:`~hemx.Ciphertext` of ``ctx`` (any batch shape).
        ctx: the :class:`~hemx.Context` it belongs to.
        keys: the :class:`~hemx.KeySet` it was encrypted under (or its ``evaluation_keys()`` on a server):
            relinearization, rotation and conjugation keys are taken from it, and :meth:`decrypt` uses its
            secret key when it holds one.

    Create arrays with :meth:`encrypt`; wrap an existing ciphertext with ``EncryptedArray(ct, ctx, keys)``.

    Attributes:
        shape: ``batch_shape + (slots,)`` (``batch_shape`` after a reduction over the slots).
        level, scale, slots, batch_shape, bound: the ciphertext's metadata (``bound``: ``max |x|`` when the
            ciphertext carries one, else None).
    """

    __hash__ = None  # type: ignore[assignment]  (like numpy arrays; == is refused anyway)
    _hemx_takes_bare_operands = True  # a bare Ciphertext / Plaintext operand steps aside for our reflected operators

    def __init__(self, ciphertext: Ciphertext, ctx: Context, keys: EvaluationKeys, *, _axis: str = _FULL):
        if not isinstance(ctx, Context):
            raise ParameterError(f"EncryptedArray needs a hemx.Context, got {type(ctx).__name__}")
        if not isinstance(keys, EvaluationKeys):
            raise ParameterError("EncryptedArray needs the KeySet from ctx.keygen(...) (or its evaluation_keys()), "
                                 f"got {type(keys).__name__}")
        if not isinstance(ciphertext, Ciphertext):
            raise ParameterError(f"EncryptedArray wraps a hemx Ciphertext, got {type(ciphertext).__name__}")
        if ciphertext.context_id != ctx.id:
            raise ContextMismatchError("the ciphertext belongs to another context than the one given")
        if keys.context_id != ctx.id:
            raise KeyMismatchError("the keys belong to another context; generate keys with this context")
        if keys.key_id != ciphertext.key_id:
            raise KeyMismatchError(f"the ciphertext is encrypted under key set {ciphertext.key_id}, not under the "
                                   f"given keys (key set {keys.key_id})")
        self._set(ciphertext, ctx, keys, _axis)

    def _set(self, ciphertext, ctx, keys, axis):
        self._ct, self._ctx, self._keys, self._axis = ciphertext, ctx, keys, axis

    @classmethod
    def _make(cls, ciphertext, ctx, keys, axis) -> "EncryptedArray":
        out = object.__new__(cls)
        out._set(ciphertext, ctx, keys, axis)
        return out

    def _new(self, ciphertext: Ciphertext, axis: str | None = None) -> "EncryptedArray":
        return self._make(ciphertext, self._ctx, self._keys, self._axis if axis is None else axis)

    # ---------------------------------------------------------------------------------------------- creation
    @classmethod
    def encrypt(cls, ctx: Context, values, keys: KeySet) -> "EncryptedArray":
        """Encrypt ``values`` (``(..., count)`` numbers, ``count <= ctx.slots``, or a scalar) under ``keys``.

        The leading axes become the batch axes (one ciphertext each). The array always has ``ctx.slots`` slots:
        fewer values are zero-padded (pick ``hemx.Context(params, slots=...)`` to match your vectors, since the
        padding slots take part in sums and rotations). Encrypts with the public key; keeps ``keys`` for the
        evaluation keys and for :meth:`decrypt`.
        """
        if not isinstance(ctx, Context):
            raise ParameterError(f"EncryptedArray.encrypt(ctx, values, keys) needs a hemx.Context first, got "
                                 f"{type(ctx).__name__}")
        if not isinstance(keys, EvaluationKeys):
            raise ParameterError("EncryptedArray.encrypt(ctx, values, keys) needs the KeySet from ctx.keygen(...), "
                                 f"got {type(keys).__name__}")
        if not isinstance(values, Plaintext):
            z = np.asarray(values) if not isinstance(values, (list, tuple)) else values
            if isinstance(z, np.ndarray) and z.ndim == 0:  # a scalar fills every slot
                values = np.full(ctx.slots, z.item())
        return cls(ctx.encrypt(values, keys.public), ctx, keys)

    # ---------------------------------------------------------------------------------------------- metadata
    @property
    def ciphertext(self) -> Ciphertext:
        """The wrapped :class:`~hemx.Ciphertext` (for the function-style ``Context`` API)."""
        return self._ct

    @property
    def context(self) -> Context:
        return self._ctx

    @property
    def keys(self) -> EvaluationKeys:
        return self._keys

    @property
    def level(self) -> int:
        return self._ct.level

    @property
    def scale(self) -> float:
        return self._ct.scale

    @property
    def slots(self) -> int:
        return self._ct.slots

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self._ct.batch_shape

    @property
    def shape(self) -> tuple[int, ...]:
        tail = {_FULL: (self.slots,), _ONE: (1,), _NONE: ()}[self._axis]
        return self.batch_shape + tail

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.complex128 if self._ct.is_complex else np.float64)

    @property
    def is_complex(self) -> bool:
        return self._ct.is_complex

    @property
    def bound(self):
        """``max |x|`` over the slots when the ciphertext carries a magnitude bound, else None."""
        return getattr(self._ct, "bound", None)

    def __repr__(self) -> str:
        bound = self.bound
        bound_text = "unknown" if bound is None else f"{float(bound):.4g}"
        return (f"EncryptedArray(shape={self.shape}, level={self.level}, scale=2^{math.log2(self.scale):.2f}, "
                f"slots={self.slots}, batch={self.batch_shape}, bound={bound_text})")

    def __len__(self) -> int:
        if not self.shape:
            raise UnsupportedOperationError("len() of an unsized (0-d) EncryptedArray")
        return self.shape[0]

    def __iter__(self):
        if not self.batch_shape:
            raise UnsupportedOperationError(
                "iteration runs over the batch axis, and this EncryptedArray has none (the slots of one ciphertext "
                "cannot be taken apart without the secret key: decrypt first)")
        return (self[i] for i in range(self.batch_shape[0]))

    # ---------------------------------------------------------------------------------------------- decryption
    def decrypt(self, keys: KeySet | None = None, **options) -> np.ndarray:
        """The values, as numpy (``self.shape``). Uses the secret key of the array's key set, or of ``keys``."""
        secret = keys if keys is not None else self._keys
        if getattr(secret, "secret", None) is None:
            raise MissingKeyError(
                "decrypt needs the secret key: this array holds evaluation keys only (a server's view); call "
                "a.decrypt(keys) with the KeySet from ctx.keygen(...)")
        values = self._ctx.decrypt(self._ct, secret, **options)
        if self._axis == _ONE:
            return values[..., :1]
        if self._axis == _NONE:
            return values[..., 0]
        return values

    # ---------------------------------------------------------------------------------------------- no comparisons
    def _refuse(self, *_):
        raise UnsupportedOperationError(_COMPARE)

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse  # type: ignore[assignment]

    def __bool__(self):
        raise UnsupportedOperationError("the truth value of an EncryptedArray is unknown without the secret key: "
                                        + _COMPARE)

    def __array__(self, *args, **kwargs):
        raise UnsupportedOperationError("an EncryptedArray cannot become a numpy array without the secret key: use "
                                        "a.decrypt()")

    # ---------------------------------------------------------------------------------------------- numpy dispatch
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy's ufuncs on encrypted operands (``np.add(x, a)``, and ``x * a`` with a numpy ``x``, which numpy
        turns into ``np.multiply(x, a)``): ``add``, ``subtract``, ``multiply``, ``divide`` (by plain values),
        ``matmul``, ``power`` (integer exponents), ``negative``, ``positive``, ``conjugate`` and ``square``, through
        this array's operators (result shapes as numpy's). ``out=``, ``where=`` and a ``dtype=`` other than the
        array's are refused (:class:`~hemx.errors.UnsupportedOperationError` naming the argument), and so are the
        comparisons and the ufuncs' methods (``np.add.reduce``: use ``np.sum``)."""
        name = getattr(ufunc, "__name__", str(ufunc))
        if ufunc in _COMPARISON_UFUNCS:
            raise UnsupportedOperationError(_COMPARE)
        if method != "__call__":
            raise UnsupportedOperationError(
                f"numpy.{name}.{method} is not supported on an EncryptedArray: call numpy.{name}(...) itself, or "
                "numpy.sum / a.sum(axis=...) for a reduction")
        _check_numpy_options(name, self, kwargs)
        if ufunc in _UNARY_UFUNCS and len(inputs) == 1:
            return getattr(inputs[0], _UNARY_UFUNCS[ufunc])()
        if ufunc not in _BINARY_UFUNCS or len(inputs) != 2:
            raise UnsupportedOperationError(f"numpy.{name} is not supported on an EncryptedArray: {_supported()}")
        forward, reflected = _BINARY_UFUNCS[ufunc]
        x, y = inputs
        if isinstance(x, EncryptedArray):
            out = getattr(x, forward)(y)
        elif reflected is not None:
            out = getattr(y, reflected)(x)
        else:
            out = NotImplemented
        if out is NotImplemented:
            raise UnsupportedOperationError(
                f"numpy.{name}({type(x).__name__}, {type(y).__name__}) is not supported: the other operand of an "
                "EncryptedArray must be numbers, a numpy array, a Plaintext or another EncryptedArray"
                + (" (and the exponent of ** a non-negative integer)" if name == "power" else ""))
        return out

    def __array_function__(self, func, types, args, kwargs):
        """numpy functions given an :class:`EncryptedArray`: ``np.sum`` and ``np.mean`` (``axis=``,
        ``keepdims=``), ``np.dot``, ``np.roll``, ``np.polyval`` (numpy's descending coefficients), ``np.shape``,
        ``np.ndim`` and ``np.size`` run on the encrypted array (results as its methods'); any other raises
        :class:`~hemx.errors.UnsupportedOperationError` listing the supported ones."""
        handler = _NUMPY_FUNCTIONS.get(getattr(func, "__name__", None))
        if handler is None or getattr(np, func.__name__, None) is not func:
            raise UnsupportedOperationError(
                f"numpy.{getattr(func, '__name__', func)} is not supported on an EncryptedArray: {_supported()}")
        return handler(*args, **kwargs)

    # ---------------------------------------------------------------------------------------------- operand handling
    def _batch_to(self, batch: tuple[int, ...]) -> Ciphertext:
        ct = self._ct
        if ct.batch_shape == tuple(batch):
            return ct
        return ct.replace(data=jnp.broadcast_to(ct.data, tuple(batch) + ct.data.shape[-3:]))

    def _as_slotted(self, other_shape: tuple[int, ...]) -> "EncryptedArray":
        """A reduced array (no slot axis) about to meet an operand with a slot axis: numpy aligns our last batch
        axis with the slots, which works when that axis has size 1 (or there is none)."""
        if self._axis != _NONE:
            return self
        if not self.batch_shape:
            return self._new(self._ct, _ONE)
        if self.batch_shape[-1] != 1:
            raise ShapeError(
                f"operands could not be broadcast together with shapes {self.shape} (encrypted, reduced over the "
                f"slots) and {other_shape}: numpy aligns the last axis of {self.shape} with the slots. Reduce with "
                "keepdims=True (a.sum(axis=-1, keepdims=True)) to keep a size-1 slot axis")
        return self._new(self._ct.replace(data=self._ct.data[..., 0, :, :, :]), _ONE)

    def _wrap_ct(self, other):
        if isinstance(other, EncryptedArray):
            return other
        if isinstance(other, Ciphertext):
            return self._make(other, self._ctx, self._keys, _FULL)
        return None

    def _pair(self, other: "EncryptedArray"):
        """Two encrypted operands broadcast to one batch shape -> (ct_a, ct_b, result axis kind)."""
        a, b = self, other
        if (a._axis == _NONE) != (b._axis == _NONE):
            a, b = a._as_slotted(b.shape), b._as_slotted(a.shape)
        try:
            out = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise ShapeError(f"operands could not be broadcast together with shapes {a.shape} and {b.shape}") \
                from None
        if a._axis == _NONE:
            batch, axis = tuple(out), _NONE
        else:
            batch = tuple(out[:-1])
            axis = _FULL if _FULL in (a._axis, b._axis) else _ONE
        return a._batch_to(batch), b._batch_to(batch), axis

    def _plain(self, other):
        """A plain operand -> (self's ciphertext broadcast, value(s) for the context, result axis kind), or None
        when ``other`` is not a plain operand."""
        if isinstance(other, Plaintext):
            return self._ct, other, self._axis
        if isinstance(other, (EncryptedArray, Ciphertext, LinearTransform)):
            return None
        try:
            z = np.asarray(other)
        except Exception:  # noqa: BLE001 - whatever numpy cannot read is not our operand
            return None
        if not (np.issubdtype(z.dtype, np.number) or z.dtype == bool):
            return None
        if z.ndim == 0:  # a scalar: the context's own scalar path (integer constants, no encoding)
            value = z.item()
            return self._ct, value, self._axis
        try:
            out = np.broadcast_shapes(self.shape, z.shape)
        except ValueError:
            raise ShapeError(f"operands could not be broadcast together with shapes {self.shape} (encrypted) and "
                             f"{z.shape}: the last axis is the slots ({self.slots}); give plain operands numpy-"
                             "broadcastable shapes") from None
        zb = z.reshape((1,) * (len(out) - z.ndim) + z.shape)
        if self._axis == _NONE:  # one replicated value per batch entry
            batch, axis = tuple(out), _NONE
            values = np.broadcast_to(zb[..., None], zb.shape + (self.slots,))
        else:
            if out[-1] not in (1, self.slots):
                raise ShapeError(f"operands could not be broadcast together with shapes {self.shape} (encrypted) "
                                 f"and {z.shape}: a size-1 slot axis broadcasts only to the {self.slots} slots")
            batch = tuple(out[:-1])
            axis = _FULL if out[-1] == self.slots else _ONE  # a size-1 slot axis stays one only against size 1
            values = np.broadcast_to(zb, zb.shape[:-1] + (self.slots,))
        while values.ndim > 1 and values.shape[0] == 1:  # leading size-1 axes broadcast by the context
            values = values[0]
        return self._batch_to(batch), np.ascontiguousarray(values), axis

    # ---------------------------------------------------------------------------------------------- arithmetic
    def _add_like(self, other, subtract: bool, reflected: bool = False):
        ctx = self._ctx
        enc = self._wrap_ct(other)
        if enc is not None:
            a, b, axis = self._pair(enc)
            if reflected:
                a, b = b, a
            return self._sum(ctx.sub(a, b) if subtract else ctx.add(a, b), axis)
        plain = self._plain(other)
        if plain is None:
            return NotImplemented
        ct, value, axis = plain
        if reflected and subtract:  # value - self
            return self._sum(ctx.add(ctx.negate(ct), value), axis)
        return self._sum(ctx.sub(ct, value) if subtract else ctx.add(ct, value), axis)

    def _sum(self, ct: Ciphertext, axis: str) -> "EncryptedArray":
        """A sum, refused (OverflowBoundError) when its propagated bound times its scale reaches q/2: managed
        arithmetic, as the context's managed products (``Context.add`` itself does not check: circuits that plan
        their own scales carry bounds that are loose by design)."""
        self._ctx._check_bound_fits(ct.bound, ct.scale, ct.level, "the sum")
        return self._new(ct, axis)

    def __add__(self, other):
        return self._add_like(other, False)

    def __radd__(self, other):
        return self._add_like(other, False, reflected=True)

    def __sub__(self, other):
        return self._add_like(other, True)

    def __rsub__(self, other):
        return self._add_like(other, True, reflected=True)

    def __neg__(self):
        return self._new(self._ctx.negate(self._ct))

    def __pos__(self):
        return self

    def __mul__(self, other):
        ctx = self._ctx
        enc = self._wrap_ct(other)
        if enc is not None:
            a, b, axis = self._pair(enc)
            return self._new(ctx.mul(a, b, self._keys, rescale=True), axis)
        plain = self._plain(other)
        if plain is None:
            return NotImplemented
        ct, value, axis = plain
        if isinstance(value, numbers.Real) and float(value) == round(float(value)) and abs(value) < 2**20:
            # an integer: multiplied exactly at plain scale 1, no rescale, no level spent
            return self._new(ctx.mul(ct, float(value), plain_scale=1.0, rescale=False), axis)
        return self._new(ctx.mul(ct, value, rescale=True), axis)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, (EncryptedArray, Ciphertext)):
            raise UnsupportedOperationError(
                "homomorphic encryption cannot divide by an encrypted value; approximate 1/x with a.polyval(...) "
                "(e.g. Chebyshev coefficients of 1/x on the values' range)")
        try:
            z = np.asarray(other)
        except Exception:  # noqa: BLE001
            return NotImplemented
        if not np.issubdtype(z.dtype, np.number):
            return NotImplemented
        with np.errstate(divide="ignore", invalid="ignore"):
            inverse = 1.0 / z
        return self * (inverse.item() if inverse.ndim == 0 else inverse)

    def __rtruediv__(self, other):
        raise UnsupportedOperationError(
            "homomorphic encryption cannot divide by an encrypted value; approximate 1/x with a.polyval(...) "
            "(e.g. Chebyshev coefficients of 1/x on the values' range)")

    def __pow__(self, exponent):
        if isinstance(exponent, bool) or not isinstance(exponent, (int, np.integer)):
            raise UnsupportedOperationError(f"EncryptedArray ** needs a non-negative integer exponent, got "
                                            f"{exponent!r}; use a.polyval(...) for other functions")
        n = int(exponent)
        if n < 0:
            raise ParameterError(f"EncryptedArray ** {n}: negative powers divide, which homomorphic encryption "
                                 "cannot do; approximate 1/x with a.polyval(...)")
        if n == 0:
            return self * 0 + 1  # integer products: no level spent
        result, base = None, self
        while True:  # repeated squaring: ceil(log2(n)) + popcount levels at most
            if n & 1:
                result = base if result is None else result * base
            n >>= 1
            if not n:
                return result
            base = base * base

    # ---------------------------------------------------------------------------------------------- keys
    def _need_rotations(self, steps: Sequence[int], what: str, hint: str | None = None) -> None:
        """MissingKeyError naming every absent rotation step, before any work is done."""
        n, slots = self._ctx.params.n, self.slots
        galois = getattr(self._keys, "galois", {})
        missing = sorted({int(s) for s in steps if s % slots
                          and automorphism.galois_element(n, s % slots) not in galois})
        if missing:
            make = hint or f"ctx.keygen(rotations={missing})"
            raise MissingKeyError(
                f"{what} needs the rotation key{'s' if len(missing) > 1 else ''} for step"
                f"{'s' if len(missing) > 1 else ''} {missing}, which the array's key set does not hold; generate "
                f"keys with {make} (rotations=[...] takes left-rotation steps; -k and slots - k are the same key)")

    # ---------------------------------------------------------------------------------------------- rotations
    def _axis_index(self, axis) -> int:
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise ParameterError(f"axis must be an integer, got {axis!r}")
        ndim = self.ndim
        if not -ndim <= axis < ndim:
            raise ShapeError(f"axis {axis} is out of bounds for an EncryptedArray of shape {self.shape}")
        return int(axis) % ndim

    def _is_slot_axis(self, i: int) -> bool:
        return self._axis != _NONE and i == self.ndim - 1

    def roll(self, shift: int, axis: int = -1) -> "EncryptedArray":
        """``numpy.roll(x, shift, axis)``, numpy's sign: element ``i`` moves to ``i + shift`` (a right rotation
        for ``shift > 0``). Along the slots a rotation (a Galois key; negative shifts too), along a batch axis a
        permutation of the ciphertexts (free). Shape unchanged.

        The function-style :meth:`hemx.Context.rotate` counts the other way: ``ctx.rotate(ct, k, keys)`` is a
        *left* rotation, ``numpy.roll(x, -k)``. So ``a.roll(k)`` is ``ctx.rotate(a.ciphertext, -k, keys)`` and
        needs the rotation key for step ``-k`` (``ctx.keygen(rotations=[-k])``; ``-k`` and ``slots - k`` are
        the same key)::

            x = [0, 1, 2, 3]                    # 4 slots
            a.roll(1).decrypt()                 # [3, 0, 1, 2] = numpy.roll(x, 1)  (key for step -1)
            ctx.rotate(ct, 1, keys)             # [1, 2, 3, 0] = numpy.roll(x, -1) (key for step 1)
        """
        if isinstance(shift, bool) or not isinstance(shift, (int, np.integer)):
            raise ParameterError(f"roll needs an integer shift, got {shift!r}")
        shift = int(shift)
        i = self._axis_index(axis)
        if not self._is_slot_axis(i):
            return self._new(self._ct.replace(data=jnp.roll(self._ct.data, shift, axis=i)))
        if self._axis == _ONE or shift % self.slots == 0:
            return self
        step = -shift  # numpy.roll(x, k) is a right rotation; the context's rotate(ct, s) rotates left
        self._need_rotations([step], f"roll({shift})")
        return self._new(self._ctx.rotate(self._ct, step, self._keys))

    def conj(self) -> "EncryptedArray":
        """Complex conjugation of every slot (the conjugation key: ``ctx.keygen(conjugation=True)``)."""
        if automorphism.conjugation_element(self._ctx.params.n) not in getattr(self._keys, "galois", {}):
            raise MissingKeyError("conj() needs the conjugation key, which the array's key set does not hold; "
                                  "generate keys with ctx.keygen(conjugation=True)")
        return self._new(self._ctx.conjugate(self._ct, self._keys))

    conjugate = conj

    def _square(self) -> "EncryptedArray":
        return self * self

    # ---------------------------------------------------------------------------------------------- reductions
    def _sum_slots(self) -> Ciphertext:
        steps = []
        r = 1
        while r < self.slots:
            steps.append(r)
            r *= 2
        self._need_rotations(steps, "sum over the slots",
                             hint=f"ctx.keygen(rotations='power_of_two') (steps {steps})")
        ct = self._ct
        for r in steps:
            ct = self._ctx.add(ct, self._ctx.rotate(ct, r, self._keys))
        return ct

    def _sum_batch_axis(self, ct: Ciphertext, i: int) -> Ciphertext:
        """Sum over batch axis ``i`` of the ciphertext by pairwise additions (zero ciphertexts pad odd sizes)."""
        while ct.data.shape[i] > 1:
            n = ct.data.shape[i]
            if n % 2:
                pad = [(0, 0)] * ct.data.ndim
                pad[i] = (0, 1)
                ct = ct.replace(data=jnp.pad(ct.data, pad))  # (0, 0) encrypts 0 with no noise
                n += 1
            h = n // 2
            lo = ct.replace(data=jax.lax.slice_in_dim(ct.data, 0, h, axis=i))
            hi = ct.replace(data=jax.lax.slice_in_dim(ct.data, h, n, axis=i))
            ct = self._ctx.add(lo, hi)
        return ct

    def sum(self, axis=None, keepdims: bool = False) -> "EncryptedArray":
        """``numpy.sum``: over every axis (default), one axis or a tuple of axes.

        Over the slots it takes ``log2(slots)`` rotations (power-of-two keys: ``ctx.keygen(rotations=
        "power_of_two")``) and leaves the total in every slot; over batch axes it adds ciphertexts. No level is
        spent.
        """
        axes = range(self.ndim) if axis is None else (axis if isinstance(axis, (tuple, list)) else (axis,))
        axes = sorted({self._axis_index(a) for a in axes})
        ct, kind = self._ct, self._axis
        batch_axes = [i for i in axes if not self._is_slot_axis(i)]
        if any(self._is_slot_axis(i) for i in axes):
            if kind == _FULL:
                ct = self._sum_slots()
            kind = _ONE if keepdims else _NONE
        for i in batch_axes:
            ct = self._sum_batch_axis(ct, i)
        if not keepdims and batch_axes:
            ct = ct.replace(data=jnp.squeeze(ct.data, axis=tuple(batch_axes)))
        return self._new(ct, kind)

    def mean(self, axis=None, keepdims: bool = False) -> "EncryptedArray":
        """``numpy.mean``: :meth:`sum` times ``1 / count`` (one plaintext product, one level)."""
        axes = range(self.ndim) if axis is None else (axis if isinstance(axis, (tuple, list)) else (axis,))
        count = math.prod(self.shape[i] for i in {self._axis_index(a) for a in axes})
        return self.sum(axis, keepdims) * (1.0 / count)

    def dot(self, other) -> "EncryptedArray":
        """``numpy.dot``: with a vector (plain or encrypted), the sum of the products over the slots (the total in
        every slot, shape ``batch_shape``); with a plain matrix, :meth:`matmul`."""
        if self._axis != _FULL:
            raise ShapeError(f"dot needs a vector of slots, this EncryptedArray has shape {self.shape}")
        if isinstance(other, (EncryptedArray, Ciphertext)):
            return (self * other).sum(axis=-1)
        v = _numeric(other, "dot")
        if v.ndim == 2:
            return self.matmul(v)
        if v.ndim != 1:
            raise ShapeError(f"dot takes a vector or a matrix, got shape {v.shape}; for batched operands use "
                             "(a * v).sum(axis=-1)")
        if v.shape[0] > self.slots:
            raise ShapeError(f"dot: the vector has {v.shape[0]} entries, more than the {self.slots} slots")
        return (self * _pad(v, (self.slots,))).sum(axis=-1)

    # ---------------------------------------------------------------------------------------------- matrices
    def _transform(self, matrix) -> LinearTransform:
        """A prepared :class:`LinearTransform` for ``M x`` at this array's level (cached per matrix)."""
        m = _numeric(matrix, "matmul")
        if m.ndim != 2 or m.shape[0] > self.slots or m.shape[1] > self.slots:
            raise ShapeError(f"matmul needs a 2-D matrix of at most {self.slots} x {self.slots} (the slots), got "
                             f"shape {m.shape}; a smaller matrix is zero-padded")
        if self.level < 1:
            raise LevelError("a matrix product consumes one level: this array is at level 0 (use parameters with "
                             "more levels, or refresh it with a.bootstrap() on bootstrapping parameters)")
        m = _pad(m, (self.slots, self.slots))
        digest = hashlib.sha1(np.ascontiguousarray(m).tobytes() + str(m.dtype).encode()).hexdigest()
        key = (self._ctx.id, self.level, digest)
        lt = _LT_CACHE.get(key)
        if lt is None:
            with jax.ensure_compile_time_eval():  # host-side preparation, constants even inside a jit trace
                lt = LinearTransform(self._ctx, m, level=self.level, zero_tol=0.0)
            _LT_CACHE[key] = lt
            while len(_LT_CACHE) > _LT_CACHE_SIZE:
                _LT_CACHE.popitem(last=False)
        else:
            _LT_CACHE.move_to_end(key)
        return lt

    def _apply(self, lt: LinearTransform) -> "EncryptedArray":
        if self._axis != _FULL:
            raise ShapeError(f"a matrix product needs a vector of slots, this EncryptedArray has shape {self.shape}")
        steps = list(lt.rotations)
        self._need_rotations(steps, "this matrix product (baby-step/giant-step)",
                             hint=f"ctx.keygen(rotations={steps}) (the steps of this matrix's non-zero "
                                  "diagonals; add those your other operations need)")
        return self._new(lt.apply(self._ct, self._keys))

    def matmul(self, matrix) -> "EncryptedArray":
        """``x @ M`` (``numpy.matmul`` of the slot vector(s) and a plain matrix: ``M.T`` applied to each vector),
        by :class:`~hemx.circuits.LinearTransform` (baby-step/giant-step, hoisted rotations); one level."""
        m = _numeric(matrix, "matmul")
        if m.ndim != 2:
            raise ShapeError(f"matmul needs a 2-D matrix, got shape {m.shape}")
        return self._apply(self._transform(m.T))

    def __matmul__(self, other):
        if isinstance(other, (EncryptedArray, Ciphertext)):
            if self.batch_shape or (isinstance(other, EncryptedArray) and other.batch_shape):
                raise ShapeError("encrypted @ encrypted is the inner product of two vectors; for batches use "
                                 "(a * b).sum(axis=-1)")
            return self.dot(other)
        if isinstance(other, LinearTransform):
            raise UnsupportedOperationError("a LinearTransform applies M x: write lt @ a (or a @ M with the matrix "
                                            "itself)")
        try:
            m = _numeric(other, "@")
        except ParameterError:
            return NotImplemented
        if m.ndim == 1:
            return self.dot(m)
        return self.matmul(m)

    def __rmatmul__(self, other):
        if isinstance(other, LinearTransform):  # a prepared transform: lt @ a is M x
            return self._apply(other)
        try:
            m = _numeric(other, "@")
        except ParameterError:
            return NotImplemented
        if m.ndim == 1:
            return self.dot(m)
        if m.ndim != 2:
            raise ShapeError(f"M @ a needs a 2-D matrix, got shape {m.shape}")
        return self._apply(self._transform(m))  # M x

    # ---------------------------------------------------------------------------------------------- polynomials
    def polyval(self, coefficients, *, basis: str = "monomial", interval=None) -> "EncryptedArray":
        """``p(x)`` slot-wise, coefficients in *ascending* order (``c[0] + c[1] x + ...``, like
        ``numpy.polynomial.polynomial.polyval`` and TenSEAL's ``polyval``; not ``numpy.polyval``'s descending
        order). ``basis="chebyshev"`` with ``interval=(a, b)`` takes Chebyshev coefficients
        (:func:`hemx.circuits.chebyshev_coefficients`). Depth ``ceil(log2(degree + 1))``
        (:func:`hemx.circuits.polynomial_depth`)."""
        out = evaluate_polynomial(self._ctx, self._ct, coefficients, self._keys, basis=basis, interval=interval)
        return self._new(out)

    # ---------------------------------------------------------------------------------------------- levels
    def drop_level(self, level: int) -> "EncryptedArray":
        """The same values at a lower level (limbs dropped)."""
        return self._new(self._ctx.drop_level(self._ct, level))

    def bootstrap(self, *, iterations: int = 1, message_ratio: int | None = None) -> "EncryptedArray":
        """The same values (same shape) at the post-bootstrap level: fresh levels for more products.

        Runs :func:`hemx.circuits.bootstrap.bootstrapper_for` ``(ctx, message_ratio=...)``'s bootstrap with the
        array's key set, which must hold the bootstrapping keys (``ctx.keygen(bootstrap=bootstrapper_for(ctx))``;
        :class:`~hemx.errors.MissingKeyError` otherwise) on parameters with room for it (the ``boot_*`` presets).
        ``iterations=2``: META-BTS, about 16 more bits. ``message_ratio``: see ``docs/bootstrap.md``; the
        array's ``bound`` must not exceed what it supports (:class:`~hemx.errors.BoundError`). The result keeps
        the array's key set.
        """
        boot = bootstrapper_for(self._ctx, message_ratio=message_ratio)
        return self._new(boot.bootstrap(self._ct, self._keys, iterations=iterations))

    # ---------------------------------------------------------------------------------------------- indexing
    def __getitem__(self, key) -> "EncryptedArray":
        """Select ciphertexts along the batch axes (``a[0]``, ``a[1:3]``, ``a[:, 2]``); slots are not indexable."""
        items = key if isinstance(key, tuple) else (key,)
        batch = self.batch_shape
        if any(k is Ellipsis or k is None for k in items):
            raise ShapeError("EncryptedArray indexing takes integers, slices and integer arrays on the batch "
                             "axes (no ... or None)")
        if len(items) > len(batch):
            raise ShapeError(
                f"EncryptedArray of shape {self.shape} has {len(batch)} batch axis(es); indexing selects whole "
                "ciphertexts, the slots cannot be indexed without the secret key (multiply by a 0/1 mask, or "
                "decrypt first)")
        for k, size in zip(items, batch):
            if isinstance(k, bool) or (isinstance(k, (int, np.integer)) and not -size <= k < size):
                raise IndexError(f"index {k} is out of bounds for a batch axis of size {size}")
            if not isinstance(k, (int, np.integer, slice)):
                idx = np.asarray(k)
                if not (np.issubdtype(idx.dtype, np.integer) or idx.dtype == bool):
                    raise ShapeError(f"batch indices must be integers, slices or integer/bool arrays, got {k!r}")
                if np.issubdtype(idx.dtype, np.integer) and idx.size and (idx.min() < -size or idx.max() >= size):
                    raise IndexError(f"index array {idx.tolist()} is out of bounds for a batch axis of size {size}")
        return self._new(self._ct.replace(data=self._ct.data[key]))


# ------------------------------------------------------------------------------------------------------ numpy dispatch
_COMPARISON_UFUNCS = frozenset({np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal})
_UNARY_UFUNCS = {np.negative: "__neg__", np.positive: "__pos__", np.conjugate: "conj", np.square: "_square"}
_BINARY_UFUNCS = {  # ufunc -> (method of an encrypted first operand, method of an encrypted second operand)
    np.add: ("__add__", "__radd__"),
    np.subtract: ("__sub__", "__rsub__"),
    np.multiply: ("__mul__", "__rmul__"),
    np.divide: ("__truediv__", "__rtruediv__"),
    np.matmul: ("__matmul__", "__rmatmul__"),
    np.power: ("__pow__", None),
}
_OPTION_DEFAULTS = {"casting": "same_kind", "order": "K", "subok": True, "where": True}
_OPTION_HELP = {
    "out": "the result is a new EncryptedArray (ciphertexts are not written in place): assign it instead",
    "where": "choosing slots by a condition would need the secret key: multiply by a 0/1 mask instead",
    "dtype": "the values are encrypted floats (complex once complex values are involved): leave dtype=None and "
             "convert after decrypting",
    "initial": "add the start value afterwards (numpy.sum(a) + initial)",
}


def _supported() -> str:
    functions = ", ".join(f"numpy.{name}" for name in sorted(_NUMPY_FUNCTIONS))
    ufuncs = ", ".join(f"numpy.{u.__name__}" for u in list(_BINARY_UFUNCS) + list(_UNARY_UFUNCS))
    return (f"supported are {functions} and the ufuncs {ufuncs} (numpy's operators on an EncryptedArray call "
            "these); anything else needs the values themselves: decrypt first (a.decrypt())")


def _same_dtype(dtype, a) -> bool:
    if dtype is None:
        return True
    try:
        wanted = np.dtype(dtype)
    except TypeError:
        return False
    return wanted == (a.dtype if isinstance(a, EncryptedArray) else np.dtype(np.float64))


def _check_numpy_options(name: str, a, options: dict) -> None:
    """Refuse numpy keyword arguments that have no meaning on encrypted values (UnsupportedOperationError naming
    the argument); accept their do-nothing values (``out=None``, ``where=True``, ``dtype=None`` or the array's)."""
    for key, value in options.items():
        if key == "out" and (value is None or (isinstance(value, tuple) and all(v is None for v in value))):
            continue
        if key == "dtype" and _same_dtype(value, a):
            continue
        if key in _OPTION_DEFAULTS and value is _OPTION_DEFAULTS[key]:
            continue
        if key in ("casting", "order") and value == _OPTION_DEFAULTS[key]:
            continue
        why = _OPTION_HELP.get(key, "leave it out (axis= and keepdims= are the arguments that apply)")
        shown = f"<array of shape {np.shape(value)}>" if isinstance(value, (np.ndarray, tuple, list)) else repr(value)
        raise UnsupportedOperationError(f"numpy.{name}(..., {key}={shown}) is not supported on an "
                                        f"EncryptedArray: {why}")


def _encrypted(name: str, a) -> EncryptedArray:
    if not isinstance(a, EncryptedArray):
        raise UnsupportedOperationError(f"numpy.{name} takes the EncryptedArray as its array argument, got "
                                        f"{type(a).__name__} there")
    return a


def _keepdims(value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"keepdims must be True or False, got {value!r}")
    return bool(value)


def _np_sum(a, axis=None, dtype=None, out=None, keepdims=False, **options):
    """``numpy.sum(a, axis=None, keepdims=False)``: :meth:`EncryptedArray.sum`."""
    _check_numpy_options("sum", a, dict(options, dtype=dtype, out=out))
    return _encrypted("sum", a).sum(axis, keepdims=_keepdims(keepdims))


def _np_mean(a, axis=None, dtype=None, out=None, keepdims=False, **options):
    """``numpy.mean(a, axis=None, keepdims=False)``: :meth:`EncryptedArray.mean`."""
    _check_numpy_options("mean", a, dict(options, dtype=dtype, out=out))
    return _encrypted("mean", a).mean(axis, keepdims=_keepdims(keepdims))


def _np_dot(a, b, out=None):
    """``numpy.dot``: an encrypted first operand (shape ``batch + (slots,)``) with a plain vector ``(count,)``, a
    plain matrix ``(count, count)`` or an encrypted vector ``(slots,)``; a plain vector ``(count,)`` or matrix
    with an encrypted vector ``(slots,)``. numpy contracts the second operand's second-to-last axis, so an
    encrypted *batch* as second operand is refused: write ``(a * b).sum(axis=-1)``."""
    _check_numpy_options("dot", a, {"out": out})
    if isinstance(b, EncryptedArray) and b.ndim != 1:
        raise ShapeError(f"numpy.dot(x, b) contracts the last axis of x with the second-to-last of b, here a batch "
                         f"axis of the encrypted b (shape {b.shape}); for one inner product per vector write "
                         "(x * b).sum(axis=-1)")
    if isinstance(a, EncryptedArray):
        return a.dot(b)
    plain = _numeric(a, "numpy.dot")
    if plain.ndim == 1:
        return b.dot(plain)
    if plain.ndim == 2:
        return b.__rmatmul__(plain)  # M x
    raise ShapeError(f"numpy.dot(M, b) with an encrypted vector b takes a vector or a matrix M, got shape "
                     f"{plain.shape}")


def _np_roll(a, shift, axis=None):
    """``numpy.roll(a, shift, axis)``: :meth:`EncryptedArray.roll` (element ``i`` moves to ``i + shift``).
    ``axis=None`` (numpy's default: the flattened array) only for a single vector, where it is the slots."""
    a = _encrypted("roll", a)
    if axis is None:
        if a.ndim != 1:
            raise ShapeError(f"numpy.roll without axis rolls the flattened array, which has no encrypted "
                             f"counterpart for shape {a.shape}: give axis=-1 (the slots) or a batch axis")
        axis = -1
    return a.roll(shift, axis=axis)


def _np_polyval(p, x):
    """``numpy.polyval(p, x)``: coefficients in numpy's *descending* order (``p[0] x^deg + ... + p[-1]``);
    :meth:`EncryptedArray.polyval` takes them ascending."""
    if isinstance(p, EncryptedArray):
        raise UnsupportedOperationError("numpy.polyval(p, x) needs plain coefficients p (the EncryptedArray is x)")
    c = _numeric(p, "numpy.polyval")
    if c.ndim != 1:
        raise ShapeError(f"numpy.polyval needs a 1-D coefficient vector, got shape {c.shape}")
    return _encrypted("polyval", x).polyval(c[::-1])


def _np_shape(a):
    return a.shape


def _np_ndim(a):
    return a.ndim


def _np_size(a, axis=None):
    return a.size if axis is None else a.shape[a._axis_index(axis)]


_NUMPY_FUNCTIONS = {"sum": _np_sum, "mean": _np_mean, "dot": _np_dot, "roll": _np_roll, "polyval": _np_polyval,
                    "shape": _np_shape, "ndim": _np_ndim, "size": _np_size}


def _numeric(value, what: str) -> np.ndarray:
    try:
        z = np.asarray(value)
    except Exception:  # noqa: BLE001
        raise ParameterError(f"{what} needs numbers, got {type(value).__name__}") from None
    if not np.issubdtype(z.dtype, np.number) or z.dtype == bool:
        raise ParameterError(f"{what} needs numbers, got dtype {z.dtype}")
    if not np.all(np.isfinite(z)):
        raise ParameterError(f"{what} needs finite numbers")
    return z


def _pad(z: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if z.shape == shape:
        return z
    return np.pad(z, [(0, s - d) for d, s in zip(z.shape, shape)])


def _flatten(a: EncryptedArray):
    if _keys_are_pytree(a._keys):  # key sets registered as pytrees travel as jit arguments
        return (a._ct, a._keys), (a._ctx, None, a._axis)
    return (a._ct,), (a._ctx, _Static(a._keys), a._axis)


def _unflatten(aux, children) -> EncryptedArray:
    ctx, static_keys, axis = aux
    if static_keys is None:
        ct, keys = children
    else:
        (ct,), keys = children, static_keys.value
    return EncryptedArray._make(ct, ctx, keys, axis)


jax.tree_util.register_pytree_node(EncryptedArray, _flatten, _unflatten)

__all__ = ["EncryptedArray"]
