"""Randomness for keys and encryption, from the operating system's CSPRNG.

All draws are vectorized: bytes come from ``os.urandom`` in bulk and are turned into residues (rejection
sampling, no modulo bias), ternary values, sparse ternary values of a fixed Hamming weight, and rounded
Gaussians. A seeded sampler exists only for tests (``Sampler.insecure_for_tests(seed)``); it uses numpy's
PCG64, which is *not* a cryptographic generator, and says so.

Seeded uniform polynomials: the uniform half ``a_d`` of every switching key is not drawn directly but expanded
from a 32-byte seed (:meth:`Sampler.seed`, from the OS CSPRNG) by :func:`expand_seed`, so a serialized key stores
the seed instead of ``a_d`` (as SEAL and Lattigo do), and a compact key in memory holds only its ``b_d`` and a
stream key, its ``a_d`` generated inside each key switch. One stream per (digit, modulus), turned into exact
uniform residues by rejection sampling; the expansion is a fixed function of the seed and part of the
serialization format. Three exist:

* ``"aes128ctr"`` (keys made now; format version 6): AES-128 in counter mode (:mod:`hemx.kernels.prng`) under the
  first 4 words of the stream key :func:`stream_key` = the first 32 bytes of SHAKE-256(``CHACHA_LABEL`` || seed).
  CPUs run it on their AES instructions (VAES on AVX-512, AES-NI, AArch64's FEAT_AES; a portable engine elsewhere)
  inside the key switch, so a compact key's product costs about what a full key's does; JAX everywhere else.
* ``"chacha20"`` (keys made with format version 5): the ChaCha20 streams of :mod:`hemx.kernels.prng` under the
  whole stream key (native AVX-512 / AVX2 / NEON kernels, and JAX everywhere else).
* ``"shake256"`` (keys made before; ``XOF_LABEL``): SHAKE-256 of the label, the seed and (N, digit, q); such keys
  are expanded whole when loaded.

The seed is public (it is part of the evaluation key, as ``a_d`` itself is); what the expansion must give is
uniform-looking ``a_d``, which both extendable-output constructions do.
"""

from __future__ import annotations

import hashlib
import math
import os
import struct
from typing import Sequence

import numpy as np

from hemx.errors import ParameterError
from hemx.kernels import native, prng

GAUSSIAN_TAIL = 6.0  # errors are clipped at 6 sigma (as SEAL's clipped normal)
SEED_BYTES = 32  # seeds of expanded uniform polynomials (256 bits, as SEAL's and Lattigo's PRNG seeds)
XOF_LABEL = b"hemx/seeded-uniform/shake256/v1"  # domain of the SHAKE-256 expansion; a new expansion needs a new label
CHACHA_LABEL = b"hemx/seeded-uniform/chacha20/v2"  # domain of the ChaCha20 stream keys
_STREAM = struct.Struct("<QQQ")  # (N, digit, modulus) after the label and the seed: one stream each


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

    def seed(self) -> bytes:
        """A fresh seed of ``SEED_BYTES`` for :func:`expand_seed` (the OS CSPRNG; the test generator when seeded)."""
        return self._bytes(SEED_BYTES).tobytes()

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


def check_seed(seed, what: str = "seed") -> bytes:
    """``seed`` as bytes if it is a ``SEED_BYTES``-byte bytes-like object, else :class:`ParameterError`."""
    if not isinstance(seed, (bytes, bytearray, memoryview)):
        raise ParameterError(f"the {what} must be {SEED_BYTES} bytes, got {type(seed).__name__}")
    seed = bytes(seed)
    if len(seed) != SEED_BYTES:
        raise ParameterError(f"the {what} must be {SEED_BYTES} bytes, got {len(seed)}")
    return seed


def _stream_words(seed: bytes, n: int, digit: int, q: int, count: int) -> np.ndarray:
    """The first ``count`` little-endian 32-bit words of the SHAKE-256 stream of (seed, N, digit, q)."""
    xof = hashlib.shake_256(XOF_LABEL + seed + _STREAM.pack(n, digit, q))
    return np.frombuffer(xof.digest(4 * count), dtype="<u4")


def _words_needed(n: int, q: int) -> int:
    """Words drawn per stream: the expected need plus a margin that almost never runs out (then more are drawn)."""
    reject = ((1 << 32) % q) / float(1 << 32)  # probability that a word is rejected
    mean = n / (1.0 - reject)
    return int(mean + 8.0 * math.sqrt(mean * reject) + 64)


def stream_key(seed: bytes) -> np.ndarray:
    """The stream key of a seed: uint32 ``(8,)``, the first 32 bytes of SHAKE-256(``CHACHA_LABEL`` || seed) as
    little-endian words (:mod:`hemx.kernels.prng`). The ChaCha20 expansion takes all 8 words as its key, the AES-128
    one the first 4 (a key is expanded by one of them: its ``xof``)."""
    seed = check_seed(seed)
    return np.frombuffer(hashlib.shake_256(CHACHA_LABEL + seed).digest(32), dtype="<u4").astype(np.uint32)


def expand_seed(seed: bytes, moduli: Sequence[int], n: int, digits: int = 1, *, xof: str = "shake256") -> np.ndarray:
    """Uniform residues expanded from a seed: uint32 ``(digits, len(moduli), n)``, row ``(d, l)`` uniform mod
    ``moduli[l]``.

    Row ``(d, l)`` is a function of ``(seed, n, d, moduli[l])`` only, so it does not depend on which other moduli
    are expanded with it or in which order (a key expanded at a lower level, or over a reordered basis, agrees on
    every shared limb).

    * ``xof="aes128ctr"`` / ``"chacha20"``: the AES-128 counter (or ChaCha20) stream of ``(stream_key(seed), d, q,
      n)`` (:mod:`hemx.kernels.prng`: masked rejection sampling), by the native kernel where available, else the JAX
      definition (bit-identical).
    * ``xof="shake256"``: the SHAKE-256 stream of ``XOF_LABEL || seed || n || d || q`` (64-bit little-endian
      integers) read as little-endian 32-bit words, of which those below ``floor(2^32 / q) q`` are kept and
      reduced mod ``q`` (exactly uniform: each residue has the same number of preimages); the first ``n`` kept
      words are the row. One digest per row (a few hundred kilobytes at N = 2^16), numpy for the rest.
    """
    seed = check_seed(seed)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"the ring degree must be a positive integer, got {n!r}")
    if isinstance(digits, bool) or not isinstance(digits, (int, np.integer)) or digits < 0:
        raise ParameterError(f"the digit count must be a non-negative integer, got {digits!r}")
    qs = [int(q) for q in moduli]
    if any(not 1 < q < 1 << 32 for q in qs):
        raise ParameterError(f"moduli must be in (1, 2^32), got {qs}")
    n, digits = int(n), int(digits)
    if xof in prng.STREAM_XOFS:
        if any(q % 2 == 0 or q >= 1 << 31 for q in qs):
            raise ParameterError(f"the {xof} expansion needs odd moduli below 2^31, got {qs}")
        if not digits or not qs:
            return np.empty((digits, len(qs), n), dtype=np.uint32)
        return np.asarray(uniform_rows(stream_key(seed), qs, digits=digits, n=n, xof=xof))
    if xof != "shake256":
        raise ParameterError(f"unknown seed expansion {xof!r}; choose one of {prng.STREAM_XOFS + ('shake256',)}")
    out = np.empty((digits, len(qs), n), dtype=np.uint32)
    for l, q in enumerate(qs):
        top = np.uint32(((1 << 32) // q) * q - 1)  # keep words <= top: below the largest multiple of q
        count = _words_needed(n, q)
        for d in range(digits):
            words = _stream_words(seed, n, d, q, count)
            kept = words[words <= top]
            kept = kept[:n] if len(kept) >= n else _long_row(seed, n, d, q, 2 * count)
            np.remainder(kept, np.uint32(q), out=out[d, l])
    return out


def uniform_rows(key, moduli, *, digits: int, n: int, xof: str = "chacha20"):
    """The rows ``(digits, m, n)`` of a stream key over ``moduli`` by the expansion ``xof`` ("chacha20" or
    "aes128ctr"; :mod:`hemx.kernels.prng`), a JAX array: the native kernel on CPU where the library has it, the JAX
    definition elsewhere (bit-identical)."""
    key = np.asarray(key, dtype=np.uint32)
    q = np.asarray([int(x) for x in moduli], dtype=np.uint32)
    if native.has_seeded_keys() and (xof == "chacha20" or native.has_aes_streams()):
        return native.uniform(key, q, digits=digits, n=n, xof=xof)
    return prng.uniform_rows(key, q, digits=digits, n=n, xof=xof)


def _long_row(seed: bytes, n: int, digit: int, q: int, count: int) -> np.ndarray:
    """The first ``n`` kept words of one stream when the usual read ran short (probability below 2^-40 a row):
    read ``count`` words, doubling until enough are kept."""
    top = ((1 << 32) // q) * q - 1
    while True:
        words = _stream_words(seed, n, digit, q, count)
        kept = words[words <= top]
        if len(kept) >= n:
            return kept[:n]
        count *= 2
