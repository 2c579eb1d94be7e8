"""The value every pass of :mod:`hemx.nn.passes` takes and returns: a :class:`Compilation`, filled in pass by
pass (a pass returns a new one and leaves its input as it was, so each pass's output can be inspected)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from hemx.ckks.params import CKKSParameters
from hemx.nn import packing
from hemx.nn.graph import Graph, Node


@dataclasses.dataclass(frozen=True)
class Target:
    """What the network is compiled for: ``params`` (None: a parameterless simulator), ``slots`` per image (the
    slots every layout of the passes has), ``max_level``, the context's ``scale``, ``ctx`` (a Context, when the
    target was one: its bootstrap keys are counted), ``images`` per ciphertext (interleaved: a ciphertext has
    ``slots * images`` slots, :mod:`hemx.nn.packing`)."""

    params: CKKSParameters | None
    slots: int
    max_level: int
    scale: float
    ctx: Any = None
    images: int = 1

    def divisor(self, level: int) -> float:
        """The rescale divisor at ``level`` (:meth:`hemx.CKKSParameters.rescale_divisor`; 1.0 without parameters)."""
        return 1.0 if self.params is None else self.params.rescale_divisor(level)


@dataclasses.dataclass(frozen=True)
class Compilation:
    """The compiler's IR.

    Set before the passes: ``graph`` (as given), ``target``, the options (``calibration`` ``(B, *input_shape)`` or
    None, ``margin``, ``boot_level`` (None: no bootstrapping), ``boot_bound``, ``input_level``, ``composite`` (the
    ReLU sign composite, None without ReLU), ``grid``, ``bsgs_ratio``, ``relu_domain`` (a ReLU's input is scaled by
    ``1 / (relu_domain B)``: valid up to that factor above its bound), ``bounds_mode`` (``"calibrated"``: measured
    on the calibration batch; ``"sound"``: interval arithmetic from ``input_domain``, :mod:`~hemx.nn.passes.bounds`),
    ``input_domain`` (``(lo, hi)`` or None)).

    Filled by the passes: ``nodes`` (fold: the graph's nodes with batch norms folded), ``bounds`` (calibrate:
    ``{node: bound}`` in the chosen mode; ``calibrated_bounds`` and ``sound_bounds``: each mode's, where its data is
    given), ``steps`` (pack: in execution order, without levels; levels: depths and needs;
    bootstraps: levels and the bootstrap steps; scales: scale targets and products), ``input_layout``, ``layouts``
    and ``value_bound`` (``{value: bound or None}``) and ``output_value`` (pack), ``poly_cap`` (levels), ``plan``
    (plan).
    """

    graph: Graph
    target: Target
    calibration: Any = None
    margin: float = 1.0
    boot_level: int | None = None
    boot_bound: float = 8.0
    input_level: int = 0
    composite: Any = None
    grid: tuple[int, int] | None = None
    bsgs_ratio: float = packing.DEFAULT_BSGS_RATIO
    relu_domain: float = 1.0
    bounds_mode: str = "calibrated"
    input_domain: tuple[float, float] | None = None
    nodes: tuple[Node, ...] = ()
    bounds: dict = dataclasses.field(default_factory=dict)
    calibrated_bounds: dict = dataclasses.field(default_factory=dict)
    sound_bounds: dict = dataclasses.field(default_factory=dict)
    steps: tuple = ()
    input_layout: packing.Layout | None = None
    layouts: dict = dataclasses.field(default_factory=dict)
    value_bound: dict = dataclasses.field(default_factory=dict)
    output_value: str | None = None
    poly_cap: int | None = None
    plan: Any = None

    def replace(self, **changes) -> "Compilation":
        return dataclasses.replace(self, **changes)


Pass = Callable[[Compilation], Compilation]

__all__ = ["Compilation", "Target", "Pass"]
