"""Linear transforms of slot vectors: diagonals, baby-step/giant-step, hoisted baby rotations.

For a ``(s, s)`` matrix ``M`` acting on the slot vector ``x`` (``y = M x``), with ``rot(x, k)[i] = x[i + k]``
(a left rotation, as :meth:`hemx.Context.rotate`) and the diagonals ``d_k[i] = M[i, (i + k) mod s]``:

    y = sum_k d_k * rot(x, k) = sum_g rot( sum_b rot(d_{g+b}, -g) * rot(x, b), g )

where ``k = g + b`` splits every non-zero diagonal index into a giant step ``g`` (a multiple of ``n1``) and a
baby step ``b < n1`` (Halevi–Shoup; the baby/giant form of Lattigo's and OpenFHE's linear transforms). The baby
rotations of ``x`` share one ModUp (:meth:`hemx.Context.rotate_many`); each giant's inner sum is rescaled
before its rotation, so giant rotations run one level lower. One level is consumed.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from hemx.circuits.evaluator import CKKSEvaluator, SimPlaintext, SlotSimulator, as_evaluator
from hemx.ckks import Context, Plaintext
from hemx.errors import LevelError, ParameterError

DEFAULT_BSGS_RATIO = 2.0


def diagonals(matrix: np.ndarray) -> np.ndarray:
    """All ``s`` generalized diagonals of an ``(s, s)`` matrix: ``out[k, i] = M[i, (i + k) mod s]``."""
    s = matrix.shape[0]
    i = np.arange(s)
    return matrix[i[None, :], (i[None, :] + i[:, None]) % s]


def bsgs_split(indices: Sequence[int], slots: int, *, ratio: float = DEFAULT_BSGS_RATIO) -> int:
    """The baby-step count ``n1`` (a power of two) minimizing ``babies + ratio * giants`` for these diagonals.

    Baby rotations are hoisted (one ModUp for all of them) and cheaper than giant ones, hence ``ratio > 1``.
    """
    idx = np.asarray(sorted({int(k) % slots for k in indices}), dtype=np.int64)
    best, best_cost = 1, math.inf
    n1 = 1
    while n1 <= slots:
        babies = np.unique(idx % n1)
        giants = np.unique(idx - idx % n1)
        cost = np.count_nonzero(babies) + ratio * np.count_nonzero(giants)
        if cost < best_cost:
            best, best_cost = n1, cost
        n1 *= 2
    return best


class LinearTransform:
    """A plaintext matrix applied to encrypted slot vectors, prepared once.

    Args:
        backend: the :class:`~hemx.Context` (or a :mod:`hemx.circuits` evaluator such as :class:`SlotSimulator`).
        matrix: real or complex ``(slots, slots)`` array, ``slots`` the context's slot count; or a dict
            ``{k: d_k}`` of generalized diagonals (``d_k[i] = M[i, (i + k) mod slots]``, vectors of ``slots``
            numbers), for structured matrices too large to hold densely.
        level: the level of the ciphertexts it will be applied to (default: the top level); the diagonals are
            encoded there at the scale of that level's rescale, so the output has exactly the input's scale.
            Applied to a ciphertext at a higher level, the ciphertext is first dropped to ``level``; at a lower
            level the product is still correct but its scale differs from the input's by the ratio of the two
            levels' primes.
        bsgs_ratio: cost of a giant rotation relative to a hoisted baby rotation, for choosing the split.
        zero_tol: diagonals whose entries are all at most this in absolute value are skipped.
        plain_scale: scale of the encoded diagonals (default: the rescale divisor of ``level``, which keeps the
            input's scale); the output scale is ``input scale * plain_scale / divisor``.

    Attributes:
        rotations: the rotation steps whose Galois keys :meth:`apply` needs (pass to ``ctx.keygen``).
        baby_steps, giant_steps: the split; ``n1`` the baby-step count.
        indices: the non-zero diagonal indices.
    """

    def __init__(self, backend, matrix, *, level: int | None = None, bsgs_ratio: float = DEFAULT_BSGS_RATIO,
                 zero_tol: float = 0.0, plain_scale: float | None = None):
        ev = as_evaluator(backend)
        self._backend = backend
        if isinstance(matrix, dict):
            indices, rows = _check_diagonals(matrix, ev.slots)
        else:
            rows = diagonals(_check_matrix(matrix, ev.slots))
            indices = np.arange(ev.slots)
        keep = np.any(np.abs(rows) > zero_tol, axis=1)
        indices, rows = indices[keep], rows[keep]
        if not (isinstance(bsgs_ratio, (int, float)) and math.isfinite(bsgs_ratio) and bsgs_ratio > 0):
            raise ParameterError(f"bsgs_ratio must be a positive number, got {bsgs_ratio!r}")
        self.level = ev.max_level if level is None else _check_level(level, ev.max_level)
        if self.level < 1:
            raise LevelError("a linear transform consumes one level: it cannot be prepared at level 0")
        self.slots = ev.slots
        self.is_complex = bool(np.iscomplexobj(rows))
        self.indices = tuple(int(k) for k in indices)
        if not self.indices:
            raise ParameterError("the matrix is zero: nothing to transform")
        self.n1 = bsgs_split(self.indices, self.slots, ratio=float(bsgs_ratio))
        idx = np.asarray(self.indices)
        self.baby_steps = tuple(int(b) for b in np.unique(idx % self.n1))
        self.giant_steps = tuple(int(g) for g in np.unique(idx - idx % self.n1))
        self.rotations = tuple(sorted({s for s in self.baby_steps + self.giant_steps if s}))
        # pre-rotated diagonals rot(d_{g+b}, -g), one plaintext each, encoded in one batch
        shifted = np.stack([np.roll(row, k - k % self.n1) for k, row in zip(self.indices, rows)])
        if plain_scale is None:
            plain_scale = ev.rescale_divisor(self.level)
        elif not (isinstance(plain_scale, (int, float)) and math.isfinite(plain_scale) and plain_scale > 0):
            raise ParameterError(f"plain_scale must be a positive number, got {plain_scale!r}")
        self.plain_scale = float(plain_scale)
        plain = ev.encode(shifted, level=self.level, scale=self.plain_scale)
        self._plaintexts = dict(zip(self.indices, _unstack(plain, len(self.indices))))

    def __repr__(self) -> str:
        return (f"LinearTransform(slots={self.slots}, diagonals={len(self.indices)}, n1={self.n1}, "
                f"rotations={len(self.rotations)}, level={self.level})")

    def apply(self, x, keys=None, *, hoisted: bool = True):
        """``M x`` slot-wise for a ciphertext ``x`` (any batch shape): one level lower, at ``x``'s scale.

        Args:
            x: a ciphertext of the context this transform was built with.
            keys: the :class:`~hemx.KeySet` / evaluation keys holding :attr:`rotations` (None with a simulator).
            hoisted: share one ModUp among the baby rotations (True) or rotate each separately (for comparison).
        """
        ev = self._evaluator(keys)
        level = ev.level(x)
        if level < 1:
            raise LevelError("a linear transform consumes one level: the ciphertext is at level 0")
        if level > self.level:
            x = ev.drop_level(x, self.level)
        steps = list(self.baby_steps)
        rotated = ev.rotate_many(x, steps) if hoisted else [ev.rotate(x, s) for s in steps]
        babies = dict(zip(steps, rotated))
        out = None
        for g in self.giant_steps:
            acc = None
            for b in self.baby_steps:
                k = g + b
                if k not in self._plaintexts:
                    continue
                term = ev.mul_plain(babies[b], self._plaintexts[k])
                acc = term if acc is None else ev.add(acc, term)
            acc = ev.rescale(acc)
            if g:
                acc = ev.rotate(acc, g)
            out = acc if out is None else ev.add(out, acc)
        return out

    def _evaluator(self, keys):
        if isinstance(self._backend, Context):
            return CKKSEvaluator(self._backend, keys)
        if isinstance(self._backend, CKKSEvaluator):
            return CKKSEvaluator(self._backend.ctx, keys if keys is not None else self._backend.keys,
                                 slots=self._backend.slots)
        return as_evaluator(self._backend)


def linear_transform(backend, x, matrix, keys=None, **options):
    """``M x`` in one call: :class:`LinearTransform` prepared at ``x``'s level, then applied."""
    ev = as_evaluator(backend)
    return LinearTransform(backend, matrix, level=ev.level(x), **options).apply(x, keys)


def _check_matrix(matrix, slots: int) -> np.ndarray:
    try:
        m = np.asarray(matrix)
    except (TypeError, ValueError):
        raise ParameterError("matrix must be a 2-D array of numbers") from None
    if m.ndim != 2 or not np.issubdtype(m.dtype, np.number) or m.dtype == bool:
        raise ParameterError(f"matrix must be a 2-D array of numbers, got {m.dtype} with shape {m.shape}")
    if m.shape != (slots, slots):
        raise ParameterError(f"matrix must be ({slots}, {slots}) for {slots} slots, got {m.shape}; pad it, or "
                             "create the context with Context(params, slots=...) to match")
    if not np.all(np.isfinite(m)):
        raise ParameterError("matrix entries must be finite")
    return m.astype(np.complex128 if np.iscomplexobj(m) else np.float64)


def _check_diagonals(diags: dict, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """``{k: d_k}`` -> (sorted indices mod ``slots``, their diagonals ``(count, slots)``), repeated indices summed."""
    merged: dict[int, np.ndarray] = {}
    for k, d in diags.items():
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise ParameterError(f"diagonal indices must be integers, got {k!r}")
        try:
            v = np.asarray(d)
        except (TypeError, ValueError):
            raise ParameterError(f"diagonal {k} must be a vector of numbers") from None
        if v.shape != (slots,) or not np.issubdtype(v.dtype, np.number) or not np.all(np.isfinite(v)):
            raise ParameterError(f"diagonal {k} must hold {slots} finite numbers, got {v.dtype} {v.shape}")
        key = int(k) % slots
        merged[key] = merged[key] + v if key in merged else v
    if not merged:
        raise ParameterError("no diagonals given")
    keys = sorted(merged)
    rows = np.stack([merged[k] for k in keys])
    rows = rows.astype(np.complex128 if np.iscomplexobj(rows) else np.float64)
    return np.asarray(keys, dtype=np.int64), rows


def _check_level(level, max_level: int) -> int:
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or not 0 <= level <= max_level:
        raise LevelError(f"level must be an integer in 0..{max_level}, got {level!r}")
    return int(level)


def _unstack(plain, count: int) -> list:
    if isinstance(plain, SimPlaintext):
        return [SimPlaintext(plain.values[i], plain.level, plain.scale) for i in range(count)]
    if isinstance(plain, Plaintext):
        return [plain.replace(data=plain.data[i]) for i in range(count)]
    raise ParameterError(f"unexpected plaintext type {type(plain).__name__}")


__all__ = ["LinearTransform", "linear_transform", "diagonals", "bsgs_split", "SlotSimulator"]
