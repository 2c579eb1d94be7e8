"""The digits CNN as a :mod:`hemx.nn` graph, compiled with its images interleaved in every ciphertext.

:func:`network_graph` turns a :class:`~hemx.apps._cnn_model.CNNModel` into the graph

    input (1, 8, 8) raw pixels  ->  conv 3x3 valid, C channels (+ bias; the 1/16 pixel scaling folded into the
    kernels)  ->  x * x  ->  flatten  ->  dense C*36 -> H (+ bias; the 2x2 average pooling folded into its weights)
    ->  x * x  ->  dense H -> 10 (+ bias)

which computes :func:`~hemx.apps._cnn_model.plaintext_forward` exactly, at multiplicative depth 5 (a separate
pooling layer would cost a sixth level). :func:`compile_network` compiles it with ``images_per_ciphertext =
slots / 64``: every image on 64 slots of an 8x8 grid, slot ``p * B + b`` holding slot ``p`` of image ``b``.
:func:`network_layers` names the layers that take a level, read from a compiled plan: their count is the depth.
"""

from __future__ import annotations

import functools

import numpy as np

from hemx.apps._cnn_model import IMAGE_SIDE, PIXEL_MAX, POOL, CNNModel, digits_split, load_model
from hemx.circuits import SlotSimulator
from hemx.ckks import CKKSParameters
from hemx.errors import ParameterError
from hemx.nn import graph as G
from hemx.nn.compiler import CompiledNetwork, compile  # noqa: A004

POSITIONS = IMAGE_SIDE * IMAGE_SIDE  # slots of one image: its 8x8 grid
_PROBE_LEVELS = 16  # more than the network can use: the plan's level drops are its own (network_layers)


def network_graph(model: CNNModel) -> G.Graph:
    """The model as a :class:`hemx.nn.Graph` on raw ``(1, 8, 8)`` pixels in [0, 16] (module docstring)."""
    if not isinstance(model, CNNModel):
        raise ParameterError(f"expected a CNNModel, got {type(model).__name__}")
    h = model.hidden
    conv = G.Conv2D(model.conv_w[:, None] / PIXEL_MAX, model.conv_b, 1, ((0, 0), (0, 0)))
    # fc1 over the pooled (C, 3, 3) maps == a dense layer over the (C, 6, 6) squares with every pooled weight
    # spread over its 2x2 window, divided by 4
    fc1 = np.repeat(np.repeat(model.fc1_w, POOL, axis=2), POOL, axis=3) / (POOL * POOL)  # (H, C, 6, 6)
    layers = [("conv", conv, "input"), ("square1", G.Multiply(), "conv", "conv"), ("flatten", G.Flatten(), "square1"),
              ("fc1", G.Dense(fc1.reshape(h, -1), model.fc1_b), "flatten"), ("square2", G.Multiply(), "fc1", "fc1"),
              ("fc2", G.Dense(model.fc2_w, model.fc2_b), "square2")]
    return G.Graph((G.Node("input", G.Input((1, IMAGE_SIDE, IMAGE_SIDE))),)
                   + tuple(G.Node(name, layer, tuple(ins)) for name, layer, *ins in layers))


def compile_network(model: CNNModel, target: CKKSParameters | SlotSimulator, *,
                    calibration=None) -> CompiledNetwork:
    """:func:`network_graph` compiled for ``target`` with ``slots / 64`` images per ciphertext (its full slots).

    ``target``: CKKS parameters, or a :class:`~hemx.circuits.SlotSimulator` (``SlotSimulator(None, slots=S,
    max_level=L)``: exact cleartext slots, any power-of-two ``S >= 64``). ``calibration``: digit images
    ``(n, 8, 8)`` for the range analysis against every level's modulus (default: the training split)."""
    if isinstance(target, CKKSParameters):
        slots = target.max_slots
    elif isinstance(target, SlotSimulator):
        slots = target.slots
    else:
        raise ParameterError(f"expected CKKSParameters or a SlotSimulator, got {type(target).__name__}")
    if slots < POSITIONS:
        raise ParameterError(f"the CNN needs at least {POSITIONS} slots per ciphertext, the target has {slots}")
    if calibration is None:
        calibration = digits_split()[0]
    cal = np.asarray(calibration, dtype=np.float64).reshape(-1, 1, IMAGE_SIDE, IMAGE_SIDE)
    return compile(network_graph(model), target, calibration=cal, images_per_ciphertext=slots // POSITIONS)


def network_layers(model: CNNModel | None = None) -> tuple[str, ...]:
    """Names of the compiled network's steps that take a level (one rescale each), in order: ``len`` is the depth.

    Read from the plan of ``model`` (default: the bundled one) compiled on a 64-slot cleartext simulator (no
    calibration: the range analysis is not needed for the levels); the architecture alone decides it
    (``("conv", "square1", "fc1", "square2", "fc2")``)."""
    if model is None:
        return _bundled_layers()
    net = compile(network_graph(model), SlotSimulator(None, slots=POSITIONS, max_level=_PROBE_LEVELS))
    return tuple(s.output for s in net.plan.steps if s.level_out is not None and s.level_out < s.level_in)


@functools.lru_cache(maxsize=1)
def _bundled_layers() -> tuple[str, ...]:
    return network_layers(load_model())
