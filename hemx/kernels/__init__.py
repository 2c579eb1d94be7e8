"""Pure, jit-able JAX kernels on uint32 residue arrays shaped ``(..., L, N)``.

Each kernel receives its precomputed tables as arguments (built on the host by the ``make_*``/``compile_*``
helpers next to it); nothing here holds global state. Importing this package enables JAX's 64-bit types
(``jax_enable_x64``): the CPU/GPU paths use 64-bit intermediates, exactly as the design requires. Kernels
that need them check at trace time and raise :class:`hemx.errors.BackendError` if a user turned them off.
"""

from hemx.kernels._x64 import enable_x64, require_x64

enable_x64()

from hemx.kernels import modarith, bat, ntt, bconv, automorphism  # noqa: E402  (x64 must be on first)

__all__ = ["modarith", "bat", "ntt", "bconv", "automorphism", "require_x64"]
