"""hemx.nt: primes, roots of unity, inverses, CRT, bit reversal (host-side exact integers)."""

from __future__ import annotations

import random
from math import gcd, prod

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import reference as ref
from hemx import nt
from hemx.errors import HemxError, ModulusError, ParameterError

# ----------------------------------------------------------------------------------------------------------
# primality
# ----------------------------------------------------------------------------------------------------------


def test_is_prime_matches_trial_division_small_range():
    for n in range(-5, 20000):
        assert nt.is_prime(n) == ref.is_prime(n), n


@pytest.mark.parametrize("start", [2**20 - 3000, 2**31 - 4000, 2**33 + 12345])
def test_is_prime_matches_trial_division_near_word_sizes(start):
    for n in range(start, start + 3000):
        assert nt.is_prime(n) == ref.is_prime(n), n


@pytest.mark.parametrize(
    "n",
    [
        561, 1105, 1729, 2465, 2821, 6601, 8911,  # Carmichael numbers
        2047, 1373653, 25326001, 3215031751,  # strong pseudoprimes to the first few bases
        2152302898747, 3474749660383, 341550071728321, 3825123056546413051,
        (2**31 - 1) * (2**31 - 1), 65537 * 65537, 2**32 + 1, 2**64 + 1,
    ],
)
def test_is_prime_rejects_pseudoprimes_and_composites(n):
    assert not nt.is_prime(n)


@pytest.mark.parametrize("p", [2, 3, 5, 97, 65537, 2**31 - 1, 2**61 - 1, 2**89 - 1, 2**127 - 1])
def test_is_prime_accepts_known_primes(p):
    assert nt.is_prime(p)


# ----------------------------------------------------------------------------------------------------------
# NTT-friendly primes
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bits,count,n",
    [(20, 4, 1024), (24, 6, 2**12), (28, 3, 2**16), (30, 5, 2**10), (31, 4, 2**13), (31, 2, 2), (35, 3, 2**15)],
)
def test_ntt_primes_are_the_largest_suitable_primes(bits, count, n):
    primes = nt.ntt_primes(bits, count, n)
    assert len(primes) == count
    assert all(isinstance(q, int) for q in primes)
    assert len(set(primes)) == count
    assert primes == sorted(primes, reverse=True)
    for q in primes:
        assert q < 2**bits
        assert q % (2 * n) == 1
        assert ref.is_prime(q)
    # nothing skipped: every prime = 1 mod 2n in [smallest returned, 2^bits) is in the list
    expected = [q for q in range(primes[-1], 2**bits, 2 * n) if ref.is_prime(q)]
    assert sorted(expected, reverse=True) == primes


def test_ntt_primes_exclude_skips_given_primes():
    n = 2**12
    base = nt.ntt_primes(30, 4, n)
    skipped = nt.ntt_primes(30, 3, n, exclude=[base[0], base[2]])
    assert base[0] not in skipped and base[2] not in skipped
    assert skipped[:2] == [base[1], base[3]]
    assert ref.is_prime(skipped[2]) and skipped[2] % (2 * n) == 1 and skipped[2] < base[3]


def test_ntt_primes_count_zero_is_empty():
    assert nt.ntt_primes(30, 0, 1024) == []


def test_ntt_primes_not_enough_raises():
    n = 64
    available = [q for q in range(1, 2**12, 2 * n) if ref.is_prime(q)]
    assert len(available) >= 3
    assert nt.ntt_primes(12, len(available), n) == sorted(available, reverse=True)
    with pytest.raises(ModulusError):
        nt.ntt_primes(12, len(available) + 1, n)
    with pytest.raises(ModulusError):
        nt.ntt_primes(20, 1000, 2**16)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(bits=30, count=2, n=1000),
        dict(bits=30, count=2, n=0),
        dict(bits=30, count=2, n=-8),
        dict(bits=1, count=1, n=2),
        dict(bits=63, count=1, n=2),
        dict(bits=30, count=-1, n=16),
    ],
)
def test_ntt_primes_bad_parameters(kwargs):
    with pytest.raises(ParameterError):
        nt.ntt_primes(**kwargs)


@pytest.mark.parametrize("bound,n", [(2**20, 1024), (2**31, 2**16), (2**28 + 5, 8)])
def test_next_ntt_prime_below(bound, n):
    q = nt.next_ntt_prime_below(bound, n)
    assert q < bound and q % (2 * n) == 1 and ref.is_prime(q)
    assert not any(ref.is_prime(c) for c in range(q + 2 * n, bound, 2 * n))


def test_next_ntt_prime_below_none_raises():
    with pytest.raises(ModulusError):
        nt.next_ntt_prime_below(100, 64)  # 2n+1 = 129 > 100


# ----------------------------------------------------------------------------------------------------------
# roots of unity
# ----------------------------------------------------------------------------------------------------------

_ROOT_CASES = [(n, q) for n in (2, 8, 64, 1024, 2**16) for q in nt.ntt_primes(31, 2, n) + nt.ntt_primes(22, 1, n)]


@pytest.mark.parametrize("n,q", _ROOT_CASES)
def test_primitive_2nth_root_has_exact_order_and_convention(n, q):
    w = nt.primitive_2nth_root(n, q)
    assert 0 < w < q
    assert ref.multiplicative_order(w, q) == 2 * n
    assert pow(w, n, q) == q - 1
    # the documented convention: derived from the smallest generator
    assert w == ref.psi(n, q)


@pytest.mark.parametrize("q", [3, 5, 7, 17, 97, 257, 65537, 12289, 786433, 2**31 - 1])
def test_primitive_root_is_the_smallest_generator(q):
    g = nt.primitive_root(q)
    assert g == ref.smallest_generator(q)
    assert ref.multiplicative_order(g, q) == q - 1


@pytest.mark.parametrize("q,order", [(97, 96), (97, 32), (97, 3), (65537, 65536), (12289, 2048), (786433, 3)])
def test_root_of_unity_exact_order(q, order):
    w = nt.root_of_unity(order, q)
    assert ref.multiplicative_order(w, q) == order
    assert nt.is_primitive_root_of_unity(w, order, q)


def test_is_primitive_root_of_unity_against_reference():
    q = 97
    for w in range(1, q):
        for order in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 96):
            assert nt.is_primitive_root_of_unity(w, order, q) == (ref.multiplicative_order(w, q) == order)


def test_root_errors():
    with pytest.raises(ModulusError):
        nt.root_of_unity(64, 97)  # 96 is not a multiple of 64
    with pytest.raises(ModulusError):
        nt.primitive_2nth_root(64, 97)
    with pytest.raises(ModulusError):
        nt.primitive_root(91)  # 7 * 13


# ----------------------------------------------------------------------------------------------------------
# inverses, centered residues, CRT
# ----------------------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**80), 2**80), st.integers(2, 2**64))
def test_mod_inverse(a, m):
    if gcd(a, m) != 1:
        with pytest.raises(ParameterError):
            nt.mod_inverse(a, m)
        return
    inv = nt.mod_inverse(a, m)
    assert 0 <= inv < m
    assert (a * inv) % m == 1 % m


def test_mod_inverse_errors():
    with pytest.raises(ParameterError):
        nt.mod_inverse(6, 9)
    with pytest.raises(ParameterError):
        nt.mod_inverse(0, 7)
    with pytest.raises(ParameterError):
        nt.mod_inverse(3, 0)
    with pytest.raises(ParameterError):
        nt.mod_inverse(3, -7)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**70), 2**70), st.integers(1, 2**40))
def test_centered(x, q):
    c = nt.centered(x, q)
    assert (c - x) % q == 0
    assert -q < 2 * c <= q  # c in (-q/2, q/2]
    assert c == ref.centered(x, q)


def test_centered_edges():
    assert nt.centered(5, 10) == 5  # q/2 stays positive for even q
    assert nt.centered(6, 10) == -4
    assert nt.centered(4, 9) == 4
    assert nt.centered(5, 9) == -4
    assert nt.centered(0, 7) == 0
    assert nt.centered(-1, 7) == -1


def _coprime_moduli(draw_ints):
    out = []
    for m in draw_ints:
        if m > 1 and all(gcd(m, o) == 1 for o in out):
            out.append(m)
    return out


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(2, 2**31), min_size=1, max_size=6), st.integers(0, 2**32 - 1))
def test_crt_reconstruct(candidates, seed):
    moduli = _coprime_moduli(candidates)
    if not moduli:
        moduli = [2**31 - 1]
    rng = random.Random(seed)
    residues = [rng.randrange(-(2**40), 2**40) for _ in moduli]
    x = nt.crt_reconstruct(residues, moduli)
    assert 0 <= x < prod(moduli)
    assert all((x - r) % m == 0 for r, m in zip(residues, moduli))
    assert x == ref.crt(residues, moduli)


def test_crt_reconstruct_edges():
    qs = nt.ntt_primes(31, 3, 1024)
    big = prod(qs)
    assert nt.crt_reconstruct([0, 0, 0], qs) == 0
    assert nt.crt_reconstruct([q - 1 for q in qs], qs) == big - 1
    assert nt.crt_reconstruct([1, 1, 1], qs) == 1
    assert nt.crt_reconstruct([5], [7]) == 5


def test_crt_reconstruct_errors():
    with pytest.raises(ParameterError):
        nt.crt_reconstruct([1, 2], [6, 9])
    with pytest.raises(ParameterError):
        nt.crt_reconstruct([1, 2, 3], [5, 7])
    with pytest.raises(ParameterError):
        nt.crt_reconstruct_array(np.zeros((2, 4), np.uint32), [5, 7, 11])
    with pytest.raises(ParameterError):
        nt.crt_reconstruct_array(np.zeros((2, 4), np.uint32), [10, 4])


@pytest.mark.parametrize("shape", [(3, 8), (2, 5, 3, 8)])
def test_crt_reconstruct_array(shape):
    qs = nt.ntt_primes(31, 3, 16)
    rng = np.random.default_rng(7)
    res = np.stack([rng.integers(0, q, size=shape[:-2] + (shape[-1],)) for q in qs], axis=-2).astype(np.uint32)
    res[..., 0] = 0
    res[..., 1] = np.asarray(qs, np.uint32).reshape(-1)
    res[..., 1] -= 1
    out = nt.crt_reconstruct_array(res, qs)
    assert out.shape == shape[:-2] + shape[-1:]
    flat_res = res.reshape(-1, 3, shape[-1])
    flat_out = out.reshape(-1, shape[-1])
    for t in range(flat_res.shape[0]):
        for k in range(shape[-1]):
            assert int(flat_out[t, k]) == ref.crt([int(r) for r in flat_res[t, :, k]], qs)
    assert all(int(v) == 0 for v in flat_out[:, 0])
    assert all(int(v) == prod(qs) - 1 for v in flat_out[:, 1])


# ----------------------------------------------------------------------------------------------------------
# bits
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", range(0, 13))
def test_bit_reverse_matches_reference(bits):
    for i in range(1 << bits):
        assert nt.bit_reverse(i, bits) == ref.bit_reverse(i, bits)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 64, 1024, 2**16])
def test_bit_reverse_permutation_is_an_involution(n):
    p = nt.bit_reverse_permutation(n)
    assert p.shape == (n,)
    assert np.issubdtype(p.dtype, np.integer)
    assert np.array_equal(np.sort(p), np.arange(n))
    assert np.array_equal(p[p], np.arange(n))
    bits = ref.log2(n)
    step = max(1, n // 512)
    for i in range(0, n, step):
        assert int(p[i]) == ref.bit_reverse(i, bits)


def test_bit_errors():
    with pytest.raises(ParameterError):
        nt.bit_reverse(8, 3)
    with pytest.raises(ParameterError):
        nt.bit_reverse(-1, 3)
    with pytest.raises(ParameterError):
        nt.bit_reverse_permutation(12)
    with pytest.raises(ParameterError):
        nt.bit_reverse_permutation(0)


@pytest.mark.parametrize("k", range(0, 40))
def test_log2_exact_powers(k):
    assert nt.log2_exact(1 << k) == k
    assert nt.is_power_of_two(1 << k)


@pytest.mark.parametrize("n", [0, -1, -4, 3, 6, 12, 2**20 + 1, 2**31 - 1])
def test_log2_exact_rejects_non_powers(n):
    assert not nt.is_power_of_two(n)
    with pytest.raises(ParameterError):
        nt.log2_exact(n)


def test_errors_are_hemx_errors():
    # every user error is a HemxError and the matching builtin
    assert issubclass(ModulusError, ParameterError)
    assert issubclass(ParameterError, ValueError) and issubclass(ParameterError, HemxError)
