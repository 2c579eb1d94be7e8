"""hemx.ckks.precision_stats (the reported precision feature) against the tests' own computation
(tests/helpers/ckks_helpers.bits_of), which every CKKS precision assert uses instead."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hemx.ckks import precision_stats

from tests.helpers.ckks_helpers import bits_of


@pytest.mark.parametrize("complex_", [False, True])
def test_precision_stats_matches_the_tests_oracle(complex_):
    rng = np.random.default_rng(5)
    want = rng.uniform(-1, 1, 4096) + (1j * rng.uniform(-1, 1, 4096) if complex_ else 0)
    errors = 2.0 ** -rng.uniform(20, 50, 4096) * np.exp(2j * np.pi * rng.uniform(size=4096) if complex_ else 0)
    got = want + errors
    stats, ours = precision_stats(want, got), bits_of(want, got)
    assert math.isclose(stats.min_bits, ours.min_bits, abs_tol=1e-9)
    assert math.isclose(stats.median_bits, ours.median_bits, abs_tol=1e-9)
    assert math.isclose(stats.max_abs_error, ours.max_abs_error, rel_tol=1e-12)
    assert stats.slots == 4096
    # the worst slot is the one with the largest error, in plain numbers
    assert math.isclose(ours.min_bits, -math.log2(float(np.max(np.abs(errors)))), abs_tol=1e-9)


def test_precision_stats_of_known_errors():
    want = np.zeros(4)
    got = np.array([2.0**-10, -(2.0**-20), 2.0**-30, 2.0**-40])
    stats = precision_stats(want, got)
    assert stats.min_bits == 10.0 and stats.median_bits == 25.0 and stats.max_abs_error == 2.0**-10
    assert bits_of(want, got).min_bits == 10.0 and bits_of(want, got).median_bits == 25.0
