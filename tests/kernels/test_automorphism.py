"""hemx.kernels.automorphism: X -> X^g on NTT-domain data, against Python-integer evaluations.

The NTT-domain slot p of a polynomial a holds a(psi^(2 brv(p) + 1)) (reference.ntt_eval). The automorphism
sigma_g(a)(X) = a(X^g) is built in the coefficient domain with Python integers (coefficient j moves to
j g mod 2N, negated past N) and evaluated independently; the kernel permutes the NTT slots of a instead.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import reference as ref
from hemx import nt
from hemx.errors import ParameterError, ShapeError
from hemx.kernels import automorphism as A

_apply = jax.jit(A.apply_ntt_automorphism)


def _sigma_coeffs(a: list[int], g: int, q: int) -> list[int]:
    """Coefficients of a(X^g) mod (X^N + 1, q), with Python integers."""
    n = len(a)
    out = [0] * n
    for j, c in enumerate(a):
        e = (j * g) % (2 * n)
        out[e % n] = (out[e % n] + (c if e < n else -c)) % q
    return out


def _ntt_slots(a: list[int], q: int) -> list[int]:
    """Slot p holds a(psi^(2 brv(p) + 1)) mod q (the kernels' bit-reversed evaluation order)."""
    return ref.ntt_naive(a, q, ref.psi(len(a), q))


def _check(n: int, g: int, seed: int, lead: tuple[int, ...] = ()) -> None:
    qs = nt.ntt_primes(31, 2, n)
    rng = np.random.default_rng(seed)
    coeffs = [[int(v) for v in rng.integers(0, q, n)] for q in qs]
    slots = np.array([_ntt_slots(c, q) for c, q in zip(coeffs, qs)], dtype=np.uint32)  # (L, N)
    want = np.array([_ntt_slots(_sigma_coeffs(c, g, q), q) for c, q in zip(coeffs, qs)], dtype=np.uint32)
    x = np.broadcast_to(slots, lead + slots.shape)
    got = np.asarray(_apply(x, A.ntt_index_map(n, g)))
    assert got.shape == x.shape
    np.testing.assert_array_equal(got, np.broadcast_to(want, got.shape))


def _slots(coeffs: np.ndarray) -> np.ndarray:
    """CKKS slots of a real polynomial (numpy, no hemx): slot j = m(zeta^(5^j)), zeta = exp(i pi / N)."""
    n = coeffs.shape[-1]
    exps = np.array([pow(5, j, 2 * n) for j in range(n // 2)])
    return np.exp(1j * np.pi * np.outer(exps, np.arange(n)) / n) @ coeffs


def _sigma_real(coeffs: np.ndarray, g: int) -> np.ndarray:
    n = coeffs.shape[-1]
    out = np.zeros(n)
    for j, c in enumerate(coeffs):
        e = (j * g) % (2 * n)
        out[e % n] += c if e < n else -c
    return out


@pytest.mark.parametrize("n", [16, 256])
def test_galois_elements_rotate_and_conjugate_the_slots(n):
    """What the elements mean, checked on the canonical embedding in numpy: X -> X^galois_element(N, s) moves
    slot j + s to slot j (numpy.roll(z, -s)), for negative and out-of-range steps too, and
    X -> X^conjugation_element(N) conjugates every slot."""
    m = np.random.default_rng(n).uniform(-1, 1, n)
    z = _slots(m)
    for s in (1, -1, 2, 3, -7, n // 4, n // 2 - 1, n // 2 + 1, 5 * n):
        got = _slots(_sigma_real(m, A.galois_element(n, s)))
        np.testing.assert_allclose(got, np.roll(z, -s), atol=1e-9 * n, err_msg=f"steps {s}")
    np.testing.assert_allclose(_slots(_sigma_real(m, A.conjugation_element(n))), np.conj(z), atol=1e-9 * n)


@pytest.mark.parametrize("n", [8, 32, 128])
def test_rotations_and_conjugation_match_coefficient_automorphism(n):
    for steps in (1, 2, 3, n // 4 - 1):
        _check(n, A.galois_element(n, steps), seed=steps)
    _check(n, A.conjugation_element(n), seed=99)


def test_batched_leading_axes():
    _check(64, A.galois_element(64, 5), seed=1, lead=(3, 2))


@settings(deadline=None)
@given(log_n=st.integers(2, 6), g_half=st.integers(0, 1 << 20), seed=st.integers(0, 2**32 - 1))
def test_any_odd_element(log_n, g_half, seed):
    n = 1 << log_n
    _check(n, (2 * g_half + 1) % (2 * n), seed)


def test_index_map_is_a_permutation_and_identity_for_one():
    n = 256
    for g in (1, 5, 25, 2 * n - 1):
        m = A.ntt_index_map(n, g)
        assert m.dtype == np.int32 and sorted(m.tolist()) == list(range(n))
    np.testing.assert_array_equal(A.ntt_index_map(n, 1), np.arange(n))


def test_bad_inputs():
    with pytest.raises(ParameterError):
        A.ntt_index_map(16, 4)  # even: not a Galois element
    with pytest.raises(ShapeError):
        A.apply_ntt_automorphism(np.zeros((2, 16), np.uint32), A.ntt_index_map(32, 5))
