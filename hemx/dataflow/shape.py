"""The shape of one hybrid key switch: how many towers of which size flow through it.

A *tower* is one RNS limb of one polynomial: ``N`` residues of ``word_bytes`` bytes each. Every datum the model
moves or keeps is a whole number of towers, so all sizes below are exact products
``towers x N x word_bytes`` and nothing is estimated.

For a key switch of a polynomial with ``l`` towers over ``Q_l = q_0 ... q_{l-1}`` with ``K`` special primes
``P = p_0 ... p_{K-1}`` and the towers cut into ``dnum`` digits ``D_0 .. D_{dnum-1}`` (digit ``d`` has
``alpha_d`` consecutive towers):

- input: ``l`` towers; output: two polynomials of ``l`` towers (``2 l``);
- ModUp basis conversion of digit ``d`` produces ``beta_d = l + K - alpha_d`` towers;
- switching key: ``dnum x 2 x (l + K)`` towers (CiFlow Tab. III "evk size");
- key product (ModUp P4): ``dnum x 2 x (l + K)`` towers before the reduction (P5) to ``2 (l + K)``;
- ModDown basis conversion: ``2 K`` towers in, ``2 l`` towers out.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from hemx.errors import LevelError, ParameterError

if TYPE_CHECKING:  # pragma: no cover - type hints only
    from hemx.ckks.params import CKKSParameters

MIB = 1 << 20


@dataclasses.dataclass(frozen=True)
class KeySwitchShape:
    """Sizes of one hybrid key switch (immutable).

    Attributes:
        n: ring degree ``N`` (coefficients per tower).
        towers: ``l``, ciphertext towers of the input polynomial at the key-switching level.
        special: ``K``, number of special primes (towers of ``P``).
        digit_sizes: towers per digit, in order (they sum to ``l``); ``dnum = len(digit_sizes)``.
        word_bytes: bytes per stored residue (8 for CiFlow's 64-bit words, 4 for hemx's uint32 words).
        name: label used in reports.
    """

    n: int
    towers: int
    special: int
    digit_sizes: tuple[int, ...]
    word_bytes: int = 8
    name: str = "custom"

    def __post_init__(self):
        object.__setattr__(self, "digit_sizes", tuple(int(a) for a in self.digit_sizes))
        if self.n < 2 or self.n & (self.n - 1):
            raise ParameterError(f"ring degree must be a power of two >= 2, got {self.n}")
        if self.towers < 1:
            raise ParameterError(f"need at least one ciphertext tower, got {self.towers}")
        if self.special < 1:
            raise ParameterError(f"hybrid key switching needs at least one special prime, got {self.special}")
        if not self.digit_sizes or any(a < 1 for a in self.digit_sizes):
            raise ParameterError(f"digit sizes must be positive, got {self.digit_sizes}")
        if sum(self.digit_sizes) != self.towers:
            raise ParameterError(f"digit sizes {self.digit_sizes} must sum to the {self.towers} towers")
        if self.word_bytes < 1:
            raise ParameterError(f"word_bytes must be positive, got {self.word_bytes}")

    # ------------------------------------------------------------------ construction
    @classmethod
    def ciflow(cls, n: int, towers: int, special: int, dnum: int, alpha: int | None = None, *,
               word_bytes: int = 8, name: str = "custom") -> "KeySwitchShape":
        """CiFlow's digit split: ``alpha = ceil(l / dnum)`` towers per digit, the last digit takes the rest.

        (CiFlow Tab. I: ``alpha = ceil((L + 1) / dnum)`` where ``L + 1 = l`` towers; DPRIVE's 26 towers in 3
        digits are 9 + 9 + 8.)
        """
        if dnum < 1 or dnum > towers:
            raise ParameterError(f"dnum must be in [1, {towers}], got {dnum}")
        a = -(-towers // dnum) if alpha is None else int(alpha)
        sizes, left = [], towers
        for _ in range(dnum):
            take = min(a, left)
            if take < 1:
                raise ParameterError(f"alpha = {a} with dnum = {dnum} leaves an empty digit of {towers} towers")
            sizes.append(take)
            left -= take
        if left:
            raise ParameterError(f"alpha = {a} x dnum = {dnum} does not cover {towers} towers")
        return cls(n=n, towers=towers, special=special, digit_sizes=tuple(sizes), word_bytes=word_bytes,
                   name=name)

    @classmethod
    def from_params(cls, params: "CKKSParameters", level: int | None = None, *, word_bytes: int = 4,
                    name: str | None = None) -> "KeySwitchShape":
        """The key switch hemx performs for ``params`` at ``level`` (default: the top level).

        hemx cuts all ``L`` limbs into ``params.dnum`` balanced digits (``params.digits()``) and at a lower level
        keeps the key's digits restricted to the limbs still present (``hemx.ckks.keyswitch``); digits that
        lie wholly above the level drop out. ``K = len(params.special_moduli)``.
        """
        if level is None:
            level = params.max_level
        if not 0 <= level <= params.max_level:
            raise LevelError(f"level must be in [0, {params.max_level}], got {level}")
        towers = params.limbs_at_level(level)
        sizes = tuple(min(hi, towers) - lo for lo, hi in params.digits() if lo < towers)
        label = name or f"{getattr(params, 'name', 'custom')}@{level}"
        return cls(n=params.n, towers=towers, special=len(params.special_moduli), digit_sizes=sizes,
                   word_bytes=word_bytes, name=label)

    # ------------------------------------------------------------------ derived sizes
    @property
    def dnum(self) -> int:
        return len(self.digit_sizes)

    @property
    def alpha(self) -> int:
        """Largest digit."""
        return max(self.digit_sizes)

    @property
    def log_n(self) -> int:
        return int(math.log2(self.n))

    @property
    def tower_bytes(self) -> int:
        return self.n * self.word_bytes

    @property
    def betas(self) -> tuple[int, ...]:
        """Towers each digit's ModUp basis conversion produces: ``l + K - alpha_d``."""
        return tuple(self.towers + self.special - a for a in self.digit_sizes)

    @property
    def evk_towers(self) -> int:
        return self.dnum * 2 * (self.towers + self.special)

    @property
    def evk_bytes(self) -> int:
        """Switching-key bytes read by one key switch: ``dnum x 2 x (l + K) x N x word``."""
        return self.evk_towers * self.tower_bytes

    @property
    def temp_towers(self) -> int:
        """The three expansions of key switching: ModUp BConv output (sum of ``beta_d``), key product before
        the reduction (``2 dnum (l + K)``) and ModDown BConv output (``2 l``). See docs/dataflow.md: this is
        our reading of CiFlow Tab. III "Temp data", which the paper does not define."""
        return sum(self.betas) + 2 * self.dnum * (self.towers + self.special) + 2 * self.towers

    @property
    def temp_bytes(self) -> int:
        return self.temp_towers * self.tower_bytes

    @property
    def input_bytes(self) -> int:
        return self.towers * self.tower_bytes

    @property
    def output_bytes(self) -> int:
        return 2 * self.towers * self.tower_bytes

    def describe(self) -> str:
        return (f"{self.name}: N=2^{self.log_n}, l={self.towers}, K={self.special}, dnum={self.dnum}, "
                f"digits={list(self.digit_sizes)}, {self.word_bytes}-byte words, "
                f"tower={self.tower_bytes / MIB:g} MiB, evk={self.evk_bytes / MIB:g} MiB")
