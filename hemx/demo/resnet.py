"""``hemx demo --workload resnet``: encrypted ResNet-20 inference through the client/server split (issue 28).

Who holds what. In a real deployment of encrypted inference the network is the server's (its weights are what it
sells) and the images and the secret key are the client's. The demo keeps that split even though both sides ship
with hemx here:

* the **server** owns the network: it compiles the graph (its weights, its calibration images) against the
  client's parameters and answers with two small JSON documents: the *key request* (the rotation steps with the
  highest level each serves, and whether it bootstraps) and the *interface* (how an image is packed into slots,
  the level and scale it is encrypted at, where the logits come back). Neither holds a weight.
* the **client** makes the keys the request asks for, sends the evaluation keys, encrypts each image as the
  interface says, and decrypts the logits. The secret key never leaves it; the server is a
  :class:`hemx.service.Server`, which refuses any key set with a secret.

Every hand-over is bytes, as over a network. The demo harness, which has the shipped weights too, then compares
the decrypted logits with the plaintext network (:func:`hemx.nn.reference`): the client could not do that
itself, having no weights.

Memory (what makes one process hold both sides at ``boot_16``). Keys are ~9-10.5 GiB in memory and 0.45 times
that serialized (seeded, bit-packed keys: the ratio measured at ``boot_12``), ~4.8 GiB; a bootstrapper's tables
are ~3.7 GiB per context (estimated from the sizes of its DFT plaintexts). So:

1. the server compiles against the parameters, not a Context: no bootstrapper exists before the keys do;
2. the client makes its keys in a key-generation context of its own (``keygen(bootstrap=...)`` reads the list
   of keys from the bootstrap's parameters, :class:`hemx.BootstrapParameters`: no bootstrapper is built) and
   serializes them **one key per message** (public,
   relinearization, each Galois key, the two encapsulation keys; levelled and seeded switching keys, format
   version 4). One :func:`hemx.io.dumps` of the whole :class:`~hemx.ckks.EvaluationKeys` bundle would hold
   three copies of its bytes at once (the packed sections, their join, the join with its digest): ~14 GiB next
   to the keys and the bootstrapper, beyond this 23 GiB machine. It then drops that context and the key set, keeping
   its secret and public keys, rebound to its light encryption context through their bytes (as
   :meth:`hemx.service.Client.restore` does);
3. the server loads the messages one by one (each dropped once read), builds the ``EvaluationKeys`` and a
   :class:`hemx.service.Server` from them, then its bootstrapper ("server: set-up").

The peak is then one key set plus one bootstrapper plus the evaluation, as in ``hemx bench resnet``, not two of
each.

Models:

* ``resnet20`` (default): the shipped ResNet-20 trained on Fashion-MNIST (``hemx.nn.load_resnet20_fmnist``), on
  test images, calibrated on 64 training images (as ``hemx bench resnet``). It needs at least 16384 slots: of the
  bootstrapping presets only ``boot_16`` (32768 slots, 128-bit) has them. One image takes minutes and ~20 GiB.
* ``tiny``: a **test network**, not ResNet-20. It is a residual network with random weights: conv-bn-act,
  one basic block (conv-bn-act-conv-bn + shortcut, act), global average pool, dense. It runs on random normal
  8x8 inputs, with the shipped model's activation x/2 + x^2/32. Its input is encrypted at the bootstrap's output
  level (as ResNet-20's is at ``boot_16``), so it bootstraps too. It runs on the insecure test ring ``boot_12``
  in about a minute, so CI covers the whole client/server path. It has no labels, so no accuracy is reported.
"""

from __future__ import annotations

import gc
import json
import math
import time
from contextlib import contextmanager
from typing import Callable, Iterable

import numpy as np

from hemx import io
from hemx.ckks import PRESETS, CKKSParameters, Context, Sampler
from hemx.circuits.bootstrap import BootstrapParameters, bootstrapper_for
from hemx.ckks.ciphertext import Ciphertext
from hemx.ckks.keys import EvaluationKeys, PublicKey, SwitchingKey
from hemx.errors import KeyMismatchError, ParameterError, SecretMaterialError, SecurityError, SerializationError

MODELS = ("resnet20", "tiny")
DEFAULT_PRESET = "boot_16"
TINY_PRESET = "boot_12"  # what the test network is sized for (insecure: --allow-insecure)
TINY_SHAPE = (1, 8, 8)
TINY_CHANNELS = 4
TINY_CLASSES = 4
TINY_CALIBRATION = 16
MAX_TINY_IMAGES = 64
RESNET20_SLOTS = 16384  # 16 channels of 32 x 32 (at boot_16 the plan packs them in one 32768-slot ciphertext)


# -------------------------------------------------------------------------------------------------- models


class Model:
    """A network the server owns, inputs the client owns, and what the harness compares against."""

    def __init__(self, name: str, description: str, graph, calibration: np.ndarray, images: np.ndarray,
                 labels: np.ndarray | None, *, bootstrap_input: bool = False):
        self.name, self.description = name, description
        self.graph, self.calibration = graph, calibration
        self.images, self.labels = images, labels
        #: encrypt the input at the bootstrap's output level (the test network; ResNet-20's compile chooses it)
        self.bootstrap_input = bootstrap_input


def tiny_graph(seed: int = 0):
    """The test network (module docstring): random weights from ``seed``, input ``(1, 8, 8)``."""
    from hemx.nn import graph as G
    from hemx.nn.models import HE_ACTIVATION

    rng = np.random.default_rng(seed)
    c = TINY_CHANNELS
    act = G.Activation("poly", HE_ACTIVATION)

    def conv(c_in):
        w = rng.normal(size=(c, c_in, 3, 3)) * math.sqrt(2.0 / (9 * c_in))
        return G.Conv2D(w, rng.normal(size=c) * 0.1, 1, ((1, 1), (1, 1)))

    def bn():
        return G.BatchNorm(rng.uniform(0.5, 1.5, c), rng.normal(size=c) * 0.1)

    layers = [
        ("conv0", conv(TINY_SHAPE[0]), ("input",)), ("bn0", bn(), ("conv0",)), ("act0", act, ("bn0",)),
        ("b1_conv1", conv(c), ("act0",)), ("b1_bn1", bn(), ("b1_conv1",)), ("b1_act1", act, ("b1_bn1",)),
        ("b1_conv2", conv(c), ("b1_act1",)), ("b1_bn2", bn(), ("b1_conv2",)),
        ("b1_add", G.Add(), ("b1_bn2", "act0")), ("b1_act2", act, ("b1_add",)),
        ("pool", G.GlobalAvgPool(), ("b1_act2",)),
        ("fc", G.Dense(rng.normal(size=(TINY_CLASSES, c)), rng.normal(size=TINY_CLASSES) * 0.1), ("pool",)),
    ]
    nodes = [G.Node("input", G.Input(TINY_SHAPE))] + [G.Node(name, layer, ins) for name, layer, ins in layers]
    return G.Graph(tuple(nodes))


def load_model(model: str, num_images: int, *, seed: int = 0) -> Model:
    """The graph, calibration batch, test inputs and labels of ``model`` (``resnet20`` or ``tiny``)."""
    if model == "tiny":
        if num_images > MAX_TINY_IMAGES:
            raise ParameterError(f"the tiny test network takes at most {MAX_TINY_IMAGES} images, got {num_images}")
        rng = np.random.default_rng(seed + 1)
        shape = (TINY_CALIBRATION + num_images, *TINY_SHAPE)
        inputs = rng.normal(size=shape)
        return Model("tiny", f"tiny residual TEST network (random weights, seed {seed}; not ResNet-20), random "
                             f"normal {TINY_SHAPE[1]}x{TINY_SHAPE[2]} inputs", tiny_graph(seed),
                     inputs[:TINY_CALIBRATION], inputs[TINY_CALIBRATION:], None, bootstrap_input=True)
    from hemx.bench import resnet as bench_resnet

    graph, meta = bench_resnet.model()
    calibration, _ = bench_resnet.load("train", bench_resnet.CALIBRATION_IMAGES)
    images, labels = bench_resnet.load("test", num_images)
    if len(images) < num_images:
        raise ParameterError(f"the Fashion-MNIST test split has {len(images)} images, asked for {num_images}")
    accuracy = meta.get("test_accuracy")
    trained = f", plaintext test accuracy {100 * accuracy:.2f} %" if accuracy else ""
    return Model("resnet20", f"ResNet-20, Fashion-MNIST 32x32 (shipped weights{trained})", graph, calibration,
                 images, labels)


# ---------------------------------------------------------------------------------------------- the wire


def _layout_doc(layout) -> dict:
    return {"shape": list(layout.shape), "slots": int(layout.slots), "num_cts": int(layout.num_cts),
            "positions": np.asarray(layout.positions).reshape(-1).tolist(),
            "grid": None if layout.grid is None else list(layout.grid), "gap": int(layout.gap),
            "clean": bool(layout.clean)}


def _layout(doc: dict):
    from hemx.nn.packing import Layout

    try:
        shape = tuple(int(d) for d in doc["shape"])
        positions = np.asarray(doc["positions"], dtype=np.int64).reshape(shape)
        return Layout(shape, int(doc["slots"]), positions, int(doc["num_cts"]),
                      None if doc["grid"] is None else tuple(int(g) for g in doc["grid"]), int(doc["gap"]),
                      bool(doc["clean"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise SerializationError(f"bad layout in the server's interface: {exc}") from exc


def _json_bytes(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _json_doc(data: bytes, what: str) -> dict:
    try:
        doc = json.loads(bytes(data).decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise SerializationError(f"the {what} is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise SerializationError(f"the {what} must be a JSON object")
    return doc


# -------------------------------------------------------------------------------------------------- server


class ModelServer:
    """The server: owns the network, compiles it for the client's parameters, evaluates with evaluation keys only.

    Args:
        context_bytes: the client's serialized context (parameters and slot count).
        graph, calibration: the network and the server's calibration batch (:func:`hemx.nn.compile`).
        bootstrap_input: encrypt inputs at the bootstrap's output level.
        ntt: the server's own NTT method (None: the context's default).
    """

    def __init__(self, context_bytes: bytes, graph, calibration, *, bootstrap_input: bool = False,
                 ntt: str | None = None):
        from hemx.nn import compile as nn_compile

        self._context = io.loads(context_bytes, expect=Context, ntt=ntt)
        params, slots = self._context.params, self._context.slots
        # against the parameters: the plan is the same as against a Context, and no bootstrapper is built yet
        net = nn_compile(graph, params, calibration=calibration, slots=slots)
        boot_level = net.plan.bootstrap_level
        if bootstrap_input and boot_level is not None and net.plan.input_level != boot_level:
            net = nn_compile(graph, params, calibration=calibration, slots=slots, input_level=boot_level)
        self.network = net
        self._server = None

    @property
    def plan(self):
        return self.network.plan

    @property
    def service(self):
        """The :class:`hemx.service.Server` (context and evaluation keys) once the keys arrived, else None."""
        return self._server

    def key_request(self) -> bytes:
        """The keys the plan needs: rotation steps with the highest level each serves, and bootstrapping."""
        plan = self.network.plan
        return _json_bytes({"rotations": [int(r) for r in plan.rotations],
                            "rotation_levels": {str(int(r)): int(v) for r, v in plan.rotation_levels.items()},
                            "bootstrap": bool(self.network.needs_bootstrap)})

    def interface(self) -> bytes:
        """How the client packs an input and reads the output (no weights): ``data_layout``, the layout the model
        takes an image in (:attr:`hemx.nn.CompiledNetwork.data_layout`: NHWC for ResNet-20, traced from JAX), and
        ``input_bound``: the ``max |x|`` the network was compiled for (:attr:`hemx.nn.CompiledNetwork.input_bound`;
        null without calibration), which the client checks every input against before encrypting it."""
        net = self.network
        bound = net.input_bound
        return _json_bytes({"input": _layout_doc(net.input_layout), "data_layout": net.data_layout,
                            "output": _layout_doc(net.output_layout),
                            "input_level": int(net.plan.input_level), "scale": float(net.scale),
                            "input_bound": None if bound is None else float(bound)})

    def load_evaluation_keys(self, messages: Iterable[bytes]) -> None:
        """Load the client's evaluation keys, one :mod:`hemx.io` message per key, into the server's context and
        build its :class:`hemx.service.Server` (which refuses a key set with a secret); a serialized secret key
        raises :class:`~hemx.errors.SecretMaterialError`."""
        from hemx.service import Server

        ctx = self._context
        public, relin, galois, switching, key_ids = None, None, {}, {}, set()
        for data in messages:
            kind = io.kind_of(data)
            if kind == "public_key":
                key = io.loads(data, ctx, expect=PublicKey)
                if public is not None:
                    raise SerializationError("the evaluation keys hold two public keys")
                public = key
            elif kind == "switching_key":
                key = io.loads(data, ctx, expect=SwitchingKey)
                if key.kind == "relin":
                    if relin is not None:
                        raise SerializationError("the evaluation keys hold two relinearization keys")
                    relin = key
                else:
                    table, name = (galois, key.galois) if key.kind == "galois" else (switching, key.kind)
                    if name in table:
                        raise SerializationError(f"the evaluation keys hold two {key.kind} keys {name}")
                    table[name] = key
            elif kind == "secret_key":
                raise SecretMaterialError("a secret key was sent to the server, which takes evaluation keys only")
            else:
                raise SerializationError(f"expected evaluation keys, got a serialized {kind.replace('_', ' ')}")
            key_ids.add(key.key_id)
        if public is None:
            raise SerializationError("the evaluation keys hold no public key")
        if len(key_ids) != 1:
            raise KeyMismatchError("the evaluation keys belong to different key sets")
        keys = EvaluationKeys(public, relin, galois, ctx.id, key_ids.pop(), switching)
        self._server = Server(ctx, keys)

    def prepare(self) -> None:
        """Build what evaluation needs before the first request: the bootstrapping circuit's tables."""
        if self.network.needs_bootstrap:
            bootstrapper_for(self._context)

    def key_bytes_in_memory(self) -> int:
        import jax

        return int(sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(self._require().keys)))

    def infer(self, request: bytes, progress=None) -> bytes:
        """Ciphertext bytes in, ciphertext bytes out; ``progress(i, total, step)`` after each step of the plan."""
        server = self._require()
        ct = server.load_ciphertext(request)
        out = self.network.run(server.context, server.keys, ct, progress=progress)
        return server.dump_ciphertext(out)  # reading the result blocks on it

    def _require(self):
        if self._server is None:
            raise ParameterError("the server has no evaluation keys yet (load_evaluation_keys)")
        return self._server


# -------------------------------------------------------------------------------------------------- client


class ModelClient:
    """The client: parameters, keys as the server's request says, encryption and decryption of its images.

    Args:
        params: the parameter set (the client chooses it; the server compiles for it).
        ntt: the client's NTT method; ``sampler``: randomness (default the OS CSPRNG; seeded only in tests).
    """

    def __init__(self, params: CKKSParameters, *, ntt: str | None = None, sampler: Sampler | None = None):
        self._params, self._ntt, self._sampler = params, ntt, sampler
        self._context = Context(params, ntt=ntt, sampler=sampler)
        self._secret = self._public = None
        self._interface = None

    @property
    def context(self) -> Context:
        return self._context

    def context_bytes(self) -> bytes:
        return io.dumps(self._context)

    def make_keys(self, key_request: bytes) -> list[bytes]:
        """Generate the requested keys; returns the evaluation keys as :mod:`hemx.io` messages, one key each
        (public, relinearization, every Galois key, the bootstrap's encapsulation keys), and keeps the secret and
        public key.

        The keys are made in a key-generation context that is dropped afterwards (module docstring); the
        bootstrap's keys come from its parameters (:class:`hemx.BootstrapParameters`), no bootstrapper is built."""
        req = _json_doc(key_request, "key request")
        try:
            rotations = [int(r) for r in req["rotations"]]
            levels = {int(r): int(v) for r, v in req["rotation_levels"].items()}
            bootstrap = req["bootstrap"]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SerializationError(f"bad key request: {exc}") from exc
        if not isinstance(bootstrap, bool):
            raise SerializationError("bad key request: 'bootstrap' must be true or false")
        keygen_context = Context(self._params, slots=self._context.slots, ntt=self._ntt, sampler=self._sampler)
        boot = BootstrapParameters.create(self._params, slots=self._context.slots) if bootstrap else None
        keys = keygen_context.keygen(rotations=rotations, bootstrap=boot, rotation_level=levels)
        parts = [keys.public] + ([keys.relin] if keys.relin is not None else []) + \
            [keys.galois[g] for g in sorted(keys.galois)] + [keys.switching[n] for n in sorted(keys.switching)]
        messages = [io.dumps(part, keygen_context) for part in parts]
        secret = io.dumps_secret_key(keys.secret, keygen_context)
        public = io.dumps(keys.public, keygen_context)
        del keys, parts, keygen_context
        gc.collect()  # the key set's arrays, before the next large allocation
        self._secret = io.loads_secret_key(secret, self._context)
        self._public = io.loads(public, self._context, expect=PublicKey)
        return messages

    def set_interface(self, interface: bytes) -> None:
        from hemx.nn.data_layout import LAYOUTS

        doc = _json_doc(interface, "interface")
        try:
            bound = doc["input_bound"]
            bound = None if bound is None else float(bound)
            if bound is not None and not (math.isfinite(bound) and bound > 0):
                raise ValueError(f"input_bound must be a positive number or null, got {bound!r}")
            data_layout = doc["data_layout"]
            if data_layout not in LAYOUTS:
                raise ValueError(f"data_layout must be one of {LAYOUTS}, got {data_layout!r}")
            self._interface = (_layout(doc["input"]), _layout(doc["output"]), int(doc["input_level"]),
                               float(doc["scale"]), bound, data_layout)
        except (KeyError, TypeError, ValueError) as exc:
            raise SerializationError(f"bad interface: {exc}") from exc

    def encrypt(self, x, *, on_bound: str = "raise") -> bytes:
        """One input in the interface's ``data_layout`` (``(H, W, C)`` for NHWC, ``(C, H, W)`` for NCHW) packed as
        the interface says, encrypted at its level and scale.

        Its ``max |x|`` is checked against the interface's ``input_bound`` first
        (:func:`hemx.nn.run.check_input_bound`): :class:`~hemx.errors.BoundError` beyond it, or a
        :class:`~hemx.errors.BoundWarning` with ``on_bound="warn"``."""
        from hemx.nn.data_layout import to_channel_first
        from hemx.nn.run import check_input_bound

        layout, _, level, scale, bound, data_layout = self._require()
        check_input_bound(x, bound, on_bound=on_bound)
        x, single = to_channel_first(x, layout.shape, data_layout, what="the client's input")
        pt = self._context.encode(layout.pack(x[0] if single else x), level=level, scale=scale)
        return io.dumps(self._context.encrypt(pt, self._public), self._context)

    def decrypt(self, reply: bytes) -> np.ndarray:
        """The output tensor of a reply (logits)."""
        layout = self._require()[1]
        ct = io.loads(reply, self._context, expect=Ciphertext)
        return layout.unpack(self._context.decrypt(ct, self._secret))

    def _require(self):
        if self._interface is None or self._secret is None:
            raise ParameterError("the client needs its keys (make_keys) and the server's interface first")
        return self._interface


# ---------------------------------------------------------------------------------------------------- run


def _sent(messages: list) -> Iterable:
    """The messages in order, each dropped from the list once the receiver has it (a wire holds no copy)."""
    messages.reverse()
    while messages:
        yield messages.pop()


def check_options(model: str, num_images, preset: str, allow_insecure: bool) -> CKKSParameters:
    """Validate the options; the parameter set of ``preset``."""
    if model not in MODELS:
        raise ParameterError(f"unknown model {model!r}; choose one of {MODELS}")
    if isinstance(num_images, bool) or not isinstance(num_images, int) or num_images < 1:
        raise ParameterError(f"images must be a positive integer, got {num_images!r}")
    if not isinstance(allow_insecure, bool):
        raise ParameterError(f"allow_insecure must be True or False, got {allow_insecure!r}")
    if not isinstance(preset, str):
        raise ParameterError(f"preset must be a preset name, got {preset!r}")
    if preset.lower() in PRESETS and not preset.lower().startswith("boot_"):
        raise ParameterError(f"the networks bootstrap: use a bootstrapping preset (boot_16; boot_12 or boot_13 for "
                             f"tests), got {preset!r}")
    try:
        params = CKKSParameters.preset(preset, allow_insecure=allow_insecure)  # an unknown name: the list of them
    except SecurityError as exc:
        raise SecurityError(f"preset {preset!r} is not 128-bit secure (a test-size ring): pass --allow-insecure "
                            "(allow_insecure=True) to run it anyway") from exc
    if model == "resnet20" and params.max_slots < RESNET20_SLOTS:
        raise ParameterError(f"ResNet-20's 16 x 32 x 32 activations need at least {RESNET20_SLOTS} slots; "
                             f"{params.name} has {params.max_slots}. Use boot_16, or --model tiny (a small test "
                             f"network, not ResNet-20) on {TINY_PRESET}")
    return params


def run_resnet(
    *,
    model: str = "resnet20",
    num_images: int = 1,
    preset: str = DEFAULT_PRESET,
    allow_insecure: bool = False,
    ntt: str | None = None,
    sampler: Sampler | None = None,
    seed: int = 0,
    update: Callable[[str, int, int], None] = lambda *a: None,
    layer: Callable[[int, int, int, int, object], None] | None = None,
    log: Callable[[str], None] = lambda msg: None,
    inspect: Callable[[ModelServer, ModelClient], None] | None = None,
) -> dict:
    """Encrypted inference of ``model`` on ``num_images`` inputs through the client/server split (module docstring).

    Args:
        model: "resnet20" (the shipped ResNet-20) or "tiny" (a test network: random weights, random inputs).
        num_images: the first test images (``tiny``: random inputs from ``seed``).
        preset: bootstrapping parameters (``boot_16``: 128-bit; ``boot_12`` / ``boot_13`` need ``allow_insecure``).
        ntt, sampler: as for :func:`hemx.demo.workloads.run_cnn`.
        seed: the tiny network's weights and inputs.
        update: ``update(stage, done, total)`` progress of the stages.
        layer: ``layer(image, images, step, steps, plan_step)`` after each step of the plan on the server.
        log: one line of text (the plan's totals).
        inspect: ``inspect(server, client)`` once the server holds its keys (tests check it holds no secret).
    """
    from hemx.nn import reference
    from hemx.nn.infer import infer_batches

    params = check_options(model, num_images, preset, allow_insecure)
    seconds: dict[str, float] = {}

    @contextmanager
    def clock(name: str):
        start = time.perf_counter()
        yield
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start

    with clock("model + data"):
        m = load_model(model, num_images, seed=seed)
        plain_logits = reference(m.graph, m.images)
    update("model + data", 1, 1)

    # client: the parameters, serialized; server: the network compiled for them, its key request and interface
    client = ModelClient(params, ntt=ntt, sampler=sampler)
    context_bytes = client.context_bytes()
    with clock("server compile"):
        server = ModelServer(context_bytes, m.graph, m.calibration, bootstrap_input=m.bootstrap_input, ntt=ntt)
        key_request, interface = server.key_request(), server.interface()
    plan = server.plan
    update("server: compile", 1, 1)
    for line in plan.totals():
        log(line)

    with clock("client keygen"):
        key_messages = client.make_keys(key_request)
        client.set_interface(interface)
    update("client: keygen", 1, 1)
    eval_key_size, eval_key_messages = sum(map(len, key_messages)), len(key_messages)
    with clock("server load keys"):
        server.load_evaluation_keys(_sent(key_messages))
    update("server: load keys", 1, 1)
    key_memory = server.key_bytes_in_memory()
    with clock("server set-up"):
        server.prepare()
    update("server: set-up", 1, 1)
    if inspect is not None:
        inspect(server, client)

    sizes: dict[str, int] = {}

    def encrypt(batch) -> bytes:
        request = client.encrypt(batch[0])
        sizes["request_ciphertext"] = len(request)
        return request

    def decrypt(reply: bytes) -> np.ndarray:
        sizes["reply_ciphertext"] = len(reply)
        return client.decrypt(reply)[None]

    stages = {"encrypt": "client: encrypt", "run": "server: inference", "decrypt": "client: decrypt"}
    result = infer_batches([m.images[i:i + 1] for i in range(num_images)], encrypt=encrypt, evaluate=server.infer,
                           decrypt=decrypt, progress=layer,
                           update=lambda stage, done, total: update(stages[stage], done, total))
    seconds.update({"client encrypt": result.seconds["encrypt"], "client decrypt": result.seconds["decrypt"],
                    "server inference": result.seconds["run"]})
    image_seconds, steps = result.run_seconds, len(plan.steps)
    got = result.logits
    pred, plain_pred = got.argmax(-1), plain_logits.argmax(-1)
    err = np.abs(got - plain_logits)
    over_range = err.max(axis=-1) / np.ptp(plain_logits, axis=-1)
    labels = m.labels
    return {
        "workload": "resnet",
        "model": m.name,
        "model_description": m.description,
        "preset": params.name,
        "parameters": params.describe(),
        "secure": bool(params.secure),
        "ntt": server.service.context.plan.method,
        "images": num_images,
        "slots": plan.slots,
        "input_level": plan.input_level,
        "bootstrap_level": plan.bootstrap_level,
        "steps": steps,
        "layers": len(dict.fromkeys(s.node for s in plan.steps)),
        "bootstraps": plan.bootstraps,
        "bootstrapped_ciphertexts": plan.bootstrapped_ciphertexts,
        "rotations": plan.key_switches,
        "plaintext_mults": plan.plaintext_mults,
        "ct_mults": plan.ct_mults,
        "rotation_keys": len(plan.rotations),
        "plan": plan.totals(),
        "image_seconds": image_seconds,
        "latency_per_image_s": float(np.median(image_seconds[1:] or image_seconds)),  # steady: after the first
        "first_image_s": image_seconds[0],
        "first_image_includes_compilation": True,
        "seconds_by_kind": result.kind_totals(),
        "seconds_by_layer": result.node_totals(),
        "keygen_s": seconds["client keygen"],
        "key_bytes_in_memory": key_memory,
        "key_messages": eval_key_messages,
        "peak_rss_bytes": result.peak_rss_bytes,
        "predictions": pred.tolist(),
        "plaintext_predictions": plain_pred.tolist(),
        "labels": None if labels is None else [int(v) for v in labels],
        "agreement": float(np.mean(pred == plain_pred)),
        "predictions_equal": bool(np.all(pred == plain_pred)),
        "accuracy_encrypted": None if labels is None else float(np.mean(pred == labels)),
        "accuracy_plaintext": None if labels is None else float(np.mean(plain_pred == labels)),
        "max_abs_logit_error": float(err.max()),
        "max_err_over_range": float(over_range.max()),
        "seconds": seconds,
        "bytes": {"context": len(context_bytes), "key_request": len(key_request), "interface": len(interface),
                  "evaluation_keys": eval_key_size, **sizes},
        **_device(),
    }


def _device() -> dict:
    from hemx.demo.workloads import _device as device

    return device()


# --------------------------------------------------------------------------------------------- progress


class LayerBars:
    """Rich progress bars: one per stage (``update(stage, done, total)``, as
    :class:`hemx.demo.workloads.StageBars`) and one for the server's layers, naming the layer it has just run
    (``layer(image, images, step, steps, plan_step)``)."""

    def __init__(self, progress):
        self._progress, self._tasks = progress, {}

    def _task(self, stage: str, total: int):
        if stage not in self._tasks:
            self._tasks[stage] = self._progress.add_task(stage, total=max(total, 1), detail="")
        return self._tasks[stage]

    def update(self, stage: str, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task(stage, total), completed=done, total=max(total, 1))

    def layer(self, image: int, images: int, done: int, total: int, step) -> None:
        if self._progress is not None:
            detail = f"image {image + 1}/{images}: {step.node} ({step.kind}, level {step.level_in}->{step.level_out})"
            self._progress.update(self._task("server: layers", total), completed=done, total=max(total, 1),
                                  detail=detail)

    def print(self, msg: str) -> None:
        if self._progress is not None:
            self._progress.console.print(msg)


@contextmanager
def layer_bars(console, enabled: bool = True):
    if not enabled or console is None:
        yield LayerBars(None)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[detail]}"))
    with Progress(*columns, console=console, transient=False) as progress:
        yield LayerBars(progress)


# ---------------------------------------------------------------------------------------------- summary


def summary_rows(summary: dict, fmt_bytes: Callable[[int], str]) -> list[list[str]]:
    """The rows of ``hemx demo --workload resnet``'s table (after device and parameters)."""
    pct = lambda v: f"{100 * v:.2f} %"  # noqa: E731
    n = summary["images"]
    equal = round(summary["agreement"] * n)
    if summary["accuracy_encrypted"] is None:
        accuracy = "- (test network: random weights and inputs, no labels)"
    else:
        accuracy = f"{pct(summary['accuracy_encrypted'])} encrypted / {pct(summary['accuracy_plaintext'])} plaintext"
    if n == 1:
        per_image = f"{summary['latency_per_image_s']:.1f} s (with compilation: one image)"
    else:
        per_image = (f"{summary['latency_per_image_s']:.1f} s median after the first; the first "
                     f"{summary['first_image_s']:.1f} s (with compilation)")
    kinds = sorted(summary["seconds_by_kind"].items(), key=lambda kv: -kv[1])
    return [
        ["model", summary["model_description"]],
        ["security", "128-bit" if summary["secure"] else "NOT 128-bit: a test-size ring, for tests only"],
        ["images", str(n)],
        ["plan", f"{summary['slots']} slots, {summary['layers']} layers in {summary['steps']} steps, input at level "
                 f"{summary['input_level']}, bootstrap -> level {summary['bootstrap_level']}"],
        ["bootstraps per image", f"{summary['bootstraps']} ({summary['bootstrapped_ciphertexts']} ciphertexts)"],
        ["rotations per image", f"{summary['rotations']} key switches ({summary['rotation_keys']} rotation keys)"],
        ["products per image", f"{summary['plaintext_mults']} plaintext, {summary['ct_mults']} ciphertext"],
        ["keys", f"{fmt_bytes(summary['key_bytes_in_memory'])} on the server, "
                 f"{fmt_bytes(summary['bytes']['evaluation_keys'])} sent; keygen {summary['keygen_s']:.1f} s"],
        ["latency per image", per_image],
        ["server time by step kind", ", ".join(f"{k} {v:.1f} s" for k, v in kinds)],
        ["max |logit error| / logit range", f"{summary['max_err_over_range']:.2e} "
                                            f"(max |logit error| {summary['max_abs_logit_error']:.2e})"],
        ["predictions equal to plaintext", f"{equal} / {n} ({pct(summary['agreement'])})"],
        ["accuracy vs labels", accuracy],
        ["peak RSS", fmt_bytes(summary["peak_rss_bytes"])],
    ]


__all__ = ["MODELS", "ModelClient", "ModelServer", "load_model", "tiny_graph", "check_options", "run_resnet",
           "layer_bars", "LayerBars", "summary_rows"]
