"""Native CPU kernels (C++ in ``csrc/``) as XLA FFI custom calls: the same signatures as the JAX kernels.

The shared library ``_hemx_native.so`` is built by ``pip install`` when a C++ compiler and jaxlib's XLA FFI
headers are present (optional: without it hemx runs the JAX kernels). Its kernels are registered with
``jax.ffi.register_ffi_target(..., platform="cpu")`` and called through ``jax.ffi.ffi_call``, so they work
inside ``jax.jit`` and under ``jax.vmap``, and run on the thread pool XLA gives custom calls (each
``(batch, limb)`` polynomial is one unit of work). The library holds the kernels for every instruction set of its
target architecture (x86-64: AVX-512, AVX2, scalar, and "amx": AVX-512 with the basis conversion on AMX-INT8
tiles; aarch64: NEON, scalar; elsewhere scalar) and picks the best vector one this CPU runs at its first call, never
before (``isa()``, ``built_isas()``); ``HEMX_NATIVE_ISA=avx2`` (or ``set_isa``) chooses another, and a name this CPU
cannot run is refused with :class:`ParameterError`. "amx" is never picked by the library itself: the planner
(:func:`hemx.plan.engine.plan_matrix_engine`) selects it where it measured it faster, unless the instruction set was
forced (:func:`isa_forced`).
``selftest()`` checks every instruction set this CPU runs against exact references, without JAX.

* :func:`available` / :func:`reason`: whether the library is usable here, and why not (``HEMX_NATIVE=0``
  disables it; so does a missing build or a non-CPU default backend).
* :func:`ntt` / :func:`intt`: forward / inverse negacyclic NTT, ``(..., L, N)`` uint32, bit-identical to
  :func:`hemx.kernels.ntt.ntt` / :func:`~hemx.kernels.ntt.intt` with the butterfly tables of the plan (which
  must be a ``"butterfly"`` or ``"native"`` plan), same bit-reversed NTT-domain order.
* :func:`automorphism`: the NTT-domain Galois automorphism (a gather by an index map), like
  :func:`hemx.kernels.automorphism.apply_ntt_automorphism`.
* :func:`inner_product`: ``sum_d a_d * b_d mod q`` (the key-switching inner product), like
  :func:`hemx.kernels.modarith.mul_sum`.
* :func:`bconv`: the fast basis conversion of a :class:`hemx.kernels.bconv.BConvPlan` (plain or centered),
  like :func:`hemx.kernels.bconv.bconv`.
* :func:`modup` / :func:`divide_by_dropped`: the key switch's fused passes, each one call writing its result in
  place: ModUp of ``Q_l`` to the extended digits (INTT, each digit's basis conversion, NTT), and the rounding
  division by dropped limbs that ModDown and rescaling share (INTT, centered conversion, NTT, ``(x - conv) D^-1``),
  bit-identical to :func:`hemx.ckks.keyswitch.modup` / :func:`~hemx.ckks.keyswitch.divide_by_dropped`.
* :func:`uniform` / :func:`key_product`: the seeded uniform halves of switching keys (ChaCha20 streams,
  :mod:`hemx.kernels.prng`), expanded whole, or generated row by row inside the key switch's inner product so a
  key in memory is its ``b`` halves and a 32-byte stream key; the same product reads a full key in place at any
  level and the digits through an automorphism's index map (hoisted rotations: nothing permuted is stored).
* :func:`on_cpu`: the dispatch rule of the kernels' ``method="auto"``: the native kernel where the program is
  lowered for CPU and the library is available, the JAX kernel everywhere else (``jax.lax.platform_dependent``,
  so ``jax.export`` for cuda / tpu never sees a custom call).
* :func:`mul_shoup`: ``a * w mod q`` for a known operand (the roofline's streaming probe).
* :func:`butterfly_probe`: in-L1 lazy butterflies (the roofline's compute probe).
* :func:`build_id`: a hash of the loaded library (the planner's wisdom keys on it).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import hashlib
import os
import threading

import jax
import jax.numpy as jnp
import numpy as np

from hemx.errors import BackendError, ParameterError, ShapeError
from hemx.kernels.ntt_layout import limb_layout, select_limbs

LIB_NAME = "_hemx_native.so"
ENV = "HEMX_NATIVE"
#: Environment variable naming the instruction set to run (one of :data:`ISAS`, or "auto", the default).
ISA_ENV = "HEMX_NATIVE_ISA"
#: Every instruction-set name a hemx library can have (a given build has those of its architecture: built_isas()).
ISAS: tuple[str, ...] = ("amx", "avx512", "avx2", "neon", "scalar")
_TARGETS = {
    "hemx_ntt_forward": "HemxNttForward",
    "hemx_ntt_inverse": "HemxNttInverse",
    "hemx_mul_shoup": "HemxMulShoup",
    "hemx_butterfly_probe": "HemxButterflyProbe",
    "hemx_automorphism": "HemxAutomorphism",
    "hemx_inner_product": "HemxInnerProduct",
    "hemx_bconv": "HemxBConv",
}
# Targets a library built before them lacks: registered where present (``has_fused_keyswitch``), so an older
# build still serves the kernels above and the key switch keeps its unfused path.
_OPTIONAL_TARGETS = {
    "hemx_modup": "HemxModUp",
    "hemx_divide": "HemxDivide",
    "hemx_uniform": "HemxUniform",
    "hemx_key_product": "HemxKeyProduct",
    "hemx_plain_sums": "HemxPlainSums",
}
_FUSED_TARGETS = ("hemx_modup", "hemx_divide")
_SEEDED_TARGETS = ("hemx_uniform", "hemx_key_product")
_PLAIN_SUM_TARGETS = ("hemx_plain_sums",)
_registered: set = set()
_env_errors: dict = {}  # library path -> the ParameterError HEMX_NATIVE_ISA caused (raised by every reason())
_lock = threading.Lock()
_state: dict = {}


def library_path() -> str:
    """Where the library is looked for (``$HEMX_NATIVE_LIB``, else next to this file)."""
    return os.environ.get("HEMX_NATIVE_LIB") or os.path.join(os.path.dirname(os.path.abspath(__file__)), LIB_NAME)


def _disabled_by_env() -> bool:
    return os.environ.get(ENV, "").strip().lower() in ("0", "off", "false", "no")


def _load() -> tuple[ctypes.CDLL | None, str]:
    """Load and register the library once per path; returns (library or None, reason when None)."""
    path = library_path()
    with _lock:
        if path in _state:
            return _state[path]
        if not os.path.isfile(path):
            result = (None, f"native library not built ({path} missing; reinstall with a C++ compiler: "
                            "pip install --no-deps -e .)")
        else:
            try:
                lib = ctypes.CDLL(path)
                lib.hemx_native_isa.restype = ctypes.c_char_p
                lib.hemx_native_set_isa.argtypes = [ctypes.c_char_p]
                lib.hemx_native_set_isa.restype = ctypes.c_int
                lib.hemx_native_set_max_threads.argtypes = [ctypes.c_int]
                for name in ("hemx_native_built_isas",):
                    if hasattr(lib, name):
                        getattr(lib, name).restype = ctypes.c_char_p
                if hasattr(lib, "hemx_native_selftest"):
                    lib.hemx_native_selftest.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
                    lib.hemx_native_selftest.restype = ctypes.c_int
                if hasattr(lib, "hemx_native_set_inline_residues"):
                    lib.hemx_native_set_inline_residues.argtypes = [ctypes.c_longlong]
                for target, symbol in _TARGETS.items():
                    jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
                for target, symbol in _OPTIONAL_TARGETS.items():
                    if hasattr(lib, symbol):
                        jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
                        _registered.add((path, target))
                _apply_isa_env(lib)
                result = (lib, "")
            except ParameterError as exc:  # HEMX_NATIVE_ISA names an instruction set this CPU or build lacks
                result = (None, str(exc))
                _env_errors[path] = exc
            except (OSError, AttributeError, RuntimeError, ValueError) as exc:
                result = (None, f"native library {path} failed to load: {type(exc).__name__}: {exc}")
        _state[path] = result
        return result


_DISABLED = contextvars.ContextVar("hemx_native_disabled", default=False)


@contextlib.contextmanager
def disabled():
    """Within this block (this thread / task), :func:`available` is False: kernels traced here take their JAX
    paths. A context on a mesh (:mod:`hemx.ckks.placement`) traces its operations so, since the custom calls have
    no partitioning rule."""
    token = _DISABLED.set(True)
    try:
        yield
    finally:
        _DISABLED.reset(token)


def reason() -> str:
    """Why the native kernels are not used ("" when they are available)."""
    if _DISABLED.get():
        return "disabled in this block (hemx.kernels.native.disabled(), e.g. a sharded context)"
    if _disabled_by_env():
        return f"disabled by {ENV}={os.environ.get(ENV)}"
    lib, why = _load()
    if library_path() in _env_errors:  # an explicit, impossible request: refused loudly, not a silent JAX fallback
        raise _env_errors[library_path()]
    if lib is None:
        return why
    if jax.default_backend() != "cpu":
        return f"the default JAX backend is {jax.default_backend()!r}; the native kernels are CPU-only"
    return ""


def available() -> bool:
    """True when the native kernels can run here (library loaded, CPU backend, not disabled)."""
    return reason() == ""


def has_fused_keyswitch() -> bool:
    """True when the native kernels are available and the library has the fused key-switching passes
    (:func:`modup`, :func:`divide_by_dropped`; a library built before them has not)."""
    return available() and all((library_path(), t) in _registered for t in _FUSED_TARGETS)


def has_seeded_keys() -> bool:
    """True when the native kernels are available and the library has the seeded key halves and the one-pass key
    product (:func:`uniform`, :func:`key_product`; a library built before them has not)."""
    return available() and all((library_path(), t) in _registered for t in _SEEDED_TARGETS)


def _lib() -> ctypes.CDLL:
    why = reason()
    if why:
        raise BackendError(f"hemx native kernels unavailable: {why}")
    return _load()[0]


def isa() -> str:
    """The instruction set the library runs ("amx", "avx512", "avx2", "neon" or "scalar")."""
    return _lib().hemx_native_isa().decode()


def _built(lib) -> tuple[str, ...]:
    if hasattr(lib, "hemx_native_built_isas"):
        return tuple(lib.hemx_native_built_isas().decode().split(","))
    return ("avx512", "avx2", "scalar")  # a library built before the per-architecture builds


def _set_isa(lib, name: str) -> None:
    if name not in ISAS + ("auto",):
        raise ParameterError(f"unknown instruction set {name!r}; choose one of {ISAS + ('auto',)}")
    rc = lib.hemx_native_set_isa(name.encode())
    if rc == 0:
        return
    if name not in _built(lib):
        raise ParameterError(f"this native library has no {name} kernels (built for: {', '.join(_built(lib))})")
    raise ParameterError(f"this CPU cannot run the {name} kernels; it runs: {', '.join(_runnable(lib))} "
                         f"(set {ISA_ENV} to one of them, or leave it unset for the best)")


def _runnable(lib) -> list[str]:
    cur = lib.hemx_native_isa().decode()
    out = []
    for name in _built(lib):
        if lib.hemx_native_set_isa(name.encode()) == 0:
            out.append(name)
    lib.hemx_native_set_isa(cur.encode())
    return out


def _apply_isa_env(lib) -> None:
    """Apply ``HEMX_NATIVE_ISA`` when the library loads (ParameterError for a name it cannot run)."""
    name = os.environ.get(ISA_ENV, "").strip().lower()
    if name and name != "auto":
        try:
            _set_isa(lib, name)
        except ParameterError as exc:
            raise ParameterError(f"{ISA_ENV}={name}: {exc}") from None


def built_isas() -> tuple[str, ...]:
    """The instruction sets compiled into the loaded library, best first (e.g. ("avx512", "avx2", "scalar"))."""
    return _built(_lib())


def runnable_isas() -> list[str]:
    """The instruction sets of :func:`built_isas` this CPU runs, best first."""
    return _runnable(_lib())


#: The AES engines a library can have, best first (each where the CPU has its instructions; "soft" everywhere).
AES_ENGINES: tuple[str, ...] = ("vaes", "aesni", "armv8", "soft")


def aes_engine() -> str:
    """The engine the "aes128ctr" streams run on: "vaes" (AVX-512 VAES), "aesni", "armv8" or "soft" (portable)."""
    lib = _lib()
    if not hasattr(lib, "hemx_native_aes"):
        raise BackendError("this native library predates the AES engines: rebuild it (pip install --no-deps -e .)")
    lib.hemx_native_aes.restype = ctypes.c_char_p
    return lib.hemx_native_aes().decode()


def set_aes(name: str) -> str:
    """Force the AES engine (one of :data:`AES_ENGINES`, or "auto"); returns the one now active. Every engine gives the
    same stream. ParameterError for a name this library lacks or this CPU cannot run."""
    lib = _lib()
    current = aes_engine()
    if name not in AES_ENGINES + ("auto",):
        raise ParameterError(f"unknown AES engine {name!r}; choose one of {AES_ENGINES + ('auto',)}")
    lib.hemx_native_set_aes.argtypes = [ctypes.c_char_p]
    rc = lib.hemx_native_set_aes(name.encode())
    if rc == -1:
        raise ParameterError(f"this native library has no {name} AES engine (it runs {current})")
    if rc == -2:
        raise ParameterError(f"this CPU cannot run the {name} AES engine; it runs: {', '.join(runnable_aes())}")
    return aes_engine()


def runnable_aes() -> list[str]:
    """The AES engines of :data:`AES_ENGINES` this library has and this CPU runs, best first."""
    lib = _lib()
    current = aes_engine()
    lib.hemx_native_set_aes.argtypes = [ctypes.c_char_p]
    out = [name for name in AES_ENGINES if lib.hemx_native_set_aes(name.encode()) == 0]
    lib.hemx_native_set_aes(current.encode())
    return out


_explicit: dict = {}  # library path -> the name set_isa was last given (absent, or "auto": nothing forced)


def set_isa(name: str) -> str:
    """Force the instruction set ("amx", "avx512", "avx2", "neon", "scalar" or "auto"); returns the one now active.

    For tests and benchmarks: every path is bit-identical. Raises ParameterError for a name this library was not
    built with or this CPU cannot run (nothing changes then). ``HEMX_NATIVE_ISA`` does the same when the library
    loads. A forced instruction set is kept by the planner (:func:`isa_forced`); "auto" hands the choice back.
    """
    lib = _lib()
    _set_isa(lib, name)
    _explicit[library_path()] = name
    return isa()


def select_isa(name: str) -> str:
    """:func:`set_isa` for the planner: the same switch, without marking the instruction set as forced."""
    _set_isa(_lib(), name)
    return isa()


def isa_forced() -> str | None:
    """How the instruction set was forced, or None: ``"HEMX_NATIVE_ISA=<name>"``, or ``"set_isa(<name>)"`` when a
    caller chose one (a planner must keep it)."""
    env = os.environ.get(ISA_ENV, "").strip().lower()
    if env and env != "auto":
        return f"{ISA_ENV}={env}"
    name = _explicit.get(library_path())
    return None if name in (None, "auto") else f"set_isa({name!r})"


def selftest() -> str:
    """Run the library's own self-test (no JAX involved): every instruction set this CPU runs, against exact
    references and the scalar build (NTT at three modulus ranges and n up to 8192, Shoup product, basis conversion,
    inner product, gather). Returns its report line; raises BackendError when a check fails."""
    lib = _load()[0]
    if lib is None:
        raise BackendError(f"hemx native kernels unavailable: {reason()}")
    if not hasattr(lib, "hemx_native_selftest"):
        raise BackendError("this native library predates the self-test: rebuild it (pip install --no-deps -e .)")
    buf = ctypes.create_string_buffer(512)
    rc = lib.hemx_native_selftest(buf, len(buf))
    line = buf.value.decode()
    if rc <= 0:
        raise BackendError(f"native self-test failed: {line}")
    return line


def set_max_threads(count: int) -> None:
    """Cap the threads one native call uses (0: the size of XLA's CPU thread pool)."""
    if not isinstance(count, (int, np.integer)) or count < 0:
        raise ParameterError(f"thread cap must be a non-negative integer, got {count!r}")
    _lib().hemx_native_set_max_threads(int(count))


def set_inline_residues(count: int | None = None) -> None:
    """Work, in residues, below which one native call runs on its caller's thread alone (None: the default, 2^16:
    handing less to XLA's thread pool costs more than it saves, and on a loaded machine the caller waits on
    preempted helpers). 0 threads every call that has more than one chunk (the tests use it to cover the
    threaded path on small inputs)."""
    if count is not None and (isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0):
        raise ParameterError(f"inline threshold must be None or a non-negative integer, got {count!r}")
    lib = _lib()
    if not hasattr(lib, "hemx_native_set_inline_residues"):
        raise BackendError("this native library predates set_inline_residues: rebuild it (pip install --no-deps -e .)")
    lib.hemx_native_set_inline_residues(-1 if count is None else int(count))


@functools.lru_cache(maxsize=None)
def _file_hash(path: str, mtime: float, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def build_id() -> str:
    """A short hash of the library file, or "none" when the native kernels are unavailable."""
    if not available():
        return "none"
    path = library_path()
    st = os.stat(path)
    return _file_hash(path, st.st_mtime, st.st_size)


def describe() -> str:
    """One line for ``hemx info``: which NTT path is active and why."""
    why = reason()
    if why:
        return f"off ({why}); the JAX kernels are used"
    return f"on ({isa()} of {', '.join(built_isas())}; build {build_id()}, {library_path()})"


# ----------------------------------------------------------------------------------------------------------
# the custom calls (batched over leading axes; vmap maps onto the same call)
# ----------------------------------------------------------------------------------------------------------


def _call(target: str, x, *tables):
    # Out of place: the handlers copy each (batch, limb) row into the output as they reach it (cache-hot) when
    # the buffers differ. Aliasing the input (input_output_aliases) made XLA copy a live input whole before the
    # call, one more pass over memory: 0.6-1 ms of a 30-limb N = 2^16 NTT.
    return jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, x.dtype))(x, *tables)


def _batched_rule(fn, data=(0,)):
    """vmap rule: batched data (the arguments at the positions ``data``: ``x``, and a division's addend, whose
    leading axes are batch axes of the kernel) with shared tables is one bigger call; batched tables (different
    moduli per batch member) map the call over the batch."""

    def rule(axis_size, in_batched, *args):
        grow = lambda a, b: a if b else jnp.broadcast_to(a, (axis_size,) + a.shape)  # noqa: E731
        if not any(b for i, b in enumerate(in_batched) if i not in data):
            return fn(*(grow(a, b) if i in data else a for i, (a, b) in enumerate(zip(args, in_batched)))), True
        args = [grow(a, b) for a, b in zip(args, in_batched)]
        return jax.lax.map(lambda a: fn(*a), tuple(args)), True

    return rule


def _make(target: str):
    @jax.custom_batching.custom_vmap
    def fn(x, *tables):
        return _call(target, x, *tables)

    fn.def_vmap(_batched_rule(fn))
    return fn


_forward = _make("hemx_ntt_forward")
_inverse = _make("hemx_ntt_inverse")
_mul = _make("hemx_mul_shoup")


def _butterfly_tables(plan):
    bt = getattr(plan, "butterfly", None)
    if bt is None:
        raise ParameterError(
            f"the native NTT needs a plan with butterfly tables (method 'native' or 'butterfly'), got {plan.method!r}"
        )
    return bt


def _rows(bt, plan):
    """Row of the twiddle tables each limb uses (``ButterflyTables.rows``; all rows in order when None)."""
    if bt.rows is None:
        return jnp.arange(plan.num_limbs, dtype=jnp.int32)
    return jnp.asarray(bt.rows).astype(jnp.int32)


def _nonempty(what: str, *arrays) -> None:
    """Refuse zero-size data with ShapeError: the kernels reject an empty axis (a degenerate call is a caller's bug),
    and XLA may drop a call whose result is empty instead, so the refusal is made here, the same either way."""
    for a in arrays:
        if 0 in tuple(a.shape):
            raise ShapeError(f"{what} has an empty axis: shape {tuple(a.shape)}")


def _to_limb_major(x, plan, limb_axis: int):
    limb_layout(x, plan, limb_axis)  # the plan's own validation: raises ShapeError on bad data
    _nonempty("NTT data", x)
    ax = limb_axis % x.ndim
    return (x if ax == x.ndim - 2 else jnp.moveaxis(x, ax, -2)), ax


def ntt(x, plan, limb_axis: int = -2):
    """Forward negacyclic NTT of uint32 residues ``(..., L, N)`` (limbs on ``limb_axis``), same shape.

    Output in bit-reversed order, bit-identical to ``hemx.kernels.ntt.ntt`` with the same plan's tables.
    """
    _lib()
    bt = _butterfly_tables(plan)
    y, ax = _to_limb_major(x, plan, limb_axis)
    q = plan.table.q.reshape(-1).astype(jnp.uint32)
    out = _forward(y, q, bt.fwd.value, bt.fwd.shoup, _rows(bt, plan))
    return out if ax == x.ndim - 2 else jnp.moveaxis(out, -2, ax)


def intt(x, plan, limb_axis: int = -2):
    """Inverse of :func:`ntt`: bit-reversed NTT-domain values ``(..., L, N)`` back to coefficients."""
    _lib()
    bt = _butterfly_tables(plan)
    y, ax = _to_limb_major(x, plan, limb_axis)
    q = plan.table.q.reshape(-1).astype(jnp.uint32)
    scal = jnp.stack([bt.ninv.value[:, 0], bt.ninv.shoup[:, 0], bt.inv_last.value[:, 1], bt.inv_last.shoup[:, 1]],
                     axis=1).astype(jnp.uint32)
    out = _inverse(y, q, bt.inv.value, bt.inv.shoup, scal, _rows(bt, plan))
    return out if ax == x.ndim - 2 else jnp.moveaxis(out, -2, ax)


def mul_shoup(x, w, q):
    """``x * w mod q`` in ``[0, q)``: ``x`` ``(..., L, N)`` uint32, ``w`` a KnownOperand ``(L, N)``, ``q`` ``(L,)``."""
    _lib()
    if x.dtype != jnp.uint32 or x.ndim < 2 or tuple(w.value.shape) != tuple(x.shape[-2:]):
        raise ShapeError(f"mul_shoup needs uint32 data (..., L, N) matching the operand {tuple(w.value.shape)}; "
                         f"got {x.dtype} {tuple(x.shape)}")
    _nonempty("mul_shoup data", x)
    return _mul(x, jnp.asarray(q).reshape(-1).astype(jnp.uint32), w.value, w.shoup)


def butterfly_probe(x, q, tw, *, reps: int):
    """``reps`` sweeps of in-register lazy radix-4 butterflies over each row of ``x`` ``(K, n)`` (n * 4 bytes
    should fit L1); ``q`` ``(K,)``, ``tw`` ``(K, 2)`` = (w, shoup(w)). Does ``K * n * reps`` butterflies."""
    _lib()
    if x.dtype != jnp.uint32 or x.ndim != 2:
        raise ShapeError(f"probe data must be uint32 (K, n), got {x.dtype} {tuple(x.shape)}")
    _nonempty("probe data", x)
    return jax.ffi.ffi_call("hemx_butterfly_probe", jax.ShapeDtypeStruct(x.shape, x.dtype))(
        x, q, tw, reps=np.int64(reps))


# ---------------------------------------------------------------------------------- beyond the NTT


def _make_general(target: str, out_shape, data=(0,), **attrs):
    """A custom_vmap'd call of ``target`` whose output shape is ``out_shape(*args)`` (no aliasing); ``data``: the
    positions of the arguments with the kernel's leading batch axes (:func:`_batched_rule`)."""

    @jax.custom_batching.custom_vmap
    def fn(x, *tables):
        return jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(out_shape(x, *tables), jnp.uint32))(x, *tables, **attrs)

    fn.def_vmap(_batched_rule(fn, data))
    return fn


_automorphism = _make_general("hemx_automorphism", lambda x, m: x.shape)
_inner_product = _make_general("hemx_inner_product", lambda a, b, q: a.shape[:-3] + b.shape[1:])
_bconv_calls = {
    centered: _make_general("hemx_bconv", lambda x, q, h, p, c, r: x.shape[:-2] + (p.shape[0], x.shape[-1]),
                            centered=np.int64(centered))
    for centered in (False, True)
}


def automorphism(x, index_map):
    """``out[..., p] = x[..., index_map[p]]`` for NTT-domain data ``(..., L, N)`` uint32 and an int32 index map
    ``(N,)`` (a permutation from :func:`hemx.kernels.automorphism.ntt_index_map`; the kernel rejects an index
    outside ``[0, N)``)."""
    _lib()
    index_map = jnp.asarray(index_map)
    if x.dtype != jnp.uint32 or x.ndim < 2 or index_map.shape != x.shape[-1:]:
        raise ShapeError(f"automorphism needs uint32 data (..., L, N) and an index map (N,); got {x.dtype} "
                         f"{tuple(x.shape)} and {tuple(index_map.shape)}")
    _nonempty("automorphism data", x)
    return _automorphism(x, _checked_map(index_map, x.shape[-1]))


def _checked_map(index_map, n: int):
    """An index map as the kernels take it (int32 ``(n,)``): integers, and, where concrete, within ``[0, n)`` (a
    traced map is checked by the kernel)."""
    index_map = jnp.asarray(index_map)
    if index_map.shape != (n,) or not jnp.issubdtype(index_map.dtype, jnp.integer):
        raise ShapeError(f"an index map must hold integers, shaped ({n},); got {index_map.dtype} "
                         f"{tuple(index_map.shape)}")
    if not isinstance(index_map, jax.core.Tracer):
        m = np.asarray(index_map)
        if m.size and (m.min() < 0 or m.max() >= n):
            raise ParameterError(f"index map entries must lie in [0, {n}); got [{m.min()}, {m.max()}]")
    return index_map.astype(jnp.int32)


def inner_product(a, b, q):
    """``out[..., k, :, :] = sum_d a[..., d, :, :] * b[d, k, :, :] mod q``: ``a`` ``(..., D, m, N)``, ``b``
    ``(D, K, m, N)``, ``q`` ``(m,)`` (or ``(m, 1)``), all uint32 with residues in ``[0, q)``; ``(..., K, m, N)``.
    Moduli must be odd and below 2^31 (the kernel rejects others)."""
    _lib()
    q = jnp.asarray(q).reshape(-1)
    if a.dtype != jnp.uint32 or b.dtype != jnp.uint32 or a.ndim < 3 or b.ndim != 4:
        raise ShapeError(f"inner product needs uint32 a (..., D, m, N) and b (D, K, m, N); got {a.dtype} "
                         f"{tuple(a.shape)} and {b.dtype} {tuple(b.shape)}")
    d, m, n = a.shape[-3:]
    if b.shape[0] != d or tuple(b.shape[2:]) != (m, n) or q.shape != (m,):
        raise ShapeError(f"inner product shapes do not match: a {tuple(a.shape)}, b {tuple(b.shape)}, "
                         f"q {tuple(q.shape)}")
    _nonempty("inner product operand", a, b)
    return _inner_product(a, b, q.astype(jnp.uint32))


def bconv(x, plan):
    """Fast basis conversion by a :class:`hemx.kernels.bconv.BConvPlan`: ``(..., L, N)`` uint32 residues mod the
    plan's source moduli to ``(..., L', N)`` mod its targets, bit-identical to ``hemx.kernels.bconv.bconv``
    (centered or not, as the plan says)."""
    _lib()
    nl, nlp = plan.src.q.shape[0], plan.dst.q.shape[0]
    if x.dtype != jnp.uint32 or x.ndim < 2 or x.shape[-2] != nl:
        raise ShapeError(f"basis conversion input must be uint32 (..., {nl}, N); got {x.dtype} {tuple(x.shape)}")
    _nonempty("basis conversion input", x)
    u32 = lambda a, shape: jnp.asarray(a).reshape(shape).astype(jnp.uint32)  # noqa: E731
    return _bconv_calls[bool(plan.centered)](
        x, u32(plan.src.q, (nl,)), u32(plan.qhat_inv.value, (nl,)), u32(plan.dst.q, (nlp,)),
        u32(plan.qhat_mod_p.value, (nl, nlp)), u32(plan.corr.value, (nl, nlp)))


# ---------------------------------------------------------------------------- fused key-switching passes


#: the custom-call functions by ``(centered, part)`` / ``(centered, addend_part)`` (-1: plain), made on first use
_modup_calls: dict = {}
_divide_calls: dict = {}
#: argument position of a division's addend (after x and its 15 tables): batched like x under vmap
_DIVIDE_ADDEND = 16


def _modup_call(centered: bool, part: int):
    """hemx_modup of ``x`` ``(..., num_q, N)`` (``part < 0``) or of part ``part`` of ``x`` ``(..., P, num_q, N)``."""
    key = (bool(centered), int(part))
    if key not in _modup_calls:
        lead = 2 if part < 0 else 3
        shape = lambda x, q, w, ws, wi, wis, scal, rows, digits, *rest: (  # noqa: E731
            x.shape[:-lead] + (digits.shape[0], q.shape[0], x.shape[-1]))
        _modup_calls[key] = _make_general("hemx_modup", shape, centered=np.int64(centered), part=np.int64(part))
    return _modup_calls[key]


def _divide_call(centered: bool, addend_part: int):
    """hemx_divide, with an addend's part ``addend_part`` added to the output's first part (``< 0``: none)."""
    key = (bool(centered), int(addend_part))
    if key not in _divide_calls:
        shape = lambda x, keep, *rest: x.shape[:-2] + (keep.shape[0], x.shape[-1])  # noqa: E731
        _divide_calls[key] = _make_general("hemx_divide", shape, data=(0, _DIVIDE_ADDEND),
                                           centered=np.int64(centered), addend_part=np.int64(addend_part))
    return _divide_calls[key]


_NO_MAP = np.zeros((0,), np.int32)
_NO_ADDEND = np.zeros((0,), np.uint32)


def _optional_map(index_map, n: int):
    """An index map for a fused pass (:func:`_checked_map`), or the empty "no permutation" for None."""
    return _NO_MAP if index_map is None else _checked_map(index_map, n)


def _ntt_tables(plan):
    """``(q (L,), rows (L,), w, ws, wi, wis (R, N), scal (L, 4))`` of an NTT plan with butterfly tables."""
    bt = _butterfly_tables(plan)
    q = plan.table.q.reshape(-1).astype(jnp.uint32)
    scal = jnp.stack([bt.ninv.value[:, 0], bt.ninv.shoup[:, 0], bt.inv_last.value[:, 1], bt.inv_last.shoup[:, 1]],
                     axis=1).astype(jnp.uint32)
    return q, _rows(bt, plan), bt.fwd.value, bt.fwd.shoup, bt.inv.value, bt.inv.shoup, scal


def _flat(a):
    return jnp.asarray(a).reshape(-1).astype(jnp.uint32)


def modup(x_ntt, plan, conv_plans, *, digits, num_p: int, part: int | None = None, index_map=None):
    """The extended digits of ``x_ntt`` ``(..., num_q, N)`` (NTT domain over ``Q_l``): ``(..., D, num_p + num_q, N)``
    over ``Q_l P`` in the NTT domain, in one call; bit-identical to :func:`hemx.ckks.keyswitch.modup`.

    ``plan``: an NTT plan with butterfly tables ("native" or "butterfly") over at least the limbs ``[P, Q_l]``
    (the first ``num_p + num_q`` limbs); ``conv_plans``: one :class:`~hemx.kernels.bconv.BConvPlan` per digit
    from its limbs to ``[P, Q_<lo, Q_>=hi]``; ``digits``: static ``((lo, hi), ...)`` covering ``[0, num_q)``.
    ``part`` (static): ``x_ntt`` is ``(..., P, num_q, N)`` and ``x_ntt[..., part, :, :]`` is extended, read in
    place (a ciphertext's ``c1`` without a sliced copy). ``index_map`` ``(N,)``: the data's limbs are read
    permuted, ``x[..., index_map]`` (:func:`automorphism` fused into the pass, exactly).
    """
    _lib()
    lead = 2 if part is None else 3
    if x_ntt.ndim < lead or (part is not None and not 0 <= int(part) < x_ntt.shape[-3]):
        raise ShapeError(f"ModUp input must be uint32 (..., num_q, N), or (..., P, num_q, N) with 0 <= part < P; "
                         f"got {x_ntt.dtype} {tuple(x_ntt.shape)}, part {part!r}")
    num_q = x_ntt.shape[-2]
    m = num_p + num_q
    digits = tuple((int(lo), int(hi)) for lo, hi in digits)
    if x_ntt.dtype != jnp.uint32 or x_ntt.shape[-1] != plan.n or plan.num_limbs < m:
        raise ShapeError(f"ModUp input must be uint32 (..., num_q, {plan.n}) with num_p + num_q <= {plan.num_limbs}; "
                         f"got {x_ntt.dtype} {tuple(x_ntt.shape)}")
    _nonempty("ModUp input", x_ntt)
    if len(conv_plans) != len(digits) or not digits or digits[0][0] != 0 or digits[-1][1] != num_q or any(
            a[1] != b[0] for a, b in zip(digits, digits[1:])) or any(lo >= hi for lo, hi in digits):
        raise ShapeError(f"ModUp digits {digits} must be contiguous ranges covering [0, {num_q}), one plan each")
    for (lo, hi), cp in zip(digits, conv_plans):
        if cp.src.q.shape[0] != hi - lo or cp.dst.q.shape[0] != m - (hi - lo):
            raise ShapeError(f"ModUp conversion plan for digit [{lo}, {hi}) has the wrong shape")
    centered = {bool(cp.centered) for cp in conv_plans}
    if len(centered) != 1:
        raise ParameterError("the digits' conversions must all be centered or all plain")
    q, rows, w, ws, wi, wis, scal = _ntt_tables(select_limbs(plan, slice(0, m)))
    qhinv = jnp.concatenate([_flat(cp.qhat_inv.value) for cp in conv_plans])
    c = jnp.concatenate([_flat(cp.qhat_mod_p.value) for cp in conv_plans])
    corr = jnp.concatenate([_flat(cp.corr.value) for cp in conv_plans])
    dig = np.asarray(digits, dtype=np.int32)
    call = _modup_call(centered.pop(), -1 if part is None else int(part))
    return call(x_ntt, q, w, ws, wi, wis, scal, rows, dig, qhinv, c, corr, _optional_map(index_map, plan.n))


def divide_by_dropped(x, keep_plan, drop_plan, conv_plan, inv, *, keep_rows, drop_rows, addend=None,
                      addend_part: int = 0, index_map=None):
    """``(x_K - NTT(Conv_{D->K}(INTT(x_D)))) * D^-1`` over the kept rows: ``x`` ``(..., M, N)`` NTT domain, ``keep_rows``
    / ``drop_rows`` static row indices into its ``M`` rows -> ``(..., |K|, N)``; bit-identical to
    :func:`hemx.ckks.keyswitch.divide_by_dropped`.

    ``keep_plan`` / ``drop_plan``: NTT plans (butterfly tables) of the kept / dropped limbs, in row order;
    ``conv_plan``: the conversion ``D -> K``; ``inv``: the known operand ``D^-1 mod k_j`` ``(|K|, 1)``.

    ``addend`` ``(..., A, |K|, N)`` (residues mod the kept limbs, beside ``x`` ``(..., S, M, N)``): the result's
    first part gets ``addend[..., addend_part, :, :]`` added mod ``q`` (permuted, ``[..., index_map]``, where an
    index map ``(N,)`` is given), in the same pass: a rotation's ``c0`` term added to the switched pair
    ``(S = 2)`` with no stacking or sliced copies.
    """
    _lib()
    keep_rows, drop_rows = tuple(int(i) for i in keep_rows), tuple(int(i) for i in drop_rows)
    k, d = len(keep_rows), len(drop_rows)
    if x.dtype != jnp.uint32 or x.ndim < 2 or not k or not d:
        raise ShapeError(f"division input must be uint32 (..., M, N) with rows to keep and drop; got {x.dtype} "
                         f"{tuple(x.shape)}")
    _nonempty("division input", x)
    if not all(0 <= i < x.shape[-2] for i in keep_rows + drop_rows):
        raise ShapeError(f"row indices out of range for data {tuple(x.shape)}")
    if keep_plan.num_limbs != k or drop_plan.num_limbs != d or conv_plan.src.q.shape[0] != d or (
            conv_plan.dst.q.shape[0] != k) or inv.value.size != k or x.shape[-1] != keep_plan.n:
        raise ShapeError("division tables do not match the kept / dropped rows")
    if addend is None:
        if index_map is not None:
            raise ParameterError("a division's index map permutes its addend; give an addend with it, or neither")
        part, addend, index_map = -1, _NO_ADDEND, _NO_MAP
    else:
        part = int(addend_part)
        if addend.dtype != jnp.uint32 or x.ndim < 3 or addend.ndim != x.ndim or not 0 <= part < addend.shape[-3] \
                or tuple(addend.shape[:-3]) + tuple(addend.shape[-2:]) != tuple(x.shape[:-3]) + (k, x.shape[-1]):
            raise ShapeError(f"a division's addend must be uint32 (..., A, {k}, N) beside data (..., S, M, N) with "
                             f"0 <= addend_part < A; got {addend.dtype} {tuple(addend.shape)} beside "
                             f"{tuple(x.shape)}, addend_part {addend_part!r}")
        index_map = _optional_map(index_map, x.shape[-1])
    qk, rows_k, w, ws, _, _, _ = _ntt_tables(keep_plan)
    qd, rows_d, _, _, wi, wis, scal_d = _ntt_tables(drop_plan)
    return _divide_call(bool(conv_plan.centered), part)(
        x, np.asarray(keep_rows, np.int32), np.asarray(drop_rows, np.int32), qk, qd, w, ws, rows_k, wi, wis, scal_d,
        rows_d, _flat(conv_plan.qhat_inv.value), _flat(conv_plan.qhat_mod_p.value), _flat(conv_plan.corr.value),
        _flat(inv.value), addend, index_map)


# ------------------------------------------------------------------------------- seeded uniform halves


def _check_stream_key(key):
    key = jnp.asarray(key)
    if key.dtype != jnp.uint32 or key.shape != (8,):
        raise ShapeError(f"a stream key must be uint32 (8,), got {key.dtype} {tuple(key.shape)}")
    return key


#: The seed expansions of :mod:`hemx.kernels.prng` by the number the kernels take (their ``xof`` attribute).
XOF_CODES = {"chacha20": 0, "aes128ctr": 1}


def _xof_code(xof: str) -> int:
    if xof not in XOF_CODES:
        raise ParameterError(f"unknown seed expansion {xof!r}; choose one of {tuple(XOF_CODES)}")
    return XOF_CODES[xof]


def uniform(key, q, *, digits: int, n: int, xof: str = "chacha20"):
    """The seeded rows of a switching key's uniform half, ``(digits, m, n)`` uint32: row ``(d, l)`` the stream of
    ``(key, d, q[l], n)`` by the expansion ``xof`` ("chacha20", or "aes128ctr" on the CPU's AES instructions: see
    :func:`aes_engine`) turned into residues (:mod:`hemx.kernels.prng` defines it; bit-identical to
    :func:`hemx.kernels.prng.uniform_rows`). ``key``: uint32 ``(8,)``; ``q``: ``(m,)`` odd moduli below 2^31."""
    _lib()
    code = _stream_code(xof)
    key = _check_stream_key(key)
    q = jnp.asarray(q).reshape(-1).astype(jnp.uint32)
    if isinstance(digits, bool) or not isinstance(digits, (int, np.integer)) or digits < 1 or q.shape[0] < 1 \
            or isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ShapeError(f"seeded rows need digits >= 1, moduli and n >= 1; got {digits!r}, {q.shape[0]}, {n!r}")
    return jax.ffi.ffi_call("hemx_uniform", jax.ShapeDtypeStruct((int(digits), q.shape[0], int(n)), jnp.uint32))(
        np.arange(int(digits), dtype=np.int32), key, q, n=np.int64(n), **({} if code is None else {"xof": np.int64(code)}))


def _key_product_call(seeded: bool, permuted: bool, xof: int | None):
    extra = {} if xof is None else {"xof": np.int64(xof)}  # None: a library from before the AES streams
    return _make_general("hemx_key_product", lambda a, b, k, q, m: a.shape[:-3] + (2,) + a.shape[-2:],
                         seeded=np.int64(seeded), permuted=np.int64(permuted), **extra)


_key_product_calls = {(s, p, x): _key_product_call(s, p, x) for s in (False, True) for p in (False, True)
                      for x in (None, *XOF_CODES.values())}


def has_aes_streams() -> bool:
    """True when the native kernels are available and the library has the "aes128ctr" streams (its AES engines; a
    library built before them generates ChaCha20 rows only)."""
    return has_seeded_keys() and hasattr(_load()[0], "hemx_native_aes")


def _stream_code(xof: str) -> int | None:
    """The kernels' ``xof`` attribute for an expansion, None for ChaCha20 on a library from before the attribute."""
    code = _xof_code(xof)
    if has_aes_streams():
        return code
    if code:
        raise BackendError("this native library predates the aes128ctr streams: rebuild it (pip install --no-deps -e .)")
    return None


def key_product(a, b, q, *, stream=None, index_map=None, xof: str = "chacha20"):
    """The key-switching inner product in one pass: ``a`` ``(..., D, m, N)`` (the extended digits) and a key's data
    ``b`` ``(Dk, K, Mk, N)`` of which rows ``[:D, :, :m]`` are read in place (``D <= Dk``, ``m <= Mk``), ``q``
    ``(m,)`` -> ``(..., 2, m, N)`` = ``[sum_d x_d b_d0, sum_d x_d b_d1]``, like :func:`inner_product` with
    ``b[:D, :2, :m]``.

    ``stream``: a compact key's stream key ``(8,)``: its second halves ``b_d1`` are the seeded rows of
    :func:`uniform` over ``q`` by the expansion ``xof``, generated in the kernel (``b`` needs ``K >= 1``); None:
    ``b_d1 = b[d, 1]`` (``K >= 2``; ``xof`` unused). ``index_map``: an automorphism's int32 ``(N,)`` map: ``x_d[j] = a_d[map[j]]`` (the permuted
    digits of a hoisted rotation, like :func:`automorphism` first; the kernel rejects an index outside ``[0, N)``);
    None: ``x_d = a_d``."""
    _lib()
    q = jnp.asarray(q).reshape(-1).astype(jnp.uint32)
    if a.dtype != jnp.uint32 or b.dtype != jnp.uint32 or a.ndim < 3 or b.ndim != 4:
        raise ShapeError(f"key product needs uint32 a (..., D, m, N) and b (Dk, K, Mk, N); got {a.dtype} "
                         f"{tuple(a.shape)} and {b.dtype} {tuple(b.shape)}")
    d, m, n = a.shape[-3:]
    halves = 1 if stream is not None else 2
    if d > b.shape[0] or m > b.shape[2] or b.shape[3] != n or b.shape[1] < halves or q.shape != (m,):
        raise ShapeError(f"key product shapes do not match: a {tuple(a.shape)}, b {tuple(b.shape)}, q {tuple(q.shape)}"
                         + ("" if stream is not None else " (a full key needs both halves: K >= 2)"))
    _nonempty("key product operand", a, b)
    key = _check_stream_key(stream) if stream is not None else jnp.zeros((8,), jnp.uint32)
    if index_map is not None:
        index_map = jnp.asarray(index_map)
        if index_map.shape != (n,) or not jnp.issubdtype(index_map.dtype, jnp.integer):
            raise ShapeError(f"the index map must hold N = {n} integers, got {index_map.dtype} {tuple(index_map.shape)}")
        index_map = index_map.astype(jnp.int32)
    imap = index_map if index_map is not None else jnp.zeros((1,), jnp.int32)
    return _key_product_calls[(stream is not None, index_map is not None, _stream_code(xof))](a, b, key, q, imap)


def has_plain_sums() -> bool:
    """Whether the loaded library has the grouped plaintext-product kernel (:func:`plain_sums`; older builds lack it)."""
    return available() and all((library_path(), t) in _registered for t in _PLAIN_SUM_TARGETS)


def _plain_sums_call(parts, blocks, groups: tuple, pieces: int, q):
    flat = [g for grp in groups for pair in ((len(grp),), *grp) for g in pair]
    out = jax.ShapeDtypeStruct(parts[0].shape, jnp.uint32)
    return tuple(jax.ffi.ffi_call("hemx_plain_sums", (out,) * len(groups))(
        q, *parts, *blocks, parts=np.int64(len(parts)), pieces=np.int64(pieces),
        groups=np.asarray([len(groups), *flat], np.int64)))


def plain_sums(parts, diagonals, groups, q):
    """Grouped sums of plaintext products: ``out_g = sum over (i, d) in groups[g] of parts[i] * diagonal_d mod q``.

    ``parts``: B uint32 arrays ``(..., K, m, N)`` of one shape (e.g. ciphertexts over ``Q_l P``); ``diagonals``: per
    diagonal a tuple of its row blocks ``(r_k, N / b)``, uint32, rows summing to ``m`` (the same number of blocks
    for every diagonal; entry ``j`` of a row stands for the residues ``[j b, (j + 1) b)``, a diagonal periodic in the
    slots, widened in the kernel); ``groups``: static tuple of non-empty tuples of ``(part, diagonal)`` indices;
    ``q`` ``(m,)``. Residues in ``[0, q)``. Returns a tuple of ``len(groups)`` arrays ``(..., K, m, N)``. Every group
    is summed over a column chunk of the parts while it is in cache (one pass over the parts for all the groups)."""
    _lib()
    if not has_plain_sums():
        raise BackendError("this hemx native library has no plain_sums kernel (rebuild it: pip install --no-deps -e .)")
    q = jnp.asarray(q).reshape(-1).astype(jnp.uint32)
    parts, groups = tuple(parts), tuple(tuple((int(i), int(d)) for i, d in g) for g in groups)
    if not parts or any(x.dtype != jnp.uint32 or x.shape != parts[0].shape for x in parts) or parts[0].ndim < 3:
        raise ShapeError("plain sums need uint32 parts (..., K, m, N), all of one shape; got "
                         f"{[(str(x.dtype), tuple(x.shape)) for x in parts]}")
    m, n = parts[0].shape[-2:]
    if q.shape != (m,):
        raise ShapeError(f"plain sums need one modulus per row: q {tuple(q.shape)} for m = {m}")
    if not groups or any(not g for g in groups):
        raise ShapeError("plain sums need at least one group and no empty group")
    used = sorted({d for g in groups for _, d in g})
    if any(i < 0 or i >= len(parts) for g in groups for i, _ in g) or (used and (used[0] < 0 or used[-1] >= len(diagonals))):
        raise ShapeError(f"a plain sums' term names no part or diagonal ({len(parts)} parts, {len(diagonals)} diagonals)")
    pieces = len(diagonals[used[0]])
    for d in used:
        blk = tuple(diagonals[d])
        width = blk[0].shape[-1] if blk else 0
        if (len(blk) != pieces or any(w.dtype != jnp.uint32 or w.ndim != 2 or w.shape[1] != width for w in blk)
                or width < 1 or n % width or sum(w.shape[0] for w in blk) != m):
            raise ShapeError(f"diagonal {d} must be {pieces} uint32 blocks (r, N / b) of one width, rows summing to "
                             f"{m}; got {[(str(w.dtype), tuple(w.shape)) for w in blk]}")
    at = {d: k for k, d in enumerate(used)}
    blocks = tuple(w for d in used for w in diagonals[d])
    groups = tuple(tuple((i, at[d]) for i, d in g) for g in groups)
    return _plain_sums_batched(parts, blocks, groups, pieces, q)


def _plain_sums_batched(parts, blocks, groups, pieces, q):
    """The call under vmap: batched parts with shared diagonals and moduli are one call with a leading batch axis
    (the kernel's ``...``); batched diagonals or moduli map the call over the batch."""

    @jax.custom_batching.custom_vmap
    def fn(parts, blocks, q):
        return _plain_sums_call(parts, blocks, groups, pieces, q)

    @fn.def_vmap
    def rule(axis_size, in_batched, parts, blocks, q):
        pb, bb, qb = in_batched
        if not any(bb) and not qb:
            parts = tuple(x if b else jnp.broadcast_to(x, (axis_size,) + x.shape) for x, b in zip(parts, pb))
            out = fn(parts, blocks, q)
        else:
            grow = lambda xs, bs: tuple(x if b else jnp.broadcast_to(x, (axis_size,) + x.shape)  # noqa: E731
                                        for x, b in zip(xs, bs))
            out = jax.lax.map(lambda a: fn(*a), (grow(parts, pb), grow(blocks, bb),
                                                 q if qb else jnp.broadcast_to(q, (axis_size,) + q.shape)))
        return out, (True,) * len(groups)

    return fn(parts, blocks, q)


def on_cpu(native_fn, jax_fn, *args):
    """``native_fn(*args)`` where the program runs on CPU and the native kernels are available here, else
    ``jax_fn(*args)``: both are traced, and ``jax.lax.platform_dependent`` keeps only the one for the platform
    the program is lowered for (so an export for cuda or tpu holds no custom call). Where the library is
    unavailable (not built, ``HEMX_NATIVE=0``, a non-CPU default backend) only ``jax_fn`` is traced."""
    if not available():
        return jax_fn(*args)
    return jax.lax.platform_dependent(*args, cpu=native_fn, default=jax_fn)


__all__ = ["available", "disabled", "reason", "describe", "isa", "set_isa", "select_isa", "isa_forced", "built_isas",
           "aes_engine", "set_aes", "runnable_aes", "has_aes_streams", "AES_ENGINES", "XOF_CODES", "runnable_isas", "selftest",
           "ISA_ENV", "set_max_threads", "set_inline_residues",
           "build_id", "library_path", "ntt", "intt", "mul_shoup", "butterfly_probe", "automorphism", "inner_product", "plain_sums", "has_plain_sums", "bconv",
           "modup", "divide_by_dropped", "has_fused_keyswitch", "has_seeded_keys", "uniform", "key_product", "on_cpu",
           "ISAS"]
