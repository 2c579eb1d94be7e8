"""Subprocess of tests/parallel/test_shardmap_keyswitch.py: 8 simulated CPU devices, the ``jax.shard_map`` key
switch of a limb-sharded context (``hemx.ckks.sharded_keyswitch``) against an unsharded context; prints one
JSON summary line.

``XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m tests.parallel._shardmap_worker``

Ring: N = 2^6, 12 Q limbs (two 28-bit primes per level over a two-prime base, 5 levels), dnum 3 (digits of 4
limbs), so K = 4 special limbs and keys of M = 16 rows: every limb-axis size 2, 4, 8 divides M (the shard_map
path runs), while the ciphertexts have 12 and 10 limbs, so the input is split on some meshes and replicated on
others (12 on 8 devices, 10 on 4 or 8), and so is the output.

Per (mesh, dataflow) one ``jax.jit`` program holds: mul (relinearized, 12 limbs), mul with the folded rescale
(12 -> 10 limbs), conjugate at 10 limbs and standalone rescales of the two products (12 -> 10 and 10 -> 8 limbs:
split -> split on 1x2, split -> replicated on 1x4 and 2x4, replicated -> split on 1x4 and 1x8, replicated ->
replicated on 1x8; on one mesh also hoisted rotations, ``rotate_many``); every result is
compared bit for bit with the unsharded context (one reference: the three dataflows are bit-identical on one
device), and the program's collectives are recorded with ``hemx.dataflow.device_traffic``'s prediction for its
key switches. Few, small programs: the compiles are what costs time.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import numpy as np

SEED = 11
# (mesh, dataflow, hoisted rotations too): every dataflow on a limb-sharded mesh, limb axes 2, 4 and 8, the
# batch axis split once (2x4). 8x1 (no limb axis) runs the partitioner path: its rule is checked without a compile
# (tests/parallel/test_mesh.py compares its results).
RUNS = (("2x4", "dc", False), ("1x8", "oc", False), ("1x4", "mp", False), ("1x2", "mp", True))
BATCH = 2


def main() -> dict:
    import jax

    import hemx
    from hemx import parallel
    from hemx.ckks import InsecureParametersWarning, Sampler
    from hemx.dataflow import KeySwitchShape, device_traffic
    from hemx.dataflow.devices import rescale_towers

    warnings.simplefilter("ignore", InsecureParametersWarning)
    assert jax.device_count() == 8, jax.devices()
    params = hemx.CKKSParameters.create(6, levels=5, dnum=3, base_bits=(31, 31), allow_insecure=True,
                                        primes_per_level=2, prime_bits=28, special_bits=31)
    rng = np.random.default_rng(5)
    slots = params.n // 2
    x = rng.uniform(-1, 1, (BATCH, slots))
    y = rng.uniform(-1, 1, (BATCH, slots))
    out: dict = {"devices": jax.device_count(), "params": params.describe(), "num_p": len(params.special_moduli),
                 "limbs": params.num_limbs, "runs": {}}

    def build(mesh):
        kw = {} if mesh is None else {"mesh": mesh}
        ctx = hemx.Context(params, ntt="mat3", reduction="shoup", planning="off",
                           sampler=Sampler.insecure_for_tests(SEED), **kw)
        keys = ctx.keygen(rotations=[1, 2], conjugation=True)
        return ctx, keys, ctx.encrypt(x, keys), ctx.encrypt(y, keys)

    def program(ctx, keys, flow, hoisted):
        def f(a, b):
            # (a * a, not a * b: XLA would merge the two key switches' identical ModUp exchanges)
            r1 = ctx.mul(a, a, keys, rescale=True, keyswitch=flow)  # 12 -> 10 limbs, rescale folded
            m = ctx.mul(a, b, keys, keyswitch=flow, rescale=False)
            res = {"mul": m, "mul_rescale": r1, "conjugate_10": ctx.conjugate(r1, keys, keyswitch=flow),
                   "rescale": ctx.rescale(m), "rescale_10": ctx.rescale(r1)}  # standalone: 12 -> 10, 10 -> 8
            if hoisted:
                res.update(zip(("rotate_many_1", "rotate_many_2"), ctx.rotate_many(a, [1, 2], keys)))
            return res
        return f

    t0 = time.perf_counter()
    ref_ctx, ref_keys, ra, rb = build(None)
    ref = jax.jit(program(ref_ctx, ref_keys, "mp", True))(ra, rb)
    want = {k: np.asarray(v.data) for k, v in ref.items()}
    out["limbs_by_op"] = {k: int(v.shape[-2]) for k, v in want.items()}
    dec = ref_ctx.decrypt(ref["mul_rescale"], ref_keys)
    out["max_error"] = float(np.max(np.abs(dec - x * x)))
    out["reference_s"] = time.perf_counter() - t0
    print("reference", out["reference_s"], file=sys.stderr, flush=True)

    # the rule without a compile: no limb axis (8x1) -> the partitioner path
    ctx81 = hemx.Context(params, ntt="mat3", planning="off", mesh=parallel.make_mesh(8, 1))
    out["rule"] = {"8x1": ctx81.tables.shard_spec() is not None,
                   "8x1_tables": type(ctx81.tables.level(params.max_level)).__name__}
    num_p = len(params.special_moduli)
    shapes = {"top": KeySwitchShape.from_params(params, params.max_level),
              "10": KeySwitchShape.from_params(params, params.max_level - 1)}
    drop = params.level_sizes[params.max_level]
    for mesh_name, flow, hoisted in RUNS:
        t0 = time.perf_counter()
        rows, cols = map(int, mesh_name.split("x"))
        ctx, keys, a, b = build(parallel.make_mesh(rows, cols, jax.devices()[: rows * cols]))
        lowered = jax.jit(program(ctx, keys, flow, hoisted)).lower(a, b)
        compiled = lowered.compile()
        got = compiled(a, b)
        items = parallel.collectives(compiled.as_text())
        models = {  # the key switches of the program, one ciphertext each (hemx.dataflow.device_traffic)
            "mul": device_traffic(shapes["top"], flow, cols, key_aligned=True),
            "mul_rescale": device_traffic(shapes["top"], flow, cols, rescale=drop, folded=True, key_aligned=True),
            "conjugate_10": device_traffic(shapes["10"], flow, cols, key_aligned=True,
                                           key_rows=num_p + params.num_limbs),
        }
        bounds = {  # the owner-computes lower bounds of the same key switches
            "mul": device_traffic(shapes["top"], flow, cols),
            "mul_rescale": device_traffic(shapes["top"], flow, cols, rescale=drop, folded=True),
            "conjugate_10": device_traffic(shapes["10"], flow, cols),
        }
        # the standalone rescales (12 -> 10 and 10 -> 8 limbs): towers per device, and the bytes of their programs
        rescales = {"rescale": rescale_towers(params.num_limbs, drop, cols),
                    "rescale_10": rescale_towers(params.num_limbs - drop, drop, cols)}
        models["rescale_towers"] = float(sum(sum(v.values()) for v in rescales.values()))
        if hoisted:  # one ModUp, then per rotation ModDown and the relayout
            steps = device_traffic(shapes["top"], "MP", cols, key_aligned=True).steps
            models["rotate_many_towers"] = steps["modup"] + 2 * (steps["moddown"] + steps["relayout"])
        # ciphertexts each limb group holds, summed over the groups (batch split: B in all; else B per group)
        copies = BATCH * (1 if BATCH % rows == 0 else rows)
        out["runs"][f"{mesh_name}/{flow}"] = {
            "identical": {k: bool(np.array_equal(np.asarray(v.data), want[k])) for k, v in got.items()},
            "shard_map": ctx.tables.shard_spec() is not None,
            "limbs_axis": cols,
            "custom_calls": lowered.as_text().count("custom_call @hemx_"),
            "collectives": [{"kind": c.kind, "total_bytes": c.total_bytes, "op_name": c.op_name} for c in items],
            "models": {k: (v if isinstance(v, float) else v.as_dict()) for k, v in models.items()},
            "bounds": {k: v.as_dict() for k, v in bounds.items()},
            "rescales": rescales,
            "rescale_bytes": sum(c.total_bytes for c in items if "jit(rescale)/" in c.op_name),
            "copies": copies, "tower_bytes": params.n * 4,
            "seconds": time.perf_counter() - t0,
        }
        print(mesh_name, flow, out["runs"][f"{mesh_name}/{flow}"]["seconds"], file=sys.stderr, flush=True)
    return out


if __name__ == "__main__":
    start = time.perf_counter()
    result = main()
    result["total_s"] = time.perf_counter() - start
    result["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    sys.stdout.write("HEMX_SUMMARY " + json.dumps(result) + "\n")
