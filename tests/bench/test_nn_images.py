"""The encrypted stage the network benches share (hemx/bench/nn_images.py): keys once, then per image encrypt,
run, decrypt, compare with the plaintext reference, on a small residual network at N = 2^11 (no bootstrap)."""

from __future__ import annotations

import numpy as np
import pytest

from hemx.bench.nn_images import encrypted_images
from hemx.nn import graph as G
from hemx.nn.compiler import compile  # noqa: A004

from tests.helpers.ckks_helpers import context_and_keys, small_params
from tests.nn._models import residual_graph


def test_encrypted_images_report():
    rng = np.random.default_rng(5)
    g = residual_graph(rng, act=(0.1, 0.5, 0.2))
    x = rng.normal(size=(2, 2, 8, 8))
    net = compile(g, small_params(11, 6), calibration=x)
    ctx, _ = context_and_keys(11, 6, rotations=net.rotations)
    said = []
    out = encrypted_images(net, ctx, g, x, np.array([1, 2]), say=said.append)
    assert out["keygen_s"] > 0 and out["key_gib"] > 0 and out["key_storage"] == ctx.key_storage
    # keys, one line per image, then the CPU time per run
    assert [r["label"] for r in out["images"]] == [1, 2] and len(said) == 4 and said[-1].startswith("CPU per run")
    cpu = out["cpu"]
    assert set(cpu) == {"user_s", "system_s", "system_share", "page_faults"}
    assert cpu["user_s"] > 0 and cpu["system_s"] >= 0 and 0 <= cpu["system_share"] < 1 and cpu["page_faults"] >= 0
    want = G.reference(g, x)
    for r, w in zip(out["images"], want):
        assert r["plain_pred"] == int(w.argmax()) and r["seconds"] > 0
        assert 0 <= r["err_over_range"] < 1e-3  # CKKS precision on a 2-level network
        assert abs(sum(r["seconds_by_kind"].values()) - r["seconds"]) < 0.05 * r["seconds"] + 0.05
        assert set(r["seconds_by_kind"]) <= {s.kind for s in net.plan.steps}
    assert out["equal_count"] == sum(r["pred"] == r["plain_pred"] for r in out["images"])
    assert out["predictions_equal"] == (out["equal_count"] == 2)
    assert out["median_s"] == float(np.median([r["seconds"] for r in out["images"]]))
    assert out["images_per_hour"] == pytest.approx(3600.0 / out["median_s"])
    assert out["max_err_over_range"] == max(r["err_over_range"] for r in out["images"])


def test_encrypted_images_in_flight():
    """A network compiled with images_per_ciphertext=2: two runs of two images each; every image is recorded with
    its run's latency, and the amortized time is the run's median over the images in flight."""
    rng = np.random.default_rng(6)
    g = residual_graph(rng, act=(0.1, 0.5, 0.2))
    x = rng.normal(size=(4, 2, 8, 8))
    net = compile(g, small_params(11, 6), calibration=x, images_per_ciphertext=2)
    ctx, _ = context_and_keys(11, 6, rotations=net.rotations)
    said = []
    out = encrypted_images(net, ctx, g, x, np.array([1, 2, 3, 4]), say=said.append)
    assert out["images_in_flight"] == 2 and len(out["runs"]) == 2 and len(said) == 6
    assert [r["label"] for r in out["images"]] == [1, 2, 3, 4]
    want = G.reference(g, x)
    for i, (r, w) in enumerate(zip(out["images"], want)):
        assert r["plain_pred"] == int(w.argmax()) and r["seconds"] == out["runs"][i // 2]
        assert 0 <= r["err_over_range"] < 1e-3
        assert r["seconds_by_kind"] == out["images"][2 * (i // 2)]["seconds_by_kind"]
    assert out["median_s"] == float(np.median(out["runs"]))
    assert out["amortized_s"] == pytest.approx(out["median_s"] / 2)
    assert out["images_per_hour"] == pytest.approx(2 * 3600.0 / out["median_s"])
