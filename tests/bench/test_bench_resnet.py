"""hemx bench resnet: the stages on a small bootstrapping ring (boot_12: the plan, plaintext and simulated
accuracy on a few Fashion-MNIST test images; the encrypted stage is the benchmark's, at boot_16)."""

from __future__ import annotations

import warnings

import pytest

from hemx.bench import resnet
from tests.helpers.system import need_fashion_mnist
from hemx.ckks import InsecureParametersWarning
from hemx.errors import ParameterError


def test_plain_plan_and_simulated_boot12():
    need_fashion_mnist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        out = resnet.bench(preset="boot_12", plain=40, simulate=4, encrypted=0, batch=2, allow_insecure=True)
    assert out["plain"]["images"] == 40 and out["plain"]["accuracy"] >= 0.8  # 89.7% on all 10,000
    plan = out["plan"]
    assert plan["bootstraps"] >= 1 and plan["rotations"] > 0
    # without --encrypted the network compiles for the parameters alone (no Context, no bootstrapper tables): the
    # plan counts relinearization and rotations, and leaves the bootstrap's own keys and the bytes unknown (with a
    # Context they are counted: tests/nn/test_compile.py, the boot_12 network with a bootstrap)
    assert plan["key_count"] == 1 + plan["rotation_keys"] and plan["key_bytes"] is None
    sim = out["simulated"]
    assert sim["images"] == 4 and sim["agree_with_plain"] == 1.0 and sim["max_err_over_range"] < 0.01
    assert "encrypted" not in out and out["peak_rss_gib"] > 0


def test_bad_counts():
    with pytest.raises(ParameterError):
        resnet.bench(plain=-1)
    with pytest.raises(ParameterError):
        resnet.bench(batch=0)


def test_two_images_per_ciphertext_simulated_boot12():
    """--images-per-ciphertext 2: the plan of two interleaved images (rotations by twice the steps) and the
    simulated predictions equal to plaintext."""
    need_fashion_mnist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        out = resnet.bench(preset="boot_12", plain=0, simulate=4, encrypted=0, batch=2, allow_insecure=True,
                           images_per_ciphertext=2)
        with pytest.raises(ParameterError, match="images_per_ciphertext"):
            resnet.bench(preset="boot_12", plain=0, simulate=1, encrypted=0, allow_insecure=True,
                         images_per_ciphertext=3)
    assert out["images_per_ciphertext"] == 2 and out["plan"]["bootstraps"] >= 1
    sim = out["simulated"]
    assert sim["images"] == 4 and sim["agree_with_plain"] == 1.0 and sim["max_err_over_range"] < 0.01
