"""hemx.kernels.bconv: fast basis conversion against the formula and against CRT."""

from __future__ import annotations

from math import gcd, prod

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import reference as ref
from hemx import nt
from hemx.errors import HemxError, ModulusError, ParameterError, ShapeError
from hemx.kernels import bconv as B

N = 16
REDUCTIONS = ["shoup", "montgomery", "barrett"]
_bconv = jax.jit(B.bconv, static_argnames="method")


def _coprime_odd(candidates, count):
    out = []
    for c in candidates:
        c |= 1
        if all(gcd(c, o) == 1 for o in out):
            out.append(c)
        if len(out) == count:
            break
    return out


odd_words = st.integers(20, 31).flatmap(lambda b: st.integers(2 ** (b - 1), 2**b - 1))


def _input(source, lead, seed):
    rng = np.random.default_rng(seed)
    x = np.stack([rng.integers(0, q, size=lead + (N,)) for q in source], axis=-2).astype(np.uint32)
    qcol = np.asarray(source, np.uint32).reshape(-1, 1)
    x[..., 0] = 0
    x[..., 1] = (qcol - 1).reshape(-1)
    x[..., 2] = 1
    x[..., 3] = (qcol // 2).reshape(-1)
    x[..., 4] = (qcol // 2 + 1).reshape(-1)
    return x


def _check_against_formula(x, source, target, out):
    out = np.asarray(out)
    assert out.dtype == np.uint32
    assert out.shape == x.shape[:-2] + (len(target), x.shape[-1])
    flat_x = x.reshape(-1, len(source), x.shape[-1])
    flat_o = out.reshape(-1, len(target), x.shape[-1])
    for t in range(flat_x.shape[0]):
        for c in range(x.shape[-1]):
            want = ref.bconv([int(v) for v in flat_x[t, :, c]], source, target)
            assert [int(v) for v in flat_o[t, :, c]] == want, (t, c)


def _check_crt_relation(x, source, target, out):
    """out_j = X + u Q (mod p_j) for the CRT value X of the input and one integer 0 <= u < L for all j."""
    big_q = prod(source)
    flat_x = x.reshape(-1, len(source), x.shape[-1])
    flat_o = np.asarray(out).reshape(-1, len(target), x.shape[-1])
    for t in range(flat_x.shape[0]):
        for c in range(x.shape[-1]):
            big_x = ref.crt([int(v) for v in flat_x[t, :, c]], source)
            us = [u for u in range(len(source))
                  if all((big_x + u * big_q) % p == int(flat_o[t, j, c]) for j, p in enumerate(target))]
            assert us, (t, c)


def _check_centered(x, source, target, out):
    """Centered conversion against Python integers: the formula (``ref.bconv_centered``) coefficient by
    coefficient, and the exact CRT relation out_j = X_c + u Q (mod p_j) with X_c the centered CRT value and
    |u| <= L/2 (the zero-mean error the centered variant exists for)."""
    big_q = prod(source)
    flat_x = x.reshape(-1, len(source), x.shape[-1])
    flat_o = np.asarray(out).reshape(-1, len(target), x.shape[-1])
    assert np.asarray(out).dtype == np.uint32
    for t in range(flat_x.shape[0]):
        for c in range(x.shape[-1]):
            res = [int(v) for v in flat_x[t, :, c]]
            got = [int(v) for v in flat_o[t, :, c]]
            assert got == ref.bconv_centered(res, source, target), (t, c)
            xc = ref.crt_centered(res, source)
            us = [u for u in range(-len(source), len(source) + 1)
                  if all((xc + u * big_q) % p == g for p, g in zip(target, got))]
            assert us and all(2 * abs(u) <= len(source) for u in us), (t, c, us)


@settings(deadline=None)
@given(
    st.sampled_from([(1, 3), (2, 2), (3, 2), (4, 3), (6, 1)]),
    st.sampled_from(["bat", "elementwise"]),
    st.sampled_from(REDUCTIONS),
    st.sampled_from([(), (2,)]),
    st.integers(0, 2**63 - 1),
)
def test_centered_bconv_matches_python_int_crt(sizes, method, reduction, lead, seed):
    nl, nlp = sizes
    moduli = nt.ntt_primes(28 + seed % 4, nl + nlp, 16)
    source, target = moduli[:nl], moduli[nl:]
    plan = B.make_bconv_plan(source, target, reduction=reduction, centered=True)
    assert plan.centered
    x = _input(source, lead, seed)
    _check_centered(x, source, target, _bconv(jnp.asarray(x), plan, method=method))


@settings(deadline=None)
@given(
    st.lists(odd_words, min_size=12, max_size=12),
    st.sampled_from([(1, 1), (3, 2), (2, 4), (5, 1)]),
    st.sampled_from(["bat", "elementwise", "auto"]),  # auto: element-wise for 1-2 source limbs, BAT above
    st.sampled_from(REDUCTIONS),
    st.sampled_from([8, 6]),
    st.sampled_from([(), (2,)]),
    st.integers(0, 2**63 - 1),
)
def test_bconv_matches_formula(cands, sizes, method, reduction, bp, lead, seed):
    nl, nlp = sizes
    moduli = _coprime_odd(cands, nl + nlp)
    if len(moduli) < nl + nlp:
        moduli += _coprime_odd(nt.ntt_primes(31, nl + nlp, 2), nl + nlp - len(moduli))
    # keep the set pairwise coprime after topping up
    if not ref.pairwise_coprime(moduli):
        moduli = nt.ntt_primes(30, nl + nlp, 4)
    source, target = moduli[:nl], moduli[nl:]
    plan = B.make_bconv_plan(source, target, bp=bp, reduction=reduction)
    x = _input(source, lead, seed)
    out = _bconv(jnp.asarray(x), plan, method=method)
    _check_against_formula(x, source, target, out)
    _check_crt_relation(x, source, target, out)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("method", ["bat", "elementwise"])
def test_bconv_ckks_like_bases(method, reduction):
    """Primes of a CKKS ring: 4 limbs of ~31/28 bits into 3 special primes, batched (2, 3, L, N)."""
    qs = nt.ntt_primes(31, 2, 2**12) + nt.ntt_primes(28, 2, 2**12)
    ps = nt.ntt_primes(30, 3, 2**12)
    plan = B.make_bconv_plan(qs, ps, reduction=reduction)
    x = _input(qs, (2, 3), seed=5)
    out = _bconv(jnp.asarray(x), plan, method=method)
    _check_against_formula(x, qs, ps, out)
    _check_crt_relation(x, qs, ps, out)


@pytest.mark.parametrize("method", ["bat", "elementwise"])
def test_bconv_of_known_integers(method):
    """Residues of known integers X convert to X + u Q (mod p_j) with one u in [0, L); zero converts to zero."""
    qs = nt.ntt_primes(31, 3, 16)
    ps = nt.ntt_primes(29, 2, 16)
    plan = B.make_bconv_plan(qs, ps)
    vals = [0, 1, 2, 12345, 2**31 - 2, 2**40 + 17]
    x = np.zeros((3, N), np.uint32)
    for c, v in enumerate(vals):
        x[:, c] = [v % q for q in qs]
    out = np.asarray(_bconv(jnp.asarray(x), plan, method=method))
    big_q = prod(qs)
    for c, v in enumerate(vals):
        # the result must be v + u Q for a common u in [0, 3)
        assert any(all(int(out[j, c]) == (v + u * big_q) % p for j, p in enumerate(ps)) for u in range(3))
    assert out[:, 0].tolist() == [0, 0]


def test_bconv_edge_all_max():
    qs = nt.ntt_primes(31, 4, 16)
    ps = [2**31 - 1, (1 << 30) + 3]  # odd, coprime to the primes above (not NTT-friendly; fine here)
    assert ref.pairwise_coprime(qs + ps)
    x = np.repeat(np.asarray(qs, np.uint32).reshape(-1, 1) - 1, N, axis=1)
    for reduction in REDUCTIONS:
        plan = B.make_bconv_plan(qs, ps, reduction=reduction)
        for method in ("bat", "elementwise", "auto"):
            out = _bconv(jnp.asarray(x), plan, method=method)
            _check_against_formula(x, qs, ps, out)


def test_bconv_plan_rejects_bad_bases():
    qs = nt.ntt_primes(30, 3, 16)
    with pytest.raises(ModulusError):
        B.make_bconv_plan([qs[0], qs[1], qs[0]], [qs[2]])  # duplicate source
    with pytest.raises(ModulusError):
        B.make_bconv_plan(qs[:2], [qs[2], qs[2]])  # duplicate target
    with pytest.raises(ModulusError):
        B.make_bconv_plan(qs[:2], [qs[1]])  # target overlaps source
    with pytest.raises(ParameterError):
        B.make_bconv_plan([], qs)
    with pytest.raises(ParameterError):
        B.make_bconv_plan(qs, [])
    with pytest.raises(ModulusError):
        B.make_bconv_plan(qs[:2], [2**20])  # even
    with pytest.raises(ModulusError):
        B.make_bconv_plan([2**31 + 11], qs[:1])  # too large
    with pytest.raises(ParameterError):
        B.make_bconv_plan(qs[:2], qs[2:], bp=9)


def test_bconv_plan_rejects_non_coprime_source_with_hemx_error():
    """Source moduli must be pairwise coprime; violating it is a user error and must raise a HemxError."""
    with pytest.raises(ModulusError, match="pairwise coprime") as info:
        B.make_bconv_plan([9, 15], [7])
    assert isinstance(info.value, HemxError)
    with pytest.raises(ModulusError, match="pairwise coprime"):
        B.make_bconv_plan([3 * 1000003, 5 * 1000003], [2**31 - 1])


def test_bconv_input_errors():
    qs = nt.ntt_primes(30, 3, 16)
    ps = nt.ntt_primes(28, 2, 16)
    plan = B.make_bconv_plan(qs, ps)
    good = np.zeros((3, N), np.uint32)
    for bad in (np.zeros((2, N), np.uint32), np.zeros((4, N), np.uint32), np.zeros((N,), np.uint32),
                good.astype(np.int32), good.astype(np.uint64)):
        with pytest.raises(ShapeError):
            B.bconv(jnp.asarray(bad), plan)
    with pytest.raises(ParameterError):
        B.bconv(jnp.asarray(good), plan, method="fft")
    with pytest.raises(ParameterError):
        bad_plan = B.make_bconv_plan(qs, ps, reduction="karatsuba")
        B.bconv(jnp.asarray(good), bad_plan)


def test_auto_method_picks_by_source_count_and_rejects_unknown(monkeypatch):
    qs = nt.ntt_primes(30, 6, 16)
    rng = np.random.default_rng(5)
    picked = []
    for name in ("matmul_step_bat", "matmul_step_elementwise"):
        real = getattr(B, name)
        monkeypatch.setattr(B, name, lambda y, plan, real=real, name=name: picked.append(name) or real(y, plan))
    for nl in (1, B.ELEMENTWISE_MAX_SOURCES, B.ELEMENTWISE_MAX_SOURCES + 1, 4):
        plan = B.make_bconv_plan(qs[:nl], qs[nl:], centered=True)
        x = jnp.asarray(np.stack([rng.integers(0, q, N, dtype=np.int64) for q in qs[:nl]]).astype(np.uint32))
        picked.clear()
        auto = np.asarray(jax.jit(lambda v, p: B.bconv(v, p))(x, plan))  # a fresh trace: the spies see the step
        assert picked == ["matmul_step_elementwise" if nl <= B.ELEMENTWISE_MAX_SOURCES else "matmul_step_bat"], nl
        outs = [np.asarray(_bconv(x, plan, method=m)) for m in ("bat", "elementwise")]
        assert np.array_equal(auto, outs[0]) and np.array_equal(auto, outs[1])
        _check_centered(np.asarray(x), qs[:nl], qs[nl:], auto)
    with pytest.raises(ParameterError):
        B.bconv(x, plan, method="fastest")


@pytest.mark.parametrize("lead", [(), (3,)])
def test_bat_conversion_in_column_blocks(monkeypatch, lead):
    """The GEMM split into column blocks (uneven last block, blocks crossing the batch axis) is still exact."""
    qs = nt.ntt_primes(30, 7, 16)
    source, target = qs[:4], qs[4:]
    plan = B.make_bconv_plan(source, target)
    x = _input(source, lead, 9)
    whole = np.asarray(jax.jit(B.bconv, static_argnames="method")(jnp.asarray(x), plan, method="bat"))
    monkeypatch.setattr(B, "GEMM_BLOCK_BYTES", 4 * plan.num * len(target) * 5)  # 5 columns per block
    blocked = np.asarray(jax.jit(B.bconv, static_argnames="method")(jnp.asarray(x), plan, method="bat"))
    assert np.array_equal(blocked, whole)
    _check_against_formula(x, source, target, blocked)
