"""The RNS ring object."""

from __future__ import annotations

from functools import partial
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from hemx.errors import ParameterError, ShapeError
from hemx.kernels import bat, modarith
from hemx.kernels import ntt as ntt_kernels

NTT_METHODS = ntt_kernels.METHODS


@jax.jit
def _add(a, b, q):
    return modarith.add_mod(a, b, q)


@jax.jit
def _sub(a, b, q):
    return modarith.sub_mod(a, b, q)


@jax.jit
def _neg(a, q):
    return modarith.neg_mod(a, q)


@partial(jax.jit, static_argnames="method")
def _mul(a, b, table, method):
    return modarith.mul_mod(a, b, table, method)


_ntt = jax.jit(ntt_kernels.ntt)
_intt = jax.jit(ntt_kernels.intt)


@partial(jax.jit, static_argnames="method")
def _poly_mul(a, b, plan, method):
    fa = ntt_kernels.ntt(a, plan)
    fb = ntt_kernels.ntt(b, plan)
    return ntt_kernels.intt(modarith.mul_mod(fa, fb, plan.table, method), plan)


class RNSRing:
    """``Z_Q[X]/(X^N + 1)`` in RNS form with one of the exact NTT methods.

    Args:
        n: ring degree N, a power of two.
        moduli: L distinct primes ``q = 1 mod 2N`` below 2^31 (``hemx.nt.ntt_primes`` finds them).
        ntt: "butterfly", "four_step", "mat3", "multilevel", or "native" (the butterfly in C++ through XLA's
            FFI, CPU only; BackendError when ``hemx.kernels.native.available()`` is False). Default (None): the
            fastest exact method of the default backend without measuring, the rule every entry point follows
            (:func:`hemx.kernels.ntt.default_method`: native on CPU where built, the matrix-engine NTT on GPU/TPU).
        reduction: "shoup", "montgomery" or "barrett" for products by known constants (twiddles); default (None):
            the one :func:`~hemx.kernels.ntt.default_method` pairs with the default method, else "shoup".
        bp: BAT chunk width for the matrix methods (2..8).
        split: ``(R, C)`` for mat3 / four_step, or the radix list for multilevel; default chosen per N.
        max_radix: largest radix of the multilevel method when ``split`` is not given.

    The NTT domain order is bit-reversed for every method (``order`` maps positions to evaluation indices),
    so ciphertexts in NTT form are interchangeable between rings that differ only in the method.
    """

    def __init__(
        self,
        n: int,
        moduli: Sequence[int],
        ntt: str | None = None,
        *,
        reduction: str | None = None,
        bp: int = bat.DEFAULT_BP,
        split: Sequence[int] | None = None,
        max_radix: int = 16,
    ):
        if ntt is None:
            ntt, default_reduction = ntt_kernels.default_method()
            reduction = reduction or default_reduction
        reduction = reduction or "shoup"
        self.plan = ntt_kernels.make_plan(
            n, moduli, ntt, reduction=reduction, bp=bp, split=split, max_radix=max_radix
        )
        self.plan = jax.device_put(self.plan)
        self.n = int(n)
        self.moduli = tuple(int(q) for q in moduli)
        self.ntt_method = ntt
        self.reduction = reduction
        self.order = ntt_kernels.evaluation_order(self.n)
        # runtime-operand products: Montgomery when chosen, Barrett otherwise (Shoup needs a known operand)
        self._mul_method = "montgomery" if reduction == "montgomery" else "barrett"

    # ------------------------------------------------------------------ properties
    @property
    def num_limbs(self) -> int:
        return len(self.moduli)

    @property
    def table(self) -> modarith.ModulusTable:
        """Per-limb modulus constants shaped ``(L, 1)``."""
        return self.plan.table

    @property
    def q(self):
        """uint32 moduli shaped ``(L, 1)``."""
        return self.plan.table.q

    def __repr__(self) -> str:
        return f"RNSRing(n={self.n}, limbs={self.num_limbs}, ntt={self.plan.describe()!r})"

    # ------------------------------------------------------------------ conversion
    def check(self, x, name: str = "x"):
        """Validate ``(..., L, N)`` residues and return them as a uint32 jax array.

        numpy / Python integer input is range-checked (``0 <= x < q`` per limb) on the host; jax arrays must
        already be uint32 (their range is the caller's contract, as for every kernel).
        """
        if isinstance(x, jax.Array):
            arr = x
            if arr.dtype != jnp.uint32:
                raise ShapeError(f"{name} must be uint32 residues, got dtype {arr.dtype}")
        else:
            host = np.asarray(x)
            if host.dtype == object or not np.issubdtype(host.dtype, np.integer):
                raise ShapeError(f"{name} must be an integer array of residues, got dtype {host.dtype}")
            if host.ndim >= 2 and host.shape[-2:] == (self.num_limbs, self.n) and host.size:
                unsigned = np.issubdtype(host.dtype, np.unsignedinteger)
                wide = host.astype(np.uint64) if unsigned else host.astype(np.int64)
                qs = np.asarray(self.moduli, dtype=wide.dtype).reshape(-1, 1)
                if (not unsigned and host.min() < 0) or np.any(wide >= qs):
                    raise ParameterError(f"{name} holds values outside [0, q) for its limb; use ring.from_ints")
            arr = jnp.asarray(host.astype(np.uint32))
        if arr.ndim < 2 or arr.shape[-2:] != (self.num_limbs, self.n):
            raise ShapeError(
                f"{name} must be shaped (..., L, N) = (..., {self.num_limbs}, {self.n}); got {tuple(arr.shape)}"
            )
        return arr

    def from_ints(self, coeffs) -> jax.Array:
        """Reduce integer coefficients ``(..., N)`` (any size, object arrays allowed) to residues ``(..., L, N)``."""
        c = np.asarray(coeffs)
        if c.ndim < 1 or c.shape[-1] != self.n:
            raise ShapeError(f"coefficients must be shaped (..., N) with N = {self.n}; got {c.shape}")
        if c.dtype != object and not np.issubdtype(c.dtype, np.integer):
            raise ShapeError(f"coefficients must be integers, got dtype {c.dtype}")
        limbs = []
        for q in self.moduli:
            if c.dtype == object:
                limbs.append(np.asarray(c % q, dtype=np.int64))
            elif np.issubdtype(c.dtype, np.unsignedinteger):  # values may exceed the int64 range
                limbs.append(np.mod(c.astype(np.uint64), np.uint64(q)))
            else:
                limbs.append(np.mod(c.astype(np.int64), q))
        return jnp.asarray(np.stack(limbs, axis=-2).astype(np.uint32))

    # ------------------------------------------------------------------ transforms
    def ntt(self, x) -> jax.Array:
        """Forward negacyclic NTT of ``(..., L, N)`` coefficients (output in bit-reversed order)."""
        return _ntt(self.check(x), self.plan)

    def intt(self, x) -> jax.Array:
        """Inverse NTT: ``(..., L, N)`` NTT-domain values (this ring's order) back to coefficients."""
        return _intt(self.check(x), self.plan)

    # ------------------------------------------------------------------ arithmetic (any domain)
    def add(self, a, b) -> jax.Array:
        """``a + b`` limb-wise mod q."""
        return _add(self.check(a, "a"), self.check(b, "b"), self.q)

    def sub(self, a, b) -> jax.Array:
        """``a - b`` limb-wise mod q."""
        return _sub(self.check(a, "a"), self.check(b, "b"), self.q)

    def neg(self, a) -> jax.Array:
        """``-a`` limb-wise mod q."""
        return _neg(self.check(a, "a"), self.q)

    def mul(self, a, b) -> jax.Array:
        """Element-wise ``a * b`` mod q (the product of polynomials when both are in the NTT domain)."""
        return _mul(self.check(a, "a"), self.check(b, "b"), self.table, self._mul_method)

    def poly_mul(self, a, b) -> jax.Array:
        """Negacyclic product of coefficient-form polynomials ``(..., L, N)`` (NTT, pointwise, inverse NTT)."""
        return _poly_mul(self.check(a, "a"), self.check(b, "b"), self.plan, self._mul_method)
