"""ONNX models built by hand with ``onnx.helper`` for tests/nn/test_onnx.py: a one-input, one-output model from a
list of nodes and initializers, onnxruntime's output for it, the shipped ResNet-20 written as ONNX nodes from
its JAX definition (:mod:`hemx.nn.models`) and weights, and a Keras ``Sequential`` ``.h5`` file written as the ONNX
graph a converter would produce (read with h5py here, independently of :mod:`hemx.nn.keras`)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hemx.nn import models

OPSET = 17  # the default-domain opset the models declare (from_onnx takes 13 and later)
IR_VERSION = 8  # the ONNX IR version of opset 17, which onnxruntime 1.31 reads


def make_model(nodes, initializers: dict, input_shape, *, double: bool = True, batch="N", opset: int = OPSET,
               name: str = "test", check: bool = True) -> onnx.ModelProto:
    """A model reading ``x`` ``(batch, *input_shape)`` and returning ``y``; ``initializers``: name -> array (float
    arrays are stored as float64 with ``double``, else float32; integer arrays as int64). ``check``: infer the
    output's shape and run onnx's checker (off for models that are meant to be refused)."""
    elem = TensorProto.DOUBLE if double else TensorProto.FLOAT
    fdt = np.float64 if double else np.float32
    inits = [numpy_helper.from_array(np.asarray(v, dtype=fdt if np.asarray(v).dtype.kind == "f" else np.int64), k)
             for k, v in initializers.items()]
    graph = helper.make_graph(list(nodes), name, [helper.make_tensor_value_info("x", elem, [batch, *input_shape])],
                              [helper.make_tensor_value_info("y", elem, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)
    if check:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)  # fills in the output's shape
        onnx.checker.check_model(model)
    return model


def run_ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """onnxruntime's output of ``model`` on ``x`` (cast to the model's input type), as float64."""
    import onnxruntime as ort

    elem = model.graph.input[0].type.tensor_type.elem_type
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.asarray(x, dtype=np.float64 if elem == TensorProto.DOUBLE else np.float32)
    return np.asarray(session.run(None, {"x": x})[0], dtype=np.float64)


def polynomial_nodes(x: str, coeffs, out: str, prefix: str) -> tuple[list, dict]:
    """``sum(coeffs[k] * x**k)`` as Mul / Add nodes (``x*x`` for the square, ``Pow`` for higher powers), the way an
    exporter writes ``c0 + c1*x + c2*x*x``: ``(nodes, initializers)``."""
    nodes, inits, terms = [], {}, []
    for k, c in enumerate(coeffs):
        if c == 0.0:
            continue
        if k == 0:
            term = None
        elif k == 1:
            term = x
        elif k == 2:
            term = f"{prefix}/sq"
            nodes.append(helper.make_node("Mul", [x, x], [term], name=f"{prefix}/square"))
        else:
            inits[f"{prefix}/e{k}"] = np.array(float(k))
            term = f"{prefix}/pow{k}"
            nodes.append(helper.make_node("Pow", [x, f"{prefix}/e{k}"], [term], name=f"{prefix}/pow{k}"))
        inits[f"{prefix}/c{k}"] = np.array(float(c))
        scaled = f"{prefix}/t{k}"
        if term is None:
            terms.append(f"{prefix}/c{k}")
            continue
        nodes.append(helper.make_node("Mul", [term, f"{prefix}/c{k}"], [scaled], name=f"{prefix}/scale{k}"))
        terms.append(scaled)
    acc = terms[0]
    for i, t in enumerate(terms[1:]):
        nxt = out if i == len(terms) - 2 else f"{prefix}/sum{i}"
        nodes.append(helper.make_node("Add", [acc, t], [nxt], name=f"{prefix}/add{i}"))
        acc = nxt
    if acc != out:
        nodes.append(helper.make_node("Identity", [acc], [out], name=f"{prefix}/out"))
    return nodes, inits


def resnet20_onnx(variables: dict, *, activation, input_scale: float | None, input_shape=(1, 32, 32),
                  double: bool = True) -> onnx.ModelProto:
    """:func:`hemx.nn.models.resnet20_apply` (inference) as an ONNX model on NCHW images ``(N, *input_shape)``:
    Conv (OIHW, no bias) + BatchNormalization + the polynomial as Mul/Add, the blocks' Add, GlobalAveragePool,
    Flatten, Gemm; ``input_scale`` as a leading Mul."""
    p_all, s_all = variables["params"], variables["batch_stats"]
    nodes, inits = [], {}
    counter = [0]

    def conv(x, where, name, stride):
        w = np.asarray(p_all[where][name], dtype=np.float64)  # HWIO
        k = w.shape[0]
        inits[f"{where}/{name}/w"] = w.transpose(3, 2, 0, 1)
        out = f"{where}/{name}"
        nodes.append(helper.make_node("Conv", [x, f"{out}/w"], [out], name=out, kernel_shape=[k, k],
                                      strides=[stride] * 2, pads=[k // 2] * 4))
        return out

    def bn(x, where, name):
        out = f"{where}/{name}"
        p, s = p_all[where][name], s_all[where][name]
        for key, v in (("gamma", p["gamma"]), ("beta", p["beta"]), ("mean", s["mean"]), ("var", s["var"])):
            inits[f"{out}/{key}"] = np.asarray(v, dtype=np.float64)
        nodes.append(helper.make_node("BatchNormalization", [x] + [f"{out}/{k}" for k in ("gamma", "beta", "mean",
                                                                                          "var")],
                                      [out], name=out, epsilon=models.BN_EPS))
        return out

    def act(x):
        counter[0] += 1
        out = f"act{counter[0]}"
        n, i = polynomial_nodes(x, activation, out, out)
        nodes.extend(n)
        inits.update(i)
        return out

    h = "x"
    if input_scale is not None:
        inits["input_scale"] = np.array(float(input_scale))
        nodes.append(helper.make_node("Mul", ["x", "input_scale"], ["scaled"], name="scale"))
        h = "scaled"
    h = act(bn(conv(h, "stem", "conv", 1), "stem", "bn"))
    for name, c_in, c_out, stride in models.block_names():
        y = act(bn(conv(h, name, "conv1", stride), name, "bn1"))
        y = conv(y, name, "conv2", 1)
        short = conv(h, name, "short_conv", stride) if "short_conv" in p_all[name] else h  # the order from_jax has
        y = bn(y, name, "bn2")
        short = bn(short, name, "short_bn") if "short_conv" in p_all[name] else h
        nodes.append(helper.make_node("Add", [y, short], [f"{name}/sum"], name=f"{name}/sum"))
        h = act(f"{name}/sum")
    nodes.append(helper.make_node("GlobalAveragePool", [h], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1))
    inits["dense/w"] = np.asarray(p_all["dense"]["w"], dtype=np.float64)
    inits["dense/b"] = np.asarray(p_all["dense"]["b"], dtype=np.float64)
    nodes.append(helper.make_node("Gemm", ["flat", "dense/w", "dense/b"], ["y"], name="dense"))
    return make_model(nodes, inits, input_shape, double=double, name="resnet20")


def keras_sequential_h5_as_onnx(path, *, double: bool = True) -> onnx.ModelProto:
    """A Keras ``Sequential`` ``.h5`` file (Conv2D with "valid" / "same" padding, BatchNormalization,
    MaxPooling2D, Flatten, Dense, Dropout; ReLU or linear activations) as an ONNX model on NCHW images, written as
    tf2onnx writes such a model: kernels HWIO -> OIHW, the batch norm with its moving statistics and epsilon, and
    the first Dense's rows permuted from Keras's channels-last flattening (``(h, w, c)``) to ONNX's ``(c, h, w)``
    (which replaces the transpose a converter puts before ``Flatten``)."""
    import json

    import h5py

    with h5py.File(path, "r") as f:
        config = json.loads(f.attrs["model_config"])
        weights = f["model_weights"]

        def w(layer: str, name: str) -> np.ndarray:
            return np.asarray(weights[layer][layer][f"{name}:0"], dtype=np.float64)

        layers = config["config"]["layers"]
        shape = layers[0]["config"].get("batch_input_shape") or layers[0]["config"].get("batch_shape")
        h, wd, c = shape[1:]
        nodes, inits, x, flat_from = [], {}, "x", None

        def emit(op, inputs, name, **attrs):
            nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
            return name

        def activation(x, cfg, name):
            act = cfg.get("activation", "linear")
            if act == "relu":
                return emit("Relu", [x], f"{name}/relu")
            assert act == "linear", act
            return x

        for layer in layers:
            cls, cfg = layer["class_name"], layer["config"]
            name = cfg["name"]
            if cls in ("InputLayer", "Dropout"):
                continue
            if cls == "Conv2D":
                k = w(name, "kernel")  # (kh, kw, cin, cout)
                kh, kw = k.shape[:2]
                sh, sw = cfg["strides"]
                inits[f"{name}/w"], inits[f"{name}/b"] = k.transpose(3, 2, 0, 1), w(name, "bias")
                if cfg["padding"] == "valid":
                    pads, h, wd = [0, 0, 0, 0], (h - kh) // sh + 1, (wd - kw) // sw + 1
                else:
                    pads, h, wd = [kh // 2, kw // 2, kh // 2, kw // 2], -(-h // sh), -(-wd // sw)
                x = emit("Conv", [x, f"{name}/w", f"{name}/b"], name, kernel_shape=[kh, kw], strides=[sh, sw],
                         pads=pads)
                x, c = activation(x, cfg, name), k.shape[3]
            elif cls == "BatchNormalization":
                for key, src in (("gamma", "gamma"), ("beta", "beta"), ("mean", "moving_mean"),
                                 ("var", "moving_variance")):
                    inits[f"{name}/{key}"] = w(name, src)
                x = emit("BatchNormalization", [x] + [f"{name}/{k}" for k in ("gamma", "beta", "mean", "var")],
                         name, epsilon=float(cfg["epsilon"]))
            elif cls == "MaxPooling2D":
                ph, pw = cfg["pool_size"]
                sh, sw = cfg["strides"] or cfg["pool_size"]
                x = emit("MaxPool", [x], name, kernel_shape=[ph, pw], strides=[sh, sw])
                h, wd = (h - ph) // sh + 1, (wd - pw) // sw + 1
            elif cls == "Flatten":
                x = emit("Flatten", [x], name, axis=1)
                flat_from = (h, wd, c)
            elif cls == "Dense":
                kernel = w(name, "kernel")
                if flat_from is not None:  # rows (h, w, c) -> (c, h, w)
                    fh, fw, fc = flat_from
                    kernel = kernel.reshape(fh, fw, fc, -1).transpose(2, 0, 1, 3).reshape(fh * fw * fc, -1)
                    flat_from = None
                inits[f"{name}/w"], inits[f"{name}/b"] = kernel, w(name, "bias")
                x = activation(emit("Gemm", [x, f"{name}/w", f"{name}/b"], name), cfg, name)
            else:
                raise ValueError(f"keras_sequential_h5_as_onnx: {cls} is not written here")
        nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    return make_model(nodes, inits, (shape[3], shape[1], shape[2]), double=double, name="keras_sequential")


__all__ = ["OPSET", "IR_VERSION", "make_model", "run_ort", "polynomial_nodes", "resnet20_onnx",
           "keras_sequential_h5_as_onnx"]


def lstm_initializers(rng, features: int, hidden: int, *, bias: bool = True, scale: float = 0.5) -> dict:
    """Weights of a one-direction ONNX ``LSTM`` (gate blocks i, o, f, c): ``W`` ``(1, 4H, D)``, ``R`` ``(1, 4H, H)``
    and, with ``bias``, ``B`` ``(1, 8H)``; float32 values (exact in float32 and float64 models alike)."""
    def f32(*shape):
        return np.asarray(rng.normal(size=shape) * scale, dtype=np.float32).astype(np.float64)

    out = {"W": f32(1, 4 * hidden, features), "R": f32(1, 4 * hidden, hidden)}
    if bias:
        out["B"] = f32(1, 8 * hidden)
    return out
