"""Build ``_hemx_native.so`` from ``csrc/`` with the system C++ compiler (used by ``setup.py``; no hemx imports).

The library is a plain shared object (loaded with ctypes, not a Python extension). Every translation unit is
compiled for the baseline x86-64 ISA except ``ntt_avx2.cc`` (``-mavx2``) and ``ntt_avx512.cc`` (AVX-512
F/VL/BW/DQ); the library picks one at load time with ``__builtin_cpu_supports``, so it runs on any x86-64
CPU and never carries ``-march=native``. The XLA FFI headers come from the installed jaxlib
(``jax.ffi.include_dir()``), found without importing jax when the build runs in an isolated environment.
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import site
import subprocess
import sys
import sysconfig

LIB_NAME = "_hemx_native.so"
SOURCES = {  # file -> extra flags
    "ffi.cc": [],
    "ntt_scalar.cc": [],
    "ntt_avx2.cc": ["-mavx2"],
    "ntt_avx512.cc": ["-mavx512f", "-mavx512vl", "-mavx512bw", "-mavx512dq"],
}
COMMON = ["-O3", "-std=c++17", "-fPIC", "-fno-math-errno", "-Wno-attributes"]


class BuildError(RuntimeError):
    """The native library could not be built (no compiler, no headers, a compile error)."""


def _header_dir_candidates() -> list[str]:
    dirs = []
    env = os.environ.get("HEMX_FFI_INCLUDE")
    if env:
        dirs.append(env)
    try:  # jax importable here (no build isolation)
        import jax.ffi  # noqa: PLC0415

        dirs.append(jax.ffi.include_dir())
    except Exception:  # noqa: BLE001 - any failure just means "look elsewhere"
        pass
    roots = set()
    for scheme_path in ("platlib", "purelib"):
        for vars_ in ({}, {"base": sys.base_prefix, "platbase": sys.base_prefix}):
            try:
                roots.add(sysconfig.get_paths(vars=vars_ or None)[scheme_path])
            except KeyError:
                pass
    try:
        roots.update(site.getsitepackages())
    except AttributeError:
        pass
    roots.update(p for p in sys.path if p.endswith("site-packages"))
    # pip's isolated build runs with the target interpreter; its venv is VIRTUAL_ENV or the parent of python
    for prefix in filter(None, (os.environ.get("VIRTUAL_ENV"), os.path.dirname(os.path.dirname(sys.executable)))):
        roots.update(glob.glob(os.path.join(prefix, "lib", "python*", "site-packages")))
    dirs += [os.path.join(r, "jaxlib", "include") for r in sorted(roots)]
    return dirs


def find_ffi_include() -> str:
    """The directory holding ``xla/ffi/api/ffi.h`` (raises :class:`BuildError` when there is none)."""
    for d in _header_dir_candidates():
        if os.path.isfile(os.path.join(d, "xla", "ffi", "api", "ffi.h")):
            return d
    raise BuildError("XLA FFI headers not found (install jaxlib first, or set HEMX_FFI_INCLUDE)")


def build(src_dir: str, out_path: str, tmp_dir: str, *, verbose: bool = False) -> str:
    """Compile ``src_dir``'s sources into ``out_path``; returns it. Raises :class:`BuildError` on failure."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise BuildError("no C++ compiler (g++ / c++ / $CXX) on PATH")
    cxx_cmd = shlex.split(cxx)
    include = find_ffi_include()
    os.makedirs(tmp_dir, exist_ok=True)
    objects = []
    for name, flags in SOURCES.items():
        src = os.path.join(src_dir, name)
        obj = os.path.join(tmp_dir, name + ".o")
        cmd = cxx_cmd + COMMON + flags + ["-isystem", include, "-I", src_dir, "-c", src, "-o", obj]
        _run(cmd, verbose)
        objects.append(obj)
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    tmp_out = out_path + ".tmp"
    _run(cxx_cmd + ["-shared", "-o", tmp_out] + objects + ["-lpthread"], verbose)
    os.replace(tmp_out, out_path)  # atomic: a running process keeps its mapped copy
    return out_path


def _run(cmd: list[str], verbose: bool) -> None:
    if verbose:
        print(" ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise BuildError(f"cannot run {cmd[0]}: {exc}") from exc
    if proc.returncode != 0:
        raise BuildError(f"{' '.join(cmd[:2])} ... failed:\n{proc.stderr[-4000:]}")


if __name__ == "__main__":  # python hemx/kernels/native/_build.py  (rebuild in place after editing csrc/)
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    print(build(os.path.join(root, "csrc"), os.path.join(here, LIB_NAME), os.path.join(root, "build", "native"),
                verbose=True))
