"""The planner's static defaults for accelerators (used where it cannot time) are matrix-engine NTTs.

Issue 16: on GPU and TPU, with planning off or before anything is timed, a context's NTT is a variant whose work
is int8 x int8 -> int32 matmuls (BAT), the instruction tensor cores and the MXU run. Checked from this CPU-only
machine by exporting the chosen variant for the accelerator platform and reading its StableHLO; the exact
result of that variant is pinned against the Python-integer reference here too (every method is exact).
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hemx
from hemx.kernels import ntt as ntt_kernels
from hemx.nt import ntt_primes
from hemx.plan import variants

N = 64
# a dot_general whose operands are int8 and whose result is int32 (StableHLO text)
INT8_DOT = re.compile(r"stablehlo\.dot_general[^\n]*\(tensor<[^>]*xi8>, tensor<[^>]*xi8>\) -> tensor<[^>]*xi32>")
ACCELERATORS = (("gpu", "cuda"), ("tpu", "tpu"))


@pytest.mark.parametrize(("backend", "platform"), ACCELERATORS)
def test_accelerator_default_is_a_matrix_engine_variant(backend, platform):
    method, reduction = variants.static_default(backend)
    assert method in variants.MATRIX_METHODS, f"{backend}: {method} is not a matrix-engine NTT"
    assert (method, reduction) == variants.STATIC_DEFAULTS[backend]
    assert reduction in ("shoup", "montgomery")
    moduli = tuple(ntt_primes(28, 2, N))
    ring = hemx.ring.RNSRing(N, moduli, method, reduction=reduction)
    x = jnp.zeros((len(moduli), N), jnp.uint32)
    exported = jax.export.export(jax.jit(lambda v: ntt_kernels.intt(ntt_kernels.ntt(v, ring.plan), ring.plan)),
                                 platforms=[platform])(x)
    assert INT8_DOT.search(exported.mlir_module()), f"{platform}: the default NTT should lower to int8 dots"


@pytest.mark.parametrize("backend", ("gpu", "tpu"))
def test_default_variant_is_exact(backend):
    """The accelerator default, run here on CPU, multiplies polynomials exactly (negacyclic product vs Python
    integers), so a GPU / TPU context computes the same residues as any other."""
    method, reduction = variants.static_default(backend)
    moduli = tuple(ntt_primes(28, 2, N))
    ring = hemx.ring.RNSRing(N, moduli, method, reduction=reduction)
    rng = np.random.default_rng(7)
    a = np.stack([rng.integers(0, q, N, dtype=np.uint64) for q in moduli]).astype(np.uint32)
    b = np.stack([rng.integers(0, q, N, dtype=np.uint64) for q in moduli]).astype(np.uint32)
    a[0, 0], b[0, -1] = moduli[0] - 1, moduli[0] - 1  # edge values
    fa, fb = ntt_kernels.ntt(jnp.asarray(a), ring.plan), ntt_kernels.ntt(jnp.asarray(b), ring.plan)
    q = jnp.asarray(np.array(moduli, np.uint64)[:, None])
    prod = (fa.astype(jnp.uint64) * fb.astype(jnp.uint64) % q).astype(jnp.uint32)
    got = np.asarray(ntt_kernels.intt(prod, ring.plan))
    for i, qi in enumerate(moduli):
        want = [0] * N
        ai, bi = [int(v) for v in a[i]], [int(v) for v in b[i]]
        for j in range(N):
            for k in range(N):
                s = ai[j] * bi[k]
                if j + k < N:
                    want[j + k] += s
                else:
                    want[j + k - N] -= s
        assert [int(v) for v in got[i]] == [w % qi for w in want]
