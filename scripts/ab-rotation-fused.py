#!/usr/bin/env python3
# usage: .venv/bin/python scripts/ab-rotation-fused.py SET [ISA [REPEATS]]   (docs/results/native-isa-cpu.md,
# 2026-12-06): one rotation by 1 at the set's top level, alternated call by call in one process: Context.rotate (the
# fused Max-Parallel form: ModUp of c1 through the Galois map, key product, ModDown adding the permuted c0) against
# the steps apart (the automorphism of the ciphertext, the Max-Parallel key switch of c1, c0 added and stacked).
# Both run the same native library; the results are checked equal bit for bit before timing. Prints the medians,
# the minima and the median of the per-pair ratios (apart / fused: above 1, the fused form is faster).
import functools
import statistics
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from hemx.bench.ops import params_for
from hemx.ckks import Context
from hemx.ckks import evaluator as ev
from hemx.ckks import keyswitch as ks
from hemx.kernels import automorphism, modarith, native

warnings.simplefilter("ignore")
jax.config.update("jax_cpu_enable_async_dispatch", False)  # as `hemx bench ops` times (sync dispatch)
set_name = sys.argv[1] if len(sys.argv) > 1 else "D"
if len(sys.argv) > 2:
    native.select_isa(sys.argv[2])
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 61
ctx = Context(params_for(set_name))
keys = ctx.keygen(rotations=[1])
ct = ctx.encrypt(np.random.default_rng(1).uniform(-1, 1, ctx.slots), keys)
g = automorphism.galois_element(ctx.params.n, 1)
key, tables, index_map = keys.galois[g], ctx.tables.level(ct.level), ctx.tables.index_map(g)


@functools.partial(jax.jit, static_argnames=("num_p", "reduction"))
def apart(data, imap, material, plan, tabs, *, num_p, reduction):
    data = automorphism.apply_ntt_automorphism(data, imap)
    sw = ks.keyswitch(data[..., 1, :, :], material, plan, tabs, num_p=num_p, reduction=reduction, dataflow="mp")
    q = ev._q_table(plan, num_p, tabs.num_q).q
    return jnp.stack([modarith.add_mod(data[..., 0, :, :], sw[..., 0, :, :], q), sw[..., 1, :, :]], axis=-3)


def run_apart():
    return jax.block_until_ready(apart(ct.data, index_map, key.material, ctx.plan, tables, num_p=ctx.num_p,
                                       reduction=ctx.reduction))


def run_fused():
    return jax.block_until_ready(ctx.rotate(ct, 1, keys).data)


assert np.array_equal(np.asarray(run_apart()), np.asarray(run_fused())), "the two forms differ"
for _ in range(3):
    run_apart(), run_fused()
t_apart, t_fused = [], []
for _ in range(repeats):
    for fn, out in ((run_apart, t_apart), (run_fused, t_fused)):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
pairs = statistics.median(a / f for a, f in zip(t_apart, t_fused))
print(f"{set_name} {native.isa()} ({ctx.key_storage} keys, {repeats} pairs): apart "
      f"{statistics.median(t_apart) * 1e3:.2f} ms (min {min(t_apart) * 1e3:.2f}), fused "
      f"{statistics.median(t_fused) * 1e3:.2f} ms (min {min(t_fused) * 1e3:.2f}); per-pair ratio median {pairs:.3f}")
