"""hemx.allocator: the GLIBC_TUNABLES the ``hemx`` command starts with, and ``keep_pages`` for a running process.

The behaviour pinned is the allocator's, counted rather than timed: a 64 MiB block malloc'ed, written and freed
again and again faults its pages in on every round under glibc's defaults (the block is mmap'ed and munmap'ed),
and on none after the first once the pages are kept (``mallopt`` at run time, or the tunables at start-up). The
same holds for a 128 MiB block in a second thread (as XLA's workers allocate): larger than a thread arena's heap,
it is mapped afresh in every round unless every thread shares the main arena."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

from hemx import allocator

# one child process: malloc / memset / free a 64 MiB block five times, minor faults per round as JSON
ROUNDS = r"""
import ctypes, json, resource, sys
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
applied = None
if sys.argv[1] == "keep_pages":
    from hemx.allocator import keep_pages
    applied = keep_pages()
size = (128 if sys.argv[2] == "thread" else 64) << 20
faults = []
def rounds():
    libc.free(libc.malloc(4096))  # the thread's first allocation picks its arena
    for _ in range(5):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        p = libc.malloc(size)
        ctypes.memset(p, 1, size)
        libc.free(p)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
if sys.argv[2] == "thread":
    import threading
    t = threading.Thread(target=rounds)
    t.start()
    t.join()
else:
    rounds()
print(json.dumps({"applied": applied, "faults": faults}))
"""

glibc = pytest.mark.skipif(allocator._glibc() is None, reason="needs Linux with glibc (mallopt, GLIBC_TUNABLES)")


def _rounds(mode: str, tunables: str | None, where: str = "main") -> dict:
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    if tunables is not None:
        env["GLIBC_TUNABLES"] = tunables
    out = subprocess.run([sys.executable, "-c", ROUNDS, mode, where], capture_output=True, text=True, env=env,
                         check=True)
    return json.loads(out.stdout)


WHERE = pytest.mark.parametrize("where", ["main", "thread"])


@glibc
@WHERE
def test_glibc_defaults_fault_the_block_in_every_round(where):
    faults = _rounds("plain", None, where)["faults"]
    # 64 MiB is 32 huge pages or 16,384 small ones: every round maps it afresh
    assert min(faults[1:]) >= 16, faults


@glibc
@WHERE
def test_keep_pages_reuses_the_block(where):
    got = _rounds("keep_pages", None, where)
    assert got["applied"] is True
    assert got["faults"][0] >= 16 and max(got["faults"][1:]) <= 4, got


@glibc
@WHERE
def test_the_commands_tunables_reuse_the_block(where):
    got = _rounds("plain", allocator.merged_tunables(""), where)
    assert max(got["faults"][1:]) <= 4, got


@glibc
def test_without_one_arena_a_threads_large_block_is_mapped_every_round():
    """Why ``glibc.malloc.arena_max=1`` is among the tunables: the other three alone leave a worker thread's block
    above its arena's 64 MiB heap to a fresh mapping in every round."""
    three = ":".join(f"{k}={v}" for k, v in allocator.TUNABLES if k != "glibc.malloc.arena_max")
    assert min(_rounds("plain", three, "thread")["faults"][1:]) >= 16


def test_merged_tunables_keeps_the_users_keys_and_adds_the_rest():
    keys = [key for key, _ in allocator.TUNABLES]
    assert allocator.merged_tunables("") == ":".join(f"{k}={v}" for k, v in allocator.TUNABLES)
    assert allocator.merged_tunables(":".join(f"{k}=7" for k in keys)) is None
    got = allocator.merged_tunables(f"glibc.cpu.hwcaps=-AVX512F:{keys[1]}=16")
    assert got.split(":")[:2] == ["glibc.cpu.hwcaps=-AVX512F", f"{keys[1]}=16"]
    assert got.split(":")[2:] == [f"{k}={v}" for k, v in allocator.TUNABLES if k != keys[1]]


@given(st.lists(st.sampled_from([key for key, _ in allocator.TUNABLES] + ["glibc.malloc.tcache_count",
                                                                          "glibc.cpu.x86_rep_movsb_threshold"]),
                unique=True),
       st.integers(0, 10**6))
def test_merged_tunables_every_key_once(present, value):
    current = ":".join(f"{k}={value}" for k in present)
    merged = allocator.merged_tunables(current)
    wanted = {key for key, _ in allocator.TUNABLES}
    if wanted <= set(present):
        assert merged is None
        return
    items = merged.split(":")
    names = [item.split("=")[0] for item in items]
    assert len(names) == len(set(names)) and set(names) == set(present) | wanted
    if present:
        assert items[:len(present)] == current.split(":")


def _device(root, name: str, device: int, bits: str) -> None:
    d = root / name
    d.mkdir()
    (d / "device").write_text(f"0x{device:04x}\n")
    (d / "features").write_text(bits + "0" * (64 - len(bits)) + "\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux sysfs")
def test_free_page_reporting_reads_the_balloons_feature_bit(tmp_path):
    assert allocator.free_page_reporting(str(tmp_path / "absent")) is None
    assert allocator.free_page_reporting(str(tmp_path)) is False  # no virtio device at all
    _device(tmp_path, "virtio0", 0x0001, "111111")  # a network device with bit 5 set: not a balloon
    _device(tmp_path, "virtio1", 0x0005, "011000")  # a balloon with statistics and deflate-on-oom only
    assert allocator.free_page_reporting(str(tmp_path)) is False
    _device(tmp_path, "virtio2", 0x0005, "011000")
    (tmp_path / "virtio2" / "features").write_text("0110010100\n")  # bit 5: free page reporting
    assert allocator.free_page_reporting(str(tmp_path)) is True
