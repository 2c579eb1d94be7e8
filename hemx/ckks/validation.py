"""Argument checks shared by the CKKS front (issue 17): plain Python, cheap, never on traced values.

``bool`` is not accepted where an integer is meant (``True`` is not level 1 or rotation step 1), and numbers
must be real and finite. Every check raises a :mod:`hemx.errors` class whose message names the argument.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from hemx.errors import ParameterError


def is_int(value) -> bool:
    """An integer that is not a bool (Python or numpy)."""
    return isinstance(value, (Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value) -> bool:
    """A real number that is not a bool (Python or numpy); may be non-finite."""
    return isinstance(value, (Real, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def check_int(name: str, value, lo: int | None = None, hi: int | None = None, *, error=ParameterError,
              hint: str = "") -> int:
    """``value`` as an int in ``[lo, hi]`` (either bound optional), else ``error``."""
    if not is_int(value):
        raise error(f"{name} must be an integer, got {value!r} ({type(value).__name__}){hint}")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        lo_s = "-inf" if lo is None else lo
        hi_s = "inf" if hi is None else hi
        raise error(f"{name} must be in [{lo_s}, {hi_s}], got {v}{hint}")
    return v


def check_real(name: str, value, *, positive: bool = False, lo: float | None = None, hi: float | None = None,
               error=ParameterError) -> float:
    """``value`` as a finite float (optionally > 0, in ``[lo, hi]``), else ``error``."""
    if not is_real(value):
        raise error(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not math.isfinite(v):
        raise error(f"{name} must be finite, got {v!r}")
    if positive and not v > 0:
        raise error(f"{name} must be positive, got {v!r}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise error(f"{name} must be in [{lo}, {hi}], got {v!r}")
    return v


def check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def int_sequence(name: str, value, *, lo: int | None = None, hi: int | None = None, error=ParameterError
                 ) -> tuple[int, ...]:
    """A tuple of ints from a list / tuple / 1-d integer array (not a string, a mapping or a scalar)."""
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise error(f"{name} must be a 1-d sequence of integers, got an array of shape {value.shape}")
        value = value.tolist()
    if not isinstance(value, (tuple, list, range)):
        raise error(f"{name} must be a tuple or list of integers, got {value!r} ({type(value).__name__})")
    return tuple(check_int(f"{name}[{i}]", v, lo, hi, error=error) for i, v in enumerate(value))

