"""The plaintext CNN of ``hemx.apps.cnn``: architecture, forward pass, training (JAX, Adam), weight files.

Architecture on an 8x8 grey-level digit (pixels 0..16, divided by 16):

    conv 3x3 valid, C channels (+ bias)  ->  square  ->  average pool 2x2  ->  fully connected C*9 -> H (+ bias)
    ->  square  ->  fully connected H -> 10 (+ bias)

Every activation is ``x * x``: the encrypted circuit evaluates exactly the same function (any quadratic activation
``a x^2 + b x + c`` reduces to this form by folding ``a``, ``b``, ``c`` into the neighbouring affine layers).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from hemx.errors import ParameterError, SerializationError, ShapeError

IMAGE_SIDE = 8  # the digits are 8x8
KERNEL = 3  # convolution kernel side (valid convolution, stride 1)
CONV_SIDE = IMAGE_SIDE - KERNEL + 1  # 6: side of a convolution output map
POOL = 2  # average-pooling window and stride
POOLED_SIDE = CONV_SIDE // POOL  # 3
NUM_CLASSES = 10
PIXEL_MAX = 16.0  # load_digits pixels are integers 0..16; inputs are divided by this
OUTPUT_BOUND = 2048.0  # after training the last layer is scaled so that every |logit| provably stays below this

_FIELDS = ("conv_w", "conv_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b")
_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class CNNModel:
    """Weights of the digits CNN (float64 numpy arrays).

    Attributes:
        conv_w: ``(C, 3, 3)`` convolution kernels (cross-correlation, as in every deep-learning library).
        conv_b: ``(C,)`` convolution biases.
        fc1_w: ``(H, C, 3, 3)`` first fully connected layer, over the pooled ``(C, 3, 3)`` maps.
        fc1_b: ``(H,)``.
        fc2_w: ``(10, H)`` output layer.
        fc2_b: ``(10,)``.
    """

    conv_w: np.ndarray
    conv_b: np.ndarray
    fc1_w: np.ndarray
    fc1_b: np.ndarray
    fc2_w: np.ndarray
    fc2_b: np.ndarray

    def __post_init__(self):
        for name in _FIELDS:
            value = np.asarray(getattr(self, name))
            if not np.issubdtype(value.dtype, np.number) or np.iscomplexobj(value):
                raise ShapeError(f"CNN weight {name} must hold real numbers, got dtype {value.dtype}")
            value = value.astype(np.float64)
            if not np.all(np.isfinite(value)):
                raise ParameterError(f"CNN weight {name} contains NaN or infinite values")
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        c, h = self.channels, self.hidden
        want = {
            "conv_w": (c, KERNEL, KERNEL),
            "conv_b": (c,),
            "fc1_w": (h, c, POOLED_SIDE, POOLED_SIDE),
            "fc1_b": (h,),
            "fc2_w": (NUM_CLASSES, h),
            "fc2_b": (NUM_CLASSES,),
        }
        for name, shape in want.items():
            got = getattr(self, name).shape
            if got != shape:
                raise ShapeError(f"CNN weight {name} has shape {got}, expected {shape} (C={c}, H={h})")
        if c < 1 or h < 1:
            raise ShapeError(f"the CNN needs at least one channel and one hidden unit, got C={c}, H={h}")

    @property
    def channels(self) -> int:
        """C: convolution channels."""
        return int(np.shape(self.conv_w)[0]) if np.ndim(self.conv_w) else 0

    @property
    def hidden(self) -> int:
        """H: hidden units of the first fully connected layer."""
        return int(np.shape(self.fc1_w)[0]) if np.ndim(self.fc1_w) else 0

    def as_dict(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in _FIELDS}


def check_images(images) -> np.ndarray:
    """Validate digit images: ``(n, 8, 8)`` or ``(n, 64)`` pixel values in [0, 16] -> float64 ``(n, 8, 8)``."""
    x = np.asarray(images)
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == bool) or np.iscomplexobj(x):
        raise ShapeError(f"images must be real pixel values, got dtype {x.dtype}")
    if x.ndim == 2 and x.shape[1] == IMAGE_SIDE * IMAGE_SIDE:
        x = x.reshape(-1, IMAGE_SIDE, IMAGE_SIDE)
    if x.ndim != 3 or x.shape[1:] != (IMAGE_SIDE, IMAGE_SIDE):
        raise ShapeError(f"images must have shape (n, 8, 8) or (n, 64), got {np.shape(images)}")
    if x.shape[0] == 0:
        raise ShapeError("no images given")
    x = x.astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise ParameterError("pixel values must be finite numbers in [0, 16]; got NaN or infinity")
    if x.min() < 0 or x.max() > PIXEL_MAX:
        raise ParameterError(
            f"pixel values must lie in [0, {PIXEL_MAX:g}] (scikit-learn digits); got range [{x.min():g}, {x.max():g}]"
        )
    return x


def forward(params: dict[str, Any], images, xp=np):
    """Logits ``(n, 10)`` of images ``(n, 8, 8)`` already divided by 16; ``xp`` is numpy or jax.numpy.

    The same function serves training (``jax.numpy``, differentiated) and the plaintext reference (numpy).
    """
    n = images.shape[0]
    channels = params["conv_w"].shape[0]
    # (n, 6, 6, 9): every 3x3 patch, offsets in row-major (dy, dx) order
    patches = xp.stack(
        [images[:, dy : dy + CONV_SIDE, dx : dx + CONV_SIDE] for dy in range(KERNEL) for dx in range(KERNEL)],
        axis=-1,
    )
    conv = xp.einsum("nijk,ck->ncij", patches, params["conv_w"].reshape(channels, KERNEL * KERNEL))
    conv = conv + params["conv_b"][None, :, None, None]
    act = conv * conv
    pooled = act.reshape(n, channels, POOLED_SIDE, POOL, POOLED_SIDE, POOL).mean(axis=(3, 5))
    hidden = xp.einsum("ncij,hcij->nh", pooled, params["fc1_w"]) + params["fc1_b"]
    hidden = hidden * hidden
    return hidden @ params["fc2_w"].T + params["fc2_b"]


def plaintext_forward(model: CNNModel, images) -> np.ndarray:
    """The model's logits ``(n, 10)`` in float64 for raw digit images ``(n, 8, 8)`` / ``(n, 64)`` in [0, 16]."""
    if not isinstance(model, CNNModel):
        raise ParameterError(f"expected a CNNModel, got {type(model).__name__}")
    return forward(model.as_dict(), check_images(images) / PIXEL_MAX)


def predict(model: CNNModel, images) -> np.ndarray:
    """Predicted digits ``(n,)`` int64 of the plaintext model."""
    return np.argmax(plaintext_forward(model, images), axis=1)


def digits_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits, split 80/20 (stratified, ``random_state=0``).

    Returns:
        ``(train_images, test_images, train_labels, test_labels)``: images float64 ``(n, 8, 8)`` with pixels
        0..16, labels int64 ``(n,)``. 1437 training and 360 test images.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x_tr, x_te, y_tr, y_te = train_test_split(
        data.images.astype(np.float64), data.target.astype(np.int64), test_size=0.2, random_state=0,
        stratify=data.target,
    )
    return x_tr, x_te, y_tr, y_te


def train_model(
    *,
    channels: int = 4,
    hidden: int = 32,
    steps: int = 2000,
    batch_size: int = 128,
    learning_rate: float = 0.01,
    weight_decay: float = 0.01,
    seed: int = 0,
    images=None,
    labels=None,
) -> CNNModel:
    """Train the CNN in plaintext with JAX (Adam with decoupled weight decay, cross-entropy, minibatches).

    Takes a few seconds on a CPU. ``seed`` fixes the weight initialization and the minibatch order (it has
    nothing to do with encryption randomness). Defaults train on the training part of :func:`digits_split`.
    Afterwards the output layer is scaled (the argmax is unchanged) so that the guaranteed bound of
    :func:`value_bounds` on the logits is ``OUTPUT_BOUND``: the encrypted logits provably fit the CKKS
    message range of :func:`hemx.apps.cnn.recommended_parameters`.

    Args:
        channels: C, convolution channels.
        hidden: H, hidden units (at most 64: one slot group per unit in the encrypted layout).
        images, labels: training data ``(n, 8, 8)`` pixels 0..16 and ``(n,)`` digits; default the split above.
    """
    for name, value, low in (("channels", channels, 1), ("hidden", hidden, 1), ("steps", steps, 1),
                             ("batch_size", batch_size, 1)):
        if not isinstance(value, (int, np.integer)) or value < low:
            raise ParameterError(f"{name} must be an integer >= {low}, got {value!r}")
    if hidden > IMAGE_SIDE * IMAGE_SIDE:
        raise ParameterError(f"hidden must be at most {IMAGE_SIDE * IMAGE_SIDE} (one slot group per unit)")
    if not (learning_rate > 0 and weight_decay >= 0):
        raise ParameterError("learning_rate must be positive and weight_decay non-negative")
    if images is None:
        images, _, labels, _ = digits_split()
    elif labels is None:
        raise ParameterError("pass labels together with images")
    x = check_images(images) / PIXEL_MAX
    y = np.asarray(labels)
    if y.shape != (x.shape[0],) or not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= NUM_CLASSES:
        raise ShapeError(f"labels must be {x.shape[0]} integers in [0, 9], got shape {y.shape} dtype {y.dtype}")
    batch_size = min(int(batch_size), x.shape[0])

    rng = np.random.default_rng(seed)
    init = {
        "conv_w": rng.normal(0.0, 0.3, (channels, KERNEL, KERNEL)),
        "conv_b": np.zeros(channels),
        "fc1_w": rng.normal(0.0, 1.0 / np.sqrt(channels * POOLED_SIDE ** 2),
                            (hidden, channels, POOLED_SIDE, POOLED_SIDE)),
        "fc1_b": np.zeros(hidden),
        "fc2_w": rng.normal(0.0, 1.0 / np.sqrt(hidden), (NUM_CLASSES, hidden)),
        "fc2_b": np.zeros(NUM_CLASSES),
    }
    batches = np.stack([rng.choice(x.shape[0], batch_size, replace=False) for _ in range(steps)])
    params = _adam(init, jnp.asarray(x), jnp.asarray(y), jnp.asarray(batches), learning_rate, weight_decay)
    params = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    if not all(np.all(np.isfinite(v)) for v in params.values()):
        raise ParameterError("training diverged (non-finite weights); lower the learning rate")
    peak = float(_bounds(params)[-1])
    if peak == 0.0:
        raise ParameterError("training produced an all-zero output layer; check the data and settings")
    params["fc2_w"] = params["fc2_w"] * (OUTPUT_BOUND / peak)
    params["fc2_b"] = params["fc2_b"] * (OUTPUT_BOUND / peak)
    return CNNModel(**params)


def value_bounds(model: CNNModel) -> np.ndarray:
    """Guaranteed bounds ``(5,)`` on |value| after each layer (conv, square, fc1, square, fc2), for any image.

    Inputs lie in [0, 1] (pixels / 16); each linear layer is bounded by the sum of |weight| x the bound of its
    input plus |bias|, which also bounds every partial sum the encrypted circuit forms on the way.
    """
    if not isinstance(model, CNNModel):
        raise ParameterError(f"expected a CNNModel, got {type(model).__name__}")
    return _bounds(model.as_dict())


def _bounds(params: dict[str, np.ndarray]) -> np.ndarray:
    channels = params["conv_w"].shape[0]
    conv = np.abs(params["conv_w"]).reshape(channels, -1).sum(axis=1) + np.abs(params["conv_b"])
    square1 = conv * conv
    fc1 = np.einsum("hcij,c->h", np.abs(params["fc1_w"]), square1) + np.abs(params["fc1_b"])
    square2 = fc1 * fc1
    fc2 = np.abs(params["fc2_w"]) @ square2 + np.abs(params["fc2_b"])
    return np.array([layer.max() for layer in (conv, square1, fc1, square2, fc2)])


def _adam(params, x, y, batches, learning_rate: float, weight_decay: float, beta1: float = 0.9,
          beta2: float = 0.999, eps: float = 1e-8):
    """Adam with decoupled weight decay over the minibatch index rows ``batches (steps, batch)``; one jitted scan."""
    def loss(p, xb, yb):
        logits = forward(p, xb, jnp)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), yb[:, None], axis=1))

    grad = jax.grad(loss)

    def step(state, item):
        p, m, v = state
        t, idx = item
        g = grad(p, x[idx], y[idx])
        m = jax.tree.map(lambda a, b: beta1 * a + (1 - beta1) * b, m, g)
        v = jax.tree.map(lambda a, b: beta2 * a + (1 - beta2) * b * b, v, g)
        corr1, corr2 = 1 - beta1 ** t, 1 - beta2 ** t

        def update(w, mw, vw):
            return w * (1 - learning_rate * weight_decay) - learning_rate * (mw / corr1) / (jnp.sqrt(vw / corr2) + eps)

        return (jax.tree.map(update, p, m, v), m, v), None

    p0 = jax.tree.map(jnp.asarray, params)
    zeros = jax.tree.map(jnp.zeros_like, p0)
    steps = jnp.arange(1, batches.shape[0] + 1, dtype=jnp.float64)
    (p, _, _), _ = jax.jit(lambda s, items: jax.lax.scan(step, s, items))((p0, zeros, zeros), (steps, batches))
    return p


# ------------------------------------------------------------------------------------------------ weight files

BUNDLED_WEIGHTS = os.path.join(os.path.dirname(__file__), "data", "cnn_digits.npz")


def save_model(model: CNNModel, path) -> None:
    """Write the weights to a pickle-free ``.npz`` file (float64 arrays plus a format version)."""
    np.savez(path, format_version=np.array(_FORMAT_VERSION), **model.as_dict())


def load_model(path=None) -> CNNModel:
    """Load weights from ``path`` (default: the weights bundled with hemx, trained by :func:`train_model`).

    If the bundled file is missing (for example a packaging problem), the model is trained with the default
    settings instead, which takes a few seconds. A missing or malformed file given by ``path`` raises.
    """
    if path is None:
        if not os.path.exists(BUNDLED_WEIGHTS):
            return _default_trained()
        path = BUNDLED_WEIGHTS
    if not os.path.exists(path):
        raise SerializationError(f"no CNN weight file at {path}")
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise SerializationError(f"cannot read CNN weights from {path}: {err}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise SerializationError(f"{path} is not an .npz archive of CNN weights")
    try:
        with data:
            arrays = {name: np.array(data[name]) for name in data.files}
    except (OSError, ValueError, EOFError) as err:  # object arrays (pickles) are refused here
        raise SerializationError(f"cannot read CNN weights from {path}: {err}") from None
    version = arrays.pop("format_version", None)
    if version is None or version.shape != () or not np.issubdtype(version.dtype, np.integer) or \
            int(version) != _FORMAT_VERSION:
        raise SerializationError(f"{path} is not a hemx CNN weight file of format {_FORMAT_VERSION}")
    missing, extra = sorted(set(_FIELDS) - set(arrays)), sorted(set(arrays) - set(_FIELDS))
    if missing or extra:
        raise SerializationError(f"{path} is not a CNN weight file: missing {missing}, unexpected {extra}")
    try:
        return CNNModel(**arrays)
    except (ShapeError, ParameterError) as err:
        raise SerializationError(f"{path} holds invalid CNN weights: {err}") from None


@functools.lru_cache(maxsize=1)
def _default_trained() -> CNNModel:
    """The default model trained once per process (only when the bundled weights are missing)."""
    return train_model()
