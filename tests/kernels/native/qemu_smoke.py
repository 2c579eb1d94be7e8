"""Smoke of hemx through the native kernels, meant to run under ``qemu-x86_64 -cpu max`` (an AVX2 CPU without
AVX-512) by ``test_native_build.py``; also runs natively. Usage: ``python qemu_smoke.py EXPECTED_ISA``.

Checks, printing one line each and exiting non-zero on the first failure:
1. the library loads, picks ``EXPECTED_ISA`` and its self-test passes;
2. forward / inverse NTT and a negacyclic product on a small ring through the native kernels, bit-identical to the
   JAX butterfly with the same tables;
3. a CKKS multiply with relinearization and rescale at a small ring: the program lowered with the native kernels
   holds hemx custom calls, the one lowered inside ``native.disabled()`` holds none, and both give bit-identical
   ciphertexts, which decrypt to the product within 2^-14.
"""

from __future__ import annotations

import sys
import warnings

import jax
import numpy as np


def main(expected: str) -> int:
    import hemx  # noqa: PLC0415
    from hemx.kernels import native  # noqa: PLC0415
    from hemx.ring import RNSRing  # noqa: PLC0415

    assert native.available(), native.reason()
    print("isa:", native.isa(), "| selftest:", native.selftest(), flush=True)
    if native.isa() != expected:
        print(f"FAIL: expected instruction set {expected}, got {native.isa()}")
        return 1

    n, moduli = 1 << 10, hemx.nt.ntt_primes(30, 3, 1 << 10)
    rng = np.random.default_rng(7)
    x = np.stack([rng.integers(0, q, n) for q in moduli]).astype(np.uint32)
    y = np.stack([rng.integers(0, q, n) for q in moduli]).astype(np.uint32)
    rn, rb = RNSRing(n, moduli, ntt="native"), RNSRing(n, moduli, ntt="butterfly")
    for name, a, b in (("ntt", rn.ntt(x), rb.ntt(x)), ("intt", rn.intt(rn.ntt(x)), rb.intt(rb.ntt(x))),
                       ("poly_mul", rn.poly_mul(x, y), rb.poly_mul(x, y))):
        if not np.array_equal(np.asarray(a), np.asarray(b)):
            print(f"FAIL: native {name} differs from the JAX butterfly")
            return 1
    if not np.array_equal(np.asarray(rn.intt(rn.ntt(x))), x):
        print("FAIL: native NTT round trip")
        return 1
    print("ring: ntt / intt / poly_mul bit-identical to the JAX butterfly", flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the insecure small ring warns
        params = hemx.CKKSParameters.create(11, levels=2, dnum=2, allow_insecure=True)
    ctx = hemx.Context(params)
    keys = ctx.keygen()
    vals = rng.uniform(-1, 1, params.n // 2)
    ct = ctx.encrypt(vals, keys.public)

    def product(a):
        return ctx.mul(a, a, keys, rescale=True)

    native_fn = jax.jit(lambda a: product(a))
    text_native = native_fn.lower(ct).as_text()
    out_native = native_fn(ct)
    jax.clear_caches()  # inner jitted functions cache their traces per function, not per native.disabled() block
    with native.disabled():
        jax_fn = jax.jit(lambda a: product(a))  # a fresh function: traced inside the block
        text_jax = jax_fn.lower(ct).as_text()
        out_jax = jax_fn(ct)
    if "hemx_" not in text_native or "hemx_" in text_jax:
        print("FAIL: the native program should call hemx kernels and the disabled one none "
              f"({'hemx_' in text_native}, {'hemx_' in text_jax})")
        return 1
    la, lb = jax.tree_util.tree_leaves(out_native), jax.tree_util.tree_leaves(out_jax)
    if len(la) != len(lb) or not all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(la, lb)):
        print("FAIL: CKKS multiply through the native kernels differs from the JAX kernels")
        return 1
    err = float(np.max(np.abs(np.real(ctx.decrypt(out_native, keys.secret))[: vals.size] - vals * vals)))
    if not err < 2.0 ** -14:
        print(f"FAIL: CKKS multiply error {err:.3g}")
        return 1
    print(f"ckks: mul+relin+rescale bit-identical to the JAX kernels, error {err:.2e}", flush=True)
    print("SMOKE OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "avx2"))
