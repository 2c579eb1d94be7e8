"""The native seeded-key kernels (issue 27: compact keys): ``hemx_uniform`` (the seeded rows of a key's uniform half)
bit-exact against the Python-integer reference of tests/kernels/test_prng.py and the JAX definition on every
instruction set this CPU runs, and ``hemx_key_product`` (the key-switching inner product in one pass: a compact key's
rows generated as it goes, a full key read in place, the digits read through an automorphism's index map) bit-exact
against the automorphism and the plain inner product with the expanded key, for batch axes, keys read in place at
fewer digits and rows, widths that are not a multiple of the vector length, threaded and inline."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hemx import errors as hemx_errors
from hemx import nt
from hemx.ckks import keyswitch as ks
from hemx.ckks.keys import KeyMaterial
from hemx.kernels import modarith as M
from hemx.kernels import native, prng
from tests.helpers.native import supported_isas
from tests.kernels.test_prng import EDGE_MODULI, rows_ref

jax.config.update("jax_enable_x64", True)  # the JAX reference inner product sums in uint64

ISAS = supported_isas()
FEW = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def seeded_kernels(native_on):  # native_on (conftest.py): HEMX_NATIVE cleared, the library present
    if not native.has_seeded_keys():
        pytest.skip(f"{native.library_path()} predates hemx_uniform / hemx_key_product")


@functools.lru_cache(maxsize=None)
def _moduli(n: int, count: int) -> tuple[int, ...]:
    """NTT primes of 28, 30 and 31 bits for ring degree n (the sizes hemx's presets use)."""
    per = -(-count // 3)
    out = nt.ntt_primes(28, per, n) + nt.ntt_primes(30, per, n) + nt.ntt_primes(31, per, n)
    return tuple(out[:count])


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("n", [16, 17, 64, 1000, 4096])
def test_uniform_rows_match_the_reference(isa, n):
    native.set_isa(isa)
    key = np.arange(8, dtype=np.uint32) * 0x01000193 + 7
    moduli = list(EDGE_MODULI[:4]) + list(_moduli(64, 2))
    got = np.asarray(native.uniform(key, moduli, digits=2, n=n))
    assert np.array_equal(got, rows_ref(key, moduli, 2, n))
    assert np.array_equal(got, np.asarray(prng.uniform_rows(key, moduli, digits=2, n=n)))


@pytest.mark.parametrize("isa", ISAS)
@FEW
@given(st.lists(st.integers(0, 2**32 - 1), min_size=8, max_size=8),
       st.lists(st.integers(1, (1 << 30) - 1).map(lambda v: 2 * v + 1), min_size=1, max_size=4),
       st.integers(1, 3), st.sampled_from([1, 16, 255, 600]))
def test_uniform_rows_on_random_keys_and_moduli(isa, key, moduli, digits, n):
    native.set_isa(isa)
    key = np.asarray(key, np.uint32)
    got = np.asarray(native.uniform(key, moduli, digits=digits, n=n))
    assert np.array_equal(got, rows_ref(key, moduli, digits, n))


def test_uniform_rows_at_n_2_16_agree_across_instruction_sets_and_threads():
    key = np.frombuffer(b"a key for the large-ring checks!", "<u4").astype(np.uint32)
    moduli = _moduli(1 << 16, 3)
    want = np.asarray(prng.uniform_rows(key, moduli, digits=2, n=1 << 16))
    for isa in ISAS:
        native.set_isa(isa)
        for inline in (None, 0):
            native.set_inline_residues(inline)
            assert np.array_equal(np.asarray(native.uniform(key, moduli, digits=2, n=1 << 16)), want), (isa, inline)


def _operands(rng, lead, digits, m, n, key_digits, key_rows):
    qs = np.asarray(_moduli(max(n, 64) if n & (n - 1) == 0 else 64, key_rows), np.uint32)
    ext = (rng.integers(0, 2**31, size=lead + (digits, m, n)) % qs[None, :m, None]).astype(np.uint32)
    b = (rng.integers(0, 2**31, size=(key_digits, 1, key_rows, n)) % qs[None, None, :, None]).astype(np.uint32)
    # the range ends, where the products and their sums are largest
    ext[..., 0, :, :2] = qs[:m, None] - 1
    b[:, :, :, :2] = qs[None, None, :, None] - 1
    return ext, b, qs


def _expanded_product(ext, b, key, qs):
    """The plain inner product (JAX kernel) with the key's rows expanded: the reference."""
    d, m, n = ext.shape[-3:]
    a = np.asarray(prng.uniform_rows(key, qs[:m], digits=d, n=n))
    full = np.stack([b[:d, 0, :m], a], axis=1)
    table = M.make_modulus_table([int(q) for q in qs[:m]], (m, 1))
    return np.asarray(M.mul_sum(jnp.asarray(ext), jnp.asarray(full), table, method="jax"))


@pytest.mark.parametrize("lead,digits,m,n,key_digits,key_rows", [
    ((), 3, 4, 64, 3, 4),         # the key's own shape
    ((2,), 2, 3, 64, 4, 6),       # a level below the key's: its leading digits and rows, read in place
    ((2, 3), 1, 2, 256, 1, 2),    # two batch axes, one digit
    ((), 4, 5, 2048, 4, 5),       # two chunks of the kernel's row pieces
    ((1,), 2, 3, 24, 2, 3),       # n not a multiple of the vector width: the scalar path
])
def test_key_product_matches_the_automorphism_and_inner_product(lead, digits, m, n, key_digits, key_rows):
    """Compact and full keys, with and without an index map, every instruction set, inline and threaded (split over
    limbs), against one reference: the automorphism, then the plain inner product with the expanded key."""
    rng = np.random.default_rng(sum(lead) * 1000 + digits * 100 + m * 10 + n)
    ext, b, qs = _operands(rng, lead, digits, m, n, key_digits, key_rows)
    key = rng.integers(0, 2**32, size=8, dtype=np.uint32)
    perm = rng.permutation(n).astype(np.int32)  # any permutation (the kernel does not need an automorphism's)
    full = np.concatenate([b, np.asarray(prng.uniform_rows(key, qs[:key_rows], digits=key_digits, n=n))[:, None]],
                          axis=1)
    want = _expanded_product(ext, b, key, qs)
    want_perm = _expanded_product(np.take(ext, perm, axis=-1), b, key, qs)
    for isa in ISAS:
        native.set_isa(isa)
        for inline in (None, 0):
            native.set_inline_residues(inline)
            for args, expect in (((jnp.asarray(b), dict(stream=key)), want),
                                 ((jnp.asarray(full), {}), want),
                                 ((jnp.asarray(b), dict(stream=key, index_map=perm)), want_perm),
                                 ((jnp.asarray(full), dict(index_map=perm)), want_perm)):
                got = np.asarray(native.key_product(jnp.asarray(ext), args[0], qs[:m], **args[1]))
                assert got.shape == lead + (2, m, n) and np.array_equal(got, expect), (isa, inline, args[1].keys())


@pytest.mark.parametrize("n", [64, 2048, 4096])
def test_key_product_through_automorphism_maps(n):
    """The permuted digits read through real automorphisms' maps (each aligned vector of outputs reads one aligned
    input vector: the kernels' load-and-permute path; 2048 and 4096: pieces whose input piece lies elsewhere in the
    row), and through such a map with two indices swapped across blocks (those vectors one word at a time), every
    instruction set, against the automorphism and the plain inner product."""
    from hemx.kernels import automorphism as A  # noqa: PLC0415

    rng = np.random.default_rng(n)
    ext, b, qs = _operands(rng, (2,), 3, 4, n, 3, 4)
    key = rng.integers(0, 2**32, size=8, dtype=np.uint32)
    maps = [A.ntt_index_map(n, g) for g in (A.galois_element(n, 1), A.galois_element(n, -7),
                                            A.galois_element(n, n // 8 + 3), A.conjugation_element(n))]
    broken = np.array(maps[1], np.int32)
    broken[[5, n - 9]] = broken[[n - 9, 5]]
    maps.append(broken)
    for imap in maps:
        imap = np.asarray(imap, np.int32)
        want = _expanded_product(np.take(ext, imap, axis=-1), b, key, qs)
        for isa in ISAS:
            native.set_isa(isa)
            got = np.asarray(native.key_product(jnp.asarray(ext), jnp.asarray(b), qs[:4], stream=key,
                                                index_map=imap))
            assert np.array_equal(got, want), isa


def test_key_product_at_31_bit_moduli_with_many_digits():
    """31-bit moduli: a 64-bit lane holds only 4 products below (q - 1)^2, so the wide path folds its sums midway
    (12 digits: three folds); every operand at q - 1, the largest sums. Every instruction set."""
    qs = np.asarray(nt.ntt_primes(31, 2, 64), np.uint32)
    ext = np.broadcast_to((qs - 1)[None, :, None], (12, 2, 64)).astype(np.uint32).copy()
    b = np.broadcast_to((qs - 1)[None, None, :, None], (12, 1, 2, 64)).astype(np.uint32).copy()
    key = np.arange(8, dtype=np.uint32)
    want = _expanded_product(ext, b, key, qs)
    full = np.concatenate([b, np.asarray(prng.uniform_rows(key, qs, digits=12, n=64))[:, None]], axis=1)
    for isa in ISAS:
        native.set_isa(isa)
        assert np.array_equal(np.asarray(native.key_product(jnp.asarray(ext), jnp.asarray(b), qs, stream=key)), want)
        # the plain inner product (its wide path on AVX-512), on the same extremes
        assert np.array_equal(np.asarray(native.inner_product(jnp.asarray(ext), jnp.asarray(full), qs)), want)


def test_keyswitch_inner_product_dispatches_compact_keys(native_on):
    """ks.inner_product with a compact KeyMaterial: the native seeded product on CPU, the expanded JAX product when
    the library is off; both equal the full key's product (also under jit and vmap)."""
    rng = np.random.default_rng(5)
    n, num_p, num_q = 64, 2, 3
    qs = _moduli(n, num_p + num_q)
    plan = ks.ntt_kernels.make_plan(n, list(qs), "native")
    ext, b, _ = _operands(rng, (2,), 2, num_p + num_q, n, 3, num_p + num_q)
    key = rng.integers(0, 2**32, size=8, dtype=np.uint32)
    compact = KeyMaterial(jnp.asarray(b), jnp.asarray(key))
    full = ks.key_rows(compact, plan, digits=3, rows=num_p + num_q)
    want = np.asarray(ks.inner_product(jnp.asarray(ext), KeyMaterial(full), plan, num_p=num_p, num_q=num_q))
    got = ks.inner_product(jnp.asarray(ext), compact, plan, num_p=num_p, num_q=num_q)
    assert np.array_equal(np.asarray(got), want)
    jitted = jax.jit(lambda e, k: ks.inner_product(e, k, plan, num_p=num_p, num_q=num_q))
    assert np.array_equal(np.asarray(jitted(jnp.asarray(ext), compact)), want)
    assert "hemx_key_product" in jitted.lower(jnp.asarray(ext), compact).as_text()
    # with an index map: the product of the permuted digits, the permutation inside the kernel
    idx = jnp.asarray(ks.automorphism.ntt_index_map(n, 5))
    permuted = ks.automorphism.apply_ntt_automorphism(jnp.asarray(ext), idx)
    want_perm = np.asarray(ks.inner_product(permuted, KeyMaterial(full), plan, num_p=num_p, num_q=num_q))
    for k in (compact, KeyMaterial(full)):
        assert np.array_equal(np.asarray(ks.inner_product(jnp.asarray(ext), k, plan, num_p=num_p, num_q=num_q,
                                                          index_map=idx)), want_perm)
    mapped = jax.vmap(lambda e: ks.inner_product(e, compact, plan, num_p=num_p, num_q=num_q))
    assert np.array_equal(np.asarray(mapped(jnp.asarray(ext))), want)
    with native.disabled():
        assert np.array_equal(np.asarray(ks.inner_product(jnp.asarray(ext), compact, plan, num_p=num_p,
                                                          num_q=num_q)), want)


def test_compact_keys_export_for_accelerators_without_a_native_call():
    """The cuda / tpu lowering of a key switch with a compact key generates the rows in JAX: no custom call."""
    n, num_p, num_q = 64, 2, 3
    qs = _moduli(n, num_p + num_q)
    plan = ks.ntt_kernels.make_plan(n, list(qs), "native")
    ext = jax.ShapeDtypeStruct((2, num_p + num_q, n), jnp.uint32)
    key = KeyMaterial(jax.ShapeDtypeStruct((2, 1, num_p + num_q, n), jnp.uint32),
                      jax.ShapeDtypeStruct((8,), jnp.uint32))
    fn = jax.jit(lambda e, k: ks.inner_product(e, k, plan, num_p=num_p, num_q=num_q))
    for platform in ("cuda", "tpu"):
        text = jax.export.export(fn, platforms=[platform])(ext, key).mlir_module()
        assert "hemx_" not in text and "custom_call" not in text.replace("stablehlo.custom_call @Sharding", "")


# ------------------------------------------------------------------------------------- AES-128 counter rows


def _aes_engines() -> list[str]:
    return native.runnable_aes() if native.has_aes_streams() else []


@pytest.fixture
def aes_streams():
    if not native.has_aes_streams():
        pytest.skip(f"{native.library_path()} predates the aes128ctr streams")
    yield
    native.set_aes("auto")


def test_aes_engines_listed_and_refused(aes_streams):
    engines = _aes_engines()
    assert engines[-1] == "soft" and native.aes_engine() == engines[0]  # the best this CPU runs, by default
    with open("/proc/cpuinfo", encoding="utf-8") as fh:
        flags = fh.read()
    if " aes " in flags or " aes\n" in flags:
        assert "aesni" in engines
    if " vaes" in flags and " avx512f" in flags:
        assert engines[0] == "vaes"
    missing = [e for e in native.AES_ENGINES if e not in engines]
    for name in missing + ["des"]:
        with pytest.raises(hemx_errors.ParameterError):
            native.set_aes(name)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("n", [16, 17, 1000])
def test_aes_rows_match_the_reference_on_every_engine(aes_streams, isa, n):
    from tests.kernels.test_prng import aes_rows_ref

    native.set_isa(isa)
    key = np.arange(8, dtype=np.uint32) * 0x01000193 + 11
    moduli = list(EDGE_MODULI[:3]) + list(_moduli(64, 3))
    want = aes_rows_ref(key, moduli, 2, n)
    assert np.array_equal(np.asarray(prng.uniform_rows(key, moduli, digits=2, n=n, xof="aes128ctr")), want)
    for engine in _aes_engines():
        native.set_aes(engine)
        got = np.asarray(native.uniform(key, moduli, digits=2, n=n, xof="aes128ctr"))
        assert np.array_equal(got, want), (isa, engine)


def test_aes_rows_at_n_2_16_agree_across_engines_threads_and_jax(aes_streams):
    key = np.arange(8, dtype=np.uint32) + 3
    moduli = _moduli(1 << 16, 4)
    want = np.asarray(prng.uniform_rows(key, moduli, digits=2, n=1 << 16, xof="aes128ctr"))
    for engine in _aes_engines():
        native.set_aes(engine)
        for inline in (None, 0):
            native.set_inline_residues(inline)
            assert np.array_equal(np.asarray(native.uniform(key, moduli, digits=2, n=1 << 16, xof="aes128ctr")),
                                  want), (engine, inline)


@pytest.mark.parametrize("isa", ISAS)
def test_key_product_with_aes_keys(aes_streams, isa):
    """A compact key of the aes128ctr expansion: its rows generated in the kernel equal the key expanded first, on
    every AES engine, with and without an index map."""
    native.set_isa(isa)
    rng = np.random.default_rng(5)
    lead, digits, m, n = (2,), 3, 4, 2048
    ext, b, qs = _operands(rng, lead, digits, m, n, digits, m)
    key = rng.integers(0, 2**32, size=8, dtype=np.uint32)
    a = np.asarray(prng.uniform_rows(key, qs[:m], digits=digits, n=n, xof="aes128ctr"))
    full = jnp.asarray(np.concatenate([b, a[:, None]], axis=1))
    perm = rng.permutation(n).astype(np.int32)
    table = M.make_modulus_table([int(q) for q in qs[:m]], (m, 1))
    want = np.asarray(M.mul_sum(jnp.asarray(ext), full, table, method="jax"))  # the JAX reference product
    want_perm = np.asarray(M.mul_sum(jnp.asarray(np.take(ext, perm, axis=-1)), full, table, method="jax"))
    for engine in _aes_engines():
        native.set_aes(engine)
        got = native.key_product(jnp.asarray(ext), jnp.asarray(b), qs[:m], stream=key, xof="aes128ctr")
        assert np.array_equal(np.asarray(got), want), engine
        got = native.key_product(jnp.asarray(ext), jnp.asarray(b), qs[:m], stream=key, index_map=perm, xof="aes128ctr")
        assert np.array_equal(np.asarray(got), want_perm), engine
    with pytest.raises(hemx_errors.ParameterError, match="seed expansion"):
        native.key_product(jnp.asarray(ext), jnp.asarray(b), qs[:m], stream=key, xof="aes256")


def test_an_unknown_xof_code_is_refused_by_the_handler(aes_streams):
    """A direct FFI call with an xof code the kernels do not know fails cleanly (no rows of an unknown stream)."""
    q = np.asarray(_moduli(64, 1), np.uint32)
    call = jax.ffi.ffi_call("hemx_uniform", jax.ShapeDtypeStruct((1, 1, 64), jnp.uint32))
    with pytest.raises(Exception, match="xof must be 0"):
        np.asarray(call(np.zeros(1, np.int32), np.zeros(8, np.uint32), q, n=np.int64(64), xof=np.int64(7)))
