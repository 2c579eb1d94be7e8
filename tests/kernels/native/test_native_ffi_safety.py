"""Hostile and careless calls of every native FFI target must fail cleanly, never crash the process.

Each registered target (``hemx_ntt_forward`` ... ``hemx_divide``) is called directly through
``jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(...))``, with tables taken from real hemx plans (captured from
the public wrappers' own calls, so the arguments are exactly the ones hemx passes), and:

* the right output shape and dtype: the call succeeds and equals the public wrapper (the baseline that makes
  every rejection below a proof of a check, not of a broken call), before and after the bad calls;
* a wrong output shape: too small (``(1, 1, 1024)`` for a ``(4096, 1, 1024)`` input, which used to SIGSEGV),
  too big, a wrong last / limb axis, a lower or higher rank with the same element count, leading axes swapped:
  the handler's ``hemx native: ... output must be shaped`` error;
* a wrong output dtype (int32, float32) and a wrong input dtype (the data, and a table as the other integer
  type): the FFI binding's dtype error;
* a zero-size input (each axis of each data operand emptied in turn), run with ``has_side_effect=True`` so XLA
  keeps the call (it drops a side-effect-free call whose result is empty): the handler's empty-axis error; an
  empty input with a non-empty declared output (the call runs): an error; the same empty call without the flag:
  an error or an empty result, nothing else.

Every direct call runs in a child process (this file run as a script) that reports each case as a JSON line, so
a regression that segfaults fails the case it crashed on, with the signal, and the remaining cases run in a fresh
child. The public wrappers (``ntt``, ``intt``, ``automorphism``, ``inner_product``, ``bconv``, ``mul_shoup``,
``butterfly_probe``, ``modup``, ``divide_by_dropped``) are checked in process: bad shapes, dtypes and zero-size
inputs raise :class:`ShapeError` / :class:`ParameterError` before any kernel runs.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIG = 1 << 22  # residues in a "big" input (16 MiB): an unchecked write past a tiny result buffer faults
NATIVE_ERR = "hemx native:"
SHAPE_ERR = "output must be shaped"
DTYPE_ERR = "Wrong buffer dtype"

# ================================================================================ the child (run as a script)


def _specs():
    """``{target: (args_of(lead), out_shape(args), attrs, data_idx, ref(args), small, big)}``: the valid arguments
    of each target for data with leading axes ``lead`` (tables from real plans, captured from the wrappers)."""
    import jax.numpy as jnp

    from hemx import nt
    from hemx.ckks import keyswitch as ks
    from hemx.kernels import automorphism as A
    from hemx.kernels import bconv as BC
    from hemx.kernels import modarith as M
    from hemx.kernels import native
    from hemx.kernels import ntt as K

    rng = np.random.default_rng(0)

    def residues(lead, moduli, n):
        q = np.asarray(moduli, np.int64).reshape(len(moduli), 1)
        return rng.integers(0, q, size=tuple(lead) + (len(moduli), n)).astype(np.uint32)

    def capture(owner, key, call):
        """The arguments ``call()`` hands the custom-call function ``owner[key]`` (a wrapper's own assembly)."""
        orig, got = owner[key], []

        def rec(*args):
            got.append([np.asarray(a) for a in args])
            return orig(*args)

        owner[key] = rec
        try:
            call()
        finally:
            owner[key] = orig
        return got[0]

    mod = vars(native)

    def with_data(args, x, i=0):
        return args[:i] + [x] + args[i + 1 :]

    def by_wrapper(tables, make_x, wrap, i=0):
        """args_of(lead) / ref(args) for a wrapper whose data operand ``i`` is ``make_x(lead)``."""
        return (lambda lead: with_data(tables, make_x(lead), i)), (lambda args: np.asarray(wrap(args[i])))

    specs = {}
    # the NTT: one 30-bit limb at N = 1024, so the big input is (4096, 1, 1024)
    n = 1024
    q1 = nt.ntt_primes(30, 1, n)
    plan1 = K.make_plan(n, q1, "native")
    x0 = jnp.asarray(residues((2,), q1, n))
    same = lambda args: args[0].shape  # noqa: E731
    for target, key, wrap in (("hemx_ntt_forward", "_forward", native.ntt),
                              ("hemx_ntt_inverse", "_inverse", native.intt)):
        tables = capture(mod, key, lambda w=wrap: w(x0, plan1))
        args_of, ref = by_wrapper(tables, lambda lead: residues(lead, q1, n), lambda x, w=wrap: w(x, plan1))
        specs[target] = (args_of, same, {}, (0,), ref, (2, 3), (BIG // n,))
    # the Shoup product by a known operand (L, N)
    q2 = nt.ntt_primes(30, 2, n)
    wk = M.known_operand(rng.integers(0, 1 << 30, size=(2, n)), np.asarray(q2, np.int64).reshape(-1, 1))
    tables = capture(mod, "_mul", lambda: native.mul_shoup(jnp.asarray(residues((1,), q2, n)), wk, np.asarray(q2)))
    args_of, ref = by_wrapper(tables, lambda lead: residues(lead, q2, n),
                              lambda x: native.mul_shoup(x, wk, np.asarray(q2)))
    specs["hemx_mul_shoup"] = (args_of, same, {}, (0,), ref, (2, 3), (BIG // (2 * n),))
    # the butterfly probe: x (K, n) exactly (its "lead" is K)
    pn = 256
    pq = nt.ntt_primes(30, 1, pn)[0]
    tw1 = 12345

    def probe_args(lead):
        (k,) = lead
        q = np.full(k, pq, np.uint32)
        tw = np.tile(np.asarray([[tw1, (tw1 << 32) // pq]], np.uint32), (k, 1))
        return [rng.integers(0, pq, size=(k, pn)).astype(np.uint32), q, tw]

    specs["hemx_butterfly_probe"] = (
        probe_args, same, {"reps": np.int64(1)}, (0,),
        lambda args: np.asarray(native.butterfly_probe(args[0], args[1], args[2], reps=1)), (4,), (BIG // pn,))
    # the automorphism X -> X^5
    imap = A.ntt_index_map(n, 5)
    tables = capture(mod, "_automorphism", lambda: native.automorphism(jnp.asarray(residues((1,), q2, n)), imap))
    args_of, ref = by_wrapper(tables, lambda lead: residues(lead, q2, n), lambda x: native.automorphism(x, imap))
    specs["hemx_automorphism"] = (args_of, same, {}, (0,), ref, (2, 3), (BIG // (2 * n),))
    # the inner product: a (..., D=2, m=2, N), b (D, K=3, m, N)
    pn2 = 256
    qm = nt.ntt_primes(30, 2, pn2)
    b = np.stack([residues((3,), qm, pn2) for _ in range(2)])
    qv = np.asarray(qm, np.uint32)

    def ip_args(lead):
        return [np.stack([residues(lead, qm, pn2) for _ in range(2)], axis=len(lead)), b, qv]

    specs["hemx_inner_product"] = (
        ip_args, lambda args: args[0].shape[:-3] + args[1].shape[1:], {}, (0, 1),
        lambda args: np.asarray(native.inner_product(args[0], args[1], args[2])), (2, 3), (BIG // (4 * pn2),))
    # the centered basis conversion 3 -> 4 limbs
    src = nt.ntt_primes(31, 3, pn2)
    dst = nt.ntt_primes(28, 4, pn2, exclude=src)
    bplan = BC.make_bconv_plan(src, dst, centered=True)
    tables = capture(native._bconv_calls, True, lambda: native.bconv(jnp.asarray(residues((1,), src, pn2)), bplan))
    args_of, ref = by_wrapper(tables, lambda lead: residues(lead, src, pn2), lambda x: native.bconv(x, bplan))
    specs["hemx_bconv"] = (args_of, lambda args: args[0].shape[:-2] + (4, args[0].shape[-1]),
                           {"centered": np.int64(1)}, (0,), ref, (2, 3), (BIG // (3 * pn2),))
    # ModUp and the division: P = 2 limbs, Q = 3 limbs, digits [0, 2) and [2, 3), N = 256
    qs = nt.ntt_primes(30, 3, pn2)
    ps = nt.ntt_primes(31, 2, pn2, exclude=qs)
    ring = K.make_plan(pn2, ps + qs, "native")
    digits = ((0, 2), (2, 3))
    mps = tuple(BC.make_bconv_plan(qs[lo:hi], ps + qs[:lo] + qs[hi:], centered=True) for lo, hi in digits)
    # the fused form a rotation uses: part 1 of x (..., 2, 3, N) extended, its limbs read through the map X -> X^5
    fmap = np.asarray(A.ntt_index_map(pn2, 5), np.int32)
    modup = lambda x: native.modup(x, ring, mps, digits=digits, num_p=2, part=1, index_map=fmap)  # noqa: E731
    native._modup_call(True, 1)  # made before capture() replaces it
    tables = capture(native._modup_calls, (True, 1), lambda: modup(jnp.asarray(residues((1, 2), qs, pn2))))
    args_of, ref = by_wrapper(tables, lambda lead: residues(lead + (2,), qs, pn2), modup)
    specs["hemx_modup"] = (args_of, lambda args: args[0].shape[:-3] + (2, 5, args[0].shape[-1]),
                           {"centered": np.int64(1), "part": np.int64(1)}, (0,), ref, (2, 3),
                           (BIG // (20 * pn2),))
    inv = M.known_operand(np.asarray([[pow(math.prod(ps), -1, q)] for q in qs], np.int64),
                          np.asarray(qs, np.int64).reshape(-1, 1))
    dplan = BC.make_bconv_plan(ps, qs, centered=True)
    # with the rotation's addend: x (..., 2, 5, N), addend (..., 2, 3, N) (its part 0 permuted by the map, added
    # to the first part of the result)
    divide = lambda x, a: native.divide_by_dropped(  # noqa: E731
        x, ks.limb_plan(ring, 2, 5), ks.limb_plan(ring, 0, 2), dplan, inv, keep_rows=(2, 3, 4), drop_rows=(0, 1),
        addend=a, addend_part=0, index_map=fmap)
    native._divide_call(True, 0)
    tables = capture(native._divide_calls, (True, 0), lambda: divide(jnp.asarray(residues((1, 2), ps + qs, pn2)),
                                                                  jnp.asarray(residues((1, 2), qs, pn2))))
    addend_at = native._DIVIDE_ADDEND

    def divide_args(lead):
        return with_data(with_data(tables, residues(lead + (2,), ps + qs, pn2)), residues(lead + (2,), qs, pn2),
                         addend_at)

    specs["hemx_divide"] = (divide_args, lambda args: args[0].shape[:-2] + (3, args[0].shape[-1]),
                            {"addend_part": np.int64(0), "centered": np.int64(1)}, (0, addend_at),
                            lambda args: np.asarray(divide(args[0], args[addend_at])), (2, 3), (BIG // (16 * pn2),))
    # the seeded rows: digits (D,) int32 (the "data"), key (8,), q (2,) -> (D, 2, 256)
    skey = np.arange(1, 9, dtype=np.uint32)
    sq = np.asarray(qm, np.uint32)

    def uniform_args(lead):
        (d,) = lead
        return [np.arange(d, dtype=np.int32), skey, sq]

    specs["hemx_uniform"] = (
        uniform_args, lambda args: (args[0].shape[0], 2, pn2), {"n": np.int64(pn2), "xof": np.int64(1)}, (0,),
        lambda args: np.asarray(native.uniform(args[1], args[2], digits=args[0].shape[0], n=pn2, xof="aes128ctr")), (3,),
        (BIG // (2 * pn2),))
    # the key product, a compact key's halves generated and the digits permuted: a (..., D=2, m=2, N),
    # b (D, 1, m, N), key (8,), q (m,), map (N,) -> (..., 2, m, N)
    sb = np.stack([residues((1,), qm, pn2) for _ in range(2)])
    smap = np.asarray(A.ntt_index_map(pn2, 5), np.int32)

    def kp_args(lead):
        return [np.stack([residues(lead, qm, pn2) for _ in range(2)], axis=len(lead)), sb, skey, sq, smap]

    specs["hemx_key_product"] = (
        kp_args, lambda args: args[0].shape[:-3] + (2,) + args[0].shape[-2:], {"seeded": np.int64(1),
                                                                               "permuted": np.int64(1),
                                                                               "xof": np.int64(1)}, (0, 1),
        lambda args: np.asarray(native.key_product(args[0], args[1], args[3], stream=args[2], index_map=args[4],
                                                   xof="aes128ctr")),
        (2, 3), (BIG // (4 * pn2),))
    # the grouped plaintext-product sums: q (m=2,), two parts (..., K=2, m, N), two diagonals of two row blocks
    # each (period 1: (1, N); period 4: (1, N / 4)), one group of three terms -> (..., 2, m, N)
    pw = [residues((), qm, pn2)[:1], residues((), qm, pn2)[1:], residues((), qm, pn2 // 4)[:1],
          residues((), qm, pn2 // 4)[1:]]
    pgroups = ((0, 0), (1, 1), (0, 1))

    def ps_args(lead):
        return [qv, residues(tuple(lead) + (2,), qm, pn2), residues(tuple(lead) + (2,), qm, pn2), *pw]

    specs["hemx_plain_sums"] = (
        ps_args, lambda args: args[1].shape,
        {"parts": np.int64(2), "pieces": np.int64(2),
         "groups": np.asarray([1, len(pgroups), *(v for t in pgroups for v in t)], np.int64)}, (0, 1, 2),
        lambda args: np.asarray(native.plain_sums(args[1:3], (tuple(args[3:5]), tuple(args[5:7])), (pgroups,),
                                                  args[0])[0]),
        (2, 3), (BIG // (8 * pn2),))
    return specs


def _other_int(a):
    return a.astype(np.int32 if a.dtype == np.uint32 else np.uint32)


def _cases(target, spec):
    """``(case, expect, thunk)`` for one target; ``expect``: "ok", "shape" (the handler's output-shape error),
    "native" (any error of the handler), "dtype" (the binding's), "error" (any runtime error), "error_or_empty"."""
    import jax
    import jax.numpy as jnp

    args_of, out_shape, attrs, data_idx, ref, small, big = spec
    cache = {}

    def args(lead):
        if lead not in cache:
            cache[lead] = args_of(lead)
        return cache[lead]

    def call(a, shape, dtype=jnp.uint32, side_effect=False, check=False):
        def thunk():
            out = np.asarray(jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(tuple(shape), dtype),
                                              has_side_effect=side_effect)(*a, **attrs))
            res = {"shape": list(out.shape), "dtype": str(out.dtype)}
            if check:
                want = ref(a)
                res["match"] = bool(out.shape == want.shape and np.array_equal(out, want))
            return res

        return thunk

    base = args(small)
    right = tuple(out_shape(base))
    cases = [("valid", "ok", call(base, right, check=True))]
    bargs = args(big)
    bright = tuple(out_shape(bargs))
    cases.append(("valid_big", "ok", call(bargs, bright, check=True)))
    cases.append(("out_too_small_big", "shape", call(bargs, (1,) * (len(bright) - 1) + bright[-1:])))
    cases.append(("out_first_axis_1_big", "shape", call(bargs, (1,) + bright[1:])))
    shapes = {
        "out_first_axis_minus_1": (right[0] - 1,) + right[1:],
        "out_first_axis_plus_1": (right[0] + 1,) + right[1:],
        "out_last_axis_half": right[:-1] + (right[-1] // 2,),
        "out_last_axis_double": right[:-1] + (right[-1] * 2,),
        "out_second_last_plus_1": right[:-2] + (right[-2] + 1, right[-1]),
        "out_rank_lower_same_size": (right[0] * right[1],) + right[2:],
        "out_rank_higher_same_size": (1,) + right,
        "out_first_axes_swapped": (right[1], right[0]) + right[2:],
        "out_scalar": (),
    }
    for name, shape in shapes.items():
        assert shape != right, (target, name)
        cases.append((name, "shape", call(base, shape)))
    for dt in (jnp.int32, jnp.float32):
        cases.append((f"out_dtype_{np.dtype(dt).name}", "dtype", call(base, right, dt)))
    for i in data_idx:
        for name, bad in (("other_int", _other_int(base[i])), ("float32", base[i].astype(np.float32))):
            cases.append((f"in{i}_dtype_{name}", "dtype", call(base[:i] + [bad] + base[i + 1 :], right)))
    last = len(base) - 1  # a table (or the last data operand) as the other integer type
    cases.append((f"in{last}_table_dtype_other_int", "dtype", call(base[:last] + [_other_int(base[last])], right)))
    for i in data_idx:
        for ax in range(base[i].ndim):
            x = np.take(base[i], np.arange(0), axis=ax)
            a = base[:i] + [x] + base[i + 1 :]
            empty_out = tuple(out_shape(a))
            cases.append((f"in{i}_empty_axis{ax}", "native", call(a, empty_out, side_effect=True)))
            if math.prod(empty_out) == 0:
                cases.append((f"in{i}_empty_axis{ax}_elidable", "error_or_empty", call(a, empty_out)))
            cases.append((f"in{i}_empty_axis{ax}_nonempty_out", "error", call(a, right)))
    cases.append(("valid_after", "ok", call(base, right, check=True)))
    return cases


def _child(skip: set, only=None, crash=None) -> None:
    """Run every case not in ``skip`` (of the targets ``only``, all when None), printing ``START id`` before it and
    ``RESULT {json}`` after it. ``crash``: a case id at which the child kills itself with SIGSEGV (the test of the
    crash handling)."""
    import jax

    jax.config.update("jax_enable_x64", True)  # as in the other native tests (uint64 in plan building)
    from hemx.kernels import native

    if not native.available():
        print("UNAVAILABLE " + json.dumps(native.reason()), flush=True)
        return
    specs = _specs()
    for target in sorted(specs):
        if only is not None and target not in only:
            continue
        for case, expect, thunk in _cases(target, specs[target]):
            cid = f"{target}/{case}"
            if cid in skip:
                continue
            print("START " + cid, flush=True)
            if cid == crash:
                os.kill(os.getpid(), signal.SIGSEGV)
            res = {"id": cid, "expect": expect}
            try:
                res.update(status="ok", **thunk())
            except Exception as exc:  # noqa: BLE001 - every exception is reported, classified by the parent
                res.update(status="error", type=f"{type(exc).__module__}.{type(exc).__name__}", msg=str(exc)[:600])
            print("RESULT " + json.dumps(res), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    opts = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    _child(set(opts.get("skip", ())), opts.get("only"), opts.get("crash"))
    sys.exit(0)

# ===================================================================================== the tests (pytest)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

from hemx import nt  # noqa: E402
from hemx.errors import ParameterError, ShapeError  # noqa: E402
from hemx.kernels import automorphism as A  # noqa: E402
from hemx.kernels import bconv as BC  # noqa: E402
from hemx.kernels import modarith as M  # noqa: E402
from hemx.kernels import native  # noqa: E402
from hemx.kernels import ntt as K  # noqa: E402
from tests.helpers.native import library_built  # noqa: E402

jax.config.update("jax_enable_x64", True)

TARGETS = (
    "hemx_ntt_forward", "hemx_ntt_inverse", "hemx_mul_shoup", "hemx_butterfly_probe", "hemx_automorphism",
    "hemx_inner_product", "hemx_bconv", "hemx_modup", "hemx_divide", "hemx_uniform", "hemx_key_product",
    "hemx_plain_sums",
)


def _run_children(only=None, crash=None, max_runs: int = 8):
    """Every case's result (of the targets ``only``; all when None): children are rerun after a crash, skipping the
    cases done and the one that crashed (recorded with its exit status / signal). ``crash``: see ``_child``."""
    env = {k: v for k, v in os.environ.items() if k != "HEMX_NATIVE"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("JAX_PLATFORMS", "cpu")
    results: dict = {}
    for _ in range(max_runs):
        opts = {"skip": sorted(results), "only": only, "crash": crash}
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), json.dumps(opts)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=300)
        started = None
        for line in proc.stdout.splitlines():
            if line.startswith("UNAVAILABLE "):
                return {"__unavailable__": json.loads(line[len("UNAVAILABLE "):])}
            if line.startswith("START "):
                started = line[len("START "):]
            elif line.startswith("RESULT "):
                res = json.loads(line[len("RESULT "):])
                results[res["id"]] = res
                started = None
        if proc.returncode == 0 and started is None:
            return results
        why = (f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}")
        if started is None:  # died outside a case (building the tables): nothing more to learn
            results["__child__"] = {"id": "__child__", "status": "crashed", "msg": f"{why}: {proc.stderr[-3000:]}"}
            return results
        results[started] = {"id": started, "status": "crashed", "msg": f"{why}; stderr: {proc.stderr[-2000:]}"}
    results["__child__"] = {"id": "__child__", "status": "crashed", "msg": f"more than {max_runs} crashes"}
    return results


@pytest.fixture(scope="module")
def ffi_results():
    if not library_built():
        return None  # native_on (conftest.py) skips or fails each test
    return _run_children()


_XLA_STATUS = re.compile(r"^(INVALID_ARGUMENT|FAILED_PRECONDITION|OUT_OF_RANGE|INTERNAL|RESOURCE_EXHAUSTED): ")


def _runtime_error(kind: str, msg: str) -> bool:
    """Whether an exception is XLA's report of a failed execution. JAX raises ``JaxRuntimeError`` when the
    error surfaces after dispatch, but a ``ValueError`` carrying the XLA status when the call completes (and
    fails) inside dispatch itself, which is a race on large inputs (seen in CI for a (16384, 256) probe): both
    are the runtime's error, told apart from any Python-level failure by the status prefix."""
    if "JaxRuntimeError" in kind or "XlaRuntimeError" in kind:
        return True
    return kind == "builtins.ValueError" and _XLA_STATUS.match(msg) is not None


def _verdict(res) -> str | None:
    """None when the case behaved as expected, else why not."""
    st, expect, msg = res["status"], res.get("expect"), res.get("msg", "")
    if st == "crashed":
        return f"CRASHED: {msg}"
    if expect == "ok":
        if st != "ok" or not res.get("match"):
            return f"the valid call failed or differs from the wrapper: {res}"
        return None
    if expect == "error_or_empty":
        return None if st == "error" or 0 in res["shape"] else f"an empty call returned data: {res}"
    if st != "error":
        return f"accepted: returned {res.get('shape')} {res.get('dtype')}"
    if not _runtime_error(res["type"], msg):
        return f"not JAX's runtime error: {res['type']}: {msg}"
    if expect in ("native", "shape") and NATIVE_ERR not in msg:
        return f"not the handler's error: {msg}"
    if expect == "shape" and SHAPE_ERR not in msg:
        return f"not the handler's output-shape error: {msg}"
    if expect == "dtype" and DTYPE_ERR not in msg:
        return f"not the binding's dtype error: {msg}"
    return None


def test_only_the_runtimes_errors_count_as_clean():
    """XLA's status either way it surfaces; a Python-level ValueError (no status prefix) is not the runtime's."""
    assert _runtime_error("jax.errors.JaxRuntimeError", "INVALID_ARGUMENT: hemx native: x")
    assert _runtime_error("builtins.ValueError", "INVALID_ARGUMENT: hemx native: x")
    assert not _runtime_error("builtins.ValueError", "operands could not be broadcast together")
    assert not _runtime_error("builtins.TypeError", "INVALID_ARGUMENT: hemx native: x")


def test_every_registered_target_is_covered():
    assert set(TARGETS) == set(native._TARGETS) | set(native._OPTIONAL_TARGETS)


@pytest.mark.parametrize("target", TARGETS)
def test_direct_ffi_calls_fail_cleanly(target, ffi_results):
    assert "__unavailable__" not in ffi_results, ffi_results.get("__unavailable__")
    assert "__child__" not in ffi_results, ffi_results["__child__"]["msg"]
    mine = {k.split("/", 1)[1]: v for k, v in ffi_results.items() if k.startswith(target + "/")}
    for required in ("valid", "valid_big", "out_too_small_big", "out_dtype_int32", "out_dtype_float32",
                     "in0_dtype_other_int", "in0_empty_axis0", "valid_after"):
        assert required in mine, (target, required, sorted(mine))
    assert any(k.startswith("in0_empty_axis") and k.endswith("_nonempty_out") for k in mine)
    bad = {case: why for case, res in sorted(mine.items()) if (why := _verdict(res)) is not None}
    assert not bad, f"{target}: {len(bad)} of {len(mine)} cases misbehaved:\n" + "\n".join(
        f"  {c}: {w}" for c, w in bad.items())


def test_the_crash_regression_is_caught(ffi_results):
    """The case that used to SIGSEGV: a (1, 1, 1024) result for a (4096, 1, 1024) input, the handler's message."""
    res = ffi_results["hemx_ntt_forward/out_too_small_big"]
    assert res["status"] == "error", res
    assert "NTT output must be shaped (4096, 1, 1024), got (1, 1, 1024)" in res["msg"]
    assert ffi_results["hemx_ntt_forward/valid_big"]["shape"] == [4096, 1, 1024]


def test_a_crash_fails_its_case_and_the_rest_still_run():
    """The harness itself: a child that segfaults in a case reports that case as crashed, with the signal, and a
    fresh child runs the cases after it."""
    if not library_built():
        pytest.skip("native library not built")
    target = "hemx_butterfly_probe"
    res = _run_children(only=[target], crash=f"{target}/out_scalar")
    crashed = res[f"{target}/out_scalar"]
    assert crashed["status"] == "crashed" and f"signal {signal.SIGSEGV.value}" in crashed["msg"], crashed
    assert _verdict(crashed).startswith("CRASHED")
    assert res[f"{target}/valid_after"]["status"] == "ok" and res[f"{target}/valid"]["status"] == "ok"
    assert all(k.startswith(target + "/") for k in res)


# ------------------------------------------------------------------------------------- the public wrappers

N = 64


def _plan(kind="native", limbs=2):
    return K.make_plan(N, nt.ntt_primes(30, limbs, N), kind)


def _u32(*shape):
    return jnp.zeros(shape, jnp.uint32)


def _raises(exc, fn):
    with pytest.raises(exc):
        fn()


def test_ntt_wrappers_reject_bad_inputs():
    plan = _plan()
    for f in (native.ntt, native.intt):
        assert f(_u32(3, 2, N), plan).shape == (3, 2, N)
        for bad in (_u32(3, 2, N // 2), _u32(3, 3, N), _u32(N), jnp.zeros((3, 2, N), jnp.int32)):
            _raises(ShapeError, lambda b=bad: f(b, plan))
        for empty in (_u32(0, 2, N), _u32(2, 0, 2, N)):  # zero-size data of the plan's (L, N)
            _raises(ShapeError, lambda e=empty: f(e, plan))
        _raises(ShapeError, lambda: jax.jit(lambda v: f(v, plan))(_u32(0, 2, N)))
        _raises(ParameterError, lambda: f(_u32(3, 2, N), _plan("mat3")))  # no butterfly tables


def test_mul_shoup_and_probe_wrappers_reject_bad_inputs():
    qs = nt.ntt_primes(30, 2, N)
    w = M.known_operand(np.ones((2, N), np.int64), np.asarray(qs, np.int64).reshape(-1, 1))
    assert native.mul_shoup(_u32(3, 2, N), w, np.asarray(qs)).shape == (3, 2, N)
    for bad in (_u32(3, 2, N // 2), _u32(3, 3, N), _u32(N), jnp.zeros((3, 2, N), jnp.int32), _u32(0, 2, N),
                _u32(3, 0, 2, N)):
        _raises(ShapeError, lambda b=bad: native.mul_shoup(b, w, np.asarray(qs)))
    q, tw = np.full(2, qs[0], np.uint32), np.asarray([[5, (5 << 32) // qs[0]]] * 2, np.uint32)
    assert native.butterfly_probe(_u32(2, 256), q, tw, reps=1).shape == (2, 256)
    for bad in (_u32(1, 2, 256), jnp.zeros((2, 256), jnp.int32), _u32(0, 256), _u32(2, 0)):
        _raises(ShapeError, lambda b=bad: native.butterfly_probe(b, q[: b.shape[0]], tw[: b.shape[0]], reps=1))


def test_automorphism_wrapper_rejects_bad_inputs():
    imap = A.ntt_index_map(N, 5)
    assert native.automorphism(_u32(3, 2, N), imap).shape == (3, 2, N)
    for x, m in ((_u32(3, 2, N), imap[:-1]), (_u32(N), imap), (jnp.zeros((3, 2, N), jnp.int32), imap),
                 (_u32(3, 2, N), imap.astype(np.float32)), (_u32(0, 2, N), imap), (_u32(3, 0, N), imap),
                 (_u32(3, 2, 0), imap[:0])):
        _raises(ShapeError, lambda x=x, m=m: native.automorphism(x, m))
    _raises(ParameterError, lambda: native.automorphism(_u32(3, 2, N), np.full(N, N, np.int32)))
    _raises(ParameterError, lambda: native.automorphism(_u32(3, 2, N), np.full(N, -1, np.int32)))


def test_inner_product_wrapper_rejects_bad_inputs():
    q = np.asarray(nt.ntt_primes(30, 2, N), np.uint32)
    assert native.inner_product(_u32(4, 3, 2, N), _u32(3, 5, 2, N), q).shape == (4, 5, 2, N)
    for a, b, qq in ((_u32(4, 3, 2, N), _u32(2, 5, 2, N), q), (_u32(4, 3, 2, N), _u32(3, 5, 1, N), q),
                     (_u32(4, 3, 2, N), _u32(3, 5, 2, N), q[:1]), (_u32(2, N), _u32(3, 5, 2, N), q),
                     (_u32(4, 3, 2, N), _u32(5, 2, N), q), (jnp.zeros((4, 3, 2, N), jnp.int32), _u32(3, 5, 2, N), q),
                     (_u32(0, 3, 2, N), _u32(3, 5, 2, N), q),  # an empty batch
                     (_u32(4, 0, 2, N), _u32(0, 5, 2, N), q),  # D = 0 (used to reach the kernel's raw error)
                     (_u32(4, 3, 2, N), _u32(3, 0, 2, N), q),  # K = 0
                     (_u32(4, 3, 0, N), _u32(3, 5, 0, N), q[:0]), (_u32(4, 3, 2, 0), _u32(3, 5, 2, 0), q)):
        _raises(ShapeError, lambda a=a, b=b, qq=qq: native.inner_product(a, b, qq))


def test_bconv_wrapper_rejects_bad_inputs():
    src = nt.ntt_primes(30, 3, N)
    plan = BC.make_bconv_plan(src, nt.ntt_primes(28, 2, N, exclude=src), centered=True)
    assert native.bconv(_u32(4, 3, N), plan).shape == (4, 2, N)
    for bad in (_u32(4, 2, N), _u32(N), jnp.zeros((4, 3, N), jnp.int32), _u32(0, 3, N), _u32(4, 3, 0),
                _u32(4, 0, 3, N)):
        _raises(ShapeError, lambda b=bad: native.bconv(b, plan))


def test_fused_keyswitch_wrappers_reject_zero_size_inputs():
    if not native.has_fused_keyswitch():
        pytest.skip(f"{native.library_path()} predates hemx_modup / hemx_divide")
    from hemx.ckks import keyswitch as ks

    qs = nt.ntt_primes(30, 3, N)
    ps = nt.ntt_primes(31, 2, N, exclude=qs)
    ring = K.make_plan(N, ps + qs, "native")
    digits = ((0, 2), (2, 3))
    mps = tuple(BC.make_bconv_plan(qs[lo:hi], ps + qs[:lo] + qs[hi:], centered=True) for lo, hi in digits)
    assert native.modup(_u32(2, 3, N), ring, mps, digits=digits, num_p=2).shape == (2, 2, 5, N)
    for bad in (_u32(0, 3, N), _u32(2, 0, 3, N), jnp.zeros((2, 3, N), jnp.int32)):
        _raises(ShapeError, lambda b=bad: native.modup(b, ring, mps, digits=digits, num_p=2))
    inv = M.known_operand(np.asarray([[pow(math.prod(ps), -1, q)] for q in qs], np.int64),
                          np.asarray(qs, np.int64).reshape(-1, 1))
    dplan = BC.make_bconv_plan(ps, qs, centered=True)

    def divide(x):
        return native.divide_by_dropped(x, ks.limb_plan(ring, 2, 5), ks.limb_plan(ring, 0, 2), dplan, inv,
                                        keep_rows=(2, 3, 4), drop_rows=(0, 1))

    assert divide(_u32(2, 5, N)).shape == (2, 3, N)
    for bad in (_u32(0, 5, N), _u32(2, 0, 5, N), _u32(2, 5, N // 2), jnp.zeros((2, 5, N), jnp.int32)):
        _raises(ShapeError, lambda b=bad: divide(b))
    # the fused forms: a part of (..., P, num_q, N) read through a map; an addend beside the result
    imap = A.ntt_index_map(N, 5)
    assert native.modup(_u32(4, 2, 3, N), ring, mps, digits=digits, num_p=2, part=1, index_map=imap).shape == (
        4, 2, 5, N)
    for part in (2, -1):
        _raises(ShapeError, lambda p=part: native.modup(_u32(4, 2, 3, N), ring, mps, digits=digits, num_p=2, part=p))
    _raises(ShapeError, lambda: native.modup(_u32(3, N), ring, mps, digits=digits, num_p=2, part=0))
    _raises(ShapeError, lambda: native.modup(_u32(2, 3, N), ring, mps, digits=digits, num_p=2, index_map=imap[:-1]))
    _raises(ParameterError, lambda: native.modup(_u32(2, 3, N), ring, mps, digits=digits, num_p=2,
                                                 index_map=np.full(N, N, np.int32)))

    def divide_add(x, a, part=0, index_map=imap):
        return native.divide_by_dropped(x, ks.limb_plan(ring, 2, 5), ks.limb_plan(ring, 0, 2), dplan, inv,
                                        keep_rows=(2, 3, 4), drop_rows=(0, 1), addend=a, addend_part=part,
                                        index_map=index_map)

    assert divide_add(_u32(4, 2, 5, N), _u32(4, 2, 3, N)).shape == (4, 2, 3, N)
    assert divide_add(_u32(4, 2, 5, N), _u32(4, 1, 3, N), index_map=None).shape == (4, 2, 3, N)
    for x, a, part in ((_u32(4, 2, 5, N), _u32(4, 2, 3, N), 2), (_u32(4, 2, 5, N), _u32(3, 2, 3, N), 0),
                       (_u32(4, 2, 5, N), _u32(4, 2, 5, N), 0), (_u32(5, N), _u32(3, N), 0),
                       (_u32(4, 2, 5, N), jnp.zeros((4, 2, 3, N), jnp.int32), 0)):
        _raises(ShapeError, lambda x=x, a=a, p=part: divide_add(x, a, p))
    _raises(ParameterError, lambda: native.divide_by_dropped(
        _u32(2, 5, N), ks.limb_plan(ring, 2, 5), ks.limb_plan(ring, 0, 2), dplan, inv, keep_rows=(2, 3, 4),
        drop_rows=(0, 1), index_map=imap))  # a map with nothing to permute


def test_seeded_key_wrappers_reject_bad_inputs():
    if not native.has_seeded_keys():
        pytest.skip(f"{native.library_path()} predates hemx_uniform / hemx_key_product")
    q = np.asarray(nt.ntt_primes(30, 2, N), np.uint32)
    key = np.arange(8, dtype=np.uint32)
    assert native.uniform(key, q, digits=3, n=N).shape == (3, 2, N)
    for bad in (dict(key=key[:7]), dict(key=key.astype(np.int32)), dict(digits=0), dict(digits=-1), dict(n=0),
                dict(digits=True), dict(q=q[:0])):
        args = dict(key=key, q=q, digits=3, n=N) | bad
        _raises(ShapeError, lambda a=args: native.uniform(a["key"], a["q"], digits=a["digits"], n=a["n"]))
    a, b = _u32(4, 3, 2, N), _u32(3, 1, 2, N)
    imap = np.asarray(A.ntt_index_map(N, 5), np.int32)
    assert native.key_product(a, b, q, stream=key).shape == (4, 2, 2, N)
    assert native.key_product(a, _u32(5, 2, 6, N), q, stream=key).shape == (4, 2, 2, N)  # a longer key, in place
    assert native.key_product(a, _u32(3, 2, 2, N), q, index_map=imap).shape == (4, 2, 2, N)  # a full key, permuted
    for aa, bb, kk, qq, mm in ((a, _u32(2, 1, 2, N), key, q, None),  # fewer key digits than a has
                               (a, _u32(3, 1, 1, N), key, q, None),  # fewer key rows
                               (a, _u32(3, 1, 2, N // 2), key, q, None), (a, b, key[:4], q, None),
                               (a, b, key, q[:1], None), (_u32(2, N), b, key, q, None), (a, _u32(3, 2, N), key, q, None),
                               (jnp.zeros((4, 3, 2, N), jnp.int32), b, key, q, None), (_u32(0, 3, 2, N), b, key, q, None),
                               (_u32(4, 0, 2, N), b, key, q, None), (a, _u32(3, 0, 2, N), key, q, None),
                               (a, b, None, q, None),  # a full key needs both halves
                               (a, b, key, q, imap[:-1]), (a, b, key, q, imap.astype(np.float32))):
        _raises(ShapeError, lambda x=(aa, bb, kk, qq, mm): native.key_product(x[0], x[1], x[3], stream=x[2],
                                                                               index_map=x[4]))
    # an index outside [0, N): the kernel's error, not a read out of bounds
    bad = imap.copy()
    bad[3] = N
    with pytest.raises(Exception, match="index map out of range"):
        jax.block_until_ready(native.key_product(a, b, q, stream=key, index_map=bad))
