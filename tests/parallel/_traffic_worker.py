"""Subprocess of tests/parallel/test_traffic.py: 4 simulated CPU devices, one relinearized multiplication under
limb sharding (mesh 1x4), its compiled HLO parsed by ``hemx.parallel.traffic``; prints one JSON summary line.

``XLA_FLAGS=--xla_force_host_platform_device_count=4 python -m tests.parallel._traffic_worker``
"""

from __future__ import annotations

import json
import sys
import time


def main() -> dict:
    import jax
    import numpy as np

    import hemx
    from hemx import parallel
    from hemx.bench.scaling import small_params
    from hemx.ckks import Sampler

    assert jax.device_count() == 4, jax.devices()
    params = small_params()
    ctx = hemx.Context(params, mesh=parallel.make_mesh(1, 4), ntt="mat3", reduction="shoup", planning="off",
                       keyswitch="mp", sampler=Sampler.insecure_for_tests(1))
    keys = ctx.keygen()
    x = np.linspace(-1, 1, ctx.slots)
    a = ctx.encrypt(x, keys)
    compiled = jax.jit(lambda u, v: ctx.mul(u, v, keys, rescale=False)).lower(a, a).compile()
    text = compiled.as_text()
    prod = compiled(a, a)
    out = prod.data
    got = ctx.decrypt(prod, keys)
    return {"devices": jax.device_count(), "hlo": text, "summary": parallel.summarize(compiled).as_dict(),
            "from_text": parallel.summarize(text).as_dict(),
            "collectives": [c.__dict__ for c in parallel.collectives(text)],
            "max_error": float(np.max(np.abs(got - x * x))), "output_spec": str(out.sharding.spec)}


if __name__ == "__main__":
    start = time.perf_counter()
    result = main()
    result["total_s"] = time.perf_counter() - start
    sys.stdout.write("HEMX_SUMMARY " + json.dumps(result) + "\n")
