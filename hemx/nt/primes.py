"""Primality and NTT-friendly prime generation."""

from __future__ import annotations

from numbers import Integral

import numpy as np

from hemx.errors import ModulusError, ParameterError
from hemx.nt.bits import is_power_of_two

# Deterministic Miller-Rabin witnesses: correct for every n < 3.3e24 (Sorenson & Webster 2015).
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
_SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)


def _is_int(value) -> bool:
    return isinstance(value, (Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_prime(n: int) -> bool:
    """Primality test: deterministic below 3.3e24, Miller-Rabin with 13 fixed bases (probabilistic) above."""
    n = int(n)
    if n < 2:
        return False
    for p in _SMALL_PRIMES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def next_ntt_prime_below(bound: int, n: int) -> int:
    """Largest prime ``q < bound`` with ``q = 1 (mod 2n)``; raises ModulusError if none exists."""
    step = 2 * n
    q = ((bound - 2) // step) * step + 1
    while q > step:
        if q < bound and is_prime(q):
            return q
        q -= step
    raise ModulusError(f"no prime q = 1 mod {step} below {bound}")


def ntt_primes(bits: int, count: int, n: int, *, exclude: tuple[int, ...] | list[int] = ()) -> list[int]:
    """``count`` distinct primes ``q = 1 (mod 2n)`` with ``q < 2**bits``, largest first.

    These support a negacyclic NTT of length ``n`` (a primitive ``2n``-th root of unity exists mod q).
    ``exclude`` skips primes already used elsewhere (e.g. for the special moduli of key switching).
    """
    for name, value in (("n", n), ("bits", bits), ("count", count)):
        if not _is_int(value):
            raise ParameterError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    n, bits, count = int(n), int(bits), int(count)
    if not is_power_of_two(n):
        raise ParameterError(f"ring degree n must be a power of two, got {n}")
    if not 2 <= bits <= 62:
        raise ParameterError(f"bits must be in [2, 62], got {bits}")
    if count < 0:
        raise ParameterError(f"count must be non-negative, got {count}")
    if isinstance(exclude, (str, bytes)) or not all(_is_int(e) for e in exclude):
        raise ParameterError(f"exclude must be a sequence of integers, got {exclude!r}")
    step = 2 * n
    skip = set(int(e) for e in exclude)
    out: list[int] = []
    q = (((1 << bits) - 2) // step) * step + 1
    while len(out) < count:
        if q <= step:
            raise ModulusError(
                f"only {len(out)} primes q = 1 mod {step} exist below 2^{bits}; asked for {count}. "
                "Use more bits or a smaller ring degree."
            )
        if q not in skip and is_prime(q):
            out.append(q)
        q -= step
    return out
