"""``hemx bench kernels --suite engine``: the native kernels with and without the CPU's matrix engine (AMX tiles),
in one process, interleaved call by call, every output compared bit for bit.

Rows (``n`` = 2^16 by default, key switching's shapes at ``boot_16``'s top level: Q of 30 limbs, P of 10, digits of
10 limbs):

* ``bconv L->L'``: the centered basis conversion of ``L`` limbs to ``L'`` (:func:`hemx.kernels.bconv.bconv`,
  native);
* ``modup``: the fused ModUp of Q to its three extended digits (INTT, the digits' conversions, NTT;
  :func:`hemx.ckks.keyswitch.modup`);
* ``ntt``: the forward NTT of ``(30, n)``.

Each runs under the vector instruction set ("avx512") and under "amx", which differs from it only in the basis
conversion: the NTT row is the same code in both (the NTT has no tile path: ``docs/kernels.md``, *The matrix
engine*, says why from these rows: a tile conversion step costs more per output word than a whole NTT costs per
coefficient). Where the CPU has no AMX the vector rows alone are timed and the report says so.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console
from rich.table import Table

from hemx.bench.report import BenchResult
from hemx.bench.timing import time_interleaved
from hemx.errors import BackendError
from hemx.kernels import bconv as BC
from hemx.kernels import native
from hemx.kernels import ntt as ntt_kernels
from hemx.nt import ntt_primes
from hemx.plan.engine import ENGINE_ISA

#: (source limbs, target limbs) of the timed conversions: a digit to the rest of Q and P (ModUp at the top, and two
#: levels lower), P to Q (ModDown), and the digit to a 40-limb basis
CONVERSIONS: tuple[tuple[int, int], ...] = ((10, 30), (10, 20), (10, 40), (30, 10))


def _residues(rng, moduli, n):
    return np.stack([rng.integers(0, q, n) for q in moduli]).astype(np.uint32)


def bench_engine(*, n: int = 1 << 16, num_q: int = 30, num_p: int = 10, dnum: int = 3,
                 conversions: Sequence[tuple[int, int]] = CONVERSIONS, threads: int = 2, repeats: int = 7,
                 console: Console | None = None, seed: int = 0) -> list[BenchResult]:
    """Time the rows of the module docstring under the vector kernels and, where this CPU runs them, the AMX tiles;
    every output of the two (and of the scalar kernels, for the conversions) compared bit for bit."""
    from hemx.ckks import keyswitch as ks  # noqa: PLC0415 - the bench layer sits above ckks

    console = console or Console()
    if not native.available():
        raise BackendError(f"the engine suite needs the native kernels: {native.reason()}")
    runnable = native.runnable_isas()
    vector = next(isa for isa in runnable if isa != ENGINE_ISA)
    isas = [vector] + ([ENGINE_ISA] if ENGINE_ISA in runnable else [])
    active = native.isa()
    rng = np.random.default_rng(seed)
    qs = ntt_primes(28, max([num_q + num_p] + [src + dst for src, dst in conversions]), n)
    ps, qq = qs[:num_p], qs[num_p:num_p + num_q]
    cases = {}  # name -> (fn, args, compare with scalar)
    for src, dst in conversions:
        plan = BC.make_bconv_plan(qs[:src], qs[src:src + dst], centered=True)
        x = jnp.asarray(_residues(rng, qs[:src], n))
        cases[f"bconv {src}->{dst}"] = (jax.jit(lambda v, p=plan: BC.bconv(v, p, method="native")), (x,), True)
    dsize = -(-num_q // dnum)
    digits = tuple((lo, min(lo + dsize, num_q)) for lo in range(0, num_q, dsize))
    ntt_plan = jax.device_put(ntt_kernels.make_plan(n, ps + qq, "native"))
    mps = tuple(BC.make_bconv_plan(qq[lo:hi], ps + qq[:lo] + qq[hi:], centered=True) for lo, hi in digits)
    xq = jnp.asarray(_residues(rng, qq, n))
    cases["modup"] = (jax.jit(lambda v, p, m: ks.modup(v, p, m, digits=digits, num_p=num_p, num_q=num_q)),
                      (xq, ntt_plan, mps), False)
    q_plan = jax.device_put(ntt_kernels.make_plan(n, qq, "native"))
    cases[f"ntt ({num_q}, {n})"] = (jax.jit(ntt_kernels.ntt), (xq, q_plan), False)
    native.set_max_threads(threads)
    results = []
    try:
        outputs = {}
        for isa in isas + ["scalar"]:
            native.select_isa(isa)
            for name, (fn, args, with_scalar) in cases.items():
                if isa != "scalar" or with_scalar:
                    outputs[isa, name] = np.asarray(fn(*args))
        calls = {}
        for name, (fn, args, _) in cases.items():
            for isa in isas:
                calls[isa, name] = (lambda f=fn, a=args, i=isa: (native.select_isa(i), f(*a))[1])
        times = time_interleaved({f"{i}|{nm}": c for (i, nm), c in calls.items()}, repeats=repeats)
    finally:
        native.set_max_threads(0)
        native.select_isa(active)
    for name, (_, _, with_scalar) in cases.items():
        ref = outputs[vector, name]
        exact = all(np.array_equal(outputs[i, name], ref) for i in isas)
        if with_scalar:
            exact &= np.array_equal(outputs["scalar", name], ref)
        t_vec = times[f"{vector}|{name}"]
        words = int(np.prod(outputs[vector, name].shape))
        extra = {"vector_isa": vector, "vector_s": t_vec.median_s, "bit_exact": bool(exact), "output_words": words,
                 "threads": threads, "build": native.build_id(), "amx": ENGINE_ISA in isas}
        if ENGINE_ISA in isas:
            t_amx = times[f"{ENGINE_ISA}|{name}"]
            extra.update(amx_s=t_amx.median_s, speedup=t_vec.median_s / t_amx.median_s,
                         amx_ns_per_word=t_amx.median_s / words * 1e9 * threads)
        extra["vector_ns_per_word"] = t_vec.median_s / words * 1e9 * threads
        best = min(t_vec.median_s, extra.get("amx_s", t_vec.median_s))
        results.append(BenchResult("engine", name, {"n": n, "threads": threads}, best, t_vec.min_s, None, "", extra))
    print_engine(results, console)
    return results


def print_engine(results: Sequence[BenchResult], console: Console | None = None) -> None:
    console = console or Console()
    rows = [r for r in results if r.suite == "engine"]
    if not rows:
        return
    amx = rows[0].extra["amx"]
    vec = rows[0].extra["vector_isa"]
    title = (f"native kernels with and without AMX tiles, N={rows[0].params['n']}, {rows[0].params['threads']} "
             f"threads, interleaved" if amx else f"native kernels ({vec}); this CPU has no AMX tiles")
    tab = Table(title=title)
    cols = ["kernel", f"{vec} ms", f"{vec} ns/word·core"]
    if amx:
        cols += ["amx ms", "amx ns/word·core", "tiles speedup"]
    for col in cols + ["bit-exact"]:
        tab.add_column(col)
    for r in rows:
        e = r.extra
        cells = [r.name, f"{e['vector_s'] * 1e3:.2f}", f"{e['vector_ns_per_word']:.2f}"]
        if amx:
            cells += [f"{e['amx_s'] * 1e3:.2f}", f"{e['amx_ns_per_word']:.2f}", f"{e['speedup']:.2f}x"]
        tab.add_row(*cells, str(e["bit_exact"]))
    console.print(tab)


__all__ = ["bench_engine", "print_engine", "CONVERSIONS"]
