"""hemx.kernels.ntt with the limbs on another axis (``limb_axis``): limb-major batches ``(L, B, N)`` and more.

Every output value is checked against the naive negacyclic transform in Python integers
(reference.ntt_naive, bit-reversed order), independent of every kernel; the inverse must give the input back.
"""

from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import reference as ref
from hemx import nt
from hemx.errors import ShapeError
from hemx.kernels import ntt as K

METHODS = list(K.METHODS)


@lru_cache(maxsize=None)
def ring(n: int, method: str, reduction: str = "shoup"):
    qs = tuple(nt.ntt_primes(b, 1, n)[0] for b in (31, 27, 22))
    split = (4, n // 4) if method in ("mat3", "four_step") else ((4, 2, n // 8) if method == "multilevel" else None)
    return qs, K.make_plan(n, qs, method, reduction=reduction, split=split)


def residues(shape, limb_axis: int, qs, seed: int, edges: bool = True) -> np.ndarray:
    """uint32 data with the limbs on ``limb_axis``: entry with limb index l uniform in [0, q_l), plus edges."""
    rng = np.random.default_rng(seed)
    moved = np.moveaxis(np.empty(shape, np.uint32), limb_axis, -2)  # (..., L, N) view of the target shape
    out = np.stack([rng.integers(0, q, size=moved.shape[:-2] + moved.shape[-1:]) for q in qs], axis=-2)
    out = out.astype(np.uint32)
    if edges:
        flat = out.reshape(-1, len(qs), shape[-1])
        flat[0, :, 0] = np.asarray(qs, np.uint32) - 1  # q - 1
        flat[-1, :, :] = 0  # an all-zero polynomial
        flat[0, :, -1] = np.asarray(qs, np.uint32) - 1
    return np.moveaxis(out, -2, limb_axis)


def naive(x: np.ndarray, limb_axis: int, qs) -> np.ndarray:
    """The naive bit-reversed negacyclic NTT of every polynomial, in the same layout as ``x``."""
    moved = np.moveaxis(x, limb_axis, -2)
    n = x.shape[-1]
    flat = moved.reshape(-1, len(qs), n)
    want = np.empty(flat.shape, np.int64)
    for t in range(flat.shape[0]):
        for l, q in enumerate(qs):
            want[t, l] = ref.ntt_naive(flat[t, l].tolist(), q, ref.psi(n, q))
    return np.moveaxis(want.reshape(moved.shape), -2, limb_axis)


@pytest.mark.parametrize("reduction", ["shoup", "montgomery", "barrett"])
@pytest.mark.parametrize("method", METHODS)
def test_limb_major_batch_matches_naive(method, reduction):
    n = 32
    qs, plan = ring(n, method, reduction)
    x = residues((len(qs), 3, n), 0, qs, seed=5)
    fwd = jax.jit(K.ntt, static_argnames="limb_axis")
    inv = jax.jit(K.intt, static_argnames="limb_axis")
    out = fwd(jnp.asarray(x), plan, limb_axis=0)
    assert out.shape == x.shape and out.dtype == jnp.uint32
    np.testing.assert_array_equal(np.asarray(out).astype(np.int64), naive(x, 0, qs))
    np.testing.assert_array_equal(np.asarray(inv(out, plan, limb_axis=0)), x)


@pytest.mark.parametrize("method", METHODS)
def test_limbs_between_batch_axes(method):
    """``(2, L, 3, N)`` with the limbs on axis 1 (= -3): both spellings, same values as the naive transform."""
    n = 16
    qs, plan = ring(n, method)
    x = residues((2, len(qs), 3, n), 1, qs, seed=11)
    want = naive(x, 1, qs)
    for axis in (1, -3):
        out = np.asarray(K.ntt(jnp.asarray(x), plan, limb_axis=axis))
        np.testing.assert_array_equal(out.astype(np.int64), want)
        np.testing.assert_array_equal(np.asarray(K.intt(jnp.asarray(out), plan, limb_axis=axis)), x)


_ntt_axis = jax.jit(K.ntt, static_argnames="limb_axis")
_intt_axis = jax.jit(K.intt, static_argnames="limb_axis")


@settings(deadline=None)
@given(
    method=st.sampled_from(METHODS),
    # limb axis first or third, with none or two axes between it and N: 100 examples compile at most 16 programs
    # (each compile is the cost here; the limb axis in the middle of a batch is pinned above, at axis 1 and -3)
    lead=st.sampled_from([[], [1, 2]]),
    mid=st.sampled_from([[], [2, 1]]),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_limb_position(method, lead, mid, seed):
    """Jitted (the unjitted calls are pinned above): an example repeating a (method, shape) pair reuses its two
    compiled programs, where op-by-op dispatch paid about half a second per example."""
    n = 16
    qs, plan = ring(n, method)
    shape = tuple(lead) + (len(qs),) + tuple(mid) + (n,)
    axis = len(lead)
    x = residues(shape, axis, qs, seed, edges=False)
    out = np.asarray(_ntt_axis(jnp.asarray(x), plan, limb_axis=axis))
    np.testing.assert_array_equal(out.astype(np.int64), naive(x, axis, qs))
    np.testing.assert_array_equal(np.asarray(_intt_axis(jnp.asarray(out), plan, limb_axis=axis)), x)


@pytest.mark.parametrize("method", ["butterfly", "mat3"])
def test_bad_limb_axis(method):
    n = 16
    qs, plan = ring(n, method)
    x = jnp.asarray(residues((len(qs), 2, n), 0, qs, seed=1))
    for axis in (-1, 2, 3, -4, True, 0.0, "0"):
        for fn in (K.ntt, K.intt):
            with pytest.raises(ShapeError):
                fn(x, plan, limb_axis=axis)
    with pytest.raises(ShapeError, match=r"L = 3, N = 16; got \(3, 2, 16\)"):  # axis 1 (= -2) holds 2, not L
        K.ntt(x, plan, limb_axis=1)
    with pytest.raises(ShapeError, match="L on axis 1 and N last"):
        K.ntt(x[:, None], plan, limb_axis=1)
    with pytest.raises(ShapeError):  # (2, L, N) data read as limb-major: 2 limbs on axis 0
        K.ntt(jnp.swapaxes(x, 0, 1), plan, limb_axis=0)
