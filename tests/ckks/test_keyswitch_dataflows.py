"""The three key-switching dataflows (Max-Parallel, Digit-Centric, Output-Centric) give identical ciphertexts,
and multiplications and rotations computed with each decrypt correctly."""

import functools
import warnings

import jax
import numpy as np
import pytest

import hemx
from hemx.ckks import Sampler
from hemx.ckks import keyswitch as ks
from hemx.ckks.security import InsecureParametersWarning
from hemx.errors import ParameterError
from hemx.plan import variants

from tests.helpers.ckks_helpers import check_bits

FLOWS = ("mp", "dc", "oc")


def _context(params, seed):
    # the NTT method does not matter here (all are exact); the static default (native where built) compiles fastest
    ctx = hemx.Context(params, sampler=Sampler.insecure_for_tests(seed))
    return ctx, ctx.keygen(rotations=[1, -2])


def _params(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return hemx.CKKSParameters.create(allow_insecure=True, **kw)


def _raw_keyswitch(ctx, keys, ct, flow, oc_tile=None):
    """The relinearization key switch of c1 alone (also at level 0, where a product could not be rescaled)."""
    t = ctx.level_tables(ct.level)
    fn = jax.jit(functools.partial(ks.keyswitch, num_p=ctx.num_p, reduction=ctx.reduction, dataflow=flow,
                                   oc_tile=oc_tile))
    return np.asarray(fn(ct.data[..., 1, :, :], keys.relin.material, ctx.plan, t))


def _folded_keyswitch(ctx, keys, a, b, flow, oc_tile=None):
    """``rescale(relinearize(a * b))`` through one dataflow and tile width, with the rescale folded."""
    from hemx.ckks import evaluator

    t = ctx.level_tables(a.level)
    d0, d1, d2 = evaluator.tensor(a.data, b.data, ctx.plan, num_p=ctx.num_p, num_q=t.num_q)
    fold = ks.RescaleFold(np.stack([np.asarray(d0), np.asarray(d1)], axis=-3), t.p_mod, t.fold_conv, t.fold_inv)
    fn = jax.jit(functools.partial(ks.keyswitch, num_p=ctx.num_p, reduction=ctx.reduction, dataflow=flow,
                                   oc_tile=oc_tile))
    return np.asarray(fn(d2, keys.relin.material, ctx.plan, t, fold=fold))


def _check_identical(ctx, keys, x, levels, tag, with_mul=False, oc_tiles=(), rotations=True):
    """At each level: raw key switches agree across dataflows (and Output-Centric tile widths); so do
    rotations, which decrypt correctly (``tag``: the parameter set's key in tests/helpers/expected.py)."""
    a = ctx.encrypt(x, keys)
    for level in levels:
        al = ctx.drop_level(a, level)
        raw = {f: _raw_keyswitch(ctx, keys, al, f) for f in FLOWS}
        for f in FLOWS[1:]:
            assert np.array_equal(raw[f], raw["mp"]), (f, level)
        for tile in oc_tiles:
            assert np.array_equal(_raw_keyswitch(ctx, keys, al, "oc", tile), raw["mp"]), (tile, level)
        if not rotations:
            continue
        rots = {f: ctx.rotate(al, -2, keys, keyswitch=f) for f in FLOWS}
        for f in FLOWS[1:]:
            assert np.array_equal(np.asarray(rots[f].data), np.asarray(rots["mp"].data)), (f, level)
        check_bits(f"{tag} oc rotate -2 level {level}", np.roll(x, 2, axis=-1), ctx.decrypt(rots["oc"], keys),
                   f"{tag}/ks_rotate")
    if not with_mul:
        return
    # a relinearized product through the Output-Centric schedule decrypts correctly
    b = ctx.encrypt(x[..., ::-1].copy(), keys)
    got = ctx.decrypt(ctx.rescale(ctx.mul(a, b, keys, keyswitch="oc", rescale=False)), keys)
    check_bits(f"{tag} oc mul + rescale", x * x[..., ::-1], got, f"{tag}/ks_mul")
    # the rescale folded into ModDown (RescaleFold) gives the same ciphertext in every dataflow and tile width
    folded = {f: np.asarray(ctx.mul(a, b, keys, rescale=True, keyswitch=f).data) for f in FLOWS}
    for f in FLOWS[1:]:
        assert np.array_equal(folded[f], folded["mp"]), f
    for tile in oc_tiles:
        fold = _folded_keyswitch(ctx, keys, a, b, "oc", tile)
        assert np.array_equal(fold, _folded_keyswitch(ctx, keys, a, b, "mp")), tile
    prod = ctx.mul(a, b, keys, rescale=True, keyswitch="oc")
    check_bits(f"{tag} oc mul, rescale folded", x * x[..., ::-1], ctx.decrypt(prod, keys), f"{tag}/ks_mul")


@pytest.mark.parametrize("dnum", [1, 2, 3, 4])
def test_dataflows_identical_every_dnum(dnum):
    # 7 limbs: not divisible by 2, 3 or 4
    params = _params(log_n=10, levels=2, base_bits=(31, 31, 31), dnum=dnum)
    assert params.num_limbs == 7
    ctx, keys = _context(params, 10 + dnum)
    x = np.random.default_rng(dnum).uniform(-1, 1, (2, ctx.slots))
    # every dnum at the top level; the bottom level (digits cut to the limbs left) once
    # dnum 3 in full: both levels, rotations through every schedule, Output-Centric tiles of one tower
    # (CiFlow's schedule) and of two (cut short at digit ends); the other dnums: raw key switches
    full = dnum == 3
    _check_identical(ctx, keys, x, [params.max_level, 0] if full else [params.max_level], "n10df",
                     oc_tiles=(1, 2) if full else (1,) if dnum == 2 else (), rotations=full, with_mul=full)


@pytest.mark.parametrize("name", ["set_a", pytest.param("set_b", marks=pytest.mark.slow)])
def test_dataflows_identical_cross_sets(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = hemx.CKKSParameters.preset(name, allow_insecure=True)
    ctx, keys = _context(params, 3)
    x = np.random.default_rng(7).uniform(-1, 1, ctx.slots)
    _check_identical(ctx, keys, x, [params.max_level], name, with_mul=(name == "set_a"))


@pytest.mark.slow
def test_dataflows_identical_set_c():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = hemx.CKKSParameters.preset("set_c", allow_insecure=True)
    ctx, keys = _context(params, 4)
    x = np.random.default_rng(8).uniform(-1, 1, ctx.slots)
    _check_identical(ctx, keys, x, [params.max_level], "set_c")


def test_context_default_dataflow_and_bad_name(monkeypatch):
    params = _params(log_n=10, levels=1, base_bits=(31, 31), dnum=2)
    # the context keeps the dataflow it is given, and otherwise the planner's choice for its memory budget
    sizes = variants.keyswitch_working_set(params.n, len(params.special_moduli), params.num_limbs, params.dnum)
    assert sizes["oc"] < sizes["dc"] < sizes["mp"]
    for budget, flow in ((sizes["mp"], "mp"), (sizes["mp"] - 1, "dc"), (sizes["dc"] - 1, "oc"), (None, "mp")):
        monkeypatch.setattr(variants, "memory_budget_bytes", lambda budget=budget: budget)
        assert hemx.Context(params, ntt="mat3").keyswitch == flow, budget
    for forced in FLOWS:
        assert hemx.Context(params, keyswitch=forced, ntt="mat3").keyswitch == forced
    monkeypatch.undo()
    ctx = hemx.Context(params, keyswitch="oc", sampler=Sampler.insecure_for_tests(1))
    assert ctx.keyswitch == "oc"
    keys = ctx.keygen(rotations=[1])
    x = np.linspace(-1, 1, ctx.slots)
    a = ctx.encrypt(x, keys)
    assert np.array_equal(np.asarray(ctx.rotate(a, 1, keys).data),
                          np.asarray(ctx.rotate(a, 1, keys, keyswitch="mp").data))
    with pytest.raises(ParameterError):
        hemx.Context(params, keyswitch="fast")
    with pytest.raises(ParameterError):
        ctx.mul(a, a, keys, keyswitch="xyz", rescale=False)


def test_output_tiles_cover_the_basis_once():
    digits = ((0, 3), (3, 6), (6, 7))
    for tile in (None, 1, 2, 3, 5):
        tiles = ks.output_tiles(digits, 3, tile)
        towers = [t for a, b, _ in tiles for t in range(a, b)]
        assert towers == list(range(10))
        for a, b, own in tiles:
            lo, hi = (0, 3) if own is None else (3 + digits[own][0], 3 + digits[own][1])
            assert lo <= a < b <= hi and b - a <= (2 if tile is None else tile)
    with pytest.raises(ParameterError):
        ks.output_tiles(digits, 3, 0)
    # a folded rescale drops the top towers: no tile straddles the split
    for tile in (None, 1, 2, 3, 5):
        for split in (8, 9):
            tiles = ks.output_tiles(digits, 3, tile, split=split)
            assert [t for a, b, _ in tiles for t in range(a, b)] == list(range(10))
            assert all(b <= split or a >= split for a, b, _ in tiles)
