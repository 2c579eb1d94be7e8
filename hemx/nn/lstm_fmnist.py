"""The shipped Fashion-MNIST LSTM: each image read row by row, 28 time steps of 28 pixels (pixels / 255, in [0, 1]).

The trained model (``scripts/train_fmnist_lstm.py``, weights in ``hemx/nn/weights/lstm_fmnist.npz`` with their
test accuracy in the metadata) is a projection ``28 -> 128`` applied to every row, an LSTM of 128 cells reading the
projected 128-dimensional rows, and a dense head ``128 -> 10`` on the last hidden state. Parameters::

    {"proj": {"w": (28, 128), "b": (128,)}, "lstm": {"w_x": (128, 512), "w_h": (128, 512), "bias": (512,)},
     "head": {"w": (128, 10), "b": (10,)}}          # LSTM gates in the column order i, f, g, o

**The projection is folded into the LSTM's input weights** for the encrypted network: the LSTM only ever reads
``u_t = x_t P + b_P`` through ``u_t w_x``, so ``w_x' = P w_x`` ``(28, 512)`` and ``bias' = bias + b_P w_x`` give a
28-input LSTM that computes exactly the same function (a composition of linear maps; float64 agreement ~1e-15). The
encrypted input is then 784 values per image (fits the 1,024 slots each image gets when 32 share a 2^15-slot
ciphertext) instead of 28 x 128 = 3,584, and each step's input map has 28 columns instead of 128; the recurrent part
(4 gates of 128 x 128 on ``h``, the products, sigmoid and tanh) is the full 128-cell LSTM.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hemx.errors import ParameterError, ShapeError

ROWS = 28  # time steps
WIDTH = 28  # pixels per step
WEIGHTS = Path(__file__).resolve().parent / "weights" / "lstm_fmnist.npz"


def load(split: str, count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``count`` (default all) Fashion-MNIST images of ``split`` as sequences: ``(N, 784)`` float64 pixels / 255,
    time-major (row ``t`` at ``[28 t, 28 t + 28)``), and uint8 labels ``(N,)``."""
    from hemx.nn import data

    images, labels = data.fashion_mnist(split)
    if count is not None:
        images, labels = images[:count], labels[:count]
    return images.reshape(len(images), ROWS * WIDTH).astype(np.float64) / 255.0, np.asarray(labels)


def apply(params: dict, x, *, with_ranges: bool = False):
    """The model in JAX on ``x`` ``(B, 784)`` or ``(B, 28, 28)`` -> logits ``(B, 10)``; with ``with_ranges`` also
    ``(T, B, 5 H)``: every gate pre-activation's and cell's ``|value|`` (for the training's range penalty)."""
    import jax
    import jax.numpy as jnp

    seq = jnp.reshape(jnp.asarray(x), (-1, ROWS, WIDTH))
    u = seq @ params["proj"]["w"] + params["proj"]["b"]  # (B, T, 128)
    w_x, w_h, bias = params["lstm"]["w_x"], params["lstm"]["w_h"], params["lstm"]["bias"]
    hid = w_h.shape[0]

    def cell(carry, u_t):
        h, c = carry
        z = u_t @ w_x + h @ w_h + bias
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), jnp.abs(jnp.concatenate([z, c], axis=-1))

    zero = jnp.zeros((seq.shape[0], hid), u.dtype)
    (h, _), reach = jax.lax.scan(cell, (zero, zero), jnp.swapaxes(u, 0, 1))
    logits = h @ params["head"]["w"] + params["head"]["b"]
    return (logits, reach) if with_ranges else logits


def load_lstm_fmnist(path: str | os.PathLike | None = None) -> tuple[dict, dict]:
    """``(params, metadata)`` of the shipped model (module docstring); metadata holds ``test_accuracy``,
    ``input_scale`` and the training settings."""
    from hemx.nn.models import load_variables

    path = Path(path) if path is not None else WEIGHTS
    if not path.is_file():
        raise ParameterError(f"no trained LSTM weights at {path}: run scripts/train_fmnist_lstm.py")
    params, meta = load_variables(path)
    want = {"proj": {"w": (WIDTH, None), "b": (None,)}, "lstm": {"w_x": (None, None), "w_h": (None, None),
                                                                 "bias": (None,)}, "head": {"w": (None, None), "b": (None,)}}
    for group, entries in want.items():
        for name, shape in entries.items():
            arr = params.get(group, {}).get(name)
            if arr is None or arr.ndim != len(shape) or (shape[0] is not None and arr.shape[0] != shape[0]):
                raise ShapeError(f"{path}: {group}/{name} is missing or has the wrong shape "
                                 f"({None if arr is None else arr.shape}); retrain with scripts/train_fmnist_lstm.py")
    return params, meta


def folded(params: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The LSTM with the projection folded in (module docstring): ``(w_x' (28, 4H), w_h (H, 4H), bias' (4H,))`` in
    float64."""
    p = {g: {k: np.asarray(v, dtype=np.float64) for k, v in d.items()} for g, d in params.items()}
    w_x = p["proj"]["w"] @ p["lstm"]["w_x"]
    bias = p["lstm"]["bias"] + p["proj"]["b"] @ p["lstm"]["w_x"]
    return w_x, p["lstm"]["w_h"], bias


def graph(params: dict, *, degree: int | None = None):
    """The model as a :class:`~hemx.nn.graph.Graph`: input ``(784,)`` (pixels / 255, time-major), the LSTM with the
    projection folded in (sigmoid / tanh polynomials of ``degree``, default the layer's), the dense head ``(10,)``."""
    from hemx.nn import graph as G

    w_x, w_h, bias = folded(params)
    lstm = G.LSTM(w_x, w_h, bias) if degree is None else G.LSTM(w_x, w_h, bias, degree=degree)
    head_w = np.asarray(params["head"]["w"], dtype=np.float64).T
    head_b = np.asarray(params["head"]["b"], dtype=np.float64)
    return G.Graph((G.Node("input", G.Input((ROWS * WIDTH,))), G.Node("lstm", lstm, ("input",)),
                    G.Node("head", G.Dense(head_w, head_b), ("lstm",))))


__all__ = ["ROWS", "WIDTH", "WEIGHTS", "load", "apply", "load_lstm_fmnist", "folded", "graph"]
