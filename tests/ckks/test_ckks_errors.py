"""Misuse of the CKKS API raises the documented hemx errors, with messages that say what to do."""

from __future__ import annotations

import numpy as np
import pytest

import hemx
from hemx.ckks import EvaluationKeys, KeySet, Sampler
from hemx.errors import (
    ContextMismatchError,
    HemxError,
    KeyMismatchError,
    LevelError,
    MissingKeyError,
    ParameterError,
    ScaleMismatchError,
    SlotError,
)

from hemx.kernels.automorphism import galois_element

from tests.helpers.ckks_helpers import (
    FAST_NTT,
    FRESH_BITS,
    INSECURE,
    MAIN_LEVELS,
    MAIN_LOG_N,
    MAIN_ROTATIONS,
    MUL_BITS,
    check_bits,
    context_and_keys,
    main_context,
    small_params,
    uniform,
)

pytestmark = pytest.mark.filterwarnings(INSECURE)


@pytest.fixture(scope="module")
def main():
    return main_context()


@pytest.fixture(scope="module")
def cts(main):
    ctx, keys = main
    rng = np.random.default_rng(77)
    x, y = uniform(rng, ctx.slots), uniform(rng, ctx.slots)
    return x, y, ctx.encrypt(x, keys), ctx.encrypt(y, keys)


@pytest.fixture(scope="module")
def other_context():
    """A second context with the very same parameters (so every kernel is shared) and its own keys."""
    params = small_params(MAIN_LOG_N, MAIN_LEVELS)
    ctx = hemx.Context(params, ntt=FAST_NTT, sampler=Sampler.insecure_for_tests(555))
    keys = ctx.keygen(rotations=[1])
    return ctx, keys, ctx.encrypt(np.ones(4), keys)


@pytest.fixture(scope="module")
def second_keys(main):
    """Another key set of the main context (same parameters, different secret)."""
    ctx, _ = main
    keys = ctx.keygen(rotations=[1])
    return keys, ctx.encrypt(np.ones(4), keys)


def test_error_hierarchy():
    for cls in (ContextMismatchError, KeyMismatchError, LevelError, ScaleMismatchError, SlotError, ParameterError):
        assert issubclass(cls, HemxError) and issubclass(cls, ValueError)
    assert issubclass(MissingKeyError, HemxError) and issubclass(MissingKeyError, KeyError)


# ------------------------------------------------------------------------------------------------ contexts
def test_ciphertexts_from_different_contexts(main, cts, other_context):
    ctx, keys = main
    _, _, a, _ = cts
    octx, okeys, oct_ = other_context
    assert octx.params == ctx.params and octx.id != ctx.id
    with pytest.raises(ContextMismatchError, match="another context"):
        ctx.add(a, oct_)
    with pytest.raises(ContextMismatchError):
        ctx.sub(a, oct_)
    with pytest.raises(ContextMismatchError):
        ctx.mul(a, oct_, keys, rescale=False)
    with pytest.raises(ContextMismatchError):
        octx.add(a, a)
    with pytest.raises(ContextMismatchError):
        octx.rotate(a, 1, okeys)
    with pytest.raises(ContextMismatchError):
        octx.rescale(a)
    with pytest.raises(ContextMismatchError):
        octx.decrypt(a, okeys)
    with pytest.raises(ContextMismatchError):
        ctx.decrypt(oct_, keys)


def test_keys_and_plaintexts_from_different_contexts(main, cts, other_context):
    ctx, keys = main
    _, _, a, b = cts
    octx, okeys, _ = other_context
    with pytest.raises(ContextMismatchError, match="generate keys with this context"):
        ctx.encrypt(np.ones(4), okeys)
    with pytest.raises(ContextMismatchError):
        ctx.mul(a, b, okeys, rescale=False)
    with pytest.raises(ContextMismatchError):
        ctx.rotate(a, 1, okeys)
    opt = octx.encode(np.ones(4))
    with pytest.raises(ContextMismatchError, match="plaintext"):
        ctx.add(a, opt)
    with pytest.raises(ContextMismatchError):
        ctx.decode(opt)
    with pytest.raises(ContextMismatchError):
        ctx.encrypt(opt, keys)


def test_mul_by_plaintext_of_another_context(main, cts):
    """``mul`` must reject a Plaintext from another context, as ``add``, ``sub`` and ``encrypt`` do.

    Here the other context has the same N and limb count but 27-bit level primes: without the check the
    residues are multiplied as if they belonged to this context's moduli and the result is garbage.
    """
    ctx, keys = main
    x, _, a, _ = cts
    octx = hemx.Context(small_params(MAIN_LOG_N, MAIN_LEVELS, prime_bits=27), ntt=FAST_NTT,
                        sampler=Sampler.insecure_for_tests(9))
    assert octx.params.moduli != ctx.params.moduli
    opt = octx.encode(np.full(ctx.slots, 0.5))
    assert opt.data.shape == ctx.encode(np.ones(4)).data.shape
    with pytest.raises(ContextMismatchError):
        out = ctx.mul(a, opt, rescale=True)
        # reached only when no error was raised: show how wrong the result is
        err = np.abs(ctx.decrypt(out, keys) - 0.5 * x).max()
        pytest.fail(f"mul accepted a plaintext of another context; max error of the result {err:.3g}")


# ------------------------------------------------------------------------------------------------ scales, levels
def test_scale_mismatch_after_rescale(main, cts):
    ctx, keys = main
    x, y, a, b = cts
    prod = ctx.mul(a, b, keys, rescale=True)  # managed: level_scale(2) (or within 2x of it): add/sub align it
    assert ctx.level_scale(prod.level) / 2 < prod.scale <= ctx.level_scale(prod.level) * (1 + 1e-9)
    unrescaled = ctx.mul(a, b, keys, rescale=False)  # scale 2^112: genuinely different
    for op in (ctx.add, ctx.sub):
        with pytest.raises(ScaleMismatchError, match="different scales"):
            op(unrescaled, a)
        with pytest.raises(ScaleMismatchError):
            op(a, unrescaled)
    # a plaintext at the wrong scale, too
    with pytest.raises(ScaleMismatchError):
        ctx.add(a, ctx.encode(y, scale=2.0 ** 40))
    # plain values are encoded at the ciphertext's own scale: no error
    check_bits("rescaled product + array", x * y + y, ctx.decrypt(ctx.add(prod, y), keys), MUL_BITS)
    # and products do not need equal scales
    again = ctx.mul(prod, a, keys, rescale=True)
    check_bits("rescaled product * fresh", x * y * x, ctx.decrypt(again, keys), "n12/mul2")


def test_add_aligns_levels(main, cts):
    ctx, keys = main
    x, y, a, b = cts
    low = ctx.drop_level(b, 1)
    for out in (ctx.add(a, low), ctx.add(low, a)):
        assert out.level == 1 and out.num_limbs == ctx.params.limbs_at_level(1)
        check_bits("add across levels 3 and 1", x + y, ctx.decrypt(out, keys), FRESH_BITS)
    out = ctx.sub(a, low)
    assert out.level == 1
    check_bits("sub across levels 3 and 1", x - y, ctx.decrypt(out, keys), FRESH_BITS)
    # a plaintext at another level is aligned too (encoded at the ciphertext's scale: encode's default scale is
    # the managed scale of the level it is encoded at, level_scale(2), not a fresh top-level ciphertext's)
    out = ctx.add(ctx.drop_level(a, 0), ctx.encode(y, level=2, scale=a.scale))
    assert out.level == 0
    check_bits("add level-0 ct + level-2 plaintext", x + y, ctx.decrypt(out, keys), FRESH_BITS)
    out = ctx.add(a, ctx.encode(y, level=1, scale=a.scale))
    assert out.level == 1
    check_bits("add level-3 ct + level-1 plaintext", x + y, ctx.decrypt(out, keys), FRESH_BITS)


def test_level_errors(main, cts):
    ctx, keys = main
    _, _, a, _ = cts
    bottom = ctx.drop_level(a, 0)
    with pytest.raises(LevelError, match="level 0"):
        ctx.rescale(bottom)
    with pytest.raises(LevelError):
        ctx.mul(bottom, 0.5, rescale=True)
    with pytest.raises(LevelError, match="cannot raise"):
        ctx.drop_level(bottom, 1)
    with pytest.raises(ParameterError, match="level"):
        ctx.drop_level(a, -1)
    with pytest.raises(ParameterError, match="level"):
        ctx.encode(np.ones(2), level=MAIN_LEVELS + 1)


# ------------------------------------------------------------------------------------------------ keys
def test_missing_galois_keys(main, cts):
    ctx, keys = main
    _, _, a, _ = cts
    assert 4 not in MAIN_ROTATIONS and galois_element(ctx.params.n, 4) not in keys.galois
    with pytest.raises(MissingKeyError, match="keygen") as info:
        ctx.rotate(a, 4, keys)
    message = str(info.value)
    assert "rotation by 4" in message and "rotations=" in message
    assert not message.startswith("'")  # readable, not KeyError's quoted repr
    with pytest.raises(MissingKeyError, match="keygen"):
        ctx.rotate_many(a, [1, 4], keys)
    with pytest.raises(KeyError):  # also catchable as a KeyError
        ctx.rotate(a, 6, keys)


def test_missing_conjugation_and_relin_keys(cts):
    ctx, keys = context_and_keys(MAIN_LOG_N, MAIN_LEVELS, rotations=(1,), relin=False)
    x = np.linspace(-1, 1, 8)
    a = ctx.encrypt(x, keys)
    assert keys.relin is None
    with pytest.raises(MissingKeyError, match="conjugation=True"):
        ctx.conjugate(a, keys)
    with pytest.raises(MissingKeyError, match="relin"):
        ctx.mul(a, a, keys, rescale=False)
    # what the keys do cover still works
    check_bits("rotate with a relin-less key set", np.roll(np.r_[x, np.zeros(ctx.slots - 8)], -1),
               ctx.decrypt(ctx.rotate(a, 1, keys), keys), FRESH_BITS)


def test_decrypt_with_another_secret(main, cts, second_keys):
    ctx, keys = main
    _, _, a, b = cts
    keys2, ct2 = second_keys
    assert keys2.key_id != keys.key_id
    with pytest.raises(KeyMismatchError, match="not the one the ciphertext was encrypted under"):
        ctx.decrypt(a, keys2)
    with pytest.raises(KeyMismatchError):
        ctx.decrypt(a, keys2.secret)
    with pytest.raises(KeyMismatchError):
        ctx.decrypt(ct2, keys)
    # combining ciphertexts or keys of different key sets
    with pytest.raises(KeyMismatchError):
        ctx.add(a, ct2)
    with pytest.raises(KeyMismatchError):
        ctx.mul(a, ct2, keys, rescale=False)
    with pytest.raises(KeyMismatchError):
        ctx.mul(a, b, keys2, rescale=False)
    with pytest.raises(KeyMismatchError):
        ctx.rotate(a, 1, keys2)


def test_wrong_key_objects(main, cts):
    ctx, keys = main
    _, _, a, b = cts
    with pytest.raises(ParameterError, match="relinearization"):
        ctx.mul(a, b, rescale=False)  # no keys
    with pytest.raises(ParameterError, match="relinearization"):
        ctx.mul(a, b, None, rescale=True)
    rot_key = keys.galois[next(iter(keys.galois))]
    with pytest.raises(ParameterError, match="relinearization key"):
        ctx.mul(a, b, rot_key, rescale=False)
    with pytest.raises(ParameterError, match="Galois"):
        ctx.rotate(a, 1, None)
    with pytest.raises(ParameterError, match="Galois element"):
        ctx.rotate(a, 1, keys.relin)  # a switching key for the wrong element
    with pytest.raises(ParameterError, match="SecretKey"):
        ctx.decrypt(a, keys.public)
    with pytest.raises(ParameterError, match="SecretKey"):
        ctx.decrypt(a, keys.evaluation_keys())
    with pytest.raises(ParameterError, match="PublicKey"):
        ctx.encrypt(np.ones(2), "not a key")
    with pytest.raises(ParameterError, match="Ciphertext"):
        ctx.add(np.ones(4), a)
    with pytest.raises(ParameterError, match="rotations"):
        ctx.keygen(rotations="all")
    with pytest.raises(ParameterError, match="CKKSParameters"):
        hemx.Context("set_a")


def test_too_many_values(main):
    ctx, keys = main
    with pytest.raises(SlotError, match="do not fit"):
        ctx.encrypt(np.ones(ctx.slots + 1), keys)
    with pytest.raises(SlotError):
        ctx.encrypt(np.ones((2, ctx.slots * 2)), keys)
    with pytest.raises(SlotError):
        ctx.encode(np.ones(ctx.params.n))


# ------------------------------------------------------------------------------------------------ evaluation keys
def test_evaluation_keys_have_no_secret(main, cts):
    ctx, keys = main
    x, y, a, b = cts
    ev = keys.evaluation_keys()
    assert type(ev) is EvaluationKeys and not isinstance(ev, KeySet)
    assert not hasattr(ev, "secret")
    assert "secret" not in {f.name for f in __import__("dataclasses").fields(ev)}
    assert ev.key_id == keys.key_id and ev.context_id == ctx.id
    assert set(ev.galois) == set(keys.galois) and ev.relin is keys.relin
    ev.galois.clear()  # a copy: the key set keeps its Galois keys
    assert keys.galois
    ev = keys.evaluation_keys()
    # a server can encrypt, multiply and rotate with it; only the secret holder decrypts
    c = ctx.encrypt(y, ev.public)
    prod = ctx.mul(a, c, ev, rescale=True)
    rot = ctx.rotate(prod, -2, ev)
    check_bits("evaluation keys: mul + rotate", np.roll(x * y, 2), ctx.decrypt(rot, keys), MUL_BITS)
    many = ctx.rotate_many(a, [1, -1, 5, -7], ev)
    check_bits("evaluation keys: rotate_many", np.roll(x, -5), ctx.decrypt(many[2], keys), FRESH_BITS)
    conj = ctx.conjugate(a, ev)
    check_bits("evaluation keys: conjugate", x, ctx.decrypt(conj, keys), FRESH_BITS)


def test_key_reprs_hide_material(main):
    _, keys = main
    assert repr(keys.secret) == f"SecretKey(key_id={keys.key_id})"
    assert repr(keys.public) == f"PublicKey(key_id={keys.key_id})"
    assert "coeffs" not in repr(keys) and "[" in repr(keys)  # lists Galois elements only
