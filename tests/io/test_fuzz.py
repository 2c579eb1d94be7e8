"""The fuzz targets of tests/io/fuzz_targets.py, briefly in the suite (issue 17).

With atheris installed (``pip install -e .[fuzz]``) each target runs for ``HEMX_FUZZ_SECONDS`` (default 5) in a
subprocess, starting from the committed corpus (tests/fuzz_corpus/) copied to a scratch folder; any input that
ends in a non-hemx exception fails the test and is printed. Without atheris, the committed corpus and the
regression inputs below are replayed in-process. ``make fuzz`` runs the same targets for FUZZ_SECONDS (60).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from tests.io import fuzz_targets

pytestmark = pytest.mark.filterwarnings("ignore")

SECONDS = int(os.environ.get("HEMX_FUZZ_SECONDS", "5"))
HAVE_ATHERIS = importlib.util.find_spec("atheris") is not None

# Inputs that once stopped a target (every one raised a non-hemx exception); they must now end in a HemxError or
# be classified as a known ckks-side finding (issue 17, see tests/test_bad_input.py).
REGRESSIONS = {
    "params": [
        bytes.fromhex("02fd27ff41"),  # preset(levels=<float>): TypeError in create
        bytes.fromhex("000005000201000201001c000000bbbbbbbbbb0001001f0100030100280000"),  # sigma=None: TypeError
        bytes.fromhex("00000500000100012607fd4100f80300566002ff84ff000000"),  # levels=0, base_bits=(): ZeroDivision
    ],
}


@pytest.mark.parametrize("target", sorted(fuzz_targets.TARGETS))
def test_replay_corpus(target):
    assert fuzz_targets.replay(target, [os.path.join(fuzz_targets.CORPUS, target)]) >= 4
    for data in REGRESSIONS.get(target, []):
        fuzz_targets.TARGETS[target](data)


def test_corpus_seeds_are_real_objects():
    import hemx.io

    folder = os.path.join(fuzz_targets.CORPUS, "loads")
    kinds = {hemx.io.kind_of(open(os.path.join(folder, f), "rb").read()[1:]) for f in os.listdir(folder)}
    assert {"parameters", "context", "ciphertext", "plaintext", "public_key", "evaluation_keys"} <= kinds


@pytest.mark.skipif(not HAVE_ATHERIS, reason="atheris not installed (pip install -e .[fuzz]); corpus replayed instead")
@pytest.mark.parametrize("target", sorted(fuzz_targets.TARGETS))
def test_fuzz_briefly(target, tmp_path):
    work = tmp_path / "corpus"
    shutil.copytree(os.path.join(fuzz_targets.CORPUS, target), work)
    cmd = [sys.executable, fuzz_targets.__file__, target, f"-max_total_time={SECONDS}", "-timeout=60",
           "-rss_limit_mb=4096", f"-artifact_prefix={tmp_path}{os.sep}", str(work)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SECONDS + 300, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=fuzz_targets.ROOT))
    crashes = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-"))]
    assert proc.returncode == 0 and not crashes, f"fuzz finding {crashes}:\n{proc.stdout[-3000:]}{proc.stderr[-6000:]}"
    assert "Done" in proc.stderr, proc.stderr[-3000:]
