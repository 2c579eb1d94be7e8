"""The fast encoding path (issue 28): ``encoder.embed`` (gather + half-length real FFT, integer-valued float64),
exact residues of those floats on the host (``float_residues``) and in the kernel (``residues_from_float``,
fused with the NTT by ``Context.encode``), checked against Python integers and the scatter/complex-FFT formula."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hemx.ckks import encoder
from hemx.ckks.encoder import _slot_tables
from hemx.errors import OverflowBoundError, ParameterError, SlotError
from hemx.kernels import modarith

from tests.helpers.ckks_helpers import context

MODULI = (2**31 - 1, 1073741789, 1048573, 1040407, 3)  # 31-, 30-, 20-bit primes and the smallest odd modulus
EDGES = (0.0, -0.0, 1.0, -1.0, 2.0**53 - 1, 2.0**53, -(2.0**53), 2.0**53 + 2, 2.0**62 - 1024, 2.0**62,
         -(2.0**62), 2.0**63, -(2.0**63), 2.0**64, 3.0 * 2.0**200, -(2.0**1023), np.finfo(np.float64).max)


def python_residues(c: np.ndarray, moduli) -> np.ndarray:
    """The reference: every float as a Python int, reduced by Python's ``%``."""
    ints = [int(v) for v in np.asarray(c).reshape(-1)]
    out = np.array([[v % q for v in ints] for q in moduli], dtype=np.uint64)  # (k, size)
    return np.moveaxis(out.reshape((len(moduli),) + np.shape(c)), 0, -2).astype(np.uint32)


def scatter_embed(values, n: int, slots: int, scale: float) -> np.ndarray:
    """The textbook formula: evaluations scattered to the odd powers, a complex DFT, the twist, rounding."""
    z = np.asarray(values, dtype=np.complex128)
    k, kc, twist = _slot_tables(slots)
    m = 2 * slots
    evals = np.zeros(z.shape[:-1] + (m,), dtype=np.complex128)
    evals[..., k] = z
    evals[..., kc] = np.conj(z)
    coeffs = (np.fft.fft(evals, axis=-1) / m * np.conj(twist)).real * scale
    out = np.zeros(z.shape[:-1] + (n,))
    out[..., :: n // m] = np.rint(coeffs)
    return out


integral_floats = st.one_of(
    st.integers(min_value=-(2**62), max_value=2**62).map(float),
    st.builds(lambda m, e: float(m) * 2.0**e, st.integers(-(2**53) + 1, 2**53 - 1), st.integers(0, 970)),
    st.sampled_from(EDGES),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(integral_floats, min_size=1, max_size=24))
def test_float_residues_equal_python_integers(values):
    c = np.array(values, dtype=np.float64)
    want = python_residues(c, MODULI)
    assert np.array_equal(encoder.float_residues(c, MODULI), want)
    got = modarith.residues_from_float(c, modarith.pow2_table(MODULI), modarith.make_modulus_table(MODULI))
    assert np.array_equal(np.asarray(got), want)


def test_float_residues_batches_and_edges():
    rng = np.random.default_rng(7)
    c = np.rint(rng.standard_normal((3, 2, 40)) * 2.0 ** rng.integers(0, 900, (3, 2, 40)))
    c.reshape(-1)[: len(EDGES)] = EDGES
    want = python_residues(c, MODULI)
    assert encoder.float_residues(c, MODULI).shape == (3, 2, len(MODULI), 40)
    assert np.array_equal(encoder.float_residues(c, MODULI), want)
    kernel = modarith.residues_from_float(c, modarith.pow2_table(MODULI), modarith.make_modulus_table(MODULI))
    assert np.array_equal(np.asarray(kernel), want)


def test_float_residues_refuse_bad_input():
    with pytest.raises(ParameterError, match="finite"):
        encoder.float_residues(np.array([1.0, np.inf]), MODULI)
    with pytest.raises(ParameterError, match="2\\^32"):
        encoder.float_residues(np.array([1.0]), (2**33 + 1,))


@pytest.mark.parametrize("n,slots,is_complex", [(64, 32, False), (64, 32, True), (64, 8, True), (64, 4, False),
                                                (16, 1, False), (16, 1, True), (2**13, 2**12, True)])
def test_embed_equals_the_scatter_formula(n, slots, is_complex):
    rng = np.random.default_rng(slots + is_complex)
    z = rng.uniform(-1, 1, (3, slots)) + (1j * rng.uniform(-1, 1, (3, slots)) if is_complex else 0)
    got = encoder.embed(z, n, slots, 2.0**40)
    assert got.dtype == np.float64 and got.shape == (3, n)
    assert np.array_equal(got, scatter_embed(z, n, slots, 2.0**40))
    assert np.array_equal(encoder.encode(z, n, slots, 2.0**40), got.astype(np.int64))


def test_embed_real_values_in_a_complex_array_take_the_real_path():
    z = np.random.default_rng(3).uniform(-1, 1, 32)
    assert np.array_equal(encoder.embed(z + 0j, 64, 32, 2.0**30), encoder.embed(z, 64, 32, 2.0**30))


def test_embed_errors():
    with pytest.raises(SlotError, match="not finite"):
        encoder.embed(np.array([1.0, np.nan, 0.0, 0.0]), 16, 4, 2.0**20)
    with pytest.raises(SlotError, match="expected 4"):
        encoder.embed(np.ones(3), 16, 4, 2.0**20)
    with pytest.raises(OverflowBoundError, match="wrap around"):
        encoder.embed(np.ones(4), 16, 4, 2.0**60, log_q=40)


def test_huge_coefficients_encode_as_python_integers_do():
    """Above 2^62 ``encode`` returns Python ints; ``Context.to_ntt_q`` of them and of the floats agree bit for bit."""
    ctx = context(10, 3)
    z = np.random.default_rng(5).uniform(-1, 1, (2, ctx.slots))
    scale = 2.0**70
    floats = encoder.embed(z, ctx.params.n, ctx.slots, scale)
    ints = encoder.encode(z, ctx.params.n, ctx.slots, scale)
    assert ints.dtype == object and float(np.max(np.abs(floats))) >= 2.0**62
    level = ctx.params.max_level
    assert np.array_equal(np.asarray(ctx.to_ntt_q(floats, level)), np.asarray(ctx.to_ntt_q(ints, level)))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=-(2**40), max_value=2**40), min_size=1, max_size=16),
       st.integers(min_value=0, max_value=4))
def test_residues_of_small_and_large_integers(values, shrink):
    """``residues`` reduces small values (|x| below every modulus: secrets, errors) without a division; the
    result equals Python's ``%`` on either side of that threshold."""
    qmin = min(MODULI)
    ints = np.array([v >> (8 * shrink) for v in values] + [qmin - 1, -(qmin - 1), 0], dtype=np.int64)
    assert np.array_equal(encoder.residues(ints, MODULI), python_residues(ints.astype(np.float64), MODULI))
    small = np.array([-2, -1, 0, 1, 2], dtype=np.int64)
    assert np.array_equal(encoder.residues(small, MODULI), python_residues(small.astype(np.float64), MODULI))
