"""Host-side number theory with exact Python integers (no JAX).

Everything here is used offline: to pick NTT-friendly primes, find roots of unity, precompute inverses and
CRT tables, and build permutations. Results are plain ints or numpy integer arrays.
"""

from hemx.nt.primes import is_prime, ntt_primes, next_ntt_prime_below
from hemx.nt.roots import primitive_root, root_of_unity, primitive_2nth_root, is_primitive_root_of_unity
from hemx.nt.modular import mod_inverse, crt_reconstruct, crt_reconstruct_array, centered
from hemx.nt.bits import is_power_of_two, log2_exact, bit_reverse, bit_reverse_permutation

__all__ = [
    "is_prime",
    "ntt_primes",
    "next_ntt_prime_below",
    "primitive_root",
    "root_of_unity",
    "primitive_2nth_root",
    "is_primitive_root_of_unity",
    "mod_inverse",
    "crt_reconstruct",
    "crt_reconstruct_array",
    "centered",
    "is_power_of_two",
    "log2_exact",
    "bit_reverse",
    "bit_reverse_permutation",
]
