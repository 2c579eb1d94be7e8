"""hemx.kernels.native beyond the NTT: basis conversion, the key-switching inner product (``mul_sum``) and the
NTT-domain automorphism and the grouped plaintext-product sums of a baby-step / giant-step transform, bit-exact against the JAX kernels and the Python-integer references on every
instruction-set path this CPU has, under jit and vmap; the kernels' ``method="auto"`` dispatch (native where
the program is lowered for CPU, JAX for cuda/tpu exports and with ``HEMX_NATIVE=0``); native NTT plans
restricted to limbs read the ring's tables by row.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hemx import nt
from hemx.errors import BackendError, ParameterError, ShapeError
from hemx.kernels import automorphism as A
from hemx.kernels import bconv as BC
from hemx.kernels import modarith as M
from hemx.kernels import native
from hemx.kernels import ntt as K
from tests.helpers import reference as ref
from tests.helpers.native import supported_isas

jax.config.update("jax_enable_x64", True)  # the JAX reference kernels (Barrett products) need uint64

ISAS = supported_isas()  # the native_on fixture is in conftest.py
SLOW = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BITS = (17, 28, 30, 31)  # 31-bit moduli take every path at its range limit


def _residues(rng, moduli, shape, edge: bool):
    """uint32 residues ``(L, n)``, row ``i`` mod ``moduli[i]``; ``edge`` mixes in 0, 1, q//2, q//2 + 1 and q - 1 (the
    centering threshold and the range ends) at about half the positions."""
    nl, n = shape
    q = np.asarray(moduli, np.int64).reshape(nl, 1)
    x = rng.integers(0, q, size=(nl, n))
    if edge:
        picks = np.concatenate([np.zeros_like(q), np.ones_like(q), q // 2, q // 2 + 1, q - 1], axis=1)  # (L, 5)
        chosen = np.take_along_axis(picks, rng.integers(0, 5, size=(nl, n)), axis=1)
        x = np.where(rng.random((nl, n)) < 0.5, chosen, x)
    return x.astype(np.uint32)


def _moduli(n, bits_src, bits_dst, nsrc, ndst):
    src = nt.ntt_primes(bits_src, nsrc, n)
    dst = nt.ntt_primes(bits_dst, ndst, n, exclude=src)
    return src, dst


# ------------------------------------------------------------------------------------------ basis conversion


@SLOW
@given(
    shape=st.sampled_from([(16, 1, 2), (16, 4, 3), (32, 3, 5)]),
    bits=st.tuples(st.sampled_from(BITS), st.sampled_from(BITS)),
    centered=st.booleans(),
    edge=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_bconv_matches_reference(shape, bits, centered, edge, seed):
    n, nl, nlp = shape
    src, dst = _moduli(n, bits[0], bits[1], nl, nlp)
    rng = np.random.default_rng(seed)
    x = _residues(rng, src, (nl, n), edge)
    plan = BC.make_bconv_plan(src, dst, centered=centered)
    out = np.asarray(BC.bconv(jnp.asarray(x), plan, method="native"))
    conv = ref.bconv_centered if centered else ref.bconv
    want = np.array([conv([int(v) for v in x[:, k]], src, dst) for k in range(n)], dtype=np.int64).T
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(out, np.asarray(BC.bconv(jnp.asarray(x), plan, method="elementwise")))


@pytest.mark.parametrize("centered", [False, True])
def test_bconv_isas_match_bat(centered):
    n = 1 << 10  # several coefficient blocks per polynomial, batched
    src, dst = _moduli(n, 31, 28, 6, 5)
    rng = np.random.default_rng(7)
    x = jnp.asarray(np.stack([_residues(rng, src, (6, n), edge) for edge in (True, False, True)]))
    plan = BC.make_bconv_plan(src, dst, centered=centered)
    want = np.asarray(BC.bconv(x, plan, method="bat"))
    f = jax.jit(lambda v, p: BC.bconv(v, p, method="native"))
    for isa in ISAS:  # the instruction set is picked when the kernel runs: one compiled call serves all
        native.set_isa(isa)
        np.testing.assert_array_equal(np.asarray(f(x, plan)), want, err_msg=isa)


def test_bconv_vmap_and_threads():
    n = 256
    src, dst = _moduli(n, 28, 30, 3, 4)
    rng = np.random.default_rng(1)
    plan = BC.make_bconv_plan(src, dst, centered=True)
    x = jnp.asarray(np.stack([_residues(rng, src, (3, n), False) for _ in range(4)]))
    want = np.asarray(BC.bconv(x, plan, method="elementwise"))
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda v: BC.bconv(v, plan, method="native"))(x)), want)
    native.set_max_threads(1)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: BC.bconv(v, plan))(x)), want)
    native.set_max_threads(0)
    native.set_inline_residues(0)  # the threaded path on this small input
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda v: BC.bconv(v, plan, method="native"))(x)), want)
    # batched tables (one plan per batch member) map the call over the batch
    plans = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), plan)
    out = jax.vmap(lambda v, p: BC.bconv(v, p, method="native"))(x[:2], plans)
    np.testing.assert_array_equal(np.asarray(out), want[:2])


def test_bconv_bad_input():
    src, dst = _moduli(16, 28, 28, 2, 2)
    plan = BC.make_bconv_plan(src, dst)
    with pytest.raises(ShapeError):
        BC.bconv(jnp.zeros((3, 16), jnp.uint32), plan, method="native")
    with pytest.raises(ShapeError):
        native.bconv(jnp.zeros((2, 16), jnp.int32), plan)
    with pytest.raises(ParameterError):
        BC.bconv(jnp.zeros((2, 16), jnp.uint32), plan, method="nope")


# --------------------------------------------------------------------------------- key-switching inner product


@SLOW
@given(
    shape=st.sampled_from([(1, 1, 1, 16), (3, 2, 2, 16), (5, 2, 3, 32)]),
    bits=st.sampled_from(BITS),
    edge=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_mul_sum_matches_reference(shape, bits, edge, seed):
    d, k, m, n = shape
    qs = nt.ntt_primes(bits, m, n)
    rng = np.random.default_rng(seed)
    a = np.stack([_residues(rng, qs, (m, n), edge) for _ in range(d)])  # (D, m, N)
    b = np.stack([np.stack([_residues(rng, qs, (m, n), edge) for _ in range(k)]) for _ in range(d)])  # (D, K, m, N)
    table = M.make_modulus_table(qs)
    out = np.asarray(M.mul_sum(jnp.asarray(a), jnp.asarray(b), table, method="native"))
    q = np.asarray(qs, dtype=object).reshape(1, m, 1)
    want = (a.astype(object)[:, None] * b.astype(object)).sum(axis=0) % q
    assert out.shape == (k, m, n)
    np.testing.assert_array_equal(out.astype(object), want)
    np.testing.assert_array_equal(out, np.asarray(M.mul_sum(jnp.asarray(a), jnp.asarray(b), table, method="jax")))


def test_mul_sum_isas_batched():
    qs = nt.ntt_primes(31, 3, 128) + nt.ntt_primes(28, 2, 128)
    rng = np.random.default_rng(3)
    a = jnp.asarray(np.stack([np.stack([_residues(rng, qs, (5, 128), True) for _ in range(3)]) for _ in range(2)]))
    b = jnp.asarray(np.stack([np.stack([_residues(rng, qs, (5, 128), True) for _ in range(2)]) for _ in range(3)]))
    table = M.make_modulus_table(qs)
    want = np.asarray(M.mul_sum(a, b, table, method="jax"))
    f = jax.jit(lambda x, y: M.mul_sum(x, y, table))
    for isa in ISAS:
        native.set_isa(isa)
        np.testing.assert_array_equal(np.asarray(f(a, b)), want, err_msg=isa)
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda x: M.mul_sum(x, b, table, method="native"))(a)), want)
    # a batched key maps the call over the batch
    out = jax.vmap(lambda x, y: M.mul_sum(x, y, table, method="native"))(a, jnp.stack([b, b]))
    np.testing.assert_array_equal(np.asarray(out), want)


def test_mul_sum_bad_input():
    qs = nt.ntt_primes(28, 2, 16)
    table = M.make_modulus_table(qs)
    with pytest.raises(ShapeError):
        M.mul_sum(jnp.zeros((3, 2, 16), jnp.uint32), jnp.zeros((2, 2, 2, 16), jnp.uint32), table)
    with pytest.raises(ShapeError):
        native.inner_product(jnp.zeros((1, 2, 16), jnp.uint32), jnp.zeros((1, 2, 2, 16), jnp.uint32), np.zeros(3))
    with pytest.raises(ParameterError):
        M.mul_sum(jnp.zeros((1, 2, 16), jnp.uint32), jnp.zeros((1, 2, 2, 16), jnp.uint32), table, method="x")
    with pytest.raises(Exception, match="odd"):  # an even modulus is refused by the kernel itself
        jax.block_until_ready(native.inner_product(jnp.zeros((1, 2, 16), jnp.uint32),
                                                   jnp.zeros((1, 2, 2, 16), jnp.uint32), np.array([4, 7])))


# ------------------------------------------------------------------------------- grouped plaintext-product sums


def _plain_case(rng, qs, *, batch, k, n, parts, ndiag, pieces, groups, edge):
    """Random parts ``(*batch, K, m, N)``, diagonals (``pieces`` row blocks ``(r, N / b)`` of a random period ``b``,
    a zero-row block allowed) and ``groups`` random groups of 1-4 terms; with the Python-integer sums."""
    m = len(qs)
    xs = [np.stack([_residues(rng, qs, (m, n), edge) for _ in range(int(np.prod(batch, dtype=int)) * k)])
          .reshape(*batch, k, m, n) for _ in range(parts)]
    diags = []
    for _ in range(ndiag):
        width = n // int(rng.choice([b for b in (1, 2, 4, 16, n) if n % b == 0]))
        cuts = np.sort(rng.integers(0, m + 1, size=pieces - 1))
        rows = np.diff(np.concatenate([[0], cuts, [m]]))
        full = _residues(rng, qs, (m, width), edge)
        diags.append(tuple(full[a:a + r] for a, r in zip(np.cumsum(rows) - rows, rows)))
    grps = tuple(tuple((int(rng.integers(parts)), int(rng.integers(ndiag))) for _ in range(int(rng.integers(1, 5))))
                 for _ in range(groups))
    q = np.asarray(qs, dtype=object).reshape(m, 1)
    want = []
    for g in grps:
        acc = 0
        for i, d in g:
            w = np.concatenate(diags[d], axis=0).astype(object)
            acc = acc + xs[i].astype(object) * np.repeat(w, n // w.shape[1], axis=1)
        want.append(acc % q)
    return xs, diags, grps, want


@SLOW
@given(
    case=st.sampled_from([((), 1, 16, 1, 1, 1, 1), ((), 2, 64, 3, 4, 2, 3), ((2,), 2, 32, 2, 3, 3, 2),
                          ((), 1, 4096, 2, 3, 2, 2)]),
    bits=st.sampled_from(BITS),
    edge=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_plain_sums_match_reference(case, bits, edge, seed):
    batch, k, n, parts, ndiag, pieces, groups = case
    qs = nt.ntt_primes(bits, 3, n)
    rng = np.random.default_rng(seed)
    xs, diags, grps, want = _plain_case(rng, qs, batch=batch, k=k, n=n, parts=parts, ndiag=ndiag, pieces=pieces,
                                        groups=groups, edge=edge)
    table = M.make_modulus_table(qs)
    jx = [jnp.asarray(x) for x in xs]
    jd = [tuple(jnp.asarray(w) for w in d) for d in diags]
    out = M.plain_sums(jx, jd, grps, table, method="native")
    assert len(out) == len(grps)
    for o, w, j in zip(out, want, M.plain_sums(jx, jd, grps, table, method="jax")):
        assert o.shape == xs[0].shape and o.dtype == jnp.uint32
        np.testing.assert_array_equal(np.asarray(o).astype(object), w)
        np.testing.assert_array_equal(np.asarray(j).astype(object), w)


def test_plain_sums_isas_chunks_and_vmap():
    """Every instruction set on N = 2^13 (several column chunks), 31- and 28-bit moduli mixed, many terms per group
    (the lane sums' headroom), the q - 1 extreme everywhere; under jit the dispatch picks the kernel; vmap over the
    parts is one call, over the diagonals a map."""
    n = 8192
    qs = nt.ntt_primes(31, 3, n) + nt.ntt_primes(28, 2, n)
    q = np.asarray(qs, np.uint32).reshape(5, 1)
    rng = np.random.default_rng(11)
    xs = [np.broadcast_to(q - 1, (2, 5, n)).copy() for _ in range(3)] + [
        np.stack([_residues(rng, qs, (5, n), True) for _ in range(2)]) for _ in range(3)]
    diags = [(np.broadcast_to(q - 1, (5, n // b)).copy(),) for b in (1, 16)]
    diags += [(_residues(rng, qs, (5, n), True)[:2], _residues(rng, qs, (5, n), True)[2:]) for _ in range(2)]
    diags = [tuple(np.concatenate(d)[r] for r in (slice(0, 2), slice(2, 5))) for d in diags]
    grps = (tuple((i % 6, i % 4) for i in range(40)), ((0, 0), (1, 1)), ((5, 3),))
    table = M.make_modulus_table(qs)
    jx = tuple(jnp.asarray(x) for x in xs)
    jd = tuple(tuple(jnp.asarray(w) for w in d) for d in diags)
    want = [np.asarray(w) for w in M.plain_sums(jx, jd, grps, table, method="jax")]
    f = jax.jit(lambda a, d: M.plain_sums(a, d, grps, table))
    for isa in ISAS:
        native.set_isa(isa)
        for o, w in zip(f(jx, jd), want):
            np.testing.assert_array_equal(np.asarray(o), w, err_msg=isa)
    native.set_isa("auto")
    bx = tuple(jnp.stack([x, x[::-1]]) for x in jx)
    out = jax.vmap(lambda a: M.plain_sums(a, jd, grps, table, method="native"))(bx)
    for o, w in zip(out, want):
        np.testing.assert_array_equal(np.asarray(o[0]), w)
        np.testing.assert_array_equal(np.asarray(o[1])[::-1], w)
    bd = tuple(tuple(jnp.stack([w, w]) for w in d) for d in jd)
    out = jax.vmap(lambda d: M.plain_sums(jx, d, grps, table, method="native"))(bd)
    for o, w in zip(out, want):
        np.testing.assert_array_equal(np.asarray(o[1]), w)
    # a reference in Python integers for the all-(q - 1) group
    big = (np.asarray(want[1]).astype(object))
    qo = q.astype(object)
    np.testing.assert_array_equal(big, ((qo - 1) * (qo - 1) + xs[1].astype(object) * (qo - 1)) % qo)


def test_plain_sums_bad_input():
    qs = nt.ntt_primes(28, 2, 16)
    table = M.make_modulus_table(qs)
    x = jnp.zeros((1, 2, 16), jnp.uint32)
    w = (jnp.zeros((2, 16), jnp.uint32),)
    for parts, diags, grps in [
        ((x, jnp.zeros((1, 2, 32), jnp.uint32)), (w,), (((0, 0),),)),  # parts of two shapes
        ((x.astype(jnp.int32),), (w,), (((0, 0),),)),  # not uint32
        ((x,), (w,), ()),  # no group
        ((x,), (w,), ((),)),  # an empty group
        ((x,), (w,), (((1, 0),),)),  # no such part
        ((x,), (w,), (((0, 1),),)),  # no such diagonal
        ((x,), ((jnp.zeros((1, 16), jnp.uint32),),), (((0, 0),),)),  # rows do not sum to m
        ((x,), ((jnp.zeros((2, 3), jnp.uint32),),), (((0, 0),),)),  # width does not divide N
        ((x,), (w, (w[0][:1], w[0][1:])), (((0, 0), (0, 1)),)),  # diagonals of different block counts
    ]:
        with pytest.raises(ShapeError):
            native.plain_sums(parts, diags, grps, np.asarray(qs))
    with pytest.raises(ShapeError):
        native.plain_sums((x,), (w,), (((0, 0),),), np.asarray(qs[:1]))
    with pytest.raises(ParameterError):
        M.plain_sums((x,), (w,), (((0, 0),),), table, method="x")


# ------------------------------------------------------------------------------------------------ automorphism


def test_automorphism_matches_jax_and_coefficients():
    n = 64
    qs = nt.ntt_primes(31, 2, n)
    plan = K.make_plan(n, qs, "butterfly")
    rng = np.random.default_rng(5)
    coef = _residues(rng, qs, (2, n), True)
    x = jax.jit(K.ntt)(jnp.asarray(coef), plan)
    f = jax.jit(lambda v, i: A.apply_ntt_automorphism(v, i, method="native"))
    back = jax.jit(K.intt)
    for g in (A.galois_element(n, 1), A.galois_element(n, -3), A.conjugation_element(n)):
        idx = A.ntt_index_map(n, g)
        for isa in ISAS:
            native.set_isa(isa)
            out = np.asarray(f(x, idx))
            np.testing.assert_array_equal(out, np.asarray(A.apply_ntt_automorphism(x, idx, method="jax")), err_msg=isa)
        # the reference: X -> X^g on coefficients, then the NTT
        dest, sign = A.coeff_index_map(n, g)
        want = np.zeros_like(coef, dtype=np.int64)
        for li, q in enumerate(qs):
            want[li, dest] = (sign * coef[li].astype(np.int64)) % q
        np.testing.assert_array_equal(np.asarray(back(jnp.asarray(out), plan)), want)


def test_automorphism_vmap_and_errors():
    n = 32
    idx = A.ntt_index_map(n, A.galois_element(n, 2))
    x = jnp.asarray(np.random.default_rng(0).integers(0, 2**31, (3, 2, 4, n)), jnp.uint32)
    want = np.asarray(A.apply_ntt_automorphism(x, idx, method="jax"))
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda v: A.apply_ntt_automorphism(v, idx, method="native"))(x)),
                                  want)
    maps = jnp.stack([jnp.asarray(idx)] * 3)
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda v, i: native.automorphism(v, i))(x, maps)), want)
    with pytest.raises(ShapeError):
        native.automorphism(x, idx[:-1])
    with pytest.raises(ParameterError):
        native.automorphism(x, np.full(n, n, np.int32))
    with pytest.raises(Exception, match="out of range"):  # a traced map is checked by the kernel
        jax.block_until_ready(jax.jit(native.automorphism)(x, jnp.full(n, -1, jnp.int32)))
    with pytest.raises(ParameterError):
        A.apply_ntt_automorphism(x, idx, method="gpu")


# ------------------------------------------------------------------------------------------ dispatch rule


def _three_kernels():
    n = 64
    src, dst = _moduli(n, 28, 28, 3, 3)
    plan = BC.make_bconv_plan(src, dst, centered=True)
    table = M.make_modulus_table(dst)
    idx = jnp.asarray(A.ntt_index_map(n, A.galois_element(n, 1)))
    x = jnp.zeros((3, n), jnp.uint32)
    e, key = jnp.zeros((2, 3, n), jnp.uint32), jnp.zeros((2, 2, 3, n), jnp.uint32)

    def f(x, e, key):
        return BC.bconv(x, plan), M.mul_sum(e, key, table), A.apply_ntt_automorphism(x, idx)

    return f, (x, e, key)


def test_auto_is_native_on_cpu_and_jax_in_cuda_exports():
    f, args = _three_kernels()
    cpu = jax.jit(f).lower(*args).as_text()
    for target in ("hemx_bconv", "hemx_inner_product", "hemx_automorphism"):
        assert target in cpu
    cuda = jax.export.export(jax.jit(f), platforms=["cuda"])(*args).mlir_module()
    assert "hemx_" not in cuda and "custom_call" not in cuda


def test_auto_respects_env_switch(monkeypatch):
    monkeypatch.setenv("HEMX_NATIVE", "0")
    f, args = _three_kernels()
    assert "hemx_" not in jax.jit(f).lower(*args).as_text()
    with pytest.raises(BackendError):
        BC.bconv(args[0], BC.make_bconv_plan(*_moduli(64, 28, 28, 3, 3)), method="native")


# ---------------------------------------------------------------------------- native NTT plans by row


def test_native_plan_limb_selection_reads_rows():
    n = 64
    qs = nt.ntt_primes(31, 3, n) + nt.ntt_primes(28, 3, n)
    fwd = jax.jit(lambda v, p: K.ntt(v, p))
    nat, bfly = K.make_plan(n, qs, "native"), K.make_plan(n, qs, "butterfly")
    rng = np.random.default_rng(2)
    x = jnp.asarray(_residues(rng, qs, (6, n), True))
    for sel in (slice(1, 5), (5, 0, 3), (4,)):
        pn, pb = K.select_limbs(nat, sel), K.select_limbs(bfly, sel)
        assert pn.butterfly.fwd.value.shape == (6, n) and pn.butterfly.rows.shape == (pn.num_limbs,)
        part = x[np.arange(6)[sel] if isinstance(sel, slice) else np.asarray(sel)]
        y = fwd(part, pn)
        np.testing.assert_array_equal(np.asarray(y), np.asarray(fwd(part, pb)))
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda v, p: K.intt(v, p))(y, pn)), np.asarray(part))
    # a selection of a selection composes the rows; a traced limb index works too
    pn = K.select_limbs(K.select_limbs(nat, slice(2, 6)), (3, 1))
    np.testing.assert_array_equal(np.asarray(pn.butterfly.rows), [5, 3])
    one = jax.jit(lambda v, i: K.ntt(v, K.select_limb_dynamic(nat, i)))(x[4:5], jnp.int32(4))
    np.testing.assert_array_equal(np.asarray(one), np.asarray(fwd(x[4:5], K.select_limbs(bfly, (4,)))))
