"""Canonical description, fingerprint and header form of :class:`~hemx.ckks.CKKSParameters`.

The fingerprint is the SHA-256 of a canonical JSON description of every value that decides whether two
parameter sets are interchangeable: ring degree, all ciphertext and special moduli in order, the level layout,
dnum, the default scale, the secret's Hamming weight and the error width. The cosmetic ``name`` and the
``allow_insecure`` opt-in are not part of it.
"""

from __future__ import annotations

import hashlib
import json

from hemx.ckks.params import CKKSParameters
from hemx.errors import ParameterError, SerializationError
from hemx.io.container import HeaderReader

FINGERPRINT_DOMAIN = "hemx-ckks-parameters-v1"
MAX_LOG_N = 17


def describe(params: CKKSParameters) -> dict:
    """The values that define a parameter set, as a JSON-compatible dict."""
    return {
        "log_n": params.log_n,
        "moduli": list(params.moduli),
        "level_sizes": list(params.level_sizes),
        "special_moduli": list(params.special_moduli),
        "dnum": params.dnum,
        "log_scale": float(params.log_scale),
        "hamming_weight": params.hamming_weight,
        "sigma": float(params.sigma),
    }


def fingerprint(params: CKKSParameters) -> str:
    """Hex SHA-256 of the canonical description: equal for interchangeable parameter sets, else different."""
    if not isinstance(params, CKKSParameters):
        raise ParameterError(f"expected CKKSParameters, got {type(params).__name__}")
    text = json.dumps([FINGERPRINT_DOMAIN, describe(params)], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def to_header(params: CKKSParameters) -> dict:
    """Header fields of a serialized parameter set (the description plus name and the insecure opt-in)."""
    return dict(describe(params), name=params.name, allow_insecure=bool(params.allow_insecure))


def from_header(reader: HeaderReader) -> CKKSParameters:
    """Rebuild and re-validate a parameter set from the fields written by :func:`to_header`.

    The constructor's checks run again (primality, NTT-friendliness, the 128-bit check); a set stored with
    ``allow_insecure`` warns with :class:`~hemx.ckks.InsecureParametersWarning` as it did when it was made.
    """
    fields = dict(
        log_n=reader.integer("log_n", 2, MAX_LOG_N),
        moduli=reader.integers("moduli", 2, (1 << 31) - 1),
        level_sizes=reader.integers("level_sizes", 1, 64),
        special_moduli=reader.integers("special_moduli", 2, (1 << 31) - 1),
        dnum=reader.integer("dnum", 1),
        log_scale=reader.number("log_scale", positive=True),
        hamming_weight=reader.optional_integer("hamming_weight", 1),
        sigma=reader.number("sigma", positive=True),
        name=reader.string("name"),
        allow_insecure=reader.boolean("allow_insecure"),
    )
    reader.finish()
    try:
        return CKKSParameters(**fields)
    except ParameterError as e:
        raise SerializationError(f"the stored parameter set is invalid: {e}") from e
