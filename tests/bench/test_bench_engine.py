"""``hemx bench kernels --suite engine``: the native kernels with and without the AMX tiles, interleaved, every output
compared bit for bit; at a small ring (the boot_16 shapes are the benchmark's default). Where the CPU has no AMX the
vector rows alone are timed and the table says so."""

from __future__ import annotations

import json

import pytest

from hemx.kernels import native

pytestmark = pytest.mark.skipif(not native.available(), reason="needs the native kernels")


def test_rows_are_exact_and_name_both_paths():
    from hemx.bench.engine import bench_engine

    res = bench_engine(n=1 << 10, num_q=12, num_p=4, dnum=3, conversions=((4, 12), (8, 16)), repeats=2, threads=1)
    assert [r.name for r in res] == ["bconv 4->12", "bconv 8->16", "modup", "ntt (12, 1024)"]
    amx = "amx" in native.runnable_isas()
    for r in res:
        e = r.extra
        assert e["bit_exact"] and e["amx"] == amx and e["vector_s"] > 0 and e["vector_isa"] != "amx"
        assert e["output_words"] == {"bconv 4->12": 12 * 1024, "bconv 8->16": 16 * 1024,
                                     "modup": 3 * 16 * 1024, "ntt (12, 1024)": 12 * 1024}[r.name]
        if amx:
            assert e["amx_s"] > 0 and e["speedup"] == pytest.approx(e["vector_s"] / e["amx_s"])
        else:
            assert "amx_s" not in e
    assert native.isa_forced() is None  # the bench switched through the planner's path, forcing nothing


def test_cli_suite_writes_json(tmp_path):
    from hemx.cli import main

    assert main(["bench", "kernels", "--suite", "engine", "--quick", "--no-roofline", "--out", str(tmp_path)]) == 0
    (path,) = tmp_path.glob("kernels-*.json")
    rows = json.loads(path.read_text())
    rows = rows["results"] if isinstance(rows, dict) else rows
    assert {r["name"] for r in rows if r["suite"] == "engine"} == {"bconv 10->30", "bconv 10->20", "bconv 10->40",
                                                                  "bconv 30->10", "modup", "ntt (30, 4096)"}
