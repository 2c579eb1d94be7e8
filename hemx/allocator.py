"""The process's memory allocator: keep freed pages instead of handing them back to the kernel.

XLA:CPU allocates each kernel's temporaries with ``malloc`` on every call and frees them at the end. At N = 2^16
these are hundreds of MiB per call (16 hoisted rotations at P16: about 770 MiB). glibc serves blocks above its
``mmap`` threshold (at most 32 MiB) with a fresh ``mmap`` and returns them with ``munmap`` on ``free``, so every
call faults its temporaries in again and the kernel zeroes them. On a virtual machine whose balloon device has
free page reporting, the freed memory also goes back to the host within about two seconds of idling, and
touching it again costs a fault through the hypervisor as well: measured on a 2-vCPU Zen 4 KVM guest, a call of
16 hoisted rotations at P16 took 0.40-0.60 s back to back but 1.2-1.9 s after a pause of 2-5 s, all the
difference system time (``docs/results/ops-rotate16-cpu.md``).

Four glibc settings avoid both: transparent huge pages for the heap (``hugetlb=1``), no ``mmap`` for large
blocks (``mmap_max=0``: they come from the heap, whose freed blocks malloc reuses), a trim threshold high
enough that malloc never returns the heap's top to the kernel, and one arena for every thread (``arena_max=1``).
The last is needed because XLA's worker threads allocate the temporaries: a thread's own arena grows in heaps of
at most 64 MiB, and glibc maps a larger block afresh whatever ``mmap_max`` says (and unmaps it on ``free``), so
without it a key switch at N = 2^16 still faulted in a 110 MiB block on every call (measured on a 2-vCPU Zen 4:
15 % of a set D rotation's time in the kernel's page zeroing; over 7 alternated pairs of processes, a median of
54.2 ms per rotation with the setting against 66.8 ms without). The price is that memory freed by the program
stays in the process (its peak resident size is what it keeps), and that every thread's malloc takes the one
arena's lock. With the first three settings the same calls took 0.35-0.54 s whatever the pause (with the tunables, a process's first timed call 1.05-1.09 s while the heap grew), and in
``hemx bench ops --peers desilofhe`` hemx's 16 hoisted rotations went from 1.62x to 4.78x desilofhe's speed in
the same process.

- :data:`TUNABLES` and :func:`merged_tunables`: the ``GLIBC_TUNABLES`` form, read by glibc only when a process
  starts (the ``hemx`` command re-executes itself with it, ``hemx.cli.tune_allocator``).
- :func:`free_page_reporting`: whether this machine is such a VM (recorded with every benchmark result).
- :func:`keep_pages`: the last two settings applied to the running process through ``mallopt`` (huge pages for
  malloc have no ``mallopt`` form), for programs that import hemx and cannot set the environment.

This module imports nothing from hemx.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import pathlib
import sys

#: glibc tunables the ``hemx`` command starts with, in order (a key already in ``GLIBC_TUNABLES`` is kept as set).
TUNABLES: tuple[tuple[str, str], ...] = (
    ("glibc.malloc.hugetlb", "1"),
    ("glibc.malloc.mmap_max", "0"),
    ("glibc.malloc.trim_threshold", str(1 << 36)),
    ("glibc.malloc.arena_max", "1"),
)

# mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
_INT_MAX = 2**31 - 1


def merged_tunables(current: str) -> str | None:
    """``current`` (a ``GLIBC_TUNABLES`` value) with every key of :data:`TUNABLES` it lacks appended, or None when
    it already sets them all (the user's own values always win)."""
    have = {item.split("=", 1)[0].strip() for item in current.split(":") if item.strip()}
    missing = [f"{key}={value}" for key, value in TUNABLES if key not in have]
    if not missing:
        return None
    return ":".join([item for item in current.split(":") if item.strip()] + missing)


_VIRTIO_BALLOON = 5  # virtio device id of the memory balloon
_F_FREE_PAGE_REPORTING = 5  # its feature bit: the guest reports free pages to the host


def free_page_reporting(root: str = "/sys/bus/virtio/devices") -> bool | None:
    """True when a virtio balloon with free page reporting is active (the guest hands memory that stays free back
    to the host, so fresh pages cost a hypervisor fault), False when there is a balloon without it or no balloon,
    None where this cannot be read (not Linux, no sysfs)."""
    base = pathlib.Path(root)
    if not sys.platform.startswith("linux") or not base.is_dir():
        return None
    for dev in sorted(base.iterdir()):
        try:
            if int((dev / "device").read_text().strip(), 16) != _VIRTIO_BALLOON:
                continue
            bits = (dev / "features").read_text().strip()  # one '0'/'1' per feature bit, bit 0 first
        except (OSError, ValueError):
            continue
        if len(bits) > _F_FREE_PAGE_REPORTING and bits[_F_FREE_PAGE_REPORTING] == "1":
            return True
    return False


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
    except (OSError, AttributeError):  # not glibc (musl has no gnu_get_libc_version)
        return None
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    return libc


def keep_pages() -> bool:
    """Make this process's malloc keep freed memory: no ``mmap`` for large blocks, no trimming of the heap below
    2 GiB free at its top (``mallopt``'s limit), and no arenas beyond those that exist (threads that first allocate
    afterwards share them; called before the first JAX program, that is the main arena alone). Applies to later
    allocations; blocks already mapped stay as they are, so call it before the keys and the first programs. True
    when applied, False where the C library is not glibc (nothing changes there)."""
    libc = _glibc()
    if libc is None:
        return False
    return (bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, _INT_MAX))
            and bool(libc.mallopt(_M_ARENA_MAX, 1)))
