"""Leveled CKKS, one module per role (Lattigo's ``schemes/ckks`` split).

``params`` / ``security`` (parameter sets), ``encoder`` (canonical embedding, RNS residues), ``keys`` / ``keygen``
(key material and its generation), ``encryptor`` (encryption, decryption), ``tables`` (typed per-level tables),
``keyswitch`` (hybrid key switching, three dataflows), ``evaluator`` (the jitted kernels) and ``context``
(:class:`Context`, the front users call).
"""

from hemx.ckks.params import CKKSParameters, PRESETS
from hemx.ckks.security import InsecureParametersWarning, max_log_qp
from hemx.ckks.sampling import Sampler
from hemx.ckks.ciphertext import Ciphertext, Plaintext
from hemx.ckks.keys import EvaluationKeys, KeySet, PublicKey, SecretKey, SwitchingKey
from hemx.ckks.context import Context
from hemx.ckks.precision import PrecisionStats, precision_stats

__all__ = [
    "CKKSParameters", "PRESETS", "InsecureParametersWarning", "max_log_qp", "Sampler", "Ciphertext", "Plaintext",
    "EvaluationKeys", "KeySet", "PublicKey", "SecretKey", "SwitchingKey", "Context", "PrecisionStats",
    "precision_stats",
]
