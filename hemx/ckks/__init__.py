"""Leveled CKKS: parameters, encoding, keys, encryption and the evaluator (hybrid key switching)."""

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
