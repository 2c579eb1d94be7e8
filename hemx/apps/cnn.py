"""Encrypted CNN inference on scikit-learn's 8x8 digits (bundled with scikit-learn; nothing is downloaded).

A small CNN (3x3 convolution, square activation, 2x2 average pooling, two fully connected layers with a
square in between) is trained in plaintext with JAX; its weights ship with hemx. A client packs many images
into each ciphertext (``B = slots / 64`` images; slot ``p * B + b`` holds pixel ``p`` of image ``b``), a server
that holds only the context and the secret-free evaluation keys runs the circuit with rotations and
plaintext products, and the client decrypts the logits. Multiplicative depth 5 (five rescales).

Typical use::

    model = load_model()
    ctx = hemx.Context(recommended_parameters(), ntt=DEFAULT_NTT)   # N = 2^14, 5 levels, 128-bit
    spec = plan(model, ctx.slots)
    keys = ctx.keygen(rotations=spec.rotations)                      # client
    cts = ctx.encrypt(pack_images(images, spec), keys.public)
    out = infer_encrypted(ctx, keys.evaluation_keys(), cts, model, spec)   # server
    logits = unpack_logits(ctx.decrypt(out, keys.secret), spec, len(images))

The whole flow with timings is :func:`run_demo`.
"""

from hemx.apps._cnn_circuit import Progress
from hemx.apps._cnn_demo import DEFAULT_NTT, STAGES, CNNReport, run_demo
from hemx.apps._cnn_infer import EncodedModel, encode_model, infer_encrypted, simulate_packed
from hemx.apps._cnn_layout import (
    CONV_OFFSETS,
    DEPTH,
    LAYERS,
    POSITIONS,
    CircuitTables,
    CNNSpec,
    MatVecPlan,
    circuit_tables,
    pack_images,
    plan,
    unpack_logits,
)
from hemx.apps._cnn_model import (
    OUTPUT_BOUND,
    CNNModel,
    digits_split,
    load_model,
    plaintext_forward,
    predict,
    save_model,
    train_model,
    value_bounds,
)
from hemx.apps._cnn_params import check_capacity, match_scale, recommended_parameters

__all__ = [
    # model (plaintext)
    "CNNModel", "train_model", "load_model", "save_model", "digits_split", "plaintext_forward", "predict",
    "value_bounds", "OUTPUT_BOUND",
    # layout and parameters (client and server agree on these)
    "CNNSpec", "MatVecPlan", "plan", "pack_images", "unpack_logits", "circuit_tables", "simulate_packed",
    "recommended_parameters", "match_scale", "check_capacity", "DEPTH", "LAYERS", "POSITIONS", "CONV_OFFSETS",
    "CircuitTables",
    # server
    "EncodedModel", "encode_model", "infer_encrypted", "Progress",
    # the whole flow
    "run_demo", "CNNReport", "STAGES", "DEFAULT_NTT",
]
