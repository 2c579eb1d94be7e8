"""CKKS parameters: ring degree, modulus chain with one- or two-prime levels, special primes, dnum, secret.

The ciphertext modulus ``Q = q_0 q_1 ... q_{L-1}`` is split into *levels*: the base ``q_0..q_{b-1}`` (kept to
the end, it must hold the message) and then groups of one or two primes, each removed by one rescale. Two
primes per level ("double rescaling", CROSS §V-A) let 28-bit words carry a scale near 2^56. Key switching is
hybrid: the limbs are cut into ``dnum`` digits of at most ``alpha = ceil(L / dnum)`` primes and ``alpha``
special primes ``P`` are added.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

from hemx.ckks.security import check_security, max_log_qp
from hemx.errors import LevelError, ModulusError, ParameterError
from hemx.ckks.validation import check_bool, check_int, check_real, int_sequence, is_int
from hemx.nt import is_prime, log2_exact, ntt_primes

DEFAULT_SIGMA = 3.19
MAX_LOG_N = 17
# create() refuses longer chains before searching primes: key material grows with L^2, and the prime search of
# an unbounded request would run for a very long time (the 128-bit bound at N = 2^17 allows about 125 limbs)
MAX_LIMBS = 256


@dataclasses.dataclass(frozen=True)
class CKKSParameters:
    """Immutable CKKS parameter set.

    Attributes:
        log_n: ring degree ``N = 2^log_n``.
        moduli: ciphertext primes ``q_0 .. q_{L-1}`` (q_0 first: the base, removed last).
        level_sizes: primes per level, bottom (base) first; sums to L. ``level_sizes[0]`` is the base.
        special_moduli: key-switching primes P.
        dnum: number of key-switching digits.
        log_scale: default scale ``2^log_scale`` of fresh encodings.
        hamming_weight: None for a uniform ternary secret, else the number of non-zero secret coefficients.
        sigma: error standard deviation.
        allow_insecure: accept parameters beyond the 128-bit HE-standard bound (warns).
    """

    log_n: int
    moduli: tuple[int, ...]
    level_sizes: tuple[int, ...]
    special_moduli: tuple[int, ...]
    dnum: int
    log_scale: float
    hamming_weight: int | None = None
    sigma: float = DEFAULT_SIGMA
    allow_insecure: bool = False
    name: str = "custom"

    def __post_init__(self):
        # types first (bool is not an int here), so no comparison below meets a string, None or NaN
        log_n = check_int("log_n", self.log_n, 2, MAX_LOG_N)
        n = 1 << log_n
        qs = int_sequence("moduli", self.moduli)
        ps = int_sequence("special_moduli", self.special_moduli)
        sizes = int_sequence("level_sizes", self.level_sizes)
        if not qs or not sizes:
            raise ParameterError("a parameter set needs at least one ciphertext modulus (the base) and its level")
        object.__setattr__(self, "log_n", log_n)
        object.__setattr__(self, "moduli", qs)
        object.__setattr__(self, "special_moduli", ps)
        object.__setattr__(self, "level_sizes", sizes)
        object.__setattr__(self, "dnum", check_int("dnum", self.dnum))
        object.__setattr__(self, "log_scale", check_real("log_scale", self.log_scale))
        if self.hamming_weight is not None:
            object.__setattr__(self, "hamming_weight", check_int("hamming_weight", self.hamming_weight))
        object.__setattr__(self, "sigma", check_real("sigma", self.sigma))
        object.__setattr__(self, "allow_insecure", check_bool("allow_insecure", self.allow_insecure))
        if not isinstance(self.name, str):
            raise ParameterError(f"name must be a string, got {self.name!r}")
        for m in qs + ps:
            if m >= 1 << 31:
                raise ModulusError(f"modulus {m} has {m.bit_length()} bits; hemx words hold moduli below 2^31")
            if m % (2 * n) != 1:
                raise ModulusError(f"modulus {m} is not NTT-friendly for N = {n}: need m = 1 mod {2 * n}")
            if not is_prime(m):
                raise ModulusError(f"modulus {m} is not prime")
        if len(set(qs + ps)) != len(qs + ps):
            raise ModulusError("all ciphertext and special moduli must be distinct")
        if sum(self.level_sizes) != len(qs) or any(s < 1 for s in self.level_sizes):
            raise ParameterError(f"level sizes {self.level_sizes} must be positive and sum to {len(qs)} limbs")
        if any(s > 2 for s in self.level_sizes[1:]):
            raise ParameterError("a level above the base is made of one or two primes")
        if not 1 <= self.dnum <= len(qs):
            raise ParameterError(f"dnum must be between 1 and the number of limbs ({len(qs)}), got {self.dnum}")
        if len(ps) < self.alpha:
            raise ParameterError(
                f"{len(ps)} special primes are too few for dnum = {self.dnum}: need alpha = ceil(L/dnum) = {self.alpha}"
            )
        if self.hamming_weight is not None and not 0 < self.hamming_weight <= n:
            raise ParameterError(f"hamming_weight must be in (0, N], got {self.hamming_weight}")
        if not 1 <= self.log_scale <= 62:
            raise ParameterError(f"log_scale must be in [1, 62], got {self.log_scale}")
        if self.sigma <= 0:
            raise ParameterError(f"sigma must be positive, got {self.sigma!r}")
        check_security(n, self.log_qp, sparse_secret=self.hamming_weight is not None,
                       allow_insecure=self.allow_insecure)

    # ---------------------------------------------------------------- derived values
    @property
    def n(self) -> int:
        return 1 << self.log_n

    @property
    def max_slots(self) -> int:
        return self.n // 2

    @property
    def num_limbs(self) -> int:
        return len(self.moduli)

    @property
    def max_level(self) -> int:
        """Level of a fresh ciphertext (number of rescales available)."""
        return len(self.level_sizes) - 1

    @property
    def alpha(self) -> int:
        """Largest digit size: primes per key-switching digit."""
        return -(-len(self.moduli) // self.dnum)

    @property
    def scale(self) -> float:
        return 2.0 ** self.log_scale

    @property
    def log_q(self) -> float:
        return sum(math.log2(q) for q in self.moduli)

    @property
    def log_qp(self) -> float:
        return self.log_q + sum(math.log2(p) for p in self.special_moduli)

    @property
    def secure(self) -> bool:
        bound = max_log_qp(self.n)
        return bound is not None and self.log_qp <= bound and self.hamming_weight is None

    def limbs_at_level(self, level: int) -> int:
        """Number of ciphertext limbs at ``level`` (0 = only the base left)."""
        if not is_int(level):
            raise ParameterError(f"level must be an integer in [0, {self.max_level}], got {level!r}")
        level = int(level)
        if not 0 <= level <= self.max_level:
            raise ParameterError(f"level must be in [0, {self.max_level}], got {level}")
        return sum(self.level_sizes[: level + 1])

    def rescale_divisor(self, level: int) -> float:
        """The product of the primes a rescale at ``level`` (1 to ``max_level``) removes, as a float: what
        ``Context.rescale_divisor`` returns, from the parameters alone (for planners that have no context)."""
        if not is_int(level) or not 0 < int(level) <= self.max_level:
            raise LevelError(f"no rescale at level {level!r}: levels 1 to {self.max_level} have one")
        return float(math.prod(self.moduli[self.limbs_at_level(int(level) - 1): self.limbs_at_level(int(level))]))

    def digits(self) -> tuple[tuple[int, int], ...]:
        """Key-switching digits as limb ranges ``(start, stop)``: dnum balanced groups of consecutive limbs."""
        base, extra = divmod(len(self.moduli), self.dnum)
        out, start = [], 0
        for d in range(self.dnum):
            size = base + (1 if d < extra else 0)
            out.append((start, start + size))
            start += size
        return tuple(out)

    def describe(self) -> str:
        sec = "128-bit" if self.secure else "NOT 128-bit"
        return (f"{self.name}: N=2^{self.log_n}, L={self.num_limbs} limbs ({self.max_level} levels), "
                f"|P|={len(self.special_moduli)}, dnum={self.dnum}, log QP={self.log_qp:.0f} ({sec}), "
                f"scale=2^{self.log_scale:g}")

    # ---------------------------------------------------------------- construction
    @classmethod
    def create(
        cls,
        log_n: int,
        *,
        levels: int,
        primes_per_level: int = 2,
        prime_bits: int = 28,
        level_bits: Sequence[int] | None = None,
        base_bits: Sequence[int] = (31, 31),
        special_bits: int = 31,
        dnum: int = 3,
        log_scale: float | None = None,
        hamming_weight: int | None = None,
        sigma: float = DEFAULT_SIGMA,
        allow_insecure: bool = False,
        name: str = "custom",
    ) -> "CKKSParameters":
        """Build a chain from bit sizes.

        Args:
            log_n: ring degree exponent.
            levels: number of rescales (levels above the base).
            primes_per_level: 1 or 2 (double rescaling).
            prime_bits: bits of the level primes (up to 31).
            level_bits: bits of the primes of each level, level 1 (just above the base) first, ``levels`` entries;
                overrides ``prime_bits`` (e.g. larger primes for the levels a bootstrap's EvalMod runs at).
            base_bits: bits of each base prime; the base must exceed the scale times the message magnitude.
            special_bits: bits of the special primes (alpha of them, alpha = ceil(L / dnum)).
            dnum: key-switching digits.
            log_scale: default ``prime_bits * primes_per_level`` (the rescale divisor, so scales stay put); with
                ``level_bits``, level 1's bits times ``primes_per_level``.
        """
        # every argument is checked before the prime search (cheap, and no raw TypeError from deep inside)
        log_n = check_int("log_n", log_n, 2, MAX_LOG_N)
        if not is_int(primes_per_level) or int(primes_per_level) not in (1, 2):
            raise ParameterError(f"primes_per_level must be 1 or 2, got {primes_per_level!r}")
        primes_per_level = int(primes_per_level)
        levels = check_int("levels", levels, 0, None, hint="; levels is the number of rescales (non-negative)")
        prime_bits = check_int("prime_bits", prime_bits, 2, 31, hint=" (hemx words hold primes below 2^31)")
        if level_bits is not None:
            level_bits = int_sequence("level_bits", level_bits, lo=2, hi=31)
            if len(level_bits) != levels:
                raise ParameterError(f"level_bits names {len(level_bits)} levels, but levels={levels}: give one bit "
                                     "size per level, level 1 first")
            if levels:
                prime_bits = level_bits[0]
        special_bits = check_int("special_bits", special_bits, 2, 31, hint=" (hemx words hold primes below 2^31)")
        base_bits = int_sequence("base_bits", base_bits, lo=2, hi=31)
        if not base_bits:
            raise ParameterError("base_bits must name at least one base prime (the base holds the message at level "
                                 "0), e.g. base_bits=(31, 31)")
        if not is_int(dnum) or dnum < 1:
            raise ParameterError(f"dnum must be a positive number of digits, got {dnum!r}")
        log_scale = float(prime_bits * primes_per_level) if log_scale is None else check_real(
            "log_scale", log_scale, lo=1, hi=62)
        if sum(base_bits) <= log_scale:
            raise ParameterError(
                f"the base primes ({'+'.join(map(str, base_bits))} = {sum(base_bits)} bits) must exceed the scale "
                f"2^{log_scale:g}: at level 0 they hold scale x |value|. Use more or larger base primes "
                f"(base_bits), or a smaller log_scale"
            )
        if hamming_weight is not None:
            check_int("hamming_weight", hamming_weight, 1, 1 << log_n)
        check_real("sigma", sigma, positive=True)
        allow_insecure = check_bool("allow_insecure", allow_insecure)
        if not isinstance(name, str):
            raise ParameterError(f"name must be a string, got {name!r}")
        n = 1 << log_n
        num_limbs = len(base_bits) + levels * primes_per_level
        if num_limbs > MAX_LIMBS:
            raise ParameterError(f"{num_limbs} limbs requested; hemx supports at most {MAX_LIMBS} (fewer levels)")
        if level_bits is None:  # (after the limb bound: levels may be huge until then)
            level_bits = (prime_bits,) * levels
        dnum = min(int(dnum), num_limbs)
        alpha = -(-num_limbs // dnum)
        if not allow_insecure:
            # refuse before the prime search what cannot pass the 128-bit check (every prime has > bits - 1 bits)
            low = (sum(b - 1 for b in base_bits) + sum(primes_per_level * (b - 1) for b in level_bits)
                   + alpha * (special_bits - 1))
            bound = max_log_qp(n)
            if bound is None or low > bound or hamming_weight is not None:
                check_security(n, max(low, 0), sparse_secret=hamming_weight is not None, allow_insecure=False)
        used: list[int] = []

        def take(bits: int, count: int) -> list[int]:
            got = ntt_primes(bits, count, n, exclude=used)
            used.extend(got)
            return got

        special = take(special_bits, alpha)
        base: list[int] = []
        for b in base_bits:
            base += take(b, 1)
        pools = {bits: iter(take(bits, primes_per_level * level_bits.count(bits)))  # one search per size
                 for bits in dict.fromkeys(level_bits)}
        chain = [next(pools[bits]) for bits in level_bits for _ in range(primes_per_level)]
        return cls(
            log_n=log_n,
            moduli=tuple(base + chain),
            level_sizes=(len(base_bits),) + (primes_per_level,) * levels,
            special_moduli=tuple(special),
            dnum=dnum,
            log_scale=log_scale,
            hamming_weight=hamming_weight,
            sigma=sigma,
            allow_insecure=allow_insecure,
            name=name,
        )

    @classmethod
    def preset(cls, name: str, *, allow_insecure: bool = False, **overrides) -> "CKKSParameters":
        """Named parameter sets; see :data:`PRESETS` (CROSS Tab. IV sets A-D, WarpDrive, TensorFHE, secure ones)."""
        if not isinstance(name, str):
            raise ParameterError(f"a preset is named by a string, got {name!r}; choose one of {sorted(PRESETS)}")
        key = name.lower()
        if key not in PRESETS:
            raise ParameterError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        unknown = sorted(set(overrides) - _CREATE_ARGS)
        if unknown:
            raise ParameterError(f"unknown preset override(s) {unknown}; CKKSParameters.create accepts "
                                 f"{sorted(_CREATE_ARGS)}")
        kwargs = dict(PRESETS[key])
        kwargs.update(overrides)
        return cls.create(name=key, allow_insecure=allow_insecure, **kwargs)


_CREATE_ARGS = frozenset({"log_n", "levels", "primes_per_level", "prime_bits", "level_bits", "base_bits",
                          "special_bits", "dnum", "log_scale", "hamming_weight", "sigma"})

# Presets. CROSS Tab. IV fixes N, the number of 28-bit limbs and dnum = 3; hemx lays those limbs out as a base
# of two 31-bit primes (three 28-bit ones for C and D) plus levels of two 28-bit primes. Counting the special
# primes, these sets exceed the HE-standard 128-bit bound (CROSS's log Q column omits P), so they need
# allow_insecure=True. WarpDrive's HE-operation set E (its Tab. VI: N = 2^16, l = 34, one special prime,
# log qp = 974) and TensorFHE's default set (its Tab. V: N = 2^16, L = 44, K = 1, logPQ = 1306) use a single
# special prime, i.e. dnum = L. The "secure_*" sets are hemx's own 128-bit choices.
def _boot_level_bits(user_levels: int) -> tuple[int, ...]:
    """Prime bits per level of the boot_* presets, level 1 first: the user's levels at 28 bits, SlotsToCoeffs' 3
    at 26 (its rescale noise and constants' rounding land on the output unamplified: 2^52 is plenty), EvalMod's 8
    at 30, the scaling level and CoeffsToSlots' 3 at 28."""
    return (28,) * user_levels + (26,) * 3 + (30,) * 8 + (28,) * 4


PRESETS: dict[str, dict] = {
    "set_a": dict(log_n=12, levels=1, base_bits=(31, 31), dnum=3),  # 4 limbs
    "set_b": dict(log_n=13, levels=3, base_bits=(31, 31), dnum=3),  # 8 limbs
    "set_c": dict(log_n=14, levels=6, base_bits=(28, 28, 28), dnum=3),  # 15 limbs
    "set_d": dict(log_n=16, levels=24, base_bits=(28, 28, 28), dnum=3),  # 51 limbs
    "warpdrive": dict(log_n=16, levels=16, base_bits=(31, 31), dnum=34),  # 34 limbs, 1 special prime
    "tensorfhe": dict(log_n=16, levels=21, base_bits=(31, 31), dnum=44),  # 44 limbs, 1 special prime
    "secure_13": dict(log_n=13, levels=2, base_bits=(31, 31), dnum=6),  # log QP ~ 205
    "secure_14": dict(log_n=14, levels=5, base_bits=(31, 31), dnum=6),  # log QP ~ 404
    "secure_15": dict(log_n=15, levels=11, base_bits=(31, 31), dnum=6),  # log QP ~ 802
    "secure_16": dict(log_n=16, levels=23, base_bits=(31, 31), dnum=4),  # log QP ~ 1715
    # Bootstrapping (hemx.circuits.bootstrap): a base q0 ~ 2^70 (three primes of 30, ~20, ~20 bits) about 2^14 times
    # the scale, 15 levels for the bootstrap (CoeffsToSlots 3, scaling 1, EvalMod 8, SlotsToCoeffs 3) and the rest
    # for the user: 3 at N = 2^12 / 2^13, 10 at N = 2^16. Levels hold two 28-bit primes (scale 2^56), except
    # EvalMod's 8, which hold two 30-bit primes (EvalMod runs at the scale 2^60 of its levels: the CKKS noise at its
    # input, amplified by (K + 1) q0 / scale and sqrt(N), is 16x smaller, 4 bits of precision), and
    # SlotsToCoeffs' 3, which hold two 26-bit ones (see _boot_level_bits). The main secret is uniform ternary;
    # ModRaise runs under an ephemeral sparse secret (32 non-zeros, keygen(bootstrap=...) makes the switching
    # keys), so its overflow stays small (K = 11). boot_16 is 128-bit under the HE standard (log QP ~1765 <= 1772
    # for N = 2^16, special primes counted; its 279-bit P is 2^9 above its largest digit, so key switching adds
    # far less noise than a rescale); boot_12 / boot_13 are test-size rings with the same structure
    # (allow_insecure=True). Their 3 levels after a bootstrap hold no ReLU step (the default sign composite's
    # stages need 4 or 5 levels each); boot_12_relu / boot_13_relu give the user boot_16's 10 (25 levels, 53 limbs:
    # a ReLU takes one bootstrap), for trying ReLU networks at test size (allow_insecure=True).
    "boot_12": dict(log_n=12, levels=18, base_bits=(30, 20, 20), dnum=3, level_bits=_boot_level_bits(3)),
    "boot_13": dict(log_n=13, levels=18, base_bits=(30, 20, 20), dnum=3, level_bits=_boot_level_bits(3)),
    "boot_12_relu": dict(log_n=12, levels=25, base_bits=(30, 20, 20), dnum=3, level_bits=_boot_level_bits(10)),
    "boot_13_relu": dict(log_n=13, levels=25, base_bits=(30, 20, 20), dnum=3, level_bits=_boot_level_bits(10)),
    "boot_16": dict(log_n=16, levels=25, base_bits=(30, 21, 20), dnum=6, level_bits=_boot_level_bits(10)),
}
