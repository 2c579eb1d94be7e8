"""``hemx.jit``: compiled programs that serve every key set, in this process and the next one.

``jax.jit`` keeps what it compiled for one process, and hemx's key sets and contexts are named by ids that are
static pytree data, so a second key set retraces and a new process traces, lowers and hashes the whole program
again before JAX's persistent cache can answer (``docs/results/compile-cpu.md``: 4.7 s for a ``boot_12``
bootstrap whose steady call takes 0.23 s). A :class:`Program` instead

* describes its arguments **canonically**: contexts, key sets and key seeds are numbered in the order they
  appear, so two calls whose arguments differ only in which key set (or which process) they come from share one
  description, and a ciphertext of another key set than the keys it is used with gives another description
  (and is then traced, where the context's checks raise as usual);
* compiles once per description with ``jax.jit(fn).lower(...).compile()`` and keeps the executable, serialized
  (``jax.experimental.serialize_executable``), in ``<hemx cache dir>/programs``, keyed by the function's identity
  (its code, the values it closes over and reads as globals, contexts by their parameters and chosen kernels),
  the canonical description and the machine (backend, device, CPU, jax / jaxlib / hemx versions and hemx's
  source);
* in a later process **loads** the executable without tracing or lowering anything, and rebuilds the outputs'
  pytree structure (ciphertexts with the caller's ids) from a stored template.

The first call of a new description in a process costs the load (or the compile); :meth:`Program.prepare`
does that ahead, as a server does at start. A call with abstract arguments (inside another ``jax.jit``) just
calls the function. Functions whose closure or outputs hold values hemx cannot fingerprint or rebuild still run:
they are compiled per process (``Program.persistent`` says why not). Loading an executable runs code from the
cache directory: it is trusted input, like JAX's own compilation cache.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import io
import os
import pathlib
import pickle
import threading
import time
import types
from typing import Any, Callable

import jax
import numpy as np

from hemx.ckks.ciphertext import Ciphertext, Plaintext
from hemx.ckks.context import Context, context_by_id
from hemx.ckks.keys import EvaluationKeys, KeySet, PublicKey, SecretKey, SwitchingKey
from hemx.circuits.array import EncryptedArray
from hemx.errors import ParameterError
from hemx.plan import cache as plan_cache

STORE_ENV = "HEMX_PROGRAMS"  # "0": keep programs in memory only
DIR_NAME = "programs"
FORMAT = "hemx-program-v1"
_OFF = ("0", "off", "false", "no")
MAX_DISPATCH_ENTRIES = 256  # per program: argument structures (one per key set) with their ready dispatch

# hemx's pytree dataclasses: their static fields (the rest are pytree children)
_META = {
    Ciphertext: ("level", "scale", "slots", "is_complex", "context_id", "key_id", "bound"),
    Plaintext: ("level", "scale", "slots", "is_complex", "context_id", "bound"),
    SecretKey: ("context_id", "key_id"),
    PublicKey: ("context_id", "key_id"),
    SwitchingKey: ("kind", "galois", "context_id", "key_id", "seed", "level", "xof"),
    EvaluationKeys: ("context_id", "key_id"),
    KeySet: ("context_id", "key_id"),
}
_RENAMED = ("context_id", "key_id", "seed")  # process-local names: numbered canonically


class NotPersistable(Exception):
    """Raised inside this module when a value cannot be described or rebuilt canonically."""


# -------------------------------------------------------------------------------------------- canonical form
class _Canon:
    """Numbers contexts, key sets and seeds by first appearance; remembers the way back."""

    def __init__(self):
        self.numbers: dict[tuple[str, Any], int] = {}
        self.values: dict[tuple[str, int], Any] = {}
        self.contexts: dict[int, Context] = {}  # canonical number -> live context

    def number(self, kind: str, value) -> int:
        key = (kind, value)
        if key not in self.numbers:
            self.numbers[key] = len([k for k in self.numbers if k[0] == kind])
            self.values[(kind, self.numbers[key])] = value
        return self.numbers[key]

    def context(self, ctx_or_id) -> int:
        ctx = ctx_or_id if isinstance(ctx_or_id, Context) else context_by_id(ctx_or_id)
        if ctx is None:
            raise NotPersistable(f"context id {ctx_or_id} names no live hemx.Context")
        k = self.number("context_id", ctx.id)
        self.contexts[k] = ctx
        return k

    def rename(self, field: str, value):
        if value is None:
            return None
        if field == "context_id":
            return ("ctx", self.context(value))
        return (field, self.number(field, value))

    def restore(self, field: str, token):
        if token is None:
            return None
        try:
            return self.values[(field, token[1])]
        except KeyError:
            raise NotPersistable(f"the outputs name a {field} the inputs do not have") from None


def _leaf_spec(x) -> tuple:
    if isinstance(x, jax.core.Tracer):
        raise _Abstract
    if isinstance(x, jax.Array):
        return ("array", tuple(x.shape), str(x.dtype), bool(getattr(x, "weak_type", False)), repr(x.sharding))
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        return ("ndarray", tuple(np.shape(x)), str(np.asarray(x).dtype))
    if isinstance(x, (bool, int, float, complex)):
        return ("python", type(x).__name__)
    raise NotPersistable(f"{type(x).__name__} leaf")


class _Abstract(Exception):
    """An argument is a tracer: the program is being traced by an outer transformation."""


def _spec(x, canon: _Canon, *, leaves: bool) -> tuple:
    """A hashable, picklable description of ``x``'s pytree structure with process-local names numbered.

    ``leaves=True``: array leaves are described by shape, dtype and sharding (argument descriptions); else only
    their place is kept (output templates)."""
    if x is None:
        return ("none",)
    t = type(x)
    if t in _META:
        meta = tuple((f, canon.rename(f, getattr(x, f)) if f in _RENAMED else getattr(x, f)) for f in _META[t])
        data = tuple((f.name, _spec(getattr(x, f.name), canon, leaves=leaves))
                     for f in dataclasses.fields(x) if f.name not in _META[t])
        return ("hemx", t.__name__, meta, data)
    if t is EncryptedArray:
        flat, treedef = jax.tree_util.tree_flatten(x, is_leaf=lambda y: y is not x)
        ctx, static_keys, axis = treedef.node_data()[1]
        if static_keys is not None:
            raise NotPersistable("an EncryptedArray whose key set is not a pytree")
        return ("encrypted_array", ("ctx", canon.context(ctx)), axis,
                _spec(x._ct, canon, leaves=leaves), _spec(x._keys, canon, leaves=leaves))
    if t in (tuple, list):
        return (t.__name__, tuple(_spec(v, canon, leaves=leaves) for v in x))
    if t is dict:
        try:
            keys = sorted(x)
        except TypeError:
            raise NotPersistable("a dict with keys that do not sort") from None
        if not all(isinstance(k, (str, int)) for k in keys):
            raise NotPersistable("a dict with keys other than str / int")
        return ("dict", tuple((k, _spec(x[k], canon, leaves=leaves)) for k in keys))
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        return ("namedtuple", t.__module__, t.__qualname__, tuple(_spec(v, canon, leaves=leaves) for v in x))
    if leaves:
        return ("leaf", _leaf_spec(x))
    if isinstance(x, (jax.Array, np.ndarray, np.generic, bool, int, float, complex, jax.ShapeDtypeStruct)):
        return ("leaf",)
    raise NotPersistable(f"a value of type {t.__module__}.{t.__qualname__}")


def _build(spec: tuple, canon: _Canon):
    """The structure ``spec`` describes with this process's contexts and ids, placeholders (0) as leaves."""
    kind = spec[0]
    if kind == "none":
        return None
    if kind == "leaf":
        return 0
    if kind in ("tuple", "list"):
        items = [_build(s, canon) for s in spec[1]]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return {k: _build(s, canon) for k, s in spec[1]}
    if kind == "namedtuple":
        module = __import__(spec[1], fromlist=["_"])
        cls = functools.reduce(getattr, spec[2].split("."), module)
        return cls(*[_build(s, canon) for s in spec[3]])
    if kind == "hemx":
        cls = {c.__name__: c for c in _META}[spec[1]]
        obj = object.__new__(cls)
        for f, v in spec[2]:
            object.__setattr__(obj, f, canon.restore(f, v) if f in _RENAMED else v)
        for f, s in spec[3]:
            object.__setattr__(obj, f, _build(s, canon))
        return obj
    if kind == "encrypted_array":
        ctx = canon.contexts.get(spec[1][1])
        if ctx is None:
            raise NotPersistable("the outputs use a context the inputs do not")
        return EncryptedArray._make(_build(spec[3], canon), ctx, _build(spec[4], canon), spec[2])
    raise NotPersistable(f"unknown template node {kind!r}")


# -------------------------------------------------------------------------------------------- fingerprints
def context_fingerprint(ctx: Context) -> tuple:
    """What decides the programs a context lowers to: parameters, slots, the kernels chosen, the mesh and how a
    mesh's key switches run (``ctx.tables.keyswitch_path``, settable after the context is made: a program stored
    with one path is never loaded for the other)."""
    mesh = getattr(ctx, "mesh", None)
    mesh_desc = None if mesh is None else (tuple(mesh.axis_names), tuple(np.shape(mesh.devices)),
                                           tuple(int(d.id) for d in np.ravel(mesh.devices)),
                                           str(getattr(ctx.tables, "keyswitch_path", None)))
    return ("context", type(ctx).__name__, _value(ctx.params, set()), ctx.slots, _value(ctx.planned.variant, set()),
            str(ctx.reduction), str(ctx.keyswitch), mesh_desc)


def _code(code: types.CodeType, seen: set) -> tuple:
    consts = tuple(_code(c, seen) if isinstance(c, types.CodeType) else _value(c, seen) for c in code.co_consts)
    return ("code", code.co_code, consts, code.co_names, code.co_freevars, code.co_argcount, code.co_kwonlyargcount)


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _global_names(c)
    return names


def _function(fn: types.FunctionType, seen: set) -> tuple:
    code = fn.__code__
    closure = tuple(_value(cell.cell_contents, seen) for cell in (fn.__closure__ or ()))
    g = fn.__globals__
    globals_ = tuple((name, _value(g[name], seen)) for name in sorted(_global_names(code)) if name in g)
    return ("function", fn.__module__, fn.__qualname__, _code(code, seen), closure, globals_,
            _value(fn.__defaults__, seen), _value(fn.__kwdefaults__, seen))


def _value(v, seen: set):
    """A hashable fingerprint of a value a program may read; NotPersistable if hemx cannot vouch for it."""
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
        return (type(v).__name__, v)
    if isinstance(v, enum.Enum):
        return ("enum", type(v).__qualname__, v.name)
    if isinstance(v, types.ModuleType):
        return ("module", v.__name__)
    if isinstance(v, type):
        return ("class", v.__module__, v.__qualname__)
    if isinstance(v, (types.BuiltinFunctionType, np.ufunc)):
        return ("builtin", getattr(v, "__module__", None), getattr(v, "__qualname__", repr(v)))
    if isinstance(v, jax.core.Tracer):
        raise NotPersistable("a traced value in the closure")
    if isinstance(v, (np.ndarray, np.generic, jax.Array)):
        a = np.asarray(v)
        return ("ndarray", a.shape, str(a.dtype), hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest())
    if id(v) in seen:
        return ("seen",)
    seen = seen | {id(v)}
    if isinstance(v, Context):
        return context_fingerprint(v)
    if isinstance(v, types.FunctionType):
        return _function(v, seen)
    if isinstance(v, types.MethodType):
        return ("method", _value(v.__func__, seen), _value(v.__self__, seen))
    if isinstance(v, functools.partial):
        return ("partial", _value(v.func, seen), _value(v.args, seen), _value(v.keywords, seen))
    if isinstance(v, Program):
        return ("program", _value(v.fn, seen))
    if isinstance(v, (tuple, list, frozenset, set)):
        items = [_value(x, seen) for x in v]
        return (type(v).__name__, tuple(sorted(items, key=repr)) if isinstance(v, (set, frozenset)) else tuple(items))
    if isinstance(v, dict):
        return ("dict", tuple(sorted(((repr(k), _value(x, seen)) for k, x in v.items()), key=lambda kv: kv[0])))
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return ("dataclass", type(v).__module__, type(v).__qualname__,
                tuple((f.name, _value(getattr(v, f.name), seen)) for f in dataclasses.fields(v)))
    if type(v).__module__.split(".")[0] == "hemx" and hasattr(v, "__dict__"):
        return ("object", type(v).__module__, type(v).__qualname__,
                tuple((k, _value(x, seen)) for k, x in sorted(vars(v).items())))
    if hasattr(v, "__wrapped__"):  # jax.jit-wrapped and functools.wraps functions
        return ("wrapped", type(v).__qualname__, _value(v.__wrapped__, seen))
    raise NotPersistable(f"it reads a {type(v).__module__}.{type(v).__qualname__}, which hemx cannot fingerprint")


# hemx's modules that never run inside a program (command line, benchmarks, serialization, the dataflow model)
_NOT_IN_PROGRAMS = ("bench", "cli.py", "demo", "io", "service.py", "dataflow", "__main__.py")


@functools.lru_cache(maxsize=None)
def _machine() -> str:
    """Backend, device, CPU, library versions, the native build, and a hash of hemx's source (of the modules
    that can be part of a program: a development checkout changes under a stored program)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in _NOT_IN_PROGRAMS:
            continue
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    flags = (jax.config.jax_enable_x64, jax.config.jax_default_matmul_precision, os.environ.get("XLA_FLAGS", ""))
    return repr((plan_cache.environment_key(), h.hexdigest(), flags))


def store_directory() -> str:
    """Where programs are kept: ``<hemx cache dir>/programs``."""
    return os.path.join(plan_cache.cache_dir(), DIR_NAME)


def store_enabled() -> bool:
    return os.environ.get(STORE_ENV, "1").strip().lower() not in _OFF


# -------------------------------------------------------------------------------------------- the program
@dataclasses.dataclass
class _Entry:
    executable: Any  # the loaded executable (jax's MeshExecutable)
    args_info_flat: list
    no_kwargs: bool
    const_args: list
    out_spec: tuple
    source: str  # "compiled" | "loaded"
    seconds: float
    out_tree_exact: Any = None  # the compiled outputs' treedef (for arguments that have no canonical form)


@dataclasses.dataclass
class ProgramStats:
    """What a :class:`Program` did: calls served from memory, executables loaded from disk, compilations."""

    calls: int = 0
    memory: int = 0
    loaded: int = 0
    compiled: int = 0
    load_seconds: float = 0.0
    compile_seconds: float = 0.0
    written: int = 0


class Program:
    """A function compiled once per canonical argument description, kept on disk for later processes.

    Made by :func:`jit`. ``program(*args, **kwargs)`` runs it; :meth:`prepare` loads or compiles without
    running; :attr:`stats` counts what happened; :attr:`persistent` is False (with :attr:`reason`) when the
    function reads values hemx cannot fingerprint, in which case it is compiled per process.
    """

    def __init__(self, fn: Callable, *, name: str | None = None, persist: bool | None = None):
        if not callable(fn):
            raise ParameterError(f"hemx.jit needs a function, got {type(fn).__name__}")
        if name is not None and (not isinstance(name, str) or not name):
            raise ParameterError("name= must be a non-empty string")
        self.fn = fn
        self.name = name
        self._persist = store_enabled() if persist is None else bool(persist)
        self.stats = ProgramStats()
        self.reason: str | None = None
        self._identity: str | None = None
        self._by_key: dict[str, _Entry] = {}
        self._by_tree: dict[Any, tuple] = {}  # in treedef -> (Compiled, out treedef)
        self._lock = threading.Lock()
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        s = self.stats
        return (f"Program({getattr(self.fn, '__qualname__', self.fn)!r}, persistent={self.persistent}, "
                f"compiled={s.compiled}, loaded={s.loaded}, calls={s.calls})")

    @property
    def persistent(self) -> bool:
        if self._persist and self._identity is None and self.reason is None:
            self._fingerprint()
        return self._persist and self.reason is None

    def _fingerprint(self) -> str | None:
        if self._identity is None and self.reason is None:
            try:
                ident = _value(self.fn, set())
                self._identity = hashlib.sha256(repr((FORMAT, self.name, ident)).encode()).hexdigest()
            except (NotPersistable, RecursionError) as exc:
                self.reason = f"the function cannot be fingerprinted: {exc}"
        return self._identity

    # ---------------------------------------------------------------------------------------- calls
    def __call__(self, *args, **kwargs):
        try:
            compiled = self._compiled(args, kwargs)
        except _Abstract:  # inside another transformation: inline the function
            return self.fn(*args, **kwargs)
        self.stats.calls += 1
        return compiled(*args, **kwargs)

    def prepare(self, *args, **kwargs) -> str:
        """Make the executable for arguments like these ready without running it: "memory" (already there),
        "loaded" (from the store) or "compiled". Arguments may be real values (``jax.ShapeDtypeStruct`` leaves
        are not enough: ciphertexts carry their level and scale, so pass a real ciphertext of the right kind)."""
        before = (self.stats.loaded, self.stats.compiled)
        try:
            self._compiled(args, kwargs)
        except _Abstract:
            raise ParameterError("Program.prepare needs concrete arguments, not traced ones") from None
        if self.stats.compiled > before[1]:
            return "compiled"
        return "loaded" if self.stats.loaded > before[0] else "memory"

    def _compiled(self, args, kwargs):
        flat, in_tree = jax.tree_util.tree_flatten((args, kwargs))
        if any(isinstance(x, jax.core.Tracer) for x in flat):
            raise _Abstract
        with self._lock:
            hit = self._by_tree.get(in_tree)
            if hit is not None and hit[1] == tuple(_aval(x) for x in flat):
                self.stats.memory += 1
                return hit[0]
            canon = _Canon()
            key, spec_error = None, None
            try:
                spec = _spec((args, kwargs), canon, leaves=True)
                key = self._key(spec, canon)
            except NotPersistable as exc:
                spec_error = str(exc)
            entry = self._by_key.get(key) if key is not None else None
            if entry is not None:
                self.stats.memory += 1
            else:
                entry = self._load(key, canon) if key is not None and self.persistent else None
                if entry is None:
                    entry = self._compile(args, kwargs, key, canon, spec_error)
                if key is not None and entry.out_spec is not None:
                    self._by_key[key] = entry
            compiled = self._wrap(entry, in_tree, canon if entry.out_spec is not None else None, flat)
            if len(self._by_tree) >= MAX_DISPATCH_ENTRIES:  # a server meets many key sets: forget the oldest
                self._by_tree.pop(next(iter(self._by_tree)))
            self._by_tree[in_tree] = (compiled, tuple(_aval(x) for x in flat))
            return compiled

    def _key(self, spec: tuple, canon: _Canon) -> str | None:
        ident = self._fingerprint() if self._persist else None
        contexts = tuple(context_fingerprint(canon.contexts[k]) for k in sorted(canon.contexts))
        return hashlib.sha256(repr((FORMAT, ident, id(self) if ident is None else None, spec, contexts,
                                    _machine())).encode()).hexdigest()

    def _wrap(self, entry: _Entry, in_tree, canon: _Canon | None, flat):
        args_info = in_tree.unflatten(entry.args_info_flat)
        if canon is None:  # compiled for exactly these arguments
            out_tree = entry.out_tree_exact
        else:
            out_tree = jax.tree_util.tree_structure(_build(entry.out_spec, canon))
        compiled = jax.stages.Compiled(entry.executable, entry.const_args, args_info, out_tree,
                                       no_kwargs=entry.no_kwargs)
        try:  # build the C++ dispatch path now (a few ms), not in the first call
            compiled._call = entry.executable.create_cpp_call(compiled._params)
        except Exception:  # noqa: BLE001 - JAX internals; the first call then builds it itself
            compiled._call = None
        return compiled

    # ---------------------------------------------------------------------------------------- compile / store
    def _compile(self, args, kwargs, key, canon, spec_error) -> _Entry:
        start = time.perf_counter()
        lowered = jax.jit(self.fn).lower(*args, **kwargs)
        with _without_jax_cache() as bypassed:
            compiled = lowered.compile()
        if not bypassed:
            self.reason = self.reason or "JAX's compilation cache cannot be bypassed on this JAX version"
        seconds = time.perf_counter() - start
        self.stats.compiled += 1
        self.stats.compile_seconds += seconds
        out_spec, out_error = None, spec_error
        if out_error is None:
            try:
                template = compiled.out_tree.unflatten([0] * compiled.out_tree.num_leaves)
                out_spec = _spec(template, canon, leaves=False)
                _build(out_spec, canon)  # the way back must exist
            except NotPersistable as exc:
                out_error = f"the outputs cannot be rebuilt: {exc}"
        entry = _Entry(compiled._executable, jax.tree_util.tree_leaves(compiled.args_info),
                       compiled._no_kwargs, list(compiled._params.const_args), out_spec, "compiled", seconds,
                       compiled.out_tree)
        if out_error is not None:
            self.reason = self.reason or out_error
            entry.out_spec = None
            return entry
        if key is not None and self.persistent:
            self._save(key, compiled, out_spec)
        return entry

    def _path(self, key: str) -> pathlib.Path:
        return pathlib.Path(store_directory()) / key[:2] / f"{key}.hxp"

    def _save(self, key: str, compiled, out_spec) -> None:
        from jax.experimental import serialize_executable  # noqa: PLC0415

        try:
            blob, _, _ = serialize_executable.serialize(compiled)
        except (ValueError, NotImplementedError) as exc:
            self.reason = f"this backend's executable cannot be serialized: {exc}"
            return
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            with open(tmp, "wb") as fh:
                pickle.dump({"format": FORMAT, "executable": blob, "out_spec": out_spec,
                             "function": getattr(self.fn, "__qualname__", "?"), "written": time.time()}, fh,
                            protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
            self.stats.written += 1
        except OSError as exc:  # a read-only or full cache directory: keep the program in memory
            self.reason = f"the program store is not writable: {exc}"

    def _load(self, key: str, canon: _Canon) -> _Entry | None:
        from jax.experimental import serialize_executable  # noqa: PLC0415

        path = self._path(key)
        start = time.perf_counter()
        try:
            with open(path, "rb") as fh:
                doc = pickle.load(fh)
            if doc.get("format") != FORMAT:
                return None
            backend = jax.devices()[0].client
            unloaded, args_info_flat, no_kwargs = serialize_executable._JaxPjrtUnpickler(
                io.BytesIO(doc["executable"]), backend).load()
            executable = unloaded.load()
            _build(doc["out_spec"], canon)
        except FileNotFoundError:
            return None
        except Exception:  # a damaged or foreign entry: compile instead (and overwrite it)
            return None
        seconds = time.perf_counter() - start
        self.stats.loaded += 1
        self.stats.load_seconds += seconds
        return _Entry(executable, args_info_flat, no_kwargs, [], doc["out_spec"], "loaded", seconds)


@contextlib.contextmanager
def _without_jax_cache():
    """Compile without JAX's persistent cache: an executable that cache loaded cannot always be serialized again
    (measured on CPU with jax 0.10: it then fails at run time with "Function ... not found"). Yields whether the
    bypass is in place (it reads JAX internals; on a JAX without them the program is kept in memory only)."""
    try:
        from jax._src import compilation_cache as jcc  # noqa: PLC0415

        with jcc._cache_initialized_mutex:
            saved = (jcc._cache_checked, jcc._cache_used)
            jcc._cache_checked, jcc._cache_used = True, False
    except (ImportError, AttributeError):
        yield False
        return
    try:
        yield True
    finally:
        with jcc._cache_initialized_mutex:
            jcc._cache_checked, jcc._cache_used = saved


def _aval(x) -> tuple:
    return (tuple(np.shape(x)), str(getattr(x, "dtype", type(x).__name__)),
            repr(x.sharding) if isinstance(x, jax.Array) else None)


def jit(fn: Callable | None = None, *, name: str | None = None, persist: bool | None = None):
    """Compile ``fn`` once per kind of arguments and keep it for every key set and later processes.

    ``hemx.jit(fn)`` or ``@hemx.jit``; ``name`` adds a label to the program's identity; ``persist=False`` (or
    ``HEMX_PROGRAMS=0``) keeps programs in memory only. Returns a :class:`Program`. Pass keys as arguments:
    keys closed over are part of the program (and of its fingerprint), as with ``jax.jit``.
    """
    if fn is None:
        return functools.partial(jit, name=name, persist=persist)
    return Program(fn, name=name, persist=persist)


def clear_store(directory: str | None = None) -> int:
    """Delete the stored programs; returns the bytes freed."""
    import shutil  # noqa: PLC0415

    directory = directory or store_directory()
    size = sum(p.stat().st_size for p in pathlib.Path(directory).rglob("*.hxp")) if os.path.isdir(directory) else 0
    shutil.rmtree(directory, ignore_errors=True)
    return size


__all__ = ["Program", "ProgramStats", "jit", "store_directory", "clear_store", "context_fingerprint"]
