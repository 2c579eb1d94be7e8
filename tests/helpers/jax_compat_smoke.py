"""A smoke of hemx's CKKS operations and one ``boot_12`` bootstrap, for another JAX than the pinned one.

Run by ``tests/test_jax_compat.py`` in a second virtual environment (JAX 0.11.x, no pytest there) as
``python -m tests.helpers.jax_compat_smoke [--no-bootstrap]`` with ``PYTHONPATH`` at the checkout. It prints one JSON
line (versions, precision in bits per step, seconds per step) and exits non-zero when a step is wrong or less
precise than its bound, so the calling test reads the reason from the output.
"""

from __future__ import annotations

import json
import sys
import time
import warnings

import numpy as np

# worst-slot precision bounds in bits, about 3 below what was measured on the development CPU: the operations at
# a 2^10 ring (41.8-42.6 bits under JAX 0.11.2) and the boot_12 bootstrap (tests/circuits/test_bootstrap.py: 24.0)
OP_BOUND_BITS = 38.0
BOOT_BOUND_BITS = 21.0


def _bits(want, got) -> float:
    err = np.abs(np.asarray(got) - np.asarray(want)).ravel()
    return float(-np.log2(max(float(err.max()), 2.0 ** -60)))


def main(argv: list[str]) -> int:
    import jax

    import hemx
    from hemx.ckks import InsecureParametersWarning, Sampler

    out: dict = {"jax": jax.__version__, "python": sys.version.split()[0], "backend": jax.default_backend(),
                 "bits": {}, "seconds": {}, "failures": []}

    def check(name: str, want, got, bound: float) -> None:
        bits = _bits(want, got)
        out["bits"][name] = round(bits, 2)
        if not bits >= bound:
            out["failures"].append(f"{name}: {bits:.1f} bits < {bound}")

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = hemx.CKKSParameters.create(10, levels=3, dnum=2, base_bits=(31, 31), primes_per_level=2,
                                            prime_bits=28, special_bits=31, allow_insecure=True)
    ctx = hemx.Context(params, ntt="butterfly", sampler=Sampler.insecure_for_tests(1))
    keys = ctx.keygen(rotations=[1, 3])
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, ctx.slots)
    y = rng.uniform(-1, 1, ctx.slots)
    a, b = ctx.encrypt(x, keys.public), ctx.encrypt(y, keys.public)
    check("encrypt_decrypt", x, ctx.decrypt(a, keys.secret), OP_BOUND_BITS)
    check("add", x + y, ctx.decrypt(ctx.add(a, b), keys.secret), OP_BOUND_BITS)
    prod = ctx.rescale(ctx.mul(a, b, keys, rescale=False))
    check("mul_rescale", x * y, ctx.decrypt(prod, keys.secret), OP_BOUND_BITS)
    check("rotate", np.roll(x, -3), ctx.decrypt(ctx.rotate(a, 3, keys), keys.secret), OP_BOUND_BITS)
    batch = rng.uniform(-1, 1, (2, ctx.slots))
    cb = ctx.encrypt(batch, keys.public)
    check("batched_mul_rescale", batch * batch, ctx.decrypt(ctx.mul(cb, cb, keys, rescale=True), keys.secret),
          OP_BOUND_BITS)
    out["seconds"]["ops"] = round(time.perf_counter() - start, 2)

    # hemx.jit reads JAX internals (executable serialization, the compiled object's dispatch): compile, load
    # into a new Program as a new process would, and serve a second key set without a trace
    start = time.perf_counter()
    import os
    import tempfile

    os.environ["HEMX_CACHE_DIR"] = tempfile.mkdtemp(prefix="hemx-compat-programs-")
    program = hemx.jit(lambda c, k: ctx.rotate(ctx.mul(c, c, k), 1, k))
    how = [program.prepare(a, keys)]
    again = hemx.jit(program.fn)
    how.append(again.prepare(a, keys))
    other = ctx.keygen(rotations=[1, 3])  # the same kinds of keys as the first set
    got = again(ctx.encrypt(x, other.public), other)
    check("program_second_key_set", np.roll(x * x, -1), ctx.decrypt(got, other.secret), OP_BOUND_BITS)
    if how != ["compiled", "loaded"] or again.stats.compiled or not program.persistent:
        out["failures"].append(f"hemx.jit: {how}, compiled {again.stats.compiled}, reason {program.reason}")
    out["seconds"]["program"] = round(time.perf_counter() - start, 2)

    if "--no-bootstrap" not in argv:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureParametersWarning)
            bparams = hemx.CKKSParameters.preset("boot_12", allow_insecure=True)
        bctx = hemx.Context(bparams, sampler=Sampler.insecure_for_tests(2))
        boot = hemx.circuits.bootstrap.bootstrapper_for(bctx)
        bkeys = bctx.keygen(bootstrap=boot)
        z = rng.uniform(-1, 1, bctx.slots)
        ct = bctx.drop_level(bctx.encrypt(z, bkeys), 0)
        fresh = boot.bootstrap(ct, bkeys.evaluation_keys())
        check("boot_12", z, bctx.decrypt(fresh, bkeys), BOOT_BOUND_BITS)
        out["boot_level_after"] = int(fresh.level)
        out["seconds"]["boot_12"] = round(time.perf_counter() - start, 2)

    print(json.dumps(out))
    return 1 if out["failures"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
