"""The network compiler: a :class:`~hemx.nn.graph.Graph` -> a packed, levelled, bootstrapped program.

:func:`compile` runs these passes (the shape of Orion's compiler, on hemx's circuits):

1. **fold**: a BatchNorm whose input is a Conv2D or Dense read by nothing else is folded into its weights and
   bias (``w' = w * scale``, ``b' = b * scale + shift``); other BatchNorms become a one-diagonal linear layer;
2. **calibrate**: :func:`~hemx.nn.graph.reference` on the calibration batch (``keep=True``) gives ``max |x|`` of
   every node; times ``margin`` it is the bound a ReLU's sign approximation is scaled by (``x / B``) and the bound a
   bootstrap's input is checked against;
3. **pack**: every tensor gets a :class:`~hemx.nn.packing.Layout` (channel blocks on a grid, stride 2 doubling the
   gap) and every layer its packed form (:mod:`hemx.nn.packing`): convs, pools, dense layers and standalone batch
   norms are diagonal maps (one level), a global average pool is a mask and a rotate-and-sum (one level), an
   Affine one constant product (one level; none for a pure shift), an Add a level-aligned sum (none), a 'poly'
   activation :func:`~hemx.circuits.evaluate_polynomial` (its depth), a ReLU the sign composite of
   :mod:`hemx.nn.activations` (``x / B``, its stages and one product), a MaxPool2D separable comparisons
   ``max(a, b) = b + relu(a - b)`` of the tensor and its rotation by one or more pixels (``ceil(log2 window)`` per
   axis, rows then columns, read at the stride's grid points);
4. **levels and bootstraps**: the steps are walked in order with the level of every value; a step whose input has
   too few levels left for it gets that input bootstrapped first (greedy, as late as possible: optimal for a chain,
   where each bootstrap resets to the same level; at a branch the bootstrapped value serves every later reader).
   A value whose bound exceeds ``boot_bound`` is multiplied by ``1 / 2^k`` before its bootstrap and by the exact
   integer ``2^k`` after (so values keep a level in reserve for that product). Products of a ReLU's last stage are
   aimed at the scale that makes ``x * s'(x)`` land exactly on the context's scale. Polynomials run only on the
   levels whose primes are within ``2^0.5`` of the scale (their input is dropped there): the ``boot_*`` presets'
   levels above the bootstrap's output hold 26- and 30-bit primes sized for the bootstrap circuit, and powers
   computed there drift away from the scale (``r^(2^k)``) until their constants lose precision; linear layers
   keep exact scales at any level, so they still use those levels.

The result is a :class:`CompiledNetwork` whose :class:`Plan` lists every step (level in/out, rotations, plaintext
and ciphertext products, bootstraps) and the totals (rotation keys, key bytes, bootstraps) before any key exists;
``CompiledNetwork.rotations`` feeds ``ctx.keygen(rotations=...)``, ``run`` evaluates on a
:class:`~hemx.circuits.SlotSimulator` or on ciphertexts.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from hemx.circuits import CKKSEvaluator, SimCiphertext, SlotSimulator, as_evaluator, evaluate_polynomial, \
    polynomial_depth
from hemx.ckks import Context
from hemx.ckks.context import resolve_key_storage
from hemx.ckks.keygen import key_bytes as switch_key_bytes
from hemx.ckks.params import CKKSParameters
from hemx.errors import LevelError, OverflowBoundError, ParameterError, ShapeError
from hemx.nn import activations as acts
from hemx.nn import packing
from hemx.nn.graph import (
    Activation, Add, Affine, AvgPool2D, BatchNorm, Conv2D, Dense, Flatten, GlobalAvgPool, Graph, MaxPool2D,
    Node, reference,
)

DEFAULT_MARGIN = 1.2
# bootstrap inputs are scaled below this (the bootstrap's supported bound; boot_12: 22.9 bits at 8, 24 at <= 4)
DEFAULT_BOOT_BOUND = 8.0
SUPPORTED = ("Input", "Conv2D", "BatchNorm", "AvgPool2D", "MaxPool2D", "GlobalAvgPool", "Flatten", "Dense", "Affine",
             "Add", "Activation('poly')", "Activation('relu')")


# ------------------------------------------------------------------------------------------------------------
# steps and plan
# ------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class Step:
    """One operation of the compiled program.

    ``kind``: "linear", "gap", "affine", "add", "sub", "rotate", "flatten", "poly", "mul", "bootstrap".
    ``inputs`` / ``output``
    name values (a bootstrapped value gets a new name, ``"<value>@bt<k>"``). Counts are per evaluation of the
    whole tensor (every ciphertext of it), for one image batch.
    """

    kind: str
    node: str
    inputs: tuple[str, ...]
    output: str
    layout: packing.Layout
    op: Any = None
    depth: int = 0
    level_in: int | None = None
    level_out: int | None = None
    rotations: tuple[int, ...] = ()
    key_switches: int = 0
    plaintext_mults: int = 0
    ct_mults: int = 0
    ciphertexts: int = 1
    factor: float = 1.0  # bootstrap prescale 2^k; affine scale
    shift: float = 0.0
    scale_target: float | None = None
    group: str | None = None  # the steps of one ReLU (they share a scale target)
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the compiled network will do, known before any key is made.

    Attributes:
        steps: every :class:`Step` in execution order.
        slots: slots per ciphertext; ``input_level`` the level inputs are encrypted at; ``bootstrap_level`` the
            level a bootstrap returns (None: no bootstrapping); ``poly_level`` the highest level polynomials run at
            (None: any).
        rotations: the rotation steps the network itself needs (without the bootstrap's).
        bootstraps: bootstrap placements; ``bootstrapped_ciphertexts`` the ciphertexts they refresh in total.
        rotation_levels: the highest level each rotation step is used at (its key needs that level's digits and
            limbs only: ``ctx.keygen(rotation_level=...)``, :meth:`CompiledNetwork.keygen`).
        key_bytes: estimated bytes of the evaluation keys: the relinearization key and the bootstrap's keys (when
            known: ``boot_key_count``) in full, ``dnum x 2 x (L + K) x N x 4`` bytes each, the network's rotation
            keys at their levels (:func:`hemx.ckks.keygen.key_bytes`); half of that (and a 32-byte stream key each)
            where the context holds keys compact (``ctx.key_storage``; compiled for parameters alone: the storage
            a Context would choose here, :func:`hemx.ckks.context.resolve_key_storage`).
    """

    steps: tuple[Step, ...]
    slots: int
    input_level: int
    bootstrap_level: int | None
    poly_level: int | None
    rotations: tuple[int, ...]
    bootstraps: int
    bootstrapped_ciphertexts: int
    key_switches: int
    plaintext_mults: int
    ct_mults: int
    key_bytes: int | None
    key_count: int | None
    boot_key_count: int | None
    params_name: str | None
    rotation_levels: dict = dataclasses.field(default_factory=dict)

    def rows(self) -> list[dict]:
        out = []
        for s in self.steps:
            out.append(dict(step=s.output, node=s.node, kind=s.kind, level=f"{s.level_in}->{s.level_out}",
                            cts=s.ciphertexts, rot=s.key_switches, pmul=s.plaintext_mults, cmul=s.ct_mults,
                            note=s.note))
        return out

    def summary(self) -> str:
        """A readable table of the steps and the totals."""
        head = f"{'step':<24} {'kind':<9} {'levels':>7} {'cts':>4} {'rot':>5} {'pmul':>6} {'cmul':>5}  note"
        lines = [head, "-" * len(head)]
        for r in self.rows():
            lines.append(f"{r['step'][:24]:<24} {r['kind']:<9} {r['level']:>7} {r['cts']:>4} {r['rot']:>5} "
                         f"{r['pmul']:>6} {r['cmul']:>5}  {r['note']}")
        lines.append("-" * len(head))
        lines.extend(self.totals())
        return "\n".join(lines)

    def totals(self) -> list[str]:
        kb = "unknown" if self.key_bytes is None else f"{self.key_bytes / 2**30:.2f} GiB"
        boot = "" if self.boot_key_count is None else f" + {self.boot_key_count} bootstrap keys"
        return [
            f"parameters: {self.params_name or 'simulator'}, {self.slots} slots, input at level {self.input_level}, "
            f"bootstrap -> level {self.bootstrap_level}",
            f"bootstraps: {self.bootstraps} placements, {self.bootstrapped_ciphertexts} ciphertexts bootstrapped",
            f"rotations (key switches): {self.key_switches}; plaintext products: {self.plaintext_mults}; "
            f"ciphertext products: {self.ct_mults}",
            f"rotation keys: {len(self.rotations)} steps{boot}; keys (with relinearization): "
            f"{self.key_count if self.key_count is not None else '?'}, {kb}",
        ]

    def __rich__(self):
        from rich.table import Table  # noqa: PLC0415

        table = Table(title="hemx.nn plan", caption="\n".join(self.totals()))
        for col in ("step", "kind", "levels", "cts", "rot", "pmul", "cmul", "note"):
            table.add_column(col, justify="right" if col in ("cts", "rot", "pmul", "cmul", "levels") else "left")
        for r in self.rows():
            table.add_row(r["step"], r["kind"], r["level"], str(r["cts"]), str(r["rot"]), str(r["pmul"]),
                          str(r["cmul"]), r["note"])
        return table


# ------------------------------------------------------------------------------------------------------------
# the compiled network
# ------------------------------------------------------------------------------------------------------------


class CompiledNetwork:
    """A graph compiled for one parameter set / slot count: :attr:`plan`, :attr:`rotations`, :meth:`run`."""

    def __init__(self, graph: Graph, plan: Plan, input_layout: packing.Layout, output_layout: packing.Layout,
                 output_value: str, scale: float, bounds: dict, params: CKKSParameters | None = None):
        self.graph, self.plan = graph, plan
        self.params = params
        self.input_layout, self.output_layout = input_layout, output_layout
        self._output_value = output_value
        self.scale = scale
        self.bounds = bounds

    @property
    def rotations(self) -> tuple[int, ...]:
        """Rotation steps for ``ctx.keygen(rotations=...)`` (add ``bootstrap=True`` when ``plan.bootstraps``)."""
        return self.plan.rotations

    @property
    def needs_bootstrap(self) -> bool:
        return self.plan.bootstraps > 0

    def keygen(self, ctx: Context):
        """``ctx.keygen`` with every key :meth:`run` needs; each rotation key serves only the levels the plan uses
        it at (:attr:`Plan.rotation_levels`), the bootstrap's keys every level."""
        return ctx.keygen(rotations=list(self.rotations), bootstrap=self.needs_bootstrap,
                          rotation_level=dict(self.plan.rotation_levels))

    def encrypt_input(self, backend, keys, x):
        """Pack ``x`` (``input_shape`` or ``(B, *input_shape)``) and encrypt it at the plan's input level.

        ``backend``: a Context (``keys``: its KeySet or public key) or a SlotSimulator (``keys`` ignored). Returns
        one value with a leading axis of ``num_cts`` ciphertexts (then the batch axis, if any).
        """
        values = self.input_layout.pack(x)
        if isinstance(backend, SlotSimulator):
            return backend.encrypt(values, level=self.plan.input_level, scale=self.scale)
        if isinstance(backend, CKKSEvaluator):
            backend, keys = backend.ctx, keys if keys is not None else backend.keys
        if not isinstance(backend, Context):
            raise ParameterError(f"encrypt_input needs a hemx.Context or a SlotSimulator, got {type(backend).__name__}")
        pt = backend.encode(values, level=self.plan.input_level, scale=self.scale)
        return backend.encrypt(pt, keys)

    def decode_output(self, values) -> np.ndarray:
        """Decrypted slot values ``(num_cts, [B,] slots)`` of :meth:`run`'s result -> the output ``(B, ...)``."""
        return self.output_layout.unpack(values)

    def decrypt_output(self, backend, keys, out) -> np.ndarray:
        """Decrypt (Context + secret keys, or a SlotSimulator) and decode :meth:`run`'s result."""
        if isinstance(backend, SlotSimulator):
            return self.decode_output(backend.decrypt(out))
        if isinstance(backend, CKKSEvaluator):
            backend = backend.ctx
        return self.decode_output(backend.decrypt(out, keys))

    def program_steps(self) -> tuple[Step, ...]:
        """The steps whose plaintext data :meth:`diagonals` holds: the linear layers and the global average pools."""
        return tuple(s for s in self.plan.steps if s.kind in ("linear", "gap"))

    def diagonals(self, *, abstract: bool = False) -> dict:
        """The plaintext data of the linear layers, for :meth:`run`'s ``diagonals``: the arguments that keep a traced
        network (``jax.jit``, ``jax.export``) free of large constants.

        Returns ``{step name: {"diagonals": (plaintext_mults, slots), "bias": (num_out_cts, slots)}}`` for each
        linear layer (each non-zero diagonal pre-rotated by its giant step, in evaluation order; the bias only when
        the layer has one) and ``{step name: {"mask": (num_cts, slots)}}`` for each global average pool: float64
        jax arrays of the slot values, ``plaintext_mults x slots x 8`` bytes per layer (ResNet-20 at ``boot_16``:
        2.45 GiB), not the encoded plaintexts (about 11 times more at ``boot_16``'s levels). :meth:`run` encodes
        them one giant step at a time, inside the program when they are traced. With ``abstract=True``:
        ``jax.ShapeDtypeStruct`` stand-ins, nothing built (``jax.export`` without the data). With parameters,
        each layer's values are checked to fit the modulus they are encoded at (the checks ``Context.encode``
        makes, which a traced encoding cannot)."""
        out = {}
        for step in self.program_steps():
            data = step.op.program_data(abstract=abstract)
            if not abstract and self.params is not None:
                self._check_fits(step, data)
            out[step.output] = data
        return out

    def _check_fits(self, step: Step, data: dict) -> None:
        """Encoded at the step's level (scale: that level's rescale divisor; a bias the context's scale), every value
        must stay below half the modulus (a coefficient of the embedding is at most ``max |value| x scale``)."""
        params = self.params
        for name, values in data.items():
            level = step.level_in if name != "bias" else step.level_out
            peak = float(jnp.max(jnp.abs(values))) if values.size else 0.0
            if not math.isfinite(peak):
                raise ParameterError(f"step {step.output!r}: its {name} values are not finite")
            if level is None or peak == 0.0:
                continue
            limbs = params.limbs_at_level(level)
            log_q = sum(math.log2(q) for q in params.moduli[:limbs])
            scale = self.scale if name == "bias" else float(math.prod(
                params.moduli[params.limbs_at_level(level - 1):limbs]))
            if math.log2(peak) + math.log2(scale) >= log_q - 1:
                raise OverflowBoundError(f"step {step.output!r}: its {name} values reach {peak:.4g}, which at scale "
                                         f"2^{math.log2(scale):.1f} do not fit the modulus at level {level}")

    def run(self, backend, keys, encrypted_input, *, progress=None, release_diagonals: bool | None = None,
            diagonals: dict | None = None):
        """Evaluate the network on an encrypted (or simulated) input from :meth:`encrypt_input`.

        ``backend``: a Context (with ``keys``: the evaluation keys of :meth:`keygen`) or a hemx.circuits evaluator
        (a SlotSimulator: ``keys`` None). Returns one value with a leading axis of the output's ciphertexts.
        ``progress``: optional ``fn(step_index, total, step)``. ``release_diagonals``: drop each linear layer's
        float64 diagonals once it has run (default: when encrypted, where memory is short and rebuilding them is
        about 2 % of the time; the simulator keeps them for the next batch).

        ``diagonals``: the layers' data from :meth:`diagonals` (or arrays of the same shapes, e.g. the arguments
        of a ``jax.jit`` / ``jax.export`` program): each giant step's diagonals are then encoded from it, inside
        the program when it is traced, and nothing of the layers' size is a constant of the program
        (``jax.jit(lambda ct, keys, d: net.run(ctx, keys, ct, diagonals=d))``). The same result, bit for bit, as
        without it.
        """
        ev = as_evaluator(backend, keys)
        if release_diagonals is None:
            release_diagonals = isinstance(ev, CKKSEvaluator)
        params = ev.ctx.params if isinstance(ev, CKKSEvaluator) else getattr(ev, "params", None)
        if self.params is not None and params is not None and params != self.params:
            raise ParameterError(f"the network was compiled for other parameters ({self.params.describe()}); "
                                 "compile it for this context")
        if ev.slots != self.plan.slots:
            raise ParameterError(f"the network was compiled for {self.plan.slots} slots, the backend has {ev.slots}")
        if diagonals is not None:
            self._check_diagonals(diagonals)
            release_diagonals = False  # nothing built
        n_in = self.input_layout.num_cts
        if ev.level(encrypted_input) != self.plan.input_level:
            raise LevelError(f"the input is at level {ev.level(encrypted_input)}, the plan expects "
                             f"{self.plan.input_level} (use encrypt_input)")
        if _leading(encrypted_input) != n_in:
            raise ShapeError(f"the input must have a leading axis of {n_in} ciphertexts (from encrypt_input)")
        # the plan's range analysis is the calibration (checked against every level's modulus by compile): the
        # worst-case bounds ciphertexts propagate through wide sums of products (sum |w| |x|) are far above the
        # calibrated ones and would refuse valid layers, so values run without a propagated bound
        values: dict[str, list] = {"input": [_unbounded(ev.take(encrypted_input, j)) for j in range(n_in)]}
        last_use = {v: i for i, step in enumerate(self.plan.steps) for v in step.inputs}
        for i, step in enumerate(self.plan.steps):
            data = None if diagonals is None else diagonals.get(step.output)
            values[step.output] = _execute(ev, step, [values[v] for v in step.inputs], self, data)
            if release_diagonals and hasattr(step.op, "release"):
                step.op.release()
            for v in set(step.inputs):  # free what no later step reads
                if last_use[v] == i and v != self._output_value:
                    del values[v]
            if progress is not None:
                progress(i + 1, len(self.plan.steps), step)
        outs = values[self._output_value]
        return ev.stack(outs)

    def _check_diagonals(self, diagonals) -> None:
        """``diagonals`` has the structure and shapes of :meth:`diagonals` (arrays, tracers or stand-ins)."""
        want = self.diagonals(abstract=True)
        if not isinstance(diagonals, dict) or set(diagonals) != set(want):
            got = sorted(diagonals) if isinstance(diagonals, dict) else type(diagonals).__name__
            raise ParameterError(f"diagonals must be the dict of net.diagonals() (steps {sorted(want)}), got {got}")
        for name, entries in want.items():
            given = diagonals[name]
            if not isinstance(given, dict) or set(given) != set(entries):
                raise ParameterError(f"diagonals[{name!r}] must hold {sorted(entries)} (net.diagonals())")
            for key, spec in entries.items():
                shape = tuple(getattr(given[key], "shape", ()))
                if shape != spec.shape:
                    raise ShapeError(f"diagonals[{name!r}][{key!r}] has shape {shape}, the layer's is {spec.shape}")
                if getattr(given[key], "dtype", None) != np.float64:
                    raise ParameterError(f"diagonals[{name!r}][{key!r}] must be float64 (the slot values), got "
                                         f"{getattr(given[key], 'dtype', type(given[key]).__name__)}")


def _unbounded(x):
    return x.replace(bound=None) if getattr(x, "bound", None) is not None else x


def _leading(x) -> int | None:
    shape = x.values.shape[:-1] if isinstance(x, SimCiphertext) else getattr(x, "batch_shape", ())
    return shape[0] if shape else None


def _stack(ev, xs):
    return xs[0] if len(xs) == 1 else ev.stack(xs)


def _unstack(ev, x, n):
    return [x] if n == 1 else [ev.take(x, j) for j in range(n)]


def _execute(ev, step: Step, ins: list[list], net: CompiledNetwork, data: dict | None = None) -> list:
    kind = step.kind
    if kind == "linear" or kind == "gap":
        return step.op.apply(ev, ins[0], data)
    if kind == "flatten":
        return ins[0]
    if kind == "add":
        return [ev.add(a, b) for a, b in zip(ins[0], ins[1])]
    if kind == "sub":
        return [ev.sub(a, b) for a, b in zip(ins[0], ins[1])]
    if kind == "rotate":
        return [ev.rotate(x, int(step.factor)) for x in ins[0]]
    if kind == "affine":
        out = []
        shift = None
        if step.shift:
            full = np.zeros(step.layout.num_cts * step.layout.slots)
            full[step.layout.positions.reshape(-1)] = step.shift
            shift = full.reshape(step.layout.num_cts, step.layout.slots)
        for j, x in enumerate(ins[0]):
            if step.factor != 1.0 or step.scale_target is not None:
                level = ev.level(x)
                target = step.scale_target or ev.scale(x)
                x = ev.rescale(ev.mul_const(x, step.factor,
                                            plain_scale=target * ev.rescale_divisor(level) / ev.scale(x)))
            if shift is not None:
                x = ev.add(x, shift[j])
            out.append(x)
        return out
    if kind == "poly":
        x = _stack(ev, ins[0])
        if step.level_in is not None and ev.level(x) > step.level_in:
            x = ev.drop_level(x, step.level_in)
        stage = step.op
        if isinstance(stage, acts.PolyStage):
            y = stage.evaluate(ev, x, scale=step.scale_target)
        else:
            y = evaluate_polynomial(ev, x, np.asarray(stage), scale=step.scale_target)
        return _unstack(ev, y, len(ins[0]))
    if kind == "mul":
        out = []
        for x, s in zip(ins[0], ins[1]):
            level = min(ev.level(x), ev.level(s))
            out.append(ev.mul(ev.drop_level(x, level), ev.drop_level(s, level), rescale=True))
        return out
    if kind == "bootstrap":
        return _bootstrap(ev, ins[0], step, net)
    raise ParameterError(f"internal: unknown step kind {kind!r}")


def _bootstrap(ev, xs: list, step: Step, net: CompiledNetwork) -> list:
    if isinstance(ev, CKKSEvaluator) and len(xs) > 1:
        # one ciphertext at a time: a batch of two doubles the bootstrap's working set (about 2 GiB at boot_16)
        # and was not faster on the 2-core CPU (ResNet-20's stage 3: 43.8 s for two, 8-21 s for one)
        return [y for x in xs for y in _bootstrap(ev, [x], step, net)]
    x = _stack(ev, xs)
    f = step.factor
    if f != 1.0:
        level = ev.level(x)
        x = ev.rescale(ev.mul_const(x, 1.0 / f, plain_scale=ev.rescale_divisor(level)))
    target = net.plan.bootstrap_level
    if isinstance(ev, SlotSimulator):
        y = SimCiphertext(x.values, target, x.scale)
    elif isinstance(ev, CKKSEvaluator):
        # the input is within boot_bound (<= the bootstrap's supported bound) by the plan's calibrated range
        # analysis; it runs without a propagated bound like every value of the network (CompiledNetwork.run)
        y = _unbounded(ev.ctx.bootstrap(_unbounded(x), ev.keys))
        if ev.level(y) != target:
            raise LevelError(f"internal: the bootstrap returned level {ev.level(y)}, the plan assumed {target}")
    else:
        raise ParameterError(f"bootstrapping needs a CKKSEvaluator or a SlotSimulator, got {type(ev).__name__}")
    if f != 1.0:
        y = ev.mul_const(y, f, plain_scale=1.0)
    return _unstack(ev, y, len(xs))


# ------------------------------------------------------------------------------------------------------------
# compile
# ------------------------------------------------------------------------------------------------------------


def _fold(graph: Graph) -> list[Node]:
    """BatchNorm folded into a Conv2D / Dense producer read by nothing else; returns the new node list."""
    readers: dict[str, int] = {}
    for n in graph.nodes:
        for i in n.inputs:
            readers[i] = readers.get(i, 0) + 1
    by_name = {n.name: n for n in graph.nodes}
    out: list[Node] = []
    dropped: set[str] = set()
    for n in graph.nodes:
        layer = n.layer
        if isinstance(layer, BatchNorm):
            prev = by_name[n.inputs[0]]
            if isinstance(prev.layer, (Conv2D, Dense)) and readers.get(prev.name, 0) == 1 and prev.name != graph.output:
                p = prev.layer
                c_out = p.weight.shape[0]
                bias = p.bias if p.bias is not None else np.zeros(c_out)
                if isinstance(p, Conv2D):
                    fused = Conv2D(p.weight * layer.scale[:, None, None, None], bias * layer.scale + layer.shift,
                                   p.stride, p.padding)
                else:
                    fused = Dense(p.weight * layer.scale[:, None], bias * layer.scale + layer.shift)
                dropped.add(prev.name)
                out = [m for m in out if m.name != prev.name]
                out.append(Node(n.name, fused, prev.inputs))
                continue
        out.append(n)
    return out


def _target_info(target, slots):
    """(params or None, slots, max_level, scale, divisor(level) function, context or None)."""
    ctx = None
    if isinstance(target, Context):
        ctx, params = target, target.params
        slots = slots or target.slots
    elif isinstance(target, CKKSEvaluator):
        ctx, params = target.ctx, target.ctx.params
        slots = slots or target.slots
    elif isinstance(target, CKKSParameters):
        params = target
        slots = slots or params.max_slots
    elif isinstance(target, SlotSimulator):
        params = target.params
        slots = slots or target.slots
        if params is None:
            return None, slots, target.max_level, 1.0, lambda level: 1.0, None
    else:
        raise ParameterError(f"compile targets a CKKSParameters, a Context or a SlotSimulator, got "
                             f"{type(target).__name__}")

    def divisor(level: int) -> float:
        if not 0 < level <= params.max_level:
            raise LevelError(f"no rescale at level {level}")
        return float(math.prod(params.moduli[params.limbs_at_level(level - 1): params.limbs_at_level(level)]))

    return params, int(slots), params.max_level, float(params.scale), divisor, ctx


def _bootstrap_level(params: CKKSParameters | None) -> int | None:
    """Level a bootstrap returns at with these parameters (None: too few levels to bootstrap)."""
    if params is None:
        return None
    from hemx.circuits.bootstrap import Bootstrapper, BootstrapPlan, bound_for  # noqa: PLC0415

    hw = params.hamming_weight
    weight = hw if hw is not None and hw <= 32 else 32
    try:
        evalmod = Bootstrapper._choose_evalmod(bound_for(weight, params.n), None)
    except ParameterError:
        return None
    level = BootstrapPlan(params.max_level, 3, evalmod.depth, 3).output_level
    return level if level >= 1 else None


def compile(graph: Graph, target, *, calibration=None, margin: float = DEFAULT_MARGIN,  # noqa: A001
            bootstrap: bool | None = None, bootstrap_level: int | None = None, boot_bound: float = DEFAULT_BOOT_BOUND,
            input_level: int | None = None, slots: int | None = None, relu: acts.SignComposite | None = None,
            grid: tuple[int, int] | None = None, bsgs_ratio: float = packing.DEFAULT_BSGS_RATIO) -> CompiledNetwork:
    """Compile ``graph`` for ``target`` (module docstring).

    With bootstrapping and no ``input_level``, inputs are encrypted at the bootstrap's output level when that
    costs no more bootstraps than the top level (at ``boot_16``, ResNet-20: 38 bootstraps either way, and the
    rotation keys serve levels <= 10 instead of 25: 8.9 instead of 11.7 GiB of keys), else at the top level.

    Args:
        graph: the network (:class:`~hemx.nn.graph.Graph`).
        target: ``CKKSParameters``, a ``Context`` (then the bootstrap's own keys are counted too) or a
            ``SlotSimulator`` (``SlotSimulator(None, slots=, max_level=)`` for linear networks checked exactly;
            polynomials need a simulator with parameters).
        calibration: a batch ``(B, *input_shape)`` of typical inputs; needed for ReLU (its input bound) and for
            bootstrapping (the bound a bootstrap's input is scaled below).
        margin: calibrated ``max |x|`` is multiplied by this.
        bootstrap: allow bootstraps (default: when the parameters have room for one, e.g. the ``boot_*`` presets).
        bootstrap_level: level a bootstrap returns (default: from the parameters' bootstrapping plan).
        boot_bound: bootstrap inputs whose bound exceeds it are scaled by ``1 / 2^k`` first.
        input_level: the level inputs are encrypted at (default: the top level).
        slots: slots per ciphertext (default: the target's).
        relu: the sign composite for ReLU (default :func:`hemx.nn.activations.sign_composite`).
        grid: ``(Hg, Wg)`` of the input image layout (default: the smallest powers of two).
    """
    options = dict(calibration=calibration, margin=margin, bootstrap=bootstrap, bootstrap_level=bootstrap_level,
                   boot_bound=boot_bound, slots=slots, relu=relu, grid=grid, bsgs_ratio=bsgs_ratio)
    top = _compile(graph, target, input_level=input_level, **options)
    low_level = top.plan.bootstrap_level
    if input_level is not None or low_level is None or low_level >= top.plan.input_level:
        return top
    try:
        low = _compile(graph, target, input_level=low_level, **options)
    except (LevelError, OverflowBoundError):  # the network needs the levels above the bootstrap's output
        return top
    return low if low.plan.bootstraps <= top.plan.bootstraps else top


def _compile(graph: Graph, target, *, calibration, margin, bootstrap, bootstrap_level, boot_bound, input_level,
             slots, relu, grid, bsgs_ratio) -> CompiledNetwork:
    if not isinstance(graph, Graph):
        raise ParameterError(f"compile takes a hemx.nn.Graph, got {type(graph).__name__}")
    if not (isinstance(margin, (int, float)) and margin >= 1.0):
        raise ParameterError(f"margin must be a number >= 1, got {margin!r}")
    params, slots, max_level, scale, divisor, ctx = _target_info(target, slots)
    packing._check_slots(slots)
    has_relu = any(isinstance(n.layer, Activation) and n.layer.kind == "relu" or isinstance(n.layer, MaxPool2D)
                   for n in graph.nodes)
    bounds: dict[str, float] = {}
    if calibration is not None:
        cal = np.asarray(calibration, dtype=np.float64)
        if cal.shape == graph.input_shape:
            cal = cal[None]
        if cal.shape[1:] != graph.input_shape:
            raise ShapeError(f"calibration data of shape {cal.shape} for a graph expecting (B, *{graph.input_shape})")
        kept = reference(graph, cal, keep=True)
        bounds = {k: max(float(np.max(np.abs(v))), 1e-12) * float(margin) for k, v in kept.items()}
    elif has_relu:
        raise ParameterError("a network with ReLU or MaxPool2D needs calibration data (compile(..., "
                             "calibration=x_batch)): the sign approximation is scaled by each comparison's bound")
    boot_level = None
    if bootstrap is None or bootstrap:
        boot_level = bootstrap_level if bootstrap_level is not None else _bootstrap_level(params)
        if bootstrap and boot_level is None:
            raise ParameterError("these parameters have too few levels to bootstrap: use a boot_* preset "
                                 "(hemx.CKKSParameters.preset('boot_12'))")
    if boot_level is not None and not 1 <= boot_level <= max_level:
        raise LevelError(f"bootstrap_level must be in 1..{max_level}, got {boot_level}")
    if boot_level is not None and calibration is None:
        boot_level = None if bootstrap is None else boot_level
        if boot_level is not None:
            raise ParameterError("bootstrapping needs calibration data (the bound of every bootstrapped value)")
    level0 = max_level if input_level is None else int(input_level)
    if not 0 <= level0 <= max_level:
        raise LevelError(f"input_level must be in 0..{max_level}, got {input_level}")
    comp = relu or (acts.sign_composite() if has_relu else None)

    nodes = _fold(graph)
    shape0 = graph.input_shape
    in_layout = packing.image_layout(shape0, slots, grid=grid) if len(shape0) == 3 else \
        packing.vector_layout(shape0[0], slots)
    layouts: dict[str, packing.Layout] = {"input": in_layout}
    names = {nodes[0].name: "input"}
    raw: list[Step] = []
    value_bound: dict[str, float | None] = {"input": bounds.get(nodes[0].name)}

    def add_step(step: Step, bound):
        raw.append(step)
        layouts[step.output] = step.layout
        value_bound[step.output] = bound

    for node in nodes[1:]:
        layer = node.layer
        ins = [names[i] for i in node.inputs]
        lay = layouts[ins[0]]
        bound = bounds.get(node.name)
        out = node.name
        names[node.name] = out
        where = f"node {node.name!r} ({type(layer).__name__})"
        try:
            if isinstance(layer, Conv2D):
                op = packing.conv_map(lay, layer.weight, layer.bias, layer.stride, layer.padding,
                                      bsgs_ratio=bsgs_ratio)
                add_step(_linear_step(node.name, ins, out, op), bound)
            elif isinstance(layer, AvgPool2D):
                op = packing.avgpool_map(lay, layer.window, layer.stride, bsgs_ratio=bsgs_ratio)
                add_step(_linear_step(node.name, ins, out, op), bound)
            elif isinstance(layer, BatchNorm):
                op = packing.channel_affine_map(lay, layer.scale, layer.shift, bsgs_ratio=bsgs_ratio)
                add_step(_linear_step(node.name, ins, out, op), bound)
            elif isinstance(layer, Dense):
                op = packing.dense_map(lay, layer.weight, layer.bias, bsgs_ratio=bsgs_ratio)
                add_step(_linear_step(node.name, ins, out, op), bound)
            elif isinstance(layer, GlobalAvgPool):
                op = packing.GlobalAvgPoolOp(lay)
                add_step(Step("gap", node.name, tuple(ins), out, op.out_layout, op, 1, rotations=op.rotations,
                              key_switches=op.key_switches, plaintext_mults=op.plaintext_mults,
                              ciphertexts=lay.num_cts), bound)
            elif isinstance(layer, Flatten):
                if lay.grid is None:
                    raise ShapeError(f"{where} needs an image input")
                flat = packing.Layout((int(np.prod(lay.shape)),), slots, lay.positions.reshape(-1), lay.num_cts,
                                      None, 1, lay.clean)
                add_step(Step("flatten", node.name, tuple(ins), out, flat, ciphertexts=lay.num_cts), bound)
            elif isinstance(layer, Affine):
                depth = 0 if layer.scale == 1.0 else 1
                add_step(Step("affine", node.name, tuple(ins), out, lay, depth=depth, factor=float(layer.scale),
                              shift=float(layer.shift), ciphertexts=lay.num_cts,
                              note=f"x*{layer.scale:g}+{layer.shift:g}"), bound)
            elif isinstance(layer, Add):
                other = layouts[ins[1]]
                if not lay.same_positions(other):
                    raise ShapeError(f"{where}: its operands have different slot layouts ({lay.describe()} vs "
                                     f"{other.describe()}); both branches must reach the same gap/grid (e.g. a "
                                     "strided shortcut conv for a strided main path)")
                add_step(Step("add", node.name, tuple(ins), out, lay.replace(clean=lay.clean and other.clean),
                              ciphertexts=lay.num_cts), bound)
            elif isinstance(layer, Activation) and layer.kind == "poly":
                coeffs = np.asarray(layer.coeffs)
                clean = lay.clean and coeffs[0] == 0.0
                add_step(Step("poly", node.name, tuple(ins), out, lay.replace(clean=clean), op=coeffs,
                              ciphertexts=lay.num_cts, note=f"degree {len(coeffs) - 1}"), bound)
            elif isinstance(layer, Activation) and layer.kind == "relu":
                _relu_steps(add_step, node.name, node.name, ins[0], out, lay, lay, bounds[node.inputs[0]], bound,
                            comp)
            elif isinstance(layer, MaxPool2D):
                if lay.grid is None:
                    raise ShapeError("needs an image (C, H, W) input")
                if node.inputs[0] not in bounds:
                    raise ParameterError("MaxPool2D needs calibration data (compile(..., calibration=x_batch)): "
                                         "each comparison is a ReLU of a difference, scaled by its bound")
                _maxpool_steps(add_step, node.name, ins[0], out, lay, layer, bounds[node.inputs[0]], comp)
            else:
                raise ParameterError(f"{where} is not supported encrypted; supported: {', '.join(SUPPORTED)}")
        except (ShapeError, ParameterError, LevelError) as e:
            if str(e).startswith("node "):
                raise
            raise type(e)(f"{where}: {e}") from None
    output_value = names[nodes[-1].name]
    poly_cap = _poly_cap(params, scale, divisor)
    steps = _assign_levels(raw, level0, boot_level, value_bound, boot_bound, scale, divisor, layouts, params,
                           output_value, slots, poly_cap)
    plan = _make_plan(steps, slots, level0, boot_level, params, ctx, poly_cap)
    return CompiledNetwork(graph, plan, in_layout, layouts[output_value], output_value, scale,
                           {k: v for k, v in value_bound.items() if v is not None}, params)


def _relu_steps(add_step, node: str, prefix: str, x: str, out: str, lay: packing.Layout, out_lay: packing.Layout,
                b_in: float, out_bound, comp) -> None:
    """The steps of ``relu(x) = x * s'(x / B)``: the scaling (its own step, one level, so a bootstrap can fall
    between it and the first stage), the sign stages, the product. ``prefix`` groups them (their scale target)."""
    stages = acts.relu_stages(1.0, comp)
    prev = f"{prefix}/scaled"
    add_step(Step("affine", node, (x,), prev, lay.replace(clean=False), depth=1, factor=1.0 / b_in,
                  ciphertexts=lay.num_cts, group=prefix, note=f"x/{b_in:.3g}"), 1.0)
    partial = np.linspace(-1.0, 1.0, 4097)
    for k, stage in enumerate(stages):
        name = f"{prefix}/sign{k + 1}" if k < len(stages) - 1 else f"{prefix}/half_step"
        partial = np.polynomial.chebyshev.chebval(partial, stage.coeffs)
        add_step(Step("poly", node, (prev,), name, lay.replace(clean=False), op=stage, ciphertexts=lay.num_cts,
                      group=prefix, note=f"sign stage {k + 1}, degree {len(stage.coeffs) - 1}"),
                 float(np.max(np.abs(partial))) * 1.01)
        prev = name
    add_step(Step("mul", node, (x, prev), out, out_lay, depth=1, ciphertexts=lay.num_cts, ct_mults=lay.num_cts,
                  group=prefix, note="x * (1 + sign) / 2"), out_bound)


def _maxpool_steps(add_step, node: str, x: str, out: str, lay: packing.Layout, layer: MaxPool2D, b_in: float,
                   comp) -> None:
    """Max over ``window x window`` patches: separable, along rows then columns, each a chain of
    ``max(a, rot(a, k)) = rot(a, k) + relu(a - rot(a, k))`` with overlapping doubling shifts (``ceil(log2 w)``
    comparisons per axis); the result sits at the stride's grid points (a gap ``g * stride`` layout, other slots
    unclean). Differences are bounded by ``2 B``."""
    c, h, w = lay.shape
    window, stride = layer.window, layer.stride
    ho, wo = (h - window) // stride + 1, (w - window) // stride + 1
    out_lay = packing.conv_output_layout(lay, c, (ho, wo), stride).replace(clean=False)
    work = lay.replace(clean=False)
    g, wg = lay.gap, lay.grid[1]
    cur = x
    chain = []
    for axis, unit in (("row", g), ("col", g * wg)):
        cover = 1
        while cover < window:
            shift = min(cover, window - cover)
            chain.append((axis, cover, unit * shift))
            cover += shift
    for n, (axis, cover, k) in enumerate(chain):
        prefix = f"{node}/{axis}{cover}"
        rot = f"{prefix}/rot"
        add_step(Step("rotate", node, (cur,), rot, work, factor=float(k), rotations=(k,),
                      key_switches=lay.num_cts, ciphertexts=lay.num_cts, note=f"shift {k}"), b_in)
        diff = f"{prefix}/diff"
        add_step(Step("sub", node, (cur, rot), diff, work, ciphertexts=lay.num_cts), 2.0 * b_in)
        relu = f"{prefix}/relu"
        _relu_steps(add_step, node, prefix, diff, relu, work, work, 2.0 * b_in, 2.0 * b_in, comp)
        last = n == len(chain) - 1
        nxt = out if last else f"{prefix}/max"
        add_step(Step("add", node, (rot, relu), nxt, out_lay if last else work, ciphertexts=lay.num_cts,
                      note="max(a, b) = b + relu(a - b)"), b_in)
        cur = nxt


def _poly_cap(params, scale: float, divisor) -> int | None:
    """The highest level up to which every level's primes are within 2^0.5 of the scale (None: all of them)."""
    if params is None:
        return None
    for level in range(1, params.max_level + 1):
        if abs(math.log2(divisor(level) / scale)) > 0.5:
            return level - 1
    return None


def _linear_step(node: str, ins, out: str, op) -> Step:
    return Step("linear", node, tuple(ins), out, op.out_layout, op, 1, rotations=op.rotations,
                key_switches=op.key_switches, plaintext_mults=op.plaintext_mults,
                ciphertexts=op.in_layout.num_cts, note=f"n1={op.n1}, " + op.out_layout.describe())


def _poly_depth(step: Step, scale: float, target: float) -> int:
    if isinstance(step.op, acts.PolyStage):
        return step.op.depth(input_scale=scale, scale=target)
    return polynomial_depth(step.op, input_scale=scale, scale=target)


def _poly_products(step: Step, params, level: int, scale: float, target: float) -> int:
    """Ciphertext products of one polynomial evaluation, counted on a one-slot simulator (0 without parameters)."""
    if params is None:
        return 0
    sim = SlotSimulator(params, slots=2)
    x = sim.encrypt(np.zeros(2), level=level, scale=scale)
    if isinstance(step.op, acts.PolyStage):
        step.op.evaluate(sim, x, scale=target)
    else:
        evaluate_polynomial(sim, x, step.op, scale=target)
    return sim.products


class _Infeasible(Exception):
    pass


def _assign_levels(raw: list[Step], level0: int, boot_level: int | None, value_bound: dict, boot_bound: float,
                   scale: float, divisor, layouts: dict, params, output_value: str, slots: int,
                   poly_cap: int | None = None) -> list[Step]:
    """Levels of every step, with bootstraps inserted (module docstring).

    Lazy rule: a step whose input has too few levels left gets that input bootstrapped. Before each step the
    planner also tries bootstrapping each of its inputs *now* (its other readers then get the fresh levels too) and
    keeps that choice when the lazy rule, rolled out over the rest of the network, needs more bootstraps.
    """
    for step in raw:
        if step.kind == "poly":
            step.depth = _poly_depth(step, scale, scale)

    def prescale(v: str) -> float:
        b = value_bound.get(v)
        if b is None or b <= boot_bound:
            return 1.0
        return float(2 ** math.ceil(math.log2(b / boot_bound)))

    def reserve(v: str) -> int:
        if boot_level is None or v == output_value:
            return 0
        return 1 if prescale(v) > 1.0 else 0

    def needs(i: int) -> list[tuple[str, int]]:
        """(input, minimum level) pairs of step i, for the lazy rule."""
        step = raw[i]
        res = reserve(step.output)
        if step.kind in ("linear", "gap", "affine"):
            return [(step.inputs[0], step.depth + res)]
        if step.kind == "poly":
            nxt = raw[i + 1] if i + 1 < len(raw) else None
            if nxt is not None and nxt.kind == "mul" and nxt.inputs[1] == step.output:
                return [(step.inputs[0], step.depth + 1 + reserve(nxt.output))]
            return [(step.inputs[0], step.depth + res)]
        if step.kind == "mul":
            return [(v, 1 + res) for v in step.inputs]
        if step.kind in ("add", "sub"):
            return [(v, res) for v in step.inputs]
        return []

    def out_level(i: int, lin: int) -> int:
        step = raw[i]
        if step.kind == "poly" and poly_cap is not None:
            lin = min(lin, poly_cap)  # polynomials run on levels whose primes match the scale (module docstring)
        if step.kind in ("add", "sub", "rotate", "flatten"):
            return lin
        if step.kind == "mul":
            return lin - 1
        return lin - step.depth

    def can_boot(v: str, lv: int) -> bool:
        return lv >= (1 if prescale(v) > 1.0 else 0)

    def do_step(i: int, levels: dict, forced: str | None, on_boot=None) -> int:
        """Apply step i (bootstrapping ``forced`` first, then whatever the lazy rule needs): bootstraps used."""
        used = 0

        def boot(v: str) -> None:
            nonlocal used
            if not can_boot(v, levels[v]):
                raise _Infeasible(v)
            levels[v] = boot_level
            used += 1
            if on_boot:
                on_boot(v)

        if forced is not None:
            boot(forced)
        for v, need in needs(i):
            if levels[v] < need:
                if boot_level is None:
                    raise LevelError(f"step {raw[i].output!r} ({raw[i].kind}) needs {need} levels, its input {v!r} "
                                     f"is at level {levels[v]}; these parameters cannot bootstrap: use more levels "
                                     "or a boot_* preset (hemx.CKKSParameters.preset('boot_16'))")
                if boot_level < need:
                    raise LevelError(f"step {raw[i].output!r} ({raw[i].kind}) needs {need} levels, more than a "
                                     f"bootstrap returns ({boot_level}): use parameters with more levels after "
                                     "bootstrapping, or a sign composite of smaller degrees (relu=...)")
                boot(v)
        step = raw[i]
        levels[step.output] = out_level(i, min(levels[v] for v in step.inputs))
        if levels[step.output] < 0:
            raise LevelError(f"step {step.output!r} ({step.kind}) needs more levels than its input can have")
        return used

    def rollout(i: int, levels: dict, forced: str | None) -> float:
        levels = dict(levels)
        total = 0
        try:
            total += do_step(i, levels, forced)
            for k in range(i + 1, len(raw)):
                total += do_step(k, levels, None)
        except _Infeasible:
            return math.inf
        return total

    levels: dict[str, int] = {"input": level0}
    current: dict[str, str] = {"input": "input"}
    out: list[Step] = []
    count = [0]

    def record_boot(v: str):
        src = current[v]
        f = prescale(v)
        count[0] += 1
        new = f"{v}@bt{count[0]}"
        out.append(Step("bootstrap", v.split("/")[0], (src,), new, layouts[v], depth=0, level_in=levels_before[v],
                        level_out=boot_level, ciphertexts=layouts[v].num_cts, factor=f,
                        note=f"x/{f:g} before, x{f:g} after" if f > 1 else ""))
        current[v] = new

    for i, step in enumerate(raw):
        choice = None
        if boot_level is not None and step.kind != "mul":  # (a product's operands: lazy only, see below)
            best = rollout(i, levels, None)
            for v in dict.fromkeys(step.inputs):
                if levels[v] < boot_level and can_boot(v, levels[v]):
                    alt = rollout(i, levels, v)
                    if alt < best:
                        best, choice = alt, v
        levels_before = dict(levels)
        try:
            do_step(i, levels, choice, on_boot=lambda v: (record_boot(v), levels_before.__setitem__(v, levels[v])))
        except _Infeasible as e:
            raise LevelError(f"step {step.output!r}: value {e.args[0]!r} must be scaled below {boot_bound:g} before "
                             "its bootstrap but has no level left for it: raise boot_bound or add levels") from None
        ins = tuple(current[v] for v in step.inputs)
        lin = min(levels[v] for v in step.inputs)
        if step.kind == "poly" and poly_cap is not None:
            lin = min(lin, poly_cap)
        step.inputs, step.level_in, step.level_out = ins, lin, levels[step.output]
        current[step.output] = step.output
        out.append(step)
    # A ReLU's scaling x / B, its sign stages and s' run at the scale T = divisor of the product's level, so that
    # x * s' (x at the context's scale S) lands exactly on S after its rescale; every stage has input and output
    # at T, so no stage needs a normalizing product (the depths planned above hold).
    for step in out:
        if step.kind == "mul":
            target = divisor(step.level_in)
            for other in out:
                if other.group is not None and other.group == step.group and other.kind in ("affine", "poly"):
                    other.scale_target = target
    if params is not None:  # the range analysis: every value's calibrated bound times its scale within q / 2
        for step in out:
            b = value_bound.get(step.output.split("@")[0])
            s_out = scale if step.kind != "poly" or step.scale_target is None else step.scale_target
            if b is None:
                continue
            log_q = sum(math.log2(q) for q in params.moduli[: params.limbs_at_level(step.level_out)])
            need = math.log2(b) + math.log2(s_out)  # (before its rescale: both sides times that level's primes)
            if need >= log_q - 1:
                raise OverflowBoundError(
                    f"step {step.output!r}: values up to {b:.4g} (calibrated, margin included) at scale "
                    f"2^{math.log2(s_out):.1f} need 2^{need:.1f}, beyond half the modulus at level {step.level_out} "
                    f"(2^{log_q - 1:.1f}); "
                    "scale the network's values down (an Affine(1/k) input layer, smaller weights) or use "
                    "parameters with a larger base prime")
    for step in out:
        if step.kind == "poly":
            s_in = step.scale_target or scale
            if _poly_depth(step, s_in, s_in) != step.depth:
                raise LevelError(f"internal: the depth of {step.output!r} changes with its scale")
            step.ct_mults = _poly_products(step, params, step.level_in, s_in, s_in) * step.ciphertexts
    return out


def _make_plan(steps: list[Step], slots: int, level0: int, boot_level, params, ctx, poly_cap) -> Plan:
    rotation_levels: dict[int, int] = {}
    for s in steps:
        for r in s.rotations:
            r = int(r) % slots
            if r:
                level = s.level_in if s.level_in is not None else level0
                rotation_levels[r] = max(level, rotation_levels.get(r, level))
    rotations = sorted(rotation_levels)
    boots = [s for s in steps if s.kind == "bootstrap"]
    boot_keys = None
    key_count = None
    key_bytes = None
    if params is not None:
        key_count = 1 + len(rotations)  # relinearization + rotations
        shared: set[int] = set()
        if boots and ctx is not None:
            bt = ctx.bootstrapper()
            # at full slots a network rotation that the bootstrap also uses shares its (full) key
            shared = set(bt.rotations) & set(rotations) if slots == params.max_slots else set()
            extra = set(bt.rotations) - shared
            boot_keys = len(extra) + 1 + (2 if bt.encapsulation_weight is not None else 0)  # + conjugation
            key_count += boot_keys
        if not boots or boot_keys is not None:
            compact = (ctx.key_storage if ctx is not None else resolve_key_storage()) == "compact"
            key_bytes = (1 + (boot_keys or 0) + len(shared)) * switch_key_bytes(params, compact=compact) + sum(
                switch_key_bytes(params, rotation_levels[r], compact=compact) for r in rotations if r not in shared)
    return Plan(
        steps=tuple(steps), slots=slots, input_level=level0, bootstrap_level=boot_level, poly_level=poly_cap,
        rotations=tuple(rotations), bootstraps=len(boots), bootstrapped_ciphertexts=sum(s.ciphertexts for s in boots),
        key_switches=sum(s.key_switches for s in steps), plaintext_mults=sum(s.plaintext_mults for s in steps),
        ct_mults=sum(s.ct_mults for s in steps), key_bytes=key_bytes, key_count=key_count, boot_key_count=boot_keys,
        params_name=None if params is None else params.name, rotation_levels=rotation_levels)


__all__ = ["compile", "CompiledNetwork", "Plan", "Step", "DEFAULT_MARGIN", "DEFAULT_BOOT_BOUND", "SUPPORTED"]
