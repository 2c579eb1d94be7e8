"""Polynomial multiplication on matrix engines for any modulus q (the TPU cryptographic-accelerator paper).

``negacyclic_mul(a, b, q)`` and ``cyclic_mul(a, b, q)`` multiply batches of polynomials in
``Z_q[x]/(x^n + 1)`` and ``Z_q[x]/(x^n - 1)`` exactly, for any ``q >= 2`` (prime, composite, power of two,
hundreds of bits). The product is mapped to int8 matrix products (paper §2.2): the (nega)cyclic Toeplitz matrix
of b is gathered on the device from b, blocked (§2.5) so that even one product is a matrix-matrix product, and
the coefficients are carried by a residue base of small moduli or base-256 digits (§2.4, §2.6) chosen so every
int8 x int8 -> int32 accumulation is exact; Karatsuba (§4) is an option. See ``docs/polymul.md``.

Also here: the NTT method through an RNS of NTT primes (:func:`hemx.polymul.reference.ntt_product`), an exact
numpy FFT baseline, a Python-int schoolbook reference, and presets for the paper's Table 1 schemes.
"""

from hemx.polymul.api import METHODS, cyclic_mul, negacyclic_mul, polymul
from hemx.polymul.base import Base, Family, choose_base
from hemx.polymul.plan import ENGINES, RINGS, PolyMulPlan, make_plan
from hemx.polymul.presets import PRESETS, Preset, preset
from hemx.polymul.reference import schoolbook

__all__ = [
    "negacyclic_mul",
    "cyclic_mul",
    "polymul",
    "METHODS",
    "RINGS",
    "ENGINES",
    "make_plan",
    "PolyMulPlan",
    "choose_base",
    "Base",
    "Family",
    "PRESETS",
    "Preset",
    "preset",
    "schoolbook",
]
