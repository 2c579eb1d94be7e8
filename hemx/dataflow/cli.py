"""Arguments and entry point of ``hemx dataflow`` (wired into ``hemx.cli`` by the command itself).

Examples::

    hemx dataflow                         # Tab. II, III and IV and the bandwidth sweep of CiFlow
    hemx dataflow --what tab2 --format json
    hemx dataflow --what sweep --plot sweep.png
    hemx dataflow --params set_d --scratchpad-mb 16 --keys onchip
"""

from __future__ import annotations

import argparse
import sys

from hemx.dataflow.benchmarks import BENCHMARKS, CIFLOW_SCRATCHPAD_MB, SWEEP_GBS
from hemx.dataflow.model import KEY_MODES, POLICIES, RPU_MODOPS, Analyzer, Machine
from hemx.dataflow.schedule import ScheduleOptions
from hemx.dataflow.shape import KeySwitchShape
from hemx.errors import ParameterError

WHATS = ("tab2", "tab3", "tab4", "sweep", "params", "all")
_TABLE_ALIAS = {"2": "tab2", "3": "tab3", "4": "tab4", "all": "all"}
# CiFlow's setting for each report when --keys is not given: Tab. II streams the keys, Tab. IV and Fig. 4
# preload them on chip.
_DEFAULT_KEYS = {"tab2": "stream", "tab3": "stream", "tab4": "onchip", "sweep": "onchip", "params": "stream"}


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``hemx dataflow`` options to ``parser``."""
    parser.add_argument("--what", choices=WHATS, default=None,
                        help="report: tab2 (DRAM MB and AI), tab3 (evk/temp sizes), tab4 (OC_base), sweep "
                             "(runtime vs bandwidth), params (a hemx parameter set), all (default; params "
                             "when --params is given)")
    parser.add_argument("--table", choices=sorted(_TABLE_ALIAS), default=None,
                        help="CiFlow table number (2, 3, 4 or all); same as --what tab2/tab3/tab4/all")
    parser.add_argument("--params", default=None, metavar="PRESET",
                        help="analyse a hemx parameter preset (e.g. set_d, secure_16) instead of CiFlow's sets")
    parser.add_argument("--level", type=int, default=None, help="level of the switched ciphertext (default: top)")
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS),
                        help="comma list of CiFlow benchmarks (BTS1, BTS2, BTS3, ARK, DPRIVE)")
    parser.add_argument("--scratchpad-mb", type=float, default=CIFLOW_SCRATCHPAD_MB,
                        help="on-chip data memory in MiB (default 32)")
    parser.add_argument("--bandwidth-gbs", default=None,
                        help="DRAM bandwidth in GB/s, or a comma list for the sweep (default 64; sweep: "
                             + ",".join(f"{b:g}" for b in SWEEP_GBS) + ")")
    parser.add_argument("--modops", type=float, default=RPU_MODOPS / 1e9,
                        help="compute throughput in G modular ops/s (default 217.6: RPU, 128 lanes at 1.7 GHz)")
    parser.add_argument("--keys", choices=KEY_MODES, default=None,
                        help="switching keys streamed from DRAM, held on chip, or streamed with the uniform "
                             "half regenerated from a seed (default: CiFlow's setting for each table)")
    parser.add_argument("--policy", choices=POLICIES, default="belady",
                        help="scratchpad eviction: belady (furthest next use; default) or lru")
    parser.add_argument("--orders", choices=("ciflow", "hemx"), default="ciflow",
                        help="schedule orders: CiFlow's reading (default) or those hemx.ckks.keyswitch runs")
    parser.add_argument("--word-bytes", type=int, default=None,
                        help="bytes per residue (default: 8 for CiFlow's sets, 4 for hemx parameter sets)")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="rich tables, or one JSON object per line")
    parser.add_argument("--plot", default=None, metavar="PATH", help="write the bandwidth-sweep plot to PATH")
    return parser


def _bandwidths(text: str | None, default: tuple[float, ...]) -> tuple[float, ...]:
    if text is None or not str(text).strip():
        return default
    try:
        vals = tuple(float(x) for x in str(text).split(",") if x.strip())
    except ValueError as exc:
        raise ParameterError(f"--bandwidth-gbs wants numbers separated by commas, got {text!r}") from exc
    if not vals or any(v <= 0 for v in vals):
        raise ParameterError(f"bandwidths must be positive, got {text!r}")
    return vals


def _console():
    from rich.console import Console

    c = Console()
    return c if c.is_terminal else Console(width=200)


def collect(args) -> dict[str, list[dict]]:
    """The rows every requested report produces, by report name."""
    from hemx.dataflow import report

    what = args.what or (_TABLE_ALIAS[args.table] if args.table else None)
    if what is None:
        what = "params" if args.params else "all"
    if what == "params" and not args.params:
        raise ParameterError("--what params needs --params PRESET (a hemx parameter preset name)")
    names = [b.strip().upper() for b in str(args.benchmarks).split(",") if b.strip()]
    unknown = [b for b in names if b not in BENCHMARKS]
    if unknown:
        raise ParameterError(f"unknown benchmark(s) {unknown}; choose from {', '.join(BENCHMARKS)}")
    modops = args.modops * 1e9
    if not modops > 0:
        raise ParameterError("--modops must be positive")
    if args.scratchpad_mb <= 0:
        raise ParameterError("--scratchpad-mb must be positive")
    single_bw = _bandwidths(args.bandwidth_gbs, (64.0,))
    an = Analyzer(options=ScheduleOptions.hemx() if getattr(args, "orders", "ciflow") == "hemx" else None)

    def machine(kind: str, gbs: float = single_bw[0]) -> Machine:
        return Machine.create(args.scratchpad_mb, gbs, modops, args.keys or _DEFAULT_KEYS[kind], args.policy)

    def shapes() -> list[KeySwitchShape]:
        wb = args.word_bytes or 8
        return [BENCHMARKS[n].shape(wb) for n in names]

    out: dict[str, list[dict]] = {}
    if what in ("tab2", "all"):
        if args.word_bytes and args.word_bytes != 8:
            rows = []
            for sh in shapes():
                for flow in ("MP", "DC", "OC"):
                    rows.append({"table": "tab2", **an.analyze(sh, flow, machine("tab2")).as_dict()})
            out["tab2"] = rows
        else:
            out["tab2"] = report.tab2_rows(machine("tab2"), names, an)
    if what in ("tab3", "all"):
        out["tab3"] = report.tab3_rows(machine("tab3"), names, an)
    if what in ("tab4", "all"):
        out["tab4"] = report.tab4_rows(modops, single_bw[0], args.scratchpad_mb, args.keys or "onchip", names, an)
    if what in ("sweep", "all") or (args.plot and what != "params"):
        out["sweep"] = report.sweep_rows(_bandwidths(args.bandwidth_gbs, SWEEP_GBS), args.keys or "onchip", modops,
                                         args.scratchpad_mb, shapes=shapes(), analyzer=an)
    if args.params:
        import warnings

        from hemx.ckks.params import CKKSParameters

        with warnings.catch_warnings():  # the model needs sizes only; the security check is not its concern
            warnings.filterwarnings("ignore", message="insecure CKKS parameters")
            params = CKKSParameters.preset(args.params, allow_insecure=True)
        wb = args.word_bytes or 4
        rows = []
        for gbs in single_bw:
            rows += report.params_rows(params, args.level, machine("params", gbs), wb, an)
        out["params"] = rows
        if args.plot or what == "sweep":
            shape = KeySwitchShape.from_params(params, args.level, word_bytes=wb)
            bws = single_bw if len(single_bw) > 1 else SWEEP_GBS
            out.setdefault("sweep", []).extend(report.sweep_rows(
                bws, args.keys or "stream", modops, args.scratchpad_mb, shapes=[shape], analyzer=an))
    return out


def run_cli(args) -> int:
    """Run ``hemx dataflow`` with parsed ``args``; returns the exit status."""
    from hemx.dataflow import report

    out = collect(args)
    if args.plot and out.get("sweep"):
        report.plot_sweep(out["sweep"], args.plot)
    if args.format == "json":
        for rows in out.values():
            if rows:
                print(report.json_lines(rows))
        sys.stdout.flush()
        return 0
    console = _console()
    for kind, rows in out.items():
        if kind == "sweep":
            report.render_sweep(rows, console)
        else:
            report.render_table(rows, kind, console)
        if kind == "tab2" and any("paper_dram_mb" in r for r in rows):
            s = report.tab2_summary(rows)
            order = ", ".join(f"{b}: {'yes' if ok else 'NO'}" for b, ok in s["order_oc_lt_dc_le_mp"].items())
            console.print(f"{s['within_15pct']}/{s['cells']} cells within 15% of the paper "
                          f"(mean |error| {s['mean_abs_error_pct']}%); misses: {', '.join(s['misses']) or 'none'}; "
                          f"OC < DC <= MP: {order}")
    if args.plot and out.get("sweep"):
        console.print(f"sweep plot written to {args.plot}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m hemx.dataflow.cli``); ``hemx dataflow`` calls :func:`run_cli`."""
    from hemx.errors import HemxError

    parser = add_arguments(argparse.ArgumentParser(prog="hemx dataflow",
                                                   description="CiFlow key-switching data-movement model"))
    args = parser.parse_args(argv)
    try:
        return run_cli(args)
    except HemxError as exc:
        print(f"hemx dataflow: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
