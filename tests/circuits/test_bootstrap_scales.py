"""Regression for issue 14: ``boot_16`` bootstrapping decrypted to garbage (-1.5 bits) while boot_12 / boot_13
were right.

Cause: EvalMod received its batch at the context's scale ``D = 2^56``, but the level divisors of boot_16 (two
28-bit primes = 1 mod 2^17 each, which sit well below 2^28) are 2^55.4 .. 2^56. A rescaled product of two
ciphertexts at scale ``s`` has scale ``s^2 / q``, so the Chebyshev powers ``T_(2^j)`` drifted by
``(D / q)^(2^j)``: intermediate scales fell to 2^36 and constants were rounded at plain scales of 2^33, i.e.
about 2^-20 of relative noise, which the bootstrap multiplies by ``q0 / D`` and SlotsToCoeffs spreads over 2^15
slots. At N = 2^12 the divisors are within 0.03 bits of 2^56, so nothing showed there.

The check runs the bootstrapper's own EvalMod stage (``Bootstrapper.eval_mod``, at the scale and level the
pipeline gives it) on the slot simulator, which keeps CKKS's exact scale bookkeeping and rounds constants as
CKKS does. The FFT factors are not encoded (minutes and gigabytes at N = 2^16): they play no part here.
Measured (development CPU): before the fix (EvalMod input and target at ``D``) boot_16 gave an error of 2^-34.5,
a smallest intermediate scale of 2^36.2 and a smallest plain scale of 2^33.3 (this test fails); after it 2^-43.2,
2^54.7 and 2^55.4. boot_12 gives 2^-43.2 either way.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import hemx
from hemx.ckks import Sampler
from hemx.circuits.bootstrap import bootstrapper as bootstrapper_mod
from hemx.circuits.evaluator import SlotSimulator

from tests.helpers.ckks_helpers import INSECURE

pytestmark = pytest.mark.filterwarnings(INSECURE)


class _Recording(SlotSimulator):
    """The slot simulator, recording the smallest scale after a rescale and the smallest constant plain scale."""

    def __init__(self, params, *, slots):
        super().__init__(params, slots=slots)
        self.min_scale = math.inf
        self.min_plain_scale = math.inf

    def rescale(self, x):
        y = super().rescale(x)
        self.min_scale = min(self.min_scale, y.scale)
        return y

    def mul_const(self, x, value, *, plain_scale):
        self.min_plain_scale = min(self.min_plain_scale, plain_scale)
        return super().mul_const(x, value, plain_scale=plain_scale)


class _NoTransform:
    """Stands in for the FFT factors' LinearTransform: nothing is encoded, no rotation is needed."""

    def __init__(self, *args, **kwargs):
        self.rotations = ()


@pytest.mark.parametrize("preset", ["boot_12", "boot_16"])
def test_evalmod_stage_keeps_scales_near_the_level_divisors(monkeypatch, preset):
    params = hemx.CKKSParameters.preset(preset, allow_insecure=True)
    ctx = hemx.Context(params, ntt="butterfly", planning="off", sampler=Sampler.insecure_for_tests(1))
    monkeypatch.setattr(bootstrapper_mod, "LinearTransform", _NoTransform)
    bt = bootstrapper_mod.Bootstrapper(ctx)
    norm_level = bt.plan.top_level - bt.plan.cts_levels
    # the scale of the batch EvalMod gets: CoeffsToSlots' output (at S) times the integer 2^P, rescaled
    t_scale = bt.raised_scale * 2.0 ** bt.power / ctx.rescale_divisor(norm_level)
    rng = np.random.default_rng(14)
    count = 4096
    overflow = rng.integers(-bt.k, bt.k + 1, count)  # I, |I| <= K
    message = rng.uniform(-1, 1, count) * ctx.params.scale / bt.q0  # m / q0
    t = (overflow + message) / (bt.k + 1)
    sim = _Recording(params, slots=count)
    y = bt.eval_mod(sim, sim.encrypt(np.stack([t, -t]), level=norm_level - 1, scale=t_scale))
    want = np.sin(2 * np.pi * (bt.k + 1) * np.stack([t, -t]))
    err = float(np.max(np.abs(y.values - want)))
    print(preset, f"error 2^{math.log2(err):.1f}, smallest scale 2^{math.log2(sim.min_scale):.1f}, "
                  f"smallest plain scale 2^{math.log2(sim.min_plain_scale):.1f}")
    assert y.level == bt.plan.output_level + bt.plan.stc_levels
    assert err < 2.0 ** -40  # the float64 interpolant alone: ~2^-43
    assert math.log2(sim.min_scale) > 52 and math.log2(sim.min_plain_scale) > 52
