"""Sparse-slot bootstrapping: the trace onto the subring, then transforms on ``s`` slots (not N/2).

``tests/circuits/test_bootstrap.py`` pins 64 slots (a five-step trace) end to end; here the structure of the
sparse circuit (its trace steps and smaller key set), the one-step trace of ``s = N/4`` end to end, and the
error for a ciphertext with more slots than the context's transforms.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import hemx
from hemx.ckks import Sampler
from hemx.circuits.bootstrap import bootstrap, bootstrapper_for
from hemx.errors import ParameterError
from hemx.kernels import automorphism

from tests.helpers.ckks_helpers import INSECURE, bits_of

pytestmark = pytest.mark.filterwarnings(INSECURE)

MARGIN = 3.0
MEASURED_1024 = 25.4  # worst-slot bits, boot_12 at 1024 slots, seed below, development CPU (full slots: 24.0)


@pytest.fixture(scope="module")
def params():
    return hemx.CKKSParameters.preset("boot_12", allow_insecure=True)


@pytest.mark.parametrize("slots", [1, 2, 64, 1024, 2048])
def test_sparse_circuit_structure(params, slots):
    """The trace has log2(N / 2s) doublings by s, 2s, .., N/4; the transforms' rotations stay below s; the key
    set is the transforms' rotations, the trace's and conjugation, and it shrinks with s."""
    ctx = hemx.Context(params, slots=slots)
    bt = bootstrapper_for(ctx)
    n, s = params.n, max(2, slots)  # one slot runs the smallest (2-slot) transforms
    assert bt.slots == s
    assert bt.trace_steps == tuple(s << j for j in range(int(math.log2(n // 2 // s))))
    assert len(bt.trace_steps) == int(math.log2(n // (2 * s)))
    transform_steps = {r for lt in bt.cts + bt.stc for r in lt.rotations}
    assert all(0 < r < s for r in transform_steps)
    assert set(bt.rotations) == transform_steps | set(bt.trace_steps)
    want = {automorphism.galois_element(n, r) for r in bt.rotations} | {automorphism.conjugation_element(n)}
    assert set(bt.galois_elements) == want
    if slots < n // 2:
        full = bootstrapper_for(hemx.Context(params))
        assert len(bt.galois_elements) < len(full.galois_elements)


def test_sparse_bootstrap_quarter_slots(params):
    """s = N/4: a one-step trace (rotation by N/4), 1024-slot transforms; precision at least the full-slot one."""
    ctx = hemx.Context(params, slots=1024, sampler=Sampler.insecure_for_tests(6))
    bt = bootstrapper_for(ctx)
    keys = ctx.keygen(bootstrap=bt)
    x = np.random.default_rng(12).uniform(-1, 1, 1024)
    out = bootstrap(ctx, ctx.encrypt(x, keys), keys)
    assert out.slots == 1024 and out.level == bt.plan.output_level == bt.parameters.output_level
    stats = bits_of(x, ctx.decrypt(out, keys))
    print("sparse1024", stats)
    assert stats.min_bits >= MEASURED_1024 - MARGIN


def test_more_slots_than_the_context_is_refused(params):
    """A ciphertext of N/2 slots in a 64-slot context would lose its values to the trace: a clear error."""
    ctx = hemx.Context(params, slots=64, sampler=Sampler.insecure_for_tests(3))
    keys = ctx.keygen()
    wide = ctx.encrypt(ctx.encode(np.zeros(params.n // 2), slots=params.n // 2), keys)
    assert wide.slots == params.n // 2
    with pytest.raises(ParameterError, match="slots"):
        bootstrap(ctx, wide, keys)
