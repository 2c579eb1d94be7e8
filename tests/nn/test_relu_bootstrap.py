"""A ReLU network at test size (issue 37): a plain-JAX CNN (two 3x3 convolutions with a residual add, a stride-2
convolution, global average pooling, a dense layer; random weights) imported with ``from_jax``, compiled with the
default sign composite and bootstraps on ``boot_12_relu`` (10 levels after a bootstrap; ``boot_12``'s 3 hold no
ReLU step), calibrated on 8 random images and run encrypted on 2 others, against the JAX function; the bootstrap's
precision at that preset, as ``boot_12``'s."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hemx
from hemx.ckks import Sampler
from hemx.circuits.bootstrap import BootstrapParameters, bootstrapper_for
from hemx.errors import LevelError
from hemx.nn import compile  # noqa: A004
from hemx.nn.trace import from_jax

from tests.circuits.test_bootstrap import MARGIN, MEASURED
from tests.helpers.ckks_helpers import INSECURE, bits_of

pytestmark = pytest.mark.filterwarnings(INSECURE)

CHANNELS, SIDE, CLASSES = 4, 8, 4
SLOTS = 256  # CHANNELS x SIDE x SIDE: one ciphertext per image, a sparse bootstrap
LOGIT_RTOL = 1e-3  # of the logits' range; measured 9.0e-5 (two images, seeded)


def cnn(seed: int = 0):
    """The CNN as a plain JAX function on NCHW images ``(B, 3, 8, 8)`` -> logits ``(B, 4)``, and 10 images."""
    rng = np.random.default_rng(seed)
    c = CHANNELS
    w1 = rng.normal(size=(c, 3, 3, 3)) * np.sqrt(2 / 27)
    w2 = rng.normal(size=(c, c, 3, 3)) * np.sqrt(2 / (9 * c))
    w3 = rng.normal(size=(c, c, 3, 3)) * np.sqrt(2 / (9 * c))
    wd, bd = rng.normal(size=(c, CLASSES)) * 0.5, rng.normal(size=CLASSES) * 0.1
    dims = ("NCHW", "OIHW", "NCHW")

    def fn(x):
        h = jax.nn.relu(jax.lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dims))
        h = jax.nn.relu(jax.lax.conv_general_dilated(h, w2, (1, 1), "SAME", dimension_numbers=dims) + h)
        h = jax.nn.relu(jax.lax.conv_general_dilated(h, w3, (2, 2), ((1, 1), (1, 1)), dimension_numbers=dims))
        return jnp.mean(h, axis=(2, 3)) @ wd + bd

    return fn, rng.normal(size=(10, 3, SIDE, SIDE))


@pytest.mark.parametrize("preset, small, log_n", [("boot_12_relu", "boot_12", 12), ("boot_13_relu", "boot_13", 13)])
def test_relu_presets_leave_ten_levels_after_a_bootstrap(preset, small, log_n):
    """The ReLU presets: boot_12 / boot_13's ring and bootstrap with boot_16's 10 levels after it (25 in all); the
    CNN that boot_12 refuses (a sign stage needs 4 or 5 levels, a bootstrap returns 3) compiles there with the default
    composite, one bootstrap per ReLU or so."""
    params = hemx.CKKSParameters.preset(preset, allow_insecure=True)
    assert (params.log_n, params.max_level, params.name) == (log_n, 25, preset) and not params.secure
    bp = BootstrapParameters.create(params)
    small_params = hemx.CKKSParameters.preset(small, allow_insecure=True)
    base = BootstrapParameters.create(small_params)  # the same bootstrap, 7 levels higher
    assert (base.output_level, bp.output_level, bp.top_level, bp.depth) == (3, 10, 25, base.depth)
    assert (bp.k, bp.message_ratio, bp.supported_bound, bp.degree) == (
        base.k, base.message_ratio, base.supported_bound, base.degree)
    fn, x = cnn()
    g = from_jax(fn, x[:1], input_layout="NCHW")
    with pytest.raises(LevelError, match=r"relu0/sign\d.* needs .*levels"):
        compile(g, small_params, calibration=x[:8])
    net = compile(g, params, calibration=x[:8])
    assert net.plan.bootstrap_level == 10 and 3 <= net.plan.bootstraps <= 8


@pytest.fixture(scope="module")
def encrypted_cnn():
    """The CNN compiled for boot_12_relu on 256 slots, its keys, and its two encrypted images run (seeded)."""
    fn, x = cnn()
    g = from_jax(fn, x[:1], input_layout="NCHW")
    params = hemx.CKKSParameters.preset("boot_12_relu", allow_insecure=True)
    ctx = hemx.Context(params, slots=SLOTS, sampler=Sampler.insecure_for_tests(1))
    start = time.perf_counter()
    net = compile(g, ctx, calibration=x[:8])
    keys = net.keygen(ctx)
    stats = bootstrapper_for(ctx).stats
    calls = stats.compiled_calls + stats.eager_calls
    got = net.decrypt_output(ctx, keys, net.run(ctx, keys, net.encrypt_input(ctx, keys, x[8:])))
    seconds = time.perf_counter() - start
    # every bootstrap of the run went through the context's bootstrapper (compiled or eagerly: Bootstrapper.compiled)
    assert stats.compiled_calls + stats.eager_calls - calls >= net.plan.bootstraps
    return fn, x, ctx, net, keys, got, seconds


def test_encrypted_relu_cnn_with_bootstraps(encrypted_cnn):
    """Compiled, keyed and run encrypted in about 2 minutes of CPU on the 2-core machine (compiling the first
    bootstrap's XLA programs is most of it); logits within 1e-3 of their range of the JAX function's (measured
    9.0e-5), the same argmax."""
    fn, x, _, net, _, got, seconds = encrypted_cnn
    want = np.asarray(fn(x[8:]))
    err = float(np.max(np.abs(got - want)) / np.ptp(want))
    print(f"ReLU CNN, boot_12_relu, {net.plan.bootstraps} bootstraps: logits off by {err:.3g} of their range; "
          f"compile + keys + run {seconds:.1f} s")
    assert net.plan.bootstraps >= 3  # one per ReLU at least: a ReLU takes 18 levels with the default composite
    assert got.shape == want.shape == (2, CLASSES)
    assert err < LOGIT_RTOL
    assert np.array_equal(np.argmax(got, axis=1), np.argmax(want, axis=1))


def test_bootstrap_precision_as_boot12(encrypted_cnn):
    """A bootstrap on boot_12_relu (the network's context and keys: its programs are compiled already) is as
    precise as boot_12's (tests/circuits/test_bootstrap.py: 24.0 bits worst, 26.9 on 64 sparse slots)."""
    _, _, ctx, _, keys, _, _ = encrypted_cnn
    bt = bootstrapper_for(ctx)
    values = np.random.default_rng(7).uniform(-1, 1, (2, ctx.slots))
    out = bt.bootstrap(ctx.drop_level(ctx.encrypt(values, keys), 0), keys)
    assert out.level == 10
    stats = bits_of(values, ctx.decrypt(out, keys))
    print("boot_12_relu, 256 slots", stats)
    assert stats.min_bits >= MEASURED["real"] - MARGIN
