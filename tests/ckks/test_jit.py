"""Every evaluation operation traces under ``jax.jit`` and ``jax.export`` on a fresh context, bit for bit.

"Fresh" means no per-level table or Galois index map has been built yet: the first use of each is inside the
trace, which must not leak tracers into the context's caches (issue 13). Each case runs the jitted operation
first, then the same operation eagerly on the same context, and compares the residues bit for bit.
"""

from __future__ import annotations

import copy

import jax
import numpy as np
import pytest

from hemx.ckks import Ciphertext, evaluator
from hemx.ckks.tables import TableCache

from tests.helpers.ckks_helpers import INSECURE, MAIN_LEVELS, MAIN_LOG_N, context_and_keys, main_context, uniform

pytestmark = pytest.mark.filterwarnings(INSECURE)


def fresh(ctx):
    """The same context (same id, so its keys stay valid) with no per-level table or index map built yet."""
    out = copy.copy(ctx)
    out.tables = TableCache(ctx.params, reduction=ctx.reduction)
    return out


# name -> f(ctx, keys, a, b, w) with ciphertexts a, b and a plain vector w; a and b are the traced arguments
OPS = {
    "add": lambda c, k, a, b, w: c.add(a, b),
    "sub": lambda c, k, a, b, w: c.sub(a, b),
    "negate": lambda c, k, a, b, w: c.negate(a),
    "add_plain": lambda c, k, a, b, w: c.add(a, w),
    "sub_scalar": lambda c, k, a, b, w: c.sub(a, 0.25),
    "mul": lambda c, k, a, b, w: c.mul(a, b, k, rescale=False),
    "mul_rescale": lambda c, k, a, b, w: c.mul(a, b, k, rescale=True),
    "mul_plain": lambda c, k, a, b, w: c.mul(a, w, rescale=False),
    "mul_plain_rescale": lambda c, k, a, b, w: c.mul(a, w, rescale=True),
    "mul_scalar": lambda c, k, a, b, w: c.mul(a, -1.5, rescale=False),
    "mul_scalar_rescale": lambda c, k, a, b, w: c.mul(a, -1.5, rescale=True),
    "mul_complex_scalar": lambda c, k, a, b, w: c.mul(a, 0.5 + 0.25j, rescale=True),
    "mul_plain_scale": lambda c, k, a, b, w: c.mul(a, 0.5, rescale=True, plain_scale=2.0 ** 60),
    "rescale": lambda c, k, a, b, w: c.rescale(a),
    "rotate": lambda c, k, a, b, w: c.rotate(a, 3, k),
    "rotate_many": lambda c, k, a, b, w: c.rotate_many(a, [1, -1, 0, 5], k),
    "conjugate": lambda c, k, a, b, w: c.conjugate(a, k),
    "drop_level": lambda c, k, a, b, w: c.drop_level(a, 1),
    # automatic scale alignment: different levels (no level spent) and the same level (one level spent)
    "add_aligned_levels": lambda c, k, a, b, w: c.add(c.mul(a, b, k, rescale=True), a),
    "sub_aligned_same_level": lambda c, k, a, b, w: c.sub(c.mul(a, b, k, rescale=True), c.mul(a, 0.5, rescale=True)),
}


@pytest.fixture(scope="module")
def case():
    """Fresh contexts, inputs, and every operation as one function ``f(a, b, c) -> {name: result}``.

    All operations go into one program (one jit compile and one export compile instead of one per operation):
    each table and index map is still first built inside the trace, by whichever operation needs it first.
    ``c`` is a 64-slot ciphertext of a context with power-of-two rotation keys, for ``sum_slots``."""
    ctx, keys = main_context()
    ctx64, keys64 = context_and_keys(MAIN_LOG_N, MAIN_LEVELS, slots=64, rotations="power_of_two")
    rng = np.random.default_rng(31)
    x, y, w = (uniform(rng, ctx.slots) for _ in range(3))
    a, b = ctx.encrypt(x, keys), ctx.encrypt(y, keys)
    c = ctx64.encrypt(uniform(rng, ctx64.slots), keys64)
    ctx, ctx64 = fresh(ctx), fresh(ctx64)

    def f(a, b, c):
        out = {name: op(ctx, keys, a, b, w) for name, op in OPS.items()}
        out["sum_slots"] = ctx64.sum_slots(c, keys64)
        return out

    return f, (a, b, c), (ctx, ctx64)


@pytest.fixture(scope="module")
def results(case):
    """(jitted, exported, eager) results; the trace of the jit runs first, on the fresh contexts."""
    f, args, _ = case
    jitted = jax.jit(f)(*args)
    # with hemx's native CPU kernels the CPU lowering holds their custom calls (evaluator.export_safety_checks)
    exported = jax.export.export(jax.jit(f), platforms=["cpu"],
                                 disabled_checks=evaluator.export_safety_checks())(*args)
    assert exported.platforms == ("cpu",)
    return jitted, exported.call(*args), f(*args)


def _leaves(out):
    return out if isinstance(out, list) else [out]


def assert_same(got, want):
    for g, e in zip(_leaves(got), _leaves(want), strict=True):
        assert isinstance(g, Ciphertext)
        assert (g.level, g.scale, g.slots, g.is_complex, g.key_id) == (e.level, e.scale, e.slots, e.is_complex,
                                                                       e.key_id)
        assert g.data.dtype == e.data.dtype and g.data.shape == e.data.shape
        assert np.array_equal(np.asarray(g.data), np.asarray(e.data)), "traced result differs from eager"


@pytest.mark.parametrize("name", sorted(OPS) + ["sum_slots"])
def test_jit_on_fresh_context_equals_eager(results, name):
    jitted, _, eager = results
    assert_same(jitted[name], eager[name])


@pytest.mark.parametrize("name", sorted(OPS) + ["sum_slots"])
def test_export_on_fresh_context_equals_eager(results, name):
    _, exported, eager = results
    assert_same(exported[name], eager[name])


def test_tables_built_in_a_trace_are_concrete(case, results):
    """After the traces, the contexts' caches hold concrete device arrays, no tracers."""
    for ctx in case[2]:
        leaves = ctx.tables.arrays()
        arrays = [x for x in leaves if isinstance(x, jax.Array)]
        assert arrays and not any(isinstance(x, jax.core.Tracer) for x in leaves)
        assert all(x.is_fully_addressable for x in arrays)  # a concrete array (a tracer has no buffers)


def test_ciphertext_pytree_metadata_is_static():
    ctx, keys = main_context()
    a = ctx.encrypt(np.ones(4), keys)
    leaves, tree = jax.tree_util.tree_flatten(a)
    assert len(leaves) == 1 and leaves[0] is a.data
    rebuilt = jax.tree_util.tree_unflatten(tree, leaves)
    assert rebuilt == a
    # the metadata is part of the tree structure: a different scale or level is a different jit signature
    assert jax.tree_util.tree_structure(a.replace(scale=a.scale * 2)) != tree
    assert jax.tree_util.tree_structure(ctx.drop_level(a, 1)) != tree
