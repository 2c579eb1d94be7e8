"""Encrypted inference of a compiled network, batch by batch, with the time of every stage.

:func:`infer` is the local path: keys (:func:`make_keys`, once, unless given), then for each batch of inputs
encrypt, run, decrypt, on a :class:`~hemx.ckks.Context` or a :class:`~hemx.circuits.SlotSimulator` (no keys).
:func:`infer_batches` is the loop itself over any three callables (a client and a server exchanging bytes, say),
so every caller times the same stages the same way: per batch the evaluation alone, split by step kind and by
graph node through the network's progress callback, and the totals of encryption, evaluation and decryption.
"""

from __future__ import annotations

import collections
import dataclasses
import resource
import time
from typing import Any, Callable, Sequence

import numpy as np

from hemx.errors import ParameterError
from hemx.nn.data_layout import to_channel_first
from hemx.nn.run import check_input_bound

STAGES = ("encrypt", "run", "decrypt")


def peak_rss_bytes() -> int:
    """This process's peak resident set so far (``getrusage``'s ``ru_maxrss``, KiB on Linux), in bytes."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _block(value) -> None:
    """Wait for the jax arrays inside ``value`` (a ciphertext, a key set; simulator values hold none)."""
    import jax

    jax.block_until_ready([leaf for leaf in jax.tree_util.tree_leaves(value) if isinstance(leaf, jax.Array)])


@dataclasses.dataclass(frozen=True)
class TimedKeys:
    """A network's keys (:meth:`CompiledNetwork.keygen`), the seconds they took and the bytes of the evaluation
    keys (what :meth:`CompiledNetwork.run` reads) in memory."""

    keys: Any
    seconds: float
    nbytes: int


def make_keys(net, ctx) -> TimedKeys:
    """Every key ``net`` needs (each rotation key at its plan level), made and waited for on ``ctx``."""
    import jax

    start = time.perf_counter()
    keys = net.keygen(ctx)
    _block(keys)
    seconds = time.perf_counter() - start
    nbytes = sum(int(leaf.nbytes) for leaf in jax.tree_util.tree_leaves(keys.evaluation_keys()))
    return TimedKeys(keys, seconds, nbytes)


@dataclasses.dataclass
class Inference:
    """What :func:`infer` / :func:`infer_batches` measured.

    Attributes:
        logits: the decrypted outputs of every batch, concatenated on the batch axis: ``(B, *output_shape)``.
        run_seconds: per batch, the evaluation alone (encrypted input ready to result ready).
        seconds_by_kind / seconds_by_node: per batch, ``{step kind or graph node: seconds}`` of the evaluation.
        seconds: totals per stage: ``keygen`` (when :func:`infer` made or was given timed keys), ``encrypt``,
            ``run``, ``decrypt``.
        key_bytes: the evaluation keys in memory (None when the keys are not the caller's to count).
        peak_rss_bytes: this process's peak resident set at the end.
    """

    logits: np.ndarray
    run_seconds: list[float]
    seconds_by_kind: list[dict]
    seconds_by_node: list[dict]
    seconds: dict
    key_bytes: int | None
    peak_rss_bytes: int

    @property
    def median_s(self) -> float | None:
        """The median of :attr:`run_seconds` (None without batches)."""
        return float(np.median(self.run_seconds)) if self.run_seconds else None

    def kind_totals(self) -> dict:
        """``{step kind: seconds}`` summed over the batches."""
        return _summed(self.seconds_by_kind)

    def node_totals(self) -> dict:
        """``{graph node: seconds}`` summed over the batches."""
        return _summed(self.seconds_by_node)


def _summed(rows: Sequence[dict]) -> dict:
    out: dict = collections.defaultdict(float)
    for row in rows:
        for name, seconds in row.items():
            out[name] += seconds
    return dict(out)


def infer_batches(batches: Sequence, *, encrypt: Callable, evaluate: Callable, decrypt: Callable,
                  progress: Callable | None = None, update: Callable | None = None,
                  on_batch: Callable | None = None) -> Inference:
    """Each batch encrypted, evaluated and decrypted, timed stage by stage.

    Args:
        batches: inputs, each ``(b, *input_shape)`` (or whatever ``encrypt`` takes).
        encrypt: ``encrypt(batch) -> request``, ready when it returns.
        evaluate: ``evaluate(request, progress=callback) -> reply``, ready when it returns; it calls
            ``callback(step_index, steps, plan_step)`` after each step (as :meth:`CompiledNetwork.run` does).
        decrypt: ``decrypt(reply) -> logits (b, *output_shape)``.
        progress: ``progress(batch, batches, step_index, steps, plan_step)`` after each step.
        update: ``update(stage, done, total)``: ``("run", i, n)`` before batch ``i`` is evaluated, then
            ``(stage, i + 1, n)`` after each of its stages (:data:`STAGES`).
        on_batch: ``on_batch(i, logits, run_seconds)`` once batch ``i`` is decrypted.
    """
    total = len(batches)
    seconds = dict.fromkeys(STAGES, 0.0)
    run_seconds, by_kind, by_node, logits = [], [], [], []
    for i, batch in enumerate(batches):
        start = time.perf_counter()
        request = encrypt(batch)
        seconds["encrypt"] += time.perf_counter() - start
        if update is not None:
            update("encrypt", i + 1, total)
            update("run", i, total)
        kinds: dict = collections.defaultdict(float)
        nodes: dict = collections.defaultdict(float)
        last = [time.perf_counter()]

        def step_done(done, steps, step, i=i, kinds=kinds, nodes=nodes, last=last):
            now = time.perf_counter()
            kinds[step.kind] += now - last[0]
            nodes[step.node] += now - last[0]
            last[0] = now
            if progress is not None:
                progress(i, total, done, steps, step)

        start = time.perf_counter()
        reply = evaluate(request, progress=step_done)
        run_seconds.append(time.perf_counter() - start)
        seconds["run"] += run_seconds[-1]
        by_kind.append(dict(kinds))
        by_node.append(dict(nodes))
        if update is not None:
            update("run", i + 1, total)
        start = time.perf_counter()
        out = np.asarray(decrypt(reply))
        seconds["decrypt"] += time.perf_counter() - start
        logits.append(out)
        if update is not None:
            update("decrypt", i + 1, total)
        if on_batch is not None:
            on_batch(i, out, run_seconds[-1])
    stacked = np.concatenate(logits) if logits else np.zeros((0,))
    return Inference(stacked, run_seconds, by_kind, by_node, seconds, None, peak_rss_bytes())


def infer(net, backend, images, *, keys=None, batch: int = 1, release_diagonals: bool | None = None,
          progress: Callable | None = None, update: Callable | None = None,
          on_batch: Callable | None = None, on_bound: str = "raise") -> Inference:
    """``images`` through the compiled network ``net`` on ``backend``, ``batch`` images at a time.

    Args:
        net: a :class:`~hemx.nn.CompiledNetwork`.
        backend: a :class:`~hemx.ckks.Context` (encrypted) or a :class:`~hemx.circuits.SlotSimulator` (keys
            ignored).
        images: ``(B, *net.input_shape)``, in the network's ``data_layout`` (the model's: ``(B, H, W, C)`` for
            a JAX / Keras model, ``(B, C, H, W)`` for ONNX); checked before any key is made.
        keys: on a Context, a :class:`TimedKeys` (:func:`make_keys`) or a key set; None: made here (timed, with
            ``update("keygen", 1, 1)`` after).
        batch: images per encrypted input (each batch is one input of ``batch`` ciphertext rows).
        release_diagonals, progress, update, on_batch: as for :meth:`CompiledNetwork.run` and
            :func:`infer_batches`.
        on_bound: images beyond the bound the network was compiled for
            (:attr:`CompiledNetwork.input_bound`): ``"raise"`` (default) refuses them with
            :class:`~hemx.errors.BoundError` before any key is made; ``"warn"`` warns per batch
            (:class:`~hemx.errors.BoundWarning`) and runs them (:meth:`CompiledNetwork.encrypt_input`).

    Returns an :class:`Inference` whose ``logits`` are ``(B, *output_shape)``; on a Context with keys made here or
    given as :class:`TimedKeys`, ``seconds["keygen"]`` and ``key_bytes`` too.
    """
    from hemx.circuits import SlotSimulator

    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ParameterError(f"batch must be a positive integer, got {batch!r}")
    images = np.asarray(images)
    if images.ndim < 2:
        raise ParameterError(f"images must be a batch (B, *input_shape), got shape {images.shape}: add the batch "
                             "axis (x[None] for one input)")
    if images.shape[1:] != tuple(net.input_shape):  # a ShapeError naming the layout and the axis to move
        _, single = to_channel_first(images, net.input_layout.shape, net.data_layout, what="infer's images")
        if single:
            raise ParameterError(f"images must be a batch (B, *{tuple(net.input_shape)}), got one input of shape "
                                 f"{images.shape}: add the batch axis (x[None])")
    if on_bound == "raise":  # the whole set, before keys are made; "warn" warns per batch at encryption
        check_input_bound(images, net.input_bound)
    elif on_bound != "warn":
        raise ParameterError(f"on_bound must be 'raise' or 'warn', got {on_bound!r}")
    simulated = isinstance(backend, SlotSimulator)
    timed = None
    if simulated:
        keyset = evk = None
    else:
        if keys is None:
            keys = make_keys(net, backend)
            if update is not None:
                update("keygen", 1, 1)
        if isinstance(keys, TimedKeys):
            timed, keys = keys, keys.keys
        keyset, evk = keys, keys.evaluation_keys()

    def encrypt(x):
        ct = net.encrypt_input(backend, keyset, x, on_bound=on_bound)
        _block(ct)
        return ct

    def evaluate(ct, progress):
        out = net.run(backend, evk, ct, progress=progress, release_diagonals=release_diagonals)
        _block(out)
        return out

    def decrypt(out):
        return net.decrypt_output(backend, keyset, out)

    batches = [images[i:i + int(batch)] for i in range(0, len(images), int(batch))]
    result = infer_batches(batches, encrypt=encrypt, evaluate=evaluate, decrypt=decrypt, progress=progress,
                           update=update, on_batch=on_batch)
    if timed is not None:
        result.seconds = {"keygen": timed.seconds, **result.seconds}
        result.key_bytes = timed.nbytes
    return result


__all__ = ["Inference", "TimedKeys", "STAGES", "infer", "infer_batches", "make_keys", "peak_rss_bytes"]
