"""The hemx binary container: a versioned envelope with a JSON header, raw sections and a SHA-256.

Layout (all integers little-endian)::

    offset  size  field
    0       8     magic b"\\x89HEMX\\r\\n\\x1a" (a high byte, CR LF and ^Z catch text-mode mangling)
    8       2     format version (uint16): 1; 2 when the object holds seeded switching keys; 3 when a
                  ciphertext or plaintext carries a magnitude bound
    10      2     object kind (uint16), see KINDS
    12      4     header length H (uint32)
    16      H     header: UTF-8 JSON object; its "sections" entry lists [name, byte length] of each section
    16 + H  S     the sections, back to back, in the listed order (S = sum of their lengths)
    end-32  32    SHA-256 of every byte before it

Version 2 (seeded switching keys) adds header fields only: a switching key whose uniform halves ``a_d`` were
expanded from a seed stores its ``b_d`` alone and the seed as 64 hex digits (see :mod:`hemx.io.objects`). Every
object without such a key is still written as version 1, byte for byte as before, so older hemx reads it; this
version reads every one. Version 3 (magnitude bounds) adds one header field to ciphertexts and plaintexts: ``max_abs``,
the public bound on ``max |value|`` the object carries (``Ciphertext.bound``); one without a bound is still written as
version 1. Version 4 adds levelled switching keys (``"level"`` / ``"levels"``). Version 5 names the seed expansion
of seeded keys made with the ChaCha20 streams (``"xof": "chacha20"`` for a lone key, ``"xofs"`` by section name in a
bundle); a seed without that field is expanded with SHAKE-256, as every key of versions 2-4 was. Version 6 adds
the AES-128 counter expansion (``"aes128ctr"``), the one keys are made with now; keys of the other expansions are
still written with the version that first had them.

The checksum detects truncation and accidental corruption; it is not a signature (anyone can recompute it),
so every decoded field is validated as well. Nothing here is executable: no pickle, no object graphs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import struct
from typing import Mapping, Sequence

from hemx.errors import SerializationError

MAGIC = b"\x89HEMX\r\n\x1a"
FORMAT_VERSION = 6  # the newest version this hemx reads and writes
BASE_VERSION = 1  # what objects without seeded keys are written as
SEEDED_KEYS_VERSION = 2  # the first version with seeded switching keys
MAGNITUDE_BOUND_VERSION = 3  # the first version whose ciphertexts / plaintexts may carry max_abs
LEVELLED_KEYS_VERSION = 4  # the first version with switching keys that serve levels up to l only (fewer rows)
NAMED_XOF_VERSION = 5  # the first version whose seeded keys may name their seed expansion ("chacha20")
AES_XOF_VERSION = 6  # the first version whose seeded keys may name the AES-128 counter expansion ("aes128ctr")
PREFIX = struct.Struct("<8sHHI")
DIGEST_SIZE = 32
MAX_HEADER = 1 << 24  # a header is metadata only; anything larger is not ours

KINDS: dict[str, int] = {
    "parameters": 1,
    "context": 2,
    "public_key": 3,
    "switching_key": 4,
    "evaluation_keys": 5,
    "plaintext": 6,
    "ciphertext": 7,
    "secret_key": 8,
}
_KIND_NAMES = {code: name for name, code in KINDS.items()}


@dataclasses.dataclass(frozen=True)
class Envelope:
    """A decoded container: its kind, header fields (without "sections") and section bytes by name."""

    kind: str
    version: int
    header: Mapping
    sections: Mapping[str, memoryview]


def _header_bytes(header: Mapping, section_sizes: Sequence[tuple[str, int]]) -> bytes:
    if "sections" in header:
        raise SerializationError('"sections" is a reserved header field')
    full = dict(header)
    full["sections"] = [[name, int(size)] for name, size in section_sizes]
    try:
        text = json.dumps(full, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=True)
    except (TypeError, ValueError) as e:
        raise SerializationError(f"the header cannot be written as JSON: {e}") from e
    return text.encode("utf-8")


def encoded_size(header: Mapping, section_sizes: Sequence[tuple[str, int]]) -> int:
    """Exact size in bytes of :func:`encode` for these header fields and section sizes."""
    return PREFIX.size + len(_header_bytes(header, section_sizes)) + sum(s for _, s in section_sizes) + DIGEST_SIZE


def encode(kind: str, header: Mapping, sections: Sequence[tuple[str, bytes]], version: int = FORMAT_VERSION) -> bytes:
    """Serialize header fields (JSON-compatible values) and named byte sections into one container, labelled
    with format ``version`` (hemx.io.dumps passes the lowest one that has every field used)."""
    if kind not in KINDS:
        raise SerializationError(f"unknown object kind {kind!r}")
    if type(version) is not int or not BASE_VERSION <= version <= FORMAT_VERSION:
        raise SerializationError(f"cannot write format version {version!r}; this hemx writes 1..{FORMAT_VERSION}")
    head = _header_bytes(header, [(name, len(blob)) for name, blob in sections])
    body = b"".join([PREFIX.pack(MAGIC, version, KINDS[kind], len(head)), head] + [b for _, b in sections])
    return body + hashlib.sha256(body).digest()


def read_kind(data) -> str:
    """The object kind of serialized data, after checking magic and version (no checksum, no header)."""
    _, kind, _ = _read_prefix(memoryview(data))
    return kind


def _read_prefix(view: memoryview) -> tuple[int, str, int]:
    if len(view) < PREFIX.size:
        raise SerializationError(f"data too short for a hemx container ({len(view)} bytes): truncated or not hemx")
    magic, version, code, header_len = PREFIX.unpack(view[: PREFIX.size])
    if magic != MAGIC:
        raise SerializationError("not hemx serialized data (bad magic bytes)")
    if version > FORMAT_VERSION:
        raise SerializationError(
            f"the data uses hemx format version {version}, newer than this hemx reads ({FORMAT_VERSION}); "
            "upgrade hemx to load it"
        )
    if version < 1:
        raise SerializationError(f"invalid format version {version}")
    if code not in _KIND_NAMES:
        raise SerializationError(f"unknown object kind code {code}")
    return version, _KIND_NAMES[code], header_len


def decode(data) -> Envelope:
    """Check and split a container; every structural problem raises :class:`SerializationError`."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SerializationError(f"serialized data must be bytes, got {type(data).__name__}")
    view = memoryview(data).cast("B")
    version, kind, header_len = _read_prefix(view)
    if header_len > MAX_HEADER or PREFIX.size + header_len + DIGEST_SIZE > len(view):
        raise SerializationError("the data is truncated (shorter than its header says)")
    body = view[: len(view) - DIGEST_SIZE]
    if hashlib.sha256(body).digest() != bytes(view[len(view) - DIGEST_SIZE :]):
        raise SerializationError("checksum mismatch: the data is truncated or was altered")
    header = _parse_header(bytes(view[PREFIX.size : PREFIX.size + header_len]))
    sizes = header.pop("sections", None)
    payload = body[PREFIX.size + header_len :]
    return Envelope(kind, version, header, _split_sections(payload, sizes))


def _reject_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise SerializationError(f"the header repeats the field {key!r}")
        out[key] = value
    return out


def _reject_constant(name):
    raise SerializationError(f"the header holds a non-finite number ({name})")


def _parse_header(raw: bytes) -> dict:
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_reject_duplicates,
                            parse_constant=_reject_constant)
    except SerializationError:
        raise
    except (ValueError, RecursionError) as e:  # bad UTF-8, bad JSON, absurd integers
        raise SerializationError(f"the header is not valid UTF-8 JSON: {e}") from e
    if not isinstance(header, dict):
        raise SerializationError("the header must be a JSON object")
    return header


def _split_sections(payload: memoryview, sizes) -> dict[str, memoryview]:
    if not isinstance(sizes, list):
        raise SerializationError('the header lacks its "sections" list')
    out, offset = {}, 0
    for entry in sizes:
        if (not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str)
                or type(entry[1]) is not int or entry[1] < 0):
            raise SerializationError(f"malformed section entry {entry!r}")
        name, size = entry
        if name in out:
            raise SerializationError(f"section {name!r} appears twice")
        out[name] = payload[offset : offset + size]
        offset += size
    if offset != len(payload):
        raise SerializationError(f"the sections add up to {offset} bytes but the payload has {len(payload)}")
    return out


class HeaderReader:
    """Typed, strict access to header fields: a missing, extra or ill-typed field raises SerializationError."""

    def __init__(self, header: Mapping, kind: str):
        self._header = header
        self._kind = kind
        self._read: set[str] = set()

    def _get(self, name: str):
        if name not in self._header:
            raise SerializationError(f"the {self._kind} header lacks the field {name!r}")
        self._read.add(name)
        return self._header[name]

    def _bad(self, name: str, want: str):
        return SerializationError(f"the {self._kind} header field {name!r} must be {want}, got "
                                  f"{self._header[name]!r}")

    def integer(self, name: str, lo: int | None = None, hi: int | None = None) -> int:
        """An int in ``[lo, hi]`` (booleans rejected)."""
        value = self._get(name)
        if type(value) is not int or (lo is not None and value < lo) or (hi is not None and value > hi):
            raise self._bad(name, f"an integer in [{lo}, {hi}]")
        return value

    def optional_integer(self, name: str, lo: int | None = None, hi: int | None = None) -> int | None:
        if self._get(name) is None:
            return None
        return self.integer(name, lo, hi)

    def number(self, name: str, positive: bool = False, non_negative: bool = False) -> float:
        value = self._get(name)
        if type(value) not in (int, float) or not math.isfinite(value) or (positive and value <= 0) or (
                non_negative and value < 0):
            raise self._bad(name, "a positive finite number" if positive else
                            "a finite number >= 0" if non_negative else "a finite number")
        return float(value)

    def has(self, name: str) -> bool:
        """Whether the header holds ``name`` (an optional field; read it to mark it known)."""
        return name in self._header

    def boolean(self, name: str) -> bool:
        value = self._get(name)
        if type(value) is not bool:
            raise self._bad(name, "true or false")
        return value

    def string(self, name: str, choices: Sequence[str] | None = None) -> str:
        value = self._get(name)
        if not isinstance(value, str) or (choices is not None and value not in choices):
            raise self._bad(name, f"one of {list(choices)}" if choices else "a string")
        return value

    def integers(self, name: str, lo: int | None = None, hi: int | None = None) -> tuple[int, ...]:
        value = self._get(name)
        if not isinstance(value, list) or any(
            type(v) is not int or (lo is not None and v < lo) or (hi is not None and v > hi) for v in value
        ):
            raise self._bad(name, f"a list of integers in [{lo}, {hi}]")
        return tuple(value)

    def has(self, name: str) -> bool:
        """Whether the optional field ``name`` is present (it still has to be read to count as known)."""
        return name in self._header

    def hex_bytes(self, name: str, size: int) -> bytes:
        """``size`` bytes stored as ``2 size`` lowercase hex digits."""
        value = self._get(name)
        if not _is_hex(value, size):
            raise self._bad(name, f"{2 * size} lowercase hex digits ({size} bytes)")
        return bytes.fromhex(value)

    def hex_bytes_map(self, name: str, size: int) -> dict[str, bytes]:
        """A JSON object whose every value is ``size`` bytes as ``2 size`` lowercase hex digits."""
        value = self._get(name)
        if not isinstance(value, dict) or not all(_is_hex(v, size) for v in value.values()):
            raise self._bad(name, f"a JSON object of {2 * size}-hex-digit strings ({size} bytes each)")
        return {k: bytes.fromhex(v) for k, v in value.items()}

    def string_map(self, name: str, choices: Sequence[str]) -> dict[str, str]:
        """A JSON object whose every value is one of ``choices``."""
        value = self._get(name)
        if not isinstance(value, dict) or not all(isinstance(v, str) and v in choices for v in value.values()):
            raise self._bad(name, f"a JSON object of strings in {list(choices)}")
        return dict(value)

    def integer_map(self, name: str, lo: int | None = None, hi: int | None = None) -> dict[str, int]:
        """A JSON object whose every value is an int in ``[lo, hi]`` (booleans rejected)."""
        value = self._get(name)
        if not isinstance(value, dict) or any(
            type(v) is not int or (lo is not None and v < lo) or (hi is not None and v > hi) for v in value.values()
        ):
            raise self._bad(name, f"a JSON object of integers in [{lo}, {hi}]")
        return dict(value)

    def nested(self, name: str) -> "HeaderReader":
        value = self._get(name)
        if not isinstance(value, dict):
            raise self._bad(name, "a JSON object")
        return HeaderReader(value, f"{self._kind} {name!r}")

    def finish(self) -> None:
        """Every field was read: an unknown field means data this version does not understand."""
        extra = sorted(set(self._header) - self._read)
        if extra:
            raise SerializationError(f"the {self._kind} header has unknown fields {extra}")


def _is_hex(value, size: int) -> bool:
    return (isinstance(value, str) and len(value) == 2 * size
            and all(c in "0123456789abcdef" for c in value))
