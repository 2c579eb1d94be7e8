"""The native "amx" instruction set (issue 38): AVX-512 with the basis conversion as int8 tile matmuls on AMX-INT8.

* Where this CPU runs it (``amx_int8`` in /proc/cpuinfo and a library built with the AMX file): the tile path of the
  conversion, bit-exact against the Python-integer reference and the scalar kernels at shapes that take it (whole
  and partial tiles of 16 sources and targets, two source tiles, 31-bit moduli, centered and not, edge values), the
  hand-over to the vector path below and above its shape limits, and the fused ModUp / ModDown of key switching
  at shapes whose digits take the tiles.
* Everywhere: the library never picks "amx" itself, names it only where the CPU has it, and refuses it elsewhere
  with :class:`ParameterError`; the planner (``hemx.plan.engine``) keeps a forced instruction set, leaves the tiles
  off with planning off, and picks them only when they were both bit-exact and faster (its measurements replaced by
  fakes where the CPU has no tiles).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hemx import nt
from hemx.errors import ParameterError
from hemx.kernels import bconv as BC
from hemx.kernels import native
from hemx.plan import engine
from tests.helpers import reference as ref
from tests.helpers.native import supported_isas

ISAS = supported_isas()


def _cpu_has_amx() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            return "amx_int8" in fh.read()
    except OSError:
        return False


HAS_AMX = "amx" in ISAS
need_amx = pytest.mark.skipif(not HAS_AMX, reason="this CPU has no AMX-INT8 tiles (Sapphire Rapids or later Xeon)")


def test_amx_is_runnable_exactly_where_the_cpu_has_it():
    if not native.available():
        pytest.skip(native.reason())
    built = native.built_isas()
    if "avx512" not in built:  # another architecture: no x86 tiles are built
        assert "amx" not in built
        return
    assert "amx" in built  # every x86-64 build with a compiler that takes -mamx-int8 (g++ >= 11, clang >= 12)
    assert HAS_AMX == _cpu_has_amx()
    native.set_isa("auto")
    assert native.isa() != "amx"  # the library's own pick is a vector instruction set, never the tiles
    if not HAS_AMX:
        with pytest.raises(ParameterError, match="cannot run the amx kernels"):
            native.set_isa("amx")


# ------------------------------------------------------------------------------------------ the tile conversion

def _case(n, nsrc, ndst, seed, bits=(28, 31)):
    """Sources and targets alternating between the bit sizes, residues with 0, 1, q/2, q/2 + 1, q - 1 mixed in."""
    src = [p for b in bits for p in nt.ntt_primes(b, (nsrc + len(bits) - 1) // len(bits), n)][:nsrc]
    dst = [p for b in bits for p in nt.ntt_primes(b, (ndst + len(bits) - 1) // len(bits) + nsrc, n)
           if p not in src][:ndst]
    rng = np.random.default_rng(seed)
    q = np.asarray(src, np.int64).reshape(-1, 1)
    x = rng.integers(0, q, size=(nsrc, n))
    picks = np.concatenate([np.zeros_like(q), np.ones_like(q), q // 2, q // 2 + 1, q - 1], axis=1)
    edge = np.take_along_axis(picks, rng.integers(0, 5, size=(nsrc, n)), axis=1)
    x = np.where(rng.random((nsrc, n)) < 0.3, edge, x).astype(np.uint32)
    return src, dst, x


@need_amx
@pytest.mark.parametrize("nsrc,ndst", [(6, 12), (7, 37), (10, 30), (16, 16), (20, 37), (32, 16), (33, 20), (10, 2),
                                       (3, 30)])
@pytest.mark.parametrize("centered", [False, True])
def test_tile_conversion_is_exact(nsrc, ndst, centered):
    """(6, 12) .. (32, 16) take the tiles; (33, 20), (10, 2) and (3, 30) hand over to the AVX-512 path."""
    n = 256
    src, dst, x = _case(n, nsrc, ndst, seed=nsrc * 100 + ndst)
    plan = BC.make_bconv_plan(src, dst, centered=centered)
    f = jax.jit(lambda v: BC.bconv(v, plan, method="native"))
    native.set_isa("scalar")
    want_scalar = np.asarray(f(jnp.asarray(x)))
    native.set_isa("amx")
    got = np.asarray(f(jnp.asarray(x)))
    conv = ref.bconv_centered if centered else ref.bconv
    cols = range(0, n, 17)  # the integer reference on a spread of coefficients (every one against scalar)
    want = np.asarray([conv([int(v) for v in x[:, t]], src, dst) for t in cols], np.uint32).T
    np.testing.assert_array_equal(got[:, list(cols)], want)
    np.testing.assert_array_equal(got, want_scalar)


@need_amx
def test_tile_conversion_batched_threaded_and_large():
    """A batch, every coefficient block on the thread pool, and N = 2^14 (blocks of 256 coefficients)."""
    src, dst, x = _case(1 << 14, 10, 30, seed=3)
    plan = BC.make_bconv_plan(src, dst, centered=True)
    xs = jnp.asarray(np.stack([x, x[::-1] % np.asarray(src, np.uint32).reshape(-1, 1)]))
    f = jax.jit(lambda v: BC.bconv(v, plan, method="native"))
    native.set_isa("avx512")
    want = np.asarray(f(xs))
    native.set_isa("amx")
    for inline, threads in ((None, 0), (0, 0), (None, 1)):
        native.set_inline_residues(inline)
        native.set_max_threads(threads)
        np.testing.assert_array_equal(np.asarray(f(xs)), want)


@need_amx
def test_fused_keyswitch_passes_on_tiles_equal_the_vector_kernels():
    """A Context whose digits (8 limbs) and ModDown (8 -> 24) take the tiles: a multiplication and a rotation give
    the same words under "amx" as under "avx512" (one compiled program serves both: the ISA is read at run time)."""
    import warnings

    import hemx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", hemx.ckks.InsecureParametersWarning)
        params = hemx.CKKSParameters.create(12, levels=11, dnum=3, special_bits=28, allow_insecure=True)
    assert (params.num_limbs, len(params.special_moduli)) == (24, 8)
    ctx = hemx.Context(params, ntt="native")
    keys = ctx.keygen(rotations=[3])
    rng = np.random.default_rng(0)
    a = ctx.encrypt(rng.uniform(-1, 1, ctx.slots), keys)
    b = ctx.encrypt(rng.uniform(-1, 1, ctx.slots), keys)
    step = jax.jit(lambda u, v: ctx.rotate(ctx.mul(u, v, keys), 3, keys))
    out = {}
    for isa in ("avx512", "amx", "scalar"):
        native.set_isa(isa)
        out[isa] = np.asarray(step(a, b).data)
    np.testing.assert_array_equal(out["amx"], out["avx512"])
    np.testing.assert_array_equal(out["amx"], out["scalar"])


# ---------------------------------------------------------------------------------------------------- planner

@pytest.fixture
def planner_env(monkeypatch, tmp_path):
    """A fresh plan cache and memo; the library on "auto" again afterwards."""
    monkeypatch.setenv("HEMX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(native.ISA_ENV, raising=False)
    engine.clear_memo()
    native.set_isa("auto")
    yield
    engine.clear_memo()
    native.set_isa("auto")


def _fake_tiles(monkeypatch, timings, equal=True):
    """Pretend this CPU runs "amx" (where it does not) and time nothing: ``measure_engines`` returns ``timings``."""
    picked = []
    calls = []
    vector = native.isa()
    monkeypatch.setattr(native, "runnable_isas", lambda: ["amx", vector, "scalar"])
    monkeypatch.setattr(native, "built_isas", lambda: ("amx", vector, "scalar"))
    monkeypatch.setattr(native, "select_isa", lambda name: picked.append(name) or name)

    def measure(isas, **_):
        calls.append(isas)
        return {vector: timings[0], "amx": timings[1]}, equal

    monkeypatch.setattr(engine, "measure_engines", measure)
    return vector, picked, calls


def test_planner_picks_the_tiles_only_when_faster_and_exact(planner_env, monkeypatch):
    if not native.available():
        pytest.skip(native.reason())
    vector, picked, calls = _fake_tiles(monkeypatch, (2.0e-3, 1.0e-3))
    choice = engine.plan_matrix_engine(planning="measure")
    assert (choice.isa, choice.source, picked[-1]) == ("amx", "measured", "amx") and "2.00x" in choice.reason
    engine.clear_memo()
    again = engine.plan_matrix_engine(planning="measure")  # from the plan cache file: nothing timed
    assert again.source == "cache" and len(calls) == 1 and again.isa == "amx"
    for timings, equal, why in (((1.0e-3, 1.0e-3), True, "not faster"), ((2.0e-3, 1.0e-3), False, "differed")):
        engine.clear_memo()
        monkeypatch.setattr(engine, "measure_engines", lambda isas, t=timings, e=equal, **_: ({vector: t[0],
                                                                                             "amx": t[1]}, e))
        choice = engine.plan_matrix_engine(planning="measure", refresh=True)
        assert choice.isa == vector and why in choice.reason and picked[-1] == vector


def test_planner_keeps_a_forced_isa_and_planning_off(planner_env, monkeypatch):
    if not native.available():
        pytest.skip(native.reason())
    vector, picked, calls = _fake_tiles(monkeypatch, (2.0e-3, 1.0e-3))
    assert engine.plan_matrix_engine(planning="off").isa == vector and not calls  # planning off: no tiles, no timing
    engine.clear_memo()
    monkeypatch.setattr(native, "isa_forced", lambda: "set_isa('avx2')")
    choice = engine.plan_matrix_engine(planning="measure")
    assert choice.source == "forced" and "avx2" in choice.reason and not calls


def test_planner_without_tiles_says_why(planner_env, monkeypatch):
    if not native.available():
        pytest.skip(native.reason())
    monkeypatch.setattr(native, "runnable_isas", lambda: [i for i in ISAS if i != "amx"])
    choice = engine.plan_matrix_engine(planning="measure")
    assert choice.source == "unavailable" and "AMX" in choice.reason and choice.isa != "amx"


def test_set_isa_marks_the_choice_forced_and_auto_hands_it_back():
    if not native.available():
        pytest.skip(native.reason())
    native.set_isa("scalar")
    assert native.isa_forced() == "set_isa('scalar')"
    native.set_isa("auto")
    assert native.isa_forced() is None


@need_amx
def test_measure_engines_times_both_and_compares_with_scalar(planner_env):
    timings, equal = engine.measure_engines(("avx512", "amx"), n=1 << 12, repeats=2)
    assert equal and set(timings) == {"avx512", "amx"} and all(t > 0 for t in timings.values())
    assert native.isa() == "avx512"  # the active instruction set restored (planner_env left it on "auto")
