"""Benchmarks: suites reproducing the papers' tables, machine description, result JSON and tables.

Timing rules (docs/architecture.md, "Measuring"): every measurement is taken after a warm-up call (compilation excluded) with
``jax.block_until_ready``, and the median of several repeats is reported with the machine it ran on.
"""

from hemx.bench.timing import Timing, time_call, machine_info
from hemx.bench.report import BenchResult, save_results, render_table

__all__ = ["Timing", "time_call", "machine_info", "BenchResult", "save_results", "render_table"]
