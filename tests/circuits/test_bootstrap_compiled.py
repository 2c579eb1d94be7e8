"""The bootstrap circuit as one compiled program (``Bootstrapper.compiled``): bit for bit the eager circuit, compiled
once per arguments' structure and reused, ``"auto"`` compiling only after enough eager seconds, a program too large
for memory refused with a warning (and the eager result), bad settings refused.

At ``boot_12`` on the 2-core development machine each compilation costs 15-30 s (tracing about 12 s of it), so the
tests compile as few programs as they can: three in all.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np
import pytest

import hemx
from hemx.circuits.bootstrap import Bootstrapper, ExecutionStats
from hemx.circuits.bootstrap import bootstrapper as bootstrapper_module
from hemx.errors import ParameterError, PerformanceWarning
from tests.circuits.test_bootstrap import boot12


def _same(a, b) -> None:
    assert (a.level, a.scale, a.slots, a.is_complex) == (b.level, b.scale, b.slots, b.is_complex)
    assert np.array_equal(np.asarray(a.data), np.asarray(b.data))


def _delta(bt: Bootstrapper, before: ExecutionStats) -> dict:
    return {f.name: getattr(bt.stats, f.name) - getattr(before, f.name) for f in dataclasses.fields(ExecutionStats)
            if not f.name.endswith("_s")}  # the counts; seconds vary


def test_compiled_equals_eager_and_is_reused(monkeypatch):
    ctx, _, keys = boot12()
    bt = Bootstrapper(ctx, compiled="always")
    rng = np.random.default_rng(3)
    ct = ctx.encrypt(rng.uniform(-1, 1, ctx.slots), keys)
    first = bt.bootstrap(ct, keys)
    assert _delta(bt, ExecutionStats()) == {"compiled_calls": 1, "eager_calls": 0, "compilations": 1, "too_large": 0}
    assert bt.stats.compile_s > 0 and len(bt._programs) == 1
    program = next(iter(bt._programs.values()))
    assert program.temp_bytes > 0 and len(program.constants) > 0
    again = bt.bootstrap(ctx.drop_level(ct, 2), keys)  # another input level: dropped to 0, the same structure
    # another scale (the same data read at 1.25x the scale): the circuit does not read it, the same program
    rescaled = bt.bootstrap(ct.replace(scale=ct.scale * 1.25), keys)
    assert rescaled.scale == pytest.approx(first.scale * 1.25, rel=1e-12)
    assert bt.stats.compilations == 1 and bt.stats.compiled_calls == 3
    bt.compiled = "never"
    eager = bt.bootstrap(ct, keys)
    assert bt.stats.eager_calls == 1 and bt.stats.compilations == 1
    _same(first, eager)
    _same(again, bt.bootstrap(ctx.drop_level(ct, 2), keys))
    _same(rescaled, bt.bootstrap(ct.replace(scale=ct.scale * 1.25), keys))
    np.testing.assert_allclose(ctx.decrypt(first, keys)[: ctx.slots].real,
                               ctx.decrypt(ct, keys)[: ctx.slots].real, atol=1e-3)
    # a batch is another structure: a second program, the older one dropped beyond MAX_PROGRAMS
    monkeypatch.setattr(bootstrapper_module, "MAX_PROGRAMS", 1)
    batch = ctx.encrypt(rng.uniform(-1, 1, (2, ctx.slots)), keys)
    bt.compiled = "always"
    got = bt.bootstrap(batch, keys)
    assert bt.stats.compilations == 2 and len(bt._programs) == 1
    bt.compiled = "never"
    _same(got, bt.bootstrap(batch, keys))


def test_auto_compiles_after_its_eager_seconds_and_too_large_runs_eagerly(monkeypatch):
    ctx, _, keys = boot12()
    ct = ctx.encrypt(np.random.default_rng(4).uniform(-1, 1, ctx.slots), keys)
    # the default threshold: a boot_12 bootstrap (under a second eagerly) stays eager for many calls
    bt = Bootstrapper(ctx)
    assert bt.compiled == "auto"
    reference = bt.bootstrap(ct, keys)
    bt.bootstrap(ct, keys)
    assert _delta(bt, ExecutionStats()) == {"compiled_calls": 0, "eager_calls": 2, "compilations": 0, "too_large": 0}
    # a tiny threshold: the first call eager (its seconds counted), the second compiled
    monkeypatch.setattr(bootstrapper_module, "AUTO_AFTER_S", 1e-9)
    bt = Bootstrapper(ctx)
    bt.bootstrap(ct, keys)
    assert bt.stats.eager_calls == 1 and bt.stats.compilations == 0
    _same(bt.bootstrap(ct, keys), reference)
    assert bt.stats.compilations == 1 and bt.stats.compiled_calls == 1
    # a program whose temporaries do not fit: a PerformanceWarning, the eager circuit, not compiled again
    monkeypatch.setattr(bootstrapper_module, "MEMORY_SHARE", 0.0)
    bt = Bootstrapper(ctx, compiled="always")
    with pytest.warns(PerformanceWarning, match="runs eagerly"):
        out = bt.bootstrap(ct, keys)
    _same(out, reference)
    _same(bt.bootstrap(ct, keys), reference)
    assert _delta(bt, ExecutionStats()) == {"compiled_calls": 0, "eager_calls": 2, "compilations": 1, "too_large": 1}


def test_compiled_setting_is_checked():
    ctx, bt, keys = boot12()
    with pytest.raises(ParameterError, match="compiled must be one of"):
        Bootstrapper(ctx, compiled="yes")
    other = Bootstrapper(ctx, compiled="never")
    other.compiled = True
    with pytest.raises(ParameterError, match="compiled must be one of"):
        other.bootstrap(ctx.encrypt(np.zeros(4), keys), keys)
    assert hemx.circuits.bootstrap.COMPILED == ("auto", "always", "never")


def test_auto_does_not_count_the_eager_steps_own_compilation(monkeypatch):
    """A first eager call in a process that has not compiled the eager steps yet (a user's first bootstrap;
    ``jax.clear_caches()`` here) spends most of its time tracing and compiling them. ``"auto"`` counts only the
    seconds the circuit ran: with the threshold between those and the call's wall time, the second call is still
    eager (counting the wall time, as before, compiled the circuit at every second call of a new process)."""
    ctx, _, keys = boot12()
    ct = ctx.encrypt(np.random.default_rng(9).uniform(-1, 1, ctx.slots), keys)
    reference = Bootstrapper(ctx, compiled="never").bootstrap(ct, keys)
    jax.clear_caches()  # the eager steps' programs are made again by the next call
    bt = Bootstrapper(ctx)
    start = time.perf_counter()
    first = bt.bootstrap(ct, keys)
    wall = time.perf_counter() - start
    s = bt.stats
    assert s.eager_calls == 1 and s.compilations == 0
    assert s.eager_prepare_s > 0.0 and 0.0 < s.eager_s <= wall - s.eager_prepare_s + 1e-3, (s, wall)
    _same(first, reference)
    monkeypatch.setattr(bootstrapper_module, "AUTO_AFTER_S", (s.eager_s + wall) / 2)
    _same(bt.bootstrap(ct, keys), reference)
    assert bt.stats.eager_calls == 2 and bt.stats.compilations == 0, bt.stats
