"""Serialization of hemx objects: a versioned, pickle-free binary format with a SHA-256 checksum.

``dumps(obj, context)`` / ``loads(data, context)`` (and ``save`` / ``load`` for files) handle parameters,
contexts (parameters + slot count), public keys, switching keys, evaluation-key bundles, plaintexts and
ciphertexts (any batch shape). Residues are bit-packed at the width of their modulus. Loading validates
everything (format, version, kind, checksum, sizes, every residue below its modulus) and binds the object to
the given context, which must share the writer's parameter fingerprint and slot count. Secret keys have their
own, explicitly named functions. See ``docs/io.md``.
"""

from hemx.io.api import (
    dumps,
    dumps_secret_key,
    kind_of,
    load,
    load_secret_key,
    loads,
    loads_secret_key,
    save,
    save_secret_key,
    serialized_size,
)
from hemx.io.container import FORMAT_VERSION, MAGIC
from hemx.io.parameters import fingerprint

__all__ = [
    "dumps", "loads", "save", "load", "serialized_size", "kind_of", "dumps_secret_key", "loads_secret_key",
    "save_secret_key", "load_secret_key", "fingerprint", "FORMAT_VERSION", "MAGIC",
]
