"""hemx bench ops: one result per library, set, operation and batch size, with the figures filled in."""

from __future__ import annotations

import io

from rich.console import Console

from hemx.bench.ops import bench_ops


def _rows(batch):
    results = bench_ops(["A"], batch=batch, repeats=1, console=Console(file=io.StringIO()))
    return [(r.name, r.params["set"], r.params["op"], r.params["batch"]) for r in results], results


def test_batch_one_is_timed_once_and_other_batches_add_rows():
    keys, results = _rows(1)
    assert len(keys) == len(set(keys)) == 5  # add, mul, rescale, mul_rescale, rotate at batch 1
    assert all(r.median_s > 0 and r.throughput > 0 for r in results)
    keys2, _ = _rows(2)
    assert len(keys2) == len(set(keys2)) == 10
    assert {k[3] for k in keys2} == {1, 2}
