"""The ``hemx`` command (also ``python -m hemx``): demo, bench, info."""

from __future__ import annotations

import argparse
import json
import sys

from hemx.errors import HemxError


def _console():
    """A rich console; when output is not a terminal, wide enough that result tables do not wrap."""
    from rich.console import Console

    c = Console()
    return c if c.is_terminal else Console(width=160)


def _cmd_info(args) -> int:
    import hemx
    from hemx.bench.timing import machine_info, machine_label

    info = machine_info()
    if args.json:
        print(json.dumps({"hemx": hemx.__version__, **info}))
    else:
        print(f"hemx {hemx.__version__} on {machine_label(info)}")
        for k, v in info.items():
            print(f"  {k}: {v}")
    return 0


def _cmd_demo(args) -> int:
    from hemx import demo

    return demo.main(as_json=args.json)


QUICK = {
    "sets": "A,B",
    "batches": "1,8",
    "repeats": 3,
}


def _cmd_bench_kernels(args) -> int:
    from hemx.bench import kernels as kb
    from hemx.bench.report import save_results

    console = _console()
    suites = [s.strip() for s in args.suite.split(",") if s.strip()]
    unknown = [s for s in suites if s not in kb.SUITES]
    if unknown:
        raise HemxError(f"unknown suite(s) {unknown}; choose from {sorted(kb.SUITES)}")
    sets = (QUICK["sets"] if args.quick else args.sets).split(",")
    batches = kb.parse_int_list(QUICK["batches"] if args.quick else args.batches)
    repeats = QUICK["repeats"] if args.quick else args.repeats
    methods = args.methods.split(",") if args.methods else None
    results = []
    if "ntt" in suites:
        kw = {"methods": methods} if methods else {}
        results += kb.bench_ntt(sets, batches=batches, repeats=repeats, max_elements=args.max_elements,
                                reduction=args.reduction, console=console, **kw)
    if "bat" in suites:
        shapes = kb.TAB_V_SHAPES[:3] if args.quick else kb.TAB_V_SHAPES
        results += kb.bench_bat(shapes, repeats=repeats, console=console)
    if "bconv" in suites:
        shapes = [(12, 28, 1 << 14)] if args.quick else kb.TAB_VI_SHAPES
        results += kb.bench_bconv(shapes, repeats=repeats, console=console)
    if "modred" in suites:
        results += kb.bench_modred((1,) if args.quick else (1, 2, 4, 8), set_name="B" if args.quick else "D",
                                   repeats=repeats, console=console)
    kb.print_report(results, console)
    path = save_results(results, "kernels", args.out, meta={"argv": sys.argv[1:], "suites": suites})
    console.print(f"results written to {path}")
    return 0


def _cmd_bench_ops(args) -> int:
    import os

    from hemx.bench import ops as ob
    from hemx.bench.report import save_results

    console = _console()
    sets = [s.strip().upper() for s in args.sets.split(",") if s.strip()]
    bad = [s for s in sets if s not in ob.SETS]
    if bad:
        raise HemxError(f"unknown set(s) {bad}; choose from {sorted(ob.SETS)}")
    peers = [] if args.no_peers else [p.strip() for p in args.peers.split(",") if p.strip()]
    results = ob.bench_ops(sets, batch=args.batch, repeats=args.repeats, peers=peers, threads=args.threads,
                           ntt=args.ntt, console=console)
    ob.print_ops_report(results, console, batch=args.batch)
    path = save_results(results, "ops", args.out, meta={"argv": sys.argv[1:], "sets": sets, "peers": peers})
    console.print(f"results written to {path}")
    if args.plot:
        os.makedirs(os.path.dirname(os.path.abspath(args.plot)), exist_ok=True)
        console.print(f"plot written to {ob.plot_ops(results, args.plot)}")
    return 0


def _cmd_bench_keyswitch(args) -> int:
    from hemx.bench import keyswitch as kb
    from hemx.bench.report import save_results

    console = _console()
    sets = [s.strip().upper() for s in args.sets.split(",") if s.strip()]
    bad = [s for s in sets if s not in kb.SETS]
    if bad:
        raise HemxError(f"unknown set(s) {bad}; choose from {sorted(kb.SETS)}")
    flows = [f.strip() for f in args.dataflows.split(",") if f.strip()]
    results = kb.bench_keyswitch(sets, flows, repeats=args.repeats, ntt=args.ntt, console=console)
    kb.print_keyswitch_report(results, console)
    path = save_results(results, "keyswitch", args.out, meta={"argv": sys.argv[1:]})
    console.print(f"results written to {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hemx", description="CKKS homomorphic encryption on matrix engines")
    sub = p.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="show the backend, devices and versions")
    info.add_argument("--json", action="store_true")
    info.set_defaults(func=_cmd_info)

    demo = sub.add_parser("demo", help="run the end-to-end demonstration")
    demo.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    demo.set_defaults(func=_cmd_demo)

    bench = sub.add_parser("bench", help="run benchmark suites")
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    k = bsub.add_parser("kernels", help="NTT, BAT, basis conversion and modular-reduction benchmarks")
    k.add_argument("--suite", default="ntt,bat,bconv,modred", help="comma list of: ntt, bat, bconv, modred")
    k.add_argument("--sets", default="A,B,C,D", help="CROSS parameter sets for the NTT suite")
    k.add_argument("--methods", default="", help="NTT methods (default: all)")
    k.add_argument("--batches", default="1,2,4,8,16,32,64", help="batch sizes for the NTT suite")
    k.add_argument("--reduction", default="shoup", choices=["shoup", "montgomery", "barrett"])
    k.add_argument("--repeats", type=int, default=5)
    k.add_argument("--max-elements", type=int, default=1 << 26,
                   help="skip NTT configs whose input holds more residues than this")
    k.add_argument("--quick", action="store_true", help="small sweep (sets A,B; batches 1,8; fewer shapes)")
    k.add_argument("--out", default="bench-results", help="directory for the result JSON")
    k.set_defaults(func=_cmd_bench_kernels)

    o = bsub.add_parser("ops", help="HE-Add, HE-Mult, Rescale, Rotate latency and throughput, peers side by side")
    o.add_argument("--sets", default="A,B,C,D", help="CROSS parameter sets (A-D)")
    o.add_argument("--batch", type=int, default=8, help="batch size for the throughput measurement")
    o.add_argument("--repeats", type=int, default=3)
    o.add_argument("--peers", default="desilofhe,tenseal", help="peer libraries to time when installed")
    o.add_argument("--no-peers", action="store_true")
    o.add_argument("--threads", type=int, default=2, help="threads given to peers that take a thread count")
    o.add_argument("--ntt", default="butterfly", choices=["butterfly", "four_step", "mat3", "multilevel"])
    o.add_argument("--plot", default="", help="write a latency-vs-N plot (PNG) to this path")
    o.add_argument("--out", default="bench-results")
    o.set_defaults(func=_cmd_bench_ops)

    w = bsub.add_parser("keyswitch", help="MP / DC / OC key-switching dataflows: latency and peak working set")
    w.add_argument("--sets", default="C,D")
    w.add_argument("--dataflows", default="mp,dc,oc")
    w.add_argument("--repeats", type=int, default=3)
    w.add_argument("--ntt", default="butterfly", choices=["butterfly", "four_step", "mat3", "multilevel"])
    w.add_argument("--out", default="bench-results")
    w.set_defaults(func=_cmd_bench_keyswitch)

    from hemx.bench import polymul as bench_polymul

    pm = bsub.add_parser("polymul", help="polynomial multiplication for any q: matmul vs NTT vs numpy")
    bench_polymul.add_arguments(pm)
    pm.set_defaults(func=bench_polymul.run_cli)

    from hemx.dataflow.cli import add_arguments as dataflow_arguments, run_cli as dataflow_run

    d = sub.add_parser("dataflow", help="CiFlow key-switching data-movement model (Tab. II-IV, sweeps, any preset)")
    dataflow_arguments(d)
    d.set_defaults(func=dataflow_run)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except HemxError as exc:
        print(f"hemx: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
