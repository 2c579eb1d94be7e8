"""``hemx bench kernels --suite native``: the native (C++ / XLA FFI) NTT against its own machine limits,
JAX's butterfly and desilofhe's ``Engine.ntt``, all in one run.

Native roofline (both probes are native code, so the NTT is compared with what this CPU does, not with XLA):

* ``butterfly probe``: lazy radix-4 Harvey butterflies on a 4 KiB block per thread that stays in L1
  (:func:`hemx.kernels.native.butterfly_probe`); butterflies per second with ``threads`` threads;
* ``shoup stream``: ``x * w mod q`` (Shoup) streaming over ``(L, N)`` residues and their twiddle tables
  (:func:`hemx.kernels.native.mul_shoup`): residues per second, i.e. a memory-bound pass.

The NTT of ``(L, N)`` does ``L N/2 log2 N`` butterflies; its *fraction of the butterfly probe* is the
probe's time for that many butterflies over the NTT's time. All timings: warm-up, then calls interleaved
round-robin (``time_interleaved``), median reported; the machine may be shared, so only same-run ratios
count.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console
from rich.table import Table

from hemx.bench.report import BenchResult
from hemx.bench.timing import time_call, time_interleaved
from hemx.errors import BackendError
from hemx.kernels import modarith, native
from hemx.kernels import ntt as ntt_kernels
from hemx.nt import ntt_primes

PROBE_N = 1024  # 4 KiB per thread: in L1
PROBE_REPS = 2000


def _residues(rng, shape, qs):
    return jax.device_put(np.stack([rng.integers(0, q, size=shape) for q in qs], axis=-2).astype(np.uint32))


def probes(*, threads: int = 2, limbs: int = 30, n: int = 1 << 16, repeats: int = 7, seed: int = 0) -> dict:
    """The two native probes: ``{"butterflies_per_s", "shoup_residues_per_s", "threads"}``."""
    rng = np.random.default_rng(seed)
    q = ntt_primes(28, 1, PROBE_N)[0]
    x = jax.device_put(
        rng.integers(0, q, size=(threads, PROBE_N)).astype(np.uint32))
    qv = jnp.full((threads,), q, jnp.uint32)
    w = 12345 % q
    tw = jnp.asarray(np.tile(np.array([[w, (w << 32) // q]], np.uint32), (threads, 1)))
    probe = jax.jit(lambda a: native.butterfly_probe(a, qv, tw, reps=PROBE_REPS))
    t = time_call(probe, x, repeats=repeats)
    bfly = threads * PROBE_N * PROBE_REPS / t.median_s
    qs = ntt_primes(28, limbs, n)
    xs = _residues(rng, (n,), qs)
    wk = modarith.known_operand(np.asarray(_residues(rng, (n,), qs)).astype(np.int64), np.asarray(qs).reshape(-1, 1))
    wk = jax.device_put(wk)
    qarr = jnp.asarray(np.asarray(qs, np.uint32))
    stream = jax.jit(lambda a: native.mul_shoup(a, wk, qarr))
    ts = time_call(stream, xs, repeats=repeats)
    return {"butterflies_per_s": bfly, "shoup_residues_per_s": limbs * n / ts.median_s, "threads": threads,
            "probe_s": t.median_s, "stream_s": ts.median_s}


def bench_native(*, n: int = 1 << 16, limbs: int = 30, threads: int = 2, repeats: int = 7,
                 peers: Sequence[str] = ("desilofhe",), console: Console | None = None, seed: int = 0
                 ) -> list[BenchResult]:
    """Native forward / inverse NTT of ``(limbs, n)``, JAX's butterfly and the peers' NTT, interleaved."""
    console = console or Console()
    if not native.available():
        raise BackendError(f"the native suite needs the native kernels: {native.reason()}")
    native.set_max_threads(threads)
    try:
        pk = probes(threads=threads, limbs=limbs, n=n, repeats=repeats, seed=seed)
        rng = np.random.default_rng(seed)
        qs = ntt_primes(28, limbs, n)
        plan_n = jax.device_put(ntt_kernels.make_plan(n, qs, "native"))
        plan_j = jax.device_put(ntt_kernels.make_plan(n, qs, "butterfly"))
        x = _residues(rng, (n,), qs)
        fwd, inv = jax.jit(ntt_kernels.ntt), jax.jit(ntt_kernels.intt)
        calls = {"native ntt": lambda: fwd(x, plan_n), "native intt": lambda: inv(x, plan_n),
                 "jax butterfly ntt": lambda: fwd(x, plan_j)}
        notes = {}
        if peers:
            from hemx.bench.peers import available_adapters

            for ad in available_adapters(peers, threads, lambda msg: console.print(f"[yellow]{msg}[/]")):
                kernel = ad.ntt_setup(n, max(1, limbs // 2 - 1))
                if kernel is not None:
                    calls[f"{ad.name} Engine.ntt"] = kernel.run
                    notes[f"{ad.name} Engine.ntt"] = (kernel.transforms, kernel.note)
        times = time_interleaved(calls, repeats=repeats)
    finally:
        native.set_max_threads(0)
    bflies = limbs * n // 2 * int(math.log2(n))
    probe_time = bflies / pk["butterflies_per_s"]
    results = []
    base = times["native ntt"].median_s
    for name, t in times.items():
        transforms, note = notes.get(name, (limbs, ""))
        per_limb = t.median_s / transforms
        extra = {"ratio_to_native_ntt": (per_limb * limbs) / base, "note": note, "interleaved": True,
                 "probes": pk, "isa": native.isa(), "build": native.build_id()}
        if name.startswith("native"):
            extra["fraction_of_butterfly_probe"] = probe_time / t.median_s
            extra["fraction_of_shoup_stream"] = (limbs * n / pk["shoup_residues_per_s"]) / t.median_s
        results.append(BenchResult("native", name, {"n": n, "limbs": transforms, "threads": threads}, t.median_s,
                                   t.min_s, transforms / t.median_s, "NTT/s", extra))
    print_native(results, console)
    return results


def print_native(results: Sequence[BenchResult], console: Console | None = None) -> None:
    console = console or Console()
    rows = [r for r in results if r.suite == "native"]
    if not rows:
        return
    pk = rows[0].extra["probes"]
    tab = Table(title=f"native NTT, N={rows[0].params['n']}, {pk['threads']} threads ({rows[0].extra['isa']}); "
                      f"probes: {pk['butterflies_per_s'] / 1e9:.2f} G butterflies/s in L1, "
                      f"{pk['shoup_residues_per_s'] / 1e9:.2f} G Shoup products/s streaming")
    for col in ("kernel", "limbs", "median ms", "ms per 30 limbs", "x native ntt", "of butterfly probe"):
        tab.add_column(col)
    for r in rows:
        frac = r.extra.get("fraction_of_butterfly_probe")
        tab.add_row(r.name, str(r.params["limbs"]), f"{r.median_s * 1e3:.2f}",
                    f"{r.median_s / r.params['limbs'] * 30 * 1e3:.2f}", f"{r.extra['ratio_to_native_ntt']:.2f}",
                    "" if frac is None else f"{frac:.0%}")
    console.print(tab)


KEY_PRODUCT_SHAPE = (6, 62, 1 << 16)  # boot_16's top level: 6 digits over num_p + L = 62 rows of N = 2^16


def bench_key_product(*, shape: tuple[int, int, int] = KEY_PRODUCT_SHAPE, batches: Sequence[int] = (1, 8),
                      threads: int = 2, repeats: int = 7, console: Console | None = None, seed: int = 0
                      ) -> list[BenchResult]:
    """The key-switching inner product (``hemx_key_product``) with a compact key, whose uniform halves are generated
    in the kernel from a 32-byte stream key, against a full key read from memory (both halves stored); per batch of
    ciphertexts, both interleaved, plus the rows' generation alone (``hemx_uniform``).

    ``shape``: ``(digits, rows, N)``. Reports the median per call, the compact/full ratio per batch, and the key
    bytes each reads (a full key ``2 D m N`` words, a compact one half of that)."""
    console = console or Console()
    if not native.available() or not native.has_seeded_keys():
        raise BackendError(f"the key-product suite needs the native seeded-key kernels: {native.reason()}")
    d, m, n = shape
    rng = np.random.default_rng(seed)
    qs = ntt_primes(28, m, n)
    q = jnp.asarray(np.asarray(qs, np.uint32))
    stream = jnp.asarray(rng.integers(0, 1 << 32, size=8, dtype=np.uint64).astype(np.uint32))
    half = jax.device_put(np.stack([np.asarray(_residues(rng, (n,), qs)) for _ in range(d)])[:, None])
    xofs = ("aes128ctr", "chacha20") if native.has_aes_streams() else ("chacha20",)
    full_fn = jax.jit(lambda a, b: native.key_product(a, b, q))
    probe = jax.device_put(np.stack([np.asarray(_residues(rng, (n,), qs)) for _ in range(d)]))
    compact_fns, rows_fns, fulls = {}, {}, {}
    for xof in xofs:
        compact_fns[xof] = jax.jit(lambda a, b, x=xof: native.key_product(a, b, q, stream=stream, xof=x))
        rows_fns[xof] = jax.jit(lambda x=xof: native.uniform(stream, q, digits=d, n=n, xof=x))
        fulls[xof] = jnp.concatenate([half, native.uniform(stream, q, digits=d, n=n, xof=xof)[:, None]], axis=1)
        if not bool(jnp.array_equal(compact_fns[xof](probe, half), full_fn(probe, fulls[xof]))):
            raise BackendError(f"the compact ({xof}) and the full key's products differ: the native library is broken")
    full = fulls[xofs[0]]
    results = []
    native.set_max_threads(threads)
    try:
        for batch in batches:
            a = jax.device_put(np.stack([np.asarray(_residues(rng, (batch, n), qs)) for _ in range(d)], axis=-3))
            calls = {f"compact key ({x})": (lambda a=a, x=x: compact_fns[x](a, half)) for x in xofs}
            calls["full key"] = lambda a=a: full_fn(a, full)
            if batch == batches[0]:
                calls.update({f"seeded rows ({x})": rows_fns[x] for x in xofs})
            times = time_interleaved(calls, repeats=repeats)
            base = times["full key"].median_s
            for name, t in times.items():
                key_words = (2 if name == "full key" else 1) * d * m * n
                extra = {"ratio_to_full_key": t.median_s / base, "interleaved": True, "isa": native.isa(),
                         "key_bytes_read": 4 * key_words if not name.startswith("seeded rows") else 0,
                         "aes_engine": native.aes_engine() if native.has_aes_streams() else None}
                results.append(BenchResult("keyproduct", name, {"digits": d, "rows": m, "n": n, "batch": batch,
                                                                "threads": threads},
                                           t.median_s, t.min_s, batch / t.median_s, "ct/s", extra))
    finally:
        native.set_max_threads(0)
    print_key_product(results, console)
    return results


def print_key_product(results: Sequence[BenchResult], console: Console | None = None) -> None:
    console = console or Console()
    rows = [r for r in results if r.suite == "keyproduct"]
    if not rows:
        return
    p = rows[0].params
    engine = rows[0].extra.get("aes_engine")
    tab = Table(title=f"key product, {p['digits']} digits x {p['rows']} rows x N={p['n']}, {p['threads']} threads "
                      f"({rows[0].extra['isa']}{', AES on ' + engine if engine else ''})")
    for col in ("kernel", "batch", "median ms", "x full key", "key MiB read"):
        tab.add_column(col)
    for r in rows:
        tab.add_row(r.name, str(r.params["batch"]), f"{r.median_s * 1e3:.2f}", f"{r.extra['ratio_to_full_key']:.2f}",
                    f"{r.extra['key_bytes_read'] / 2**20:.2f}")
    console.print(tab)


__all__ = ["bench_native", "probes", "print_native", "bench_key_product", "print_key_product", "KEY_PRODUCT_SHAPE"]
