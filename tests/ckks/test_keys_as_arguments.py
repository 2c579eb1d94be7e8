"""Keys as arguments of jitted programs, key planning and key reprs (issue 26).

* Keys are pytrees (arrays are leaves, ids static): ``jax.jit(lambda ct, keys: ...)`` takes them as arguments,
  so one XLA program serves every key set of the same parameters, and a new process with new keys loads it
  from the persistent compilation cache instead of compiling (measured in subprocesses, each with its own
  temporary cache directory: the suite itself runs with the cache off, see ``tests/conftest.py``).
* ``ctx.keygen(for_circuits=[...], sum_slots=...)`` derives the rotation set; reprs list rotation steps.
* The insecure-parameters warning names the caller's line.
"""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

import hemx
from hemx.bench import first_call
from hemx.ckks import InsecureParametersWarning, Sampler, keygen as keygen_mod
from hemx.circuits import LinearTransform
from hemx.errors import ParameterError

from tests.helpers.ckks_helpers import INSECURE, small_params

pytestmark = pytest.mark.filterwarnings(INSECURE)


def run_worker(case: str, seeds, cache_dir, timeout: float = 900, mode: str = "jax") -> dict:
    """``hemx.bench.first_call``'s worker in a fresh process (the benchmark ``hemx bench first-call`` runs it too)."""
    return first_call.run_process(case, mode, seeds, str(cache_dir), timeout=timeout)


def _check_processes(cold: dict, warm: dict, bits_error: float) -> None:
    assert cold["cache"]["enabled"] and warm["cache"]["enabled"]
    first, second = cold["key_sets"]
    # process 1, key set 1: compiled once (every later call of the program is a cache hit in memory)
    assert first["compiles"] >= 1 and first["max_error"] < bits_error
    # process 1, key set 2 (same context): correct results, the output under the new key set, and no new XLA
    # compilation: the retrace (key ids are static) gives the same program, found in the cache
    assert second["max_error"] < bits_error and second["out_key_id"] == second["key_id"] != first["key_id"]
    assert second["compiles"] == 0 and second["cache_loads"] >= 1
    # process 2, new keys: the program comes from the persistent cache, no compilation at all
    (fresh,) = warm["key_sets"]
    assert fresh["max_error"] < bits_error
    assert fresh["compiles"] == 0 and fresh["cache_loads"] >= 1
    assert fresh["first_s"] < first["first_s"], (fresh, first)  # loading, not compiling (timings: docs/results)


def test_mul_rotate_n14_compiles_once_and_new_process_hits_the_cache(tmp_path):
    """HE-Mult + Rotate at N = 2^14 (CROSS set C): two key sets in one process, then a new process with new keys.

    Measured on the 2-core CI machine (docs/results/compile-cpu.md): cold first call 1.4 s, warm-cache first
    call in a new process 0.3 s (tracing, table building, lowering and loading the program), steady 0.02 s."""
    cold = run_worker("mul_rotate", [1, 2], tmp_path)
    warm = run_worker("mul_rotate", [3], tmp_path)
    _check_processes(cold, warm, 1e-6)


@pytest.mark.slow
def test_bootstrap_boot12_new_process_hits_the_cache(tmp_path):
    """A jitted bootstrap at boot_12 with the keys as arguments: compiled once, loaded by a new process."""
    cold = run_worker("boot_12", [1, 2], tmp_path, timeout=1800)
    warm = run_worker("boot_12", [3], tmp_path, timeout=1800)
    _check_processes(cold, warm, 1e-3)


def _check_program_processes(cold: dict, warm: dict, bits_error: float) -> None:
    """hemx.jit: process 1 compiles once for both key sets (no retrace); process 2 loads, traces nothing."""
    first, second = cold["key_sets"]
    assert first["program"]["compiled"] == 1 and first["program"]["written"] == 1, first
    assert first["program"]["persistent"], first["program"]["reason"]
    assert second["program"]["compiled"] == 1 and second["traces_so_far"] == 1  # the second key set: no trace
    assert second["out_key_id"] == second["key_id"] != first["key_id"]
    (fresh,) = warm["key_sets"]
    assert fresh["prepare"]["how"] == "loaded" and fresh["program"]["compiled"] == 0, fresh
    assert fresh["traces_so_far"] == 0 and fresh["compiles"] == 0  # nothing traced, lowered or compiled
    for record in (first, second, fresh):
        assert record["max_error"] < bits_error, record


def test_program_mul_rotate_new_process_loads_without_tracing(tmp_path):
    """hemx.jit at N = 2^14: the new process loads the stored executable (timings: hemx bench first-call)."""
    cold = run_worker("mul_rotate", [1, 2], tmp_path, mode="program")
    warm = run_worker("mul_rotate", [3], tmp_path, mode="program")
    _check_program_processes(cold, warm, 1e-6)


@pytest.mark.slow
def test_program_bootstrap_boot12_new_process_loads_without_tracing(tmp_path):
    cold = run_worker("boot_12", [1, 2], tmp_path, timeout=1800, mode="program")
    warm = run_worker("boot_12", [3], tmp_path, timeout=1800, mode="program")
    _check_program_processes(cold, warm, 1e-3)


# ------------------------------------------------------------------------------------------ in-process
@pytest.fixture(scope="module")
def small():
    """N = 2^10, 64 slots, 3 levels: key planning and correctness without large compiles."""
    params = small_params(10, 3)
    return hemx.Context(params, slots=64, ntt="mat3", planning="off", sampler=Sampler.insecure_for_tests(5))


def test_keys_are_pytrees_with_static_ids(small):
    keys = small.keygen(rotations=[1], conjugation=True)
    leaves, treedef = jax.tree_util.tree_flatten(keys)
    assert all(isinstance(leaf, (jax.Array, np.ndarray)) for leaf in leaves)
    # public, relin, two Galois keys, the secret's coefficients and NTT form; each compact switching key adds its
    # stream key (a leaf, so a compiled program takes it as an argument too)
    compact = sum(k.compact for k in [keys.relin, *keys.galois.values()])
    assert len(leaves) == 6 + compact and compact == (3 if small.key_storage == "compact" else 0)
    back = jax.tree_util.tree_unflatten(treedef, leaves)
    assert back.key_id == keys.key_id and back.context_id == keys.context_id
    assert sorted(back.galois) == sorted(keys.galois) and back.galois[min(keys.galois)].kind == "galois"
    ev = keys.evaluation_keys()
    assert len(jax.tree_util.tree_leaves(ev)) == 4 + compact  # no secret material


def test_one_trace_per_key_set_and_checks_under_trace(small):
    """In one process: key ids are static (the context's key checks run while tracing), so a second key set
    retraces; the program is the same (the persistent cache, on by default, serves it: tested above)."""
    k1, k2 = small.keygen(rotations=[1]), small.keygen(rotations=[1])
    x = np.linspace(-1, 1, small.slots)
    a1, a2 = small.encrypt(x, k1), small.encrypt(x, k2)
    traces = [0]

    def f(a, keys):
        traces[0] += 1
        return small.rotate(small.mul(a, a, keys, rescale=True), 1, keys)

    jf = jax.jit(f)
    r1 = jf(a1, k1)
    r1b = jf(a1, k1)
    r2 = jf(a2, k2)
    assert traces[0] == 2 and r2.key_id == k2.key_id and r1b.key_id == k1.key_id
    for r, k in ((r1, k1), (r2, k2)):
        assert np.max(np.abs(small.decrypt(r, k) - np.roll(x * x, -1))) < 1e-6
    assert str(jax.jit(f).lower(a1, k1).as_text()) == str(jax.jit(f).lower(a2, k2).as_text())
    with pytest.raises(hemx.errors.KeyMismatchError):  # the mismatch is still caught, while tracing
        jf(a1, k2)


def test_keygen_for_circuits(small):
    rng = np.random.default_rng(1)
    lt = LinearTransform(small, {0: rng.uniform(-1, 1, 64), 3: rng.uniform(-1, 1, 64)})

    def circuit(ct, keys):
        y = small.rotate(small.mul(ct, ct, keys, rescale=True), -2, keys)
        return small.conjugate(small.add(y, small.rotate(y, 5, keys)), keys)

    keys = small.keygen(for_circuits=[lt, circuit, "sum_slots"])
    want = set(lt.rotations) | {-2 % 64, 5} | {1, 2, 4, 8, 16, 32}
    assert set(keys.rotations) == {s % 64 for s in want} and keys.conjugation
    # the traced circuit and the transform run with the planned keys
    x = rng.uniform(-1, 1, 64)
    ct = small.encrypt(x, keys)
    small.decrypt(circuit(ct, keys), keys)
    small.decrypt(small.sum_slots(lt.apply(ct, keys), keys), keys)
    # a tuple (fn, *example_args) with a placeholder ciphertext at a lower level, and a real one
    at1 = keygen_mod.placeholder(small, level=1)
    assert at1.level == 1 and at1.data.shape[-2] == small.params.limbs_at_level(1)
    only = small.keygen(for_circuits=[(lambda c, k: small.rotate(c, 7, k), at1)])
    assert only.rotations == [7] and not only.conjugation
    assert small.keygen(for_circuits=[(lambda c, k: small.rotate(c, 3, k), ct)]).rotations == [3]
    with pytest.raises(ParameterError):
        small.keygen(for_circuits=[42])
    with pytest.raises(ParameterError):
        small.keygen(for_circuits=["sum_all"])


def test_keygen_sum_slots(small):
    keys = small.keygen(sum_slots=True)
    assert keys.rotations == [1, 2, 4, 8, 16, 32]
    x = np.linspace(-1, 1, 64)
    got = small.decrypt(small.sum_slots(small.encrypt(x, keys), keys), keys)
    assert np.max(np.abs(got - x.sum())) < 1e-6


def test_reprs_show_rotation_steps():
    params = small_params(10, 1)
    ctx = hemx.Context(params, ntt="mat3", planning="off", sampler=Sampler.insecure_for_tests(2))  # 512 slots
    keys = ctx.keygen(rotations=[4, 1, -1, 2], conjugation=True)
    text = repr(keys)
    assert "rotations=[1, -1, 2, 4]" in text and "conjugation=True" in text, text
    assert "rotations=[1, -1, 2, 4]" in repr(keys.evaluation_keys())
    assert keygen_mod.rotation_steps("power_of_two", 8) == [1, 2, 4]


def test_insecure_warning_points_at_the_caller():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hemx.CKKSParameters.create(10, levels=1, dnum=1, allow_insecure=True)
        hemx.CKKSParameters.preset("set_a", allow_insecure=True)
    found = [w for w in caught if issubclass(w.category, InsecureParametersWarning)]
    assert len(found) == 2
    for w in found:
        assert w.filename == __file__, (w.filename, w.lineno)
