"""Graphs the hemx.nn tests compile: a ResNet-20-shaped network with random weights, a small residual network (and
that network compiled at boot_12 with two bootstraps)."""

from __future__ import annotations

import numpy as np

from hemx.nn import graph as G


def _conv(rng, c_out, c_in, k, stride):
    pad = (k - 1) // 2
    w = rng.normal(size=(c_out, c_in, k, k)) * np.sqrt(2.0 / (c_in * k * k))
    return G.Conv2D(w, None, stride, ((pad, pad), (pad, pad)))


def _bn(rng, c):
    return G.BatchNorm(rng.uniform(0.5, 1.0, c), rng.normal(size=c) * 0.1)


def resnet20_graph(rng: np.random.Generator, *, classes: int = 10, width: int = 16, side: int = 32) -> G.Graph:
    """ResNet-20 (He et al. CIFAR variant): conv-bn-relu, 3 stages x 3 basic blocks of widths w, 2w, 4w, stride 2 at
    the start of stages 2 and 3 with a 1x1 stride-2 conv + bn shortcut, global average pool, dense."""
    nodes = [G.Node("input", G.Input((3, side, side)))]

    def add(name, layer, *inputs):
        nodes.append(G.Node(name, layer, tuple(inputs)))
        return name

    x = add("conv0", _conv(rng, width, 3, 3, 1), "input")
    x = add("bn0", _bn(rng, width), x)
    x = add("relu0", G.Activation("relu"), x)
    c_in = width
    for stage in range(3):
        c = width << stage
        for block in range(3):
            stride = 2 if stage > 0 and block == 0 else 1
            p = f"s{stage + 1}b{block + 1}"
            h = add(f"{p}_conv1", _conv(rng, c, c_in, 3, stride), x)
            h = add(f"{p}_bn1", _bn(rng, c), h)
            h = add(f"{p}_relu1", G.Activation("relu"), h)
            h = add(f"{p}_conv2", _conv(rng, c, c, 3, 1), h)
            h = add(f"{p}_bn2", _bn(rng, c), h)
            if stride != 1 or c_in != c:
                s = add(f"{p}_short", _conv(rng, c, c_in, 1, stride), x)
                s = add(f"{p}_short_bn", _bn(rng, c), s)
            else:
                s = x
            h = add(f"{p}_add", G.Add(), h, s)
            x = add(f"{p}_relu2", G.Activation("relu"), h)
            c_in = c
    x = add("pool", G.GlobalAvgPool(), x)
    add("fc", G.Dense(rng.normal(size=(classes, c_in)) * 0.3, rng.normal(size=classes) * 0.1), x)
    return G.Graph(tuple(nodes))


def residual_graph(rng: np.random.Generator, *, channels: int = 4, side: int = 8, classes: int = 3,
                   act=(0.0, 0.5, 0.25)) -> G.Graph:
    """conv -> bn -> poly act -> conv -> add (residual) -> global avg pool -> dense."""
    c = channels
    nodes = [
        G.Node("input", G.Input((2, side, side))),
        G.Node("conv1", G.Conv2D(rng.normal(size=(c, 2, 3, 3)) * 0.3, rng.normal(size=c) * 0.1, 1, ((1, 1), (1, 1))),
               ("input",)),
        G.Node("bn1", G.BatchNorm(rng.uniform(0.5, 1.5, c), rng.normal(size=c) * 0.1), ("conv1",)),
        G.Node("act", G.Activation("poly", act), ("bn1",)),
        G.Node("conv2", G.Conv2D(rng.normal(size=(c, c, 3, 3)) * 0.2, None, 1, ((1, 1), (1, 1))), ("act",)),
        G.Node("add", G.Add(), ("conv2", "bn1")),
        G.Node("pool", G.GlobalAvgPool(), ("add",)),
        G.Node("fc", G.Dense(rng.normal(size=(classes, c)), rng.normal(size=classes)), ("pool",)),
    ]
    return G.Graph(tuple(nodes))


def boot12_residual_case():
    """The small residual network compiled for ``boot_12`` with the input at level 3 (3 levels after a bootstrap
    too), seeded: ``(graph, x, ctx, net)``; the planner bootstraps twice (bn1 and the sum)."""
    import hemx  # noqa: PLC0415
    from hemx.ckks import Sampler  # noqa: PLC0415
    from hemx.nn.compiler import compile  # noqa: PLC0415, A004

    rng = np.random.default_rng(6)
    g = residual_graph(rng, act=(0.1, 0.5, 0.2))
    x = rng.normal(size=(1, 2, 8, 8))
    params = hemx.CKKSParameters.preset("boot_12", allow_insecure=True)
    ctx = hemx.Context(params, sampler=Sampler.insecure_for_tests(5))
    return g, x, ctx, compile(g, ctx, calibration=x, input_level=3)
