"""Precision enforced at compile time (issue 37): ``compile`` warns (``AccuracyWarning``) for each activation whose
worst-case approximation error (ReLU: ``relu_error_bound`` at its bound; sigmoid / tanh: the fit's measured error)
exceeds ``max_relative_error`` (default 1e-2) of the output's bound, naming the activation and the numbers. That
``sign_composite((7, 7, 7, 3))`` is refused or warns is tests/nn/test_activations.py's."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.errors import AccuracyWarning, ParameterError
from hemx.nn import activations as A
from hemx.nn import graph as G
from hemx.nn.compiler import DEFAULT_MAX_RELATIVE_ERROR, check_accuracy, compile

from tests.helpers.ckks_helpers import INSECURE, small_params

pytestmark = pytest.mark.filterwarnings(INSECURE)


def _relu_net(scale_out: float = 1.0):
    """dense -> ReLU -> dense (its weights times ``scale_out``) on 8 features, 16 calibration vectors."""
    rng = np.random.default_rng(4)
    g = G.sequential((8,), [G.Dense(rng.normal(size=(8, 8)), rng.normal(size=8) * 0.1), G.Activation("relu"),
                            G.Dense(rng.normal(size=(3, 8)) * scale_out, rng.normal(size=3) * 0.1 * scale_out)])
    return g, rng.normal(size=(16, 8))


def _sim():
    return SlotSimulator(small_params(10, 24), slots=64)


def test_the_default_composite_does_not_warn():
    g, x = _relu_net()
    with warnings.catch_warnings():
        warnings.simplefilter("error", AccuracyWarning)
        net = compile(g, _sim(), calibration=x)
    (row,) = net.plan.activations
    assert row["error"] < DEFAULT_MAX_RELATIVE_ERROR * net.bounds[g.nodes[-1].name]
    assert check_accuracy(net) == []


def test_an_imprecise_composite_warns_with_the_numbers():
    """(7, 7, 7, 3) (accepted with on_accuracy="warn"): a ReLU error bound of 0.197 B, far above 1e-2 of the
    logits' bound; the warning names the activation, its error, the fraction and the option."""
    g, x = _relu_net()
    with pytest.warns(AccuracyWarning, match="does not reach its eps"):
        comp = A.sign_composite((7, 7, 7, 3), on_accuracy="warn")
    with pytest.warns(AccuracyWarning) as record:
        net = compile(g, _sim(), calibration=x, relu=comp)
    msg = str(record[-1].message)
    out = net.bounds[g.nodes[-1].name]  # the logits' calibrated bound
    err = A.relu_error_bound(net.plan.activations[0]["bound"], comp)
    assert err > 0.1 * out
    assert f"activation {g.nodes[2].name!r} (relu): its worst-case approximation error {err:.3g}" in msg
    assert f"is {err / out:.3g} of the output's bound {out:.4g}" in msg and "max_relative_error=0.01" in msg
    assert "sign_composite(degrees, eps)" in msg
    assert record[-1].filename == __file__  # points at the caller's line
    with warnings.catch_warnings():  # switched off, or a fraction the error stays within
        warnings.simplefilter("error", AccuracyWarning)
        compile(g, _sim(), calibration=x, relu=comp, max_relative_error=None)
        compile(g, _sim(), calibration=x, relu=comp, max_relative_error=1.5 * err / out)


def test_small_logits_make_the_default_composite_warn():
    """The same network with its last layer scaled by 1e-3: the ReLU's error (about 2^-10 of its bound) is now far
    above 1e-2 of the logits' bound; max_relative_error= a larger fraction accepts it."""
    g, x = _relu_net(scale_out=1e-3)
    with pytest.warns(AccuracyWarning, match=r"activation 'activation_1' \(relu\)"):
        net = compile(g, _sim(), calibration=x)
    with pytest.warns(AccuracyWarning):
        assert len(check_accuracy(net, 1e-2)) == 1
    ratio = net.plan.activations[0]["error"] / net.bounds[g.nodes[-1].name]
    assert check_accuracy(net, 2 * ratio) == []


def test_a_low_degree_sigmoid_fit_warns():
    """sigmoid of degree 3 on a wide range: its fitted max error (SmoothFit.error) is the one compared."""
    rng = np.random.default_rng(5)
    g = G.sequential((4,), [G.Dense(rng.normal(size=(4, 4)) * 3.0, None), G.Activation("sigmoid", degree=3),
                            G.Dense(rng.normal(size=(2, 4)) * 0.1, None)])
    x = rng.normal(size=(16, 4))
    with pytest.warns(AccuracyWarning, match=r"activation 'activation_1' \(sigmoid\).*a higher degree"):
        net = compile(g, _sim(), calibration=x)
    (row,) = net.plan.activations
    assert row["error"] == A.smooth_fit("sigmoid", row["bound"], 3).error


def test_bad_fractions_are_refused():
    g, x = _relu_net()
    for bad in (0, -1e-2, float("nan"), float("inf"), True, "1e-2"):
        with pytest.raises(ParameterError, match="max_relative_error must be a positive number"):
            compile(g, _sim(), calibration=x, max_relative_error=bad)
