"""The scale policy of CKKS ciphertexts and the public magnitude bounds they carry.

:class:`ScalePolicy` answers, from the parameters alone, the questions every operation asks about scales: the
managed scale of a level (:func:`managed_scales`, FLEXIBLEAUTO-style), the band ``(T / 2, T]`` results are kept
in, the integer that lifts a product into that band, and whether a scale or a bound still fits the modulus (the
``check_*`` methods raise a :mod:`hemx.errors` exception that says what to change). The bound helpers propagate
``max |value|`` through sums and products (None: unknown).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings

import numpy as np

from hemx.ckks.params import CKKSParameters
from hemx.ckks.validation import is_real
from hemx.errors import DecryptionWarning, LevelError, OverflowBoundError, ParameterError, PrecisionError

#: Relative tolerance under which two scales count as equal.
SCALE_RTOL = 1e-9
#: A scale below this many bits over the noise (~ sqrt(N) after a rescale) leaves too little precision: refused.
MIN_SCALE_MARGIN_BITS = 10
#: Aligning a ciphertext to another scale with rescale(ct * c) records the target scale; the integer c's rounding
#: changes the true scale by a relative 0.5 / c, so c must be at least this large (far below every noise).
MIN_ALIGN_FACTOR = 2.0 ** 40
#: add/sub align the scales of two ciphertexts automatically when they differ by less than this factor (scales
#: divided by different primes differ by ~2^0.001 per rescale); beyond it the scales are genuinely different.
AUTO_SCALE_MAX_RATIO = 2.0


def managed_scales(params: CKKSParameters) -> tuple[float, ...]:
    """:meth:`ScalePolicy.level_scale` of every level, level 0 first: ``T_0 = params.scale``,
    ``T_l = min(D_l, sqrt(T_{l-1} D_l))`` with ``D_l`` the product of the primes of level ``l``."""
    scales, pos = [float(params.scale)], params.level_sizes[0]
    for size in params.level_sizes[1:]:
        d = float(math.prod(params.moduli[pos : pos + size]))
        scales.append(min(d, math.sqrt(scales[-1] * d)))
        pos += size
    return tuple(scales)


def peak(values) -> float:
    """``max |value|`` of host values (any shape; 0 for none)."""
    z = np.abs(np.asarray(values))
    return float(np.max(z)) if z.size else 0.0


def round_bound(value: float) -> float:
    """``value`` rounded up to a power of two (0 stays 0): a sound bound that takes few distinct values."""
    return 2.0 ** math.ceil(math.log2(value)) if value > 0 else 0.0


def add_bounds(a, b):
    """Bound of a sum (None if either is unknown, or if it overflows a float: static metadata stays comparable)."""
    out = None if a is None or b is None else float(a) + float(b)
    return out if out is not None and math.isfinite(out) else None


def mul_bounds(a, b):
    """Bound of a product (None if either is unknown, or if it overflows a float)."""
    out = None if a is None or b is None else float(a) * float(b)
    return out if out is not None and math.isfinite(out) else None


@dataclasses.dataclass(frozen=True, eq=False)
class ScalePolicy:
    """Scale management for one parameter set (a value: it reads only ``params``; cached per instance)."""

    params: CKKSParameters

    @functools.cached_property
    def _scales(self) -> tuple[float, ...]:
        return managed_scales(self.params)

    @functools.cached_property
    def _log_q(self) -> tuple[float, ...]:
        logs = [0.0]
        for q in self.params.moduli:
            logs.append(logs[-1] + math.log2(q))
        return tuple(logs)

    def level_scale(self, level: int) -> float:
        """The scale ciphertexts are managed at on ``level`` (FLEXIBLEAUTO-style: it follows the primes dropped).

        ``T_0`` is the parameters' scale and ``T_l = min(D_l, sqrt(T_{l-1} D_l))`` with ``D_l`` the product of the
        primes a rescale at ``l`` removes, so a product of two operands at scale ``<= T_l``, times a small integer
        ``c >= 1`` and rescaled, lands in ``(T_{l-1} / 2, T_{l-1}]`` on every chain (the primes of a level need
        not match the scale: the ``boot_*`` presets' 52- and 60-bit levels, 28-bit primes well below 2^28 at
        N = 2^16). Fresh encodings use ``T_level``; a managed product keeps every result in that band."""
        self.params.limbs_at_level(level)
        return self._scales[int(level)]

    def divisor(self, level: int) -> float:
        """``D_level`` from the parameters (no tables built); 1.0 at level 0."""
        return self.params.rescale_divisor(level) if level else 1.0

    def log_q(self, num_q: int) -> float:
        """``log2`` of the product of the first ``num_q`` ciphertext primes."""
        return self._log_q[num_q]

    def in_band(self, scale: float, level: int) -> bool:
        """``scale`` in the managed band ``(T / 2, T]`` of ``level`` (a relative 1e-9 of float slack above)."""
        target = self.level_scale(level)
        return target / 2 < scale <= target * (1 + 1e-9)

    def scale_factor(self, product_scale: float, level: int) -> int:
        """The integer ``c >= 1`` that brings ``product_scale * c / D_level`` into the band of ``level - 1``."""
        x = self.level_scale(level - 1) * self.divisor(level) / product_scale
        return max(1, int(math.floor(x * (1 + 1e-9))))

    def check_product_scale(self, scale: float, level: int) -> None:
        """A product whose scale reaches the modulus would wrap around: refuse it with a clear error."""
        log_q = self.log_q(self.params.limbs_at_level(level))
        if not (scale > 0 and math.isfinite(scale)):
            raise PrecisionError(f"the product would have scale {scale!r} (the operands' scales under- or "
                                 "overflowed a float); rescale less often, or encode at a scale near level_scale")
        if math.log2(scale) >= log_q - 1:
            raise LevelError(
                f"the product would have scale 2^{math.log2(scale):.1f}, beyond the modulus at level {level} "
                f"(2^{log_q:.1f}); rescale the operands first, or use parameters with more levels"
            )

    def check_bound_fits(self, bound, scale: float, level: int, what: str) -> None:
        """Refuse a result whose magnitude bound times its scale may reach half the modulus at ``level``: it would
        wrap around and decrypt to garbage with no error. The bound is the public, propagated ``max |value|``
        (rounded up to powers of two at encryption), so this can refuse a result whose true values would have
        fitted; an unknown bound (None) is not checked. Managed operations only (``auto_scale``): circuits that
        plan their own scales (:mod:`hemx.circuits`) keep their own range analysis."""
        if bound is None or not bound > 0:
            return
        log_q = self.log_q(self.params.limbs_at_level(level))
        need = math.log2(bound) + math.log2(scale)
        if need >= log_q - 1:
            raise OverflowBoundError(
                f"{what} may reach |x| = {bound:.4g} at scale 2^{math.log2(scale):.1f}: 2^{need:.1f}, beyond half "
                f"the modulus at level {level} (2^{log_q - 1:.1f}); it would decrypt to garbage. Scale the values "
                "down before encrypting (x / k, and multiply the result back by k^degree), or use parameters with "
                "a larger base prime; a tighter bound at encryption (encrypt(..., bound=)) helps when the data's "
                "true range is known to be smaller"
            )

    def check_result_scale(self, scale: float, level: int, what: str, mode: str = "raise") -> None:
        """A scale too small to hold the values above the noise: PrecisionError (never silent garbage); ``mode``
        "warn" warns (:class:`~hemx.errors.DecryptionWarning`), "off" does nothing."""
        floor = self.params.log_n / 2 + MIN_SCALE_MARGIN_BITS
        if mode == "off" or (scale > 0 and math.log2(scale) >= floor):
            return
        shown = f"2^{math.log2(scale):.1f}" if scale > 0 else f"{scale!r}"
        msg = (f"{what}: scale {shown} at level {level} is below 2^{floor:g} (the noise after a rescale is "
               f"~2^{self.params.log_n / 2:g}): the values would be garbage. Multiply with ctx.mul(a, b, keys) "
               "(the default rescale=True keeps every scale at level_scale(level)), rescale only products, or "
               "encode plain operands at a larger scale")
        if mode == "warn":
            warnings.warn(msg, DecryptionWarning, stacklevel=5)
            return
        raise PrecisionError(msg)

    @staticmethod
    def check_encode_scale(scale) -> float:
        """``scale`` as a positive finite float (ParameterError / OverflowBoundError otherwise)."""
        if not is_real(scale):
            raise ParameterError(f"scale must be a positive finite number, got {scale!r}")
        value = float(scale)
        if math.isinf(value) and value > 0:
            raise OverflowBoundError("scale must be finite: an infinite scale fits no modulus")
        if not (math.isfinite(value) and value > 0):
            raise ParameterError(f"scale must be a positive finite number, got {scale!r}")
        return value

    @staticmethod
    def check_plain_scale(scale) -> float:
        """``plain_scale`` as a positive finite float (ParameterError otherwise)."""
        try:
            value = float(scale)
        except (TypeError, ValueError):
            raise ParameterError(f"plain_scale must be a positive finite number, got {scale!r}") from None
        if not (math.isfinite(value) and value > 0):
            raise ParameterError(f"plain_scale must be a positive finite number, got {scale!r}")
        return value
