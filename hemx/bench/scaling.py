"""``hemx bench scaling``: time and inter-device collective bytes per operation on 1, 2, 4, 8 devices.

For each device count ``D`` a subprocess starts with ``XLA_FLAGS=--xla_force_host_platform_device_count=D`` (XLA's
device count is fixed when the backend starts), builds a small-ring context sharded on ``"limbs"`` (mesh
``1 x D``), and for each key-switching path (``shard_map``: :mod:`hemx.ckks.sharded_keyswitch`, where its rule allows;
``partitioner``: XLA's SPMD partitioner) and dataflow (``mp``, ``dc``, ``oc``) jits a relinearized multiplication
(``ctx.mul(a, b, keys, rescale=False)``), one with the folded rescale (``rescale=True``) and a rotation by one
slot. For each program it reports:

* the collectives of the compiled, partitioned program and the bytes they move (``hemx.parallel.traffic``:
  bytes *received*, summed over devices, bandwidth-optimal algorithm per collective);
* the data-movement model's prediction for the same key switch (``hemx.dataflow.device_traffic``: the
  owner-computes lower bound, and with ``key_aligned=True`` the exchanges of the shard_map path's layouts);
* the median time per call.

On a CPU the ``D`` devices are simulated: they share the same cores and memory, so **times are meaningless as a
scaling measurement; the bytes are meaningful** (they are what the partitioned program would move on real
devices). The table says so. Results are written as JSON like the other benches (``bench-results/scaling-*.json``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from typing import Sequence

from rich.console import Console

from hemx.bench.report import BenchResult, render_table

DEVICES = (1, 2, 4, 8)
DATAFLOWS = ("mp", "dc", "oc")
OPS = ("mul", "mul_rescale", "rotate")
#: Key-switching paths of a sharded context compared (``hemx.ckks.sharded_keyswitch``).
PATHS = ("shard_map", "partitioner")
TIMES_NOTE = ("simulated CPU devices share the same cores and memory: the times are NOT a scaling measurement; "
              "the collective bytes are meaningful (what the partitioned program moves between devices)")


def small_params(log_n: int = 6, levels: int = 3, dnum: int = 2):
    """The bench's ring: ``N = 2^log_n``, two 28-bit primes per level over a two-prime 31-bit base, so the top
    level has ``2 (levels + 1)`` limbs (8 by default, divisible by 1, 2, 4, 8) and ``ceil(limbs / dnum)``
    31-bit special primes. Insecure on purpose (tiny ring): a data-movement measurement, not a security one."""
    from hemx.ckks import CKKSParameters, InsecureParametersWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return CKKSParameters.create(log_n, levels=levels, dnum=dnum, base_bits=(31, 31), allow_insecure=True,
                                     primes_per_level=2, prime_bits=28, special_bits=31)


def measure(*, dataflows: Sequence[str] = DATAFLOWS, ops: Sequence[str] = OPS, paths: Sequence[str] = PATHS,
            log_n: int = 6, levels: int = 3, dnum: int = 2, repeats: int = 3, seed: int = 1) -> dict:
    """In this process, on every visible device (``1 x D`` mesh): one row per (path, op, dataflow). Used by the
    worker subprocess; callable directly when the process already has the devices it wants.

    ``paths``: "shard_map" (the hand-written key switch where its rule allows it, else the partitioner; the
    row's ``path_used`` says which ran) and / or "partitioner" (XLA's SPMD partitioner)."""
    import jax
    import numpy as np

    from hemx import parallel
    from hemx.bench.timing import time_call
    from hemx.ckks import Context, Sampler
    from hemx.dataflow import KeySwitchShape, device_traffic

    params = small_params(log_n, levels, dnum)
    devices = jax.device_count()
    mesh = parallel.make_mesh(1, devices)
    ctx = Context(params, mesh=mesh, ntt="mat3", reduction="shoup", planning="off",
                  sampler=Sampler.insecure_for_tests(seed))
    keys = ctx.keygen(rotations=[1])
    rng = np.random.default_rng(seed)
    a = ctx.encrypt(rng.uniform(-1, 1, ctx.slots), keys)
    b = ctx.encrypt(rng.uniform(-1, 1, ctx.slots), keys)
    shape = KeySwitchShape.from_params(params, params.max_level)
    rows = []
    for path, op, flow in ((p, o, f) for p in paths for o in ops for f in dataflows):
        if path not in PATHS:
            raise ValueError(f"unknown path {path!r}; choose from {PATHS}")
        ctx.tables.keyswitch_path = path
        path_used = "shard_map" if ctx.tables.shard_spec() is not None else "partitioner"
        if op == "mul":
            fn, args = (lambda x, y, f=flow: ctx.mul(x, y, keys, rescale=False, keyswitch=f).data), (a, b)
        elif op == "mul_rescale":
            fn, args = (lambda x, y, f=flow: ctx.mul(x, y, keys, rescale=True, keyswitch=f).data), (a, b)
        elif op == "rotate":
            fn, args = (lambda x, f=flow: ctx.rotate(x, 1, keys, keyswitch=f).data), (a,)
        else:
            raise ValueError(f"unknown op {op!r}; choose from {OPS}")
        t0 = time.perf_counter()
        compiled = jax.jit(fn).lower(*args).compile()
        compile_s = time.perf_counter() - t0
        text = compiled.as_text()
        summary = parallel.summarize(text)
        groups = parallel.by_operation(parallel.collectives(text))
        tm = time_call(compiled, *args, repeats=repeats)
        fold = params.level_sizes[params.max_level] if op == "mul_rescale" else 0
        model = device_traffic(shape, flow, devices, rescale=fold, folded=bool(fold))
        owner = (device_traffic(shape, flow, devices, rescale=fold, folded=bool(fold), key_aligned=True)
                 if path_used == "shard_map" or devices == 1 else None)
        rows.append({"path": path, "path_used": path_used, "op": op, "dataflow": flow, "devices": devices,
                     "median_s": tm.median_s, "min_s": tm.min_s, "key_aligned_model": owner and owner.as_dict(),
                     "compile_s": compile_s, "hlo": dict(summary.as_dict(), by_operation=groups),
                     "model": model.as_dict()})
    return {"devices": devices, "params": params.describe(), "n": params.n, "limbs": shape.towers,
            "special": shape.special, "dnum": shape.dnum, "digits": list(shape.digit_sizes), "rows": rows}


def run_worker(devices: int, *, timeout: float = 900, **kwargs) -> dict:
    """:func:`measure` in a subprocess with ``devices`` simulated CPU devices; its JSON result."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
    env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={devices}"])
    proc = subprocess.run([sys.executable, "-m", "hemx.bench.scaling", json.dumps(kwargs)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("HEMX_SCALING ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"scaling worker on {devices} devices failed (rc {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1].split(" ", 1)[1])


def bench_scaling(devices: Sequence[int] = DEVICES, *, dataflows: Sequence[str] = DATAFLOWS,
                  ops: Sequence[str] = OPS, paths: Sequence[str] = PATHS, log_n: int = 6, levels: int = 3,
                  dnum: int = 2, repeats: int = 3, console: Console | None = None) -> list[BenchResult]:
    """One worker subprocess per device count; one :class:`BenchResult` per (devices, path, op, dataflow)."""
    console = console or Console()
    results = []
    for d in devices:
        console.print(f"[dim]{d} simulated device(s): compiling {len(paths) * len(ops) * len(dataflows)} "
                      "programs...[/dim]")
        doc = run_worker(int(d), dataflows=list(dataflows), ops=list(ops), paths=list(paths), log_n=log_n,
                         levels=levels, dnum=dnum, repeats=repeats)
        for r in doc["rows"]:
            params = {"devices": r["devices"], "mesh": f"1x{r['devices']}", "op": r["op"], "dataflow": r["dataflow"],
                      "path": r["path"], "path_used": r["path_used"],
                      "n": doc["n"], "limbs": doc["limbs"], "special": doc["special"], "dnum": doc["dnum"],
                      "digits": doc["digits"], "params": doc["params"]}
            extra = {"hlo": r["hlo"], "model": r["model"], "key_aligned_model": r["key_aligned_model"],
                     "compile_s": r["compile_s"], "note": TIMES_NOTE}
            results.append(BenchResult("scaling", f"{r['path']}/{r['op']}/{r['dataflow']}", params, r["median_s"],
                                       r["min_s"],
                                       1 / r["median_s"] if r["median_s"] else None, "op/s (simulated devices)",
                                       extra))
    return results


_SHORT = {"all-gather": "AG", "all-to-all": "A2A", "all-reduce": "AR", "reduce-scatter": "RS",
          "collective-permute": "CP"}


def table_rows(results: Sequence[BenchResult]) -> list[list]:
    """Rows of the report: devices, op, dataflow, ms, collectives by kind, measured and model KiB, ratio."""
    rows = []
    for r in results:
        if r.suite != "scaling":
            continue
        hlo, model = r.extra["hlo"], r.extra["model"]
        owner = r.extra.get("key_aligned_model")
        kinds = " ".join(f"{_SHORT[k]}{n}" for k, n in hlo["count"].items() if n) or "-"
        measured, predicted = hlo["bytes"], model["total_bytes"]
        ratio = (measured / predicted) if predicted else None
        aligned = owner["total_bytes"] if owner else None
        ratio2 = (measured / aligned) if aligned else None
        path = r.params.get("path_used", "partitioner")
        if r.params.get("path", path) != path:
            path += " (fallback)"
        rows.append([r.params["devices"], path, r.params["op"], r.params["dataflow"].upper(), r.median_s * 1e3,
                     kinds, measured / 1024, predicted / 1024, "-" if aligned is None else aligned / 1024,
                     "-" if ratio is None else f"{ratio:.2f}", "-" if ratio2 is None else f"{ratio2:.2f}"])
    return rows


COLUMNS = ["devices", "path", "op", "dataflow", "ms (simulated)", "collectives", "HLO KiB total",
           "lower bound KiB total", "key-aligned model KiB total", "HLO / bound", "HLO / key-aligned"]


def print_report(results: Sequence[BenchResult], console: Console | None = None) -> None:
    console = console or Console()
    if results:
        p = results[0].params
        console.print(f"ring: {p['params']}; top level: {p['limbs']} limbs, K = {p['special']} special, "
                      f"digits {p['digits']}; mesh 1 x D (limb sharding)")
    render_table("Scaling: collective bytes per operation, compiled HLO vs the owner-computes model",
                 COLUMNS, table_rows(results), console)
    console.print(f"[bold yellow]Note:[/bold yellow] {TIMES_NOTE}. Bytes: received, summed over devices "
                  "(hemx.parallel.traffic); AG all-gather, A2A all-to-all, AR all-reduce, RS reduce-scatter, "
                  "CP collective-permute. Lower bound: hemx.dataflow.device_traffic (owner computes); key-aligned: "
                  "the same with key_aligned=True (the shard_map path's layouts, its extra relayout step). "
                  "'fallback': the shard_map path was asked for but its rule (D divides the key's P + L rows) "
                  "fails, so the partitioner ran.")


def _main(argv: list[str]) -> int:
    kwargs = json.loads(argv[0]) if argv else {}
    doc = measure(**kwargs)
    sys.stdout.write("HEMX_SCALING " + json.dumps(doc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
