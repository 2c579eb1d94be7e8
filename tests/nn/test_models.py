"""hemx.nn.models: ResNet-20 in plain JAX, its Graph through from_jax (float64-exact), and the trained weights."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hemx.nn import data, models
from hemx.nn.graph import Activation, Add, Conv2D, Dense, GlobalAvgPool, reference
from tests.helpers.system import need_fashion_mnist

jax.config.update("jax_enable_x64", True)


def _randomized(variables, seed):
    """Random batch-norm statistics and gains (init has mean 0 / var 1 / gamma 1), float64."""
    rng = np.random.default_rng(seed)

    def one(path, a):
        key = jax.tree_util.keystr(path)
        if key.endswith("['var']"):
            return rng.uniform(0.5, 2.0, a.shape)
        if key.endswith("['mean']") or key.endswith("['beta']"):
            return rng.normal(size=a.shape) * 0.3
        if key.endswith("['gamma']"):
            return rng.uniform(0.5, 1.5, a.shape)
        return np.asarray(a, dtype=np.float64)

    return jax.tree_util.tree_map_with_path(one, variables)


def _rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b))))


@pytest.fixture(scope="module")
def variables64():
    return _randomized(models.resnet20_init(jax.random.PRNGKey(0), in_channels=3, classes=10), 1)


@pytest.mark.parametrize("activation", [models.HE_ACTIVATION, "relu", (0.05, 0.5, 0.02, 0.002)])
def test_graph_equals_apply(variables64, activation):
    v = variables64
    g = models.resnet20_graph(v, activation=activation)
    x = np.random.default_rng(2).normal(size=(3, 32, 32, 3))
    want = jax.jit(lambda vv, xx: models.resnet20_apply(vv, xx, activation=activation))(v, jnp.asarray(x))
    got = reference(g, x)  # NHWC, as the model takes it
    assert np.all(np.isfinite(got)) and _rel(got, want) < 1e-9
    layers = [n.layer for n in g.nodes]
    convs = [l for l in layers if isinstance(l, Conv2D)]
    assert len(convs) == 21  # 19 3x3 convs + the two 1x1 stride-2 shortcuts (option B)
    assert sorted(c.weight.shape[2] for c in convs if c.stride == 2) == [1, 1, 3, 3]
    assert sum(isinstance(l, Add) for l in layers) == 9
    acts = [l for l in layers if isinstance(l, Activation)]
    assert len(acts) == 19
    if activation == "relu":
        assert {a.kind for a in acts} == {"relu"}
    else:
        assert all(a.kind == "poly" and a.coeffs[-1] != 0 for a in acts)
    assert sum(isinstance(l, GlobalAvgPool) for l in layers) == 1 and isinstance(layers[-1], Dense)


def test_init_train_mode_and_shapes():
    v = models.resnet20_init(jax.random.PRNGKey(1), in_channels=1, classes=7)
    n_params = sum(a.size for a in jax.tree_util.tree_leaves(v["params"]))
    assert 265_000 < n_params < 285_000  # He et al.: 0.27M
    x = jnp.asarray(np.random.default_rng(3).normal(size=(4, 32, 32, 1)), jnp.float32)
    logits, stats = jax.jit(lambda vv, xx: models.resnet20_apply(vv, xx, train=True))(v, x)
    assert logits.shape == (4, 7)
    assert jax.tree_util.tree_structure(stats) == jax.tree_util.tree_structure(v["batch_stats"])
    assert not np.allclose(stats["stem"]["bn"]["mean"], 0)
    zero = models.resnet20_init(jax.random.PRNGKey(1), in_channels=1, classes=7, zero_init_residual=True)
    assert float(jnp.abs(zero["params"]["stage2_block1"]["bn2"]["gamma"]).max()) == 0.0


def test_activation_fn():
    x = np.linspace(-4, 4, 17)
    np.testing.assert_allclose(models.activation_fn((0.3, -1.0, 0.5, 0.25))(x),
                               np.polynomial.polynomial.polyval(x, [0.3, -1.0, 0.5, 0.25]), rtol=1e-14)
    np.testing.assert_array_equal(models.activation_fn("relu")(x), np.maximum(x, 0))
    np.testing.assert_allclose(models.activation_fn("he")(x), 0.5 * x + x * x / 32, rtol=1e-15, atol=1e-15)


def test_save_load_roundtrip(tmp_path):
    v = models.resnet20_init(jax.random.PRNGKey(2), in_channels=1, classes=10)
    assert {a.dtype for a in jax.tree_util.tree_leaves(v)} == {np.dtype(np.float32)}
    models.save_variables(tmp_path / "w.npz", v, {"activation": [0.0, 0.5, 0.03125], "test_accuracy": 0.5})
    got, meta = models.load_resnet20_fmnist(tmp_path / "w.npz")
    assert meta["activation"] == (0.0, 0.5, 0.03125) and meta["test_accuracy"] == 0.5
    for a, b in zip(jax.tree_util.tree_leaves(v), jax.tree_util.tree_leaves(got)):
        np.testing.assert_array_equal(a, b)


def test_trained_fashion_mnist_weights():
    """The shipped weights: small, labelled with their activation and accuracy; the Graph of the trained network
    equals the JAX model in float64 (on padded test-sized inputs made here, so this runs without the data set)."""
    assert models.FMNIST_WEIGHTS.stat().st_size < 2_000_000
    v, meta = models.load_resnet20_fmnist()
    act, scale = meta["activation"], meta["input_scale"]
    assert act == models.HE_ACTIVATION and scale == 1 / 255 and meta["test_images"] == 10000
    assert meta["test_accuracy"] > 0.88
    rng = np.random.default_rng(5)
    x64 = data.pad_to_32(rng.integers(0, 256, (4, 28, 28)).astype(np.float64))[..., None]
    g = models.resnet20_graph(v, input_shape=(32, 32, 1), activation=act, input_scale=scale)
    want = jax.jit(lambda vv, xx: models.resnet20_apply(vv, xx, activation=act))(
        jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), v), jnp.asarray(x64 * scale))
    got = reference(g, x64)  # NHWC, as the model takes it
    assert _rel(got, want) < 1e-9


def test_trained_fashion_mnist_accuracy_reproduces():
    """The shipped weights' test accuracy reproduces (first 2000 test images, float32 JAX) and the Graph equals the
    JAX model in float64 on real test images."""
    need_fashion_mnist()
    v, meta = models.load_resnet20_fmnist()
    act, scale = meta["activation"], meta["input_scale"]
    images, labels = data.fashion_mnist("test")
    x = data.pad_to_32(images[:2000]).astype(np.float32)[..., None]
    predict = jax.jit(lambda xb: jnp.argmax(models.resnet20_apply(v, xb * scale, activation=act), -1))
    acc = float(np.mean(np.concatenate([np.asarray(predict(x[i:i + 500])) for i in range(0, 2000, 500)])
                        == labels[:2000]))
    assert abs(acc - meta["test_accuracy"]) < 0.03

    g = models.resnet20_graph(v, input_shape=(32, 32, 1), activation=act, input_scale=scale)
    x64 = x[:4].astype(np.float64)
    want = jax.jit(lambda vv, xx: models.resnet20_apply(vv, xx, activation=act))(
        jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), v), jnp.asarray(x64 * scale))
    got = reference(g, x64)  # NHWC, as the model takes it
    assert _rel(got, want) < 1e-9
    np.testing.assert_array_equal(got.argmax(1), np.asarray(predict(x[:4])))
