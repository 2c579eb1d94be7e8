"""hemx.nn.activations: the composite sign approximation, the ReLU error bound measured on dense grids, and the
ReLU circuit on the slot simulator (exact scales, the float64 model to 1e-9)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.errors import ParameterError
from hemx.nn import activations as A

from tests.helpers.ckks_helpers import small_params


def test_default_composite_figures():
    """The figures the module docstring states: error <= 2^-10.3 outside the gap 2^-10, depth 14."""
    comp = A.sign_composite()
    assert comp.degrees == (7, 7, 15, 15) and comp.eps == 2.0 ** -10
    assert comp.error <= 2.0 ** -10.3 and comp.peak <= 1.001 and comp.depth == 14
    t = np.linspace(-1, 1, 20001)
    assert np.allclose(comp(-t), -comp(t), atol=1e-14, rtol=0)  # odd


def test_sign_error_on_a_dense_grid():
    """Measured on a grid other than the one the figures were taken on (random points, 2^21 of them)."""
    comp = A.sign_composite()
    rng = np.random.default_rng(1)
    t = np.concatenate([rng.uniform(comp.eps, 1.0, 1 << 21), np.geomspace(comp.eps, 1.0, 1 << 16)])
    t = np.concatenate([t, -t])
    assert np.max(np.abs(comp(t) - np.sign(t))) <= comp.error * (1 + 1e-3)
    assert np.max(np.abs(comp(rng.uniform(-1, 1, 1 << 20)))) <= comp.peak * (1 + 1e-3)


@pytest.mark.parametrize("bound", [1.0, 3.7, 50.0])
def test_relu_error_bound_holds_on_a_dense_grid(bound):
    comp = A.sign_composite()
    x = np.concatenate([np.linspace(-bound, bound, (1 << 21) + 1),
                        np.linspace(-4 * comp.eps * bound, 4 * comp.eps * bound, 1 << 16)])
    worst = float(np.max(np.abs(A.relu_approx(x, bound, comp) - np.maximum(x, 0.0))))
    limit = A.relu_error_bound(bound, comp)
    assert worst <= limit
    assert limit <= bound * 2.0 ** -9.9  # about B * 2^-10, as documented
    print(f"B={bound}: worst {worst:.3g} <= bound {limit:.3g} (2^{math.log2(worst / bound):.2f} B)")


def test_other_composites_and_bad_degrees():
    comp = A.sign_composite((15, 15, 15), 2.0 ** -8)
    assert comp.error <= 2.0 ** -14 and comp.depth == 12
    for bad in [(), (6, 7), (1,)]:
        with pytest.raises(ParameterError):
            A.sign_composite(bad)
    with pytest.raises(ParameterError):
        A.sign_composite((7, 7), 0.7)
    with pytest.raises(ParameterError):
        A.relu_error_bound(-1.0)


def test_relu_circuit_on_the_simulator():
    """x * s'(x / B) with the stages of relu_stages on a simulator with parameters: the float64 model to 1e-9."""
    sim = SlotSimulator(small_params(10, 18))
    rng = np.random.default_rng(2)
    bound = 6.0
    x = rng.uniform(-bound, bound, sim.slots)
    ct = sim.encrypt(x)
    t = sim.rescale(sim.mul_const(ct, 1.0 / bound, plain_scale=sim.rescale_divisor(ct.level)))
    for stage in A.relu_stages(1.0):
        t = stage.evaluate(sim, t)
    level = min(ct.level, t.level)
    y = sim.mul(sim.drop_level(ct, level), sim.drop_level(t, level), rescale=True)
    want = A.relu_approx(x, bound)
    assert np.max(np.abs(y.values - want)) <= 1e-9 * bound
    assert np.max(np.abs(y.values - np.maximum(x, 0))) <= A.relu_error_bound(bound)
    assert ct.level - y.level == 1 + A.sign_composite().depth + 1  # x / B, the stages, the product
