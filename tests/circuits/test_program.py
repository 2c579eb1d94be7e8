"""``hemx.jit``: one compiled program for every key set, stored for later processes (issue 26).

In-process behaviour on a small ring; the new-process case (executable loaded, nothing traced) runs in
subprocesses in ``tests/ckks/test_keys_as_arguments.py`` (also the benchmark ``hemx bench first-call``).
"""

from __future__ import annotations

import pathlib
import threading

import jax
import numpy as np
import pytest

import hemx
from hemx.ckks import Sampler
from hemx.circuits import program as program_mod
from hemx.errors import KeyMismatchError, ParameterError

from tests.helpers.ckks_helpers import INSECURE, small_params

pytestmark = pytest.mark.filterwarnings(INSECURE)


@pytest.fixture(scope="module")
def ctx():
    return hemx.Context(small_params(10, 3), planning="off", ntt="mat3", sampler=Sampler.insecure_for_tests(7))


@pytest.fixture(scope="module")
def key_sets(ctx):
    return [ctx.keygen(rotations=[1]) for _ in range(2)]


@pytest.fixture()
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("HEMX_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(program_mod.STORE_ENV, "1")
    return pathlib.Path(program_mod.store_directory())


def _x(ctx, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, ctx.slots)


def test_one_compile_serves_every_key_set(ctx, key_sets, store):
    calls = [0]

    def circuit(ct, keys):
        calls[0] += 1
        return ctx.rotate(ctx.mul(ct, ct, keys), 1, keys)

    prog = hemx.jit(circuit)
    x = _x(ctx)
    for keys in key_sets:
        out = prog(ctx.encrypt(x, keys), keys)
        assert out.key_id == keys.key_id and out.context_id == ctx.id
        np.testing.assert_allclose(ctx.decrypt(out, keys), np.roll(x * x, -1), atol=1e-5)
    assert calls[0] == 1  # traced once: the second key set is the same program
    assert prog.stats.compiled == 1 and prog.stats.calls == 2 and prog.stats.written == 1
    assert prog.persistent and prog.reason is None
    assert len(list(store.rglob("*.hxp"))) == 1
    # a ciphertext of one key set with the other keys is another description: traced, and the check raises
    with pytest.raises(KeyMismatchError):
        prog(ctx.encrypt(x, key_sets[0]), key_sets[1])


def test_a_new_program_object_loads_instead_of_compiling(ctx, key_sets, store):
    def circuit(ct, keys):
        return ctx.mul(ct, ct, keys)

    x = _x(ctx, 1)
    first = hemx.jit(circuit)
    assert first.prepare(ctx.encrypt(x, key_sets[0]), key_sets[0]) == "compiled"
    second = hemx.jit(circuit)  # as a new process would: same function, nothing in memory
    ct = ctx.encrypt(x, key_sets[1])
    assert second.prepare(ct, key_sets[1]) == "loaded"
    assert second.prepare(ct, key_sets[1]) == "memory"
    out = second(ct, key_sets[1])
    assert second.stats.compiled == 0 and second.stats.loaded == 1
    np.testing.assert_allclose(ctx.decrypt(out, key_sets[1]), x * x, atol=1e-5)


def test_what_the_function_reads_is_part_of_its_identity(ctx, key_sets, store):
    keys = key_sets[0]
    x = _x(ctx, 2)
    progs = []
    for factor in (0.5, -2.0):
        def circuit(ct, keys, factor=factor):
            return ctx.mul(ct, factor)
        progs.append(hemx.jit(circuit))
    for factor, prog in zip((0.5, -2.0), progs):
        assert prog.prepare(ctx.encrypt(x, keys), keys) == "compiled"  # not the other factor's program
        np.testing.assert_allclose(ctx.decrypt(prog(ctx.encrypt(x, keys), keys), keys), factor * x, atol=1e-5)
    weights = [np.full(ctx.slots, 0.25), np.full(ctx.slots, 0.75)]
    for w in weights:  # a closed-over array: its bytes are fingerprinted
        prog = hemx.jit(lambda ct, keys, w=w: ctx.mul(ct, w))
        assert prog.prepare(ctx.encrypt(x, keys), keys) == "compiled"
        np.testing.assert_allclose(ctx.decrypt(prog(ctx.encrypt(x, keys), keys), keys), w * x, atol=1e-5)


def test_unfingerprintable_closure_runs_per_process(ctx, key_sets, store):
    lock = threading.Lock()

    def circuit(ct, keys):
        with lock:
            return ctx.add(ct, ct)

    prog = hemx.jit(circuit)
    keys = key_sets[0]
    x = _x(ctx, 3)
    out = prog(ctx.encrypt(x, keys), keys)
    np.testing.assert_allclose(ctx.decrypt(out, keys), 2 * x, atol=1e-6)
    assert not prog.persistent and "lock" in prog.reason
    assert not list(store.rglob("*.hxp"))
    out = prog(ctx.encrypt(x, key_sets[1]), key_sets[1])  # still one compile for both key sets in this process
    assert prog.stats.compiled == 1
    np.testing.assert_allclose(ctx.decrypt(out, key_sets[1]), 2 * x, atol=1e-6)


def test_inside_jax_jit_it_is_inlined(ctx, key_sets, store):
    prog = hemx.jit(lambda ct, keys: ctx.add(ct, ct))
    keys = key_sets[0]
    x = _x(ctx, 4)
    out = jax.jit(lambda ct, keys: prog(ct, keys))(ctx.encrypt(x, keys), keys)
    assert prog.stats.compiled == 0
    np.testing.assert_allclose(ctx.decrypt(out, keys), 2 * x, atol=1e-6)
    with pytest.raises(ParameterError, match="concrete"):
        jax.jit(lambda ct, keys: prog.prepare(ct, keys))(ctx.encrypt(x, keys), keys)


def test_encrypted_arrays_in_and_out(ctx, key_sets, store):
    prog = hemx.jit(lambda a: a * a + 1.0)
    x = _x(ctx, 5)
    for keys in key_sets:
        a = hemx.EncryptedArray.encrypt(ctx, x, keys)
        out = prog(a)
        assert isinstance(out, hemx.EncryptedArray)
        np.testing.assert_allclose(out.decrypt(keys), x * x + 1.0, atol=1e-5)
    assert prog.stats.compiled == 1


def test_store_off_and_damaged_entries(ctx, key_sets, store, monkeypatch):
    keys = key_sets[0]
    x = _x(ctx, 6)

    def circuit(ct, keys):
        return ctx.sub(ct, ct)

    prog = hemx.jit(circuit, persist=False)
    prog(ctx.encrypt(x, keys), keys)
    assert not list(store.rglob("*.hxp")) and not prog.persistent
    monkeypatch.setenv(program_mod.STORE_ENV, "0")
    assert not hemx.jit(circuit).persistent
    monkeypatch.setenv(program_mod.STORE_ENV, "1")
    hemx.jit(circuit)(ctx.encrypt(x, keys), keys)
    (path,) = store.rglob("*.hxp")
    path.write_bytes(b"not a program")
    again = hemx.jit(circuit)
    assert again.prepare(ctx.encrypt(x, keys), keys) == "compiled"  # a damaged entry is compiled over
    np.testing.assert_allclose(ctx.decrypt(again(ctx.encrypt(x, keys), keys), keys), 0 * x, atol=1e-6)
    assert hemx.jit(circuit).prepare(ctx.encrypt(x, keys), keys) == "loaded"


def test_bad_arguments():
    with pytest.raises(ParameterError):
        hemx.jit(3)
    with pytest.raises(ParameterError):
        hemx.jit(lambda x: x, name="")
    assert isinstance(hemx.jit(name="labelled")(lambda x: x), hemx.Program)


def test_meta_fields_match_the_pytree_registrations(ctx, key_sets):
    """The static fields program.py renames must be exactly what each type's pytree flattening keeps static."""
    keys = key_sets[0]
    ct = ctx.encrypt(_x(ctx), keys)
    examples = [ct, ctx.encode(_x(ctx)), keys.public, keys.relin, keys.secret, keys, keys.evaluation_keys()]
    for obj in examples:
        meta = program_mod._META[type(obj)]
        children, _ = jax.tree_util.tree_flatten(obj, is_leaf=lambda y: y is not obj)
        data = [f.name for f in __import__("dataclasses").fields(obj) if f.name not in meta]
        assert len(children) == len(data), (type(obj).__name__, meta)


def test_dispatch_entries_are_bounded(ctx, key_sets, store, monkeypatch):
    """One dispatch entry per argument structure (key set), the oldest forgotten past the cap; the executable
    itself stays, so a forgotten key set is served again without a compile."""
    monkeypatch.setattr(program_mod, "MAX_DISPATCH_ENTRIES", 1)
    prog = hemx.jit(lambda ct, keys: ctx.add(ct, 1.0))
    x = _x(ctx, 8)
    for keys in (*key_sets, key_sets[0]):
        out = prog(ctx.encrypt(x, keys), keys)
        np.testing.assert_allclose(ctx.decrypt(out, keys), x + 1.0, atol=1e-6)
        assert len(prog._by_tree) == 1
    assert prog.stats.compiled == 1
