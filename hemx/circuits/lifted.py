"""A traced program with its large constants as arguments: :func:`lift_constants`.

The bootstrapper compiles its circuit this way (:class:`hemx.circuits.bootstrap.Bootstrapper`, ``compiled``): the
context's tables and the encoded transforms stay arrays the executable reads, not constants copied into it.
Networks use it for export: ``CompiledNetwork.run(ctx, keys, ct, diagonals=net.diagonals())`` under ``jax.jit``
takes the ciphertext, the keys and the linear layers' data as arguments. The program still reads the context's own tables, which a trace closes
over as constants: the NTT and basis-conversion tables, the automorphism index maps, the constants the circuits
encode on the host, and the bootstrapper's encoded transforms. For ResNet-20 at ``boot_16`` they are 2.1 GiB
(measured), embedded in an exported module. :func:`lift_constants` traces a function once and returns it with
every closed-over array of at least ``min_bytes`` as an argument, so ``jax.export`` writes a small module and the
caller passes those arrays (``LiftedProgram.constants``) with the other arguments.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import numpy as np
from jax.extend import core as jcore

from hemx.errors import ParameterError

DEFAULT_MIN_BYTES = 1024


def _nbytes(x) -> int:
    return int(np.prod(np.shape(x), dtype=np.int64)) * np.dtype(x.dtype).itemsize


@dataclasses.dataclass(frozen=True, eq=False)
class LiftedProgram:
    """``fn(constants, *args)``: the traced function with its large constants as the first argument.

    Attributes:
        fn: the function; ``constants`` a sequence of arrays shaped as :attr:`constants`, ``args`` of the pytree
            structure the function was traced with (arrays or ``jax.ShapeDtypeStruct``).
        constants: the lifted arrays, as the trace read them (concrete: the context's tables).
        kept_bytes: bytes of the constants left in the program (each below ``min_bytes``).
    """

    fn: Callable
    constants: tuple
    kept_bytes: int

    @property
    def constant_specs(self) -> tuple:
        """``jax.ShapeDtypeStruct`` stand-ins of :attr:`constants` (for ``jax.export``)."""
        return tuple(jax.ShapeDtypeStruct(np.shape(c), c.dtype) for c in self.constants)

    @property
    def nbytes(self) -> int:
        """Bytes of the lifted constants."""
        return sum(_nbytes(c) for c in self.constants)


def lift_constants(fn: Callable, *args: Any, min_bytes: int = DEFAULT_MIN_BYTES) -> LiftedProgram:
    """Trace ``fn(*args)`` once (``args``: pytrees of arrays or ``jax.ShapeDtypeStruct``) and return it as
    ``fn(constants, *args)`` (:class:`LiftedProgram`), every array the trace closed over of at least ``min_bytes``
    an argument.

    The function is not traced again: the lifted one evaluates the recorded program (``jax.make_jaxpr``), under
    ``jax.jit`` / ``jax.export`` or eagerly, so the arguments it is called with must have the structure, shapes and
    static metadata (levels, scales, ids) of those it was traced with. Nothing is built: the constants are the
    arrays the trace found (with ``args`` as stand-ins, e.g. a ``boot_16`` network is traced without keys or data).
    """
    if isinstance(min_bytes, bool) or not isinstance(min_bytes, int) or min_bytes < 1:
        raise ParameterError(f"min_bytes must be a positive integer, got {min_bytes!r}")
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    in_tree = jax.tree_util.tree_structure(args)
    out_tree = jax.tree_util.tree_structure(out_shape)
    consts = list(closed.consts)
    lifted = tuple(i for i, c in enumerate(consts) if hasattr(c, "dtype") and _nbytes(c) >= min_bytes)
    kept = sum(_nbytes(c) for i, c in enumerate(consts) if i not in set(lifted) and hasattr(c, "dtype"))
    jaxpr = closed.jaxpr

    def program(constants, *call_args):
        if len(constants) != len(lifted):
            raise ParameterError(f"the program takes {len(lifted)} constants, got {len(constants)}")
        flat, tree = jax.tree_util.tree_flatten(call_args)
        if tree != in_tree:
            raise ParameterError("the arguments' structure (or static metadata: levels, scales, ids) differs from the "
                                 "one the program was traced with")
        full = list(consts)
        for i, value in zip(lifted, constants):
            full[i] = value
        out = jcore.jaxpr_as_fun(jcore.ClosedJaxpr(jaxpr, full))(*flat)
        return jax.tree_util.tree_unflatten(out_tree, out)

    return LiftedProgram(program, tuple(consts[i] for i in lifted), kept)


__all__ = ["lift_constants", "LiftedProgram", "DEFAULT_MIN_BYTES"]
