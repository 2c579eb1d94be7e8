"""Precision statistics of decrypted results, in bits (as Lattigo reports them)."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class PrecisionStats:
    """``-log2 |got - want|`` per slot, summarised: min (worst slot), mean, median; and the max abs error."""

    min_bits: float
    mean_bits: float
    median_bits: float
    max_abs_error: float
    slots: int

    def __str__(self) -> str:
        return (f"precision over {self.slots} slots: min {self.min_bits:.1f} bits, mean {self.mean_bits:.1f}, "
                f"median {self.median_bits:.1f} (max |error| {self.max_abs_error:.3g})")


def precision_stats(want, got) -> PrecisionStats:
    """Compare decrypted values ``got`` with the exact ``want`` (same shape, real or complex)."""
    want = np.asarray(want)
    got = np.asarray(got)
    err = np.abs(got - want).ravel()
    bits = -np.log2(np.maximum(err, 2.0 ** -60))
    return PrecisionStats(float(bits.min()), float(bits.mean()), float(np.median(bits)), float(err.max()), err.size)
