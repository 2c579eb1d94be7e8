"""The runtime of :mod:`hemx.nn`: a :class:`CompiledNetwork` (a :class:`~hemx.nn.passes.plan.Plan` and the layouts
of its input and output) evaluated step by step on ciphertexts or on a :class:`~hemx.circuits.SlotSimulator`.

Each step runs its op (:meth:`hemx.nn.steps.Op.apply`); a value is a list of ciphertexts (one per ciphertext of
its layout) with the input's batch axes, freed once no later step reads it. Bootstraps (:func:`bootstrap_values`)
run one ciphertext at a time on a Context.

With ``images_per_ciphertext = B > 1`` (:mod:`hemx.nn.packing`: images interleaved) the steps are the single-image
program on ``slots / B`` slots, run through an :class:`InterleavedEvaluator` (rotations times ``B``, plaintexts
repeated ``B`` times); inputs are packed with :func:`~hemx.nn.packing.interleave`, outputs unpacked with
:func:`~hemx.nn.packing.deinterleave`.
"""

from __future__ import annotations

import collections
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from hemx.circuits import CKKSEvaluator, SimCiphertext, SlotSimulator, as_evaluator
from hemx.circuits.bootstrap import BootstrapParameters, bootstrapper_for
from hemx.ckks import Context
from hemx.ckks.params import CKKSParameters
from hemx.errors import (BoundError, BoundWarning, LevelError, OverflowBoundError, ParameterError, ShapeError,
                         external_stacklevel)
from hemx.nn import packing
from hemx.nn.data_layout import check_layout, model_shape, to_channel_first


class CompiledNetwork:
    """A graph compiled for one parameter set / slot count: :attr:`plan`, :attr:`rotations`, :meth:`run`.

    ``graph``: the :class:`~hemx.nn.graph.Graph` it was compiled from (not imported here: the layers' lowerings
    import this runtime's step helpers, and the graph imports the layers)."""

    def __init__(self, graph, plan, input_layout: packing.Layout, output_layout: packing.Layout,
                 output_value: str, scale: float, bounds: dict, params: CKKSParameters | None = None,
                 passes: tuple = ()):
        self.graph, self.plan = graph, plan
        self.passes = passes  # ((pass name, its output: a hemx.nn.passes.Compilation), ...) in pipeline order
        self.params = params
        self.input_layout, self.output_layout = input_layout, output_layout
        self._output_value = output_value
        self.scale = scale
        self.bounds = bounds

    @property
    def data_layout(self) -> str:
        """How the network takes an image input, as the model it came from (:attr:`hemx.nn.graph.Graph.data_layout`):
        ``"NHWC"`` ``(n, H, W, C)`` for a JAX / Keras model, ``"NCHW"`` ``(n, C, H, W)`` for ONNX and by default.
        :meth:`encrypt_input` and :meth:`pack_input` take inputs in it (:mod:`hemx.nn.data_layout`)."""
        return check_layout(getattr(self.graph, "data_layout", "NCHW"))

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One input as :meth:`encrypt_input` takes it, in :attr:`data_layout`: ``(H, W, C)`` for NHWC, ``(C, H,
        W)`` for NCHW, ``(F,)`` for vectors."""
        return model_shape(self.input_layout.shape, self.data_layout)

    @property
    def images_per_ciphertext(self) -> int:
        """Images each ciphertext holds, interleaved (1: one image per ciphertext, images on the batch axis)."""
        return self.plan.images_per_ciphertext

    @property
    def rotations(self) -> tuple[int, ...]:
        """Rotation steps for ``ctx.keygen(rotations=...)``; when ``plan.bootstraps``, also pass the bootstrap
        (``bootstrap=hemx.circuits.bootstrap.bootstrapper_for(ctx)`` or its parameters), as :meth:`keygen` does."""
        return self.plan.rotations

    @property
    def needs_bootstrap(self) -> bool:
        return self.plan.bootstraps > 0

    def keygen(self, ctx: Context):
        """``ctx.keygen`` with every key :meth:`run` needs; each rotation key serves only the levels the plan uses
        it at (:attr:`Plan.rotation_levels`), the bootstrap's keys every level."""
        boot = BootstrapParameters.create(ctx.params, slots=ctx.slots) if self.needs_bootstrap else None
        return ctx.keygen(rotations=list(self.rotations), bootstrap=boot,
                          rotation_level=dict(self.plan.rotation_levels))

    @property
    def input_bound(self) -> float | None:
        """The bound the network was compiled for on its input: the calibration batch's ``max |x|`` times the
        margin (:func:`~hemx.nn.compile`'s ``margin``, 1.2 by default); None when compiled without calibration
        data (linear and polynomial networks). :meth:`encrypt_input` refuses inputs beyond it."""
        bound = self.bounds.get("input")
        return None if bound is None else float(bound)

    def encrypt_input(self, backend, keys, x, *, on_bound: str = "raise"):
        """Pack ``x`` (:attr:`input_shape` or ``(n, *input_shape)``, in :attr:`data_layout`: ``(n, H, W, C)`` for a
        model from JAX or Keras) and encrypt it at the plan's input level.

        ``backend``: a Context (``keys``: its KeySet or public key) or a SlotSimulator (``keys`` ignored). Returns
        one value with a leading axis of ``num_cts`` ciphertexts (then the batch axis, if any). With
        ``images_per_ciphertext = B > 1`` the batch axis has ``ceil(n / B)`` entries of ``B`` interleaved images
        each (the last padded with zero images); one image (no batch axis) fills image 0 of one ciphertext.

        ``x``'s ``max |x|`` is checked against :attr:`input_bound` first (:func:`check_input_bound`): beyond it
        the ReLU approximations and bootstraps, fitted to the calibrated ranges, would return wrong values with
        no error, so it raises :class:`~hemx.errors.BoundError`; ``on_bound="warn"`` warns
        (:class:`~hemx.errors.BoundWarning`) and encrypts anyway.
        """
        check_input_bound(x, self.input_bound, on_bound=on_bound)
        values = self.pack_input(x)
        if isinstance(backend, SlotSimulator):
            return backend.encrypt(values, level=self.plan.input_level, scale=self.scale)
        if isinstance(backend, CKKSEvaluator):
            backend, keys = backend.ctx, keys if keys is not None else backend.keys
        if not isinstance(backend, Context):
            raise ParameterError(f"encrypt_input needs a hemx.Context or a SlotSimulator, got {type(backend).__name__}")
        pt = backend.encode(values, level=self.plan.input_level, scale=self.scale)
        return backend.encrypt(pt, keys)

    def pack_input(self, x) -> np.ndarray:
        """``x`` (:attr:`input_shape` or ``(n, *input_shape)``, in :attr:`data_layout`) -> the slot values
        :meth:`encrypt_input` encrypts: ``(num_cts, [n,] slots)``, or ``(num_cts, [ceil(n / B),] slots)`` with
        ``B > 1`` images per ciphertext. A shape that does not fit raises :class:`~hemx.errors.ShapeError` naming the
        layout expected and, where moving the channel axis would make it fit, the transpose that does."""
        x, single = to_channel_first(x, self.input_layout.shape, self.data_layout, what="the network's input")
        values = self.input_layout.pack(x[0] if single else x)
        images = self.images_per_ciphertext
        return values if images == 1 else packing.interleave(values, images)

    def decode_output(self, values) -> np.ndarray:
        """Decrypted slot values ``(num_cts, [m,] slots)`` of :meth:`run`'s result -> the output ``(m, ...)``
        (``shape`` without the batch axis). With ``B > 1`` images per ciphertext: ``(m B, ...)``, every image slot of
        the ciphertexts (padding images included: keep the first ``n``), ``(B, ...)`` without the batch axis."""
        images = self.images_per_ciphertext
        if images == 1:
            return self.output_layout.unpack(values)
        v = np.asarray(values)
        if np.iscomplexobj(v):
            v = v.real
        if v.ndim not in (2, 3) or v.shape[-1] != self.plan.slots:
            raise ShapeError(f"slot values must be (num_cts, [m,] slots={self.plan.slots}), got {np.shape(values)}")
        return self.output_layout.unpack(packing.deinterleave(v, images))

    def decrypt_output(self, backend, keys, out) -> np.ndarray:
        """Decrypt (Context + secret keys, or a SlotSimulator) and decode :meth:`run`'s result."""
        if isinstance(backend, SlotSimulator):
            return self.decode_output(backend.decrypt(out))
        if isinstance(backend, CKKSEvaluator):
            backend = backend.ctx
        return self.decode_output(backend.decrypt(out, keys))

    def program_steps(self) -> tuple:
        """The steps whose plaintext data :meth:`diagonals` holds: the linear layers and the global average pools."""
        return tuple(s for s in self.plan.steps if s.op.has_data)

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

    def _check_fits(self, step, data: dict) -> None:
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
            scale = self.scale if name == "bias" else params.rescale_divisor(level)
            if math.log2(peak) + math.log2(scale) >= log_q - 1:
                raise OverflowBoundError(f"step {step.output!r}: its {name} values reach {peak:.4g}, which at scale "
                                         f"2^{math.log2(scale):.1f} do not fit the modulus at level {level}")

    def run(self, backend, keys, encrypted_input, *, progress=None, release_diagonals: bool | None = None,
            diagonals: dict | None = None, plaintexts: dict | None = None):
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

        ``plaintexts``: a dict (empty at first) this run fills with every plaintext it encodes (the linear layers'
        diagonals and biases, the pooling masks: ``{step name: {key: (level, scale, plaintext)}}``) and later runs
        on the same context reuse instead of encoding again: a server that evaluates the network many times keeps
        one per context. Memory: ``plaintext_mults`` plaintexts at their levels (the digits CNN at N = 2^14: 333,
        about 0.2 GiB; ResNet-20 at ``boot_16``: far too many, leave it None there). Eager runs only (not inside a
        ``jax.jit`` trace), without ``diagonals``. The same result, bit for bit, as without it.
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
        if self.images_per_ciphertext > 1:
            ev = InterleavedEvaluator(ev, self.images_per_ciphertext)
        if diagonals is not None:
            self._check_diagonals(diagonals)
            release_diagonals = False  # nothing built
        if plaintexts is not None:
            if not isinstance(plaintexts, dict) or diagonals is not None:
                raise ParameterError("plaintexts must be a dict (empty at first, then the one a run filled) and "
                                     "cannot be combined with diagonals")
            if isinstance(getattr(encrypted_input, "data", None), jax.core.Tracer):
                raise ParameterError("plaintexts keeps encoded plaintexts between eager runs: leave it None inside "
                                     "a jax.jit trace (pass diagonals there)")
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
        # a value read by several linear maps has each baby rotation made once (the plan counts them so:
        # hemx.nn.passes.plan.share_rotations); kept while the value lives
        map_readers = collections.Counter(step.inputs[0] for step in self.plan.steps if _maps_rotations(step))
        rotated: dict[str, dict] = {}
        for i, step in enumerate(self.plan.steps):
            data = None if diagonals is None else diagonals.get(step.output)
            if plaintexts is not None and step.op.has_data:
                data = {"plaintexts": plaintexts.setdefault(step.output, {})}
            step_ev = ev
            if _maps_rotations(step) and map_readers[step.inputs[0]] > 1:
                v = step.inputs[0]
                step_ev = SharedRotations(ev, values[v], rotated.setdefault(v, {}))
            values[step.output] = step.op.apply(step_ev, step, [values[v] for v in step.inputs], data)
            if release_diagonals:
                step.op.release()
            for v in set(step.inputs):  # free what no later step reads
                if last_use[v] == i and v != self._output_value:
                    del values[v]
                    rotated.pop(v, None)
            if progress is not None:
                _settle(values[step.output])  # the step's own seconds, not the next one's
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


def _maps_rotations(step) -> bool:
    """Whether the step is a linear map that rotates its input (hemx.nn.steps.Linear, read by duck type: that
    module imports this one)."""
    babies = getattr(step.op, "baby_rotations", None)
    return babies is not None and bool(babies())


class SharedRotations:
    """An evaluator whose :meth:`rotate_stack` of one of a value's ciphertexts (``cts``, the value's list) makes only
    the rotations not made before and keeps every one in ``made`` (``{(ciphertext index, step): ciphertext}``), so
    the linear maps that read one value share its baby rotations. A rotation is the same bit for bit whichever
    hoisted group made it (one decomposition of the input, then per step its key product), so a run gives the
    same result as without sharing. Everything else is ``inner``'s."""

    def __init__(self, inner, cts: list, made: dict):
        self.inner, self.cts, self.made = inner, cts, made

    def __getattr__(self, name: str):
        if name == "inner":  # (not yet set)
            raise AttributeError(name)
        return getattr(self.inner, name)

    def rotate_stack(self, x, steps):
        j = next((k for k, c in enumerate(self.cts) if c is x), None)
        if j is None:  # not one of the value's own ciphertexts (e.g. a copy at a lower level): nothing to share
            return self.inner.rotate_stack(x, steps)
        steps = [int(s) for s in steps]
        missing = [s for s in dict.fromkeys(steps) if (j, s) not in self.made]
        if missing:
            self.made.update(zip(((j, s) for s in missing), self.inner.rotate_many(x, missing)))
        return self.inner.stack([self.made[(j, s)] for s in steps])


class InterleavedEvaluator:
    """An evaluator whose values hold ``images`` interleaved images (:mod:`hemx.nn.packing`), seen as one image on
    ``slots / images`` slots: a rotation by ``r`` is one by ``r * images`` of ``inner``, and every plaintext or slot
    vector ``(..., slots / images)`` is repeated ``images`` times (:func:`~hemx.nn.packing.repeat_slots`) before
    ``inner`` encodes it. Everything else is ``inner``'s (levels, scales, products, stacking), unchanged.

    Args:
        inner: the evaluator of the ciphertexts (a :class:`~hemx.circuits.CKKSEvaluator` or a SlotSimulator).
        images: ``B``, a power of two dividing ``inner.slots``.
    """

    def __init__(self, inner, images: int):
        self.inner = inner
        self.images = packing.check_images(images, inner.slots)
        self.slots = inner.slots // self.images
        self.max_level = inner.max_level
        self.default_scale = inner.default_scale

    def __getattr__(self, name: str):
        if name == "inner":  # (not yet set)
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _spread(self, b):
        """A slot vector of one image -> the interleaved one; numbers and backend values as they are."""
        if isinstance(b, (np.ndarray, jax.Array, list, tuple)) and np.ndim(b) > 0:
            return packing.repeat_slots(b, self.images)
        return b

    def rotate(self, x, steps):
        return self.inner.rotate(x, int(steps) * self.images)

    def rotate_many(self, x, steps):
        return self.inner.rotate_many(x, [int(s) * self.images for s in steps])

    def rotate_stack(self, x, steps):
        return self.inner.rotate_stack(x, [int(s) * self.images for s in steps])

    def encode(self, values, *, level, scale, rows=None, pos=None):
        return self.inner.encode(packing.repeat_slots(values, self.images), level=level, scale=scale, rows=rows,
                                 pos=pos)

    def add(self, a, b):
        return self.inner.add(a, self._spread(b))

    def sub(self, a, b):
        return self.inner.sub(a, self._spread(b))


def check_input_bound(x, bound: float | None, *, on_bound: str = "raise") -> float:
    """``max |x|`` of a network input (any shape), checked against ``bound``, the bound the network was compiled
    for (:attr:`CompiledNetwork.input_bound`; None: nothing to check). Returns ``max |x|``.

    Every bound of a compiled network follows from the calibrated input range: a ReLU evaluates
    ``x (1 + p(x / B)) / 2`` with ``p`` fitted on ``[-1, 1]``, and a bootstrap's input must stay below its bound,
    so an input beyond ``bound`` decrypts to wrong values with no error. It raises
    :class:`~hemx.errors.BoundError` (``on_bound="raise"``, the default) or warns with
    :class:`~hemx.errors.BoundWarning` (``on_bound="warn"``); values that are not finite are always refused."""
    if on_bound not in ("raise", "warn"):
        raise ParameterError(f"on_bound must be 'raise' or 'warn', got {on_bound!r}")
    v = np.asarray(x)
    if v.dtype == object or not (np.issubdtype(v.dtype, np.number) or v.dtype == np.bool_):
        raise ParameterError(f"a network input must be an array of numbers, got dtype {v.dtype}")
    peak = float(np.max(np.abs(v))) if v.size else 0.0
    if not math.isfinite(peak):
        raise BoundError("the input holds values that are not finite (inf or nan); encrypt finite values only")
    if bound is None or peak <= bound:
        return peak
    msg = (f"the input's max |x| = {peak:.6g} exceeds the bound {bound:.6g} the network was compiled for (its "
           f"calibration data's max |x| times the margin) by a factor {peak / bound:.4g}: the ReLU approximations and "
           "bootstraps hold only within the calibrated ranges, so the outputs would be wrong without an error. "
           "Normalise the input as the calibration data was, or recompile with calibration data that covers such "
           "inputs (or a larger margin=); on_bound='warn' encrypts it anyway")
    if on_bound == "warn":
        warnings.warn(msg, BoundWarning, stacklevel=external_stacklevel())
        return peak
    raise BoundError(msg)


def _unbounded(x):
    return x.replace(bound=None) if getattr(x, "bound", None) is not None else x


def _leading(x) -> int | None:
    shape = x.values.shape[:-1] if isinstance(x, SimCiphertext) else getattr(x, "batch_shape", ())
    return shape[0] if shape else None


def stack_values(ev, xs):
    """A value's ciphertexts as one batch (its first axis)."""
    return xs[0] if len(xs) == 1 else ev.stack(xs)


def unstack_values(ev, x, n: int) -> list:
    """One batch of ``n`` ciphertexts (its first axis) -> the list of them."""
    return [x] if n == 1 else [ev.take(x, j) for j in range(n)]



def _settle(value) -> None:
    """Wait for ``value``'s arrays (not inside a trace). JAX dispatches asynchronously: a compiled bootstrap returns
    before it has run, and without this its time would be counted to the step that next reads it."""
    jax.block_until_ready([x for x in jax.tree_util.tree_leaves(value)
                           if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)])


def bootstrap_values(ev, xs: list, *, level: int, factor: float = 1.0) -> list:
    """A value's ciphertexts refreshed to ``level`` (the plan's bootstrap level): ``x / factor`` first (one level)
    when ``factor`` is not 1, then the bootstrap, then the exact integer product by ``factor``. On a
    SlotSimulator the refresh only resets the level. Bootstrapping is slot-wise: interleaved images are refreshed
    on ``inner``, all at once."""
    if isinstance(ev, InterleavedEvaluator):
        ev = ev.inner
    if isinstance(ev, CKKSEvaluator) and len(xs) > 1:
        # one ciphertext at a time: a batch of two doubles the bootstrap's working set (about 2 GiB at boot_16)
        # and was not faster on the 2-core CPU (ResNet-20's stage 3: 43.8 s for two, 8-21 s for one)
        return [y for x in xs for y in bootstrap_values(ev, [x], level=level, factor=factor)]
    x = stack_values(ev, xs)
    f, target = factor, level
    if f != 1.0:
        x = ev.rescale(ev.mul_const(x, 1.0 / f, plain_scale=ev.rescale_divisor(ev.level(x))))
    if isinstance(ev, SlotSimulator):
        y = SimCiphertext(x.values, target, x.scale)
    elif isinstance(ev, CKKSEvaluator):
        # the input is within boot_bound (<= the bootstrap's supported bound) by the plan's calibrated range
        # analysis; it runs without a propagated bound like every value of the network (CompiledNetwork.run)
        y = _unbounded(bootstrapper_for(ev.ctx).bootstrap(_unbounded(x), ev.keys))
        if ev.level(y) != target:
            raise LevelError(f"internal: the bootstrap returned level {ev.level(y)}, the plan assumed {target}")
    else:
        raise ParameterError(f"bootstrapping needs a CKKSEvaluator or a SlotSimulator, got {type(ev).__name__}")
    if f != 1.0:
        y = ev.mul_const(y, f, plain_scale=1.0)
    return unstack_values(ev, y, len(xs))


__all__ = ["CompiledNetwork", "InterleavedEvaluator", "bootstrap_values", "check_input_bound", "stack_values",
           "unstack_values"]
