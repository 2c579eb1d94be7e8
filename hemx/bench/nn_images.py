"""The encrypted stage shared by the network benches (``hemx bench resnet``, ``hemx bench cifar``).

:func:`encrypted_images` makes the compiled network's keys once (each rotation key at its plan level), then for each
image encrypts it, runs the network (time per step kind from its progress callback), decrypts the logits and
compares them with the plaintext reference: latency, prediction, agreement, logit error relative to the logit range.
"""

from __future__ import annotations

import collections
import time

import numpy as np


def encrypted_images(net, ctx, graph, x: np.ndarray, y: np.ndarray, *, say=None) -> dict:
    """Keys, then each image of ``x`` (labels ``y``) encrypted, evaluated and decrypted against ``reference``.

    Returns ``{keygen_s, key_gib, images: [{seconds, label, pred, plain_pred, err_over_range, seconds_by_kind}],
    median_s, images_per_hour, predictions_equal, equal_count, max_err_over_range}``; ``say(msg)`` reports progress."""
    import jax

    from hemx.nn import reference

    say = say or (lambda msg: None)
    start = time.perf_counter()
    keys = net.keygen(ctx)
    jax.block_until_ready(jax.tree_util.tree_leaves(keys))
    evk = keys.evaluation_keys()
    out = {"keygen_s": time.perf_counter() - start, "key_storage": ctx.key_storage,
           "key_gib": sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(evk)) / 2**30, "images": []}
    say(f"keys: {out['keygen_s']:.1f} s, {out['key_gib']:.2f} GiB ({ctx.key_storage})")
    for i in range(len(x)):
        want = reference(graph, x[i:i + 1])
        ct = net.encrypt_input(ctx, keys, x[i:i + 1])
        jax.block_until_ready(ct.data)
        kinds: dict = collections.defaultdict(float)
        last = [time.perf_counter()]

        def progress(index, total, step, kinds=kinds, last=last):
            now = time.perf_counter()
            kinds[step.kind] += now - last[0]
            last[0] = now

        start = time.perf_counter()
        res = net.run(ctx, evk, ct, progress=progress)
        jax.block_until_ready(res.data)
        seconds = time.perf_counter() - start
        got = net.decrypt_output(ctx, keys, res)
        record = {"seconds": seconds, "label": int(y[i]), "pred": int(got.argmax()), "plain_pred": int(want.argmax()),
                  "err_over_range": float(np.max(np.abs(got - want)) / np.ptp(want)),
                  "seconds_by_kind": dict(kinds)}
        out["images"].append(record)
        say(f"  image {i}: {seconds:.1f} s, predicted {record['pred']} (plaintext {record['plain_pred']}, label "
            f"{record['label']}), logit error {record['err_over_range']:.2e} of the logit range")
    secs = [r["seconds"] for r in out["images"]]
    equal = sum(r["pred"] == r["plain_pred"] for r in out["images"])
    # one image per run: the layouts give each image its own slot vectors (several images are a batch of
    # ciphertexts, not slots shared in one), so the throughput is one image per median latency
    out.update(median_s=float(np.median(secs)) if secs else None,
               images_per_hour=3600.0 / float(np.median(secs)) if secs else None, predictions_equal=equal == len(secs),
               equal_count=equal, max_err_over_range=max((r["err_over_range"] for r in out["images"]), default=None))
    return out


__all__ = ["encrypted_images"]
