"""Exception types raised by hemx.

Every error a user can cause with bad input is one of these, so callers can catch ``hemx.errors.HemxError``
(or a specific subclass) and get a message that says what was wrong and what to do about it. The classes
also derive from the matching built-in exception (``ValueError``, ``OverflowError``...) so generic handlers
keep working.
"""

from __future__ import annotations


class HemxError(Exception):
    """Base class of every hemx error."""


class ParameterError(HemxError, ValueError):
    """A parameter is out of its allowed range (ring degree not a power of two, bad chunk width...)."""


class ModulusError(ParameterError):
    """A modulus is unusable: not prime, not NTT-friendly (q != 1 mod 2N), too large for 32-bit words."""


class ShapeError(HemxError, ValueError):
    """An array's shape or dtype does not match what the operation (or the ring's moduli) requires."""


class OverflowBoundError(HemxError, OverflowError):
    """An exact integer kernel would exceed its accumulator width for the requested shape or moduli."""


class BackendError(HemxError, RuntimeError):
    """The JAX backend lacks something a kernel needs (for example 64-bit integers are disabled)."""


class SecurityError(ParameterError):
    """A parameter set does not reach the requested security level and was not explicitly allowed."""


class ContextMismatchError(HemxError, ValueError):
    """Objects from different contexts (parameters / key sets) were combined."""


class LevelError(HemxError, ValueError):
    """An operation needs a level the ciphertext does not have (no levels left, or mismatched levels)."""


class ScaleMismatchError(HemxError, ValueError):
    """Operands have different scales and hemx cannot align them without changing the result's precision."""


class MissingKeyError(HemxError, KeyError):
    """An evaluation key (relinearization, a rotation step, conjugation) was not generated."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class KeyMismatchError(HemxError, ValueError):
    """A key does not belong to the key set the ciphertext was encrypted under."""


class SlotError(HemxError, ValueError):
    """Too many values for the available slots, or an invalid slot count."""


class SerializationError(HemxError, ValueError):
    """Serialized data is malformed, truncated, altered, or from an incompatible version/parameter set."""


__all__ = [
    "HemxError",
    "ParameterError",
    "ModulusError",
    "ShapeError",
    "OverflowBoundError",
    "BackendError",
    "SecurityError",
    "ContextMismatchError",
    "LevelError",
    "ScaleMismatchError",
    "MissingKeyError",
    "KeyMismatchError",
    "SlotError",
    "SerializationError",
]


class SecretMaterialError(HemxError, ValueError):
    """Secret-key material was given where only public data belongs (a server, evaluation-key serialization)."""


__all__.append("SecretMaterialError")


class DecryptionError(HemxError, ValueError):
    """The decrypted polynomial does not look like a message (the decryption check, ``hemx.ckks.checks``).

    Its coefficients are spread over the whole modulus instead of staying far below ``q/2``: a wrong secret key (or
    a ciphertext under another key set), altered ciphertext data, or values x scale that overflowed the modulus.
    Raised by ``Context.decrypt`` unless ``decryption_check="warn"`` or ``"off"``.
    """


class DecryptionWarning(UserWarning):
    """Issued instead of :class:`DecryptionError` when ``decryption_check="warn"``."""


__all__ += ["DecryptionError", "DecryptionWarning"]
