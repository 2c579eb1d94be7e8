"""Client / server split: the client keeps the secret key, the server computes with public material only.

A :class:`Client` makes the context and the keys, encrypts and decrypts. A :class:`Server` is built from the
client's serialized context (parameters + slot count) and evaluation keys; it holds no secret key, has no
API that takes or returns one, and refuses to be built from a key set that contains one. The two talk in the
bytes of :mod:`hemx.io`::

    client = Client(params, rotations=[1])
    server = Server.from_bytes(client.parameters_bytes(), client.evaluation_keys_bytes())
    ct = server.load_ciphertext(client.encrypt(x))
    reply = server.dump_ciphertext(server.rotate(server.mul(ct, ct, rescale=True), 1))
    y = client.decrypt(reply)
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from hemx import io
from hemx.ckks.ciphertext import Ciphertext, Plaintext
from hemx.ckks.context import Context
from hemx.ckks.keys import EvaluationKeys, KeySet, SecretKey
from hemx.ckks.params import CKKSParameters
from hemx.ckks.sampling import Sampler
from hemx.errors import ContextMismatchError, KeyMismatchError, ParameterError, SecretMaterialError, SerializationError


class Client:
    """The data owner: generates the keys, encrypts inputs and decrypts results.

    Args:
        params: the parameter set.
        rotations: slot rotation steps the server may use (or "power_of_two"); see ``Context.keygen``.
        conjugation: also make the conjugation key.
        relin: make the relinearization key (needed for ciphertext products).
        slots: slots per ciphertext (sparse packing below N/2); the server learns it from the context bytes.
        sampler: randomness; default the OS CSPRNG (``Sampler.insecure_for_tests(seed)`` in tests only).
        context_options: further :class:`Context` options (``ntt=``, ``keyswitch=``...), local to the client.
    """

    __slots__ = ("_context", "_keys")

    def __init__(self, params: CKKSParameters, *, rotations: Sequence[int] | str = (), conjugation: bool = False,
                 relin: bool = True, slots: int | None = None, sampler: Sampler | None = None, **context_options):
        self._context = Context(params, slots=slots, sampler=sampler, **context_options)
        self._keys = self._context.keygen(rotations=rotations, conjugation=conjugation, relin=relin)

    @classmethod
    def restore(cls, context_bytes: bytes, secret_key_bytes: bytes, evaluation_keys_bytes: bytes, *,
                sampler: Sampler | None = None, **context_options) -> "Client":
        """A client rebuilt from its stored context, secret key and evaluation keys (same key set)."""
        context = io.loads(context_bytes, expect=Context, sampler=sampler, **context_options)
        secret = io.loads_secret_key(secret_key_bytes, context)
        public = io.loads(evaluation_keys_bytes, context, expect=EvaluationKeys)
        if secret.key_id != public.key_id:
            raise KeyMismatchError("the secret key and the evaluation keys belong to different key sets")
        client = cls.__new__(cls)
        client._context = context
        client._keys = KeySet(public=public.public, relin=public.relin, galois=dict(public.galois),
                              context_id=context.id, key_id=public.key_id, secret=secret)
        return client

    @property
    def context(self) -> Context:
        return self._context

    @property
    def keys(self) -> KeySet:
        """The full key set, secret included: keep it on the client."""
        return self._keys

    def __repr__(self) -> str:
        return f"Client({self._context.params.describe()}, slots={self._context.slots})"

    # ------------------------------------------------------------------ what the server gets
    def parameters_bytes(self) -> bytes:
        """The serialized context: parameter set and slot count (no keys)."""
        return io.dumps(self._context)

    def evaluation_keys(self) -> EvaluationKeys:
        return self._keys.evaluation_keys()

    def evaluation_keys_bytes(self) -> bytes:
        """Public, relinearization and Galois keys, serialized (no secret)."""
        return io.dumps(self.evaluation_keys(), self._context)

    # ------------------------------------------------------------------ the client's own storage
    def secret_key_bytes(self) -> bytes:
        """The serialized secret key, for :meth:`restore`. Store it privately; never send it."""
        return io.dumps_secret_key(self._keys.secret, self._context)

    # ------------------------------------------------------------------ data
    def encrypt(self, values) -> bytes:
        """Encrypt ``(..., count)`` values (count <= slots) under the public key; returns the ciphertext's bytes."""
        return io.dumps(self._context.encrypt(values, self._keys.public), self._context)

    def decrypt(self, ciphertext: bytes | Ciphertext) -> np.ndarray:
        """Decrypt serialized (or loaded) ciphertexts to numpy values ``(..., slots)``."""
        if not isinstance(ciphertext, Ciphertext):
            ciphertext = io.loads(ciphertext, self._context, expect=Ciphertext)
        return self._context.decrypt(ciphertext, self._keys.secret)


class Server:
    """Evaluates on ciphertexts with the parameters and evaluation keys only; it never sees a secret key.

    Args:
        context: the server's own Context, built from the client's parameters (and slot count).
        keys: :class:`~hemx.ckks.EvaluationKeys` of that context; a :class:`~hemx.ckks.KeySet` (which holds the
            secret) is refused with :class:`~hemx.errors.SecretMaterialError`.

    Workloads written as ``f(ctx, eval_keys, ct)`` run with ``server.context`` and ``server.keys``; the methods
    below are shortcuts that pass the keys.
    """

    __slots__ = ("_context", "_keys")

    def __init__(self, context: Context, keys: EvaluationKeys):
        if isinstance(keys, (KeySet, SecretKey)) or hasattr(keys, "secret"):
            raise SecretMaterialError(
                "a Server takes evaluation keys only; pass keys.evaluation_keys() (or their serialized bytes)"
            )
        if type(keys) is not EvaluationKeys:
            raise ParameterError(f"a Server needs EvaluationKeys, got {type(keys).__name__}")
        if not isinstance(context, Context):
            raise ParameterError(f"a Server needs a Context, got {type(context).__name__}")
        if keys.context_id != context.id:
            raise ContextMismatchError("the evaluation keys belong to another context than the server's")
        self._context = context
        self._keys = keys

    @classmethod
    def from_bytes(cls, parameters_bytes: bytes, evaluation_keys_bytes: bytes, **context_options) -> "Server":
        """Build the server's context from serialized parameters and load the evaluation keys into it.

        Args:
            parameters_bytes: ``client.parameters_bytes()`` (a serialized context, slot count included), or a
                serialized CKKSParameters (then pass ``slots=`` if the client packs sparsely).
            evaluation_keys_bytes: ``client.evaluation_keys_bytes()``.
            context_options: the server's own Context options (``ntt=``, ``keyswitch=``...).
        """
        kind = io.kind_of(parameters_bytes)
        if kind == "context":
            context = io.loads(parameters_bytes, **context_options)
        elif kind == "parameters":
            context = Context(io.loads(parameters_bytes), **context_options)
        else:
            raise SerializationError(f"expected serialized parameters or a context, got a {kind.replace('_', ' ')}")
        return cls(context, io.loads(evaluation_keys_bytes, context, expect=EvaluationKeys))

    @property
    def context(self) -> Context:
        return self._context

    @property
    def keys(self) -> EvaluationKeys:
        return self._keys

    def __repr__(self) -> str:
        return (f"Server({self._context.params.describe()}, slots={self._context.slots}, "
                f"relin={self._keys.relin is not None}, galois={sorted(self._keys.galois)})")

    # ------------------------------------------------------------------ bytes in, bytes out
    def load_ciphertext(self, data: bytes) -> Ciphertext:
        return io.loads(data, self._context, expect=Ciphertext)

    def dump_ciphertext(self, ct: Ciphertext) -> bytes:
        return io.dumps(ct, self._context)

    def load_plaintext(self, data: bytes) -> Plaintext:
        return io.loads(data, self._context, expect=Plaintext)

    # ------------------------------------------------------------------ evaluation (the context's operations)
    def encode(self, values, *, level: int | None = None, scale: float | None = None) -> Plaintext:
        return self._context.encode(values, level=level, scale=scale)

    def add(self, a: Ciphertext, b) -> Ciphertext:
        return self._context.add(a, b)

    def sub(self, a: Ciphertext, b) -> Ciphertext:
        return self._context.sub(a, b)

    def negate(self, a: Ciphertext) -> Ciphertext:
        return self._context.negate(a)

    def mul(self, a: Ciphertext, b, *, rescale: bool = False) -> Ciphertext:
        return self._context.mul(a, b, self._keys, rescale=rescale)

    def rescale(self, ct: Ciphertext) -> Ciphertext:
        return self._context.rescale(ct)

    def drop_level(self, ct: Ciphertext, level: int) -> Ciphertext:
        return self._context.drop_level(ct, level)

    def rotate(self, ct: Ciphertext, steps: int) -> Ciphertext:
        return self._context.rotate(ct, steps, self._keys)

    def rotate_many(self, ct: Ciphertext, steps: Sequence[int]) -> list[Ciphertext]:
        return self._context.rotate_many(ct, steps, self._keys)

    def conjugate(self, ct: Ciphertext) -> Ciphertext:
        return self._context.conjugate(ct, self._keys)

    def sum_slots(self, ct: Ciphertext) -> Ciphertext:
        return self._context.sum_slots(ct, self._keys)
