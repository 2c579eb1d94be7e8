"""The encrypted stage shared by the network benches (``hemx bench resnet``, ``hemx bench cifar``).

:func:`encrypted_images` runs :func:`hemx.nn.infer.infer` one image at a time (keys made once, each rotation key at
its plan level; time per step kind from the network's progress callback) and compares every decrypted logit vector
with the plaintext reference: latency, prediction, agreement, logit error relative to the logit range.
"""

from __future__ import annotations

import numpy as np


def encrypted_images(net, ctx, graph, x: np.ndarray, y: np.ndarray, *, say=None) -> dict:
    """Keys, then the images of ``x`` ``(B, *net.input_shape)``, in the network's ``data_layout`` (labels ``y``
    ``(B,)``), encrypted, evaluated and decrypted, against :func:`hemx.nn.reference`: one image per run, or ``k =
    net.images_per_ciphertext`` images in flight per run when the network was compiled with
    ``images_per_ciphertext=k`` (the images interleaved in one ciphertext's slots).

    Returns ``{keygen_s, key_gib, images_in_flight, images: [{seconds, label, pred, plain_pred, err_over_range,
    seconds_by_kind}], runs: [seconds], median_s, amortized_s, images_per_hour, predictions_equal, equal_count,
    max_err_over_range, cpu, bootstrap_execution}``: ``bootstrap_execution`` the context's bootstrapper's
    :class:`~hemx.circuits.bootstrap.ExecutionStats` over the runs (bootstraps run compiled and eagerly,
    compilations and their seconds); ``cpu`` is the process's user and system CPU seconds and page faults per run
    (:meth:`hemx.bench.timing.CpuUsage.per_call`, over all runs, keys excluded); ``median_s`` is the median latency of one run (of ``k`` images), ``amortized_s`` that
    divided by ``k``, and an image's ``seconds`` / ``seconds_by_kind`` its run's, shared by the ``k`` images of it;
    ``say(msg)`` reports progress."""
    import dataclasses

    from hemx.bench.timing import cpu_usage
    from hemx.circuits.bootstrap import ExecutionStats, bootstrapper_for
    from hemx.nn import reference
    from hemx.nn.infer import infer, make_keys

    say = say or (lambda msg: None)
    flight = int(getattr(net, "images_per_ciphertext", 1))
    keys = make_keys(net, ctx)
    out = {"keygen_s": keys.seconds, "key_storage": ctx.key_storage, "key_gib": keys.nbytes / 2**30,
           "images_in_flight": flight, "images": [], "runs": []}
    say(f"keys: {out['keygen_s']:.1f} s, {out['key_gib']:.2f} GiB ({ctx.key_storage})")
    want = reference(graph, x)

    def run_done(run: int, got: np.ndarray, seconds: float) -> None:
        out["runs"].append(seconds)
        for j, logits in enumerate(np.asarray(got).reshape(-1, *want.shape[1:])):
            i = run * flight + j
            record = {"seconds": seconds, "label": int(y[i]), "pred": int(logits.argmax()),
                      "plain_pred": int(want[i].argmax()),
                      "err_over_range": float(np.max(np.abs(logits - want[i])) / np.ptp(want[i]))}
            out["images"].append(record)
            shared = f" (a run of {len(got)} images in flight: {seconds / len(got):.1f} s each)" if flight > 1 else ""
            say(f"  image {i}: {seconds:.1f} s{shared}, predicted {record['pred']} (plaintext "
                f"{record['plain_pred']}, label {record['label']}), logit error {record['err_over_range']:.2e} of "
                "the logit range")

    boot = bootstrapper_for(ctx) if net.plan.bootstraps else None
    stats_before = dataclasses.replace(boot.stats) if boot is not None else ExecutionStats()
    before = cpu_usage()
    result = infer(net, ctx, x, keys=keys, batch=flight, on_batch=run_done)
    cpu = (cpu_usage() - before).per_call(len(out["runs"]))
    out["cpu"] = cpu
    if boot is not None:
        after = boot.stats
        out["bootstrap_execution"] = {f.name: getattr(after, f.name) - getattr(stats_before, f.name)
                                      for f in dataclasses.fields(ExecutionStats)}
        ex = out["bootstrap_execution"]
        say(f"bootstraps: {ex['compiled_calls']} compiled, {ex['eager_calls']} eager; {ex['compilations']} "
            f"compilation(s), {ex['compile_s']:.1f} s")
    say(f"CPU per run: {cpu['user_s']:.1f} s user, {cpu['system_s']:.1f} s system ({100 * cpu['system_share']:.0f} % "
        f"in the kernel), {cpu['page_faults']:,.0f} page faults")
    for run, kinds in enumerate(result.seconds_by_kind):
        for record in out["images"][run * flight:(run + 1) * flight]:
            record["seconds_by_kind"] = kinds
    equal = sum(r["pred"] == r["plain_pred"] for r in out["images"])
    # each run holds `flight` images in one ciphertext's slots (interleaved); several runs are sequential, so the
    # throughput is `flight` images per median run latency
    median = result.median_s
    out.update(median_s=median, amortized_s=median / flight if median else None,
               images_per_hour=3600.0 * flight / median if median else None,
               predictions_equal=equal == len(out["images"]), equal_count=equal,
               max_err_over_range=max((r["err_over_range"] for r in out["images"]), default=None))
    return out


def add_network_arguments(p, *, items: str, extra=()) -> None:
    """The options every network bench takes (``hemx bench resnet``, ``lstm``): ``--preset``, ``--plain`` and
    ``--simulate`` counts of test ``items``, then ``extra`` (``(flags, kwargs)`` pairs, the bench's own), then
    ``--allow-insecure`` and ``--json``."""
    p.add_argument("--preset", default="boot_16", help="bootstrapping parameter preset (boot_16: 128-bit)")
    p.add_argument("--plain", type=int, default=1000, help=f"test {items} in plaintext (0: skip)")
    p.add_argument("--simulate", type=int, default=0, help=f"test {items} through the slot simulator (0: skip)")
    for flags, kwargs in extra:
        p.add_argument(*flags, **kwargs)
    p.add_argument("--allow-insecure", action="store_true", help="allow a preset below 128-bit (the boot_12* and boot_13* test rings)")
    p.add_argument("--json", default="", help="also write every figure to this JSON file")


__all__ = ["encrypted_images", "add_network_arguments"]
