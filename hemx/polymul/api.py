"""Public entry points: ``negacyclic_mul``, ``cyclic_mul`` and ``polymul``."""

from __future__ import annotations

import numpy as np

from hemx.errors import ParameterError
from hemx.polymul import _io, kernel, reference
from hemx.polymul.plan import RINGS, PolyMulPlan, make_plan, plan_tables

METHODS: tuple[str, ...] = ("matmul", "ntt", "numpy")
_NO_SIGN = np.zeros((), dtype=bool)  # sign-mask placeholder for int64 inputs (the kernel ignores it)


def _matmul(a_arr: np.ndarray, b_arr: np.ndarray, plan: PolyMulPlan) -> np.ndarray:
    """Run a plan on arranged inputs ``(Bb, R, n)``, ``(Bb, n)``; returns ``(Bb, R, n)`` (int64 or object)."""
    sp = plan.static
    q = plan.q
    if sp.input_kind == "int64":
        a_in, a_neg, b_in, b_neg = a_arr, _NO_SIGN, b_arr, _NO_SIGN
    else:
        a_in, a_neg = _io.to_sign_magnitude_bytes(a_arr, q, sp.input_bytes)
        b_in, b_neg = _io.to_sign_magnitude_bytes(b_arr, q, sp.input_bytes)
    out = np.asarray(kernel.run(a_in, a_neg, b_in, b_neg, plan_tables(plan), sp=sp))
    if sp.finish == "host":
        res = _io.words_to_ints(out, sp.word_bits, q)
        return res if q.bit_length() > 63 else res.astype(np.int64)
    return out


def polymul(
    a,
    b,
    q: int,
    *,
    ring: str = "negacyclic",
    method: str = "matmul",
    base: str = "auto",
    karatsuba: int = 0,
    block: int | None = None,
    chunk_blocks: int | None = None,
    engine: str = "int8",
) -> np.ndarray:
    """Exact ``a * b`` in ``Z_q[x]/(x^n + 1)`` (``ring="negacyclic"``) or ``Z_q[x]/(x^n - 1)`` (``"cyclic"``).

    Args:
        a: integer array ``(..., n)``, coefficients in ``[0, q)`` (int64 / any numpy int dtype, or object arrays
            of Python ints when q needs more than 63 bits). Coefficient ``i`` multiplies ``x^i``.
        b: integer array ``(..., n)``; its batch axes broadcast against a's. Where b is constant along a batch
            axis (size 1), all those a polynomials share b's matrix: one matmul serves them all (paper §2.2).
        q: any modulus ``>= 2`` (prime or not, any size).
        ring: ``"negacyclic"`` or ``"cyclic"``.
        method: ``"matmul"`` (int8 matrix engine, this package), ``"ntt"`` (RNS of NTT primes through
            :class:`hemx.ring.RNSRing`, CRT back; any q) or ``"numpy"`` (exact float64 FFT on small limbs, host).
        base: residue base for ``matmul``: ``"auto"`` (fewest channels), ``"digits"`` (q < 2^31) or ``"rns"``.
        karatsuba: Karatsuba levels for ``matmul`` (paper §4); n must be a multiple of ``2^karatsuba``.
        block: leaf Toeplitz block size for ``matmul`` (default: planner's choice).
        chunk_blocks: block diagonals per contraction chunk for ``matmul`` (default: planner's choice).
        engine: ``"int8"`` (default: int8 x int8 -> int32) or ``"float32"`` (exact below 2^24).
    Returns:
        numpy array of the broadcast shape ``(..., n)``, int64 when ``q <= 2^63`` else object (Python ints),
        entries in ``[0, q)``.
    Raises:
        ParameterError: q < 2, coefficients outside [0, q), unknown ring/method/option, unsupported n.
        ShapeError: non-integer input, different n in a and b, batch shapes that do not broadcast.
        ModulusError: a base that cannot represent q (``base="digits"`` with q >= 2^31).
    """
    q = _io.check_q(q)
    if ring not in RINGS:
        raise ParameterError(f"ring must be one of {tuple(RINGS)}, got {ring!r}")
    if method not in METHODS:
        raise ParameterError(f"method must be one of {METHODS}, got {method!r}")
    a_c = _io.as_coefficients(a, q, "a")
    b_c = _io.as_coefficients(b, q, "b")
    a_arr, b_arr, arr = _io.arrange(a_c, b_c)
    n = a_arr.shape[-1]
    if n < 1:
        raise ParameterError("polynomials need at least one coefficient (n >= 1)")
    if arr.batch_b * arr.rows == 0:
        return np.zeros(arr.batch + (n,), dtype=_io.out_dtype(q))
    if method == "matmul":
        plan = make_plan(
            n, q, ring, rows=arr.rows, batch_b=arr.batch_b, base=base, karatsuba=karatsuba, block=block,
            chunk_blocks=chunk_blocks, engine=engine,
        )
        out = _matmul(a_arr, b_arr, plan)
    elif method == "ntt":
        out = reference.ntt_product(a_arr, b_arr[:, None, :], q, RINGS[ring])
    else:
        out = reference.fft_product(a_arr, b_arr[:, None, :], q, RINGS[ring])
    return np.ascontiguousarray(arr.restore(out))


def negacyclic_mul(a, b, q: int, **options) -> np.ndarray:
    """``a * b mod (x^n + 1, q)`` exactly, for batches of polynomials; see :func:`polymul` for the options.

    Shapes: ``a (..., n)``, ``b (..., n)`` -> broadcast ``(..., n)``; int64 result for ``q <= 2^63``, object above.
    """
    return polymul(a, b, q, ring="negacyclic", **options)


def cyclic_mul(a, b, q: int, **options) -> np.ndarray:
    """``a * b mod (x^n - 1, q)`` exactly, for batches of polynomials; see :func:`polymul` for the options.

    Shapes: ``a (..., n)``, ``b (..., n)`` -> broadcast ``(..., n)``; int64 result for ``q <= 2^63``, object above.
    """
    return polymul(a, b, q, ring="cyclic", **options)
