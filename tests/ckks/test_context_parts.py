"""The parts a Context composes (encoder, scale policy, dispatcher, evaluator, encryptor, decryptor, key
generator), each used on its own: built from the context's parameters and NTT plan, they give bit-identical
results to the context's methods, which delegate to them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hemx.ckks import evaluator
from hemx.ckks.context import managed_scales
from hemx.ckks.dispatch import Dispatcher
from hemx.ckks.encoding import Encoder
from hemx.ckks.encryptor import Decryptor, Encryptor
from hemx.ckks.key_generator import KeyGenerator
from hemx.ckks.operations import Evaluator
from hemx.ckks.sampling import Sampler
from hemx.ckks.scale_policy import ScalePolicy
from hemx.errors import ContextMismatchError, ParameterError

from tests.helpers.ckks_helpers import INSECURE, main_context, uniform

pytestmark = pytest.mark.filterwarnings(INSECURE)


def _same(x, y):
    assert np.array_equal(np.asarray(x), np.asarray(y))


@pytest.fixture(scope="module")
def setup():
    ctx, keys = main_context()
    rng = np.random.default_rng(11)
    a, b = (ctx.encrypt(uniform(rng, (2, ctx.slots)), keys) for _ in range(2))
    return ctx, keys, a, b


def test_context_holds_its_parts(setup):
    ctx, *_ = setup
    assert isinstance(ctx.encoder, Encoder) and isinstance(ctx.evaluator, Evaluator)
    assert isinstance(ctx.encryptor, Encryptor) and isinstance(ctx.decryptor, Decryptor)
    assert isinstance(ctx.key_generator, KeyGenerator) and ctx.key_generator.context is ctx
    assert ctx.evaluator.encoder is ctx.encoder and ctx.evaluator.tables is ctx.tables
    assert ctx.encoder.context_id == ctx.id and ctx.encoder.slots == ctx.slots
    assert ctx.evaluator.keyswitch == ctx.keyswitch and ctx.encryptor.sampler is ctx.sampler
    assert ctx.add.__doc__ == Evaluator.add.__doc__ and ctx.encode.__doc__ == Encoder.encode.__doc__


def test_scale_policy_is_a_value_of_the_parameters(setup):
    ctx, *_ = setup
    policy = ScalePolicy(ctx.params)
    levels = range(ctx.params.max_level + 1)
    assert tuple(policy.level_scale(lv) for lv in levels) == managed_scales(ctx.params)
    assert all(policy.level_scale(lv) == ctx.level_scale(lv) for lv in levels)
    assert policy.divisor(1) == ctx.rescale_divisor(1) and policy.divisor(0) == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.params = None
    with pytest.raises(ParameterError):
        policy.check_plain_scale(-1.0)


def test_encoder_on_its_own(setup):
    ctx, *_ = setup
    values = uniform(np.random.default_rng(2), (3, ctx.slots))
    mine = Encoder(ctx.params, ctx.plan, context_id=ctx.id)
    pt, want = mine.encode(values, level=2), ctx.encode(values, level=2)
    _same(pt.data, want.data)
    assert (pt.level, pt.scale, pt.bound, pt.slots) == (want.level, want.scale, want.bound, want.slots)
    _same(mine.decode(pt), ctx.decode(want))
    alone = Encoder(ctx.params, ctx.plan, slots=8)  # a free-standing encoder: context id 0, 8 slots
    got = alone.decode(alone.encode(values[0, :8]))
    assert got.shape == (8,) and np.max(np.abs(got - values[0, :8])) < 1e-6
    with pytest.raises(ContextMismatchError):
        alone.decode(pt)


def test_dispatcher_on_its_own(setup):
    ctx, _, a, b = setup
    d = Dispatcher(ctx.plan)
    ew = dict(num_p=ctx.num_p, num_q=a.num_limbs)
    got = d.run(evaluator.add, (a.data, b.data), (d.elementwise_plan(),), "ew", **ew)
    _same(got, evaluator.add(a.data, b.data, ctx.plan, **ew))
    assert len(d.bound) == 1


def test_evaluator_on_its_own(setup):
    ctx, keys, a, b = setup
    ev = Evaluator(Encoder(ctx.params, ctx.plan, context_id=ctx.id), reduction=ctx.reduction,
                   keyswitch=ctx.keyswitch)
    assert ev.tables is not ctx.tables and ev.dispatch is not ctx.evaluator.dispatch
    _same(ev.add(a, b).data, ctx.add(a, b).data)
    _same(ev.mul(a, b, keys).data, ctx.mul(a, b, keys).data)
    _same(ev.mul(a, 0.5).data, ctx.mul(a, 0.5).data)
    _same(ev.rotate(a, 3, keys).data, ctx.rotate(a, 3, keys).data)
    _same(ev.rescale(a).data, ctx.rescale(a).data)
    with pytest.raises(ParameterError):
        Evaluator(ev.encoder, reduction=ctx.reduction, keyswitch="nope")


def test_encryptor_and_decryptor_on_their_own(setup):
    ctx, keys, a, _ = setup
    values = uniform(np.random.default_rng(3), (ctx.slots,))
    old = ctx.sampler
    try:
        ctx.sampler = Sampler.insecure_for_tests(7)
        want = ctx.encrypt(values, keys)
    finally:
        ctx.sampler = old
    got = Encryptor(ctx.encoder, sampler=Sampler.insecure_for_tests(7)).encrypt(values, keys)
    _same(got.data, want.data)
    assert (got.level, got.scale, got.bound, got.key_id) == (want.level, want.scale, want.bound, want.key_id)
    dec = Decryptor(ctx.encoder)
    _same(dec.decrypt(a, keys), ctx.decrypt(a, keys))
    assert np.max(np.abs(dec.decrypt(got, keys) - values)) < 1e-6


def test_key_generator_on_its_own(setup):
    ctx, *_ = setup
    old = ctx.sampler
    try:
        ctx.sampler = Sampler.insecure_for_tests(9)
        want = ctx.keygen(rotations=[1], relin=False)
        ctx.sampler = Sampler.insecure_for_tests(9)
        got = KeyGenerator(ctx).generate(rotations=[1], relin=False)
    finally:
        ctx.sampler = old
    _same(got.secret.ntt, want.secret.ntt)
    assert sorted(got.galois) == sorted(want.galois)
    values = uniform(np.random.default_rng(4), (ctx.slots,))
    ct = ctx.rotate(ctx.encrypt(values, got), 1, got)
    assert np.max(np.abs(ctx.decrypt(ct, got) - np.roll(values, -1))) < 1e-4


def test_a_hook_on_the_context_sees_every_kernel(setup):
    ctx, keys, a, b = setup
    seen = []
    inner = ctx._run

    def run(fn, *args, **statics):
        seen.append(fn.__name__)
        return inner(fn, *args, **statics)

    ctx.__dict__["_run"] = run
    try:
        ctx.rotate(ctx.mul(a, b, keys), 1, keys)
    finally:
        ctx.__dict__.pop("_run")
    assert "mul_relin_rescale" in seen and "rotate_one" in seen
