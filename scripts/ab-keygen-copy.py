#!/usr/bin/env python3
# usage: .venv/bin/python scripts/ab-keygen-copy.py  (docs/results/bootstrap-cpu.md, 2026-12-02): boot_16 switching keys,
# alternated in one process: the key data formed in its program against the former eager b[:, None] copy
import time, warnings, resource, statistics, functools, math, numpy as np, jax, jax.numpy as jnp
warnings.simplefilter("ignore")
from hemx.ckks import CKKSParameters, Context
from hemx.ckks import keygen as kg
from hemx.ckks.sampling import uniform_rows, stream_key
from hemx.ckks.keys import DEFAULT_XOF
from hemx.kernels import automorphism
p = CKKSParameters.preset("boot_16", allow_insecure=True)
ctx = Context(p)
keys = ctx.keygen(relin=False)
s_ntt = keys.secret.ntt
old_halves = jax.jit(kg._key_halves, static_argnames=("rows",))
m, D = 62, 6
gadget = np.zeros((D, m, 1), dtype=np.uint32); big_p = math.prod(p.special_moduli)
for d, (lo, hi) in enumerate(p.digits()[:D]):
    for i in range(lo, min(hi, m - 9)): gadget[d, 9 + i, 0] = big_p % p.moduli[i]
gadget = jnp.asarray(gadget)
def one(new, g):
    s_g = automorphism.apply_ntt_automorphism(s_ntt, ctx.tables.index_map(g))
    stream = stream_key(ctx.sampler.seed())
    a = uniform_rows(stream, ctx.basis[:m], digits=D, n=p.n, xof=DEFAULT_XOF)
    err = jnp.asarray(ctx.sampler.gaussian((D, p.n), p.sigma).astype(np.int32))
    if new:
        return kg._key_data(err, a, s_ntt, s_g, gadget, ctx.plan, rows=m, with_uniform=False)
    b = old_halves(err, a, s_ntt[:m], s_g[:m], gadget, ctx.plan, rows=m)
    return b[:, None]
kept = []; t = {True: [], False: []}; f = {True: [], False: []}
for i in range(24):
    new = i % 2 == 0
    r0 = resource.getrusage(resource.RUSAGE_SELF); s = time.perf_counter()
    k = jax.block_until_ready(one(new, pow(5, i + 1, 2 * p.n))); kept.append(k)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    if i >= 2:
        t[new].append(time.perf_counter() - s); f[new].append(r1.ru_minflt - r0.ru_minflt)
for new in (False, True):
    print("in-program copy" if new else "eager b[:, None]", f"median {statistics.median(t[new]):.3f} s per key, {statistics.median(f[new])} faults")
