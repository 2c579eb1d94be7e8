"""Encrypted CNN inference on scikit-learn's 8x8 digits (bundled with scikit-learn; nothing is downloaded).

A small CNN (3x3 convolution, square activation, 2x2 average pooling, two fully connected layers with a
square in between) is trained in plaintext with JAX; its weights ship with hemx. Encrypted, it runs as a
:mod:`hemx.nn` network: :func:`network_graph` (the 1/16 pixel scaling folded into the convolution, the pooling
into the first dense layer: depth 5, :data:`LAYERS` from the compiled plan) compiled by :func:`compile_network`
with ``B = slots / 64`` images interleaved in every ciphertext (slot ``p * B + b`` holds pixel ``p`` of image
``b``). A client packs and encrypts the images, a server that holds only the context and the secret-free
evaluation keys runs the network with rotations and plaintext products, and the client decrypts the logits.

Typical use::

    model = load_model()
    params = recommended_parameters()                          # N = 2^14, 5 levels, 128-bit
    net = compile_network(model, params)                       # 128 images per ciphertext
    ctx = hemx.Context(params)
    keys = ctx.keygen(rotations=net.rotations)                 # client
    ct = net.encrypt_input(ctx, keys.public, images[:, None])  # images (n, 8, 8) -> (n, 1, 8, 8)
    out = net.run(ctx, keys.evaluation_keys(), ct)             # server
    logits = net.decrypt_output(ctx, keys.secret, out)[:len(images)]

The whole flow through a client/server split, with timings, is ``hemx demo cnn``
(:func:`hemx.demo.workloads.run_cnn`).
"""

from hemx.apps._cnn_graph import POSITIONS, compile_network, network_graph, network_layers
from hemx.apps._cnn_model import (
    OUTPUT_BOUND,
    CNNModel,
    digits_split,
    load_model,
    plaintext_forward,
    predict,
    save_model,
    train_model,
    value_bounds,
)
from hemx.apps._cnn_params import DEPTH, LAYERS, check_capacity, match_scale, recommended_parameters

__all__ = [
    # model (plaintext)
    "CNNModel", "train_model", "load_model", "save_model", "digits_split", "plaintext_forward", "predict",
    "value_bounds", "OUTPUT_BOUND",
    # parameters
    "recommended_parameters", "match_scale", "check_capacity", "DEPTH", "LAYERS", "POSITIONS",
    # the hemx.nn network
    "network_graph", "compile_network", "network_layers",
]
