"""Packed CKKS bootstrapping built from hemx.circuits: special-FFT transforms (dft), EvalMod (mod1), what a
bootstrap of given parameters is (parameters) and the pipeline (bootstrapper).

The usual way::

    boot = bootstrapper_for(ctx)                   # built once per context (and message ratio), then cached
    keys = ctx.keygen(bootstrap=boot)              # or bootstrap=BootstrapParameters.create(ctx.params, ...)
    fresh = boot.bootstrap(ct, keys)               # or bootstrap(ctx, ct, keys)
"""

from __future__ import annotations

import jax

from hemx.circuits.bootstrap.bootstrapper import AUTO_AFTER_S, COMPILED, Bootstrapper, CircuitProgram, ExecutionStats
from hemx.circuits.bootstrap.mod1 import EvalMod, bound_for
from hemx.circuits.bootstrap.parameters import BootstrapParameters, BootstrapPlan, default_message_ratio
from hemx.ckks import Ciphertext, Context
from hemx.errors import ParameterError

# A context's bootstrappers live on the context itself, {message_ratio: Bootstrapper}: a bootstrapper refers to
# its context, so a weakref.WeakKeyDictionary keyed on the context would keep every context alive through its
# own value; as an attribute, context and bootstrappers are collected together.
_CACHE_ATTRIBUTE = "_hemx_bootstrappers"


def bootstrapper_for(ctx: Context, *, message_ratio: int | None = None) -> Bootstrapper:
    """The :class:`Bootstrapper` of ``ctx`` (``BootstrapParameters.create(ctx.params, slots=ctx.slots,
    message_ratio=message_ratio)``), built once per context and message ratio, outside any ``jax.jit`` trace
    (under ``jax.ensure_compile_time_eval``), then the same object on every call. ``message_ratio`` None: the
    ring's default (:func:`default_message_ratio`); asking for the default by its value gives the same object."""
    if not isinstance(ctx, Context):
        raise ParameterError(f"expected a hemx.Context, got {type(ctx).__name__}")
    cache = ctx.__dict__.setdefault(_CACHE_ATTRIBUTE, {})
    if message_ratio not in cache:
        with jax.ensure_compile_time_eval():
            built = Bootstrapper(ctx, message_ratio=message_ratio)
        if message_ratio is not None and None in cache and built.message_ratio == cache[None].message_ratio:
            built = cache[None]  # the default, asked for by its value
        cache[message_ratio] = built
    return cache[message_ratio]


def bootstrap(ctx: Context, ct: Ciphertext, keys, *, iterations: int = 1, message_ratio: int | None = None,
              on_bound: str = "raise", chunk: int | None = None) -> Ciphertext:
    """A ciphertext of ``ctx`` at the post-bootstrap level with the same slot values (any level, any batch shape
    ``(..., 2, L, N)`` of data), through :func:`bootstrapper_for`.

    Needs the keys of ``ctx.keygen(bootstrap=bootstrapper_for(ctx, message_ratio=...))`` (any bootstrap of the
    same parameters and slots has the same keys; :class:`~hemx.errors.MissingKeyError` otherwise) and
    parameters with room for it (the ``boot_*`` presets). ``iterations=2``: META-BTS, about 16 more bits.
    ``message_ratio``: ``log2(q0 / scale)`` EvalMod works at; the default suits spread-out values (uniform random
    slots), a larger one values with large low-frequency content (e.g. a constant vector) and larger values. The
    ciphertext's ``bound`` must not exceed the bound the ratio supports (``bootstrapper_for(ctx,
    message_ratio=...).supported_bound``: 8 at the default ratio, doubling per bit of ratio):
    :class:`~hemx.errors.BoundError` otherwise, or :class:`~hemx.errors.BoundWarning` with ``on_bound="warn"``.
    ``chunk``: at most that many entries of the batch at a time (:meth:`Bootstrapper.bootstrap`). See
    ``docs/bootstrap.md``.
    """
    if not isinstance(ct, Ciphertext):
        raise ParameterError(f"bootstrap takes a hemx.Ciphertext, got {type(ct).__name__}")
    return bootstrapper_for(ctx, message_ratio=message_ratio).bootstrap(ct, keys, iterations=iterations,
                                                                        on_bound=on_bound, chunk=chunk)


__all__ = ["Bootstrapper", "CircuitProgram", "ExecutionStats", "AUTO_AFTER_S", "COMPILED", "BootstrapParameters", "BootstrapPlan", "EvalMod", "bound_for", "bootstrap",
           "bootstrapper_for", "default_message_ratio"]
