"""Pass ``calibrate``: measured bounds of every value on a calibration batch.

:func:`~hemx.nn.graph.reference` (float64) runs the graph as given on ``c.calibration`` ``(B, *input_shape)`` and
keeps every node's output; ``max |x|`` over the batch (at least ``1e-12``) times ``c.margin`` is that node's bound:
what a ReLU's sign approximation is scaled by (``x / B``), what a bootstrap's input is checked against, and what the
range analysis of :mod:`~hemx.nn.passes.scales` holds against each level's modulus. Without calibration data the
bounds are empty (linear and polynomial networks need none).
"""

from __future__ import annotations

import numpy as np

from hemx.nn.graph import reference
from hemx.nn.passes.ir import Compilation


def calibrate(c: Compilation) -> Compilation:
    """``c.bounds``: ``{node name: max |x| x margin}`` of every node of ``c.graph`` on ``c.calibration``."""
    if c.calibration is None:
        return c.replace(bounds={})
    kept = reference(c.graph, c.calibration, keep=True)
    bounds = {k: max(float(np.max(np.abs(v))), 1e-12) * float(c.margin) for k, v in kept.items()}
    return c.replace(bounds=bounds)


__all__ = ["calibrate"]
