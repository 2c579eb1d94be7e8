"""Pass ``pack``: graph layers -> packed steps (:class:`~hemx.nn.steps.Step`), without levels.

Every tensor gets a :class:`~hemx.nn.packing.Layout` (on ``c.target.slots``: the slots of one image, a
ciphertext's slots divided by the images it interleaves) (channel blocks on a grid, stride 2 doubling the gap) and
every layer its steps, by its layer type's ``lower`` (one module per type in :mod:`hemx.nn.layers`, one registry;
:data:`PACKERS` is its view by type):

* Conv2D, AvgPool2D, Dense and a standalone BatchNorm: a diagonal map (:mod:`hemx.nn.packing`, one level);
* GlobalAvgPool: a mask and a rotate-and-sum (one level); Flatten: the same slots read as a vector (nothing);
* Affine: one constant product (one level; none for a pure shift); Add: a level-aligned sum (none);
* Activation 'poly': :func:`~hemx.circuits.evaluate_polynomial` (its depth); Activation 'relu': the sign
  composite of :mod:`hemx.nn.activations` (``x / B``, its stages and one product);
* MaxPool2D: separable comparisons ``max(a, b) = b + relu(a - b)`` of the tensor and its rotation by one or more
  pixels (``ceil(log2 window)`` per axis, rows then columns, read at the stride's grid points).
"""

from __future__ import annotations

from hemx.errors import LevelError, ParameterError, ShapeError
from hemx.nn import packing
from hemx.nn.layers import RULES, SUPPORTED, rule_for
from hemx.nn.layers.lowering import Lowering
from hemx.nn.passes.ir import Compilation

#: the lowering of each layer type: ``lower(state, node, input value names, first input's layout)`` (a view of
#: :data:`hemx.nn.layers.RULES`)
PACKERS = {r.layer: r.lower for r in RULES if r.lower is not None}


def pack(c: Compilation) -> Compilation:
    """``c.steps`` (in execution order, levels unset), ``c.input_layout``, ``c.layouts`` and ``c.value_bound`` of
    every value, ``c.output_value``, from the folded ``c.nodes``."""
    nodes = c.nodes
    shape0 = c.graph.input_shape
    slots = c.target.slots
    try:
        in_layout = packing.image_layout(shape0, slots, grid=c.grid) if len(shape0) == 3 else \
            packing.vector_layout(shape0[0], slots)
    except ParameterError:
        if c.target.images == 1:
            raise
        images = c.target.images
        hg, wg = c.grid or (packing._next_pow2(shape0[1]), packing._next_pow2(shape0[2]))
        most = max(1, slots * images // (int(hg) * int(wg)))
        raise ParameterError(f"images_per_ciphertext={images} leaves {slots} slots per image, fewer than one channel "
                             f"of the {hg}x{wg} input grid: use images_per_ciphertext <= {most}") from None
    p = Lowering(c, layouts={"input": in_layout}, value_bound={"input": c.bounds.get(nodes[0].name)})
    names = {nodes[0].name: "input"}
    for node in nodes[1:]:
        layer = node.layer
        ins = [names[i] for i in node.inputs]
        names[node.name] = node.name
        where = f"node {node.name!r} ({type(layer).__name__})"
        rule = rule_for(layer)
        try:
            if rule is None or rule.lower is None:
                raise ParameterError(f"{where} is not supported encrypted; supported: {', '.join(SUPPORTED)}")
            rule.lower(p, node, ins, p.layouts[ins[0]])
        except (ShapeError, ParameterError, LevelError) as e:
            if str(e).startswith("node "):
                raise
            raise type(e)(f"{where}: {e}") from None
    output_value = names[nodes[-1].name]
    return c.replace(steps=tuple(p.steps), input_layout=in_layout, layouts=p.layouts, value_bound=p.value_bound,
                     output_value=output_value)


__all__ = ["pack", "PACKERS", "SUPPORTED"]
