"""hemx.kernels.bat: exact modular matmuls through int8 chunk matmuls (BAT and the Toeplitz baseline)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import reference as ref
from hemx.errors import ModulusError, OverflowBoundError, ParameterError, ShapeError
from hemx.kernels import bat

# (H, V, W) and the batch prefix of b: a small fixed set so kernels compile a few times only
SHAPES = [((1, 1, 1), ()), ((3, 5, 2), ()), ((4, 16, 8), (2,)), ((2, 7, 3), (2, 3))]
BPS = [8, 6, 4]

moduli_bits = st.integers(20, 31)
seeds = st.integers(0, 2**63 - 1)


def _modulus(bits: int, offset: int, odd: bool) -> int:
    lo, hi = 2 ** (bits - 1), 2**bits - 1
    q = lo + offset % (hi - lo + 1)
    if odd:
        q |= 1
    return q


def _operands(q, hvw, lead, seed):
    h, v, w = hvw
    rng = np.random.default_rng(seed)
    a = rng.integers(0, q, size=(h, v), dtype=np.int64)
    b = rng.integers(0, q, size=lead + (v, w), dtype=np.int64)
    # sprinkle edge residues in
    edges = np.asarray([0, 1, q - 1, q - 2, q // 2, q // 2 + 1, (q - 1) // 2], dtype=np.int64)
    a.reshape(-1)[: min(a.size, 3)] = rng.choice(edges, size=min(a.size, 3))
    b.reshape(-1)[: min(b.size, 5)] = rng.choice(edges, size=min(b.size, 5))
    return a, b


def _check(a, b, q, **kw):
    out = bat.modmatmul(a, b, q, **kw)
    assert out.dtype == jnp.uint32
    want = ref.matmul_mod(a, b, q)
    got = np.asarray(out)
    assert got.shape == want.shape
    assert got.astype(object).tolist() == want.tolist(), (q, kw)


# ----------------------------------------------------------------------------------------------------------
# modmatmul against Python integers
# ----------------------------------------------------------------------------------------------------------


@settings(deadline=None)
@given(st.sampled_from(SHAPES), st.sampled_from(BPS), moduli_bits, st.integers(0, 2**40), seeds)
def test_modmatmul_bat_barrett(shape, bp, bits, offset, seed):
    q = _modulus(bits, offset, odd=False)  # Barrett merge: any modulus, even ones included
    a, b = _operands(q, *shape, seed)
    _check(a, b, q, bp=bp, reduction="barrett", method="bat")


@settings(deadline=None)
@given(st.sampled_from(SHAPES), st.sampled_from(BPS), moduli_bits, st.integers(0, 2**40), seeds)
def test_modmatmul_bat_montgomery(shape, bp, bits, offset, seed):
    q = _modulus(bits, offset, odd=True)
    a, b = _operands(q, *shape, seed)
    _check(a, b, q, bp=bp, reduction="montgomery", method="bat")


@settings(deadline=None)
@given(st.sampled_from(SHAPES), st.sampled_from(BPS), moduli_bits, st.integers(0, 2**40), seeds)
def test_modmatmul_toeplitz(shape, bp, bits, offset, seed):
    q = _modulus(bits, offset, odd=False)
    a, b = _operands(q, *shape, seed)
    _check(a, b, q, bp=bp, method="toeplitz")


VARIANTS = [dict(reduction="barrett", method="bat"), dict(reduction="montgomery", method="bat"),
            dict(method="toeplitz")]
EDGE_MODULI = [2**31 - 1, 2**31 - 3, 2**30 + 1, 2**30 - 1, (1 << 24) + 1, (1 << 23) + 1, (1 << 20) - 3, 2**19 + 1,
               3 * 2**29 + 1]


@pytest.mark.parametrize("variant", VARIANTS, ids=["bat-barrett", "bat-montgomery", "toeplitz"])
@pytest.mark.parametrize("q", EDGE_MODULI)
def test_modmatmul_max_chunk_edges(variant, q):
    """Matrices full of q-1 and of values next to q/2 (the largest centered digits)."""
    v = 64
    fills = [q - 1, (q - 1) // 2, q // 2 + 1, q // 2, (q + 1) // 2]
    for fa in fills:
        for fb in fills:
            a = np.full((3, v), fa, dtype=np.int64)
            b = np.full((v, 2), fb, dtype=np.int64)
            _check(a, b, q, **variant)


@pytest.mark.parametrize("bp", [7, 5, 2])
def test_modmatmul_other_chunk_widths(bp):
    rng = np.random.default_rng(bp)
    for q in (2**31 - 1, 2**26 + 15):
        a = rng.integers(0, q, size=(3, 9))
        b = rng.integers(0, q, size=(9, 4))
        a[0, :] = q - 1
        b[:, 0] = q // 2 + 1
        for variant in VARIANTS:
            _check(a, b, q, bp=bp, **variant)


@pytest.mark.parametrize("q", [2**31 - 1, 2**30 + 1, (1 << 27) + 1, (1 << 24) + 1])
def test_modmatmul_largest_contraction_at_bp8(q):
    """V * K * 2^14 < 2^31 with K = 4 at bp = 8: V = 32767 is the longest allowed contraction (28+ bits)."""
    assert bat.num_chunks(q, 8) == 4
    v = 32767
    rng = np.random.default_rng(q % 1000)
    a = np.empty((2, v), dtype=np.int64)
    b = np.empty((v, 2), dtype=np.int64)
    a[0] = q - 1
    a[1] = rng.choice([q // 2, q // 2 + 1, (q - 1) // 2], size=v)
    b[:, 0] = q // 2 + 1
    b[:, 1] = rng.integers(0, q, size=v)
    if q.bit_length() < 28:
        # narrow moduli: the merge width, not the accumulator, is the limit, and the kernel says so
        with pytest.raises(OverflowBoundError, match="merged values need"):
            bat.modmatmul(a, b, q)
        return
    want = ref.matmul_mod(a, b, q)
    got = np.asarray(bat.modmatmul(a, b, q))
    assert got.astype(object).tolist() == want.tolist()
    got_m = np.asarray(bat.modmatmul(a, b, q, reduction="montgomery"))
    assert got_m.astype(object).tolist() == want.tolist()


def test_modmatmul_exactness_for_28bit_modulus_up_to_documented_v():
    """The module docstring: at bp = 8 with 28-bit moduli any V < 2^15 works."""
    q = (1 << 28) - 57  # odd 28-bit modulus
    v = 2**15 - 1
    a = np.full((1, v), q // 2 + 1, dtype=np.int64)
    b = np.full((v, 1), q // 2 + 1, dtype=np.int64)
    for variant in VARIANTS:
        got = np.asarray(bat.modmatmul(a, b, q, **variant))
        assert int(got[0, 0]) == v * (q // 2 + 1) ** 2 % q


def test_modmatmul_small_moduli_bat():
    """Any 2 <= q < 2^31 works (docstring), including single-chunk moduli."""
    rng = np.random.default_rng(5)
    for q in (2, 3, 4, 5, 127, 128, 255, 256, 257, 65535):
        a = rng.integers(0, q, size=(3, 6))
        b = rng.integers(0, q, size=(6, 2))
        a[0] = q - 1
        b[:, 0] = q - 1
        _check(a, b, q, method="bat", reduction="barrett")
        if q % 2:
            _check(a, b, q, method="bat", reduction="montgomery")


@pytest.mark.parametrize("q", [2, 3, 5, 127, 255, 256])
def test_modmatmul_small_moduli_toeplitz(q):
    """The Toeplitz baseline must also accept every 2 <= q < 2^31 (a single chunk per residue here)."""
    rng = np.random.default_rng(q)
    a = rng.integers(0, q, size=(3, 6))
    b = rng.integers(0, q, size=(6, 2))
    a[0] = q - 1
    b[:, 0] = q - 1
    _check(a, b, q, method="toeplitz")


def test_modmatmul_accepts_python_lists_and_unsigned_dtypes():
    q = 2**31 - 1
    a = [[q - 1, 0, 1], [2, q - 2, 3]]
    b = np.asarray([[q - 1], [5], [q - 1]], dtype=np.uint32)
    _check(a, b, q)
    _check(np.asarray(a, dtype=np.uint64), b.astype(np.int32), q)


# ----------------------------------------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------------------------------------


def test_modmatmul_overflow_bound_raises():
    q = 2**31 - 1
    v = 32768  # V * K * 2^14 = 2^31
    a = np.ones((1, v), dtype=np.int64)
    b = np.ones((v, 1), dtype=np.int64)
    with pytest.raises(OverflowBoundError):
        bat.modmatmul(a, b, q)
    with pytest.raises(OverflowBoundError):
        bat.modmatmul(a, b, q, reduction="montgomery")
    with pytest.raises(OverflowBoundError):
        bat.modmatmul(a, b, q, method="toeplitz")


@pytest.mark.parametrize(
    "bp,v_ok",
    [(8, 32767), (7, (2**31 - 1) // (5 * 2**12)), (6, (2**31 - 1) // (6 * 2**10))],
)
def test_compile_known_matrix_accumulator_bound(bp, v_ok):
    """V * K * 2^(2bp-2) < 2^31 passes the accumulator check, V + 1 beyond it raises."""
    q = 2**31 - 1
    k = bat.num_chunks(q, bp)
    assert v_ok * k * 2 ** (2 * bp - 2) < 2**31 <= (v_ok + 1) * k * 2 ** (2 * bp - 2)
    with pytest.raises(OverflowBoundError):
        bat.compile_known_matrix(np.zeros((1, v_ok + 1), dtype=np.int64), [q], bp=bp)
    with pytest.raises(OverflowBoundError):
        bat.make_merge_table([q], (v_ok + 1) * k * 2 ** (2 * bp - 2), k, bp, "barrett")
    if bp == 8:
        mat = bat.compile_known_matrix(np.zeros((1, v_ok), dtype=np.int64), [q], bp=bp)
        assert mat.dense.shape == (1, k, v_ok * k)


def test_make_merge_table_merge_width_limits():
    # Barrett: merged values of ~57 bits exceed k + 31 = 56 bits for a 25-bit modulus...
    with pytest.raises(OverflowBoundError):
        bat.make_merge_table([(1 << 24) + 1], 2**31 - 1, 4, 8, "barrett")
    # ...but fit a 31-bit one
    bat.make_merge_table([2**31 - 1], 2**31 - 1, 4, 8, "barrett")
    # Montgomery: the merged value must stay below q * 2^32
    with pytest.raises(OverflowBoundError):
        bat.make_merge_table([(1 << 20) + 1], 2**31 - 1, 4, 8, "montgomery")
    bat.make_merge_table([2**31 - 1], 2**31 - 1, 4, 8, "montgomery")


def test_make_merge_table_errors():
    with pytest.raises(ParameterError):
        bat.make_merge_table([97], 100, 2, 8, "shoup")
    with pytest.raises(ModulusError):
        bat.make_merge_table([98], 100, 2, 8, "montgomery")
    with pytest.raises(ModulusError):
        bat.make_merge_table([2**31 + 11], 100, 2, 8, "barrett")


@pytest.mark.parametrize("q", [2**31 - 1, (1 << 28) - 57, 3 * 2**29 + 1])
@pytest.mark.parametrize("reduction", ["barrett", "montgomery"])
def test_merge_reduce_at_extreme_partial_sums(q, reduction):
    """merge_reduce is exact for partial sums anywhere in [-bound, bound] with the largest allowed bound."""
    bound = 2**31 - 1
    chunks, bp = 4, 8
    table = bat.make_merge_table([q], bound, chunks, bp, reduction)
    rng = np.random.default_rng(q)
    vals = [bound, -bound, 0, 1, -1]
    zc = rng.integers(-bound, bound + 1, size=(1, chunks, 40), dtype=np.int64)
    for c in range(25):  # every combination of extremes in the first two chunks, extremes elsewhere
        zc[0, 0, c] = vals[c % 5]
        zc[0, 1, c] = vals[c // 5]
        zc[0, 2:, c] = vals[(c * 3) % 5]
    zc[0, :, 25] = bound
    zc[0, :, 26] = -bound
    out = bat.merge_reduce(jnp.asarray(zc.astype(np.int32)), table, trailing=1)
    assert out.shape == (1, 40) and out.dtype == jnp.uint32
    r32inv = ref.inverse(ref.R32, q)
    for c in range(40):
        merged = sum(int(zc[0, i, c]) << (bp * i) for i in range(chunks))
        want = merged % q if reduction == "barrett" else merged * r32inv % q
        assert int(out[0, c]) == want


def test_modmatmul_shape_errors():
    q = 97
    with pytest.raises(ShapeError):
        bat.modmatmul(np.ones((2, 3), np.int64), np.ones((4, 2), np.int64), q)
    with pytest.raises(ShapeError):
        bat.modmatmul(np.ones((3,), np.int64), np.ones((3, 2), np.int64), q)
    with pytest.raises(ShapeError):
        bat.modmatmul(np.ones((2, 3, 3), np.int64), np.ones((3, 2), np.int64), q)
    with pytest.raises(ShapeError):
        bat.modmatmul(np.ones((2, 3), np.int64), np.ones((3,), np.int64), q)


@pytest.mark.parametrize(
    "a,b",
    [
        ([[97, 0]], [[1], [1]]),
        ([[0, 1]], [[1], [97]]),
        ([[-1, 0]], [[1], [1]]),
        ([[0, 1]], [[1], [-5]]),
        ([[2**70, 1]], [[1], [1]]),
        ([[0, 1]], [[1], [-(2**70)]]),
        (np.full((1, 2), 2**40, dtype=np.int64), [[1], [1]]),
    ],
)
def test_modmatmul_rejects_unreduced_entries(a, b):
    with pytest.raises(ParameterError):
        bat.modmatmul(a, b, 97)


@pytest.mark.parametrize(
    "q,kw",
    [(2**31, {}), (2**32 + 1, {}), (1, {}), (0, {}), (-7, {}), (96, dict(reduction="montgomery"))],
)
def test_modmatmul_bad_modulus(q, kw):
    with pytest.raises(ModulusError):
        bat.modmatmul([[0]], [[0]], q, **kw)


def test_modmatmul_bad_options():
    with pytest.raises(ParameterError):
        bat.modmatmul([[1]], [[1]], 97, method="strassen")
    with pytest.raises(ParameterError):
        bat.modmatmul([[1]], [[1]], 97, reduction="shoup")
    for bp in (1, 9, 0, 16):
        with pytest.raises(ParameterError):
            bat.modmatmul([[1]], [[1]], 97, bp=bp)


def test_compile_errors():
    with pytest.raises(ShapeError):
        bat.compile_known_matrix(np.zeros((2, 3, 3), np.int64), [97])  # 2 matrices, 1 modulus
    with pytest.raises(ParameterError):
        bat.compile_known_matrix(np.full((3, 3), 97, np.int64), [97])
    with pytest.raises(ShapeError):
        bat.compile_toeplitz_matrix(np.zeros((2, 3, 3), np.int64), [97])
    with pytest.raises(ParameterError):
        bat.compile_toeplitz_matrix(np.full((3, 3), -1, np.int64), [97])


def test_apply_known_batched_moduli_and_shape_error():
    """apply_known over (..., M, A, V, B) with a different matrix per modulus."""
    qs = [2**31 - 1, (1 << 28) - 57, 1048573]
    rng = np.random.default_rng(3)
    h, v, a_ax, b_ax = 3, 5, 2, 4
    mats = np.stack([rng.integers(0, q, size=(h, v)) for q in qs])
    x = np.stack([rng.integers(0, q, size=(2, a_ax, v, b_ax)) for q in qs], axis=1).astype(np.uint32)  # (2,M,A,V,B)
    for reduction in ("barrett", "montgomery"):
        mat = bat.compile_known_matrix(mats, qs, bp=8, reduction=reduction)
        y = np.asarray(jax.jit(bat.apply_known)(jnp.asarray(x), mat))
        assert y.shape == (2, 3, a_ax, h, b_ax)
        for m, q in enumerate(qs):
            for t in range(2):
                for ai in range(a_ax):
                    want = ref.matmul_mod(mats[m], x[t, m, ai], q)
                    assert y[t, m, ai].astype(object).tolist() == want.tolist()
    tmat = bat.compile_toeplitz_matrix(mats, qs, bp=8)
    y = np.asarray(jax.jit(bat.apply_toeplitz)(jnp.asarray(x), tmat))
    for m, q in enumerate(qs):
        assert y[1, m, 1].astype(object).tolist() == ref.matmul_mod(mats[m], x[1, m, 1], q).tolist()
    mat = bat.compile_known_matrix(mats, qs)
    with pytest.raises(ShapeError):
        bat.apply_known(jnp.asarray(x[..., :4, :]), mat)  # V mismatch
    with pytest.raises(ShapeError):
        bat.apply_known(jnp.asarray(x[:, :2]), mat)  # modulus count mismatch


# ----------------------------------------------------------------------------------------------------------
# chunks
# ----------------------------------------------------------------------------------------------------------

_CHUNK_CONFIGS = [(1, 8), (2, 8), (3, 8), (4, 8), (5, 8), (4, 7), (5, 6), (8, 4), (11, 3), (16, 2)]


@pytest.mark.parametrize("num,bp", [(k, b) for b in range(2, 9) for k in range(1, 9)])
def test_balanced_range(num, bp):
    assert bat.balanced_range(num, bp) == ref.balanced_limits(num, bp)


@pytest.mark.parametrize("q", [2, 3, 4, 255, 256, 257, 2**16 + 1, 2**20 - 3, 2**24 + 1, 2**30 + 1, 2**31 - 1])
@pytest.mark.parametrize("bp", [2, 4, 6, 8])
def test_num_chunks_is_minimal(q, bp):
    k = bat.num_chunks(q, bp)
    lo_need, hi_need = -((q - 1) // 2), q // 2  # centered residues (-q/2, q/2]
    lo, hi = ref.balanced_limits(k, bp)
    assert lo <= lo_need and hi >= hi_need
    if k > 1:
        lo1, hi1 = ref.balanced_limits(k - 1, bp)
        assert lo1 > lo_need or hi1 < hi_need


@pytest.mark.parametrize("num,bp", _CHUNK_CONFIGS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_chunk_decompose_merge_round_trip_at_range_edges(num, bp, dtype):
    lo, hi = ref.balanced_limits(num, bp)
    info = np.iinfo(dtype)
    # the last 2^bp values below INT32_MAX are covered by test_chunk_decompose_int32_near_int32_max
    lo_d, hi_d = max(lo, int(info.min)), min(hi, int(info.max) - (1 << bp))
    rng = np.random.default_rng(num * 10 + bp)
    vals = [lo_d, lo_d + 1, lo_d + 2, -1, 0, 1, hi_d - 1, hi_d, lo, hi]
    vals = [v for v in vals if lo_d <= v <= hi_d]
    vals += [int(v) for v in rng.integers(lo_d, hi_d, size=54 - len(vals), endpoint=True)]
    x = np.asarray(vals, dtype=dtype).reshape(2, 27)
    for axis in (-1, 1):
        d = bat.chunk_decompose(jnp.asarray(x), num, bp, axis=axis)
        assert d.dtype == jnp.int8
        dn = np.moveaxis(np.asarray(d), axis, -1)
        assert dn.shape == (2, 27, num)
        assert dn.min() >= -(1 << (bp - 1)) and dn.max() < (1 << (bp - 1))
        for i in range(2):
            for j in range(27):
                assert dn[i, j].tolist() == ref.balanced_digits(int(x[i, j]), num, bp), int(x[i, j])
        back = bat.chunk_merge(d, bp, axis=axis)
        assert back.dtype == jnp.int64
        assert np.asarray(back).tolist() == x.tolist()


def test_chunk_decompose_int32_extremes_at_bp8():
    """INT32_MIN is inside balanced_range(4, 8); the fast byte path must decompose it exactly."""
    vals = [-(2**31), -(2**31) + 1, 2139062143, 2139062142, -8421504, -8421505, 8355711, 8355712]
    d = np.asarray(bat.chunk_decompose(jnp.asarray(np.asarray(vals, np.int32)), 4, 8))
    for v, row in zip(vals, d.tolist()):
        assert row == ref.balanced_digits(v, 4, 8)


@pytest.mark.parametrize("num,bp", [(5, 8), (11, 3), (6, 7)])
def test_chunk_decompose_int32_near_int32_max(num, bp):
    """int32 inputs just below INT32_MAX lie inside balanced_range(num, bp) for these configurations, so the
    documented contract ("int32 array whose values lie in balanced_range(num, bp)") covers them."""
    lo, hi = ref.balanced_limits(num, bp)
    vals = [2**31 - 1 - i for i in range(1 << bp)] + [-(2**31) + i for i in range(1 << bp)]
    assert all(lo <= v <= hi for v in vals)
    x = jnp.asarray(np.asarray(vals, dtype=np.int32))
    d = bat.chunk_decompose(x, num, bp)
    got = np.asarray(d).tolist()
    bad = [(v, row) for v, row in zip(vals, got) if row != ref.balanced_digits(v, num, bp)]
    assert not bad, f"{len(bad)} wrong decompositions, e.g. x={bad[0][0]} -> {bad[0][1]}"
    assert np.asarray(bat.chunk_merge(d, bp)).tolist() == vals


@pytest.mark.parametrize("q", [2**31 - 1, 2**30 + 1, 1048573, 2**20, 1000])
def test_decompose_operand_centered_digits(q):
    x = np.asarray([0, 1, q - 1, q // 2, q // 2 + 1, (q - 1) // 2, (q + 1) // 2, q - 2], dtype=np.uint32)
    k = bat.num_chunks(q, 8)
    d = np.asarray(bat.decompose_operand(jnp.asarray(x), np.uint32(q), k, 8, axis=-1))
    for v, row in zip(x.tolist(), d.tolist()):
        c = ref.centered(v, q)
        assert row == ref.balanced_digits(c, k, 8)
