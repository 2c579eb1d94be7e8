"""``hemx bench cifar``: the pretrained Keras CIFAR-10 CNN on the 20 real CIFAR-10 test images, in plaintext and
through the slot simulator with the ReLU approximation (issue 28).

The network is PyPI ``cifar-10-model`` 7.4.0's ``cnn_model.h5`` (six 3x3 convolutions with ReLU and batch norm,
two 2x2 max pools, dense layers 64 -> 1024 -> 512 -> 10 with ReLU, the last one included), read with
:func:`hemx.nn.from_keras_h5`; the images are the 20 that foolbox 3.3.4 ships (``hemx.nn.data``; fetch them with
``python -m hemx.nn.data fetch cifar10``). The model takes raw 0..255 pixels.

1. **plaintext**: :func:`hemx.nn.reference` (float64) on the 20 images: predictions and accuracy.
2. **compile**: against the parameters of ``--preset`` (default ``boot_16``, 128-bit), *not* a Context (a Context
   would build the bootstrap's tables, which the plan does not need), calibrated on the first ``--calibration``
   images (default all 20: they are the only real CIFAR-10 images at hand, so the network is calibrated on the
   images it then classifies; ``--margin`` widens every calibrated bound). ReLU and max pooling use the sign
   composite of ``--relu-degrees`` / ``--relu-eps`` scaled by each comparison's bound (``relu_domain=1``), or with
   ``--relu-domain F`` hemx.nn's own composite for a ReLU valid up to ``F`` times its bound
   (``compile(relu_domain=F)``, the library's default being 4; ``docs/results/heldout-cpu.md`` measures what it
   buys on held-out images). The plan (levels, bootstraps, rotations, products, keys)
   and the composite (degrees, depth, error, the ReLU error bound at every activation's bound) are reported.
3. **simulated**: the packed program in :class:`~hemx.circuits.SlotSimulator` (same packing, levels, scales and
   polynomial approximations as encrypted, no encryption and no noise) on the first ``--simulate`` images, in
   batches: accuracy, agreement with the plaintext network, the largest logit error relative to the plaintext
   logits' range, the smallest plaintext decision margin (top-1 minus top-2 logit) for comparison, how close
   every ReLU input came to the bound its approximation was scaled by, and seconds.

The default composite is (7, 15, 15, 15) at ``eps = 2^-10`` rather than hemx.nn's default (7, 7, 15, 15) at the
same gap. Measured with this bench at ``boot_16`` on the 20 images (calibration on all 20, margin 1.2), hemx.nn's
default agrees with the plaintext prediction on 17 of 20 (largest logit error 0.11 of the logit range: its sign
error ``2^-10.4`` is relative to inputs up to ``B = 473``, and the smallest plaintext decision margin is only
5.2e-4 of the range), this one on 20 of 20 (2.7e-4). It is one level deeper per ReLU (17 levels with the scaling
and the product) with the same 25 bootstrap placements; (7, 7, 15, 15) at ``2^-9`` also gets 20 of 20 (5.3e-4)
at the default's depth.

4. **encrypted** (``--encrypted K``, default 0): compiled against a Context instead, keys made once (each rotation
   key at its plan level), then the first K images each encrypted, evaluated and decrypted
   (:func:`hemx.bench.nn_images.encrypted_images`, as ``hemx bench resnet``): seconds per image and per step
   kind, predictions against the plaintext network, the logit error relative to the logit range.

Every figure goes into the returned dict and the JSON of ``--json``.
"""

from __future__ import annotations

import math
import time

import numpy as np

IMAGES = 20
DEFAULT_RELU_DEGREES = (7, 15, 15, 15)
DEFAULT_RELU_EPS = 2.0 ** -10
DEFAULT_MARGIN = 1.2


def load():
    """The 20 foolbox CIFAR-10 images as the Keras model takes them, NHWC ``(20, 32, 32, 3)`` (raw 0..255 pixels,
    float64; the graph's ``data_layout``), and their labels ``(20,)``."""
    from hemx.nn import data

    images, labels = data.cifar10_foolbox_images()
    return np.asarray(images, dtype=np.float64), np.asarray(labels)


def model():
    """The pretrained Keras CIFAR-10 CNN as a :class:`hemx.nn.Graph`."""
    from hemx.nn import data, from_keras_h5

    return from_keras_h5(data.cifar10_pretrained_cnn_path())


def _count(name: str, value, low: int, high: int) -> int:
    from hemx.errors import ParameterError

    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise ParameterError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return int(value)


def _relu_bounds(plan) -> dict:
    """``{group: (graph node, B)}`` of every ReLU comparison of the plan: its scaling step is ``x / (F B)`` with
    ``F`` the plan's ``relu_domain``."""
    out = {}
    for step in plan.steps:
        if step.kind == "affine" and step.group is not None and step.output == f"{step.group}/scaled":
            out[step.group] = (step.node, 1.0 / (step.factor * plan.relu_domain))
    return out


def _input_peaks(graph, kept: dict) -> dict:
    """``{node: largest |x|}`` that a comparison of each ReLU / max-pool node sees in the values ``kept``
    (:func:`hemx.nn.reference` with ``keep=True``): a ReLU's input, or for a max pool a difference of two of its
    inputs (at most twice the largest input)."""
    from hemx.nn import Activation, MaxPool2D

    out = {}
    for n in graph.nodes:
        if isinstance(n.layer, (Activation, MaxPool2D)):
            peak = float(np.max(np.abs(kept[n.inputs[0]])))
            out[n.name] = 2.0 * peak if isinstance(n.layer, MaxPool2D) else peak
    return out


def bench(*, preset: str = "boot_16", simulate: int = IMAGES, calibration: int = IMAGES,
          margin: float = DEFAULT_MARGIN, relu_degrees=DEFAULT_RELU_DEGREES, relu_eps: float = DEFAULT_RELU_EPS,
          batch: int = IMAGES, encrypted: int = 0, relu_domain: float | None = None, allow_insecure: bool = False,
          console=None) -> dict:
    """Run the stages (module docstring); a dict of every figure. ``simulate=0`` stops after the plan;
    ``encrypted=K``: the first K images also encrypted (the network compiled against a Context then);
    ``relu_domain=F``: hemx.nn's composite for ReLUs valid to ``F`` times their bound instead of ``relu_degrees`` /
    ``relu_eps`` (``hemx.nn.compile(relu_domain=F)``).

    Raises :class:`~hemx.errors.ParameterError` for bad arguments (counts out of range, a margin below 1, a sign
    composite that does not exist, an unknown or insecure preset without ``allow_insecure``) and
    :class:`~hemx.nn.data.DataUnavailableError` (a ParameterError) when the model or images are not fetched.
    """
    from hemx.bench.nn_images import encrypted_images
    from hemx.bench.timing import peak_rss_gib
    from hemx.circuits import SlotSimulator
    from hemx.ckks import CKKSParameters, Context
    from hemx.ckks.context import resolve_key_storage
    from hemx.ckks.keygen import key_bytes
    from hemx.errors import ParameterError
    from hemx.nn import compile as nn_compile, reference, relu_error_bound, sign_composite
    from hemx.nn.activations import check_domain, domain_composite
    from hemx.nn.data import CIFAR10_CLASSES
    from hemx.nn.infer import infer

    simulate = _count("simulate", simulate, 0, IMAGES)
    calibration = _count("calibration", calibration, 1, IMAGES)
    batch = _count("batch", batch, 1, IMAGES)
    encrypted = _count("encrypted", encrypted, 0, IMAGES)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not (math.isfinite(margin)
                                                                               and margin >= 1.0):
        raise ParameterError(f"margin must be a finite number >= 1, got {margin!r}")
    try:
        degrees = tuple(relu_degrees)
    except TypeError:
        degrees = ()
    if not degrees or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in degrees):
        raise ParameterError(f"relu_degrees must be a sequence of odd integers, got {relu_degrees!r}")
    degrees = tuple(int(d) for d in degrees)
    if isinstance(relu_eps, bool) or not isinstance(relu_eps, (int, float)):
        raise ParameterError(f"relu_eps must be a number in (0, 0.5), got {relu_eps!r}")
    if relu_domain is None:
        comp, domain = sign_composite(degrees, float(relu_eps)), 1.0  # ParameterError for bad degrees / eps
    else:
        domain = check_domain(relu_domain)  # ParameterError below 1
        comp = domain_composite(domain)  # ParameterError above the largest default domain
    params = CKKSParameters.preset(preset, allow_insecure=allow_insecure)  # ParameterError (SecurityError)

    def say(msg: str) -> None:
        if console is not None:
            console.print(msg, highlight=False, soft_wrap=True)

    out: dict = {"preset": preset, "images": IMAGES}
    graph = model()
    x, y = load()

    # 1. plaintext
    want = reference(graph, x)
    plain_pred = want.argmax(-1)
    ranked = np.sort(want, axis=-1)
    gaps = ranked[:, -1] - ranked[:, -2]
    logit_range = float(np.ptp(want))
    out["plain"] = {"accuracy": float(np.mean(plain_pred == y)), "predictions": plain_pred.tolist(),
                    "labels": y.tolist(), "logit_range": logit_range,
                    "min_decision_margin": float(gaps.min()),
                    "min_decision_margin_over_range": float(gaps.min() / logit_range)}
    say(f"plaintext (float64 reference) on the {IMAGES} foolbox CIFAR-10 images: accuracy "
        f"{out['plain']['accuracy']:.2f}")
    say("  predictions: " + ", ".join(f"{i}:{CIFAR10_CLASSES[p]}" for i, p in enumerate(plain_pred)))
    say(f"  logit range {logit_range:.3g}; smallest top-1 minus top-2 logit {gaps.min():.3g} "
        f"({out['plain']['min_decision_margin_over_range']:.2e} of the range, image {int(gaps.argmin())})")

    # 2. compile (parameters only: no Context, no bootstrap tables, unless it encrypts)
    start = time.perf_counter()
    ctx = Context(params) if encrypted else None
    net = nn_compile(graph, ctx if encrypted else params, calibration=x[:calibration], margin=float(margin),
                     relu=comp, relu_domain=domain)
    out["compile_s"] = time.perf_counter() - start
    plan = net.plan
    relus = _relu_bounds(plan)
    bounds = [b for _, b in relus.values()]
    network_keys = 1 + len(plan.rotations)  # relinearization + the network's rotations
    compact = (ctx.key_storage if ctx is not None else resolve_key_storage()) == "compact"
    network_key_bytes = key_bytes(params, compact=compact) + sum(
        key_bytes(params, level, compact=compact) for level in plan.rotation_levels.values())
    out["calibration"] = {"images": calibration, "margin": float(margin),
                          "note": f"bounds = margin x max |x| over the first {calibration} of the {IMAGES} "
                                  "foolbox images (the only real CIFAR-10 images available; "
                                  + ("the same images are classified)" if calibration == IMAGES else
                                     "the others are held out)")}
    out["relu"] = {"degrees": list(comp.degrees), "eps": comp.eps, "sign_error": comp.error, "peak": comp.peak,
                   "depth": comp.depth, "levels_per_relu": comp.depth + 2, "relu_domain": domain,
                   "error_bound_over_B": relu_error_bound(1.0, comp, domain=domain), "comparisons": len(relus),
                   "bound_min": min(bounds), "bound_max": max(bounds),
                   "max_error_bound": max(relu_error_bound(b, comp, domain=domain) for b in bounds)}
    out["plan"] = {"slots": plan.slots, "input_level": plan.input_level, "bootstrap_level": plan.bootstrap_level,
                   "poly_level": plan.poly_level, "steps": len(plan.steps),
                   "bootstraps": plan.bootstraps, "bootstrapped_ciphertexts": plan.bootstrapped_ciphertexts,
                   "rotations": plan.key_switches, "plaintext_mults": plan.plaintext_mults,
                   "ct_mults": plan.ct_mults, "rotation_keys": len(plan.rotations),
                   "rotation_key_levels": [min(plan.rotation_levels.values(), default=0),
                                           max(plan.rotation_levels.values(), default=0)],
                   "network_keys": network_keys, "network_key_bytes": network_key_bytes,
                   "full_key_bytes": key_bytes(params, compact=compact), "compact_keys": compact,
                   "key_bytes": plan.key_bytes, "key_count": plan.key_count, "totals": plan.totals(),
                   "layers": _layer_rows(plan)}
    say(f"compiled against {params.describe()} in {out['compile_s']:.1f} s; "
        f"{out['calibration']['note']}, margin {margin:g}")
    say("\n".join(plan.totals()))
    say(f"  keys the network itself needs: {network_keys} (relinearization + {len(plan.rotations)} rotation steps "
        f"at levels {out['plan']['rotation_key_levels'][0]}-{out['plan']['rotation_key_levels'][1]}), "
        f"{network_key_bytes / 2**30:.2f} GiB; the bootstrap's own keys (counted only when compiled against a "
        f"Context) are full-level keys of {out['plan']['full_key_bytes'] / 2**20:.0f} MiB each"
        + (" (compact: the uniform halves generated in each key switch)" if compact else ""))
    scaled = "B" if domain == 1 else f"{domain:g} B"
    say(f"ReLU: x (1 + p(x / {scaled})) / 2, sign composite of degrees {comp.degrees} at eps "
        f"2^{math.log2(comp.eps):.0f}: "
        f"sign error 2^{math.log2(comp.error):.1f}, depth {comp.depth} (+2: a ReLU takes "
        f"{comp.depth + 2} levels); error bound {out['relu']['error_bound_over_B']:.2e} x B; "
        f"{len(relus)} comparisons (ReLUs and max-pool steps) with B in {min(bounds):.3g}..{max(bounds):.3g}, "
        f"so at most {out['relu']['max_error_bound']:.3g} per activation")

    # 3. simulated
    if simulate:
        sim = SlotSimulator(params, slots=plan.slots)
        xs = x[:simulate]
        start = time.perf_counter()

        def batch_done(i: int, logits, seconds: float) -> None:
            say(f"  simulated {min((i + 1) * batch, simulate)}/{simulate} images ({time.perf_counter() - start:.1f} s)")

        result = infer(net, sim, xs, batch=batch, release_diagonals=True, on_batch=batch_done)
        seconds = sum(result.seconds.values())
        got = result.logits
        ref = want[:simulate]
        err = np.max(np.abs(got - ref), axis=-1)
        peaks = _input_peaks(graph, reference(graph, xs, keep=True))
        ratios = {group: peaks[node] / b for group, (node, b) in relus.items()}
        worst = max(ratios, key=ratios.get)
        out["simulated"] = {
            "images": simulate, "batch": batch, "seconds": seconds,
            "accuracy": float(np.mean(got.argmax(-1) == y[:simulate])),
            "agree_with_plain": float(np.mean(got.argmax(-1) == plain_pred[:simulate])),
            "predictions": got.argmax(-1).tolist(),
            "max_err": float(err.max()), "max_err_over_range": float(err.max() / logit_range),
            "err_over_range": (err / logit_range).tolist(),
            "max_input_over_bound": ratios[worst], "max_input_over_bound_at": worst,
            # a logit error below half the plaintext top-1 / top-2 gap cannot change that image's prediction
            "min_gap_over_twice_err": float(np.min(gaps[:simulate] / (2.0 * np.maximum(err, 1e-300)))),
        }
        sim_out = out["simulated"]
        say(f"simulated ({simulate} images, {seconds:.1f} s): accuracy {sim_out['accuracy']:.2f}, agreement with "
            f"plaintext {sim_out['agree_with_plain']:.2f}, largest logit error {sim_out['max_err']:.3g} = "
            f"{sim_out['max_err_over_range']:.2e} of the logit range")
        say(f"  smallest (top-1 minus top-2 plaintext logit) / (2 x logit error) over the images: "
            f"{sim_out['min_gap_over_twice_err']:.3g} (> 1: the error cannot change a prediction)")
        say(f"  largest ReLU input relative to its bound B: {ratios[worst]:.3f} ({worst}; <= 1: inside the "
            "approximation's interval)")
    # 4. encrypted
    if encrypted:
        out["encrypted"] = encrypted_images(net, ctx, graph, x[:encrypted], y[:encrypted], say=say)
        enc = out["encrypted"]
        say(f"encrypted ({encrypted} images): median {enc['median_s']:.1f} s per image "
            f"({enc['images_per_hour']:.1f} images per hour), {enc['equal_count']} of "
            f"{encrypted} predictions equal to plaintext, largest logit error {enc['max_err_over_range']:.2e} of "
            "the logit range")
    out["peak_rss_gib"] = peak_rss_gib()
    return out


def _layer_rows(plan) -> list[dict]:
    """Per graph node: levels, ciphertexts, rotations, products and bootstraps of its steps."""
    rows: dict[str, dict] = {}
    for s in plan.steps:
        r = rows.setdefault(s.node, {"node": s.node, "level_in": s.level_in, "level_out": s.level_out,
                                     "ciphertexts": s.ciphertexts, "rotations": 0, "plaintext_mults": 0,
                                     "ct_mults": 0, "bootstraps": 0, "bootstrapped_ciphertexts": 0})
        r["level_out"] = s.level_out
        r["ciphertexts"] = max(r["ciphertexts"], s.ciphertexts)
        r["rotations"] += s.key_switches
        r["plaintext_mults"] += s.plaintext_mults
        r["ct_mults"] += s.ct_mults
        if s.kind == "bootstrap":
            r["bootstraps"] += 1
            r["bootstrapped_ciphertexts"] += s.ciphertexts
    return list(rows.values())


def _degrees(text: str) -> tuple[int, ...]:
    from hemx.errors import ParameterError

    try:
        return tuple(int(d) for d in str(text).split(","))
    except ValueError:
        raise ParameterError(f"--relu-degrees takes odd integers separated by commas, got {text!r}") from None


def add_arguments(p) -> None:
    p.add_argument("--preset", default="boot_16", help="bootstrapping parameter preset (boot_16: 128-bit)")
    p.add_argument("--simulate", type=int, default=IMAGES, help=f"images through the slot simulator, 0..{IMAGES}")
    p.add_argument("--calibration", type=int, default=IMAGES,
                   help=f"calibrate on the first K of the {IMAGES} images (default all)")
    p.add_argument("--margin", type=float, default=DEFAULT_MARGIN, help="calibrated bounds times this (>= 1)")
    p.add_argument("--relu-degrees", default=",".join(str(d) for d in DEFAULT_RELU_DEGREES),
                   help="odd degrees of the sign composite's stages")
    p.add_argument("--relu-eps", type=float, default=DEFAULT_RELU_EPS, help="the sign composite's gap")
    p.add_argument("--relu-domain", type=float, default=None,
                   help="hemx.nn's composite for ReLUs valid to this factor above their bound "
                        "(compile(relu_domain=); the library's default is 4) instead of --relu-degrees / --relu-eps")
    p.add_argument("--batch", type=int, default=IMAGES,
                   help="simulator batch size (each batch rebuilds the layers' diagonals)")
    p.add_argument("--encrypted", type=int, default=0, help=f"also encrypt the first K images, 0..{IMAGES} (keys, "
                   "bootstraps: minutes per image and most of the machine's memory)")
    p.add_argument("--layers", action="store_true", help="also print the plan per layer (levels, products, "
                   "bootstraps)")
    p.add_argument("--allow-insecure", action="store_true", help="allow a preset below 128-bit")
    p.add_argument("--json", default="", help="also write every figure to this JSON file")


def run_cli(args) -> int:
    from rich.console import Console

    from hemx.bench.report import write_json

    console = Console()
    result = bench(preset=args.preset, simulate=args.simulate, calibration=args.calibration, margin=args.margin,
                   relu_degrees=_degrees(args.relu_degrees), relu_eps=args.relu_eps, batch=args.batch,
                   encrypted=args.encrypted, relu_domain=args.relu_domain, allow_insecure=args.allow_insecure,
                   console=console)
    if args.layers:
        for row in result["plan"]["layers"]:
            console.print(f"  {row['node']:<24} levels {row['level_in']}->{row['level_out']}, "
                          f"{row['ciphertexts']} ct, {row['rotations']} rot, {row['plaintext_mults']} pmul, "
                          f"{row['ct_mults']} cmul, {row['bootstraps']} bootstraps "
                          f"({row['bootstrapped_ciphertexts']} ct)", highlight=False, soft_wrap=True)
    console.print(f"peak RSS {result['peak_rss_gib']:.2f} GiB")
    if args.json:
        write_json(args.json, result)
    return 0


__all__ = ["bench", "model", "load", "add_arguments", "run_cli", "IMAGES", "DEFAULT_RELU_DEGREES",
           "DEFAULT_RELU_EPS"]
