"""ReLU and max that survive outliers (issue 37): compile(relu_domain=F) scales each comparison by 1 / (F B) with a
composite whose gap is F times smaller, so inputs up to F times the calibrated bound still give ReLU within the
stated error; its cost in levels; inputs beyond the network's input bound are refused at encrypt_input."""

from __future__ import annotations

import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.errors import BoundError, ParameterError
from hemx.nn import activations as A
from hemx.nn import compile, graph as G
from tests.helpers.ckks_helpers import small_params


@pytest.mark.parametrize("domain", [1.0, 2.0, 4.0, 8.0])
def test_relu_within_its_error_up_to_the_domain(domain):
    """float64, on the polynomial stages the runtime evaluates (relu_stages): over [-F B, F B] the error is at most
    relu_error_bound(F B, composite), and on [-B, B] at most relu_error_bound(B, composite, domain=F); both about
    2^-10 B: the gap in x stays 2^-10 B."""
    b = 3.0
    comp = A.domain_composite(domain)
    x = np.concatenate([np.linspace(-domain * b, domain * b, 400_001), np.geomspace(1e-9, domain * b, 100_000)])
    y = x.copy()
    for stage in A.relu_stages(b, comp, domain=domain):
        lo, hi = stage.interval
        y = np.polynomial.chebyshev.chebval((2 * y - (lo + hi)) / (hi - lo), stage.coeffs)
    got = x * y
    err = np.abs(got - np.maximum(x, 0.0))
    assert np.allclose(got, A.relu_approx(x, b, comp, domain=domain), atol=1e-12 * b)
    assert np.max(err) <= A.relu_error_bound(domain * b, comp)
    inside = np.abs(x) <= b
    assert np.max(err[inside]) <= A.relu_error_bound(b, comp, domain=domain)
    assert A.relu_error_bound(domain * b, comp) <= 1.01 * 2.0 ** -10 * b


def test_default_domain_and_its_cost():
    assert A.DEFAULT_RELU_DOMAIN >= 4.0
    base, wide = A.domain_composite(1.0), A.domain_composite(A.DEFAULT_RELU_DOMAIN)
    assert base.degrees == A.DEFAULT_DEGREES and wide.depth - base.depth == 2
    assert A.domain_composite(3.0) is A.domain_composite(4.0)  # the smallest tabulated factor above
    with pytest.raises(ParameterError, match="relu_domain"):
        A.domain_composite(0.5)
    with pytest.raises(ParameterError, match="no default sign composite"):
        A.domain_composite(100.0)


def _net(domain):
    rng = np.random.default_rng(7)
    g = G.sequential((2, 6, 6), [G.Conv2D(rng.normal(size=(3, 2, 3, 3)) * 0.4, rng.normal(size=3) * 0.1, 1,
                                          ((1, 1), (1, 1))),
                                 G.Activation("relu"), G.MaxPool2D(2, 2), G.Flatten(),
                                 G.Dense(rng.normal(size=(4, 27)) * 0.3, rng.normal(size=4) * 0.1)])
    x = rng.normal(size=(4, 2, 6, 6))
    sim = SlotSimulator(small_params(10, 24), slots=256)
    kwargs = {} if domain is None else dict(relu_domain=domain)
    return g, x, sim, compile(g, sim, calibration=x, bootstrap=True, bootstrap_level=20, **kwargs)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # relu_domain=1 diverges on the outlier (overflow): expected
def test_network_computes_outlier_activations_right_within_the_domain():
    """Calibrated on x, run on inputs whose hidden activations exceed their calibrated bounds (a conv bias pushed
    up by an input pattern the calibration did not hold, within the input bound): the default domain computes the
    logits right, relu_domain=1 does not; the plan states the extra levels."""
    g, x, sim, net = _net(None)
    assert net.plan.relu_domain == A.DEFAULT_RELU_DOMAIN and net.plan.relu_extra_levels == 2
    assert "+2 levels per ReLU" in net.plan.summary()
    b_in = max(np.max(np.abs(x)), 1e-12) * 1.2
    # the input pattern that maximises the first conv's first channel at the centre, within the input bound
    w = g.nodes[1].layer.weight[0]
    z = np.zeros((1, 2, 6, 6))
    z[0, :, 1:4, 1:4] = np.sign(w) * b_in * 0.999
    kept = G.reference(g, z, keep=True)
    conv = g.nodes[1].name
    ratio = np.max(np.abs(kept[conv])) / net.bounds[conv]
    assert 1.5 < ratio < A.DEFAULT_RELU_DOMAIN
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, z)))
    want = G.reference(g, z)
    assert np.max(np.abs(out - want)) < 1e-2 * np.max(np.abs(want))
    _, _, _, narrow = _net(1.0)
    assert narrow.plan.relu_extra_levels == 0
    bad = narrow.decrypt_output(sim, None, narrow.run(sim, None, narrow.encrypt_input(sim, None, z)))
    assert not np.max(np.abs(bad - want)) < 1e-2 * np.max(np.abs(want))


def test_inputs_beyond_the_input_bound_are_refused():
    """The issue's 50x case: refused at encrypt_input; just inside the bound accepted, just outside refused."""
    g, x, sim, net = _net(None)
    b_in = net.input_bound
    with pytest.raises(BoundError):
        net.encrypt_input(sim, None, 50 * x)
    inside = x / np.max(np.abs(x)) * b_in * (1 - 1e-9)
    net.encrypt_input(sim, None, inside)
    with pytest.raises(BoundError):
        net.encrypt_input(sim, None, inside * (1 + 1e-6))
