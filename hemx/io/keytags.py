"""Key-set tags: a persistent identity for the process-local ``key_id`` of keys and ciphertexts.

Inside one process a key set is named by the integer ``key_id`` that ``Context.keygen`` draws from a counter;
the evaluator compares these ids to refuse mixing key sets. Such integers mean nothing to another process, so
serialized keys and ciphertexts carry a *tag* instead: 128 random bits drawn the first time a key set is
serialized. Loading maps a tag back to a key id (the original one in the process that made the keys, a fresh
one elsewhere), so a key set and the ciphertexts under it stay compatible across any number of round trips,
while ciphertexts under different key sets stay incompatible.

This is the one piece of process-wide state in ``hemx.io``: a two-way table guarded by a lock. Tags are not
secret and say nothing about the keys.
"""

from __future__ import annotations

import itertools
import re
import secrets
import threading

TAG_PATTERN = re.compile(r"[0-9a-f]{32}")

_lock = threading.Lock()
_tag_by_id: dict[int, str] = {}
_id_by_tag: dict[str, int] = {}
# ids given to key sets first met through loading; negative, so they never meet Context's positive counter
_foreign_ids = itertools.count(-1, -1)


def tag_for(key_id: int) -> str:
    """The tag of a local key set (drawn at random on first use)."""
    with _lock:
        tag = _tag_by_id.get(key_id)
        if tag is None:
            tag = secrets.token_hex(16)
            _tag_by_id[key_id] = tag
            _id_by_tag[tag] = key_id
        return tag


def key_id_for(tag: str) -> int:
    """The local key id of a tag read from serialized data (a new id the first time the tag is seen)."""
    with _lock:
        key_id = _id_by_tag.get(tag)
        if key_id is None:
            key_id = next(_foreign_ids)
            _id_by_tag[tag] = key_id
            _tag_by_id[key_id] = tag
        return key_id


def is_tag(text) -> bool:
    return isinstance(text, str) and TAG_PATTERN.fullmatch(text) is not None
