"""The compiled program's IR: a :class:`Step` per operation, each holding an op object that knows its cost and how
it runs.

The passes of :mod:`hemx.nn.passes` and the runtime of :mod:`hemx.nn.run` ask a step's op instead of matching
names: ``op.depth`` (levels it consumes; a polynomial's at a scale: :meth:`Op.depth_at`), ``op.needs`` (the levels
its inputs must hold), ``op.rotations``, ``op.apply`` (its evaluation on ciphertexts or a simulator). ``op.kind``
is the name the plan prints (``"linear"``, ``"gap"``, ``"affine"``, ``"add"``, ``"sub"``, ``"rotate"``,
``"flatten"``, ``"poly"``, ``"mul"``, ``"bootstrap"``).

Values are lists of ciphertexts (one per ciphertext of the tensor's layout), each with the batch axes of the input.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from hemx.circuits import SlotSimulator, evaluate_polynomial, polynomial_depth
from hemx.nn import activations as acts
from hemx.nn import packing
from hemx.nn.run import bootstrap_values, stack_values, unstack_values


@dataclasses.dataclass(eq=False)
class Step:
    """One operation of the compiled program.

    ``op``: what it does (an :class:`Op`; ``kind`` is its name). ``inputs`` / ``output`` name values (a
    bootstrapped value gets a new name, ``"<value>@bt<k>"``). Counts are per evaluation of the whole tensor (every
    ciphertext of it), for one image batch. ``depth``, ``level_in`` / ``level_out``, ``needs`` and ``level_cap`` are
    filled by the levels and bootstraps passes, ``scale_target`` and ``ct_mults`` of polynomials by the scales pass.
    """

    op: "Op"
    node: str
    inputs: tuple[str, ...]
    output: str
    layout: packing.Layout
    depth: int = 0
    level_in: int | None = None
    level_out: int | None = None
    rotations: tuple[int, ...] = ()
    key_switches: int = 0
    plaintext_mults: int = 0
    ct_mults: int = 0
    ciphertexts: int = 1
    scale_target: float | None = None
    group: str | None = None  # the steps of one ReLU (they share a scale target)
    note: str = ""
    needs: tuple = ()  # ((input value, levels it must hold, value whose bootstrap reserve counts too or None), ...)
    level_cap: int | None = None  # the highest level the step runs at (polynomials: the scale-matched levels)

    @property
    def kind(self) -> str:
        return self.op.kind

    @property
    def factor(self) -> float:
        """An affine step's scale, a rotation's step, a bootstrap's prescale ``2^k`` (1.0 for the others)."""
        return self.op.factor

    @property
    def shift(self) -> float:
        return self.op.shift


class Op:
    """What a step does. Subclasses set ``kind`` and override what differs from these defaults."""

    kind = ""
    depth = 0  # levels consumed
    rotations: tuple[int, ...] = ()
    factor = 1.0
    shift = 0.0
    scale_exact = False  # runs only on levels whose primes are within 2^0.5 of the scale (polynomials)
    early_bootstrap = True  # the bootstraps pass may refresh an input before this step to save later bootstraps
    has_data = False  # plaintext data that CompiledNetwork.diagonals holds

    def depth_at(self, scale: float) -> int:
        """Levels consumed when the input and the result are at ``scale``."""
        return self.depth

    def needs(self, step: Step, following: Step | None) -> tuple:
        """``((input, levels, reserved value), ...)``: each input must hold ``levels`` (plus one when the reserved
        value's bootstrap needs a prescale) before this step; ``following`` is the next step (or None)."""
        return tuple((v, step.depth, step.output) for v in step.inputs)

    def release(self) -> None:
        """Drop what can be rebuilt (a linear layer's float64 diagonals)."""

    def apply(self, ev, step: Step, ins: list[list], data: dict | None = None) -> list:
        """``ins``: one list of ciphertexts per input value -> the output's list of ciphertexts."""
        raise NotImplementedError


class Linear(Op):
    """A packed linear layer (:class:`~hemx.nn.packing.DiagonalMap`: convs, pools, dense layers, standalone batch
    norms; kind ``"linear"``) or global average pool (:class:`~hemx.nn.packing.GlobalAvgPoolOp`: ``"gap"``);
    one level. Attributes of the packed map (``bias``, ``plaintext_mults``, ``n1``, ...) read through."""

    depth = 1
    has_data = True

    def __init__(self, packed, *, kind: str):
        self.map = packed
        self.kind = kind
        self.rotations = packed.rotations

    def __getattr__(self, name: str) -> Any:
        if name == "map":  # (not yet set: during unpickling)
            raise AttributeError(name)
        return getattr(self.map, name)

    def program_data(self, *, abstract: bool = False) -> dict:
        return self.map.program_data(abstract=abstract)

    def release(self) -> None:
        if hasattr(self.map, "release"):
            self.map.release()

    def baby_rotations(self) -> frozenset:
        """``{(ji, s)}``: the baby rotations of its input this step makes (a global average pool: none; its
        rotations are of its own partial sums)."""
        own = getattr(self.map, "baby_rotations", None)
        return own() if own is not None else frozenset()

    def apply(self, ev, step, ins, data=None):
        return self.map.apply(ev, ins[0], data)


class Flatten(Op):
    """The same slots read as a vector: nothing to compute."""

    kind = "flatten"

    def needs(self, step, following):
        return ()

    def apply(self, ev, step, ins, data=None):
        return ins[0]


class Add(Op):
    kind = "add"

    def apply(self, ev, step, ins, data=None):
        return [ev.add(a, b) for a, b in zip(ins[0], ins[1])]


class Sub(Op):
    kind = "sub"

    def apply(self, ev, step, ins, data=None):
        return [ev.sub(a, b) for a, b in zip(ins[0], ins[1])]


class Rotate(Op):
    """Every ciphertext rotated by ``k`` slots (a key switch each)."""

    kind = "rotate"

    def __init__(self, k: int):
        self.k = int(k)
        self.rotations = (self.k,)

    @property
    def factor(self) -> float:
        return float(self.k)

    def needs(self, step, following):
        return ()

    def apply(self, ev, step, ins, data=None):
        return [ev.rotate(x, self.k) for x in ins[0]]


class Affine(Op):
    """``x * factor + shift`` on the layout's positions: one constant product (none for a pure shift), aimed at the
    step's ``scale_target`` when it has one (a ReLU's scaling)."""

    kind = "affine"

    def __init__(self, factor: float, shift: float = 0.0, *, depth: int):
        self.factor, self.shift, self.depth = float(factor), float(shift), int(depth)

    def apply(self, ev, step, ins, data=None):
        shift = None
        if self.shift:
            lay = step.layout
            full = np.zeros(lay.num_cts * lay.slots)
            full[lay.positions.reshape(-1)] = self.shift
            shift = full.reshape(lay.num_cts, lay.slots)
        out = []
        for j, x in enumerate(ins[0]):
            if self.factor != 1.0 or step.scale_target is not None:
                level = ev.level(x)
                target = step.scale_target or ev.scale(x)
                x = ev.rescale(ev.mul_const(x, self.factor,
                                            plain_scale=target * ev.rescale_divisor(level) / ev.scale(x)))
            if shift is not None:
                x = ev.add(x, shift[j])
            out.append(x)
        return out


class Poly(Op):
    """A polynomial: power-basis coefficients (an ``Activation('poly')``) or a ReLU's Chebyshev stage
    (:class:`~hemx.nn.activations.PolyStage`), evaluated on every ciphertext at once, at the step's level and scale
    target."""

    kind = "poly"
    scale_exact = True

    def __init__(self, poly):
        self.poly = poly

    def depth_at(self, scale: float) -> int:
        return self._depth(scale, scale)

    def _depth(self, input_scale: float, scale: float) -> int:
        if isinstance(self.poly, acts.PolyStage):
            return self.poly.depth(input_scale=input_scale, scale=scale)
        return polynomial_depth(self.poly, input_scale=input_scale, scale=scale)

    def needs(self, step, following):
        if following is not None and isinstance(following.op, Mul) and following.inputs[1] == step.output:
            # a ReLU's s'(x): the product that reads it needs a level of the same input too
            return ((step.inputs[0], step.depth + following.op.depth, following.output),)
        return ((step.inputs[0], step.depth, step.output),)

    def evaluate(self, ev, x, *, scale: float | None):
        if isinstance(self.poly, acts.PolyStage):
            return self.poly.evaluate(ev, x, scale=scale)
        return evaluate_polynomial(ev, x, np.asarray(self.poly), scale=scale)

    def products(self, params, level: int, scale: float) -> int:
        """Ciphertext products of one evaluation at ``scale``, counted on a one-slot simulator (0 without
        parameters)."""
        if params is None:
            return 0
        sim = SlotSimulator(params, slots=2)
        self.evaluate(sim, sim.encrypt(np.zeros(2), level=level, scale=scale), scale=scale)
        return sim.products

    def apply(self, ev, step, ins, data=None):
        x = stack_values(ev, ins[0])
        if step.level_in is not None and ev.level(x) > step.level_in:
            x = ev.drop_level(x, step.level_in)
        return unstack_values(ev, self.evaluate(ev, x, scale=step.scale_target), len(ins[0]))


class Mul(Op):
    """Ciphertext products of two values, ciphertext by ciphertext, at their common level (one level)."""

    kind = "mul"
    depth = 1
    early_bootstrap = False  # (a product's operands: lazy only)

    def apply(self, ev, step, ins, data=None):
        out = []
        for x, s in zip(ins[0], ins[1]):
            level = min(ev.level(x), ev.level(s))
            out.append(ev.mul(ev.drop_level(x, level), ev.drop_level(s, level), rescale=True))
        return out


class Bootstrap(Op):
    """A refresh to ``level``; a value bounded above the bootstrap's input bound is multiplied by ``1 / factor``
    before (one level) and by the exact integer ``factor`` after."""

    kind = "bootstrap"

    def __init__(self, level: int, factor: float = 1.0):
        self.level, self.factor = int(level), float(factor)

    def needs(self, step, following):
        return ()

    def apply(self, ev, step, ins, data=None):
        return bootstrap_values(ev, ins[0], level=self.level, factor=self.factor)


__all__ = ["Step", "Op", "Linear", "Flatten", "Add", "Sub", "Rotate", "Affine", "Poly", "Mul", "Bootstrap"]
