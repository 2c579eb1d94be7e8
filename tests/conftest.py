"""Suite-wide settings: the planner's cache goes to a temporary directory (tests never write to the user's
cache), and planning is off (the documented static defaults), so the suite's timing does not depend on
machine load and no test pays for timing variants. ``tests/plan/test_plan.py`` switches planning on itself.
JAX's persistent compilation cache is off (``HEMX_COMPILATION_CACHE=0``, and a ``$JAX_COMPILATION_CACHE_DIR``
is dropped): the suite compiles afresh and never writes to a cache; ``tests/test_compilation_cache.py`` checks the
cache in subprocesses with temporary directories.

Property tests run under a hypothesis profile: ``ci`` (the default: 100 examples for every property test that
does not ask for more) or ``slow`` (1000), chosen with ``HEMX_HYPOTHESIS_PROFILE=slow``."""

import os
import tempfile

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=100, deadline=None)
settings.register_profile("slow", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HEMX_HYPOTHESIS_PROFILE", "ci"))

os.environ.setdefault("HEMX_CACHE_DIR", tempfile.mkdtemp(prefix="hemx-test-cache-"))
os.environ["HEMX_PLAN"] = "off"
os.environ["HEMX_COMPILATION_CACHE"] = "0"  # no persistent compilation cache in the suite (see the docstring)
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)  # nor the user's own JAX cache
