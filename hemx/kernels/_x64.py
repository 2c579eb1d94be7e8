"""64-bit integer support in JAX."""

from __future__ import annotations

import jax

from hemx.errors import BackendError


def enable_x64() -> None:
    """Turn on ``jax_enable_x64`` (hemx's kernels need uint64/int64 intermediates)."""
    jax.config.update("jax_enable_x64", True)


def require_x64() -> None:
    """Raise BackendError when 64-bit types are disabled (checked when a kernel is traced)."""
    if not jax.config.jax_enable_x64:
        raise BackendError(
            "hemx kernels need 64-bit integers but jax_enable_x64 is off. "
            "Do not disable it after importing hemx (jax.config.update('jax_enable_x64', True))."
        )
