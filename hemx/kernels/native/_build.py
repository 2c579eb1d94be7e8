"""Build ``_hemx_native.so`` from ``csrc/`` with the system C++ compiler (used by ``setup.py``; no hemx imports).

The library is a plain shared object (loaded with ctypes, not a Python extension). Which files are compiled
depends on the target architecture the compiler builds for (``$CXX -dumpmachine``), never on the build machine's
CPU (no ``-march=native``):

* x86-64: the baseline files, plus ``ntt_avx2.cc`` (``-mavx2``), ``ntt_avx512.cc`` (AVX-512 F/VL/BW/DQ) and
  ``ntt_amx.cc`` (those and AMX-TILE / AMX-INT8; left out, with ``-DHEMX_NO_AMX``, by a compiler without them),
  ``aes_ni.cc`` (``-maes``) and ``aes_vaes.cc`` (AVX-512 and ``-mvaes``): the AES engines;
* aarch64: the baseline files, plus ``ntt_neon.cc`` (NEON is part of the AArch64 baseline) and ``aes_arm.cc``
  (``-march=armv8-a+crypto``);
* anything else: the baseline files alone (scalar kernels).

``dispatch.cc`` asks the CPU at run time which of them it can run, after the library has loaded; the ISA files
run nothing before that (docs/kernels.md states the rule; tests/kernels/native/test_native_build.py checks the
objects). The library is built with hidden visibility: only the FFI handlers and the C entry points are exported.
``$CXX`` is honoured (g++ and clang++ both work). The XLA FFI headers come from the installed jaxlib
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
#: Compiled for every target, with no instruction-set flag.
BASELINE = ("ffi.cc", "dispatch.cc", "selftest.cc", "ntt_scalar.cc", "aes_soft.cc")
#: Instruction-set files per target architecture -> their extra flags.
AVX512_FLAGS = ["-mavx512f", "-mavx512vl", "-mavx512bw", "-mavx512dq"]
ISA_SOURCES = {
    "x86_64": {"ntt_avx2.cc": ["-mavx2"], "ntt_avx512.cc": AVX512_FLAGS,
               "ntt_amx.cc": AVX512_FLAGS + ["-mamx-tile", "-mamx-int8"],
               "aes_ni.cc": ["-maes", "-msse4.1"], "aes_vaes.cc": AVX512_FLAGS + ["-maes", "-mvaes"]},
    "aarch64": {"ntt_neon.cc": [], "aes_arm.cc": ["-march=armv8-a+crypto"]},
}
#: The namespace each instruction-set file defines its symbols in (kernels.h's rule; the build tests check it).
ISA_NAMESPACES = {"ntt_avx2.cc": "avx2", "ntt_avx512.cc": "avx512", "ntt_amx.cc": "amx", "ntt_neon.cc": "neon",
                  "aes_ni.cc": "aes_ni", "aes_vaes.cc": "aes_vaes", "aes_arm.cc": "aes_arm"}
#: Instruction-set files a compiler may lack the flags for: left out (with ``-D<macro>`` for every file) when a
#: probe compile with their flags fails, so an older compiler still builds the rest.
OPTIONAL_SOURCES = {"ntt_amx.cc": "HEMX_NO_AMX", "aes_vaes.cc": "HEMX_NO_VAES"}
COMMON = ["-std=c++17", "-fPIC", "-fno-math-errno", "-Wno-attributes", "-fvisibility=hidden",
          "-fvisibility-inlines-hidden"]
OPT = "-O3"


def machine(cxx: list[str]) -> str:
    """The target triple ``cxx`` compiles for (``-dumpmachine``, e.g. "x86_64-linux-gnu")."""
    try:
        return subprocess.run(cxx + ["-dumpmachine"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError as exc:
        raise BuildError(f"cannot run {cxx[0]}: {exc}") from exc


def target_arch(cxx: list[str]) -> str:
    """The architecture ``cxx`` compiles for ("x86_64", "aarch64", ...), from ``-dumpmachine``."""
    out = machine(cxx)
    arch = out.split("-", 1)[0] if out else ""
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)


def sources_for(arch: str) -> dict[str, list[str]]:
    """File -> extra flags for a target architecture (baseline files first)."""
    out = {name: [] for name in BASELINE}
    out.update(ISA_SOURCES.get(arch, {}))
    return out


def compiler() -> list[str]:
    """The C++ compiler command: ``$CXX`` (may carry arguments), else g++ / c++ on PATH."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise BuildError("no C++ compiler (g++ / c++ / $CXX) on PATH")
    return shlex.split(cxx)


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


def build(src_dir: str, out_path: str, tmp_dir: str, *, verbose: bool = False, cxx: list[str] | None = None,
          opt: str = OPT, include: str | None = None) -> str:
    """Compile ``src_dir``'s sources into ``out_path``; returns it. Raises :class:`BuildError` on failure.

    ``cxx``: the compiler command (default :func:`compiler`); ``opt``: the optimisation flag (the object checks
    also build at ``-O0``); ``include``: the XLA FFI header directory (default :func:`find_ffi_include`). The
    objects stay in ``tmp_dir`` (``<file>.o``).
    """
    cxx_cmd = list(cxx) if cxx else compiler()
    include = include or find_ffi_include()
    arch = target_arch(cxx_cmd)
    os.makedirs(tmp_dir, exist_ok=True)
    sources = sources_for(arch)
    defines = []
    for name, macro in OPTIONAL_SOURCES.items():
        if name in sources and not accepts_flags(cxx_cmd, sources[name], tmp_dir):
            if verbose:
                print(f"hemx: {cxx_cmd[0]} does not accept {' '.join(sources[name])}: building without {name}",
                      file=sys.stderr)
            del sources[name]
            defines.append("-D" + macro)
    objects = []
    for name, flags in sources.items():
        src = os.path.join(src_dir, name)
        obj = os.path.join(tmp_dir, name + ".o")
        cmd = (cxx_cmd + [opt] + COMMON + defines + flags + ["-isystem", include, "-I", src_dir, "-c", src, "-o", obj])
        _run(cmd, verbose)
        objects.append(obj)
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    tmp_out = out_path + ".tmp"
    link = cxx_cmd + ["-shared", "-o", tmp_out] + objects + ["-lpthread"]
    if "linux" in machine(cxx_cmd):  # GNU ld / lld: export the handlers and C entry points, nothing else
        script = os.path.join(tmp_dir, "exports.map")
        with open(script, "w") as fh:
            fh.write("{\n  global: Hemx*; hemx_native_*;\n  local: *;\n};\n")
        link.append("-Wl,--version-script=" + script)
    _run(link, verbose)
    os.replace(tmp_out, out_path)  # atomic: a running process keeps its mapped copy
    return out_path


def accepts_flags(cxx: list[str], flags: list[str], tmp_dir: str) -> bool:
    """Whether ``cxx`` compiles a file with ``flags`` (e.g. an older compiler without ``-mamx-int8``)."""
    probe = os.path.join(tmp_dir, "flags_probe.cc")
    with open(probe, "w") as fh:
        fh.write("int hemx_flags_probe() { return 0; }\n")
    try:
        proc = subprocess.run(cxx + ["-std=c++17"] + flags + ["-c", probe, "-o", probe + ".o"], capture_output=True,
                              check=False)
    except OSError:
        return False
    return proc.returncode == 0


def build_selftest_driver(src_dir: str, out_path: str, *, cxx: list[str] | None = None, verbose: bool = False) -> str:
    """Compile ``csrc/tools/selftest.cc`` (loads a library with dlopen and runs its self-test) into ``out_path``."""
    cxx_cmd = list(cxx) if cxx else compiler()
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    _run(cxx_cmd + ["-O1", "-std=c++17", os.path.join(src_dir, "tools", "selftest.cc"), "-o", out_path, "-ldl"],
         verbose)
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
