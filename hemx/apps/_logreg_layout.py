"""Slot layout of ``hemx.apps.logreg``: a samples x features matrix packed row by row into the slots.

Sample ``i``, feature ``j`` sits in slot ``i * cols + j``. ``cols`` is the feature count (bias included)
rounded up to a power of two and ``rows = slots / cols``; unused rows and columns hold zeros. With left
rotations ``rot(x, s)[k] = x[k + s]`` (as ``numpy.roll(x, -s)`` and ``Context.rotate``):

- summing ``x`` with its rotations by 1, 2, ..., cols/2 leaves each row's sum in its column 0 (the other
  columns get sums that run into the next row);
- summing a vector that is zero outside column 0 with its rotations by -1, -2, ..., -cols/2 copies each row's
  column 0 to the whole row;
- summing with rotations by cols, 2 cols, ..., slots/2 leaves the sum over all rows in every row.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hemx.errors import ShapeError, SlotError


def next_power_of_two(n: int) -> int:
    """Smallest power of two >= n (n >= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


def _doubling(first: int, stop: int) -> tuple[int, ...]:
    steps, s = [], first
    while s < stop:
        steps.append(s)
        s *= 2
    return tuple(steps)


@dataclasses.dataclass(frozen=True)
class Layout:
    """``rows`` samples of ``cols`` (a power of two) features in ``rows * cols`` slots."""

    rows: int
    cols: int

    @classmethod
    def for_slots(cls, slots: int, n_features: int) -> "Layout":
        """The layout of ``n_features`` columns (rounded up to a power of two) in ``slots`` slots."""
        cols = next_power_of_two(n_features)
        if slots % cols or slots < cols or slots & (slots - 1):
            raise SlotError(f"{slots} slots cannot hold rows of {cols} features (need a power of two >= {cols})")
        return cls(slots // cols, cols)

    @property
    def slots(self) -> int:
        return self.rows * self.cols

    @property
    def column_sum_steps(self) -> tuple[int, ...]:
        """Left rotations that leave each row's sum in its column 0: 1, 2, ..., cols/2."""
        return _doubling(1, self.cols)

    @property
    def replicate_steps(self) -> tuple[int, ...]:
        """Right rotations that copy column 0 over its row: -1, -2, ..., -cols/2."""
        return tuple(-s for s in _doubling(1, self.cols))

    @property
    def row_sum_steps(self) -> tuple[int, ...]:
        """Rotations that sum all rows into every row: cols, 2 cols, ..., slots/2."""
        return _doubling(self.cols, self.slots)

    @property
    def rotation_steps(self) -> tuple[int, ...]:
        """Every rotation the training and inference circuits use, sorted."""
        return tuple(sorted(self.column_sum_steps + self.replicate_steps + self.row_sum_steps))

    def first_column_mask(self) -> np.ndarray:
        """float64 ``(slots,)``: 1 in column 0 of every row, 0 elsewhere."""
        mask = np.zeros((self.rows, self.cols))
        mask[:, 0] = 1.0
        return mask.reshape(-1)

    def batches_for(self, n_rows: int) -> int:
        """Ciphertexts needed for ``n_rows`` samples."""
        return max(1, -(-int(n_rows) // self.rows))

    def pack(self, matrix: np.ndarray) -> np.ndarray:
        """float64 ``(n, d)`` with ``n <= rows``, ``d <= cols`` -> ``(slots,)``, zero padded, row-major."""
        m = np.asarray(matrix, dtype=np.float64)
        if m.ndim != 2:
            raise ShapeError(f"expected a (samples, features) matrix, got shape {m.shape}")
        n, d = m.shape
        if d > self.cols:
            raise ShapeError(f"{d} features do not fit in rows of {self.cols} slots")
        if n > self.rows:
            raise SlotError(f"{n} samples do not fit in {self.rows} rows; use pack_batches or more slots")
        grid = np.zeros((self.rows, self.cols))
        grid[:n, :d] = m
        return grid.reshape(-1)

    def pack_batches(self, matrix: np.ndarray) -> np.ndarray:
        """float64 ``(n, d)`` -> ``(B, slots)`` with ``B = ceil(n / rows)`` blocks of consecutive samples."""
        m = np.asarray(matrix, dtype=np.float64)
        if m.ndim != 2:
            raise ShapeError(f"expected a (samples, features) matrix, got shape {m.shape}")
        blocks = self.batches_for(len(m))
        return np.stack([self.pack(m[b * self.rows : (b + 1) * self.rows]) for b in range(blocks)])

    def first_column(self, values: np.ndarray, count: int) -> np.ndarray:
        """Column 0 of the first ``count`` rows of ``(..., slots)`` values (batches in order): ``(count,)``."""
        v = np.asarray(values)
        if v.shape[-1] != self.slots:
            raise ShapeError(f"expected {self.slots} slots per ciphertext, got {v.shape[-1]}")
        column = v.reshape(-1, self.cols)[:, 0]
        if count > len(column):
            raise ShapeError(f"asked for {count} rows, the values hold {len(column)}")
        return column[:count]

    def first_row(self, values: np.ndarray, count: int) -> np.ndarray:
        """The first ``count`` entries of row 0 of ``(slots,)`` values: ``(count,)``."""
        v = np.asarray(values)
        if v.shape[-1] != self.slots:
            raise ShapeError(f"expected {self.slots} slots, got {v.shape[-1]}")
        return v.reshape(-1, self.slots)[0, :count]
