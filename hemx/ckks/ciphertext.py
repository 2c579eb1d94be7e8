"""Ciphertexts and plaintexts: pytrees whose only leaf is the residue array (NTT domain)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np


@dataclasses.dataclass(frozen=True)
class Ciphertext:
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


@dataclasses.dataclass(frozen=True)
class Plaintext:
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
