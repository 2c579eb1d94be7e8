"""Object codecs: hemx objects <-> (kind, header fields, residue sections), with full validation.

Every residue array is a *section* packed at the bit width of its limb's modulus (:mod:`hemx.io.bitpack`).
Objects bound to a context (keys, plaintexts, ciphertexts) carry the fingerprint of its parameter set and its
slot count; loading them needs a :class:`~hemx.ckks.Context` with the same fingerprint and slots, and binds
the result to that context. Keys and ciphertexts also carry their key-set tag (:mod:`hemx.io.keytags`).

What a stored array must look like (N the ring degree, L the ciphertext limbs, k the special primes,
D = dnum digits, ``limbs(level)`` the limbs at a level):

==================  ===================================  ==================================
object              array shape                          residues modulo
==================  ===================================  ==================================
Ciphertext          ``(..., 2, limbs(level), N)``        ``q_0 .. q_{limbs-1}``
Plaintext           ``(..., limbs(level), N)``           ``q_0 .. q_{limbs-1}``
PublicKey           ``(2, L, N)``                        ``q_0 .. q_{L-1}``
SwitchingKey        ``(D, 2, k + L, N)``                 ``p_0 .. p_{k-1}, q_0 .. q_{L-1}``
seeded SwitchingKey ``(D, k + L, N)``: the ``b_d`` only    ``p_0 .. p_{k-1}, q_0 .. q_{L-1}``
SecretKey coeffs    ``(1, N)``, stored as ``s + 1``      3
==================  ===================================  ==================================

Seeded switching keys (format version 2): a key made by ``keygen`` carries the 32-byte seed its uniform halves
``a_d`` were expanded from (:func:`hemx.ckks.sampling.expand_seed`); it is stored as its ``b_d`` plus the seed in
the header (64 hex digits: ``"seed"`` for a lone key, ``"seeds"`` by section name in a bundle), and loading expands
the ``a_d`` again. Half the bytes of the unseeded layout. A key without a seed is stored whole, as in version 1.
Keys made since format version 6 expand their seeds with AES-128 in counter mode (``"xof": "aes128ctr"``), those of
version 5 with ChaCha20 (``"xof": "chacha20"``; ``"xofs"`` by section name in a bundle; absent: SHAKE-256). Such a key loads as the context holds keys (``Context.key_storage``): compact (its ``b_d``
and the stream key, the ``a_d`` generated inside each key switch: nothing to expand) or full (expanded on load).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Sequence

import jax.numpy as jnp
import numpy as np

from hemx.ckks.ciphertext import Ciphertext, Plaintext
from hemx.ckks.context import Context
from hemx.ckks.keygen import full_key, key_dims
from hemx.ckks.keys import EvaluationKeys, KeySet, PublicKey, SecretKey, SwitchingKey
from hemx.ckks.params import CKKSParameters
from hemx.ckks.keys import STREAM_XOFS, XOFS
from hemx.ckks.sampling import SEED_BYTES, expand_seed, stream_key
from hemx.errors import ContextMismatchError, KeyMismatchError, ParameterError, SecretMaterialError, SerializationError
from hemx.io import bitpack, keytags
from hemx.io import parameters as param_codec
from hemx.io.container import (
    AES_XOF_VERSION, BASE_VERSION, LEVELLED_KEYS_VERSION, MAGNITUDE_BOUND_VERSION, NAMED_XOF_VERSION, SEEDED_KEYS_VERSION,
    Envelope,
    HeaderReader,
)

MAX_BATCH_AXES = 16
SECRET_MODULUS = 3  # ternary coefficients -1, 0, 1 stored as residues 0, 1, 2


@dataclasses.dataclass(frozen=True)
class Section:
    """One residue array to store: ``array`` is uint32 ``(..., len(moduli), N)``."""

    name: str
    array: object
    moduli: tuple[int, ...]
    part: int | None = None  # store ``array[:, part]`` only (the b_d of a seeded switching key)

    @property
    def shape(self) -> tuple[int, ...]:
        shape = tuple(self.array.shape)
        return shape if self.part is None else shape[:1] + shape[2:]

    @property
    def nbytes(self) -> int:
        return bitpack.residues_nbytes(self.shape, self.moduli)

    def pack(self) -> bytes:
        host = np.asarray(self.array)
        if self.part is not None:
            host = np.ascontiguousarray(host[:, self.part])
        if host.dtype != np.uint32:
            raise SerializationError(f"section {self.name!r}: residues must be uint32, got {host.dtype}")
        return bitpack.pack_residues(host, self.moduli)


@dataclasses.dataclass(frozen=True)
class Encoded:
    """An object ready for the container: kind, header fields and residue sections (packed on demand)."""

    kind: str
    header: dict
    sections: tuple[Section, ...] = ()
    version: int = BASE_VERSION  # the container's format version: the lowest that has every field used


# ------------------------------------------------------------------------------------------------------------
# shared pieces
# ------------------------------------------------------------------------------------------------------------


def q_moduli(params: CKKSParameters, limbs: int) -> tuple[int, ...]:
    return tuple(params.moduli[:limbs])


def pq_moduli(params: CKKSParameters) -> tuple[int, ...]:
    return tuple(params.special_moduli) + tuple(params.moduli)


def switching_key_shape(params: CKKSParameters, level: int | None = None) -> tuple[int, ...]:
    """``(D, 2, k + L, N)``; for a key serving levels up to ``level``, that level's digits and limbs."""
    num_d, m = key_dims(params, level)
    return (num_d, 2, m, params.n)


def require_context(context, what: str) -> Context:
    if not isinstance(context, Context):
        raise ParameterError(
            f"a {what} is bound to a context: pass the Context (made from the same parameters) as "
            f"`context`, got {type(context).__name__}"
        )
    return context


def _check_owner(obj, context: Context, what: str) -> None:
    if obj.context_id != context.id:
        raise ContextMismatchError(f"the {what} belongs to another context than the one given")


def _bound_header(context: Context) -> dict:
    return {"parameters_fingerprint": param_codec.fingerprint(context.params), "slots": context.slots}


def _check_bound(reader: HeaderReader, context: Context, what: str) -> None:
    stored = reader.string("parameters_fingerprint")
    if stored != param_codec.fingerprint(context.params):
        raise ContextMismatchError(
            f"the {what} was made with another parameter set (fingerprint {stored[:16]}...) than the context's "
            f"({context.params.describe()}); load it into a context built from the sender's parameters"
        )
    slots = reader.integer("slots", 1)
    if slots != context.slots:
        raise ContextMismatchError(
            f"the {what} was made by a context packing {slots} slots, this one packs {context.slots}; build the "
            f"context with slots={slots}"
        )


def _read_tag(reader: HeaderReader) -> int:
    tag = reader.string("key_tag")
    if not keytags.is_tag(tag):
        raise SerializationError(f"malformed key tag {tag!r}")
    return keytags.key_id_for(tag)


def _check_shape(shape: Sequence[int], tail: tuple[int, ...], what: str, batch: bool) -> tuple[int, ...]:
    """``shape`` is ``(*batch, *tail)`` (batch axes only where allowed); raise SerializationError if not."""
    shape = tuple(int(s) for s in shape)
    extra = len(shape) - len(tail)
    ok = extra >= 0 and shape[extra:] == tail and (extra <= MAX_BATCH_AXES if batch else extra == 0)
    if not ok or any(s < 0 for s in shape):
        want = "(..., " + ", ".join(map(str, tail)) + ")" if batch else str(tail)
        raise SerializationError(f"the {what} has shape {shape}; with these parameters it must be {want}")
    return shape


def _read_sections(envelope: Envelope, expected: Mapping[str, tuple[tuple[int, ...], tuple[int, ...]]]) -> dict:
    """Unpack exactly the expected sections ``{name: (shape, moduli)}`` into uint32 numpy arrays."""
    if set(envelope.sections) != set(expected):
        raise SerializationError(
            f"the {envelope.kind} holds sections {sorted(envelope.sections)}, expected {sorted(expected)}"
        )
    return {name: bitpack.unpack_residues(envelope.sections[name], shape, moduli)
            for name, (shape, moduli) in expected.items()}


def _level_limbs(params: CKKSParameters, level: int, what: str) -> int:
    if not 0 <= level <= params.max_level:
        raise SerializationError(f"the {what} is at level {level}; these parameters have levels 0..{params.max_level}")
    return params.limbs_at_level(level)


def _check_galois(params: CKKSParameters, kind: str, galois: int | None) -> None:
    if kind != "galois" and galois is not None:
        what = "relinearization" if kind == "relin" else f"{kind.replace('_', '-')} switching"
        raise SerializationError(f"a {what} key has no Galois element")
    if kind == "galois" and (galois is None or galois % 2 == 0 or not 1 < galois < 2 * params.n):
        raise SerializationError(f"Galois element {galois} is not an odd number in (1, 2N) for N = {params.n}")


# ------------------------------------------------------------------------------------------------------------
# parameters and contexts (no context needed to load)
# ------------------------------------------------------------------------------------------------------------


def encode_parameters(params: CKKSParameters) -> Encoded:
    return Encoded("parameters", {"parameters": param_codec.to_header(params)})


def decode_parameters(envelope: Envelope) -> CKKSParameters:
    reader = HeaderReader(envelope.header, "parameters")
    params = param_codec.from_header(reader.nested("parameters"))
    reader.finish()
    _read_sections(envelope, {})
    return params


def encode_context(context: Context) -> Encoded:
    return Encoded("context", {"parameters": param_codec.to_header(context.params), "slots": context.slots})


def decode_context(envelope: Envelope, **context_options) -> Context:
    """A new Context for the stored parameters and slot count; ``context_options`` as for :class:`Context`."""
    reader = HeaderReader(envelope.header, "context")
    params = param_codec.from_header(reader.nested("parameters"))
    slots = reader.integer("slots", 1, params.max_slots)
    reader.finish()
    if slots & (slots - 1):
        raise SerializationError(f"slot count {slots} is not a power of two")
    _read_sections(envelope, {})
    if "slots" in context_options:
        raise ParameterError("the slot count comes from the serialized context; do not pass slots=")
    return Context(params, slots=slots, **context_options)


# ------------------------------------------------------------------------------------------------------------
# ciphertexts and plaintexts
# ------------------------------------------------------------------------------------------------------------


def _encode_message(obj, context: Context, what: str, tail_lead: tuple[int, ...], extra: dict) -> Encoded:
    """Shared by ciphertexts (tail ``(2, limbs, N)``) and plaintexts (tail ``(limbs, N)``)."""
    _check_owner(obj, context, what)
    params = context.params
    limbs = _level_limbs(params, obj.level, what)
    if obj.slots != context.slots:
        raise ContextMismatchError(f"the {what} packs {obj.slots} slots, its context {context.slots}")
    shape = _check_shape(obj.data.shape, tail_lead + (limbs, params.n), what, batch=True)
    header = dict(_bound_header(context), level=obj.level, scale=float(obj.scale), is_complex=bool(obj.is_complex),
                  shape=list(shape), **extra)
    version = BASE_VERSION
    if obj.bound is not None:  # the public magnitude bound (format version 3; none: written as before)
        header["max_abs"], version = float(obj.bound), MAGNITUDE_BOUND_VERSION
    return Encoded(what, header, (Section("data", obj.data, q_moduli(params, limbs)),), version)


def _decode_message(envelope: Envelope, context: Context, what: str, tail_lead: tuple[int, ...]):
    reader = HeaderReader(envelope.header, what)
    _check_bound(reader, context, what)
    params = context.params
    level = reader.integer("level", 0, params.max_level)
    limbs = _level_limbs(params, level, what)
    scale = reader.number("scale", positive=True)
    is_complex = reader.boolean("is_complex")
    shape = _check_shape(reader.integers("shape", 0), tail_lead + (limbs, params.n), what, batch=True)
    key_id = _read_tag(reader) if what == "ciphertext" else None
    bound = None
    if envelope.version >= MAGNITUDE_BOUND_VERSION and reader.has("max_abs"):  # older data: an unknown field below
        bound = reader.number("max_abs", non_negative=True)
    reader.finish()
    data = _read_sections(envelope, {"data": (shape, q_moduli(params, limbs))})["data"]
    fields = dict(data=jnp.asarray(data), level=level, scale=scale, slots=context.slots, is_complex=is_complex,
                  context_id=context.id, bound=bound)
    return Ciphertext(key_id=key_id, **fields) if what == "ciphertext" else Plaintext(**fields)


def encode_ciphertext(ct: Ciphertext, context: Context) -> Encoded:
    return _encode_message(ct, context, "ciphertext", (2,), {"key_tag": keytags.tag_for(ct.key_id)})


def decode_ciphertext(envelope: Envelope, context: Context) -> Ciphertext:
    return _decode_message(envelope, context, "ciphertext", (2,))


def encode_plaintext(pt: Plaintext, context: Context) -> Encoded:
    return _encode_message(pt, context, "plaintext", (), {})


def decode_plaintext(envelope: Envelope, context: Context) -> Plaintext:
    return _decode_message(envelope, context, "plaintext", ())


# ------------------------------------------------------------------------------------------------------------
# keys
# ------------------------------------------------------------------------------------------------------------


def _check_key_owner(key, context: Context, key_id: int, what: str) -> None:
    _check_owner(key, context, what)
    if key.key_id != key_id:
        raise KeyMismatchError(f"the {what} belongs to key set {key.key_id}, not {key_id}")


def _public_section(key: PublicKey, context: Context, name: str) -> Section:
    params = context.params
    _check_shape(key.data.shape, (2, params.num_limbs, params.n), "public key", batch=False)
    return Section(name, key.data, q_moduli(params, params.num_limbs))


SWITCHING_KINDS = ("relin", "galois", "to_sparse", "from_sparse")
NAMED_SWITCHING = ("to_sparse", "from_sparse")  # EvaluationKeys.switching: bootstrapping's encapsulation keys


def _switching_section(key: SwitchingKey, context: Context, name: str) -> Section:
    """The section of a switching key: its ``b_d`` alone when it is seeded (the seed goes in the header)."""
    params = context.params
    if key.kind not in SWITCHING_KINDS:
        raise SerializationError(f"unknown switching-key kind {key.kind!r}")
    _check_galois(params, key.kind, key.galois)
    _check_key_level(params, key.level)
    shape = switching_key_shape(params, key.level)
    _check_shape(key.data.shape, shape[:1] + (1 if key.compact else 2,) + shape[2:], "switching key", batch=False)
    moduli = pq_moduli(params)[: shape[2]]
    if key.seed is None:
        return Section(name, _full_data(key, context), moduli)
    _check_seed_matches(key, params)
    return Section(name, key.data, moduli, part=0)


def _full_data(key: SwitchingKey, context: Context):
    """The pairs ``(b_d, a_d)`` of a key: its data, or a compact key's ``b_d`` with its generated ``a_d``."""
    return full_key(context, key).data


def _check_key_level(params: CKKSParameters, level) -> None:
    if level is not None and (isinstance(level, bool) or not isinstance(level, int) or
                              not 0 <= level <= params.max_level):
        raise SerializationError(f"a switching key's level must be in [0, {params.max_level}], got {level!r}")


def _check_seed_matches(key: SwitchingKey, params: CKKSParameters) -> None:
    """Spot check before storing a seed instead of ``a_d``: the first limb of every digit's ``a_d`` must be the
    seed's expansion (one limb in ``k + L``, so cheap), else the written key would silently differ from this one; a
    compact key's stream key must be its seed's."""
    if not isinstance(key.seed, bytes) or len(key.seed) != SEED_BYTES:
        raise SerializationError(f"a switching key's seed must be {SEED_BYTES} bytes")
    if key.compact:
        if key.xof not in STREAM_XOFS or not np.array_equal(np.asarray(key.stream), stream_key(key.seed)):
            raise SerializationError("the compact switching key's stream key does not match its seed (the key was "
                                     "changed after keygen); rebuild it with dataclasses.replace(key, seed=None) to "
                                     "store it whole")
        return
    digits = key.data.shape[0]
    first = pq_moduli(params)[:1]
    want = expand_seed(key.seed, first, params.n, digits, xof=key.xof)[:, 0]
    if not np.array_equal(np.asarray(key.data[:, 1, 0]), want):
        raise SerializationError(
            "the switching key's uniform half does not match its seed (the key data was changed after keygen); "
            "rebuild it with dataclasses.replace(key, seed=None) to store it whole"
        )


def _seeded_key(b: np.ndarray, seed: bytes, xof: str, context: Context, kind: str, galois: int | None, key_id: int,
                level: int | None) -> SwitchingKey:
    """A seeded key from its stored ``b_d`` ``(D, M, N)`` and its seed (``M = k + L``, or fewer limbs for a key that
    serves the lower levels only): compact where the context keeps compact keys and the expansion is a stream one
    (AES-128 or ChaCha20), else with its ``a_d`` expanded."""
    params = context.params
    meta = dict(seed=seed, level=level, xof=xof)
    if xof in STREAM_XOFS and context.key_storage == "compact":
        return SwitchingKey(jnp.asarray(b)[:, None], kind, galois, context.id, key_id,
                            stream=jnp.asarray(stream_key(seed)), **meta)
    a = expand_seed(seed, pq_moduli(params)[: b.shape[1]], params.n, b.shape[0], xof=xof)
    return SwitchingKey(jnp.asarray(np.stack([b, a], axis=1)), kind, galois, context.id, key_id, **meta)


def _seeded_shape(params: CKKSParameters, level: int | None = None) -> tuple[int, ...]:
    d, _, m, n = switching_key_shape(params, level)
    return (d, m, n)


def _check_levels_allowed(envelope: Envelope, what: str) -> None:
    if envelope.version < LEVELLED_KEYS_VERSION:
        raise SerializationError(
            f"the {what} header has levelled keys, which format version {envelope.version} does not have "
            f"(they came with version {LEVELLED_KEYS_VERSION}); the data was altered"
        )


def _xof_version(xof: str) -> int:
    """The first format version that names the seed expansion ``xof`` (SHAKE-256: never named)."""
    return AES_XOF_VERSION if xof == "aes128ctr" else NAMED_XOF_VERSION


def _check_xof_allowed(envelope: Envelope, what: str, seeded: bool, xofs=()) -> None:
    if envelope.version < NAMED_XOF_VERSION:
        raise SerializationError(
            f"the {what} header names a seed expansion, which format version {envelope.version} does not have "
            f"(it came with version {NAMED_XOF_VERSION}); the data was altered"
        )
    for xof in xofs:
        if envelope.version < _xof_version(xof):
            raise SerializationError(
                f"the {what} header names the {xof} seed expansion, which format version {envelope.version} does "
                f"not have (it came with version {_xof_version(xof)}); the data was altered")
    if not seeded:
        raise SerializationError(f"the {what} header names a seed expansion but holds no seed")


def _check_seeds_allowed(envelope: Envelope, what: str) -> None:
    if envelope.version < SEEDED_KEYS_VERSION:
        raise SerializationError(
            f"the {what} header has seeded keys, which format version {envelope.version} does not have "
            f"(they came with version {SEEDED_KEYS_VERSION}); the data was altered"
        )


def _key_header(context: Context, key_id: int) -> dict:
    return dict(_bound_header(context), key_tag=keytags.tag_for(key_id))


def _key_reader(envelope: Envelope, context: Context, what: str) -> tuple[HeaderReader, int]:
    """The header reader of a key object, checked against ``context``, and the key-set tag it names."""
    reader = HeaderReader(envelope.header, what)
    _check_bound(reader, context, what)
    return reader, _read_tag(reader)


def encode_public_key(key: PublicKey, context: Context) -> Encoded:
    _check_owner(key, context, "public key")
    return Encoded("public_key", _key_header(context, key.key_id), (_public_section(key, context, "data"),))


def decode_public_key(envelope: Envelope, context: Context) -> PublicKey:
    reader, key_id = _key_reader(envelope, context, "public key")
    reader.finish()
    params = context.params
    data = _read_sections(envelope, {"data": ((2, params.num_limbs, params.n), q_moduli(params, params.num_limbs))})
    return PublicKey(jnp.asarray(data["data"]), context.id, key_id)


def encode_switching_key(key: SwitchingKey, context: Context) -> Encoded:
    _check_owner(key, context, "switching key")
    section = _switching_section(key, context, "data")
    header = dict(_key_header(context, key.key_id), key_kind=key.kind, galois=key.galois)
    version = BASE_VERSION
    if key.level is not None:  # absent for keys of every level: older readers see the same header
        header["level"] = key.level
        version = LEVELLED_KEYS_VERSION
    if key.seed is None:
        return Encoded("switching_key", header, (section,), version) if version != BASE_VERSION else \
            Encoded("switching_key", header, (section,))
    header["seed"] = key.seed.hex()
    version = max(version, SEEDED_KEYS_VERSION)
    if key.xof != "shake256":  # absent for SHAKE-256 seeds: versions 2-4 read them as before
        header["xof"], version = key.xof, _xof_version(key.xof)
    return Encoded("switching_key", header, (section,), version)


def decode_switching_key(envelope: Envelope, context: Context) -> SwitchingKey:
    reader, key_id = _key_reader(envelope, context, "switching key")
    kind = reader.string("key_kind", SWITCHING_KINDS)
    galois = reader.optional_integer("galois")
    seed = reader.hex_bytes("seed", SEED_BYTES) if reader.has("seed") else None
    xof = reader.string("xof", XOFS) if reader.has("xof") else "shake256"
    params = context.params
    level = reader.integer("level", 0, params.max_level) if reader.has("level") else None
    reader.finish()
    if seed is not None:
        _check_seeds_allowed(envelope, "switching key")
    if "xof" in envelope.header:
        _check_xof_allowed(envelope, "switching key", seed is not None, (xof,))
    if level is not None:
        _check_levels_allowed(envelope, "switching key")
    _check_galois(params, kind, galois)
    shape = switching_key_shape(params, level)
    moduli = pq_moduli(params)[: shape[2]]
    if seed is None:
        data = _read_sections(envelope, {"data": (shape, moduli)})["data"]
        return SwitchingKey(jnp.asarray(data), kind, galois, context.id, key_id, level=level, xof=xof)
    b = _read_sections(envelope, {"data": (_seeded_shape(params, level), moduli)})["data"]
    return _seeded_key(b, seed, xof, context, kind, galois, key_id, level)


def _galois_section_name(g: int) -> str:
    return f"galois:{g}"


def encode_evaluation_keys(keys: EvaluationKeys, context: Context) -> Encoded:
    """The public, relinearization and Galois keys of a bundle; a :class:`KeySet` (holding the secret) is refused."""
    if isinstance(keys, KeySet):
        raise SecretMaterialError(
            "a KeySet holds the secret key and is never serialized as a whole; serialize "
            "keys.evaluation_keys() for a server (and hemx.io.dumps_secret_key for the client's own storage)"
        )
    _check_owner(keys, context, "evaluation keys")
    _check_key_owner(keys.public, context, keys.key_id, "public key")
    sections = [_public_section(keys.public, context, "public")]
    seeds: dict[str, str] = {}
    xofs: dict[str, str] = {}
    levels: dict[str, int] = {}

    def add(key: SwitchingKey, name: str) -> None:
        sections.append(_switching_section(key, context, name))
        if key.seed is not None:
            seeds[name] = key.seed.hex()
            if key.xof != "shake256":
                xofs[name] = key.xof
        if key.level is not None:
            levels[name] = key.level

    if keys.relin is not None:
        _check_key_owner(keys.relin, context, keys.key_id, "relinearization key")
        if keys.relin.kind != "relin":
            raise SerializationError(f"the bundle's relinearization key is a {keys.relin.kind} key")
        add(keys.relin, "relin")
    for g in sorted(keys.galois):
        key = keys.galois[g]
        _check_key_owner(key, context, keys.key_id, f"Galois key {g}")
        if key.kind != "galois" or key.galois != g:
            raise SerializationError(f"the bundle lists a {key.kind} key for element {key.galois} under element {g}")
        add(key, _galois_section_name(g))
    for name in sorted(keys.switching):
        key = keys.switching[name]
        _check_key_owner(key, context, keys.key_id, f"{name} key")
        if name not in NAMED_SWITCHING or key.kind != name:
            raise SerializationError(f"the bundle lists a {key.kind} key under the name {name!r}")
        add(key, f"switching:{name}")
    header = dict(_key_header(context, keys.key_id), relin=keys.relin is not None, galois=sorted(keys.galois))
    if keys.switching:  # absent (not an empty list) when there are none, so older readers see the same header
        header["encapsulation"] = True
    version = BASE_VERSION
    if levels:  # section name -> the highest level the key stored there serves (absent: every level)
        header["levels"] = levels
        version = LEVELLED_KEYS_VERSION
    if not seeds:  # no seeded key (and no levelled one): the version-1 layout, byte for byte
        return Encoded("evaluation_keys", header, tuple(sections), version) if version != BASE_VERSION else \
            Encoded("evaluation_keys", header, tuple(sections))
    header["seeds"] = seeds  # section name -> seed of the key stored there as its b_d alone
    version = max(version, SEEDED_KEYS_VERSION)
    if xofs:  # section name -> the seed's expansion where it is not SHAKE-256 (absent: versions 2-4 read it)
        header["xofs"], version = xofs, max(_xof_version(x) for x in xofs.values())
    return Encoded("evaluation_keys", header, tuple(sections), version)


def decode_evaluation_keys(envelope: Envelope, context: Context) -> EvaluationKeys:
    reader, key_id = _key_reader(envelope, context, "evaluation keys")
    has_relin = reader.boolean("relin")
    elements = reader.integers("galois")
    names = NAMED_SWITCHING if "encapsulation" in envelope.header and reader.boolean("encapsulation") else ()
    has_seeds = reader.has("seeds")
    seeds = reader.hex_bytes_map("seeds", SEED_BYTES) if has_seeds else {}
    xofs = reader.string_map("xofs", XOFS) if reader.has("xofs") else {}
    params = context.params
    has_levels = reader.has("levels")
    levels = reader.integer_map("levels", 0, params.max_level) if has_levels else {}
    reader.finish()
    if has_seeds:
        _check_seeds_allowed(envelope, "evaluation keys")
    if "xofs" in envelope.header:
        _check_xof_allowed(envelope, "evaluation keys", has_seeds, tuple(xofs.values()))
        if not xofs or set(xofs) - set(seeds):
            raise SerializationError(f"the evaluation keys name seed expansions for {sorted(set(xofs) - set(seeds))} "
                                     "which hold no seed, or an empty map")
    if has_levels:
        _check_levels_allowed(envelope, "evaluation keys")
    if len(set(elements)) != len(elements):
        raise SerializationError("the evaluation keys list a Galois element twice")
    for g in elements:
        _check_galois(params, "galois", g)
    key_sections = (["relin"] if has_relin else []) + [_galois_section_name(g) for g in elements] + [
        f"switching:{name}" for name in names]
    for what, listed in (("seeds", seeds), ("levels", levels)):
        unknown = sorted(set(listed) - set(key_sections))
        if unknown or (what in envelope.header and not listed):
            raise SerializationError(f"the evaluation keys list {what} for {unknown or 'no'} switching keys; "
                                     f"they hold {key_sections}")
    expected = {"public": ((2, params.num_limbs, params.n), q_moduli(params, params.num_limbs))}
    for name in key_sections:
        level = levels.get(name)
        shape = _seeded_shape(params, level) if name in seeds else switching_key_shape(params, level)
        expected[name] = (shape, pq_moduli(params)[: switching_key_shape(params, level)[2]])
    arrays = _read_sections(envelope, expected)

    def switching(name: str, kind: str, g: int | None) -> SwitchingKey:
        seed = seeds.get(name)
        data = arrays.pop(name)  # drop the stored b_d as soon as the key is built (large key sets)
        if seed is not None:
            return _seeded_key(data, seed, xofs.get(name, "shake256"), context, kind, g, key_id, levels.get(name))
        return SwitchingKey(jnp.asarray(data), kind, g, context.id, key_id, level=levels.get(name))

    return EvaluationKeys(
        public=PublicKey(jnp.asarray(arrays["public"]), context.id, key_id),
        relin=switching("relin", "relin", None) if has_relin else None,
        galois={g: switching(_galois_section_name(g), "galois", g) for g in elements},
        context_id=context.id,
        key_id=key_id,
        switching={name: switching(f"switching:{name}", name, None) for name in names},
    )


def encode_secret_key(key: SecretKey, context: Context) -> Encoded:
    """The ternary coefficients only (the NTT form is recomputed on load), 2 bits each."""
    _check_owner(key, context, "secret key")
    coeffs = np.asarray(key.coeffs)
    ternary = coeffs.dtype.kind in "iu" and not np.any(np.abs(coeffs.astype(np.int64)) > 1)
    if coeffs.shape != (context.params.n,) or not ternary:
        raise SerializationError("the secret key's coefficients must be N integers in {-1, 0, 1}")
    stored = (coeffs.astype(np.int64) + 1).astype(np.uint32)[None, :]
    return Encoded("secret_key", _key_header(context, key.key_id), (Section("coeffs", stored, (SECRET_MODULUS,)),))


def decode_secret_key(envelope: Envelope, context: Context) -> SecretKey:
    reader, key_id = _key_reader(envelope, context, "secret key")
    reader.finish()
    params = context.params
    stored = _read_sections(envelope, {"coeffs": ((1, params.n), (SECRET_MODULUS,))})["coeffs"][0]
    coeffs = stored.astype(np.int8) - 1
    if params.hamming_weight is not None and np.count_nonzero(coeffs) != params.hamming_weight:
        raise SerializationError(f"the secret key does not have the parameters' Hamming weight {params.hamming_weight}")
    ntt = context.ring.ntt(context.ring.from_ints(coeffs))
    return SecretKey(coeffs, ntt, context.id, key_id)


# ------------------------------------------------------------------------------------------------------------
# dispatch
# ------------------------------------------------------------------------------------------------------------

# kind -> (class, encoder, decoder, needs a context to load). SecretKey is deliberately absent: only the
# explicitly named secret-key functions of hemx.io handle it.
CODECS: dict[str, tuple[type, Callable, Callable, bool]] = {
    "parameters": (CKKSParameters, encode_parameters, decode_parameters, False),
    "context": (Context, encode_context, decode_context, False),
    "public_key": (PublicKey, encode_public_key, decode_public_key, True),
    "switching_key": (SwitchingKey, encode_switching_key, decode_switching_key, True),
    "evaluation_keys": (EvaluationKeys, encode_evaluation_keys, decode_evaluation_keys, True),
    "plaintext": (Plaintext, encode_plaintext, decode_plaintext, True),
    "ciphertext": (Ciphertext, encode_ciphertext, decode_ciphertext, True),
}
