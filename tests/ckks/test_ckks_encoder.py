"""CKKS encoding: canonical embedding, round trips, sparse packing, automorphisms = rotations, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hemx
from hemx.ckks import encoder
from hemx.errors import ParameterError, SlotError

from tests.helpers.ckks_helpers import INSECURE, MAIN_LEVELS, MAIN_LOG_N, check_bits, context, small_params, uniform


def automorphism(coeffs: np.ndarray, g: int) -> np.ndarray:
    """``m(X) -> m(X^g)`` in Z[X]/(X^N + 1) on coefficient vectors (last axis), written from the definition."""
    n = coeffs.shape[-1]
    j = np.arange(n)
    e = (j * g) % (2 * n)  # X^j -> X^(jg) = -X^(jg - N) when jg mod 2N >= N
    out = np.zeros(coeffs.shape, dtype=np.float64)
    out[..., np.where(e < n, e, e - n)] = np.where(e < n, 1.0, -1.0) * coeffs.astype(np.float64)
    return out


def negacyclic_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n = a.shape[-1]
    full = np.convolve(a.astype(np.float64), b.astype(np.float64))
    out = full[:n].copy()
    out[: n - 1] -= full[n:]
    return out


def evaluate(coeffs: np.ndarray, points: np.ndarray) -> np.ndarray:
    """m(x) for every x in points (direct sum, for small N)."""
    j = np.arange(coeffs.shape[-1])
    return (coeffs.astype(np.float64)[None, :] * points[:, None] ** j[None, :]).sum(axis=1)


# ------------------------------------------------------------------------------------------------ definition
def test_slots_are_evaluations_at_powers_of_five():
    n, slots, scale = 64, 32, 2.0 ** 30
    rng = np.random.default_rng(0)
    z = uniform(rng, slots, complex_=True)
    coeffs = encoder.encode(z, n, slots, scale)
    assert coeffs.shape == (n,) and coeffs.dtype == np.int64
    zeta = np.exp(1j * np.pi / n)
    roots = zeta ** np.array([pow(5, i, 2 * n) for i in range(slots)])
    check_bits("encode = canonical embedding (N=64)", z, evaluate(coeffs, roots) / scale, 20)
    # and decode is exactly that evaluation, for any integer polynomial
    m = rng.integers(-1000, 1000, n)
    np.testing.assert_allclose(encoder.decode(m.astype(float), n, slots, 1.0), evaluate(m, roots), atol=1e-8)
    # conjugate slots: m(conj(x)) = conj(m(x)) for a real polynomial
    np.testing.assert_allclose(evaluate(coeffs, np.conj(roots)) / scale, np.conj(z), atol=1e-6)


# ------------------------------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("slots", [1, 2, 8, 64, 512])
@pytest.mark.parametrize("complex_", [False, True])
def test_round_trip(slots, complex_):
    n, scale = 1024, 2.0 ** 50
    rng = np.random.default_rng(slots)
    z = uniform(rng, (3, slots), complex_=complex_)
    coeffs = encoder.encode(z, n, slots, scale)
    assert coeffs.shape == (3, n) and coeffs.dtype == np.int64
    got = encoder.decode(coeffs, n, slots, scale)
    assert got.shape == (3, slots)
    check_bits(f"encoder round trip slots={slots} complex={complex_}", z, got if complex_ else got.real, 38)
    if not complex_:
        assert np.abs(got.imag).max() < 2.0 ** -38


@pytest.mark.parametrize("slots", [1, 4, 32, 256])
def test_sparse_packing_layout(slots):
    n = 1024
    rng = np.random.default_rng(1)
    z = uniform(rng, slots, complex_=True)
    coeffs = encoder.encode(z, n, slots, 2.0 ** 40)
    gap = n // (2 * slots)
    off_grid = np.ones(n, dtype=bool)
    off_grid[::gap] = False
    assert not np.any(coeffs[off_grid])  # only coefficients of Y = X^(N/2s) are used
    # read with all N/2 slots, a sparse plaintext holds its values repeated N/(2s) times
    full = encoder.decode(coeffs, n, n // 2, 2.0 ** 40)
    check_bits(f"sparse slots={slots} read as full", np.tile(z, n // 2 // slots), full, 30)


def test_encode_is_linear_and_multiplicative():
    n, slots, scale = 256, 128, 2.0 ** 24
    rng = np.random.default_rng(2)
    a, b = uniform(rng, slots, complex_=True), uniform(rng, slots, complex_=True)
    ca, cb = encoder.encode(a, n, slots, scale), encoder.encode(b, n, slots, scale)
    check_bits("encode(a) + encode(b)", a + b, encoder.decode(ca + cb, n, slots, scale), 18)
    prod = negacyclic_product(ca, cb)
    check_bits("encode(a) * encode(b) (negacyclic)", a * b, encoder.decode(prod, n, slots, scale * scale), 16)


def test_large_scale_uses_python_integers():
    n, slots, scale = 256, 128, 2.0 ** 70
    z = uniform(np.random.default_rng(3), slots)
    coeffs = encoder.encode(z, n, slots, scale)
    assert coeffs.dtype == object
    assert isinstance(coeffs[0], int)
    assert max(abs(int(c)) for c in coeffs) > 2 ** 62
    check_bits("encode at scale 2^70", z, encoder.decode(coeffs, n, slots, scale).real, 40)


# ------------------------------------------------------------------------------------------------ automorphisms
@pytest.mark.parametrize("slots", [512, 64, 8])
@pytest.mark.parametrize("steps", [1, 2, 3, 7, -1, -5])
def test_automorphism_five_is_left_rotation(slots, steps):
    n, scale = 1024, 2.0 ** 40
    z = uniform(np.random.default_rng(abs(steps) + slots), slots, complex_=True)
    coeffs = encoder.encode(z, n, slots, scale)
    g = pow(5, steps % (n // 2), 2 * n)  # 5^steps mod 2N (5 has order N/2)
    rotated = automorphism(coeffs, g)
    check_bits(f"X->X^(5^{steps}) slots={slots}", np.roll(z, -steps), encoder.decode(rotated, n, slots, scale), 30)
    # the library's Galois element is the same
    from hemx.kernels.automorphism import galois_element
    assert galois_element(n, steps) == g


@pytest.mark.parametrize("slots", [512, 16])
def test_automorphism_minus_one_is_conjugation(slots):
    n, scale = 1024, 2.0 ** 40
    z = uniform(np.random.default_rng(7), slots, complex_=True)
    coeffs = encoder.encode(z, n, slots, scale)
    check_bits(f"X->X^-1 slots={slots}", np.conj(z), encoder.decode(automorphism(coeffs, 2 * n - 1), n, slots, scale),
               30)


def test_automorphism_five_powers_compose():
    n, slots, scale = 1024, 512, 2.0 ** 40
    z = uniform(np.random.default_rng(8), slots)
    c = encoder.encode(z, n, slots, scale)
    once = automorphism(automorphism(c, 5), 25)  # X^5 then X^25: rotation by 1 + 2
    check_bits("X^5 then X^25", np.roll(z, -3), encoder.decode(once, n, slots, scale).real, 30)


# ------------------------------------------------------------------------------------------------ errors
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # numpy, on the inf / nan input
def test_encoder_errors():
    n = 1024
    with pytest.raises(SlotError, match="expected 8"):
        encoder.encode(np.ones(9), n, 8, 2.0 ** 20)
    for bad in (0, 3, 12, 1024, 2048):
        with pytest.raises(SlotError, match="power of two"):
            encoder.check_slots(n, bad)
        with pytest.raises(SlotError):
            encoder.decode(np.zeros(n), n, bad, 1.0)
    with pytest.raises(SlotError, match="finite"):
        encoder.encode(np.array([1.0, np.inf]), n, 2, 2.0 ** 20)
    with pytest.raises(SlotError, match="finite"):
        encoder.encode(np.array([np.nan, 0.0]), n, 2, 2.0 ** 20)
    assert [encoder.slots_for(n, c) for c in (1, 2, 3, 5, 512)] == [1, 2, 4, 8, 512]
    with pytest.raises(SlotError, match="do not fit"):
        encoder.slots_for(n, 513)
    assert issubclass(SlotError, ValueError)


# ------------------------------------------------------------------------------------------------ through the context
@pytest.mark.filterwarnings(INSECURE)
@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_context_encode_decode_every_level(level):
    ctx = context(MAIN_LOG_N, MAIN_LEVELS)
    rng = np.random.default_rng(level)
    z = uniform(rng, ctx.slots)
    pt = ctx.encode(z, level=level)
    # the default scale is the level's managed scale (it follows the primes dropped; the parameters' scale at 0)
    assert pt.level == level and pt.scale == ctx.level_scale(level) and pt.slots == ctx.slots and not pt.is_complex
    assert ctx.level_scale(0) == ctx.params.scale
    assert pt.bound >= np.max(np.abs(z)) > pt.bound / 2  # max |value| rounded up to a power of two
    assert math.log2(pt.bound) == round(math.log2(pt.bound))
    assert pt.data.shape == (ctx.params.limbs_at_level(level), ctx.params.n)
    assert pt.data.dtype == np.uint32
    got = ctx.decode(pt)
    assert got.dtype == np.float64
    check_bits(f"context encode/decode level {level}", z, got, 44)


@pytest.mark.filterwarnings(INSECURE)
def test_context_encode_padding_complex_batch_and_scale():
    ctx = context(MAIN_LOG_N, MAIN_LEVELS)
    rng = np.random.default_rng(5)
    z = uniform(rng, (2, 3, 100), complex_=True)
    pt = ctx.encode(z, scale=2.0 ** 40)
    assert pt.batch_shape == (2, 3) and pt.is_complex and pt.scale == 2.0 ** 40
    got = ctx.decode(pt)
    assert got.shape == (2, 3, ctx.slots) and np.iscomplexobj(got)
    want = np.concatenate([z, np.zeros((2, 3, ctx.slots - 100))], axis=-1)  # zero-padded
    check_bits("context encode padded complex batch", want, got, 28)
    scalar = ctx.decode(ctx.encode(0.75))
    check_bits("context encode scalar", np.r_[0.75, np.zeros(ctx.slots - 1)], scalar, 44)


@pytest.mark.filterwarnings(INSECURE)
def test_context_sparse_slots():
    ctx = context(MAIN_LOG_N, MAIN_LEVELS, slots=64)
    assert ctx.slots == 64
    z = uniform(np.random.default_rng(6), 64, complex_=True)
    pt = ctx.encode(z)
    assert pt.slots == 64
    check_bits("context sparse 64 slots", z, ctx.decode(pt), 44)
    with pytest.raises(SlotError, match="do not fit"):
        ctx.encode(np.ones(65))


@pytest.mark.filterwarnings(INSECURE)
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_context_encode_errors():
    ctx = context(MAIN_LOG_N, MAIN_LEVELS)
    with pytest.raises(SlotError, match="do not fit"):
        ctx.encode(np.ones(ctx.slots + 1))
    with pytest.raises(SlotError, match="numbers"):
        ctx.encode(np.array(["a", "b"]))
    with pytest.raises(SlotError, match="finite"):
        ctx.encode(np.array([0.0, np.inf]))
    with pytest.raises(ParameterError, match="level"):
        ctx.encode(np.ones(4), level=MAIN_LEVELS + 1)
    params = small_params(MAIN_LOG_N, MAIN_LEVELS)
    for bad in (3, 0, params.n):
        with pytest.raises(SlotError):
            hemx.Context(params, slots=bad)


# ------------------------------------------------------------------------------------ rows encoded at their period
def _periodic_rows(rng, slots: int, periods) -> np.ndarray:
    rows = [np.tile(uniform(rng, p, complex_=True), slots // p) for p in periods]
    rows += [np.full(slots, 0.7), np.full(slots, -0.3j), np.zeros(slots)]  # a constant, X^(N/2), zero
    return np.stack(rows)


@pytest.mark.filterwarnings(INSECURE)
@settings(deadline=None, max_examples=8)
@given(ntt=st.sampled_from(["native", "butterfly", "mat3"]), level=st.integers(1, MAIN_LEVELS),
       seed=st.integers(0, 2**31 - 1), slots=st.sampled_from([None, 64]))
def test_encode_compact_is_the_encoding_at_its_period(ntt, level, seed, slots):
    """``Encoder.encode_compact``: per row the largest block b with the row's polynomial in X^b, data that widened by
    b are ``encode``'s plaintext bit for bit (native, JAX butterfly and mat3 ring plans), the residues modulo P the
    same polynomial's (``encode_ntt`` over the special primes), ``encode``'s bound; the block is the largest run of
    equal NTT values (``compact_rows``, at most N/2)."""
    from hemx.ckks import evaluator
    from hemx.circuits.lintrans import compact_rows
    from hemx.kernels import native

    if ntt == "native" and not native.available():
        pytest.skip(f"native kernels unavailable: {native.reason()}")
    ctx = hemx.Context(small_params(MAIN_LOG_N, MAIN_LEVELS), slots=slots, ntt=ntt)
    rng = np.random.default_rng(seed)
    s = ctx.slots
    periods = [1, 2, s // 4, s // 2, s, int(rng.choice([4, 8, 16]))]
    x = _periodic_rows(rng, s, periods)
    scale = 2.0 ** 30
    full = ctx.encode(x, level=level, scale=scale)
    blocks, pts, residues_p = ctx.encoder.encode_compact(x, level=level, scale=scale, special=True)
    p = ctx.params
    ps = tuple(p.special_moduli)
    z, _ = encoder.slot_values(x, s, p.n)
    want_p, _ = encoder.encode_ntt(z, scale, encoder.embed_tables(s), encoder.pow2_table(ps), ctx.plan, n=p.n,
                                   num_p=0, num_q=len(ps))
    n = p.n
    # random complex values of period p: a polynomial in X^(N / 2p) and in no smaller subring
    assert blocks.tolist() == [n // (2 * period) for period in periods] + [n // 2] * 3
    for i, (block, pt) in enumerate(zip(blocks, pts)):
        block = int(block)
        assert pt.data.shape == (p.limbs_at_level(level), n // block) and residues_p[i].shape == (len(ps), n // block)
        assert (pt.level, pt.scale, pt.slots, pt.bound, pt.context_id) == (level, scale, s, full.bound, ctx.id)
        np.testing.assert_array_equal(np.asarray(evaluator.widen(pt.data, block)), np.asarray(full.data[i]))
        np.testing.assert_array_equal(np.asarray(evaluator.widen(residues_p[i], block)), np.asarray(want_p[i]))
        assert block == min(compact_rows([full.data[i]])[0], n // 2)


@pytest.mark.filterwarnings(INSECURE)
def test_encode_compact_errors():
    import jax

    ctx = context(MAIN_LOG_N, MAIN_LEVELS)
    with pytest.raises(ParameterError, match="host values"):
        ctx.encoder.encode_compact(np.ones(4), level=1, scale=2.0 ** 30)  # one row: not (count, slots)
    with pytest.raises(ParameterError, match="host values"):
        jax.jit(lambda v: ctx.encoder.encode_compact(v, level=1, scale=2.0 ** 30)[0])(np.ones((2, 4)))
    with pytest.raises(SlotError, match="finite"):
        ctx.encoder.encode_compact(np.array([[0.0, np.inf]]), level=1, scale=2.0 ** 30)
    assert encoder_blocks(np.array([[0, 0, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 2, 0, 0, 0], [0, 3, 0, 0, 0, 0, 0, 0],
                                    [5, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 4, 0]])).tolist() == [4, 4, 1, 4, 2]


def encoder_blocks(coeffs):
    from hemx.ckks.encoding import subring_blocks

    return subring_blocks(coeffs)
