"""Shared fixtures-by-factory for the CKKS tests.

JAX compiles every evaluator kernel once per array shape and static configuration (ring degree, limb count,
number of special primes, digit layout, batch shape), and on this CPU a key-switching kernel takes seconds to
compile. The factories below are cached for the whole pytest process, so tests in different files that ask for
the same parameter set share one context, one key set and every compiled kernel.

Most tests use the "mat3" NTT (CROSS's layout-invariant 3-step NTT, one of the library's documented methods):
its kernels compile about five times faster than the default radix-2 "butterfly" on CPU and give bit-identical
results (the NTT is exact). The default method is exercised by ``test_ckks_ops.py::test_default_context`` and
by the slow N = 2^16 tests.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

import hemx
from hemx.ckks import InsecureParametersWarning, Sampler, precision_stats

FAST_NTT = "mat3"
INSECURE = "ignore::hemx.ckks.InsecureParametersWarning"  # for pytest.mark.filterwarnings

# The main small parameter set: N = 2^12, base of two 31-bit primes + 3 levels of two 28-bit primes (8 limbs),
# dnum = 3 (digits of 3, 3 and 2 limbs, so 3 special primes), scale 2^56.
MAIN_LOG_N = 12
MAIN_LEVELS = 3
MAIN_ROTATIONS = (1, -1, 2, -2, 3, 5, -7)

# Precision bounds (bits, worst slot) for the main set: a fresh encryption and single cheap operations are
# observed at ~38-41 bits, products at ~38-40; the bounds leave a few bits of margin for other seeds.
FRESH_BITS = 35
MUL_BITS = 34


def small_params(log_n: int, levels: int, *, dnum: int = 3, base_bits=(31, 31), **kwargs) -> hemx.CKKSParameters:
    """A custom (insecure, small-N) parameter set with two 28-bit primes per level and 31-bit special primes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        options = dict(primes_per_level=2, prime_bits=28, special_bits=31)
        options.update(kwargs)
        return hemx.CKKSParameters.create(log_n, levels=levels, dnum=dnum, base_bits=tuple(base_bits),
                                          allow_insecure=True, **options)


def context(log_n: int, levels: int, dnum: int = 3, base_bits=(31, 31), seed: int = 1, slots: int | None = None,
            ntt: str = FAST_NTT) -> hemx.Context:
    """A context with a seeded sampler, one per configuration for the whole test session."""
    return _context(log_n, levels, dnum, tuple(base_bits), seed, slots, ntt)


@functools.lru_cache(maxsize=None)
def _context(log_n, levels, dnum, base_bits, seed, slots, ntt) -> hemx.Context:
    params = small_params(log_n, levels, dnum=dnum, base_bits=base_bits)
    return hemx.Context(params, slots=slots, ntt=ntt, sampler=Sampler.insecure_for_tests(seed))


def context_and_keys(log_n: int, levels: int, dnum: int = 3, base_bits=(31, 31), seed: int = 1,
                     slots: int | None = None, rotations=(), conjugation: bool = False, relin: bool = True,
                     ntt: str = FAST_NTT):
    """(context, key set) cached per configuration; ``rotations`` is a tuple of steps or "power_of_two"."""
    return _context_and_keys(log_n, levels, dnum, tuple(base_bits), seed, slots,
                             rotations if isinstance(rotations, str) else tuple(rotations), conjugation, relin, ntt)


@functools.lru_cache(maxsize=None)
def _context_and_keys(log_n, levels, dnum, base_bits, seed, slots, rotations, conjugation, relin, ntt):
    ctx = context(log_n, levels, dnum, base_bits, seed, slots, ntt)
    keys = ctx.keygen(rotations=rotations if isinstance(rotations, str) else list(rotations),
                      conjugation=conjugation, relin=relin)
    return ctx, keys


def main_context():
    """The shared N = 2^12 context with rotation keys for MAIN_ROTATIONS and the conjugation key."""
    return context_and_keys(MAIN_LOG_N, MAIN_LEVELS, rotations=MAIN_ROTATIONS, conjugation=True)


def uniform(rng: np.random.Generator, shape, *, complex_: bool = False, bound: float = 1.0) -> np.ndarray:
    x = rng.uniform(-bound, bound, shape)
    if complex_:
        x = x + 1j * rng.uniform(-bound, bound, shape)
    return x


def check_bits(label: str, want, got, bound: float):
    """Assert the worst slot of ``got`` agrees with ``want`` to at least ``bound`` bits; record the figure."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{label}: shape {got.shape} != {want.shape}"
    stats = precision_stats(want, got)
    print(f"[precision] {label}: {stats}")  # shown with pytest -s
    assert math.isfinite(stats.min_bits)
    assert stats.min_bits >= bound, f"{label}: {stats} (need >= {bound} bits)"
    return stats
