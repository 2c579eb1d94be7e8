"""Native forward NTT of (30 limbs, N = 2^16) under each native instruction set, interleaved in ONE process
(hemx.kernels.native.set_isa between calls), desilofhe's Engine.ntt of a ciphertext in the same rounds.

Usage: .venv/bin/python docs/results/raw/native-isa-20261126/native-isa-ntt.py OUT.json [repeats]
"""
import datetime as dt
import json
import statistics
import sys
import time

import jax
import numpy as np

from hemx.bench.peers import available_adapters
from hemx.bench.timing import limit_threads, machine_info
from hemx.kernels import native
from hemx.kernels import ntt as ntt_kernels
from hemx.nt import ntt_primes

N, LIMBS, THREADS = 1 << 16, 30, 2
out = sys.argv[1]
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 15
threads_desc = limit_threads(THREADS)
native.set_max_threads(THREADS)
isas = [i for i in ("scalar", "avx2", "avx512") if i in native.runnable_isas()]
rng = np.random.default_rng(0)
qs = ntt_primes(28, LIMBS, N)
x = jax.device_put(np.stack([rng.integers(0, q, size=N) for q in qs]).astype(np.uint32))
plan = jax.device_put(ntt_kernels.make_plan(N, qs, "native"))
fwd = jax.jit(ntt_kernels.ntt)
calls = {}
for i in isas:
    calls[f"native ntt {i}"] = (i, lambda: fwd(x, plan))
peer_note = {}
for ad in available_adapters(["desilofhe"], THREADS):
    k = ad.ntt_setup(N, LIMBS // 2 - 1)
    if k is not None:
        calls["desilofhe Engine.ntt"] = (None, k.run)
        peer_note = {"transforms": k.transforms, "note": k.note}
# exactness: every ISA gives the same output
ref = None
for i in isas:
    native.set_isa(i)
    y = np.asarray(jax.block_until_ready(fwd(x, plan)))
    ref = y if ref is None else ref
    assert np.array_equal(y, ref), f"{i} differs"
samples = {name: [] for name in calls}
for _ in range(2):  # warm-up rounds
    for name, (i, fn) in calls.items():
        if i:
            native.set_isa(i)
        jax.block_until_ready(fn())
for _ in range(repeats):
    for name, (i, fn) in calls.items():
        if i:
            native.set_isa(i)
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        samples[name].append(time.perf_counter() - t0)
native.set_isa("auto")
res = {}
for name, s in samples.items():
    res[name] = {"median_s": statistics.median(s), "min_s": min(s), "max_s": max(s), "repeats": len(s),
                 "samples_s": s}
if "desilofhe Engine.ntt" in res:
    d = res["desilofhe Engine.ntt"]
    d["per_30_limbs_median_s"] = d["median_s"] / peer_note["transforms"] * LIMBS
    d.update(peer_note)
for name in res:
    if name.startswith("native"):
        res[name]["ratio_to_avx512"] = res[name]["median_s"] / res["native ntt avx512"]["median_s"]
        if "desilofhe Engine.ntt" in res:
            res[name]["desilofhe_per_30_limbs_over_this"] = res["desilofhe Engine.ntt"]["per_30_limbs_median_s"] / res[name]["median_s"]
doc = {"created_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ"), "machine": machine_info(),
       "native": native.describe(), "threads": threads_desc, "n": N, "limbs": LIMBS, "isas": isas,
       "exact_across_isas": True, "results": res}
json.dump(doc, open(out, "w"), indent=1, default=str)
for name, r in res.items():
    print(f"{name:24s} median {r['median_s']*1e3:8.2f} ms  min {r['min_s']*1e3:8.2f} ms", 
          {k: round(v, 3) for k, v in r.items() if k.startswith(("ratio", "desilofhe_", "per_30"))})
