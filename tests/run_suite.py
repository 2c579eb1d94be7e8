"""Run the test suite as several pytest processes, a few at a time, and print one closing line.

Why several processes: one process for the whole suite compiles several thousand XLA programs; on Linux each keeps
memory mappings, and a single process running everything crashed inside XLA's compiler after about 30 minutes (a
segmentation fault in ``backend_compile_and_load``, consistent with the 65530 ``vm.max_map_count`` limit). Fresh
processes per group keep every run well below that.

Why a few at a time: most of the suite's time is XLA compilation, which runs on one core, so on CI's 2-core machine
two processes at once finish the suite in a little over half the serial time (measured in the closing lines).
``HEMX_TEST_JOBS`` sets how many run at once (default: the CPU count, at most 4). Groups start longest first (their
``minutes`` are timings measured on the 2-core development machine), and each group's output is printed whole when it
ends. Extra arguments go to every pytest (``-m "not slow"``, ``-x``, ...).

Tests that need a system package this machine lacks (``scripts/system-deps.sh`` lists and installs them) are
skipped with a reason that starts with ``tests.helpers.system.NOT_RUN``; each pytest runs with ``-rs`` so the
reasons are printed, and the closing lines say how many tests were not run, for which package, and the command that
installs it (in CI those tests fail instead).

One compilation cache for the run: the processes share JAX's persistent cache in a fresh temporary directory
(``$HEMX_SUITE_XLA_CACHE``, read by ``tests/conftest.py``; removed at the end, never the user's cache), so a program
that several groups compile (the ``boot_12`` bootstrap, the small rings' operations) is compiled once per run; the
closing lines say how many programs were loaded instead of compiled. ``HEMX_SUITE_XLA_CACHE=0``
switches it off (every process compiles afresh).

Usage: ``python -m tests.run_suite [pytest args]`` (what ``make test`` runs).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import NamedTuple

from tests.helpers.suite_cache import CACHE_LINE, SUITE_CACHE_ENV
from tests.helpers.system import NOT_RUN, SCRIPT


CKKS_FIRST_HALF = ("test_eager_dispatch.py", "test_encoder.py", "test_jit.py", "test_keys_as_arguments.py",
                   "test_encode_fast.py", "test_checks.py", "test_product_scale_refusal.py")
CKKS_SECOND_HALF = ("test_chain_scales.py", "test_ckks_encoder.py", "test_ckks_errors.py", "test_ckks_keyswitch.py",
                    "test_context_parts.py",
                    "test_ckks_ops.py", "test_ckks_params.py", "test_ckks_sampling.py", "test_ckks_slow.py",
                    "test_dot_plain.py", "test_keyswitch_dataflows.py", "test_levelled_keys.py",
                    "test_precision_stats.py", "test_rescale_rounding.py", "test_scales.py", "test_seeded_keys.py",
                    "test_soak.py")

NN_FRONT_ENDS = ("test_lstm.py", "test_onnx.py", "test_keras.py", "test_trace.py", "test_input_bounds.py",
                 "test_data_layout.py", "test_relu_bootstrap.py")
NN_REST = ("test_activations.py", "test_compile.py", "test_data.py", "test_infer.py",
           "test_interleaved_batch.py", "test_models.py", "test_multiply.py", "test_network_export.py",
           "test_packing.py", "test_passes.py", "test_resnet20_export.py", "test_sound_bounds.py",
           "test_relu_domain.py", "test_accuracy_warning.py", "test_shared_rotations.py")


class Group(NamedTuple):
    """Test paths run by one pytest process; ``minutes``: its time in the last clean-clone ``.ci/run`` on a 2-core
    development VM (AMD EPYC Zen 3, 2026-11-29, commit 061e908: the whole suite in 58.1 min, two groups at a time,
    each process compiling everything afresh), used only to start the longest groups first. Earlier runs on Zen 5
    and Sapphire Rapids VMs took 22-32 min for the same groups (the same tests were as slow on this VM at the
    commit before: the machine, not the suite, doubled the time). The ``tests/ckks`` group (24.4 min there, the
    run's critical path) is split in two since; its halves' minutes are its per-file durations added up."""

    paths: tuple[str, ...]
    minutes: float


GROUPS = (
    # tests/apps/test_logreg_bootstrap.py: most of its ~3 min compiles the boot_12 bootstrap; tests/cli/test_demo.py
    # runs the apps' small rings again (same parameters and NTT: the compiled programs are reused here)
    # tests/cli/test_demo_resnet.py: the tiny residual test network at boot_12 through the client/server split,
    # 3 bootstraps per image (~25-40 s; 73 s while a boot_16 job ran on the same 2 cores)
    Group(("tests/apps", "tests/cli/test_demo.py", "tests/cli/test_demo_resnet.py"), 8.1),
    Group(("tests/bench",), 8.0),  # test_bench_bootstrap.py: boot_12 workers, --profile ~35 s; test_gpu_check.py ~45 s
    Group(("tests/circuits/test_bootstrap.py", "tests/circuits/test_bootstrap_scales.py",
           "tests/circuits/test_bootstrap_sparse.py", "tests/circuits/test_lintrans_hoisting.py",
           "tests/circuits/test_bootstrap_parameters.py", "tests/circuits/test_bootstrap_placement.py",
           "tests/circuits/test_bootstrap_compiled.py"),
          11.0),  # test_bootstrap_compiled.py: three boot_12 circuit programs compiled, ~3 min
    Group(("tests/circuits/test_jit.py", "tests/circuits/test_lintrans.py", "tests/circuits/test_polynomial.py",
           "tests/circuits/test_simulator_exact.py", "tests/circuits/test_array.py", "tests/circuits/test_program.py",
           "tests/circuits/test_dot_plain_evaluators.py", "tests/circuits/test_array_front.py"),
          5.9),  # test_array.py: ~0.7 min; test_program.py (hemx.jit): ~0.3 min; test_array_front.py: ~1.5 min
    # (a boot_12 bootstrap of 8 slots; the numpy dispatch reuses test_array.py's compiled programs), not yet timed
    # tests/ckks in two halves of about 12 min each on the Zen 3 VM (the eager-dispatch, traced-encoder, jit and
    # keys-as-arguments files compile the most programs; every other tests/ckks file is in the second half)
    Group(tuple(f"tests/ckks/{name}" for name in CKKS_FIRST_HALF), 12.2),
    Group(tuple(f"tests/ckks/{name}" for name in CKKS_SECOND_HALF), 12.2),
    Group(("tests/cli/test_docs.py", "tests/dataflow", "tests/io/test_io.py", "tests/io/test_seeded_keys.py",
           "tests/io/test_service.py"), 7.0),
    Group(("tests/io/test_fuzz.py",), 2.5),  # two fuzz targets for 60 s each (one core)
    # the kernels: the native library's tests with the planner and the ring; the JAX kernels with nt
    Group(("tests/kernels/native/test_native_ffi_safety.py", "tests/kernels/native/test_native_keyswitch.py",
           "tests/kernels/native/test_native_ntt.py", "tests/kernels/native/test_native_ntt_blocked.py",
           "tests/kernels/native/test_native_ops.py", "tests/kernels/native/test_native_prng.py",
           "tests/kernels/native/test_native_amx.py", "tests/plan", "tests/ring"),
          6.5),  # test_native_prng.py (compact keys, both expansions): about 1.5 min; test_native_amx.py ~0.2 min
    # issue 25: four builds of csrc/ (g++ -O3/-O0, clang++, aarch64 cross) checked as objects, self-tests under
    # qemu (x86-64 CPU models without AVX-512 / AVX, aarch64), and hemx itself under qemu -cpu max
    Group(("tests/kernels/native/test_native_build.py",), 6.5),
    Group(("tests/kernels/test_automorphism.py", "tests/kernels/test_bat.py", "tests/kernels/test_bconv.py",
           "tests/kernels/test_modarith.py", "tests/kernels/test_ntt.py", "tests/kernels/test_ntt_layout.py",
           "tests/kernels/test_prng.py", "tests/nt"), 5.2),  # test_prng.py (issue 27): about 0.8 min
    Group(("tests/polymul", "tests/test_bad_input.py", "tests/test_compilation_cache.py", "tests/test_layers.py",
           "tests/test_system_deps.py", "tests/test_allocator.py"),
          4.3),
    # subprocesses with 8 simulated devices (test_shardmap_keyswitch.py: about 1.5 min more) and 2 jax.distributed
    # processes; test_export.py's boot_12 bootstrap export for cuda and tpu: about 1 min
    Group(("tests/parallel",), 6.9),
    # hemx.nn (issue 28): packing against lax.conv in the simulator, the ReLU approximation, the compiler (a small
    # residual network encrypted, one at boot_12 with 2 bootstraps), the JAX / Keras front ends and ResNet-20;
    # test_network_export.py: that network as one program, exported for cuda and tpu and jitted (~2 min loaded)
    # the front ends and the recurrent layer apart from the rest (test_lstm.py: an encrypted LSTM at N = 2^11, ~3
    # min; test_onnx.py: onnxruntime, torch exports and compiles at boot_16; test_relu_bootstrap.py: a JAX ReLU CNN
    # encrypted at boot_12_relu, 6 bootstraps, ~2 min)
    Group(tuple(f"tests/nn/{name}" for name in NN_FRONT_ENDS), 8.0),
    Group(tuple(f"tests/nn/{name}" for name in NN_REST), 12.2),
    # a second venv with JAX 0.11.2 (made once under build/, about 1 min) runs CKKS ops and a boot_12 bootstrap
    Group(("tests/test_jax_compat.py",), 7.4),
)
NOT_RUN_LINE = re.compile(r"^SKIPPED \[(\d+)\] [^:]+(?::\d+)?: " + re.escape(NOT_RUN) + r" (\S+)")
COUNTS = re.compile(r"(\d+) (passed|failed|errors?|xfailed|xpassed|skipped|deselected)")


def jobs() -> int:
    value = os.environ.get("HEMX_TEST_JOBS", "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise SystemExit(f"HEMX_TEST_JOBS must be a positive integer, got {value!r}")
        return int(value)
    return max(1, min(4, os.cpu_count() or 1))


def run_group(group: Group, argv: list[str], env: dict | None = None) -> tuple[int, str, float]:
    """(return code, output, minutes) of one pytest process over ``group.paths``."""
    start = time.monotonic()
    # --durations: each group's slowest tests in the log, where the suite's time goes (the GROUPS minutes' source)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "--durations=12", "--durations-min=5", *argv,
                           *group.paths], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env)
    return proc.returncode, proc.stdout, (time.monotonic() - start) / 60


def suite_cache() -> str | None:
    """A fresh directory for the run's shared compilation cache, or None when ``$HEMX_SUITE_XLA_CACHE`` is 0."""
    value = os.environ.get(SUITE_CACHE_ENV, "")
    if value.strip().lower() in ("0", "off", "false", "no"):
        return None
    if value:
        raise SystemExit(f"{SUITE_CACHE_ENV} is set by the suite itself; only 0 (off) may be given, got {value!r}")
    return tempfile.mkdtemp(prefix="hemx-suite-xla-")


def main(argv: list[str]) -> int:
    cache = suite_cache()
    env = dict(os.environ)
    if cache is None:
        env.pop(SUITE_CACHE_ENV, None)
    else:
        env[SUITE_CACHE_ENV] = cache
    loaded = {"programs": 0}
    totals: dict[str, int] = {}
    not_run: dict[str, int] = {}  # Debian package -> tests not run for want of it
    worst = 0
    lock = threading.Lock()
    pending = sorted(GROUPS, key=lambda g: -g.minutes)  # longest first: the last to start are the short ones
    start = time.monotonic()

    def worker() -> None:
        nonlocal worst
        while True:
            with lock:
                if not pending:
                    return
                group = pending.pop(0)
            code, out, minutes = run_group(group, argv, env)
            lines = [line for line in out.splitlines() if line.strip()]
            last = lines[-1] if lines else ""
            with lock:
                print(f"== pytest {' '.join(group.paths)}  ({minutes:.1f} min)", flush=True)
                sys.stdout.write(out)
                sys.stdout.flush()
                for line in lines:
                    hit = NOT_RUN_LINE.match(line)
                    if hit:
                        not_run[hit.group(2)] = not_run.get(hit.group(2), 0) + int(hit.group(1))
                    hit = CACHE_LINE.match(line)
                    if hit:
                        loaded["programs"] += int(hit.group(1))
                for count, word in COUNTS.findall(last):
                    key = "errors" if word.startswith("error") else word
                    totals[key] = totals.get(key, 0) + int(count)
                if code not in (0, 5):
                    worst = code if worst == 0 else worst
                    if code < 0 or not COUNTS.search(last):
                        totals["crashed"] = totals.get("crashed", 0) + 1  # killed or crashed: no summary line

    n = min(jobs(), len(GROUPS))
    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    minutes = (time.monotonic() - start) / 60
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
        print(f"suite: one compilation cache for the run: {loaded['programs']} programs loaded instead of compiled")
    other = ", ".join(f"{totals[k]} {k}" for k in ("errors", "xfailed", "xpassed", "crashed") if totals.get(k))
    print(f"suite: {len(GROUPS)} pytest processes, {n} at a time, in {minutes:.1f} min"
          + (f"; also {other}" if other else ""))
    if not_run:
        packages = sorted(not_run)
        print("suite: not run on this machine, for want of system packages: "
              + ", ".join(f"{not_run[p]} tests need {p}" for p in packages)
              + f"; install with `sudo apt-get install -y {' '.join(packages)}` (or `{SCRIPT}` as root)")
    failed = totals.get("failed", 0) + totals.get("errors", 0) + totals.get("crashed", 0)
    skipped = f", {totals['skipped']} skipped" if totals.get("skipped") else ""
    print(f"suite: {totals.get('passed', 0)} passed, {failed} failed{skipped}")
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
