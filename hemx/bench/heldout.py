"""``hemx bench heldout``: held-out images against calibrated bounds (issue 37).

A compiled network's ReLU / max comparisons are scaled by ``1 / (F B)`` (``F``: ``compile(relu_domain=)``), its
sigmoid / tanh fitted on ``[-B, B]`` and its bootstraps' inputs scaled below the bootstrap's supported bound, all
from bounds ``B`` calibrated on some images. This bench runs images the network was *not* calibrated on and counts
per image: whether any value exceeds its calibrated bound; whether it stays inside what the runtime computes right
(every ReLU / max input within ``F B``, every fitted activation's within ``B``, every bootstrapped node value within
its pre-scaling factor times the supported bound); whether the prediction differs from the plaintext network's.

**How the images are run.** Not on the slot simulator, which at ``boot_16`` takes seconds per image on two cores,
but through :func:`runtime_model`: float64 evaluation of exactly the polynomial stages the runtime evaluates (each
ReLU ``x (1 + p(x / (F B))) / 2`` with the compiled composite, each max pool as the packed chain of comparisons
``b + relu~(a - b)`` with doubling shifts, each sigmoid / tanh as its fitted polynomial, every other layer exactly),
vectorised over images. It is the simulator's computation without its exact-scale bookkeeping: ``tests/nn/
test_compile.py`` checks the simulator against this model to a relative ``1e-9`` on ReLU, max-pool and residual
networks with bootstraps. What neither models: the CKKS noise (``~1e-6`` of the logit range encrypted) and a
bootstrap fed beyond its supported bound (counted here instead).

Networks: the shipped ResNet-20 (its activations are the polynomial ``x/2 + x^2/32``, exact in the runtime: only
its bootstraps depend on the bounds), calibrated on 64 Fashion-MNIST training images as ``hemx bench resnet``,
run on ``--fmnist`` test images; the Keras CIFAR-10 CNN (ReLU and max pools), calibrated on the first
``--calibration`` of its 20 images and run on the others, with the default ReLU domain and with ``relu_domain=1``.
"""

from __future__ import annotations

import time

import numpy as np

DEFAULT_FMNIST = 10_000
CIFAR_CALIBRATION = 10


def maxpool_model(x, layer, scale_bound: float, composite, domain: float):
    """The packed max pool in float64: rows then columns, ``max(a, b) = b + relu~(a - b)`` with doubling shifts
    (zeros shifted in past the edge), read at the stride's grid points. ``x``: ``(B, C, H, W)``."""
    from hemx.nn import activations as acts

    m = np.array(x)
    for axis in (3, 2):
        cover = 1
        while cover < layer.window:
            k = min(cover, layer.window - cover)
            shifted = np.zeros_like(m)
            if axis == 3:
                shifted[..., :-k] = m[..., k:]
            else:
                shifted[:, :, :-k] = m[:, :, k:]
            m = shifted + acts.relu_approx(m - shifted, scale_bound, composite, domain=domain)
            cover += k
    ho = (x.shape[2] - layer.window) // layer.stride + 1
    wo = (x.shape[3] - layer.window) // layer.stride + 1
    return m[:, :, ::layer.stride, ::layer.stride][:, :, :ho, :wo]


def _conv(layer, x):
    """Conv2D as the reference computes it, each kernel tap one BLAS product (``np.tensordot``) instead of an
    einsum: the same sums, ~10x faster on ResNet-20. ``x``: ``(B, C_in, H, W)``."""
    (t, b), (l, r) = layer.padding
    x = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)))
    c_out, _, kh, kw = layer.weight.shape
    s = layer.stride
    ho, wo = (x.shape[2] - kh) // s + 1, (x.shape[3] - kw) // s + 1
    out = np.zeros((x.shape[0], ho, wo, c_out))
    for dy in range(kh):
        for dx in range(kw):
            patch = x[:, :, dy:dy + s * (ho - 1) + 1:s, dx:dx + s * (wo - 1) + 1:s]
            out += np.tensordot(patch.transpose(0, 2, 3, 1), layer.weight[:, :, dy, dx].T, axes=1)
    out = out.transpose(0, 3, 1, 2)
    return out if layer.bias is None else out + layer.bias[None, :, None, None]


def runtime_model(net, x, *, exact: bool = False) -> dict:
    """Every node's float64 value under the runtime's approximations (module docstring): ``x`` a batch in the
    graph's data layout -> ``{node: (B, *shape)}`` over the compiled (folded) nodes. ``exact``: ReLU, max pool and
    sigmoid / tanh exact instead (the plaintext network, its batch norms folded)."""
    from hemx.nn import activations as acts
    from hemx.nn.graph import Activation, Conv2D, Input, MaxPool2D, apply_layer

    c = dict(net.passes)["calibrate"]
    x, _ = c.graph.channel_first(x)
    comp, domain, bounds = c.composite, c.relu_domain, c.bounds
    values: dict = {}
    for node in c.nodes:
        layer = node.layer
        ins = [values[i] for i in node.inputs]
        approx = not exact and (isinstance(layer, MaxPool2D) or isinstance(layer, Activation) and layer.kind != "poly")
        if isinstance(layer, Input):
            values[node.name] = x
        elif isinstance(layer, Conv2D):
            values[node.name] = _conv(layer, ins[0])
        elif not approx:
            values[node.name] = apply_layer(layer, ins)
        elif isinstance(layer, MaxPool2D):
            values[node.name] = maxpool_model(ins[0], layer, 2.0 * bounds[node.inputs[0]], comp, domain)
        elif layer.kind == "relu":
            values[node.name] = acts.relu_approx(ins[0], bounds[node.inputs[0]], comp, domain=domain)
        else:
            values[node.name] = acts.smooth_fit(layer.kind, bounds[node.inputs[0]], layer.degree)(ins[0])
    return values


def measure(net, x, *, batch: int = 50, say=None) -> dict:
    """Run ``x`` (held-out images, the graph's data layout) through :func:`runtime_model` and the plaintext network:
    per-image counts (module docstring) and the worst ratios."""
    from hemx.nn import activations as acts
    from hemx.nn.graph import Activation, MaxPool2D
    from hemx.nn.steps import Bootstrap

    c = dict(net.passes)["calibrate"]
    bounds, domain = c.bounds, c.relu_domain
    relus = {n.inputs[0] for n in c.nodes if isinstance(n.layer, MaxPool2D) or (
        isinstance(n.layer, Activation) and n.layer.kind == "relu")}
    smooth = {n.inputs[0] for n in c.nodes if isinstance(n.layer, Activation) and n.layer.kind in acts.SMOOTH}
    boots = {}  # bootstrapped node -> the largest value its bootstrap supports
    for s in net.plan.steps:
        if isinstance(s.op, Bootstrap):
            base = s.inputs[0].split("@")[0]
            if base in bounds:
                boots[base] = min(boots.get(base, np.inf), s.op.factor * c.boot_bound)
    exceed = outside = boot_outside = differ = differ_unflagged = inside = 0
    worst_relu = worst_any = worst_boot = 0.0
    start = time.perf_counter()
    for i in range(0, len(x), batch):
        xb = x[i:i + batch]
        vals = runtime_model(net, xb)
        peak = {k: np.max(np.abs(v.reshape(len(xb), -1)), axis=1) for k, v in vals.items()}
        over = np.zeros(len(xb), bool)
        bad = np.zeros(len(xb), bool)
        bbad = np.zeros(len(xb), bool)
        for k, p in peak.items():
            if k in bounds:
                over |= p > bounds[k]
                worst_any = max(worst_any, float(np.max(p / bounds[k])))
            if k in relus:
                bad |= p > domain * bounds[k]
                worst_relu = max(worst_relu, float(np.max(p / bounds[k])))
            if k in smooth:
                bad |= p > bounds[k]
            if k in boots:
                bbad |= p > boots[k]
                worst_boot = max(worst_boot, float(np.max(p / boots[k])))
        got = vals[c.nodes[-1].name].reshape(len(xb), -1).argmax(-1)
        # the plaintext network (only its ReLU / max / sigmoid / tanh differ from the model: none, none to run)
        want = got if not (relus or smooth) else runtime_model(net, xb, exact=True)[c.nodes[-1].name].reshape(
            len(xb), -1).argmax(-1)
        diff = got != want
        exceed += int(over.sum())
        inside += int((over & ~bad & ~bbad).sum())
        outside += int(bad.sum())
        boot_outside += int(bbad.sum())
        differ += int(diff.sum())
        differ_unflagged += int((diff & ~bad & ~bbad).sum())
        if say is not None:
            say(f"  {min(i + batch, len(x))}/{len(x)} images: {exceed} exceed a bound, {outside} beyond the ReLU "
                f"domain / fits, {boot_outside} beyond a bootstrap's bound, {differ} predictions differ")
    return {"images": int(len(x)), "exceed_a_bound": exceed, "beyond_activation_domain": outside,
            "beyond_bootstrap_bound": boot_outside, "exceeding_inside_domains": inside, "predictions_differ": differ,
            "differ_inside_domains": differ_unflagged,
            "max_over_bound_any": worst_any, "max_relu_input_over_bound": worst_relu,
            "max_bootstrap_input_over_supported": worst_boot, "relu_domain": domain,
            "seconds": time.perf_counter() - start}


def _compile(graph, params, cal, **kwargs):
    from hemx.nn import compile as nn_compile

    start = time.perf_counter()
    net = nn_compile(graph, params, calibration=cal, **kwargs)
    plan = net.plan
    return net, {"bootstraps": plan.bootstraps, "bootstrapped_ciphertexts": plan.bootstrapped_ciphertexts,
                 "relu_domain": plan.relu_domain,
                 "relu_extra_levels": plan.relu_extra_levels, "worst_activation_error": plan.worst_activation_error,
                 "compile_s": time.perf_counter() - start}


def bench(*, preset: str = "boot_16", fmnist: int = DEFAULT_FMNIST, cifar: bool = True,
          calibration: int = CIFAR_CALIBRATION, batch: int = 50, console=None) -> dict:
    """The held-out measurements (module docstring); 0 ``fmnist`` images or ``cifar=False`` skips that network."""
    from hemx.ckks import CKKSParameters
    from hemx.errors import ParameterError

    if isinstance(fmnist, bool) or not isinstance(fmnist, int) or not 0 <= fmnist <= DEFAULT_FMNIST:
        raise ParameterError(f"fmnist must be an image count from 0 to {DEFAULT_FMNIST}, got {fmnist!r}")

    def say(msg: str) -> None:
        if console is not None:
            console.print(msg)

    params = CKKSParameters.preset(preset, allow_insecure=True)
    out: dict = {"preset": preset}
    if fmnist:
        from hemx.bench import resnet

        graph, _ = resnet.model()
        cal, _ = resnet.load("train", resnet.CALIBRATION_IMAGES)
        net, plan = _compile(graph, params, cal)
        x, _ = resnet.load("test", fmnist)
        say(f"ResNet-20 (Fashion-MNIST), calibrated on {len(cal)} training images: {plan['bootstraps']} bootstraps")
        out["resnet20"] = {"calibration_images": len(cal), "plan": plan, **measure(net, x, batch=batch, say=say)}
    if cifar:
        from hemx.bench import cifar as bench_cifar

        graph = bench_cifar.model()
        x, _ = bench_cifar.load()
        rows = {}
        for label, kwargs in (("default", {}), ("relu_domain=1", {"relu_domain": 1.0})):
            net, plan = _compile(graph, params, x[:calibration], **kwargs)
            say(f"CIFAR-10 CNN ({label}), calibrated on the first {calibration} of {len(x)} images: "
                f"{plan['bootstraps']} bootstraps, +{plan['relu_extra_levels']} levels per ReLU")
            rows[label] = {"plan": plan, **measure(net, x[calibration:], batch=batch, say=say)}
        out["cifar"] = {"calibration_images": calibration, "held_out": len(x) - calibration, "runs": rows}
    return out


def add_arguments(p) -> None:
    p.add_argument("--preset", default="boot_16", help="the parameters compiled for (plans; no keys)")
    p.add_argument("--fmnist", type=int, default=DEFAULT_FMNIST, help="Fashion-MNIST test images (0: skip)")
    p.add_argument("--no-cifar", action="store_true", help="skip the CIFAR-10 CNN")
    p.add_argument("--calibration", type=int, default=CIFAR_CALIBRATION,
                   help="CIFAR-10 images calibrated on (the others are held out)")
    p.add_argument("--batch", type=int, default=50, help="images per vectorised batch")
    p.add_argument("--json", default="", help="also write every figure to this JSON file")


def run_cli(args) -> int:
    from rich.console import Console

    from hemx.bench.report import write_json

    console = Console()
    result = bench(preset=args.preset, fmnist=args.fmnist, cifar=not args.no_cifar, calibration=args.calibration,
                   batch=args.batch, console=console)
    if args.json:
        write_json(args.json, result)
    return 0


__all__ = ["bench", "measure", "runtime_model", "maxpool_model", "add_arguments", "run_cli"]
