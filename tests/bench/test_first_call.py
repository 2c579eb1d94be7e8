"""hemx bench first-call: the report's rows from a cold and a warm process (the counts; timings are the benchmark's)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from hemx.bench import first_call
from hemx.cli import main


def test_rows_from_a_cold_and_a_warm_process():
    (row,) = first_call.bench(["mul_rotate"], ["program"], warm_processes=1)
    assert row["warm_compiles"] == 0 and row["warm_program"][0]["compiled"] == 0
    assert row["warm_program"][0]["loaded"] == 1 and row["max_error"] < 1e-6
    assert row["warm_prepare_s"] > 0 and row["ratio_min"] <= row["ratio"] <= row["ratio_max"]
    out = io.StringIO()
    first_call.print_report([row], Console(file=out, width=200))
    assert "hemx.jit" in out.getvalue() and "mul_rotate" in out.getvalue()


def test_bad_arguments():
    with pytest.raises(SystemExit):
        main(["bench", "first-call", "--warm-processes", "0"])
    with pytest.raises(SystemExit):
        main(["bench", "first-call", "--cases", "nope"])
    with pytest.raises(SystemExit, match="case must be one of"):
        first_call.worker("nope", "program", [1])
