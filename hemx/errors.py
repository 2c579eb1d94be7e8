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
    """A value would not fit where it must: an exact integer kernel's accumulator, or an encrypted result whose
    magnitude bound times its scale reaches the modulus (it would decrypt to garbage)."""


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


def external_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` that points at the first frame outside the hemx package.

    Call it from the function that warns: ``warnings.warn(msg, Category, stacklevel=external_stacklevel())``.
    Frames of hemx's own modules are skipped, and so are the ``__init__`` methods dataclasses generate (file
    ``<string>``), so a warning raised deep inside hemx (e.g. in ``CKKSParameters.__post_init__``) names the
    user's line.
    """
    import os
    import sys

    root = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame = sys._getframe(1)  # the function that will call warnings.warn: stacklevel 1
    level = 1
    while frame is not None:
        name = frame.f_code.co_filename
        internal = (name.startswith(root) or (name == "<string>" and frame.f_code.co_name == "__init__")
                    or name.startswith("<frozen "))
        if not internal:
            return level
        frame = frame.f_back
        level += 1
    return 1


__all__ += ["external_stacklevel"]


class PrecisionError(HemxError, ValueError):
    """An operation would leave a ciphertext below the precision hemx promises: a scale too small for its values
    to stand above the noise (scales that drifted with the primes dropped), or a scale that no longer fits the
    modulus. The message says which and what to do (rescale less, multiply earlier, bootstrap, more levels)."""


class BoundError(HemxError, ValueError):
    """A ciphertext's magnitude bound (``Ciphertext.bound``, the client's ``max |x|`` propagated by every operation)
    exceeds what an operation supports: ``bootstrap`` beyond the bound its message ratio supports. Also a network
    input beyond the bound the network was compiled for (``CompiledNetwork.encrypt_input``: the calibration data's
    ``max |x|`` times the margin), whose outputs would otherwise be wrong without an error."""


class BoundWarning(UserWarning):
    """Issued instead of :class:`BoundError` when the caller asked for it (``bootstrap(..., on_bound="warn")``,
    ``CompiledNetwork.encrypt_input(..., on_bound="warn")``)."""


__all__ += ["PrecisionError", "BoundError", "BoundWarning"]


class UnsupportedOperationError(HemxError, TypeError):
    """An operation the object does not offer, with the alternative in the message: arithmetic operators or
    comparisons on a bare ``Ciphertext`` / ``Plaintext`` (wrap the ciphertext: ``hemx.EncryptedArray(ct, ctx,
    keys)``), comparisons of encrypted values, numpy functions ``EncryptedArray`` does not implement, or numpy
    arguments it cannot honour (``out=``, ``where=``, another ``dtype=``)."""


__all__.append("UnsupportedOperationError")


class PerformanceWarning(UserWarning):
    """A faster path could not be taken and hemx ran a slower one with the same result: e.g. a bootstrap whose
    compiled program would not fit the memory available runs eagerly (``Bootstrapper.compiled``)."""


__all__.append("PerformanceWarning")


class AccuracyWarning(UserWarning):
    """Issued instead of a :class:`ParameterError` when an approximation cannot reach the accuracy it was asked for
    and the caller allowed it (``hemx.nn.sign_composite(..., on_accuracy="warn")``)."""


__all__.append("AccuracyWarning")
