"""Whole circuits under ``jax.jit`` and ``jax.export`` on a fresh context: one XLA program, bit for bit the eager
result (issue 13). "Fresh": no per-level table or Galois index map built before the trace."""

from __future__ import annotations

import copy

import jax
import numpy as np
import pytest

from hemx.circuits import LinearTransform, chebyshev_coefficients, evaluate_polynomial
from hemx.ckks.evaluator import export_safety_checks
from hemx.ckks.tables import TableCache

from tests.helpers.ckks_helpers import INSECURE, context, context_and_keys

pytestmark = pytest.mark.filterwarnings(INSECURE)

LOG_N, LEVELS, SLOTS = 10, 4, 32


def fresh(ctx):
    """The same context (same id, so its keys stay valid) with no per-level table or index map built yet."""
    out = copy.copy(ctx)
    out.tables = TableCache(ctx.params, reduction=ctx.reduction)
    return out


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(41)
    m = rng.uniform(-1, 1, (SLOTS, SLOTS))
    lt = LinearTransform(context(LOG_N, LEVELS, slots=SLOTS), m)
    ctx, keys = context_and_keys(LOG_N, LEVELS, slots=SLOTS, rotations=lt.rotations)
    ct = ctx.encrypt(rng.uniform(-1, 1, SLOTS), keys)
    return ctx, keys, ct, m


def _same(a, b):
    assert (a.level, a.scale, a.slots) == (b.level, b.scale, b.slots)
    assert np.array_equal(np.asarray(a.data), np.asarray(b.data))


def test_polynomial_jit_and_export_on_fresh_context(setup):
    ctx, keys, ct, _ = setup
    c = chebyshev_coefficients(np.tanh, 7, (-2, 2))
    new = fresh(ctx)
    circuit = jax.jit(lambda x: evaluate_polynomial(new, x, c, keys, basis="chebyshev", interval=(-2, 2)))
    jitted = circuit(ct)
    _same(jitted, evaluate_polynomial(ctx, ct, c, keys, basis="chebyshev", interval=(-2, 2)))
    exported = jax.export.export(circuit, disabled_checks=export_safety_checks())(ct)  # native calls on CPU
    assert exported.platforms == ("cpu",)
    _same(exported.call(ct), jitted)


def test_linear_transform_jit_on_fresh_context(setup):
    ctx, keys, ct, m = setup
    new = fresh(ctx)
    lt = LinearTransform(new, m)  # built outside the trace; applied inside it
    jitted = jax.jit(lambda x: lt.apply(x, keys))(ct)
    _same(jitted, LinearTransform(ctx, m).apply(ct, keys))
