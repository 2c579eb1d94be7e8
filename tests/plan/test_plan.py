"""hemx.plan: variant search, forcing, planning modes, the wisdom file, dataflow choice, and bit-exactness.

The search logic is tested with an injected timing function (no compilation); real timing runs only at tiny
ring degrees. Every test points the plan cache at its own temporary directory.
"""

from __future__ import annotations

import json
import os
import warnings

import jax
import numpy as np
import pytest

import hemx
from tests.helpers import reference as ref
from hemx import plan
from hemx.ckks import Sampler
from hemx.ckks.security import InsecureParametersWarning
from hemx.errors import OverflowBoundError, ParameterError
from hemx.plan import cache, planner, variants
from hemx.plan.variants import Constraints, NTTVariant
from hemx.ring import RNSRing

N = 64
MODULI = tuple(hemx.nt.ntt_primes(31, 2, N))


@pytest.fixture(autouse=True)
def tmp_cache(tmp_path, monkeypatch):
    """A private plan cache and planning mode per test; no in-process answers carried over."""
    monkeypatch.setenv("HEMX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HEMX_PLAN", raising=False)
    monkeypatch.delenv("HEMX_PLAN_BUDGET_S", raising=False)
    monkeypatch.setenv("HEMX_NATIVE", "0")  # the JAX variants only; the native one: tests/kernels/native
    planner.clear_memo()
    yield tmp_path / "cache"
    planner.clear_memo()


class FakeClock:
    """Timing function with fixed per-method (and per-reduction) seconds; records what it was asked."""

    def __init__(self, seconds=None, setup=0.0, fail=()):
        self.seconds = seconds or {"butterfly": 3.0, "four_step": 5.0, "mat3": 2.0, "multilevel": 4.0}
        self.setup, self.fail, self.calls = setup, set(fail), []

    def __call__(self, v: NTTVariant):
        self.calls.append(v)
        if v.label in self.fail:
            raise OverflowBoundError("synthetic overflow")
        extra = {"shoup": 0.0, "barrett": 0.5, "montgomery": -0.25}[v.reduction]
        extra += 0.0 if not v.split or v.split == variants.default_split(v.method, N) else 0.1
        extra += 0.0 if v.bp == 8 else 0.2
        return self.seconds[v.method] + extra, self.setup


def plan_fake(clock, **kw):
    kw.setdefault("budget_s", 1e9)
    return plan.plan_ntt(N, MODULI, measure=clock, **kw)


# ------------------------------------------------------------------------------------------- the search
def test_chooses_the_fastest_and_refines_it():
    clock = FakeClock()
    choice = plan_fake(clock)
    # round one: the static default first, one variant per method; round two: mat3's neighbours
    assert [v.method for v in clock.calls[:4]][0] == variants.static_default(jax.default_backend())[0]
    assert {v.method for v in clock.calls[:4]} == set(variants.NTT_METHODS)
    assert all(v.method == "mat3" for v in clock.calls[4:]) and len(clock.calls) > 4
    assert choice.variant.method == "mat3" and choice.variant.reduction == "montgomery"
    assert choice.variant.split == variants.default_split("mat3", N) and choice.variant.bp == 8
    assert choice.source == "measured" and choice.timings[choice.variant.label] == 1.75
    assert min(choice.timings.values()) == choice.timings[choice.variant.label]


def test_second_call_reads_the_cache_file():
    plan_fake(FakeClock())
    planner.clear_memo()
    again = FakeClock()
    choice = plan_fake(again)
    assert again.calls == [] and choice.source == "cache" and choice.variant.method == "mat3"
    doc = json.loads(open(plan.cache_path(), encoding="utf-8").read())
    (key, entry), = doc["entries"].items()
    assert json.loads(key)["n"] == N and json.loads(key)["backend"] == jax.default_backend()
    assert {"jax", "jaxlib", "hemx", "device_kind"} <= set(json.loads(key))


def test_a_planned_shape_is_not_searched_again_when_the_families_reorder():
    plan_fake(FakeClock())  # mat3 wins and its neighbours are timed
    # a later process finds the families in another order (e.g. a duel re-scored one): the cached table
    # answers; no neighbours of the new leader are timed, so the shape is planned once
    doc = json.loads(open(plan.cache_path(), encoding="utf-8").read())
    (entry,) = doc["entries"].values()
    for rec in entry["timings"].values():
        if rec["variant"]["method"] == "butterfly":
            rec["seconds"] = 0.5
    open(plan.cache_path(), "w", encoding="utf-8").write(json.dumps(doc))
    planner.clear_memo()
    again = FakeClock()
    choice = plan_fake(again)
    assert again.calls == [] and choice.source == "cache" and choice.variant.method == "butterfly"


def test_forced_fields_are_kept():
    clock = FakeClock()
    choice = plan_fake(clock, method="butterfly")
    assert {v.method for v in clock.calls} == {"butterfly"}
    assert choice.variant.method == "butterfly" and choice.variant.reduction == "montgomery"
    clock = FakeClock()
    choice = plan_fake(clock, reduction="barrett")
    assert {v.reduction for v in clock.calls} == {"barrett"} and choice.variant == NTTVariant(
        "mat3", "barrett", variants.default_split("mat3", N))
    clock = FakeClock()
    choice = plan_fake(clock, method="mat3", reduction="shoup", split=(4, 16), bp=8)
    assert clock.calls == [] and choice.source == "forced" and choice.variant.split == (4, 16)


def test_forcing_a_method_reuses_timings_of_an_earlier_search():
    plan_fake(FakeClock())
    planner.clear_memo()
    clock = FakeClock()
    choice = plan_fake(clock, method="butterfly")
    # the family variant of the butterfly was timed before; only its other reductions are new
    assert sorted(v.reduction for v in clock.calls) == ["barrett", "montgomery"]
    assert choice.variant == NTTVariant("butterfly", "montgomery")


def test_budget_bounds_a_call_and_later_calls_complete_the_table():
    clock = FakeClock(setup=10.0)
    choice = plan_fake(clock, budget_s=0.0)
    assert len(clock.calls) == 1 and choice.skipped  # only the static default was timed
    assert all("budget" in why for why in choice.skipped.values())
    planner.clear_memo()
    rest = FakeClock(setup=10.0)
    complete = plan_fake(rest)
    assert len(rest.calls) >= 3 and complete.variant.method == "mat3" and not complete.skipped


def test_failed_variants_are_recorded_and_never_chosen():
    label = variants.make_variant("mat3", "shoup", N, Constraints()).label
    choice = plan_fake(FakeClock(fail={label}))
    assert choice.variant.method != "mat3" and "OverflowBoundError" in choice.skipped[label]


def test_planning_off_and_modes(monkeypatch):
    default = variants.static_default(jax.default_backend())
    choice = plan.plan_ntt(N, MODULI, planning="off")
    assert choice.source == "static" and (choice.variant.method, choice.variant.reduction) == default
    assert not os.path.exists(plan.cache_path())
    assert plan.plan_ntt(N, MODULI, planning="off", method="multilevel").variant.method == "multilevel"
    monkeypatch.setenv("HEMX_PLAN", "off")
    assert plan.plan_ntt(N, MODULI).source == "static"
    with pytest.raises(ParameterError, match="planning mode"):
        plan.plan_ntt(N, MODULI, planning="fast")
    monkeypatch.setenv("HEMX_PLAN", "measure")
    monkeypatch.setenv("HEMX_PLAN_BUDGET_S", "soon")
    with pytest.raises(ParameterError, match="HEMX_PLAN_BUDGET_S"):
        plan.plan_ntt(N, MODULI, measure=FakeClock())
    with pytest.raises(ParameterError, match="budget"):
        plan.plan_ntt(N, MODULI, measure=FakeClock(), budget_s=-1)


def test_bad_choices_raise_parameter_errors():
    with pytest.raises(ParameterError, match="NTT method"):
        plan.plan_ntt(N, MODULI, method="fft")
    with pytest.raises(ParameterError, match="reduction"):
        plan.plan_ntt(N, MODULI, reduction="lazy")
    with pytest.raises(ParameterError, match="chunk width"):
        plan.plan_ntt(N, MODULI, bp=9)
    with pytest.raises(ParameterError, match="power of two"):
        plan.plan_ntt(48, MODULI)
    with pytest.raises(ParameterError):
        NTTVariant.from_json({"method": "mat3", "reduction": "shoup", "split": [8, 8], "bp": 1})
    v = NTTVariant("multilevel", "barrett", (4, 4, 4), 7)
    assert NTTVariant.from_json(json.loads(json.dumps(v.to_json()))) == v


# ------------------------------------------------------------------------------------------- the file
def test_cache_directory_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("HEMX_CACHE_DIR", str(tmp_path / "explicit"))
    assert plan.cache_path() == str(tmp_path / "explicit" / "plans.json")
    monkeypatch.delenv("HEMX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert plan.cache_path() == str(tmp_path / "xdg" / "hemx" / "plans.json")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert plan.cache_path() == str(tmp_path / "home" / ".cache" / "hemx" / "plans.json")


def test_corrupted_file_is_ignored_with_a_warning_and_rewritten(tmp_cache):
    tmp_cache.mkdir(parents=True)
    path = tmp_cache / "plans.json"
    for junk in ("{not json", json.dumps({"format": 99, "entries": {}}), json.dumps([1, 2])):
        path.write_text(junk, encoding="utf-8")
        planner.clear_memo()
        with pytest.warns(plan.PlanCacheWarning):
            choice = plan_fake(FakeClock())
        assert choice.variant.method == "mat3"
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert doc["format"] == cache.FORMAT and len(doc["entries"]) == 1


def test_malformed_entry_is_replaced(tmp_cache):
    plan_fake(FakeClock())
    doc = json.loads(open(plan.cache_path(), encoding="utf-8").read())
    key = next(iter(doc["entries"]))
    doc["entries"][key]["timings"] = {"x": {"variant": {"method": "nope"}, "seconds": 1, "compile_s": 0}}
    open(plan.cache_path(), "w", encoding="utf-8").write(json.dumps(doc))
    planner.clear_memo()
    clock = FakeClock()
    with pytest.warns(plan.PlanCacheWarning, match="malformed"):
        choice = plan_fake(clock)
    assert clock.calls and choice.variant.method == "mat3"


def test_store_merges_and_leaves_no_temporary_files(tmp_cache):
    cache.store("other-machine", {"timings": {}})
    plan_fake(FakeClock())
    doc = cache.load()
    assert "other-machine" in doc["entries"] and len(doc["entries"]) == 2
    assert sorted(os.listdir(tmp_cache)) == ["plans.json"]


def test_entries_of_other_versions_are_not_used(monkeypatch):
    plan_fake(FakeClock())
    planner.clear_memo()
    env = dict(cache.environment_key(), jax="0.0.0")
    monkeypatch.setattr(cache, "environment_key", lambda: env)
    clock = FakeClock()
    plan_fake(clock)
    assert clock.calls  # timed again under the new key
    assert len(cache.load()["entries"]) == 2


def test_unwritable_cache_warns_and_still_plans(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("HEMX_CACHE_DIR", str(blocker / "sub"))
    with pytest.warns(plan.PlanCacheWarning, match="cannot write"):
        choice = plan_fake(FakeClock())
    assert choice.variant.method == "mat3"


def test_reset_removes_the_file():
    plan_fake(FakeClock())
    assert os.path.exists(plan.cache_path())
    assert plan.reset_cache() is True and not os.path.exists(plan.cache_path())
    assert plan.reset_cache() is False


# ------------------------------------------------------------------------------------------- real timing
def _random(shape, qs, seed):
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, q, size=shape) for q in qs], axis=-2).astype(np.uint32)


def test_measured_choice_is_bit_identical_to_every_forced_variant():
    n, qs = 32, tuple(hemx.nt.ntt_primes(28, 2, 32))
    choice = plan.plan_ntt(n, qs, budget_s=60, repeats=1)
    assert choice.source == "measured" and choice.variant.label in choice.timings
    assert {v.split("/")[0].split()[0] for v in choice.timings} == set(variants.NTT_METHODS)
    x = _random((3, n), qs, seed=5)  # (batch, L, N)
    chosen = np.asarray(RNSRing(n, qs, **choice.variant.ring_kwargs()).ntt(x))
    for method in variants.NTT_METHODS:
        for reduction in ("shoup", "montgomery", "barrett"):
            got = np.asarray(RNSRing(n, qs, method, reduction=reduction).ntt(x))
            assert np.array_equal(got, chosen), (method, reduction)
    # and against the independent O(N^2) reference
    for l, q in enumerate(qs):
        assert chosen[1, l].tolist() == ref.ntt_naive(x[1, l].tolist(), q, ref.psi(n, q))
    planner.clear_memo()
    assert plan.plan_ntt(n, qs).source == "cache"


def test_timed_shape_is_shared_by_rings_of_one_degree():
    a = plan.timed_shape(1 << 12, [2**30 + 1] * 4)
    b = plan.timed_shape(1 << 12, [2**30 + 1] * 40)
    assert a == b == {"n": 4096, "limbs": 16, "bits": 31}
    assert plan.timed_shape(1 << 17, [3])["limbs"] == 8


# ------------------------------------------------------------------------------------------- dataflow
def test_dataflow_follows_the_memory_budget():
    sizes = plan.keyswitch_working_set(1 << 16, 17, 51, 3)
    assert sizes["mp"] > sizes["dc"] > sizes["oc"] > 0
    assert plan.choose_dataflow(1 << 16, 17, 51, 3, budget_bytes=sizes["mp"]) == "mp"
    assert plan.choose_dataflow(1 << 16, 17, 51, 3, budget_bytes=sizes["mp"] - 1) == "dc"
    assert plan.choose_dataflow(1 << 16, 17, 51, 3, budget_bytes=sizes["dc"] - 1) == "oc"
    # the estimate scales with the batch: a budget MP fits at batch 1 leaves only DC at batch 2
    budget = 2 * sizes["dc"]
    assert sizes["mp"] <= budget < 2 * sizes["mp"]
    assert plan.choose_dataflow(1 << 16, 17, 51, 3, budget_bytes=budget) == "mp"
    assert plan.choose_dataflow(1 << 16, 17, 51, 3, budget_bytes=budget, batch=2) == "dc"


# ------------------------------------------------------------------------------------------- the context
def _params():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return hemx.CKKSParameters.create(5, levels=1, dnum=2, allow_insecure=True)


def test_context_uses_the_cached_choice_and_equals_a_forced_variant_bit_for_bit():
    params = _params()
    basis = tuple(params.special_moduli) + tuple(params.moduli)
    # wisdom saying multilevel is fastest here (fake timings; both contexts then compile quickly)
    fake = FakeClock({"butterfly": 9.0, "four_step": 8.0, "mat3": 7.0, "multilevel": 1.0})
    plan.plan_ntt(params.n, basis, measure=fake, budget_s=1e9)
    planner.clear_memo()
    planned = hemx.Context(params, sampler=Sampler.insecure_for_tests(9))
    assert planned.planned.source == "cache" and planned.plan.method == "multilevel"
    assert planned.reduction == "montgomery" and planned.keyswitch in plan.DATAFLOWS
    assert planned.keyswitch == plan.choose_dataflow(params.n, len(params.special_moduli), params.num_limbs,
                                                     params.dnum)
    forced = hemx.Context(params, ntt="mat3", reduction="barrett", keyswitch="dc",
                          sampler=Sampler.insecure_for_tests(9))
    assert forced.plan.method == "mat3" and forced.reduction == "barrett" and forced.keyswitch == "dc"
    x = np.linspace(-1, 1, planned.slots)
    outs = []
    for ctx in (planned, forced):
        keys = ctx.keygen(rotations=[1])
        a = ctx.encrypt(x, keys)
        prod, rot = ctx.mul(a, a, keys, rescale=True), ctx.rotate(a, 1, keys)
        outs.append([np.asarray(a.data), np.asarray(prod.data), np.asarray(rot.data)])
        # and the planned configuration computes the right thing (against numpy)
        assert np.max(np.abs(ctx.decrypt(prod, keys) - x * x)) < 1e-6
        assert np.max(np.abs(ctx.decrypt(rot, keys) - np.roll(x, -1))) < 1e-6
    for want, got in zip(*outs):
        assert np.array_equal(want, got)


def test_context_planning_off_and_bad_options(monkeypatch):
    params = _params()
    ctx = hemx.Context(params, planning="off")
    assert ctx.planned.source == "static" and not os.path.exists(plan.cache_path())
    with pytest.raises(ParameterError):
        hemx.Context(params, ntt="fft")
    with pytest.raises(ParameterError):
        hemx.Context(params, keyswitch="fast")
    with pytest.raises(ParameterError):
        hemx.Context(params, planning="sometimes")


# ------------------------------------------------------------------------------------------- bench side
def test_roofline_work_counts_match_hand_counts():
    from hemx.bench import roofline
    from hemx.kernels import ntt as K

    n, qs = 256, hemx.nt.ntt_primes(28, 3, 256)
    bf = roofline.ntt_work(K.make_plan(n, qs, "butterfly"), batch=2)
    assert bf.int8_ops == 0 and bf.mulmods == 2 * 3 * (n // 2) * 8  # (N/2) log2 N per limb
    assert bf.bytes == 2 * 4 * n * 3 * 2 + 2 * 4 * n * 3
    m3 = roofline.ntt_work(K.make_plan(n, qs, "mat3", split=(16, 16)), batch=1)
    k = 4  # 28-bit residues in balanced 8-bit chunks
    # two stages of 16-point matrices: 2 (16 K)(16 K) (N / 16) int8 ops each per limb; one twiddle stage
    assert m3.int8_ops == 3 * 2 * (2 * (16 * k) * (16 * k) * (n // 16))
    assert m3.mulmods == 3 * (2 * n + n)
    peaks = roofline.Peaks(int8_ops=1e12, mulmod=1e9, bandwidth=1e10)
    r = roofline.roofline(roofline.Work(1e9, 1e6, 1e6), 0.004, peaks)
    assert r["bound"] == "compute" and r["roofline_s"] == pytest.approx(2e-3) and r["fraction"] == pytest.approx(0.5)
    r = roofline.roofline(roofline.Work(0, 0, 1e8), 0.02, peaks)
    assert r["bound"] == "memory" and r["fraction"] == pytest.approx(0.5)


def test_interleaved_timing_alternates_calls():
    from hemx.bench.timing import time_interleaved

    order = []
    times = time_interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, repeats=3, warmup=1)
    assert order == ["a", "b"] * 4 and times["a"].repeats == times["b"].repeats == 3


def test_cli_bench_plan_and_reset(capsys, tmp_path):
    from hemx.cli import main

    assert main(["bench", "plan", "--sets", "", "--log-n", "4", "--repeats", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "CHOSEN" in out and os.path.exists(plan.cache_path())
    saved = json.loads(next(tmp_path.glob("plan-*.json")).read_text(encoding="utf-8"))
    timed = [r for r in saved["results"] if r["median_s"] is not None]
    assert sum(r["extra"]["chosen"] for r in timed) == 1 and len(timed) >= 4
    assert main(["bench", "plan", "--reset"]) == 0
    assert "removed" in capsys.readouterr().out and not os.path.exists(plan.cache_path())


def test_a_faster_finalist_must_also_win_the_duel_against_the_default():
    """Round-robin re-timing overrules a lucky first measurement (fake runners, no compilation)."""
    default_method = variants.static_default(jax.default_backend())[0]
    other = "mat3" if default_method != "mat3" else "butterfly"
    # the first measurement says `other` is 10x faster, but run back to back it is 2x slower
    speed = {default_method: 1.0, other: 2.0}

    def runner(method):
        def run():
            run.t += speed[method]
        run.t = 0.0
        return run

    def measure(v):
        return (0.1 if v.method == other else 1.0), 0.0, runner(v.method)

    real_samples = planner._samples
    try:  # a deterministic clock: each runner call "takes" its speed
        planner._samples = lambda run, repeats: [_cost(run) for _ in range(max(1, repeats))]
        choice = plan.plan_ntt(N, MODULI, measure=measure, budget_s=1e9)
    finally:
        planner._samples = real_samples
    assert choice.variant.method == default_method
    duels = cache.lookup(cache.entry_key(choice.shape))["duels"]
    # every variant of the lucky method was tried against the default and lost by 2x
    assert duels and all(d["finalist"].startswith(other) for d in duels)
    assert all(d["time_ratio"] == pytest.approx(2.0) for d in duels)


def _cost(run):
    before = run.t
    run()
    return run.t - before


def test_cache_key_names_the_native_instruction_set(monkeypatch):
    """A plan timed with the native kernels forced to a lower instruction set is not served to runs on another one
    (issue 25: a P16 plan timed under ``scalar`` chose the JAX butterfly and was reused by avx512 runs)."""
    from hemx.kernels import native  # noqa: PLC0415
    from tests.helpers.native import REQUIRE_ENV  # noqa: PLC0415

    monkeypatch.delenv("HEMX_NATIVE", raising=False)  # the suite may run with the library off elsewhere
    if not native.available():
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but the native library is unavailable: {native.reason()}")
        pytest.skip(f"native library unavailable: {native.reason()}")
    keys = {}
    try:
        for name in native.runnable_isas():
            native.set_isa(name)
            keys[name] = cache.environment_key()["native"]
    finally:
        native.set_isa("auto")
    assert len(set(keys.values())) == len(keys) >= 2, keys
    assert all(k.endswith("/" + name) for name, k in keys.items()), keys
