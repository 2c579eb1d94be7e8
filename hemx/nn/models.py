"""Ready models for :mod:`hemx.nn`: He et al.'s CIFAR ResNet-20 in plain JAX, with HE-friendly activations.

The network (He, Zhang, Ren, Sun, "Deep Residual Learning for Image Recognition", CVPR 2016, Sec. 4.2) is a 3x3
conv (16 channels) + batch-norm + activation, three stages of three basic blocks (16, 32, 64 channels; the first
block of stages 2 and 3 halves the image with a stride-2 3x3 conv), a global average pool and a dense layer. A
basic block is ``act(bn(conv(act(bn(conv(x))))) + shortcut(x))``. Where the shape changes, the shortcut is
**option B** of the paper: a 1x1 stride-2 conv with its own batch-norm (a linear layer, which costs no encrypted
depth beyond one plaintext matrix product, where option A's zero-padded channel concatenation would need a
packing-specific masking step). 0.27 M parameters.

Activations (the ``activation=`` argument): ``"relu"`` (the paper's), or a polynomial given by its power-basis
coefficients ``(c0, c1, c2, ...)``. :data:`HE_ACTIVATION` is ``x/2 + x^2/32``: the least-squares quadratic fit of
ReLU on ``[-15, 15]`` (``45/32 + x/2 + x^2/32``) without its constant (the next batch-norm re-centres its input
anyway, up to the zero-padded borders; the network is trained with this exact polynomial). Why this one: degree 2 costs one ciphertext multiplication (one level) per activation and its
constant factors fold into neighbouring layers, so the 19 activations of ResNet-20 cost 19 levels, where a
composite-minimax ReLU costs ~10-14 levels each (far fewer bootstraps). Why so small a quadratic coefficient: the
activation after each residual sum sees an un-normalised stream, and iterating ``f`` stays bounded only below its
repelling fixed point ``(1 - c1) / c2`` (16 here; inputs in [-32, 16] stay bounded). With ``(x + 2)^2 / 8``
(fixed point 3.4) or ``x/2 + x^2/16`` (8) the untrained network's loss was already 1e3..1e6 on Fashion-MNIST and
training diverged, while ``x/2 + x^2/32`` trained stably from the first step (probe runs of 3 epochs on 3,200
images, SGD). The network can still use the quadratic term by scaling its batch-norm gains. The polynomial is fixed
(not trained), so the encrypted circuit does not depend on training.

Parameters are a pytree ``{"params": ..., "batch_stats": ...}`` (Flax-like): convs HWIO without bias (each is
followed by a batch-norm), batch-norm ``gamma/beta`` and running ``mean/var``; inputs are NHWC.
:func:`resnet20_graph` traces the inference function with :func:`hemx.nn.trace.from_jax` into a :class:`Graph`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from hemx.errors import ParameterError
from hemx.nn.graph import Graph

HE_ACTIVATION: tuple[float, ...] = (0.0, 0.5, 0.03125)
BN_EPS = 1e-5
STAGES = ((16, 1), (32, 2), (64, 2))  # (channels, stride of the stage's first block)
BLOCKS_PER_STAGE = 3

ActivationSpec = Union[str, Sequence[float]]

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
FMNIST_WEIGHTS = WEIGHTS_DIR / "resnet20_fmnist.npz"


def activation_fn(activation: ActivationSpec):
    """The element-wise function for an activation spec: ``"relu"`` or power-basis coefficients."""
    if isinstance(activation, str):
        if activation == "relu":
            return jax.nn.relu
        if activation in ("he", "poly"):
            activation = HE_ACTIVATION
        else:
            raise ParameterError(f"unknown activation {activation!r}: 'relu', 'he' or a coefficient sequence")
    coeffs = tuple(float(c) for c in activation)
    if not coeffs:
        raise ParameterError("a polynomial activation needs at least one coefficient")

    def poly(x):  # Horner, highest coefficient first
        y = coeffs[-1] * x if len(coeffs) > 1 else jnp.full_like(x, coeffs[0])
        for c in reversed(coeffs[1:-1]):
            y = (y + c) * x
        return y + coeffs[0] if len(coeffs) > 1 else y

    return poly


def _bn_init(c):
    return ({"gamma": np.ones((c,), np.float32), "beta": np.zeros((c,), np.float32)},
            {"mean": np.zeros((c,), np.float32), "var": np.ones((c,), np.float32)})


def block_names() -> list[tuple[str, int, int, int]]:
    """``(name, c_in, c_out, stride)`` of the nine basic blocks."""
    out, c_in = [], 16
    for s, (c, stride) in enumerate(STAGES):
        for b in range(BLOCKS_PER_STAGE):
            out.append((f"stage{s + 1}_block{b + 1}", c_in, c, stride if b == 0 else 1))
            c_in = c
    return out


def resnet20_init(key, *, in_channels: int = 3, classes: int = 10, zero_init_residual: bool = False) -> dict:
    """Random ResNet-20 variables ``{"params", "batch_stats"}`` (float32 numpy arrays; convs He-normal, the dense
    layer uniform in +-1/sqrt(64), batch-norm gamma 1, beta 0, running mean 0, variance 1).

    ``zero_init_residual``: start each block's last batch-norm with ``gamma = 0`` (Goyal et al. 2017), so every
    block starts as its shortcut; with a polynomial activation this keeps the untrained network's values in the
    polynomial's stable range.
    """
    convs = [("stem", "conv", 3, in_channels, 16)]
    for name, c_in, c_out, stride in block_names():
        convs += [(name, "conv1", 3, c_in, c_out), (name, "conv2", 3, c_out, c_out)]
        if stride != 1 or c_in != c_out:
            convs.append((name, "short_conv", 1, c_in, c_out))
    # one draw for every kernel (eager JAX compiles a sampler per shape: one shape keeps init fast)
    k_conv, k_dense = jax.random.split(key)
    sizes = [k * k * ci * co for _, _, k, ci, co in convs]
    z = np.asarray(jax.random.normal(k_conv, (sum(sizes),), jnp.float32))
    params: dict = {}
    stats: dict = {}
    offset = 0
    for (where, what, k, ci, co), size in zip(convs, sizes):
        std = np.float32(np.sqrt(2.0 / (k * k * ci)))  # He normal (fan-in)
        params.setdefault(where, {})[what] = z[offset:offset + size].reshape(k, k, ci, co) * std
        offset += size
    params["stem"]["bn"], stats["stem"] = _bn_init(16)[0], {"bn": _bn_init(16)[1]}
    for name, c_in, c_out, stride in block_names():
        p, s = params[name], stats.setdefault(name, {})
        for bn in ("bn1", "bn2") + (("short_bn",) if "short_conv" in p else ()):
            p[bn], s[bn] = _bn_init(c_out)
        if zero_init_residual:
            p["bn2"]["gamma"] = np.zeros((c_out,), np.float32)
    bound = np.float32(1.0 / np.sqrt(64))
    w = np.asarray(jax.random.uniform(k_dense, (64 * classes,), jnp.float32, -1.0, 1.0)).reshape(64, classes)
    params["dense"] = {"w": w * bound, "b": np.zeros((classes,), np.float32)}
    return {"params": params, "batch_stats": stats}


def _conv(x, w, stride):
    kh = w.shape[0]
    pad = ((kh // 2, kh // 2), (kh // 2, kh // 2))
    return jax.lax.conv_general_dilated(x, w.astype(x.dtype), (stride, stride), pad,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _bn(x, p, s, new_stats, key, train, momentum):
    if train:
        mean = jnp.mean(x, axis=(0, 1, 2))
        var = jnp.var(x, axis=(0, 1, 2))
        new_stats[key] = {"mean": momentum * s["mean"] + (1 - momentum) * mean,
                          "var": momentum * s["var"] + (1 - momentum) * var}
    else:
        mean, var = s["mean"].astype(x.dtype), s["var"].astype(x.dtype)
    return (x - mean) * jax.lax.rsqrt(var + BN_EPS) * p["gamma"].astype(x.dtype) + p["beta"].astype(x.dtype)


def resnet20_apply(variables: dict, x, *, activation: ActivationSpec = HE_ACTIVATION, train: bool = False,
                   momentum: float = 0.9):
    """Logits ``(B, classes)`` for NHWC images ``x`` ``(B, H, W, C)`` (already scaled as the model was trained).

    ``train=False`` (inference) normalises with the running statistics. ``train=True`` uses the batch's statistics
    and returns ``(logits, new_batch_stats)``.
    """
    act = activation_fn(activation)
    p_all, s_all = variables["params"], variables["batch_stats"]
    new_stats: dict = {}

    def bn(h, where, name):
        sub: dict = {}
        out = _bn(h, p_all[where][name], s_all[where][name], sub, name, train, momentum)
        if train:
            new_stats.setdefault(where, {}).update(sub)
        return out

    h = act(bn(_conv(x, p_all["stem"]["conv"], 1), "stem", "bn"))
    for name, c_in, c_out, stride in block_names():
        p = p_all[name]
        y = act(bn(_conv(h, p["conv1"], stride), name, "bn1"))
        y = bn(_conv(y, p["conv2"], 1), name, "bn2")
        short = bn(_conv(h, p["short_conv"], stride), name, "short_bn") if "short_conv" in p else h
        h = act(y + short)
    h = jnp.mean(h, axis=(1, 2))
    logits = h @ p_all["dense"]["w"].astype(h.dtype) + p_all["dense"]["b"].astype(h.dtype)
    return (logits, new_stats) if train else logits


def resnet20_graph(variables: dict, *, input_shape: Sequence[int] = (32, 32, 3),
                   activation: ActivationSpec = HE_ACTIVATION, input_scale: float | None = None) -> Graph:
    """The inference network as a :class:`Graph`, traced with :func:`hemx.nn.trace.from_jax` in float64.

    ``input_shape``: one NHWC image ``(H, W, C)``; the graph takes NHWC images ``(B, H, W, C)`` as the JAX model
    does (its ``data_layout``). ``input_scale``: if given, the graph takes raw pixels and starts with
    ``Affine(input_scale)`` (e.g. ``1/255``).
    """
    from hemx.nn.trace import from_jax

    v64 = jax.tree_util.tree_map(lambda a: np.asarray(a, dtype=np.float64), variables)

    def fn(x):
        if input_scale is not None:
            x = x * input_scale
        return resnet20_apply(v64, x, activation=activation)

    with jax.enable_x64(True):
        example = np.zeros((1, *input_shape), dtype=np.float64)
        return from_jax(fn, example)


# --- saved weights -----------------------------------------------------------------------------------------

def flatten_variables(variables: dict) -> dict[str, np.ndarray]:
    """``{"params/stem/conv": array, ...}``: the pytree as a flat dict of numpy arrays (for ``np.savez``)."""
    out: dict[str, np.ndarray] = {}

    def walk(prefix, node):
        if isinstance(node, dict):
            for k in sorted(node):
                walk(f"{prefix}/{k}" if prefix else k, node[k])
        else:
            out[prefix] = np.asarray(node)

    walk("", variables)
    return out


def unflatten_variables(flat: dict[str, np.ndarray]) -> dict:
    tree: dict = {}
    for key, value in flat.items():
        parts = key.split("/")
        node = tree
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return tree


def save_variables(path, variables: dict, metadata: dict, *, dtype=np.float32) -> None:
    """Save variables as ``.npz`` (arrays cast to ``dtype``) with JSON ``metadata`` under the ``__meta__`` key."""
    flat = {k: np.asarray(v, dtype=dtype) for k, v in flatten_variables(variables).items()}
    meta = np.frombuffer(json.dumps(metadata, sort_keys=True).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez_compressed(f, __meta__=meta, **flat)


def load_variables(path) -> tuple[dict, dict]:
    """``(variables, metadata)`` from a file written by :func:`save_variables`."""
    with np.load(path) as z:
        meta = json.loads(bytes(z["__meta__"]).decode()) if "__meta__" in z.files else {}
        flat = {k: np.array(z[k]) for k in z.files if k != "__meta__"}
    return unflatten_variables(flat), meta


def load_resnet20_fmnist(path: str | os.PathLike | None = None) -> tuple[dict, dict]:
    """The ResNet-20 trained on Fashion-MNIST (padded to 32x32, 1 channel, pixels / 255) by
    ``scripts/train_resnet20.py``: ``(variables, metadata)``; metadata holds ``activation`` (coefficients),
    ``input_scale``, ``test_accuracy`` and the training settings. Apply with
    ``resnet20_apply(variables, x, activation=tuple(metadata["activation"]))``.
    """
    path = Path(path) if path is not None else FMNIST_WEIGHTS
    if not path.is_file():
        raise ParameterError(f"no trained weights at {path}: run scripts/train_resnet20.py")
    variables, meta = load_variables(path)
    if isinstance(meta.get("activation"), list):
        meta["activation"] = tuple(meta["activation"])
    return variables, meta
