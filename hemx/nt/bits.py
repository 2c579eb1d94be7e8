"""Powers of two and bit reversal."""

from __future__ import annotations

import numpy as np

from hemx.errors import ParameterError


def is_power_of_two(n: int) -> bool:
    """True when ``n`` is a positive power of two (1 included)."""
    return isinstance(n, (int, np.integer)) and n > 0 and (int(n) & (int(n) - 1)) == 0


def log2_exact(n: int, what: str = "value") -> int:
    """``log2(n)`` for a power of two ``n``; raises ParameterError otherwise."""
    if not is_power_of_two(n):
        raise ParameterError(f"{what} must be a power of two, got {n!r}")
    return int(n).bit_length() - 1


def bit_reverse(i: int, bits: int) -> int:
    """Reverse the lowest ``bits`` bits of ``i`` (``0 <= i < 2**bits``)."""
    if not 0 <= i < (1 << bits):
        raise ParameterError(f"index {i} does not fit in {bits} bits")
    out = 0
    for _ in range(bits):
        out = (out << 1) | (i & 1)
        i >>= 1
    return out


def bit_reverse_permutation(n: int) -> np.ndarray:
    """The permutation ``p`` with ``p[i] = bit_reverse(i, log2 n)``, as an int64 array of length ``n``."""
    bits = log2_exact(n, "permutation length")
    idx = np.arange(n, dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)
    for b in range(bits):
        out |= ((idx >> b) & 1) << (bits - 1 - b)
    return out
