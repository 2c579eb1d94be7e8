"""The whole encrypted-CNN flow (client keys and encryption, server inference, client decryption) with timings."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import jax
import numpy as np

from hemx.apps._cnn_circuit import Progress
from hemx.apps._cnn_infer import encode_model, infer_encrypted
from hemx.apps._cnn_layout import CircuitTables, pack_images, plan, unpack_logits
from hemx.apps._cnn_model import CNNModel, digits_split, load_model, plaintext_forward
from hemx.apps._cnn_params import recommended_parameters
from hemx.ckks import CKKSParameters, Context, Plaintext, Sampler
from hemx.errors import ParameterError

# None: the context's own default, the fastest exact NTT the machine has (hemx.kernels.ntt.default_method: the native
# C++ NTT on CPU where built). Until issue 27 this was "mat3" "because it compiles faster"; with the native NTT the
# CNN demo's steady batch is several times faster and compiles no slower (docs/results/workloads-cpu.md).
DEFAULT_NTT: str | None = None
StageProgress = Callable[[str, int, int], None]
STAGES = ("model", "keygen", "encrypt", "encode", "infer", "decrypt")


@dataclasses.dataclass(frozen=True)
class CNNReport:
    """Outcome of :func:`run_demo` (times in seconds, measured with wall clocks around blocking calls).

    Attributes:
        num_images, num_ciphertexts, images_per_ciphertext: the workload.
        params: description of the CKKS parameters; rotation_keys: number of Galois keys generated.
        key_switches_per_ciphertext: rotations + relinearizations of the circuit per ciphertext.
        keygen_s: client-side context set-up (ring tables) and key generation.
        encrypt_s, decrypt_s: client-side encryption and decryption (packing / unpacking included).
        encode_s: server-side encoding of the model's weights as plaintexts (once per model and context).
        infer_s: server-side inference of all batches (JAX compilation included: the first batch compiles).
        infer_batches_s: per batch of ``ciphertexts_per_batch`` ciphertexts.
        plain_accuracy, encrypted_accuracy: against the true labels.
        agreement: fraction of images whose encrypted argmax equals the plaintext model's.
        max_abs_logit_error: largest |encrypted - plaintext| logit.
        logits, plain_logits: ``(num_images, 10)``.
    """

    num_images: int
    num_ciphertexts: int
    images_per_ciphertext: int
    params: str
    rotation_keys: int
    key_switches_per_ciphertext: int
    keygen_s: float
    encrypt_s: float
    encode_s: float
    infer_s: float
    infer_batches_s: tuple[float, ...]
    decrypt_s: float
    plain_accuracy: float
    encrypted_accuracy: float
    agreement: float
    max_abs_logit_error: float
    logits: np.ndarray
    plain_logits: np.ndarray

    @property
    def infer_per_image_s(self) -> float:
        return self.infer_s / self.num_images

    @property
    def total_s(self) -> float:
        return self.keygen_s + self.encrypt_s + self.encode_s + self.infer_s + self.decrypt_s


def run_demo(
    num_images: int | None = None,
    *,
    params: CKKSParameters | None = None,
    model: CNNModel | None = None,
    ntt: str | None = DEFAULT_NTT,
    ciphertexts_per_batch: int | None = None,
    progress: StageProgress | None = None,
    layer_progress: Progress | None = None,
    sampler: Sampler | None = None,
) -> CNNReport:
    """Encrypted inference of the digits test split (or its first ``num_images``), client and server in turn.

    Args:
        num_images: how many test images (default: all 360).
        params: CKKS parameters (default :func:`recommended_parameters`); need >= 5 levels.
        model: default :func:`load_model`.
        ntt: the context's NTT method.
        ciphertexts_per_batch: ciphertexts per inference call (default: all in one call); the last batch is
            padded with empty images so that every call has the same shape (one compilation).
        progress: ``progress(stage, done, total)`` for the stages in :data:`STAGES` (``infer`` counts batches).
        layer_progress: passed to :func:`infer_encrypted` for every batch.
        sampler: randomness; default the OS CSPRNG (``Sampler.insecure_for_tests`` only in tests).
    """
    def tick(stage, done, total):
        if progress is not None:
            progress(stage, done, total)

    if ciphertexts_per_batch is not None and (
            not isinstance(ciphertexts_per_batch, (int, np.integer)) or ciphertexts_per_batch < 1):
        raise ParameterError(f"ciphertexts_per_batch must be a positive integer, got {ciphertexts_per_batch!r}")
    model = load_model() if model is None else model
    _, images, _, labels = digits_split()
    if num_images is not None:
        if not isinstance(num_images, (int, np.integer)) or not 1 <= num_images <= len(images):
            raise ParameterError(f"num_images must be in [1, {len(images)}], got {num_images!r}")
        images, labels = images[:num_images], labels[:num_images]
    plain_logits = plaintext_forward(model, images)
    tick("model", 1, 1)

    # client: context (ring tables) and keys
    start = time.perf_counter()
    params = recommended_parameters() if params is None else params
    ctx = Context(params, ntt=ntt, sampler=sampler)
    spec = plan(model, ctx.slots)
    keys = ctx.keygen(rotations=spec.rotations)
    _block(keys.relin.data)
    keygen_s = time.perf_counter() - start
    tick("keygen", 1, 1)

    # client: pack and encrypt, in batches of equal shape (the last one padded with empty images)
    start = time.perf_counter()
    slots = pack_images(images, spec)
    per_batch = slots.shape[0] if ciphertexts_per_batch is None else int(ciphertexts_per_batch)
    batches = -(-slots.shape[0] // per_batch)
    slots = np.concatenate([slots, np.zeros((batches * per_batch - slots.shape[0], spec.slots))])
    cts = [ctx.encrypt(slots[i * per_batch : (i + 1) * per_batch], keys.public) for i in range(batches)]
    _block(cts[-1].data)
    encrypt_s = time.perf_counter() - start
    tick("encrypt", 1, 1)

    # server: only the context, the evaluation keys and the model
    server_keys = keys.evaluation_keys()
    start = time.perf_counter()
    encoded = encode_model(ctx, model, spec)
    _block([pt.data for pt in _plaintexts(encoded.tables)])
    encode_s = time.perf_counter() - start
    tick("encode", 1, 1)
    outs, batch_times = [], []
    start = time.perf_counter()
    tick("infer", 0, batches)
    for i, ct in enumerate(cts):
        t0 = time.perf_counter()
        out = infer_encrypted(ctx, server_keys, ct, model, spec, encoded=encoded, progress=layer_progress)
        _block(out.data)
        outs.append(out)
        batch_times.append(time.perf_counter() - t0)
        tick("infer", i + 1, batches)
    infer_s = time.perf_counter() - start

    # client: decrypt and unpack
    start = time.perf_counter()
    values = np.concatenate([ctx.decrypt(out, keys.secret) for out in outs])
    logits = unpack_logits(values, spec, len(images))
    decrypt_s = time.perf_counter() - start
    tick("decrypt", 1, 1)

    enc_pred, plain_pred = np.argmax(logits, axis=1), np.argmax(plain_logits, axis=1)
    return CNNReport(
        num_images=len(images),
        num_ciphertexts=spec.num_ciphertexts(len(images)),
        images_per_ciphertext=spec.images_per_ciphertext,
        params=params.describe(),
        rotation_keys=len(keys.galois),
        key_switches_per_ciphertext=spec.key_switches(),
        keygen_s=keygen_s,
        encrypt_s=encrypt_s,
        encode_s=encode_s,
        infer_s=infer_s,
        infer_batches_s=tuple(batch_times),
        decrypt_s=decrypt_s,
        plain_accuracy=float(np.mean(plain_pred == labels)),
        encrypted_accuracy=float(np.mean(enc_pred == labels)),
        agreement=float(np.mean(enc_pred == plain_pred)),
        max_abs_logit_error=float(np.max(np.abs(logits - plain_logits))),
        logits=logits,
        plain_logits=plain_logits,
    )


def _plaintexts(tables: CircuitTables) -> list:
    """Every encoded plaintext of the tables (nested lists; unused diagonals are None)."""
    out, todo = [], [getattr(tables, f.name) for f in dataclasses.fields(tables)]
    while todo:
        item = todo.pop()
        if isinstance(item, list):
            todo.extend(item)
        elif isinstance(item, Plaintext):
            out.append(item)
    return out


def _block(array) -> None:
    jax.block_until_ready(array)
