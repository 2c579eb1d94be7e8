"""The one set-up path for system packages (``scripts/system-deps.sh``, run by ``make test`` and ``.ci/run``) and
how the suite reports tests it could not run for want of one (``tests/helpers/system.py``, ``tests/run_suite.py``).

Nothing here installs anything: the script runs with ``--check`` only, against a PATH and a data folder made here.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from tests.helpers.system import NOT_RUN
from tests.run_suite import NOT_RUN_LINE

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "system-deps.sh"
PACKAGES = ("qemu-user", "g++-aarch64-linux-gnu", "clang-14", "dataset-fashion-mnist")
TOOLS = ("qemu-x86_64", "qemu-aarch64", "aarch64-linux-gnu-g++", "clang++")


def _bin_dir(tmp_path: pathlib.Path, tools: tuple[str, ...]) -> pathlib.Path:
    """A folder with bash and the utilities the script calls, plus stand-ins for ``tools``."""
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("bash", "ls", "sed", "id", "dirname"):
        real = subprocess.run(["bash", "-c", f"command -v {name}"], capture_output=True, text=True).stdout.strip()
        (d / name).symlink_to(real)
    for name in tools:
        (d / name).write_text("#!/bin/sh\nexit 0\n")
        (d / name).chmod(0o755)
    return d


def _check(tmp_path, tools, data_dir):
    env = {"PATH": str(_bin_dir(tmp_path, tools)), "HEMX_FASHION_MNIST_DIR": str(data_dir), "HOME": str(tmp_path)}
    return subprocess.run(["bash", str(SCRIPT), "--check"], capture_output=True, text=True, env=env)


def test_check_names_every_missing_package_and_the_command(tmp_path):
    empty = tmp_path / "nodata"
    empty.mkdir()
    out = _check(tmp_path, (), empty)
    assert out.returncode == 1, out
    first = out.stderr.splitlines()[0]
    assert first == "system-deps: missing " + " ".join(PACKAGES), out.stderr
    assert "apt-get install -y " + " ".join(PACKAGES) in out.stderr
    assert "reported as not run" in out.stderr


def test_check_passes_when_everything_is_there(tmp_path):
    folder = tmp_path / "fmnist"
    folder.mkdir()
    for stem in ("t10k-images-idx3-ubyte.gz", "train-images-idx3-ubyte"):
        (folder / stem).write_bytes(b"")
    out = _check(tmp_path, TOOLS, folder)
    assert out.returncode == 0, out
    assert "all present" in out.stdout and not out.stderr


def test_check_finds_the_one_missing_tool(tmp_path):
    folder = tmp_path / "fmnist"
    folder.mkdir()
    for stem in ("t10k-images-idx3-ubyte", "train-images-idx3-ubyte"):
        (folder / stem).write_bytes(b"")
    out = _check(tmp_path, ("qemu-x86_64", "aarch64-linux-gnu-g++", "clang++"), folder)  # no qemu-aarch64
    assert out.returncode == 1 and out.stderr.splitlines()[0] == "system-deps: missing qemu-user", out


def test_unknown_option_is_refused():
    out = subprocess.run(["bash", str(SCRIPT), "--install-everything"], capture_output=True, text=True)
    assert out.returncode == 2 and "unknown option" in out.stderr


@pytest.mark.parametrize("ci", [False, True])
def test_missing_data_is_not_run_here_and_fails_in_ci(tmp_path, ci):
    """Without the data a test that needs it is skipped with the not-run reason (the line tests/run_suite.py counts),
    and with CI set it fails."""
    test_file = tmp_path / "test_needs_data.py"
    test_file.write_text(textwrap.dedent("""
        from tests.helpers.system import need_fashion_mnist

        def test_a():
            need_fashion_mnist()

        def test_b():
            need_fashion_mnist()
    """))
    empty = tmp_path / "nodata"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(HEMX_FASHION_MNIST_DIR=str(empty), PYTHONPATH=str(ROOT))
    if ci:
        env["CI"] = "true"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(test_file)],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    if ci:
        assert out.returncode == 1 and "2 failed" in out.stdout, out.stdout
        assert NOT_RUN + " dataset-fashion-mnist" in out.stdout
        return
    assert out.returncode == 0 and "2 skipped" in out.stdout, out.stdout
    hits = [NOT_RUN_LINE.match(line) for line in out.stdout.splitlines()]
    hits = [h for h in hits if h]
    assert [(h.group(1), h.group(2)) for h in hits] == [("2", "dataset-fashion-mnist")], out.stdout
    assert "sudo apt-get update && sudo apt-get install -y dataset-fashion-mnist" in out.stdout
