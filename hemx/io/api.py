"""dumps / loads / save / load / serialized_size, and the explicitly named secret-key functions."""

from __future__ import annotations

import os
from hemx.ckks.context import Context
from hemx.ckks.keys import SecretKey
from hemx.errors import ParameterError, SecretMaterialError, SerializationError
from hemx.io import container, objects


def _encoded(obj, context: Context | None) -> objects.Encoded:
    if isinstance(obj, SecretKey):
        raise SecretMaterialError(
            "hemx.io.dumps does not serialize secret keys; use hemx.io.dumps_secret_key / save_secret_key for the "
            "client's own storage, and send servers only keys.evaluation_keys()"
        )
    for kind, (cls, encode, _, bound) in objects.CODECS.items():
        if isinstance(obj, cls):
            if not bound:
                if context is not None:
                    raise ParameterError(f"a {kind} carries no context; call dumps without `context`")
                return encode(obj)
            return encode(obj, objects.require_context(context, kind.replace("_", " ")))
    raise SerializationError(
        f"cannot serialize a {type(obj).__name__}; hemx.io handles CKKSParameters, Context, PublicKey, SwitchingKey, "
        "EvaluationKeys, Plaintext and Ciphertext"
    )


def _to_bytes(encoded: objects.Encoded) -> bytes:
    return container.encode(encoded.kind, encoded.header, [(s.name, s.pack()) for s in encoded.sections],
                            encoded.version)


def dumps(obj, context: Context | None = None) -> bytes:
    """Serialize a hemx object to bytes.

    Args:
        obj: a CKKSParameters, a Context (its parameters and slot count, not its kernel choices), or a
            PublicKey, SwitchingKey, EvaluationKeys, Plaintext or Ciphertext (any batch shape).
        context: for keys, plaintexts and ciphertexts, the Context that made them (their parameters are
            recorded as a fingerprint); omit it for parameters and contexts.

    Raises:
        SecretMaterialError: ``obj`` is a SecretKey or a KeySet (serialize ``keys.evaluation_keys()``).
        ContextMismatchError: ``obj`` belongs to another context.
    """
    return _to_bytes(_encoded(obj, context))


def serialized_size(obj, context: Context | None = None) -> int:
    """``len(dumps(obj, context))``, computed from shapes and moduli without packing anything."""
    encoded = _encoded(obj, context)
    return container.encoded_size(encoded.header, [(s.name, s.nbytes) for s in encoded.sections])


def kind_of(data) -> str:
    """The object kind stored in ``data`` ("ciphertext", "evaluation_keys", ...), after checking magic and version."""
    return container.read_kind(data)


def _kind_of_class(cls) -> str:
    for kind, (klass, *_rest) in objects.CODECS.items():
        if cls is klass:
            return kind
    raise ParameterError(f"`expect` must be one of the serializable classes, got {cls!r}")


def loads(data, context: Context | None = None, *, expect: type | None = None, **context_options):
    """Load an object serialized by :func:`dumps`.

    Args:
        data: the bytes.
        context: required for keys, plaintexts and ciphertexts: a Context with the same parameter set
            (fingerprint) and slot count as the writer's. The loaded object is bound to it.
        expect: optionally the class the data must hold (``hemx.Ciphertext``...); anything else is refused.
        context_options: for serialized contexts only, options of the new :class:`Context` (``ntt=``...).

    Raises:
        SerializationError: not hemx data, another format version or kind, truncated or altered data, invalid
            values (a residue not below its modulus...).
        ContextMismatchError: the data belongs to another parameter set or slot count than ``context``.
        SecretMaterialError: the data is a secret key (use :func:`loads_secret_key`).
    """
    envelope = container.decode(data)
    if envelope.kind == "secret_key":
        raise SecretMaterialError("the data is a secret key; load it deliberately with hemx.io.loads_secret_key")
    if expect is not None and envelope.kind != _kind_of_class(expect):
        raise SerializationError(f"expected a serialized {expect.__name__}, got a {envelope.kind.replace('_', ' ')}")
    _, _, decode, bound = objects.CODECS[envelope.kind]
    if envelope.kind == "context":
        if context is not None:
            raise ParameterError("a serialized context builds its own Context; do not pass `context`")
        return decode(envelope, **context_options)
    if context_options:
        raise ParameterError(f"context options {sorted(context_options)} only apply to a serialized context")
    if not bound:
        if context is not None:
            raise ParameterError(f"a serialized {envelope.kind} needs no `context`")
        return decode(envelope)
    return decode(envelope, objects.require_context(context, envelope.kind.replace("_", " ")))


def dumps_secret_key(secret: SecretKey, context: Context) -> bytes:
    """Serialize a secret key for its owner's storage (2 bits per coefficient). Never send it to a server."""
    if not isinstance(secret, SecretKey):
        raise ParameterError(f"dumps_secret_key takes a SecretKey (keys.secret), got {type(secret).__name__}")
    return _to_bytes(objects.encode_secret_key(secret, objects.require_context(context, "secret key")))


def loads_secret_key(data, context: Context) -> SecretKey:
    """Load a secret key written by :func:`dumps_secret_key` into ``context`` (same parameters and slots)."""
    envelope = container.decode(data)
    if envelope.kind != "secret_key":
        raise SerializationError(f"expected a serialized secret key, got a {envelope.kind.replace('_', ' ')}")
    return objects.decode_secret_key(envelope, objects.require_context(context, "secret key"))


def _write(path, data: bytes, mode: int) -> None:
    """Write atomically: a temporary file in the same folder, then a rename over ``path``."""
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def save(path, obj, context: Context | None = None) -> int:
    """Write ``dumps(obj, context)`` to ``path``; returns the number of bytes written."""
    data = dumps(obj, context)
    _write(path, data, 0o644)
    return len(data)


def load(path, context: Context | None = None, *, expect: type | None = None, **context_options):
    """``loads`` of a file written by :func:`save`."""
    return loads(_read(path), context, expect=expect, **context_options)


def save_secret_key(path, secret: SecretKey, context: Context) -> int:
    """Write a secret key readable by its owner only (file mode 0600 on POSIX); returns the bytes written."""
    data = dumps_secret_key(secret, context)
    _write(path, data, 0o600)
    return len(data)


def load_secret_key(path, context: Context) -> SecretKey:
    """``loads_secret_key`` of a file written by :func:`save_secret_key`."""
    return loads_secret_key(_read(path), context)


__all__: list[str] = [
    "dumps", "loads", "save", "load", "serialized_size", "kind_of", "dumps_secret_key", "loads_secret_key",
    "save_secret_key", "load_secret_key",
]
