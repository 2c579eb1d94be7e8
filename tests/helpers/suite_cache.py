"""The suite's shared compilation cache: the variable ``tests/run_suite.py`` sets for its pytest processes and the
closing line each process prints (read back by run_suite). ``tests/conftest.py`` switches the cache on."""

import re

SUITE_CACHE_ENV = "HEMX_SUITE_XLA_CACHE"
CACHE_LINE = re.compile(r"^suite cache: (\d+) programs loaded from the run's cache")
