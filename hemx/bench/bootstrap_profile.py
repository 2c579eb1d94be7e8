"""``hemx bench bootstrap --profile``: where one bootstrap's time goes, per stage and per kernel kind.

The bootstrap (:class:`hemx.circuits.bootstrap.Bootstrapper`, one iteration) is cut at its stage boundaries by
:func:`stage_functions` (ModRaise with the sparse-secret encapsulation around it, the sparse-slot trace when there
is one, CoeffsToSlots with the real / imaginary split, EvalMod with its product by ``2^P``, SlotsToCoeffs with the
recombination): the same calls in the same order as ``Bootstrapper._once``, checked bit-identical to
``Bootstrapper.bootstrap`` on every run (so a change to the circuit cannot silently leave the profile behind).

* **Stage times.** Each stage becomes one XLA program (:func:`compile_stage`: the stage traced to a jaxpr, its
  constants, the context's tables, plaintexts and keys, passed as arguments instead of embedded in the program),
  run on the real intermediate ciphertexts; warm-up, then the median of ``repeats`` calls, round-robin
  (:func:`hemx.bench.timing.time_interleaved`). The whole bootstrap is timed the same way (one program) and
  eagerly (``bt.bootstrap``, what ``hemx bench bootstrap`` reports), and the stages eagerly too.
* **Operation counts, exact.** While each stage is traced, :func:`count_ops` counts the evaluator kernels the
  context dispatches (``Context._run`` wrapped on the instance): key switches (one per rotation, conjugation,
  relinearization and encapsulation switch; a hoisted batch of ``R`` rotations is ``R`` key switches sharing one
  ModUp), ModUps, rotations, conjugations, relinearizations and rescales (a relinearization with its rescale folded
  into ModDown counts as both; a double-hoisted BSGS transform, ``bsgs_double_hoisted``, counts its rotations, its
  ModUps and its one folded rescale). The native custom calls in each stage's compiled HLO are counted as well
  (``hemx_modup`` should equal the ModUps), and the polynomials the ``hemx_divide`` calls divide (ModDowns and
  rescales, :func:`custom_call_polys`).
* **Hoisting A/B.** :func:`hoisting_ab` (``python -m hemx.bench.bootstrap_profile --ab PRESET``) compares the
  transforms' single and double hoisting in one process: counts, divided polynomials, precision, and the whole
  bootstrap as one program (and eagerly) timed round-robin.
* **Kernel kinds, from a trace.** Each stage's program runs once under ``jax.profiler``; the trace's per-thunk
  events are named after the HLO instructions, which :func:`hlo_instructions` maps to a kind (native custom calls
  by target: NTT, basis conversion, fused ModUp, fused ModDown / rescale, inner product, automorphism; XLA fusions
  with arithmetic: element-wise; slices, concatenations, copies: copies). Times are thread time summed over XLA's
  worker threads (two threads can run independent thunks at once, so the sum can exceed the wall time).
"""

from __future__ import annotations

import collections
import contextlib
import glob
import gzip
import json
import math
import os
import re
import tempfile
import time
import warnings
from typing import Callable

import jax
import numpy as np

from hemx.bench.timing import time_interleaved
from hemx.circuits.bootstrap.bootstrapper import available_memory

#: XLA flag of the profiling worker: XLA:CPU's default scheduler favours concurrency and keeps many key copies
#: live at once in a whole-stage program (CoeffsToSlots at boot_12: 120 MiB of temporaries, 23 MiB without it;
#: boot_16's went past 24 GiB). The eager bootstrap timed beside it runs under the same flag.
PROFILE_XLA_FLAGS = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
MEMORY_MARGIN = 0.8  # a program runs only when its temporaries fit in this fraction of the available memory

KINDS = ("NTT", "basis conversion", "ModUp (fused)", "ModDown / rescale (fused)", "inner product", "automorphism",
         "element-wise", "copies", "other")
_TARGET_KIND = {
    "hemx_ntt_forward": "NTT", "hemx_ntt_inverse": "NTT", "hemx_bconv": "basis conversion",
    "hemx_modup": "ModUp (fused)", "hemx_divide": "ModDown / rescale (fused)",
    "hemx_inner_product": "inner product", "hemx_key_product": "inner product", "hemx_automorphism": "automorphism", "hemx_mul_shoup": "element-wise",
}
_ARITH = re.compile(r"add|subtract|multiply|select|compare|shift|and|or|xor|not|convert|divide|remainder|minimum|"
                    r"maximum|reduce|negate|abs|clamp|round|floor|dot")
_COPY = re.compile(r"slice|concatenate|copy|transpose|bitcast|reshape|broadcast|pad|gather|scatter|"
                   r"dynamic-update|dynamic_update|iota|tuple")


# ------------------------------------------------------------------------------------------------ stages
def stage_functions(bt, keys) -> list[tuple[str, Callable]]:
    """``[(name, fn)]``: ``Bootstrapper._once`` cut into stages, each ``fn(ct) -> ct`` (one iteration).

    The first takes the level-0 ciphertext with the bootstrapper's slot count; the last returns the bootstrap's
    result (its scale read back at the input's, as ``_once`` does)."""
    from hemx.circuits.evaluator import CKKSEvaluator

    ctx = bt.ctx
    ev = CKKSEvaluator(ctx, keys, slots=bt.slots)
    in_scale = {}

    def mod_raise(ct):
        in_scale["scale"], in_scale["complex"] = ct.scale, ct.is_complex
        if bt.premultiply:
            ct = ctx.mul(ct, float(2 ** bt.premultiply), plain_scale=1.0, rescale=False)
        if bt.encapsulation_weight is not None:
            ct = ctx.switch_key(ct, keys.switching_key("to_sparse", "bootstrapping"))
        x = bt.mod_raise(ct)
        if bt.encapsulation_weight is not None:
            x = ctx.switch_key(x, keys.switching_key("from_sparse", "bootstrapping"))
        return x

    def coeffs_to_slots(x):
        x = bt.coeffs_to_slots(ev, x)
        conj = ctx.conjugate(x, keys)
        re_ = ctx.add(x, conj)
        im = ctx.mul(ctx.sub(conj, x), bt._i_monomial, rescale=False, auto_scale=False)
        return ev.stack([re_, im])

    def eval_mod(t):
        t = ctx.rescale(ctx.mul(t, 1.0, plain_scale=float(2 ** bt.power), rescale=False, auto_scale=False))
        return bt.eval_mod(ev, t)

    def slots_to_coeffs(y):
        y = ctx.add(ev.take(y, 0), ctx.mul(ev.take(y, 1), bt._i_monomial, rescale=False, auto_scale=False))
        out = bt.slots_to_coeffs(ev, y)
        return out.replace(scale=out.scale * in_scale["scale"] / bt.design_scale, is_complex=in_scale["complex"])

    stages = [("ModRaise", mod_raise)]
    if bt.trace_steps:
        stages.append(("SubringTrace", lambda x: bt.trace(x, keys)))
    stages += [("CoeffsToSlots", coeffs_to_slots), ("EvalMod", eval_mod), ("SlotsToCoeffs", slots_to_coeffs)]
    return stages


# ------------------------------------------------------------------------------------------------ counting
@contextlib.contextmanager
def count_ops(ctx):
    """Count the evaluator kernels ``ctx`` dispatches inside the block (eagerly or while tracing): a Counter.

    Keys: ``key_switches``, ``modups``, ``rotations``, ``hoisted_batches``, ``conjugations``, ``switch_keys``,
    ``relinearizations``, ``rescales``, and ``op:<kernel>`` for every kernel called (``op:add``, ...)."""
    from hemx.kernels import automorphism

    counts: collections.Counter = collections.Counter()
    inner = ctx._run
    n = ctx.params.n
    identity = ctx.tables.index_map(1)
    conj = ctx.tables.index_map(automorphism.conjugation_element(n))

    def same(a, b) -> bool:
        return a is b or (not isinstance(a, jax.core.Tracer) and np.array_equal(np.asarray(a), np.asarray(b)))

    def run(fn, data, tables, tag, **statics):
        name = getattr(fn, "__name__", type(fn).__name__)
        counts[f"op:{name}"] += 1
        if name == "rotate_one":
            kind = "switch_keys" if same(data[1], identity) else "conjugations" if same(data[1], conj) else "rotations"
            counts[kind] += 1
            counts["key_switches"] += 1
            counts["modups"] += 1
        elif name == "rotate_hoisted":
            r = int(data[1].shape[0])
            counts["rotations"] += r
            counts["hoisted_batches"] += 1
            counts["key_switches"] += r
            counts["modups"] += 1
        elif name == "bsgs_double_hoisted":  # a double-hoisted BSGS transform (hemx.circuits.lintrans)
            babies, giants = len(data[1]), len(data[3])
            counts["rotations"] += babies + giants
            counts["hoisted_batches"] += babies > 0
            counts["key_switches"] += babies + giants
            counts["modups"] += (babies > 0) + giants
            counts["rescales"] += 1  # folded into its final division by P
        elif name in ("mul_relin", "mul_relin_rescale", "relinearize"):
            counts["relinearizations"] += 1
            counts["key_switches"] += 1
            counts["modups"] += 1
            counts["rescales"] += name == "mul_relin_rescale"
        elif name == "rescale":
            counts["rescales"] += 1
        return inner(fn, data, tables, tag, **statics)

    ctx.__dict__["_run"] = run
    try:
        yield counts
    finally:
        ctx.__dict__.pop("_run", None)


def bsgs_shapes(bt) -> dict:
    """Per linear transform of CoeffsToSlots / SlotsToCoeffs: diagonals, baby and giant steps (non-zero ones are
    the rotations: babies hoisted in one batch, giants one key switch each)."""
    def shape(lt):
        return {"level": lt.level, "diagonals": len(lt.indices), "n1": lt.n1,
                "baby_rotations": sum(1 for b in lt.baby_steps if b),
                "giant_rotations": sum(1 for g in lt.giant_steps if g)}

    return {"CoeffsToSlots": [shape(lt) for lt in bt.cts], "SlotsToCoeffs": [shape(lt) for lt in bt.stc]}


# ------------------------------------------------------------------------------------------------ programs
class StageProgram:
    """One stage as one compiled XLA program whose constants are arguments (see :func:`compile_stage`)."""

    def __init__(self, fn, example, ctx):
        from hemx.circuits.lifted import lift_constants

        with count_ops(ctx) as counts:
            lifted = lift_constants(fn, example)
        self.counts = dict(counts)
        self._consts = lifted.constants
        start = time.perf_counter()
        self._compiled = jax.jit(lifted.fn).lower(self._consts, example).compile()
        self.compile_s = time.perf_counter() - start
        self.hlo = self._compiled.as_text()
        self.temp_bytes = int(self._compiled.memory_analysis().temp_size_in_bytes)

    def fits(self) -> bool:
        """Whether the program's temporaries fit in :data:`MEMORY_MARGIN` of the memory available now."""
        return self.temp_bytes <= MEMORY_MARGIN * available_memory()

    def __call__(self, ct):
        return self._compiled(self._consts, ct)


def compile_stage(fn, example, ctx) -> StageProgram:
    """``fn`` traced on ``example`` (counting its operations) and compiled; the closed-over arrays (tables,
    encoded diagonals, keys: gigabytes at N = 2^16) are passed as arguments, not baked into the program."""
    return StageProgram(fn, example, ctx)


def custom_call_counts(hlo: str) -> dict:
    """Native custom calls in an HLO module's text, by target."""
    return dict(collections.Counter(re.findall(r'custom_call_target="([^"]+)"', hlo)))


def custom_call_polys(hlo: str, target: str = "hemx_divide") -> int:
    """Polynomials written by the native custom calls of ``target`` in an HLO module's text (the output's
    leading dimensions multiplied: a ``u32[2,48,N]`` division is 2 polynomial ModDowns / rescales)."""
    total = 0
    for m in re.finditer(r'= u32\[([\d,]*)\][^=]*? custom-call\([^\n]*custom_call_target="' + re.escape(target) + '"',
                         hlo):
        dims = [int(d) for d in m.group(1).split(",") if d]
        total += math.prod(dims[:-2]) if len(dims) > 2 else 1
    return total


def hlo_instructions(hlo: str) -> dict[str, str]:
    """HLO instruction name -> kernel kind (:data:`KINDS`), for naming trace events."""
    out = {}
    for m in re.finditer(r'^\s*(?:ROOT\s+)?%?([\w.\-]+) = \S+(?: \S+)*? ([a-z][\w\-]*)\((.*)$', hlo, re.M):
        name, op, rest = m.group(1), m.group(2), m.group(3)
        if op == "custom-call":
            t = re.search(r'custom_call_target="([^"]+)"', rest)
            out[name] = _TARGET_KIND.get(t.group(1) if t else "", "other")
        else:
            out[name] = _kind_of_name(name if op == "fusion" else op)
    return out


KEYSWITCH_KERNELS = ("rotate_one", "rotate_hoisted", "mul_relin", "mul_relin_rescale", "relinearize",
                     "bsgs_double_hoisted")


def hlo_kernels(hlo: str) -> dict[str, str]:
    """HLO instruction name -> the :mod:`hemx.ckks.evaluator` kernel it was traced from (the first nested
    ``jit(...)`` of its ``op_name`` metadata: ``rotate_hoisted``, ``rescale``, ...; ``-`` for glue code outside
    any kernel)."""
    out = {}
    for m in re.finditer(r'^\s*(?:ROOT\s+)?%?([\w.\-]+) = .*?op_name="([^"]*)"', hlo, re.M):
        inner = re.findall(r"jit\(([^)]*)\)", m.group(2))[1:]
        out[m.group(1)] = inner[0] if inner else "-"
    return out


def _kind_of_name(name: str) -> str:
    base = name.rsplit(".", 1)[0]
    if base.startswith("wrapped_"):
        base = base[len("wrapped_"):]
    if _ARITH.search(base):
        return "element-wise"
    if _COPY.search(base):
        return "copies"
    return "other"


_SKIP = ("ThreadpoolListener", "ThunkExecutor", "end: ")


def trace_kinds(call: Callable[[], object], hlo: str) -> dict:
    """Run ``call`` once under ``jax.profiler`` and sum its thunk events' durations per kernel kind (seconds of
    thread time); ``_wall_s`` the call's own wall time, ``_events`` how many events were attributed, ``_kernels``
    the same time per evaluator kernel (:func:`hlo_kernels`) and ``_keyswitch_s`` the part in key-switching kernels
    (rotations, conjugation, encapsulation switches, relinearizations with their tensor product and folded
    rescale)."""
    names, kernels = hlo_instructions(hlo), hlo_kernels(hlo)
    with tempfile.TemporaryDirectory(prefix="hemx-profile-") as tmp:
        jax.profiler.start_trace(tmp, create_perfetto_trace=True)
        start = time.perf_counter()
        try:
            jax.block_until_ready(call())
        finally:
            wall = time.perf_counter() - start
            jax.profiler.stop_trace()
        (path,) = glob.glob(os.path.join(tmp, "plugins", "profile", "*", "perfetto_trace.json.gz"))
        with gzip.open(path, "rt") as f:
            events = json.load(f)["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    kinds: dict = collections.defaultdict(float)
    by_kernel: dict = collections.defaultdict(float)
    counted = 0
    for e in events:
        # thunks run on XLA's worker threads, or on the calling thread (small programs): any event named after one
        # of the program's instructions, and unnamed work on the workers
        if e.get("ph") != "X" or e["name"].startswith(_SKIP) or (
                e["name"] not in names and "XLAEigen" not in threads.get(e.get("tid"), "")):
            continue
        kind = names.get(e["name"]) or _kind_of_name(e["name"])
        kinds[kind] += e["dur"] * 1e-6
        by_kernel[kernels.get(e["name"], "-")] += e["dur"] * 1e-6
        counted += 1
    return {**{k: kinds.get(k, 0.0) for k in KINDS}, "_wall_s": wall, "_events": counted, "_kernels": dict(by_kernel),
            "_keyswitch_s": sum(v for k, v in by_kernel.items() if k in KEYSWITCH_KERNELS)}


# ------------------------------------------------------------------------------------------------ the profile
def profile_bootstrap(ctx, bt, keys, ct, *, repeats: int = 3, whole_jit: bool = True, log=None) -> dict:
    """:func:`_profile` with ``bt.compiled = "never"`` meanwhile: the profile compiles its own programs, and its
    eager figures must stay eager (``"auto"`` would compile a repeated boot_16 bootstrap)."""
    saved, bt.compiled = bt.compiled, "never"
    try:
        return _profile(ctx, bt, keys, ct, repeats=repeats, whole_jit=whole_jit, log=log)
    finally:
        bt.compiled = saved


def _profile(ctx, bt, keys, ct, *, repeats: int, whole_jit: bool, log) -> dict:
    """Stage times (one program per stage, and eagerly), the whole bootstrap's time, operation counts per stage
    and the kernel-kind split from a trace. ``ct``: a ciphertext at level 0 with ``bt.slots`` slots.

    Every timed call runs round-robin (:func:`hemx.bench.timing.time_interleaved`: stage programs, the whole
    bootstrap as one program, the eager stages, the eager bootstrap), so a load change on a shared machine hits
    all of them alike."""
    say = log or (lambda msg: None)
    stages = stage_functions(bt, keys)
    # eager, stage by stage: the intermediates (inputs of the stage programs) and a bit-exact check of the cut
    inputs, x = [], ct
    for _, fn in stages:
        inputs.append(x)
        x = jax.block_until_ready(fn(x))
    whole = jax.block_until_ready(bt.bootstrap(ct, keys))
    if not (np.array_equal(np.asarray(x.data), np.asarray(whole.data)) and x.level == whole.level
            and math.isclose(x.scale, whole.scale, rel_tol=1e-12)):
        raise AssertionError("the profiled stages do not reproduce Bootstrapper.bootstrap: the stage cut in "
                             "hemx/bench/bootstrap_profile.py no longer matches Bootstrapper._once")
    programs, rows = {}, []
    for (name, fn), x_in in zip(stages, inputs):
        prog = programs[name] = compile_stage(fn, x_in, ctx)
        if not prog.fits():
            raise MemoryError(f"{name}: the program needs {prog.temp_bytes / 2**30:.1f} GiB of temporaries, more than "
                              f"{MEMORY_MARGIN:.0%} of the {available_memory() / 2**30:.1f} GiB available")
        out = jax.block_until_ready(prog(x_in))
        say(f"{name}: compiled in {prog.compile_s:.1f} s, {prog.counts.get('key_switches', 0)} key switches")
        rows.append({"stage": name, "compile_s": prog.compile_s, "temp_bytes": prog.temp_bytes,
                     "level_in": x_in.level, "level_out": out.level,
                     "bit_exact_vs_eager": bool(np.array_equal(np.asarray(out.data), np.asarray(fn(x_in).data))),
                     "counts": {k: v for k, v in prog.counts.items() if not k.startswith("op:")},
                     "ops": {k[3:]: v for k, v in prog.counts.items() if k.startswith("op:")},
                     "custom_calls": custom_call_counts(prog.hlo),
                     "divide_polys": custom_call_polys(prog.hlo, "hemx_divide")})
    calls = {name: (lambda p=programs[name], x_in=x_in: p(x_in)) for (name, _), x_in in zip(stages, inputs)}
    result = {"repeats": repeats, "bsgs": bsgs_shapes(bt)}
    if whole_jit:
        prog = compile_stage(lambda c: bt.bootstrap(c, keys), ct, ctx)
        say(f"whole bootstrap as one program: compiled in {prog.compile_s:.1f} s")
        result.update(whole_jit_compile_s=prog.compile_s, whole_jit_temp_bytes=prog.temp_bytes,
                      whole_jit_counts={k: v for k, v in prog.counts.items() if not k.startswith("op:")})
        if prog.fits():
            calls["whole:program"] = lambda p=prog: p(ct)
            result["whole_jit_bit_exact"] = bool(np.array_equal(np.asarray(prog(ct).data), np.asarray(whole.data)))
        else:
            whole_jit = False
            result["whole_jit_skipped"] = (f"{prog.temp_bytes / 2**30:.1f} GiB of temporaries, "
                                           f"{available_memory() / 2**30:.1f} GiB available")
            say(f"whole bootstrap as one program not run: {result['whole_jit_skipped']}")
            del prog
    for (name, fn), x_in in zip(stages, inputs):
        calls[f"eager:{name}"] = lambda fn=fn, x_in=x_in: fn(x_in)
    calls["whole:eager"] = lambda: bt.bootstrap(ct, keys)
    times = time_interleaved(calls, repeats=repeats, warmup=1)
    say("timed: " + ", ".join(f"{k} {t.median_s:.3f} s" for k, t in times.items()))
    for row in rows:
        t = times[row["stage"]]
        row.update(median_s=t.median_s, min_s=t.min_s, max_s=t.max_s,
                   eager_median_s=times[f"eager:{row['stage']}"].median_s)
    for row in rows:  # the trace last: profiling slows the traced call a little
        row["kinds_s"] = trace_kinds(calls[row["stage"]], programs[row["stage"]].hlo)
    result.update(stages=rows, eager_whole_median_s=times["whole:eager"].median_s,
                  eager_whole_min_s=times["whole:eager"].min_s)
    if whole_jit:
        result.update(whole_jit_median_s=times["whole:program"].median_s,
                      whole_jit_min_s=times["whole:program"].min_s)
    total = sum(r["median_s"] for r in rows)
    ref = result.get("whole_jit_median_s", result["eager_whole_median_s"])
    # the same sum of the fastest calls: what a load spike on a shared machine disturbs least (one slow sample of
    # a 0.1 s program moves a median of few repeats by half, never the minimum)
    ref_min = result.get("whole_jit_min_s", result["eager_whole_min_s"])
    result.update(stage_sum_s=total, stage_sum_ratio=total / ref,
                  stage_sum_min_s=sum(r["min_s"] for r in rows),
                  stage_sum_min_ratio=sum(r["min_s"] for r in rows) / ref_min,
                  eager_stage_sum_s=sum(r["eager_median_s"] for r in rows),
                  eager_stage_sum_ratio=sum(r["eager_median_s"] for r in rows) / result["eager_whole_median_s"])
    return result


def profile_worker(preset: str, repeats: int, seed: int, slots: int | None = None, whole_jit: bool = True) -> dict:
    """``python -m hemx.bench.bootstrap --worker hemx --profile``: keys, one bootstrap checked, the profile."""
    from hemx.bench.timing import machine_info
    from hemx.ckks import CKKSParameters, Context, InsecureParametersWarning
    from hemx.ckks.precision import precision_stats
    from hemx.circuits.bootstrap import bootstrapper_for

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = CKKSParameters.preset(preset, allow_insecure=True)
    ctx = Context(params, slots=slots)
    bt = bootstrapper_for(ctx)
    start = time.perf_counter()
    keys = ctx.keygen(bootstrap=bt)
    switching = [keys.relin, *keys.galois.values(), *keys.switching.values()]
    jax.block_until_ready([k.data for k in switching])
    keygen_s = time.perf_counter() - start
    x = np.random.default_rng(seed).uniform(-1, 1, ctx.slots)
    ct = ctx.drop_level(ctx.encrypt(x, keys), 0).replace(slots=bt.slots)
    evk = keys.evaluation_keys()
    prof = profile_bootstrap(ctx, bt, evk, ct, repeats=repeats, whole_jit=whole_jit,
                             log=lambda m: print(m, flush=True))
    out = bt.bootstrap(ct, evk)
    prec = precision_stats(x, ctx.decrypt(out, keys)[: ctx.slots])
    return {"side": "hemx", "profile": prof, "params": params.describe(), "preset": preset, "n": params.n,
            "slots": ctx.slots, "ntt": ctx.plan.describe(), "keyswitch": ctx.keyswitch, "keygen_s": keygen_s,
            "keys": len(switching), "key_bytes": sum(int(k.data.size) * k.data.dtype.itemsize for k in switching),
            "level_after": out.level, "max_level": params.max_level,
            "bootstrap": repr(bt), "min_bits": prec.min_bits, "mean_bits": prec.mean_bits, "machine": machine_info(),
            "median_s": prof["eager_whole_median_s"], "min_s": prof["eager_whole_min_s"]}


def hoisting_ab(preset: str, *, repeats: int = 3, seed: int = 7, modes=("single", "double"), eager: bool = True,
                log=None) -> dict:
    """Same-process A/B of the linear transforms' hoisting (``Bootstrapper.hoisting``) on one preset, full slots.

    For each mode: the CoeffsToSlots / SlotsToCoeffs stage programs' operation counts, native custom calls and
    polynomial divisions (ModDowns and rescales, :func:`custom_call_polys`), the precision of one bootstrap of
    uniform values in [-1, 1] (worst / mean bits); then the whole bootstrap as one program per mode, and eagerly,
    timed round-robin in this one process (:func:`hemx.bench.timing.time_interleaved`)."""
    from hemx.bench.timing import machine_info
    from hemx.ckks import CKKSParameters, Context, InsecureParametersWarning
    from hemx.ckks.precision import precision_stats
    from hemx.circuits.bootstrap import bootstrapper_for

    say = log or (lambda msg: None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = CKKSParameters.preset(preset, allow_insecure=True)
    ctx = Context(params)
    bt = bootstrapper_for(ctx)
    bt.compiled = "never"  # the programs are compiled here, per mode; the eager figures stay eager
    keys = ctx.keygen(bootstrap=bt)
    evk = keys.evaluation_keys()
    x = np.random.default_rng(seed).uniform(-1, 1, ctx.slots)
    # the bound metadata is not what is measured here: unknown (None), so no bound check can stop the comparison
    ct = ctx.drop_level(ctx.encrypt(x, keys), 0).replace(bound=None)
    result: dict = {"preset": preset, "params": params.describe(), "machine": machine_info(), "modes": {},
                    "repeats": repeats, "load_before": os.getloadavg()}
    calls = {}
    for mode in modes:
        out = _with_hoisting(bt, mode, lambda: bt.bootstrap(ct, evk))
        prec = precision_stats(x, ctx.decrypt(out, keys)[: ctx.slots])
        row = {"min_bits": prec.min_bits, "mean_bits": prec.mean_bits, "stages": {}}
        x_in = ct
        for name, fn in stage_functions(bt, evk):
            if name in ("CoeffsToSlots", "SlotsToCoeffs"):
                prog = _with_hoisting(bt, mode, lambda: compile_stage(fn, x_in, ctx))
                row["stages"][name] = {"counts": {k: v for k, v in prog.counts.items() if not k.startswith("op:")},
                                       "custom_calls": custom_call_counts(prog.hlo),
                                       "divide_polys": custom_call_polys(prog.hlo, "hemx_divide")}
                del prog
            x_in = jax.block_until_ready(_with_hoisting(bt, mode, lambda: fn(x_in)))
        prog = _with_hoisting(bt, mode, lambda: compile_stage(lambda c: bt.bootstrap(c, evk), ct, ctx))
        row.update(whole_compile_s=prog.compile_s, whole_temp_bytes=prog.temp_bytes,
                   whole_custom_calls=custom_call_counts(prog.hlo),
                   whole_divide_polys=custom_call_polys(prog.hlo, "hemx_divide"),
                   whole_bit_exact_vs_eager=bool(np.array_equal(np.asarray(prog(ct).data), np.asarray(out.data))))
        calls[f"program:{mode}"] = lambda p=prog: p(ct)
        if eager:
            calls[f"eager:{mode}"] = lambda m=mode: _with_hoisting(bt, m, lambda: bt.bootstrap(ct, evk))
        result["modes"][mode] = row
        say(f"{mode}: worst {prec.min_bits:.2f} / mean {prec.mean_bits:.2f} bits, compiled in {prog.compile_s:.1f} s")
    times = time_interleaved(calls, repeats=repeats, warmup=1)
    for name, t in times.items():
        kind, mode = name.split(":")
        result["modes"][mode].update({f"{kind}_median_s": t.median_s, f"{kind}_min_s": t.min_s,
                                      f"{kind}_max_s": t.max_s})
    result["load_after"] = os.getloadavg()
    say("timed: " + ", ".join(f"{k} {t.median_s:.3f} s (min {t.min_s:.3f})" for k, t in times.items()))
    return result


def _with_hoisting(bt, mode: str, fn):
    """``fn()`` with ``bt.hoisting`` set to ``mode`` ("single", "double"; "double-fullkeys" / "double-slicedkeys":
    double hoisting with the keys always / never read whole, :data:`hemx.circuits.lintrans.FULL_KEY_ROWS`)."""
    from hemx.circuits import lintrans

    old = bt.hoisting, lintrans.FULL_KEY_ROWS
    bt.hoisting = mode.split("-")[0]
    lintrans.FULL_KEY_ROWS = True if mode.endswith("-fullkeys") else False if mode.endswith("-slicedkeys") else None
    try:
        return fn()
    finally:
        bt.hoisting, lintrans.FULL_KEY_ROWS = old


def print_profile(row: dict, console) -> None:
    """The stage table and the kernel-kind table of a profile worker's row."""
    from hemx.bench.report import render_table

    prof = row["profile"]
    ref = prof.get("whole_jit_median_s", prof["eager_whole_median_s"])
    rows = []
    for r in prof["stages"]:
        c = r["counts"]
        rows.append((r["stage"], r["median_s"], f"{100 * r['median_s'] / prof['stage_sum_s']:.1f}%",
                     r["eager_median_s"], c.get("key_switches", 0), c.get("modups", 0), c.get("rotations", 0),
                     c.get("conjugations", 0), c.get("relinearizations", 0), c.get("rescales", 0),
                     r.get("divide_polys", "-")))
    render_table(f"bootstrap stages ({row.get('bootstrap')}); stage sum {prof['stage_sum_s']:.3f} s = "
                 f"{100 * prof['stage_sum_ratio']:.1f}% of the whole ({ref:.3f} s; fastest calls "
                 f"{100 * prof.get('stage_sum_min_ratio', float('nan')):.1f}%)",
                 ["stage", "s (program)", "share", "s (eager)", "key switches", "ModUps", "rotations", "conj",
                  "relin", "rescales", "divided polys"], rows, console)
    totals = collections.Counter()
    for r in prof["stages"]:
        totals.update({k: r["kinds_s"][k] for k in KINDS})
    busy = sum(totals.values()) or 1.0
    switching = sum(r["kinds_s"].get("_keyswitch_s", 0.0) for r in prof["stages"])
    render_table(f"kernel kinds (thread time from the trace, all stages; {100 * switching / busy:.1f}% in "
                 "key-switching kernels)", ["kind", "s", "share"],
                 [(k, totals[k], f"{100 * totals[k] / busy:.1f}%") for k in KINDS if totals[k]], console)


__all__ = ["stage_functions", "count_ops", "compile_stage", "profile_bootstrap", "profile_worker", "print_profile",
           "trace_kinds", "hlo_instructions", "hlo_kernels", "custom_call_counts", "custom_call_polys", "bsgs_shapes",
           "hoisting_ab", "KINDS", "KEYSWITCH_KERNELS"]


# XLA_FLAGS=<PROFILE_XLA_FLAGS> python -m hemx.bench.bootstrap_profile --ab boot_12 [repeats] [out.json]
if __name__ == "__main__":
    import sys

    if len(sys.argv) < 3 or sys.argv[1] != "--ab":
        raise SystemExit("usage: python -m hemx.bench.bootstrap_profile --ab PRESET [REPEATS] [OUT.json]")
    modes = tuple(os.environ.get("HEMX_AB_MODES", "single,double").split(","))
    res = hoisting_ab(sys.argv[2], repeats=int(sys.argv[3]) if len(sys.argv) > 3 else 3, modes=modes,
                      eager=os.environ.get("HEMX_AB_EAGER", "1") != "0", log=lambda m: print(m, flush=True))
    text = json.dumps(res, indent=1, default=str)
    if len(sys.argv) > 4:
        with open(sys.argv[4], "w") as f:
            f.write(text)
    print(text)
