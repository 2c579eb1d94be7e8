"""Randomness for keys and encryption, from the operating system's CSPRNG.

All draws are vectorized: bytes come from ``os.urandom`` in bulk and are turned into residues (rejection
sampling, no modulo bias), ternary values, sparse ternary values of a fixed Hamming weight, and rounded
Gaussians. A seeded sampler exists only for tests (``Sampler.insecure_for_tests(seed)``); it uses numpy's
PCG64, which is *not* a cryptographic generator, and says so.
"""

from __future__ import annotations

import math
import os
from typing import Sequence

import numpy as np

from hemx.errors import ParameterError

GAUSSIAN_TAIL = 6.0  # errors are clipped at 6 sigma (as SEAL's clipped normal)


class Sampler:
    """Source of secret, error and encryption randomness. ``Sampler()`` reads the OS CSPRNG."""

    def __init__(self):
        self._rng: np.random.Generator | None = None

    @classmethod
    def insecure_for_tests(cls, seed: int) -> "Sampler":
        """Deterministic sampler for reproducible tests. Never use it to protect data."""
        s = cls()
        s._rng = np.random.Generator(np.random.PCG64(seed))
        return s

    @property
    def secure(self) -> bool:
        return self._rng is None

    def _bytes(self, count: int) -> np.ndarray:
        if self._rng is not None:
            return self._rng.integers(0, 256, size=count, dtype=np.uint8)
        return np.frombuffer(os.urandom(count), dtype=np.uint8)

    def _words32(self, count: int) -> np.ndarray:
        return self._bytes(4 * count).view(np.uint32)

    def _uniform_below(self, bound: int, count: int) -> np.ndarray:
        """``count`` uniform integers in ``[0, bound)`` (``bound <= 2^32``), by rejection from 32-bit words."""
        limit = ((1 << 32) // bound) * bound
        out = np.empty(count, dtype=np.uint64)
        filled = 0
        while filled < count:
            need = count - filled
            words = self._words32(need + need // 8 + 16).astype(np.uint64)
            good = words[words < limit][:need]
            out[filled : filled + len(good)] = good % np.uint64(bound)
            filled += len(good)
        return out

    def uniform(self, moduli: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
        """Uniform residues: uint32 array of ``shape = (..., L, N)``, limb ``l`` uniform mod ``moduli[l]``."""
        if shape[-2] != len(moduli):
            raise ParameterError(f"shape {shape} does not have {len(moduli)} limbs on axis -2")
        out = np.empty(shape, dtype=np.uint32)
        per = int(np.prod(shape)) // len(moduli)
        for l, q in enumerate(moduli):
            out[..., l, :] = self._uniform_below(int(q), per).reshape(shape[:-2] + shape[-1:])
        return out

    def ternary(self, shape: tuple[int, ...], hamming_weight: int | None = None) -> np.ndarray:
        """int8 values in {-1, 0, 1}: uniform, or exactly ``hamming_weight`` non-zeros per last-axis row."""
        if hamming_weight is None:
            return (self._uniform_below(3, int(np.prod(shape))).astype(np.int8) - 1).reshape(shape)
        n = shape[-1]
        if not 0 < hamming_weight <= n:
            raise ParameterError(f"hamming weight must be in (0, {n}], got {hamming_weight}")
        rows = int(np.prod(shape[:-1]))
        keys = self._bytes(8 * rows * n).view(np.uint64).reshape(rows, n)
        positions = np.argsort(keys, axis=1)[:, :hamming_weight]  # a uniformly random h-subset per row
        signs = (self._uniform_below(2, rows * hamming_weight).astype(np.int8) * 2 - 1).reshape(rows, -1)
        out = np.zeros((rows, n), dtype=np.int8)
        np.put_along_axis(out, positions, signs, axis=1)
        return out.reshape(shape)

    def gaussian(self, shape: tuple[int, ...], sigma: float) -> np.ndarray:
        """int64 rounded Gaussian samples (Box-Muller on 53-bit uniforms), clipped at 6 sigma."""
        count = int(np.prod(shape))
        half = (count + 1) // 2
        bits = self._bytes(16 * half).view(np.uint64) >> np.uint64(11)
        u = (bits.astype(np.float64) + 0.5) * (2.0 ** -53)  # in (0, 1)
        u1, u2 = u[:half], u[half:]
        r = np.sqrt(-2.0 * np.log(u1)) * sigma
        z = np.concatenate([r * np.cos(2 * math.pi * u2), r * np.sin(2 * math.pi * u2)])[:count]
        bound = GAUSSIAN_TAIL * sigma
        z = np.clip(np.rint(z), -math.floor(bound), math.floor(bound))
        return z.astype(np.int64).reshape(shape)
