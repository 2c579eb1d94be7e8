"""``hemx demo``: the main job. ``--workload cnn`` (default) and ``logreg`` run the encrypted workloads through
the client/server split (:mod:`hemx.demo.workloads`); ``helr`` trains HELR at the seeds' scale (16,384 Fashion-MNIST
samples, ``boot_16``); ``resnet`` runs encrypted ResNet-20 inference with
bootstrapping through the same split (:mod:`hemx.demo.resnet`); ``kernels`` checks the exact kernel layer
(:mod:`hemx.demo.kernels`)."""

from __future__ import annotations

import json
import sys

from rich.console import Console

from hemx.bench.report import render_table

WORKLOAD_CHOICES = ("cnn", "logreg", "helr", "resnet", "kernels")


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def _summary_rows(summary: dict) -> list[list[str]]:
    pct = lambda v: f"{100 * v:.2f} %"  # noqa: E731
    rows = [["device", f"{summary['backend']}: {summary['device']} ({summary['machine']})"],
            ["parameters", f"{summary['parameters']}, ntt={summary['ntt']}"]]
    if summary["workload"] == "helr":
        return rows + _helr_rows(summary)
    if summary["workload"] == "resnet":
        from hemx.demo import resnet

        rows += resnet.summary_rows(summary, _fmt_bytes)
        rows += [[f"time: {k}", f"{v:.2f} s"] for k, v in summary["seconds"].items()]
        rows += [[f"size: {k.replace('_', ' ')}", _fmt_bytes(v)] for k, v in summary["bytes"].items()]
        return rows
    accuracy = [["accuracy plaintext / encrypted", f"{pct(summary['accuracy_plaintext'])} / "
                                                   f"{pct(summary['accuracy_encrypted'])}"],
                ["predictions equal to plaintext", pct(summary["agreement"])]]
    if summary["workload"] == "cnn":
        rows += [
            ["images / ciphertexts", f"{summary['images']} / {summary['ciphertexts']} "
                                     f"({summary['images_per_ciphertext']} images each)"],
            *accuracy,
            ["max |logit error|", f"{summary['max_abs_logit_error']:.2e}"],
            ["latency per batch (steady)", f"{summary['latency_per_batch_s']:.2f} s"],
            ["latency per image (steady)", f"{summary['latency_per_image_ms']:.1f} ms"],
            ["first batch " + ("(with compilation)" if summary.get("first_batch_includes_compilation", True)
                               else "(after the server's warm-up)"), f"{summary['batch_seconds'][0]:.1f} s"],
            ["key switches per ciphertext", str(summary["key_switches_per_ciphertext"])],
        ]
    elif summary.get("mode") == "bootstrapping":
        lv = summary["levels"]
        at = summary["bootstrap_at_iterations"]
        rows += [
            ["security", summary["security"]],
            ["samples train / test, features", f"{summary['train_samples']} / {summary['test_samples']}, "
                                               f"{summary['features']}"],
            ["iterations, learning rate, sigmoid", f"{summary['iterations']}, {summary['learning_rate']:g}, "
                                                   f"{summary['sigmoid']} (max |z| {summary['max_abs_z']:.1f})"],
            *accuracy,
            ["max |weight error| (largest weight)", f"{summary['max_abs_weight_error']:.2e} "
                                                    f"({summary['max_abs_weight']:.2f})"],
            ["max |score error|", f"{summary['max_abs_score_error']:.2e}"],
            ["bootstraps (weights + Nesterov vector)", f"{summary['bootstraps']}, before iterations "
                                                       f"{', '.join(map(str, at)) or '-'}"],
            ["time per bootstrap", f"{summary['bootstrap_median_s']:.2f} s median after the first "
                                   f"({summary['bootstrap_seconds'][0]:.1f} s with compilation)"
             if at else "-"],
            ["time per iteration", f"{summary['iteration_median_s']:.2f} s median without bootstrap, "
                                   f"{summary['iteration_mean_with_bootstraps_s']:.2f} s mean with them"],
            ["levels", f"chain {lv['chain']}, {lv['per_iteration']} per iteration, data at {lv['data']}, "
                       f"bootstrap {lv['state_before_bootstrap']} -> {lv['after_bootstrap']}, "
                       f"weights out at {lv['weights_out']}"],
            ["state divisor (shrink)", f"{summary['shrink']:g}: largest |w / kappa| {summary['largest_state']:.1f} "
                                       f"-> {summary['largest_shrunk_state']:.3f} at a bootstrap"],
            ["inference per test sample", f"{summary['latency_per_test_sample_ms']:.2f} ms"],
        ]
    else:
        its = summary["iteration_seconds"]
        rows += [
            ["samples train / test, features", f"{summary['train_samples']} / {summary['test_samples']}, "
                                               f"{summary['features']}"],
            *accuracy,
            ["max |weight error| / |score error|", f"{summary['max_abs_weight_error']:.2e} / "
                                                   f"{summary['max_abs_score_error']:.2e}"],
            ["training iterations", f"{summary['iterations']} ({', '.join(f'{t:.1f}' for t in its)} s; "
                                    f"the first ones compile)"],
            ["inference per test sample", f"{summary['latency_per_test_sample_ms']:.2f} ms"],
        ]
    rows += [[f"time: {k}", f"{v:.2f} s"] for k, v in summary["seconds"].items()]
    rows += [[f"size: {k.replace('_', ' ')}", _fmt_bytes(v)] for k, v in summary["bytes"].items()]
    return rows


def _helr_rows(summary: dict) -> list[list[str]]:
    """The rows of ``--workload helr`` (:func:`hemx.apps.logreg.run_preset`'s fields)."""
    pct = lambda v: f"{100 * v:.2f} %"  # noqa: E731
    acc, auc, sec = summary["accuracy"], summary["auc"], summary["seconds"]
    boots = summary["bootstrap_s"]
    return [
        ["security", summary["security"]],
        ["training samples / test samples, features", f"{summary['samples']} / {summary['test_samples']}, "
                                                       f"{summary['features']}"],
        ["mini-batches (size, used)", f"{summary['n_batches']} of {summary['batch_size']} "
                                      f"({summary['batches_used']} used)"],
        ["iterations, sigmoid", f"{summary['iterations']}, {summary['sigmoid']}"],
        ["test accuracy encrypted / float64", f"{pct(acc['encrypted'])} / {pct(acc['float64'])}"],
        ["test AUC encrypted / float64", f"{auc['encrypted']:.4f} / {auc['float64']:.4f}"],
        ["predictions equal to float64", pct(summary["agreement"])],
        ["max |weight error|", f"{summary['weight_error']:.2e} (largest weight {summary['max_abs_weight']:.2f})"],
        ["time per iteration", f"{summary['ms_per_iteration'] / 1e3:.2f} s (bootstraps included)"],
        ["training total", f"{sec['train']:.1f} s"],
        ["bootstraps", f"{summary['bootstraps']} before iterations {', '.join(map(str, summary['bootstrap_at']))}"
                       f" ({', '.join(f'{s:.1f}' for s in boots)} s)" if boots else "0"],
        ["keys", f"{summary['keys']['count']}, {_fmt_bytes(summary['keys']['bytes'])} ({summary['keys']['storage']})"],
        ["peak memory (RSS)", f"{summary['peak_rss_gib']:.2f} GiB"],
        *[[f"time: {k}", f"{v:.2f} s"] for k, v in sec.items()],
    ]


def run(workload: str = "cnn", *, as_json: bool = False, console: Console | None = None, **options) -> dict:
    """Run one workload with progress bars and a summary table (to stderr when ``as_json``)."""
    from hemx.demo import workloads

    if workload not in workloads.WORKLOADS and workload != "resnet":
        raise ValueError(f"unknown workload {workload!r}; choose one of {workloads.WORKLOADS + ('resnet',)}")
    console = console or Console(stderr=as_json)
    if workload == "resnet":
        return _run_resnet(as_json, console, **options)
    if workload == "helr":
        return _run_helr(as_json, console, **options)
    runner = workloads.run_cnn if workload == "cnn" else workloads.run_logreg
    title = ("Encrypted CNN inference, sklearn digits (8x8), client/server" if workload == "cnn"
             else "Encrypted logistic regression training (HELR), breast cancer, client/server")
    console.print(f"[bold]{title}[/]")
    with workloads.stage_bars(console) as bars:
        summary = runner(update=bars.update, **options)
    if summary.get("mode") == "bootstrapping":
        title += ", with bootstrapping"
    render_table(title, ["", "value"], _summary_rows(summary), console)
    # the acceptance criteria: the CNN's encrypted predictions equal the plaintext model's on every image;
    # encrypted logistic regression is within one accuracy point of the same algorithm in plaintext
    gap = abs(summary["accuracy_encrypted"] - summary["accuracy_plaintext"])
    ok = summary["agreement"] == 1.0 if workload == "cnn" else gap <= 0.01 + 1e-12
    if summary.get("mode") == "bootstrapping":  # bootstrapped training: test accuracy equal to plaintext's
        ok = gap == 0.0
        console.print(f"[bold]{'note' if summary['secure'] else 'WARNING'}:[/] {summary['security']}")
    summary["ok"] = bool(ok)
    if as_json:
        print(json.dumps(summary, default=float))
    return summary


def _run_helr(as_json: bool, console: Console, **options) -> dict:
    """``--workload helr``: ok when the encrypted-trained model's test accuracy is within one point of the same
    algorithm trained in float64 on the same mini-batches."""
    from hemx.demo import workloads

    title = "Encrypted HELR training at scale, Fashion-MNIST (16,384 samples, boot_16)"
    console.print(f"[bold]{title}[/]")
    with workloads.stage_bars(console) as bars:
        summary = workloads.run_helr(update=bars.update, **options)
    render_table(title, ["", "value"], _summary_rows(summary), console)
    acc = summary["accuracy"]
    summary["ok"] = bool(abs(acc["encrypted"] - acc["float64"]) <= 0.01 + 1e-12)
    if as_json:
        print(json.dumps(summary, default=float))
    return summary


def _run_resnet(as_json: bool, console: Console, **options) -> dict:
    """``--workload resnet``: ok when every encrypted prediction equals the plaintext network's."""
    from hemx.demo import resnet

    model = options.get("model", "resnet20")
    resnet.check_options(model, options.get("num_images", 1), options.get("preset", resnet.DEFAULT_PRESET),
                         options.get("allow_insecure", False))  # before any output
    title = ("Encrypted ResNet-20 inference with bootstrapping, Fashion-MNIST, client/server" if model == "resnet20"
             else "Encrypted inference of the tiny residual TEST network (not ResNet-20), client/server")
    console.print(f"[bold]{title}[/]")
    with resnet.layer_bars(console) as bars:
        summary = resnet.run_resnet(update=bars.update, layer=bars.layer, log=bars.print, **options)
    render_table(title, ["", "value"], _summary_rows(summary), console)
    if not summary["secure"]:
        console.print(f"[bold]WARNING:[/] {summary['preset']} is not 128-bit secure: a test-size ring, for tests only")
    summary["ok"] = summary["predictions_equal"]
    if as_json:
        print(json.dumps(summary, default=float))
    return summary


def main(workload: str = "cnn", as_json: bool = False, **options) -> int:
    if workload == "kernels":
        from hemx.demo import kernels

        return kernels.main(as_json=as_json)
    return 0 if run(workload, as_json=as_json, **options)["ok"] else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
