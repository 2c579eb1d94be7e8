"""hemx.io: exact bit packing, round trips of every serializable object, and rejection of bad data.

The objects come from a tiny ring (N = 2^6, 6 limbs, 2 special primes) so every test is cheap; the packing is
checked separately against a big-integer reference for many widths and lengths.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
import struct
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import hemx
import hemx.io as hio
from hemx.ckks import EvaluationKeys, InsecureParametersWarning, PublicKey, SwitchingKey
from hemx.errors import (
    ContextMismatchError,
    KeyMismatchError,
    ParameterError,
    SecretMaterialError,
    SerializationError,
)
from hemx.io import bitpack, container, keytags

from tests.helpers.ckks_helpers import INSECURE, context, context_and_keys, small_params

pytestmark = pytest.mark.filterwarnings(INSECURE)

LOG_N, LEVELS = 6, 2


def tiny():
    """(context, key set) on N = 64 with a rotation key and the conjugation key (cached for the session)."""
    return context_and_keys(LOG_N, LEVELS, rotations=(1,), conjugation=True)


def values(ctx, seed=0, shape=()):
    return np.random.default_rng(seed).uniform(-1, 1, shape + (ctx.slots,))


def arrays_equal(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


# ------------------------------------------------------------------------------------------------------------
# bit packing against a big-integer reference
# ------------------------------------------------------------------------------------------------------------


def reference_words(row, width) -> list[int]:
    """Value i at bits [i w, (i + 1) w) of one integer, cut into 64-bit words (padded to whole 64-value blocks)."""
    stream = 0
    for i, v in enumerate(row):
        stream |= int(v) << (i * width)
    count = bitpack.packed_words(len(row), width)
    return [(stream >> (64 * j)) & ((1 << 64) - 1) for j in range(count)]


@pytest.mark.parametrize("width", [1, 2, 3, 17, 28, 31, 32])
@pytest.mark.parametrize("count", [1, 63, 64, 65, 200])
def test_pack_rows_matches_big_integer_reference(width, count):
    rng = np.random.default_rng(width * 1000 + count)
    rows = rng.integers(0, 1 << width, size=(3, count), dtype=np.uint64).astype(np.uint32)
    words = bitpack.pack_rows(rows, width)
    assert words.dtype == np.uint64 and words.shape == (3, bitpack.packed_words(count, width))
    for r in range(3):
        assert [int(w) for w in words[r]] == reference_words(rows[r], width)
    back, padding_clear = bitpack.unpack_rows(words, count, width)
    assert padding_clear and arrays_equal(back, rows)


@settings(deadline=None)
@given(width=st.integers(1, 32), count=st.integers(1, 300), seed=st.integers(0, 2**32 - 1))
def test_pack_rows_round_trip_random(width, count, seed):
    rows = np.random.default_rng(seed).integers(0, 1 << width, size=(2, count), dtype=np.uint64).astype(np.uint32)
    words = bitpack.pack_rows(rows, width)
    assert [int(w) for w in words[1]] == reference_words(rows[1], width)
    back, padding_clear = bitpack.unpack_rows(words, count, width)
    assert padding_clear and arrays_equal(back, rows)


def test_residues_pack_per_limb_width_and_size():
    moduli = (3, 97, (1 << 28) - 57, (1 << 31) - 1)  # widths 2, 7, 28, 31
    rng = np.random.default_rng(5)
    x = np.stack([rng.integers(0, q, size=(2, 3, 40)) for q in moduli], axis=-2).astype(np.uint32)  # (2, 3, 4, 40)
    blob = bitpack.pack_residues(x, moduli)
    per_limb = 2 * 3 * 40
    assert len(blob) == bitpack.residues_nbytes(x.shape, moduli) == 8 * sum(
        -(-per_limb // 64) * w for w in (2, 7, 28, 31))
    assert arrays_equal(bitpack.unpack_residues(blob, x.shape, moduli), x)


def test_residues_reject_values_not_below_modulus():
    moduli = (97, 101)
    x = np.zeros((2, 64), dtype=np.uint32)
    x[1, 5] = 101
    with pytest.raises(SerializationError, match="not reduced"):
        bitpack.pack_residues(x, moduli)
    # the same bits written as if the moduli were 128 and 128 (same widths) are refused on reading
    blob = bitpack.pack_residues(x, (128, 128))
    with pytest.raises(SerializationError, match="not below its modulus"):
        bitpack.unpack_residues(blob, x.shape, moduli)


def test_residues_reject_stray_padding_bits_and_wrong_size():
    moduli = (97,)
    x = np.arange(10, dtype=np.uint32)[None, :]  # 10 values: the block is padded with 54 zeros
    blob = bytearray(bitpack.pack_residues(x, moduli))
    blob[-1] |= 0x80  # the top bit belongs to a padding value
    with pytest.raises(SerializationError, match="padding"):
        bitpack.unpack_residues(bytes(blob), x.shape, moduli)
    with pytest.raises(SerializationError, match="need"):
        bitpack.unpack_residues(bytes(blob[:-8]), x.shape, moduli)


# ------------------------------------------------------------------------------------------------------------
# round trips
# ------------------------------------------------------------------------------------------------------------


def round_trip(obj, ctx=None, into=None):
    """dumps -> loads, checking serialized_size against the real length."""
    data = hio.dumps(obj, ctx)
    assert hio.serialized_size(obj, ctx) == len(data)
    return hio.loads(data, into if into is not None else ctx), data


def test_parameters_round_trip_and_fingerprint():
    params = small_params(LOG_N, LEVELS, hamming_weight=16, sigma=3.5)
    with pytest.warns(InsecureParametersWarning):  # a stored insecure set warns again when it is rebuilt
        back, data = round_trip(params)
    assert back == params
    assert hio.kind_of(data) == "parameters"
    assert hio.fingerprint(back) == hio.fingerprint(params)
    # the fingerprint ignores the name, and changes with anything that matters
    assert hio.fingerprint(dataclasses.replace(params, name="renamed")) == hio.fingerprint(params)
    for change in (dict(log_scale=50.0), dict(sigma=3.2), dict(hamming_weight=None),
                   dict(moduli=params.moduli[:-2], level_sizes=params.level_sizes[:-1])):
        assert hio.fingerprint(dataclasses.replace(params, **change)) != hio.fingerprint(params), change


def test_secure_parameters_load_without_warning():
    params = hemx.CKKSParameters.preset("secure_13")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hio.loads(hio.dumps(params)) == params


def test_context_round_trip_carries_slots_not_kernels():
    ctx = context(LOG_N, LEVELS, slots=8)
    data = hio.dumps(ctx)
    assert hio.serialized_size(ctx) == len(data) and hio.kind_of(data) == "context"
    back = hio.loads(data, ntt="butterfly")  # the loader picks its own kernels
    assert isinstance(back, hemx.Context) and back is not ctx and back.id != ctx.id
    assert back.params == ctx.params and back.slots == 8
    assert "butterfly" in back.plan.describe() and "mat3" in ctx.plan.describe()
    with pytest.raises(ParameterError, match="slots"):
        hio.loads(data, ntt="butterfly", slots=16)


def test_public_and_switching_keys_round_trip():
    ctx, keys = tiny()
    pk, _ = round_trip(keys.public, ctx)
    assert isinstance(pk, PublicKey) and arrays_equal(pk.data, keys.public.data)
    assert (pk.context_id, pk.key_id) == (ctx.id, keys.key_id)
    for key in [keys.relin] + list(keys.galois.values()):
        back, _ = round_trip(key, ctx)
        assert isinstance(back, SwitchingKey) and arrays_equal(back.data, key.data)
        assert (back.kind, back.galois, back.key_id) == (key.kind, key.galois, key.key_id)


def test_evaluation_keys_round_trip():
    ctx, keys = tiny()
    ek = keys.evaluation_keys()
    back, data = round_trip(ek, ctx)
    assert type(back) is EvaluationKeys and hio.kind_of(data) == "evaluation_keys"
    assert back.key_id == keys.key_id and back.context_id == ctx.id
    assert arrays_equal(back.public.data, ek.public.data) and arrays_equal(back.relin.data, ek.relin.data)
    assert sorted(back.galois) == sorted(ek.galois) and len(ek.galois) == 2  # rotation by 1 and conjugation
    for g, key in ek.galois.items():
        assert arrays_equal(back.galois[g].data, key.data) and back.galois[g].galois == g
    # a bundle without relinearization key
    no_relin = dataclasses.replace(ek, relin=None)
    assert round_trip(no_relin, ctx)[0].relin is None


def test_plaintext_round_trip():
    ctx, _ = tiny()
    z = values(ctx, 1, (3,)) + 1j * values(ctx, 2, (3,))
    pt = ctx.encode(z, level=1, scale=2.0**40)
    back, _ = round_trip(pt, ctx)
    assert isinstance(back, hemx.Plaintext) and arrays_equal(back.data, pt.data)
    assert (back.level, back.scale, back.slots, back.is_complex) == (1, 2.0**40, ctx.slots, True)
    assert back.bound == pt.bound is not None
    assert np.array_equal(ctx.decode(back), ctx.decode(pt))


def test_magnitude_bound_is_format_version_3_and_checked():
    """A ciphertext's public magnitude bound (issue 26) travels as ``max_abs`` (format version 3), so a server's
    bootstrap checks it; one without a bound is written as version 1, as before; a bad or out-of-version field is
    refused."""
    ctx, keys = tiny()
    ct = ctx.encrypt(values(ctx, 4), keys.public)
    assert ct.bound is not None
    data = bytearray(hio.dumps(ct, ctx))
    assert struct.unpack_from("<H", data, 8)[0] == container.MAGNITUDE_BOUND_VERSION == 3
    assert hio.loads(bytes(data), ctx).bound == ct.bound
    unbounded = ct.replace(bound=None)
    plain = hio.dumps(unbounded, ctx)
    assert struct.unpack_from("<H", plain, 8)[0] == container.BASE_VERSION
    assert hio.loads(plain, ctx).bound is None
    env = container.decode(bytes(data))
    for bad in (-1.0, "8", True, None):
        header = dict(env.header, max_abs=bad)
        forged = container.encode("ciphertext", header, [(n, bytes(b)) for n, b in env.sections.items()], 3)
        with pytest.raises(SerializationError):
            hio.loads(forged, ctx)
    # the field in version-1 data is unknown to that version
    header = dict(env.header, max_abs=8.0)
    forged = container.encode("ciphertext", header, [(n, bytes(b)) for n, b in env.sections.items()], 1)
    with pytest.raises(SerializationError, match="unknown fields"):
        hio.loads(forged, ctx)


@pytest.mark.parametrize("batch", [(), (2, 3)])
def test_ciphertext_round_trip(batch):
    ctx, keys = tiny()
    x = values(ctx, 3, batch)
    ct = ctx.encrypt(x, keys.public)
    back, data = round_trip(ct, ctx)
    assert arrays_equal(back.data, ct.data) and back.batch_shape == batch
    for field in ("level", "scale", "slots", "is_complex", "context_id", "key_id", "bound"):
        assert getattr(back, field) == getattr(ct, field), field
    assert np.array_equal(ctx.decrypt(back, keys.secret), ctx.decrypt(ct, keys.secret))
    # a lower level, complex slots, an unusual scale
    low = ctx.drop_level(ctx.encrypt(ctx.encode(x + 0.5j, scale=2.0**45.5), keys.public), 0)
    back_low, _ = round_trip(low, ctx)
    assert (back_low.level, back_low.scale, back_low.is_complex) == (0, 2.0**45.5, True)
    assert arrays_equal(back_low.data, low.data)


def test_bit_packing_shrinks_ciphertexts():
    ctx, keys = tiny()
    ct = ctx.encrypt(values(ctx), keys.public)
    raw = ct.data.size * 4
    bits = 2 * ctx.params.n * sum(bitpack.width_of(q) for q in ctx.params.moduli)  # N is a multiple of 64
    section = container.decode(hio.dumps(ct, ctx)).sections["data"]
    assert len(section) == bits // 8 < raw
    assert {bitpack.width_of(q) for q in ctx.params.moduli} == {28, 31}


def test_loading_into_another_context_with_the_same_parameters():
    ctx, keys = tiny()
    other = hemx.Context(ctx.params, ntt="mat3")
    x = values(ctx, 4)
    ct = hio.loads(hio.dumps(ctx.encrypt(x, keys.public), ctx), other)
    secret = hio.loads_secret_key(hio.dumps_secret_key(keys.secret, ctx), other)
    assert ct.context_id == other.id and secret.context_id == other.id and ct.key_id == secret.key_id
    assert np.max(np.abs(other.decrypt(ct, secret) - x)) < 1e-9
    with pytest.raises(ContextMismatchError):
        ctx.decrypt(ct, keys.secret)  # rebound: the original context no longer accepts it


def retag(data: bytes, tag: str) -> bytes:
    """The same object under another key-set tag (as if written by another process), checksum recomputed."""
    env = container.decode(data)
    return container.encode(env.kind, dict(env.header, key_tag=tag), [(n, bytes(v)) for n, v in env.sections.items()])


def test_key_tags_keep_keys_and_ciphertexts_together():
    ctx, keys = tiny()
    ct_bytes = hio.dumps(ctx.encrypt(values(ctx, 5), keys.public), ctx)
    ek_bytes = hio.dumps(keys.evaluation_keys(), ctx)
    sk_bytes = hio.dumps_secret_key(keys.secret, ctx)
    # a key set met for the first time (another writer): keys, secret and ciphertexts get one new local id
    tag = secrets.token_hex(16)
    ek = hio.loads(retag(ek_bytes, tag), ctx)
    ct = hio.loads(retag(ct_bytes, tag), ctx)
    sk = hio.loads_secret_key(retag(sk_bytes, tag), ctx)
    assert ek.key_id == ct.key_id == sk.key_id == ek.relin.key_id != keys.key_id
    assert np.array_equal(ctx.decrypt(ct, sk), ctx.decrypt(hio.loads(ct_bytes, ctx), keys.secret))
    with pytest.raises(KeyMismatchError):
        ctx.decrypt(ct, keys.secret)
    # writing it again gives the foreign tag back, so the original writer recognizes its key set
    assert container.decode(hio.dumps(ct, ctx)).header["key_tag"] == tag
    assert keytags.key_id_for(container.decode(ct_bytes).header["key_tag"]) == keys.key_id


def test_secret_key_only_through_its_own_functions(tmp_path):
    ctx, keys = tiny()
    with pytest.raises(SecretMaterialError, match="dumps_secret_key"):
        hio.dumps(keys.secret, ctx)
    with pytest.raises(SecretMaterialError, match="evaluation_keys"):
        hio.dumps(keys, ctx)
    data = hio.dumps_secret_key(keys.secret, ctx)
    assert len(container.decode(data).sections["coeffs"]) == ctx.params.n // 4  # 2 bits per coefficient
    with pytest.raises(SecretMaterialError, match="loads_secret_key"):
        hio.loads(data, ctx)
    with pytest.raises(SerializationError, match="expected a serialized secret key"):
        hio.loads_secret_key(hio.dumps(keys.public, ctx), ctx)
    sk = hio.loads_secret_key(data, ctx)
    assert arrays_equal(sk.coeffs, keys.secret.coeffs) and arrays_equal(sk.ntt, keys.secret.ntt)
    path = tmp_path / "secret.hemx"
    assert hio.save_secret_key(path, keys.secret, ctx) == len(data)
    if os.name == "posix":
        assert (path.stat().st_mode & 0o777) == 0o600
    assert arrays_equal(hio.load_secret_key(path, ctx).ntt, keys.secret.ntt)


def test_secret_key_with_wrong_hamming_weight_is_rejected():
    params = small_params(LOG_N, LEVELS, hamming_weight=8)
    ctx = hemx.Context(params, sampler=hemx.ckks.Sampler.insecure_for_tests(3))
    keys = ctx.keygen(relin=False)
    env = container.decode(hio.dumps_secret_key(keys.secret, ctx))
    stored = np.ones((1, params.n), dtype=np.uint32)  # all zero coefficients
    forged = container.encode("secret_key", env.header, [("coeffs", bitpack.pack_residues(stored, (3,)))])
    with pytest.raises(SerializationError, match="Hamming"):
        hio.loads_secret_key(forged, ctx)


def test_save_and_load_files(tmp_path):
    ctx, keys = tiny()
    ct = ctx.encrypt(values(ctx, 6), keys.public)
    path = tmp_path / "ct.hemx"
    size = hio.save(path, ct, ctx)
    assert size == path.stat().st_size == hio.serialized_size(ct, ctx)
    assert arrays_equal(hio.load(path, ctx, expect=hemx.Ciphertext).data, ct.data)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct.hemx"]  # no temporary file left behind


# ------------------------------------------------------------------------------------------------------------
# misuse of the API
# ------------------------------------------------------------------------------------------------------------


def test_api_misuse_is_refused():
    ctx, keys = tiny()
    ct = ctx.encrypt(values(ctx), keys.public)
    data = hio.dumps(ct, ctx)
    with pytest.raises(ParameterError, match="context"):
        hio.dumps(ct)
    with pytest.raises(ParameterError, match="context"):
        hio.loads(data)
    with pytest.raises(ContextMismatchError):
        hio.dumps(ct, context(LOG_N, LEVELS, seed=2))  # same parameters, but not the context that made it
    with pytest.raises(ParameterError):
        hio.dumps(ctx.params, ctx)
    with pytest.raises(ParameterError):
        hio.loads(data, ctx, ntt="mat3")
    with pytest.raises(SerializationError, match="cannot serialize"):
        hio.dumps(np.zeros(3), ctx)
    with pytest.raises(SerializationError, match="expected a serialized PublicKey"):
        hio.loads(data, ctx, expect=PublicKey)
    with pytest.raises(SerializationError, match="must be bytes"):
        hio.loads(data.decode("latin-1"), ctx)


# ------------------------------------------------------------------------------------------------------------
# corrupted, truncated, forged and mismatched data
# ------------------------------------------------------------------------------------------------------------


def with_checksum(body: bytes) -> bytes:
    return body + hashlib.sha256(body).digest()


def forge(data: bytes, *, header=None, drop=(), sections=None, kind=None) -> bytes:
    """Rewrite a container (fields changed / dropped, sections replaced) with a valid checksum."""
    env = container.decode(data)
    head = {k: v for k, v in env.header.items() if k not in drop}
    head.update(header or {})
    secs = sections if sections is not None else [(n, bytes(v)) for n, v in env.sections.items()]
    return container.encode(kind or env.kind, head, secs)


@pytest.fixture(scope="module")
def ct_bytes():
    ctx, keys = tiny()
    ct = ctx.drop_level(ctx.encrypt(values(ctx, 7), keys.public), 0)  # a small object: 2 limbs
    return hio.dumps(ct, ctx)


def regions(data: bytes) -> dict[str, int]:
    header_len = struct.unpack_from("<I", data, 12)[0]
    return {"magic": 3, "version": 8, "kind": 10, "header length": 13, "header": 16 + header_len // 2,
            "payload": 16 + header_len + 20, "checksum": len(data) - 5}


@pytest.mark.parametrize("where", ["magic", "version", "kind", "header length", "header", "payload", "checksum"])
def test_flipped_byte_is_rejected(ct_bytes, where):
    ctx, _ = tiny()
    data = bytearray(ct_bytes)
    data[regions(ct_bytes)[where]] ^= 0x40
    with pytest.raises(SerializationError):
        hio.loads(bytes(data), ctx)


@pytest.mark.parametrize("keep", [0, 7, 15, 16, 40, -33, -32, -1])
def test_truncated_data_is_rejected(ct_bytes, keep):
    ctx, _ = tiny()
    with pytest.raises(SerializationError):
        hio.loads(ct_bytes[:keep], ctx)


def test_appended_bytes_are_rejected(ct_bytes):
    ctx, _ = tiny()
    with pytest.raises(SerializationError, match="checksum"):
        hio.loads(ct_bytes + b"\0", ctx)


@settings(deadline=None)
@given(position=st.integers(0, 10**9), mask=st.integers(1, 255))
def test_any_single_byte_change_is_rejected(ct_bytes, position, mask):
    ctx, _ = tiny()
    data = bytearray(ct_bytes)
    data[position % len(data)] ^= mask
    with pytest.raises(SerializationError):
        hio.loads(bytes(data), ctx)


@settings(deadline=None)
@given(keep=st.integers(0, 10**9))
def test_any_truncation_is_rejected(ct_bytes, keep):
    ctx, _ = tiny()
    with pytest.raises(SerializationError):
        hio.loads(ct_bytes[: keep % len(ct_bytes)], ctx)


def test_wrong_magic_future_version_and_unknown_kind(ct_bytes):
    ctx, _ = tiny()
    body = bytearray(ct_bytes[: -container.DIGEST_SIZE])
    cases = {
        "bad magic": lambda b: b.__setitem__(slice(0, 8), b"\x89PNG\r\n\x1a\n"),
        "newer": lambda b: struct.pack_into("<H", b, 8, container.FORMAT_VERSION + 1),
        "invalid format version": lambda b: struct.pack_into("<H", b, 8, 0),
        "unknown object kind": lambda b: struct.pack_into("<H", b, 10, 99),
    }
    for message, patch in cases.items():
        forged = bytearray(body)
        patch(forged)
        with pytest.raises(SerializationError, match=message):
            hio.loads(with_checksum(bytes(forged)), ctx)
    with pytest.raises(SerializationError, match="not hemx"):
        hio.kind_of(b"PK\x03\x04" + bytes(40))


def test_wrong_kind_is_rejected(ct_bytes):
    ctx, keys = tiny()
    # the ciphertext's bytes relabelled as a public key, with a valid checksum: its header does not fit
    with pytest.raises(SerializationError):
        hio.loads(forge(ct_bytes, kind="public_key"), ctx)
    pk_bytes = hio.dumps(keys.public, ctx)
    with pytest.raises(SerializationError, match="expected a serialized Ciphertext"):
        hio.loads(pk_bytes, ctx, expect=hemx.Ciphertext)


def test_other_parameters_or_slots_are_rejected(ct_bytes):
    ctx, keys = tiny()
    other_dnum = hemx.Context(small_params(LOG_N, LEVELS, dnum=2), ntt="mat3")
    other_chain = hemx.Context(small_params(LOG_N, LEVELS + 1), ntt="mat3")
    sparse = context(LOG_N, LEVELS, slots=8)
    for data in (ct_bytes, hio.dumps(keys.evaluation_keys(), ctx), hio.dumps_secret_key(keys.secret, ctx)):
        for target in (other_dnum, other_chain):
            with pytest.raises(ContextMismatchError, match="parameter set"):
                (hio.loads_secret_key if hio.kind_of(data) == "secret_key" else hio.loads)(data, target)
        with pytest.raises(ContextMismatchError, match="slots=32"):
            (hio.loads_secret_key if hio.kind_of(data) == "secret_key" else hio.loads)(data, sparse)


def test_residue_not_below_modulus_with_valid_checksum(ct_bytes):
    ctx, _ = tiny()
    env = container.decode(ct_bytes)
    shape = tuple(env.header["shape"])
    moduli = ctx.params.moduli[: shape[-2]]
    data = bitpack.unpack_residues(env.sections["data"], shape, moduli)
    data[1, 1, 7] = moduli[1]  # c1, second limb: exactly q
    loose = bitpack.pack_residues(data, tuple(1 << bitpack.width_of(q) for q in moduli))  # same layout
    with pytest.raises(SerializationError, match="not below its modulus"):
        hio.loads(forge(ct_bytes, sections=[("data", loose)]), ctx)


@pytest.mark.parametrize("change", [
    dict(header={"level": 1}),                      # level does not match the limbs stored
    dict(header={"level": 9}),                      # no such level
    dict(header={"level": "0"}),                    # wrong type
    dict(header={"level": True}),                   # booleans are not integers
    dict(header={"scale": -1.0}),
    dict(header={"scale": 1e400}),                  # parses as inf
    dict(header={"is_complex": 0}),
    dict(header={"shape": [2, 4, 64]}),             # the limbs of another level
    dict(header={"shape": [3, 2, 2, 64]}),          # a batch axis the payload does not have
    dict(header={"shape": [2, 2, 32]}),             # another ring degree
    dict(header={"key_tag": "0" * 31}),
    dict(header={"extra": 1}),                      # a field this version does not know
    dict(drop=("scale",)),
    dict(sections=[]),
    dict(sections=[("data", b"")]),
])
def test_forged_header_or_sections_are_rejected(ct_bytes, change):
    ctx, _ = tiny()
    with pytest.raises(SerializationError):
        hio.loads(forge(ct_bytes, **change), ctx)


def test_malformed_header_json_is_rejected(ct_bytes):
    ctx, _ = tiny()
    header_len = struct.unpack_from("<I", ct_bytes, 12)[0]
    prefix, header, rest = ct_bytes[:16], ct_bytes[16 : 16 + header_len], ct_bytes[16 + header_len : -32]
    for bad, message in [(b"[1, 2]", "JSON object"), (b"\xff\xfe", "UTF-8 JSON"), (b'{"level": NaN}', "non-finite"),
                         (b'{"a": 1, "a": 2}', "repeats"), (header[:-1], "UTF-8 JSON")]:
        forged = prefix[:12] + struct.pack("<I", len(bad)) + bad + rest
        with pytest.raises(SerializationError, match=message):
            hio.loads(with_checksum(forged), ctx)
    assert prefix + header + rest + ct_bytes[-32:] == ct_bytes


def test_forged_key_bundles_are_rejected():
    ctx, keys = tiny()
    data = hio.dumps(keys.evaluation_keys(), ctx)
    elements = container.decode(data).header["galois"]
    for change in (dict(header={"galois": elements + [elements[0]]}),  # listed twice
                   dict(header={"galois": [2]}),                      # even: not a Galois element
                   dict(header={"relin": False})):                     # a section nobody asked for
        with pytest.raises(SerializationError):
            hio.loads(forge(data, **change), ctx)
    ks = hio.dumps(keys.relin, ctx)
    with pytest.raises(SerializationError, match="relinearization key has no Galois"):
        hio.loads(forge(ks, header={"galois": 5}), ctx)
    with pytest.raises(SerializationError):
        hio.loads(forge(ks, header={"key_kind": "bootstrap"}), ctx)


def test_dumping_inconsistent_objects_is_refused():
    ctx, keys = tiny()
    ek = keys.evaluation_keys()
    g = sorted(ek.galois)[0]
    swapped = dataclasses.replace(ek, galois={g + 2: ek.galois[g]})
    with pytest.raises(SerializationError, match="under element"):
        hio.dumps(swapped, ctx)
    other_keys = context_and_keys(LOG_N, LEVELS, seed=1, rotations=(), conjugation=False)[1]
    assert other_keys.key_id != keys.key_id
    mixed = dataclasses.replace(ek, relin=dataclasses.replace(ek.relin, key_id=other_keys.key_id))
    with pytest.raises(KeyMismatchError):
        hio.dumps(mixed, ctx)
    bad = dataclasses.replace(keys.public, data=jnp.full_like(keys.public.data, 0xFFFFFFFF))
    with pytest.raises(SerializationError, match="not reduced"):
        hio.dumps(bad, ctx)


@pytest.mark.filterwarnings(INSECURE)
def test_encapsulation_keys_round_trip_and_are_checked():
    """Bootstrapping's switching keys s -> s' and s' -> s travel with the evaluation keys, bit for bit; a bundle
    without them reads back without them (MissingKeyError at bootstrap, never a silent drop)."""
    from hemx.ckks import keygen

    ctx = context(10, 2)
    keys = keygen.generate_keys(ctx, [1], encapsulation_weight=8)
    server = keys.evaluation_keys()
    back = hio.loads(hio.dumps(server, ctx), ctx)
    assert sorted(back.switching) == ["from_sparse", "to_sparse"]
    for name, key in server.switching.items():
        assert back.switching[name].kind == name
        assert np.array_equal(np.asarray(back.switching[name].data), np.asarray(key.data))
    plain = ctx.keygen(rotations=[1]).evaluation_keys()
    assert hio.loads(hio.dumps(plain, ctx), ctx).switching == {}
    with pytest.raises(hemx.errors.MissingKeyError):
        plain.switching_key("to_sparse", "bootstrapping")
    # a key filed under the wrong name is refused when dumping
    bad = dataclasses.replace(server, switching={"to_sparse": server.switching["from_sparse"]})
    with pytest.raises(hemx.errors.SerializationError):
        hio.dumps(bad, ctx)
    # s -> s' -> s keeps the message
    x = np.random.default_rng(3).uniform(-1, 1, ctx.slots)
    ct = ctx.encrypt(x, keys)
    twice = ctx.switch_key(ctx.switch_key(ct, keys.switching["to_sparse"]), keys.switching["from_sparse"])
    assert np.max(np.abs(ctx.decrypt(twice, keys) - x)) < 2.0 ** -35
