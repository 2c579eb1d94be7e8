"""hemx.polymul: exact products in Z_q[x]/(x^n -+ 1) for any q, against Python-int schoolbook products.

Compilations dominate the run time (about a second each on CPU), so the shapes come from small fixed sets and
the moduli from a few size classes (plans depend on n and the bit length of q only).
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hemx  # noqa: F401  (enables 64-bit JAX types)
from hemx.errors import HemxError, ModulusError, OverflowBoundError, ParameterError, ShapeError
from hemx.nt import is_prime
from hemx.polymul import (
    PRESETS,
    choose_base,
    cyclic_mul,
    make_plan,
    negacyclic_mul,
    polymul,
    preset,
    schoolbook,
)
from hemx.polymul import base as base_mod
from hemx.polymul import plan as plan_mod
from hemx.polymul.reference import ntt_setup

from tests.helpers import reference as ref

RINGS = ("negacyclic", "cyclic")
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # the profile's count (conftest)


# ----------------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------------


def make_q(bits: int, kind: str, seed: int) -> int:
    """A modulus of ``bits`` bits: ``prime``, ``composite`` (odd or even), or ``pow2`` (= 2^(bits-1))."""
    rnd = random.Random(seed)
    if bits <= 2:  # 2 or 3: no 2-bit composite exists
        return 3 if kind == "prime" else 2
    if kind == "pow2":
        return 1 << (bits - 1)
    lo, hi = 1 << (bits - 1), (1 << bits) - 1
    if kind == "prime":
        while True:
            c = rnd.randrange(lo, hi + 1) | 1
            if is_prime(c):
                return c
    while True:
        c = rnd.randrange(max(lo, 4), hi + 1)
        if not is_prime(c):
            return c


def rand_coeffs(q: int, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Uniform coefficients in [0, q): int64 for q <= 2^63, object (Python ints) above."""
    rnd = random.Random(seed)
    flat = [rnd.randrange(q) for _ in range(math.prod(shape))]
    if q.bit_length() <= 63:
        return np.asarray(flat, dtype=np.int64).reshape(shape)
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(shape)


def edge_coeffs(q: int, shape: tuple[int, ...]) -> np.ndarray:
    """Worst-case magnitudes for the bounds: the centered extremes q//2 and q//2 + 1 (= -(q - q//2 - 1))."""
    vals = [q // 2, (q // 2 + 1) % q, q - 1, 0]
    flat = [vals[i % len(vals)] for i in range(math.prod(shape))]
    arr = np.empty(len(flat), dtype=object)
    arr[:] = flat
    arr = arr.reshape(shape)
    return arr.astype(np.int64) if q.bit_length() <= 63 else arr


def assert_same(got, ref):
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.shape == ref.shape
    assert np.array_equal(got.astype(object), ref.astype(object))


def oracle(a, b, q: int, ring: str = "negacyclic") -> np.ndarray:
    """The ring product from ``tests/helpers/reference.py`` (Python integers, no hemx code), broadcast over the
    leading axes like polymul; object array."""
    a, b = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    lead = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    a, b = np.broadcast_to(a, lead + a.shape[-1:]), np.broadcast_to(b, lead + b.shape[-1:])
    out = np.empty(lead + a.shape[-1:], dtype=object)
    for idx in np.ndindex(*lead):
        out[idx] = ref.ring_mul(list(a[idx]), list(b[idx]), q, ring)
    return out


def coefficient(a, b, q: int, k: int, sign: int) -> int:
    """One coefficient of the ring product straight from the definition (Python ints), for spot checks."""
    n = len(a)
    s = 0
    for i in range(n):
        j = k - i
        if j >= 0:
            s += int(a[i]) * int(b[j])
        else:
            s += sign * int(a[i]) * int(b[j + n])
    return s % q


q_kinds = st.sampled_from(["prime", "composite", "pow2"])
q_bits = st.sampled_from([2, 5, 8, 13, 23, 31, 40, 62, 64, 130, 256, 768])


# ----------------------------------------------------------------------------------------------------------
# the references themselves
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ring", RINGS)
@pytest.mark.parametrize("n", [1, 2, 7, 65, 96, 257])
def test_test_oracle_fast_path_is_the_definition(n, ring):
    """tests/helpers/reference.ring_mul (Kronecker above n = 64) equals the O(n^2) definition, and hemx's own
    schoolbook (library code) equals both."""
    for bits in (5, 64, 256):
        q = make_q(bits, "composite", n + bits)
        a, b = rand_coeffs(q, (n,), n), rand_coeffs(q, (n,), n + 1)
        want = ref.ring_mul_schoolbook(a, b, q, ring)
        assert ref.ring_mul(a, b, q, ring) == want
        assert [int(v) for v in schoolbook(a, b, q, ring)] == want


def test_schoolbook_paper_example():
    # paper Example 1: n = 3, x^3 + 1
    a, b, q = [1, 2, 3], [4, 5, 6], 1000
    want = [(1 * 4 - 2 * 6 - 3 * 5) % q, (1 * 5 + 2 * 4 - 3 * 6) % q, (1 * 6 + 2 * 5 + 3 * 4) % q]
    assert list(schoolbook(a, b, q)) == want
    assert list(schoolbook(a, b, q, "cyclic")) == [(4 + 12 + 15) % q, (5 + 8 + 18) % q, (6 + 10 + 12) % q]


# ----------------------------------------------------------------------------------------------------------
# properties: matmul method == schoolbook
# ----------------------------------------------------------------------------------------------------------


@SETTINGS
@given(
    bits=q_bits,
    kind=q_kinds,
    n=st.sampled_from([1, 3, 16, 64]),
    ring=st.sampled_from(RINGS),
    shared=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_matches_schoolbook(bits, kind, n, ring, shared, seed):
    q = make_q(bits, kind, seed)
    a = rand_coeffs(q, (2, n), seed + 1)
    b = rand_coeffs(q, (n,) if shared else (2, n), seed + 2)
    got = polymul(a, b, q, ring=ring)
    assert got.dtype == (np.int64 if q.bit_length() <= 63 else object)
    assert_same(got, oracle(a, b, q, ring))


@pytest.mark.parametrize("ring", RINGS)
@pytest.mark.parametrize("bits", [12, 31, 63, 256])
def test_extreme_coefficients(bits, ring):
    # all coefficients at the centered extremes: the largest integer products the bounds must cover
    q = make_q(bits, "prime", bits)
    n = 64
    a, b = edge_coeffs(q, (n,)), edge_coeffs(q, (n,))[::-1].copy()
    assert_same(polymul(a, b, q, ring=ring), oracle(a, b, q, ring))


@pytest.mark.parametrize(
    "n,q,ring",
    [
        (256, 3329, "negacyclic"),  # Kyber: digits base
        (256, 8380417, "cyclic"),  # Dilithium's q: RNS base
        (1024, (1 << 54) - 1, "negacyclic"),  # 54-bit composite
        (4096, 1 << 32, "cyclic"),  # power of two
    ],
)
def test_larger_degrees_match_schoolbook(n, q, ring):
    a = rand_coeffs(q, (2, n), n)
    b = rand_coeffs(q, (n,), n + 1)
    assert_same(polymul(a, b, q, ring=ring), oracle(a, b, q, ring))


def test_degree_4096_big_modulus():
    # 256-bit prime at n = 2^12: full comparison with the exact FFT baseline, spot checks by the definition
    q = make_q(256, "prime", 7)
    n = 4096
    a, b = rand_coeffs(q, (n,), 1), rand_coeffs(q, (n,), 2)
    got = negacyclic_mul(a, b, q)
    assert_same(got, oracle(a, b, q))  # every coefficient, Python integers
    for k in (0, 1, n // 2, n - 1):
        assert got[k] == coefficient(a, b, q, k, -1)


@pytest.mark.parametrize("levels", [1, 2, 3])
@pytest.mark.parametrize("bits,ring", [(23, "negacyclic"), (130, "cyclic")])
def test_karatsuba_matches_schoolbook(levels, bits, ring):
    q = make_q(bits, "composite", levels)
    n = 64
    a = rand_coeffs(q, (3, n), levels)
    b = rand_coeffs(q, (n,), levels + 10)
    assert_same(polymul(a, b, q, ring=ring, karatsuba=levels), oracle(a, b, q, ring))


@pytest.mark.parametrize(
    "options",
    [
        {"block": 4, "chunk_blocks": 3},  # several chunks with zero padding
        {"block": 16, "karatsuba": 1, "chunk_blocks": 1},  # plain Toeplitz leaves, one block diagonal per chunk
        {"engine": "float32"},
        {"base": "rns"},
        {"base": "digits"},
    ],
)
def test_options_agree(options):
    q, n = 12289 * 4, 64  # composite, digits base by default
    a, b = rand_coeffs(q, (2, n), 3), rand_coeffs(q, (2, n), 4)
    assert_same(negacyclic_mul(a, b, q, **options), oracle(a, b, q))


def test_batch_broadcasting():
    q, n = 8380417, 16
    a = rand_coeffs(q, (2, 1, n), 5)
    b = rand_coeffs(q, (1, 3, n), 6)
    got = cyclic_mul(a, b, q)
    assert got.shape == (2, 3, n)
    want = np.stack([np.stack([ref.ring_mul(a[i, 0], b[0, j], q, "cyclic") for j in range(3)]) for i in range(2)])
    assert_same(got, want)


def test_input_forms():
    q, n = 97, 8
    a = rand_coeffs(q, (n,), 8)
    b = rand_coeffs(q, (n,), 9)
    ref = negacyclic_mul(a, b, q)
    assert_same(negacyclic_mul(a.tolist(), b.astype(np.uint16), q), ref)  # lists and other int dtypes
    big = negacyclic_mul(a.astype(object), b.astype(object), q)  # Python ints, small q: int64 result
    assert big.dtype == np.int64
    assert_same(big, ref)


# ----------------------------------------------------------------------------------------------------------
# the other methods (comparison points of the benchmark)
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n,q,ring",
    [
        pytest.param(16, 3329, "cyclic", id="kyber-q-cyclic"),  # not NTT-friendly: linear product folded
        pytest.param(5, 8380417, "negacyclic", id="n5"),  # n not a power of two
        pytest.param(64, make_q(256, "prime", 3), "negacyclic", id="256bit"),
        pytest.param(16, (1 << 768) - (1 << 384) + 1, "cyclic", id="768bit"),  # 50 NTT primes: 15-bit CRT words
    ],
)
@pytest.mark.parametrize("method", ["ntt", "numpy"])
def test_reference_methods(method, n, q, ring):
    a = rand_coeffs(q, (2, n), 11)
    b = rand_coeffs(q, (n,), 12)
    assert_same(polymul(a, b, q, ring=ring, method=method), oracle(a, b, q, ring))


def test_ntt_primes_cover_the_bound():
    for n, q, sign in [(256, 3329, -1), (1 << 14, PRESETS["fhe"].q, -1), (1 << 16, PRESETS["zkp"].q, 1)]:
        size, linear, primes = ntt_setup(n, q, sign)
        assert math.prod(primes) > 2 * base_mod.product_bound(n, q)
        assert all(p % (2 * size) == 1 and p < 2**31 for p in primes)
        assert linear == (sign == 1)


# ----------------------------------------------------------------------------------------------------------
# plans: exactness bounds hold by construction
# ----------------------------------------------------------------------------------------------------------


@settings(deadline=None, max_examples=200)
@given(
    log_n=st.integers(0, 21),
    bits=st.integers(2, 800),
    rows=st.sampled_from([1, 3, 64, 4096]),
    karatsuba=st.integers(0, 3),
    engine=st.sampled_from(["int8", "float32"]),
)
def test_plan_bounds(log_n, bits, rows, karatsuba, engine):
    n, q = 1 << log_n, (1 << bits) - 1
    if n % (1 << karatsuba):
        return
    plan = make_plan(n, q, rows=rows, karatsuba=karatsuba, engine=engine)
    base = plan.base
    if base.mode == "rns":
        assert base.modulus_product > 2 * base.bound
        assert all(math.gcd(x, y) == 1 for i, x in enumerate(base.moduli) for y in base.moduli[i + 1 :])
        assert all(m <= base_mod.MAX_TWO_DIGIT_MODULUS for m in base.moduli)
    else:
        assert q < 2**31
    for fam, sched in zip(base.families, plan.static.families):
        leaf = sched.leaf
        # every chunk's int8 x int8 partial sums stay inside the accumulator
        assert fam.digits * leaf.chunk * leaf.block * fam.max_digit**2 <= plan_mod.ENGINES[engine]
        lo, hi = base_mod.balanced_range(fam.digits)
        assert all(lo <= base_mod.centered_range(m)[0] and base_mod.centered_range(m)[1] <= hi for m in fam.moduli)
        assert leaf.block * leaf.nblocks == n >> karatsuba
        assert leaf.chunk * leaf.nchunks >= leaf.ndiag


def test_base_choice_documented_cases():
    assert choose_base(256, 3329).mode == "digits"
    dil = choose_base(256, 8380417)
    assert dil.mode == "rns" and dil.channels == 7
    assert dict(dil.alternatives)["digits"] == 9
    fhe = choose_base(1 << 14, PRESETS["fhe"].q)
    assert fhe.mode == "rns" and fhe.channels == 16
    zkp = choose_base(1 << 16, PRESETS["zkp"].q)
    assert zkp.mode == "rns" and [f.digits for f in zkp.families] == [1, 2]


def test_presets():
    assert set(PRESETS) >= {"kyber", "dilithium", "fhe", "zkp"}
    assert preset("Kyber").q == 3329 and preset("kyber").n == 256
    assert preset("dilithium").q == 8380417
    assert preset("fhe").n == 1 << 14 and preset("fhe").q_bits == 54 and is_prime(preset("fhe").q)
    assert preset("zkp").n >= 1 << 16 and preset("zkp").q_bits == 256
    with pytest.raises(ParameterError):
        preset("rsa")


# ----------------------------------------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------------------------------------


def test_mismatched_lengths():
    with pytest.raises(ShapeError, match="same number of coefficients"):
        negacyclic_mul(np.zeros(8, np.int64), np.zeros(4, np.int64), 17)


def test_batch_shapes_must_broadcast():
    with pytest.raises(ShapeError, match="broadcast"):
        negacyclic_mul(np.zeros((2, 8), np.int64), np.zeros((3, 8), np.int64), 17)


@pytest.mark.parametrize("q", [1, 0, -5, 2.0, "17", True])
def test_bad_modulus(q):
    with pytest.raises(ParameterError):
        negacyclic_mul([1, 0], [1, 0], q)


@pytest.mark.parametrize("bad", [[0, 17], [-1, 0], [0, 10**30]])
def test_coefficients_out_of_range(bad):
    with pytest.raises(ParameterError, match=r"outside \[0, q\)"):
        cyclic_mul(bad, [1, 2], 17)
    with pytest.raises(ParameterError):
        cyclic_mul([1, 2], bad, 17)


def test_coefficients_out_of_range_big_q():
    q = (1 << 100) + 277
    with pytest.raises(ParameterError):
        negacyclic_mul(np.array([q, 0], dtype=object), np.array([1, 0], dtype=object), q)


@pytest.mark.parametrize("bad", [np.zeros(4, np.float64), np.array([1.5, 2]), np.array([True, False]), 5])
def test_non_integer_input(bad):
    with pytest.raises(ShapeError):
        negacyclic_mul(bad, np.zeros(np.size(bad), np.int64), 17)


def test_unsupported_n():
    with pytest.raises(ParameterError, match="n >= 1"):
        negacyclic_mul(np.zeros(0, np.int64), np.zeros(0, np.int64), 17)
    with pytest.raises(ParameterError, match="multiple of 4"):
        negacyclic_mul(np.zeros(6, np.int64), np.zeros(6, np.int64), 17, karatsuba=2)
    with pytest.raises(ParameterError, match="ring degree"):
        make_plan(plan_mod.MAX_N * 2, 17)
    with pytest.raises(ParameterError, match="block"):
        negacyclic_mul(np.zeros(12, np.int64), np.zeros(12, np.int64), 17, block=5)


def test_bad_options():
    a = np.zeros(4, np.int64)
    with pytest.raises(ParameterError):
        polymul(a, a, 17, ring="trinomial")
    with pytest.raises(ParameterError):
        polymul(a, a, 17, method="fft")
    with pytest.raises(ParameterError):
        polymul(a, a, 17, engine="bf16")
    with pytest.raises(ParameterError):
        polymul(a, a, 17, karatsuba=-1)
    with pytest.raises(ModulusError):
        polymul(a, a, (1 << 40) + 15, base="digits")
    with pytest.raises(OverflowBoundError):
        make_plan(1 << 17, (1 << 20) - 3, block=1 << 16, chunk_blocks=2)


def test_errors_are_hemx_errors():
    # one except clause catches them all
    for call, cls in ((lambda: negacyclic_mul([1], [1, 2], 5), ShapeError),
                      (lambda: negacyclic_mul([7], [1], 5), ParameterError)):
        with pytest.raises(cls) as info:
            call()
        assert isinstance(info.value, HemxError)


# ----------------------------------------------------------------------------------------------------------
# ZKP size (slow)
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_zkp_degree_65536_256_bit():
    p = preset("zkp")
    n, q = p.n, p.q
    a, b = rand_coeffs(q, (n,), 21), rand_coeffs(q, (n,), 22)
    for ring, sign in (("cyclic", 1), ("negacyclic", -1)):
        got = polymul(a, b, q, ring=ring)
        assert got.shape == (n,) and got.dtype == object
        assert_same(got, oracle(a, b, q, ring))  # every coefficient, Python integers (tests/helpers/reference.py)
        for k in (0, 1, 12345, n - 1):
            assert got[k] == coefficient(a, b, q, k, sign)
