"""JAX's persistent compilation cache as hemx sets it up (hemx/compilation_cache.py) and ``hemx cache``.

The suite itself never uses hemx's cache (tests/conftest.py: tests/run_suite.py gives its processes a temporary
cache of their own, a plain pytest run none); the tests that need it on run a small hemx program
in a subprocess (JAX opens its cache once per process) with temporary cache directories.
"""

import json
import os
import subprocess
import sys

import pytest

from hemx import cli
from hemx import compilation_cache as cc
from hemx.errors import ParameterError

from tests.helpers.suite_cache import CACHE_LINE, SUITE_CACHE_ENV

# an NTT of a small ring (jitted hemx kernels), then what hemx decided and JAX's settings, as one JSON line
PROGRAM = r"""
import json
from jax import monitoring
hits = []
monitoring.register_event_listener(lambda name, **kw: hits.append(name) if name.endswith("cache_hits") else None)
import jax, numpy as np
import hemx
from hemx.nt import ntt_primes
from hemx.plan import planning_budget
ring = hemx.ring.RNSRing(64, ntt_primes(28, 2, 64))
jax.block_until_ready(ring.ntt(np.arange(128, dtype=np.uint32).reshape(2, 64)))
print(json.dumps({"status": hemx.compilation_cache.status().as_dict(), "hits": len(hits),
                  "dir": jax.config.jax_compilation_cache_dir,
                  "min_time": jax.config.jax_persistent_cache_min_compile_time_secs,
                  "min_size": jax.config.jax_persistent_cache_min_entry_size_bytes,
                  "budget": planning_budget()}))
"""


def _run(tmp_path, **env_changes) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HEMX_COMPILATION_CACHE", "JAX_COMPILATION_CACHE_DIR")
           and not k.startswith("JAX_PERSISTENT_CACHE")}
    env.update(HEMX_CACHE_DIR=str(tmp_path / "hemx"), HEMX_PLAN="off", **env_changes)
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _entries(directory) -> list[str]:
    return sorted(f for f in os.listdir(directory) if f.endswith("-cache")) if os.path.isdir(directory) else []


def test_enabled_by_default_writes_then_reads_entries(tmp_path):
    hemx_dir = tmp_path / "hemx" / cc.DIR_NAME
    first = _run(tmp_path)
    assert first["status"]["enabled"] and first["status"]["managed_by"] == "hemx"
    assert first["dir"] == first["status"]["directory"] == str(hemx_dir)
    assert (first["min_time"], first["min_size"]) == (cc.MIN_COMPILE_TIME_S, cc.MIN_ENTRY_SIZE_BYTES)
    written = _entries(hemx_dir)
    assert any("ntt" in name for name in written), written  # the ring's NTT program, short as it is to compile
    assert first["hits"] == 0
    # with the cache on, the planner finishes a search on first use (its choice is baked into cached programs)
    assert first["budget"] > 3.0
    second = _run(tmp_path)  # a new process loads the programs instead of compiling them
    assert second["hits"] >= 1
    assert _entries(hemx_dir) == written


def test_disabled_leaves_no_files(tmp_path):
    result = _run(tmp_path, HEMX_COMPILATION_CACHE="0")
    assert not result["status"]["enabled"] and result["status"]["managed_by"] == "off"
    assert result["dir"] is None and result["budget"] == 3.0
    assert "HEMX_COMPILATION_CACHE=0" in result["status"]["reason"]
    assert not os.path.exists(tmp_path / "hemx" / cc.DIR_NAME)


def test_user_configured_jax_cache_is_respected(tmp_path):
    user_dir = tmp_path / "users-jax-cache"
    result = _run(tmp_path, JAX_COMPILATION_CACHE_DIR=str(user_dir), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    assert result["status"]["managed_by"] == "user" and result["dir"] == str(user_dir)
    assert "JAX_COMPILATION_CACHE_DIR" in result["status"]["reason"]
    assert result["min_size"] == 0  # hemx did not touch the user's thresholds
    assert _entries(user_dir) and not os.path.exists(tmp_path / "hemx" / cc.DIR_NAME)


def test_user_threshold_kept_when_hemx_enables_the_cache(tmp_path):
    result = _run(tmp_path, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="1000")
    assert result["status"]["managed_by"] == "hemx" and result["min_time"] == 1000.0
    assert result["min_size"] == cc.MIN_ENTRY_SIZE_BYTES
    assert _entries(tmp_path / "hemx" / cc.DIR_NAME) == []  # nothing compiles for 1000 s


@pytest.mark.parametrize("value, expected", [("", True), ("1", True), ("on", True), (" YES ", True),
                                             ("0", False), ("off", False), ("False", False), ("no", False)])
def test_switch_values(value, expected):
    assert cc.requested({cc.ENV_SWITCH: value}) is expected
    assert cc.requested({}) is True


@pytest.mark.parametrize("value", ["2", "maybe", "/some/dir"])
def test_bad_switch_value_is_a_parameter_error(value):
    with pytest.raises(ParameterError, match=cc.ENV_SWITCH):
        cc.requested({cc.ENV_SWITCH: value})


def _suite_cache() -> str | None:
    """The run's shared cache directory when tests/run_suite.py runs this process (tests/conftest.py), else None."""
    directory = os.environ.get(SUITE_CACHE_ENV, "")
    return directory if os.path.isdir(directory) else None


def test_suite_never_uses_hemx_cache():
    """hemx's own cache (the user's) is off in the suite; under tests/run_suite.py JAX's cache is the run's
    temporary directory, configured before hemx's import, which hemx then leaves alone ("user")."""
    import jax

    assert os.environ["HEMX_COMPILATION_CACHE"] == "0"
    shared = _suite_cache()
    if shared is None:
        assert not cc.status().enabled and jax.config.jax_compilation_cache_dir is None
    else:
        assert cc.status().managed_by == "user" and cc.status().directory == shared
        assert jax.config.jax_compilation_cache_dir == shared != cc.default_directory()
        assert os.path.basename(shared).startswith("hemx-suite-xla-")


def test_suite_cache_line_and_switch(monkeypatch):
    """run_suite's closing line is the sum of the processes' lines; HEMX_SUITE_XLA_CACHE=0 switches the shared
    cache off, any other value given by hand is refused (the suite makes the directory itself)."""
    from tests import run_suite

    hit = CACHE_LINE.match("suite cache: 12 programs loaded from the run's cache")
    assert hit and int(hit.group(1)) == 12
    monkeypatch.setenv(SUITE_CACHE_ENV, "0")
    assert run_suite.suite_cache() is None
    monkeypatch.setenv(SUITE_CACHE_ENV, "/somewhere")
    with pytest.raises(SystemExit, match="only 0"):
        run_suite.suite_cache()
    monkeypatch.delenv(SUITE_CACHE_ENV)
    made = run_suite.suite_cache()
    try:
        assert os.path.isdir(made) and not os.listdir(made)
    finally:
        os.rmdir(made)


def _cache_cli(capsys, *argv) -> str:
    capsys.readouterr()
    assert cli.main(["cache", *argv]) == 0
    return capsys.readouterr().out


def test_cache_info_and_clear(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HEMX_CACHE_DIR", str(tmp_path))
    compiled = tmp_path / cc.DIR_NAME
    compiled.mkdir()
    (compiled / "jit_f-0123-cache").write_bytes(b"x" * 1000)
    (compiled / "jit_f-0123-atime").write_bytes(b"t")
    plans = tmp_path / "plans.json"
    plans.write_text('{"format": 1, "entries": {}}')
    info = json.loads(_cache_cli(capsys, "info", "--json"))
    assert info["compilation_cache"]["hemx_directory"] == str(compiled)
    assert (info["compilation_cache"]["entries"], info["compilation_cache"]["bytes"]) == (1, 1001)
    assert info["plan_cache"] == {"path": str(plans), "exists": True}
    assert str(plans) in _cache_cli(capsys, "info")

    assert "removed" in _cache_cli(capsys, "clear", "--only", "compilation")
    assert not compiled.exists() and plans.exists()
    compiled.mkdir()
    (compiled / "jit_g-4567-cache").write_bytes(b"y")
    _cache_cli(capsys, "clear", "--only", "plans")
    assert not plans.exists() and compiled.exists()
    plans.write_text("{}")
    _cache_cli(capsys, "clear")
    assert not plans.exists() and not compiled.exists()
    assert "no plan cache" in _cache_cli(capsys, "clear")  # clearing nothing is fine
    with pytest.raises(SystemExit):
        cli.main(["cache", "clear", "--only", "everything"])


def test_info_shows_the_compilation_cache(capsys):
    assert cli.main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    shared = _suite_cache()
    if shared is None:
        assert "HEMX_COMPILATION_CACHE=0" in info["compilation_cache"]
    else:  # the suite's own cache, configured outside hemx
        assert shared in info["compilation_cache"] and "outside hemx" in info["compilation_cache"]

