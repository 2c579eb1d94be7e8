"""RNS polynomial rings: moduli + a chosen NTT plan + device-resident tables.

``RNSRing(n, moduli, ntt=...)`` represents ``Z_Q[X]/(X^N + 1)`` with ``Q = prod(moduli)`` in RNS form: a
polynomial is a uint32 array ``(L, N)``, a batch adds leading axes ``(..., L, N)``. All methods are jit-compiled
per shape and accept any leading batch axes.
"""

from hemx.ring.rns import RNSRing, NTT_METHODS

__all__ = ["RNSRing", "NTT_METHODS"]
