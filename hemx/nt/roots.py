"""Generators and roots of unity modulo a prime."""

from __future__ import annotations

from functools import lru_cache

from hemx.errors import ModulusError
from hemx.nt.primes import is_prime


def _prime_factors(n: int) -> list[int]:
    out, d = [], 2
    while d * d <= n:
        if n % d == 0:
            out.append(d)
            while n % d == 0:
                n //= d
        d += 1 if d == 2 else 2
    if n > 1:
        out.append(n)
    return out


@lru_cache(maxsize=None)
def primitive_root(q: int) -> int:
    """Smallest generator of the multiplicative group mod the prime ``q``."""
    if not is_prime(q):
        raise ModulusError(f"{q} is not prime")
    if q == 2:
        return 1
    factors = _prime_factors(q - 1)
    g = 2
    while any(pow(g, (q - 1) // f, q) == 1 for f in factors):
        g += 1
    return g


def is_primitive_root_of_unity(w: int, order: int, q: int) -> bool:
    """True when ``w`` has multiplicative order exactly ``order`` mod ``q``."""
    if pow(w, order, q) != 1:
        return False
    return all(pow(w, order // f, q) != 1 for f in _prime_factors(order))


def root_of_unity(order: int, q: int) -> int:
    """A primitive ``order``-th root of unity mod the prime ``q`` (deterministic: from the smallest generator)."""
    if (q - 1) % order:
        raise ModulusError(f"modulus {q} has no primitive {order}-th root of unity: {q} != 1 mod {order}")
    return pow(primitive_root(q), (q - 1) // order, q)


def primitive_2nth_root(n: int, q: int) -> int:
    """psi: a primitive ``2n``-th root of unity mod ``q``, the root of the negacyclic NTT of length ``n``."""
    return root_of_unity(2 * n, q)
