"""Benchmark results: rows, JSON files (under ``bench-results/`` or where a ``--json`` option says) and rich tables.

The timing and machine helpers they use live in :mod:`hemx.bench.timing`."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
from typing import Any, Iterable, Sequence

from rich.console import Console
from rich.table import Table

from hemx.bench.timing import machine_info, machine_label


@dataclasses.dataclass
class BenchResult:
    """One measured configuration.

    Attributes:
        suite: e.g. "ntt", "bat", "bconv", "modred".
        name: the variant measured (method, reduction...).
        params: the configuration (N, limbs, batch, shapes...).
        median_s / min_s: seconds per call.
        throughput: items per second (``unit`` says which items), or None.
        extra: anything else (ratios to a baseline, notes).
    """

    suite: str
    name: str
    params: dict
    median_s: float | None
    min_s: float | None = None
    throughput: float | None = None
    unit: str = ""
    extra: dict = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def save_results(
    results: Sequence[BenchResult], suite: str, out_dir: str = "bench-results", meta: dict | None = None
) -> str:
    """Write ``{machine, meta, results}`` to ``out_dir/<suite>-<UTC timestamp>.json``; returns the path."""
    os.makedirs(out_dir, exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(out_dir, f"{suite}-{stamp}.json")
    info = machine_info()
    doc = {
        "suite": suite,
        "created_utc": stamp,
        "machine": info,
        "machine_label": machine_label(info),
        "meta": meta or {},
        "results": [r.as_dict() for r in results],
    }
    return write_json(path, doc)


def write_json(path: str, doc: Any) -> str:
    """Write ``doc`` to ``path`` as indented JSON (anything JSON has no type for as its ``str``); returns the path."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, default=str)
    return path


def load_results(path: str) -> list[BenchResult]:
    """The results of a JSON file written by :func:`save_results` (e.g. to plot several runs together)."""
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    return [BenchResult(**r) for r in doc["results"]]


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.3g}"
    return str(v)


def render_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], console: Console | None = None):
    """Print a rich table (numbers formatted compactly)."""
    table = Table(title=title, header_style="bold")
    for c in columns:
        table.add_column(c, justify="right" if c not in ("method", "variant", "set", "name") else "left")
    for r in rows:
        table.add_row(*(_fmt(v) for v in r))
    (console or Console()).print(table)
    return table
