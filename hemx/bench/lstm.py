"""``hemx bench lstm``: the shipped Fashion-MNIST LSTM (:mod:`hemx.nn.lstm_fmnist`: 28 steps of 28 pixels, the
projection 28 -> 128 folded into an LSTM of 128 cells, a dense head 128 -> 10) in plaintext, in the slot simulator
and encrypted with bootstrapping, 32 sequences packed per ciphertext (issue 36).

1. **plaintext**: :func:`hemx.nn.reference` (float64, the polynomials' exact functions) on the first ``--plain``
   test sequences: accuracy.
2. **compile**: against ``--preset`` (default ``boot_16``: 128-bit, N = 2^16, 2^15 slots) with
   ``images_per_ciphertext = --sequences`` (default 32: each sequence's 784 inputs get 1,024 slots, interleaved),
   calibrated on 64 training sequences; sigmoid / tanh of ``--degree``. The plan (levels, bootstraps, rotations,
   keys) is printed before any key is made.
3. **simulated** (``--simulate N``): the packed program in :class:`~hemx.circuits.SlotSimulator` (same packing,
   levels, scales and polynomials, no keys) on the first ``N`` test sequences: accuracy, agreement with plaintext,
   largest logit error.
4. **encrypted** (``--encrypted``): keys, then one ciphertext batch of ``--sequences`` test sequences encrypted,
   evaluated and decrypted: total seconds, seconds per time step, seconds per sequence amortized, bootstraps, keys
   GiB, peak RSS, predictions against plaintext on the first 20 (and all) and the largest logit error.

``--tiny``: a random-weight LSTM of 8 cells on 4 steps of 4 values (the images average-pooled 7 x 7), for tests.
The JSON (``--json``) holds all figures.
"""

from __future__ import annotations

import time

import numpy as np

CALIBRATION_SEQUENCES = 64
CHECKED = 20  # the first test sequences whose predictions the report compares with plaintext
TINY = {"rows": 4, "width": 4, "hidden": 8}


def load(split: str, count: int, *, tiny: bool = False):
    """``count`` test / train sequences ``(count, T * D)`` (pixels / 255) and labels; ``tiny``: pooled to 4 x 4."""
    from hemx.nn import lstm_fmnist

    x, y = lstm_fmnist.load(split, count)
    if tiny:
        pool = 28 // TINY["rows"]
        x = x.reshape(len(x), TINY["rows"], pool, TINY["width"], pool).mean(axis=(2, 4)).reshape(len(x), -1)
    return x, y


def model(*, tiny: bool = False, degree: int | None = None):
    """``(graph, metadata)``: the shipped model, or (``tiny``) a random-weight LSTM of the tiny shape (seed 0)."""
    from hemx.nn import graph as G, lstm_fmnist

    if not tiny:
        params, meta = lstm_fmnist.load_lstm_fmnist()
        return lstm_fmnist.graph(params, degree=degree), meta
    rng = np.random.default_rng(0)
    d, h = TINY["width"], TINY["hidden"]
    kw = {} if degree is None else {"degree": degree}
    lstm = G.LSTM(rng.normal(size=(d, 4 * h)) * 0.5, rng.normal(size=(h, 4 * h)) * 0.3, rng.normal(size=4 * h) * 0.1, **kw)
    graph = G.Graph((G.Node("input", G.Input((TINY["rows"] * d,))), G.Node("lstm", lstm, ("input",)),
                     G.Node("head", G.Dense(rng.normal(size=(10, h)), np.zeros(10)), ("lstm",))))
    return graph, {"model": "random tiny LSTM", "test_accuracy": None}


def bench(*, preset: str = "boot_16", plain: int = 1000, simulate: int = 0, encrypted: bool = False,
          sequences: int = 32, degree: int | None = None, tiny: bool = False, allow_insecure: bool = False,
          console=None) -> dict:
    """Run the stages asked for (``plain`` / ``simulate`` 0: skip); a dict of every figure. ``sequences``: per
    ciphertext (a power of two), the batch of the encrypted run."""
    from hemx.bench.nn_images import encrypted_images
    from hemx.bench.timing import peak_rss_gib
    from hemx.ckks import CKKSParameters, Context
    from hemx.circuits import SlotSimulator
    from hemx.errors import ParameterError
    from hemx.nn import compile as nn_compile, reference
    from hemx.nn.infer import infer

    for name, value in (("plain", plain), ("simulate", simulate), ("sequences", sequences)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (name == "sequences" and value < 1):
            raise ParameterError(f"{name} must be a non-negative integer (sequences: positive), got {value!r}")

    def say(msg: str) -> None:
        if console is not None:
            console.print(msg)

    graph, meta = model(tiny=tiny, degree=degree)
    lstm = graph.nodes[1].layer
    steps = graph.input_shape[0] // lstm.features
    out: dict = {"preset": preset, "sequences_per_ciphertext": sequences, "tiny": tiny,
                 "shape": {"steps": steps, "inputs": lstm.features, "cells": lstm.hidden, "classes": 10},
                 "degree": lstm.degree, "model": {k: meta.get(k) for k in ("model", "test_accuracy", "epochs",
                                                                           "input_scale")}}
    if plain:
        x, y = load("test", plain, tiny=tiny)
        pred = reference(graph, x).argmax(-1)
        out["plain"] = {"sequences": plain, "accuracy": float(np.mean(pred == y))}
        say(f"plaintext (float64 reference): accuracy {out['plain']['accuracy']:.4f} on {plain} test sequences")

    params = CKKSParameters.preset(preset, allow_insecure=allow_insecure)
    ctx = Context(params) if encrypted else None
    cal, _ = load("train", CALIBRATION_SEQUENCES, tiny=tiny)
    start = time.perf_counter()
    net = nn_compile(graph, ctx if ctx is not None else params, calibration=cal, images_per_ciphertext=sequences)
    out["compile_s"] = time.perf_counter() - start
    plan = net.plan
    out["plan"] = {"input_level": plan.input_level, "bootstrap_level": plan.bootstrap_level,
                   "bootstraps": plan.bootstraps, "bootstrapped_ciphertexts": plan.bootstrapped_ciphertexts,
                   "rotations": plan.key_switches, "plaintext_mults": plan.plaintext_mults,
                   "ct_mults": plan.ct_mults, "rotation_keys": len(plan.rotations), "key_count": plan.key_count,
                   "key_bytes": plan.key_bytes, "slots": plan.slots, "totals": plan.totals()}
    say(f"plan ({steps} steps, {lstm.hidden} cells, {sequences} sequences per ciphertext, degree {lstm.degree}, "
        f"compiled in {out['compile_s']:.1f} s):")
    say("\n".join(plan.totals()))

    if simulate:
        x, y = load("test", simulate, tiny=tiny)
        sim = SlotSimulator(params, slots=plan.slots)
        start = time.perf_counter()
        got = infer(net, sim, x, batch=sequences).logits[:simulate]  # (the last batch is padded to a full one)
        want = reference(graph, x)
        out["simulated"] = {"sequences": simulate, "accuracy": float(np.mean(got.argmax(-1) == y)),
                            "agree_with_plain": float(np.mean(got.argmax(-1) == want.argmax(-1))),
                            "equal_count": int(np.sum(got.argmax(-1) == want.argmax(-1))),
                            "max_logit_error": float(np.max(np.abs(got - want))),
                            "max_err_over_range": float(np.max(np.abs(got - want) / np.ptp(want, axis=-1,
                                                                                           keepdims=True))),
                            "seconds": time.perf_counter() - start}
        s = out["simulated"]
        say(f"simulated ({simulate} sequences): {s['equal_count']} predictions equal to plaintext, accuracy "
            f"{s['accuracy']:.4f}, largest logit error {s['max_logit_error']:.2e}")

    if encrypted:
        x, y = load("test", sequences, tiny=tiny)
        enc = encrypted_images(net, ctx, graph, x, y, say=say)
        run_s = enc["runs"][0]
        first = enc["images"][:CHECKED]
        want = reference(graph, x)
        enc.update(total_s=run_s, s_per_step=run_s / steps, s_per_sequence=run_s / sequences,
                   bootstraps=plan.bootstraps, bootstrapped_ciphertexts=plan.bootstrapped_ciphertexts,
                   checked=len(first), checked_equal=sum(r["pred"] == r["plain_pred"] for r in first),
                   max_logit_error=max(r["err_over_range"] * float(np.ptp(want[i])) for i, r in
                                       enumerate(enc["images"])))
        out["encrypted"] = enc
        say(f"encrypted ({sequences} sequences in one ciphertext batch): {run_s:.1f} s, {enc['s_per_step']:.1f} s "
            f"per step, {enc['s_per_sequence']:.1f} s per sequence amortized; {enc['checked_equal']} of "
            f"{enc['checked']} first predictions ({enc['equal_count']} of {sequences}) equal to plaintext, largest "
            f"logit error {enc['max_logit_error']:.2e}; keys {enc['key_gib']:.2f} GiB")
    out["peak_rss_gib"] = peak_rss_gib()
    return out


def add_arguments(p) -> None:
    from hemx.bench.nn_images import add_network_arguments

    add_network_arguments(p, items="sequences", extra=(
        (("--encrypted",), dict(action="store_true", help="one encrypted ciphertext batch of --sequences test "
                                "sequences (makes keys: ~10 GiB at boot_16)")),
        (("--sequences",), dict(type=int, default=32, help="sequences interleaved per ciphertext (a power of two)")),
        (("--degree",), dict(type=int, default=None, help="degree of the sigmoid / tanh polynomials (default: the "
                             "shipped model's)")),
        (("--tiny",), dict(action="store_true", help="a random 8-cell LSTM on 4 steps of 4 values (tests)")),
    ))
    p.set_defaults(func=run_cli)


def run_cli(args) -> int:
    from rich.console import Console

    from hemx.bench.report import write_json

    console = Console()
    result = bench(preset=args.preset, plain=args.plain, simulate=args.simulate, encrypted=args.encrypted,
                   sequences=args.sequences, degree=args.degree, tiny=args.tiny, allow_insecure=args.allow_insecure,
                   console=console)
    console.print(f"peak RSS {result['peak_rss_gib']:.2f} GiB")
    if args.json:
        console.print(f"wrote {write_json(args.json, result)}")
    return 0


__all__ = ["bench", "model", "load", "add_arguments", "run_cli"]
