"""hemx.nn.layers.lstm: the LSTM layer, one module plus the from_jax rule for an LSTM cell under jax.lax.scan (a
plain JAX cell and Flax's LSTM cells under nn.RNN); checked against the JAX function in float64, on the slot
simulator with bootstraps between time steps, and the errors of bad input."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.errors import ParameterError, ShapeError
from hemx.nn import graph as G
from hemx.nn.compiler import compile
from hemx.nn.layers import REGISTRY, SUPPORTED, rule_for
from hemx.nn.layers.lstm import unroll
from hemx.nn.trace import from_jax

from tests.helpers.ckks_helpers import INSECURE, context_and_keys, small_params

jax.config.update("jax_enable_x64", True)
pytestmark = pytest.mark.filterwarnings(INSECURE)


def _rel(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def _weights(rng, d=8, h=8, scale=0.3):
    return rng.normal(size=(d, 4 * h)) * scale, rng.normal(size=(h, 4 * h)) * scale, rng.normal(size=4 * h) * 0.1


def _lstm_fn(w_x, w_h, b, *, order=("i", "f", "g", "o"), carry_ch=False, last_output=False):
    """A plain JAX LSTM over ``(B, T, D)`` under ``jax.lax.scan``: the gates split in ``order`` (the columns of
    ``w_x``, ``w_h``, ``b``), carries ``(h, c)`` (or ``(c, h)``), returning the final ``h`` (or ``ys[-1]``)."""
    h_size = w_h.shape[0]

    def cell(carry, x_t):
        h, c = carry[::-1] if carry_ch else carry
        z = x_t @ w_x + h @ w_h + b
        gate = dict(zip(order, jnp.split(z, 4, axis=-1)))
        c = jax.nn.sigmoid(gate["f"]) * c + jax.nn.sigmoid(gate["i"]) * jnp.tanh(gate["g"])
        h = jax.nn.sigmoid(gate["o"]) * jnp.tanh(c)
        return ((c, h) if carry_ch else (h, c)), h

    def fn(x):
        zero = jnp.zeros((x.shape[0], h_size), x.dtype)
        carry, ys = jax.lax.scan(cell, (zero, zero), jnp.swapaxes(x, 0, 1))
        return ys[-1] if last_output else carry[1 if carry_ch else 0]

    return fn


def _graph(w_x, w_h, b, steps):
    return G.Graph((G.Node("input", G.Input((steps * w_x.shape[0],))), G.Node("lstm", G.LSTM(w_x, w_h, b),
                                                                              ("input",))))


def test_lstm_is_one_registered_layer():
    rng = np.random.default_rng(0)
    layer = G.LSTM(*_weights(rng, 4, 3))
    rule = REGISTRY[G.LSTM]
    assert rule_for(layer) is rule and rule.arity == 1 and "LSTM" in SUPPORTED
    g = _graph(*_weights(rng, 4, 3), steps=5)
    assert g.shapes()["lstm"] == (3,)
    x = rng.normal(size=(2, 20))
    run = unroll(g.nodes[1].layer, x)
    assert run["z"].shape == (5, 4, 2, 3) and run["c"].shape == (5, 2, 3)
    np.testing.assert_array_equal(G.reference(g, x), run["h"][-1])


def test_bad_lstm_records_and_shapes():
    rng = np.random.default_rng(1)
    w_x, w_h, b = _weights(rng, 4, 3)
    with pytest.raises(ShapeError, match=r"w_h must be \(H, 4H\)"):
        G.LSTM(w_x, w_h[:, :11], b)
    with pytest.raises(ShapeError, match="w_x must be"):
        G.LSTM(w_x[:, :8], w_h, b)
    with pytest.raises(ShapeError, match="bias"):
        G.LSTM(w_x, w_h, b[:5])
    with pytest.raises(ParameterError, match="degree"):
        G.LSTM(w_x, w_h, b, degree=0)
    with pytest.raises(ShapeError, match="not a sequence of 4-vectors"):
        G.Graph((G.Node("input", G.Input((10,))), G.Node("lstm", G.LSTM(w_x, w_h, b), ("input",))))
    with pytest.raises(ShapeError, match=r"reads a \(T \* D,\) vector"):
        G.Graph((G.Node("input", G.Input((1, 2, 2))), G.Node("lstm", G.LSTM(w_x, w_h, b), ("input",))))


@pytest.mark.parametrize("steps", [3, 4])
def test_from_jax_lstm_scan_matches_jax(steps):
    """The scanned cell becomes one LSTM node whose float64 reference is the JAX function's (1e-9)."""
    rng = np.random.default_rng(steps)
    w_x, w_h, b = _weights(rng)
    fn = _lstm_fn(w_x, w_h, b)
    x = rng.normal(size=(5, steps, 8))
    g = from_jax(fn, x[:1])
    assert [type(n.layer).__name__ for n in g.nodes] == ["Input", "LSTM"]
    assert g.input_shape == (steps * 8,)
    assert _rel(G.reference(g, x.reshape(5, -1)), np.asarray(fn(jnp.asarray(x)))) < 1e-9
    layer = g.nodes[1].layer
    np.testing.assert_array_equal(layer.w_x, w_x)  # gate order i, f, g, o: the source's columns as they are


def test_from_jax_other_gate_order_carries_and_outputs():
    """Gates split in another order, carries (c, h), ys[-1] as the output: the same LSTM, gates reordered."""
    rng = np.random.default_rng(5)
    w_x, w_h, b = _weights(rng, 6, 4)
    fn = _lstm_fn(w_x, w_h, b, order=("f", "o", "i", "g"), carry_ch=True, last_output=True)
    x = rng.normal(size=(3, 4, 6))
    g = from_jax(fn, x[:1])
    assert _rel(G.reference(g, x.reshape(3, -1)), np.asarray(fn(jnp.asarray(x)))) < 1e-9
    layer = g.nodes[-1].layer
    np.testing.assert_array_equal(layer.w_x[:, :4], w_x[:, 8:12])  # i was the third block


@pytest.mark.parametrize("cell", ["OptimizedLSTMCell", "LSTMCell"])
def test_from_jax_flax_lstm_cells(cell):
    nn = pytest.importorskip("flax.linen")

    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.RNN(getattr(nn, cell)(8, param_dtype=jnp.float64, dtype=jnp.float64))(x)[:, -1]

    rng = np.random.default_rng(6)
    x = rng.normal(size=(3, 3, 8))
    model = Model()
    variables = model.init(jax.random.PRNGKey(0), x)
    fn = lambda v: model.apply(variables, v)  # noqa: E731
    g = from_jax(fn, x[:1])
    assert [type(n.layer).__name__ for n in g.nodes] == ["Input", "LSTM"]
    assert _rel(G.reference(g, x.reshape(3, -1)), np.asarray(fn(jnp.asarray(x)))) < 1e-9


def test_from_jax_sigmoid_and_tanh_activations():
    rng = np.random.default_rng(7)
    w = rng.normal(size=(6, 4))
    fn = lambda x: jnp.tanh(jax.nn.sigmoid(x @ w) - 0.5)  # noqa: E731
    x = rng.normal(size=(3, 6))
    g = from_jax(fn, x[:1])
    kinds = [(type(n.layer).__name__, getattr(n.layer, "kind", None)) for n in g.nodes]
    assert ("Activation", "sigmoid") in kinds and kinds[-1] == ("Activation", "tanh")
    assert _rel(G.reference(g, x), np.asarray(fn(jnp.asarray(x)))) < 1e-12


def _cell_variant(kind):
    rng = np.random.default_rng(8)
    w_x, w_h, b = _weights(rng, 4, 2)

    def cell(carry, x_t):
        h, c = carry
        z = x_t @ w_x + h @ w_h + b
        i, f, g, o = jnp.split(z, 4, axis=-1)
        if kind == "gru-like":  # no forget gate on c
            c = c + jax.nn.sigmoid(i) * jnp.tanh(g)
        else:
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        if kind == "relu":
            h = jax.nn.sigmoid(o) * jnp.maximum(c, 0.0)
        else:
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    def fn(x):
        zero = jnp.zeros((x.shape[0], 2))
        init = (zero + 1.0, zero) if kind == "nonzero-init" else (zero, zero)
        (h, c), ys = jax.lax.scan(cell, init, jnp.swapaxes(x, 0, 1), reverse=kind == "reverse")
        return {"c": c, "ys": ys}.get(kind, h) if kind in ("c", "ys") else h

    return fn


@pytest.mark.parametrize("kind,match", [
    ("gru-like", "does not compute c' = sigmoid"),
    ("relu", "`max` in the scanned cell is not part of an LSTM cell"),
    ("nonzero-init", "nonzero initial state"),
    ("reverse", "reversed scan"),
    ("c", "the output is the final cell state"),
    ("ys", "the output is the stacked hidden states"),
])
def test_from_jax_unsupported_cells(kind, match):
    x = np.zeros((1, 3, 4))
    with pytest.raises(ParameterError, match=match):
        from_jax(_cell_variant(kind), x)


def test_from_jax_sequence_misuse():
    x = np.zeros((1, 3, 4))
    with pytest.raises(ParameterError, match="read only by an LSTM cell"):
        from_jax(lambda v: v @ np.ones((4, 2)), x)
    with pytest.raises(ParameterError, match="per-feature constants on a sequence"):
        from_jax(lambda v: _lstm_fn(*_weights(np.random.default_rng(0), 4, 2))(v * np.arange(1.0, 5.0)), x)
    with pytest.raises(ShapeError, match=r"\(B, T, D\)"):
        from_jax(lambda v: v, np.zeros((1, 2, 3, 4, 5)))


def test_lstm_on_the_simulator_with_bootstraps_between_steps():
    """T = 4, D = H = 8 on 20 levels (12 after a bootstrap): the planner bootstraps between (and inside) the time
    steps; the result is within the polynomials' error of the JAX function (measured ~4e-6)."""
    rng = np.random.default_rng(9)
    w_x, w_h, b = _weights(rng)
    fn = _lstm_fn(w_x, w_h, b)
    x = rng.normal(size=(3, 4, 8))
    g = from_jax(fn, x[:1])
    xf = x.reshape(3, -1)
    sim = SlotSimulator(small_params(10, 20), slots=256)
    net = compile(g, sim, calibration=xf, bootstrap=True, bootstrap_level=12)
    steps = net.plan.steps
    assert net.plan.bootstraps >= 3 and steps[-1].output == "lstm0"
    assert sum(s.kind == "poly" for s in steps) == 4 + 3 * 5  # t = 0: i, g, o, tanh(c); then f too
    # the hidden state is refreshed between time steps (t1 -> t2, t2 -> t3: h of t0 still has 7 levels), as h or
    # as h || h (the copy next to it that the recurrent maps read, built at the start of the next step)
    between = [s.output for s in steps if s.kind == "bootstrap" and ("/h@bt" in s.output or "/hh@bt" in s.output)]
    assert len(between) >= 2, between
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, xf)))
    want = np.asarray(fn(jnp.asarray(x)))
    # the error bound: each fitted polynomial's error, propagated through at most 4 steps (|d h| <= ~ the sum)
    fits = [float(s.note.split("error ")[1]) for s in steps if s.kind == "poly"]
    assert np.max(np.abs(out - want)) < 4 * 3 * max(fits) + 1e-6
    assert _rel(out, want) < 1e-3


def test_sigmoid_tanh_activations_on_the_simulator():
    rng = np.random.default_rng(10)
    w = rng.normal(size=(6, 4))
    fn = lambda x: jnp.tanh(jax.nn.sigmoid(x @ w) * 2.0)  # noqa: E731
    x = rng.normal(size=(3, 6))
    g = from_jax(fn, x[:1])
    sim = SlotSimulator(small_params(10, 14), slots=256)
    net = compile(g, sim, calibration=x)
    assert [s.kind for s in net.plan.steps].count("poly") == 2
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    assert np.max(np.abs(out - np.asarray(fn(jnp.asarray(x))))) < 1e-4
    with pytest.raises(ParameterError, match="calibration="):
        compile(g, sim)


def test_lstm_without_calibrated_internals_uses_derived_ranges():
    """An LSTM after another layer: its ranges are derived from the weights and the input's calibrated bound
    (wider than the calibrated ones, so the polynomials' error is larger, still within its bound)."""
    rng = np.random.default_rng(11)
    w_x, w_h, b = _weights(rng, 4, 4, scale=0.2)
    nodes = (G.Node("input", G.Input((12,))), G.Node("scale", G.Affine(0.5, 0.0), ("input",)),
             G.Node("lstm", G.LSTM(w_x, w_h, b), ("scale",)))
    g = G.Graph(nodes)
    x = rng.normal(size=(2, 12))
    sim = SlotSimulator(small_params(10, 20), slots=256)
    net = compile(g, sim, calibration=x, bootstrap=True, bootstrap_level=12)
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    assert np.max(np.abs(out - G.reference(g, x))) < 1e-2


def test_lstm_needs_calibration():
    rng = np.random.default_rng(12)
    g = _graph(*_weights(rng, 4, 2), steps=2)
    with pytest.raises(ParameterError, match="calibration="):
        compile(g, SlotSimulator(small_params(10, 20), slots=256), bootstrap=False)


@pytest.mark.slow  # 194 s on 2 shared cores: 22 levels of keys and 10 polynomials evaluated eagerly at N = 2^11
def test_encrypted_lstm_small_ring():
    """T = 2, D = H = 4, degree-7 polynomials on N = 2^11 with 22 levels (no bootstrap): equal to the compiled
    network on the slot simulator up to the CKKS noise, and within the polynomials' error of the JAX function."""
    rng = np.random.default_rng(13)
    w_x, w_h, b = _weights(rng, 4, 4)
    fn = _lstm_fn(w_x, w_h, b)
    x = rng.normal(size=(2, 2, 4))
    g = from_jax(fn, x[:1])
    g = G.Graph((g.nodes[0], G.Node(g.nodes[1].name, G.LSTM(w_x, w_h, b, degree=7), g.nodes[1].inputs)))
    xf = x.reshape(2, -1)
    net = compile(g, small_params(11, 22), calibration=xf)
    assert net.plan.bootstraps == 0
    ctx, keys = context_and_keys(11, 22, rotations=net.rotations)
    got = net.decrypt_output(ctx, keys, net.run(ctx, keys, net.encrypt_input(ctx, keys, xf)))
    sim = SlotSimulator(small_params(11, 22), slots=ctx.slots)
    model = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, xf)))
    assert np.max(np.abs(got - model)) < 1e-5  # CKKS noise alone
    assert np.max(np.abs(got - np.asarray(fn(jnp.asarray(x))))) < 5e-2  # degree 7 fits


def test_lstm_gate_without_recurrent_weights_on_the_simulator():
    """A gate whose w_h columns are all zero reads x_t only (no dense map of h, which would be empty)."""
    rng = np.random.default_rng(14)
    w_x, w_h, b = _weights(rng, 4, 4)
    w_h[:, 4:8] = 0.0  # the forget gate
    g = _graph(w_x, w_h, b, steps=2)
    x = rng.normal(size=(2, 8))
    sim = SlotSimulator(small_params(10, 20), slots=256)
    net = compile(g, sim, calibration=x, bootstrap=True, bootstrap_level=12)
    assert not any(s.output == "lstm/t1/hf" for s in net.plan.steps)
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    assert np.max(np.abs(out - G.reference(g, x))) < 1e-3


def test_shipped_fashion_mnist_lstm_loader_and_fold():
    """The shipped weights load with their metadata; the graph (projection folded into w_x) computes the trained
    JAX model's function (float64, 1e-9) and its recorded accuracy on the first test sequences."""
    from hemx.nn import lstm_fmnist
    from tests.helpers.system import need_fashion_mnist

    params, meta = lstm_fmnist.load_lstm_fmnist()
    assert params["proj"]["w"].shape == (28, 128) and params["lstm"]["w_h"].shape == (128, 512)
    assert params["head"]["w"].shape == (128, 10) and params["lstm"]["w_x"].dtype == np.float32
    assert meta["test_accuracy"] >= 0.8 and meta["input_scale"] == pytest.approx(1 / 255)
    g = lstm_fmnist.graph(params, degree=9)
    lstm = g.nodes[1].layer
    assert (lstm.features, lstm.hidden, lstm.degree, g.input_shape) == (28, 128, 9, (784,))
    need_fashion_mnist()
    x, y = lstm_fmnist.load("test", 200)
    assert x.shape == (200, 784) and 0.0 <= x.min() and x.max() <= 1.0
    want = np.asarray(lstm_fmnist.apply(jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params), x))
    got = G.reference(g, x)
    assert _rel(got, want) < 1e-9
    assert np.mean(got.argmax(-1) == y) >= meta["test_accuracy"] - 0.06


def test_shipped_lstm_loader_errors(tmp_path):
    from hemx.nn import lstm_fmnist, models

    with pytest.raises(ParameterError, match="train_fmnist_lstm.py"):
        lstm_fmnist.load_lstm_fmnist(tmp_path / "absent.npz")
    bad = tmp_path / "bad.npz"
    models.save_variables(bad, {"proj": {"w": np.zeros((27, 128)), "b": np.zeros(128)}}, {})
    with pytest.raises(ShapeError, match="proj/w"):
        lstm_fmnist.load_lstm_fmnist(bad)


@pytest.mark.slow  # 274 s on the 2 cores shared by ~5 jobs: boot_12_relu keys, 3 bootstraps, XLA compiles
def test_encrypted_lstm_with_bootstraps_boot12_relu():
    """T = 2, D = H = 4, the default degree-15 polynomials at boot_12_relu (boot_16's 10 levels after a bootstrap
    at N = 2^12): the planner bootstraps c and h inside the steps as at boot_16; the decryption equals the compiled
    network on the slot simulator up to the CKKS and bootstrap noise, and the float64 LSTM within the polynomials'
    error."""
    import hemx
    from hemx.ckks import Sampler

    rng = np.random.default_rng(15)
    w_x, w_h, b = _weights(rng, 4, 4)
    g = G.Graph((G.Node("input", G.Input((8,))), G.Node("lstm", G.LSTM(w_x, w_h, b), ("input",))))
    x = rng.normal(size=(1, 8)) * 0.5
    params = hemx.CKKSParameters.preset("boot_12_relu", allow_insecure=True)  # (the module filters its warning)
    ctx = hemx.Context(params, sampler=Sampler.insecure_for_tests(5))
    net = compile(g, ctx, calibration=x)
    assert net.plan.bootstraps >= 2
    keys = net.keygen(ctx)
    got = net.decrypt_output(ctx, keys, net.run(ctx, keys, net.encrypt_input(ctx, keys, x)))
    sim = SlotSimulator(params, slots=net.plan.slots)
    model = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    err = float(np.max(np.abs(got - model)))
    print(f"encrypted LSTM with {net.plan.bootstraps} bootstraps, boot_12_relu: max error against the simulator "
          f"{err:.3g}")
    assert err < 1e-3  # CKKS and bootstrap noise (measured 2.0e-8)
    assert np.max(np.abs(got - G.reference(g, x))) < 1e-3  # degree-15 fits


def test_doubled_weight_reads_h_twice_over():
    """doubled_weight(m) on h || h gives m @ h, with H diagonals (k + H - j or k - j in [0, H)) instead of 2H - 1."""
    from hemx.nn.layers.lstm import doubled_weight

    rng = np.random.default_rng(40)
    hid = 6
    m = rng.normal(size=(hid, hid))
    h = rng.normal(size=hid)
    w = doubled_weight(m)
    assert w.shape == (hid, 2 * hid) and np.allclose(w @ np.concatenate([h, h]), m @ h, rtol=0, atol=1e-12)
    rows, cols = np.nonzero(w)
    assert set((cols - rows).tolist()) == set(range(hid)) and len(rows) == hid * hid  # every weight once


def test_recurrent_maps_read_the_doubled_hidden_state():
    """From the second step on, one rotation and one sum per step build h || h, and each gate's recurrent map reads
    it with H plaintext products (a dense w_h); the simulated result stays within the fits' error."""
    rng = np.random.default_rng(41)
    w_x, w_h, b = _weights(rng, 4, 8)
    g = _graph(w_x, w_h, b, steps=3)
    x = rng.normal(size=(2, 12))
    sim = SlotSimulator(small_params(10, 20), slots=256)
    net = compile(g, sim, calibration=x, bootstrap=True, bootstrap_level=12)
    steps = net.plan.steps
    for t in (1, 2):
        moved = [s for s in steps if s.output == f"lstm/t{t}/h_moved"]
        assert len(moved) == 1 and moved[0].kind == "rotate" and moved[0].key_switches == 1
        maps = [s for s in steps if s.kind == "linear" and s.output in {f"lstm/t{t}/h{k}" for k in "ifgo"}]
        assert len(maps) == 4 and all(s.plaintext_mults == 8 for s in maps)  # H = 8, not 2H - 1 = 15
        assert {s.inputs[0].split("@")[0] for s in maps} == {f"lstm/t{t}/hh"}
    assert not any(s.output == "lstm/t0/h_moved" for s in steps)  # no h before the first step
    out = net.decrypt_output(sim, None, net.run(sim, None, net.encrypt_input(sim, None, x)))
    assert np.max(np.abs(out - G.reference(g, x))) < 1e-2
