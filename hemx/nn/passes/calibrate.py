"""Pass ``calibrate``: the bound of every value, measured on a calibration batch or sound from an input domain.

Calibrated (``c.bounds_mode == "calibrated"``, the default): :func:`~hemx.nn.graph.reference` (float64) runs the
graph as given on ``c.calibration`` ``(B, *input_shape)`` and keeps every node's output; ``max |x|`` over the batch
(at least ``1e-12``) times ``c.margin`` is that node's bound. Inputs unlike the calibration batch can exceed it.

Sound (``"sound"``): interval arithmetic from ``c.input_domain`` through the graph
(:mod:`hemx.nn.passes.bounds`): no input in the domain can exceed it; larger than the calibrated bounds, so
polynomial fits over the wider ranges are less precise. The calibration batch, if any, is then measured for the
plan's report only (``c.calibrated_bounds``) and the later passes see no calibration (an LSTM on the input then
derives its gates' ranges from the input's sound bound).

The chosen bounds (``c.bounds``) are what a ReLU's sign approximation is scaled by (``x / (F B)``), what a
bootstrap's input is checked against, and what the range analysis of :mod:`~hemx.nn.passes.scales` holds against
each level's modulus. Where its data is given, each mode's bounds are kept (``c.calibrated_bounds``,
``c.sound_bounds``) for the plan. Without either the bounds are empty (linear and polynomial networks need none).
"""

from __future__ import annotations

import numpy as np

from hemx.nn.graph import reference
from hemx.nn.passes.bounds import sound_bounds
from hemx.nn.passes.ir import Compilation


def calibrated_bounds(graph, calibration, margin: float) -> dict[str, float]:
    """``{node name: max |x| x margin}`` of every node of ``graph`` on ``calibration`` ``(B, *input_shape)``."""
    kept = reference(graph, calibration, keep=True)
    return {k: max(float(np.max(np.abs(v))), 1e-12) * float(margin) for k, v in kept.items()}


def calibrate(c: Compilation) -> Compilation:
    """``c.bounds`` in ``c.bounds_mode``, and ``c.calibrated_bounds`` / ``c.sound_bounds`` where their data is given."""
    measured = {} if c.calibration is None else calibrated_bounds(c.graph, c.calibration, c.margin)
    sound = {} if c.input_domain is None else sound_bounds(c.graph, c.input_domain)
    if c.bounds_mode == "sound":
        return c.replace(bounds=sound, calibrated_bounds=measured, sound_bounds=sound, calibration=None)
    return c.replace(bounds=measured, calibrated_bounds=measured, sound_bounds=sound)


__all__ = ["calibrate", "calibrated_bounds"]
