"""The other exact methods: Python-int schoolbook, numpy FFT baseline, and the NTT method via an RNS of NTT primes.

All three accept any q >= 2 and both rings; they are the comparison points of ``hemx bench polymul`` and the
references of the tests.

* :func:`schoolbook` - the definition, ``O(n^2)`` Python-int multiply-adds (vectorized over object arrays).
* :func:`fft_product` - a numpy baseline: centered coefficients split into ``K`` limbs of ``l`` bits, one
  float64 real FFT per limb, the ``K^2`` limb products summed in the frequency domain per output limb, inverse
  FFTs, rounding, then ``sum_t z_t 2^(l t) mod q``. Exactness bound: every convolution output is at most
  ``2 n K 2^(2l)`` in absolute value and the limb width is chosen so this is ``<= 2^44``; float64 FFT
  round-off for such sizes stays far below 0.5 (about ``n log n 2^-53`` relative), and the rounding distance
  is checked at run time (:class:`hemx.errors.OverflowBoundError` if it ever exceeds 0.25).
* :func:`ntt_product` - the NTT method for any q: the centered coefficients are reduced mod ``L`` NTT primes
  ``p = 1 mod 2N`` below 2^31 whose product exceeds twice the integer bound ``n (q//2)^2``, multiplied in
  :class:`hemx.ring.RNSRing` (negacyclic NTT, pointwise, inverse NTT), and CRT'd back exactly to mod q. For a
  negacyclic product with power-of-two ``n`` the ring is ``x^n + 1`` itself; otherwise (cyclic, or any other n)
  the linear product is taken in a ring of size ``N >= 2n - 1`` (no wrap-around) and folded.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from hemx.errors import ModulusError, OverflowBoundError, ParameterError
from hemx.kernels import modarith
from hemx.kernels import ntt as ntt_kernels
from hemx.nt import ntt_primes
from hemx.polymul import _io, kernel
from hemx.polymul.base import CRT_MARGIN_BITS, crt_constants, product_bound
from hemx.polymul.plan import RINGS, crt_layout, input_layout
from hemx.ring import RNSRing


# ----------------------------------------------------------------------------------------------------------
# schoolbook
# ----------------------------------------------------------------------------------------------------------


def schoolbook(a, b, q: int, ring: str = "negacyclic") -> np.ndarray:
    """Reference product by the definition, with Python ints: ``c_k = sum_{i+j=k} a_i b_j`` folded by ``x^n = s``.

    Shapes: ``a (..., n)``, ``b (..., n)`` broadcast; returns an object array ``(..., n)`` in ``[0, q)``.
    ``O(n^2)`` big-int operations: meant for tests and small n.
    """
    q = _io.check_q(q)
    if ring not in RINGS:
        raise ParameterError(f"ring must be one of {tuple(RINGS)}, got {ring!r}")
    a = np.asarray(a).astype(object)
    b = np.asarray(b).astype(object)
    n = a.shape[-1]
    batch = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    a = np.broadcast_to(a, batch + (n,))
    b = np.broadcast_to(b, batch + (n,))
    lin = np.zeros(batch + (2 * n - 1,), dtype=object)
    for i in range(n):
        lin[..., i : i + n] += a[..., i : i + 1] * b
    c = lin[..., :n].copy()
    c[..., : n - 1] += RINGS[ring] * lin[..., n:]
    return c % q


# ----------------------------------------------------------------------------------------------------------
# numpy FFT baseline
# ----------------------------------------------------------------------------------------------------------

FFT_BOUND_BITS = 44


def _fft_limbs(n: int, mag_bits: int) -> tuple[int, int]:
    """Limb width l and count K with ``2 n K 2^(2l) <= 2^44``, widest l first."""
    for l in range(24, 0, -1):
        k = max(1, -(-mag_bits // l))
        if 1 + math.ceil(math.log2(max(n, 1))) + math.ceil(math.log2(k)) + 2 * l <= FFT_BOUND_BITS:
            return l, k
    raise OverflowBoundError(f"n = {n} is too large for an exact float64 FFT product")  # pragma: no cover


def _limbs(x: np.ndarray, q: int, l: int, k: int) -> np.ndarray:
    """Signed limbs ``(K, *S)`` float64 of the centered coefficients (magnitude limbs with the sign applied)."""
    half = q // 2
    if x.dtype != object:
        c = np.where(x > half, x - q, x).astype(np.int64)
        mag, sign = np.abs(c), np.sign(c)
        out = np.empty((k,) + x.shape, dtype=np.float64)
        for j in range(k):
            out[j] = sign * ((mag >> (l * j)) & ((1 << l) - 1))
        return out
    neg = np.asarray(x > half, dtype=bool)
    mag = np.where(neg, q - x, x)
    sign = np.where(neg, -1.0, 1.0)
    out = np.empty((k,) + x.shape, dtype=np.float64)
    mask = (1 << l) - 1
    for j in range(k):
        out[j] = sign * np.asarray((mag >> (l * j)) & mask, dtype=np.float64)
    return out


def fft_product(a: np.ndarray, b: np.ndarray, q: int, sign: int) -> np.ndarray:
    """Exact ``a * b mod (x^n - sign, q)`` with float64 FFTs on small limbs (host numpy).

    Args:
        a: ``(*S, n)`` and b ``(*S', n)`` broadcastable, int64 or object, entries in ``[0, q)``.
        sign: -1 negacyclic, +1 cyclic.
    Returns:
        ``(*broadcast, n)`` int64 (q <= 2^63) or object.
    """
    n = a.shape[-1]
    l, k = _fft_limbs(n, (q // 2).bit_length())
    size = 1 << max(1, (2 * n - 1).bit_length())
    fa = np.fft.rfft(_limbs(a, q, l, k), size, axis=-1)
    fb = np.fft.rfft(_limbs(b, q, l, k), size, axis=-1)
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    small = q.bit_length() <= 31
    acc = np.zeros(out_shape, dtype=np.int64 if small else object)
    for t in reversed(range(2 * k - 1)):
        spec = sum(fa[i] * fb[t - i] for i in range(max(0, t - k + 1), min(t, k - 1) + 1))
        lin = np.fft.irfft(spec, size, axis=-1)[..., : 2 * n - 1]
        z = np.rint(lin)
        if lin.size and np.max(np.abs(lin - z)) > 0.25:
            raise OverflowBoundError("float64 FFT round-off too large for an exact product")  # pragma: no cover
        z = z.astype(np.int64)
        zt = z[..., :n].copy()
        zt[..., : n - 1] += sign * z[..., n:]
        if small:
            acc = np.remainder((acc << l) + np.remainder(zt, q), q)
        else:
            acc = (acc << l) + zt.astype(object)
    if small:
        return acc
    res = acc % q
    return res.astype(np.int64) if q.bit_length() <= 63 else res


# ----------------------------------------------------------------------------------------------------------
# NTT method (any q): RNS of NTT primes + hemx.ring.RNSRing + exact CRT
# ----------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=32)
def _ntt_ring(size: int, primes: tuple[int, ...], method: str) -> RNSRing:
    return RNSRing(size, primes, ntt=method)


@functools.lru_cache(maxsize=64)
def ntt_setup(n: int, q: int, sign: int) -> tuple[int, bool, tuple[int, ...]]:
    """(ring size N, linear?, primes) for the NTT method on degree-n products mod q."""
    direct = sign == -1 and n >= 2 and n & (n - 1) == 0
    size = n if direct else 1 << max(1, (2 * n - 2).bit_length())
    need = 2 * product_bound(n, q) + (2 * product_bound(n, q) >> CRT_MARGIN_BITS) + 2
    count = max(1, math.ceil(math.log2(need) / 30.9))
    while True:
        try:
            primes = tuple(ntt_primes(31, count, size))
        except ModulusError as exc:
            raise ModulusError(
                f"the NTT method needs {count} primes = 1 mod {2 * size} below 2^31 for q of {q.bit_length()} bits "
                f"at n = {n}; not enough exist ({exc})"
            ) from exc
        if math.prod(primes) >= need:
            return size, not direct, primes
        count += 1


@functools.lru_cache(maxsize=64)
def _crt_tables(primes: tuple[int, ...], q: int, finish: str):
    c, words = crt_layout(q, primes, finish)
    invs, ws, walpha = crt_constants(primes, q)
    mask = (1 << c) - 1
    tab = {
        "mu": np.asarray(primes, dtype=np.int64),
        "inv": np.asarray(invs, dtype=np.int64),
        "W": np.asarray([[(w >> (c * i)) & mask for i in range(words)] for w in ws], dtype=np.float64),
        "invm": np.asarray([1.0 / p for p in primes]),
        "walpha": np.asarray([(walpha >> (c * i)) & mask for i in range(words)], dtype=np.int64),
        "q": np.asarray(q if q.bit_length() <= 63 else 0, dtype=np.int64),
        "half": np.asarray(q // 2 if q.bit_length() <= 63 else 0, dtype=np.int64),
        "wts": np.asarray([[pow(2, 8 * w, p) for w in range(max(input_layout(q)[1], 1))] for p in primes], np.float64),
    }
    return jax.device_put(tab), c, words


@functools.partial(jax.jit, static_argnames=("kind", "n", "size", "linear", "sign", "c", "finish"))
def _ntt_run(a, a_neg, b, b_neg, tab, plan, *, kind, n, size, linear, sign, c, finish):
    ra = kernel.residues(a, a_neg, kind, tab["mu"], tab["wts"], tab["q"], tab["half"])  # (L, Bb, R, n)
    rb = kernel.residues(b, b_neg, kind, tab["mu"], tab["wts"], tab["q"], tab["half"])  # (L, Bb, 1, n)
    pad = [(0, 0)] * 3 + [(0, size - n)]
    xa = jnp.moveaxis(jnp.pad(ra, pad), 0, -2).astype(jnp.uint32)  # (Bb, R, L, N)
    xb = jnp.moveaxis(jnp.pad(rb, pad), 0, -2).astype(jnp.uint32)
    fa = ntt_kernels.ntt(xa, plan)
    fb = ntt_kernels.ntt(xb, plan)
    prod = ntt_kernels.intt(modarith.mul_mod(fa, fb, plan.table, "barrett"), plan)
    r = jnp.moveaxis(prod, -2, 0).astype(jnp.int64)  # (L, Bb, R, N)
    if linear:
        m = tab["mu"][:, None, None, None]
        low = r[..., :n]
        high = jnp.pad(r[..., n : 2 * n - 1], [(0, 0)] * 3 + [(0, 1)])
        r = jnp.remainder(low + sign * high, m)
    carry = (jnp.zeros(r.shape[1:] + (tab["W"].shape[1],), jnp.float64), jnp.zeros(r.shape[1:], jnp.float64))
    carry = kernel.crt_accumulate(carry, r, tab["inv"], tab["mu"], tab["W"], tab["invm"])
    return kernel.crt_finish(carry, tab["walpha"], tab["q"], c, finish)


def ntt_product(a: np.ndarray, b: np.ndarray, q: int, sign: int, ntt_method: str = "butterfly") -> np.ndarray:
    """Exact ``a * b mod (x^n - sign, q)`` by the NTT method over an RNS of NTT primes (any q).

    Args:
        a: ``(Bb, R, n)``, b: ``(Bb, 1, n)``; int64 (q <= 2^63) or object, entries in ``[0, q)``.
        sign: -1 negacyclic, +1 cyclic.
        ntt_method: :data:`hemx.ring.NTT_METHODS` entry used by the RNS ring.
    Returns:
        ``(Bb, R, n)`` int64 or object.
    """
    n = a.shape[-1]
    size, linear, primes = ntt_setup(n, q, sign)
    finish = "device" if q.bit_length() <= 62 else "host"
    tab, c, words = _crt_tables(primes, q, finish)
    ring = _ntt_ring(size, primes, ntt_method)
    kind, nbytes = input_layout(q)
    if kind == "int64":
        a_in, b_in = a, b
        a_neg = b_neg = np.zeros((), dtype=bool)
    else:
        a_in, a_neg = _io.to_sign_magnitude_bytes(a, q, nbytes)
        b_in, b_neg = _io.to_sign_magnitude_bytes(b, q, nbytes)
    out = _ntt_run(
        a_in, a_neg, b_in, b_neg, tab, ring.plan, kind=kind, n=n, size=size, linear=linear, sign=sign, c=c,
        finish=finish,
    )
    out = np.asarray(out)
    if finish == "host":
        res = _io.words_to_ints(out, c, q)
        return res if q.bit_length() > 63 else res.astype(np.int64)
    return out
