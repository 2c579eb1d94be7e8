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

import dataclasses
import functools
import json
import math
import os
import warnings

import numpy as np

import hemx
from hemx.ckks import InsecureParametersWarning, Sampler

from tests.helpers import expected

FAST_NTT = "mat3"
INSECURE = "ignore::hemx.ckks.InsecureParametersWarning"  # for pytest.mark.filterwarnings

# The main small parameter set: N = 2^12, base of two 31-bit primes + 3 levels of two 28-bit primes (8 limbs),
# dnum = 3 (digits of 3, 3 and 2 limbs, so 3 special primes), scale 2^56.
MAIN_LOG_N = 12
MAIN_LEVELS = 3
MAIN_ROTATIONS = (1, -1, 2, -2, 3, 5, -7)

# Precision keys of the main set in tests/helpers/expected.py: a fresh encryption and single cheap operations
# (add, plaintext operands, rotate, conjugate, drop_level), and results of one multiplication.
FRESH_BITS = "n12/fresh"
MUL_BITS = "n12/mul"


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


@dataclasses.dataclass(frozen=True)
class Bits:
    """Worst-slot and median-slot precision, ``-log2 |got - want|``, computed here (not by hemx)."""

    min_bits: float
    median_bits: float
    max_abs_error: float

    def __str__(self) -> str:
        return f"min {self.min_bits:.2f} bits, median {self.median_bits:.2f} (max |error| {self.max_abs_error:.3g})"


def bits_of(want, got) -> Bits:
    """Precision of ``got`` against ``want`` in plain Python/numpy: the oracle for hemx.ckks.precision_stats."""
    want = np.asarray(want, dtype=np.complex128)
    got = np.asarray(got, dtype=np.complex128)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert np.all(np.isfinite(got)), "non-finite decrypted values"
    err = np.abs(got - want).ravel()
    with np.errstate(divide="ignore"):
        bits = -np.log2(err)  # +inf where exact
    return Bits(float(bits.min()), float(np.median(bits)), float(err.max()))


def check_bits(label: str, want, got, expect: str | float, *, median: str | None = None) -> Bits:
    """Assert the worst slot of ``got`` agrees with ``want`` to the expected precision.

    ``expect`` is a key of ``tests/helpers/expected.py`` (asserted at the measured figure less the margin) or,
    for encoder-only checks without a table entry, a number of bits. ``median`` optionally names a key whose
    median-slot bound is asserted too. With ``HEMX_PRECISION_LOG`` set, every figure is appended there.
    """
    stats = bits_of(want, got)
    print(f"[precision] {expect} {label}: {stats}")  # shown with pytest -s
    log = os.environ.get("HEMX_PRECISION_LOG")  # measuring a key not yet in the table: record instead of assert
    if log and isinstance(expect, str):
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"key": expect, "label": label, "min_bits": stats.min_bits,
                                "median_bits": stats.median_bits}) + "\n")
    if not (log and isinstance(expect, str) and expect not in expected.MEASURED):
        need = expected.bound(expect) if isinstance(expect, str) else float(expect)
        assert stats.min_bits >= need, f"{label}: {stats} (need >= {need:.2f} bits, key {expect})"
    if median is not None and not (log and median not in expected.MEASURED_MEDIAN):
        need = expected.median_bound(median)
        assert stats.median_bits >= need, f"{label}: {stats} (median need >= {need:.2f}, key {median})"
    return stats


def check_error(label: str, error: float, key: str) -> float:
    """Assert an application's max absolute error is at most the measured figure times 2^MARGIN (key of
    ``expected.MEASURED_ERROR``); logged like ``check_bits`` with ``HEMX_PRECISION_LOG``."""
    error = float(error)
    print(f"[error] {key} {label}: {error:.3g}")
    log = os.environ.get("HEMX_PRECISION_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"key": key, "label": label, "error": error}) + "\n")
    if not (log and key not in expected.MEASURED_ERROR):
        need = expected.error_bound(key)
        assert math.isfinite(error) and error <= need, f"{label}: max |error| {error:.3g} > {need:.3g} (key {key})"
    return error

