"""``hemx bench circuits``: polynomial evaluation and linear transforms, precision, depth and latency.

Rows (one parameter set: N = 2^13 by default, two 31-bit base primes + levels of two 28-bit primes, scale
2^56; a test-size ring, not 128-bit secure):

* ``poly``: the sigmoid as a Chebyshev interpolant on [-8, 8] at degree 31 and 119, and the monomial
  ``x^3 - 0.5 x + 0.25`` on [-1, 1]: worst/mean bits against numpy's value of the same polynomial (the CKKS error)
  and against the function itself, levels consumed, eager latency and ``jax.jit`` latency interleaved in one run,
  and the compile time of the jitted circuit;
* ``lintrans`` (the same ring with 2 levels, transform at the top level): a dense random 256 x 256 matrix (256 slots) and a random band of 64 diagonals over all N/2
  slots: bits against ``M @ x``, rotation keys against ``2 sqrt(diagonals)``, hoisted and unhoisted baby
  steps interleaved in one run.

Precision is computed here from the decrypted values (``-log2 |got - want|``), not by hemx.ckks.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Callable

import jax
import numpy as np
from rich.console import Console

from hemx.bench.report import BenchResult, render_table
from hemx.bench.timing import time_interleaved
from hemx.circuits import LinearTransform, chebyshev_coefficients, evaluate_polynomial, polynomial_depth
from hemx.ckks import CKKSParameters, Context
from hemx.ckks.precision import precision_stats
from hemx.ckks.security import InsecureParametersWarning

SUITES = ("poly", "lintrans")


def bench_params(log_n: int = 13, levels: int = 9) -> CKKSParameters:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return CKKSParameters.create(log_n=log_n, levels=levels, base_bits=(31, 31), dnum=3, allow_insecure=True,
                                     name=f"circuits_{log_n}")


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x)))


def bench_polynomials(params: CKKSParameters, *, repeats: int = 3, degrees=(31, 119), seed: int = 1,
                      console: Console | None = None) -> list[BenchResult]:
    ctx = Context(params)
    keys = ctx.keygen()
    rng = np.random.default_rng(seed)
    cases: list[tuple[str, np.ndarray, dict, Callable, Callable, np.ndarray]] = []
    for degree in degrees:
        c = chebyshev_coefficients(_sigmoid, degree, (-8, 8))
        x = rng.uniform(-8, 8, ctx.slots)
        opts = dict(basis="chebyshev", interval=(-8, 8))
        cases.append((f"sigmoid cheb {degree}", c, opts, lambda v, c=c: np.polynomial.chebyshev.chebval(v / 8, c),
                      _sigmoid, x))
    cubic = np.array([0.25, -0.5, 0.0, 1.0])
    cases.append(("x^3 - 0.5x + 0.25", cubic, dict(basis="monomial"),
                  lambda v: np.polynomial.polynomial.polyval(v, cubic),
                  lambda v: np.polynomial.polynomial.polyval(v, cubic), rng.uniform(-1, 1, ctx.slots)))
    results = []
    for name, c, opts, poly, func, x in cases:
        ct = ctx.encrypt(x, keys)
        eager = lambda ct=ct, c=c, opts=opts: evaluate_polynomial(ctx, ct, c, keys, **opts)  # noqa: E731
        start = time.perf_counter()
        out = jax.block_until_ready(eager())
        first_eager = time.perf_counter() - start
        jitted = jax.jit(lambda v, c=c, opts=opts: evaluate_polynomial(ctx, v, c, keys, **opts))
        start = time.perf_counter()
        jax.block_until_ready(jitted(ct))
        first_jit = time.perf_counter() - start
        same = bool(np.array_equal(np.asarray(jitted(ct).data), np.asarray(out.data)))
        times = time_interleaved({"eager": eager, "jit": lambda ct=ct, f=jitted: f(ct)}, repeats=repeats)
        got = ctx.decrypt(out, keys)
        prec, fprec = precision_stats(poly(x), got), precision_stats(func(x), got)
        min_bits, mean_bits, fmin, fmean = prec.min_bits, prec.mean_bits, fprec.min_bits, fprec.mean_bits
        row = BenchResult("poly", name, {"n": params.n, "degree": len(c) - 1, "slots": ctx.slots},
                          times["jit"].median_s, times["jit"].min_s, extra={
                              "levels_consumed": ct.level - out.level,
                              "depth_formula": polynomial_depth(c, **opts),
                              "ceil_log2_degree_plus_1": int(math.ceil(math.log2(len(c)))),
                              "min_bits": min_bits, "mean_bits": mean_bits,
                              "min_bits_vs_function": fmin, "mean_bits_vs_function": fmean,
                              "eager_median_s": times["eager"].median_s, "jit_median_s": times["jit"].median_s,
                              "jit_speedup": times["eager"].median_s / times["jit"].median_s,
                              "first_eager_s": first_eager, "first_jit_s": first_jit, "jit_equals_eager": same,
                              "log2_scale": math.log2(out.scale)})
        results.append(row)
        if console is not None:
            console.print(f"[dim]{name}: {min_bits:.1f} bits, {row.extra['levels_consumed']} levels, "
                          f"eager {times['eager'].median_s:.3f}s jit {times['jit'].median_s:.3f}s[/]")
    return results


def bench_lintrans(params: CKKSParameters, *, repeats: int = 3, seed: int = 2,
                   console: Console | None = None) -> list[BenchResult]:
    rng = np.random.default_rng(seed)
    results = []
    full = params.n // 2
    offsets = np.arange(-32, 32)  # a band of 64 diagonals, the shape of convolutions and FFT factors
    banded = np.zeros((full, full))
    i = np.arange(full)
    for k in offsets:
        banded[i, (i + k) % full] = rng.uniform(-1, 1, full)
    for name, slots, matrix in (("dense 256x256", 256, rng.uniform(-1, 1, (256, 256))),
                                (f"band of 64 diagonals, {full} slots", full, banded)):
        ctx = Context(params, slots=slots)
        start = time.perf_counter()
        lt = LinearTransform(ctx, matrix)
        build_s = time.perf_counter() - start
        keys = ctx.keygen(rotations=lt.rotations)
        x = rng.uniform(-1, 1, slots)
        ct = ctx.encrypt(x, keys)
        out = lt.apply(ct, keys)
        times = time_interleaved({"hoisted": lambda: lt.apply(ct, keys),
                                  "unhoisted": lambda: lt.apply(ct, keys, hoisted=False)}, repeats=repeats)
        prec = precision_stats(matrix @ x, ctx.decrypt(out, keys))
        min_bits, mean_bits = prec.min_bits, prec.mean_bits
        row = BenchResult("lintrans", name, {"n": params.n, "slots": slots, "diagonals": len(lt.indices)},
                          times["hoisted"].median_s, times["hoisted"].min_s, extra={
                              "min_bits": min_bits, "mean_bits": mean_bits, "rotation_keys": len(lt.rotations),
                              "two_sqrt_diagonals": 2 * math.sqrt(len(lt.indices)), "n1": lt.n1,
                              "hoisted_median_s": times["hoisted"].median_s,
                              "unhoisted_median_s": times["unhoisted"].median_s,
                              "hoisting_speedup": times["unhoisted"].median_s / times["hoisted"].median_s,
                              "build_s": build_s})
        results.append(row)
        if console is not None:
            console.print(f"[dim]{name}: {min_bits:.1f} bits, {len(lt.rotations)} keys, hoisted "
                          f"{times['hoisted'].median_s:.3f}s unhoisted {times['unhoisted'].median_s:.3f}s[/]")
    return results


def print_report(results: list[BenchResult], console: Console) -> None:
    poly = [r for r in results if r.suite == "poly"]
    if poly:
        render_table("polynomial evaluation", ["polynomial", "N", "levels", "min bits", "mean bits",
                                               "min bits vs f", "eager s", "jit s", "jit speedup", "jit == eager"],
                     [(r.name, r.params["n"], r.extra["levels_consumed"], r.extra["min_bits"], r.extra["mean_bits"],
                       r.extra["min_bits_vs_function"], r.extra["eager_median_s"], r.extra["jit_median_s"],
                       r.extra["jit_speedup"], r.extra["jit_equals_eager"]) for r in poly], console)
    lt = [r for r in results if r.suite == "lintrans"]
    if lt:
        render_table("linear transforms", ["matrix", "N", "slots", "diagonals", "keys", "2 sqrt(diag)", "min bits",
                                           "hoisted s", "unhoisted s", "speedup"],
                     [(r.name, r.params["n"], r.params["slots"], r.params["diagonals"], r.extra["rotation_keys"],
                       r.extra["two_sqrt_diagonals"], r.extra["min_bits"], r.extra["hoisted_median_s"],
                       r.extra["unhoisted_median_s"], r.extra["hoisting_speedup"]) for r in lt], console)
