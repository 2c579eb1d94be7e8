"""hemx.nn.onnx.from_onnx: ONNX models built here with onnx.helper (one per supported op, a small residual CNN),
checked against onnxruntime; unsupported ops and attributes; an export from PyTorch (when torch is installed); the
shipped ResNet-20 written as ONNX nodes, whose import compiles to the same plan as from_jax's graph."""

from __future__ import annotations

import inspect
import io
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the onnx extra (pip install 'hemx[onnx]'; requirements.lock pins it)")
pytest.importorskip("onnxruntime", reason="the onnx extra (pip install 'hemx[onnx]'; requirements.lock pins it)")

from onnx import helper  # noqa: E402

import hemx  # noqa: E402
from hemx.errors import ParameterError  # noqa: E402
from hemx.nn import graph as G  # noqa: E402
from hemx.nn.onnx import SUPPORTED_OPS, from_onnx  # noqa: E402

from tests.helpers.onnx_models import make_model, polynomial_nodes, resnet20_onnx, run_ort  # noqa: E402

# Where onnxruntime runs the op in float64 (TensorProto.DOUBLE), the import's float64 reference matches it to 1e-9
# relative (both are float64 sums of the same products, in different orders).
DOUBLE_RTOL = 1e-9
# onnxruntime's CPU Conv, AveragePool and GlobalAveragePool exist in float32 only. Weights and inputs there are
# float32 values (exact in the float64 reference), so the difference is onnxruntime's float32 arithmetic alone: a
# sum of K <= 36 products each rounded to 2^-24 relative, i.e. at most ~K * 6e-8 = 2e-6 of the sum of the terms'
# magnitudes, which stays within a few times max |y| here: 1e-5 of max |y| bounds it with room.
FLOAT_RTOL = 1e-5

N = helper.make_node
RNG = np.random.default_rng(34)


def _rel(a, b) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def _w(*shape, scale=0.5):
    return _f32(RNG.normal(size=shape) * scale)


# name -> (nodes, initializers, input shape, double, the imported graph's layer types after the Input)
CASES = {
    "Conv": ([N("Conv", ["x", "w", "b"], ["y"], name="conv", strides=[2, 2], pads=[1, 0, 2, 1])],
             {"w": _w(3, 2, 3, 3), "b": _w(3)}, (2, 7, 6), False, [G.Conv2D]),
    "Conv auto_pad SAME_UPPER": ([N("Conv", ["x", "w"], ["y"], name="conv", strides=[2, 2], auto_pad="SAME_UPPER")],
                                 {"w": _w(4, 2, 3, 3)}, (2, 6, 5), False, [G.Conv2D]),
    "Gemm": ([N("Gemm", ["x", "w", "c"], ["y"], name="fc", transB=1, alpha=0.5, beta=2.0)],
             {"w": _w(3, 5), "c": _w(1, 3)}, (5,), True, [G.Dense]),
    "MatMul + Add": ([N("MatMul", ["x", "w"], ["h"], name="mm"), N("Add", ["h", "b"], ["y"], name="bias")],
                     {"w": _w(5, 4), "b": _w(4)}, (5,), True, [G.Dense]),
    "BatchNormalization": ([N("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"], name="bn", epsilon=1e-3)],
                           {"g": _w(3), "b": _w(3), "m": _w(3), "v": np.abs(_w(3)) + 0.1}, (3, 4, 4), True,
                           [G.BatchNorm]),
    "Relu": ([N("Relu", ["x"], ["y"], name="relu")], {}, (2, 3, 3), True, [G.Activation]),
    "x*x": ([N("Mul", ["x", "x"], ["y"], name="square")], {}, (2, 3, 3), True, [G.Activation]),
    "a*x+b": ([N("Mul", ["x", "a"], ["h"], name="scale"), N("Add", ["h", "b"], ["y"], name="shift")],
              {"a": np.array(0.75), "b": np.array(-0.25)}, (6,), True, [G.Affine]),
    "Pow(x,2)": ([N("Pow", ["x", "e"], ["y"], name="pow")], {"e": np.array(2.0)}, (2, 3, 3), True, [G.Activation]),
    "c0+c1*x+c2*x*x+c3*x^3": (*polynomial_nodes("x", (0.1, 0.5, 0.25, -0.05), "y", "act"), (2, 3, 3), True,
                              [G.Activation]),
    "AveragePool": ([N("AveragePool", ["x"], ["y"], name="avg", kernel_shape=[2, 2], strides=[2, 2])], {},
                    (2, 6, 6), False, [G.AvgPool2D]),
    "MaxPool": ([N("MaxPool", ["x"], ["y"], name="max", kernel_shape=[3, 3], strides=[2, 2])], {}, (2, 7, 7),
                True, [G.MaxPool2D]),
    "MaxPool 1x1 (the identity)": ([N("MaxPool", ["x"], ["p"], name="max", kernel_shape=[1, 1]),
                                    N("Relu", ["p"], ["y"], name="relu")], {}, (2, 5, 5), True, [G.Activation]),
    "GlobalAveragePool + Flatten": ([N("GlobalAveragePool", ["x"], ["g"], name="gap"),
                                     N("Flatten", ["g"], ["y"], name="flat")], {}, (3, 4, 5), False,
                                    [G.GlobalAvgPool]),
    "Flatten": ([N("Flatten", ["x"], ["y"], name="flat", axis=1)], {}, (2, 3, 4), True, [G.Flatten]),
    "Reshape (N, -1)": ([N("Reshape", ["x", "s"], ["y"], name="reshape")], {"s": np.array([0, -1])}, (2, 3, 4),
                        True, [G.Flatten]),
    "Add (residual)": ([N("Relu", ["x"], ["r"], name="relu"), N("Add", ["x", "r"], ["y"], name="residual")], {},
                       (2, 3, 3), True, [G.Activation, G.Add]),
    "Mul of two tensors": ([N("Relu", ["x"], ["r"], name="relu"), N("Mul", ["r", "x"], ["y"], name="gate")], {},
                           (2, 3, 3), True, [G.Activation, G.Multiply]),
    "Mul / Add per channel": ([N("Mul", ["x", "s"], ["h"], name="scale"), N("Add", ["h", "t"], ["y"], name="shift")],
                              {"s": _w(3, 1, 1), "t": _w(1, 3, 1, 1)}, (3, 2, 2), True, [G.BatchNorm, G.BatchNorm]),
}


def check_case(name: str, batch=2) -> float:
    """Import the case, check its layers, and return max |reference - onnxruntime| / max |onnxruntime|."""
    nodes, inits, shape, double, kinds = CASES[name]
    model = make_model(nodes, inits, shape, double=double)
    graph = from_onnx(model)
    assert [type(n.layer) for n in graph.nodes[1:]] == kinds, graph.summary()
    x = RNG.normal(size=(batch, *shape))
    x = x if double else _f32(x)
    want = run_ort(model, x)
    got = G.reference(graph, x)
    return _rel(got, want.reshape(got.shape))


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_supported_op_matches_onnxruntime(name):
    rel = check_case(name)
    assert rel < (DOUBLE_RTOL if CASES[name][3] else FLOAT_RTOL), rel


def test_patterns_become_the_expected_layers():
    imported = {k: from_onnx(make_model(*CASES[k][:3], double=CASES[k][3])) for k in
                ("MatMul + Add", "x*x", "a*x+b", "Pow(x,2)", "c0+c1*x+c2*x*x+c3*x^3", "Conv")}
    dense = imported["MatMul + Add"].nodes[1].layer
    np.testing.assert_array_equal(dense.weight, CASES["MatMul + Add"][1]["w"].T)
    np.testing.assert_array_equal(dense.bias, CASES["MatMul + Add"][1]["b"])  # the Add became the bias
    assert imported["x*x"].nodes[1].layer.coeffs == (0.0, 0.0, 1.0)
    assert imported["Pow(x,2)"].nodes[1].layer.coeffs == (0.0, 0.0, 1.0)
    affine = imported["a*x+b"].nodes[1].layer
    assert (affine.scale, affine.shift) == (0.75, -0.25)
    assert imported["c0+c1*x+c2*x*x+c3*x^3"].nodes[1].layer.coeffs == pytest.approx((0.1, 0.5, 0.25, -0.05),
                                                                                      rel=1e-15)
    conv = imported["Conv"].nodes[1].layer
    assert conv.stride == 2 and conv.padding == ((1, 2), (0, 1))


def residual_cnn(*, double: bool = False):
    """conv(+bias) -> bn -> x/2 + x^2/8 -> conv -> add (residual) -> relu -> maxpool -> gap -> flatten -> gemm."""
    nodes = [N("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             N("BatchNormalization", ["c1", "g", "be", "m", "v"], ["bn"], name="bn1")]
    poly, poly_inits = polynomial_nodes("bn", (0.0, 0.5, 0.125), "act", "act")
    nodes += poly
    nodes += [N("Conv", ["act", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
              N("Add", ["c2", "bn"], ["sum"], name="residual"),
              N("Relu", ["sum"], ["r"], name="relu"),
              N("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
              N("GlobalAveragePool", ["p"], ["gap"], name="gap"),
              N("Flatten", ["gap"], ["f"], name="flatten"),
              N("Gemm", ["f", "wd", "bd"], ["y"], name="fc")]
    c = 4
    inits = {"w1": _w(c, 2, 3, 3), "b1": _w(c), "g": _w(c), "be": _w(c), "m": _w(c), "v": np.abs(_w(c)) + 0.5,
             "w2": _w(c, c, 3, 3, scale=0.3), "wd": _w(c, 3), "bd": _w(3), **poly_inits}
    return make_model(nodes, inits, (2, 8, 8), double=double)


def test_small_residual_cnn_matches_onnxruntime_and_compiles(tmp_path):
    model = residual_cnn()
    path = tmp_path / "residual.onnx"
    path.write_bytes(model.SerializeToString())
    graph = from_onnx(path)  # from a file; bytes and a ModelProto give the same graph
    for other in (from_onnx(model), from_onnx(model.SerializeToString())):
        assert graph.summary() == other.summary()
    assert [type(n.layer).__name__ for n in graph.nodes] == [
        "Input", "Conv2D", "BatchNorm", "Activation", "Conv2D", "Add", "Activation", "MaxPool2D", "GlobalAvgPool",
        "Dense"]
    assert graph.node("residual").inputs == ("conv2", "bn1")
    assert graph.data_layout == "NCHW" and graph.model_input_shape == graph.input_shape == (2, 8, 8)
    x = _f32(RNG.normal(size=(3, 2, 8, 8)))
    assert _rel(G.reference(graph, x), run_ort(model, x)) < FLOAT_RTOL
    net = hemx.nn.compile(graph, hemx.CKKSParameters.preset("boot_16"), calibration=x)  # ReLU needs its levels
    assert net.plan.steps and net.plan.bootstraps >= 0


def test_fixed_batch_and_vector_input():
    nodes, inits, shape, double, _ = CASES["Gemm"]
    model = make_model(nodes, inits, shape, double=double, batch=4)
    x = RNG.normal(size=(4, *shape))
    assert _rel(G.reference(from_onnx(model), x), run_ort(model, x)) < DOUBLE_RTOL


@pytest.mark.parametrize("nodes, inits, words", [
    ([N("Sigmoid", ["x"], ["y"], name="gate")], {}, ["Sigmoid", "'gate'", "Conv", "GlobalAveragePool"]),
    ([N("Relu", ["x"], ["r"], name="r"), N("Softmax", ["r"], ["y"], name="")], {}, ["Softmax", "(unnamed)"]),
    ([N("Conv", ["x", "w"], ["y"], name="grouped", group=2)], {"w": np.ones((2, 1, 1, 1))}, ["grouped", "group 2"]),
    ([N("Conv", ["x", "w"], ["y"], name="dil", dilations=[2, 2])], {"w": np.ones((2, 2, 2, 2))}, ["dil", "dilations"]),
    ([N("MaxPool", ["x"], ["y"], name="padded", kernel_shape=[2, 2], pads=[1, 1, 1, 1])], {}, ["padded", "pads"]),
    ([N("AveragePool", ["x"], ["y"], name="oblong", kernel_shape=[2, 3])], {}, ["oblong", "square"]),
    ([N("Mul", ["x", "k"], ["y"], name="pixelwise")], {"k": np.arange(2 * 4 * 4.0).reshape(2, 4, 4)},
     ["pixelwise", "varies over the pixels"]),
    ([N("Pow", ["x", "e"], ["y"], name="root")], {"e": np.array(0.5)}, ["root", "exponent"]),
    ([N("Reshape", ["x", "s"], ["y"], name="rs")], {"s": np.array([0, 2, 16])}, ["rs", "only to (N, -1)"]),
    ([N("BatchNormalization", ["x", "a", "a", "a", "a"], ["y"], name="train", training_mode=1)], {"a": np.ones(2)},
     ["train", "training_mode"]),
])
def test_unsupported_is_an_error_naming_op_and_node(nodes, inits, words):
    with pytest.raises(ParameterError) as e:
        from_onnx(make_model(nodes, inits, (2, 4, 4), check=False))
    for w in words:
        assert w in str(e.value), str(e.value)
    assert "Supported ops:" in str(e.value)


def test_bad_models_and_arguments(tmp_path):
    relu = [N("Relu", ["x"], ["y"], name="relu")]
    with pytest.raises(ParameterError, match="opset is 11"):
        from_onnx(make_model(relu, {}, (2, 3, 3), opset=11))
    with pytest.raises(ParameterError, match="fixed sizes"):
        from_onnx(make_model(relu, {}, (2, "H", 3)))
    with pytest.raises(ParameterError, match="no file"):
        from_onnx(tmp_path / "missing.onnx")
    with pytest.raises(ParameterError, match="takes a path"):
        from_onnx(42)
    assert set(SUPPORTED_OPS) >= {"Conv", "Gemm", "MatMul", "BatchNormalization", "Relu", "AveragePool",
                                  "GlobalAveragePool", "MaxPool", "Flatten", "Reshape", "Add", "Mul", "Pow"}


def test_hemx_imports_without_onnx(monkeypatch):
    code = ("import sys; sys.modules['onnx'] = None\n"
            "import hemx, hemx.nn\n"
            "from hemx.errors import ParameterError\n"
            "try:\n    hemx.nn.from_onnx('m.onnx')\nexcept ParameterError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert "hemx[onnx]" in out.stdout, out.stdout + out.stderr


def test_pytorch_export():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (not a hemx dependency); the export test "
                                                "runs where it is")
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.conv2 = nn.Conv2d(4, 4, 3, stride=2, padding=1, bias=False)
            self.pool = nn.AvgPool2d(2)
            self.fc = nn.Linear(4 * 2 * 2, 3)

        def forward(self, x):
            h = self.bn(self.conv(x))
            h = h * h + 0.5 * h
            h = torch.relu(self.conv2(h))
            return self.fc(torch.flatten(self.pool(h), 1))

    torch.manual_seed(0)
    net = Net().eval()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-0.5, 0.5)
        net.bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(3, 2, 8, 8)
    buf = io.BytesIO()
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(net, (x,), buf, input_names=["x"], output_names=["y"], opset_version=17,
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, **legacy)
    graph = from_onnx(buf.getvalue())
    with torch.no_grad():
        want = net(x).numpy().astype(np.float64)
    assert _rel(G.reference(graph, x.numpy().astype(np.float64)), want) < FLOAT_RTOL


def test_resnet20_float32_matches_onnxruntime():
    """The same ResNet-20 written in float32 (as exporters write it) against onnxruntime on 0..255 pixels."""
    from hemx.nn import models

    variables, meta = models.load_resnet20_fmnist()
    model = resnet20_onnx(variables, activation=tuple(meta["activation"]), input_scale=meta["input_scale"],
                          double=False)
    x = RNG.integers(0, 256, (8, 1, 32, 32)).astype(np.float64)
    # 20 layers of float32 sums of up to 576 products (64 channels x 3x3): each within 576 * 2^-24 = 3.4e-5 of its
    # terms' magnitudes at worst, far less in practice (rounding errors cancel: 3.6e-7 measured on 16 images)
    assert _rel(G.reference(from_onnx(model), x), run_ort(model, x)) < 1e-4


def _step_key(s):
    return (s.kind, s.depth, s.level_in, s.level_out, s.rotations, s.key_switches, s.plaintext_mults, s.ct_mults,
            s.ciphertexts)


def test_resnet20_round_trip_matches_from_jax():
    """The shipped Fashion-MNIST ResNet-20 written as ONNX (Conv/BatchNormalization/Mul/Add/GlobalAveragePool/
    Flatten/Gemm from its JAX definition and weights) imports to the layers from_jax traces, with the same float
    reference and, compiled at boot_12, the same steps, rotations and keys."""
    from hemx.nn import models

    variables, meta = models.load_resnet20_fmnist()
    act, scale = tuple(meta["activation"]), meta["input_scale"]
    graph = from_onnx(resnet20_onnx(variables, activation=act, input_scale=scale, input_shape=(1, 32, 32)))
    traced = models.resnet20_graph(variables, input_shape=(32, 32, 1), activation=act, input_scale=scale)
    assert [type(n.layer) for n in graph.nodes] == [type(n.layer) for n in traced.nodes]
    assert (graph.data_layout, traced.data_layout) == ("NCHW", "NHWC")  # each takes its model's layout
    x = RNG.uniform(0, 255, (4, 1, 32, 32))
    x_nhwc = x.transpose(0, 2, 3, 1)
    assert _rel(G.reference(graph, x), G.reference(traced, x_nhwc)) < DOUBLE_RTOL
    params = hemx.CKKSParameters.preset("boot_12", allow_insecure=True)
    a, b = (hemx.nn.compile(g, params, calibration=xg).plan for g, xg in ((graph, x), (traced, x_nhwc)))
    assert [_step_key(s) for s in a.steps] == [_step_key(s) for s in b.steps]
    assert a.rotations == b.rotations and a.rotation_levels == b.rotation_levels
    assert (a.bootstraps, a.key_switches, a.plaintext_mults, a.ct_mults, a.key_bytes, a.input_level) == \
        (b.bootstraps, b.key_switches, b.plaintext_mults, b.ct_mults, b.key_bytes, b.input_level)


def test_keras_cifar10_cnn_through_onnx_matches_from_keras():
    """The pretrained Keras CIFAR-10 CNN (hemx bench cifar's model) written as the ONNX graph a converter writes
    from its .h5 weights (tests/helpers/onnx_models.py, read with h5py, not hemx.nn.keras): onnxruntime agrees in
    float32 on the 20 real images, and the import has from_keras_h5's layers (the 1x1 max pool is the identity in
    both), its float64 reference and, compiled at boot_16 with bench cifar's ReLU, the same plan."""
    from hemx.bench import cifar
    from tests.helpers import nn_data
    from tests.helpers.onnx_models import keras_sequential_h5_as_onnx

    path, _ = nn_data.cifar10_files()
    x_nhwc, _ = cifar.load()  # NHWC, as the Keras model takes them
    x = x_nhwc.transpose(0, 3, 1, 2)  # NCHW, as the ONNX model does
    keras_graph = cifar.model()
    graph = from_onnx(keras_sequential_h5_as_onnx(path))
    want = G.reference(keras_graph, x_nhwc)
    # float32 convolutions of up to 1,152 products (128 channels x 3x3) and dense layers of 1,024: 1.5e-7 of the
    # logit range measured on these images
    assert _rel(run_ort(keras_sequential_h5_as_onnx(path, double=False), x), want) < 1e-5
    assert [type(n.layer) for n in graph.nodes] == [type(n.layer) for n in keras_graph.nodes]
    assert _rel(G.reference(graph, x), want) < DOUBLE_RTOL
    params = hemx.CKKSParameters.preset("boot_16")
    relu = hemx.nn.sign_composite(cifar.DEFAULT_RELU_DEGREES, cifar.DEFAULT_RELU_EPS)
    a, b = (hemx.nn.compile(g, params, calibration=xg, relu=relu).plan for g, xg in ((graph, x), (keras_graph, x_nhwc)))
    assert [_step_key(s) for s in a.steps] == [_step_key(s) for s in b.steps]
    assert a.rotations == b.rotations and a.rotation_levels == b.rotation_levels
    assert (a.bootstraps, a.key_switches, a.plaintext_mults, a.ct_mults, a.key_bytes, a.input_level) == \
        (b.bootstraps, b.key_switches, b.plaintext_mults, b.ct_mults, b.key_bytes, b.input_level)


# --- LSTM -----------------------------------------------------------------------------------------------------------

from tests.helpers.onnx_models import lstm_initializers  # noqa: E402

# onnxruntime's CPU LSTM exists in float32 only ("LSTM operator does not support double yet"), and for layout 0 only.
# Each gate's pre-activation is a float32 sum of D + H + 2 = 9 terms (~9 * 6e-8 of their magnitudes, a few units),
# its sigmoid / tanh are float32 approximations (~1e-7 absolute); sigmoid and tanh have slopes <= 1 and the forget
# gate (< 1) damps the cell's carried error, so after T = 5 steps the hidden state is off by ~1e-6 absolute at most,
# and the final Gemm (4 terms) keeps that scale: 2e-5 of max |y| (~1 here) bounds it with room (measured: 7e-8).
LSTM_RTOL = 2e-5
T_, D_, H_ = 5, 3, 4
_LSTM_W = lstm_initializers(RNG, D_, H_)
_FC = {"fc_w": _w(2, H_), "fc_b": _w(2)}
_SQ0, _SQ1, _LAST = np.array([0]), np.array([1]), np.array(-1)

# name -> (nodes, extra initializers, time-major input): the paths from an LSTM to its last hidden state (N, H)
LSTM_CASES = {
    "Y_h, Squeeze": ([N("LSTM", ["x", "W", "R", "B"], ["", "h"], name="rnn", hidden_size=H_),
                      N("Squeeze", ["h", "sq0"], ["last"], name="sq"),
                      N("Gemm", ["last", "fc_w", "fc_b"], ["y"], name="fc", transB=1)], {"sq0": _SQ0}, True),
    "Transpose, Y, Squeeze, Gather": (
        [N("Transpose", ["x"], ["xt"], name="tr", perm=[1, 0, 2]),
         N("LSTM", ["xt", "W", "R", "B"], ["seq", "", "c"], name="rnn", hidden_size=H_),
         N("Squeeze", ["seq", "sq1"], ["s3"], name="sq"),
         N("Gather", ["s3", "last_t"], ["last"], name="pick", axis=0),
         N("Gemm", ["last", "fc_w", "fc_b"], ["y"], name="fc", transB=1)], {"sq1": _SQ1, "last_t": _LAST}, False),
    "Y, Slice, Squeeze, MatMul; zero initial_h, no B": (
        [N("LSTM", ["x", "W", "R", "", "", "h0"], ["seq"], name="rnn", hidden_size=H_,
           activations=["Sigmoid", "Tanh", "Tanh"]),
         N("Slice", ["seq", "lo", "hi", "ax"], ["s4"], name="cut"),
         N("Squeeze", ["s4", "sq01"], ["last"], name="sq"),
         N("MatMul", ["last", "fc_wt"], ["y"], name="mm")],
        {"lo": np.array([-1]), "hi": np.array([2 ** 62]), "ax": np.array([0]), "sq01": np.array([0, 1]),
         "h0": np.zeros((1, 3, H_)), "fc_wt": _w(H_, 2)}, True),  # (initial_h: one row per sample of 3)
}


def _lstm_model(name, *, double=False, **kw):
    nodes, extra, time_major = LSTM_CASES[name]
    inits = {**(_LSTM_W if "no B" not in name else {k: v for k, v in _LSTM_W.items() if k != "B"}), **_FC, **extra}
    if time_major:  # x (T, N, D)
        return make_model(nodes, inits, ("N", D_), batch=T_, double=double, **kw)
    return make_model(nodes, inits, (T_, D_), double=double, **kw)


@pytest.mark.parametrize("name", sorted(LSTM_CASES))
def test_lstm_matches_onnxruntime(name):
    """The imported graph is Input((T * D,)) -> LSTM -> Dense; its float64 reference on the sequence flattened
    time-major matches onnxruntime's float32 LSTM on the model's own layout."""
    model = _lstm_model(name)
    graph = from_onnx(model)
    assert [type(n.layer) for n in graph.nodes] == [G.Input, G.LSTM, G.Dense], graph.summary()
    assert graph.nodes[0].layer.shape == (T_ * D_,)
    seq = _f32(RNG.normal(size=(3, T_, D_)))  # (N, T, D)
    x = seq.transpose(1, 0, 2) if LSTM_CASES[name][2] else seq
    got = G.reference(graph, seq.reshape(3, T_ * D_))
    assert _rel(got, run_ort(model, x)) < LSTM_RTOL


def test_lstm_gate_order_and_layout_1():
    """ONNX's gate blocks i, o, f, c land in the layer's i, f, g, o columns with B's halves summed; layout 1 (X (N,
    T, D), Y_h (N, 1, H), which onnxruntime does not run) imports to the same graph as the time-major model."""
    graph = from_onnx(_lstm_model("Y_h, Squeeze"))
    layer = graph.nodes[1].layer
    w, r, b = _LSTM_W["W"][0], _LSTM_W["R"][0], _LSTM_W["B"][0]
    for k, onnx_block in zip("ifgo", (0, 2, 3, 1)):
        w_x, w_h, bias = layer.gate(k)
        rows = slice(onnx_block * H_, (onnx_block + 1) * H_)
        np.testing.assert_array_equal(w_x, w[rows].T)
        np.testing.assert_array_equal(w_h, r[rows].T)
        np.testing.assert_array_equal(bias, b[rows] + b[4 * H_:][rows])
    batch_major = make_model([N("LSTM", ["x", "W", "R", "B"], ["", "h"], name="rnn", hidden_size=H_, layout=1),
                              N("Flatten", ["h"], ["last"], name="flat", axis=1),
                              N("Gemm", ["last", "fc_w", "fc_b"], ["y"], name="fc", transB=1)],
                             {**_LSTM_W, **_FC}, (T_, D_), check=False)
    other = from_onnx(batch_major)
    assert [type(n.layer) for n in other.nodes] == [G.Input, G.LSTM, G.Dense]
    x = RNG.normal(size=(2, T_ * D_))
    np.testing.assert_array_equal(G.reference(other, x), G.reference(graph, x))


_LSTM = ["x", "W", "R", "B"]


def _fc(src="h"):
    return [N("Squeeze", [src, "sq0"], ["last"], name="sq"), N("Gemm", ["last", "fc_w", "fc_b"], ["y"], name="fc",
                                                                transB=1)]


@pytest.mark.parametrize("nodes, extra, words", [
    ([N("LSTM", _LSTM, ["", "h"], name="bi", hidden_size=H_, direction="bidirectional")], {}, ["bi", "bidirectional"]),
    ([N("LSTM", _LSTM, ["", "h"], name="rev", hidden_size=H_, direction="reverse")], {}, ["rev", "'reverse'"]),
    ([N("LSTM", _LSTM, ["", "h"], name="act", hidden_size=H_, activations=["HardSigmoid", "Tanh", "Tanh"])], {},
     ["act", "activations"]),
    ([N("LSTM", _LSTM, ["", "h"], name="clipped", hidden_size=H_, clip=3.0)], {}, ["clipped", "clip"]),
    ([N("LSTM", _LSTM, ["", "h"], name="coupled", hidden_size=H_, input_forget=1)], {}, ["coupled", "input_forget"]),
    ([N("LSTM", [*_LSTM, "", "", "", "p"], ["", "h"], name="peep", hidden_size=H_)], {"p": np.ones((1, 3 * H_))},
     ["peep", "peepholes"]),
    ([N("LSTM", [*_LSTM, "", "h0"], ["", "h"], name="warm", hidden_size=H_)], {"h0": np.ones((1, 1, H_))},
     ["warm", "initial_h"]),
    ([N("LSTM", [*_LSTM, "lens"], ["", "h"], name="ragged", hidden_size=H_)], {"lens": np.full(2, T_)},
     ["ragged", "sequence_lens"]),
    ([N("LSTM", _LSTM, ["", "", "c"], name="cell", hidden_size=H_), *_fc("c")], {}, ["'sq'", "Y_c"]),
    ([N("LSTM", _LSTM, ["all", "h"], name="rnn", hidden_size=H_), N("Flatten", ["all"], ["y"], name="whole")], {},
     ["whole", "(N, H)"]),
    ([N("LSTM", _LSTM, ["all", "h"], name="rnn", hidden_size=H_), N("Squeeze", ["all", "sq1"], ["s"], name="s"),
      N("Gather", ["s", "first"], ["y"], name="first_step", axis=0)], {"sq1": _SQ1, "first": np.array(0)},
     ["first_step", "last time step"]),
    ([N("LSTM", _LSTM, ["all", "h"], name="low", hidden_size=H_), N("Squeeze", ["all", "sq1"], ["s"], name="s"),
      N("LSTM", ["s", "W2", "R2"], ["", "h2"], name="stacked", hidden_size=H_)],
     {"sq1": _SQ1, "W2": np.ones((1, 4 * H_, H_)), "R2": np.ones((1, 4 * H_, H_))}, ["stacked", "stacked LSTMs"]),
    ([N("Relu", ["x"], ["y"], name="rect")], {}, ["rect", "sequence input"]),
])
def test_unsupported_lstm_is_an_error_naming_op_and_node(nodes, extra, words):
    if nodes[-1].op_type == "LSTM" and nodes[-1].output[1] == "h":
        nodes = nodes + _fc()
    with pytest.raises(ParameterError) as e:
        from_onnx(make_model(nodes, {**_LSTM_W, **_FC, "sq0": _SQ0, **extra}, ("N", D_), batch=T_, check=False))
    for w in words:
        assert w in str(e.value), str(e.value)
    assert "Supported ops:" in str(e.value) and "LSTM" in str(e.value)


def test_lstm_sequence_input_checks():
    with pytest.raises(ParameterError, match="symbolic"):  # layout 0 reads axis 0 as time: here the batch
        from_onnx(make_model(LSTM_CASES["Y_h, Squeeze"][0], {**_LSTM_W, **_FC, "sq0": _SQ0}, (T_, D_)))
    with pytest.raises(ParameterError, match="no LSTM reads the sequence"):
        from_onnx(make_model([N("Identity", ["x"], ["y"])], {}, (T_, D_)))
    assert "LSTM" in SUPPORTED_OPS


@pytest.mark.parametrize("batch_first, use_h_n", [(True, False), (False, True)])
def test_pytorch_lstm_export(batch_first, use_h_n):
    """torch.nn.LSTM then a Linear on the last hidden state (output[:, -1] batch-first, h_n[-1] time-major), as
    torch.onnx.export writes it (Shape / ConstantOfShape zero initial states, Transpose, Squeeze, Gather)."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (not a hemx dependency); the export test "
                                                "runs where it is")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(D_, H_, batch_first=batch_first)
            self.fc = torch.nn.Linear(H_, 2)

        def forward(self, x):
            out, (h_n, _) = self.lstm(x)
            last = h_n[-1] if use_h_n else (out[:, -1] if batch_first else out[-1])
            return self.fc(last)

    torch.manual_seed(0)
    net = Net().eval()
    seq = torch.randn(3, T_, D_)
    x = seq if batch_first else seq.transpose(0, 1).contiguous()
    buf = io.BytesIO()
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(net, (x,), buf, input_names=["x"], output_names=["y"], opset_version=17,
                      dynamic_axes={"x": {0 if batch_first else 1: "N"}, "y": {0: "N"}}, **legacy)
    graph = from_onnx(buf.getvalue())
    assert [type(n.layer) for n in graph.nodes] == [G.Input, G.LSTM, G.Dense]
    with torch.no_grad():
        want = net(x).numpy().astype(np.float64)
    assert _rel(G.reference(graph, seq.numpy().astype(np.float64).reshape(3, T_ * D_)), want) < LSTM_RTOL


def test_lstm_import_compiles():
    graph = from_onnx(_lstm_model("Y_h, Squeeze"))
    x = RNG.normal(size=(8, T_ * D_))
    net = hemx.nn.compile(graph, hemx.CKKSParameters.preset("boot_16"), calibration=x)
    assert net.plan.steps and net.plan.bootstraps >= 1  # 5 time steps of sigmoid / tanh polynomials
