"""Circuits on CKKS ciphertexts, written once against one evaluator protocol.

* :class:`LinearTransform` / :func:`linear_transform`: plaintext matrices on slot vectors (baby-step/giant-step,
  hoisted rotations);
* :func:`evaluate_polynomial`, :func:`chebyshev_coefficients`, :func:`polynomial_depth`: polynomials in the power
  or Chebyshev basis with exact scale management;
* :mod:`hemx.circuits.bootstrap`: packed bootstrapping (``bootstrap(ctx, ct, keys)``, ``bootstrapper_for(ctx)``,
  ``BootstrapParameters``), built from the pieces above;
* :class:`EncryptedArray`: ciphertexts with numpy's operators, reductions, ``@`` and ``polyval`` (built on the above);
* :func:`jit` / :class:`Program` (:mod:`hemx.circuits.program`): compiled programs kept across key sets and
  processes (executables stored, outputs rebuilt with the caller's ids);
* :class:`CKKSEvaluator` (a context and its keys) and :class:`SlotSimulator` (cleartext slot vectors with the same
  level and scale accounting) implement :class:`Evaluator`; every circuit runs on both.

Layer: above :mod:`hemx.ckks`, below :mod:`hemx.apps`.
"""

from hemx.circuits.evaluator import (
    CKKSEvaluator,
    Evaluator,
    SimCiphertext,
    SimPlaintext,
    SlotSimulator,
    as_evaluator,
    block_until_ready,
)
from hemx.circuits.lintrans import LinearTransform, bsgs_split, diagonals, linear_transform
from hemx.circuits.polynomial import chebyshev_coefficients, evaluate_polynomial, polynomial_depth
from hemx.circuits.array import EncryptedArray
from hemx.circuits import bootstrap  # noqa: E402

__all__ = [
    "Evaluator", "CKKSEvaluator", "SlotSimulator", "SimCiphertext", "SimPlaintext", "as_evaluator",
    "block_until_ready", "LinearTransform", "linear_transform", "diagonals", "bsgs_split",
    "evaluate_polynomial", "chebyshev_coefficients", "polynomial_depth", "bootstrap", "EncryptedArray",
]
