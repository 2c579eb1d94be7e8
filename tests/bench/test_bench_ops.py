"""hemx bench ops: one result per library, set, operation and batch size, with the figures filled in."""

from __future__ import annotations

import io
from collections import Counter

from rich.console import Console

from hemx.bench.ops import batch_sizes, bench_ops

from tests.helpers.expected import bound

OPS = {"add", "mul", "rescale", "mul_rescale", "rotate"}


def test_batch_one_is_timed_once():
    assert batch_sizes(1) == (1,)
    assert batch_sizes(8) == (1, 8)


def test_other_batches_add_rows_with_the_figures_filled_in():
    """One run at batch 2 (the batch-1 rows come with it: one set of compilations, not two)."""
    results = bench_ops(["A"], batch=2, repeats=1, console=Console(file=io.StringIO()))
    keys = [(r.name, r.params["set"], r.params["op"], r.params["batch"]) for r in results]
    assert len(keys) == len(set(keys)) == 10
    assert Counter(k[3] for k in keys) == {1: 5, 2: 5}
    assert {k[2] for k in keys} == OPS and {k[0] for k in keys} == {"hemx"}
    assert all(r.median_s > 0 and r.throughput > 0 for r in results)
    assert all(r.throughput > r.params["batch"] / r.median_s * 0.999 for r in results)
    mul_rescale = [r for r in results if r.params["op"] == "mul_rescale"]
    assert all(r.extra["precision_min_bits"] >= bound("set_a/ks_mul") for r in mul_rescale)  # the bench's own figure


def test_isa_is_forced_for_the_run_recorded_per_row_and_restored():
    """``isa=``: the native kernels run that instruction set for the run, each hemx row says which, and the
    previous one is active again afterwards (hemx bench ops --isa)."""
    import pytest

    from hemx.kernels import native

    if not native.available():
        pytest.skip(f"native kernels unavailable: {native.reason()}")
    before = native.isa()
    results = bench_ops(["A"], batch=1, repeats=1, isa="scalar", console=Console(file=io.StringIO()))
    assert {r.params["isa"] for r in results if r.name == "hemx"} == {"scalar"}
    assert native.isa() == before
