"""``hemx bench helr``: HELR logistic-regression training at scale (:func:`hemx.apps.logreg.run_preset`).

The default preset "helr": Fashion-MNIST as a two-class task (T-shirt/top + Pullover against Shirt + Coat) at
14x14 = 196 pixels, 16,384 training samples in 128 mini-batches of 128 (one N = 2^16 ciphertext each, 256 slots
per sample), 14 Nesterov iterations (iteration ``t`` on batch ``t mod 128``) with the degree-3 least-squares
sigmoid, the weights and the Nesterov vector bootstrapped on the 128-bit ``boot_16``. ``--small``: the
breast-cancer run (455 samples in one ciphertext of the recommended 128-bit ring, N = 2^15 with 17 levels; 5
iterations, no bootstrapping), a quick check of the same code.

Printed and written as JSON (``--out``, :func:`hemx.bench.report.save_results`): ms per iteration (bootstraps
included) and total seconds, bootstraps and their seconds, keys (count, bytes), peak RSS, and test accuracy and
AUC of the encrypted-trained weights against the same algorithm trained in float64 on the same mini-batches.
Times are wall clock with XLA compilation included (the first iteration and the first bootstrap compile).
"""

from __future__ import annotations

import argparse
import sys

from hemx.errors import ParameterError


def bench(*, small: bool = False, iterations: int | None = None, samples: int | None = None, console=None) -> dict:
    """Run the preset and add the process's peak RSS; the result dict of :func:`hemx.apps.logreg.run_preset`."""
    from hemx.apps import logreg
    from hemx.bench.timing import peak_rss_gib

    say = console.print if console is not None else (lambda msg: None)
    last = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "encrypt" and done not in (1, total):
            return
        if stage in ("train", "bootstrap", "encrypt", "keygen") and done and last.get(stage) != done:
            last[stage] = done
            say(f"[dim]{stage} {done}/{total}[/dim]")

    result = logreg.run_preset("small" if small else "helr", iterations=iterations, n_train=samples,
                               progress=progress)
    result["peak_rss_gib"] = peak_rss_gib()
    return result


def print_result(result: dict, console) -> None:
    from hemx.bench.report import render_table

    rows = [
        ("spec", result["spec"]),
        ("parameters", result["parameters"]),
        ("security", result["security"]),
        ("iterations / batches used", f"{result['iterations']} / {result['batches_used']} of {result['n_batches']}"),
        ("ms per iteration (bootstraps included)", f"{result['ms_per_iteration']:.0f}"),
        ("training total s", f"{result['seconds']['train']:.1f}"),
        ("bootstraps (s each)", f"{result['bootstraps']} at {result['bootstrap_at']} "
                                f"({', '.join(f'{s:.1f}' for s in result['bootstrap_s'])})"),
        ("keygen s / encrypt s", f"{result['seconds']['keygen']:.1f} / {result['seconds']['encrypt']:.1f}"),
        ("keys (count, GiB)", f"{result['keys']['count']}, {result['keys']['bytes'] / 2**30:.2f} "
                              f"({result['keys']['storage']})"),
        ("peak RSS GiB", f"{result['peak_rss_gib']:.2f}"),
        ("accuracy encrypted / float64", f"{100 * result['accuracy']['encrypted']:.2f} % / "
                                         f"{100 * result['accuracy']['float64']:.2f} %"),
        ("AUC encrypted / float64", f"{result['auc']['encrypted']:.4f} / {result['auc']['float64']:.4f}"),
        ("max weight error (largest weight)", f"{result['weight_error']:.2e} ({result['max_abs_weight']:.3f})"),
    ]
    render_table(f"HELR logistic regression ({result['preset']})", ("name", "value"), rows, console=console)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--small", action="store_true", help="the breast-cancer preset (455 samples, N = 2^15, no "
                   "bootstrapping): a quick run of the same code")
    p.add_argument("--iterations", type=int, default=None, help="iterations (default: the preset's, 14 / 5)")
    p.add_argument("--samples", type=int, default=None, help="training samples (a multiple of 128 for the "
                   "helr preset; default 16384)")
    p.add_argument("--out", default="bench-results", help="directory for the result JSON")
    p.set_defaults(func=run_cli)


def run_cli(args) -> int:
    from rich.console import Console

    from hemx.bench.report import BenchResult, save_results

    for name in ("iterations", "samples"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ParameterError(f"--{name} must be a positive integer, got {value}")
    console = Console()
    result = bench(small=args.small, iterations=args.iterations, samples=args.samples, console=console)
    print_result(result, console)
    row = BenchResult("helr", result["preset"], {"samples": result["samples"], "iterations": result["iterations"],
                                                 "batch_size": result["batch_size"], "log_n": result["log_n"]},
                      median_s=result["ms_per_iteration"] / 1000.0, unit="s per iteration", extra=result)
    path = save_results([row], "helr", out_dir=args.out)
    console.print(f"wrote {path}")
    return 0


def _main(argv: list[str] | None = None) -> int:
    """``python -m hemx.bench.helr [--small] [--iterations T] [--samples N] [--out DIR]``."""
    parser = argparse.ArgumentParser(prog="hemx bench helr", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ParameterError as exc:
        print(f"hemx bench helr: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
