"""Wall-clock timing of jitted calls, this process's peak memory and a description of the machine they ran on:
the one home of the benches' timing and machine helpers (:mod:`hemx.bench.report` writes and prints results)."""

from __future__ import annotations

import dataclasses
import os
import platform
import statistics
import time
from typing import Any, Callable

import jax
import numpy as np

from hemx.allocator import free_page_reporting
from hemx.plan.cache import cpu_model


@dataclasses.dataclass(frozen=True)
class Timing:
    """Median / min / max seconds over ``repeats`` timed calls (after ``warmup`` untimed calls)."""

    median_s: float
    min_s: float
    max_s: float
    repeats: int


def time_call(fn: Callable[..., Any], *args, repeats: int = 5, warmup: int = 1, min_time_s: float = 0.0) -> Timing:
    """Time ``fn(*args)`` with ``jax.block_until_ready``; the first ``warmup`` calls compile and are not timed.

    ``min_time_s`` adds repeats (up to 50) until that much time has been measured, to steady fast kernels.
    """
    for _ in range(max(warmup, 0)):
        jax.block_until_ready(fn(*args))
    samples: list[float] = []
    while len(samples) < repeats or (sum(samples) < min_time_s and len(samples) < 50):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        samples.append(time.perf_counter() - start)
    return Timing(statistics.median(samples), min(samples), max(samples), len(samples))


def time_interleaved(fns: dict[str, Callable[[], Any]], *, repeats: int = 3, warmup: int = 1) -> dict[str, Timing]:
    """Time several zero-argument calls round-robin (a, b, a, b, ...), so load changes hit all of them alike.

    Each call is waited for with ``jax.block_until_ready`` (a no-op for peers' host objects); the first
    ``warmup`` rounds are not timed.
    """
    for _ in range(max(warmup, 0)):
        for fn in fns.values():
            jax.block_until_ready(fn())
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(max(repeats, 1)):
        for name, fn in fns.items():
            start = time.perf_counter()
            jax.block_until_ready(fn())
            samples[name].append(time.perf_counter() - start)
    return {name: Timing(statistics.median(s), min(s), max(s), len(s)) for name, s in samples.items()}


def limit_threads(threads: int | None) -> str:
    """Pin this process (XLA's thread pool and peers' threads alike) to ``threads`` CPUs; returns a description.

    XLA:CPU sizes its pool from the CPUs the process may use, so an affinity mask is the one setting that
    holds JAX and every peer to the same count. ``None`` or a count >= the available CPUs changes nothing.
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return f"{os.cpu_count()} CPUs (affinity not supported here)"
    if threads is None or threads >= len(cpus):
        return f"{len(cpus)} CPUs (all available)"
    if threads < 1:
        from hemx.errors import ParameterError

        raise ParameterError(f"threads must be at least 1, got {threads}")
    os.sched_setaffinity(0, cpus[:threads])
    return f"{threads} of {len(cpus)} CPUs (process affinity {cpus[:threads]})"


def peak_rss_gib() -> float:
    """This process's peak resident set so far (:func:`hemx.nn.infer.peak_rss_bytes`), GiB: a whole run, keys
    included."""
    from hemx.nn.infer import peak_rss_bytes

    return peak_rss_bytes() / 2**30


@dataclasses.dataclass(frozen=True)
class CpuUsage:
    """This process's CPU seconds in user code and in the kernel, and its page faults (minor: a fresh page mapped;
    major: read from disk), from ``getrusage``; subtract two to get what a span of work cost."""

    user_s: float
    system_s: float
    minor_faults: int
    major_faults: int

    def __sub__(self, other: "CpuUsage") -> "CpuUsage":
        return CpuUsage(self.user_s - other.user_s, self.system_s - other.system_s,
                        self.minor_faults - other.minor_faults, self.major_faults - other.major_faults)

    def __add__(self, other: "CpuUsage") -> "CpuUsage":
        return CpuUsage(self.user_s + other.user_s, self.system_s + other.system_s,
                        self.minor_faults + other.minor_faults, self.major_faults + other.major_faults)

    def per_call(self, calls: int) -> dict:
        """The JSON fields the benches report for ``calls`` calls: user and system seconds per call, the system
        share of the CPU time, page faults per call."""
        calls = max(int(calls), 1)
        total = self.user_s + self.system_s
        return {"user_s": self.user_s / calls, "system_s": self.system_s / calls,
                "system_share": self.system_s / total if total > 0 else 0.0,
                "page_faults": (self.minor_faults + self.major_faults) / calls}


def cpu_usage() -> CpuUsage:
    """This process's :class:`CpuUsage` so far (all threads: XLA's pool and the native kernels' threads)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return CpuUsage(float(r.ru_utime), float(r.ru_stime), int(r.ru_minflt), int(r.ru_majflt))


def machine_info() -> dict:
    """Backend, devices, CPU model and thread count, library versions: enough to name the machine in results."""
    devices = jax.devices()
    return {
        "backend": jax.default_backend(),
        "devices": [str(d.device_kind) for d in devices],
        "device_count": len(devices),
        "cpu": cpu_model(),
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
        "free_page_reporting": free_page_reporting(),  # a VM handing freed memory back to its host (hemx.allocator)
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "numpy": np.__version__,
        "platform": platform.platform(),
    }


def machine_label(info: dict | None = None) -> str:
    """One-line machine name for tables and docs."""
    info = info or machine_info()
    dev = info["devices"][0] if info["devices"] else "?"
    if info["backend"] == "cpu":
        return f"CPU {info['cpu']} ({info['cpu_count']} cores), JAX {info['jax']}"
    return f"{info['backend'].upper()} {dev} x{info['device_count']}, JAX {info['jax']}"
