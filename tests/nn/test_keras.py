"""hemx.nn.keras.from_keras_h5: Keras-layout .h5 files written here with h5py (checked against a numpy NHWC forward
pass), and the real pretrained CIFAR-10 CNN of PyPI cifar-10-model 7.4.0 on foolbox's 20 CIFAR-10 test images."""

from __future__ import annotations

import json
import math

import h5py
import numpy as np
import pytest

from hemx.errors import ParameterError
from hemx.nn.graph import Conv2D, Dense, reference
from hemx.nn.keras import from_keras_h5

from tests.helpers import nn_data


# --- a Keras 2 .h5 writer (the layout of model.save("x.h5")) ------------------------------------------------------

def write_keras_h5(path, input_shape, layers):
    """``layers``: ``(class_name, config, {weight name: array})``, config without the name (added here)."""
    specs, names = [{"class_name": "InputLayer", "config": {"batch_input_shape": [None, *input_shape],
                                                            "name": "input_1", "dtype": "float32"}}], []
    with h5py.File(path, "w") as f:
        mw = f.create_group("model_weights")
        for i, (cls, cfg, weights) in enumerate(layers):
            name = f"{cls.lower()}_{i}"
            specs.append({"class_name": cls, "config": {"name": name, **cfg}})
            names.append(name.encode())
            g = mw.create_group(name)
            g.attrs["weight_names"] = [f"{name}/{k}:0".encode() for k in weights]
            for k, v in weights.items():
                g.create_dataset(f"{name}/{k}:0", data=np.asarray(v, dtype=np.float32))
        mw.attrs["layer_names"] = names
        mw.attrs["backend"], mw.attrs["keras_version"] = b"tensorflow", b"2.9.0"
        f.attrs["model_config"] = json.dumps({"class_name": "Sequential",
                                              "config": {"name": "sequential", "layers": specs}})
        f.attrs["keras_version"], f.attrs["backend"] = "2.9.0", "tensorflow"


# --- a numpy NHWC forward pass with Keras semantics ---------------------------------------------------------------

def _tf_same(size, k, s):
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def np_forward(x, layers):
    """x: (B, H, W, C) float64 -> Keras outputs (softmax applied where the model says so)."""
    for cls, cfg, w in layers:
        w = {k: np.asarray(v, dtype=np.float32).astype(np.float64) for k, v in w.items()}
        if cls == "Conv2D":
            k = w["kernel"]
            kh, kw, _, c_out = k.shape
            s = cfg["strides"][0]
            if cfg["padding"] == "same":
                (t, b), (l, r) = _tf_same(x.shape[1], kh, s), _tf_same(x.shape[2], kw, s)
                x = np.pad(x, ((0, 0), (t, b), (l, r), (0, 0)))
            ho, wo = (x.shape[1] - kh) // s + 1, (x.shape[2] - kw) // s + 1
            out = np.zeros((x.shape[0], ho, wo, c_out))
            for i in range(ho):
                for j in range(wo):
                    patch = x[:, i * s:i * s + kh, j * s:j * s + kw, :]
                    out[:, i, j, :] = np.einsum("bhwc,hwco->bo", patch, k)
            x = out + w["bias"]
            x = _act(x, cfg.get("activation"))
        elif cls == "BatchNormalization":
            x = (x - w["moving_mean"]) / np.sqrt(w["moving_variance"] + cfg["epsilon"]) * w["gamma"] + w["beta"]
        elif cls in ("MaxPooling2D", "AveragePooling2D"):
            k, s = cfg["pool_size"][0], cfg["strides"][0]
            ho, wo = (x.shape[1] - k) // s + 1, (x.shape[2] - k) // s + 1
            win = np.stack([x[:, i * s:i * s + k, j * s:j * s + k, :] for i in range(ho) for j in range(wo)], 1)
            red = win.max(axis=(2, 3)) if cls == "MaxPooling2D" else win.mean(axis=(2, 3))
            x = red.reshape(x.shape[0], ho, wo, x.shape[3])
        elif cls == "GlobalAveragePooling2D":
            x = x.mean(axis=(1, 2))
        elif cls == "Flatten":
            x = x.reshape(x.shape[0], -1)  # HWC order, as Keras
        elif cls == "Dense":
            x = _act(x @ w["kernel"] + w["bias"], cfg.get("activation"))
        elif cls == "Activation":
            x = _act(x, cfg["activation"])
        elif cls == "Rescaling":
            x = x * cfg["scale"] + cfg["offset"]
        elif cls == "Dropout":
            pass
        else:
            raise AssertionError(cls)
    return x


def _act(x, name):
    if name in (None, "linear"):
        return x
    if name == "relu":
        return np.maximum(x, 0)
    if name == "softmax":
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    raise AssertionError(name)


def _bn_weights(rng, c):
    return {"gamma": rng.uniform(0.5, 1.5, c), "beta": rng.normal(size=c) * 0.2,
            "moving_mean": rng.normal(size=c) * 0.3, "moving_variance": rng.uniform(0.5, 2.0, c)}


def _conv_weights(rng, kh, c_in, c_out):
    return {"kernel": rng.normal(size=(kh, kh, c_in, c_out)) * 0.4, "bias": rng.normal(size=c_out) * 0.1}


def _model_a(rng):
    """Stride-2 'same' conv with TF's asymmetric padding, max/avg pools, flatten (HWC) then a vector batch-norm and
    dense layers, dropout, final softmax."""
    return (16, 16, 3), [
        ("Rescaling", {"scale": 1 / 255.0, "offset": 0.0}, {}),
        ("Conv2D", {"filters": 4, "kernel_size": [3, 3], "strides": [2, 2], "padding": "same", "activation": "relu",
                    "data_format": "channels_last", "use_bias": True}, _conv_weights(rng, 3, 3, 4)),
        ("BatchNormalization", {"axis": [3], "epsilon": 1e-3, "center": True, "scale": True}, _bn_weights(rng, 4)),
        ("MaxPooling2D", {"pool_size": [2, 2], "strides": [2, 2], "padding": "valid"}, {}),
        ("Conv2D", {"filters": 6, "kernel_size": [3, 3], "strides": [1, 1], "padding": "same", "activation": "linear",
                    "use_bias": True}, _conv_weights(rng, 3, 4, 6)),
        ("Activation", {"activation": "relu"}, {}),
        ("AveragePooling2D", {"pool_size": [2, 2], "strides": [2, 2], "padding": "valid"}, {}),
        ("Flatten", {"data_format": "channels_last"}, {}),
        ("BatchNormalization", {"axis": -1, "epsilon": 1e-3}, _bn_weights(rng, 24)),
        ("Dense", {"units": 7, "activation": "relu", "use_bias": True},
         {"kernel": rng.normal(size=(24, 7)) * 0.3, "bias": rng.normal(size=7) * 0.1}),
        ("Dropout", {"rate": 0.5}, {}),
        ("Dense", {"units": 3, "activation": "softmax", "use_bias": True},
         {"kernel": rng.normal(size=(7, 3)), "bias": rng.normal(size=3)}),
    ]


def _model_b(rng):
    """'valid' stride-2 conv, global average pool, a dense layer, softmax as its own layer."""
    return (9, 9, 2), [
        ("Conv2D", {"filters": 5, "kernel_size": [3, 3], "strides": [2, 2], "padding": "valid", "activation": "relu",
                    "use_bias": True}, _conv_weights(rng, 3, 2, 5)),
        ("GlobalAveragePooling2D", {}, {}),
        ("Dense", {"units": 4, "activation": "linear", "use_bias": True},
         {"kernel": rng.normal(size=(5, 4)), "bias": rng.normal(size=4)}),
        ("Activation", {"activation": "softmax"}, {}),
    ]


@pytest.mark.parametrize("make", [_model_a, _model_b])
def test_written_h5_matches_numpy_forward(tmp_path, make):
    rng = np.random.default_rng(0)
    shape, layers = make(rng)
    path = tmp_path / "m.h5"
    write_keras_h5(path, shape, layers)
    g = from_keras_h5(path)
    assert g.input_shape == (shape[2], shape[0], shape[1]) and g.data_layout == "NHWC"
    assert g.model_input_shape == tuple(shape)
    x = rng.uniform(0, 255 if make is _model_a else 1, size=(4, *shape))
    got = reference(g, x)  # NHWC, as the model takes it
    logits = np_forward(x, layers[:-1] + [(layers[-1][0], {**layers[-1][1], "activation": "linear"},
                                           layers[-1][2])])  # the graph ends before the softmax
    np.testing.assert_allclose(got, logits, rtol=1e-12, atol=1e-12 * np.max(np.abs(logits)))
    probs = np_forward(x, layers)
    assert np.array_equal(got.argmax(1), probs.argmax(1))


def test_same_padding_is_tensorflows(tmp_path):
    rng = np.random.default_rng(1)
    shape, layers = _model_a(rng)
    write_keras_h5(tmp_path / "m.h5", shape, layers)
    conv = next(n.layer for n in from_keras_h5(tmp_path / "m.h5").nodes if isinstance(n.layer, Conv2D))
    assert conv.stride == 2 and conv.padding == ((0, 1), (0, 1))  # 16 -> 8 with a 3x3 window: one pixel, after


@pytest.mark.parametrize("layers, words", [
    ([("LSTM", {"units": 3}, {})], ["LSTM", "not supported"]),
    ([("Flatten", {}, {}), ("Dense", {"units": 2, "activation": "softmax"},
                            {"kernel": np.ones((12, 2)), "bias": np.zeros(2)}),
      ("Dense", {"units": 2, "activation": "linear"}, {"kernel": np.ones((2, 2)), "bias": np.zeros(2)})],
     ["softmax"]),
    ([("Flatten", {}, {}), ("Dense", {"units": 2, "activation": "tanh"},
                            {"kernel": np.ones((12, 2)), "bias": np.zeros(2)})], ["tanh"]),
])
def test_unsupported_layers_are_named(tmp_path, layers, words):
    write_keras_h5(tmp_path / "m.h5", (2, 2, 3), layers)
    with pytest.raises(ParameterError) as e:
        from_keras_h5(tmp_path / "m.h5")
    for w in words:
        assert w in str(e.value)


def test_weights_only_file_is_refused(tmp_path):
    with h5py.File(tmp_path / "w.h5", "w") as f:
        f.create_group("dense")
    with pytest.raises(ParameterError, match="model_config"):
        from_keras_h5(tmp_path / "w.h5")


@pytest.fixture(scope="module")
def cifar10_files():
    return nn_data.cifar10_files()


def test_pretrained_cifar10_cnn_labels_all_20_foolbox_images(cifar10_files):
    path, (images, labels) = cifar10_files
    g = from_keras_h5(path)
    kinds = [type(n.layer).__name__ for n in g.nodes]
    assert kinds.count("Conv2D") == 6 and kinds.count("BatchNorm") == 6 and kinds.count("MaxPool2D") == 2
    assert [n.layer.weight.shape for n in g.nodes if isinstance(n.layer, Dense)] == [(1024, 64), (512, 1024),
                                                                                    (10, 512)]
    logits = reference(g, images.astype(np.float64))  # raw 0..255 pixels, NHWC as the Keras model takes them
    assert logits.shape == (20, 10)
    np.testing.assert_array_equal(logits.argmax(1), labels)
    assert math.isfinite(float(np.abs(logits).max()))


# --- LSTM ---------------------------------------------------------------------------------------------------------

def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def keras_lstm(x, kernel, recurrent_kernel, bias):
    """Keras's LSTM (activation tanh, recurrent_activation sigmoid, return_sequences False) written out: x (B, T, D),
    the weights' four column blocks the gates i, f, c, o -> the last hidden state (B, H)."""
    units = recurrent_kernel.shape[0]
    h = np.zeros((x.shape[0], units))
    c = np.zeros((x.shape[0], units))
    for t in range(x.shape[1]):
        z = x[:, t, :] @ kernel + h @ recurrent_kernel + bias
        i = _sigmoid(z[:, :units])
        f = _sigmoid(z[:, units:2 * units])
        c = f * c + i * np.tanh(z[:, 2 * units:3 * units])
        h = _sigmoid(z[:, 3 * units:]) * np.tanh(c)
    return h


def _f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)  # as the .h5 stores it


_LSTM_CFG = {"units": 5, "activation": "tanh", "recurrent_activation": "sigmoid", "use_bias": True,
             "return_sequences": False, "return_state": False, "go_backwards": False, "stateful": False,
             "unroll": False, "time_major": False, "dropout": 0.0, "recurrent_dropout": 0.0}


def _lstm_weights(rng, d, units, *, bias=True):
    """Named as Keras 2 writes them: <layer>/lstm_cell/kernel:0, ..."""
    w = {"lstm_cell/kernel": rng.normal(size=(d, 4 * units)) * 0.5,
         "lstm_cell/recurrent_kernel": rng.normal(size=(units, 4 * units)) * 0.5}
    if bias:
        w["lstm_cell/bias"] = rng.normal(size=4 * units) * 0.3
    return w


@pytest.mark.parametrize("use_bias", [True, False])
def test_lstm_h5_matches_numpy_keras_lstm(tmp_path, use_bias):
    """(T, D) = (6, 3) sequences -> LSTM(5) -> Dense(2): the graph is Input((18,)) -> LSTM -> Dense and its reference
    on the sequences flattened time-major matches the Keras LSTM written out in numpy."""
    rng = np.random.default_rng(36)
    w = _lstm_weights(rng, 3, 5, bias=use_bias)
    dense = {"kernel": rng.normal(size=(5, 2)), "bias": rng.normal(size=2)}
    layers = [("LSTM", {**_LSTM_CFG, "use_bias": use_bias}, w),
              ("Dense", {"units": 2, "activation": "linear", "use_bias": True}, dense)]
    write_keras_h5(tmp_path / "m.h5", (6, 3), layers)
    g = from_keras_h5(tmp_path / "m.h5")
    assert [type(n.layer).__name__ for n in g.nodes] == ["Input", "LSTM", "Dense"]
    assert g.input_shape == (18,)
    x = rng.normal(size=(4, 6, 3))
    ws = {k.split("/")[-1]: _f32(v) for k, v in w.items()}
    want = keras_lstm(x, ws["kernel"], ws["recurrent_kernel"], ws.get("bias", np.zeros(20))) @ _f32(dense["kernel"]) \
        + _f32(dense["bias"])
    got = reference(g, x.reshape(4, 18))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.max(np.abs(want)))


@pytest.mark.parametrize("layers, words", [
    ([("LSTM", {**_LSTM_CFG, "recurrent_activation": "hard_sigmoid"}, {})], ["'hard_sigmoid'", "sigmoid"]),
    ([("LSTM", {**_LSTM_CFG, "activation": "relu"}, {})], ["'relu'", "tanh"]),
    ([("LSTM", {**_LSTM_CFG, "return_sequences": True}, {})], ["return_sequences"]),
    ([("LSTM", {**_LSTM_CFG, "go_backwards": True}, {})], ["go_backwards"]),
    ([("LSTM", {**_LSTM_CFG, "stateful": True}, {})], ["stateful"]),
    ([("LSTM", _LSTM_CFG, {"lstm_cell/kernel": np.ones((3, 20))})], ["lacks weights"]),
    ([("LSTM", _LSTM_CFG, {"lstm_cell/kernel": np.ones((4, 20)), "lstm_cell/recurrent_kernel": np.ones((5, 20)),
                           "lstm_cell/bias": np.ones(20)})], ["kernel (4, 20)", "(3, 20)"]),
    ([("Dense", {"units": 2, "activation": "linear"}, {"kernel": np.ones((3, 2)), "bias": np.zeros(2)})],
     ["Dense", "only an LSTM reads a sequence"]),
    ([("LSTM", _LSTM_CFG, {}), ("LSTM", _LSTM_CFG, {})], ["stacked"]),
])
def test_unsupported_lstm_is_named(tmp_path, layers, words):
    rng = np.random.default_rng(5)
    layers = [(cls, cfg, w or _lstm_weights(rng, 3, 5)) if cls == "LSTM" else (cls, cfg, w)
              for cls, cfg, w in layers]
    write_keras_h5(tmp_path / "m.h5", (6, 3), layers)
    with pytest.raises(ParameterError) as e:
        from_keras_h5(tmp_path / "m.h5")
    for w in words:
        assert w in str(e.value), str(e.value)
