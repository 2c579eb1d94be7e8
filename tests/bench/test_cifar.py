"""hemx bench cifar: the pretrained Keras CIFAR-10 CNN compiled for boot_16 (the plan) and its first two foolbox
images through the slot simulator with the ReLU approximation: predictions equal the plaintext network's, the
logit error is small, every ReLU input stays inside its bound; bad arguments raise ParameterError.

The full 20-image run is ``hemx bench cifar`` (docs/results/cifar-cpu.md)."""

from __future__ import annotations

import json

import pytest

from hemx.bench import cifar
from hemx.errors import ParameterError

from tests.helpers import nn_data


@pytest.fixture(scope="module")
def cifar10_files():
    return nn_data.cifar10_files()[0]


def test_plan_and_two_images_simulated(cifar10_files, tmp_path):
    out = cifar.bench(simulate=2, batch=2)
    plain = out["plain"]
    assert plain["accuracy"] == 1.0 and plain["predictions"] == plain["labels"]  # 20 / 20 (tests/nn/test_keras.py)
    assert 0 < plain["min_decision_margin"] < plain["logit_range"]

    plan = out["plan"]
    assert plan["slots"] == 2**15 and plan["bootstrap_level"] is not None
    assert 1 <= plan["input_level"] <= 25 and 1 <= plan["bootstrap_level"] <= 25
    # 9 ReLUs and 2 max pools of 2 comparisons: every one needs more levels than a bootstrap returns
    relu = out["relu"]
    assert relu["comparisons"] == 13 and relu["levels_per_relu"] > plan["bootstrap_level"]
    assert plan["bootstraps"] >= relu["comparisons"] and plan["bootstrapped_ciphertexts"] >= plan["bootstraps"]
    assert plan["rotations"] > 0 and plan["plaintext_mults"] > 0 and plan["ct_mults"] > 0
    assert plan["network_keys"] == 1 + plan["rotation_keys"] and plan["rotation_keys"] > 0
    assert plan["full_key_bytes"] < plan["network_key_bytes"] <= plan["network_keys"] * plan["full_key_bytes"]
    # the counts, keys, then the precision lines: bounds used, the ReLU's valid domain, the worst activation error
    assert len(plan["totals"]) == 7 and plan["totals"][4].startswith("bounds: calibrated")
    assert "worst-case activation error" in plan["totals"][6] and sum(r["bootstraps"] for r in plan["layers"]) == plan["bootstraps"]
    assert relu["degrees"] == list(cifar.DEFAULT_RELU_DEGREES) and relu["eps"] == cifar.DEFAULT_RELU_EPS
    assert relu["sign_error"] < 2.0**-19 and relu["depth"] == 15
    assert relu["max_error_bound"] == pytest.approx(relu["error_bound_over_B"] * relu["bound_max"])
    assert out["calibration"] == {"images": 20, "margin": 1.2, "note": out["calibration"]["note"]}

    sim = out["simulated"]
    assert sim["images"] == 2 and sim["predictions"] == plain["predictions"][:2]
    assert sim["agree_with_plain"] == 1.0 and sim["accuracy"] == 1.0
    # 2.7e-4 of the range over all 20 images (docs/results/cifar-cpu.md); hemx.nn's default composite, (7, 7, 15,
    # 15) at the same gap, mislabels the second image here with a logit error of 2.1 (0.065 of the range)
    assert 0 < sim["max_err_over_range"] < 1e-3 and len(sim["err_over_range"]) == 2
    assert sim["min_gap_over_twice_err"] > 1.0  # the error is too small to flip either prediction
    # calibrated on all 20 with margin 1.2: no comparison input of these two exceeds 1 / 1.2 of its bound (the
    # largest, conv2d_relu's, reaches 0.79)
    assert 0.5 < sim["max_input_over_bound"] <= 1 / 1.2 + 1e-12
    json.dumps(out)  # every figure is JSON-serializable (--json)


@pytest.mark.parametrize("kwargs", [
    {"simulate": -1}, {"simulate": 21}, {"simulate": 2.0}, {"encrypted": -1}, {"encrypted": 21}, {"encrypted": True},
    {"calibration": 0}, {"calibration": 21},
    {"batch": 0}, {"batch": True}, {"margin": 0.5}, {"margin": float("nan")}, {"margin": "2"},
    {"relu_degrees": (8, 15)}, {"relu_degrees": "7,15"}, {"relu_degrees": ()}, {"relu_degrees": (7.0, 15)},
    {"relu_eps": 0.7}, {"relu_eps": "0.001"}, {"preset": "no_such_preset"}, {"preset": "boot_12"},
    {"relu_domain": 0.5}, {"relu_domain": float("inf")}, {"relu_domain": 64.0}, {"relu_domain": True},
])
def test_bad_arguments_raise_parameter_error(kwargs):
    with pytest.raises(ParameterError):
        cifar.bench(**kwargs)


def test_relu_domain_uses_the_library_composite_and_costs_levels(cifar10_files):
    """--relu-domain F: hemx.nn's composite for ReLUs valid to F x their bound (compile(relu_domain=F)); the plan
    reports the calibrated bounds B (not F B), the error within them, and F = 4 costs 2 levels per ReLU and more
    bootstraps than F = 1 on the same calibration (28 against 25 placements, docs/results/heldout-cpu.md)."""
    from hemx.nn.activations import domain_composite, relu_error_bound

    wide, narrow = (cifar.bench(simulate=0, calibration=10, relu_domain=f) for f in (4.0, 1.0))
    for out, f in ((wide, 4.0), (narrow, 1.0)):
        relu = out["relu"]
        assert relu["relu_domain"] == f and relu["degrees"] == list(domain_composite(f).degrees)
        assert out["plan"]["totals"][5].startswith(f"ReLU / max valid to {f:g} x bound")
        assert relu["max_error_bound"] == pytest.approx(relu_error_bound(relu["bound_max"], domain_composite(f),
                                                                         domain=f))
    # the same calibration, so the same bounds B whatever the domain
    assert wide["relu"]["bound_max"] == pytest.approx(narrow["relu"]["bound_max"])
    assert wide["relu"]["levels_per_relu"] == narrow["relu"]["levels_per_relu"] + 2
    assert wide["plan"]["bootstraps"] > narrow["plan"]["bootstraps"]
    assert wide["plan"]["bootstrapped_ciphertexts"] > narrow["plan"]["bootstrapped_ciphertexts"]


def test_cli_degrees_are_parsed_or_refused():
    assert cifar._degrees("7,15,15,15") == (7, 15, 15, 15)
    with pytest.raises(ParameterError):
        cifar._degrees("7,x")
