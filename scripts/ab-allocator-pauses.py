#!/usr/bin/env python3
"""16 hoisted rotations at P16 called after pauses of 0-5 s, once per allocator setting, each in its own process.

usage: .venv/bin/python scripts/ab-allocator-pauses.py [--set P16] [--rounds 2]   (docs/results/ops-rotate16-cpu.md)

Settings (the child's GLIBC_TUNABLES, or a call at its start):
  glibc      glibc's defaults (nothing set)
  hugetlb    glibc.malloc.hugetlb=1 (what the hemx command set before 2026-12-02)
  tunables   hemx.allocator.TUNABLES (what the hemx command sets now)
  keep_pages hemx.allocator.keep_pages() called at the child's start, no tunables
The settings alternate round by round. Each child prints one JSON line per call: the pause before it, wall,
user and system seconds, minor faults.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
if sys.argv[2] == "keep_pages":
    from hemx.allocator import keep_pages
    assert keep_pages()
import numpy as np, jax
jax.config.update("jax_cpu_enable_async_dispatch", False)
from hemx import Context
from hemx.bench.ops import params_for, ROTATE_MANY_STEPS
params = params_for(sys.argv[1])
ctx = Context(params)
keys = ctx.keygen(rotations=list(ROTATE_MANY_STEPS))
ct = ctx.encrypt(np.random.default_rng(0).uniform(-1, 1, params.n // 2), keys)
def call():
    return jax.block_until_ready(ctx.rotate_many(ct, ROTATE_MANY_STEPS, keys, stacked=True).data)
call(); call()
for pause in (0, 0, 0.5, 1, 2, 3, 5, 0, 0, 3, 0):
    time.sleep(pause)
    r0 = resource.getrusage(resource.RUSAGE_SELF); t = time.perf_counter(); call(); wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"pause_s": pause, "wall_s": wall, "user_s": r1.ru_utime - r0.ru_utime,
                      "system_s": r1.ru_stime - r0.ru_stime, "minflt": r1.ru_minflt - r0.ru_minflt}), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--set", default="P16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--settings", default="hugetlb,tunables,keep_pages")
    a = ap.parse_args()
    from hemx.allocator import merged_tunables

    tunables = {"glibc": None, "hugetlb": "glibc.malloc.hugetlb=1", "tunables": merged_tunables(""),
                "keep_pages": None}
    rows: dict[str, list[dict]] = {}
    for _ in range(a.rounds):
        for name in a.settings.split(","):
            env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
            if tunables[name]:
                env["GLIBC_TUNABLES"] = tunables[name]
            out = subprocess.run([sys.executable, "-c", CHILD, a.set, name], env=env, capture_output=True,
                                 text=True, check=True).stdout
            rows.setdefault(name, []).extend(json.loads(line) for line in out.splitlines() if line.startswith("{"))
    print(f"{'setting':11s} {'pause':>5s}  {'calls':>5s}  {'wall ms (median, max)':>22s}  {'system ms (median)':>18s}")
    for name, got in rows.items():
        for paused in (False, True):
            sel = [r for r in got if (r["pause_s"] >= 2) == paused and (r["pause_s"] == 0 or paused)]
            wall = [r["wall_s"] * 1e3 for r in sel]
            print(f"{name:11s} {'>=2 s' if paused else '0':>5s}  {len(sel):5d}  {statistics.median(wall):12.0f} "
                  f"{max(wall):9.0f}  {statistics.median(r['system_s'] * 1e3 for r in sel):18.0f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
