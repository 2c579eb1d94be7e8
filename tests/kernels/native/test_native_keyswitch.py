"""The fused native key-switching passes (issue 15): ModUp (``hemx_modup``) and the rounding division by dropped
limbs that ModDown and rescaling share (``hemx_divide``), bit-exact against the JAX kernels (run with the native
library disabled) for several levels and digit layouts (a partial last digit included), batch axes, 28/30/31-bit
moduli and every instruction-set path this CPU has, under jit and vmap; ``hemx.ckks.keyswitch`` dispatches to them
on CPU and keeps them out of cuda exports.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hemx import nt
from hemx.ckks import keyswitch as ks
from hemx.errors import ShapeError
from hemx.bench.bootstrap_profile import custom_call_counts
from hemx.kernels import automorphism as A
from hemx.kernels import bconv as BC
from hemx.kernels import modarith as M
from hemx.kernels import native
from hemx.kernels import ntt as K
from tests.helpers.native import supported_isas

jax.config.update("jax_enable_x64", True)  # the JAX reference kernels (Barrett products) need uint64


@pytest.fixture(autouse=True)
def fused_kernels(native_on):  # native_on (conftest.py): HEMX_NATIVE cleared, the library present
    if not native.has_fused_keyswitch():  # a library built before these kernels (rebuild: python hemx/kernels/native/_build.py)
        pytest.skip(f"{native.library_path()} predates hemx_modup / hemx_divide")


ISAS = supported_isas()
# every example compiles its own programs (its digit layout, limb counts and batch shape are static): 6 examples
FEW = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.lru_cache(maxsize=None)
def _ring(n: int, bits_q: int, bits_p: int, num_q: int, num_p: int, method: str):
    """``(ps, qs, plan over P + Q)``: special primes first, as in a context's ring."""
    qs = nt.ntt_primes(bits_q, num_q, n)
    ps = nt.ntt_primes(bits_p, num_p, n, exclude=qs)
    return ps, qs, K.make_plan(n, ps + qs, method)


def _digits(num_q: int, dsize: int) -> tuple[tuple[int, int], ...]:
    return tuple((lo, min(lo + dsize, num_q)) for lo in range(0, num_q, dsize))


def _residues(rng, moduli, lead, n):
    """uint32 ``lead + (L, n)``, row ``i`` mod ``moduli[i]``, with the range ends and centering threshold mixed in."""
    q = np.asarray(moduli, np.int64).reshape(len(moduli), 1)
    x = rng.integers(0, q, size=lead + (len(moduli), n))
    edge = np.stack(np.broadcast_arrays(q * 0, q - 1, q // 2, q // 2 + 1), axis=-1)[..., 0, :]  # (L, 4)
    pick = edge[np.arange(len(moduli))[:, None], rng.integers(0, 4, size=(len(moduli), n))]
    return np.where(rng.random(x.shape) < 0.2, pick, x).astype(np.uint32)


def _known(values, moduli):
    return M.known_operand(np.array([[v % q] for v, q in zip(values, moduli)], np.int64),
                           np.array(moduli, np.int64).reshape(-1, 1))


def _modup_fn(digits, num_p, num_q):
    return jax.jit(lambda v, p, m: ks.modup(v, p, m, digits=digits, num_p=num_p, num_q=num_q))


def _modup_case(n, bits, num_q, num_p, dsize, lead, seed):
    ps, qs_all, nat = _ring(n, bits, 31, 12, num_p, "native")
    bfly = _ring(n, bits, 31, 12, num_p, "butterfly")[2]
    qs = qs_all[:num_q]  # a lower level: the first num_q primes of Q
    digits = _digits(num_q, dsize)
    mps = tuple(BC.make_bconv_plan(qs[lo:hi], ps + qs[:lo] + qs[hi:], centered=True) for lo, hi in digits)
    x = jnp.asarray(_residues(np.random.default_rng(seed), qs, lead, n))
    return nat, bfly, digits, mps, x


# ------------------------------------------------------------------------------------------------ ModUp


@FEW
@given(
    bits=st.sampled_from([28, 30, 31]),
    layout=st.sampled_from([(12, 4), (12, 5), (7, 3), (5, 5), (3, 1), (1, 4)]),  # (num_q, digit size)
    num_p=st.sampled_from([1, 3, 4]),
    lead=st.sampled_from([(), (2,), (2, 1)]),
    seed=st.integers(0, 2**32 - 1),
)
def test_modup_matches_jax(bits, layout, num_p, lead, seed):
    num_q, dsize = layout
    nat, bfly, digits, mps, x = _modup_case(64, bits, num_q, num_p, dsize, lead, seed)
    # the reference gets a jitted function of its own: jit caches a trace per function and argument structure,
    # not per native.disabled() block, so the butterfly plan's call below would otherwise rerun the JAX trace
    f, jax_f = _modup_fn(digits, num_p, num_q), _modup_fn(digits, num_p, num_q)
    with native.disabled():
        want = np.asarray(jax_f(x, bfly, mps))
    assert want.shape == lead + (len(digits), num_p + num_q, 64)
    for plan in (nat, bfly):  # both plans with butterfly tables take the fused call on CPU
        np.testing.assert_array_equal(np.asarray(f(x, plan, mps)), want)


@functools.lru_cache(maxsize=None)
def _modup_sizes_case(n: int):
    """``(f, nat, mps, x, want)`` for one size, shared by every instruction set: the library picks the instruction
    set when the kernel runs, so the programs compiled for the first one serve the others."""
    nat, bfly, digits, mps, x = _modup_case(n, 30, 10, 3, 4, (2,), 7)  # digits 4, 4, 2
    with native.disabled():
        want = np.asarray(_modup_fn(digits, 3, 10)(x, bfly, mps))
    return _modup_fn(digits, 3, 10), nat, mps, x, want


@pytest.mark.parametrize("isa", ISAS)
def test_modup_isas_and_sizes(isa):
    native.set_isa(isa)
    for n in (16, 4096):  # below the SIMD width's transforms (scalar fallback) and a realistic size
        f, nat, mps, x, want = _modup_sizes_case(n)
        assert native.isa() == isa
        np.testing.assert_array_equal(np.asarray(f(x, nat, mps)), want)


def test_modup_vmap_threads_and_direct_call():
    nat, bfly, digits, mps, x = _modup_case(256, 31, 7, 2, 3, (3,), 11)
    f = _modup_fn(digits, 2, 7)
    with native.disabled():
        want = np.asarray(f(x, bfly, mps))
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda v: f(v, nat, mps))(x)), want)
    direct = jax.jit(lambda v, p, m: native.modup(v, p, m, digits=digits, num_p=2))
    for inline, threads in ((None, 1), (None, 2), (None, 0), (0, 2), (0, 0)):  # 0: threaded even when small
        native.set_inline_residues(inline)
        native.set_max_threads(threads)
        np.testing.assert_array_equal(np.asarray(direct(x, nat, mps)), want)
    with pytest.raises(ShapeError):
        native.modup(x, nat, mps, digits=((0, 3), (4, 7)), num_p=2)  # a gap
    with pytest.raises(ShapeError):
        native.modup(x, nat, mps[:2], digits=digits, num_p=2)


# a rotation's fused form: ModUp of part 1 of a ciphertext (..., 2, num_q, N), its limbs read through the map


def _index_map(n: int, rng, kind: str):
    """An automorphism's map (a random odd Galois element), any permutation, or None."""
    if kind == "galois":
        return jnp.asarray(A.ntt_index_map(n, int(2 * rng.integers(1, n) + 1) % (2 * n)))
    if kind == "permutation":
        return jnp.asarray(rng.permutation(n).astype(np.int32))
    return None


def _modup_part_fn(digits, num_p, num_q, part):
    return jax.jit(lambda v, p, m, imap: ks.modup(v, p, m, digits=digits, num_p=num_p, num_q=num_q, part=part,
                                                  index_map=imap))


@FEW
@given(
    bits=st.sampled_from([28, 31]),
    layout=st.sampled_from([(12, 4), (7, 3), (3, 1)]),
    lead=st.sampled_from([(), (2,)]),
    part=st.sampled_from([0, 1]),
    kind=st.sampled_from(["galois", "permutation", "none"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_modup_of_a_part_through_a_map_matches_jax(bits, layout, lead, part, kind, seed):
    num_q, dsize = layout
    nat, bfly, digits, mps, x = _modup_case(64, bits, num_q, 3, dsize, lead + (2,), seed)
    imap = _index_map(64, np.random.default_rng(seed), kind)
    f, jax_f = _modup_part_fn(digits, 3, num_q, part), _modup_part_fn(digits, 3, num_q, part)
    with native.disabled():  # the JAX path: the slice, the automorphism, then ModUp
        want = np.asarray(jax_f(x, bfly, mps, imap))
    assert want.shape == lead + (len(digits), 3 + num_q, 64)
    # the same as the steps apart, natively
    sliced = x[..., part, :, :] if imap is None else native.automorphism(x[..., part, :, :], imap)
    np.testing.assert_array_equal(np.asarray(_modup_fn(digits, 3, num_q)(sliced, nat, mps)), want)
    for plan in (nat, bfly):
        np.testing.assert_array_equal(np.asarray(f(x, plan, mps, imap)), want)


# --------------------------------------------------------------------------------- ModDown and rescale


def _divide_case(n, bits, num_q, num_p, drop, lead, seed):
    ps, qs_all, nat = _ring(n, bits, 31, 12, num_p, "native")
    bfly = _ring(n, bits, 31, 12, num_p, "butterfly")[2]
    qs = qs_all[:num_q]
    rng = np.random.default_rng(seed)
    acc = jnp.asarray(_residues(rng, ps + qs, lead, n))  # a key switch's accumulator over [P, Q_l]
    big_p = math.prod(ps)
    down = (BC.make_bconv_plan(ps, qs, centered=True), _known([pow(big_p, -1, q) for q in qs], qs))
    kept, dropped = qs[: num_q - drop], qs[num_q - drop :]
    big_d = math.prod(dropped)
    resc = (BC.make_bconv_plan(dropped, kept, centered=True), _known([pow(big_d, -1, q) for q in kept], kept))
    both = (BC.make_bconv_plan(ps + dropped, kept, centered=True),
            _known([pow(big_p * big_d, -1, q) for q in kept], kept))
    return nat, bfly, acc, down, resc, both


@FEW
@given(
    bits=st.sampled_from([28, 30, 31]),
    shape=st.sampled_from([(12, 4, 1), (12, 3, 2), (5, 1, 1), (2, 4, 1), (7, 2, 3)]),  # (num_q, num_p, drop)
    lead=st.sampled_from([(), (2,), (1, 2)]),
    seed=st.integers(0, 2**32 - 1),
)
def test_divide_matches_jax(bits, shape, lead, seed):
    num_q, num_p, drop = shape
    m = num_p + num_q
    nat, bfly, acc, (dplan, pinv), (rplan, dinv), (bplan, binv) = _divide_case(64, bits, num_q, num_p, drop, lead,
                                                                              seed)
    kw = dict(reduction="shoup")
    k = num_q - drop  # rescale: the top primes of Q_l

    def divisions():
        moddown = jax.jit(lambda a, p, c, i: ks.moddown(a, p, c, i, num_p=num_p, num_q=num_q, **kw))
        rescale = jax.jit(lambda a, p, c, i: ks.divide_by_dropped(
            a[..., num_p : num_p + k, :], a[..., num_p + k :, :], p, c, i, keep=(num_p, num_p + k),
            drop=(num_p + k, m), **kw))
        # the folded rescale's division: P and the top primes dropped together (two ranges)
        both = jax.jit(lambda a, p, c, i: ks.divide_by_dropped(
            a[..., num_p : num_p + k, :], jnp.concatenate([a[..., :num_p, :], a[..., num_p + k :, :]], axis=-2), p,
            c, i, keep=(num_p, num_p + k), drop=((0, num_p), (num_p + k, m)), **kw))
        return moddown, rescale, both

    # the references get jitted functions of their own (jit caches a trace per function and argument structure,
    # not per native.disabled() block: the butterfly plan's call would otherwise rerun the JAX trace)
    tables = ((dplan, pinv), (rplan, dinv), (bplan, binv))
    for f, jax_f, tabs in zip(divisions(), divisions(), tables):
        with native.disabled():
            want = np.asarray(jax_f(acc, bfly, *tabs))
        for plan in (nat, bfly):
            np.testing.assert_array_equal(np.asarray(f(acc, plan, *tabs)), want)


@functools.lru_cache(maxsize=None)
def _divide_isas_case():
    """Shared by every instruction set (picked when the kernel runs: one set of compiled programs serves all)."""
    num_q, num_p = 6, 3
    nat, bfly, acc, (dplan, pinv), _, _ = _divide_case(4096, 30, num_q, num_p, 1, (2,), 3)

    def moddown():
        return jax.jit(lambda a, p: ks.moddown(a, p, dplan, pinv, num_p=num_p, num_q=num_q, reduction="barrett"))

    with native.disabled():
        want = np.asarray(moddown()(acc, bfly))
    # the kernel reads any rows of one array: the same division with the rows permuted
    perm = np.random.default_rng(5).permutation(num_p + num_q)
    where = np.argsort(perm)  # row of limb i in the permuted array
    direct = jax.jit(lambda a, p: native.divide_by_dropped(
        a, ks.limb_plan(p, num_p, num_p + num_q), ks.limb_plan(p, 0, num_p), dplan, pinv,
        keep_rows=where[num_p:], drop_rows=where[:num_p]))
    return num_q, num_p, nat, acc, dplan, pinv, moddown(), want, perm, where, direct


@pytest.mark.parametrize("isa", ISAS)
def test_divide_isas_vmap_and_rows(isa):
    native.set_isa(isa)
    num_q, num_p, nat, acc, dplan, pinv, f, want, perm, where, direct = _divide_isas_case()
    assert native.isa() == isa
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda a: f(a, nat))(acc)), want)
    for inline, threads in ((None, 1), (None, 0), (0, 0)):  # inline 0: threaded even when small
        native.set_inline_residues(inline)
        native.set_max_threads(threads)
        np.testing.assert_array_equal(np.asarray(direct(acc[..., perm, :], nat)), want)
    with pytest.raises(ShapeError):
        native.divide_by_dropped(acc, ks.limb_plan(nat, num_p, num_p + num_q), ks.limb_plan(nat, 0, num_p), dplan,
                                 pinv, keep_rows=where[num_p:], drop_rows=(99,) * num_p)


# a rotation's fused ModDown: the result's first part plus a part of an addend, read through a map


def _moddown_add_fn(num_p, num_q, part):
    return jax.jit(lambda a, p, c, i, add, imap: ks.moddown(a, p, c, i, num_p=num_p, num_q=num_q, reduction="shoup",
                                                          addend=add, addend_part=part, index_map=imap))


@FEW
@given(
    bits=st.sampled_from([28, 31]),
    shape=st.sampled_from([(12, 4), (5, 1), (7, 2)]),  # (num_q, num_p)
    lead=st.sampled_from([(), (3,)]),
    parts=st.sampled_from([(2, 2, 0), (2, 2, 1), (2, 1, 0), (1, 3, 2)]),  # (S, A, addend_part)
    kind=st.sampled_from(["galois", "permutation", "none"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_moddown_with_an_addend_matches_jax(bits, shape, lead, parts, kind, seed):
    num_q, num_p = shape
    s, a, part = parts
    nat, bfly, acc, (dplan, pinv), _, _ = _divide_case(64, bits, num_q, num_p, 1, lead + (s,), seed)
    rng = np.random.default_rng(seed)
    _, qs_all, _ = _ring(64, bits, 31, 12, num_p, "native")
    add = jnp.asarray(_residues(rng, qs_all[:num_q], lead + (a,), 64))
    imap = _index_map(64, rng, kind)
    f, jax_f = _moddown_add_fn(num_p, num_q, part), _moddown_add_fn(num_p, num_q, part)
    with native.disabled():
        want = np.asarray(jax_f(acc, bfly, dplan, pinv, add, imap))
    # the same as the steps apart: ModDown, then the permuted addend part added to the first part
    down = np.asarray(jax.jit(lambda v, p: ks.moddown(v, p, dplan, pinv, num_p=num_p, num_q=num_q,
                                                      reduction="shoup"))(acc, nat)).astype(np.int64)
    term = np.asarray(add[..., part, :, :] if imap is None else native.automorphism(add[..., part, :, :], imap))
    q = np.asarray(qs_all[:num_q], np.int64).reshape(-1, 1)
    down[..., 0, :, :] = (down[..., 0, :, :] + term) % q
    np.testing.assert_array_equal(want, down.astype(np.uint32))
    for plan in (nat, bfly):
        np.testing.assert_array_equal(np.asarray(f(acc, plan, dplan, pinv, add, imap)), want)


@functools.lru_cache(maxsize=None)
def _fused_isas_case():
    """One realistic size for every instruction set: a ModUp of c1 through a map and the ModDown adding c0."""
    nat, bfly, digits, mps, x = _modup_case(4096, 30, 7, 3, 3, (2, 2), 5)
    _, _, acc, (dplan, pinv), _, _ = _divide_case(4096, 30, 7, 3, 1, (2, 2), 6)
    imap = jnp.asarray(A.ntt_index_map(4096, 5 ** 7 % 8192))
    up, down = _modup_part_fn(digits, 3, 7, 1), _moddown_add_fn(3, 7, 0)
    with native.disabled():
        want = (np.asarray(_modup_part_fn(digits, 3, 7, 1)(x, bfly, mps, imap)),
                np.asarray(_moddown_add_fn(3, 7, 0)(acc, bfly, dplan, pinv, x, imap)))
    return nat, mps, x, acc, dplan, pinv, imap, up, down, want


@pytest.mark.parametrize("isa", ISAS)
def test_fused_rotation_passes_isas_threads_and_vmap(isa):
    native.set_isa(isa)
    nat, mps, x, acc, dplan, pinv, imap, up, down, (want_up, want_down) = _fused_isas_case()
    assert native.isa() == isa
    for inline, threads in ((None, 1), (0, 0)):  # inline 0: threaded even when small
        native.set_inline_residues(inline)
        native.set_max_threads(threads)
        np.testing.assert_array_equal(np.asarray(up(x, nat, mps, imap)), want_up)
        np.testing.assert_array_equal(np.asarray(down(acc, nat, dplan, pinv, x, imap)), want_down)
    native.set_inline_residues(None)
    native.set_max_threads(0)
    # vmap over the leading axis: of both the accumulator and the addend (one call), of the accumulator alone
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda v: up(v, nat, mps, imap))(x)), want_up)
    np.testing.assert_array_equal(
        np.asarray(jax.vmap(lambda a, c: down(a, nat, dplan, pinv, c, imap))(acc, x)), want_down)
    fixed = np.asarray(jax.vmap(lambda a: down(a, nat, dplan, pinv, x[0], imap))(acc))
    with native.disabled():
        ref = np.asarray(_moddown_add_fn(3, 7, 0)(acc, nat, dplan, pinv, jnp.broadcast_to(x[0], x.shape), imap))
    np.testing.assert_array_equal(fixed, ref)


def test_fused_rotation_is_bit_identical_to_the_steps_apart():
    """Context.rotate on the Max-Parallel dataflow (the fused passes) against the Digit-Centric one (the
    automorphism, then the key switch of c1, then c0 added), and hoisted rotations against single ones; the
    rotation's program is three native calls (ModUp, key product, ModDown), no automorphism or stacking pass."""
    import warnings

    from hemx.ckks import CKKSParameters, Context, InsecureParametersWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = CKKSParameters.create(log_n=10, levels=4, base_bits=(30, 30), dnum=2, allow_insecure=True)
    ctx = Context(params)
    keys = ctx.keygen(rotations=[1, 3], conjugation=True)
    x = np.random.default_rng(2).uniform(-1, 1, ctx.slots)
    ct = ctx.encrypt(x, keys)
    for c in (ct, ctx.drop_level(ct, 2)):
        got = ctx.rotate(c, 3, keys)
        np.testing.assert_array_equal(np.asarray(got.data), np.asarray(ctx.rotate(c, 3, keys, keyswitch="dc").data))
        np.testing.assert_array_equal(np.asarray(ctx.conjugate(c, keys).data),
                                      np.asarray(ctx.conjugate(c, keys, keyswitch="dc").data))
        many = ctx.rotate_many(c, [1, 3], keys, stacked=True)
        for i, k in enumerate((1, 3)):
            np.testing.assert_array_equal(np.asarray(many.data[i]),
                                          np.asarray(ctx.rotate(c, k, keys, keyswitch="dc").data))
    assert np.max(np.abs(ctx.decrypt(ctx.rotate(ct, 3, keys), keys) - np.roll(x, -3))) < 1e-6
    hlo = jax.jit(lambda d: ctx.rotate(ct.replace(data=d), 1, keys).data).lower(ct.data).compile().as_text()
    assert custom_call_counts(hlo) == {"hemx_modup": 1, "hemx_key_product": 1, "hemx_divide": 1}


# ------------------------------------------------------------------------------------- dispatch, export


def _switch_parts():
    nat, bfly, digits, mps, x = _modup_case(64, 30, 7, 3, 3, (2,), 1)
    _, _, acc, (dplan, pinv), _, _ = _divide_case(64, 30, 7, 3, 1, (2,), 2)

    def f(v, a, p):
        ext = ks.modup(v, p, mps, digits=digits, num_p=3, num_q=7)
        return ext, ks.moddown(a, p, dplan, pinv, num_p=3, num_q=7, reduction="shoup")

    return f, x, acc, nat, bfly


def test_dispatch_on_cpu_and_pure_jax_exports(monkeypatch):
    f, x, acc, nat, bfly = _switch_parts()
    cpu = jax.jit(f).lower(x, acc, bfly).as_text()
    assert "hemx_modup" in cpu and "hemx_divide" in cpu
    for platform in ("cuda", "tpu"):  # a butterfly plan's export holds no custom call
        text = jax.export.export(jax.jit(f), platforms=[platform])(x, acc, bfly).mlir_module()
        assert "hemx_" not in text and "custom_call" not in text
    with native.disabled():  # (a fresh function each time: jit caches traces per function)
        assert "hemx_" not in jax.jit(lambda *a: f(*a)).lower(x, acc, bfly).as_text()
    monkeypatch.setenv("HEMX_NATIVE", "0")
    assert "hemx_" not in jax.jit(lambda *a: f(*a)).lower(x, acc, bfly).as_text()
