"""hemx.kernels.native: the C++ NTT through XLA's FFI, bit-exact against the JAX kernels and the Python-int
reference, on every instruction-set path this CPU has (AVX-512 / AVX2 / portable), under jit and vmap.

These tests exercise the library itself, so they clear ``HEMX_NATIVE`` for their duration (a suite run with
``HEMX_NATIVE=0`` keeps every other test on the JAX kernels); ``test_env_disables`` checks the switch.
"""

from __future__ import annotations

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hemx
from hemx.errors import BackendError, ParameterError, ShapeError
from hemx.kernels import modarith
from hemx.kernels import native
from hemx.kernels import ntt as K
from hemx.ring import RNSRing
from tests.helpers import reference as ref
from tests.helpers.native import supported_isas

isas = supported_isas  # the native_on fixture is in conftest.py

_plans: dict = {}


def plans(n, qs):
    key = (n, tuple(qs))
    if key not in _plans:
        _plans[key] = (jax.device_put(K.make_plan(n, qs, "butterfly")), jax.device_put(K.make_plan(n, qs, "native")))
    return _plans[key]


def residues(shape, qs, seed):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, q, size=shape) for q in qs], axis=-2).astype(np.uint32)


_jax_ntt, _jax_intt = jax.jit(K.ntt), jax.jit(K.intt)
_nat_ntt, _nat_intt = jax.jit(K.ntt), jax.jit(K.intt)  # same entry points: the plan's method picks the path


def check_all_paths(x, n, qs):
    """Native forward / inverse equal the JAX butterfly on every ISA; returns the forward result."""
    pj, pn = plans(n, qs)
    want_f, want_i = np.asarray(_jax_ntt(x, pj)), np.asarray(_jax_intt(x, pj))
    for name in isas():
        native.set_isa(name)
        assert np.array_equal(np.asarray(_nat_ntt(x, pn)), want_f), (name, n, qs)
        assert np.array_equal(np.asarray(_nat_intt(x, pn)), want_i), (name, n, qs)
    native.set_isa("auto")
    return want_f


# ------------------------------------------------------------------------------------- exactness
LOG_NS = [1, 2, 3, 4, 5, 6, 8, 11]  # every shape is compiled once per jit (moduli are array arguments)


def moduli(n, bits):
    """Two NTT primes of ``bits`` bits for degree n (small primes below N = 16, where few are that large)."""
    if n >= 16:
        return hemx.nt.ntt_primes(bits, 2, n)
    return [q for q in (97, 193, 257, 769, 7681, 12289) if q % (2 * n) == 1][:2]


@pytest.mark.parametrize("log_n", LOG_NS)
@pytest.mark.parametrize("bits", [28, 31])
def test_against_jax_and_reference(log_n, bits):
    n = 1 << log_n
    qs = moduli(n, bits)
    x = residues((3, n), qs, seed=log_n + bits)  # (batch, L, N)
    fwd = check_all_paths(x, n, qs)
    if n <= 256:  # the independent O(N^2) Python-int reference
        for l, q in enumerate(qs):
            assert fwd[1, l].tolist() == ref.ntt_naive(x[1, l].tolist(), q, ref.psi(n, q))
    _, pn = plans(n, qs)
    assert np.array_equal(np.asarray(K.intt(K.ntt(x, pn), pn)), x)


def test_31_bit_moduli_use_the_reduced_path_at_the_top_of_the_range():
    n = 64
    qs = [q for q in hemx.nt.ntt_primes(31, 40, n) if q > (1 << 31) - (1 << 26)][:2]  # 4q overflows uint32
    assert len(qs) == 2 and all(4 * q >= 1 << 32 for q in qs)
    x = residues((2, n), qs, seed=3)
    x[0] = np.asarray(qs, dtype=np.uint32)[:, None] - 1  # all q - 1: the largest sums in every butterfly
    fwd = check_all_paths(x, n, qs)
    for l, q in enumerate(qs):
        assert fwd[0, l].tolist() == ref.ntt_naive(x[0, l].tolist(), q, ref.psi(n, q))


@pytest.mark.parametrize("fill", ["zero", "q-1", "alternating"])
def test_edge_values(fill):
    n = 256
    qs = hemx.nt.ntt_primes(30, 1, n) + hemx.nt.ntt_primes(29, 1, n) + hemx.nt.ntt_primes(31, 1, n)
    qcol = np.asarray(qs, dtype=np.uint32)[:, None]
    x = {"zero": np.zeros((3, n), np.uint32), "q-1": np.broadcast_to(qcol - 1, (3, n)).copy(),
         "alternating": np.where(np.arange(n) % 2 == 0, qcol - 1, 0).astype(np.uint32)}[fill]
    fwd = check_all_paths(x, n, qs)
    for l, q in enumerate(qs):
        assert fwd[l].tolist() == ref.ntt_naive(x[l].tolist(), q, ref.psi(n, q))


def test_one_limb_n_65536():
    n = 1 << 16
    qs = hemx.nt.ntt_primes(28, 1, n)
    x = residues((n,), qs, seed=11)
    pj, pn = plans(n, qs)
    fwd = np.asarray(_nat_ntt(x, pn))
    assert np.array_equal(fwd, np.asarray(_jax_ntt(x, pj)))
    q, psi = qs[0], ref.psi(n, qs[0])
    for pos in (0, 1, 12345, n - 1):  # the reference at a few positions (position p holds A_brv(p))
        k = ref.bit_reverse(pos, 16)
        assert int(fwd[0, pos]) == ref.ntt_eval(x[0].tolist(), q, psi, k)
    assert np.array_equal(np.asarray(_nat_intt(fwd, pn)), x)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log_n=st.sampled_from(LOG_NS), bits=st.sampled_from([20, 24, 28, 30, 31]), seed=st.integers(0, 2**32 - 1),
       isa=st.sampled_from(native.ISAS), edge=st.booleans())
def test_property_matches_jax(log_n, bits, seed, isa, edge):
    n = 1 << log_n
    qs = moduli(n, bits)
    rng = np.random.default_rng(seed)
    x = residues((3, n), qs, seed=seed)
    if edge:  # sprinkle 0 and q - 1
        qcol = np.asarray(qs, np.uint32)[:, None]
        x = np.where(rng.random(x.shape) < 0.3, qcol - 1, np.where(rng.random(x.shape) < 0.3, 0, x)).astype(np.uint32)
    pj, pn = plans(n, qs)
    if isa not in isas():
        isa = "scalar"
    native.set_isa(isa)
    assert np.array_equal(np.asarray(_nat_ntt(x, pn)), np.asarray(_jax_ntt(x, pj)))
    assert np.array_equal(np.asarray(_nat_intt(x, pn)), np.asarray(_jax_intt(x, pj)))


# ------------------------------------------------------------------------------------- jit, vmap, layouts
def test_vmap_and_limb_axis_and_ring():
    n, qs = 512, hemx.nt.ntt_primes(28, 3, 512)
    pj, pn = plans(n, qs)
    x = jnp.asarray(residues((4, n), qs, seed=7))  # (B, L, N)
    want = np.asarray(_jax_ntt(x, pj))
    assert np.array_equal(np.asarray(jax.jit(jax.vmap(lambda a: K.ntt(a, pn)))(x)), want)
    assert np.array_equal(np.asarray(jax.vmap(jax.vmap(lambda a: K.ntt(a, pn)))(x[:, None])[:, 0]), want)
    both = jax.tree_util.tree_map(lambda *a: jnp.stack(a), pn, pn)  # tables batched too: mapped call
    assert np.array_equal(np.asarray(jax.vmap(lambda a, p: K.ntt(a, p))(x[:2], both)), want[:2])
    lm = jnp.moveaxis(x, 1, 0)  # limb-major (L, B, N)
    got = jax.jit(lambda a: K.intt(K.ntt(a, pn, limb_axis=0), pn, limb_axis=0))(lm)
    assert np.array_equal(np.asarray(jax.jit(lambda a: K.ntt(a, pn, limb_axis=0))(lm)),
                          np.asarray(jnp.moveaxis(want, 1, 0)))
    assert np.array_equal(np.asarray(got), np.asarray(lm))
    # the ring: forced method; its negacyclic product against the Python-int schoolbook product
    r_n = RNSRing(64, qs[:1], ntt="native")
    a, b = residues((64,), qs[:1], 1), residues((64,), qs[:1], 2)
    got = np.asarray(r_n.poly_mul(a, b))[0].tolist()
    assert got == ref.negacyclic_mul(a[0].tolist(), b[0].tolist(), qs[0]) and "native" in repr(r_n)
    # a limb subset of a native plan (what key switching does) stays native and exact
    sub = K.select_limbs(pn, slice(1, 3))
    assert np.array_equal(np.asarray(K.ntt(x[:, 1:3], sub)), want[:, 1:3])


def test_threads_split_batch_and_limbs():
    n, qs = 1024, hemx.nt.ntt_primes(28, 5, 1024)
    pj, pn = plans(n, qs)
    x = residues((3, n), qs, seed=9)
    want = np.asarray(_jax_ntt(x, pj))
    for inline in (None, 0):  # the default (this small call runs inline) and every call threaded
        native.set_inline_residues(inline)
        for cap in (1, 2, 0):
            native.set_max_threads(cap)
            assert np.array_equal(np.asarray(_nat_ntt(x, pn)), want)


def test_mul_shoup_matches_modarith():
    n, qs = 256, hemx.nt.ntt_primes(31, 2, 256)
    x = residues((3, n), qs, seed=4)
    w = modarith.known_operand(residues((n,), qs, seed=5).astype(np.int64), np.asarray(qs).reshape(-1, 1))
    t = modarith.make_modulus_table(qs)
    got = np.asarray(native.mul_shoup(jnp.asarray(x), w, np.asarray(qs, np.uint32)))
    assert np.array_equal(got, np.asarray(modarith.mul_known(jnp.asarray(x), w, t, "shoup")))
    q0 = qs[0]
    assert int(got[1, 0, 7]) == int(x[1, 0, 7]) * int(w.value[0, 7]) % q0


def test_butterfly_probe_runs_and_is_deterministic():
    q = hemx.nt.ntt_primes(28, 1, 1024)[0]
    x = jnp.asarray(residues((1024,), [q], 1))
    tw = jnp.asarray(np.array([[5, (5 << 32) // q]], dtype=np.uint32))
    a = native.butterfly_probe(x, jnp.asarray([q], jnp.uint32), tw, reps=3)
    b = native.butterfly_probe(x, jnp.asarray([q], jnp.uint32), tw, reps=3)
    assert np.array_equal(np.asarray(a), np.asarray(b)) and not np.array_equal(np.asarray(a), np.asarray(x))
    assert np.all(np.asarray(a) < 4 * q)  # lazy range


# ------------------------------------------------------------------------------------- errors, switch, planner
def test_bad_input_raises_hemx_errors():
    n, qs = 64, hemx.nt.ntt_primes(28, 2, 64)
    _, pn = plans(n, qs)
    with pytest.raises(ShapeError):
        K.ntt(jnp.zeros((3, n), jnp.uint32), pn)
    with pytest.raises(ShapeError):
        K.ntt(jnp.zeros((2, n), jnp.int32), pn)
    with pytest.raises(ParameterError):
        native.ntt(jnp.zeros((2, n), jnp.uint32), K.make_plan(n, qs, "mat3"))
    with pytest.raises(ParameterError):
        native.set_isa("sse9")
    with pytest.raises(ParameterError):
        hemx.plan.NTTVariant("native", "montgomery")


def test_env_disables(monkeypatch, tmp_path):
    monkeypatch.setenv("HEMX_NATIVE", "0")
    assert not native.available() and "HEMX_NATIVE" in native.reason()
    assert native.build_id() == "none" and native.describe().startswith("off")
    with pytest.raises(BackendError, match="HEMX_NATIVE"):
        K.make_plan(64, hemx.nt.ntt_primes(28, 1, 64), "native")
    from hemx.plan import variants

    assert all(v.method != "native" for v in variants.family_candidates(64, variants.Constraints(), "cpu"))
    env = {"HEMX_NATIVE": "0", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "hemx", "info", "--json"], capture_output=True, text=True, env=env,
                         check=True)
    assert json.loads(out.stdout)["native_kernels"].startswith("off (disabled by HEMX_NATIVE=0)")


def test_planner_times_native_and_keys_the_wisdom_on_the_build(monkeypatch, tmp_path):
    from hemx import plan
    from hemx.plan import cache, planner, variants

    monkeypatch.setenv("HEMX_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("HEMX_PLAN", "measure")
    planner.clear_memo()
    fams = variants.family_candidates(64, variants.Constraints(), "cpu")
    # native is the static CPU default here, so it comes first (always measured), once; every JAX method follows
    assert fams[0] == variants.NTTVariant("native", "shoup") and variants.static_default("cpu")[0] == "native"
    assert [v.method for v in fams[1:]] == list(variants.NTT_METHODS)
    assert variants.refinements(fams[0], 64, variants.Constraints()) == []
    # a forced reduction or split excludes native: the JAX default leads and native is not a candidate
    for c in (variants.Constraints(reduction="montgomery"), variants.Constraints(split=(8, 8))):
        methods = [v.method for v in variants.family_candidates(64, c, "cpu")]
        assert "native" not in methods and variants.constrained_default("cpu", c)[0] == "butterfly"
    off = plan.plan_ntt(64, tuple(hemx.nt.ntt_primes(28, 2, 64)), planning="off", reduction="montgomery")
    assert (off.variant.method, off.variant.reduction) == ("butterfly", "montgomery")
    n, qs = 64, tuple(hemx.nt.ntt_primes(28, 2, 64))
    choice = plan.plan_ntt(n, qs, budget_s=60, repeats=1)
    assert "native / shoup" in choice.timings
    forced = plan.plan_ntt(n, qs, method="native", reduction="shoup")
    assert forced.source == "forced" and forced.variant.method == "native"
    assert cache.environment_key()["native"] == f"{native.build_id()}/{native.isa()}" != "none"
    monkeypatch.setenv("HEMX_NATIVE", "0")
    assert cache.environment_key()["native"] == "none"
    planner.clear_memo()


def test_inline_threshold_setting_is_checked():
    for bad in (-1, 1.5, True, "8"):
        with pytest.raises(ParameterError):
            native.set_inline_residues(bad)
    native.set_inline_residues(0)
    native.set_inline_residues(1 << 20)
    native.set_inline_residues(None)
