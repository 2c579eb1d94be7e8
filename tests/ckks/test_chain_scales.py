"""Scales down the whole chain of every preset (issue 26): managed scales, level/scale alignment, bounds, errors.

From a fresh ciphertext, square down the whole chain, and multiply by fresh ciphertexts down the chain, with the
default ``ctx.mul(a, b, keys)`` (rescaled, scales managed): every step must decrypt to numpy's result within the
precision its scale promises, with the scale in the managed band ``(T / 2, T]`` of its level, and every step past
the chain must raise a ``hemx.errors`` exception (never a raw IndexError / ValueError / ZeroDivisionError, never
garbage). Op-level on the presets up to N = 2^14 (boot_12, boot_13, set_a..set_c, secure_13, secure_14, the CNN
demo's two recommended sets), secure_15 and set_d op-level but ``slow``; the N = 2^16 presets (set_d, secure_16,
warpdrive, tensorfhe, boot_16) also at parameter level: the same Context methods that pick the integer factors and
the alignment, run on the parameters alone (no ring, no keys), squaring and fresh products simulated in floats.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import hemx
from hemx.apps._cnn_params import recommended_parameters
from hemx.ckks.context import MIN_ALIGN_FACTOR, managed_scales
from hemx.ckks.sampling import Sampler
from hemx.errors import HemxError, LevelError, OverflowBoundError, ParameterError, PrecisionError

from tests.helpers.ckks_helpers import INSECURE

pytestmark = pytest.mark.filterwarnings(INSECURE)

SLOTS = 8
# precision a scale promises: the noise after a rescale is ~2^(log_n / 2) (rounding of N coefficients, times the
# secret's spread); an error within 2^(log_n / 2 + PRECISION_MARGIN_BITS) / scale is "right". Measured errors sit
# 6-9 bits below that bound on every preset here.
PRECISION_MARGIN_BITS = 12


def _params(name: str) -> hemx.CKKSParameters:
    if name.startswith("cnn"):
        return recommended_parameters(log_n=14, fast=name == "cnn_fast")
    return hemx.CKKSParameters.preset(name, allow_insecure=True)


def _allowed_error(ctx, ct) -> float:
    return 2.0 ** (ctx.params.log_n / 2 + PRECISION_MARGIN_BITS) / ct.scale


def _check_step(ctx, keys, ct, want, what):
    got = ctx.decrypt(ct, keys)
    err = float(np.max(np.abs(got - want)))
    assert err <= _allowed_error(ctx, ct), (f"{what} at level {ct.level}: error 2^{math.log2(err + 1e-300):.1f}, "
                                            f"scale 2^{math.log2(ct.scale):.2f}")
    target = ctx.level_scale(ct.level)
    assert target / 2 < ct.scale <= target * (1 + 1e-9), (f"{what}: scale 2^{math.log2(ct.scale):.3f} off the band "
                                                           f"of level {ct.level} (2^{math.log2(target):.3f})")
    assert ct.bound is not None and float(np.max(np.abs(want))) <= ct.bound * (1 + 1e-12)


def _run_chains(name: str):
    params = _params(name)
    ctx = hemx.Context(params, slots=SLOTS, sampler=Sampler.insecure_for_tests(3), planning="off")
    keys = ctx.keygen()
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, SLOTS)
    sq, want_sq = ctx.encrypt(x, keys), x.copy()
    prod, want_prod = sq, x.copy()
    assert sq.level == params.max_level and sq.scale == ctx.level_scale(params.max_level)
    assert sq.bound == 1.0  # max |x| < 1, rounded up to a power of two
    for _ in range(params.max_level):
        sq, want_sq = ctx.mul(sq, sq, keys), want_sq * want_sq
        _check_step(ctx, keys, sq, want_sq, f"{name} square")
        y = rng.uniform(-1, 1, SLOTS)
        prod, want_prod = ctx.mul(prod, ctx.encrypt(y, keys), keys), want_prod * y  # a fresh top-level operand
        _check_step(ctx, keys, prod, want_prod, f"{name} product with fresh")
        if prod.level:
            half = ctx.mul(prod, 0.5)  # plain scalar: encoded at the matching scale, rescaled
            assert half.level == prod.level - 1
            _check_step(ctx, keys, half, want_prod * 0.5, f"{name} product times 0.5")
    assert sq.level == 0
    # past the chain: hemx errors only
    for call in (lambda: ctx.mul(sq, sq, keys), lambda: ctx.mul(sq, 0.5), lambda: ctx.rescale(sq)):
        with pytest.raises(LevelError):
            call()
    try:  # an unrescaled product at level 0: right where the base holds scale^2 (cnn_fast: 2^60 in 62 bits)
        raw = ctx.mul(sq, sq, keys, rescale=False)
    except LevelError:
        pass
    else:
        got = ctx.decrypt(raw, keys)
        assert np.max(np.abs(got - want_sq * want_sq)) <= 2 * _allowed_error(ctx, sq)
    # integers at level 0 still work (no rescale needed)
    tripled = ctx.mul(sq, 3)
    assert np.max(np.abs(ctx.decrypt(tripled, keys) - 3 * want_sq)) <= 3 * _allowed_error(ctx, sq)
    # a sum of operands from different levels (the chain's last square and a fresh ciphertext): aligned, right
    fresh = ctx.encrypt(x, keys)
    total = ctx.add(prod, fresh)
    assert total.level == 0
    assert np.max(np.abs(ctx.decrypt(total, keys) - (want_prod + x))) <= 2 * _allowed_error(ctx, total)


@pytest.mark.parametrize("name", ["set_a", "set_b", "secure_13", "secure_14", "boot_12", "set_c", "boot_13",
                                  "cnn", "cnn_fast"])
def test_whole_chain_squares_and_fresh_products(name):
    _run_chains(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["secure_15", "set_d"])
def test_whole_chain_large_rings(name):
    _run_chains(name)


# ------------------------------------------------------------------------------------- parameter-level chains
def _params_only(params):
    """A Context without ring or keys: its scale-management methods read only the parameters."""
    ctx = object.__new__(hemx.Context)
    ctx.params = params
    return ctx


@pytest.mark.parametrize("name", ["set_a", "set_b", "set_c", "set_d", "warpdrive", "tensorfhe", "secure_13",
                                  "secure_14", "secure_15", "secure_16", "boot_12", "boot_13", "boot_16", "cnn",
                                  "cnn_fast", "boot_12_relu", "boot_13_relu"])
def test_chain_logic_every_preset(name):
    """The managed scales of every level: the invariants, and both chains simulated with the Context's own rules."""
    params = _params(name)
    ctx = _params_only(params)
    scales = managed_scales(params)
    assert scales[0] == params.scale and len(scales) == params.max_level + 1
    floor = params.log_n / 2 + 10
    for level in range(1, params.max_level + 1):
        d = ctx._divisor(level)
        t, below = scales[level], scales[level - 1]
        assert t <= d and t * t <= below * d * (1 + 1e-12)  # a product of band operands lands in the band below
        log_q = sum(math.log2(q) for q in params.moduli[: params.limbs_at_level(level)])
        assert 2 * math.log2(t) < log_q - 1 - 1  # the product fits the modulus with |x| <= 2 room
        assert math.log2(t) > floor
    # squaring and products with fresh (top-level) operands, in floats, with the factors mul picks
    top = params.max_level
    sq = fresh_prod = scales[top]
    for level in range(top, 0, -1):
        c = ctx._scale_factor(sq * sq, level)
        sq = sq * sq * c / ctx._divisor(level)
        other = scales[top]
        if not ctx._in_band(other, level):  # the fresh operand is aligned to this level first (mul does this)
            assert scales[level] * ctx._divisor(level + 1) / other >= MIN_ALIGN_FACTOR
            other = scales[level]
        c = ctx._scale_factor(fresh_prod * other, level)
        fresh_prod = fresh_prod * other * c / ctx._divisor(level)
        for s in (sq, fresh_prod):
            assert ctx._in_band(s, level - 1), (name, level, math.log2(s), math.log2(scales[level - 1]))


def test_old_unmanaged_drift_is_refused_not_garbage():
    """auto_scale=False (what circuits that plan their own scales use) on boot_12 reproduces the old drift: the
    squaring's scale falls with the 60-bit levels; the rescale that would leave too small a scale raises
    PrecisionError (before: scale 2^-2.1 and error 5e4 after 8 squarings, then IndexError / ValueError)."""
    params = hemx.CKKSParameters.preset("boot_12", allow_insecure=True)
    ctx = hemx.Context(params, slots=SLOTS, sampler=Sampler.insecure_for_tests(4), planning="off")
    keys = ctx.keygen()
    x = np.random.default_rng(2).uniform(-1, 1, SLOTS)
    ct, want = ctx.encrypt(x, keys), x.copy()
    with pytest.raises(PrecisionError, match="scale"):
        for _ in range(params.max_level + 1):
            ct = ctx.mul(ct, ct, keys, auto_scale=False)
            want = want * want
            got = ctx.decrypt(ct, keys)
            assert np.max(np.abs(got - want)) <= _allowed_error(ctx, ct)
    assert ct.level > 0  # refused mid-chain, where the scale ran out


def test_every_sequence_of_calls_raises_hemx_errors_only():
    """Mixed-level, mixed-scale operands on boot_12 (fresh, squared, plain, rescale=False): right or HemxError."""
    params = hemx.CKKSParameters.preset("boot_12", allow_insecure=True)
    ctx = hemx.Context(params, slots=SLOTS, sampler=Sampler.insecure_for_tests(5), planning="off")
    keys = ctx.keygen()
    rng = np.random.default_rng(3)
    x, y = rng.uniform(-1, 1, SLOTS), rng.uniform(-1, 1, SLOTS)
    a = ctx.encrypt(x, keys)
    b = ctx.encrypt(y, keys)
    for _ in range(6):  # a at level 12 (60-bit levels), b at the top (56-bit levels)
        a, x = ctx.mul(a, a, keys), x * x
    cases = {
        "add": (lambda: ctx.add(a, b), x + y),
        "sub": (lambda: ctx.sub(b, a), y - x),
        "mul": (lambda: ctx.mul(b, a, keys), x * y),
        "mul_unrescaled": (lambda: ctx.rescale(ctx.mul(a, b, keys, rescale=False)), x * y),
        "plain": (lambda: ctx.mul(a, y), x * y),
        "plain_add": (lambda: ctx.add(a, y), x + y),
        "raw_rescale_chain": (lambda: ctx.rescale(ctx.rescale(ctx.mul(a, 1.0, rescale=False))), x),
    }
    raised = []
    for what, (fn, want) in cases.items():
        try:
            out = fn()
            got = ctx.decrypt(out, keys)  # a scale below the noise is refused here (PrecisionError)
        except HemxError:
            raised.append(what)
            continue
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"{what}: raw {type(e).__name__}: {e}")
        err = np.max(np.abs(got - want))
        assert err <= _allowed_error(ctx, out), (what, err)
    # everything managed goes through; only the raw double rescale runs out of scale (PrecisionError at decrypt;
    # decryption_check="off" returns the garbage for whoever asks for it explicitly)
    assert raised == ["raw_rescale_chain"]
    with pytest.raises(PrecisionError, match="decrypt"):
        ctx.decrypt(cases["raw_rescale_chain"][0](), keys)


# ------------------------------------------------------------------------------------------------------ bounds
def test_bounds_are_recorded_and_propagated():
    params = hemx.CKKSParameters.preset("set_b", allow_insecure=True)
    ctx = hemx.Context(params, slots=SLOTS, sampler=Sampler.insecure_for_tests(6), planning="off")
    keys = ctx.keygen(rotations="power_of_two")
    x = np.array([0.5, -3.0, 2.0])
    a = ctx.encrypt(x, keys)
    assert a.bound == 4.0 and "bound=4" in repr(a)  # max |x| = 3, rounded up to a power of two
    b = ctx.encrypt([1.0, 0.25], keys, bound=3.5)  # a declared bound is kept as it is
    assert b.bound == 3.5
    with pytest.raises(ParameterError, match="bound"):
        ctx.encrypt(x, keys, bound=2.0)  # below max |x|
    for bad in (-1.0, float("nan"), "3"):
        with pytest.raises(ParameterError):
            ctx.encrypt(x, keys, bound=bad)
    assert ctx.add(a, b).bound == 7.5 and ctx.sub(a, b).bound == 7.5
    assert ctx.mul(a, b, keys).bound == 14.0
    assert ctx.mul(a, -0.5).bound == 2.0 and ctx.add(a, [1.0, -2.0]).bound == 6.0
    assert ctx.mul(a, [0.5, 0.25]).bound == 2.0
    assert ctx.rotate(a, 1, keys).bound == 4.0 and ctx.negate(a).bound == 4.0
    assert ctx.rescale(ctx.mul(a, 2.0, rescale=False)).bound == 8.0
    assert ctx.drop_level(a, 0).bound == 4.0
    assert ctx.sum_slots(a, keys).bound == SLOTS * 4.0
    # static metadata: survives jax.jit like the scale; new data of the same range reuses the compiled program
    traces = []

    def f(u, v):
        traces.append(1)
        return ctx.add(u, v)

    jitted = jax.jit(f)
    assert jitted(a, b).bound == 7.5
    again = ctx.encrypt(np.array([0.1, -2.5, 3.9]), keys)  # another max |x|, the same rounded bound
    assert jitted(again, b).bound == 7.5 and len(traces) == 1
    # the values stay within the bound
    got = ctx.decrypt(ctx.mul(a, b, keys), keys)
    assert np.max(np.abs(got)) <= 14.0


def test_polynomial_evaluation_bounds_its_result():
    """hemx.circuits.evaluate_polynomial: |p(x)| <= sum |c_k| B^k (monomial), sum |c_k| (Chebyshev on its interval)."""
    from hemx.circuits import chebyshev_coefficients, evaluate_polynomial  # noqa: PLC0415 - a layer above ckks

    params = hemx.CKKSParameters.preset("set_b", allow_insecure=True)
    ctx = hemx.Context(params, slots=SLOTS, sampler=Sampler.insecure_for_tests(7), planning="off")
    keys = ctx.keygen()
    x = np.random.default_rng(4).uniform(-2, 2, SLOTS)
    ct = ctx.encrypt(x, keys)  # bound 2
    out = evaluate_polynomial(ctx, ct, [0.5, -1.0, 0.25], keys)
    assert out.bound == 0.5 + 2.0 + 0.25 * 4.0
    assert np.max(np.abs(ctx.decrypt(out, keys))) <= out.bound
    c = chebyshev_coefficients(np.tanh, 3, (-2, 2))
    out = evaluate_polynomial(ctx, ct, c, keys, basis="chebyshev", interval=(-2, 2))
    assert out.bound == pytest.approx(float(np.sum(np.abs(c))), rel=1e-12)
    got = ctx.decrypt(out, keys)
    want = np.polynomial.chebyshev.chebval(x / 2, c)
    assert np.max(np.abs(got - want)) < 1e-6 and np.max(np.abs(got)) <= out.bound


def test_products_beyond_the_modulus_are_refused_not_garbage():
    """A product whose propagated bound times its scale reaches half the modulus would wrap around and decrypt to
    garbage: the managed mul refuses it (OverflowBoundError, a HemxError) instead; values that fit still work."""
    params = hemx.CKKSParameters.preset("set_b", allow_insecure=True)
    ctx = hemx.Context(params, slots=SLOTS, sampler=Sampler.insecure_for_tests(8), planning="off")
    keys = ctx.keygen()
    log_q = math.log2(math.prod(params.moduli[: params.limbs_at_level(params.max_level)]))
    top_scale = ctx.level_scale(params.max_level)
    # a magnitude m whose square overflows the top level's modulus at the managed scale
    huge = 2.0 ** math.ceil((log_q - 2 * math.log2(top_scale)) / 2 + 1)
    big = ctx.encrypt(np.array([huge, -1.0]), keys)
    with pytest.raises(OverflowBoundError, match="garbage"):
        ctx.mul(big, big, keys)
    with pytest.raises(OverflowBoundError):
        ctx.mul(big, np.array([huge, 1.0]))
    assert isinstance(OverflowBoundError("x"), HemxError)
    small = ctx.encrypt(np.array([3.0, -1.0]), keys)
    got = ctx.decrypt(ctx.mul(small, small, keys), keys)
    assert np.allclose(got[:2], [9.0, 1.0], atol=1e-4)
