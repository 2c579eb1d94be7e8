"""``hemx demo``: the encrypted workloads end to end through the client/server split.

The client (data owner) makes the keys, encrypts and decrypts; the server gets only the serialized context and
evaluation keys (no secret key, no API to get one), receives serialized ciphertexts, computes, and sends
serialized ciphertexts back. Every hand-over goes through :mod:`hemx.io` bytes, as it would over a network.

* ``cnn`` (default): encrypted inference of the digits CNN (:mod:`hemx.apps.cnn`) on the whole test split,
  128 images per ciphertext, compared image by image with the plaintext model;
* ``logreg``: HELR-style logistic regression (:mod:`hemx.apps.logreg`) trained on the encrypted
  breast-cancer training split, then encrypted scoring of the test split, compared with the same algorithm in
  plaintext. More iterations than a 128-bit chain holds (or ``bootstrap=True``) switch to the bootstrapping
  mode: the server bootstraps the weights and the Nesterov vector when their levels run out
  (:func:`run_logreg_bootstrapped`).

Both return a summary dict (accuracies, latencies, sizes, device); :func:`main` renders it with rich, or prints
it as one JSON object.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable

import jax
import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from hemx import io
from hemx.bench.timing import machine_label
from hemx.ckks import CKKSParameters, Context, Sampler
from hemx.circuits.bootstrap import BootstrapParameters
from hemx.errors import ParameterError
from hemx.service import Client, Server

WORKLOADS = ("cnn", "logreg", "helr")
# None: the context's own default, the fastest exact NTT the machine has (hemx.kernels.ntt.default_method: the native
# C++ NTT on CPU where built). Until issue 27 this was "mat3" "because it compiles faster"; with the native NTT the
# CNN demo's steady batch is several times faster and compiles no slower (docs/results/workloads-cpu.md).
DEFAULT_NTT: str | None = None


class StageBars:
    """One rich progress bar per stage; ``update(stage, done, total)`` is the apps' progress callback."""

    def __init__(self, progress: Progress | None):
        self._progress, self._tasks = progress, {}

    def update(self, stage: str, done: int, total: int) -> None:
        if self._progress is None:
            return
        if stage not in self._tasks:
            self._tasks[stage] = self._progress.add_task(stage, total=max(total, 1))
        self._progress.update(self._tasks[stage], completed=done, total=max(total, 1))


@contextmanager
def stage_bars(console: Console | None, enabled: bool = True):
    if not enabled or console is None:
        yield StageBars(None)
        return
    columns = (TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        yield StageBars(progress)


class _Clock:
    """Wall-clock seconds per named step (the steps block on their results before the clock stops)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str):
        start = time.perf_counter()
        yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


def _device() -> dict:
    dev = jax.devices()[0]
    return {"backend": jax.default_backend(), "device": str(getattr(dev, "device_kind", dev)),
            "machine": machine_label()}


# -------------------------------------------------------------------------------------------------------- CNN


def run_cnn(
    *,
    num_images: int | None = None,
    params: CKKSParameters | None = None,
    ntt: str | None = DEFAULT_NTT,
    ciphertexts_per_batch: int = 1,
    sampler: Sampler | None = None,
    update: Callable[[str, int, int], None] = lambda *a: None,
    warm_up: bool = True,
) -> dict:
    """Encrypted CNN inference on the digits test split through Client -> bytes -> Server -> bytes -> Client.

    The CNN is the :mod:`hemx.nn` graph of the shipped weights (:func:`hemx.apps.cnn.compile_network`), compiled
    with ``slots / 64`` images interleaved in every ciphertext; client and server compile it alike from the model
    and the parameters. The server keeps the plaintexts it encoded (``CompiledNetwork.run``'s ``plaintexts``).

    Args:
        num_images: the first ``num_images`` test images (default: all 360).
        params: CKKS parameters (default :func:`hemx.apps.cnn.recommended_parameters`, 128-bit).
        ntt: NTT method of both contexts.
        ciphertexts_per_batch: ciphertexts per server call; the first call compiles the kernels, so with the
            default of one ciphertext per call the later calls show the steady-state latency.
        sampler: randomness (default the OS CSPRNG; a seeded sampler only in tests).
        update: ``update(stage, done, total)`` progress callback.
        warm_up: the server runs the network once on a request-shaped encryption of zeros (made with the public
            key it holds) before the first request, as a service does when it starts: tracing and compiling
            (or loading the compiled programs from JAX's persistent cache) and encoding the layers' plaintexts
            happen there, timed as "server warm-up", and the first request takes as long as the later ones.
            False: the first request pays for them.
    """
    from hemx.apps import cnn
    from hemx.nn.run import check_input_bound

    if not isinstance(ciphertexts_per_batch, int) or ciphertexts_per_batch < 1:
        raise ParameterError(f"ciphertexts_per_batch must be a positive integer, got {ciphertexts_per_batch!r}")
    clock = _Clock()
    with clock("model"):
        model = cnn.load_model()
        _, images, _, labels = cnn.digits_split()
        if num_images is not None:
            if not isinstance(num_images, int) or not 1 <= num_images <= len(images):
                raise ParameterError(f"num_images must be in [1, {len(images)}], got {num_images!r}")
            images, labels = images[:num_images], labels[:num_images]
        plain_logits = cnn.plaintext_forward(model, images)
        params = cnn.recommended_parameters() if params is None else params
        net = cnn.compile_network(model, params)
        per_ct = net.images_per_ciphertext
    update("model", 1, 1)

    # client: keys; only the context and the evaluation keys leave it
    with clock("client keygen"):
        client = Client(params, rotations=net.rotations, ntt=ntt, sampler=sampler)
        context_bytes, eval_key_bytes = client.parameters_bytes(), client.evaluation_keys_bytes()
    update("client: keygen", 1, 1)
    with clock("server set-up"):
        server = Server.from_bytes(context_bytes, eval_key_bytes, ntt=ntt)
        server_net = cnn.compile_network(model, server.context.params)
        plaintexts: dict = {}  # the server's encoded layers, filled by the first run and reused
    update("server: set-up", 1, 1)
    request_shape = (net.input_layout.num_cts, ciphertexts_per_batch, net.plan.slots)
    if warm_up:
        with clock("server warm-up"):
            zeros = server.context.encrypt(np.zeros(request_shape), server.keys.public)
            out = server_net.run(server.context, server.keys, zeros, plaintexts=plaintexts)
            server.dump_ciphertext(out)  # the reply path too
        update("server: warm-up", 1, 1)

    # client: pack and encrypt, batches of equal shape (the last padded with empty images: one compilation)
    with clock("client encrypt"):
        check_input_bound(images[:, None], net.input_bound)  # BoundError beyond the calibrated input range
        slots = net.pack_input(images[:, None])  # (input cts, ciphertexts, slots), images interleaved
        batches = -(-slots.shape[1] // ciphertexts_per_batch)
        padded = np.zeros(request_shape[:1] + (batches * ciphertexts_per_batch,) + request_shape[2:])
        padded[:, :slots.shape[1]] = slots
        requests = [client.encrypt(padded[:, i * ciphertexts_per_batch : (i + 1) * ciphertexts_per_batch])
                    for i in range(batches)]
    update("client: encrypt", 1, 1)

    replies, batch_seconds = [], []
    for i, request in enumerate(requests):
        update("server: inference", i, batches)
        start = time.perf_counter()
        ct = server.load_ciphertext(request)
        out = server_net.run(server.context, server.keys, ct, plaintexts=plaintexts)
        replies.append(server.dump_ciphertext(out))  # serializing reads the result: blocks on it
        batch_seconds.append(time.perf_counter() - start)
    clock.seconds["server inference"] = sum(batch_seconds)
    update("server: inference", batches, batches)

    with clock("client decrypt"):
        logits = np.concatenate([net.decode_output(client.decrypt(r)) for r in replies])[:len(images)]
    update("client: decrypt", 1, 1)

    enc_pred, plain_pred = np.argmax(logits, axis=1), np.argmax(plain_logits, axis=1)
    steady = batch_seconds[1:] or batch_seconds
    images_per_batch = ciphertexts_per_batch * per_ct
    return {
        "workload": "cnn",
        "images": len(images),
        "ciphertexts": net.input_layout.num_cts * -(-len(images) // per_ct),
        "images_per_ciphertext": per_ct,
        "parameters": params.describe(),
        "ntt": server.context.plan.method,  # what ran (the default when ntt is None)
        "rotation_keys": len(net.rotations),
        # rotations and relinearizations (one per ciphertext product): every key switch one ciphertext takes
        "key_switches_per_ciphertext": net.plan.key_switches + net.plan.ct_mults,
        "accuracy_plaintext": float(np.mean(plain_pred == labels)),
        "accuracy_encrypted": float(np.mean(enc_pred == labels)),
        "agreement": float(np.mean(enc_pred == plain_pred)),
        "max_abs_logit_error": float(np.max(np.abs(logits - plain_logits))),
        "seconds": clock.seconds,
        "batch_seconds": batch_seconds,
        "first_batch_includes_compilation": not warm_up,
        "latency_per_batch_s": float(np.median(steady)),
        "latency_per_image_ms": float(np.median(steady) / images_per_batch * 1e3),
        "bytes": {"context": len(context_bytes), "evaluation_keys": len(eval_key_bytes),
                  "request_ciphertext": len(requests[0]), "reply_ciphertext": len(replies[0])},
        **_device(),
    }


# ---------------------------------------------------------------------------------------------------- logreg


def needs_bootstrapping(iterations: int | None) -> bool:
    """Whether ``iterations`` logistic-regression steps on the breast-cancer data exceed what a 128-bit chain
    holds without bootstrapping (:meth:`hemx.apps.logreg.LogRegSpec.recommended_parameters`: 12 iterations)."""
    from hemx.apps import logreg

    if iterations is None:
        return False
    spec = logreg.plan(455, 31, iterations=iterations)  # validates iterations
    try:
        spec.recommended_parameters()
    except ParameterError:
        return True
    return False



def run_logreg(
    *,
    iterations: int | None = None,
    data=None,
    params: CKKSParameters | None = None,
    ntt: str | None = DEFAULT_NTT,
    sampler: Sampler | None = None,
    update: Callable[[str, int, int], None] = lambda *a: None,
    bootstrap: bool | None = None,
    secure: bool = False,
) -> dict:
    """HELR training on the encrypted breast-cancer data, then encrypted scoring, through the client/server split.

    Args:
        iterations: gradient steps (default that of :func:`hemx.apps.logreg.plan`).
        data: a :class:`hemx.apps.logreg.Dataset` (default ``load_data()``).
        params, ntt, sampler, update: as for :func:`run_cnn`.
        bootstrap: train with bootstrapping (:func:`run_logreg_bootstrapped`); default (None): only when no
            128-bit chain holds ``iterations`` without it.
        secure: bootstrapping mode only: the 128-bit ``boot_16`` ring instead of the insecure test ring.
    """
    from hemx.apps import logreg

    if bootstrap is None:
        bootstrap = params is None and needs_bootstrapping(iterations)
    if bootstrap:
        return run_logreg_bootstrapped(iterations=iterations, data=data, params=params, ntt=ntt, sampler=sampler,
                                       update=update, secure=secure)
    if secure:
        raise ParameterError("secure=True selects boot_16 for the bootstrapping mode; the depth-bounded mode is "
                             "always 128-bit")
    clock = _Clock()
    with clock("data"):
        data = logreg.load_data() if data is None else data
        options = {} if iterations is None else {"iterations": iterations}
        spec = logreg.plan(len(data.y_train), data.n_features, **options)
        params = spec.recommended_parameters() if params is None else params
    update("data", 1, 1)

    with clock("client keygen"):
        client = Client(params, rotations=spec.rotation_steps, slots=spec.slots, ntt=ntt, sampler=sampler)
        context_bytes, eval_key_bytes = client.parameters_bytes(), client.evaluation_keys_bytes()
    update("client: keygen", 1, 1)
    with clock("server set-up"):
        server = Server.from_bytes(context_bytes, eval_key_bytes, ntt=ntt)
    update("server: set-up", 1, 1)

    with clock("client encrypt"):
        train_request = client.encrypt(logreg.pack_training(data.x_train, data.y_train, spec))
        test_request = client.encrypt(logreg.pack_test(data.x_test, spec))
    update("client: encrypt", 1, 1)

    marks = [time.perf_counter()]

    def on_iteration(stage: str, done: int, total: int) -> None:
        marks.append(time.perf_counter())
        update("server: training", done, total)

    update("server: training", 0, spec.iterations)
    ct_w = logreg.train_encrypted(server.context, server.keys, server.load_ciphertext(train_request), spec,
                                  progress=on_iteration)
    weights_reply = server.dump_ciphertext(ct_w)
    clock.seconds["server training"] = time.perf_counter() - marks[0]
    with clock("server inference"):
        scores = logreg.predict_encrypted(server.context, server.keys, ct_w, server.load_ciphertext(test_request),
                                          spec)
        scores_reply = server.dump_ciphertext(scores)
    update("server: inference", 1, 1)

    with clock("client decrypt"):
        w_enc = logreg.unpack_weights(client.decrypt(weights_reply), spec)
        scores_enc = logreg.unpack_scores(client.decrypt(scores_reply), spec, len(data.y_test))
    update("client: decrypt", 1, 1)

    reference = logreg.train_plaintext(data.x_train, data.y_train, spec)
    sizes = {"context": len(context_bytes), "evaluation_keys": len(eval_key_bytes),
             "train_ciphertext": len(train_request), "test_ciphertext": len(test_request),
             "weights_ciphertext": len(weights_reply)}
    return _logreg_summary(data, spec, params, server.context.plan.method, reference, w_enc, scores_enc, clock, sizes,
                           iteration_seconds=[b - a for a, b in zip(marks, marks[1:])])


def _logreg_summary(data, spec, params, ntt: str, reference, w_enc, scores_enc, clock: _Clock, sizes: dict,
                    **mode) -> dict:
    """The summary fields both logistic-regression modes report, then the mode's own (``mode``) and the device.

    ``reference``: the plaintext training (:func:`hemx.apps.logreg.train_plaintext`); ``w_enc`` / ``scores_enc``:
    the decrypted weights and test scores; ``sizes``: the serialized sizes in bytes."""
    from hemx.apps import logreg

    scores_plain = data.x_test @ reference.weights
    return {
        "workload": "logreg",
        "train_samples": len(data.y_train),
        "test_samples": len(data.y_test),
        "features": data.n_features,
        "iterations": spec.iterations,
        "parameters": params.describe(),
        "ntt": ntt,
        "rotation_keys": len(spec.rotation_steps),
        "accuracy_plaintext": logreg.accuracy(scores_plain, data.y_test),
        "accuracy_encrypted": logreg.accuracy(scores_enc, data.y_test),
        "agreement": float(np.mean((scores_enc > 0) == (scores_plain > 0))),
        "max_abs_weight_error": float(np.max(np.abs(w_enc - reference.weights))),
        "max_abs_score_error": float(np.max(np.abs(scores_enc - scores_plain))),
        "seconds": clock.seconds,
        "first_iteration_includes_compilation": True,
        "latency_per_test_sample_ms": clock.seconds["server inference"] / len(data.y_test) * 1e3,
        "bytes": sizes,
        **mode,
        **_device(),
    }


def run_helr(*, iterations: int | None = None, samples: int | None = None, ntt: str | None = DEFAULT_NTT,
             sampler: Sampler | None = None, update: Callable[[str, int, int], None] = lambda *a: None) -> dict:
    """HELR at the seeds' scale (:func:`hemx.apps.logreg.run_preset` ``"helr"``, as ``hemx bench helr`` runs it):
    16,384 Fashion-MNIST samples (196 pixels + bias) in 128 mini-batches of 128, one N = 2^16 ciphertext each,
    14 Nesterov iterations bootstrapped on the 128-bit ``boot_16`` ring (about 10 minutes and 11 GiB on 2 cores).

    The roles are the client/server split's: the client makes the keys and encrypts every mini-batch, the server
    trains on the ciphertexts and bootstraps, the client decrypts the weights and scores its test set. They run in
    one process and hand over objects, not bytes: serialized, the 4.3 GiB of evaluation keys would be held twice.

    Args:
        iterations: Nesterov iterations (default 14).
        samples: training samples, a multiple of 128 (default 16,384).
        ntt, sampler: as for :func:`run_cnn`.
        update: ``update(stage, done, total)``: "client: keygen", "client: encrypt", "server: training",
            "server: bootstraps".
    """
    from hemx.apps import logreg

    stage_names = {"keygen": "client: keygen", "encrypt": "client: encrypt", "train": "server: training",
                   "bootstrap": "server: bootstraps"}

    def progress(stage: str, done: int, total: int) -> None:
        if stage in stage_names:
            update(stage_names[stage], done, total)

    result = logreg.run_preset("helr", iterations=iterations, n_train=samples, ntt=ntt, sampler=sampler,
                               progress=progress)
    from hemx.bench.timing import peak_rss_gib

    return {**result, "workload": "helr", "peak_rss_gib": peak_rss_gib(), "ntt": ntt or "default", **_device()}


BOOTSTRAP_TRAIN_SAMPLES = 64  # the insecure default ring boot_12 holds 64 rows of 32 columns (2048 slots)
BOOTSTRAP_ITERATIONS = 30


def run_logreg_bootstrapped(
    *,
    iterations: int | None = None,
    data=None,
    params: CKKSParameters | None = None,
    ntt: str | None = DEFAULT_NTT,
    sampler: Sampler | None = None,
    update: Callable[[str, int, int], None] = lambda *a: None,
    secure: bool = False,
) -> dict:
    """HELR training for more iterations than the chain holds: the server bootstraps the state (weights and
    Nesterov vector) when its levels run out. Client/server split as :func:`run_logreg`; the client also sends the
    public bootstrapping schedule (the state's divisor and the levels, :func:`hemx.apps.logreg.schedule_bootstrapping`).

    Args:
        iterations: gradient steps (default 30).
        data: default: with ``secure`` the whole split (455 training samples, N = 2^16 holds them); otherwise a
            stratified subset of 64 training samples (what the insecure test ring boot_12 holds) and the whole
            114-sample test split.
        params: default :func:`hemx.apps.logreg.bootstrap_parameters` (boot_16 with ``secure``, else the grown
            boot_12 / boot_13 test ring: NOT secure; the summary says so).
        ntt, sampler, update: as for :func:`run_cnn`; ``update`` also gets ("server: bootstraps", k, K).
    """
    from hemx.apps import logreg

    clock = _Clock()
    with clock("data"):
        if data is None:
            data = logreg.load_data() if secure else logreg.load_data(n_train=BOOTSTRAP_TRAIN_SAMPLES)
        spec = logreg.plan(len(data.y_train), data.n_features,
                           iterations=BOOTSTRAP_ITERATIONS if iterations is None else iterations,
                           learning_rate=logreg.BOOTSTRAP_LEARNING_RATE, bound=logreg.BOOTSTRAP_BOUND)
        params = logreg.bootstrap_parameters(spec, secure=secure) if params is None else params
        # client: the state's divisor and the bootstrap iterations, checked on the slot simulator with its data
        plan = logreg.schedule_bootstrapping(data.x_train, data.y_train, spec, params)
        reference = logreg.train_plaintext(data.x_train, data.y_train, spec)
    update("data + schedule", 1, 1)

    with clock("client keygen"):  # Client has no bootstrapping keys: the context and keys are made here
        context = Context(params, slots=spec.slots, ntt=ntt, sampler=sampler)
        # the bootstrap's keys, from its parameters: the client builds no bootstrapper
        keys = context.keygen(rotations=spec.rotation_steps,
                              bootstrap=BootstrapParameters.create(params, slots=context.slots))
        context_bytes = io.dumps(context)
        eval_key_bytes = io.dumps(keys.evaluation_keys(), context)
    update("client: keygen", 1, 1)
    with clock("server set-up"):
        server = Server.from_bytes(context_bytes, eval_key_bytes, ntt=ntt)
    eval_key_size = len(eval_key_bytes)
    del eval_key_bytes
    update("server: set-up", 1, 1)

    with clock("client encrypt"):  # the data goes at the schedule's level: every iteration runs on the same levels
        ct_train = context.drop_level(context.encrypt(logreg.pack_training(data.x_train, data.y_train, spec),
                                                      keys.public), plan.top_level)
        train_request = io.dumps(ct_train, context)
        test_request = io.dumps(context.encrypt(logreg.pack_test(data.x_test, spec), keys.public), context)
    update("client: encrypt", 1, 1)

    marks, log = [time.perf_counter()], logreg.BootstrapLog()

    def on_progress(stage: str, done: int, total: int) -> None:
        if stage == "train":
            marks.append(time.perf_counter())
            update("server: training", done, total)
        else:
            update("server: bootstraps", done, total)

    update("server: training", 0, spec.iterations)
    ct_w = logreg.train_encrypted_bootstrapped(server.context, server.keys,
                                               io.loads(train_request, server.context), spec, plan,
                                               progress=on_progress, log=log)
    weights_reply = server.dump_ciphertext(ct_w)
    clock.seconds["server training"] = time.perf_counter() - marks[0]
    with clock("server inference"):
        scores = logreg.predict_encrypted(server.context, server.keys, ct_w, server.load_ciphertext(test_request),
                                          spec)
        scores_reply = server.dump_ciphertext(scores)
    update("server: inference", 1, 1)

    with clock("client decrypt"):
        w_enc = logreg.unpack_weights(context.decrypt(io.loads(weights_reply, context), keys.secret), spec)
        scores_enc = logreg.unpack_scores(context.decrypt(io.loads(scores_reply, context), keys.secret), spec,
                                          len(data.y_test))
    update("client: decrypt", 1, 1)

    iteration_seconds = [b - a for a, b in zip(marks, marks[1:])]
    boot_at = set(log.at)
    plain_iterations = [s for t, s in enumerate(iteration_seconds) if t > 0 and t not in boot_at]
    later_bootstraps = log.seconds[1:] or log.seconds
    sizes = {"context": len(context_bytes), "evaluation_keys": eval_key_size,
             "train_ciphertext": len(train_request), "test_ciphertext": len(test_request),
             "weights_ciphertext": len(weights_reply)}
    return _logreg_summary(
        data, spec, params, server.context.plan.method, reference, w_enc, scores_enc, clock, sizes,
        mode="bootstrapping",
        security=logreg.insecure_note(params),
        secure=params.name == "boot_16",
        learning_rate=spec.learning_rate,
        sigmoid=f"degree {spec.sigmoid.degree} on [-{spec.sigmoid.bound:g}, {spec.sigmoid.bound:g}]",
        max_abs_weight=float(np.max(np.abs(reference.weights))),
        max_abs_z=reference.max_abs_z,
        bootstraps=log.count,
        bootstrap_at_iterations=list(log.at),
        bootstrap_seconds=list(log.seconds),
        bootstrap_median_s=float(np.median(later_bootstraps)) if log.seconds else 0.0,
        levels={"chain": params.max_level, "data": plan.top_level, "after_bootstrap": plan.output_level,
                "state_before_bootstrap": sorted(set(log.level_before)), "weights_out": ct_w.level,
                "per_iteration": spec.depth_per_iteration},
        shrink=plan.shrink,
        largest_state=plan.largest_state,
        largest_shrunk_state=plan.largest,
        iteration_seconds=iteration_seconds,
        iteration_median_s=float(np.median(plain_iterations)) if plain_iterations else 0.0,
        iteration_mean_with_bootstraps_s=clock.seconds["server training"] / spec.iterations,
    )
