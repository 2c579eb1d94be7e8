"""What the suite needs from the system (Debian packages that ``scripts/system-deps.sh`` installs).

A test that needs one calls :func:`need_tool` or :func:`need_fashion_mnist`. Where the package is missing the test
is reported as *not run*: pytest skips it with a reason that starts with :data:`NOT_RUN` and names the package and
the command that installs it (``tests/run_suite.py`` gathers those reasons into its closing lines). With ``CI`` set
the same test fails instead: CI installs every package (``.ci/run`` runs the same script) and must run every test.
"""

from __future__ import annotations

import functools
import os
import shutil

import pytest

IN_CI = bool(os.environ.get("CI"))
NOT_RUN = "not run: needs Debian's"  # the prefix tests/run_suite.py looks for in skip reasons
SCRIPT = "scripts/system-deps.sh"


def _missing(package: str, what: str) -> None:
    msg = (f"{NOT_RUN} {package} ({what}); install it with "
           f"`sudo apt-get update && sudo apt-get install -y {package}` or run `{SCRIPT}` as root")
    if IN_CI:
        pytest.fail(msg)
    pytest.skip(msg)


def need_tool(tool: str, package: str) -> str:
    """The path of the executable ``tool`` (from Debian's ``package``); not run (failed in CI) when missing."""
    path = shutil.which(tool)
    if path:
        return path
    _missing(package, f"{tool} not found")
    raise AssertionError("unreachable")  # pytest.skip / pytest.fail raise


@functools.lru_cache(maxsize=None)
def _fashion_mnist_problem(folder: str) -> str | None:
    from hemx.nn import data

    for split in ("test", "train"):
        try:
            data.fashion_mnist(split)
        except data.DataUnavailableError:
            return f"its {split} split is not in {folder or data.FASHION_MNIST_DIR}"
    return None


def need_fashion_mnist() -> None:
    """Fashion-MNIST's IDX files (Debian's dataset-fashion-mnist, or ``$HEMX_FASHION_MNIST_DIR``); not run (failed
    in CI) when absent."""
    problem = _fashion_mnist_problem(os.environ.get("HEMX_FASHION_MNIST_DIR", ""))
    if problem is not None:
        _missing("dataset-fashion-mnist", f"Fashion-MNIST: {problem}")
