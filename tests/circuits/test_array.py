"""hemx.EncryptedArray (hemx.circuits.array): every operator and method against numpy on the decrypted values,
numpy broadcasting over the batch and slot axes, batch indexing, the pytree under jax.jit, missing keys and the
refused comparisons. One small insecure ring (N = 2^10, 16 slots, 3 levels) shared by every test."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import hemx
from hemx.circuits import LinearTransform, chebyshev_coefficients
from hemx.errors import KeyMismatchError, LevelError, MissingKeyError, OverflowBoundError, ShapeError

from tests.helpers.ckks_helpers import INSECURE, context_and_keys

pytestmark = pytest.mark.filterwarnings(INSECURE)

LOG_N, LEVELS, SLOTS = 10, 3, 16
ATOL = 1e-8  # fresh values and one or two products keep ~40 bits at scale 2^56 here; 1e-8 is ~27 bits


def setup():
    return context_and_keys(LOG_N, LEVELS, slots=SLOTS, rotations=tuple(range(1, SLOTS)), conjugation=True)


@pytest.fixture(scope="module")
def env():
    ctx, keys = setup()
    rng = np.random.default_rng(26)
    x, y = rng.uniform(-1, 1, (2, 3, SLOTS))
    a = hemx.EncryptedArray.encrypt(ctx, x, keys)
    b = hemx.EncryptedArray.encrypt(ctx, y, keys)
    return ctx, keys, a, b, x, y


def close(arr, want, atol=ATOL):
    got = arr.decrypt() if isinstance(arr, hemx.EncryptedArray) else arr
    want = np.asarray(want)
    assert np.shape(got) == want.shape, f"shape {np.shape(got)} != {want.shape}"
    if isinstance(arr, hemx.EncryptedArray):
        assert arr.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)


OPS = {
    "add": (lambda a, b: a + b, lambda x, y: x + y),
    "sub": (lambda a, b: a - b, lambda x, y: x - y),
    "mul": (lambda a, b: a * b, lambda x, y: x * y),
    "neg": (lambda a, b: -a, lambda x, y: -x),
    "pos": (lambda a, b: +a, lambda x, y: +x),
    "formula": (lambda a, b: a * b + 0.5 * a, lambda x, y: x * y + 0.5 * x),
    "scalar_add": (lambda a, b: a + 0.25, lambda x, y: x + 0.25),
    "scalar_radd": (lambda a, b: 0.25 + a, lambda x, y: 0.25 + x),
    "scalar_rsub": (lambda a, b: 1 - a, lambda x, y: 1 - x),
    "scalar_mul": (lambda a, b: a * 0.3, lambda x, y: x * 0.3),
    "int_mul": (lambda a, b: -3 * a, lambda x, y: -3 * x),
    "div": (lambda a, b: a / 4.0, lambda x, y: x / 4.0),
    "complex_scalar": (lambda a, b: a * (0.5 + 0.25j), lambda x, y: x * (0.5 + 0.25j)),
    "array_rmul": (lambda a, b: np.linspace(-1, 1, SLOTS) * a, lambda x, y: np.linspace(-1, 1, SLOTS) * x),
    "array_rsub": (lambda a, b: np.ones((3, SLOTS)) - a, lambda x, y: np.ones((3, SLOTS)) - x),
    "pow0": (lambda a, b: a ** 0, lambda x, y: x ** 0),
    "pow1": (lambda a, b: a ** 1, lambda x, y: x ** 1),
    "pow2": (lambda a, b: a ** 2, lambda x, y: x ** 2),
    "pow3": (lambda a, b: a ** 3, lambda x, y: x ** 3),
    "pow4": (lambda a, b: a ** 4, lambda x, y: x ** 4),
    "pow5": (lambda a, b: a ** np.int64(5), lambda x, y: x ** 5),
    "chain": (lambda a, b: (a - b) * (a + b) - a * a, lambda x, y: (x - y) * (x + y) - x * x),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_operators_match_numpy(env, name):
    _, _, a, b, x, y = env
    f_enc, f_np = OPS[name]
    close(f_enc(a, b), f_np(x, y))


def test_levels_spent(env):
    _, _, a, b, _, _ = env
    top = a.level
    assert (a + b).level == top and (-a).level == top and (a + 0.5).level == top
    assert (a * 3).level == top  # integers: exact constants, no rescale
    assert (a * 0.5).level == top - 1 and (a * b).level == top - 1
    assert (a ** 4).level == top - 2 and (a ** 3).level == top - 2
    assert a.sum().level == top and a.roll(1).level == top


def test_broadcasting_like_numpy(env):
    ctx, keys, a, b, x, y = env
    w = np.linspace(-1, 1, SLOTS)
    close(a * w, x * w)  # (3, 16) * (16,)
    col = np.array([[0.5], [-1.0], [2.0]])
    close(a * col, x * col)  # (3, 16) * (3, 1): a scale per ciphertext
    close(a + col, x + col)
    big = np.random.default_rng(1).uniform(-1, 1, (2, 3, SLOTS))
    close(a + big, x + big)  # the ciphertexts broadcast to a new leading batch axis (2, 3, 16)
    close(a[0] - big, x[0] - big)  # (16,) - (2, 3, 16)
    close(a + b[1], x + y[1])  # encrypted (3, 16) + encrypted (16,)
    close(a[:1] * b, x[:1] * y)  # encrypted (1, 16) * (3, 16)
    with pytest.raises(ShapeError, match="broadcast"):
        a + np.ones(5)
    with pytest.raises(ShapeError, match="broadcast"):
        a * np.ones((4, SLOTS))
    with pytest.raises(ShapeError, match="broadcast"):
        a + hemx.EncryptedArray.encrypt(ctx, np.ones((4, SLOTS)), keys)


def test_reductions(env):
    _, _, a, b, x, y = env
    total = a.sum()
    assert total.shape == () and a.sum().level == a.level
    close(total, x.sum())
    close(a.sum(axis=-1), x.sum(axis=-1))
    close(a.sum(axis=0), x.sum(axis=0))
    close(a.sum(axis=(0, 1)), x.sum())
    close(a[:, ].sum(axis=0, keepdims=True), x.sum(axis=0, keepdims=True))
    per = a.sum(axis=-1, keepdims=True)  # (3, 1): broadcasts against the slots like numpy
    close(per, x.sum(axis=-1, keepdims=True))
    close(a - per, x - x.sum(axis=-1, keepdims=True))
    close(a.sum(axis=-1) * np.array([1.0, 2.0, 3.0]), x.sum(axis=-1) * [1.0, 2.0, 3.0])  # (3,) * (3,)
    close(a[0].sum() + a[1], x[0].sum() + x[1])  # a 0-d total broadcasts like a scalar
    with pytest.raises(ShapeError, match="keepdims"):
        a.sum(axis=-1) + a  # numpy: (3,) and (3, 16) do not broadcast
    close(a.mean(axis=-1), x.mean(axis=-1))
    close(a.mean(), x.mean())
    # odd batch sizes (zero-padded pairwise sums)
    close(a[:3].sum(axis=0), x.sum(axis=0))
    v = np.linspace(0, 1, SLOTS)
    close(a.dot(v), x.dot(v))
    close(a @ v, x @ v)
    close(v @ a[2], v @ x[2])
    close(a.dot(b), (x * y).sum(axis=-1))
    close(a[0] @ b[1], x[0] @ y[1])
    close(a.dot(v[:5]), x[:, :5] @ v[:5])  # shorter vectors are zero-padded


def test_matrix_products(env):
    ctx, keys, a, _, x, _ = env
    rng = np.random.default_rng(2)
    m = rng.uniform(-1, 1, (SLOTS, SLOTS))
    out = a @ m
    assert out.level == a.level - 1
    close(out, x @ m)
    close(a.matmul(m), x @ m)
    close(m @ a, x @ m.T)  # M x for each vector
    close(a.dot(m), x @ m)
    small = rng.uniform(-1, 1, (5, 7))  # zero-padded to 16 x 16
    want = np.zeros((3, SLOTS))
    want[:, :7] = x[:, :5] @ small
    close(a.matmul(small), want)
    lt = LinearTransform(ctx, m, level=a.level)
    close(lt @ a, x @ m.T)
    with pytest.raises(ShapeError):
        a.matmul(np.ones((SLOTS + 1, SLOTS)))
    with pytest.raises(LevelError, match="level 0"):
        a.drop_level(0) @ m


def test_roll_and_conj(env):
    ctx, keys, a, _, x, _ = env
    for k in (1, 3, -1, -5, SLOTS, 17):
        close(a.roll(k), np.roll(x, k, axis=-1))
    close(a.roll(1, axis=0), np.roll(x, 1, axis=0))  # a batch axis: the ciphertexts are permuted
    z = x + 1j * np.flip(x, axis=-1)
    c = hemx.EncryptedArray.encrypt(ctx, z, keys)
    assert c.dtype == np.complex128 and a.dtype == np.float64
    close(c.conj(), np.conj(z))
    close(c * c.conj(), np.abs(z) ** 2)


def test_polyval(env):
    _, _, a, _, x, _ = env
    coeffs = [0.1, -0.5, 0.25, 0.75]
    out = a.polyval(coeffs)
    close(out, np.polynomial.polynomial.polyval(x, coeffs))  # ascending order, like TenSEAL
    sig = chebyshev_coefficients(lambda t: 1 / (1 + np.exp(-t)), 3, interval=(-2, 2))  # depth 2 + 1
    close(a.polyval(sig, basis="chebyshev", interval=(-2, 2)),
          np.polynomial.chebyshev.chebval(x / 2, sig), atol=1e-7)


def test_batch_indexing(env):
    _, _, a, _, x, _ = env
    close(a[0], x[0])
    close(a[-1], x[-1])
    close(a[1:3], x[1:3])
    close(a[np.array([2, 0])], x[[2, 0]])
    assert len(a) == 3 and [r.shape for r in a] == [(SLOTS,)] * 3
    big = a + np.zeros((2, 3, SLOTS))
    close(big[1, 2], x[2])
    close(big[:, 1], x[[1, 1]])
    with pytest.raises(IndexError, match="out of bounds"):
        a[3]
    with pytest.raises(ShapeError, match="slots cannot be indexed"):
        a[0, 1]
    with pytest.raises(ShapeError, match="slots cannot be indexed"):
        a[0][0]
    with pytest.raises(TypeError, match="batch axis"):
        iter(a[0])


def test_metadata_and_repr(env):
    ctx, _, a, _, _, _ = env
    assert a.shape == (3, SLOTS) and a.ndim == 2 and a.size == 3 * SLOTS
    assert a.slots == SLOTS and a.batch_shape == (3,) and a.level == ctx.params.max_level
    assert a.scale == a.ciphertext.scale and a.bound == getattr(a.ciphertext, "bound", None)
    text = repr(a * 0.5)
    for part in ("shape=(3, 16)", f"level={a.level - 1}", "scale=2^", "slots=16", "batch=(3,)", "bound="):
        assert part in text, text


def test_comparisons_are_refused(env):
    _, _, a, b, _, _ = env
    for compare in (lambda: a == b, lambda: a != 0, lambda: a < 1, lambda: a <= b, lambda: a > 0, lambda: a >= b,
                    lambda: bool(a), lambda: np.asarray(a)):
        with pytest.raises(TypeError, match="cannot|unknown"):
            compare()
    with pytest.raises(TypeError, match="compare"):
        if a:
            pass
    with pytest.raises(TypeError, match="divide"):
        1.0 / a
    with pytest.raises(TypeError, match="divide"):
        a / b


def test_missing_keys_say_what_to_generate(env):
    ctx, _, _, _, x, _ = env
    _, few = context_and_keys(LOG_N, LEVELS, slots=SLOTS, rotations=(1,))  # same context, another key set
    a = hemx.EncryptedArray.encrypt(ctx, x, few)
    close(a.roll(-1), np.roll(x, -1, axis=-1))  # the one key it has
    with pytest.raises(MissingKeyError, match=r"roll\(3\).*step \[-3\].*keygen\(rotations=\[-3\]\)"):
        a.roll(3)
    with pytest.raises(MissingKeyError, match=r"steps \[2, 4, 8\].*power_of_two"):
        a.sum()
    with pytest.raises(MissingKeyError, match=r"conjugation=True"):
        a.conj()
    with pytest.raises(MissingKeyError, match=r"matrix product.*ctx\.keygen\(rotations=\[\d"):
        a @ np.eye(SLOTS)[::-1]  # the steps themselves (tests/circuits/test_array_front.py follows the hint)


def test_keys_and_function_style_api(env):
    ctx, keys, a, b, x, y = env
    server = hemx.EncryptedArray(a.ciphertext, ctx, keys.evaluation_keys())  # a server's view: no secret
    out = server * b.ciphertext + 1  # a bare Ciphertext operand joins in
    with pytest.raises(MissingKeyError, match="secret key"):
        out.decrypt()
    close(out.decrypt(keys), x * y + 1)
    close(ctx.decrypt(ctx.add(a.ciphertext, (a * 2).ciphertext), keys), 3 * x)  # the Context API still works
    _, other = context_and_keys(LOG_N, LEVELS, slots=SLOTS, rotations=(1,))
    with pytest.raises(KeyMismatchError):
        hemx.EncryptedArray(a.ciphertext, ctx, other)


def test_pytree_and_jit(env):
    ctx, keys, a, b, x, y = env
    leaves, tree = jax.tree_util.tree_flatten(a)
    key_leaves = jax.tree_util.tree_leaves(keys)
    keys_travel = not (len(key_leaves) == 1 and key_leaves[0] is keys)  # key sets that are pytrees are arguments
    assert leaves[0] is a.ciphertext.data  # the context (and keys that are no pytree) are static
    assert len(leaves) == 1 + (len(key_leaves) if keys_travel else 0)
    back = jax.tree_util.tree_unflatten(tree, leaves)
    assert isinstance(back, hemx.EncryptedArray) and back.shape == a.shape and back.level == a.level
    close(back, x)
    traces = []

    def f(u, v):
        traces.append(1)
        return (u * v + 0.5 * u).roll(1), (u - v).sum(axis=-1)

    jitted = jax.jit(f)
    out, total = jitted(a, b)
    eager, eager_total = f(a, b)
    assert isinstance(out, hemx.EncryptedArray) and out.shape == a.shape and total.shape == (3,)
    assert np.array_equal(np.asarray(out.ciphertext.data), np.asarray(eager.ciphertext.data))  # bit for bit
    close(out, np.roll(x * y + 0.5 * x, 1, axis=-1))
    close(total, (x - y).sum(axis=-1))
    before = len(traces)
    fresh = hemx.EncryptedArray(a.ciphertext.replace(data=a.ciphertext.data + 0), ctx, keys)  # new data
    jitted(fresh, b)  # same shapes and metadata, same keys: no new trace
    assert len(traces) == before


def test_sums_beyond_the_modulus_are_refused(env):
    """A sum whose propagated bound times its scale reaches q/2 raises OverflowBoundError (array + array and
    array + values), one just inside decrypts right; Context.add itself leaves the bounds of circuits alone."""
    ctx, keys, _, _, x, _ = env

    def at_level0(values):
        ct = ctx.drop_level(ctx.encrypt(values, keys), 0)
        return hemx.EncryptedArray(ct, ctx, keys)

    big = at_level0(x * 24.0)  # level 0: 62 bits of base, scale just under 2^56: a bound of 32 fits, 64 does not
    assert big.bound == 32.0
    with pytest.raises(OverflowBoundError, match="the sum"):
        big + big
    with pytest.raises(OverflowBoundError, match="the sum"):
        big - np.full(SLOTS, 24.0)
    small = at_level0(x * 12.0)
    close(small + small, x * 24.0, atol=1e-6)
    assert ctx.add(big.ciphertext, big.ciphertext).bound == 64.0  # the function-style API computes it
