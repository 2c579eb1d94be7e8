"""``hemx demo --workload kernels``: an end-to-end check of the exact kernel layer with timings.

For each NTT method, multiply two random polynomials in ``Z_Q[X]/(X^N + 1)`` (CROSS set A and C shapes),
check the product against an independent Python-integer computation of sampled coefficients and against the
other methods, and time the transforms. Also checks BAT ``modmatmul`` and basis conversion against Python
integers. Exits non-zero if any check fails.
"""

from __future__ import annotations

import json
import random
import secrets
import sys
from math import prod

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console

from hemx.bench.report import render_table
from hemx.bench.timing import machine_label, time_call
from hemx.kernels import bat, bconv
from hemx.nt import ntt_primes
from hemx.ring import NTT_METHODS, RNSRing

DEMO_SETS = ((12, 4), (14, 15))  # CROSS sets A and C: (log N, limbs)


def _negacyclic_coeff(a: list[int], b: list[int], k: int, q: int) -> int:
    """Coefficient k of a*b mod (X^N + 1, q), straight from the definition."""
    n = len(a)
    acc = 0
    for i in range(n):
        j = k - i
        acc += a[i] * b[j] if j >= 0 else -a[i] * b[j + n]
    return acc % q


def run(console: Console | None = None, as_json: bool = False) -> dict:
    console = console or Console(stderr=as_json)
    rng = random.Random(secrets.randbits(64))
    summary = {"machine": machine_label(), "rings": [], "checks": {}}
    all_ok = True
    with console.status("") as status:
        for log_n, limbs in DEMO_SETS:
            n = 1 << log_n
            qs = ntt_primes(28, limbs, n)
            a = [rng.randrange(qs[0]) for _ in range(n)]
            b = [rng.randrange(qs[0]) for _ in range(n)]
            sample = rng.sample(range(n), 6)
            rows, products = [], {}
            for method in NTT_METHODS:
                status.update(f"N = 2^{log_n}, {limbs} limbs: building the {method} ring")
                ring = RNSRing(n, qs, method)
                ra, rb = ring.from_ints(np.array(a)), ring.from_ints(np.array(b))
                status.update(f"N = 2^{log_n}, {limbs} limbs: {method} product and timings")
                c = np.asarray(ring.poly_mul(ra, rb))
                ok = all(int(c[l, k]) == _negacyclic_coeff(a, b, k, q) for k in sample for l, q in enumerate(qs))
                products[method] = c
                t_ntt = time_call(ring.ntt, ra, repeats=5)
                t_mul = time_call(ring.poly_mul, ra, rb, repeats=5)
                rows.append([method, ring.plan.describe(), t_ntt.median_s * 1e3, limbs / t_ntt.median_s / 1e3,
                             t_mul.median_s * 1e3, "yes" if ok else "NO"])
                all_ok &= ok
            agree = all(np.array_equal(products[m], products[NTT_METHODS[0]]) for m in NTT_METHODS)
            all_ok &= agree
            render_table(f"Negacyclic product, N = 2^{log_n}, {limbs} x 28-bit limbs (methods agree: {agree})",
                         ["method", "plan", "NTT ms", "K NTT/s", "poly_mul ms", "exact"], rows, console)
            summary["rings"].append({"log_n": log_n, "limbs": limbs, "methods_agree": agree, "rows": rows})

        status.update("BAT modmatmul vs Python integers")
        q = ntt_primes(28, 1, 1 << 10)[0]
        ma = [[rng.randrange(q) for _ in range(48)] for _ in range(32)]
        mb = [[rng.randrange(q) for _ in range(24)] for _ in range(48)]
        got = np.asarray(bat.modmatmul(ma, mb, q))
        want = [[sum(x * y for x, y in zip(row, col)) % q for col in zip(*mb)] for row in ma]
        summary["checks"]["bat_modmatmul"] = bool((got == np.array(want)).all())

        status.update("basis conversion vs Python integers")
        primes = ntt_primes(28, 9, 1 << 10)
        src, dst = primes[:4], primes[4:]
        x = np.array([[rng.randrange(p) for _ in range(64)] for p in src], dtype=np.uint32)
        out = np.asarray(jax.jit(bconv.bconv)(jnp.asarray(x), bconv.make_bconv_plan(src, dst)))
        big = prod(src)
        ref = [[sum(int(x[i, c]) * pow(big // p, -1, p) % p * (big // p) for i, p in enumerate(src)) % d
                for c in range(64)] for d in dst]
        summary["checks"]["bconv_bat"] = bool((out == np.array(ref)).all())
    all_ok &= all(summary["checks"].values())
    render_table("Other exact kernels", ["check", "exact"],
                 [[k, "yes" if v else "NO"] for k, v in summary["checks"].items()], console)
    console.print(f"[bold]{'All checks passed' if all_ok else 'SOME CHECKS FAILED'}[/] on {summary['machine']}")
    summary["ok"] = bool(all_ok)
    if as_json:
        print(json.dumps(summary, default=str))
    return summary


def main(as_json: bool = False) -> int:
    return 0 if run(as_json=as_json)["ok"] else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
