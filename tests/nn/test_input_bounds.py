"""Inputs outside the range a network was compiled for (issue 37): ``CompiledNetwork.encrypt_input`` and the
client of the client/server split (:mod:`hemx.demo.resnet`) compare ``max |x|`` with the calibrated input bound
(calibration ``max |x|`` times the margin) and refuse what exceeds it (``BoundError``) or warn on request."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.ckks import Sampler
from hemx.errors import BoundError, BoundWarning, ParameterError, SerializationError
from hemx.nn import activations as A
from hemx.nn import graph as G
from hemx.nn.compiler import DEFAULT_MARGIN, compile
from hemx.nn.run import check_input_bound

from tests.helpers.ckks_helpers import INSECURE, context_and_keys, small_params
from tests.nn._models import residual_graph

pytestmark = pytest.mark.filterwarnings(INSECURE)


def _relu_case():
    """A dense layer, a ReLU and a dense layer on the simulator with parameters (default composite)."""
    rng = np.random.default_rng(3)
    g = G.sequential((8,), [G.Dense(rng.normal(size=(8, 8)) * 0.5, rng.normal(size=8) * 0.1), G.Activation("relu"),
                            G.Dense(rng.normal(size=(3, 8)), rng.normal(size=3) * 0.1)])
    x = rng.normal(size=(16, 8))
    sim = SlotSimulator(small_params(10, 20), slots=64)
    return g, x, sim, compile(g, sim, calibration=x)


def test_input_bound_is_the_calibrated_one():
    g, x, _, net = _relu_case()
    assert net.input_bound == pytest.approx(float(np.max(np.abs(x))) * DEFAULT_MARGIN, rel=1e-12)


def test_fifty_times_the_range_is_refused_on_the_simulator():
    """50 x the calibration data: the ReLU's p(x / B) leaves [-1, 1] and the logits are far off, so encrypting it
    raises; with on_bound="warn" it runs and shows how wrong the silent result was."""
    g, x, sim, net = _relu_case()
    big = 50.0 * x
    with pytest.raises(BoundError, match=r"exceeds the bound .* by a factor 41\.67.*[Nn]ormalise.*margin") as err:
        net.encrypt_input(sim, None, big)
    assert "max |x| = " in str(err.value) and "on_bound='warn'" in str(err.value)
    with pytest.warns(BoundWarning, match="exceeds the bound"):
        ct = net.encrypt_input(sim, None, big, on_bound="warn")
    with np.errstate(over="ignore", invalid="ignore"):  # the composite diverges past [-1, 1]: inf, then nan
        got = net.decrypt_output(sim, None, net.run(sim, None, ct))
        want = G.reference(g, big)
        off = float(np.max(np.abs(got - want)) / np.ptp(want))
    print(f"50 x the calibrated range, on_bound='warn': logits off by {off:.3g} times their range")
    assert not off <= 10.0  # what the check prevents: a silently wrong result (inf / nan on the simulator)


def test_just_inside_accepted_just_outside_refused():
    g, x, sim, net = _relu_case()
    bound, peak = net.input_bound, float(np.max(np.abs(x)))
    inside = x[:2] * (0.999 * bound / np.max(np.abs(x[:2])))  # up to margin x the calibration max: accepted
    assert np.max(np.abs(inside)) > peak * 1.19
    got = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, inside)))
    err = np.max(np.abs(got - G.reference(g, inside)))
    assert err <= 0.05 * np.ptp(G.reference(g, inside))  # the ReLU approximation's error, no blow-up
    outside = x[:2] * (1.001 * bound / np.max(np.abs(x[:2])))
    with pytest.raises(BoundError, match="factor 1.001"):
        net.encrypt_input(sim, None, outside)
    with pytest.raises(BoundError):  # one image (no batch axis) as well
        net.encrypt_input(sim, None, outside[int(np.argmax(np.max(np.abs(outside), axis=1)))])
    with warnings.catch_warnings():
        warnings.simplefilter("error", BoundWarning)
        net.encrypt_input(sim, None, -x[:1])  # the sign does not matter, nor does the warn option within bounds
        net.encrypt_input(sim, None, x[:1], on_bound="warn")


def test_infer_refuses_before_keys_or_warns_per_batch(monkeypatch):
    """hemx.nn.infer: out-of-range images are refused before any key is made (the default) or, with
    on_bound="warn", run with one warning per batch that exceeds the bound."""
    from hemx.nn import infer as infer_module

    g, x, sim, net = _relu_case()
    images = np.concatenate([x[:2], 50.0 * x[2:3]])  # the third image is 50 x the calibrated range
    made = []
    monkeypatch.setattr(infer_module, "make_keys", lambda *a: made.append(a))
    with pytest.raises(BoundError, match="exceeds the bound"):
        infer_module.infer(net, sim, images)
    ctx = object()  # no key is made: the check comes first, whatever the backend
    with pytest.raises(BoundError):
        infer_module.infer(net, ctx, images)
    assert made == []
    with pytest.warns(BoundWarning) as caught, np.errstate(over="ignore", invalid="ignore"):
        result = infer_module.infer(net, sim, images, on_bound="warn")  # the composite diverges: inf / nan
    assert len([w for w in caught if issubclass(w.category, BoundWarning)]) == 1  # only the third image's batch
    assert result.logits.shape == (3, 3)
    inside = infer_module.infer(net, sim, x[:2]).logits
    np.testing.assert_allclose(inside, result.logits[:2], rtol=0, atol=0)
    with pytest.raises(ParameterError, match="on_bound"):
        infer_module.infer(net, sim, x[:2], on_bound="ignore")


def test_bad_inputs_and_options():
    _, x, sim, net = _relu_case()
    with pytest.raises(ParameterError, match="on_bound"):
        net.encrypt_input(sim, None, x[:1], on_bound="ignore")
    bad = x[:1].copy()
    bad[0, 0] = np.nan
    with pytest.raises(BoundError, match="not finite"):
        net.encrypt_input(sim, None, bad, on_bound="warn")
    with pytest.raises(ParameterError, match="numbers"):
        check_input_bound(np.array(["a"]), 1.0)
    assert check_input_bound(np.array([-3.0, 2.0]), None) == 3.0  # no bound: nothing checked


def test_uncalibrated_network_has_no_input_bound():
    """A linear network compiled without calibration data: no bound to check, any input is encrypted."""
    rng = np.random.default_rng(4)
    g = G.sequential((8,), [G.Dense(rng.normal(size=(3, 8)), None)])
    sim = SlotSimulator(None, slots=64, max_level=4)
    net = compile(g, sim)
    assert net.input_bound is None
    x = 1e3 * rng.normal(size=(2, 8))
    got = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    assert np.allclose(got, G.reference(g, x), rtol=1e-9, atol=1e-9)


def test_encrypted_refusal_small_ring():
    """On ciphertexts (N = 2^11): the same check before anything is encrypted; within bounds the ReLU runs."""
    comp = A.sign_composite((3, 3), 0.25)
    rng = np.random.default_rng(8)
    g = G.sequential((2, 4, 4), [G.Activation("relu")])
    x = rng.normal(size=(2, 2, 4, 4))
    net = compile(g, small_params(11, 6), calibration=x, relu=comp)
    ctx, keys = context_and_keys(11, 6, rotations=net.rotations)
    with pytest.raises(BoundError, match="factor 41.67"):
        net.encrypt_input(ctx, keys, 50.0 * x)
    with pytest.warns(BoundWarning):
        ct = net.encrypt_input(ctx, keys, 50.0 * x, on_bound="warn")
    assert ct.level == net.plan.input_level
    got = net.decrypt_output(ctx, keys, net.run(ctx, keys, net.encrypt_input(ctx, keys, x)))
    assert np.max(np.abs(got - A.relu_approx(x, net.bounds["input"], comp))) <= 1e-6 * np.max(np.abs(x))


def test_client_server_interface_carries_the_bound():
    """The server's interface names the input bound; the client checks every input against it before encrypting."""
    from hemx.demo.resnet import ModelClient, ModelServer

    rng = np.random.default_rng(5)
    g = residual_graph(rng, act=(0.1, 0.5, 0.2))
    x = rng.normal(size=(4, 2, 8, 8))
    params = small_params(11, 6)
    client = ModelClient(params, sampler=Sampler.insecure_for_tests(3))
    server = ModelServer(client.context_bytes(), g, x)
    interface = server.interface()
    doc = json.loads(interface)
    assert doc["input_bound"] == pytest.approx(server.network.input_bound, rel=0)
    assert doc["input_bound"] == pytest.approx(float(np.max(np.abs(x))) * DEFAULT_MARGIN, rel=1e-12)
    client.make_keys(server.key_request())
    client.set_interface(interface)
    assert isinstance(client.encrypt(x[0]), bytes)
    with pytest.raises(BoundError, match="exceeds the bound"):
        client.encrypt(50.0 * x[0])
    with pytest.warns(BoundWarning):
        assert isinstance(client.encrypt(50.0 * x[0], on_bound="warn"), bytes)
    missing = {k: v for k, v in doc.items() if k != "input_bound"}
    with pytest.raises(SerializationError, match="bad interface"):
        client.set_interface(json.dumps(missing).encode())
    with pytest.raises(SerializationError, match="input_bound"):
        client.set_interface(json.dumps(dict(doc, input_bound=-1.0)).encode())
