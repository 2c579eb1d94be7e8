"""Full-size parameter sets with the default context configuration (butterfly NTT, Shoup reduction).

Set D (CROSS Tab. IV): N = 2^16, 51 limbs (three 28-bit base primes + 24 levels of two 28-bit primes), dnum 3,
17 special primes. Set C: N = 2^14, 15 limbs, here with a batch of 8 ciphertexts. Precision is asserted on the
worst and on the median slot at the figures measured for each operation less the margin, from the shared table
``tests/helpers/expected.py`` (keys ``set_d/...`` and ``set_c/...``), which ``docs/results/ckks-cpu.md`` quotes.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import hemx
from hemx.ckks import InsecureParametersWarning, Sampler

from tests.helpers.ckks_helpers import INSECURE, bits_of, check_bits, uniform
from tests.helpers import expected

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings(INSECURE)]



def preset(name: str) -> hemx.CKKSParameters:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        return hemx.CKKSParameters.preset(name, allow_insecure=True)


@pytest.fixture(scope="module")
def set_d():
    params = preset("set_d")
    assert params.n == 1 << 16 and params.num_limbs == 51 and params.dnum == 3 and len(params.special_moduli) == 17
    ctx = hemx.Context(params, sampler=Sampler.insecure_for_tests(16))
    keys = ctx.keygen(rotations=[5])
    rng = np.random.default_rng(16)
    x, y = uniform(rng, ctx.slots), uniform(rng, ctx.slots)
    return ctx, keys, x, y, ctx.encrypt(x, keys), ctx.encrypt(y, keys)


def check(label, want, got, key):
    return check_bits(label, want, got, key, median=key)


def test_set_d_encrypt_decrypt(set_d):
    ctx, keys, x, _, a, _ = set_d
    assert a.data.shape == (2, 51, 1 << 16) and ctx.slots == 1 << 15
    check("set D encrypt/decrypt", x, ctx.decrypt(a, keys), "set_d/encrypt_pk")
    check("set D secret-key encrypt/decrypt", x, ctx.decrypt(ctx.encrypt(x, keys.secret), keys), "set_d/encrypt_sk")


def test_set_d_mul_relin_rescale(set_d):
    ctx, keys, x, y, a, b = set_d
    out = ctx.mul(a, b, keys, rescale=True)
    p = ctx.params
    assert out.level == p.max_level - 1 and out.num_limbs == 49
    assert math.isclose(out.scale, a.scale * b.scale / (p.moduli[50] * p.moduli[49]), rel_tol=1e-12)
    check("set D mul+relin+rescale", x * y, ctx.decrypt(out, keys), "set_d/mul")


def test_set_d_rotation(set_d):
    """One rotation at N = 2^16: worst and median slot at the table's ``set_d/rotate`` figures less the margin.

    Before ModDown's basis conversion was made centered, the worst slot sat ~10 bits below the median (the
    floor bias piled up in one slot, 29.9 bits); ``test_ckks_keyswitch.py::test_rotation_error_has_no_outlier_slots``
    pins that the bias is gone.
    """
    ctx, keys, x, _, a, _ = set_d
    out = ctx.rotate(a, 5, keys)
    check("set D rotate 5", np.roll(x, -5), ctx.decrypt(out, keys), "set_d/rotate")


def test_set_c_batch_of_eight():
    params = preset("set_c")
    assert params.n == 1 << 14 and params.num_limbs == 15
    ctx = hemx.Context(params, sampler=Sampler.insecure_for_tests(14))
    keys = ctx.keygen(rotations=[-3])
    rng = np.random.default_rng(14)
    x, y = uniform(rng, (8, ctx.slots)), uniform(rng, (8, ctx.slots))
    a, b = ctx.encrypt(x, keys), ctx.encrypt(y, keys)
    assert a.batch_shape == (8,) and a.data.shape == (8, 2, 15, 1 << 14)
    out = ctx.mul(a, b, keys, rescale=True)
    assert out.batch_shape == (8,) and out.level == params.max_level - 1
    got = ctx.decrypt(out, keys)
    assert got.shape == (8, ctx.slots)
    check("set C batch 8 mul+relin+rescale", x * y, got, "set_c/batch8_mul")
    for row in range(8):  # every ciphertext of the batch, not just the worst slot overall
        assert bits_of(x[row] * y[row], got[row]).min_bits >= expected.bound("set_c/batch8_mul"), row
    rot = ctx.rotate(out, -3, keys)
    check("set C batch 8 rotate -3", np.roll(x * y, 3, axis=-1), ctx.decrypt(rot, keys), "set_c/batch8_rotate")
