"""The network compiler: a :class:`~hemx.nn.graph.Graph` -> a packed, levelled, bootstrapped program.

:func:`compile` checks its arguments into a :class:`~hemx.nn.passes.ir.Compilation` and runs :data:`PIPELINE`,
one pass per module of :mod:`hemx.nn.passes`:

1. ``fold``: batch norms folded into the Conv2D / Dense before them (others become one-diagonal linear layers);
2. ``calibrate``: ``max |x|`` of every node on the calibration batch, times ``margin`` (or, with
   ``bounds="sound"``, every node's bound over ``input_domain`` by interval arithmetic, :mod:`hemx.nn.passes.bounds`);
3. ``pack``: every tensor's slot layout and every layer's packed steps (:mod:`hemx.nn.steps`);
4. ``levels``: each step's depth and the levels its inputs need;
5. ``bootstraps``: bootstrap placement (greedy, as late as possible, with a look-ahead) and every value's level;
6. ``scales``: the ReLUs' scale targets, the range analysis against every level's modulus, polynomial products;
7. ``plan``: the :class:`~hemx.nn.passes.plan.Plan` (steps, rotation keys and their levels, key bytes,
   bootstraps), before any key exists.

The result is a :class:`~hemx.nn.run.CompiledNetwork` (:mod:`hemx.nn.run`: the runtime) with its plan and every
pass's output (``net.passes``); ``CompiledNetwork.keygen`` makes its keys, ``run`` evaluates it on a
:class:`~hemx.circuits.SlotSimulator` or on ciphertexts.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

from hemx.circuits import CKKSEvaluator, SlotSimulator
from hemx.circuits.bootstrap import BootstrapParameters
from hemx.ckks import Context
from hemx.ckks.params import CKKSParameters
from hemx.errors import AccuracyWarning, LevelError, OverflowBoundError, ParameterError, external_stacklevel
from hemx.nn import activations as acts
from hemx.nn import packing
from hemx.nn.graph import Activation, Graph, MaxPool2D
from hemx.nn.passes.bootstraps import bootstraps
from hemx.nn.passes.bounds import check_domain
from hemx.nn.passes.calibrate import calibrate
from hemx.nn.passes.fold import fold
from hemx.nn.passes.ir import Compilation, Target
from hemx.nn.passes.levels import levels
from hemx.nn.passes.pack import SUPPORTED, pack
from hemx.nn.passes.plan import Plan, plan
from hemx.nn.passes.scales import scales
from hemx.nn.run import CompiledNetwork
from hemx.nn.steps import Step

DEFAULT_MARGIN = 1.2
# bootstrap inputs are scaled below this (the bootstrap's supported bound; boot_12: 22.9 bits at 8, 24 at <= 4)
DEFAULT_BOOT_BOUND = 8.0
#: :func:`compile` warns when an activation's worst-case error exceeds this fraction of the output's bound
DEFAULT_MAX_RELATIVE_ERROR = 1e-2

#: the passes, in order (each ``Compilation -> Compilation``)
PIPELINE = (fold, calibrate, pack, levels, bootstraps, scales, plan)
#: the passes the input level does not change: :func:`compile` runs them once for both input levels it tries
FRONT = PIPELINE[:3]


def run_passes(c: Compilation, passes=PIPELINE) -> tuple[Compilation, tuple]:
    """``passes`` folded over ``c``: the last output and ``((pass name, its output), ...)``."""
    outputs = []
    for step in passes:
        c = step(c)
        outputs.append((step.__name__, c))
    return c, tuple(outputs)


def _target(target, slots) -> Target:
    if isinstance(target, Context):
        return _params_target(target.params, slots or target.slots, target)
    if isinstance(target, CKKSEvaluator):
        return _params_target(target.ctx.params, slots or target.slots, target.ctx)
    if isinstance(target, CKKSParameters):
        return _params_target(target, slots or target.max_slots, None)
    if isinstance(target, SlotSimulator):
        if target.params is None:
            return Target(None, int(slots or target.slots), target.max_level, 1.0)
        return _params_target(target.params, slots or target.slots, None)
    raise ParameterError(f"compile targets a CKKSParameters, a Context or a SlotSimulator, got "
                         f"{type(target).__name__}")


def _params_target(params: CKKSParameters, slots, ctx) -> Target:
    return Target(params, int(slots), params.max_level, float(params.scale), ctx)


def _bootstrap_level(params: CKKSParameters | None) -> int | None:
    """Level a bootstrap (:class:`~hemx.circuits.bootstrap.BootstrapParameters`' defaults) returns at with these
    parameters (None: too few levels to bootstrap)."""
    if params is None:
        return None
    try:
        level = BootstrapParameters.create(params).output_level
    except (ParameterError, LevelError):
        return None
    return level if level >= 1 else None


def compile(graph: Graph, target, *, calibration=None, margin: float = DEFAULT_MARGIN,  # noqa: A001
            bootstrap: bool | None = None, bootstrap_level: int | None = None, boot_bound: float = DEFAULT_BOOT_BOUND,
            input_level: int | None = None, slots: int | None = None, relu: acts.SignComposite | None = None,
            grid: tuple[int, int] | None = None, bsgs_ratio: float = packing.DEFAULT_BSGS_RATIO,
            images_per_ciphertext: int = 1, bounds: str = "calibrated", input_domain=None,
            relu_domain: float | None = None,
            max_relative_error: float | None = DEFAULT_MAX_RELATIVE_ERROR) -> CompiledNetwork:
    """Compile ``graph`` for ``target`` (module docstring).

    With bootstrapping and no ``input_level``, inputs are encrypted at the bootstrap's output level when that
    costs no more bootstraps than the top level (at ``boot_16``, ResNet-20: 38 bootstraps either way, and the
    rotation keys serve levels <= 10 instead of 25: 8.9 instead of 11.7 GiB of keys), else at the top level.

    Args:
        graph: the network (:class:`~hemx.nn.graph.Graph`).
        target: ``CKKSParameters``, a ``Context`` (then the bootstrap's own keys are counted too) or a
            ``SlotSimulator`` (``SlotSimulator(None, slots=, max_level=)`` for linear networks checked exactly;
            polynomials need a simulator with parameters).
        calibration: a batch ``(B, *graph.model_input_shape)`` of typical inputs, in the graph's ``data_layout``
            (``(B, H, W, C)`` for a model from JAX or Keras); needed for ReLU (its input bound) and for
            bootstrapping (the bound a bootstrap's input is scaled below).
        margin: calibrated ``max |x|`` is multiplied by this.
        bootstrap: allow bootstraps (default: when the parameters have room for one, e.g. the ``boot_*`` presets).
        bootstrap_level: level a bootstrap returns (default: from the parameters' bootstrapping plan).
        boot_bound: bootstrap inputs whose bound exceeds it are scaled by ``1 / 2^k`` first.
        input_level: the level inputs are encrypted at (default: the top level).
        slots: slots per ciphertext (default: the target's).
        relu: the sign composite for ReLU (default :func:`hemx.nn.activations.domain_composite` of ``relu_domain``).
        grid: ``(Hg, Wg)`` of the input image layout (default: the smallest powers of two).
        images_per_ciphertext: ``B``, a power of two: each ciphertext holds ``B`` images interleaved (slot
            ``s B + b`` holds slot ``s`` of image ``b``'s ``slots / B``-slot layout; :mod:`hemx.nn.packing`): the
            single-image program on ``slots / B`` slots with every rotation ``r`` run as ``r B`` and every
            plaintext repeated ``B`` times, so one evaluation serves ``B`` times as many images. Default 1: one
            image per ciphertext (images on the ciphertexts' batch axis).
        bounds: ``"calibrated"`` (default: every value's ``max |x|`` on ``calibration``, times ``margin``) or
            ``"sound"`` (interval arithmetic from ``input_domain``, :mod:`hemx.nn.passes.bounds`: no input in the
            domain exceeds them; no calibration needed). The plan reports both where both are given, with the
            other choice's bootstraps (compiled both ways).
        input_domain: the inputs' range: ``(lo, hi)`` (e.g. ``(0.0, 255.0)`` for raw pixels) or a bound ``b``.
        relu_domain: each ReLU and max comparison is scaled by ``1 / (F B)`` with a composite whose gap is ``F``
            times smaller (:func:`hemx.nn.activations.domain_composite`), so activations up to ``F`` times their
            bound ``B`` still give ReLU within its stated error; values beyond are the only ones that can go wrong.
            Default: 4 (:data:`~hemx.nn.activations.DEFAULT_RELU_DOMAIN`; 2 levels more per ReLU than
            ``relu_domain=1``), or 1 when ``relu`` is given (that composite as it is, scaled by ``1 / B``; with
            both, it is scaled by ``1 / (F B)``: its gap ``eps`` becomes ``eps F B`` in ``x``).
        max_relative_error: warn (:class:`~hemx.errors.AccuracyWarning`) for each activation whose worst-case
            approximation error at its bound exceeds this fraction of the output's bound (the logits' calibrated
            ``max |x|`` times ``margin``); default 1e-2, None: no check (:func:`check_accuracy`).
    """
    _check_fraction(max_relative_error)
    c = start(graph, target, calibration=calibration, margin=margin, bootstrap=bootstrap,
              bootstrap_level=bootstrap_level, boot_bound=boot_bound, input_level=input_level, slots=slots, relu=relu,
              grid=grid, bsgs_ratio=bsgs_ratio, images_per_ciphertext=images_per_ciphertext, bounds=bounds,
              input_domain=input_domain, relu_domain=relu_domain)
    net = _best(c, input_level)
    other = "sound" if c.bounds_mode == "calibrated" else "calibrated"
    if c.input_domain is not None and c.calibration is not None:  # both kinds of bounds: the other choice's cost
        try:
            net.plan.bound_choices[other] = _best(c.replace(bounds_mode=other), input_level).plan.bootstraps
        except (LevelError, OverflowBoundError, ParameterError) as e:  # that choice does not compile: say why
            net.plan.bound_choices[other] = f"fails: {type(e).__name__}"
    check_accuracy(net, max_relative_error)
    return net


def _check_fraction(fraction) -> None:
    """``max_relative_error`` checked: None or a finite positive number."""
    if fraction is None:
        return
    number = isinstance(fraction, (int, float, np.integer, np.floating)) and not isinstance(fraction, bool)
    if not (number and math.isfinite(fraction) and fraction > 0):
        raise ParameterError(f"max_relative_error must be a positive number (a fraction of the output's bound, e.g. "
                             f"1e-2) or None (no accuracy check), got {fraction!r}")


def check_accuracy(net: CompiledNetwork, max_relative_error: float | None = DEFAULT_MAX_RELATIVE_ERROR) -> list[str]:
    """Warn (:class:`~hemx.errors.AccuracyWarning`) for each approximated activation of ``net`` (its plan's
    ``activations``: ReLU and max, :func:`~hemx.nn.activations.relu_error_bound` at the bound of its input;
    sigmoid / tanh, the fit's measured error) whose worst-case error exceeds ``max_relative_error`` times the bound
    of the network's output (calibrated ``max |logit|`` times the margin). The error is the activation's own, at
    its value, before later layers scale it; the check needs the output's bound (none: nothing to compare). Returns
    the messages (empty: nothing warned, or ``max_relative_error`` None)."""
    _check_fraction(max_relative_error)
    out = net.bounds.get(net._output_value)  # noqa: SLF001 (the runtime's record of the output value)
    if max_relative_error is None or not out:
        return []
    messages = []
    for row in net.plan.activations:
        err = row["error"]
        if err is None or err <= max_relative_error * out:
            continue
        fix = ("a sign composite of smaller error (compile(relu=sign_composite(degrees, eps)): more stages, higher "
               "degrees or a smaller eps)" if row["kind"] in ("relu", "maxpool") else "a higher degree")
        messages.append(f"activation {row['node']!r} ({row['kind']}): its worst-case approximation error {err:.3g} "
                        f"(input bound {row['bound']:.4g}) is {err / out:.3g} of the output's bound {out:.4g}, above "
                        f"max_relative_error={max_relative_error:g} (an error that size here reaches the outputs "
                        f"scaled by the later layers). Use {fix}, or pass max_relative_error= a larger fraction "
                        "(None: no check)")
    for msg in messages:
        warnings.warn(msg, AccuracyWarning, stacklevel=external_stacklevel())
    return messages


def _best(c: Compilation, input_level) -> CompiledNetwork:
    """:func:`compile`'s passes on ``c``: at the top input level, or at the bootstrap's output level when that
    costs no more bootstraps."""
    front, front_outputs = run_passes(c, FRONT)
    top = _network(front, front_outputs)
    low_level = top.plan.bootstrap_level
    if input_level is not None or low_level is None or low_level >= top.plan.input_level:
        return top
    try:
        low = _network(front.replace(input_level=low_level), front_outputs)
    except (LevelError, OverflowBoundError):  # the network needs the levels above the bootstrap's output
        return top
    return low if low.plan.bootstraps <= top.plan.bootstraps else top


def _network(front: Compilation, front_outputs: tuple) -> CompiledNetwork:
    """The passes after :data:`FRONT` on ``front`` -> the compiled network (with every pass's output)."""
    c, outputs = run_passes(front, PIPELINE[len(FRONT):])
    bounds = {k: v for k, v in c.value_bound.items() if v is not None}
    return CompiledNetwork(c.graph, c.plan, c.input_layout, c.layouts[c.output_value], c.output_value,
                           c.target.scale, bounds, c.target.params, passes=front_outputs + outputs)


def start(graph: Graph, target, *, calibration=None, margin: float = DEFAULT_MARGIN, bootstrap: bool | None = None,
          bootstrap_level: int | None = None, boot_bound: float = DEFAULT_BOOT_BOUND, input_level: int | None = None,
          slots: int | None = None, relu: acts.SignComposite | None = None, grid: tuple[int, int] | None = None,
          bsgs_ratio: float = packing.DEFAULT_BSGS_RATIO, images_per_ciphertext: int = 1, bounds: str = "calibrated",
          input_domain=None, relu_domain: float | None = None) -> Compilation:
    """:func:`compile`'s arguments checked -> the :class:`~hemx.nn.passes.ir.Compilation` the passes start from."""
    if not isinstance(graph, Graph):
        raise ParameterError(f"compile takes a hemx.nn.Graph, got {type(graph).__name__}")
    if not (isinstance(margin, (int, float)) and margin >= 1.0):
        raise ParameterError(f"margin must be a number >= 1, got {margin!r}")
    tgt = _target(target, slots)
    packing._check_slots(tgt.slots)
    images = packing.check_images(images_per_ciphertext, tgt.slots)
    if images > 1:
        tgt = dataclasses.replace(tgt, slots=tgt.slots // images, images=images)
    has_relu = any(isinstance(n.layer, Activation) and n.layer.kind == "relu" or isinstance(n.layer, MaxPool2D)
                   for n in graph.nodes)
    if bounds not in ("calibrated", "sound"):
        raise ParameterError(f"bounds must be 'calibrated' or 'sound', got {bounds!r}")
    sound = bounds == "sound"
    if sound:
        check_domain(input_domain, graph)
    default_domain = acts.DEFAULT_RELU_DOMAIN if relu is None else 1.0
    relu_domain = acts.check_domain(default_domain if relu_domain is None else relu_domain)
    cal = None
    if calibration is not None:
        # in the graph's data layout (NHWC for a JAX / Keras model), as the calibrate pass's reference takes it
        _, single = graph.channel_first(calibration, what="calibration data")
        cal = np.asarray(calibration, dtype=np.float64)[None] if single else np.asarray(calibration, np.float64)
    elif has_relu and not sound:
        raise ParameterError("a network with ReLU or MaxPool2D needs calibration data (compile(..., "
                             "calibration=x_batch)): the sign approximation is scaled by each comparison's bound")
    boot_level = None
    if bootstrap is None or bootstrap:
        boot_level = bootstrap_level if bootstrap_level is not None else _bootstrap_level(tgt.params)
        if bootstrap and boot_level is None:
            raise ParameterError("these parameters have too few levels to bootstrap: use a boot_* preset "
                                 "(hemx.CKKSParameters.preset('boot_12'))")
    if boot_level is not None and not 1 <= boot_level <= tgt.max_level:
        raise LevelError(f"bootstrap_level must be in 1..{tgt.max_level}, got {boot_level}")
    if boot_level is not None and calibration is None and not sound:
        boot_level = None if bootstrap is None else boot_level
        if boot_level is not None:
            raise ParameterError("bootstrapping needs calibration data (the bound of every bootstrapped value)")
    level0 = tgt.max_level if input_level is None else int(input_level)
    if not 0 <= level0 <= tgt.max_level:
        raise LevelError(f"input_level must be in 0..{tgt.max_level}, got {input_level}")
    comp = relu or (acts.domain_composite(relu_domain) if has_relu else None)
    return Compilation(graph, tgt, calibration=cal, margin=float(margin), boot_level=boot_level,
                       boot_bound=boot_bound, input_level=level0, composite=comp, grid=grid, bsgs_ratio=bsgs_ratio,
                       relu_domain=relu_domain, bounds_mode=bounds, input_domain=input_domain)




__all__ = ["compile", "start", "run_passes", "check_accuracy", "PIPELINE", "CompiledNetwork", "Plan", "Step",
           "DEFAULT_MARGIN", "DEFAULT_BOOT_BOUND", "DEFAULT_MAX_RELATIVE_ERROR", "SUPPORTED"]
