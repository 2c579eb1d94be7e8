#!/usr/bin/env python3
# usage: .venv/bin/python scripts/ab-bootstrap-tables.py [out.json]  (docs/results/bootstrap-cpu.md, 2026-12-02)
"""boot_16, same process, alternated: the boot_16 bootstrapper's diagonals encoded (a) in full then compacted (compact_rows,
the former path, still a sharded context's) and (b) in the subring (Encoder.encode_compact). Bit-exact check."""
import json, statistics, sys, time, warnings
import numpy as np, jax
warnings.simplefilter("ignore")
from hemx.ckks import CKKSParameters, Context
from hemx.ckks import encoder as E
from hemx.circuits.bootstrap import bootstrapper_for
from hemx.circuits.lintrans import compact_rows
p = CKKSParameters.preset("boot_16", allow_insecure=True)
ctx = Context(p)
t = time.perf_counter(); bt = bootstrapper_for(ctx); first = time.perf_counter() - t
# the diagonals again, as LinearTransform forms them, from the factors the Bootstrapper builds
from hemx.circuits.bootstrap import dft
import math
fold = bt.raised_scale / (bt.q0 * (bt.k + 1)) / 2.0 / (p.n // (2 * bt.slots))
cts = dft.grouped_factors(bt.slots, bt.plan.cts_levels, inverse=True); cts[0] = dft.scaled(cts[0], fold)
stc = dft.grouped_factors(bt.slots, bt.plan.stc_levels, inverse=False)
stc[-1] = dft.scaled(stc[-1], bt.q0 / (2.0 * math.pi * bt.design_scale * 2.0 ** bt.premultiply))
from hemx.circuits.lintrans import diagonals
sets = []
for lt, f in zip(bt.cts + bt.stc, cts + stc):
    if isinstance(f, dict):
        idx = np.array(sorted(f)); rows = np.stack([np.asarray(f[k]) for k in idx])
    else:
        rows = diagonals(np.asarray(f)); idx = np.arange(bt.slots)
    keep = [i for i, k in enumerate(idx) if int(k) in set(lt.indices)]
    rows, idx = rows[keep], idx[keep]
    shifted = np.stack([np.roll(r, int(k) - int(k) % lt.n1) for k, r in zip(idx, rows)])
    sets.append((lt, shifted))
def full_way():
    out = []
    for lt, x in sets:
        pt = ctx.encode(x, level=lt.level, scale=lt.plain_scale)
        h = np.asarray(pt.data)
        out.append([compact_rows([h[i]]) for i in range(len(x))])
    return out
def subring_way():
    return [ctx.encoder.encode_compact(x, level=lt.level, scale=lt.plain_scale, special=False)
            for lt, x in sets]
a = full_way(); b = subring_way()
exact = True
for aa, (blocks, pts, _) in zip(a, b):
    for i, (blk, (small,)) in enumerate(aa):
        bl = int(blocks[i]); w = np.asarray(pts[i].data)
        ref = np.repeat(np.asarray(small), blk, axis=-1)
        exact &= np.array_equal(np.repeat(w, bl, axis=-1), ref)
ta, tb = [], []
for _ in range(3):
    t = time.perf_counter(); full_way(); ta.append(time.perf_counter() - t)
    t = time.perf_counter(); subring_way(); tb.append(time.perf_counter() - t)
res = dict(bootstrapper_first_s=first, diagonals=sum(len(x) for _, x in sets),
           blocks={int(k): int(v) for k, v in zip(*np.unique(np.concatenate([bb[0] for bb in b]), return_counts=True))},
           full_then_compact_s=statistics.median(ta), subring_s=statistics.median(tb),
           speedup=statistics.median(ta) / statistics.median(tb), bit_exact=bool(exact))
print(json.dumps(res, indent=1))
if len(sys.argv) > 1: json.dump(res, open(sys.argv[1], "w"), indent=1)
