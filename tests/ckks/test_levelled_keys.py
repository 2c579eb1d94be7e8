"""Keys that serve the lower levels only (``ctx.keygen(rotation_level=l)``): fewer digits and limbs, the same results.

A network's rotations run below a bootstrap's output level, so their keys need only that level's rows: at
``boot_16``'s level 10, 6 -> 3 digits and 62 -> 32 limbs, a quarter of the bytes (issues 27 and 28).
"""

from __future__ import annotations

import struct

import jax
import numpy as np
import pytest

import hemx
from hemx.ckks import Sampler, keygen as keygen_mod
from hemx.errors import LevelError, ParameterError, SerializationError
from hemx.io import container

from tests.helpers.ckks_helpers import INSECURE, small_params

pytestmark = pytest.mark.filterwarnings(INSECURE)


@pytest.fixture(scope="module")
def ctx():
    # digits (0, 4), (4, 7), (7, 10) of 10 Q limbs, 4 P limbs; level l holds 2 (l + 1) Q limbs
    return hemx.Context(small_params(10, 4), planning="off", ntt="mat3", sampler=Sampler.insecure_for_tests(3))


@pytest.fixture(scope="module")
def keys(ctx):
    return ctx.keygen(rotations=[1, 2], conjugation=True, rotation_level=1)


def _x(ctx, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, ctx.slots)


def test_key_dims_follow_the_level():
    p = small_params(10, 4)
    assert keygen_mod.key_dims(p, None) == (3, 4 + 10)  # 4 special limbs
    assert [keygen_mod.key_dims(p, level) for level in range(5)] == [(1, 6), (1, 8), (2, 10), (3, 12), (3, 14)]
    boot = hemx.CKKSParameters.preset("boot_16")
    full, low = keygen_mod.key_dims(boot, None), keygen_mod.key_dims(boot, 10)
    assert full == (6, 62) and low == (3, 32)  # 186 MiB -> 48 MiB per key


def test_shapes_levels_and_reprs(ctx, keys):
    halves = 1 if ctx.key_storage == "compact" else 2  # compact keys: the b halves only
    for g, key in keys.galois.items():
        assert key.level == 1 and key.data.shape == (1, halves, 8, ctx.params.n), g
        assert keygen_mod.full_key(ctx, key).data.shape == (1, 2, 8, ctx.params.n)
        assert "level<=1" in repr(key)
    assert keys.relin.level is None and keys.relin.data.shape == (3, halves, 14, ctx.params.n)
    with pytest.raises(ParameterError, match="level must be in"):
        ctx.keygen(rotations=[1], rotation_level=ctx.params.max_level + 1)
    with pytest.raises(ParameterError):
        ctx.keygen(rotations=[1], rotation_level=1.5)


def test_results_at_and_below_the_level(ctx, keys):
    x = _x(ctx)
    ct = ctx.encrypt(x, keys)
    for level in (1, 0):
        low = ctx.drop_level(ct, level)
        np.testing.assert_allclose(ctx.decrypt(ctx.rotate(low, 1, keys), keys), np.roll(x, -1), atol=1e-9)
        np.testing.assert_allclose(ctx.decrypt(ctx.conjugate(low, keys), keys), x, atol=1e-9)
        outs = ctx.rotate_many(low, [1, 2], keys)
        for out, step in zip(outs, (1, 2)):
            np.testing.assert_allclose(ctx.decrypt(out, keys), np.roll(x, -step), atol=1e-9)


def test_a_ciphertext_above_the_level_is_refused(ctx, keys):
    ct = ctx.encrypt(_x(ctx), keys)
    with pytest.raises(LevelError, match="serves ciphertexts up to level 1"):
        ctx.rotate(ct, 1, keys)
    with pytest.raises(LevelError, match="rotation_level"):
        ctx.rotate_many(ctx.drop_level(ct, 2), [1, 2], keys)


def test_keys_of_several_levels_in_one_hoisted_rotation(ctx):
    """A set with a full key (step 1) and a levelled one (step 2): rotate_many stacks the rows the level reads."""
    g2 = hemx.kernels.automorphism.galois_element(ctx.params.n, 2)
    full = mixed = keygen_mod.generate_keys(ctx, [1, 2], levels={g2: 2})  # one secret, keys of two levels
    assert mixed.galois[g2].level == 2 and sum(k.level is None for k in mixed.galois.values()) == 1
    x = _x(ctx, 1)
    ct = ctx.drop_level(ctx.encrypt(x, full), 2)
    for out, step in zip(ctx.rotate_many(ct, [1, 2], mixed), (1, 2)):
        np.testing.assert_allclose(ctx.decrypt(out, full), np.roll(x, -step), atol=1e-9)


def test_serialization_round_trip_and_version(ctx, keys):
    ek = keys.evaluation_keys()
    blob = hemx.io.dumps(ek, ctx)
    # levelled keys came with version 4; their AES-128 seeds name their expansion (version 6)
    assert struct.unpack_from("<H", blob, 8)[0] == container.AES_XOF_VERSION == container.FORMAT_VERSION
    assert container.LEVELLED_KEYS_VERSION == 4 and "levels" in container.decode(blob).header
    back = hemx.io.loads(blob, ctx)
    for g, key in ek.galois.items():
        assert back.galois[g].level == 1
        assert np.array_equal(np.asarray(back.galois[g].data), np.asarray(key.data))
    assert back.relin.level is None
    x = _x(ctx, 2)
    ct = ctx.drop_level(ctx.encrypt(x, keys), 1)
    np.testing.assert_allclose(ctx.decrypt(ctx.rotate(ct, 2, back), keys), np.roll(x, -2), atol=1e-9)
    one = hemx.io.dumps(ek.galois[next(iter(ek.galois))], ctx)
    assert hemx.io.loads(one, ctx).level == 1
    with pytest.MonkeyPatch.context() as mp:  # a hemx that reads up to version 3 refuses the file, says why
        mp.setattr(container, "FORMAT_VERSION", container.MAGNITUDE_BOUND_VERSION)
        with pytest.raises(SerializationError, match="version"):
            hemx.io.loads(blob, ctx)
    full_keys = ctx.keygen(rotations=[1, 2], conjugation=True)
    assert len(blob) < 0.6 * len(hemx.io.dumps(full_keys.evaluation_keys(), ctx))
    # a key set without levelled keys has no "levels" field (the version is its seeds' expansion's: AES-128, 6)
    full_blob = hemx.io.dumps(full_keys.evaluation_keys(), ctx)
    assert "levels" not in container.decode(full_blob).header and "xofs" in container.decode(full_blob).header
    assert struct.unpack_from("<H", full_blob, 8)[0] == container.AES_XOF_VERSION


@pytest.mark.slow
def test_bootstrap_keys_keep_every_level():
    """keygen(bootstrap=bp, rotation_level=l): the bootstrap's keys serve every level, the extra ones level l (the
    keys made from the bootstrap's parameters alone serve the context's bootstrapper)."""
    params = hemx.CKKSParameters.preset("boot_12", allow_insecure=True)
    bctx = hemx.Context(params, planning="off", sampler=Sampler.insecure_for_tests(5))
    boot = hemx.BootstrapParameters.create(params, slots=bctx.slots)
    extra = next(s for s in range(3, bctx.slots) if hemx.kernels.automorphism.galois_element(params.n, s)
                 not in set(boot.galois_elements))
    keys = bctx.keygen(bootstrap=boot, rotations=[extra], rotation_level=2)
    g_extra = hemx.kernels.automorphism.galois_element(params.n, extra)
    assert keys.galois[g_extra].level == 2
    assert all(keys.galois[g].level is None for g in boot.galois_elements)
    x = np.random.default_rng(3).uniform(-1, 1, bctx.slots)
    fresh = hemx.circuits.bootstrap.bootstrap(bctx, bctx.drop_level(bctx.encrypt(x, keys), 0), keys)
    np.testing.assert_allclose(bctx.decrypt(fresh, keys), x, atol=1e-4)
    low = bctx.drop_level(fresh, 2)
    np.testing.assert_allclose(bctx.decrypt(bctx.rotate(low, extra, keys), keys), np.roll(x, -extra), atol=1e-4)


def test_programs_tell_levelled_keys_apart(ctx, keys, tmp_path, monkeypatch):
    monkeypatch.setenv("HEMX_CACHE_DIR", str(tmp_path))
    prog = hemx.jit(lambda c, k: ctx.rotate(c, 1, k))
    x = _x(ctx, 4)
    ct = ctx.drop_level(ctx.encrypt(x, keys), 1)
    np.testing.assert_allclose(ctx.decrypt(prog(ct, keys), keys), np.roll(x, -1), atol=1e-9)
    full = ctx.keygen(rotations=[1, 2], conjugation=True)
    ct_full = ctx.drop_level(ctx.encrypt(x, full), 1)
    np.testing.assert_allclose(ctx.decrypt(prog(ct_full, full), full), np.roll(x, -1), atol=1e-9)
    assert prog.stats.compiled == 2  # other key shapes, another program
    jax.block_until_ready(ct.data)
