"""Independent, deliberately simple reference implementations for the hemx test suite.

Everything here uses plain Python integers (numpy appears only as a container, or, in
``negacyclic_mul_split``, as an exact int64 convolution whose operands are split so that no partial sum can
overflow). Nothing imports JAX or hemx: the tests compare hemx's kernels against these functions, so they
must not share code with the library.
"""

from __future__ import annotations

from functools import lru_cache
from math import gcd, isqrt, prod
from typing import Sequence

import numpy as np

R32 = 1 << 32


# ----------------------------------------------------------------------------------------------------------
# scalar modular arithmetic
# ----------------------------------------------------------------------------------------------------------


def add_mod(a: int, b: int, q: int) -> int:
    return (int(a) + int(b)) % q


def sub_mod(a: int, b: int, q: int) -> int:
    return (int(a) - int(b)) % q


def neg_mod(a: int, q: int) -> int:
    return (-int(a)) % q


def mul_mod(a: int, b: int, q: int) -> int:
    return (int(a) * int(b)) % q


def inverse(a: int, m: int) -> int:
    """Modular inverse by the extended Euclidean algorithm (raises ValueError when none exists)."""
    a, m = int(a) % m, int(m)
    old_r, r = a, m
    old_s, s = 1, 0
    while r:
        quo = old_r // r
        old_r, r = r, old_r - quo * r
        old_s, s = s, old_s - quo * s
    if old_r != 1:
        raise ValueError(f"{a} is not invertible modulo {m}")
    return old_s % m


def montgomery_mul(a: int, b: int, q: int) -> int:
    """``a * b * 2^-32 mod q``."""
    return int(a) * int(b) * inverse(R32, q) % q


def shoup_constant(w: int, q: int) -> int:
    """``floor(w * 2^32 / q)``."""
    return (int(w) << 32) // q


# ----------------------------------------------------------------------------------------------------------
# primes, factorisation, roots of unity
# ----------------------------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def small_primes(limit: int = 1 << 18) -> tuple[int, ...]:
    """All primes below ``limit`` (sieve of Eratosthenes)."""
    sieve = bytearray([1]) * limit
    sieve[0:2] = b"\x00\x00"
    for p in range(2, isqrt(limit - 1) + 1):
        if sieve[p]:
            sieve[p * p :: p] = bytearray(len(range(p * p, limit, p)))
    return tuple(i for i in range(limit) if sieve[i])


def is_prime(n: int) -> bool:
    """Primality by trial division (by sieved primes); exact for ``n < 2^36``."""
    n = int(n)
    if n < 2:
        return False
    limit = isqrt(n)
    primes = small_primes()
    if limit >= primes[-1] + 2:
        raise ValueError("reference is_prime only handles n < 2^36")
    for p in primes:
        if p > limit:
            return True
        if n % p == 0:
            return n == p
    return True


def factorize(n: int) -> dict[int, int]:
    """Prime factorisation by trial division."""
    n = int(n)
    out: dict[int, int] = {}
    d = 2
    while d * d <= n:
        while n % d == 0:
            out[d] = out.get(d, 0) + 1
            n //= d
        d += 1
    if n > 1:
        out[n] = out.get(n, 0) + 1
    return out


def multiplicative_order(a: int, q: int) -> int:
    """Order of ``a`` in the group of units mod the prime ``q`` (by reducing ``q - 1`` prime by prime)."""
    a %= q
    if a == 0:
        raise ValueError("0 has no multiplicative order")
    order = q - 1
    for p in factorize(q - 1):
        while order % p == 0 and pow(a, order // p, q) == 1:
            order //= p
    return order


def smallest_generator(q: int) -> int:
    """Smallest ``g >= 1`` generating the units mod the prime ``q``."""
    if q == 2:
        return 1
    g = 2
    while multiplicative_order(g, q) != q - 1:
        g += 1
    return g


def psi(n: int, q: int) -> int:
    """The primitive 2n-th root of unity used by hemx's NTT convention: ``g^((q-1)/2n)`` for the smallest
    generator ``g``."""
    assert (q - 1) % (2 * n) == 0
    return pow(smallest_generator(q), (q - 1) // (2 * n), q)


# ----------------------------------------------------------------------------------------------------------
# bits
# ----------------------------------------------------------------------------------------------------------


def bit_reverse(i: int, bits: int) -> int:
    """Reverse the ``bits``-bit binary string of ``i``."""
    if bits == 0:
        return 0
    return int(format(i, f"0{bits}b")[::-1], 2)


def log2(n: int) -> int:
    k = 0
    while (1 << k) < n:
        k += 1
    assert 1 << k == n
    return k


# ----------------------------------------------------------------------------------------------------------
# NTT and negacyclic products
# ----------------------------------------------------------------------------------------------------------


def ntt_eval(a: Sequence[int], q: int, root: int, k: int) -> int:
    """``A_k = sum_j a_j root^((2k+1) j) mod q``."""
    w = pow(root, 2 * k + 1, q)
    acc, p = 0, 1
    for aj in a:
        acc += int(aj) * p
        p = p * w % q
    return acc % q


def ntt_naive(a: Sequence[int], q: int, root: int) -> list[int]:
    """Negacyclic NTT in bit-reversed order: position ``p`` holds ``A_{brv(p)}`` (O(N^2))."""
    n = len(a)
    bits = log2(n)
    return [ntt_eval(a, q, root, bit_reverse(p, bits)) for p in range(n)]


def negacyclic_mul(a: Sequence[int], b: Sequence[int], q: int) -> list[int]:
    """Schoolbook product in ``Z_q[X]/(X^N + 1)`` (O(N^2) Python ints)."""
    n = len(a)
    assert len(b) == n
    out = [0] * n
    for i in range(n):
        ai = int(a[i])
        if ai == 0:
            continue
        for j in range(n):
            t = ai * int(b[j])
            if i + j < n:
                out[i + j] += t
            else:
                out[i + j - n] -= t
    return [c % q for c in out]


def negacyclic_coeff(a: Sequence[int], b: Sequence[int], q: int, k: int) -> int:
    """Coefficient ``k`` of the negacyclic product: ``sum_{i<=k} a_i b_{k-i} - sum_{i>k} a_i b_{N+k-i}``."""
    n = len(a)
    pos = sum(int(a[i]) * int(b[k - i]) for i in range(k + 1))
    neg = sum(int(a[i]) * int(b[n + k - i]) for i in range(k + 1, n))
    return (pos - neg) % q


def _dot_exact(x: np.ndarray, y: np.ndarray) -> int:
    """Exact dot product of two vectors of values below 2^32 (at most 2^20 terms) via 16-bit halves."""
    x0, x1 = _split16(x)
    y0, y1 = _split16(y)
    assert len(x0) == len(y0) <= 1 << 20
    low = int(np.dot(x0, y0))
    mid = int(np.dot(x0, y1)) + int(np.dot(x1, y0))
    high = int(np.dot(x1, y1))
    return low + (mid << 16) + (high << 32)


def negacyclic_coeff_np(a, b, q: int, k: int) -> int:
    """Same as :func:`negacyclic_coeff` for operands below 2^32, with exact numpy dot products."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    n = len(a)
    pos = _dot_exact(a[: k + 1], b[k::-1])
    neg = _dot_exact(a[k + 1 :], b[n - 1 : k : -1]) if k + 1 < n else 0
    return (pos - neg) % q


def _split16(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.int64)
    assert x.min(initial=0) >= 0 and x.max(initial=0) < 1 << 32
    return x & 0xFFFF, x >> 16


def negacyclic_mul_split(a: Sequence[int], b: Sequence[int], q: int) -> list[int]:
    """Same as :func:`negacyclic_mul` for operands below 2^32 and ``N <= 2^20``, but fast.

    Each operand is split into 16-bit halves; every half-by-half linear convolution is done by numpy in int64
    (each term < 2^32, at most N terms: < 2^52, no overflow), and the halves are recombined with Python ints.
    """
    a0, a1 = _split16(a)
    b0, b1 = _split16(b)
    n = len(a0)
    assert n <= 1 << 20
    c00 = np.convolve(a0, b0)
    c01 = np.convolve(a0, b1) + np.convolve(a1, b0)  # each < 2^52, sum < 2^53
    c11 = np.convolve(a1, b1)
    full = [int(x) + (int(y) << 16) + (int(z) << 32) for x, y, z in zip(c00, c01, c11)]
    full.append(0)  # length 2N - 1 -> 2N
    return [(full[k] - full[k + n]) % q for k in range(n)]


# ----------------------------------------------------------------------------------------------------------
# CRT and basis conversion
# ----------------------------------------------------------------------------------------------------------


def crt(residues: Sequence[int], moduli: Sequence[int]) -> int:
    """The ``x`` in ``[0, prod(moduli))`` with ``x = r_i mod m_i``, built one modulus at a time."""
    x, m = 0, 1
    for r, mi in zip(residues, moduli):
        mi = int(mi)
        # find t with x + t*m = r (mod mi)
        t = (int(r) - x) * inverse(m, mi) % mi
        x += t * m
        m *= mi
    return x % m


def bconv(x: Sequence[int], source: Sequence[int], target: Sequence[int]) -> list[int]:
    """Fast basis conversion of one coefficient: ``(sum_i [x_i qhat_i^-1]_{q_i} qhat_i) mod p_j``."""
    big = prod(int(q) for q in source)
    total = 0
    for xi, qi in zip(x, source):
        qhat = big // qi
        total += (int(xi) * inverse(qhat, qi) % qi) * qhat
    return [total % int(p) for p in target]


def bconv_centered(x: Sequence[int], source: Sequence[int], target: Sequence[int]) -> list[int]:
    """Centered fast basis conversion: ``(sum_i c_i qhat_i) mod p_j`` with ``c_i = [x_i qhat_i^-1]_{q_i}`` taken in
    ``(-q_i/2, q_i/2]`` (so the result is ``X_c + u Q`` for the centered CRT value ``X_c`` and ``|u| <= L/2``)."""
    big = prod(int(q) for q in source)
    total = 0
    for xi, qi in zip(x, source):
        qhat = big // qi
        c = int(xi) * inverse(qhat, qi) % qi
        if c > qi // 2:
            c -= qi
        total += c * qhat
    return [total % int(p) for p in target]


def crt_centered(residues: Sequence[int], moduli: Sequence[int]) -> int:
    """The CRT value of ``residues`` in ``(-Q/2, Q/2]``."""
    big = prod(int(q) for q in moduli)
    x = crt(residues, moduli)
    return x - big if x > big // 2 else x


def pairwise_coprime(moduli: Sequence[int]) -> bool:
    ms = [int(m) for m in moduli]
    return all(gcd(ms[i], ms[j]) == 1 for i in range(len(ms)) for j in range(i + 1, len(ms)))


# ----------------------------------------------------------------------------------------------------------
# matrices and digits
# ----------------------------------------------------------------------------------------------------------


def matmul_mod(a, b, q: int) -> np.ndarray:
    """``(a @ b) mod q`` with Python ints; ``a`` is (H, V), ``b`` is (..., V, W). Returns an object array."""
    a = [[int(v) for v in row] for row in np.asarray(a).tolist()]
    b_arr = np.asarray(b, dtype=object)
    lead = b_arr.shape[:-2]
    v_len, w_len = b_arr.shape[-2:]
    assert all(len(row) == v_len for row in a)
    flat = b_arr.reshape((-1, v_len, w_len))
    out = np.empty((flat.shape[0], len(a), w_len), dtype=object)
    for t in range(flat.shape[0]):
        cols = [[int(flat[t, v, w]) for v in range(v_len)] for w in range(w_len)]
        for h, row in enumerate(a):
            for w, col in enumerate(cols):
                out[t, h, w] = sum(x * y for x, y in zip(row, col)) % q
    return out.reshape(lead + (len(a), w_len))


def balanced_digits(x: int, num: int, bp: int) -> list[int]:
    """Digits ``d_k`` in ``[-2^(bp-1), 2^(bp-1))`` with ``x = sum_k d_k 2^(bp k)``, least significant first."""
    x = int(x)
    base, half = 1 << bp, 1 << (bp - 1)
    out = []
    for _ in range(num):
        d = x % base
        if d >= half:
            d -= base
        out.append(d)
        x = (x - d) // base
    if x != 0:
        raise ValueError("value does not fit")
    return out


def balanced_limits(num: int, bp: int) -> tuple[int, int]:
    """Smallest and largest sums of ``num`` digits in ``[-2^(bp-1), 2^(bp-1) - 1]``, computed term by term."""
    lo = sum(-(1 << (bp - 1)) << (bp * k) for k in range(num))
    hi = sum(((1 << (bp - 1)) - 1) << (bp * k) for k in range(num))
    return lo, hi


def centered(x: int, q: int) -> int:
    """Representative of ``x mod q`` in ``(-q/2, q/2]``."""
    r = int(x) % q
    return r - q if 2 * r > q else r


def _linear_product(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """Exact linear product of two non-negative integer coefficient lists by Kronecker substitution.

    Each list is packed into one decimal number (``d`` digits a coefficient, enough for any coefficient of the
    product), the two numbers are multiplied by the standard library's ``decimal`` (libmpdec, exact at
    ``MAX_PREC``; number-theoretic transforms for large operands) and the product's digits are cut back into
    coefficients. No hemx code and no floating point: n = 2^16 with 256-bit coefficients takes seconds.
    """
    import decimal

    a = [int(v) for v in a]
    b = [int(v) for v in b]
    assert min(a + b) >= 0
    big = max(max(a), max(b), 1)
    d = len(str(min(len(a), len(b)) * big * big)) + 1
    ctx = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    pa = decimal.Decimal("".join(str(v).zfill(d) for v in reversed(a)))
    pb = decimal.Decimal("".join(str(v).zfill(d) for v in reversed(b)))
    digits = format(ctx.multiply(pa, pb), "f")
    out = []
    for i in range(len(a) + len(b) - 1):
        hi = len(digits) - i * d
        lo = max(hi - d, 0)
        out.append(int(digits[lo:hi]) if hi > 0 else 0)
    return out


def ring_mul(a: Sequence[int], b: Sequence[int], q: int, ring: str = "negacyclic") -> list[int]:
    """``a * b`` in Z_q[x]/(x^n - 1) (``cyclic``) or Z_q[x]/(x^n + 1) (``negacyclic``), exact, any q.

    Schoolbook over Python ints for n <= 64; Kronecker substitution (``_linear_product``) above, which
    ``tests/polymul/test_polymul.py`` checks against the schoolbook at small sizes."""
    n = len(a)
    assert len(b) == n and ring in ("cyclic", "negacyclic")
    sign = 1 if ring == "cyclic" else -1
    if n <= 64:
        return ring_mul_schoolbook(a, b, q, ring)
    lin = _linear_product(a, b) + [0]
    return [(lin[k] + sign * lin[k + n]) % q for k in range(n)]


def ring_mul_schoolbook(a: Sequence[int], b: Sequence[int], q: int, ring: str = "negacyclic") -> list[int]:
    """The same product by the definition only (O(n^2) Python ints), for checking ``ring_mul``'s fast path."""
    n = len(a)
    sign = 1 if ring == "cyclic" else -1
    out = [0] * n
    for i in range(n):
        for j in range(n):
            k = i + j
            out[k % n] += (int(a[i]) * int(b[j])) * (sign if k >= n else 1)
    return [v % q for v in out]

