"""``Context.dot_plain`` (a sum of plaintext products in one pass) and ``rotate_many(stacked=True)``: bit-exact
against the operations they replace, decrypted against numpy, and refused with hemx errors on bad operands."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from hemx.errors import ContextMismatchError, ParameterError, ShapeError

from tests.helpers.ckks_helpers import context, context_and_keys, uniform

LOG_N, LEVELS = 10, 4
STEPS = (1, 3, 0, 17, 1)


def setup(rotations=()):
    return context_and_keys(LOG_N, LEVELS, rotations=rotations)


def stack(ctx, cts):
    return cts[0].replace(data=jnp.stack([c.data for c in cts]))


def check_sum_of_products(ctx, keys, got, xs, vals):
    """``got``, rescaled and decrypted, against numpy's sum of the decrypted ``xs`` times the plain rows ``vals``."""
    dec = ctx.decrypt(ctx.rescale(got), keys)
    ref = sum(ctx.decrypt(x, keys) * vals[i] for i, x in enumerate(xs))
    assert np.max(np.abs(dec - ref)) < 1e-3


@pytest.mark.parametrize("pt_level_above", [0, 2])
def test_dot_plain_is_the_sum_of_products_bit_for_bit(pt_level_above):
    ctx, keys = setup()
    rng = np.random.default_rng(1)
    k, level = 5, LEVELS - 2
    xs = [ctx.encrypt(ctx.encode(uniform(rng, ctx.slots), level=level), keys) for _ in range(k)]
    vals = uniform(rng, (k, ctx.slots))
    pt = ctx.encode(vals, level=level + pt_level_above, scale=ctx.rescale_divisor(level))
    got = ctx.dot_plain(stack(ctx, xs), pt)
    want = None
    for i, x in enumerate(xs):
        term = ctx.mul(x, pt.replace(data=pt.data[i]), rescale=False, auto_scale=False)
        want = term if want is None else ctx.add(want, term)
    assert got.level == want.level == level and got.scale == want.scale and got.batch_shape == ()
    assert np.array_equal(np.asarray(got.data), np.asarray(want.data))
    check_sum_of_products(ctx, keys, got, xs, vals)


def test_dot_plain_keeps_the_other_batch_axes():
    ctx, keys = setup()
    rng = np.random.default_rng(2)
    k, batch = 3, 2
    xs = [ctx.encrypt(ctx.encode(uniform(rng, (batch, ctx.slots))), keys) for _ in range(k)]
    vals = uniform(rng, (k, ctx.slots))
    pt = ctx.encode(vals, scale=ctx.rescale_divisor(ctx.params.max_level))
    got = ctx.dot_plain(stack(ctx, xs), pt)
    assert got.batch_shape == (batch,)
    check_sum_of_products(ctx, keys, got, xs, vals)


def test_dot_plain_refuses_bad_operands():
    ctx, keys = setup()
    rng = np.random.default_rng(3)
    x = ctx.encrypt(ctx.encode(uniform(rng, ctx.slots)), keys)
    xs = stack(ctx, [x, x])
    with pytest.raises(ShapeError, match="batch"):
        ctx.dot_plain(x, ctx.encode(uniform(rng, (1, ctx.slots))))  # no leading axis on the ciphertext
    with pytest.raises(ShapeError, match="same k"):
        ctx.dot_plain(xs, ctx.encode(uniform(rng, (3, ctx.slots))))
    with pytest.raises(ShapeError, match="batch"):
        ctx.dot_plain(xs, ctx.encode(uniform(rng, ctx.slots)))  # an unbatched plaintext
    with pytest.raises(ParameterError, match="Plaintext"):
        ctx.dot_plain(xs, uniform(rng, (2, ctx.slots)))
    other = context(LOG_N, LEVELS, seed=2)
    with pytest.raises(ContextMismatchError):
        ctx.dot_plain(xs, other.encode(uniform(rng, (2, other.slots))))


def test_rotate_many_stacked_equals_the_list():
    ctx, keys = setup(rotations=(1, 3, 17))
    rng = np.random.default_rng(4)
    x = ctx.encrypt(ctx.encode(uniform(rng, ctx.slots)), keys)
    listed = ctx.rotate_many(x, list(STEPS), keys)
    stacked = ctx.rotate_many(x, list(STEPS), keys, stacked=True)
    assert stacked.batch_shape == (len(STEPS),)
    for i, r in enumerate(listed):
        assert np.array_equal(np.asarray(stacked.data[i]), np.asarray(r.data))
    only_rotations = ctx.rotate_many(x, [3, 17], keys, stacked=True)
    assert np.array_equal(np.asarray(only_rotations.data[1]), np.asarray(listed[3].data))
    zeros = ctx.rotate_many(x, [0, 0], keys, stacked=True)
    assert np.array_equal(np.asarray(zeros.data[1]), np.asarray(x.data))
    values = ctx.decrypt(stacked, keys)
    plain = ctx.decrypt(x, keys)
    for i, s in enumerate(STEPS):
        assert np.max(np.abs(values[i] - np.roll(plain, -s))) < 1e-4
    with pytest.raises(ParameterError, match="at least one step"):
        ctx.rotate_many(x, [], keys, stacked=True)
