"""CKKS parameters for the encrypted CNN: the recommended 128-bit sets and a guaranteed message-range check.

The depth and the layer names come from the compiled :mod:`hemx.nn` plan (:func:`network_layers`)."""

from __future__ import annotations

import dataclasses
import math

from hemx.apps._cnn_graph import network_layers
from hemx.apps._cnn_model import CNNModel, value_bounds
from hemx.ckks import CKKSParameters
from hemx.errors import LevelError, ParameterError

LAYERS = network_layers()  # the bundled network's level-taking layers, from its compiled plan
DEPTH = len(LAYERS)  # 5: one rescale per layer


def recommended_parameters(*, log_n: int = 14, fast: bool = False) -> CKKSParameters:
    """128-bit parameters (HE standard, ternary secret) for the CNN's five levels.

    Default: N = 2^14 (8192 slots: 128 images per ciphertext), levels of two 24-bit primes (scale 2^48), a base
    of two 31-bit primes (logits up to ~2^13 fit), four 31-bit special primes, dnum = 3: log QP = 425 <= 438.
    ``fast=True``: levels of one 30-bit prime (scale 2^30, 7 limbs, dnum = 2, log QP = 336), about 1.8x
    cheaper per ciphertext but logits only ~1e-3 accurate instead of ~1e-9. ``log_n=15`` doubles the slots.
    """
    if log_n not in (14, 15):
        raise ParameterError(f"recommended parameters exist for log_n 14 and 15, got {log_n!r}; "
                             f"build others with CKKSParameters.create(..., levels={DEPTH})")
    if fast:
        params = CKKSParameters.create(log_n, levels=DEPTH, primes_per_level=1, prime_bits=30, base_bits=(31, 31),
                                       special_bits=31, dnum=2, name=f"cnn_fast_{log_n}")
    else:
        params = CKKSParameters.create(log_n, levels=DEPTH, primes_per_level=2, prime_bits=24, base_bits=(31, 31),
                                       special_bits=31, dnum=3, name=f"cnn_{log_n}")
    return match_scale(params)


def match_scale(params: CKKSParameters) -> CKKSParameters:
    """The same parameters with the fresh scale at the geometric mean of the rescale divisors.

    Primes lie a little below ``2^bits``, so with the default scale ``2^(bits * primes_per_level)`` every square
    followed by a rescale raises the scale slightly, eating message headroom at the last level; a fresh scale
    matched to the divisors keeps it level.
    """
    if not isinstance(params, CKKSParameters):
        raise ParameterError(f"expected CKKSParameters, got {type(params).__name__}")
    if params.max_level < 1:
        return params
    divisors = [math.log2(params.rescale_divisor(level)) for level in range(1, params.max_level + 1)]
    return dataclasses.replace(params, log_scale=sum(divisors) / len(divisors))


def check_capacity(params: CKKSParameters, model: CNNModel) -> None:
    """Raise unless every value of the circuit provably fits the CKKS message range at its level.

    After each layer's rescale, values bounded by :func:`value_bounds` must stay below ``Q_level / (2 scale)``
    with a factor-2 margin; otherwise decryption would wrap around silently and give wrong logits.
    """
    if not isinstance(params, CKKSParameters):
        raise ParameterError(f"expected CKKSParameters, got {type(params).__name__}")
    layers = network_layers(model)
    depth = len(layers)
    if params.max_level < depth:
        raise LevelError(f"the CNN needs {depth} levels, the parameters have {params.max_level}; "
                         "use recommended_parameters()")
    bounds = value_bounds(model)  # after conv, square, fc1, square, fc2: the layers that take a level
    if len(bounds) != depth:
        raise ParameterError(f"internal: {len(bounds)} value bounds for the {depth} levels of {layers}")
    fresh = params.log_scale
    after_square1 = 2 * fresh - math.log2(params.rescale_divisor(depth - 1))
    after_square2 = 2 * after_square1 - math.log2(params.rescale_divisor(depth - 3))
    log_scales = (fresh, after_square1, after_square1, after_square2, after_square2)
    for i, (bound, log_scale) in enumerate(zip(bounds, log_scales)):
        level = depth - 1 - i
        log_q = sum(math.log2(q) for q in params.moduli[: params.limbs_at_level(level)])
        room = log_q - 1 - log_scale - 1  # centered residues, and a factor-2 margin
        if bound > 0 and math.log2(bound) > room:
            raise ParameterError(
                f"after the {layers[i]} layer values may reach {bound:.4g}, beyond what level {level} holds "
                f"(about {2.0 ** room:.4g} with margin); scale the model's output layer down (fc2_w and fc2_b: "
                "the argmax is unchanged) or use parameters with a larger base or a smaller scale"
            )
