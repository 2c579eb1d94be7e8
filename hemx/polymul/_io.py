"""Host-side input checks, batch arrangement and conversions shared by every method."""

from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np

from hemx.errors import ParameterError, ShapeError


def check_q(q) -> int:
    """Validate the modulus: an integer ``>= 2`` (any size, prime or not)."""
    if isinstance(q, (bool, np.bool_)) or not isinstance(q, (numbers.Integral, np.integer)):
        raise ParameterError(f"modulus q must be an integer >= 2, got {q!r}")
    q = int(q)
    if q < 2:
        raise ParameterError(f"modulus q must be at least 2, got {q}")
    return q


def out_dtype(q: int):
    """Result dtype: int64 while every residue fits (q <= 2^63), else object (Python ints)."""
    return np.int64 if q.bit_length() <= 63 else object


def as_coefficients(x, q: int, name: str) -> np.ndarray:
    """Integer coefficient array ``(..., n)`` with entries in ``[0, q)``.

    Accepts numpy integer arrays, object arrays / nested lists of Python ints, and JAX integer arrays. Returns
    int64 when ``q <= 2^63`` and an object array otherwise.

    Raises:
        ShapeError: not an integer array, or no coefficient axis.
        ParameterError: an entry outside ``[0, q)`` (negative inputs are not accepted: reduce them with
            ``x % q`` first).
    """
    if isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ShapeError(f"{name} must be an integer array of coefficients ({exc})") from exc
    if arr.ndim < 1:
        raise ShapeError(f"{name} must have a coefficient axis (shape (..., n)); got a scalar")
    if arr.dtype == object:
        flat = arr.ravel()
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in flat):
            raise ShapeError(f"{name} must hold integers; found a non-integer entry")
    elif not np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_:
        raise ShapeError(f"{name} must be an integer array (numpy int dtype or Python ints), got dtype {arr.dtype}")
    if arr.size:
        lo, hi = arr.min(), arr.max()
        if int(lo) < 0 or int(hi) >= q:
            raise ParameterError(
                f"{name} has coefficients outside [0, q) = [0, {q}) (min {int(lo)}, max {int(hi)}); "
                "reduce them first, e.g. x % q"
            )
    if q.bit_length() <= 63:
        if arr.dtype == object:
            return np.asarray(arr.astype(object), dtype=np.int64) if arr.size else arr.astype(np.int64)
        return arr.astype(np.int64, copy=False)
    return arr.astype(object)


@dataclasses.dataclass(frozen=True)
class Arrangement:
    """How broadcast batch axes are mapped to ``(Bb, R, n)``: b-varying axes first, shared ones second."""

    batch: tuple[int, ...]
    perm: tuple[int, ...]
    batch_b: int
    rows: int

    def restore(self, y: np.ndarray) -> np.ndarray:
        """``(Bb, R, n, ...)`` -> ``(*batch, n, ...)``."""
        n_axes = len(self.batch)
        permuted = tuple(self.batch[i] for i in self.perm)
        y = y.reshape(permuted + y.shape[2:])
        inv = np.argsort(self.perm).tolist() + list(range(n_axes, y.ndim))
        return np.transpose(y, inv)


def arrange(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, Arrangement]:
    """Broadcast the batch axes of ``a (..., n)`` and ``b (..., n)`` and lay them out as ``(Bb, R, n)``, ``(Bb, n)``.

    Axes along which b is constant (size 1 in b) become rows sharing one Toeplitz matrix (one matmul for many
    a, paper §2.2); the others index distinct b polynomials.
    """
    n = a.shape[-1]
    if b.shape[-1] != n:
        raise ShapeError(f"a and b must have the same number of coefficients n; got {a.shape[-1]} and {b.shape[-1]}")
    try:
        batch = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    except ValueError as exc:
        raise ShapeError(f"batch shapes {a.shape[:-1]} and {b.shape[:-1]} do not broadcast") from exc
    d = len(batch)
    bshape = (1,) * (d - (b.ndim - 1)) + b.shape[:-1]
    varying = [i for i in range(d) if bshape[i] != 1]
    shared = [i for i in range(d) if bshape[i] == 1]
    perm = tuple(varying + shared)
    bb = math.prod(batch[i] for i in varying)
    rows = math.prod(batch[i] for i in shared)
    a_full = np.broadcast_to(a, batch + (n,))
    a_arr = np.transpose(a_full, perm + (d,)).reshape(bb, rows, n)
    b_arr = np.transpose(b.reshape(bshape + (n,)), perm + (d,)).reshape(bb, n)
    return a_arr, b_arr, Arrangement(tuple(batch), perm, bb, rows)


def to_sign_magnitude_bytes(x: np.ndarray, q: int, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Centered coefficients of an object array as (uint8 ``(*S, nbytes)`` little-endian magnitudes, bool sign)."""
    half = q // 2
    neg = np.asarray(x > half, dtype=bool)
    mag = np.where(neg, q - x, x)
    flat = mag.ravel()
    buf = b"".join(int(v).to_bytes(nbytes, "little") for v in flat)
    mags = np.frombuffer(buf, dtype=np.uint8).reshape(x.shape + (nbytes,))
    return mags, neg


def words_to_ints(words: np.ndarray, word_bits: int, q: int) -> np.ndarray:
    """Host finish: base-``2^word_bits`` words ``(*S, W)`` -> object array of ``value mod q``."""
    if word_bits != 16:
        acc = np.zeros(words.shape[:-1], dtype=object)
        for w in reversed(range(words.shape[-1])):
            acc = (acc << word_bits) + words[..., w].astype(object)
        return acc % q
    raw = np.ascontiguousarray(words.astype("<u2"))
    nb = 2 * words.shape[-1]
    buf = raw.tobytes()
    vals = [int.from_bytes(buf[i : i + nb], "little") % q for i in range(0, len(buf), nb)]
    out = np.empty(len(vals), dtype=object)
    out[:] = vals
    return out.reshape(words.shape[:-1])
