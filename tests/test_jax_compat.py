"""hemx under JAX 0.11.x (what the lent GPU machines have: Python 3.12, JAX 0.11.2), beside the pinned 0.10.2.

A second virtual environment, ``build/jax011-venv`` (made once from PyPI with Python 3.12, since JAX 0.11 needs
Python >= 3.12, and reused while it holds JAX 0.11.2), runs ``tests/helpers/jax_compat_smoke.py`` with ``PYTHONPATH``
at this checkout and ``HEMX_NATIVE=0`` (the native library is built against the pinned jaxlib's headers): CKKS
encrypt, add, mul+rescale, rotate, a batched product and decrypt at N = 2^10, and one ``boot_12`` bootstrap, each
against numpy with a precision bound. Measured on the 2-core development machine: about 2 min 40 s with the venv
present (the bootstrap about 150 s of it, mostly compilation), plus about 1 min to make the venv.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "build", "jax011-venv")
JAX_VERSION = "0.11.2"
PACKAGES = [f"jax=={JAX_VERSION}", f"jaxlib=={JAX_VERSION}", "numpy", "rich"]  # rich: hemx's own dependency

pytestmark = pytest.mark.slow


def _python312() -> str | None:
    """A Python 3.12 interpreter (JAX 0.11 wheels need Python >= 3.12): this one, on PATH, or under pyenv."""
    if sys.version_info[:2] >= (3, 12):
        return sys.executable
    found = shutil.which("python3.12")
    candidates = ([found] if found else []) + sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    for exe in candidates:
        if subprocess.run([exe, "-c", "import venv"], capture_output=True).returncode == 0:
            return exe
    return None


def _venv_jax(python: str) -> str | None:
    proc = subprocess.run([python, "-c", "import jax, jaxlib; print(jax.__version__, jaxlib.__version__)"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _ensure_venv() -> str:
    python = os.path.join(VENV, "bin", "python")
    if os.path.exists(python) and _venv_jax(python) == f"{JAX_VERSION} {JAX_VERSION}":
        return python
    base = _python312()
    if base is None:
        pytest.fail("no Python 3.12 found (PATH or ~/.pyenv/versions/3.12*): JAX 0.11 needs one for this test")
    tmp = VENV + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run([base, "-m", "venv", tmp], check=True, capture_output=True)
    proc = subprocess.run([os.path.join(tmp, "bin", "python"), "-m", "pip", "install", "-q", *PACKAGES],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"pip install {' '.join(PACKAGES)} failed:\n{proc.stderr[-3000:]}"
    shutil.rmtree(VENV, ignore_errors=True)
    os.rename(tmp, VENV)  # venv scripts name their directory, but ``bin/python -m ...`` does not depend on it
    assert _venv_jax(python) == f"{JAX_VERSION} {JAX_VERSION}"
    return python


def test_ckks_and_boot_12_under_jax_0_11():
    python = _ensure_venv()
    env = dict(os.environ, PYTHONPATH=ROOT, HEMX_NATIVE="0", HEMX_PLAN="off")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    proc = subprocess.run([python, "-m", "tests.helpers.jax_compat_smoke"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=1200)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no result (status {proc.returncode}):\n{proc.stderr[-4000:]}"
    out = json.loads(lines[-1])
    assert out["jax"] == JAX_VERSION and out["python"].startswith("3.12") and out["backend"] == "cpu"
    assert proc.returncode == 0 and not out["failures"], out
    assert set(out["bits"]) == {"encrypt_decrypt", "add", "mul_rescale", "rotate", "batched_mul_rescale",
                                "program_second_key_set", "boot_12"}
    assert out["bits"]["boot_12"] >= 21.0 and out["boot_level_after"] >= 1
    print(f"JAX {out['jax']}: {out['seconds']}")
