"""Server-side encrypted inference of the CNN, and the same circuit simulated on cleartext slots."""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.apps._cnn_circuit import Progress, encode_tables, run_circuit
from hemx.apps._cnn_layout import CircuitTables, CNNSpec, check_spec, circuit_tables
from hemx.apps._cnn_model import CNNModel
from hemx.apps._cnn_params import check_capacity
from hemx.circuits import CKKSEvaluator, SlotSimulator
from hemx.ckks import Ciphertext, Context, EvaluationKeys
from hemx.errors import LevelError, ParameterError, ShapeError, SlotError


def simulate_packed(model: CNNModel, spec: CNNSpec, slot_values) -> np.ndarray:
    """Run the packed circuit on cleartext slot values ``(num_ciphertexts, slots)`` with numpy.

    The circuit runs on :class:`hemx.circuits.SlotSimulator` in its exact mode (no parameters: rotations become
    ``np.roll``, levels are counted from ``spec.depth`` down to 0, scales stay 1); the output
    ``(num_ciphertexts, slots)`` is what decryption would give without CKKS noise. Checks the layout, rotation
    plan and level plan against :func:`plaintext_forward` without encryption.
    """
    check_spec(spec, model)
    x = np.asarray(slot_values, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != spec.slots:
        raise ShapeError(f"slot values must have shape (num_ciphertexts, {spec.slots}), got {x.shape}")
    sim = SlotSimulator(None, slots=spec.slots, max_level=spec.depth)
    tables = encode_tables(sim, circuit_tables(model, spec), spec, spec.depth)
    return sim.decrypt(run_circuit(sim, sim.encrypt(x), tables, spec))


@dataclasses.dataclass(frozen=True)
class EncodedModel:
    """The model's weight products encoded for one context (a server computes this once per model)."""

    tables: CircuitTables
    spec: CNNSpec
    context_id: int


def encode_model(ctx: Context, model: CNNModel, spec: CNNSpec) -> EncodedModel:
    """Encode every weight vector of ``model`` as plaintexts of ``ctx`` at the levels the circuit uses."""
    _check_context(ctx, spec)
    check_spec(spec, model)
    check_capacity(ctx.params, model, spec.depth)
    tables = encode_tables(CKKSEvaluator(ctx), circuit_tables(model, spec), spec, spec.depth)
    return EncodedModel(tables, spec, ctx.id)


def _check_context(ctx: Context, spec: CNNSpec) -> None:
    if not isinstance(ctx, Context):
        raise ParameterError(f"expected a hemx.Context, got {type(ctx).__name__}")
    if not isinstance(spec, CNNSpec):
        raise ParameterError(f"expected a CNNSpec (from plan), got {type(spec).__name__}")
    if ctx.slots != spec.slots:
        raise SlotError(f"the spec was planned for {spec.slots} slots but the context has {ctx.slots}; "
                        "call plan(model, ctx.slots)")
    if ctx.params.max_level < spec.depth:
        raise LevelError(f"the CNN needs {spec.depth} levels, the parameters have {ctx.params.max_level}; "
                         "use recommended_parameters()")


def infer_encrypted(
    ctx: Context,
    eval_keys: EvaluationKeys,
    cts: Ciphertext,
    model: CNNModel,
    spec: CNNSpec,
    *,
    encoded: EncodedModel | None = None,
    progress: Progress | None = None,
) -> Ciphertext:
    """Server side: encrypted logits for encrypted packed images.

    Args:
        ctx: the context the ciphertexts belong to.
        eval_keys: secret-free evaluation keys with the relinearization key and ``spec.rotations``.
        cts: ``pack_images`` output encrypted; batch shape ``(num_ciphertexts,)`` (or ``()`` for one), at a
            level >= ``spec.depth`` (higher levels are dropped first).
        model, spec: the plaintext model and its layout plan.
        encoded: :func:`encode_model` output to reuse (encoded here when omitted).
        progress: called as ``progress(layer, done, total)`` after each of the five layers.

    Returns:
        Ciphertexts with the same batch shape, at level 0; logit ``k`` of image ``b`` in slot ``k * B + b``
        (read them with :func:`unpack_logits` after decryption).
    """
    _check_context(ctx, spec)
    check_spec(spec, model)
    if not isinstance(eval_keys, EvaluationKeys):
        raise ParameterError(f"expected hemx EvaluationKeys (keys.evaluation_keys()), got {type(eval_keys).__name__}")
    if not isinstance(cts, Ciphertext):
        raise ParameterError(f"cts must be a hemx Ciphertext, got {type(cts).__name__}")
    if cts.slots != spec.slots:
        raise SlotError(f"the ciphertexts have {cts.slots} slots, the spec {spec.slots}")
    if len(cts.batch_shape) > 1:
        raise ShapeError(f"cts must have batch shape (num_ciphertexts,) or (), got {cts.batch_shape}")
    if cts.level < spec.depth:
        raise LevelError(f"the ciphertexts are at level {cts.level}; the CNN needs {spec.depth} levels "
                         "(encrypt fresh ciphertexts with recommended_parameters())")
    if encoded is None:
        encoded = encode_model(ctx, model, spec)
    elif not isinstance(encoded, EncodedModel) or encoded.context_id != ctx.id or encoded.spec != spec:
        raise ParameterError("encoded must come from encode_model(ctx, model, spec) with this context and spec")
    single = cts.batch_shape == ()
    x = ctx.drop_level(cts, spec.depth)
    if single:
        x = x.replace(data=x.data[None])
    out = run_circuit(CKKSEvaluator(ctx, eval_keys), x, encoded.tables, spec, progress)
    return out.replace(data=out.data[0]) if single else out
