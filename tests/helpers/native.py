"""The instruction-set paths of ``hemx.kernels.native`` that this CPU can run, for the tests in
``tests/kernels/native`` (their ``native_on`` fixture is in that directory's ``conftest.py``)."""

from __future__ import annotations

import functools
import os

from hemx.errors import BackendError, ParameterError
from hemx.kernels import native

#: Set (to 1) where the native library must have been built, e.g. ``make test`` and so CI: its absence then fails
#: the native tests instead of skipping them (an install without a C++ compiler is valid and uses the JAX kernels).
REQUIRE_ENV = "HEMX_REQUIRE_NATIVE"


def library_built() -> bool:
    """Whether the native library loads here, ``HEMX_NATIVE`` aside."""
    saved = os.environ.pop("HEMX_NATIVE", None)
    try:
        return native.available()
    finally:
        if saved is not None:
            os.environ["HEMX_NATIVE"] = saved


@functools.lru_cache(maxsize=None)
def _supported() -> tuple[str, ...]:
    saved = os.environ.pop("HEMX_NATIVE", None)  # listed under HEMX_NATIVE=0 too (the fixture re-enables)
    out = []
    if not library_built():
        return ()
    try:
        for name in native.ISAS:
            try:
                native.set_isa(name)
                out.append(name)
            except ParameterError:
                pass
        native.set_isa("auto")
    finally:
        if saved is not None:
            os.environ["HEMX_NATIVE"] = saved
    return tuple(out)


def supported_isas() -> list[str]:
    """Every name in ``native.ISAS`` that ``native.set_isa`` accepts here ("scalar" always: checked), leaving the
    library on "auto"; computed once per process. Empty where the library is not built (the tests parametrized
    over it are then skipped, or fail through ``native_on`` under :data:`REQUIRE_ENV`)."""
    out = list(_supported())
    assert not out or "scalar" in out, out
    return out
