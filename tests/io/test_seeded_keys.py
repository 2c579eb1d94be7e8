"""Serialization of seeded switching keys and loading of older files.

A seeded key is stored as its b_d plus the 32-byte seed of its a_d. Keys made now expand their seeds with the
ChaCha20 streams (format version 5, ``"xof": "chacha20"``) and load compact (b_d and the stream key) or full (a_d
expanded), as the context keeps keys. Files written before seeded keys (format version 1, ``tests/io/data/v1_*.bin``)
and with SHAKE-256 seeds (versions 2 and 4, ``tests/io/data/v4_*.bin``; both generated with the code of their time)
still load bit for bit, and re-serialize to the same bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import struct

import numpy as np
import pytest

import hemx
import hemx.io as hio
import hemx.io.bitpack
from hemx.ckks import EvaluationKeys, SwitchingKey
from hemx.ckks import keygen as keygen_mod
from hemx.ckks.sampling import SEED_BYTES, Sampler
from hemx.errors import DecryptionError, SerializationError
from hemx.io import container

from tests.helpers.ckks_helpers import FAST_NTT, INSECURE, small_params

pytestmark = pytest.mark.filterwarnings(INSECURE)

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# SHA-256 of the fixture's key arrays (public, relin, Galois by element, encapsulation keys by name), computed by
# the code that wrote it (format version 1, before seeded keys)
V1_KEYS_DIGEST = "4de76eab33a002e9af8f81f0c560449105c8d4590ade818033163fc317884453"
# the same for tests/io/data/v4_*.bin: SHAKE-256 seeds (format versions 2 and 4, a levelled Galois key), written by
# commit a683720 (small_params(6, 2), the mat3 NTT, Sampler.insecure_for_tests(29), keys for [1], conjugation,
# encapsulation weight 8, the rotation by 1 at level 1)
V4_KEYS_DIGEST = "71ee9adc0a573cd4f07dc7e7003becfd6c0398bc2877cf0de2345b62018bd42a"


def read(name: str) -> bytes:
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


def version_of(data: bytes) -> int:
    return struct.unpack_from("<H", data, 8)[0]


def key_list(keys) -> list:
    return ([keys.public, keys.relin] + [keys.galois[g] for g in sorted(keys.galois)]
            + [keys.switching[n] for n in sorted(keys.switching)])


def full(ctx, key):
    """A key's pairs (b_d, a_d): compact keys expanded (public keys as they are)."""
    return keygen_mod.full_key(ctx, key).data if isinstance(key, SwitchingKey) else key.data


def digest(keys, ctx=None) -> str:
    """SHA-256 of the keys' full arrays (compact keys expanded with ``ctx``)."""
    h = hashlib.sha256()
    for k in key_list(keys):
        h.update(np.asarray(k.data if ctx is None else full(ctx, k)).tobytes())
    return h.hexdigest()


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.fixture(scope="module")
def keyed():
    """(context, key set): relinearization, rotation by 1, conjugation and the encapsulation keys, all seeded."""
    ctx = hemx.Context(small_params(6, 2), ntt=FAST_NTT, sampler=Sampler.insecure_for_tests(23))
    return ctx, keygen_mod.generate_keys(ctx, [1], conjugation=True, encapsulation_weight=8)


def rotation_error(ctx, keys, secret, steps: int = 1, level: int | None = None) -> float:
    x = np.random.default_rng(9).uniform(-1, 1, ctx.slots)
    ct = ctx.encrypt(x, keys.public)
    if level is not None:
        ct = ctx.drop_level(ct, level)
    return float(np.max(np.abs(ctx.decrypt(ctx.rotate(ct, steps, keys), secret).real - np.roll(x, -steps))))


def mul_error(ctx, keys, secret) -> float:
    x = np.random.default_rng(8).uniform(-1, 1, ctx.slots)
    ct = ctx.encrypt(x, keys.public)
    return float(np.max(np.abs(ctx.decrypt(ctx.mul(ct, ct, keys, rescale=False), secret).real - x * x)))


# ------------------------------------------------------------------------------------------------------------
# round trips
# ------------------------------------------------------------------------------------------------------------


def test_seeded_switching_key_round_trip_is_bit_exact(keyed):
    ctx, keys = keyed
    for key in key_list(keys)[1:]:
        assert key.compact and key.xof == "aes128ctr"  # the native kernels generate a_d: compact by default
        data = hio.dumps(key, ctx)
        assert version_of(data) == container.AES_XOF_VERSION == 6
        header = container.decode(data).header
        assert header["seed"] == key.seed.hex() and header["xof"] == "aes128ctr"
        back = hio.loads(data, ctx, expect=SwitchingKey)
        assert back.seed == key.seed and back.kind == key.kind and back.galois == key.galois and back.compact
        assert same(back.data, key.data) and same(back.stream, key.stream)
        assert hio.dumps(back, ctx) == data  # the loaded key writes the same bytes


def test_seeded_evaluation_keys_round_trip_and_compute(keyed):
    ctx, keys = keyed
    ev = keys.evaluation_keys()
    data = hio.dumps(ev, ctx)
    assert len(data) == hio.serialized_size(ev, ctx) and version_of(data) == 6
    header = container.decode(data).header
    seeds = header["seeds"]
    assert sorted(seeds) == ["galois:127", "galois:5", "relin", "switching:from_sparse", "switching:to_sparse"]
    assert header["xofs"] == dict.fromkeys(seeds, "aes128ctr")
    back = hio.loads(data, ctx, expect=EvaluationKeys)
    assert digest(back) == digest(ev)
    assert [k.seed for k in key_list(back)[1:]] == [k.seed for k in key_list(ev)[1:]]
    assert hio.dumps(back, ctx) == data
    assert rotation_error(ctx, back, keys.secret) < 1e-6 and mul_error(ctx, back, keys.secret) < 1e-6
    # the encapsulation keys still switch s -> s' -> s
    x = np.random.default_rng(4).uniform(-1, 1, ctx.slots)
    ct = ctx.encrypt(x, keys.public)
    there = ctx.switch_key(ct, back.switching["to_sparse"])  # under the sparse secret now
    again = ctx.switch_key(there, back.switching["from_sparse"])
    assert np.max(np.abs(ctx.decrypt(again, keys.secret).real - x)) < 1e-6


def test_seeds_halve_the_serialized_size(keyed):
    ctx, keys = keyed
    ev = keys.evaluation_keys()
    whole = dataclasses.replace(ev, relin=dataclasses.replace(ev.relin, seed=None),
                                galois={g: dataclasses.replace(k, seed=None) for g, k in ev.galois.items()},
                                switching={n: dataclasses.replace(k, seed=None) for n, k in ev.switching.items()})
    seeded_size, whole_size = hio.serialized_size(ev, ctx), hio.serialized_size(whole, ctx)
    assert seeded_size < 0.55 * whole_size
    # per key: half the residue bytes, plus the 64 hex digits of the seed (and its field name) in the header
    key_whole = hio.serialized_size(dataclasses.replace(ev.relin, seed=None), ctx)
    key_seeded = hio.serialized_size(ev.relin, ctx)
    d, _, m, n = ev.relin.data.shape
    residues = hemx.io.bitpack.residues_nbytes((d, 2, m, n), ctx.basis)
    seed_field = len(',"seed":""') + 2 * SEED_BYTES + len(',"xof":"aes128ctr"')
    assert abs((key_whole - key_seeded) - (residues // 2 - seed_field)) <= 4  # the section sizes' digits differ


def test_unseeded_keys_are_written_as_version_1(keyed):
    """A key without a seed (e.g. loaded from a version-1 file) keeps the version-1 layout; so do ciphertexts without
    a magnitude bound (a fresh ciphertext carries one: version 3, tests/io/test_io.py)."""
    ctx, keys = keyed
    whole = dataclasses.replace(keys.relin, seed=None)
    data = hio.dumps(whole, ctx)
    assert version_of(data) == 1 and "seed" not in container.decode(data).header
    back = hio.loads(data, ctx)
    assert back.seed is None and not back.compact and same(back.data, full(ctx, keys.relin))
    assert version_of(hio.dumps(ctx.encrypt([1.0], keys.public).replace(bound=None), ctx)) == 1
    assert version_of(hio.dumps(keys.public, ctx)) == 1


def test_mixed_bundle_round_trip(keyed):
    """Seeded and unseeded keys in one bundle: only the seeded ones are stored as b_d + seed."""
    ctx, keys = keyed
    ev = keys.evaluation_keys()
    mixed = dataclasses.replace(ev, relin=dataclasses.replace(ev.relin, seed=None))
    data = hio.dumps(mixed, ctx)
    assert "relin" not in container.decode(data).header["seeds"]
    back = hio.loads(data, ctx)
    assert back.relin.seed is None and back.galois[5].seed == ev.galois[5].seed
    assert digest(back, ctx) == digest(ev, ctx)


# ------------------------------------------------------------------------------------------------------------
# files of format version 1 (written before seeded keys existed)
# ------------------------------------------------------------------------------------------------------------


def test_version_1_files_still_load_bit_exact():
    ctx = hio.loads(read("v1_context.bin"), ntt=FAST_NTT)
    ev_bytes = read("v1_evaluation_keys.bin")
    assert version_of(ev_bytes) == 1
    ev = hio.loads(ev_bytes, ctx, expect=EvaluationKeys)
    secret = hio.loads_secret_key(read("v1_secret_key.bin"), ctx)
    assert digest(ev) == V1_KEYS_DIGEST
    assert all(k.seed is None for k in key_list(ev)[1:])
    assert sorted(ev.galois) == [5, 127] and sorted(ev.switching) == ["from_sparse", "to_sparse"]
    assert hio.dumps(ev, ctx) == ev_bytes  # unseeded keys are written in the version-1 layout, byte for byte
    lone_bytes = read("v1_switching_key.bin")
    lone = hio.loads(lone_bytes, ctx, expect=SwitchingKey)
    assert lone.seed is None and same(lone.data, ev.galois[5].data) and hio.dumps(lone, ctx) == lone_bytes
    assert rotation_error(ctx, ev, secret) < 1e-6 and mul_error(ctx, ev, secret) < 1e-6


def test_shake256_seeded_files_of_versions_2_and_4_still_load_bit_exact():
    """Keys seeded with SHAKE-256 (before format version 5) load expanded (they cannot be compact), compute, and
    write the same bytes again."""
    ctx = hio.loads(read("v4_context.bin"), ntt=FAST_NTT)
    ev_bytes, lone_bytes = read("v4_evaluation_keys.bin"), read("v4_switching_key.bin")
    assert version_of(ev_bytes) == 4 and version_of(lone_bytes) == 2
    assert "xofs" not in container.decode(ev_bytes).header and "xof" not in container.decode(lone_bytes).header
    ev = hio.loads(ev_bytes, ctx, expect=EvaluationKeys)
    secret = hio.loads_secret_key(read("v4_secret_key.bin"), ctx)
    assert ctx.key_storage == "compact"  # the context would keep compact keys; SHAKE-256 ones stay whole
    assert all(k.seed is not None and k.xof == "shake256" and not k.compact for k in key_list(ev)[1:])
    assert ev.galois[5].level == 1 and digest(ev) == V4_KEYS_DIGEST
    assert hio.dumps(ev, ctx) == ev_bytes
    lone = hio.loads(lone_bytes, ctx, expect=SwitchingKey)
    assert lone.xof == "shake256" and same(lone.data, ev.relin.data) and hio.dumps(lone, ctx) == lone_bytes
    assert rotation_error(ctx, ev, secret, level=1) < 1e-6 and mul_error(ctx, ev, secret) < 1e-6
    with pytest.raises(hemx.errors.ParameterError, match="stream expansion"):
        keygen_mod.compact_key(ctx, ev.relin)


def test_compact_and_full_storage_hold_the_same_key(keyed):
    """The same bytes load compact or full as the context keeps keys; the two compute bit-identical ciphertexts and
    write the same bytes; full_key / compact_key convert between them."""
    ctx, keys = keyed
    data = hio.dumps(keys.evaluation_keys(), ctx)
    full_ctx = hio.loads(hio.dumps(ctx), ntt=FAST_NTT, key_storage="full")
    compact_ctx = hio.loads(hio.dumps(ctx), ntt=FAST_NTT, key_storage="compact")
    assert (full_ctx.key_storage, compact_ctx.key_storage) == ("full", "compact")
    loaded_full, loaded_compact = hio.loads(data, full_ctx), hio.loads(data, compact_ctx)
    assert not any(k.compact for k in key_list(loaded_full)[1:]) and all(k.compact for k in key_list(loaded_compact)[1:])
    assert digest(loaded_full) == digest(loaded_compact, compact_ctx) == digest(keys, ctx)
    for k in key_list(loaded_full)[1:]:
        assert k.nbytes == 2 * (keygen_mod.compact_key(full_ctx, k).nbytes - 32)  # b_d alone, plus 32 bytes
        assert same(keygen_mod.compact_key(full_ctx, k).data, k.data[:, :1])
    assert hio.dumps(loaded_full, full_ctx) == hio.dumps(loaded_compact, compact_ctx) == data
    x = np.random.default_rng(3).uniform(-1, 1, ctx.slots)
    secret = hio.loads_secret_key(hio.dumps_secret_key(keys.secret, ctx), full_ctx)
    ct = full_ctx.encrypt(x, loaded_full.public)
    moved = hio.loads(hio.dumps(ct, full_ctx), compact_ctx)
    a = full_ctx.mul(full_ctx.rotate(ct, 1, loaded_full), ct, loaded_full)
    b = compact_ctx.mul(compact_ctx.rotate(moved, 1, loaded_compact), moved, loaded_compact)
    assert same(a.data, b.data)
    assert np.max(np.abs(full_ctx.decrypt(a, secret).real - np.roll(x, -1) * x)) < 1e-6


def test_chacha20_keys_of_format_5_still_load_compact_and_compute(keyed, monkeypatch):
    """Keys made with the ChaCha20 expansion (hemx before the AES-128 default) are written as version 5, load compact
    or full, and compute as before."""
    ctx, keys = keyed
    monkeypatch.setattr(keygen_mod, "DEFAULT_XOF", "chacha20")
    old = keygen_mod.generate_keys(ctx, [1], conjugation=False)
    assert all(k.xof == "chacha20" for k in key_list(old)[1:])
    data = hio.dumps(old.evaluation_keys(), ctx)
    assert version_of(data) == container.NAMED_XOF_VERSION == 5
    assert set(container.decode(data).header["xofs"].values()) == {"chacha20"}
    for storage in ("compact", "full"):
        other = hio.loads(hio.dumps(ctx), ntt=FAST_NTT, key_storage=storage)
        back = hio.loads(data, other)
        assert all(k.compact == (storage == "compact") and k.xof == "chacha20" for k in key_list(back)[1:])
        secret = hio.loads_secret_key(hio.dumps_secret_key(old.secret, ctx), other)
        assert rotation_error(other, back, secret) < 1e-6 and mul_error(other, back, secret) < 1e-6
        assert hio.dumps(back, other) == data


def test_seed_expansion_fields_are_checked(keyed):
    ctx, keys = keyed
    lone = hio.dumps(keys.relin, ctx)
    bundle = hio.dumps(keys.evaluation_keys(), ctx)
    header = container.decode(bundle).header
    whole = hio.dumps(dataclasses.replace(keys.relin, seed=None), ctx)
    cases = {
        "xof on a version-4 key": reencode(lone, version=4),
        "aes128ctr on a version-5 key": reencode(lone, version=5),
        "aes128ctr in a version-5 bundle": reencode(bundle, version=5),
        "xofs on a version-4 bundle": reencode(bundle, version=4),
        "an unknown expansion": reencode(lone, xof="aes"),
        "an unknown expansion in a bundle": reencode(bundle, xofs=dict(header["xofs"], relin="aes")),
        "xof without a seed": reencode(whole, version=5, xof="chacha20"),
        "xofs for an unseeded name": reencode(bundle, xofs=dict(header["xofs"], public="chacha20")),
        "empty xofs": reencode(bundle, xofs={}),
        "xofs not an object": reencode(bundle, xofs=["chacha20"]),
    }
    for what, data in cases.items():
        with pytest.raises(SerializationError):
            hio.loads(data, ctx)
            pytest.fail(what)
    # dropping the name makes the seed a SHAKE-256 one: a valid file, a different key, detectably wrong
    relabelled = hio.loads(reencode(bundle, xofs={k: v for k, v in header["xofs"].items() if k != "galois:5"}), ctx)
    assert relabelled.galois[5].xof == "shake256"
    with pytest.raises(DecryptionError):
        rotation_error(ctx, relabelled, keys.secret)


# ------------------------------------------------------------------------------------------------------------
# tampering and malformed seeds
# ------------------------------------------------------------------------------------------------------------


def reencode(data: bytes, version: int | None = None, **header) -> bytes:
    """The object with header fields replaced (None deletes one), checksum recomputed: a deliberate forgery."""
    env = container.decode(data)
    head = dict(env.header)
    for name, value in header.items():
        if value is None:
            head.pop(name, None)
        else:
            head[name] = value
    return container.encode(env.kind, head, [(n, bytes(v)) for n, v in env.sections.items()],
                            env.version if version is None else version)


def test_a_flipped_seed_byte_is_caught_by_the_checksum(keyed):
    ctx, keys = keyed
    data = bytearray(hio.dumps(keys.galois[5], ctx))
    at = bytes(data).index(keys.galois[5].seed.hex().encode())
    data[at] ^= 0x01  # '0'..'f' -> another character: still inside the header
    with pytest.raises(SerializationError):
        hio.loads(bytes(data), ctx)


def test_a_forged_seed_gives_a_detectably_wrong_key(keyed):
    """With the checksum recomputed a different (valid) seed loads, but the key is wrong: decrypting what it
    rotated fails the decryption check (hemx.errors.DecryptionError)."""
    ctx, keys = keyed
    ev = keys.evaluation_keys()
    data = hio.dumps(ev, ctx)
    seeds = dict(container.decode(data).header["seeds"])
    seeds["galois:5"] = bytes(SEED_BYTES).hex()
    forged = hio.loads(reencode(data, seeds=seeds), ctx)
    assert forged.galois[5].seed == bytes(SEED_BYTES)
    assert rotation_error(ctx, ev, keys.secret) < 1e-6
    with pytest.raises(DecryptionError):
        rotation_error(ctx, forged, keys.secret)


@pytest.mark.parametrize("seed", ["00" * 31, "00" * 33, "0" * 63, "AB" * 32, "zz" * 32, 5, None, ["00" * 32], ""])
def test_malformed_seed_fields_are_refused(keyed, seed):
    ctx, keys = keyed
    lone = hio.dumps(keys.relin, ctx)
    bundle = hio.dumps(keys.evaluation_keys(), ctx)
    if seed is not None:
        with pytest.raises(SerializationError, match="seed"):
            hio.loads(reencode(lone, seed=seed), ctx)
    seeds = dict(container.decode(bundle).header["seeds"], relin=seed)
    with pytest.raises(SerializationError, match="seeds"):
        hio.loads(reencode(bundle, seeds=seeds), ctx)


def test_inconsistent_seed_headers_are_refused(keyed):
    ctx, keys = keyed
    lone = hio.dumps(keys.relin, ctx)
    bundle = hio.dumps(keys.evaluation_keys(), ctx)
    seeds = container.decode(bundle).header["seeds"]
    cases = {
        "seed dropped (b_d alone is too short)": reencode(lone, seed=None),
        "seed on a version-1 file": reencode(lone, version=1),
        "seeds on a version-1 file": reencode(bundle, version=1),
        "seed of the public key": reencode(bundle, seeds=dict(seeds, public=seeds["relin"])),
        "seed of an absent key": reencode(bundle, seeds=dict(seeds, **{"galois:9": seeds["relin"]})),
        "empty seeds": reencode(bundle, seeds={}),
        "seeds not an object": reencode(bundle, seeds=[seeds["relin"]]),
        "seed dropped from the bundle": reencode(bundle, seeds={k: v for k, v in seeds.items() if k != "relin"}),
    }
    for what, data in cases.items():
        with pytest.raises(SerializationError):
            hio.loads(data, ctx)
            pytest.fail(what)
    # a whole (unseeded) key labelled as seeded: its section is twice the expected size
    whole = hio.dumps(dataclasses.replace(keys.relin, seed=None), ctx)
    with pytest.raises(SerializationError):
        hio.loads(reencode(whole, version=2, seed=keys.relin.seed.hex()), ctx)


def test_truncated_seeded_data_is_refused(keyed):
    ctx, keys = keyed
    data = hio.dumps(keys.galois[5], ctx)
    for keep in (10, 200, len(data) // 2, len(data) - 1):
        with pytest.raises(SerializationError):
            hio.loads(data[:keep], ctx)


def test_dumping_a_key_whose_data_no_longer_matches_its_seed_is_refused(keyed):
    ctx, keys = keyed
    key = keys.galois[5]
    other = dataclasses.replace(key, seed=keys.relin.seed)
    with pytest.raises(SerializationError, match="does not match its seed"):
        hio.dumps(other, ctx)
    with pytest.raises(SerializationError, match="does not match its seed"):
        hio.dumps(dataclasses.replace(keys.evaluation_keys(), galois={5: other, 127: keys.galois[127]}), ctx)
    # stored whole instead, it round-trips
    assert same(hio.loads(hio.dumps(dataclasses.replace(key, seed=None), ctx), ctx).data, full(ctx, key))
    # a full key whose a_d is not the seed's expansion is refused the same way
    whole = keygen_mod.full_key(ctx, key)
    with pytest.raises(SerializationError, match="does not match its seed"):
        hio.dumps(dataclasses.replace(whole, seed=keys.relin.seed), ctx)


def test_the_container_refuses_unknown_versions_to_write():
    for version in (0, container.FORMAT_VERSION + 1, "2", 1.0):
        with pytest.raises(SerializationError):
            container.encode("parameters", {}, [], version)
