"""The fuzz targets of tests/io/fuzz_targets.py, briefly in the suite (issue 17).

atheris is part of the pinned test set-up (requirements.lock; ``pip install -e .[fuzz]`` elsewhere). Each target
runs for ``HEMX_FUZZ_SECONDS`` (default 60, as issue 17 asks of CI) in a subprocess, starting from the committed corpus (tests/fuzz_corpus/)
copied to a scratch folder; any input that ends in a non-hemx exception, a timeout or an out-of-memory report fails
the test and is printed. The committed corpus and the regression inputs below are also replayed in-process.
``make fuzz`` runs the same targets for FUZZ_SECONDS (60).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.io import fuzz_targets

pytestmark = pytest.mark.filterwarnings("ignore")

SECONDS = int(os.environ.get("HEMX_FUZZ_SECONDS", "60"))  # tests/run_suite.py runs this file in its own process

# Inputs that once stopped a target (every one raised a non-hemx exception); they must now end in a HemxError or
# be classified as a known ckks-side finding (issue 17, see tests/test_bad_input.py).
REGRESSIONS = {
    "params": [
        bytes.fromhex("02fd27ff41"),  # preset(levels=<float>): TypeError in create
        bytes.fromhex("000005000201000201001c000000bbbbbbbbbb0001001f0100030100280000"),  # sigma=None: TypeError
        bytes.fromhex("00000500000100012607fd4100f80300566002ff84ff000000"),  # levels=0, base_bits=(): ZeroDivision
        bytes.fromhex("000005a80201000201401c0015000100970105"),  # levels=2^52.8: MemoryError building level_bits
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


# libFuzzer's memory limit reads the process's peak RSS (getrusage ru_maxrss). On Linux a child started directly
# from this pytest process inherits the parent's peak at exec (measured: a child of a process holding 600 MB reports
# 598 MB before it allocates anything), so after a few GiB of compiled programs in the suite every input "ran out
# of memory" within seconds. A small intermediate process gives the fuzzer a fresh peak of its own.
_LAUNCH = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"


def peak_rss_mb_of_child(launch: bool) -> int:
    """Peak RSS (MB) a Python child reports for itself, started directly or through ``_LAUNCH``."""
    probe = [sys.executable, "-c", "import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)"]
    cmd = [sys.executable, "-c", _LAUNCH, *probe] if launch else probe
    return int(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def test_fuzzer_memory_limit_sees_its_own_peak():
    """The launch the fuzz test uses does not inherit this process's peak RSS (the cause of false OOM reports)."""
    import numpy as np

    held = np.ones(400 << 20, dtype=np.uint8)  # 400 MiB touched: this process's peak is now at least that
    if sys.platform.startswith("linux"):
        assert peak_rss_mb_of_child(launch=False) >= 350  # the inheritance the launch works around
    assert peak_rss_mb_of_child(launch=True) < 200, "the fuzzer would start with the suite's peak RSS"
    del held


@pytest.mark.parametrize("target", sorted(fuzz_targets.TARGETS))
def test_fuzz_briefly(target, tmp_path):
    work = tmp_path / "corpus"
    shutil.copytree(os.path.join(fuzz_targets.CORPUS, target), work)
    cmd = [sys.executable, "-c", _LAUNCH, sys.executable, fuzz_targets.__file__, target,
           f"-max_total_time={SECONDS}", "-timeout=60", "-rss_limit_mb=4096", f"-artifact_prefix={tmp_path}{os.sep}",
           str(work)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SECONDS + 300, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=fuzz_targets.ROOT))
    crashes = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-"))]
    assert proc.returncode == 0 and not crashes, f"fuzz finding {crashes}:\n{proc.stdout[-3000:]}{proc.stderr[-6000:]}"
    assert "Done" in proc.stderr, proc.stderr[-3000:]
