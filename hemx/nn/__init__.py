"""Encrypted inference for neural networks, built on :mod:`hemx.circuits`.

* :mod:`hemx.nn.graph`: the network IR (typed layers in a graph, channel-first tensors) and its float64 reference;
  :mod:`hemx.nn.layers`: one module per layer type (record, shape, reference, lowering), one registry.
* :mod:`hemx.nn.packing`: slot layouts of tensors (channel blocks on a grid, stride 2 as a wider gap) and the packed
  linear layers (convs, pools, dense layers as baby-step/giant-step diagonal maps).
* :mod:`hemx.nn.activations`: ReLU as ``x (1 + sign(x)) / 2`` with a composite minimax sign approximation, and its
  error bound.
* :mod:`hemx.nn.compiler`: :func:`compile`, the visible list of passes (``PIPELINE``: fold, calibrate, pack,
  levels, bootstraps, scales, plan; one module each in :mod:`hemx.nn.passes`) -> a :class:`CompiledNetwork` with
  an inspectable :class:`Plan` and every pass's output; :mod:`hemx.nn.steps`: the steps and their ops (depth,
  rotations, ``apply``); :mod:`hemx.nn.run`: the runtime (``net.run(..., diagonals=net.diagonals())`` takes the
  linear layers' data as arguments of a traced program, and :func:`lift_constants` the context's tables too
  (:mod:`hemx.circuits.lifted`), for ``jax.export`` without large constants).
* front ends: :func:`from_jax` (any JAX function, read from its jaxpr: Flax, Haiku, Equinox or plain JAX) and
  :func:`from_keras_h5` (Keras ``.h5`` weights, read with h5py); :func:`from_onnx` (ONNX graphs, opset 13 or later,
  read with the ``onnx`` package: the ``hemx[onnx]`` extra);
* :mod:`hemx.nn.models`: ResNet-20 in plain JAX (init, apply, graph, the shipped Fashion-MNIST weights);
  :mod:`hemx.nn.data`: Fashion-MNIST (Debian's package) and the CIFAR-10 files of two PyPI packages.

Layer: above :mod:`hemx.circuits` (and io/service), below :mod:`hemx.apps`.
"""

from hemx.nn.graph import (
    Activation, Add, Affine, AvgPool2D, BatchNorm, Conv2D, Dense, Flatten, GlobalAvgPool, Graph, Input, MaxPool2D,
    LSTM, Multiply, Node, reference, sequential,
)
from hemx.nn.packing import Layout, image_layout, vector_layout
from hemx.nn.activations import SignComposite, relu_approx, relu_error_bound, sign_composite
from hemx.nn.compiler import CompiledNetwork, Plan, Step, compile  # noqa: A004 (shadows the builtin on purpose)
from hemx.circuits.lifted import LiftedProgram, lift_constants
from hemx.nn.trace import from_jax
from hemx.nn.keras import from_keras_h5
from hemx.nn.onnx import from_onnx
from hemx.nn.models import load_resnet20_fmnist, resnet20_apply, resnet20_graph, resnet20_init

__all__ = [
    "Graph", "Node", "Input", "Conv2D", "BatchNorm", "AvgPool2D", "MaxPool2D", "GlobalAvgPool", "Flatten", "Dense",
    "Affine", "Add", "Activation", "Multiply", "LSTM", "reference", "sequential",
    "Layout", "image_layout", "vector_layout", "SignComposite", "sign_composite", "relu_error_bound", "relu_approx",
    "compile", "CompiledNetwork", "Plan", "Step", "from_jax", "from_keras_h5", "from_onnx", "resnet20_init",
    "resnet20_apply", "resnet20_graph", "load_resnet20_fmnist", "lift_constants", "LiftedProgram",
]
