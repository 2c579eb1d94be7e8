"""Shared by the native-kernel tests: ``native_on`` (autouse) clears ``HEMX_NATIVE`` for each test, so a suite run
with ``HEMX_NATIVE=0`` keeps every other test on the JAX kernels while these exercise the library, and puts the
instruction set and the thread cap back to their defaults afterwards. The list of instruction sets this CPU runs
is ``tests.helpers.native.supported_isas``."""

from __future__ import annotations

import os

import pytest

from hemx.kernels import native
from tests.helpers.native import REQUIRE_ENV


@pytest.fixture(autouse=True)
def native_on(monkeypatch):
    monkeypatch.delenv("HEMX_NATIVE", raising=False)
    if not native.available():
        # `make test` (and so CI) sets HEMX_REQUIRE_NATIVE=1: there a missing library is a failed build; an install
        # without a C++ compiler is valid (hemx runs its JAX kernels) and skips these tests, saying why
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but the native library is unavailable: {native.reason()}")
        pytest.skip(f"native library not built: {native.reason()}")
    yield
    monkeypatch.delenv("HEMX_NATIVE", raising=False)
    native.set_isa("auto")
    native.set_max_threads(0)
    native.set_inline_residues(None)
