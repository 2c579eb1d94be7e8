"""hemx.nn.infer: the one encrypted-inference loop of the benches and the demo (keys once, then per batch encrypt,
run, decrypt, each stage timed), on a small residual network at N = 2^11 (no bootstrap) and on the slot simulator."""

from __future__ import annotations

import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.errors import ParameterError
from hemx.nn import graph as G
from hemx.nn.compiler import compile  # noqa: A004
from hemx.nn.infer import STAGES, Inference, TimedKeys, infer, infer_batches, make_keys

from tests.helpers.ckks_helpers import context_and_keys, small_params
from tests.nn._models import residual_graph


def _network(seed: int = 5):
    rng = np.random.default_rng(seed)
    g = residual_graph(rng, act=(0.1, 0.5, 0.2))
    x = rng.normal(size=(3, 2, 8, 8))
    return g, x, compile(g, small_params(11, 6), calibration=x)


def test_encrypted_inference_times_every_stage():
    g, x, net = _network()
    ctx, _ = context_and_keys(11, 6, rotations=net.rotations)
    updates, steps, batches = [], [], []
    out = infer(net, ctx, x[:2], update=lambda *a: updates.append(a), progress=lambda *a: steps.append(a[:4]),
                on_batch=lambda i, logits, s: batches.append((i, logits.shape, s)))
    want = G.reference(g, x[:2])
    assert isinstance(out, Inference) and out.logits.shape == want.shape
    assert np.max(np.abs(out.logits - want)) < 1e-3 * np.ptp(want)
    assert list(out.seconds) == ["keygen", *STAGES] and all(v > 0 for v in out.seconds.values())
    assert out.key_bytes > 0 and out.peak_rss_bytes > 0
    assert updates == [("keygen", 1, 1), ("encrypt", 1, 2), ("run", 0, 2), ("run", 1, 2), ("decrypt", 1, 2),
                       ("encrypt", 2, 2), ("run", 1, 2), ("run", 2, 2), ("decrypt", 2, 2)]
    n = len(net.plan.steps)
    assert steps == [(b, 2, k + 1, n) for b in range(2) for k in range(n)]
    assert [(i, shape) for i, shape, _ in batches] == [(0, (1, *want.shape[1:])), (1, (1, *want.shape[1:]))]
    assert out.run_seconds == [s for _, _, s in batches] and out.median_s == float(np.median(out.run_seconds))
    assert out.seconds["run"] == pytest.approx(sum(out.run_seconds))
    for kinds, nodes, seconds in zip(out.seconds_by_kind, out.seconds_by_node, out.run_seconds):
        assert set(kinds) <= {s.kind for s in net.plan.steps} and set(nodes) <= {s.node for s in net.plan.steps}
        assert abs(sum(kinds.values()) - seconds) < 0.05 * seconds + 0.05
        assert sum(nodes.values()) == pytest.approx(sum(kinds.values()))
    assert out.kind_totals().keys() == set().union(*out.seconds_by_kind)


def test_given_keys_are_not_made_again():
    _, x, net = _network()
    ctx, _ = context_and_keys(11, 6, rotations=net.rotations)
    keys = make_keys(net, ctx)
    assert isinstance(keys, TimedKeys) and keys.seconds > 0 and keys.nbytes > 0
    updates = []
    timed = infer(net, ctx, x[:1], keys=keys, update=lambda *a: updates.append(a))
    assert timed.seconds["keygen"] == keys.seconds and timed.key_bytes == keys.nbytes
    assert ("keygen", 1, 1) not in updates
    plain = infer(net, ctx, x[:1], keys=keys.keys)  # a bare key set: nothing to say about its making
    assert "keygen" not in plain.seconds and plain.key_bytes is None
    assert np.max(np.abs(plain.logits - timed.logits)) < 1e-3


def test_simulator_in_batches():
    g, x, net = _network()
    sim = SlotSimulator(small_params(11, 6), slots=net.plan.slots)
    out = infer(net, sim, x, batch=2, release_diagonals=True)
    want = G.reference(g, x)
    assert out.logits.shape == want.shape and len(out.run_seconds) == 2  # batches of 2 and 1
    assert np.max(np.abs(out.logits - want)) < 1e-6 * np.ptp(want)
    assert "keygen" not in out.seconds and out.key_bytes is None


def test_any_endpoints():
    """The loop over a client's encrypt / decrypt and a server's evaluate: what the demo passes (bytes here)."""
    class Step:
        def __init__(self, kind, node):
            self.kind, self.node = kind, node

    def evaluate(request: bytes, progress):
        for k, step in enumerate((Step("linear", "a"), Step("poly", "b"), Step("linear", "c"))):
            progress(k + 1, 3, step)
        return request[::-1]

    out = infer_batches([np.arange(2.0)[None], np.arange(2.0, 4.0)[None]], encrypt=lambda b: b.tobytes(),
                        evaluate=evaluate, decrypt=lambda r: np.frombuffer(r[::-1])[None])
    assert np.array_equal(out.logits, [[0.0, 1.0], [2.0, 3.0]])
    assert list(out.seconds) == list(STAGES) and out.key_bytes is None
    assert [set(k) for k in out.seconds_by_kind] == [{"linear", "poly"}] * 2
    assert set(out.node_totals()) == {"a", "b", "c"}


@pytest.mark.parametrize("batch", [0, -1, 1.5, True])
def test_bad_batch(batch):
    _, x, net = _network()
    with pytest.raises(ParameterError, match="batch must be a positive integer"):
        infer(net, SlotSimulator(small_params(11, 6), slots=net.plan.slots), x, batch=batch)


def test_images_without_a_batch_axis():
    _, x, net = _network()
    with pytest.raises(ParameterError, match="batch axis"):
        infer(net, SlotSimulator(small_params(11, 6), slots=net.plan.slots), np.float64(1.0))


def test_progress_waits_for_each_step_but_not_inside_a_trace():
    """With a progress callback the runtime waits for each step's arrays (asynchronous dispatch would count a
    compiled bootstrap's seconds to the step after it); numpy values and tracers are left alone."""
    import jax
    import jax.numpy as jnp

    from hemx.nn.run import _settle

    _settle([np.ones(3), jnp.ones(3), {"a": jnp.zeros(2)}, None])
    assert float(jax.jit(lambda x: (_settle(x), x + 1)[1])(jnp.ones(2))[0]) == 2.0
