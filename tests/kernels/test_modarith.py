"""hemx.kernels.modarith: every reduction bit-exact against Python integers, lazy ranges, bad moduli."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import reference as ref
from hemx.errors import ModulusError, ParameterError
from hemx.kernels import modarith as ma

L = 3  # limbs per example (fixed shape: one compile per kernel)
COLS = 64  # residues per limb: edge cross products first, random values after

# odd moduli of 20..31 bits, prime or not
odd_moduli = st.integers(20, 31).flatmap(lambda b: st.integers(2 ** (b - 1), 2**b - 1)).map(lambda q: q | 1)
moduli_lists = st.lists(odd_moduli, min_size=L, max_size=L)
seeds = st.integers(0, 2**63 - 1)
# some well-known hard cases, always worth covering explicitly
SPECIAL_MODULI = [
    [2**31 - 1, 2**30 + 1, 2**19 + 1],
    [2**31 - 3, 2**31 - 5, 2**30 - 1],
    [1 << 30 | 1, (1 << 20) - 1, 3 * (1 << 29) + 1],
]


def _u32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.uint32)


def _grid(qs, edge_a, edge_b, rng, hi_a, hi_b):
    """(L, COLS) operands: the cross product of per-limb edge lists, then uniform values in [0, hi)."""
    a = np.zeros((L, COLS), dtype=np.uint64)
    b = np.zeros((L, COLS), dtype=np.uint64)
    for l, q in enumerate(qs):
        ea, eb = edge_a(q), edge_b(q)
        pairs = [(x, y) for x in ea for y in eb]
        assert len(pairs) <= COLS
        ha, hb = hi_a(q), hi_b(q)
        for c in range(COLS):
            if c < len(pairs):
                a[l, c], b[l, c] = pairs[c]
            else:
                a[l, c] = int(rng.integers(0, ha, dtype=np.uint64))
                b[l, c] = int(rng.integers(0, hb, dtype=np.uint64))
    return a, b


def _residue_edges(q):
    return [0, 1, 2, q - 1, q - 2, q // 2, q // 2 + 1]


def _table(qs):
    return ma.make_modulus_table(qs)


def _to_int(x) -> list[list[int]]:
    return [[int(v) for v in row] for row in np.asarray(x).tolist()]


def _check_pointwise(out, a, b, qs, fn):
    out = _to_int(out)
    a, b = _to_int(a), _to_int(b)
    for l, q in enumerate(qs):
        for c in range(COLS):
            assert out[l][c] == fn(a[l][c], b[l][c], q), (q, a[l][c], b[l][c], out[l][c])


def _check_lazy(out, a, b, qs, fn, width):
    """Congruent to fn(a, b) and inside [0, width * q)."""
    out = _to_int(out)
    a, b = _to_int(a), _to_int(b)
    for l, q in enumerate(qs):
        for c in range(COLS):
            v = out[l][c]
            assert 0 <= v < width * q, (q, a[l][c], b[l][c], v)
            assert v % q == fn(a[l][c], b[l][c], q), (q, a[l][c], b[l][c], v)


def _residues(qs, seed):
    return _grid(qs, _residue_edges, _residue_edges, np.random.default_rng(seed), lambda q: q, lambda q: q)


# ----------------------------------------------------------------------------------------------------------
# tables and bad moduli
# ----------------------------------------------------------------------------------------------------------


@settings(deadline=None)
@given(moduli_lists)
def test_modulus_table_constants(qs):
    t = _table(qs)
    for f in t:
        assert f.shape == (L, 1)
    assert t.q.dtype == np.uint32 and t.mont_qinv.dtype == np.uint32 and t.barrett_mu.dtype == np.uint64
    for l, q in enumerate(qs):
        k = q.bit_length()
        assert int(t.q[l, 0]) == q
        assert int(t.barrett_mu[l, 0]) == (1 << (2 * k)) // q
        assert int(t.barrett_sa[l, 0]) == k - 1 and int(t.barrett_sb[l, 0]) == k + 1
        assert (int(t.mont_qinv[l, 0]) * q) % ref.R32 == 1
        assert (int(t.mont_qinv_neg[l, 0]) * q) % ref.R32 == ref.R32 - 1
        assert int(t.mont_r2[l, 0]) == (1 << 64) % q


def test_modulus_table_custom_shape():
    t = ma.make_modulus_table([97, 101, 103, 107], shape=(2, 2, 1))
    assert t.q.shape == (2, 2, 1)
    assert t.q.reshape(-1).tolist() == [97, 101, 103, 107]


@pytest.mark.parametrize("q", [2, 4, 2**20, 2**30, 2**31 - 2])
def test_even_modulus_rejected(q):
    with pytest.raises(ModulusError):
        ma.make_modulus_table([q])
    with pytest.raises(ModulusError):
        ma.check_modulus(q)
    assert ma.check_modulus(q, odd=False) == q


@pytest.mark.parametrize("q", [2**31, 2**31 + 1, 2**32 - 1, 2**32 + 1, 2**61 - 1])
def test_too_large_modulus_rejected(q):
    with pytest.raises(ModulusError):
        ma.make_modulus_table([97, q])
    with pytest.raises(ModulusError):
        ma.check_modulus(q, odd=False)


@pytest.mark.parametrize("q", [1, 0, -1, -97])
def test_too_small_modulus_rejected(q):
    with pytest.raises(ModulusError):
        ma.make_modulus_table([q])
    with pytest.raises(ModulusError):
        ma.check_modulus(q, odd=False)


def test_largest_and_smallest_valid_moduli():
    assert ma.check_modulus(2**31 - 1) == 2**31 - 1
    assert ma.check_modulus(3) == 3
    assert ma.check_modulus(2, odd=False) == 2


# ----------------------------------------------------------------------------------------------------------
# addition
# ----------------------------------------------------------------------------------------------------------


@settings(deadline=None)
@given(moduli_lists, seeds)
def test_add_sub_neg(qs, seed):
    t = _table(qs)
    a, b = _residues(qs, seed)
    ja, jb = jnp.asarray(_u32(a)), jnp.asarray(_u32(b))
    for out in (ma.add_mod(ja, jb, t.q), ma.sub_mod(ja, jb, t.q)):
        assert out.dtype == jnp.uint32
    _check_pointwise(ma.add_mod(ja, jb, t.q), a, b, qs, ref.add_mod)
    _check_pointwise(ma.sub_mod(ja, jb, t.q), a, b, qs, ref.sub_mod)
    _check_pointwise(ma.neg_mod(ja, t.q), a, b, qs, lambda x, y, q: ref.neg_mod(x, q))


@settings(deadline=None)
@given(moduli_lists, seeds)
def test_reduce_once(qs, seed):
    t = _table(qs)
    rng = np.random.default_rng(seed)
    x, _ = _grid(qs, lambda q: [0, 1, q - 1, q, q + 1, 2 * q - 2, 2 * q - 1], lambda q: [0], rng,
                 lambda q: 2 * q, lambda q: 1)
    _check_pointwise(ma.reduce_once(jnp.asarray(_u32(x)), t.q), x, x, qs, lambda v, _, q: v % q)
    # also on uint64 data
    out64 = ma.reduce_once(jnp.asarray(x.astype(np.uint64)), t.q)
    assert out64.dtype == jnp.uint64
    _check_pointwise(out64, x, x, qs, lambda v, _, q: v % q)


# ----------------------------------------------------------------------------------------------------------
# Barrett
# ----------------------------------------------------------------------------------------------------------


@settings(deadline=None)
@given(moduli_lists, seeds)
def test_mul_barrett(qs, seed):
    t = _table(qs)
    a, b = _residues(qs, seed)
    ja, jb = jnp.asarray(_u32(a)), jnp.asarray(_u32(b))
    out = ma.mul_barrett(ja, jb, t)
    assert out.dtype == jnp.uint32
    _check_pointwise(out, a, b, qs, ref.mul_mod)
    lazy = ma.mul_barrett_lazy(ja, jb, t)
    _check_lazy(lazy, a, b, qs, ref.mul_mod, 3)


@pytest.mark.parametrize("qs", SPECIAL_MODULI)
def test_mul_barrett_special_moduli(qs):
    a, b = _residues(qs, 1)
    t = _table(qs)
    _check_pointwise(ma.mul_barrett(jnp.asarray(_u32(a)), jnp.asarray(_u32(b)), t), a, b, qs, ref.mul_mod)
    _check_lazy(ma.mul_barrett_lazy(jnp.asarray(_u32(a)), jnp.asarray(_u32(b)), t), a, b, qs, ref.mul_mod, 3)


@settings(deadline=None)
@given(moduli_lists, seeds)
def test_barrett_reduce_full_width(qs, seed):
    """The table's constants reduce any x < 2^(2k) (not only products of residues)."""
    t = _table(qs)
    rng = np.random.default_rng(seed)
    two_k = lambda q: 1 << (2 * q.bit_length())  # noqa: E731
    x, _ = _grid(qs, lambda q: [0, 1, q - 1, q, 2 * q - 1, 3 * q, two_k(q) - 1, two_k(q) - q],
                 lambda q: [0], rng, two_k, lambda q: 1)
    out = ma.barrett_reduce(jnp.asarray(x), t.q, t.barrett_mu, t.barrett_sa, t.barrett_sb)
    assert out.dtype == jnp.uint32
    _check_pointwise(out, x, x, qs, lambda v, _, q: v % q)
    lazy = ma.barrett_reduce_lazy(jnp.asarray(x), t.q, t.barrett_mu, t.barrett_sa, t.barrett_sb)
    _check_lazy(lazy, x, x, qs, lambda v, _, q: v % q, 3)


@settings(deadline=None)
@given(moduli_lists, seeds)
def test_barrett_reduce_wide_parameters(qs, seed):
    """Documented generalisation: x < 2^n with n = k + 31, mu = floor(2^n / q), sa = k - 1, sb = n - k + 1."""
    rng = np.random.default_rng(seed)
    ks = [q.bit_length() for q in qs]
    top = lambda q: 1 << (q.bit_length() + 31)  # noqa: E731
    x, _ = _grid(qs, lambda q: [0, q - 1, q, top(q) - 1, top(q) - q, top(q) - q - 1], lambda q: [0], rng, top,
                 lambda q: 1)
    q = np.asarray(qs, np.uint32).reshape(L, 1)
    mu = np.asarray([(1 << (k + 31)) // qq for k, qq in zip(ks, qs)], np.uint64).reshape(L, 1)
    sa = np.asarray([k - 1 for k in ks], np.uint64).reshape(L, 1)
    sb = np.asarray([32] * L, np.uint64).reshape(L, 1)
    out = ma.barrett_reduce(jnp.asarray(x), q, mu, sa, sb)
    _check_pointwise(out, x, x, qs, lambda v, _, qq: v % qq)


# ----------------------------------------------------------------------------------------------------------
# Montgomery
# ----------------------------------------------------------------------------------------------------------


def _mont_operands(qs, seed):
    """a: any uint32, b in [0, q): a * b < q * 2^32 as the kernels require."""
    return _grid(
        qs,
        lambda q: [0, 1, q - 1, q, 2 * q - 1, 2**31, 2**32 - 1],
        lambda q: [0, 1, 2, q - 1, q - 2, q // 2],
        np.random.default_rng(seed),
        lambda q: 1 << 32,
        lambda q: q,
    )


@settings(deadline=None)
@given(moduli_lists, seeds)
def test_mul_montgomery(qs, seed):
    t = _table(qs)
    a, b = _mont_operands(qs, seed)
    ja, jb = jnp.asarray(_u32(a)), jnp.asarray(_u32(b))
    out = ma.mul_montgomery(ja, jb, t)
    assert out.dtype == jnp.uint32
    _check_pointwise(out, a, b, qs, ref.montgomery_mul)
    _check_lazy(ma.mul_montgomery_lazy(ja, jb, t), a, b, qs, ref.montgomery_mul, 2)
    # montgomery_reduce_lazy on the raw product
    z = jnp.asarray(a.astype(np.uint64) * b.astype(np.uint64))
    _check_lazy(ma.montgomery_reduce_lazy(z, t.q, t.mont_qinv_neg), a, b, qs, ref.montgomery_mul, 2)


@settings(deadline=None)
@given(moduli_lists, seeds)
def test_mul_montgomery_split16(qs, seed):
    t = _table(qs)
    a, b = _mont_operands(qs, seed)
    out = ma.mul_montgomery_split16(jnp.asarray(_u32(a)), jnp.asarray(_u32(b)), t)
    assert out.dtype == jnp.uint32
    _check_pointwise(out, a, b, qs, ref.montgomery_mul)


@pytest.mark.parametrize("qs", SPECIAL_MODULI)
def test_montgomery_special_moduli(qs):
    t = _table(qs)
    a, b = _mont_operands(qs, 3)
    ja, jb = jnp.asarray(_u32(a)), jnp.asarray(_u32(b))
    _check_pointwise(ma.mul_montgomery(ja, jb, t), a, b, qs, ref.montgomery_mul)
    _check_pointwise(ma.mul_montgomery_split16(ja, jb, t), a, b, qs, ref.montgomery_mul)
    _check_lazy(ma.mul_montgomery_lazy(ja, jb, t), a, b, qs, ref.montgomery_mul, 2)


@settings(deadline=None)
@given(moduli_lists, seeds)
def test_montgomery_reduce_split16(qs, seed):
    """CROSS Alg. 1 on any z < q * 2^32, given as (hi, lo) words; lazy output in [0, 2q)."""
    t = _table(qs)
    rng = np.random.default_rng(seed)
    top = lambda q: q << 32  # noqa: E731
    z, _ = _grid(qs, lambda q: [0, 1, 2**32 - 1, 2**32, (q - 1) << 32, top(q) - 1, top(q) - 2**32 + 1],
                 lambda q: [0], rng, top, lambda q: 1)
    hi = jnp.asarray(_u32(z >> np.uint64(32)))
    lo = jnp.asarray(_u32(z & np.uint64(0xFFFFFFFF)))
    out = ma.montgomery_reduce_split16(hi, lo, t.q, t.mont_qinv)
    assert out.dtype == jnp.uint32
    inv = {q: ref.inverse(ref.R32, q) for q in qs}
    _check_lazy(out, z, z, qs, lambda v, _, q: v * inv[q] % q, 2)


_WORD_EDGES = [0, 1, 2, 0xFFFF, 0x10000, 0x10001, 0x7FFFFFFF, 0x80000000, 0xFFFF0000, 0x0000FFFF, 0xFFFFFFFE,
               0xFFFFFFFF, 0xDEADBEEF, 0x12345678]


def test_mul_wide_split16_edge_words():
    pairs = [(x, y) for x in _WORD_EDGES for y in _WORD_EDGES]
    a = jnp.asarray(_u32([p[0] for p in pairs]))
    b = jnp.asarray(_u32([p[1] for p in pairs]))
    hi, lo = ma.mul_wide_split16(a, b)
    mh = ma.mulhi_split16(a, b)
    assert hi.dtype == jnp.uint32 and lo.dtype == jnp.uint32
    for (x, y), h, l_, m in zip(pairs, np.asarray(hi).tolist(), np.asarray(lo).tolist(), np.asarray(mh).tolist()):
        full = x * y
        assert (h, l_) == (full >> 32, full & 0xFFFFFFFF), (hex(x), hex(y))
        assert m == full >> 32


@settings(deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=128, max_size=128),
       st.lists(st.integers(0, 2**32 - 1), min_size=128, max_size=128))
def test_mul_wide_split16_random(xs, ys):
    hi, lo = ma.mul_wide_split16(jnp.asarray(_u32(xs)), jnp.asarray(_u32(ys)))
    for x, y, h, l_ in zip(xs, ys, np.asarray(hi).tolist(), np.asarray(lo).tolist()):
        assert (h << 32) | l_ == x * y


@settings(deadline=None)
@given(moduli_lists, seeds)
def test_to_from_montgomery(qs, seed):
    t = _table(qs)
    a, b = _grid(qs, _residue_edges, lambda q: [0, 1, q - 1, 2**32 - 1, 2**31], np.random.default_rng(seed),
                 lambda q: q, lambda q: 1 << 32)
    mont = ma.to_montgomery(jnp.asarray(_u32(a)), t)
    _check_pointwise(mont, a, a, qs, lambda x, _, q: x * ref.R32 % q)
    back = ma.from_montgomery(mont, t)
    _check_pointwise(back, a, a, qs, lambda x, _, q: x)
    # from_montgomery on any 32-bit word
    _check_pointwise(ma.from_montgomery(jnp.asarray(_u32(b)), t), b, b, qs,
                     lambda x, _, q: x * ref.inverse(ref.R32, q) % q)


# ----------------------------------------------------------------------------------------------------------
# Shoup and known operands
# ----------------------------------------------------------------------------------------------------------


@settings(deadline=None)
@given(moduli_lists, seeds)
def test_mul_shoup(qs, seed):
    """a any 32-bit word, w in [0, q) with w' = floor(w 2^32 / q)."""
    t = _table(qs)
    a, w = _grid(qs, lambda q: [0, 1, q - 1, q, 2 * q - 1, 2**32 - 1], lambda q: [0, 1, q - 1, q - 2, q // 2],
                 np.random.default_rng(seed), lambda q: 1 << 32, lambda q: q)
    w_shoup = ma.shoup_precompute(w, np.asarray(qs, np.uint64).reshape(L, 1))
    assert w_shoup.dtype == np.uint32
    for l, q in enumerate(qs):
        for c in range(COLS):
            assert int(w_shoup[l, c]) == ref.shoup_constant(int(w[l, c]), q)
    ja, jw = jnp.asarray(_u32(a)), jnp.asarray(_u32(w))
    out = ma.mul_shoup(ja, jw, jnp.asarray(w_shoup), t.q)
    assert out.dtype == jnp.uint32
    _check_pointwise(out, a, w, qs, ref.mul_mod)
    _check_lazy(ma.mul_shoup_lazy(ja, jw, jnp.asarray(w_shoup), t.q), a, w, qs, ref.mul_mod, 2)


def test_shoup_precompute_rejects_unreduced_operand():
    with pytest.raises(ParameterError):
        ma.shoup_precompute([5, 97], [97, 97])
    with pytest.raises(ParameterError):
        ma.shoup_precompute([98], [97])


@settings(deadline=None)
@given(moduli_lists, seeds, st.lists(st.integers(-(2**80), 2**80), min_size=4, max_size=4))
def test_known_operand_and_mul_known(qs, seed, big):
    t = _table(qs)
    rng = np.random.default_rng(seed)
    # known operands: any integers (negative, unreduced, huge) - known_operand reduces them
    w = np.empty((L, COLS), dtype=object)
    for l, q in enumerate(qs):
        edges = [0, 1, q - 1, q, q + 1, -1, -q, 2**32 + 7] + big
        for c in range(COLS):
            w[l, c] = edges[c] if c < len(edges) else int(rng.integers(-(2**40), 2**40))
    qcol = np.asarray(qs, dtype=np.int64).reshape(L, 1)
    k = ma.known_operand(w, qcol)
    for l, q in enumerate(qs):
        for c in range(COLS):
            wv = int(w[l, c]) % q
            assert int(k.value[l, c]) == wv
            assert int(k.mont[l, c]) == wv * ref.R32 % q
            assert int(k.shoup[l, c]) == ref.shoup_constant(wv, q)
    a, _ = _residues(qs, seed)
    ja = jnp.asarray(_u32(a))
    wv = np.asarray(k.value)
    for method in ma.REDUCTIONS:
        out = ma.mul_known(ja, k, t, method)
        assert out.dtype == jnp.uint32
        _check_pointwise(out, a, wv, qs, ref.mul_mod)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_known_operand_fixed_width_inputs(dtype):
    """Docstring: "any integers" - every value of a fixed-width integer array is reduced as that integer."""
    qs = [2**31 - 1, 1048573, 12289]
    info = np.iinfo(dtype)
    vals = [int(info.min), int(info.min) + 1, -1, 0, 1, 12288, 12289, int(info.max) - 1, int(info.max)]
    vals = [v for v in vals if info.min <= v <= info.max]
    w = np.asarray([vals] * len(qs), dtype=dtype)
    k = ma.known_operand(w, np.asarray(qs, np.int64).reshape(-1, 1))
    for l, q in enumerate(qs):
        assert [int(v) for v in k.value[l]] == [v % q for v in vals], (dtype, q)
        assert [int(v) for v in k.mont[l]] == [v % q * ref.R32 % q for v in vals]
        assert [int(v) for v in k.shoup[l]] == [ref.shoup_constant(v % q, q) for v in vals]


def test_known_operand_rejects_wide_modulus():
    with pytest.raises(ModulusError):
        ma.known_operand(np.asarray([[1, 2]]), np.asarray([[2**31 + 11]]))


def test_mul_known_unknown_method():
    t = _table([97])
    k = ma.known_operand(np.asarray([[3]]), np.asarray([[97]]))
    with pytest.raises(ParameterError):
        ma.mul_known(jnp.asarray(_u32([[5]])), k, t, "karatsuba")


@settings(deadline=None)
@given(moduli_lists, seeds)
def test_mul_mod_runtime_operands(qs, seed):
    t = _table(qs)
    a, b = _residues(qs, seed)
    ja, jb = jnp.asarray(_u32(a)), jnp.asarray(_u32(b))
    for method in ("barrett", "montgomery"):
        out = ma.mul_mod(ja, jb, t, method)
        assert out.dtype == jnp.uint32
        _check_pointwise(out, a, b, qs, ref.mul_mod)


def test_mul_mod_rejects_shoup_and_unknown():
    t = _table([97])
    x = jnp.asarray(_u32([[5]]))
    with pytest.raises(ParameterError):
        ma.mul_mod(x, x, t, "shoup")
    with pytest.raises(ParameterError):
        ma.mul_mod(x, x, t, "nope")


def test_broadcast_batch_axes():
    """Data (..., L, N) against an (L, 1) table."""
    qs = [2**31 - 1, 2**30 + 3, 1048573]
    t = _table(qs)
    rng = np.random.default_rng(11)
    a = np.stack([rng.integers(0, q, size=(2, 5, 7)) for q in qs], axis=-2).astype(np.uint32)
    b = np.stack([rng.integers(0, q, size=(2, 5, 7)) for q in qs], axis=-2).astype(np.uint32)
    assert a.shape == (2, 5, 3, 7)
    outs = {
        "barrett": ma.mul_barrett(jnp.asarray(a), jnp.asarray(b), t),
        "mont": ma.mul_mod(jnp.asarray(a), jnp.asarray(b), t, "montgomery"),
        "add": ma.add_mod(jnp.asarray(a), jnp.asarray(b), t.q),
    }
    for name, out in outs.items():
        out = np.asarray(out)
        assert out.shape == a.shape
        for idx in np.ndindex(a.shape):
            q = qs[idx[-2]]
            x, y = int(a[idx]), int(b[idx])
            want = (x + y) % q if name == "add" else x * y % q
            assert int(out[idx]) == want
