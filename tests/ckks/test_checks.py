"""The decryption check (issue 17): coefficient_check on synthetic polynomials, and the check wired into decrypt."""

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


# ------------------------------------------------------------------------------------------------------------
# the check wired into Context.decrypt
# ------------------------------------------------------------------------------------------------------------
import warnings  # noqa: E402

import hemx  # noqa: E402
from hemx.ckks.checks import residue_check  # noqa: E402
from hemx.errors import DecryptionError, DecryptionWarning, OverflowBoundError  # noqa: E402

from tests.helpers.ckks_helpers import INSECURE, MAIN_LEVELS, MAIN_LOG_N, context_and_keys  # noqa: E402

# (log_n, levels, slots): the tiny ring of the bad-input tests, the main N = 2^12 set, and sparse packing
SETS = [(4, 1, None), (MAIN_LOG_N, MAIN_LEVELS, None), (MAIN_LOG_N, MAIN_LEVELS, 8)]


def _pair(log_n, levels, slots):
    """(ctx, keys) and a second client's (ctx, keys) with the same parameters and different keys."""
    mine = context_and_keys(log_n, levels, slots=slots)
    other = context_and_keys(log_n, levels, slots=slots, seed=2, relin=False)
    return mine, other


def _forged(ctx, keys, other_ctx, other_keys, values):
    """Another client's ciphertext relabelled with this context's and key set's tags (the tags match, the key
    does not): only the decryption check can tell."""
    ct = other_ctx.encrypt(values, other_keys)
    return ct.replace(context_id=ctx.id, key_id=keys.key_id)


def _batch_item(ct, i):
    return ct.replace(data=ct.data[i])


@pytest.mark.filterwarnings(INSECURE)
@pytest.mark.parametrize("log_n, levels, slots", SETS)
def test_wrong_key_is_detected_on_decrypt(log_n, levels, slots):
    (ctx, keys), (octx, okeys) = _pair(log_n, levels, slots)
    rng = np.random.default_rng(11)
    forged = _forged(ctx, keys, octx, okeys, rng.uniform(-1, 1, (50, ctx.slots)))
    detected = 0
    for i in range(50):
        try:
            ctx.decrypt(_batch_item(forged, i), keys)
        except DecryptionError as e:
            assert "wrong secret key" in str(e) and "decryption_check" in str(e)
            detected += 1
    assert detected == 50
    with pytest.raises(DecryptionError):  # the whole batch at once, and at a lower level
        ctx.decrypt(ctx.drop_level(forged, 0), keys)


@pytest.mark.filterwarnings(INSECURE)
@pytest.mark.parametrize("log_n, levels, slots", SETS)
def test_correct_ciphertexts_give_no_alarm(log_n, levels, slots):
    ctx, keys = context_and_keys(log_n, levels, slots=slots)
    rng = np.random.default_rng(12)
    top = ctx.params.max_level
    for bound in (1e-6, 1.0, 16.0):  # values x scale up to 16 x 2^56 = 2^60 at level 0, where q/2 is 2^61
        values = rng.uniform(-bound, bound, (200, ctx.slots))
        ct = ctx.encrypt(values, keys)
        for level in range(top, -1, -1):
            got = ctx.decrypt(ctx.drop_level(ct, level), keys)  # the check runs on each of the 200 ciphertexts
            np.testing.assert_allclose(got, values, atol=1e-3 * max(bound, 1.0))
    # after a multiplication and rescale, and with complex values
    z = rng.uniform(-1, 1, (4, ctx.slots)) + 1j * rng.uniform(-1, 1, (4, ctx.slots))
    ct = ctx.encrypt(z, keys)
    got = ctx.decrypt(ctx.rescale(ctx.mul(ct, ct, keys, rescale=False)), keys)
    np.testing.assert_allclose(got, z * z, atol=1e-3)
    zero = ctx.encrypt(np.zeros(ctx.slots), keys)
    np.testing.assert_allclose(ctx.decrypt(zero, keys), 0, atol=1e-6)


@pytest.mark.filterwarnings(INSECURE)
def test_overflowed_values_are_detected():
    ctx, keys = context_and_keys(MAIN_LOG_N, MAIN_LEVELS)
    rng = np.random.default_rng(13)
    ct = ctx.drop_level(ctx.encrypt(rng.uniform(-1, 1, ctx.slots), keys), 0)
    # level 0: the base holds 62 bits, the scale is 2^56; times 2^20 the values x scale reach 2^76 and wrap
    big = ctx.mul(ct, 2 ** 20, rescale=False)
    with pytest.raises(DecryptionError, match="overflowed"):
        ctx.decrypt(big, keys)
    # a product of two ciphertexts whose values are too large for the modulus left: with the magnitude bound known
    # (every fresh ciphertext carries one) the managed mul refuses it before computing it; with the bound unknown
    # (None, e.g. a ciphertext loaded from a version-1 file) it is computed and the decryption check catches it
    ct = ctx.encrypt(rng.uniform(-1, 1, ctx.slots) * 2.0 ** 20, keys)
    with pytest.raises(OverflowBoundError, match="garbage"):
        sq = ctx.rescale(ctx.mul(ct, ct, keys, rescale=False))
        for _ in range(MAIN_LEVELS - 1):
            sq = ctx.rescale(ctx.mul(sq, sq, keys, rescale=False))
    ct = ct.replace(bound=None)
    sq = ctx.rescale(ctx.mul(ct, ct, keys, rescale=False))
    for _ in range(MAIN_LEVELS - 1):
        sq = ctx.rescale(ctx.mul(sq, sq, keys, rescale=False))
    with pytest.raises(DecryptionError):
        ctx.decrypt(sq, keys)


@pytest.mark.filterwarnings(INSECURE)
def test_decryption_check_modes():
    (ctx, keys), (octx, okeys) = _pair(4, 1, None)
    forged = _forged(ctx, keys, octx, okeys, [0.5])
    with pytest.raises(DecryptionError):
        ctx.decrypt(forged, keys)
    with pytest.warns(DecryptionWarning, match="wrong secret key"):
        got = ctx.decrypt(forged, keys, decryption_check="warn")
    assert got.shape == (ctx.slots,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ctx.decrypt(forged, keys, decryption_check="off")
    quiet = hemx.Context(ctx.params, slots=ctx.slots, planning="off", decryption_check="off")
    assert quiet.decryption_check == "off"
    for bad in ("maybe", None, True, 1):
        with pytest.raises(ParameterError, match="decryption_check"):
            hemx.Context(ctx.params, planning="off", decryption_check=bad)
    for bad in ("maybe", True):
        with pytest.raises(ParameterError, match="decryption_check"):
            ctx.decrypt(forged, keys, decryption_check=bad)


def test_residue_check_matches_the_float_check():
    """residue_check on RNS residues decides like coefficient_check on the exact centred integers."""
    rng = np.random.default_rng(14)
    moduli = [2013265921, 1811939329, 469762049]  # NTT primes, log Q ~ 89.4
    big_q = int(np.prod([int(q) for q in moduli], dtype=object))
    n = 64
    for magnitude_bits in (10, 60, 80, 87, 88.5):
        x = [int(v) for v in rng.uniform(-1, 1, n) * 2.0 ** magnitude_bits]
        res = np.array([[v % q for v in x] for q in moduli], dtype=np.uint32)
        ok, stats = residue_check(res, moduli, n=n, slots=n // 2, scale=2.0 ** 40)
        ok_exact, _ = coefficient_check(np.array(x, dtype=float), np.log2(float(big_q)), scale=2.0 ** 40)
        assert ok == ok_exact, (magnitude_bits, stats)
    u = [int.from_bytes(rng.bytes(16), "little") % big_q for _ in range(n)]  # uniform modulo Q
    res = np.array([[v % q for v in u] for q in moduli], dtype=np.uint32)
    ok, stats = residue_check(res, moduli, n=n, slots=n // 2, scale=2.0 ** 40)
    assert not ok and stats.margin_bits < 0.1 and abs(stats.log_half_q - (np.log2(float(big_q)) - 1)) < 1e-9
