"""The passes of :func:`hemx.nn.compile`, one module each, in pipeline order (``hemx.nn.compiler.PIPELINE``):

1. :mod:`~hemx.nn.passes.fold`: batch norms folded into the convolution / dense layer before them;
2. :mod:`~hemx.nn.passes.calibrate`: every value's bound, measured on a calibration batch, times a margin, or
   sound from an input domain (interval arithmetic, :mod:`~hemx.nn.passes.bounds`);
3. :mod:`~hemx.nn.passes.pack`: layouts and packed steps for every layer (its lowering in :mod:`hemx.nn.layers`);
4. :mod:`~hemx.nn.passes.levels`: each step's depth and the levels its inputs need;
5. :mod:`~hemx.nn.passes.bootstraps`: bootstrap placement and the level of every value;
6. :mod:`~hemx.nn.passes.scales`: the ReLUs' scale targets, the range analysis, polynomial products;
7. :mod:`~hemx.nn.passes.plan`: the :class:`~hemx.nn.passes.plan.Plan` a user reads before any key.

Each pass is a function ``Compilation -> Compilation`` (:class:`~hemx.nn.passes.ir.Compilation`), named as its
module, that returns a new value and leaves its input as it was; ``CompiledNetwork.passes`` keeps every pass's
output, and any pass can be run alone on the previous one's.
"""

from hemx.nn.passes.ir import Compilation, Target

__all__ = ["Compilation", "Target"]
