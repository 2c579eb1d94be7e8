"""Suite-wide settings: the planner's cache goes to a temporary directory (tests never write to the user's
cache), and planning is off (the documented static defaults), so the suite's timing does not depend on
machine load and no test pays for timing variants. ``tests/plan/test_plan.py`` switches planning on itself.
hemx's own compilation cache is off (``HEMX_COMPILATION_CACHE=0``, and a ``$JAX_COMPILATION_CACHE_DIR`` is dropped):
the suite never reads or writes the user's cache. ``tests/run_suite.py`` (``make test``) gives its pytest processes
one cache of their own instead, a fresh temporary directory named by ``$HEMX_SUITE_XLA_CACHE`` that it removes at the
end: a program one process compiled (the ``boot_12`` bootstrap, the small rings' operations, ...) is loaded by the
others, and each process's closing lines say how many programs it loaded instead of compiling
(``tests/helpers/suite_cache.CACHE_LINE``). A plain ``pytest`` run has no such variable and compiles everything afresh.
``tests/test_compilation_cache.py`` checks hemx's cache in subprocesses with temporary directories (subprocesses
never inherit the suite's cache: it is set in this process's JAX configuration, not in the environment JAX reads).

Property tests run under a hypothesis profile: ``ci`` (the default: 100 examples for every property test that
does not ask for more) or ``slow`` (1000), chosen with ``HEMX_HYPOTHESIS_PROFILE=slow``."""

import os
import tempfile

from hypothesis import HealthCheck, settings

from tests.helpers.suite_cache import SUITE_CACHE_ENV

settings.register_profile("ci", max_examples=100, deadline=None)
settings.register_profile("slow", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HEMX_HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("HEMX_CACHE_DIR", tempfile.mkdtemp(prefix="hemx-test-cache-"))
os.environ["HEMX_PLAN"] = "off"
os.environ["HEMX_COMPILATION_CACHE"] = "0"  # no persistent compilation cache in the suite (see the docstring)
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)  # nor the user's own JAX cache

_loaded = {"programs": 0}


def _use_suite_cache(directory: str) -> None:
    """JAX's persistent cache in ``directory`` for this process, every program written (as hemx sets its own)."""
    import jax
    from jax import monitoring

    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

    def on_event(name: str, **_) -> None:
        if name == "/jax/compilation_cache/cache_hits":
            _loaded["programs"] += 1

    monitoring.register_event_listener(on_event)


if os.path.isdir(os.environ.get(SUITE_CACHE_ENV, "")):
    _use_suite_cache(os.environ[SUITE_CACHE_ENV])


def pytest_terminal_summary(terminalreporter):
    if os.path.isdir(os.environ.get(SUITE_CACHE_ENV, "")):
        terminalreporter.write_line(f"suite cache: {_loaded['programs']} programs loaded from the run's cache")
