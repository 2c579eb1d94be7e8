"""Security check of CKKS parameters against the Homomorphic Encryption Standard.

Maximum ``log2(QP)`` for 128-bit classical security with a uniform ternary secret and error sigma = 3.19:
HE Standard (Albrecht et al., 2018), Table 1, for N = 2^10 .. 2^15; the N = 2^16 entry (1772) is the value
OpenFHE's ``stdlatticeparms`` tabulates for the same setting. hemx counts the special primes P: key-switching
keys live modulo QP, so QP is what an attacker sees.
"""

from __future__ import annotations

import warnings

from hemx.errors import SecurityError, external_stacklevel

MAX_LOG_QP_128_TERNARY: dict[int, int] = {
    1 << 10: 27,
    1 << 11: 54,
    1 << 12: 109,
    1 << 13: 218,
    1 << 14: 438,
    1 << 15: 881,
    1 << 16: 1772,
}


class InsecureParametersWarning(UserWarning):
    """Emitted when parameters below the 128-bit bound are used with ``allow_insecure=True``."""


def max_log_qp(n: int) -> int | None:
    """Largest log2(QP) with 128-bit security at ring degree n (None when the table has no entry)."""
    return MAX_LOG_QP_128_TERNARY.get(int(n))


def check_security(n: int, log_qp: float, *, sparse_secret: bool, allow_insecure: bool) -> bool:
    """True when ``(n, log_qp)`` meets the 128-bit bound; otherwise raise, or warn when ``allow_insecure``."""
    bound = max_log_qp(n)
    problems = []
    if bound is None:
        problems.append(f"the HE standard table has no entry for N = {n}")
    elif log_qp > bound:
        problems.append(f"log2(QP) = {log_qp:.1f} exceeds the 128-bit bound {bound} for N = {n}")
    if sparse_secret:
        problems.append("the table assumes a uniform ternary secret; a sparse secret is not covered by it")
    if not problems:
        return True
    msg = "; ".join(problems)
    if not allow_insecure:
        raise SecurityError(
            f"parameters are not 128-bit secure: {msg}. Use a larger N or fewer/smaller primes, or pass "
            "allow_insecure=True for experiments and benchmarks."
        )
    warnings.warn(f"insecure CKKS parameters (allowed explicitly): {msg}", InsecureParametersWarning,
                  stacklevel=external_stacklevel())  # the caller's line, not hemx's
    return False
