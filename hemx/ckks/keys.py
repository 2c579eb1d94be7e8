"""Key material: secret, public, and switching keys (relinearization, rotations, conjugation)."""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Mapping

import jax
import numpy as np

from hemx.ckks.sampling import SEED_BYTES
from hemx.errors import MissingKeyError, ParameterError

_ids = itertools.count(1)


def new_id() -> int:
    """A process-unique positive id, for contexts and key sets (one counter for both)."""
    return next(_ids)


@dataclasses.dataclass(frozen=True)
class SecretKey:
    """Ternary secret ``s``.

    Attributes:
        coeffs: int8 ``(N,)`` coefficients in {-1, 0, 1}.
        ntt: uint32 ``(k + L, N)``: s in the NTT domain over the ``P + Q`` basis.
    """

    coeffs: np.ndarray
    ntt: jax.Array
    context_id: int
    key_id: int

    def __repr__(self) -> str:  # never print key material
        return f"SecretKey(key_id={self.key_id})"


@dataclasses.dataclass(frozen=True)
class PublicKey:
    """``(b, a) = (-a s + e, a)`` over Q (all limbs), NTT domain: uint32 ``(2, L, N)``."""

    data: jax.Array
    context_id: int
    key_id: int

    def __repr__(self) -> str:
        return f"PublicKey(key_id={self.key_id})"


# Keys are pytrees (issue 26): their arrays are leaves, so ``jax.jit`` / ``jax.export`` take them as arguments
# (one compiled program for every key set of the same parameters) instead of baking them in as constants; the
# ids, kinds and Galois elements are static (hashable) data, so the context's key checks run while tracing.
jax.tree_util.register_dataclass(SecretKey, data_fields=["coeffs", "ntt"], meta_fields=["context_id", "key_id"])
jax.tree_util.register_dataclass(PublicKey, data_fields=["data"], meta_fields=["context_id", "key_id"])


@dataclasses.dataclass(frozen=True)
class KeyMaterial:
    """What the key-switching kernels read of a switching key (a pytree; :attr:`SwitchingKey.material`).

    Attributes:
        data: uint32 ``(D, 2, M, N)``, the pairs ``(b_d, a_d)``; or ``(D, 1, M, N)``, the ``b_d`` alone, for a
            compact key whose uniform halves are generated inside each key switch from ``stream``.
        stream: uint32 ``(8,)`` stream key of a compact key's uniform halves (:mod:`hemx.kernels.prng`), else None.
        xof: the expansion of ``stream`` ("chacha20" or "aes128ctr"; static).
    """

    data: jax.Array
    stream: jax.Array | None = None
    xof: str = "chacha20"

    @property
    def compact(self) -> bool:
        return self.stream is not None

    @property
    def digits(self) -> int:
        return int(self.data.shape[0])

    @property
    def rows(self) -> int:
        """The key's ``num_p + L`` rows (fewer for a key that serves the lower levels only)."""
        return int(self.data.shape[-2])


jax.tree_util.register_dataclass(KeyMaterial, data_fields=["data", "stream"], meta_fields=["xof"])

#: Seed expansions a switching key's uniform halves may come from (:func:`hemx.ckks.sampling.expand_seed`):
#: SHAKE-256 (keys made before format version 5; expanded on load), and the ChaCha20 and AES-128 counter streams of
#: hemx.kernels.prng, which compact keys generate inside the key switch. Keys are made with AES-128 now: CPUs run it
#: on their AES instructions, which makes a compact key's product cost about a full key's (docs/ckks.md).
XOFS = ("shake256", "chacha20", "aes128ctr")
DEFAULT_XOF = "aes128ctr"
#: The expansions a compact key can generate inside the key switch.
STREAM_XOFS = ("chacha20", "aes128ctr")


@dataclasses.dataclass(frozen=True)
class SwitchingKey:
    """Hybrid key-switching key from ``s'`` to ``s``: one pair ``(b_d, a_d)`` per digit ``d``.

    Attributes:
        data: uint32 ``(D, 2, k + L, N)``, the pairs; or ``(D, 1, k + L, N)``, the ``b_d`` alone, for a compact
            key (``stream`` set): its uniform halves ``a_d`` are never stored but generated row by row inside
            every key switch from the stream key (half the memory; ``Context(..., key_storage=...)``).
        kind: "relin" (``s' = s^2``), "galois" (``s' = s(X^g)``), "to_sparse" / "from_sparse".
        galois: the Galois element g for rotations / conjugation.
        seed: the 32 bytes the uniform halves ``a_d`` were expanded from with ``xof``
            (:func:`hemx.ckks.sampling.expand_seed` over the ``P + Q`` basis, ``D`` digits), or None for a key
            whose ``a_d`` is known only as stored data (loaded from a format-1 file). Serialization writes
            ``b_d`` and the seed only. Static pytree data.
        level: the highest ciphertext level the key serves, or None for every level. A key for level ``l`` holds
            only the digits and limbs present there: ``(D_l, 2, k + L_l, N)``, the full key's leading rows
            (``ctx.keygen(rotation_level=l)``; at ``boot_16``'s level 10 a quarter of the bytes).
        xof: the seed expansion, one of :data:`XOFS` (static).
        stream: a compact key's stream key, uint32 ``(8,)`` (:func:`hemx.ckks.sampling.stream_key` of the seed;
            a pytree leaf, so compiled programs take it as an argument like the key's data); None otherwise.
    """

    data: jax.Array
    kind: str
    galois: int | None
    context_id: int
    key_id: int
    seed: bytes | None = None
    level: int | None = None
    xof: str = DEFAULT_XOF
    stream: jax.Array | None = None

    def __post_init__(self):
        if self.seed is not None and (not isinstance(self.seed, bytes) or len(self.seed) != SEED_BYTES):
            raise ParameterError(f"a switching key's seed must be None or {SEED_BYTES} bytes, got {self.seed!r}")
        if self.level is not None and (isinstance(self.level, bool) or not isinstance(self.level, int)
                                       or self.level < 0):
            raise ParameterError(f"a switching key's level must be None or a non-negative int, got {self.level!r}")
        if self.xof not in XOFS:
            raise ParameterError(f"a switching key's seed expansion must be one of {XOFS}, got {self.xof!r}")
        shape = getattr(self.data, "shape", None)
        halves = shape[1] if shape is not None and len(shape) == 4 else None
        if self.stream is not None and halves not in (None, 1):
            raise ParameterError(f"a compact switching key holds (D, 1, M, N) data, got shape {tuple(shape)}")
        if self.stream is None and halves == 1:
            raise ParameterError("a switching key with only its b halves needs its stream key (a compact key)")

    @property
    def seeded(self) -> bool:
        return self.seed is not None

    @property
    def compact(self) -> bool:
        """Whether the uniform halves are generated inside each key switch (not stored)."""
        return self.stream is not None

    @property
    def material(self) -> KeyMaterial:
        """The arrays the key-switching kernels read (:class:`KeyMaterial`)."""
        return KeyMaterial(self.data, self.stream, self.xof if self.xof in STREAM_XOFS else "chacha20")

    @property
    def nbytes(self) -> int:
        """Bytes the key holds in memory (its data and stream key)."""
        total = int(np.prod(self.data.shape)) * 4
        return total + (32 if self.stream is not None else 0)

    def __repr__(self) -> str:
        g = f", g={self.galois}" if self.galois is not None else ""
        seeded = ", seeded" if self.seed is not None else ""
        level = f", level<={self.level}" if self.level is not None else ""
        compact = ", compact" if self.stream is not None else ""
        return f"SwitchingKey({self.kind}{g}, digits={self.data.shape[0]}{level}{seeded}{compact})"


# a pytree: the key's arrays are its leaves (data, and a compact key's stream key); kind, Galois element, ids, seed,
# level and expansion are static (hashable) data
jax.tree_util.register_dataclass(SwitchingKey, data_fields=["data", "stream"],
                                 meta_fields=["kind", "galois", "context_id", "key_id", "seed", "level", "xof"])


@dataclasses.dataclass(frozen=True)
class EvaluationKeys:
    """What a server needs to compute: public, relinearization and Galois keys. No secret material."""

    public: PublicKey
    relin: SwitchingKey | None
    galois: Mapping[int, SwitchingKey]
    context_id: int
    key_id: int
    #: other switching keys by name: "to_sparse" / "from_sparse" (bootstrapping's sparse-secret encapsulation)
    switching: Mapping[str, SwitchingKey] = dataclasses.field(default_factory=dict)

    def galois_key(self, g: int, what: str) -> SwitchingKey:
        try:
            return self.galois[g]
        except KeyError:
            raise MissingKeyError(
                f"no Galois key for {what} (element {g}); generate it with ctx.keygen(rotations=[...]) "
                f"or conjugation=True. Available elements: {sorted(self.galois)}"
            ) from None

    def switching_key(self, name: str, what: str) -> SwitchingKey:
        try:
            return self.switching[name]
        except KeyError:
            raise MissingKeyError(
                f"no {name!r} switching key for {what}; generate keys with ctx.keygen(bootstrap=...) (the "
                "bootstrap: a hemx.BootstrapParameters or a Bootstrapper)"
            ) from None

    def relin_key(self) -> SwitchingKey:
        if self.relin is None:
            raise MissingKeyError("no relinearization key; generate keys with ctx.keygen(relin=True)")
        return self.relin

    @property
    def n(self) -> int:
        """The ring degree N of the keys."""
        return int(self.public.data.shape[-1])

    @property
    def rotations(self) -> list[int]:
        """The slot rotation steps the Galois keys serve, in ``(-N/4, N/4]`` (``-1`` is a rotation right by one),
        ordered by size (1, -1, 2, 4, ...). Steps are taken modulo N/2 (a context with fewer slots rotates by
        ``step % slots``, so its key for ``-1`` is listed as ``slots - 1`` only when ``slots < N/2``)."""
        steps = [rotation_step(self.n, g) for g in self.galois]
        return sorted((s for s in steps if s is not None), key=lambda s: (abs(s), s < 0))

    @property
    def conjugation(self) -> bool:
        """Whether the conjugation key is present."""
        return 2 * self.n - 1 in self.galois

    def __repr__(self) -> str:
        return f"EvaluationKeys({_describe(self)})"


@dataclasses.dataclass(frozen=True)
class KeySet(EvaluationKeys):
    """Everything ``keygen`` produced, the secret included. Hand ``keys.evaluation_keys()`` to servers."""

    secret: SecretKey | None = None

    def evaluation_keys(self) -> EvaluationKeys:
        return EvaluationKeys(self.public, self.relin, dict(self.galois), self.context_id, self.key_id,
                              dict(self.switching))

    def __repr__(self) -> str:
        return f"KeySet({_describe(self)})"


def _describe(keys: EvaluationKeys) -> str:
    """``key_id=.., relin=.., rotations=[1, -1, 2], conjugation=..`` (steps, not Galois elements)."""
    other = [g for g in keys.galois if rotation_step(keys.n, g) is None and g != 2 * keys.n - 1]
    extra = f", galois_elements={sorted(other)}" if other else ""
    switching = f", switching={sorted(keys.switching)}" if keys.switching else ""
    return (f"key_id={keys.key_id}, relin={keys.relin is not None}, rotations={keys.rotations}, "
            f"conjugation={keys.conjugation}{extra}{switching}")


@functools.lru_cache(maxsize=16)
def _steps_of(n: int) -> dict[int, int]:
    """``{5^r mod 2N: r}`` for ``r`` in ``[0, N/2)``."""
    out, g = {}, 1
    for r in range(max(n // 2, 1)):
        out.setdefault(g, r)
        g = g * 5 % (2 * n)
    return out


def rotation_step(n: int, g: int) -> int | None:
    """The slot rotation step of Galois element ``g`` (``galois_element(n, step) == g``), signed into
    ``(-N/4, N/4]``; None when ``g`` is not a rotation (e.g. conjugation, ``2N - 1``)."""
    r = _steps_of(int(n)).get(int(g))
    if r is None:
        return None
    half = n // 2
    return r - half if r > half // 2 else r


_EVAL_DATA = ["public", "relin", "galois", "switching"]
jax.tree_util.register_dataclass(EvaluationKeys, data_fields=_EVAL_DATA, meta_fields=["context_id", "key_id"])
jax.tree_util.register_dataclass(KeySet, data_fields=_EVAL_DATA + ["secret"], meta_fields=["context_id", "key_id"])
