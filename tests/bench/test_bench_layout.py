"""hemx bench kernels --suite layout: three interleaved rows per shape, batch 1 skipped, and the CLI wiring."""

from __future__ import annotations

import io
import json

from rich.console import Console

from hemx.bench import kernels as kb


def test_layout_rows_per_shape_and_ratios():
    results = kb.bench_layout(["A"], methods=["butterfly"], batches=[1, 2], repeats=1,
                              console=Console(file=io.StringIO()))
    assert [r.name for r in results] == list(kb.LAYOUTS)  # batch 1 is not a layout question
    assert all(r.suite == "layout" and r.params["batch"] == 2 and r.median_s > 0 for r in results)
    ratios = {r.name: r.extra["ratio_to_bln"] for r in results}
    assert ratios["bln"] == 1.0 and ratios["lbn"] > 0 and ratios["lbn_converted"] > 0
    (row,) = kb.layout_rows(results)
    assert row[:5] == ["A", 4096, 4, "butterfly", 2] and row[7] == ratios["lbn"]


def test_layout_skips_configs_over_the_element_cap():
    results = kb.bench_layout(["A"], methods=["mat3"], batches=[2], max_elements=10,
                              console=Console(file=io.StringIO()))
    assert len(results) == 3 and all(r.median_s is None and "skipped" in r.extra for r in results)
    assert kb.layout_rows(results)[0][5:] == [None] * 5


def test_cli_layout_suite(capsys, tmp_path):
    from hemx.cli import main

    args = ["bench", "kernels", "--suite", "layout", "--sets", "A", "--methods", "butterfly", "--batches", "1,2",
            "--repeats", "1", "--no-roofline", "--out", str(tmp_path)]
    assert main(args) == 0
    assert "limb-major" in capsys.readouterr().out
    saved = json.loads(next(tmp_path.glob("kernels-*.json")).read_text(encoding="utf-8"))
    assert sorted(r["name"] for r in saved["results"]) == sorted(kb.LAYOUTS)
