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

import reference as ref
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


@pytest.mark.parametrize("n", [8, 32, 128])
def test_rotations_and_conjugation_match_coefficient_automorphism(n):
    for steps in (1, 2, 3, n // 4 - 1):
        _check(n, A.galois_element(n, steps), seed=steps)
    _check(n, A.conjugation_element(n), seed=99)


def test_batched_leading_axes():
    _check(64, A.galois_element(64, 5), seed=1, lead=(3, 2))


@settings(max_examples=20, deadline=None)
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
