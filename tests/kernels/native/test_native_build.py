"""The native library runs on every CPU (issue 25): nothing compiled for an instruction set runs before that
instruction set is detected, and every path is exercised here whatever CPU the suite gets.

* Static checks of the objects ``_build.py`` makes from ``csrc/`` (g++ at -O3 and -O0, clang++ where present):
  no initializer section in an instruction-set object (what made the library die with SIGILL on CPUs without
  AVX-512: constructors compiled with -mavx512f ran at load time), no VEX/EVEX instruction in a baseline object,
  no symbol an instruction-set object defines outside its own namespace (a weak copy of a shared inline function
  could be picked by the linker for every caller), only the FFI handlers and C entry points exported.
* The library's own self-test (through ctypes, no JAX) on every instruction set this CPU runs.
* Under ``qemu-x86_64`` (Debian's qemu-user: its CPU model "max" has AVX2 but no AVX-512, "Nehalem-v1" has no
  AVX): the library loads, picks avx2 / scalar, and its self-test passes; under "max" also ``import hemx``, NTTs
  and a CKKS multiply through the native kernels, bit-identical to the JAX kernels (``qemu_smoke.py``).
* aarch64: ``csrc/`` cross-compiled with ``aarch64-linux-gnu-g++`` (scalar + NEON), its self-test under
  ``qemu-aarch64``.

The tools (qemu-user, g++-aarch64-linux-gnu, clang-14) are Debian packages that ``scripts/system-deps.sh`` installs
(``make test`` and ``.ci/run`` run it): in CI (``CI`` set) a missing tool fails these tests; elsewhere they are
reported as not run, naming the package to install (``tests/helpers/system.py``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from hemx.kernels import native
from tests.helpers.system import need_tool as need

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CSRC = os.path.join(ROOT, "csrc")


def _builder():
    spec = importlib.util.spec_from_file_location("_hemx_native_build_t",
                                                  os.path.join(ROOT, "hemx", "kernels", "native", "_build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


B = _builder()


def _clang() -> str | None:
    return shutil.which("clang++") or shutil.which("clang++-14")


@functools.lru_cache(maxsize=None)
def _build(variant: str, root: str) -> tuple[str, str]:
    """(library path, object directory) of one build of csrc/ (cached per variant for the session)."""
    cxx, opt = {
        "g++-O3": (["g++"], "-O3"),
        "g++-O0": (["g++"], "-O0"),
        "clang++-O3": ([_clang() or "clang++"], "-O3"),
        "aarch64-O3": (["aarch64-linux-gnu-g++"], "-O3"),
    }[variant]
    out = os.path.join(root, variant)
    lib = B.build(CSRC, os.path.join(out, "lib.so"), os.path.join(out, "obj"), cxx=cxx, opt=opt,
                  include=B.find_ffi_include())
    return lib, os.path.join(out, "obj")


@pytest.fixture(scope="module")
def build_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("native_builds"))


def _tool_for(variant: str) -> None:
    if variant.startswith("clang"):
        if not _clang():
            need("clang++-14", "clang-14")
    elif variant.startswith("aarch64"):
        need("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu")


X86_VARIANTS = ["g++-O3", "g++-O0", "clang++-O3"]
# every instruction-set file of each target (_build.py's lists: the vector kernels, the AMX tiles, the AES engines)
ISA_OBJECTS = {"x86": tuple(f + ".o" for f in B.ISA_SOURCES["x86_64"]),
               "aarch64": tuple(f + ".o" for f in B.ISA_SOURCES["aarch64"])}
BASELINE_OBJECTS = tuple(f + ".o" for f in B.BASELINE)


def _objdump(tool: str, obj: str, *args: str) -> str:
    return subprocess.run([tool, *args, obj], capture_output=True, text=True, check=True).stdout


def _arch_of(variant: str) -> str:
    return "aarch64" if variant.startswith("aarch64") else "x86"


def _binutil(variant: str, name: str) -> str:
    if _arch_of(variant) == "aarch64":
        return need(f"aarch64-linux-gnu-{name}", "binutils-aarch64-linux-gnu")
    return need(name, "binutils")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF object checks (Linux)")
@pytest.mark.parametrize("variant", X86_VARIANTS + ["aarch64-O3"])
def test_isa_objects_run_nothing_at_load_and_share_nothing(variant, build_root):
    _tool_for(variant)
    lib, objdir = _build(variant, build_root)
    readelf, nm = _binutil(variant, "readelf"), _binutil(variant, "nm")
    for obj in ISA_OBJECTS[_arch_of(variant)]:
        problems = isa_object_problems(os.path.join(objdir, obj), B.ISA_NAMESPACES[obj[:-len(".o")]], readelf, nm)
        assert not problems, f"{obj} ({variant}): {problems}"


def isa_object_problems(path: str, isa: str, readelf: str, nm: str) -> list[str]:
    """What breaks kernels.h's rule in the object of instruction set ``isa``: an initializer section (code run at
    load, before the ISA check), or a symbol with external linkage outside namespace hemx::<isa>."""
    problems = []
    sections = _objdump(readelf, path, "-S", "-W")
    for sec in (".init_array", ".ctors", ".preinit_array"):
        if sec in sections:
            problems.append(f"has {sec}: code would run at load, before the ISA check")
    # (mangled names: _ZN4hemx4avx2..., _ZNK... for const members, _ZZN... for a function's local statics)
    own = re.compile(rf"^_Z[NZ]K?4hemx{len(isa)}{isa}")
    defined = [line.split(" ", 2) for line in _objdump(nm, path, "--defined-only").splitlines() if line]
    foreign = [name for _, kind, name in defined if kind in "TWVDBRGSuvw" and not own.match(name)]
    if foreign:
        problems.append(f"defines symbols outside hemx::{isa}: {foreign[:5]}")
    return problems


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine != "x86_64", reason="x86-64 host")
def test_isa_object_check_catches_initializers_and_shared_inline_functions(tmp_path):
    """The check above fails on the two mistakes it exists for (so it cannot pass vacuously)."""
    src = tmp_path / "bad_avx2.cc"
    src.write_text(
        "#include <immintrin.h>\n"
        "inline int shared_helper(int x) { return x * 3; }  // external linkage: a weak copy per object\n"
        "namespace hemx { namespace avx2 {\n"
        "static __m256i make() { return _mm256_set1_epi32(shared_helper(7)); }\n"
        "static const __m256i kTable = make();  // a dynamic initializer compiled with -mavx2\n"
        "int use() { return _mm256_extract_epi32(kTable, 0) + shared_helper(1); }\n"
        "} }\n")
    obj = tmp_path / "bad_avx2.o"
    subprocess.run(["g++", "-O0", "-mavx2", "-c", str(src), "-o", str(obj)], check=True)
    problems = isa_object_problems(str(obj), "avx2", need("readelf", "binutils"), need("nm", "binutils"))
    assert any(".init_array" in p for p in problems), problems
    assert any("shared_helper" in p or "_Z13shared_helper" in p for p in problems), problems


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF object checks (Linux)")
@pytest.mark.parametrize("variant", X86_VARIANTS)
def test_baseline_objects_hold_no_vex_or_evex_instruction(variant, build_root):
    _tool_for(variant)
    lib, objdir = _build(variant, build_root)
    objdump = _binutil(variant, "objdump")
    # a disassembled instruction line: "  addr:<TAB>bytes<TAB>mnemonic operands"
    insn = re.compile(r"^\s*[0-9a-f]+:\t[0-9a-f ]+\t(\S+)\s*(.*)$")
    for obj in BASELINE_OBJECTS:
        bad = []
        for line in _objdump(objdump, os.path.join(objdir, obj), "-d", "--no-show-raw-insn").splitlines():
            m = re.match(r"^\s*[0-9a-f]+:\t(\S+)\s*(.*)$", line) or insn.match(line)
            if not m:
                continue
            mnemonic, operands = m.group(1), m.group(2)
            if mnemonic.startswith("v") or re.search(r"%[yz]mm\d|%k[0-7]\b", operands):
                bad.append(line.strip())
        assert not bad, f"{obj} ({variant}) is baseline code but holds VEX/EVEX instructions: {bad[:3]}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF export table (Linux)")
@pytest.mark.parametrize("variant", ["g++-O3", "aarch64-O3"])
def test_library_exports_only_the_handlers_and_c_entry_points(variant, build_root):
    _tool_for(variant)
    lib, _ = _build(variant, build_root)
    nm = _binutil(variant, "nm")
    names = [line.split()[-1] for line in _objdump(nm, lib, "-D", "--defined-only").splitlines() if line.strip()]
    assert "HemxNttForward" in names and "hemx_native_selftest" in names, names
    stray = [n for n in names if not (n.startswith("Hemx") or n.startswith("hemx_native_"))]
    assert not stray, f"unexpected exported symbols: {stray[:5]}"


def test_selftest_through_ctypes_passes_on_every_isa_this_cpu_runs(native_on):
    line = native.selftest()
    runnable = native.runnable_isas()
    assert line == "ok: " + ", ".join(runnable), (line, runnable)
    # the library itself picks the best vector instruction set; "amx" only the planner (hemx/plan/engine.py)
    assert runnable[-1] == "scalar" and native.isa() == next(n for n in runnable if n != "amx")


def test_isa_env_var_picks_lower_isa_and_refuses_impossible_ones(native_on, tmp_path):
    """HEMX_NATIVE_ISA is applied when the library loads (a fresh process each)."""
    runnable = native.runnable_isas()
    code = "from hemx.kernels import native as n; print(n.isa())"
    for name in runnable:
        out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "HEMX_NATIVE_ISA": name},
                             capture_output=True, text=True, cwd=ROOT)
        assert out.returncode == 0 and out.stdout.strip() == name, out.stderr[-2000:]
    missing = [n for n in native.ISAS if n not in runnable]
    assert missing  # an x86 build lacks neon; an aarch64 one lacks avx2 / avx512
    for name in missing + ["sse9"]:
        out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "HEMX_NATIVE_ISA": name},
                             capture_output=True, text=True, cwd=ROOT)
        assert out.returncode != 0 and "ParameterError" in out.stderr and "HEMX_NATIVE_ISA" in out.stderr, out


# ------------------------------------------------------------------------------------------------- emulated CPUs


@functools.lru_cache(maxsize=None)
def _driver(arch: str, root: str) -> str:
    cxx = ["aarch64-linux-gnu-g++"] if arch == "aarch64" else ["g++"]
    return B.build_selftest_driver(CSRC, os.path.join(root, f"selftest-{arch}"), cxx=cxx)


def _run_driver(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine != "x86_64", reason="x86-64 host")
@pytest.mark.parametrize("cpu,expected", [("Nehalem-v1", "scalar"), ("max", "avx2")])
def test_library_loads_and_passes_selftest_on_emulated_x86_cpus(cpu, expected, build_root):
    qemu = need("qemu-x86_64", "qemu-user")
    lib, _ = _build("g++-O3", build_root)
    out = _run_driver([qemu, "-cpu", cpu, _driver("x86", build_root), lib, expected])
    assert out.returncode == 0, f"qemu -cpu {cpu}: rc {out.returncode}\n{out.stdout}\n{out.stderr[-2000:]}"
    assert f"isa: {expected}" in out.stdout and "selftest: ok:" in out.stdout, out.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine != "x86_64", reason="x86-64 host")
def test_clang_build_passes_selftest(build_root):
    _tool_for("clang++-O3")
    lib, _ = _build("clang++-O3", build_root)
    out = _run_driver([_driver("x86", build_root), lib, "none"])
    assert out.returncode == 0 and "selftest: ok:" in out.stdout, out.stdout + out.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine != "x86_64", reason="x86-64 host")
def test_aarch64_cross_build_passes_selftest_under_qemu(build_root):
    _tool_for("aarch64-O3")
    qemu = need("qemu-aarch64", "qemu-user")
    lib, _ = _build("aarch64-O3", build_root)
    sysroot = "/usr/aarch64-linux-gnu"
    out = _run_driver([qemu, "-L", sysroot, _driver("aarch64", build_root), lib, "scalar"])
    assert out.returncode == 0, f"rc {out.returncode}\n{out.stdout}\n{out.stderr[-2000:]}"
    assert "built: neon,scalar" in out.stdout and "selftest: ok: neon, scalar" in out.stdout, out.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine != "x86_64", reason="x86-64 host")
def test_hemx_runs_native_kernels_on_an_emulated_avx2_cpu(native_on):
    """``import hemx``, NTTs and a CKKS multiply under ``qemu-x86_64 -cpu max`` (AVX2, no AVX-512) with the
    installed library: it picks avx2, and the results are bit-identical to the JAX kernels (qemu_smoke.py)."""
    qemu = need("qemu-x86_64", "qemu-user")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "JAX_PLATFORMS": "cpu", "HEMX_NATIVE_ISA": "auto"}
    env.pop("HEMX_NATIVE", None)
    # sys.executable as given (the venv's python, a symlink): qemu loads its target and the interpreter still
    # finds the venv from its argv[0]
    cmd = [qemu, "-cpu", "max", sys.executable, os.path.join(ROOT, "tests", "kernels", "native", "qemu_smoke.py"),
           "avx2"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    assert out.returncode == 0 and "SMOKE OK" in out.stdout, (
        f"rc {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
