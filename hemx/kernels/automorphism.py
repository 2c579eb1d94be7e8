"""Galois automorphisms ``X -> X^g`` (g odd) on polynomials in the NTT domain.

In the bit-reversed NTT order of :mod:`hemx.kernels.ntt`, position ``p`` holds ``A_k = a(psi^(2k+1))`` with
``k = brv(p)``. Since ``sigma_g(a)(psi^(2k+1)) = a(psi^(g (2k+1)))``, the automorphism is the permutation
``out[p] = in[brv(k')]`` with ``2k' + 1 = g (2k + 1) mod 2N``: a gather with an index map computed once per g.
CKKS rotations use ``g = 5^r mod 2N`` and conjugation ``g = 2N - 1``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from hemx.errors import ParameterError, ShapeError
from hemx.nt import bit_reverse_permutation, log2_exact


def galois_element(n: int, steps: int) -> int:
    """``5^steps mod 2N``: the Galois element of a rotation by ``steps`` slots (negative steps rotate right)."""
    log2_exact(n, "ring degree N")
    return pow(5, steps % (n // 2), 2 * n) if n >= 4 else 1


def conjugation_element(n: int) -> int:
    """``2N - 1``: the Galois element of complex conjugation of the slots."""
    return 2 * n - 1


def ntt_index_map(n: int, g: int) -> np.ndarray:
    """Index map of ``X -> X^g`` in the bit-reversed NTT domain: ``out[p] = in[map[p]]`` (int32, length N)."""
    log2_exact(n, "ring degree N")
    if g % 2 == 0:
        raise ParameterError(f"Galois element must be odd, got {g}")
    g %= 2 * n
    brv = bit_reverse_permutation(n)
    k = brv  # position p holds evaluation index brv(p)
    kprime = ((g * (2 * k + 1)) % (2 * n) - 1) // 2
    return brv[kprime].astype(np.int32)


def coeff_index_map(n: int, g: int) -> tuple[np.ndarray, np.ndarray]:
    """Coefficient-domain form: ``out[dest[j]] = sign[j] * in[j]`` with ``dest = j g mod N`` (for references)."""
    j = np.arange(n, dtype=np.int64)
    e = (j * g) % (2 * n)
    return e % n, np.where(e >= n, -1, 1)


AUTOMORPHISM_METHODS = ("jax", "native")


def _gather(x, index_map):
    idx = jnp.broadcast_to(index_map, x.shape)
    return jnp.take_along_axis(x, idx, axis=-1, mode="promise_in_bounds")


def apply_ntt_automorphism(x, index_map, method: str = "auto"):
    """Permute the last axis of NTT-domain data ``(..., L, N)`` by an index map from :func:`ntt_index_map`.

    ``method``: "jax" (an XLA gather), "native" (the C++ kernel of :mod:`hemx.kernels.native`; BackendError
    where unavailable) or "auto": native where the program runs on CPU and the native library is available
    (``hemx.kernels.native.on_cpu``), the XLA gather otherwise (every other platform, ``jax.export`` for
    cuda / tpu, ``HEMX_NATIVE=0``). Both give the same result.

    The XLA gather is written along the last axis with every leading axis a batching axis
    (``take_along_axis``), so XLA keeps the natural ``(..., L, N)`` layout. ``jnp.take`` gathers ``N``-major
    and transposes back inside the consumer, which made the first NTT stage of a rotation read 60 words apart
    at P16 (about 10% of a rotation at N = 2^16). Index maps from :func:`ntt_index_map` are permutations of
    ``range(N)``, so the gather skips bounds handling.
    """
    index_map = jnp.asarray(index_map)
    if index_map.shape != x.shape[-1:]:
        raise ShapeError(f"index map of length {index_map.shape} does not match data of shape {x.shape}")
    if method == "jax":
        return _gather(x, index_map)
    from hemx.kernels import native  # noqa: PLC0415 - optional library, loaded once

    if method == "native":
        return native.automorphism(x, index_map)
    if method != "auto":
        raise ParameterError(f"unknown automorphism method {method!r}; choose one of {AUTOMORPHISM_METHODS + ('auto',)}")
    if x.dtype != jnp.uint32 or x.ndim < 2:  # the native kernel's domain; anything else takes the XLA gather
        return _gather(x, index_map)
    return native.on_cpu(native.automorphism, _gather, x, index_map.astype(jnp.int32))
