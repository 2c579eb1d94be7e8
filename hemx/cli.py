"""The ``hemx`` command (also ``python -m hemx``): demo, bench, info."""

from __future__ import annotations

import argparse
import json
import sys

from hemx.errors import HemxError


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
    from rich.console import Console

    from hemx.bench import kernels as kb
    from hemx.bench.report import save_results

    console = Console()
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
