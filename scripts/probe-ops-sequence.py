#!/usr/bin/env python3
# usage: .venv/bin/python scripts/probe-ops-sequence.py SET ISA [--shift]   (docs/results/native-isa-cpu.md, 2026-12-06): the
# batch-1 sequence of `hemx bench ops` (HE-Add, HE-Mult, Rescale, HE-Mult+Rescale, timed as the bench times them),
# with the Rotate timed (9 repeats) before it and after each operation, and the process's page faults, system and
# user time per rotation: where the bench's later rotation loses time against a fresh process.
import sys, time, statistics
import numpy as np, jax
from hemx.bench.ops import params_for, _hemx_ops, set_cpu_dispatch, _one_pass
from hemx.bench.peers import ROTATE_MANY_STEPS
from hemx.bench.timing import time_interleaved
from hemx.ckks import Context
from hemx.kernels import native
set_cpu_dispatch("sync")
native.select_isa(sys.argv[2])
params = params_for(sys.argv[1])
ctx = Context(params)
keys = ctx.keygen(rotations=list(ROTATE_MANY_STEPS))
rng = np.random.default_rng(0)
x, y = rng.uniform(-1, 1, ctx.slots), rng.uniform(-1, 1, ctx.slots)
a, b = ctx.encrypt(x, keys), ctx.encrypt(y, keys)
prod = ctx.mul(a, b, keys, rescale=False)
ops = _hemx_ops(ctx, keys, a, b, prod)
rot = ops["rotate"]
import resource
def probe(tag):
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time_interleaved({"r": rot}, repeats=9)["r"]
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{tag:>28}: rotate median {t.median_s*1e3:.1f} ms (min {t.min_s*1e3:.1f}); per call "
          f"{(r1.ru_minflt - r0.ru_minflt) / 10:.0f} faults, sys {(r1.ru_stime - r0.ru_stime) / 10 * 1e3:.1f} ms, "
          f"user {(r1.ru_utime - r0.ru_utime) / 10 * 1e3:.1f} ms", flush=True)
probe("fresh")
for op in ("add", "mul", "rescale", "mul_rescale"):
    fns = {"hemx": ops[op]}
    if op == "add": fns["pass"] = lambda: _one_pass(a.data)
    time_interleaved(fns, repeats=9)
    probe(f"after {op}")
probe("again")
if "--shift" in sys.argv:  # the heap moved on purpose: growing blocks kept alive, the rotation timed after each
    kept = []
    for kib in (4, 68, 1028, 4100):
        kept.append(np.ones(kib * 256, np.uint32))
        probe(f"+{kib} KiB kept")
