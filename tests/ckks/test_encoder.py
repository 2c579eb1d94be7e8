"""The one CKKS encoder (:func:`hemx.ckks.encoder.encode_ntt`): ``Context.encode``, the circuits' evaluators and the
networks' layers encode through it, so an encoding inside a ``jax.jit`` program equals ``Context.encode``'s bit for
bit (at every level of ``boot_16``'s chain, real and complex, several scales); and its integers are the numpy
reference embedding's (:func:`hemx.ckks.encoder.embed`) to one unit, its decoding the values."""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hemx
from hemx.ckks import encoder, evaluator
from hemx.circuits import CKKSEvaluator, SlotSimulator
from hemx.errors import OverflowBoundError, ShapeError, SlotError

from tests.helpers.ckks_helpers import context, uniform


def _values(rng, shape, complex_: bool) -> np.ndarray:
    return uniform(rng, shape, complex_=complex_, bound=2.0)


def _scales(ctx, level: int) -> list[float]:
    """The level's own scale, a small one, and one a few bits below half the level's modulus over the values'
    bound, at most 2^960 (coefficients far above 2^62: the exact residues of large floats)."""
    log_q = sum(math.log2(q) for q in ctx.params.moduli[: ctx.params.limbs_at_level(level)])
    return [ctx.level_scale(level), 2.0 ** 25, 2.0 ** min(960, math.floor(log_q - 1 - 8 - math.log2(ctx.slots)))]


def _coefficient_residues(ctx, pt) -> np.ndarray:
    """The plaintext's coefficient-domain residues ``(..., limbs, N)`` (int64)."""
    num_q = pt.data.shape[-2]
    res = evaluator.intt_q(pt.data, ctx.plan, num_p=ctx.num_p, num_q=num_q)
    return np.asarray(res).astype(np.int64)


def _integers(ctx, pt) -> np.ndarray:
    """The plaintext's integer polynomial ``(..., N)`` as Python ints (exact centered CRT of its residues)."""
    res = _coefficient_residues(ctx, pt).astype(object)
    moduli = [int(q) for q in ctx.params.moduli[: res.shape[-2]]]
    big_q = math.prod(moduli)
    weights = np.array([(big_q // q) * pow(big_q // q, -1, q) for q in moduli], dtype=object)
    x = np.einsum("...ln,l->...n", res, weights) % big_q
    return np.where(x > big_q // 2, x - big_q, x)


# ------------------------------------------------------------------------------------------------ one encoder
@pytest.mark.parametrize("complex_", [False, True])
def test_traced_equals_context_encode_at_every_level(complex_):
    """``Context.encode`` of host values and of the same values traced (a ``jax.jit`` argument, encoded inside
    the program) give the same plaintext bit for bit, at every level and several scales (N = 2^12)."""
    ctx = context(12, 3)
    rng = np.random.default_rng(1 + complex_)
    v = _values(rng, (2, ctx.slots), complex_)
    cases = [(level, scale) for level in range(ctx.params.max_level + 1) for scale in _scales(ctx, level)]
    eager = [ctx.encode(v, level=level, scale=scale) for level, scale in cases]
    traced = jax.jit(lambda x: [ctx.encode(x, level=level, scale=scale) for level, scale in cases])(v)
    for (level, scale), e, t in zip(cases, eager, traced):
        assert (t.level, t.scale, t.slots, t.is_complex, t.bound) == (level, scale, ctx.slots, complex_, None)
        assert e.bound == 2.0 ** math.ceil(math.log2(np.max(np.abs(v))))
        assert np.array_equal(np.asarray(t.data), np.asarray(e.data)), (level, scale)
        # and the encoder called directly (eager) is the same function
        pow2 = encoder.pow2_table(ctx.params.moduli)[: e.data.shape[-2]]
        data, _ = encoder.encode_ntt(v, scale, encoder.embed_tables(ctx.slots), pow2, ctx.plan, n=ctx.params.n,
                                     num_p=ctx.num_p, num_q=e.data.shape[-2])
        assert np.array_equal(np.asarray(data), np.asarray(e.data))


def test_evaluators_encode_rows_traced_and_eager():
    """``CKKSEvaluator.encode`` places ``rows``/``pos`` (zeros elsewhere) and encodes through ``Context.encode``,
    eager or traced alike; the slot simulator places them the same way."""
    ctx = context(12, 3)
    ev = CKKSEvaluator(ctx)
    rng = np.random.default_rng(5)
    v = rng.normal(size=(3, ctx.slots))
    pos = np.array([4, 0, 2])
    full = np.zeros((5, ctx.slots))
    full[pos] = v
    scale = ctx.rescale_divisor(2)
    pt = ev.encode(v, level=2, scale=scale, rows=5, pos=pos)
    assert np.array_equal(np.asarray(pt.data), np.asarray(ctx.encode(full, level=2, scale=scale).data))
    traced = jax.jit(lambda x: ev.encode(x, level=2, scale=scale, rows=5, pos=pos).data)(v)
    assert np.array_equal(np.asarray(traced), np.asarray(pt.data))
    sim = SlotSimulator.like(ctx).encode(v, level=2, scale=scale, rows=5, pos=pos)
    assert np.array_equal(sim.values, full)
    with pytest.raises(ShapeError, match="pos"):
        ev.encode(v, level=2, scale=scale, rows=5, pos=pos[:2])
    with pytest.raises(ShapeError, match="pos"):
        ev.encode(v, level=2, scale=scale, rows=4, pos=np.array([4, 0, 2]))


def test_special_prime_residues_are_of_the_same_integers():
    """Over the plan's special primes (``num_p=0``: what double hoisting multiplies by) the encoder gives the
    residues of the same integer polynomial as over ``Q``."""
    ctx = context(12, 3)
    rng = np.random.default_rng(3)
    v = _values(rng, (2, ctx.slots), True)
    scale = ctx.level_scale(2)
    pt = ctx.encode(v, level=2, scale=scale)
    ps = tuple(ctx.params.special_moduli)
    data, _ = encoder.encode_ntt(v, scale, encoder.embed_tables(ctx.slots), encoder.pow2_table(ps), ctx.plan,
                                 n=ctx.params.n, num_p=0, num_q=len(ps))
    p_res = np.asarray(evaluator.intt_q(data, ctx.plan, num_p=0, num_q=len(ps))).astype(np.int64)
    q_res = _coefficient_residues(ctx, pt)
    ints = encoder.crt_centered_float(q_res, ctx.params.moduli[: q_res.shape[-2]])  # exact: |coeff| < 2^53
    assert np.max(np.abs(ints)) < 2.0 ** 53
    assert np.array_equal(p_res, encoder.float_residues(ints, ps).astype(np.int64))


# ------------------------------------------------------------------------------------------------ precision
@pytest.mark.parametrize("slots", [1, 8, 512, 2048])
@pytest.mark.parametrize("complex_", [False, True])
def test_integers_are_the_reference_embedding_to_one_unit(slots, complex_):
    """The encoded integer polynomial is numpy's embedding (:func:`encoder.embed`) to one unit where the float
    embedding resolves units (rarely differing below 2^48), and to its float precision above; it decodes to the
    values (sparse and full packing, real and complex)."""
    ctx = context(12, 3)
    rng = np.random.default_rng(slots + complex_)
    v = _values(rng, (3, slots), complex_)
    for level in (0, ctx.params.max_level):
        for scale in _scales(ctx, level):
            pt = ctx.encode(v, level=level, scale=scale, slots=slots)
            reference = encoder.embed(v, ctx.params.n, slots, scale)
            d = _integers(ctx, pt) - np.vectorize(int, otypes=[object])(reference)
            peak = float(np.max(np.abs(reference)))
            unit = max(1.0, peak * 2.0 ** -44)  # the float embedding's resolution at this magnitude
            assert float(np.max(np.abs(d))) <= unit, (level, scale, float(np.max(np.abs(d))), peak)
            if peak < 2.0 ** 48:  # the floats resolve 1/16 of a unit: a differing rounding is rare
                assert np.count_nonzero(d) <= d.size // 256, (level, scale, np.count_nonzero(d))
            got = ctx.decode(pt)
            assert got.dtype == (np.complex128 if complex_ else np.float64)
            assert np.max(np.abs(got - v)) < max(2.0 ** -40, 4.0 * math.sqrt(ctx.params.n) / scale), (level, scale)


def test_value_checks_on_host_values():
    """Host values are checked after the embedding: non-finite values or coefficients (SlotError), coefficients
    reaching half the level's modulus (OverflowBoundError); traced values are encoded unchecked."""
    ctx = context(12, 3)
    for bad in (np.nan, np.inf, -np.inf):  # one bad value among many finite ones, at full and sparse packing
        for slots in (ctx.slots, 4):
            with pytest.raises(SlotError, match="not finite"):
                ctx.encode(np.r_[np.ones(slots - 1), bad], slots=slots)
    with pytest.raises(SlotError, match="not finite"):
        ctx.encode([1e300], scale=2.0 ** 40)
    with pytest.raises(OverflowBoundError, match="wrap around"):
        ctx.encode(np.full(ctx.slots, 1000.0), level=0, scale=2.0 ** 60)  # the constant term 1000 x 2^60
    ctx.encode(np.full(ctx.slots, 1.0), level=0, scale=2.0 ** 59)  # 2^59 < q/2 = 2^61: fits
    traced = jax.jit(lambda x: ctx.encode(x, level=0, scale=2.0 ** 60).data)(jnp.asarray([1000.0]))
    assert traced.shape == (ctx.params.limbs_at_level(0), ctx.params.n)


def test_encoder_rejects_mismatched_tables():
    ctx = context(12, 3)
    pow2 = encoder.pow2_table(ctx.params.moduli)[:2]
    with pytest.raises(ShapeError, match="slot values"):
        encoder.encode_ntt(np.ones((1, 8)), 1.0, encoder.embed_tables(16), pow2, ctx.plan, n=ctx.params.n,
                           num_p=ctx.num_p, num_q=2)


# ------------------------------------------------------------------------------------------------ boot_16
@pytest.mark.slow
def test_boot16_traced_equals_context_encode_at_every_level():
    """``boot_16`` (N = 2^16, 26 levels, 3 to 53 limbs): at every level, random real and complex values (1024 slots,
    spread over the ring) encoded inside one ``jax.jit`` program equal ``Context.encode``'s plaintexts bit for bit.
    The scales rotate through the level's own, 2^25 and one near the modulus (coefficients of hundreds of bits), so
    every level sees two of them and every scale kind each value kind at a third of the levels."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", hemx.ckks.InsecureParametersWarning)
        params = hemx.CKKSParameters.preset("boot_16")
    ctx = hemx.Context(params, slots=1024, planning="off")
    rng = np.random.default_rng(16)
    real = _values(rng, (2, ctx.slots), False)
    cplx = _values(rng, (2, ctx.slots), True)
    cases = []
    for level in range(params.max_level + 1):
        scales = _scales(ctx, level)
        cases += [(level, scales[level % 3], False), (level, scales[(level + 1) % 3], True)]

    def encode_all(x, z):
        return [ctx.encode(z if c else x, level=level, scale=scale).data for level, scale, c in cases]

    traced = jax.jit(encode_all)(real, cplx)
    for (level, scale, c), t in zip(cases, traced):
        eager = ctx.encode(cplx if c else real, level=level, scale=scale)
        assert t.shape == (2, params.limbs_at_level(level), params.n)
        assert np.array_equal(np.asarray(t), np.asarray(eager.data)), (level, scale, c)
