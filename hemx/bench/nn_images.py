"""The encrypted stage shared by the network benches (``hemx bench resnet``, ``hemx bench cifar``).

:func:`encrypted_images` runs :func:`hemx.nn.infer.infer` one image at a time (keys made once, each rotation key at
its plan level; time per step kind from the network's progress callback) and compares every decrypted logit vector
with the plaintext reference: latency, prediction, agreement, logit error relative to the logit range.
"""

from __future__ import annotations

import numpy as np


def encrypted_images(net, ctx, graph, x: np.ndarray, y: np.ndarray, *, say=None) -> dict:
    """Keys, then each image of ``x`` ``(B, *input_shape)`` (labels ``y`` ``(B,)``) encrypted, evaluated and
    decrypted, against :func:`hemx.nn.reference`.

    Returns ``{keygen_s, key_gib, images: [{seconds, label, pred, plain_pred, err_over_range, seconds_by_kind}],
    median_s, images_per_hour, predictions_equal, equal_count, max_err_over_range}``; ``say(msg)`` reports progress."""
    from hemx.nn import reference
    from hemx.nn.infer import infer, make_keys

    say = say or (lambda msg: None)
    keys = make_keys(net, ctx)
    out = {"keygen_s": keys.seconds, "key_storage": ctx.key_storage, "key_gib": keys.nbytes / 2**30, "images": []}
    say(f"keys: {out['keygen_s']:.1f} s, {out['key_gib']:.2f} GiB ({ctx.key_storage})")
    want = reference(graph, x)

    def image_done(i: int, got: np.ndarray, seconds: float) -> None:
        record = {"seconds": seconds, "label": int(y[i]), "pred": int(got.argmax()),
                  "plain_pred": int(want[i].argmax()), "err_over_range": float(np.max(np.abs(got - want[i]))
                                                                              / np.ptp(want[i]))}
        out["images"].append(record)
        say(f"  image {i}: {seconds:.1f} s, predicted {record['pred']} (plaintext {record['plain_pred']}, label "
            f"{record['label']}), logit error {record['err_over_range']:.2e} of the logit range")

    result = infer(net, ctx, x, keys=keys, on_batch=image_done)
    for record, kinds in zip(out["images"], result.seconds_by_kind):
        record["seconds_by_kind"] = kinds
    equal = sum(r["pred"] == r["plain_pred"] for r in out["images"])
    # one image per run: the layouts give each image its own slot vectors (several images are a batch of
    # ciphertexts, not slots shared in one), so the throughput is one image per median latency
    median = result.median_s
    out.update(median_s=median, images_per_hour=3600.0 / median if median else None,
               predictions_equal=equal == len(out["images"]), equal_count=equal,
               max_err_over_range=max((r["err_over_range"] for r in out["images"]), default=None))
    return out


__all__ = ["encrypted_images"]
