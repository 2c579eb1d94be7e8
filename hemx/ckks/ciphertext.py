"""Ciphertexts and plaintexts: pytrees whose only leaf is the residue array (NTT domain).

Neither has arithmetic operators: computing is the :class:`~hemx.Context`'s (``ctx.add(ct, x)``...) or, with
numpy's operators, :class:`hemx.EncryptedArray`'s (``hemx.EncryptedArray(ct, ctx, keys) + x``). Using ``+ - * / @
**``, unary minus or a comparison on one raises :class:`~hemx.errors.UnsupportedOperationError` saying so.
"""

from __future__ import annotations

import dataclasses
import numbers

import jax
import numpy as np

from hemx.errors import UnsupportedOperationError

# operator -> (the EncryptedArray expression, the function-style call); "ct" is the ciphertext, "x" the other operand
_OPERATORS = {
    "+": ("a + x", "ctx.add(ct, x)"),
    "-": ("a - x", "ctx.sub(ct, x)"),
    "*": ("a * x", "ctx.mul(ct, x, keys, rescale=True)"),
    "/": ("a / 4", "ctx.mul(ct, 1 / 4, rescale=True)"),
    "@": ("a @ M", "hemx.circuits.LinearTransform(ctx, M).apply(ct, keys)"),
    "**": ("a ** 2", "ctx.mul(ct, ct, keys, rescale=True)"),
    "unary -": ("-a", "ctx.negate(ct)"),
    "unary +": ("+a", "ct itself"),
}
_WRAP = "a = hemx.EncryptedArray(ct, ctx, keys)"


def _wraps_ciphertexts(value) -> bool:
    """Whether ``value`` is a wrapper that takes a bare ciphertext or plaintext as operand (``EncryptedArray``:
    its reflected operators run when ours step aside; the class marks itself, this layer cannot import it)."""
    return bool(getattr(type(value), "_hemx_takes_bare_operands", False))


def _refuse_operator(symbol: str):
    def refuse(self, other=None, *_):
        if _wraps_ciphertexts(other):
            return NotImplemented
        array_form, call = _OPERATORS[symbol]
        if isinstance(self, Plaintext):
            raise UnsupportedOperationError(
                f"a hemx Plaintext (what ctx.encode returns) has no operators ({symbol}): it is the plain operand "
                f"of encrypted arithmetic, e.g. {_WRAP} then a + pt, a * pt (or ctx.add(ct, pt), ctx.mul(ct, pt, "
                "rescale=True)); compute on plain values in numpy before encoding them")
        raise UnsupportedOperationError(
            f"a hemx Ciphertext (what ctx.encrypt returns) has no operators ({symbol}): wrap it in "
            f"hemx.EncryptedArray for numpy's operators, {_WRAP} (keys: the KeySet it was encrypted under, or its "
            f"evaluation_keys()), then {array_form}; or keep the function-style API: {call}")

    refuse.__name__ = f"refuse {symbol}"
    return refuse


def _refuse_comparison(self, other):
    if _wraps_ciphertexts(other):
        return NotImplemented
    what = "Plaintext" if isinstance(self, Plaintext) else "Ciphertext"
    raise UnsupportedOperationError(
        f"a hemx {what} cannot be compared: the values are encoded{' and encrypted' if what == 'Ciphertext' else ''}"
        ", and comparing them would need the secret key. Decrypt first (ctx.decrypt(ct, keys)) and compare the "
        "numbers; hemx.EncryptedArray (a = hemx.EncryptedArray(ct, ctx, keys)) refuses comparisons too: "
        "approximate a step function with a.polyval(...)")


def _same_object(self, other) -> bool:
    """Two ciphertexts (or plaintexts) are equal when they are the same encryption: equal metadata and equal data
    (the residues, compared exactly). That is object equality, not equality of the encrypted values, which would
    need the secret key."""
    if type(self) is not type(other):
        return False
    for f in dataclasses.fields(self):
        x, y = getattr(self, f.name), getattr(other, f.name)
        if f.name == "data":
            if x is not y and (np.shape(x) != np.shape(y) or not np.array_equal(np.asarray(x), np.asarray(y))):
                return False
        elif x != y:
            return False
    return True


def _equality(self, other):
    """``==`` between two ciphertexts (or plaintexts): the same encryption (:func:`_same_object`). Against numbers
    or arrays it is refused (comparing encrypted values needs the secret key); against unrelated objects (None, a
    string) it is plain identity, so ``ct in some_list`` and ``ct == None`` keep working."""
    if isinstance(other, (Ciphertext, Plaintext)):
        return _same_object(self, other)
    if isinstance(other, (numbers.Number, np.ndarray, np.generic, jax.Array, list, tuple)):
        return _refuse_comparison(self, other)
    return NotImplemented


def _inequality(self, other):
    same = _equality(self, other)
    return same if same is NotImplemented else not same


class _NoOperators:
    """Mixin: arithmetic operators and comparisons raise UnsupportedOperationError naming the alternative."""

    __array_ufunc__ = None  # numpy operands defer to the reflected operators below (np_array + ct refused too)

    __add__ = __radd__ = _refuse_operator("+")
    __sub__ = __rsub__ = _refuse_operator("-")
    __mul__ = __rmul__ = _refuse_operator("*")
    __truediv__ = __rtruediv__ = _refuse_operator("/")
    __matmul__ = __rmatmul__ = _refuse_operator("@")
    __pow__ = __rpow__ = _refuse_operator("**")
    __neg__ = _refuse_operator("unary -")
    __pos__ = _refuse_operator("unary +")
    __lt__ = __le__ = __gt__ = __ge__ = _refuse_comparison
    __eq__ = _equality
    __ne__ = _inequality
    __hash__ = None  # equal objects would need equal hashes of their data: unhashable, as before


@dataclasses.dataclass(frozen=True, eq=False)
class Ciphertext(_NoOperators):
    """A batch of CKKS ciphertexts in the NTT domain.

    Attributes:
        data: uint32 ``(..., 2, limbs, N)``: ``(c0, c1)`` with ``c0 + c1 s = m + e`` mod ``Q_level``.
        level: rescales still available (``limbs = params.limbs_at_level(level)``).
        scale: the factor the slot values were multiplied by.
        slots: slots in use (power of two, sparse packing below N/2).
        is_complex: whether the slots carry complex values (decrypt then returns complex numbers).
        context_id: the :class:`~hemx.ckks.context.Context` (parameters) it belongs to.
        key_id: the key set it is encrypted under.
        bound: public upper bound on ``max |value|`` over the slots (the client's ``max |x|`` at encryption, rounded
            up to a power of two unless given explicitly, then
            propagated by every operation: ``|a + b| <= bound_a + bound_b``, ``|a b| <= bound_a bound_b``...), or
            None where unknown. Static metadata like the scale (it survives ``jax.jit``); ``bootstrap`` checks it
            against the bound its message ratio supports.
    """

    data: jax.Array
    level: int
    scale: float
    slots: int
    is_complex: bool
    context_id: int
    key_id: int
    bound: float | None = None

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape[:-3])

    @property
    def num_limbs(self) -> int:
        return int(self.data.shape[-2])

    def replace(self, **changes) -> "Ciphertext":
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        bound = "" if self.bound is None else f", bound={self.bound:.4g}"
        return (f"Ciphertext(batch={self.batch_shape}, level={self.level}, limbs={self.num_limbs}, "
                f"scale=2^{np.log2(self.scale):.2f}, slots={self.slots}{bound})")


@dataclasses.dataclass(frozen=True, eq=False)
class Plaintext(_NoOperators):
    """An encoded (unencrypted) batch of slot vectors: uint32 ``(..., limbs, N)`` in the NTT domain."""

    data: jax.Array
    level: int
    scale: float
    slots: int
    is_complex: bool
    context_id: int
    bound: float | None = None  # max |value| of the encoded values, rounded up to a power of two (None: unknown)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape[:-2])

    def replace(self, **changes) -> "Plaintext":
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        return (f"Plaintext(batch={self.batch_shape}, level={self.level}, scale=2^{np.log2(self.scale):.2f}, "
                f"slots={self.slots})")


_PT_META = ["level", "scale", "slots", "is_complex", "context_id", "bound"]
_CT_META = ["level", "scale", "slots", "is_complex", "context_id", "key_id", "bound"]
jax.tree_util.register_dataclass(Ciphertext, data_fields=["data"], meta_fields=_CT_META)
jax.tree_util.register_dataclass(Plaintext, data_fields=["data"], meta_fields=_PT_META)
