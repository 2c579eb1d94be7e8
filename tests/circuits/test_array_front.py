"""The front a new user meets: a bare Ciphertext / Plaintext refuses operators with an error that shows the line
wrapping it in hemx.EncryptedArray; numpy's functions and ufuncs on an EncryptedArray (supported ones against
numpy, refused arguments and functions named); roll's sign against numpy.roll and ctx.rotate's; a.bootstrap();
and every hint an EncryptedArray error gives, followed literally (the code it quotes is run) until the operation
succeeds and matches numpy."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hemx
from hemx.ckks import Sampler
from hemx.circuits.bootstrap import bootstrapper_for
from hemx.errors import MissingKeyError, ShapeError, UnsupportedOperationError

from tests.helpers.ckks_helpers import INSECURE, bits_of, context_and_keys

pytestmark = pytest.mark.filterwarnings(INSECURE)

LOG_N, LEVELS, SLOTS = 10, 3, 16
ATOL = 1e-8
WRAP = "a = hemx.EncryptedArray(ct, ctx, keys)"


@pytest.fixture(scope="module")
def env():
    ctx, keys = context_and_keys(LOG_N, LEVELS, slots=SLOTS, rotations=tuple(range(1, SLOTS)), conjugation=True)
    rng = np.random.default_rng(31)
    x = rng.uniform(-1, 1, (3, SLOTS))
    v = rng.uniform(-1, 1, SLOTS)
    return ctx, keys, x, v, hemx.EncryptedArray.encrypt(ctx, x, keys), hemx.EncryptedArray.encrypt(ctx, v, keys)


def close(arr, want, atol=ATOL):
    assert isinstance(arr, hemx.EncryptedArray)
    want = np.asarray(want)
    got = arr.decrypt()
    assert arr.shape == want.shape and got.shape == want.shape, (arr.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)


def quoted_call(message: str, start: str) -> str:
    """The code starting at ``start`` in an error message, up to its balanced closing parenthesis."""
    i = message.index(start)
    depth = 0
    for j in range(i, len(message)):
        depth += {"(": 1, ")": -1}.get(message[j], 0)
        if depth == 0 and message[j] == ")":
            return message[i:j + 1]
    raise AssertionError(f"unbalanced code after {start!r} in: {message}")


# ------------------------------------------------------------------------------------------- bare ciphertexts
RAW_OPERATORS = {
    "add": lambda c, o: c + o, "radd": lambda c, o: 1.5 + c, "sub": lambda c, o: c - o, "rsub": lambda c, o: 1 - c,
    "mul": lambda c, o: c * o, "rmul": lambda c, o: 2 * c, "numpy_rmul": lambda c, o: np.ones(SLOTS) * c,
    "div": lambda c, o: c / 4, "rdiv": lambda c, o: 1 / c, "matmul": lambda c, o: c @ np.eye(SLOTS),
    "rmatmul": lambda c, o: np.eye(SLOTS) @ c, "pow": lambda c, o: c ** 2, "rpow": lambda c, o: 2 ** c,
    "neg": lambda c, o: -c, "pos": lambda c, o: +c,
}
COMPARISONS = {
    "eq": lambda c, o: c == 0.5, "ne": lambda c, o: c != np.zeros(SLOTS), "lt": lambda c, o: c < o, "le": lambda c, o: c <= 1,
    "gt": lambda c, o: c > 0, "ge": lambda c, o: c >= o, "numpy_eq": lambda c, o: np.zeros(SLOTS) == c,
}


@pytest.mark.parametrize("name", sorted(RAW_OPERATORS))
def test_bare_ciphertext_operators_show_the_wrapping_line(env, name):
    ctx, keys, x, _, a, _ = env
    ct = ctx.encrypt(x, keys)
    with pytest.raises(UnsupportedOperationError) as err:
        RAW_OPERATORS[name](ct, ct)
    assert isinstance(err.value, TypeError) and isinstance(err.value, hemx.errors.HemxError)
    message = str(err.value)
    assert "hemx.EncryptedArray" in message and WRAP in message, message
    # follow it: the quoted line, then the operator
    scope = {"hemx": hemx, "ct": ct, "ctx": ctx, "keys": keys}
    exec(WRAP, scope)
    if name in ("add", "sub", "mul", "neg"):
        close(RAW_OPERATORS[name](scope["a"], scope["a"]), {"add": 2 * x, "sub": 0 * x, "mul": x * x, "neg": -x}[name])


@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_bare_ciphertext_and_plaintext_comparisons_are_refused(env, name):
    ctx, keys, x, _, _, _ = env
    ct, pt = ctx.encrypt(x, keys), ctx.encode(x)
    for value in (ct, pt):
        with pytest.raises(UnsupportedOperationError, match="cannot be compared.*hemx.EncryptedArray"):
            COMPARISONS[name](value, value)


def test_bare_plaintext_and_mixed_operands(env):
    ctx, keys, x, v, a, _ = env
    pt = ctx.encode(v)
    for op in (lambda: pt + pt, lambda: pt * 2, lambda: -pt, lambda: np.ones(SLOTS) - pt):
        with pytest.raises(UnsupportedOperationError, match=r"Plaintext.*hemx\.EncryptedArray\(ct, ctx, keys\)"):
            op()
    ct = a.ciphertext
    # a bare operand next to an EncryptedArray steps aside for the array's operators, either side
    close(ct + a, 2 * x)
    close(ct - a, 0 * x)
    close(ct * a, x * x)
    close(pt + a, v + x)
    close(a * pt, x * v)
    assert (ct == None) is False and (ct != None) is True and ct in [None, ct]  # noqa: E711 (identity, not values)
    # between two ciphertexts == is object equality (the same encryption), never a comparison of the values
    again = ctx.encrypt(x, keys)
    assert ct == ct and ct.replace() == ct and not (ct != ct)
    assert ct != again and not (ct == again)  # the same values, another encryption
    assert ct.replace(scale=ct.scale * 2) != ct


# ------------------------------------------------------------------------------------------- numpy dispatch
def test_numpy_functions_and_ufuncs_match_numpy(env):
    ctx, keys, x, v, a, a1 = env
    m = np.random.default_rng(4).uniform(-1, 1, (SLOTS, SLOTS))
    close(np.sum(a), x.sum())
    close(np.sum(a, axis=-1), x.sum(axis=-1))
    close(np.sum(a, axis=0, keepdims=True), x.sum(axis=0, keepdims=True))
    close(np.sum(a, -1, None, None, True), x.sum(axis=-1, keepdims=True))  # numpy's positional order
    close(np.sum(a, dtype=float, out=None, where=True), x.sum())  # the do-nothing values are accepted
    close(np.mean(a), x.mean())
    close(np.mean(a, axis=-1, keepdims=True), x.mean(axis=-1, keepdims=True))
    close(np.dot(a, v), np.dot(x, v))
    close(np.dot(v, a1), np.dot(v, v))
    close(np.dot(a, m), np.dot(x, m))
    close(np.dot(m, a1), np.dot(m, v))
    close(np.dot(a1, a1), np.dot(v, v))
    close(np.add(a, v), np.add(x, v))
    close(np.add(v, a), v + x)
    close(np.subtract(v, a), v - x)
    close(np.subtract(a, a1), x - v)
    close(np.multiply(a, a1), x * v)
    close(np.multiply(0.5, a), 0.5 * x)
    close(np.negative(a), -x)
    close(np.positive(a), x)
    close(np.square(a), x * x)
    close(np.power(a, 3), x ** 3)
    close(np.divide(a, 4.0), x / 4)
    close(np.matmul(a, m), x @ m)
    close(np.conjugate(a), x)
    close(v * a, v * x)  # numpy operators on the left: ndarray.__mul__ -> np.multiply -> the array
    close(np.ones((3, 1)) - a, 1 - x)
    close(m @ a1, m @ v)
    close(np.roll(a, 3, axis=-1), np.roll(x, 3, axis=-1))
    close(np.roll(a, 1, axis=0), np.roll(x, 1, axis=0))
    close(np.roll(a1, -2), np.roll(v, -2))  # axis=None on a single vector: the slots
    p = [0.25, -0.5, 0.1]  # numpy.polyval: descending order
    close(np.polyval(p, a), np.polyval(p, x))
    assert np.shape(a) == x.shape and np.ndim(a) == 2 and np.size(a) == x.size and np.size(a, -1) == SLOTS


@pytest.mark.parametrize("call, argument", [
    (lambda a, x: np.sum(a, out=np.zeros(3)), "out="),
    (lambda a, x: np.mean(a, axis=-1, out=np.zeros(3)), "out="),
    (lambda a, x: np.add(a, 1.0, out=np.zeros_like(x)), "out="),
    (lambda a, x: np.sum(a, where=x > 0), "where="),
    (lambda a, x: np.multiply(a, 2.0, where=x > 0), "where="),
    (lambda a, x: np.sum(a, dtype=np.int32), "dtype="),
    (lambda a, x: np.mean(a, dtype=np.complex128), "dtype="),
    (lambda a, x: np.sum(a, initial=1.0), "initial="),
    (lambda a, x: np.dot(a, x[0], out=np.zeros(3)), "out="),
])
def test_numpy_arguments_without_meaning_are_named(env, call, argument):
    _, _, x, _, a, _ = env
    with pytest.raises(UnsupportedOperationError, match=re.escape(argument)):
        call(a, x)


@pytest.mark.parametrize("call", [
    lambda a: np.concatenate([a, a]), lambda a: np.exp(a), lambda a: np.abs(a), lambda a: np.add.reduce(a),
    lambda a: np.max(a), lambda a: np.sqrt(a), lambda a: np.transpose(a),
])
def test_unsupported_numpy_functions_say_what_is_supported(env, call):
    _, _, _, _, a, _ = env
    with pytest.raises(UnsupportedOperationError, match=r"numpy\.sum|not supported") as err:
        call(a)
    if "reduce" not in str(err.value):
        for name in ("numpy.sum", "numpy.mean", "numpy.dot", "numpy.roll", "numpy.add", "numpy.multiply"):
            assert name in str(err.value)


def test_numpy_refusals_with_shapes(env):
    _, _, x, _, a, _ = env
    for compare in (lambda: np.less(a, 0), lambda: x < a, lambda: np.equal(a, a)):
        with pytest.raises(UnsupportedOperationError, match="compare"):
            compare()
    with pytest.raises(ShapeError, match="axis=-1"):
        np.roll(a, 1)  # numpy would roll the flattened (3, 16) array
    with pytest.raises(ShapeError, match=r"sum\(axis=-1\)"):
        np.dot(x[:, 0], a)  # numpy contracts the batch axis of a


# ------------------------------------------------------------------------------------------- roll's sign
@pytest.mark.parametrize("k", [1, 3, -2, SLOTS + 1])
def test_roll_follows_numpy_and_rotate_turns_left(env, k):
    """a.roll(k) is numpy.roll(x, k) (element i moves to i + k); ctx.rotate(ct, k) is numpy.roll(x, -k)."""
    ctx, keys, _, v, _, a1 = env
    close(a1.roll(k), np.roll(v, k))
    close(np.roll(a1, k), np.roll(v, k))
    rotated = ctx.rotate(a1.ciphertext, k, keys)
    np.testing.assert_allclose(ctx.decrypt(rotated, keys), np.roll(v, -k), rtol=0, atol=ATOL)
    close(hemx.EncryptedArray(ctx.rotate(a1.ciphertext, -k, keys), ctx, keys), np.roll(v, k))  # roll(k) = rotate(-k)


# ------------------------------------------------------------------------------------------- hints, followed
def test_matmul_hint_on_a_wider_context_works_when_followed():
    """a @ M with a 16 x 16 M on a 64-slot context: the MissingKeyError's keygen call, run as written, gives keys
    with which a @ M and M @ a succeed and match numpy (M zero-padded to 64 x 64)."""
    ctx, few = context_and_keys(LOG_N, LEVELS, slots=64, rotations=())
    rng = np.random.default_rng(5)
    m = rng.uniform(-1, 1, (16, 16))
    m[np.abs(m) < 0.5] = 0.0  # a sparse, non-symmetric matrix: M's and M.T's diagonals differ
    x = rng.uniform(-1, 1, 64)
    big = np.zeros((64, 64))
    big[:16, :16] = m
    for product, want in ((lambda arr: arr @ m, x @ big), (lambda arr: m @ arr, big @ x)):
        a = hemx.EncryptedArray.encrypt(ctx, x, few)
        with pytest.raises(MissingKeyError) as err:
            product(a)
        call = quoted_call(str(err.value), "ctx.keygen(")
        keys = eval(call, {"ctx": ctx})  # the hint, literally
        close(product(hemx.EncryptedArray.encrypt(ctx, x, keys)), want)


def test_every_other_hint_works_when_followed(env):
    ctx, full_keys, x, v, _, _ = env
    _, few = context_and_keys(LOG_N, LEVELS, slots=SLOTS, rotations=(1,))
    cases = [  # (operation on an array, numpy's result on its values, code the hint quotes)
        (lambda a: a.roll(3), np.roll(x, 3, axis=-1), "ctx.keygen("),
        (lambda a: a.sum(), x.sum(), "ctx.keygen("),
        (lambda a: a.mean(axis=-1), x.mean(axis=-1), "ctx.keygen("),
        (lambda a: a.dot(v), x @ v, "ctx.keygen("),
        (lambda a: a.conj(), x, "ctx.keygen("),
    ]
    for operation, want, start in cases:
        a = hemx.EncryptedArray.encrypt(ctx, x, few)
        with pytest.raises(MissingKeyError) as err:
            operation(a)
        keys = eval(quoted_call(str(err.value), start), {"ctx": ctx})
        close(operation(hemx.EncryptedArray.encrypt(ctx, x, keys)), want)
    # a server's array cannot decrypt: the hint's call with the client's keys does
    a = hemx.EncryptedArray.encrypt(ctx, x, full_keys)
    server = hemx.EncryptedArray(a.ciphertext, ctx, full_keys.evaluation_keys())
    with pytest.raises(MissingKeyError) as err:
        server.decrypt()
    got = eval(quoted_call(str(err.value), "a.decrypt("), {"a": server, "keys": full_keys})
    np.testing.assert_allclose(got, x, rtol=0, atol=ATOL)
    # a reduced array meeting full vectors: the keepdims call the hint quotes broadcasts like numpy
    with pytest.raises(ShapeError) as err:
        a.sum(axis=-1) + a
    reduced = eval(quoted_call(str(err.value), "a.sum("), {"a": a})
    close(reduced + a, x.sum(axis=-1, keepdims=True) + x)


# ------------------------------------------------------------------------------------------- bootstrap
def test_array_bootstrap_keeps_values_shape_and_keys():
    params = hemx.CKKSParameters.preset("boot_12", allow_insecure=True)
    ctx = hemx.Context(params, slots=8, sampler=Sampler.insecure_for_tests(9))
    boot = bootstrapper_for(ctx)
    keys = ctx.keygen(bootstrap=boot)
    x = np.random.default_rng(14).uniform(-1, 1, (2, 8))
    a = hemx.EncryptedArray.encrypt(ctx, x, keys).drop_level(0)
    with pytest.raises(hemx.errors.LevelError, match=r"a\.bootstrap\(\)"):
        a @ np.eye(8)
    out = a.bootstrap()
    assert isinstance(out, hemx.EncryptedArray) and out.keys is keys and out.shape == a.shape
    assert out.level == boot.plan.output_level
    assert bits_of(x, out.decrypt()).min_bits > 15
    close(out * out, x * x, atol=1e-3)  # levels to spend again
