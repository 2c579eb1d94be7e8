"""Packed CKKS bootstrapping built from hemx.circuits: special-FFT transforms (dft), EvalMod (mod1) and the
pipeline (bootstrapper)."""

from hemx.circuits.bootstrap.bootstrapper import Bootstrapper, BootstrapPlan
from hemx.circuits.bootstrap.mod1 import EvalMod, bound_for

from hemx.ckks.context import register_bootstrapper as _register

_register(Bootstrapper)

__all__ = ["Bootstrapper", "BootstrapPlan", "EvalMod", "bound_for"]
