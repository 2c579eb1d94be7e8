"""CKKSParameters: presets, security check, log QP accounting, validation errors and the digit layout."""

from __future__ import annotations

import dataclasses
import math
import warnings

import pytest

import hemx
from hemx import nt
from hemx.ckks import PRESETS, InsecureParametersWarning, max_log_qp
from hemx.ckks.security import MAX_LOG_QP_128_TERNARY, check_security
from hemx.errors import HemxError, ModulusError, ParameterError, SecurityError

from tests.helpers.ckks_helpers import INSECURE, small_params

CKKSParameters = hemx.CKKSParameters

# name -> (log_n, number of limbs, dnum) as documented next to PRESETS
INSECURE_PRESETS = {
    "set_a": (12, 4, 3),
    "set_b": (13, 8, 3),
    "set_c": (14, 15, 3),
    "set_d": (16, 51, 3),
}
SECURE_PRESETS = ["secure_13", "secure_14", "secure_15", "secure_16"]


# ------------------------------------------------------------------------------------------------ presets
@pytest.mark.parametrize("name", sorted(INSECURE_PRESETS))
def test_cross_presets_need_allow_insecure(name):
    with pytest.raises(SecurityError) as info:
        CKKSParameters.preset(name)
    assert "allow_insecure" in str(info.value)
    # SecurityError is a ParameterError, a HemxError and a ValueError
    assert isinstance(info.value, ParameterError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("name", sorted(INSECURE_PRESETS))
def test_cross_presets_with_allow_insecure(name):
    with pytest.warns(InsecureParametersWarning, match="exceeds the 128-bit bound"):
        p = CKKSParameters.preset(name, allow_insecure=True)
    log_n, limbs, dnum = INSECURE_PRESETS[name]
    assert p.name == name
    assert p.log_n == log_n and p.n == 1 << log_n
    assert p.num_limbs == limbs
    assert p.dnum == dnum
    assert len(p.special_moduli) == p.alpha == math.ceil(limbs / dnum)
    assert p.log_scale == 56
    assert not p.secure
    assert p.log_qp > max_log_qp(p.n)
    # every modulus is an NTT-friendly prime below 2^31, all distinct
    everything = p.moduli + p.special_moduli
    assert len(set(everything)) == len(everything)
    for q in everything:
        assert q < 1 << 31 and q % (2 * p.n) == 1 and nt.is_prime(q)
    # the base is what is left at level 0
    assert p.limbs_at_level(0) == p.level_sizes[0]
    assert p.limbs_at_level(p.max_level) == limbs


def test_preset_names_match_table():
    assert set(INSECURE_PRESETS) | set(SECURE_PRESETS) <= set(PRESETS)


@pytest.mark.parametrize("name", SECURE_PRESETS)
def test_secure_presets_pass_without_allow_insecure(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no InsecureParametersWarning (or anything else) may be emitted
        p = CKKSParameters.preset(name)
    assert p.secure
    assert p.log_qp <= max_log_qp(p.n)
    assert p.n == 1 << int(name.split("_")[1])
    assert "NOT" not in p.describe()


@pytest.mark.parametrize("name", ["warpdrive", "tensorfhe"])
def test_single_special_prime_presets(name):
    # dnum = L: one digit per limb and a single special prime
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        p = CKKSParameters.preset(name, allow_insecure=True)
    assert p.dnum == p.num_limbs
    assert p.alpha == 1 and len(p.special_moduli) == 1
    assert len(p.digits()) == p.num_limbs


def test_preset_overrides_and_unknown_name():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        p = CKKSParameters.preset("SET_B", allow_insecure=True, dnum=2)
    assert p.name == "set_b" and p.dnum == 2 and len(p.special_moduli) == 4
    with pytest.raises(ParameterError, match="unknown preset"):
        CKKSParameters.preset("set_z")


# ------------------------------------------------------------------------------------------------ log QP
def test_log_qp_counts_special_primes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        p = CKKSParameters.preset("set_b", allow_insecure=True)
    log_q = sum(math.log2(q) for q in p.moduli)
    log_p = sum(math.log2(q) for q in p.special_moduli)
    assert p.log_q == pytest.approx(log_q)
    assert p.log_qp == pytest.approx(log_q + log_p)
    assert p.log_qp - p.log_q == pytest.approx(log_p)
    assert log_p > 3 * 30  # three 31-bit special primes
    assert f"log QP={p.log_qp:.0f}" in p.describe()


def test_special_primes_decide_security():
    # N = 2^13 allows log QP <= 218. Six limbs (about 174 bits of Q) are fine with one special prime
    # (dnum = 6) but not with six of them (dnum = 1): log Q alone would pass, log QP does not.
    ok = CKKSParameters.create(13, levels=2, dnum=6)
    assert ok.log_q < 218 and ok.log_qp <= 218 and ok.secure
    with pytest.raises(SecurityError, match="log2\\(QP\\)"):
        CKKSParameters.create(13, levels=2, dnum=1)
    with pytest.warns(InsecureParametersWarning):
        bad = CKKSParameters.create(13, levels=2, dnum=1, allow_insecure=True)
    assert bad.log_q < 218 < bad.log_qp
    assert bad.log_q == pytest.approx(ok.log_q, abs=1.0)


def test_security_table_and_check():
    assert max_log_qp(1 << 15) == 881 and max_log_qp(1 << 16) == 1772
    assert max_log_qp(1 << 17) is None
    assert sorted(MAX_LOG_QP_128_TERNARY) == [1 << k for k in range(10, 17)]
    assert check_security(1 << 12, 109, sparse_secret=False, allow_insecure=False)
    with pytest.raises(SecurityError):
        check_security(1 << 12, 109.5, sparse_secret=False, allow_insecure=False)
    with pytest.raises(SecurityError, match="no entry"):
        check_security(1 << 17, 100, sparse_secret=False, allow_insecure=False)
    with pytest.warns(InsecureParametersWarning):
        assert check_security(1 << 12, 500, sparse_secret=False, allow_insecure=True) is False


def test_small_n_needs_allow_insecure():
    with pytest.raises(SecurityError):
        CKKSParameters.create(10, levels=1)
    p = small_params(10, 1)
    assert p.allow_insecure and not p.secure


# ------------------------------------------------------------------------------------------------ bad inputs
def _fields(**changes):
    """Keyword arguments of a valid N = 2^10 parameter set (4 limbs, dnum 2, 2 special primes) with changes."""
    n = 1 << 10
    primes = nt.ntt_primes(30, 6, n)
    kw = dict(log_n=10, moduli=tuple(primes[:4]), level_sizes=(2, 2), special_moduli=tuple(primes[4:]), dnum=2,
              log_scale=40.0, allow_insecure=True)
    kw.update(changes)
    return kw


@pytest.mark.filterwarnings(INSECURE)
def test_direct_construction_valid():
    p = CKKSParameters(**_fields())
    assert p.num_limbs == 4 and p.max_level == 1 and p.alpha == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.dnum = 3


@pytest.mark.filterwarnings(INSECURE)
def test_non_ntt_friendly_modulus():
    n = 1 << 10
    q = next(q for q in range((1 << 29) + 1, 1 << 30, 2) if nt.is_prime(q) and q % (2 * n) != 1)
    base = _fields()
    with pytest.raises(ModulusError, match="not NTT-friendly"):
        CKKSParameters(**_fields(moduli=(q,) + base["moduli"][1:]))
    with pytest.raises(ModulusError, match="not NTT-friendly"):
        CKKSParameters(**_fields(special_moduli=(base["special_moduli"][0], q)))


@pytest.mark.filterwarnings(INSECURE)
def test_other_bad_moduli():
    n = 1 << 10
    base = _fields()
    composite = next(m for m in range(1 + 2 * n * 1000, 1 << 30, 2 * n) if not nt.is_prime(m))
    with pytest.raises(ModulusError, match="not prime"):
        CKKSParameters(**_fields(moduli=(composite,) + base["moduli"][1:]))
    big = nt.ntt_primes(32, 1, n)[0]
    assert big >= 1 << 31
    with pytest.raises(ModulusError, match="2\\^31"):
        CKKSParameters(**_fields(moduli=(big,) + base["moduli"][1:]))
    with pytest.raises(ModulusError, match="distinct"):
        CKKSParameters(**_fields(special_moduli=(base["moduli"][0], base["special_moduli"][1])))
    # ModulusError is a ParameterError, hence a HemxError
    assert issubclass(ModulusError, ParameterError) and issubclass(ModulusError, HemxError)


@pytest.mark.filterwarnings(INSECURE)
@pytest.mark.parametrize("dnum", [0, -1, 5, 100])
def test_dnum_out_of_range_direct(dnum):
    with pytest.raises(ParameterError, match="dnum"):
        CKKSParameters(**_fields(dnum=dnum))


@pytest.mark.filterwarnings(INSECURE)
@pytest.mark.parametrize("dnum", [0, -2])
def test_dnum_out_of_range_create(dnum):
    # create() is the documented constructor; a non-positive dnum is bad input and must raise a hemx error
    with pytest.raises(ParameterError):
        CKKSParameters.create(10, levels=1, dnum=dnum, allow_insecure=True)


@pytest.mark.filterwarnings(INSECURE)
def test_create_clamps_large_dnum():
    p = CKKSParameters.create(10, levels=1, dnum=100, allow_insecure=True)
    assert p.dnum == p.num_limbs == 4 and p.alpha == 1


@pytest.mark.filterwarnings(INSECURE)
def test_too_few_special_primes():
    base = _fields()
    with pytest.raises(ParameterError, match="special primes"):
        CKKSParameters(**_fields(special_moduli=base["special_moduli"][:1]))


@pytest.mark.filterwarnings(INSECURE)
@pytest.mark.parametrize("sizes", [(2, 1), (1, 1, 1, 2), (4, 0), (1, 3), (0, 2, 2)])
def test_bad_level_sizes(sizes):
    with pytest.raises(ParameterError, match="level"):
        CKKSParameters(**_fields(level_sizes=sizes))


@pytest.mark.filterwarnings(INSECURE)
def test_single_prime_levels_and_large_base_are_fine():
    p = CKKSParameters(**_fields(level_sizes=(3, 1)))
    assert p.max_level == 1 and p.limbs_at_level(0) == 3
    p = CKKSParameters(**_fields(level_sizes=(1, 1, 1, 1)))
    assert p.max_level == 3 and [p.limbs_at_level(l) for l in range(4)] == [1, 2, 3, 4]


@pytest.mark.filterwarnings(INSECURE)
@pytest.mark.parametrize("h", [0, -5, (1 << 10) + 1])
def test_bad_hamming_weight(h):
    with pytest.raises(ParameterError, match="hamming_weight"):
        CKKSParameters(**_fields(hamming_weight=h))
    with pytest.raises(ParameterError, match="hamming_weight"):
        CKKSParameters.create(10, levels=1, hamming_weight=h, allow_insecure=True)


def test_sparse_secret_is_not_covered_by_the_table():
    # a fine log QP but a sparse secret: the HE-standard table does not apply, so it needs allow_insecure
    with pytest.raises(SecurityError, match="sparse"):
        CKKSParameters.create(13, levels=2, dnum=6, hamming_weight=64)
    with pytest.warns(InsecureParametersWarning, match="sparse"):
        p = CKKSParameters.create(13, levels=2, dnum=6, hamming_weight=64, allow_insecure=True)
    assert p.hamming_weight == 64 and not p.secure


@pytest.mark.filterwarnings(INSECURE)
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(log_n=1), "log_n"),
        (dict(log_n=18), "log_n"),
        (dict(log_scale=0.5), "log_scale"),
        (dict(log_scale=63), "log_scale"),
        (dict(sigma=0.0), "sigma"),
        (dict(sigma=-3.2), "sigma"),
    ],
)
def test_other_out_of_range_fields(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        CKKSParameters(**_fields(**kwargs))


@pytest.mark.filterwarnings(INSECURE)
def test_create_argument_errors():
    with pytest.raises(ParameterError, match="primes_per_level"):
        CKKSParameters.create(10, levels=1, primes_per_level=3, allow_insecure=True)
    with pytest.raises(ParameterError, match="levels"):
        CKKSParameters.create(10, levels=-1, allow_insecure=True)


@pytest.mark.filterwarnings(INSECURE)
def test_limbs_at_level():
    p = small_params(10, 3)
    assert p.level_sizes == (2, 2, 2, 2)
    assert [p.limbs_at_level(l) for l in range(4)] == [2, 4, 6, 8]
    assert p.max_level == 3 and p.max_slots == 512
    for bad in (-1, 4):
        with pytest.raises(ParameterError):
            p.limbs_at_level(bad)


@pytest.mark.filterwarnings(INSECURE)
def test_create_layout():
    p = small_params(11, 2, base_bits=(31, 31, 30))
    assert p.level_sizes == (3, 2, 2) and p.num_limbs == 7
    assert [q.bit_length() for q in p.moduli] == [31, 31, 30, 28, 28, 28, 28]
    assert all(q.bit_length() == 31 for q in p.special_moduli)
    assert p.log_scale == 56 and p.scale == 2.0 ** 56
    p1 = small_params(11, 3, primes_per_level=1)
    assert p1.level_sizes == (2, 1, 1, 1) and p1.log_scale == 28


# ------------------------------------------------------------------------------------------------ digits
@pytest.mark.filterwarnings(INSECURE)
@pytest.mark.parametrize("limbs", [1, 2, 3, 4, 7, 8, 15, 51])
def test_digits_are_balanced_and_cover_all_limbs(limbs):
    n = 1 << 10
    primes = nt.ntt_primes(30, limbs + limbs, n)
    for dnum in range(1, limbs + 1):
        alpha = math.ceil(limbs / dnum)
        p = CKKSParameters(log_n=10, moduli=tuple(primes[:limbs]), level_sizes=(limbs,),
                           special_moduli=tuple(primes[limbs: limbs + alpha]), dnum=dnum, log_scale=20.0,
                           allow_insecure=True)
        digits = p.digits()
        assert len(digits) == dnum
        assert digits[0][0] == 0 and digits[-1][1] == limbs
        for (lo, hi), (lo2, _) in zip(digits, digits[1:]):
            assert hi == lo2  # consecutive, no gap, no overlap
        sizes = [hi - lo for lo, hi in digits]
        assert min(sizes) >= 1
        assert max(sizes) - min(sizes) <= 1  # balanced
        assert max(sizes) == p.alpha == alpha
        assert sum(sizes) == limbs
        assert sorted(sizes, reverse=True) == sizes  # the larger digits come first


@pytest.mark.filterwarnings(INSECURE)
def test_digits_examples():
    p = small_params(10, 3, dnum=3)  # 8 limbs
    assert p.digits() == ((0, 3), (3, 6), (6, 8))
    p = small_params(10, 2, dnum=3, base_bits=(31, 31, 31))  # 7 limbs
    assert p.digits() == ((0, 3), (3, 5), (5, 7))
    assert len(p.special_moduli) == 3


def test_level_bits_lay_out_prime_sizes_level_by_level():
    """level_bits gives each level its own prime size (level 1 first); the default scale is level 1's."""
    bits = (20, 20, 24, 24, 20)
    p = hemx.CKKSParameters.create(10, levels=5, level_bits=bits, base_bits=(31, 31), allow_insecure=True)
    assert p.log_scale == 40
    per_level = [[math.ceil(math.log2(q)) for q in p.moduli[2 + 2 * i: 4 + 2 * i]] for i in range(5)]
    assert per_level == [[b, b] for b in bits]
    assert len(set(p.moduli + p.special_moduli)) == len(p.moduli) + len(p.special_moduli)
    same = hemx.CKKSParameters.create(10, levels=5, prime_bits=20, base_bits=(31, 31), allow_insecure=True)
    assert same.moduli == hemx.CKKSParameters.create(10, levels=5, level_bits=(20,) * 5, base_bits=(31, 31),
                                                     allow_insecure=True).moduli
    with pytest.raises(ParameterError, match="level_bits"):
        hemx.CKKSParameters.create(10, levels=5, level_bits=(20,) * 4, allow_insecure=True)
    for bad in ((20, 20, 20, 20, 32), (20, 20, 20, 20, 1), "20", 20, (20.5,) * 5):
        with pytest.raises(ParameterError, match="level_bits"):
            hemx.CKKSParameters.create(10, levels=5, level_bits=bad, allow_insecure=True)
    with pytest.raises(SecurityError):  # the fast pre-check counts every level's own bits
        hemx.CKKSParameters.create(16, levels=25, level_bits=(31,) * 25, base_bits=(31, 31, 31), dnum=3)
