"""Subprocess of tests/ckks/test_keys_as_arguments.py: a jitted circuit with the keys as arguments, one process.

``HEMX_CACHE_DIR=<tmp> HEMX_COMPILATION_CACHE=1 python -m tests.ckks._keys_worker CASE SEED [SEED2]``

Builds a context (``planning="off"``: the same kernels in every process), generates keys from ``SEED`` (a new
key set per process), and calls ``jax.jit(circuit)(ct, keys)`` a few times; with ``SEED2`` it then calls the
same jitted function with a second key set of the same context. Prints one ``HEMX_SUMMARY`` JSON line: times of
the first and steady calls, how many XLA compilations the jitted program needed (persistent-cache misses while
it ran) and how many it loaded from the cache, the traces, and the decryption errors.

CASE: ``mul_rotate`` (HE-Mult + rescale + Rotate by 1 on the CROSS set C, N = 2^14) or ``boot_12`` (bootstrap).
"""

from __future__ import annotations

import json
import sys
import time
import warnings


def main(case: str, seeds: list[int]) -> dict:
    import jax
    import numpy as np

    import hemx
    from hemx.ckks import InsecureParametersWarning, Sampler

    warnings.simplefilter("ignore", InsecureParametersWarning)
    events = {"misses": 0, "hits": 0}

    def listen(event, **_):
        if event == "/jax/compilation_cache/cache_misses":
            events["misses"] += 1
        elif event == "/jax/compilation_cache/cache_hits":
            events["hits"] += 1

    jax.monitoring.register_event_listener(listen)
    summary: dict = {"case": case, "cache": hemx.compilation_cache.status().as_dict(), "key_sets": []}
    traces = [0]
    if case == "mul_rotate":
        params = hemx.CKKSParameters.preset("set_c", allow_insecure=True)
    else:
        params = hemx.CKKSParameters.preset("boot_12", allow_insecure=True)
    ctx = hemx.Context(params, planning="off", sampler=Sampler.insecure_for_tests(seeds[0]))
    summary["params"] = params.describe()

    def circuit(a, keys):
        traces[0] += 1
        if case == "mul_rotate":
            return ctx.rotate(ctx.mul(a, a, keys, rescale=True), 1, keys)
        return ctx.bootstrap(a, keys)

    jitted = jax.jit(circuit)
    rng = np.random.default_rng(seeds[0])
    for index, seed in enumerate(seeds):
        if index:
            ctx.sampler = Sampler.insecure_for_tests(seed)
        keys = ctx.keygen(rotations=[1]) if case == "mul_rotate" else ctx.keygen(bootstrap=True)
        x = rng.uniform(-1, 1, ctx.slots)
        ct = ctx.encrypt(x, keys)
        if case != "mul_rotate":
            ct = ctx.drop_level(ct, 0)
        want = np.roll(x * x, -1) if case == "mul_rotate" else x
        before = dict(events)
        times = []
        for _ in range(3 if case == "mul_rotate" else 2):
            start = time.perf_counter()
            out = jitted(ct, keys)
            jax.block_until_ready(out.data)
            times.append(time.perf_counter() - start)
        summary["key_sets"].append({
            "seed": seed, "first_s": times[0], "steady_s": min(times[1:]),
            "compiles": events["misses"] - before["misses"], "cache_loads": events["hits"] - before["hits"],
            "traces_so_far": traces[0], "max_error": float(np.max(np.abs(ctx.decrypt(out, keys) - want))),
            "key_id": keys.key_id, "out_key_id": out.key_id,
        })
    return summary


if __name__ == "__main__":
    result = main(sys.argv[1], [int(s) for s in sys.argv[2:]])
    sys.stdout.write("HEMX_SUMMARY " + json.dumps(result) + "\n")
