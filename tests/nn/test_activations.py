"""hemx.nn.activations: the composite sign approximation, the ReLU error bound measured on dense grids, and the
ReLU circuit on the slot simulator (exact scales, the float64 model to 1e-9)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.errors import ParameterError
from hemx.nn import activations as A
from hemx.nn.graph import Activation, apply_layer

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


@pytest.mark.parametrize("kind", ["sigmoid", "tanh"])
@pytest.mark.parametrize("bound,degree", [(2.0, 7), (4.0, 15), (8.0, 15), (3.0, 11)])
def test_smooth_fit_error_within_its_stated_bound(kind, bound, degree):
    """The fitted sigmoid / tanh on random points of [-B, B] (not the measuring grid) stays within ``fit.error``;
    the interpolant keeps the function's symmetry (tanh odd, sigmoid - 1/2 odd)."""
    fit = A.smooth_fit(kind, bound, degree)
    x = np.random.default_rng(degree).uniform(-bound, bound, 1 << 18)
    assert np.max(np.abs(fit(x) - A.SMOOTH[kind](x))) <= fit.error
    assert fit.stage.interval == (-bound, bound) and len(fit.stage.coeffs) == degree + 1
    centre = 0.0 if kind == "tanh" else 0.5
    np.testing.assert_allclose(fit(-x) - centre, -(fit(x) - centre), atol=1e-14)
    assert fit.error < {7: 0.1, 11: 1e-2, 15: 0.06}[degree] and fit.peak < 1.05


def test_smooth_fit_error_falls_with_the_degree_and_the_range():
    for kind in ("sigmoid", "tanh"):
        errors = [A.smooth_fit(kind, 4.0, d).error for d in (5, 9, 15, 21)]
        assert all(a > b for a, b in zip(errors, errors[1:]))
        assert A.smooth_fit(kind, 2.0, 15).error < A.smooth_fit(kind, 8.0, 15).error
    assert A.smooth_fit("sigmoid", 4.0, 15).error < 1e-5  # the figures of smooth_fit's docstring
    assert A.smooth_fit("tanh", 4.0, 15).error < 3e-3


def test_smooth_fit_on_the_simulator():
    """The fitted polynomial evaluated on the simulator (Chebyshev basis on (-B, B)): its float64 model to 1e-9."""
    sim = SlotSimulator(small_params(10, 8), slots=64)
    fit = A.smooth_fit("tanh", 3.0, 15)
    x = np.linspace(-3.0, 3.0, 64)
    y = fit.stage.evaluate(sim, sim.encrypt(x, level=8))
    assert sim.level(y) == 8 - fit.stage.depth()
    np.testing.assert_allclose(sim.decrypt(y).real, fit(x), atol=1e-9)


@pytest.mark.parametrize("args,match", [
    (("softplus", 2.0), "kind must be one of"),
    (("tanh", 0.0), "bound must be a positive"),
    (("tanh", float("inf")), "bound must be a positive"),
    (("sigmoid", 2.0, 0), "degree must be an integer"),
    (("sigmoid", 2.0, 2.5), "degree must be an integer"),
])
def test_smooth_fit_bad_arguments(args, match):
    with pytest.raises(ParameterError, match=match):
        A.smooth_fit(*args)


def test_sigmoid_tanh_activation_records():
    assert Activation("sigmoid").degree == A.DEFAULT_SMOOTH_DEGREE and Activation("tanh", degree=9).degree == 9
    x = np.linspace(-5, 5, 11)[None]
    np.testing.assert_allclose(apply_layer(Activation("sigmoid"), [x]), 1 / (1 + np.exp(-x)), rtol=1e-14)
    np.testing.assert_allclose(apply_layer(Activation("tanh"), [x]), np.tanh(x), rtol=1e-14)
    with pytest.raises(ParameterError, match="takes no coefficients"):
        Activation("tanh", coeffs=(0.0, 1.0))
    with pytest.raises(ParameterError, match="degree must be an integer"):
        Activation("sigmoid", degree=0)
    with pytest.raises(ParameterError, match="takes no degree"):
        Activation("relu", degree=3)
    with pytest.raises(ParameterError, match="kind must be one of"):
        Activation("gelu")


def test_composite_that_cannot_reach_its_eps_is_refused():
    """(7, 7, 7, 3) at 2^-10: error 2^-1.34 on [eps, 1], a ReLU error bound of 0.197 B; refused (ParameterError
    naming the degrees, the error and the default composite), or returned with an AccuracyWarning on request."""
    import warnings

    from hemx.errors import AccuracyWarning

    with pytest.raises(ParameterError, match=r"degrees \(7, 7, 7, 3\) does not reach its eps = 2\^-10\.00: .* is "
                                             r"0\.394 \(2\^-1\.34\).*0\.197 B.*\(7, 7, 15, 15\)"):
        A.sign_composite((7, 7, 7, 3))
    with pytest.warns(AccuracyWarning, match="does not reach its eps") as record:
        comp = A.sign_composite((7, 7, 7, 3), on_accuracy="warn")
    assert record[0].filename == __file__  # the warning names the caller's line
    assert comp.error > A.MAX_ERROR_PER_EPS * comp.eps
    assert A.relu_error_bound(1.0, comp) == pytest.approx(0.197, abs=5e-4)
    with pytest.warns(AccuracyWarning):  # again: the cached composite is checked on every call
        A.sign_composite([7, 7, 7, 3], on_accuracy="warn")
    with pytest.raises(ParameterError, match="on_accuracy"):
        A.sign_composite(on_accuracy="off")
    with pytest.raises(ParameterError, match=r"degrees \(15, 15, 27\)"):  # Lee et al.'s at 2^-12 (module docstring)
        A.sign_composite((15, 15, 27), 2.0 ** -12)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        for degrees, eps in [((7, 7, 15, 15), 2.0 ** -10), ((15, 15, 15), 2.0 ** -8), ((3, 3), 0.25),
                             ((15, 15), 2.0 ** -6)]:  # composites that reach their eps: accepted in silence
            comp = A.sign_composite(degrees, eps, on_accuracy="warn")
            assert comp.error <= A.MAX_ERROR_PER_EPS * eps
            assert A.relu_error_bound(1.0, comp) <= eps * max(1.0, (1 + comp.peak) / 2) * (1 + 1e-3)
