"""The eager dispatch of Context operations (``Context._run``): packed tables, one cached jitted wrapper.

Eagerly, an operation's tables (a level's ~190 arrays, the plan's ~20) are packed once into a few buffers and the
evaluator kernel runs through a shared jitted wrapper that unpacks them. These tests pin that the packing is
lossless, that the eager results are bit-identical to calling the evaluator kernels directly, that traces
(jit, vmap) bypass it and leave nothing cached, that replaced tables are noticed, and that every input check
still raises. No timing here.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from hemx.ckks import Ciphertext, evaluator
from hemx.ckks import context as context_mod
from hemx.ckks.tables import PACK_MAX_ELEMENTS, TableCache, pack_tree, unpack_tree
from hemx.errors import (ContextMismatchError, KeyMismatchError, LevelError, ParameterError, ScaleMismatchError,
                         SlotError)
from hemx.kernels import automorphism, native

from tests.helpers.ckks_helpers import INSECURE, MAIN_LEVELS, MAIN_LOG_N, context_and_keys, main_context, uniform

pytestmark = pytest.mark.filterwarnings(INSECURE)

NTTS = ["mat3", "native" if native.available() else "butterfly"]


@pytest.fixture(scope="module", params=NTTS)
def setup(request):
    ctx, keys = context_and_keys(MAIN_LOG_N, MAIN_LEVELS, rotations=(1, 3), conjugation=True, ntt=request.param)
    rng = np.random.default_rng(5)
    a, b = (ctx.encrypt(uniform(rng, (2, ctx.slots)), keys) for _ in range(2))
    return ctx, keys, a, b


def _same(x, y):
    assert np.array_equal(np.asarray(x), np.asarray(y))


def _leaves_equal(t1, t2):
    l1, d1 = jax.tree_util.tree_flatten(t1)
    l2, d2 = jax.tree_util.tree_flatten(t2)
    assert d1 == d2 and len(l1) == len(l2)
    for x, y in zip(l1, l2):
        assert x.dtype == y.dtype and x.shape == y.shape
        _same(x, y)


def test_pack_tree_round_trips_level_tables_and_plan(setup):
    ctx = setup[0]
    for tree in (ctx.plan, ctx.tables.level(MAIN_LEVELS), ctx.tables.level(0), ctx._elementwise_plan()):
        buffers, layout = pack_tree(tree)
        assert len(buffers) == layout.num_buffers
        small = [x for x in jax.tree_util.tree_leaves(tree) if x.size <= PACK_MAX_ELEMENTS]
        large = [x for x in jax.tree_util.tree_leaves(tree) if x.size > PACK_MAX_ELEMENTS]
        assert len(buffers) == len({np.dtype(x.dtype) for x in small}) + len(large)  # one buffer per dtype
        _leaves_equal(unpack_tree(buffers, layout), tree)
        _leaves_equal(jax.jit(lambda *b, layout=layout: unpack_tree(b, layout))(*buffers), tree)  # traced too
        hash(layout)  # static: part of a jit cache key


def test_pack_tree_keeps_large_leaves_whole_and_refuses_tracers():
    big, small = np.arange(PACK_MAX_ELEMENTS + 1, dtype=np.uint32), np.arange(6, dtype=np.uint32).reshape(2, 3)
    buffers, layout = pack_tree({"big": jax.device_put(big), "s": small, "t": small[:1]})
    assert len(buffers) == 2 and buffers[1].shape == big.shape
    out = unpack_tree(buffers, layout)
    _same(out["big"], big), _same(out["s"], small), _same(out["t"], small[:1])
    with pytest.raises(TypeError):
        jax.jit(lambda x: pack_tree({"x": x}))(small)
    with pytest.raises(TypeError):
        pack_tree({"x": 3})


def test_eager_ops_equal_the_evaluator_kernels(setup):
    ctx, keys, a, b = setup
    t = ctx.tables.level(a.level)
    ks = dict(num_p=ctx.num_p, reduction=ctx.reduction, dataflow=ctx.keyswitch)
    ew = dict(num_p=ctx.num_p, num_q=a.num_limbs)
    relin = keys.relin
    g = automorphism.galois_element(ctx.params.n, 3)
    gkey = keys.galois[g]
    _same(ctx.add(a, b).data, evaluator.add(a.data, b.data, ctx.plan, **ew))
    _same(ctx.sub(a, b).data, evaluator.sub(a.data, b.data, ctx.plan, **ew))
    _same(ctx.negate(a).data, evaluator.negate(a.data, ctx.plan, **ew))
    _same(ctx.mul(a, b, keys, rescale=False).data, evaluator.mul_relin(a.data, b.data, relin.material, ctx.plan, t, **ks))
    _same(ctx.mul(a, b, keys, rescale=True).data,
          evaluator.mul_relin_rescale(a.data, b.data, relin.material, ctx.plan, t, **ks))
    _same(ctx.rescale(a).data, evaluator.rescale(a.data, ctx.plan, t, num_p=ctx.num_p, reduction=ctx.reduction))
    _same(ctx.rotate(a, 3, keys).data,
          evaluator.rotate_one(a.data, ctx.tables.index_map(g), gkey.material, ctx.plan, t, **ks))
    for flow in ("mp", "dc", "oc"):  # the dataflow is part of the cache key
        _same(ctx.rotate(a, 3, keys, keyswitch=flow).data,
              evaluator.rotate_one(a.data, ctx.tables.index_map(g), gkey.material, ctx.plan, t, **dict(ks, dataflow=flow)))
    hoisted = ctx.rotate_many(a, [1, 3], keys)
    _same(hoisted[1].data, ctx.rotate(a, 3, keys).data)


def test_eager_ops_equal_their_jitted_and_vmapped_forms(setup):
    """Under jit and vmap the operations call the kernels directly (the traced path); results bit-identical."""
    ctx, keys, a, b = setup
    ops = {
        "add": lambda x, y: ctx.add(x, y),
        "add_plain": lambda x, y: ctx.add(x, 0.5),
        "mul_plain": lambda x, y: ctx.mul(x, 0.75, rescale=True),
        "mul_rescale": lambda x, y: ctx.mul(x, y, keys, rescale=True),
        "rotate": lambda x, y: ctx.rotate(x, 1, keys),
        "conjugate": lambda x, y: ctx.conjugate(x, keys),
        "aligned": lambda x, y: ctx.add(ctx.mul(x, y, keys, rescale=True), x),
    }
    for name, op in ops.items():
        eager = op(a, b)
        jitted = jax.jit(op)(a, b)
        mapped = jax.vmap(op)(a, b)  # the batch axis of a and b
        for got in (jitted, mapped):
            assert (got.level, got.scale, got.is_complex, got.key_id) == (eager.level, eager.scale, eager.is_complex,
                                                                          eager.key_id), name
            _same(got.data, eager.data)
    for entry in ctx._bound.values():  # nothing traced was cached
        assert not any(isinstance(x, jax.core.Tracer) for x in entry[2])


def test_replaced_tables_are_noticed(setup):
    ctx, keys, a, b = setup
    want = ctx.mul(a, b, keys, rescale=True).data
    old_tables = ctx.tables
    try:
        ctx.tables = TableCache(ctx.params, reduction=ctx.reduction)
        got = ctx.mul(a, b, keys, rescale=True)
        entry = ctx._bound[(evaluator.mul_relin_rescale, a.level, ctx.num_p, ctx.reduction, ctx.keyswitch)]
        assert entry[0][1] is ctx.tables.level(a.level)  # rebuilt with the new tables
        _same(got.data, want)
    finally:
        ctx.tables = old_tables
    ctx.tables.clear()
    _same(ctx.mul(a, b, keys, rescale=True).data, want)


def test_contexts_with_equal_parameters_share_the_compiled_wrapper():
    ctx1, keys1 = main_context()
    ctx2, keys2 = context_and_keys(MAIN_LOG_N, MAIN_LEVELS, seed=7)
    x = np.linspace(-1, 1, 8)
    r1 = ctx1.add(ctx1.encrypt(x, keys1), ctx1.encrypt(x, keys1))
    r2 = ctx2.add(ctx2.encrypt(x, keys2), ctx2.encrypt(x, keys2))
    assert np.allclose(ctx1.decrypt(r1, keys1)[:8], 2 * x, atol=1e-3)
    assert np.allclose(ctx2.decrypt(r2, keys2)[:8], 2 * x, atol=1e-3)
    key = (evaluator.add, "ew", ctx1.num_p, r1.num_limbs)
    assert ctx1._bound[key][1] is ctx2._bound[key][1]  # one jitted wrapper (and its compiled programs)
    assert context_mod._bound_callable.cache_info().currsize >= 1


def test_results_keep_every_field(setup):
    ctx, keys, a, b = setup
    out = ctx.add(a, b)
    assert isinstance(out, Ciphertext) and out.context_id == ctx.id and out.key_id == a.key_id
    assert (out.level, out.scale, out.slots, out.is_complex) == (a.level, a.scale, a.slots, False)
    m = ctx.mul(a, b, keys, rescale=True)
    assert m.level == a.level - 1 and m.scale == a.scale * b.scale / ctx.rescale_divisor(a.level)
    assert a.data.shape[-2] == m.data.shape[-2] + ctx.params.level_sizes[a.level]
    assert hash(jax.tree_util.tree_structure(out)) == hash(jax.tree_util.tree_structure(a))


def test_input_checks_still_raise(setup):
    ctx, keys, a, b = setup
    other, other_keys = context_and_keys(MAIN_LOG_N, MAIN_LEVELS, seed=3)
    c = other.encrypt(np.ones(4), other_keys)
    with pytest.raises(ContextMismatchError):
        ctx.add(a, c)
    with pytest.raises(ContextMismatchError):
        ctx.mul(a, c, keys, rescale=False)
    with pytest.raises(SlotError):
        ctx.add(a, "x")
    same_ctx_other_keys = ctx.keygen()
    d = ctx.encrypt(np.ones(4), same_ctx_other_keys)
    with pytest.raises(KeyMismatchError):
        ctx.add(a, d)
    with pytest.raises(KeyMismatchError):
        ctx.mul(a, d, keys, rescale=False)
    with pytest.raises(ScaleMismatchError):
        ctx.add(a, a.replace(scale=a.scale * 4))
    with pytest.raises(ParameterError):
        ctx.mul(a, b, rescale=False)  # no relinearization key
    with pytest.raises(ParameterError):
        ctx.rotate(a, 1, None)
    with pytest.raises(LevelError):
        ctx.rescale(ctx.drop_level(a, 0))
    with pytest.raises(Exception):  # batch shapes that do not broadcast
        ctx.add(a, ctx.encrypt(np.ones((3, 4)), keys))
