"""The ``hemx`` command (also ``python -m hemx``): demo, bench, info."""

from __future__ import annotations

import argparse
import json
import os
import sys

from hemx.allocator import merged_tunables
from hemx.errors import HemxError


def _console():
    """A rich console; when output is not a terminal, wide enough that result tables do not wrap."""
    from rich.console import Console

    c = Console()
    return c if c.is_terminal else Console(width=160)


def _cmd_info(args) -> int:
    from hemx._version import __version__
    from hemx.bench.timing import machine_info, machine_label

    info = machine_info()
    from hemx.kernels import native

    from hemx.plan import plan_matrix_engine

    engine = plan_matrix_engine().describe()  # AMX tiles for the basis conversion, or not, and why (first: it sets the ISA)
    info["native_kernels"] = native.describe()  # which NTT path is active here, and why
    info["matrix_engine"] = engine
    info["compilation_cache"] = _compilation_cache_line()  # JAX persistent cache: where, on/off and why, size
    if args.json:
        print(json.dumps({"hemx": __version__, **info}))
    else:
        print(f"hemx {__version__} on {machine_label(info)}")
        for k, v in info.items():
            print(f"  {k}: {v}")
    return 0


def _compilation_cache_line() -> str:
    from hemx import compilation_cache as cc

    st = cc.status()
    entries, size = cc.usage(st.directory)
    where = f"{st.directory}, {entries} entries, {size / 2**20:.1f} MiB" if st.enabled else "off"
    return f"{where} ({st.reason})"


def _cmd_cache(args) -> int:
    from hemx import compilation_cache as cc
    from hemx import plan

    st = cc.status()
    if args.cache_command == "info":
        entries, size = cc.usage(cc.default_directory())
        doc = {"compilation_cache": {**st.as_dict(), "hemx_directory": cc.default_directory(), "entries": entries,
                                     "bytes": size},
               "plan_cache": {"path": plan.cache_path(), "exists": os.path.exists(plan.cache_path())}}
        if args.json:
            print(json.dumps(doc))
        else:
            print(f"compilation cache: {_compilation_cache_line()}")
            if st.directory != cc.default_directory():
                print(f"  hemx's own directory: {cc.default_directory()}, {entries} entries, {size / 2**20:.1f} MiB")
            print(f"plan cache (wisdom): {plan.cache_path()}{'' if doc['plan_cache']['exists'] else ' (none yet)'}")
        return 0
    if args.only in (None, "compilation"):
        freed = cc.clear()
        print(f"removed hemx's compilation cache {cc.default_directory()} ({freed / 2**20:.1f} MiB)")
        if st.managed_by == "user":
            print(f"JAX's cache {st.directory} is configured outside hemx: not touched")
    if args.only in (None, "plans"):
        existed = plan.reset_cache()
        print(f"{'removed' if existed else 'no plan cache at'} {plan.cache_path()}")
    return 0


def _cmd_demo(args) -> int:
    from hemx import demo
    from hemx.errors import ParameterError

    options = {}
    if args.workload == "resnet":
        for flag, given in (("--iterations", args.iterations is not None), ("--bootstrap", args.bootstrap),
                            ("--secure", args.secure), ("--no-warm-up", args.no_warm_up)):
            if given:
                raise ParameterError(f"{flag} does not apply to --workload resnet (its options: --model, --images, "
                                     "--preset, --allow-insecure)")
        options["model"] = args.model or "resnet20"
        options["preset"] = args.preset or "boot_16"
        options["allow_insecure"] = args.allow_insecure
        if args.images is not None:
            options["num_images"] = args.images
        return demo.main(args.workload, as_json=args.json, **options)
    for flag, given in (("--model", args.model is not None), ("--preset", args.preset is not None),
                        ("--allow-insecure", args.allow_insecure)):
        if given:
            raise ParameterError(f"{flag} applies to --workload resnet only")
    if args.workload == "helr":
        for flag, given in (("--images", args.images is not None), ("--bootstrap", args.bootstrap),
                            ("--secure", args.secure), ("--no-warm-up", args.no_warm_up)):
            if given:
                raise ParameterError(f"{flag} does not apply to --workload helr (it always bootstraps on the 128-bit "
                                     "boot_16; its option: --iterations)")
        if args.iterations is not None:
            options["iterations"] = args.iterations
        return demo.main(args.workload, as_json=args.json, **options)
    if args.workload == "cnn" and args.images is not None:
        options["num_images"] = args.images
    if args.workload == "logreg" and args.iterations is not None:
        options["iterations"] = args.iterations
    if args.workload == "logreg" and (args.bootstrap or args.secure):
        options["bootstrap"] = True
    if args.workload == "logreg" and args.secure:
        options["secure"] = True
    if args.workload == "cnn" and args.no_warm_up:
        options["warm_up"] = False
    return demo.main(args.workload, as_json=args.json, **options)


PEERS = "desilofhe,tenseal"
NTT_CHOICES = ["butterfly", "four_step", "mat3", "multilevel", "native"]
QUICK = {
    "sets": "A,B",
    "batches": "1,8",
    "repeats": 3,
}


def _peer_list(args) -> list[str]:
    """Peers requested with ``--peers [LIST]`` (opt-in), unless ``--no-peers``."""
    if getattr(args, "no_peers", False) or not args.peers:
        return []
    return [p.strip() for p in args.peers.split(",") if p.strip()]


def _save_and_plot(console, results, kind: str, args, meta, plot) -> None:
    """Write the results JSON (and the plot when ``--plot`` is given) and say where."""
    import os

    from hemx.bench.report import save_results

    console.print(f"results written to {save_results(results, kind, args.out, meta=meta)}")
    if args.plot:
        os.makedirs(os.path.dirname(os.path.abspath(args.plot)), exist_ok=True)
        console.print(f"plot written to {plot(results, args.plot)}")


def _cmd_bench_kernels(args) -> int:
    from hemx.bench import kernels as kb
    from hemx.bench import roofline
    from hemx.bench.timing import limit_threads

    console = _console()
    suites = [s.strip() for s in args.suite.split(",") if s.strip()]
    unknown = [s for s in suites if s not in kb.SUITES]
    if unknown:
        raise HemxError(f"unknown suite(s) {unknown}; choose from {sorted(kb.SUITES)}")
    sets = (QUICK["sets"] if args.quick else args.sets).split(",")
    batches = kb.parse_int_list(QUICK["batches"] if args.quick else args.batches)
    repeats = QUICK["repeats"] if args.quick else args.repeats
    methods = args.methods.split(",") if args.methods else None
    peers = _peer_list(args)
    threads = limit_threads(args.threads) if peers else None
    results = []
    if "ntt" in suites:
        kw = {"methods": methods} if methods else {}
        results += kb.bench_ntt(sets, batches=batches, repeats=repeats, max_elements=args.max_elements,
                                reduction=args.reduction, console=console, **kw)
    if peers:
        results += kb.bench_ntt_peers(sets, peers, threads=args.threads, repeats=max(repeats, 3), console=console)
    if "bat" in suites:
        shapes = kb.TAB_V_SHAPES[:3] if args.quick else kb.TAB_V_SHAPES
        results += kb.bench_bat(shapes, repeats=repeats, console=console)
    if "bconv" in suites:
        shapes = [(12, 28, 1 << 14)] if args.quick else kb.TAB_VI_SHAPES
        results += kb.bench_bconv(shapes, repeats=repeats, console=console)
    if "layout" in suites:
        kw = {"methods": methods} if methods else {}
        lay_batches = [b for b in batches if b > 1] or [2]
        results += kb.bench_layout(sets, batches=lay_batches, repeats=max(repeats, 3), max_elements=args.max_elements,
                                   reduction=args.reduction, console=console, **kw)
    if "native" in suites:  # the C++ NTT vs its native probes, JAX and desilofhe (hemx/bench/native.py)
        from hemx.bench.native import bench_native

        results += bench_native(threads=args.threads or 2, repeats=max(repeats, 5), console=console,
                                peers=peers or ("desilofhe",))
    if "engine" in suites:  # the native kernels with and without AMX tiles (hemx/bench/engine.py)
        from hemx.bench.engine import bench_engine

        results += bench_engine(threads=args.threads or 2, repeats=max(repeats, 5), console=console,
                                **({"n": 1 << 12} if args.quick else {}))
    if "keyproduct" in suites:  # compact (seeded) vs full switching keys in the key product (hemx/bench/native.py)
        from hemx.bench.native import bench_key_product

        results += bench_key_product(threads=args.threads or 2, repeats=max(repeats, 5), console=console,
                                     **({"shape": (2, 8, 1 << 12)} if args.quick else {}))
    if "modred" in suites:
        results += kb.bench_modred((1,) if args.quick else (1, 2, 4, 8), set_name="B" if args.quick else "D",
                                   repeats=repeats, console=console)
    meta = {"argv": sys.argv[1:], "suites": suites, "peers": peers, "threads": threads}
    if not args.no_roofline:
        peaks = roofline.measure_peaks()
        roofline.annotate(results, peaks)
        kb.print_peaks(peaks, console)
        meta["peaks"] = peaks.as_dict()
    kb.print_report(results, console)
    _save_and_plot(console, results, "kernels", args, meta, kb.plot_kernels)
    return 0


def _cmd_bench_ops(args) -> int:
    from hemx.bench import ops as ob
    from hemx.bench.timing import limit_threads

    console = _console()
    sets = [s.strip().upper() for s in args.sets.split(",") if s.strip()]
    bad = [s for s in sets if s not in ob.SETS]
    if bad:
        raise HemxError(f"unknown set(s) {bad}; choose from {sorted(ob.SETS)}")
    peers = _peer_list(args)
    threads = limit_threads(args.threads) if peers else None
    results = ob.bench_ops(sets, batch=args.batch, repeats=args.repeats, peers=peers, threads=args.threads,
                           ntt=args.ntt, console=console, dispatch=args.dispatch, jax_kernels=args.jax_kernels,
                           isa=args.isa)
    ob.print_ops_report(results, console, batch=args.batch)
    if args.compile:  # first call vs steady, cold and warm persistent compilation cache (fresh processes)
        compiled = ob.bench_compile(sets, repeats=args.repeats, console=console)
        ob.print_compile_report(compiled, console)
        results += compiled
    meta = {"argv": sys.argv[1:], "sets": sets, "peers": peers, "threads": threads, "isa": args.isa}
    _save_and_plot(console, results, "ops", args, meta, ob.plot_ops)
    return 0


def _cmd_bench_circuits(args) -> int:
    from hemx.bench import circuits as cb
    from hemx.bench.kernels import parse_int_list

    console = _console()
    suites = [s.strip() for s in args.suite.split(",") if s.strip()]
    unknown = [s for s in suites if s not in cb.SUITES]
    if unknown:
        raise HemxError(f"unknown suite(s) {unknown}; choose from {list(cb.SUITES)}")
    results = []
    if "poly" in suites:
        results += cb.bench_polynomials(cb.bench_params(args.log_n, 9), repeats=args.repeats,
                                        degrees=parse_int_list(args.degrees), console=console)
    if "lintrans" in suites:
        results += cb.bench_lintrans(cb.bench_params(args.log_n, 2), repeats=args.repeats, console=console)
    cb.print_report(results, console)
    _save_and_plot(console, results, "circuits", args, {"argv": sys.argv[1:], "suites": suites}, None)
    return 0


def _cmd_bench_bootstrap(args) -> int:
    from hemx.bench import bootstrap as bb

    console = _console()
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = [s for s in sides if s not in bb.SIDES]
    if unknown:
        raise HemxError(f"unknown side(s) {unknown}; choose from {list(bb.SIDES)}")
    slots = []
    for item in (s.strip().lower() for s in args.slots.split(",") if s.strip()):
        if item == "full":
            slots.append(None)
        elif item.isdigit() and int(item) >= 1 and int(item) & (int(item) - 1) == 0:
            slots.append(int(item))
        else:
            raise HemxError(f"--slots takes 'full' and powers of two, got {item!r}")
    results = bb.bench_bootstrap(preset=args.preset, sides=sides, repeats=args.repeats,
                                 iterations=args.iterations, threads=args.threads, slots=tuple(slots) or (None,),
                                 console=console, profile=args.profile, lattigo_params=args.lattigo_params,
                                 key_storage=tuple(k.strip() for k in args.key_storage.split(",") if k.strip()),
                                 batch=args.batch, chunk=args.chunk, execution=args.execution)
    bb.print_report(results, console)
    if args.profile:
        from hemx.bench.bootstrap_profile import print_profile

        for r in results:
            if "profile" in r.extra:
                print_profile(r.extra, console)
    _save_and_plot(console, results, "bootstrap-profile" if args.profile else "bootstrap", args,
                   {"argv": sys.argv[1:], "sides": ["hemx"] if args.profile else sides}, bb.plot)
    return 0


def _cmd_bench_scaling(args) -> int:
    from hemx.bench import scaling as sb
    from hemx.bench.kernels import parse_int_list

    console = _console()
    flows = [s.strip().lower() for s in args.dataflows.split(",") if s.strip()]
    ops = [s.strip() for s in args.ops.split(",") if s.strip()]
    bad = [f for f in flows if f not in sb.DATAFLOWS] + [o for o in ops if o not in sb.OPS]
    if bad:
        raise HemxError(f"unknown dataflow(s)/op(s) {bad}; choose from {list(sb.DATAFLOWS)} / {list(sb.OPS)}")
    paths = [s.strip() for s in args.path.split(",") if s.strip()]
    if [p for p in paths if p not in sb.PATHS]:
        raise HemxError(f"unknown key-switching path(s) {paths}; choose from {list(sb.PATHS)}")
    results = sb.bench_scaling(parse_int_list(args.devices), dataflows=flows, ops=ops, paths=paths,
                               log_n=args.log_n, levels=args.levels, dnum=args.dnum, repeats=args.repeats,
                               console=console)
    sb.print_report(results, console)
    _save_and_plot(console, results, "scaling", args, {"argv": sys.argv[1:], "note": sb.TIMES_NOTE}, None)
    return 0


def _cmd_bench_throughput(args) -> int:
    from hemx.bench import throughput as tb
    from hemx.bench.kernels import parse_int_list

    console = _console()
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    bad = [o for o in ops if o not in ("ntt", "mul")]
    if bad:
        raise HemxError(f"unknown operation(s) {bad}; choose from ['mul', 'ntt']")
    results = []
    if "ntt" in ops:
        results += tb.sweep_ntt(args.sets.split(","), parse_int_list(args.ntt_batches), method=args.ntt,
                                repeats=args.repeats, console=console)
    if "mul" in ops:
        results += tb.sweep_mul(args.mul_sets.split(","), parse_int_list(args.mul_batches), ntt=args.ntt,
                                repeats=args.repeats, console=console)
    tb.print_throughput_report(results, console)
    _save_and_plot(console, results, "throughput", args, {"argv": sys.argv[1:]}, tb.plot_throughput)
    return 0


def _cmd_bench_plan(args) -> int:
    from hemx import plan
    from hemx.bench import plan as pb
    from hemx.bench.kernels import parse_int_list
    from hemx.bench.report import save_results

    console = _console()
    if args.reset:
        existed = plan.reset_cache()
        console.print(f"{'removed' if existed else 'no plan cache at'} {plan.cache_path()}")
        return 0
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    budget = float("inf") if args.budget is None else args.budget
    results = pb.bench_plan(sets, log_ns=parse_int_list(args.log_n), budget_s=budget, refresh=args.refresh,
                            repeats=args.repeats, console=console)
    pb.print_plan_report(results, console)
    console.print(f"plan cache: {plan.cache_path()}")
    path = save_results(results, "plan", args.out, meta={"argv": sys.argv[1:], "cache": plan.cache_path()})
    console.print(f"results written to {path}")
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


def _cmd_bench_gpu(args) -> int:
    from hemx.bench import gpu

    if args.render:
        if args.outdir:
            raise HemxError("give either OUTDIR (run the check) or --render JSON (write the docs page), not both")
        print(f"wrote {gpu.write_docs(args.render, args.docs)}")
        return 0
    if not args.outdir:
        raise HemxError("missing OUTDIR: hemx bench gpu OUTDIR [--quick] [--budget SECONDS]")
    code, _ = gpu.run_check(args.outdir, quick=args.quick, budget_s=args.budget, console=_console())
    return code


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hemx", description="CKKS homomorphic encryption on matrix engines")
    sub = p.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="show the backend, devices and versions")
    info.add_argument("--json", action="store_true")
    info.set_defaults(func=_cmd_info)

    cache = sub.add_parser("cache", help="the compilation cache and the planner's wisdom: info, clear")
    csub = cache.add_subparsers(dest="cache_command", required=True)
    ci = csub.add_parser("info", help="where the caches are, whether the compilation cache is on and why, sizes")
    ci.add_argument("--json", action="store_true")
    cc = csub.add_parser("clear", help="delete hemx's compilation cache and the plan cache (wisdom)")
    cc.add_argument("--only", choices=["compilation", "plans"], default=None, help="clear only this one")
    cache.set_defaults(func=_cmd_cache)

    demo = sub.add_parser("demo", help="encrypted CNN inference (default), logistic regression or ResNet-20, "
                                        "client/server")
    demo.add_argument("--workload", default="cnn", choices=["cnn", "logreg", "helr", "resnet", "kernels"],
                      help="cnn: digits CNN inference; logreg: HELR training + scoring (breast cancer); helr: HELR "
                           "training at the seeds' scale (16,384 Fashion-MNIST samples, boot_16: ~10 minutes, 11 GiB); "
                           "resnet: ResNet-20 inference with bootstrapping (boot_16: minutes and ~10 GiB per image); "
                           "kernels: exact-kernel check")
    demo.add_argument("--images", type=int, default=None,
                      help="cnn: the first N test images (default all 360); resnet: the first N (default 1)")
    demo.add_argument("--iterations", type=int, default=None,
                      help="logreg: gradient steps (more than a 128-bit chain holds, e.g. 30: bootstrapping mode); "
                           "helr: Nesterov iterations (default 14)")
    demo.add_argument("--bootstrap", action="store_true",
                      help="logreg: bootstrap the weights when their levels run out (default ring boot_12: INSECURE)")
    demo.add_argument("--secure", action="store_true",
                      help="logreg bootstrapping on the 128-bit boot_16 ring (~20 s per bootstrap, 7.6 GiB of keys)")
    demo.add_argument("--no-warm-up", action="store_true",
                      help="cnn: no server warm-up; the first request pays for tracing and compilation")
    demo.add_argument("--model", default=None, choices=["resnet20", "tiny"],
                      help="resnet: resnet20 (default, the shipped Fashion-MNIST weights) or tiny (a small residual "
                           "TEST network with random weights, not ResNet-20: with --preset boot_12 --allow-insecure "
                           "it runs the whole client/server path in about a minute)")
    demo.add_argument("--preset", default=None,
                      help="resnet: bootstrapping parameters (default boot_16, 128-bit; boot_12 / boot_13 are test "
                           "sizes and need --allow-insecure)")
    demo.add_argument("--allow-insecure", action="store_true",
                      help="resnet: allow a preset below 128-bit security (tests only)")
    demo.add_argument("--json", action="store_true", help="print the summary as one JSON object (progress: stderr)")
    demo.set_defaults(func=_cmd_demo)

    bench = sub.add_parser("bench", help="run benchmark suites")
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    k = bsub.add_parser("kernels", help="NTT, BAT, basis conversion and modular-reduction benchmarks")
    k.add_argument("--suite", default="ntt,bat,bconv,modred",
                   help="comma list of: ntt, bat, bconv, modred, layout, native, "
                   "keyproduct (compact vs full switching keys), engine (native kernels with and without AMX tiles)")
    k.add_argument("--sets", default="A,B,C,D", help="CROSS parameter sets for the NTT suite")
    k.add_argument("--methods", default="", help="NTT methods (default: all)")
    k.add_argument("--batches", default="1,2,4,8,16,32,64", help="batch sizes for the NTT suite")
    k.add_argument("--reduction", default="shoup", choices=["shoup", "montgomery", "barrett"])
    k.add_argument("--repeats", type=int, default=5)
    k.add_argument("--max-elements", type=int, default=1 << 26,
                   help="skip NTT configs whose input holds more residues than this")
    k.add_argument("--quick", action="store_true", help="small sweep (sets A,B; batches 1,8; fewer shapes)")
    k.add_argument("--out", default="bench-results", help="directory for the result JSON")
    k.add_argument("--peers", nargs="?", const=PEERS, default="",
                   help=f"also time the peers' NTT of a ciphertext, interleaved (default list: {PEERS})")
    k.add_argument("--threads", type=int, default=2, help="CPUs the process (hemx and peers) may use with --peers")
    k.add_argument("--no-roofline", action="store_true", help="skip measuring the machine peaks")
    k.add_argument("--plot", default="", help="write an NTT throughput / roofline plot (PNG) to this path")
    k.set_defaults(func=_cmd_bench_kernels)

    o = bsub.add_parser("ops", help="HE-Add, HE-Mult, Rescale, Rotate latency and throughput, peers side by side")
    o.add_argument("--sets", default="A,B,C,D", help="parameter sets: CROSS A-D, P16 (N=2^16, 30 limbs), P15")
    o.add_argument("--batch", type=int, default=8, help="batch size for the throughput measurement")
    o.add_argument("--repeats", type=int, default=3)
    o.add_argument("--peers", nargs="?", const=PEERS, default="",
                   help=f"time peer libraries interleaved with hemx (opt-in; default list: {PEERS})")
    o.add_argument("--no-peers", action="store_true", help="no peers (the default; kept for old scripts)")
    o.add_argument("--threads", type=int, default=2,
                   help="CPUs the process may use with --peers (XLA and peers alike), and peers' thread count")
    o.add_argument("--ntt", default=None, choices=NTT_CHOICES, help="force an NTT method (default: the planner's)")
    o.add_argument("--plot", default="", help="write a latency-vs-N plot (PNG) to this path")
    o.add_argument("--compile", action="store_true", help="also time the first call (compilation) of HE-Mult, "
                   "Rotate and a degree-7 polynomial, cold and warm compilation cache, each in fresh processes")
    o.add_argument("--dispatch", default="sync", choices=("sync", "async"),
                   help="JAX's CPU dispatch for the timed calls: sync (the default here: computations run in the "
                        "calling thread, as the peers' do) or async (JAX's own default); recorded per row")
    o.add_argument("--jax-kernels", action="store_true",
                   help="also time hemx with its pure-JAX kernels (HEMX_NATIVE=0, a fresh process per set)")
    o.add_argument("--isa", default=None, choices=("auto", "amx", "avx512", "avx2", "neon", "scalar"),
                   help="native kernels' instruction set for the run (default: HEMX_NATIVE_ISA, else the best this "
                        "CPU runs); recorded per row. The plan cache's key does not name the ISA: give each ISA its "
                        "own HEMX_CACHE_DIR, or plans timed here are reused by default-ISA runs")
    o.add_argument("--out", default="bench-results")
    o.set_defaults(func=_cmd_bench_ops)

    c = bsub.add_parser("circuits", help="polynomial evaluation and linear transforms: precision, depth, latency")
    c.add_argument("--suite", default="poly,lintrans", help="comma list of: poly, lintrans")
    c.add_argument("--log-n", type=int, default=13, help="ring degree 2^log_n of the (test-size) parameter set")
    c.add_argument("--degrees", default="31,119", help="degrees of the Chebyshev sigmoid")
    c.add_argument("--repeats", type=int, default=3)
    c.add_argument("--out", default="bench-results")
    c.set_defaults(func=_cmd_bench_circuits, plot="")

    bt = bsub.add_parser("bootstrap", help="bootstrapping latency, precision, levels and keys; desilofhe and "
                         "Lattigo beside")
    bt.add_argument("--preset", default="boot_16", help="hemx parameter preset (boot_12, boot_13, boot_16)")
    bt.add_argument("--sides", default="hemx,desilofhe", help="comma list of: hemx, desilofhe, lattigo (each in its "
                    "own process; lattigo: the program at $HEMX_LATTIGO_BENCH, see docs/compare-peers.md)")
    bt.add_argument("--lattigo-params", default="N16QP1546H192H32", choices=("N16QP1546H192H32", "N16QP1767H32768H32"),
                    help="Lattigo's preset: sparse secret (default) or dense (about 17 GiB)")
    bt.add_argument("--repeats", type=int, default=3)
    bt.add_argument("--iterations", type=int, default=1, help="hemx bootstrap iterations (2: META-BTS)")
    bt.add_argument("--threads", type=int, default=2, help="CPUs each side may use (desilofhe's thread_count)")
    bt.add_argument("--slots", default="full", help="hemx slot counts: comma list of 'full' and powers of two "
                    "(e.g. full,1024); desilofhe bootstraps full slots")
    bt.add_argument("--out", default="bench-results")
    bt.add_argument("--plot", default="", help="write a latency / precision plot (PNG) to this path")
    bt.add_argument("--profile", action="store_true", help="hemx only: time per stage (each one XLA program), key "
                    "switches / rotations / rescales per stage, kernel kinds from a jax.profiler trace")
    bt.add_argument("--key-storage", default="auto",
                    help="hemx: switching keys in memory as their b halves and a stream key (compact: half the bytes, "
                    "the uniform halves generated in each key switch) or whole (full); auto: compact with the native "
                    "kernels; a comma list (compact,full) runs one process each")
    bt.add_argument("--batch", type=int, default=1, help="hemx: ciphertexts per bootstrap call (one batch axis, "
                    "every key read once per call), timed alternately with one alone: latency, seconds per "
                    "ciphertext amortized, and the gain")
    bt.add_argument("--chunk", type=int, default=None, help="hemx: bootstrap the batch this many ciphertexts per "
                    "pass (the circuit's intermediates grow with it: a pass of 4 peaked at 11.5 GiB at boot_16)")
    bt.add_argument("--execution", default="both", choices=("both", "compiled", "eager"),
                    help="hemx: the circuit as one compiled program (the default once a bootstrap repeats), eagerly, or "
                    "both timed alternately in one process (default: the compiled time is the row's, eager beside)")
    bt.set_defaults(func=_cmd_bench_bootstrap)

    sc = bsub.add_parser("scaling", help="collective bytes (and time) per op on 1-8 simulated devices, model beside")
    sc.add_argument("--devices", default="1,2,4,8", help="device counts (each in its own process)")
    sc.add_argument("--dataflows", default="mp,dc,oc")
    sc.add_argument("--ops", default="mul,mul_rescale,rotate", help="comma list of: mul, mul_rescale, rotate")
    sc.add_argument("--path", default="shard_map,partitioner",
                    help="key-switching paths of the sharded context: shard_map (hemx.ckks.sharded_keyswitch, "
                         "where the limb axis divides the key's rows), partitioner (XLA's SPMD partitioner)")
    sc.add_argument("--log-n", type=int, default=6)
    sc.add_argument("--levels", type=int, default=3)
    sc.add_argument("--dnum", type=int, default=2)
    sc.add_argument("--repeats", type=int, default=3)
    sc.add_argument("--out", default="bench-results")
    sc.set_defaults(func=_cmd_bench_scaling, plot="")

    t = bsub.add_parser("throughput", help="batch-size sweep for the NTT and HE-Mult (CROSS Fig. 11b)")
    t.add_argument("--ops", default="ntt,mul", help="comma list of: ntt, mul")
    t.add_argument("--sets", default="A,B", help="CROSS sets for the NTT sweep")
    t.add_argument("--ntt-batches", default="1,2,4,8,16,32,64")
    t.add_argument("--mul-sets", default="A,B", help="parameter sets for the HE-Mult sweep")
    t.add_argument("--mul-batches", default="1,2,4,8,16")
    t.add_argument("--ntt", default=None, choices=NTT_CHOICES, help="force an NTT method (default: the planner's)")
    t.add_argument("--repeats", type=int, default=3)
    t.add_argument("--plot", default="", help="write a throughput-vs-batch plot (PNG) to this path")
    t.add_argument("--out", default="bench-results")
    t.set_defaults(func=_cmd_bench_throughput)

    pl = bsub.add_parser("plan", help="the planner's NTT choice beside the alternatives; --reset forgets the cache")
    pl.add_argument("--sets", default="A,B,C,D", help="parameter sets (as for bench ops); empty for none")
    pl.add_argument("--log-n", default="", help="extra ring degrees log2(N) planned with four 31-bit primes")
    pl.add_argument("--budget", type=float, default=None, help="planning seconds per ring (default: no limit)")
    pl.add_argument("--refresh", action="store_true", help="forget cached timings of these shapes and time again")
    pl.add_argument("--repeats", type=int, default=5)
    pl.add_argument("--reset", action="store_true", help="delete the plan cache file and exit")
    pl.add_argument("--out", default="bench-results")
    pl.set_defaults(func=_cmd_bench_plan)

    w = bsub.add_parser("keyswitch", help="MP / DC / OC key-switching dataflows: latency and peak working set")
    w.add_argument("--sets", default="C,D")
    w.add_argument("--dataflows", default="mp,dc,oc")
    w.add_argument("--repeats", type=int, default=3)
    w.add_argument("--ntt", default=None, choices=NTT_CHOICES, help="force an NTT method (default: the planner's)")
    w.add_argument("--out", default="bench-results")
    w.set_defaults(func=_cmd_bench_keyswitch)

    g = bsub.add_parser("gpu", help="one-shot accelerator check: exactness vs CPU first, NTT / ops / bootstrap "
                        "figures beside the published ones, planner wisdom; exit 0 only if exact")
    g.add_argument("outdir", nargs="?", default="", help="directory for gpu-check.json, gpu-check.md and wisdom/")
    g.add_argument("--quick", action="store_true", help="small sizes on the CPU (N = 2^10..2^12, set A, no "
                   "bootstrap), for CI")
    g.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole check (default 420; quick: 100); stages past it are skipped")
    g.add_argument("--render", default="", metavar="JSON",
                   help="instead of a run: write docs/results/gpu-<device>.md from a run's JSON (or its directory)")
    g.add_argument("--docs", default=os.path.join("docs", "results"), help="where --render writes")
    g.set_defaults(func=_cmd_bench_gpu)

    from hemx.bench import resnet as bench_resnet

    rn = bsub.add_parser("resnet", help="the shipped ResNet-20 (Fashion-MNIST): plaintext, slot simulator and "
                         "encrypted with bootstrapping at boot_16: accuracy, latency per image, bootstraps, keys, RSS")
    bench_resnet.add_arguments(rn)
    rn.set_defaults(func=bench_resnet.run_cli)

    from hemx.bench import cifar as bench_cifar

    cf = bsub.add_parser("cifar", help="the pretrained Keras CIFAR-10 CNN on the 20 foolbox CIFAR-10 images: "
                         "plaintext, the boot_16 plan, and the slot simulator with the ReLU approximation")
    bench_cifar.add_arguments(cf)
    cf.set_defaults(func=bench_cifar.run_cli)

    from hemx.bench import heldout as bench_heldout

    ho = bsub.add_parser("heldout", help="held-out images against calibrated bounds (ResNet-20 on Fashion-MNIST "
                         "test images, the CIFAR-10 CNN on images apart from its calibration): values beyond a "
                         "bound, beyond the ReLU domain, predictions that differ")
    bench_heldout.add_arguments(ho)
    ho.set_defaults(func=bench_heldout.run_cli)

    from hemx.bench import first_call as bench_first_call

    fc = bsub.add_parser("first-call", help="first call in a new process with new keys vs steady: jax.jit and "
                         "hemx.jit (stored programs), HE-Mult+Rotate at N = 2^14 and a boot_12 bootstrap")
    bench_first_call.add_arguments(fc)
    fc.set_defaults(func=bench_first_call.run_cli)

    from hemx.bench import polymul as bench_polymul

    pm = bsub.add_parser("polymul", help="polynomial multiplication for any q: matmul vs NTT vs numpy")
    bench_polymul.add_arguments(pm)
    pm.set_defaults(func=bench_polymul.run_cli)
    from hemx.bench import helr as bench_helr  # HELR logistic regression at scale (Fashion-MNIST, boot_16)
    bench_helr.add_arguments(bsub.add_parser("helr", help="HELR logistic-regression training at scale"))
    from hemx.bench import lstm as bench_lstm  # the Fashion-MNIST LSTM, 32 sequences per ciphertext (boot_16)
    bench_lstm.add_arguments(bsub.add_parser("lstm", help="the shipped Fashion-MNIST LSTM (128 cells, 32 sequences "
                                             "per ciphertext): plan, slot simulator, encrypted with bootstrapping"))

    from hemx.dataflow.cli import add_arguments as dataflow_arguments, run_cli as dataflow_run

    d = sub.add_parser("dataflow", help="CiFlow key-switching data-movement model (Tab. II-IV, sweeps, any preset)")
    dataflow_arguments(d)
    d.set_defaults(func=dataflow_run)
    return p


def tune_allocator(argv: list[str] | None = None) -> None:
    """Re-run this command once with glibc's malloc keeping its pages (``hemx.allocator.TUNABLES``, whose module
    docstring has the why and the measurements).

    ``GLIBC_TUNABLES`` is read only when a process starts, so the command re-executes itself. This happens only
    for the command line (``argv`` None), only on Linux, and not when ``HEMX_MALLOC_TUNING=0`` or
    ``GLIBC_TUNABLES`` already sets every key (a key the user set is kept as set). Glibc versions without a
    tunable ignore it.
    """
    if argv is not None or not sys.platform.startswith("linux") or os.environ.get("HEMX_MALLOC_TUNING") == "0":
        return
    merged = merged_tunables(os.environ.get("GLIBC_TUNABLES", ""))
    if merged is None:
        return
    env = dict(os.environ, GLIBC_TUNABLES=merged)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "hemx", *sys.argv[1:]], env)


def main(argv: list[str] | None = None) -> int:
    tune_allocator(argv)
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except HemxError as exc:
        print(f"hemx: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
