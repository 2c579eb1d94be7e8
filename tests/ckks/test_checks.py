"""hemx.ckks.checks.coefficient_check on synthetic decrypted polynomials (issue 17; not wired into decrypt yet)."""

from __future__ import annotations

import numpy as np
import pytest

from hemx.ckks.checks import coefficient_check
from hemx.errors import ParameterError, ShapeError

LOG_Q = 118.0  # e.g. 2 base primes of 31 bits + 2 of 28
N = 1 << 12


def _message(rng, log_scale, magnitude=1.0):
    return rng.uniform(-magnitude, magnitude, N) * 2.0 ** log_scale + rng.normal(0, 3.2, N)


def _uniform(rng, log_q):
    half = 2.0 ** (log_q - 1)
    return rng.uniform(-half, half, N)


@pytest.mark.parametrize("log_scale", [20, 40, 56, 80])
def test_correct_ciphertexts_pass(log_scale):
    rng = np.random.default_rng(log_scale)
    for _ in range(50):
        ok, stats = coefficient_check(_message(rng, log_scale), LOG_Q, scale=2.0 ** log_scale)
        assert ok, stats.reason
        assert stats.reason == "" and stats.margin_bits > 30


def test_message_close_to_modulus_still_passes():
    rng = np.random.default_rng(1)
    ok, stats = coefficient_check(_message(rng, LOG_Q - 4), LOG_Q, scale=2.0 ** (LOG_Q - 4))
    assert ok and 2 < stats.margin_bits < 4


@pytest.mark.parametrize("log_q", [40.0, 62.0, LOG_Q, 1000.0])
def test_wrong_key_is_detected(log_q):
    rng = np.random.default_rng(7)
    for _ in range(50):
        ok, stats = coefficient_check(_uniform(rng, log_q), log_q, scale=2.0 ** 30)
        assert not ok
        assert "wrong secret key" in stats.reason and stats.margin_bits < 0.1


def test_overflow_is_detected():
    """Values x scale far above q wrap: reduced mod q they are spread over the whole range."""
    rng = np.random.default_rng(3)
    q = 2.0 ** 40
    wrapped = np.mod(rng.uniform(-1, 1, N) * 2.0 ** 70 + q / 2, q) - q / 2
    ok, stats = coefficient_check(wrapped, 40.0, scale=2.0 ** 30)
    assert not ok and "overflowed" in stats.reason


def test_batched_and_zero_input():
    rng = np.random.default_rng(5)
    ok, _ = coefficient_check(np.stack([_message(rng, 30)] * 3), LOG_Q, scale=2.0 ** 30)
    assert ok
    ok, stats = coefficient_check(np.zeros(N), LOG_Q, scale=1.0)
    assert ok and stats.log_max == float("-inf")


def test_non_finite_coefficients_fail():
    c = np.zeros(N)
    c[3] = np.nan
    ok, stats = coefficient_check(c, LOG_Q, scale=2.0 ** 30)
    assert not ok and "not finite" in stats.reason


@pytest.mark.parametrize("kwargs, error", [
    (dict(log_q=float("nan")), ParameterError), (dict(log_q=0.5), ParameterError), (dict(log_q=True), ParameterError),
    (dict(scale=0.0), ParameterError), (dict(scale=float("inf")), ParameterError), (dict(scale=-1.0), ParameterError),
    (dict(margin_bits=-1.0), ParameterError), (dict(percentile=0), ParameterError),
    (dict(percentile=101), ParameterError),
    (dict(coeffs=np.zeros(0)), ShapeError), (dict(coeffs=np.ones(4, complex)), ShapeError),
    (dict(coeffs=np.array(["a"])), ShapeError),
])
def test_bad_arguments(kwargs, error):
    args = dict(coeffs=np.ones(8), log_q=LOG_Q, scale=2.0 ** 30)
    args.update(kwargs)
    coeffs = args.pop("coeffs")
    log_q = args.pop("log_q")
    with pytest.raises(error):
        coefficient_check(coeffs, log_q, **args)
