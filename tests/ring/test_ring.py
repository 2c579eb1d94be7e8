"""hemx.ring.RNSRing: negacyclic products against schoolbook multiplication, element-wise ops, conversions."""

from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.helpers import reference as ref
from hemx import nt
from hemx.errors import ModulusError, ParameterError, ShapeError
from hemx.ring import NTT_METHODS, RNSRing

METHODS = list(NTT_METHODS)
REDUCTIONS = ["shoup", "montgomery", "barrett"]


@lru_cache(maxsize=None)
def ring(n, method="butterfly", reduction="shoup", bits=(31, 27), **kw):
    qs = [nt.ntt_primes(b, 1, n)[0] for b in bits]
    return RNSRing(n, qs, method, reduction=reduction, **kw)


def residues(r: RNSRing, lead, seed, edges=True):
    rng = np.random.default_rng(seed)
    x = np.stack([rng.integers(0, q, size=lead + (r.n,)) for q in r.moduli], axis=-2).astype(np.uint32)
    if edges:
        qcol = np.asarray(r.moduli, np.uint32).reshape(-1, 1)
        x[..., 0] = (qcol - 1).reshape(-1)
        x[..., -1] = (qcol - 1).reshape(-1)
        if r.n > 4:
            x[..., 1] = 0
            x[..., 2] = (qcol // 2 + 1).reshape(-1)
    return x


def expected_product(a, b, moduli):
    """Schoolbook negacyclic products limb by limb over any leading axes (exact)."""
    a, b = np.asarray(a), np.asarray(b)
    n = a.shape[-1]
    fa = a.reshape(-1, len(moduli), n)
    fb = b.reshape(-1, len(moduli), n)
    out = np.empty(fa.shape, dtype=np.int64)
    for t in range(fa.shape[0]):
        for l, q in enumerate(moduli):
            if n <= 64:
                out[t, l] = ref.negacyclic_mul(fa[t, l].tolist(), fb[t, l].tolist(), q)
            else:
                out[t, l] = ref.negacyclic_mul_split(fa[t, l], fb[t, l], q)
    return out.reshape(a.shape)


def assert_product(r: RNSRing, a, b):
    got = r.poly_mul(a, b)
    assert got.dtype == jnp.uint32 and got.shape == np.shape(a)
    np.testing.assert_array_equal(np.asarray(got).astype(np.int64), expected_product(a, b, r.moduli))


# ----------------------------------------------------------------------------------------------------------
# the references agree with each other (the fast one is what the large-N tests use)
# ----------------------------------------------------------------------------------------------------------


def test_reference_products_agree():
    rng = np.random.default_rng(0)
    for n, q in [(8, 17), (64, 2**31 - 1), (128, 2013265921)]:
        a = rng.integers(0, q, size=n)
        b = rng.integers(0, q, size=n)
        a[0] = b[-1] = q - 1
        slow = ref.negacyclic_mul(a.tolist(), b.tolist(), q)
        assert ref.negacyclic_mul_split(a, b, q) == slow
        assert [ref.negacyclic_coeff(a.tolist(), b.tolist(), q, k) for k in range(n)] == slow
        assert [ref.negacyclic_coeff_np(a, b, q, k) for k in range(n)] == slow
    # X^(N-1) * X = X^N = -1
    n, q = 16, 97
    x1 = [0] * n
    x1[1] = 1
    xl = [0] * n
    xl[n - 1] = 1
    assert ref.negacyclic_mul(x1, xl, q) == [q - 1] + [0] * (n - 1)


# ----------------------------------------------------------------------------------------------------------
# poly_mul
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("method", METHODS)
def test_poly_mul_every_method_small_n(method, reduction):
    r = ring(16, method, reduction)
    a, b = residues(r, (), 1), residues(r, (), 2)
    assert_product(r, a, b)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("logn", [6, 9])
def test_poly_mul_every_method_medium_n(method, logn):
    n = 1 << logn
    r = ring(n, method, "shoup", bits=(30, 24, 28))
    a, b = residues(r, (), logn), residues(r, (), logn + 100)
    assert_product(r, a, b)


@pytest.mark.parametrize(
    "logn,method,reduction",
    [(10, "mat3", "montgomery"), (11, "four_step", "shoup"), (12, "butterfly", "shoup"), (12, "mat3", "barrett"),
     (12, "multilevel", "montgomery")],
)
def test_poly_mul_large_n(logn, method, reduction):
    n = 1 << logn
    r = ring(n, method, reduction)
    a, b = residues(r, (), logn), residues(r, (), -logn % 97)
    assert_product(r, a, b)


@pytest.mark.parametrize("n,method", [(32, "butterfly"), (128, "mat3")])
def test_poly_mul_batched(n, method):
    r = ring(n, method, "montgomery")
    a = residues(r, (2, 3), 10)
    b = residues(r, (2, 3), 11)
    assert_product(r, a, b)


def test_poly_mul_special_polynomials():
    n = 64
    r = ring(n, "mat3")
    nl = r.num_limbs
    qcol = np.asarray(r.moduli, np.uint32).reshape(-1, 1)
    one = np.zeros((nl, n), np.uint32)
    one[:, 0] = 1
    x = np.zeros((nl, n), np.uint32)
    x[:, 1] = 1
    xl = np.zeros((nl, n), np.uint32)
    xl[:, n - 1] = 1
    a = residues(r, (), 5)
    np.testing.assert_array_equal(np.asarray(r.poly_mul(a, one)), a)
    minus_one = np.zeros((nl, n), np.uint32)
    minus_one[:, 0] = qcol.reshape(-1) - 1
    np.testing.assert_array_equal(np.asarray(r.poly_mul(x, xl)), minus_one)  # X * X^(N-1) = -1
    # X * a is the negacyclic shift
    shifted = np.roll(a, 1, axis=-1).astype(np.int64)
    shifted[:, 0] = (-shifted[:, 0]) % qcol.reshape(-1)
    np.testing.assert_array_equal(np.asarray(r.poly_mul(x, a)).astype(np.int64), shifted)
    zero = np.zeros((nl, n), np.uint32)
    np.testing.assert_array_equal(np.asarray(r.poly_mul(a, zero)), zero)
    top = np.repeat(qcol - 1, n, axis=1)
    assert_product(r, top, top)


def test_ntt_domain_is_shared_between_methods():
    """ntt output of every method, multiplied point-wise, inverts to the product under another method."""
    n = 128
    rings = {m: ring(n, m) for m in METHODS}
    a, b = residues(rings["butterfly"], (), 1), residues(rings["butterfly"], (), 2)
    want = expected_product(a, b, rings["butterfly"].moduli)
    for m1 in METHODS:
        fa = rings[m1].ntt(a)
        fb = rings[m1].ntt(b)
        prod_f = rings[m1].mul(fa, fb)
        for m2 in METHODS:
            np.testing.assert_array_equal(np.asarray(rings[m2].intt(prod_f)).astype(np.int64), want)


def test_ring_options_are_passed_to_the_plan():
    n = 256
    for kw in [dict(split=(4, 64)), dict(bp=6), dict(max_radix=4)]:
        r = RNSRing(n, ring(n).moduli, "mat3" if "split" in kw or "bp" in kw else "multilevel", **kw)
        a, b = residues(r, (), 3), residues(r, (), 4)
        assert_product(r, a, b)
    assert ring(n).order.tolist() == [ref.bit_reverse(p, 8) for p in range(n)]


# ----------------------------------------------------------------------------------------------------------
# element-wise arithmetic
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_add_sub_neg_mul(reduction):
    r = ring(64, "butterfly", reduction, bits=(31, 30, 20))
    a = residues(r, (3,), 7)
    b = residues(r, (3,), 8)
    b[..., 3] = (np.asarray(r.moduli, np.uint32) - 1)
    a[..., 3] = (np.asarray(r.moduli, np.uint32) - 1)
    ops = {
        "add": (r.add(a, b), lambda x, y, q: (x + y) % q),
        "sub": (r.sub(a, b), lambda x, y, q: (x - y) % q),
        "neg": (r.neg(a), lambda x, y, q: (-x) % q),
        "mul": (r.mul(a, b), lambda x, y, q: x * y % q),
    }
    for name, (got, fn) in ops.items():
        got = np.asarray(got)
        assert got.dtype == np.uint32 and got.shape == a.shape, name
        for idx in np.ndindex(a.shape):
            q = r.moduli[idx[-2]]
            assert int(got[idx]) == fn(int(a[idx]), int(b[idx]), q), (name, idx)


def test_ntt_intt_methods_round_trip_and_match_reference():
    n = 32
    r = ring(n, "four_step", "barrett")
    a = residues(r, (2,), 9)
    fa = r.ntt(a)
    for t in range(2):
        for l, q in enumerate(r.moduli):
            assert np.asarray(fa)[t, l].tolist() == ref.ntt_naive(a[t, l].tolist(), q, ref.psi(n, q))
    np.testing.assert_array_equal(np.asarray(r.intt(fa)), a)


# ----------------------------------------------------------------------------------------------------------
# conversion and validation
# ----------------------------------------------------------------------------------------------------------


def test_from_ints_negative_and_huge():
    n = 16
    r = ring(n)
    coeffs = [0, 1, -1, -(2**31), 2**31, 2**63 - 1, -(2**63), 2**64, -(2**64) - 3, 2**200 + 12345,
              -(2**200) - 1, r.moduli[0], -r.moduli[1], r.moduli[0] * r.moduli[1] + 7, 3**100, -(5**80)]
    assert len(coeffs) == n
    obj = np.asarray(coeffs, dtype=object)
    got = np.asarray(r.from_ints(obj))
    assert got.dtype == np.uint32 and got.shape == (r.num_limbs, n)
    for l, q in enumerate(r.moduli):
        assert got[l].tolist() == [c % q for c in coeffs]
    # a Python list of such integers works too
    np.testing.assert_array_equal(np.asarray(r.from_ints(coeffs)), got)
    # batched object arrays
    batch = np.stack([obj, obj[::-1]])
    gb = np.asarray(r.from_ints(batch))
    assert gb.shape == (2, r.num_limbs, n)
    np.testing.assert_array_equal(gb[0], got)
    for l, q in enumerate(r.moduli):
        assert gb[1, l].tolist() == [c % q for c in coeffs[::-1]]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32])
def test_from_ints_fixed_width_dtypes(dtype):
    r = ring(16)
    info = np.iinfo(dtype)
    vals = [int(info.min), int(info.max), 0, 1, int(info.min) + 1, int(info.max) - 1] + list(range(-5, 5))
    vals = [min(max(v, int(info.min)), int(info.max)) for v in vals]
    got = np.asarray(r.from_ints(np.asarray(vals, dtype=dtype)))
    for l, q in enumerate(r.moduli):
        assert got[l].tolist() == [v % q for v in vals]


def test_from_ints_uint64_above_int64_range():
    """Coefficients "of any size": uint64 values >= 2^63 must be reduced as the integers they are."""
    r = ring(16)
    vals = [2**64 - 1, 2**63, 2**63 + 1, 2**64 - 2, 12345] + [2**63 + 17 * i for i in range(11)]
    got = np.asarray(r.from_ints(np.asarray(vals, dtype=np.uint64)))
    for l, q in enumerate(r.moduli):
        assert got[l].tolist() == [v % q for v in vals]


def test_from_ints_errors():
    r = ring(16)
    with pytest.raises(ShapeError):
        r.from_ints(np.zeros(8, np.int64))
    with pytest.raises(ShapeError):
        r.from_ints(np.zeros((2, 17), np.int64))
    with pytest.raises(ShapeError):
        r.from_ints(np.int64(3))
    with pytest.raises(ShapeError):
        r.from_ints(np.zeros(16, np.float64))


def test_check_accepts_valid_and_rejects_out_of_range():
    r = ring(16)
    a = residues(r, (2,), 3)
    got = r.check(a)
    assert got.dtype == jnp.uint32
    np.testing.assert_array_equal(np.asarray(got), a)
    np.testing.assert_array_equal(np.asarray(r.check(a.astype(np.int64))), a)
    # q itself in a limb, negative values, values valid for another limb only
    for fn in (r.check, r.ntt, r.intt, r.neg):
        bad = a.astype(np.int64).copy()
        bad[0, 1, 5] = r.moduli[1]
        with pytest.raises(ParameterError):
            fn(bad)
        bad = a.astype(np.int64).copy()
        bad[1, 0, 0] = -1
        with pytest.raises(ParameterError):
            fn(bad)
    big, small = (0, 1) if r.moduli[0] > r.moduli[1] else (1, 0)
    bad = a.astype(np.int64).copy()
    bad[0, small, 0] = r.moduli[big] - 1  # valid residue for the larger limb, not for this one
    with pytest.raises(ParameterError):
        r.add(bad, a)
    with pytest.raises(ParameterError):
        r.poly_mul(a, bad)


def test_check_rejects_uint64_values_beyond_int64():
    """A uint64 value 2^63 + 5 is not a residue; it must not be accepted (and truncated to 5)."""
    r = ring(16)
    a = residues(r, (), 3).astype(np.uint64)
    a[0, 0] = 2**63 + 5
    with pytest.raises(ParameterError):
        r.check(a)


def test_check_shape_and_dtype_errors():
    r = ring(16)
    nl, n = r.num_limbs, r.n
    for bad in (np.zeros((nl + 1, n), np.uint32), np.zeros((nl, n // 2), np.uint32), np.zeros((n,), np.uint32),
                np.zeros((n, nl), np.uint32)):
        with pytest.raises(ShapeError):
            r.check(bad)
        with pytest.raises(ShapeError):
            r.poly_mul(bad, bad)
    for bad in (np.zeros((nl, n), np.float32), np.zeros((nl, n), bool), np.zeros((nl, n), dtype=object)):
        with pytest.raises(ShapeError):
            r.check(bad)
    for dt in (jnp.int32, jnp.uint64, jnp.float32):
        with pytest.raises(ShapeError):
            r.check(jnp.zeros((nl, n), dt))
    ok = jnp.zeros((nl, n), jnp.uint32)
    with pytest.raises(ShapeError):
        r.add(ok, jnp.zeros((nl, n), jnp.int32))
    with pytest.raises(ShapeError):
        r.mul(ok, jnp.zeros((nl + 1, n), jnp.uint32))


def test_ring_constructor_errors():
    qs = ring(16).moduli
    with pytest.raises(ParameterError):
        RNSRing(24, qs)
    with pytest.raises(ModulusError):
        RNSRing(32, [97])  # 97 != 1 mod 64
    with pytest.raises(ModulusError):
        RNSRing(16, [qs[0], qs[0]])
    with pytest.raises(ModulusError):
        RNSRing(16, [next(q for q in nt.ntt_primes(32, 40, 16) if q >= 2**31)])
    with pytest.raises(ParameterError):
        RNSRing(16, qs, "fft")
    with pytest.raises(ParameterError):
        RNSRing(16, qs, "mat3", reduction="karatsuba")
    with pytest.raises(ParameterError):
        RNSRing(16, qs, "mat3", split=(2, 4))


def test_ring_properties():
    r = ring(16, "mat3", "montgomery")
    assert r.num_limbs == 2 and r.n == 16
    assert np.asarray(r.q).reshape(-1).tolist() == list(r.moduli)
    assert "mat3" in repr(r)


# ----------------------------------------------------------------------------------------------------------
# N = 2^16 (slow)
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_poly_mul_n65536():
    n = 1 << 16
    qs = nt.ntt_primes(28, 3, n)
    rng = np.random.default_rng(2024)
    a = np.stack([rng.integers(0, q, size=n) for q in qs]).astype(np.uint32)
    b = np.stack([rng.integers(0, q, size=n) for q in qs]).astype(np.uint32)
    qcol = np.asarray(qs, np.uint32)
    a[:, 0] = a[:, -1] = qcol - 1
    b[:, 1] = b[:, -2] = qcol - 1
    sample = sorted({0, 1, 2, n // 2, n - 2, n - 1} | {int(k) for k in rng.integers(0, n, size=250)})
    want = {(l, k): ref.negacyclic_coeff_np(a[l], b[l], q, k) for l, q in enumerate(qs) for k in sample}
    positions = [0, 1, n - 1, int(rng.integers(0, n))]
    spectrum = {}
    for l, q in enumerate(qs):
        w = ref.psi(n, q)
        for p in positions:
            spectrum[(l, p)] = ref.ntt_eval(a[l].tolist(), q, w, ref.bit_reverse(p, 16))
    for method, reduction in [("butterfly", "shoup"), ("mat3", "montgomery"), ("multilevel", "barrett"),
                              ("four_step", "shoup")]:
        r = RNSRing(n, qs, method, reduction=reduction)
        got = np.asarray(r.poly_mul(a, b))
        for (l, k), v in want.items():
            assert int(got[l, k]) == v, (method, l, k)
        fa = r.ntt(a)
        np.testing.assert_array_equal(np.asarray(r.intt(fa)), a)
        fan = np.asarray(fa)
        for (l, p), v in spectrum.items():
            assert int(fan[l, p]) == v, (method, l, p)


def test_default_ntt_is_the_one_rule_of_every_entry_point():
    """Issue 27: ``RNSRing(n, moduli)`` without ``ntt=`` takes the fastest exact method of the backend (the native
    NTT on CPU where built), the same rule as the planner's static default and the demos; results are the same."""
    from hemx.kernels import ntt as ntt_kernels  # noqa: PLC0415
    from hemx.plan import variants  # noqa: PLC0415

    n = 64
    qs = nt.ntt_primes(30, 2, n)
    r = RNSRing(n, qs)
    assert (r.ntt_method, r.reduction) == ntt_kernels.default_method() == variants.static_default(jax.default_backend())
    rng = np.random.default_rng(3)
    x = np.stack([rng.integers(0, q, n) for q in qs]).astype(np.uint32)
    assert np.array_equal(np.asarray(r.ntt(x)), np.asarray(RNSRing(n, qs, "butterfly").ntt(x)))
