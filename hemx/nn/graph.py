"""The network IR of :mod:`hemx.nn`: a small, typed graph of layers, and its float64 reference.

Every front end (a traced JAX function, Keras ``.h5`` weights, ONNX, the ready models) produces a :class:`Graph`;
the compiler (packing, level and bootstrap planning) consumes one. Tensors are channel-first without a batch axis:
an image is ``(C, H, W)``, a vector ``(F,)``. A graph records the layout its model takes images in
(:attr:`Graph.data_layout`: NHWC for a JAX / Keras model, NCHW for ONNX / PyTorch and by default), and everything
that takes the network's input takes it in that layout (:mod:`hemx.nn.data_layout`).

A graph is a tuple of :class:`Node` in topological order; each node names its inputs by node name. The first node
is the :class:`Input`; the last node is the output. Weights are float64 numpy arrays, copied and made read-only.

:func:`reference` evaluates a graph in float64 with exact ReLU and max, on a batch in the graph's layout
(``(B, *model_input_shape)``): the ground truth every packing, simulator and encrypted run is compared against.
:meth:`Graph.shapes` infers every node's output shape and raises :class:`~hemx.errors.ShapeError` on a mismatch.

The layer records, their shapes and references live one module per layer type in :mod:`hemx.nn.layers` (one
registry, :func:`hemx.nn.layers.rule_for`); this module re-exports the records.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence, Union

import numpy as np

from hemx.errors import ParameterError, ShapeError
from hemx.nn.data_layout import check_layout, model_shape, to_channel_first
from hemx.nn.layers import (
    LAYER_TYPES, SUPPORTED, Activation, Add, Affine, AvgPool2D, BatchNorm, Conv2D, Dense, Flatten, GlobalAvgPool,
    Input, LSTM, MaxPool2D, Multiply, rule_for,
)
from hemx.nn.layers.base import batched

Layer = Union[LAYER_TYPES]  # every registered layer record (hemx.nn.layers.REGISTRY)


@dataclasses.dataclass(frozen=True, eq=False)
class Node:
    """One layer applied to the outputs of the nodes named in ``inputs`` (as many as its rule's ``arity``: none
    for the Input, two for Add)."""

    name: str
    layer: Layer
    inputs: tuple[str, ...] = ()

    def __post_init__(self):
        rule = rule_for(self.layer)
        if rule is None:
            raise ParameterError(f"node {self.name!r}: {type(self.layer).__name__} is not a hemx.nn layer "
                                 f"(one of {', '.join(t.__name__ for t in LAYER_TYPES)})")
        object.__setattr__(self, "inputs", tuple(self.inputs))
        want = rule.arity
        if len(self.inputs) != want:
            raise ShapeError(f"node {self.name!r} ({type(self.layer).__name__}) takes {want} inputs, "
                             f"got {len(self.inputs)}")


def _out_shape(node: Node, ins: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The output shape of ``node`` from its inputs' shapes, by its layer's rule (:mod:`hemx.nn.layers`)."""
    rule = rule_for(node.layer)
    if rule is None:  # a record swapped in after the node was checked: shaped as its input, refused by the compiler
        return ins[0]
    return rule.shape(node.layer, ins, f"node {node.name!r} ({type(node.layer).__name__})")


@dataclasses.dataclass(frozen=True, eq=False)
class Graph:
    """A network: nodes in topological order, the first an :class:`Input`, the last the output.

    ``data_layout``: how the model takes an image input, ``"NCHW"`` (``(B, C, H, W)``, the default) or ``"NHWC"``
    (``(B, H, W, C)``, set by :func:`~hemx.nn.from_jax` and :func:`~hemx.nn.from_keras_h5`). The nodes are
    channel-first whatever it is; :func:`reference`, ``compile(calibration=...)``, ``encrypt_input`` and
    :func:`~hemx.nn.infer.infer` take inputs in this layout (:mod:`hemx.nn.data_layout`). Vector inputs have none.
    """

    nodes: tuple[Node, ...]
    data_layout: str = "NCHW"

    def __post_init__(self):
        nodes = tuple(self.nodes)
        object.__setattr__(self, "nodes", nodes)
        check_layout(self.data_layout)
        if not nodes or not isinstance(nodes[0].layer, Input):
            raise ShapeError("a graph starts with its Input node")
        seen: set[str] = set()
        for node in nodes:
            if node.name in seen:
                raise ParameterError(f"two nodes are named {node.name!r}")
            if isinstance(node.layer, Input) and node is not nodes[0]:
                raise ShapeError("a graph has exactly one Input node, its first")
            for name in node.inputs:
                if name not in seen:
                    raise ShapeError(f"node {node.name!r} reads {name!r}, which is not an earlier node")
            seen.add(node.name)
        self.shapes()  # validates every shape

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One input, channel-first: ``(C, H, W)`` or ``(F,)`` (the IR's shape)."""
        return self.nodes[0].layer.shape

    @property
    def model_input_shape(self) -> tuple[int, ...]:
        """One input as the model takes it, in :attr:`data_layout`: ``(H, W, C)`` for NHWC, else
        :attr:`input_shape`."""
        return model_shape(self.input_shape, self.data_layout)

    def channel_first(self, x, *, what: str = "the input") -> tuple[np.ndarray, bool]:
        """An input in :attr:`data_layout` (one, :attr:`model_input_shape`, or a batch of them) -> float64
        ``(B, *input_shape)`` and whether it came as one; a shape that does not fit raises
        :class:`~hemx.errors.ShapeError` naming the axis to move (:func:`hemx.nn.data_layout.to_channel_first`)."""
        return to_channel_first(x, self.input_shape, self.data_layout, what=what)

    @property
    def output(self) -> str:
        return self.nodes[-1].name

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Output shape of every node, by name; raises ShapeError on any mismatch."""
        out: dict[str, tuple[int, ...]] = {}
        for node in self.nodes:
            out[node.name] = _out_shape(node, [out[i] for i in node.inputs])
        return out

    def summary(self) -> str:
        shapes = self.shapes()
        lines = [f"{n.name:<20} {type(n.layer).__name__:<14} {str(n.inputs):<28} -> {shapes[n.name]}"
                 for n in self.nodes]
        return "\n".join(lines)


def sequential(input_shape: Sequence[int], layers: Sequence[Layer], *, data_layout: str = "NCHW") -> Graph:
    """A chain: ``Input(input_shape)`` (channel-first) then each layer on the previous one's output; the graph takes
    its input in ``data_layout`` (:attr:`Graph.data_layout`)."""
    nodes = [Node("input", Input(tuple(input_shape)))]
    for i, layer in enumerate(layers):
        nodes.append(Node(f"{type(layer).__name__.lower()}_{i}", layer, (nodes[-1].name,)))
    return Graph(tuple(nodes), data_layout)


# --- float64 reference ----------------------------------------------------------------------------------------

def apply_layer(layer: Layer, xs: list[np.ndarray]) -> np.ndarray:
    """One layer in float64 on batched inputs ``(B, *shape)``, by its rule (:mod:`hemx.nn.layers`)."""
    rule = rule_for(layer)
    if rule is None or rule.layer is Input:
        raise ParameterError(f"no reference for {type(layer).__name__}")
    return rule.reference(layer, xs)


def reference(graph: Graph, x, *, keep: bool = False):
    """Evaluate ``graph`` in float64 on ``x``: ``(B, *graph.model_input_shape)`` (or one unbatched input), in the
    graph's :attr:`~Graph.data_layout` (``(B, H, W, C)`` for a model from JAX or Keras).

    Returns the output ``(B, *output_shape)``; with ``keep=True`` a dict of every node's output instead. Outputs
    (and every value of ``keep=True``, the input's too) are channel-first, as the nodes are.
    """
    x, single = graph.channel_first(x, what="a graph's input")
    values: dict[str, np.ndarray] = {}
    for node in graph.nodes:
        values[node.name] = x if isinstance(node.layer, Input) else \
            apply_layer(node.layer, [values[i] for i in node.inputs])
    if keep:
        return {k: (v[0] if single else v) for k, v in values.items()}
    out = values[graph.output]
    return out[0] if single else out


__all__ = ["Graph", "Node", "Layer", "LAYER_TYPES", "SUPPORTED", "Input", "Conv2D", "BatchNorm", "AvgPool2D",
           "MaxPool2D", "GlobalAvgPool", "Flatten", "Dense", "Affine", "Add", "Activation", "Multiply", "LSTM",
           "sequential", "apply_layer", "reference", "batched"]
