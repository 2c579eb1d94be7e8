"""Ring presets from the paper's Table 1 schemes (PQC, FHE, ZKP sizes)."""

from __future__ import annotations

import dataclasses

from hemx.errors import ParameterError

#: largest 54-bit prime q = 1 mod 2^15 (an NTT-friendly FHE modulus for n = 2^14), from hemx.nt.ntt_primes
FHE_Q54 = 18014398508400641
#: secp256k1 base-field prime 2^256 - 2^32 - 977: a 256-bit field modulus used in ZK circuits
ZKP_Q256 = (1 << 256) - (1 << 32) - 977


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named ring: ``Z_q[x]/(x^n + 1)`` (negacyclic) or ``(x^n - 1)`` (cyclic)."""

    name: str
    n: int
    q: int
    ring: str
    note: str

    @property
    def q_bits(self) -> int:
        return self.q.bit_length()


PRESETS: dict[str, Preset] = {
    "kyber": Preset("kyber", 256, 3329, "negacyclic", "ML-KEM / Kyber: q = 3329 is not 1 mod 2n = 512"),
    "dilithium": Preset("dilithium", 256, 8380417, "negacyclic", "ML-DSA / Dilithium: q = 2^23 - 2^13 + 1"),
    "fhe": Preset("fhe", 1 << 14, FHE_Q54, "negacyclic", "FHE (BFV/CKKS) limb: n = 2^14, 54-bit prime"),
    "zkp": Preset("zkp", 1 << 16, ZKP_Q256, "cyclic", "ZKP size: n = 2^16, 256-bit prime field (x^n - 1)"),
}


def preset(name: str) -> Preset:
    """Look up a preset by name (``kyber``, ``dilithium``, ``fhe``, ``zkp``)."""
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise ParameterError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}") from None
