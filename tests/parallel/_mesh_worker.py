"""Subprocess of tests/parallel/test_mesh.py: run with 8 simulated CPU devices, print one JSON summary line.

``XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m tests.parallel._mesh_worker``

For each mesh (8x1, 2x4, 1x8), made by ``hemx.parallel.make_mesh`` (auto axes) and by ``jax.make_mesh``
(explicit axes, JAX's default; key ``"8x1/jax"`` etc.), a sharded context and an unsharded one with the same
parameters, NTT method and ``Sampler.insecure_for_tests(seed)`` generate keys and encrypt the same batch (public
and secret key); every evaluation method of ``Context`` (add, sub, negate, mul, plain and scalar products, rescale,
drop_level, rotate, rotate_many, conjugate, switch_key, sum_slots), a linear transform and a polynomial run on
both, plus encode / decode / decrypt, and the summary records, per mesh and operation, whether the results are
bit-identical and how the sharded output is placed. A persistent compilation cache in a temporary directory lets
the ``jax.make_mesh`` pass reuse the programs of the equal auto-axes mesh (hemx converts it). A ``jit`` entry runs a few operations inside one
``jax.jit`` trace on the 2x4 mesh (the ``with_sharding_constraint`` path).
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import numpy as np

SEED = 7
LOG_N = 6
LEVELS = 3
# dnum 1: one digit, 8 special limbs, so keys have 16 limbs (split on 4 and 8 devices) and the key-switching
# programs are small (measured: the whole worker 90 s cold instead of 129 s with dnum 2)
DNUM = int(os.environ.get("HEMX_MESH_DNUM", "1"))
BATCH = 8
MESHES = ((8, 1), (2, 4), (1, 8))
DIAGONALS = (0, 1)  # a sparse linear transform: one rotation key (step 1, shared with rotate)
POLY = (0.1, 0.5, -0.25, 0.125)  # degree 3, depth 2
MAKERS = ("hemx", "jax")  # hemx.parallel.make_mesh (auto axes), jax.make_mesh (explicit axes)


def placement(arr) -> dict:
    """How an array is laid out: its spec, the devices holding it, and how many distinct pieces there are."""
    import jax

    sharding = arr.sharding
    spec = getattr(sharding, "spec", None)
    pieces = {tuple((s.start, s.stop) for s in shard.index) for shard in arr.addressable_shards}
    return {
        "spec": None if spec is None else [None if a is None else str(a) for a in spec],
        "devices": len(sharding.device_set),
        "distinct_pieces": len(pieces),
        "shape": list(arr.shape),
        "fully_replicated": bool(sharding.is_fully_replicated),
        "total_devices": jax.device_count(),
    }


def main() -> dict:
    import jax

    import hemx
    from hemx import parallel
    from hemx.ckks import InsecureParametersWarning, Sampler
    from hemx.circuits import LinearTransform, evaluate_polynomial

    warnings.simplefilter("ignore", InsecureParametersWarning)
    assert jax.device_count() == 8, jax.devices()
    import tempfile

    jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="hemx-mesh-worker-"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    params = hemx.CKKSParameters.create(LOG_N, levels=LEVELS, dnum=DNUM, base_bits=(31, 31), allow_insecure=True,
                                        primes_per_level=2, prime_bits=28, special_bits=31)
    rng = np.random.default_rng(3)
    slots = params.n // 2
    x = rng.uniform(-1, 1, (BATCH, slots))
    y = rng.uniform(-1, 1, (BATCH, slots))
    diags = {k: rng.uniform(-0.5, 0.5, slots) for k in DIAGONALS}
    summary: dict = {"devices": jax.device_count(), "params": params.describe(), "meshes": {}}

    def build(mesh):
        ctx = hemx.Context(params, ntt="mat3", reduction="shoup", planning="off", mesh=mesh,
                           sampler=Sampler.insecure_for_tests(SEED))
        lt = LinearTransform(ctx, diags)
        keys = ctx.keygen(rotations=sorted(set(lt.rotations) | {1, 2, 4, 8, 16}), conjugation=True)
        a, b = ctx.encrypt(x, keys), ctx.encrypt(y, keys)
        return ctx, lt, keys, a, b

    custom_calls = [0]  # hemx native custom calls in the last lowering (a sharded context must have none)

    def run_ops(ctx, lt, keys, a, b) -> dict:
        """Every operation in one jax.jit trace (one compile per mesh; with_sharding_constraint inside)."""

        def f(a, b):
            return {
                "add": ctx.add(a, b),
                "mul_rescale": ctx.mul(a, b, keys, rescale=True),
                "rotate": ctx.rotate(a, 1, keys),
                "linear_transform": lt.apply(a, keys),
                "polynomial": evaluate_polynomial(ctx, a, POLY, keys),
                "sub": ctx.sub(a, b),
                "negate": ctx.negate(a),
                "mul": ctx.mul(a, b, keys, rescale=False),
                "mul_plain": ctx.mul(a, y[0], rescale=True),
                "mul_scalar": ctx.mul(a, 0.5, rescale=False),
                "rescale": ctx.rescale(ctx.mul(a, 0.5, rescale=False)),
                "drop_level": ctx.drop_level(a, 1),
                "rotate_many": ctx.rotate_many(a, [0, 2], keys)[1],
                "conjugate": ctx.conjugate(a, keys),
                "switch_key": ctx.switch_key(a, keys.galois[min(keys.galois)]),
                "sum_slots": ctx.sum_slots(a, keys),
            }

        lowered = jax.jit(f).trace(a, b).lower()
        custom_calls[0] = lowered.as_text().count("custom_call @hemx_")
        return lowered.compile()(a, b)

    t0 = time.perf_counter()
    ref_ctx, ref_lt, ref_keys, ref_a, ref_b = build(None)
    summary["reference_build_s"] = time.perf_counter() - t0
    ref = run_ops(ref_ctx, ref_lt, ref_keys, ref_a, ref_b)
    want = {name: np.asarray(ct.data) for name, ct in ref.items()}
    want["encrypt"] = np.asarray(ref_a.data)
    ref_sk = ref_ctx.encrypt(x, ref_keys.secret)
    want["encrypt_secret"] = np.asarray(ref_sk.data)
    ref_pt = ref_ctx.encode(x)
    want_plain = {"encode": np.asarray(ref_pt.data), "decode": ref_ctx.decode(ref_pt),
                  "decrypt": ref_ctx.decrypt(ref_sk, ref_keys)}
    summary["reference_s"] = time.perf_counter() - t0
    summary["reference_native_custom_calls"] = custom_calls[0]
    dec = ref_ctx.decrypt(ref["mul_rescale"], ref_keys)
    summary["mul_rescale_max_error"] = float(np.max(np.abs(dec - x * y)))

    for (rows, cols), maker in [(m, k) for k in MAKERS for m in MESHES]:
        t0 = time.perf_counter()
        if maker == "hemx":
            mesh = parallel.make_mesh(rows, cols)
        else:  # JAX's documented way: explicit axis types by default
            mesh = jax.make_mesh((rows, cols), ("batch", "limbs"))
        ctx, lt, keys, a, b = build(mesh)
        entry: dict = {"build_s": time.perf_counter() - t0, "ops": {}, "maker": maker,
                       "axis_types": [str(t) for t in getattr(mesh, "axis_types", ())]}
        # eager (outside any trace): results placed with device_put
        sk = ctx.encrypt(x, keys.secret)
        eager = {"encrypt": a, "encrypt_secret": sk, "eager_add": ctx.add(a, b),
                 "eager_mul_rescale": ctx.mul(a, b, keys, rescale=True)}
        pt = ctx.encode(x)
        entry["plain"] = {"encode": bool(np.array_equal(np.asarray(pt.data), want_plain["encode"])),
                          "decode": bool(np.array_equal(ctx.decode(pt), want_plain["decode"])),
                          "decrypt": bool(np.array_equal(ctx.decrypt(sk, keys), want_plain["decrypt"]))}
        entry["eager_s"] = time.perf_counter() - t0 - entry["build_s"]
        got = dict(eager, **run_ops(ctx, lt, keys, a, b))
        entry["jit_s"] = time.perf_counter() - t0 - entry["build_s"] - entry["eager_s"]
        for name, ct in got.items():
            data = ct.data
            base = name.removeprefix("eager_")
            like = ref_a if base.startswith("encrypt") else ref[base]
            entry["ops"][name] = {
                "identical": bool(np.array_equal(np.asarray(data), want[base])),
                "level": ct.level,
                "same_meta": (ct.level, ct.scale) == (like.level, like.scale),
                **placement(data),
            }
        entry["native_custom_calls"] = custom_calls[0]
        entry["keys"] = {"relin": placement(keys.relin.data), "public": placement(keys.public.data),
                         "secret_ntt": placement(keys.secret.ntt)}
        entry["decrypt_equal"] = bool(np.array_equal(ctx.decrypt(got["mul_rescale"], keys), dec))
        if (rows, cols) == (2, 4):  # hemx.jit on a mesh: compiled, then loaded by a new Program, same bits
            fn = lambda c, d, k: ctx.mul(c, d, k, rescale=True)  # noqa: E731
            how = [hemx.jit(fn).prepare(a, b, keys)]
            program = hemx.jit(fn)
            how.append(program.prepare(a, b, keys))
            out = program(a, b, keys)
            entry["program"] = {"how": how, "identical": bool(np.array_equal(np.asarray(out.data),
                                                                              want["mul_rescale"]))}
        entry["seconds"] = time.perf_counter() - t0
        summary["meshes"][f"{rows}x{cols}" + ("" if maker == "hemx" else "/jax")] = entry
    return summary


if __name__ == "__main__":
    start = time.perf_counter()
    result = main()
    result["total_s"] = time.perf_counter() - start
    result["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    sys.stdout.write("HEMX_SUMMARY " + json.dumps(result) + "\n")
