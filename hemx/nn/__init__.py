"""Encrypted inference for neural networks, built on :mod:`hemx.circuits`.

* :mod:`hemx.nn.graph`: the network IR (typed layers in a graph, channel-first tensors) and its float64 reference.

Layer: above :mod:`hemx.circuits` (and io/service), below :mod:`hemx.apps`.
"""

from hemx.nn.graph import (
    Activation, Add, Affine, AvgPool2D, BatchNorm, Conv2D, Dense, Flatten, GlobalAvgPool, Graph, Input, MaxPool2D,
    Node, reference, sequential,
)

__all__ = [
    "Graph", "Node", "Input", "Conv2D", "BatchNorm", "AvgPool2D", "MaxPool2D", "GlobalAvgPool", "Flatten", "Dense",
    "Affine", "Add", "Activation", "reference", "sequential",
]
