"""The network input: a graph's first node (no lowering: the ``pack`` pass lays it out)."""

from __future__ import annotations

import dataclasses

from hemx.errors import ParameterError, ShapeError
from hemx.nn.layers.base import LayerRule


@dataclasses.dataclass(frozen=True, eq=False)
class Input:
    """The network input. ``shape``: ``(C, H, W)`` or ``(F,)``."""

    shape: tuple[int, ...]

    def __post_init__(self):
        shape = tuple(int(s) for s in self.shape)
        if len(shape) not in (1, 3) or min(shape) < 1:
            raise ShapeError(f"input shape must be (C, H, W) or (F,) with positive sizes, got {self.shape}")
        object.__setattr__(self, "shape", shape)


def shape(layer: Input, ins, where: str) -> tuple[int, ...]:
    return layer.shape


def reference(layer: Input, xs):
    raise ParameterError("the Input has no reference of its own: hemx.nn.graph.reference starts from the input values")


RULE = LayerRule(Input, 0, shape, reference, None, ("Input",))
