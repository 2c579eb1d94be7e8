"""``hemx bench resnet``: the shipped ResNet-20 (Fashion-MNIST, 32x32) in plaintext, in the slot simulator and
encrypted with bootstrapping (issue 28).

1. **plaintext**: :func:`hemx.nn.reference` (float64) on the first ``--plain`` test images: accuracy.
2. **compile**: the network against a context of ``--preset`` (default ``boot_16``, 128-bit), calibrated on 64
   training images; the plan (levels, bootstraps, rotations, keys) is printed before any key is made.
   Without ``--encrypted`` it compiles for the parameters alone (no Context, no bootstrapper tables), and the
   plan's key figures leave out the bootstrap's own keys.
3. **simulated**: the packed program in :class:`~hemx.circuits.SlotSimulator` (same packing, levels and scales,
   no encryption) on the first ``--simulate`` test images, in batches: accuracy and agreement with plaintext.
4. **encrypted**: keys (:meth:`CompiledNetwork.keygen`: each rotation key at its plan level), then the first
   ``--encrypted`` test images, each encrypted, evaluated (time per step kind) and decrypted: latency per image,
   bootstraps and rotations, peak RSS, the largest logit error relative to the plaintext logits' range and
   whether the predictions equal the plaintext network's. ``--images-per-ciphertext k`` compiles the network
   with ``k`` images interleaved in each ciphertext (two 16-channel 32x32 images fill a 2^15-slot ciphertext):
   each run then holds ``k`` images in flight, and the report adds the amortized seconds per image.

Every stage that runs is reported; the JSON (``--json``) holds all figures.
"""

from __future__ import annotations

import time

import numpy as np

CALIBRATION_IMAGES = 64


def load(split: str, count: int):
    """``count`` Fashion-MNIST images of ``split`` as the JAX model takes them, NHWC ``(B, 32, 32, 1)`` (raw pixels;
    the graph's ``data_layout``), and labels."""
    from hemx.nn import data

    images, labels = data.fashion_mnist(split)
    x = data.pad_to_32(images[:count]).astype(np.float64)[..., None]
    return x, np.asarray(labels[:count])


def model():
    """The shipped ResNet-20 as a graph (its first node scales pixels by 1/255) and its metadata."""
    from hemx.nn import models

    variables, meta = models.load_resnet20_fmnist()
    graph = models.resnet20_graph(variables, input_shape=(32, 32, 1), activation=tuple(meta["activation"]),
                                  input_scale=meta["input_scale"])
    return graph, meta


def bench(*, preset: str = "boot_16", plain: int = 1000, simulate: int = 0, encrypted: int = 1,
          batch: int = 50, allow_insecure: bool = False, images_per_ciphertext: int = 1, console=None) -> dict:
    """Run the stages asked for (0 images: skip); a dict of every figure. ``allow_insecure``: for the test-size
    presets (``boot_12``, ``boot_13``), which are not 128-bit. ``images_per_ciphertext``: images interleaved per
    ciphertext (a power of two; :func:`hemx.nn.compile`), the images in flight of each encrypted run."""

    from hemx.bench.nn_images import encrypted_images
    from hemx.bench.timing import peak_rss_gib
    from hemx.ckks import CKKSParameters, Context
    from hemx.circuits import SlotSimulator
    from hemx.errors import ParameterError
    from hemx.nn import compile as nn_compile, reference
    from hemx.nn.infer import infer

    for name, value in (("plain", plain), ("simulate", simulate), ("encrypted", encrypted), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (name == "batch" and value < 1):
            raise ParameterError(f"{name} must be a non-negative integer (batch: positive), got {value!r}")

    def say(msg: str) -> None:
        if console is not None:
            console.print(msg)

    out: dict = {"preset": preset, "images_per_ciphertext": images_per_ciphertext}
    graph, meta = model()
    out["model"] = {k: meta.get(k) for k in ("model", "dataset", "activation", "test_accuracy", "epochs")}
    if plain:
        x, y = load("test", plain)
        pred = np.concatenate([reference(graph, x[i:i + 500]).argmax(-1) for i in range(0, len(x), 500)])
        out["plain"] = {"images": plain, "accuracy": float(np.mean(pred == y))}
        say(f"plaintext (float64 reference): {out['plain']['accuracy']:.4f} on {plain} test images")

    params = CKKSParameters.preset(preset, allow_insecure=allow_insecure)
    # without encryption the network compiles for the parameters alone: a Context would build the bootstrapper's
    # tables (4 GiB at boot_16) only to count its keys in the plan, which then leaves them out
    ctx = Context(params) if encrypted else None
    cal, _ = load("train", CALIBRATION_IMAGES)
    start = time.perf_counter()
    net = nn_compile(graph, ctx if ctx is not None else params, calibration=cal,
                     images_per_ciphertext=images_per_ciphertext)
    out["compile_s"] = time.perf_counter() - start
    plan = net.plan
    out["plan"] = {"input_level": plan.input_level, "bootstrap_level": plan.bootstrap_level,
                   "bootstraps": plan.bootstraps, "bootstrapped_ciphertexts": plan.bootstrapped_ciphertexts,
                   "rotations": plan.key_switches, "plaintext_mults": plan.plaintext_mults,
                   "ct_mults": plan.ct_mults, "rotation_keys": len(plan.rotations), "key_count": plan.key_count,
                   "key_bytes": plan.key_bytes, "totals": plan.totals()}
    say("\n".join(plan.totals()))

    if simulate:
        x, y = load("test", simulate)
        sim = SlotSimulator(params, slots=plan.slots)
        result = infer(net, sim, x, batch=batch, on_batch=lambda i, logits, seconds: say(
            f"  simulated {min((i + 1) * batch, len(x))}/{len(x)} images"))
        got = result.logits
        want = np.concatenate([reference(graph, x[i:i + 500]) for i in range(0, len(x), 500)])
        out["simulated"] = {"images": simulate, "accuracy": float(np.mean(got.argmax(-1) == y)),
                            "agree_with_plain": float(np.mean(got.argmax(-1) == want.argmax(-1))),
                            "max_err_over_range": float(np.max(np.abs(got - want)) / np.ptp(want)),
                            "seconds": sum(result.seconds.values())}
        say(f"simulated: accuracy {out['simulated']['accuracy']:.4f}, agreement with plaintext "
            f"{out['simulated']['agree_with_plain']:.4f}")

    if encrypted:
        x, y = load("test", encrypted)
        enc = out["encrypted"] = encrypted_images(net, ctx, graph, x, y, say=say)
        flight = (f" per run of {images_per_ciphertext} images in flight, {enc['amortized_s']:.1f} s per image "
                  "amortized" if images_per_ciphertext > 1 else " per image")
        say(f"encrypted ({encrypted} images): median {enc['median_s']:.1f} s{flight} "
            f"({enc['images_per_hour']:.1f} images per hour), {enc['equal_count']} of {encrypted} predictions equal "
            f"to plaintext, largest logit error {enc['max_err_over_range']:.2e} of the logit range")
    out["peak_rss_gib"] = peak_rss_gib()
    return out


def add_arguments(p) -> None:
    from hemx.bench.nn_images import add_network_arguments

    add_network_arguments(p, items="images", extra=(
        (("--encrypted",), dict(type=int, default=1, help="test images encrypted (0: skip)")),
        (("--batch",), dict(type=int, default=50, help="simulator batch size")),
        (("--images-per-ciphertext",), dict(
            type=int, default=1, help="images interleaved in each ciphertext (a power of two; 2 fills boot_16's 2^15 "
            "slots): images in flight per encrypted run, reported per run and amortized per image")),
    ))


def run_cli(args) -> int:
    from rich.console import Console

    from hemx.bench.report import write_json

    console = Console()
    result = bench(preset=args.preset, plain=args.plain, simulate=args.simulate, encrypted=args.encrypted,
                   batch=args.batch, allow_insecure=args.allow_insecure,
                   images_per_ciphertext=args.images_per_ciphertext, console=console)
    console.print(f"peak RSS {result['peak_rss_gib']:.2f} GiB")
    if args.json:
        write_json(args.json, result)
    return 0


__all__ = ["bench", "model", "load", "add_arguments", "run_cli"]
