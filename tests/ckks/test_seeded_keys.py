"""Seeded switching keys (issues 14, 27): every key's uniform half a_d is the expansion of a 32-byte seed: the
ChaCha20 streams of hemx.kernels.prng for keys made now (which compact keys generate inside each key switch), and
SHAKE-256 for keys made before format version 5 (still loaded).

Checks both expansions (exact uniformity, independence from the limb order and level they are expanded at,
rejection of bad seeds) and key generation (fresh seed per key, determinism under ``insecure_for_tests``, keys
still pytrees under ``jax.jit``, compact keys equal to full ones). Serialization of seeded keys is tested in
``tests/io/test_seeded_keys.py``; the ChaCha20 stream itself in ``tests/kernels/test_prng.py``.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

import hemx
from hemx.ckks import SwitchingKey
from hemx.ckks import keygen as keygen_mod
from hemx.ckks.keys import DEFAULT_XOF
from hemx.ckks.sampling import SEED_BYTES, Sampler, check_seed, expand_seed, stream_key
from hemx.errors import ParameterError

from tests.helpers.ckks_helpers import FAST_NTT, INSECURE, small_params

pytestmark = pytest.mark.filterwarnings(INSECURE)

LOG_N, LEVELS = 6, 2
FIXED_SEED = bytes(range(SEED_BYTES))


def fresh_context(sampler_seed: int) -> hemx.Context:
    """A new (uncached) context, so each test owns its sampler's state."""
    return hemx.Context(small_params(LOG_N, LEVELS), ntt=FAST_NTT, sampler=Sampler.insecure_for_tests(sampler_seed))


def all_switching_keys(keys) -> list[SwitchingKey]:
    return [keys.relin] + [keys.galois[g] for g in sorted(keys.galois)] + [keys.switching[n]
                                                                          for n in sorted(keys.switching)]


@pytest.fixture(scope="module")
def keyed():
    """(context, key set) with relinearization, a rotation, conjugation and the two encapsulation keys."""
    ctx = fresh_context(11)
    return ctx, keygen_mod.generate_keys(ctx, [1], conjugation=True, encapsulation_weight=8)


# ------------------------------------------------------------------------------------------------------------
# the expansion
# ------------------------------------------------------------------------------------------------------------


XOFS = ("aes128ctr", "chacha20", "shake256")


@pytest.mark.parametrize("xof", XOFS)
def test_expansion_is_exactly_uniform_small_modulus(xof):
    """A tiny modulus (17: 2^32 is not a multiple, so a plain modulo would be biased) gets a flat histogram."""
    q, n, digits = 17, 4096, 4
    x = expand_seed(FIXED_SEED, [q], n, digits, xof=xof)
    assert x.shape == (digits, 1, n) and x.dtype == np.uint32 and int(x.max()) < q
    counts = np.bincount(x.ravel(), minlength=q)
    expected = x.size / q
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 50.0, chi2  # 16 degrees of freedom: P(chi2 > 50) ~ 2e-5 for uniform data (fixed seed: no flake)


@pytest.mark.parametrize("xof", XOFS)
def test_expansion_covers_28_and_31_bit_moduli_uniformly(xof):
    ctx = fresh_context(1)
    basis = ctx.basis  # 31-bit special primes first, then the 28/31-bit Q primes
    x = expand_seed(FIXED_SEED, basis, 4096, 2, xof=xof).astype(np.float64)
    qs = np.asarray(basis, dtype=np.float64)[None, :, None]
    assert np.all(x < qs)
    u = (x / qs).reshape(2 * len(basis), -1)  # in [0, 1): uniform per row
    assert np.all(np.abs(u.mean(axis=1) - 0.5) < 0.03)  # 4096 samples: sd of the mean 0.0045
    bins = np.floor(u * 16).astype(int)
    for row in bins:
        counts = np.bincount(row, minlength=16)
        chi2 = float(((counts - 256.0) ** 2 / 256.0).sum())
        assert chi2 < 55.0, chi2  # 15 degrees of freedom


@pytest.mark.parametrize("xof", XOFS)
def test_expansion_is_deterministic_and_seed_dependent(xof):
    a = expand_seed(FIXED_SEED, [268369921, 2147352577], 256, 3, xof=xof)
    assert np.array_equal(a, expand_seed(bytearray(FIXED_SEED), [268369921, 2147352577], 256, 3, xof=xof))
    other = expand_seed(bytes([1]) + FIXED_SEED[1:], [268369921, 2147352577], 256, 3, xof=xof)
    assert np.mean(a == other) < 0.01
    # digits are separate streams: no digit repeats another
    assert np.mean(a[0] == a[1]) < 0.01 and np.mean(a[1] == a[2]) < 0.01
    # the expansions are different functions of the seed
    for other_name in XOFS:
        if other_name != xof:
            other_xof = expand_seed(FIXED_SEED, [268369921, 2147352577], 256, 3, xof=other_name)
            assert np.mean(a == other_xof) < 0.01


@pytest.mark.parametrize("xof", XOFS)
def test_expansion_does_not_depend_on_limb_order_level_or_digit_count(keyed, xof):
    ctx, keys = keyed
    basis, n = ctx.basis, ctx.params.n
    full = expand_seed(FIXED_SEED, basis, n, 3, xof=xof)
    reordered = list(reversed(basis))
    assert np.array_equal(expand_seed(FIXED_SEED, reordered, n, 3, xof=xof)[:, ::-1], full)
    num_p, limbs = ctx.num_p, ctx.params.limbs_at_level(0)
    level0 = basis[num_p:num_p + limbs]  # Q limbs of level 0 only
    assert np.array_equal(expand_seed(FIXED_SEED, level0, n, 2, xof=xof), full[:2, num_p:num_p + limbs])


def test_a_generated_key_is_its_seeds_aes128ctr_expansion(keyed):
    """A key's a_d is the AES-128 counter expansion of its seed (the default, DEFAULT_XOF), limb by limb (also at the
    lowest level's Q limbs); a compact key generates the same rows (full_key), its stream key is the seed's."""
    ctx, keys = keyed
    basis, n = ctx.basis, ctx.params.n
    num_p, limbs = ctx.num_p, ctx.params.limbs_at_level(0)
    level0 = basis[num_p:num_p + limbs]
    key = keys.galois[min(keys.galois)]
    assert key.xof == "aes128ctr" == DEFAULT_XOF and key.compact == (ctx.key_storage == "compact")
    a = np.asarray(keygen_mod.full_key(ctx, key).data[:, 1])
    assert np.array_equal(expand_seed(key.seed, level0, n, a.shape[0], xof="aes128ctr"), a[:, num_p:num_p + limbs])
    assert np.array_equal(expand_seed(key.seed, basis, n, a.shape[0], xof="aes128ctr"), a)
    assert not np.array_equal(expand_seed(key.seed, basis, n, a.shape[0], xof="chacha20"), a)
    if key.compact:
        assert np.array_equal(np.asarray(key.stream), stream_key(key.seed))
        assert np.array_equal(np.asarray(keygen_mod.compact_key(ctx, keygen_mod.full_key(ctx, key)).data),
                              np.asarray(key.data))
    with pytest.raises(ParameterError, match="unknown seed expansion"):
        expand_seed(key.seed, basis, n, 1, xof="aes")


@pytest.mark.parametrize("seed", [b"", b"\x00" * 31, b"\x00" * 33, "00" * 32, None, 7, np.zeros(32, np.uint8)])
def test_bad_seeds_are_refused(seed):
    with pytest.raises(ParameterError, match="32 bytes"):
        expand_seed(seed, [17], 16)
    with pytest.raises(ParameterError, match="32 bytes"):
        check_seed(seed)


def test_bad_expansion_arguments_are_refused():
    for moduli in ([1], [0], [1 << 32], [-5]):
        with pytest.raises(ParameterError):
            expand_seed(FIXED_SEED, moduli, 16)
    for n in (0, -1, 2.5, True):
        with pytest.raises(ParameterError):
            expand_seed(FIXED_SEED, [17], n)
    with pytest.raises(ParameterError):
        expand_seed(FIXED_SEED, [17], 16, -1)


# ------------------------------------------------------------------------------------------------------------
# key generation
# ------------------------------------------------------------------------------------------------------------


def test_every_switching_key_is_seeded_with_its_own_seed(keyed):
    _, keys = keyed
    switching = all_switching_keys(keys)
    assert len(switching) == 5 and all(k.seeded and len(k.seed) == SEED_BYTES for k in switching)
    assert len({k.seed for k in switching}) == len(switching)
    assert "seeded" in repr(keys.relin) and keys.relin.seed.hex() not in repr(keys.relin)


def test_key_bytes_is_what_a_key_holds(keyed):
    """``keygen.key_bytes``, the size plans count keys at, is the made key's ``nbytes``: compact (this context's
    storage where the native kernels are built) or converted to full, at every level or one level's rows."""
    ctx, keys = keyed
    compact = ctx.key_storage == "compact"
    assert keys.relin.nbytes == keygen_mod.key_bytes(ctx.params, compact=compact)
    full = keygen_mod.full_key(ctx, keys.relin)
    assert full.nbytes == keygen_mod.key_bytes(ctx.params) and not full.compact
    small = keygen_mod.compact_key(ctx, full)
    assert small.nbytes == keygen_mod.key_bytes(ctx.params, compact=True) and small.compact
    assert keygen_mod.key_bytes(ctx.params, compact=True) == (keygen_mod.key_bytes(ctx.params) // 2) + 32
    level = ctx.params.max_level - 1
    (levelled,) = ctx.keygen(rotations=[1], rotation_level=level).galois.values()
    assert levelled.nbytes == keygen_mod.key_bytes(ctx.params, level, compact=levelled.compact)
    assert keygen_mod.key_bytes(ctx.params, level) < keygen_mod.key_bytes(ctx.params)


def test_keygen_is_deterministic_under_insecure_for_tests():
    one = all_switching_keys(keygen_mod.generate_keys(fresh_context(5), [1], encapsulation_weight=8))
    two = all_switching_keys(keygen_mod.generate_keys(fresh_context(5), [1], encapsulation_weight=8))
    three = all_switching_keys(keygen_mod.generate_keys(fresh_context(6), [1], encapsulation_weight=8))
    for a, b, c in zip(one, two, three):
        assert a.seed == b.seed and np.array_equal(np.asarray(a.data), np.asarray(b.data))
        assert a.seed != c.seed


def test_secure_sampler_draws_fresh_seeds():
    smp = Sampler()
    seeds = {smp.seed() for _ in range(8)}
    assert len(seeds) == 8 and all(len(s) == SEED_BYTES for s in seeds)


def test_seeded_keys_still_switch_keys(keyed):
    ctx, keys = keyed
    x = np.random.default_rng(3).uniform(-1, 1, ctx.slots)
    ct = ctx.encrypt(x, keys.public)
    assert np.max(np.abs(ctx.decrypt(ctx.rotate(ct, 1, keys), keys.secret).real - np.roll(x, -1))) < 1e-6
    assert np.max(np.abs(ctx.decrypt(ctx.mul(ct, ct, keys, rescale=False), keys.secret).real - x * x)) < 1e-6


def test_switching_key_seed_field_is_checked():
    data = np.zeros((1, 2, 2, 4), np.uint32)
    for bad in (b"short", "00" * 32, bytearray(32), 5):
        with pytest.raises(ParameterError, match="seed"):
            SwitchingKey(data, "relin", None, 1, 1, seed=bad)
    assert SwitchingKey(data, "relin", None, 1, 1).seed is None  # the field is optional
    stream = np.zeros(8, np.uint32)
    with pytest.raises(ParameterError, match="expansion"):
        SwitchingKey(data, "relin", None, 1, 1, xof="aes")
    with pytest.raises(ParameterError, match="compact"):  # a stream key with both halves stored
        SwitchingKey(data, "relin", None, 1, 1, stream=stream)
    with pytest.raises(ParameterError, match="stream key"):  # the b halves alone, without their stream key
        SwitchingKey(data[:, :1], "relin", None, 1, 1)
    compact = SwitchingKey(data[:, :1], "relin", None, 1, 1, stream=stream)
    assert compact.compact and compact.nbytes == data[:, :1].nbytes + 32 and "compact" in repr(compact)


def test_a_compact_keys_data_alone_is_refused_by_the_kernels(keyed):
    """key.data of a compact key (its b halves) handed to a key-switching kernel: a clear error, not a wrong
    result; key.material (the data and the stream key) works."""
    from hemx.ckks import evaluator

    ctx, keys = keyed
    if not keys.relin.compact:
        pytest.skip("keys are full here (no native seeded kernels)")
    ct = ctx.encrypt(np.zeros(ctx.slots), keys.public)
    t = ctx.level_tables(ct.level)
    args = dict(num_p=ctx.num_p, reduction=ctx.reduction, dataflow="mp")
    with pytest.raises(ParameterError, match="key.material"):
        evaluator.mul_relin(ct.data, ct.data, keys.relin.data, ctx.plan, t, **args)
    out = evaluator.mul_relin(ct.data, ct.data, keys.relin.material, ctx.plan, t, **args)
    assert np.array_equal(np.asarray(out), np.asarray(ctx.mul(ct, ct, keys, rescale=False).data))


def test_switching_keys_are_pytrees_under_jit(keyed):
    _, keys = keyed
    key = keys.galois[min(keys.galois)]
    leaves, tree = jax.tree_util.tree_flatten(key)
    assert leaves[0] is key.data and len(leaves) == (2 if key.compact else 1)  # a compact key's stream key
    back = jax.tree_util.tree_unflatten(tree, leaves)
    assert back.seed == key.seed and back.galois == key.galois and back.kind == key.kind

    @jax.jit
    def first_b(k: SwitchingKey):
        assert k.seed == key.seed  # static: visible at trace time
        return k.data[:, 0]

    assert np.array_equal(np.asarray(first_b(key)), np.asarray(key.data[:, 0]))
    doubled = jax.tree_util.tree_map(lambda v: v, {"k": key})["k"]
    assert isinstance(doubled, SwitchingKey) and dataclasses.replace(doubled, seed=None).seed is None
