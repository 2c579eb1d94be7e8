"""Modular inverses, centered residues and CRT reconstruction."""

from __future__ import annotations

from math import gcd, prod
from typing import Sequence

import numpy as np

from hemx.errors import ParameterError


def mod_inverse(a: int, m: int) -> int:
    """``a^-1 mod m``; raises ParameterError when ``gcd(a, m) != 1``."""
    a, m = int(a), int(m)
    if m < 1:
        raise ParameterError(f"modulus must be positive, got {m}")
    if gcd(a, m) != 1:
        raise ParameterError(f"{a} has no inverse modulo {m} (gcd = {gcd(a, m)})")
    return pow(a, -1, m)


def centered(x: int, q: int) -> int:
    """The representative of ``x mod q`` in ``(-q/2, q/2]``."""
    r = int(x) % q
    return r - q if r > q // 2 else r


def _check_coprime(moduli: Sequence[int]) -> None:
    for i, a in enumerate(moduli):
        for b in moduli[i + 1 :]:
            if gcd(a, b) != 1:
                raise ParameterError(f"CRT moduli must be pairwise coprime; {a} and {b} are not")


def crt_reconstruct(residues: Sequence[int], moduli: Sequence[int]) -> int:
    """The unique ``x`` in ``[0, prod(moduli))`` with ``x = residues[i] mod moduli[i]``."""
    moduli = [int(m) for m in moduli]
    if len(residues) != len(moduli):
        raise ParameterError(f"{len(residues)} residues for {len(moduli)} moduli")
    _check_coprime(moduli)
    big = prod(moduli)
    x = 0
    for r, m in zip(residues, moduli):
        mi = big // m
        x += int(r) % m * mi * pow(mi, -1, m)
    return x % big


def crt_reconstruct_array(residues: np.ndarray, moduli: Sequence[int]) -> np.ndarray:
    """Vectorized CRT over axis -2 of ``residues`` shaped ``(..., L, N)``; returns an object array ``(..., N)``."""
    moduli = [int(m) for m in moduli]
    res = np.asarray(residues)
    if res.shape[-2] != len(moduli):
        raise ParameterError(f"residues have {res.shape[-2]} limbs but {len(moduli)} moduli were given")
    _check_coprime(moduli)
    big = prod(moduli)
    acc = np.zeros(res.shape[:-2] + res.shape[-1:], dtype=object)
    for i, m in enumerate(moduli):
        mi = big // m
        coeff = mi * pow(mi, -1, m)
        acc = acc + res[..., i, :].astype(object) * coeff
    return acc % big
