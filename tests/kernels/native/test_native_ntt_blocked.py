"""hemx.kernels.native: the cache-blocked NTT path (N above the kernel's 4096-residue block) and the forward
ranges by modulus size, bit-exact against the JAX butterfly kernel on every instruction set.

N = 2^12 is one block (unblocked); 2^13 has two blocks (the inverse's last block stage joins its final pass);
2^14 and 2^15 have 4 and 8 (the wide stages as one radix-4 sweep, then radix-4 + a lone radix-2 stage). The
moduli cover every forward range: below 2^29 ([0, 8q), 20- / 28- / 29-bit), [2^29, 2^30) ([0, 4q)) and
[2^30, 2^31) ([0, 2q)), with random and all-(q - 1) inputs.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import hemx
from hemx.kernels import native
from hemx.kernels import ntt as K
from tests.helpers.native import supported_isas

isas = supported_isas  # the native_on fixture is in conftest.py

_jax_ntt, _jax_intt = jax.jit(K.ntt), jax.jit(K.intt)


@pytest.mark.parametrize("log_n", [12, 13, 14, 15])
@pytest.mark.parametrize("bits", [20, 28, 29, 30, 31])
def test_blocked_sizes_match_jax_on_every_isa(log_n, bits):
    n = 1 << log_n
    qs = hemx.nt.ntt_primes(bits, 2, n)  # the largest primes of that size: the top of each range
    rng = np.random.default_rng(log_n * 100 + bits)
    x = np.stack([rng.integers(0, q, size=(2, n)) for q in qs], axis=-2).astype(np.uint32)  # (2, L, N)
    x[1] = np.asarray(qs, dtype=np.uint32)[:, None] - 1  # all q - 1: the largest sums in every butterfly
    pj = jax.device_put(K.make_plan(n, qs, "butterfly"))
    pn = jax.device_put(K.make_plan(n, qs, "native"))
    want_f, want_i = np.asarray(_jax_ntt(x, pj)), np.asarray(_jax_intt(x, pj))
    for name in isas():
        native.set_isa(name)
        got_f = np.asarray(K.ntt(x, pn))
        assert np.array_equal(got_f, want_f), (name, n, bits)
        assert np.array_equal(np.asarray(K.intt(x, pn)), want_i), (name, n, bits)
        assert np.array_equal(np.asarray(K.intt(got_f, pn)), x), (name, n, bits)
    native.set_isa("auto")
