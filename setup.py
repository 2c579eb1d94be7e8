"""Build hook: the optional native CPU kernels (csrc/ -> hemx/kernels/native/_hemx_native.so).

Everything else about the package is in pyproject.toml. The library is a plain shared object (loaded with
ctypes and registered with XLA's FFI), built by the system C++ compiler. It is optional: when the compiler or
jaxlib's XLA FFI headers are missing, or the build fails, the install still succeeds (with a warning) and
hemx uses its JAX kernels (``hemx info`` says which path is active). Works for editable installs
(``pip install -e .``: the library lands in the source tree) and wheels. Set HEMX_BUILD_NATIVE=0 to skip it.
"""

import importlib.util
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
NATIVE_EXT = "hemx.kernels.native._hemx_native"


def _builder():
    """hemx/kernels/native/_build.py, loaded by path (importing hemx would need jax in the build env)."""
    path = os.path.join(ROOT, "hemx", "kernels", "native", "_build.py")
    spec = importlib.util.spec_from_file_location("_hemx_native_build", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class BuildNative(build_ext):
    """build_ext whose one "extension" is the native library, compiled by _build.py and never fatal."""

    def _native_path(self):
        rel = os.path.join("hemx", "kernels", "native", "_hemx_native.so")
        # editable installs (pip install -e .) and --inplace builds: next to the sources, where hemx looks
        if getattr(self, "editable_mode", False) or self.inplace:
            return os.path.join(ROOT, rel)
        return os.path.join(self.build_lib, rel)

    def build_extension(self, ext):
        if ext.name != NATIVE_EXT:
            return super().build_extension(ext)
        if os.environ.get("HEMX_BUILD_NATIVE", "1").strip().lower() in ("0", "off", "false", "no"):
            print("hemx: HEMX_BUILD_NATIVE=0, skipping the native kernels", file=sys.stderr)
            return None
        out = self._native_path()
        try:
            b = _builder()
            b.build(os.path.join(ROOT, "csrc"), out, os.path.join(self.build_temp, "hemx_native"),
                    verbose=bool(self.verbose))
        except Exception as exc:  # noqa: BLE001 - optional: any failure leaves hemx on its JAX kernels
            print(f"hemx: WARNING: native kernels not built ({type(exc).__name__}: {exc}); "
                  "hemx will use its JAX kernels", file=sys.stderr)
        return None

    def copy_extensions_to_source(self):  # the library is already built in place (see _native_path)
        pass

    def get_outputs(self):
        out = self._native_path()
        return [out] if os.path.exists(out) and not out.startswith(ROOT + os.sep + "hemx") else []

    def get_output_mapping(self):
        return {}


setup(
    ext_modules=[Extension(NATIVE_EXT, sources=[], optional=True)],
    cmdclass={"build_ext": BuildNative},
)
