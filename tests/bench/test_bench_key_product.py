"""``hemx bench kernels --suite keyproduct``: compact (seeded) against full switching keys in the native key
product, interleaved, at a small shape (the boot_16 shape is the benchmark's default)."""

from __future__ import annotations

import json

import pytest

from hemx.kernels import native

pytestmark = pytest.mark.skipif(not (native.available() and native.has_seeded_keys()),
                                reason="needs the native seeded-key kernels")


def test_rows_ratios_and_bytes():
    from hemx.bench.native import bench_key_product

    res = bench_key_product(shape=(2, 3, 1 << 10), batches=(1, 4), repeats=3, threads=1)
    names = [(r.name, r.params["batch"]) for r in res]
    xofs = ("aes128ctr", "chacha20") if native.has_aes_streams() else ("chacha20",)
    compact = [f"compact key ({x})" for x in xofs]
    assert names == ([(c, 1) for c in compact] + [("full key", 1)] + [(f"seeded rows ({x})", 1) for x in xofs]
                     + [(c, 4) for c in compact] + [("full key", 4)])
    for r in res:
        assert r.median_s > 0 and r.extra["interleaved"]
        if r.name == "full key":
            assert r.extra["ratio_to_full_key"] == 1.0 and r.extra["key_bytes_read"] == 4 * 2 * 2 * 3 * 1024
        elif r.name.startswith("compact key"):
            assert r.extra["key_bytes_read"] == 4 * 2 * 3 * 1024  # half: the uniform rows are generated
            assert r.throughput == pytest.approx(r.params["batch"] / r.median_s)


def test_cli_suite_writes_json(tmp_path):
    from hemx.cli import main

    assert main(["bench", "kernels", "--suite", "keyproduct", "--quick", "--no-roofline", "--out",
                 str(tmp_path)]) == 0
    (path,) = tmp_path.glob("kernels-*.json")
    rows = json.loads(path.read_text())
    rows = rows["results"] if isinstance(rows, dict) else rows
    xofs = ("aes128ctr", "chacha20") if native.has_aes_streams() else ("chacha20",)
    assert {r["name"] for r in rows if r["suite"] == "keyproduct"} == (
        {f"compact key ({x})" for x in xofs} | {"full key"} | {f"seeded rows ({x})" for x in xofs})
