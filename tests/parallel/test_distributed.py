"""Many hosts: 2 processes on loopback, each with 2 CPU devices, in JAX's multi-controller runtime.

``jax.distributed.initialize`` (coordinator on 127.0.0.1, a free port) joins them; a global 2x2 mesh puts the
batch axis across the processes and the limb axis within each; add and mul+rescale on a batch of 4 ciphertexts
must equal, after gathering, the same computation in one process (:mod:`tests.parallel._dist_worker`). Both
processes are killed after ``TIMEOUT_S`` so a hang fails instead of blocking CI.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TIMEOUT_S = 240
PROCESSES = 2


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def summaries():
    port = free_port()
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    procs = [subprocess.Popen([sys.executable, "-m", "tests.parallel._dist_worker", str(port), str(i),
                               str(PROCESSES)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(PROCESSES)]
    outs = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=TIMEOUT_S)
            outs.append((p.returncode, stdout, stderr))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail(f"the {PROCESSES}-process jax.distributed run did not finish in {TIMEOUT_S} s")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    result = []
    for rc, stdout, stderr in outs:
        lines = [ln for ln in stdout.splitlines() if ln.startswith("HEMX_SUMMARY ")]
        assert lines, f"a process printed no summary (rc {rc}):\n{stdout[-2000:]}\n{stderr[-5000:]}"
        result.append(json.loads(lines[-1].split(" ", 1)[1]))
    return result


def test_two_processes_joined(summaries):
    assert sorted(s["process_id"] for s in summaries) == list(range(PROCESSES))
    for s in summaries:
        assert (s["process_count"], s["local_devices"], s["global_devices"]) == (PROCESSES, 2, 4)


@pytest.mark.parametrize("op", ["encrypt", "add", "mul_rescale"])
def test_sharded_across_hosts_equals_one_process(summaries, op):
    for s in summaries:
        assert s["ok"], s.get("error", "") + "\n" + s.get("traceback", "")
        r = s["results"][op]
        assert r["identical"], f"process {s['process_id']}: {op} differs from the single-process result"
        assert r["global_devices"] == 4 and not r["fully_addressable"]  # spread over both hosts
        assert r["spec"][0] == "batch"  # the batch axis is split across the processes
