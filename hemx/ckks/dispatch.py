"""Eager dispatch of the evaluator's jitted kernels: tables packed once, one cheap jitted call per operation.

A jitted call pays for every flattened argument (a level's tables are ~190 arrays, the plan ~20), which at
N = 2^12 is a third of an HE-Mult. :class:`Dispatcher` packs a kernel's tables once into a few buffers
(:func:`hemx.ckks.tables.pack_tree`) and runs the kernel through a jitted wrapper that unpacks them by static
slices: the same computation, bit-identical results. Under a trace (``jax.jit``, ``vmap``, ``export``) and on a
mesh the kernel is called as it is, so nothing is built or cached inside a trace.
"""

from __future__ import annotations

import dataclasses
import functools

import jax

from hemx.ckks.tables import pack_tree, unpack_tree


@functools.lru_cache(maxsize=256)
def bound_callable(fn, layouts: tuple, statics: tuple):
    """``jax.jit`` of ``fn(*data, *trees, **statics)`` taking each tree as the packed buffers of its layout.

    Shared by every dispatcher whose trees have the same layouts (structure, shapes, static metadata), so contexts
    with equal parameters share compiled programs, as the evaluator's own jitted functions do. Built only from
    hashable static values; ``fn`` is one of :mod:`hemx.ckks.evaluator`'s jitted kernels, traced inside.
    """
    kwargs = dict(statics)
    total = sum(layout.num_buffers for layout in layouts)

    def run(*args):
        cut = len(args) - total
        data, rest = args[:cut], args[cut:]
        trees, pos = [], 0
        for layout in layouts:
            trees.append(unpack_tree(rest[pos : pos + layout.num_buffers], layout))
            pos += layout.num_buffers
        return fn(*data, *trees, **kwargs)

    run.__name__ = f"bound_{getattr(fn, '__name__', 'op')}"
    return jax.jit(run)


class Dispatcher:
    """Runs :mod:`hemx.ckks.evaluator` kernels for one NTT plan, caching bound (packed, jitted) calls.

    Args:
        plan: the ring's NTT plan (``ring.plan``); :meth:`elementwise_plan` is its view without NTT tables.
        eager: False on a mesh (kernels are always called as they are there).

    Attributes:
        bound: ``{(kernel, tag, *statics): (tables, jitted, buffers)}``, the cache of :meth:`run`.
    """

    def __init__(self, plan, *, eager: bool = True):
        self.plan = plan
        self.eager = eager
        self.bound: dict = {}
        self._ew_plan = None

    def elementwise_plan(self):
        """The plan without its NTT tables (modulus constants only), for the element-wise kernels, which read
        nothing else (:func:`hemx.ckks.evaluator.add` & co. use ``plan.table``; a kernel that needed the NTT
        tables would fail on ``butterfly=None`` rather than compute anything else). Cached per plan."""
        if self._ew_plan is None or self._ew_plan[0] is not self.plan:
            self._ew_plan = (self.plan, dataclasses.replace(self.plan, forward=(), inverse=(), butterfly=None))
        return self._ew_plan[1]

    def run(self, fn, data: tuple, tables: tuple, tag, **statics):
        """``fn(*data, *tables, **statics)`` (an :mod:`~hemx.ckks.evaluator` kernel; ``data`` arrays of the
        kernel's shapes), dispatched cheaply when eager (no argument a tracer, ``self.eager``).

        ``tag`` names the tables (e.g. the level) in the cache key; the entry is rebuilt when the tables are other
        objects (a cleared or replaced table cache)."""
        if self.eager and not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(data)):
            key = (fn, tag, *statics.values())
            entry = self.bound.get(key)
            if entry is None or not all(x is y for x, y in zip(entry[0], tables)):
                entry = self.bound[key] = self.bind(fn, tables, statics)
            return entry[1](*data, *entry[2])
        return fn(*data, *tables, **statics)

    @staticmethod
    def bind(fn, tables: tuple, statics: dict):
        """``(tables, jitted, buffers)`` for :meth:`run` (packing at concrete time)."""
        with jax.ensure_compile_time_eval():
            packed = [pack_tree(t) for t in tables]
        buffers = tuple(b for bufs, _ in packed for b in bufs)
        jitted = bound_callable(fn, tuple(layout for _, layout in packed), tuple(statics.items()))
        return tuple(tables), jitted, buffers
