"""The Keras front end of :mod:`hemx.nn`: a Sequential model saved as ``.h5`` -> :class:`~hemx.nn.graph.Graph`.

Reads the file with ``h5py`` only (no TensorFlow / Keras): the architecture from the ``model_config`` JSON in the
file's attributes, the weights from the ``model_weights/<layer>/<weight name>`` datasets (the layout of Keras 2's
``model.save("x.h5")``; a file holding only weights has no architecture and is refused).

Supported layers (``data_format="channels_last"``, the Keras default): ``InputLayer``; ``Conv2D`` (``padding``
"valid" or "same" with TensorFlow's split of odd padding, equal strides 1 or 2, no dilation or groups, activation
linear/relu); ``BatchNormalization`` (inference: moving statistics); ``Activation`` / ``ReLU`` (relu, linear);
``MaxPooling2D``, ``AveragePooling2D`` ("valid"); ``GlobalAveragePooling2D``; ``Flatten``; ``Dense`` (on vectors);
``Rescaling`` (-> Affine); ``Dropout`` and other train-only noise layers (identity at inference); ``LSTM`` as the
first layer on a sequence input ``(T, D)`` (-> :class:`LSTM`: ``kernel`` ``(D, 4H)``, ``recurrent_kernel`` ``(H,
4H)``, ``bias`` ``(4H,)``, whose gate order i, f, c, o is the layer's i, f, g, o; activation tanh, recurrent
activation sigmoid, ``return_sequences``, ``return_state``, ``go_backwards`` and ``stateful`` off; its output is
the last hidden state ``(H,)``; the graph's input is then the sequence flattened time-major, ``(T * D,)``: feed it
``x.reshape(N, T * D)``). A softmax at the
very end of the model (as an activation or a layer) is dropped: it is monotone, so the argmax (the prediction) is
unchanged, and it is not HE-friendly; anywhere else it is an error. Pooling with a 1x1 window and stride is
dropped (identity). Keras flattens images in HWC order and the IR in CHW order: the following dense layer's rows
are permuted to match. Any other layer raises :class:`~hemx.errors.ParameterError` naming it.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from hemx.errors import ParameterError
from hemx.nn.graph import (
    LSTM, Activation, Affine, AvgPool2D, BatchNorm, Conv2D, Dense, Flatten, GlobalAvgPool, Graph, Input, MaxPool2D,
    Node,
)

__all__ = ["from_keras_h5", "SUPPORTED_LAYERS"]

SUPPORTED_LAYERS = ("InputLayer", "Conv2D", "BatchNormalization", "Activation", "ReLU", "Softmax (last only)",
                    "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D", "Flatten", "Dense", "Rescaling",
                    "Dropout", "LSTM (first, on a (T, D) input)")
_IGNORED = ("Dropout", "SpatialDropout2D", "GaussianNoise", "GaussianDropout", "AlphaDropout", "ActivityRegularization")


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _pair(v, what: str) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    a, b = (int(x) for x in v)
    return a, b


def _same_padding(size: int, k: int, s: int) -> tuple[int, int]:
    out = math.ceil(size / s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


class _Reader:
    def __init__(self, f):
        self.wg = f["model_weights"] if "model_weights" in f else f

    def weights(self, layer: str) -> dict[str, np.ndarray]:
        if layer not in self.wg:
            return {}
        g = self.wg[layer]
        names = [_text(n) for n in g.attrs.get("weight_names", [])]
        if not names:  # no attribute: every dataset below the group
            names = []
            g.visit(lambda n: names.append(n) if hasattr(g[n], "shape") else None)
        out = {}
        for n in names:
            key = n.split("/")[-1].split(":")[0]
            out[key] = np.asarray(g[n], dtype=np.float64)
        return out


def from_keras_h5(path: str | os.PathLike) -> Graph:
    """Import a Keras Sequential model saved as ``.h5`` (see the module docstring for the supported layers).

    The graph takes images as the Keras model does, NHWC ``(N, H, W, C)`` (its ``data_layout``; the nodes are
    channel-first), vectors ``(F,)``, or, for a model on sequences ``(N, T, D)`` (an LSTM first), the sequence
    flattened time-major ``(T * D,)`` (``x.reshape(N, T * D)``), exactly the values the Keras model takes (no
    preprocessing is added).
    """
    try:
        import h5py
    except ImportError:  # pragma: no cover
        raise ParameterError("from_keras_h5 needs h5py: pip install h5py (or hemx[nn])") from None
    with h5py.File(path, "r") as f:
        if "model_config" not in f.attrs:
            raise ParameterError(f"{path} holds no model_config (a weights-only file?): save the whole model")
        config = json.loads(_text(f.attrs["model_config"]))
        cls = config.get("class_name")
        if cls != "Sequential":
            raise ParameterError(f"{path}: a {cls} model; only Sequential models are supported")
        layers = config["config"]["layers"] if isinstance(config["config"], dict) else config["config"]
        return _build(layers, _Reader(f), str(path))


def _lstm(cfg: dict, w: dict, lname: str, seq: tuple[int, int], where: str) -> LSTM:
    """A Keras LSTM layer's config and weights -> :class:`LSTM` (its gate order i, f, c, o is the layer's)."""
    acts = (cfg.get("activation", "tanh"), cfg.get("recurrent_activation", "sigmoid"))
    if acts != ("tanh", "sigmoid"):
        raise ParameterError(f"{where}: LSTM {lname!r} with activation {acts[0]!r} and recurrent_activation "
                             f"{acts[1]!r} (only tanh and sigmoid, the Keras 2 defaults; an old 'hard_sigmoid' model "
                             f"must be retrained or re-saved with recurrent_activation='sigmoid')")
    for flag in ("return_sequences", "return_state", "go_backwards", "stateful", "time_major"):
        if cfg.get(flag):
            raise ParameterError(f"{where}: LSTM {lname!r} with {flag}=True (only the last hidden state of a "
                                 f"forward, stateless pass over a batch-major sequence)")
    units, (_, d) = int(cfg["units"]), seq
    kernel, recurrent = w.get("kernel"), w.get("recurrent_kernel")
    bias = w.get("bias") if cfg.get("use_bias", True) else np.zeros(4 * units)
    if kernel is None or recurrent is None or bias is None:
        raise ParameterError(f"{where}: LSTM {lname!r} lacks weights (kernel, recurrent_kernel, bias); has {sorted(w)}")
    if kernel.shape != (d, 4 * units) or recurrent.shape != (units, 4 * units) or bias.shape != (4 * units,):
        raise ParameterError(f"{where}: LSTM {lname!r} weights kernel {kernel.shape}, recurrent_kernel "
                             f"{recurrent.shape}, bias {bias.shape} (need ({d}, {4 * units}), ({units}, {4 * units}), "
                             f"({4 * units},) for {units} units on {d} features)")
    return LSTM(kernel, recurrent, bias)


def _build(layers: list, reader: _Reader, where: str) -> Graph:
    nodes: list[Node] = []
    counts: dict[str, int] = {}
    shape: list[int] | None = None  # IR shape of the current output
    order: np.ndarray | None = None  # after Flatten: Keras feature j is IR feature order[j]
    seq: tuple[int, int] | None = None  # (T, D) while the current output is the sequence input (the IR's (T * D,))

    def add(prefix, layer, keras_name):
        i = counts.get(prefix, 0)
        counts[prefix] = i + 1
        name = f"{keras_name}" if keras_name and keras_name not in [n.name for n in nodes] else f"{prefix}{i}"
        nodes.append(Node(name, layer, (nodes[-1].name,)))
        return name

    def start(cfg):
        nonlocal shape, seq
        if shape is not None:
            return
        bis = cfg.get("batch_input_shape") or cfg.get("batch_shape")
        if not bis or len(bis) not in (2, 3, 4) or any(d is None for d in bis[1:]):
            raise ParameterError(f"{where}: the model's input shape is {bis}; build it with a fixed input shape "
                                 f"(N, F), (N, T, D) or (N, H, W, C)")
        hw = [int(d) for d in bis[1:]]
        if len(hw) == 2:  # a sequence (T, D): the IR's (T * D,), time-major
            seq, hw = (hw[0], hw[1]), [hw[0] * hw[1]]
        shape = [hw[2], hw[0], hw[1]] if len(hw) == 3 else hw
        nodes.append(Node("input", Input(tuple(shape))))

    def activation(act, keras_name, last: bool):
        act = act or "linear"
        if act == "linear":
            return
        if act == "relu":
            add("relu", Activation("relu"), f"{keras_name}_relu" if keras_name else None)
            return
        if act == "softmax" and last:
            return  # monotone: the argmax is unchanged
        raise ParameterError(f"{where}: activation {act!r} of layer {keras_name!r} is not supported "
                             f"(relu, linear; softmax only at the end)")

    def channels_last(cfg, lname):
        if cfg.get("data_format", "channels_last") != "channels_last":
            raise ParameterError(f"{where}: layer {lname!r} uses {cfg['data_format']}; only channels_last")

    for idx, spec in enumerate(layers):
        cls, cfg = spec["class_name"], spec.get("config", {})
        lname = cfg.get("name", f"layer{idx}")
        last = all(l["class_name"] in _IGNORED for l in layers[idx + 1:])
        if cls == "InputLayer":
            start(cfg)
            continue
        start(cfg)
        w = reader.weights(lname)
        if cls in _IGNORED:
            continue
        if seq is not None and cls != "LSTM":
            raise ParameterError(f"{where}: layer {lname!r} of type {cls} reads the sequence input (T, D) = {seq} "
                                 f"(only an LSTM reads a sequence)")
        if cls == "LSTM":
            if seq is None:
                raise ParameterError(f"{where}: LSTM {lname!r} on an input of IR shape {tuple(shape)} is not supported "
                                     f"(only an LSTM first, on a sequence input (N, T, D): no stacked LSTMs)")
            add("lstm", _lstm(cfg, w, lname, seq, where), lname)
            shape, seq = [int(cfg["units"])], None
        elif cls == "Conv2D":
            channels_last(cfg, lname)
            if len(shape) != 3:
                raise ParameterError(f"{where}: Conv2D {lname!r} on a vector")
            if _pair(cfg.get("dilation_rate", 1), "dilation") != (1, 1) or int(cfg.get("groups", 1)) != 1:
                raise ParameterError(f"{where}: Conv2D {lname!r} is dilated or grouped")
            kernel = w["kernel"]  # (KH, KW, C_in, C_out)
            kh, kw = kernel.shape[:2]
            sh, sw = _pair(cfg.get("strides", 1), "strides")
            if sh != sw or sh not in (1, 2):
                raise ParameterError(f"{where}: Conv2D {lname!r} strides {(sh, sw)} (only equal 1 or 2)")
            if cfg.get("padding", "valid") == "same":
                pad = (_same_padding(shape[1], kh, sh), _same_padding(shape[2], kw, sw))
            elif cfg.get("padding", "valid") == "valid":
                pad = ((0, 0), (0, 0))
            else:
                raise ParameterError(f"{where}: Conv2D {lname!r} padding {cfg.get('padding')!r}")
            bias = w.get("bias") if cfg.get("use_bias", True) else None
            add("conv", Conv2D(kernel.transpose(3, 2, 0, 1), bias, sh, pad), lname)
            c_out = kernel.shape[3]
            shape = [c_out, (shape[1] + sum(pad[0]) - kh) // sh + 1, (shape[2] + sum(pad[1]) - kw) // sw + 1]
            activation(cfg.get("activation"), lname, last)
        elif cls == "BatchNormalization":
            axis = cfg.get("axis", -1)
            axis = axis[0] if isinstance(axis, (list, tuple)) else axis
            if axis not in (-1, len(shape)):
                raise ParameterError(f"{where}: BatchNormalization {lname!r} over axis {axis} (only the last)")
            c = shape[0]
            gamma = w.get("gamma", np.ones(c)) if cfg.get("scale", True) else np.ones(c)
            beta = w.get("beta", np.zeros(c)) if cfg.get("center", True) else np.zeros(c)
            bn = BatchNorm.from_statistics(gamma=gamma, beta=beta, mean=w["moving_mean"], var=w["moving_variance"],
                                           eps=float(cfg.get("epsilon", 1e-3)))
            if order is not None:
                scale, shift = np.empty(c), np.empty(c)
                scale[order], shift[order] = bn.scale, bn.shift
                bn = BatchNorm(scale=scale, shift=shift)
            add("bn", bn, lname)
        elif cls in ("Activation", "ReLU", "Softmax"):
            if cls == "ReLU":
                if cfg.get("max_value") is not None or float(cfg.get("negative_slope", 0) or 0) != 0 \
                        or float(cfg.get("threshold", 0) or 0) != 0:
                    raise ParameterError(f"{where}: ReLU {lname!r} with max_value/negative_slope/threshold")
                act = "relu"
            else:
                act = "softmax" if cls == "Softmax" else cfg.get("activation")
            activation(act, lname, last)
        elif cls in ("MaxPooling2D", "AveragePooling2D"):
            channels_last(cfg, lname)
            k = _pair(cfg.get("pool_size", 2), "pool_size")
            s = _pair(cfg.get("strides") or k, "strides")
            if k[0] != k[1] or s[0] != s[1]:
                raise ParameterError(f"{where}: {cls} {lname!r} with a non-square window {k} / strides {s}")
            if cfg.get("padding", "valid") != "valid":
                pads = (_same_padding(shape[1], k[0], s[0]), _same_padding(shape[2], k[1], s[1]))
                if pads != ((0, 0), (0, 0)):
                    raise ParameterError(f"{where}: {cls} {lname!r} with 'same' padding that pads")
            if k[0] == 1 and s[0] == 1:
                continue  # identity
            layer = MaxPool2D(k[0], s[0]) if cls == "MaxPooling2D" else AvgPool2D(k[0], s[0])
            add("maxpool" if cls == "MaxPooling2D" else "avgpool", layer, lname)
            shape = [shape[0], (shape[1] - k[0]) // s[0] + 1, (shape[2] - k[1]) // s[1] + 1]
        elif cls == "GlobalAveragePooling2D":
            channels_last(cfg, lname)
            if cfg.get("keepdims"):
                raise ParameterError(f"{where}: GlobalAveragePooling2D {lname!r} with keepdims")
            add("gap", GlobalAvgPool(), lname)
            shape = [shape[0]]
        elif cls == "Flatten":
            if len(shape) == 3:
                c, h, wd = shape
                order = np.arange(c * h * wd).reshape(c, h, wd).transpose(1, 2, 0).ravel()
                if np.array_equal(order, np.arange(order.size)):
                    order = None
                add("flatten", Flatten(), lname)
                shape = [c * h * wd]
        elif cls == "Dense":
            if len(shape) != 1:
                raise ParameterError(f"{where}: Dense {lname!r} on an image (add a Flatten)")
            kernel = w["kernel"]  # (F_in, F_out)
            weight = kernel.T.copy()
            if order is not None:
                weight[:, order] = kernel.T
            bias = w.get("bias") if cfg.get("use_bias", True) else None
            add("dense", Dense(weight, bias), lname)
            order = None
            shape = [kernel.shape[1]]
            activation(cfg.get("activation"), lname, last)
        elif cls == "Rescaling":
            scale, offset = cfg.get("scale", 1.0), cfg.get("offset", 0.0)
            if not isinstance(scale, (int, float)) or not isinstance(offset, (int, float)):
                raise ParameterError(f"{where}: Rescaling {lname!r} with per-channel scale/offset")
            add("affine", Affine(float(scale), float(offset)), lname)
        else:
            raise ParameterError(f"{where}: layer {lname!r} of type {cls} is not supported; supported: "
                                 f"{', '.join(SUPPORTED_LAYERS)}")
    if shape is None:
        raise ParameterError(f"{where}: the model has no layers")
    return Graph(tuple(nodes), "NHWC")  # Keras' channels_last: images (N, H, W, C)
