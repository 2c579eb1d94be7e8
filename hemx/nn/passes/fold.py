"""Pass ``fold``: per-channel affine layers folded into the convolution or dense layer that feeds them.

A :class:`~hemx.nn.graph.BatchNorm` (``y = x * scale + shift``) whose input is a Conv2D or Dense read by nothing
else becomes part of that layer: ``w' = w * scale`` (per output channel), ``b' = b * scale + shift`` (``shift``
without a bias). Other batch norms stay: :mod:`~hemx.nn.passes.pack` makes them one-diagonal linear layers.

:func:`fold_nodes` is the one implementation of this folding; the JAX front end (:func:`hemx.nn.from_jax`) uses it
too, to turn a bias add (and, with ``fold_batchnorm=True``, batch-norm scales) into the layer's weights.
"""

from __future__ import annotations

import numpy as np

from hemx.nn.graph import Affine, BatchNorm, Conv2D, Dense, Node
from hemx.nn.passes.ir import Compilation


def fold_nodes(nodes, output: str, *, keep: str = "norm", affine: bool = False, scales: bool = True,
               onto_bias: bool = True) -> tuple[list[Node], str]:
    """``nodes`` (a graph's, in order) with each foldable affine layer folded into its producer; returns the new
    nodes and the output's name.

    ``keep``: the fused layer takes the affine layer's name (``"norm"``) or the producer's (``"producer"``; readers
    of the affine layer are renamed). ``affine``: also fold a scalar :class:`~hemx.nn.graph.Affine`. ``scales``:
    False folds only pure shifts (scale 1). ``onto_bias``: False folds only into a producer without a bias.
    """
    nodes = list(nodes)
    by_name = {n.name: n for n in nodes}
    readers: dict[str, list[str]] = {}
    for n in nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n.name)
    fused: dict[str, Node] = {}  # producer name -> (its fused node, kept at the position of the name kept)
    rename: dict[str, str] = {}
    for n in nodes:
        layer = n.layer
        if not (isinstance(layer, BatchNorm) or affine and isinstance(layer, Affine)) or len(n.inputs) != 1:
            continue
        src = by_name[n.inputs[0]]
        p = src.layer
        if not isinstance(p, (Conv2D, Dense)) or readers.get(src.name, []) != [n.name] or src.name == output:
            continue
        if not onto_bias and p.bias is not None:
            continue
        c_out = p.weight.shape[0]
        if isinstance(layer, Affine):
            scale, shift = np.full(c_out, layer.scale), np.full(c_out, layer.shift)
        else:
            scale, shift = layer.scale, layer.shift
        if not scales and not np.all(scale == 1.0):
            continue
        weight = p.weight * (scale[:, None, None, None] if isinstance(p, Conv2D) else scale[:, None])
        bias = shift if p.bias is None else p.bias * scale + shift
        new = Conv2D(weight, bias, p.stride, p.padding) if isinstance(p, Conv2D) else Dense(weight, bias)
        if keep == "norm":
            fused[n.name] = Node(n.name, new, src.inputs)
            fused[src.name] = None
        else:
            fused[src.name] = Node(src.name, new, src.inputs)
            fused[n.name] = None
            rename[n.name] = src.name
    out = []
    for n in nodes:
        node = fused.get(n.name, n)
        if node is None:
            continue
        if any(i in rename for i in node.inputs):
            node = Node(node.name, node.layer, tuple(rename.get(i, i) for i in node.inputs))
        out.append(node)
    return out, rename.get(output, output)


def fold(c: Compilation) -> Compilation:
    """``c.nodes``: the graph's nodes with every BatchNorm after a Conv2D / Dense read by nothing else folded into
    it (the fused layer keeps the batch norm's name)."""
    nodes, _ = fold_nodes(c.graph.nodes, c.graph.output)
    return c.replace(nodes=tuple(nodes))


__all__ = ["fold", "fold_nodes"]
