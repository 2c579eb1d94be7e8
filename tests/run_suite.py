"""Run the test suite as a few pytest processes, one per group of packages, and print one closing line.

One process for the whole suite compiles several thousand XLA programs; on Linux each keeps memory mappings, and a
single process running everything crashed inside XLA's compiler after about 30 minutes (a segmentation fault in
``backend_compile_and_load``, consistent with the 65530 ``vm.max_map_count`` limit). Fresh processes per group keep
every run well below that. Extra arguments go to every pytest (``-m "not slow"``, ``-x``, ...).

Usage: ``python -m tests.run_suite [pytest args]`` (what ``make test`` runs).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

GROUPS = (
    ("tests/apps", "tests/bench"),
    ("tests/circuits",),
    ("tests/ckks",),
    ("tests/cli", "tests/dataflow", "tests/io"),
    ("tests/kernels", "tests/nt", "tests/plan", "tests/ring"),
    ("tests/polymul", "tests/test_bad_input.py", "tests/test_compilation_cache.py", "tests/test_layers.py"),
)
COUNTS = re.compile(r"(\d+) (passed|failed|errors?|xfailed|xpassed|skipped|deselected)")


def main(argv: list[str]) -> int:
    totals: dict[str, int] = {}
    worst = 0
    start = time.monotonic()
    for group in GROUPS:
        print(f"== pytest {' '.join(group)}", flush=True)
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", *argv, *group], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        sys.stdout.write(proc.stdout)
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        for count, word in COUNTS.findall(lines[-1] if lines else ""):
            key = "errors" if word.startswith("error") else word
            totals[key] = totals.get(key, 0) + int(count)
        if proc.returncode not in (0, 5):
            worst = proc.returncode
            if proc.returncode < 0 or not COUNTS.search(lines[-1] if lines else ""):
                totals["crashed"] = totals.get("crashed", 0) + 1  # killed or crashed: no summary line
    minutes = (time.monotonic() - start) / 60
    other = ", ".join(f"{totals[k]} {k}" for k in ("errors", "xfailed", "xpassed", "crashed") if totals.get(k))
    print(f"suite: {len(GROUPS)} pytest processes in {minutes:.1f} min" + (f"; also {other}" if other else ""))
    failed = totals.get("failed", 0) + totals.get("errors", 0) + totals.get("crashed", 0)
    skipped = f", {totals['skipped']} skipped" if totals.get("skipped") else ""
    print(f"suite: {totals.get('passed', 0)} passed, {failed} failed{skipped}")
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
