"""Residue bases for exact polynomial products on an int8 matrix engine (host side, exact Python ints).

A product of two polynomials in ``Z_q[x]/(x^n -+ 1)`` is first computed exactly over the integers (from the
*centered* representatives of the coefficients, ``|a_i| <= q // 2``), so every coefficient of the integer
product satisfies ``|c_k| <= n * (q // 2)^2``; it is then reduced mod q. The integer product is never formed:
the matrix engine computes it modulo a set of small "channel" moduli, and those residues are mapped to
``c mod q``. This module chooses that set.

Two representations are supported; each costs a number of *channels*, one channel being one int8 x int8 ->
int32 product of an ``n``-coefficient polynomial by a Toeplitz matrix (``n^2`` multiply-adds per product):

``"digits"`` (no CRT)
    The residues mod q themselves, split into ``K`` balanced base-256 digits (int8). The b-side digit
    matrices are pre-multiplied by ``2^(8i) mod q`` (the BAT folding of CROSS §IV-A), so the engine returns
    ``K`` partial sums that merge to the answer mod q. Cost ``K^2`` channels; only for ``q < 2^31`` (merges
    stay in int64).

``"rns"`` (CRT)
    Residues modulo pairwise-coprime small moduli ``m_i`` whose product ``M`` exceeds twice the bound, so the
    exact integer product is recovered (centered) by the Chinese remainder theorem, then reduced mod q. A
    modulus ``m <= 256`` has one int8 digit (centered residues in ``[-128, 127]``) and costs 1 channel for
    ``log2(m)`` bits; there are only 49 of them in the greedy coprime list (about 342 bits in all), so larger
    products add primes just below ``2^16`` with two digits each (4 channels for ~16 bits).

:func:`choose_base` compares the channel counts and takes the cheaper representation (``digits`` on ties: it
needs no CRT). Typical outcomes (n = 256): q = 3329 (Kyber) -> digits, 4 channels (RNS also needs 4, plus a
CRT); q = 8380417 (Dilithium) -> RNS, 7 channels (digits would need 9); 54-bit q at n = 2^14 -> RNS, 16
channels (digits would need 49); 256-bit q at n = 2^16 -> RNS with 48 one-digit and 12 two-digit moduli, 96
channels (splitting the coefficients into 8-bit limbs would need 32^2 = 1024).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Sequence

from hemx.errors import ModulusError, OverflowBoundError, ParameterError
from hemx.nt import is_prime

DIGIT_BITS = 8
#: widest one-digit modulus: centered residues of m <= 256 lie in [-128, 127]
MAX_ONE_DIGIT_MODULUS = 256
#: widest two-digit modulus: centered residues must fit two balanced int8 digits, [-32896, 32639]
MAX_TWO_DIGIT_MODULUS = 65279
#: rounding margin of the CRT: M must exceed 2 * bound * (1 + 2^-CRT_MARGIN_BITS)
CRT_MARGIN_BITS = 20
#: "digits" representation needs residues and merges in int64
MAX_DIGITS_MODE_BITS = 31
BASES: tuple[str, ...] = ("auto", "digits", "rns")


def balanced_range(num: int, bits: int = DIGIT_BITS) -> tuple[int, int]:
    """Smallest and largest integers written with ``num`` balanced digits in ``[-2^(bits-1), 2^(bits-1))``."""
    geo = ((1 << (bits * num)) - 1) // ((1 << bits) - 1)
    return -(1 << (bits - 1)) * geo, ((1 << (bits - 1)) - 1) * geo


def centered_range(m: int) -> tuple[int, int]:
    """Range of the centered residues used here: ``r - m`` when ``r > (m - 1) // 2``, i.e. ``[-(m//2), (m-1)//2]``."""
    return -(m // 2), (m - 1) // 2


def num_digits(m: int) -> int:
    """K: how many balanced int8 digits hold every centered residue mod ``m``."""
    lo, hi = centered_range(int(m))
    k = 1
    while True:
        blo, bhi = balanced_range(k)
        if blo <= lo and hi <= bhi:
            return k
        k += 1


def max_digit(m: int, k: int) -> int:
    """Largest absolute value a digit of a centered residue mod ``m`` (written with ``k`` digits) can take."""
    return m // 2 if k == 1 else 1 << (DIGIT_BITS - 1)


def product_bound(n: int, q: int) -> int:
    """``n * (q // 2)^2``: bound on ``|c_k|`` for the integer product of centered coefficient vectors."""
    return int(n) * (int(q) // 2) ** 2


def size_class_bound(n: int, q: int) -> int:
    """``n * (2^(b-1))^2`` for a b-bit q: at least :func:`product_bound` for every q of that bit length."""
    return int(n) << (2 * (int(q).bit_length() - 1))


@functools.lru_cache(maxsize=None)
def one_digit_moduli() -> tuple[int, ...]:
    """Pairwise-coprime moduli ``<= 256``, greedily from the top (256, 255, 253, 251, 247, 241, ...): 49 of them."""
    chosen: list[int] = []
    for m in range(MAX_ONE_DIGIT_MODULUS, 1, -1):
        if all(math.gcd(m, c) == 1 for c in chosen):
            chosen.append(m)
    return tuple(chosen)


@functools.lru_cache(maxsize=8)
def two_digit_moduli(count: int) -> tuple[int, ...]:
    """The ``count`` largest primes ``<= 65279`` (coprime to every one-digit modulus), largest first."""
    out: list[int] = []
    m = MAX_TWO_DIGIT_MODULUS
    while len(out) < count:
        if m <= MAX_ONE_DIGIT_MODULUS:
            raise ParameterError(f"cannot find {count} two-digit moduli")
        if is_prime(m):
            out.append(m)
        m -= 1
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class Family:
    """Channel moduli that share a digit count ``K`` (one kernel launch handles them together).

    Attributes:
        moduli: the moduli (``q`` itself in the digits representation).
        digits: ``K``, int8 digits per residue; each modulus costs ``K^2`` channels.
    """

    moduli: tuple[int, ...]
    digits: int

    @property
    def channels(self) -> int:
        return len(self.moduli) * self.digits**2

    @property
    def max_digit(self) -> int:
        """Largest ``|digit|`` over the family (int32 accumulation bound)."""
        return max(max_digit(m, self.digits) for m in self.moduli)


@dataclasses.dataclass(frozen=True)
class Base:
    """A chosen representation for the exact product.

    Attributes:
        mode: ``"digits"`` or ``"rns"``.
        families: one or two :class:`Family` (one-digit moduli first).
        bound: ``n * (q // 2)^2``, the largest ``|c_k|`` (RNS bases are sized for :func:`size_class_bound`).
        modulus_product: ``M``, product of all channel moduli (``q`` in digits mode).
        alternatives: channel counts of both representations considered, for reports (``None``: not possible).
    """

    mode: str
    families: tuple[Family, ...]
    bound: int
    modulus_product: int
    alternatives: tuple[tuple[str, int | None], ...]

    @property
    def moduli(self) -> tuple[int, ...]:
        return tuple(m for f in self.families for m in f.moduli)

    @property
    def channels(self) -> int:
        return sum(f.channels for f in self.families)

    def describe(self) -> str:
        parts = [f"{len(f.moduli)}x{f.digits}-digit" for f in self.families]
        return f"{self.mode}: {' + '.join(parts)} ({self.channels} channels)"


def _crt_needed(bound: int) -> int:
    """Smallest modulus product that recovers every centered value ``|c| <= bound`` with rounding margin."""
    return 2 * bound + (2 * bound >> CRT_MARGIN_BITS) + 2


def rns_families(bound: int) -> tuple[tuple[Family, ...], int]:
    """Cheapest one-/two-digit RNS base whose product exceeds :func:`_crt_needed` ``(bound)``.

    Tries every count ``j`` of leading one-digit moduli and completes with two-digit primes; the cost is
    ``j + 4 * l`` channels plus a small per-modulus overhead (residue, merge and CRT work grow with the number
    of moduli, so at equal channels fewer moduli win).
    """
    need = _crt_needed(bound)
    ones = one_digit_moduli()
    best = None
    prod_one = 1
    for j in range(len(ones) + 1):
        if j:
            prod_one *= ones[j - 1]
        rest = -(-need // prod_one)  # ceil(need / prod_one)
        twos: list[int] = []
        if rest > 1:
            # the two-digit primes are all ~2^16; count how many are needed
            est = max(1, math.ceil(math.log2(rest) / 15.99))
            cand = two_digit_moduli(est + 2)
            p = 1
            for m in cand:
                if p >= rest:
                    break
                twos.append(m)
                p *= m
            if p < rest:  # pragma: no cover - estimate above always suffices
                continue
        cost = j + 4 * len(twos) + 0.05 * (j + len(twos))
        if best is None or cost < best[0]:
            best = (cost, j, tuple(twos))
        if rest <= 1:
            break
    _, j, twos = best
    fams = []
    if j:
        fams.append(Family(ones[:j], 1))
    if twos:
        fams.append(Family(twos, 2))
    m_prod = math.prod(ones[:j]) * math.prod(twos)
    return tuple(fams), m_prod


def choose_base(n: int, q: int, base: str = "auto") -> Base:
    """Pick the representation (``"auto"``: fewest channels) for products of degree-``n`` polynomials mod ``q``.

    Raises:
        ParameterError: unknown ``base``; ModulusError: ``"digits"`` requested for ``q >= 2^31``.
    """
    if base not in BASES:
        raise ParameterError(f"base must be one of {BASES}, got {base!r}")
    q, n = int(q), int(n)
    bound = product_bound(n, q)
    # the RNS base depends on n and the bit length of q only (bound of the largest q of that length), so all
    # moduli of one size share a plan structure and a compiled kernel
    fams, m_prod = rns_families(size_class_bound(n, q))
    rns_cost = sum(f.channels for f in fams)
    digits_ok = q.bit_length() <= MAX_DIGITS_MODE_BITS
    k = num_digits(q) if digits_ok else None
    dig_cost = k * k if k else None
    alts = (("digits", dig_cost), ("rns", rns_cost))
    if base == "digits" and not digits_ok:
        raise ModulusError(
            f"the digits representation needs q < 2^{MAX_DIGITS_MODE_BITS} (q has {q.bit_length()} bits); "
            "use base='rns' or base='auto'"
        )
    use_digits = base == "digits" or (base == "auto" and digits_ok and dig_cost <= rns_cost)
    if use_digits:
        return Base("digits", (Family((q,), k),), bound, q, alts)
    return Base("rns", fams, bound, m_prod, alts)


def check_accumulation(family: Family, contraction: int, limit: int) -> None:
    """Raise OverflowBoundError unless ``contraction`` digit products fit the accumulator (``|sum| <= limit``)."""
    d = family.max_digit
    if contraction * d * d > limit:
        raise OverflowBoundError(
            f"{contraction} products of digits up to {d} exceed the accumulator bound {limit}; "
            "use a smaller block (block=...) or chunk (chunk_blocks=...)"
        )


def crt_constants(moduli: Sequence[int], q: int) -> tuple[list[int], list[int], int]:
    """``inv_i = (M/m_i)^-1 mod m_i``, ``w_i = (M/m_i) mod q`` and ``w_alpha = (-M) mod q`` for the CRT to mod q."""
    m_prod = math.prod(int(m) for m in moduli)
    invs, ws = [], []
    for m in moduli:
        mi = m_prod // m
        invs.append(pow(mi % m, -1, m) if m > 1 else 0)
        ws.append(mi % q)
    return invs, ws, (-m_prod) % q
