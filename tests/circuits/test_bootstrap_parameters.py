"""hemx.BootstrapParameters: a bootstrap described from the CKKS parameters alone (levels, EvalMod, message ratio,
rotation keys found from the DFT factors' non-zero diagonals without encoding anything), checked and immutable;
keys from it (``ctx.keygen(bootstrap=bp)``, ``for_circuits=[bp]``); the context's bootstrapper
(``bootstrapper_for``) built once; ckks holds no bootstrapping hook."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import hemx
from hemx.ckks import Sampler, keygen as keygen_mod
from hemx.circuits.bootstrap import (Bootstrapper, BootstrapParameters, EvalMod, bootstrap, bootstrapper_for,
                                     bound_for)
from hemx.circuits.bootstrap.parameters import transform_rotations
from hemx.errors import LevelError, ParameterError, SlotError
from hemx.kernels import automorphism

from tests.helpers.ckks_helpers import INSECURE, bits_of, small_params

pytestmark = pytest.mark.filterwarnings(INSECURE)


@pytest.fixture(scope="module")
def params():
    return hemx.CKKSParameters.preset("boot_12", allow_insecure=True)


def test_values_from_the_parameters_alone(params):
    bp = BootstrapParameters.create(params)
    assert hemx.BootstrapParameters is BootstrapParameters
    assert (bp.slots, bp.k, bp.top_level, bp.depth, bp.output_level) == (2048, 11, 18, 15, 3)
    assert bp.k == bound_for(32, params.n) and bp.encapsulation_weight == 32  # uniform secret: ephemeral s'
    assert (bp.degree, bp.double_angle, bp.evalmod.depth) == (47, 2, 8)
    assert (bp.message_ratio, bp.premultiply, bp.natural_ratio) == (11, 2, 13) and bp.supported_bound == 8.0
    assert bp.trace_steps == () and all(0 < r < bp.slots for r in bp.rotations)
    n = params.n
    assert set(bp.galois_elements) == {automorphism.galois_element(n, r) for r in bp.rotations} | {2 * n - 1}
    assert bp.key_count == len(bp.galois_elements) + 2  # + the encapsulation pair (relinearization not counted)
    full = keygen_mod.key_bytes(params)
    assert bp.key_bytes(key_storage="full") == bp.key_count * full
    assert bp.key_bytes(key_storage="compact") < bp.key_bytes(key_storage="full")
    # the level plan of a sparse bootstrap is the same; its keys are fewer and include the trace's steps
    sparse = BootstrapParameters.create(params, slots=64)
    assert sparse.output_level == bp.output_level and sparse.trace_steps == (64, 128, 256, 512, 1024)
    assert set(sparse.trace_steps) <= set(sparse.rotations) and sparse.key_count < bp.key_count
    assert BootstrapParameters.create(params, slots=1).slots == 2  # one slot runs the 2-slot transforms
    # a value: equal choices are equal and hash alike; changing a field re-checks and re-derives
    assert bp == BootstrapParameters.create(params, slots=params.n // 2) and hash(bp) == hash(
        BootstrapParameters.create(params))
    with pytest.raises(dataclasses.FrozenInstanceError):
        bp.k = 12
    high = dataclasses.replace(bp, message_ratio=13)
    assert (high.premultiply, high.supported_bound) == (0, 32.0) and high.rotations == bp.rotations
    assert "levels 18 -> 3" in repr(bp)


def test_bad_values_raise_hemx_errors(params):
    with pytest.raises(LevelError, match="levels"):
        BootstrapParameters.create(small_params(10, 4))
    for bad in (dict(slots=3), dict(slots=0), dict(slots=4096)):
        with pytest.raises(SlotError):
            BootstrapParameters.create(params, **bad)
    for bad, match in ((dict(message_ratio=14), "message_ratio"), (dict(message_ratio=True), "message_ratio"),
                       (dict(cts_levels=0), "cts_levels"), (dict(stc_levels=1.5), "stc_levels"),
                       (dict(k=0), "k must"), (dict(double_angle=-1), "double_angle")):
        with pytest.raises(ParameterError, match=match):
            BootstrapParameters.create(params, **bad)
    with pytest.raises(ParameterError, match="CKKSParameters"):
        BootstrapParameters.create("boot_12")
    bp = BootstrapParameters.create(params)
    with pytest.raises(ParameterError, match="EvalMod for K = 11"):
        dataclasses.replace(bp, evalmod=EvalMod.create(5, double_angle=2))
    with pytest.raises(ParameterError, match="key_storage"):
        bp.key_bytes(key_storage="small")


def test_rotations_found_without_encoding_equal_the_built_bootstrappers(params):
    """The steps from the DFT factors' non-zero diagonals (host numpy, LinearTransform's baby/giant split) are the
    keys the encoded transforms ask for: full slots and sparse ones (a trace), boot_12."""
    for slots in (None, 64, 2):
        ctx = hemx.Context(params, slots=slots) if slots else hemx.Context(params)
        bt = bootstrapper_for(ctx)
        bp = BootstrapParameters.create(params, slots=ctx.slots)
        assert bt.parameters == bp
        assert bt.rotations == bp.rotations and bt.galois_elements == bp.galois_elements
        assert set(transform_rotations(bp.slots, 3, inverse=True)) == {r for lt in bt.cts for r in lt.rotations}
        assert set(transform_rotations(bp.slots, 3, inverse=False)) == {r for lt in bt.stc for r in lt.rotations}


def test_bootstrapper_from_a_value_and_the_cached_one(params):
    ctx = hemx.Context(params, slots=8)
    bt = bootstrapper_for(ctx)
    assert bootstrapper_for(ctx) is bt and bootstrapper_for(ctx, message_ratio=11) is bt  # the default, by value
    assert bootstrapper_for(ctx, message_ratio=12) is not bt
    assert bt.parameters == BootstrapParameters.create(params, slots=8) and bt.params == params
    mine = Bootstrapper(ctx, BootstrapParameters.create(params, slots=8, message_ratio=12), hoisting="single")
    assert (mine.message_ratio, mine.premultiply, mine.hoisting) == (12, 1, "single")
    assert Bootstrapper(ctx, message_ratio=12).parameters == mine.parameters  # the keyword convenience
    with pytest.raises(ParameterError, match="not both"):
        Bootstrapper(ctx, mine.parameters, k=11)
    with pytest.raises(ParameterError, match="slots=ctx.slots"):
        Bootstrapper(ctx, BootstrapParameters.create(params, slots=16))
    with pytest.raises(ParameterError, match="BootstrapParameters"):
        Bootstrapper(ctx, {"slots": 8})
    with pytest.raises(ParameterError):
        bootstrapper_for("ctx")
    # ckks knows nothing of bootstrapping circuits: no hook, no methods
    import hemx.ckks.context as ckks_context

    assert not hasattr(hemx.Context, "bootstrap") and not hasattr(hemx.Context, "bootstrapper")
    assert not hasattr(ckks_context, "register_bootstrapper") and not hasattr(ckks_context, "_BOOTSTRAPPER_FACTORY")


def test_keygen_true_names_what_to_pass_and_the_hint_works(params):
    """keygen(bootstrap=True) cannot know which bootstrap: its ParameterError spells the value to pass; that value
    makes the keys a bootstrap of the context runs with."""
    ctx = hemx.Context(params, slots=8, sampler=Sampler.insecure_for_tests(4))
    with pytest.raises(ParameterError) as info:
        ctx.keygen(bootstrap=True)
    hint = re.search(r"bootstrap=(hemx\.BootstrapParameters\.create\(ctx\.params, slots=ctx\.slots\))",
                     str(info.value))
    assert hint and "Bootstrapper" in str(info.value)
    boot = eval(hint.group(1), {"hemx": hemx, "ctx": ctx})  # noqa: S307 - the message's own expression
    keys = ctx.keygen(bootstrap=boot)
    assert set(boot.galois_elements) <= set(keys.galois) and sorted(keys.switching) == ["from_sparse", "to_sparse"]
    x = np.random.default_rng(5).uniform(-1, 1, 8)
    out = bootstrap(ctx, ctx.encrypt(x, keys), keys)
    assert out.level == boot.output_level and bits_of(x, ctx.decrypt(out, keys)).min_bits >= 18.0
    # a Bootstrapper serves as well, and so does for_circuits=[...]; the same Galois keys each time
    assert set(ctx.keygen(bootstrap=bootstrapper_for(ctx)).galois) == set(keys.galois)
    planned = ctx.keygen(for_circuits=[boot])
    assert set(planned.galois) == set(keys.galois) and sorted(planned.switching) == ["from_sparse", "to_sparse"]
    for bad in ("yes", 3, object()):
        with pytest.raises(ParameterError, match="BootstrapParameters.create"):
            ctx.keygen(bootstrap=bad)
    with pytest.raises(ParameterError, match="other CKKS parameters"):
        ctx.keygen(bootstrap=BootstrapParameters.create(hemx.CKKSParameters.preset("boot_13", allow_insecure=True)))
    with pytest.raises(ParameterError, match="BootstrapParameters.create"):
        ctx.keygen(for_circuits=["bootstrap"])


def test_for_circuits_traces_a_bootstrap_given_its_value(params):
    """A traced function that bootstraps asks for the rotation and encapsulation keys; the encapsulation secret's
    weight comes from the bootstrap value, so for_circuits needs it too (a clear error without)."""
    ctx = hemx.Context(params, slots=4, sampler=Sampler.insecure_for_tests(7))
    boot = BootstrapParameters.create(params, slots=4)

    def circuit(ct, keys):
        return ctx.rotate(bootstrap(ctx, ct, keys), 1, keys)

    with pytest.raises(ParameterError, match="to_sparse"):
        ctx.keygen(for_circuits=[circuit])
    keys = ctx.keygen(for_circuits=[circuit, boot])
    assert set(boot.galois_elements) <= set(keys.galois) and sorted(keys.switching) == ["from_sparse", "to_sparse"]
    assert automorphism.galois_element(params.n, 1) in keys.galois
