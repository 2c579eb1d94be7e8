"""The accelerator path, proven without an accelerator: ``jax.export`` for ``cuda`` and ``tpu``.

Every NTT method (forward and inverse), BAT, basis conversion, the CKKS operations HE-Mult(+rescale), Rotate,
Rescale, a linear transform, polynomial evaluation and the whole bootstrap lower for both platforms from this
CPU-only machine, and
the exports hold no hemx native custom call (the native kernels are CPU-only; they are chosen with
``jax.lax.platform_dependent`` (``hemx.kernels.native.on_cpu``), so a cuda / tpu lowering takes the JAX path).
That includes the native NTT *method*, the CPU static default: a ``"native"`` plan lowers to the C++ kernel for
CPU and to the JAX butterfly on the same tables elsewhere, so a default ``Context`` made on this CPU exports for
an accelerator (HE-Mult+Rescale, Rotate, the bootstrap), and that butterfly branch is bit-identical to the
native kernel, also for plans restricted to some limbs (``ButterflyTables.rows``). The matrix-engine NTT (mat3)
is checked for int8 x int8 -> int32 ``dot_general`` in its StableHLO.
"""
from __future__ import annotations

import dataclasses
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hemx
from hemx.ckks import InsecureParametersWarning, Sampler
from hemx.circuits import LinearTransform, evaluate_polynomial
from hemx.circuits.bootstrap import bootstrap, bootstrapper_for
from hemx.kernels import bat, bconv
from hemx.kernels import native
from hemx.kernels import ntt as ntt_kernels
from hemx.nt import ntt_primes
from hemx.plan import variants

PLATFORMS = ("cuda", "tpu")
LOG_N = 6
N = 1 << LOG_N
CUSTOM_CALL = re.compile(r"custom_call\s*@hemx_")
# a dot_general whose operands are int8 and whose result is int32 (StableHLO text)
INT8_DOT = re.compile(r"stablehlo\.dot_general[^\n]*\(tensor<[^>]*xi8>, tensor<[^>]*xi8>\) -> tensor<[^>]*xi32>")


def export_text(f, *args, platform: str) -> str:
    exported = jax.export.export(jax.jit(f), platforms=[platform])(*args)
    assert exported.platforms == (platform,)
    text = exported.mlir_module()
    assert not CUSTOM_CALL.search(text), f"{platform} export holds a hemx native custom call"
    return text


@pytest.fixture(scope="module")
def moduli():
    return tuple(ntt_primes(28, 3, N))


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("method", ntt_kernels.METHODS)
def test_ntt_methods_export(moduli, method, platform):
    ring = hemx.ring.RNSRing(N, moduli, ntt=method)
    x = jnp.zeros((2, len(moduli), N), jnp.uint32)
    text = export_text(lambda v: ntt_kernels.intt(ntt_kernels.ntt(v, ring.plan), ring.plan), x, platform=platform)
    if method == "mat3":
        assert INT8_DOT.search(text), "the matrix-engine NTT should hold int8 x int8 -> int32 dot_general"


def _need_native():
    if not native.available():
        pytest.skip(f"native kernels unavailable: {native.reason()}")


@pytest.fixture(scope="module")
def native_plans(moduli):
    """A native plan over 28- and 31-bit limbs, and limb-restricted ones that select rows of its full tables."""
    _need_native()
    plan = ntt_kernels.make_plan(N, moduli + tuple(ntt_primes(31, 2, N)), "native")
    picked = {"all": plan, "gather": ntt_kernels.select_limbs(plan, (4, 0, 2)),
              "slice": ntt_kernels.select_limbs(plan, slice(1, 4)), "one": ntt_kernels.select_limb_dynamic(plan, 3)}
    for name in ("gather", "slice", "one"):  # these read rows of the full (5, N) tables, not sliced copies
        bt = picked[name].butterfly
        assert bt.rows is not None and bt.fwd.value.shape == (5, N) and picked[name].num_limbs == len(bt.rows)
    return picked


@pytest.mark.parametrize("platform", PLATFORMS)
def test_native_ntt_method_exports_the_butterfly(native_plans, platform):
    """``ntt="native"``: the C++ butterfly in a CPU lowering, the JAX butterfly in a cuda / tpu export."""
    for name, plan in native_plans.items():
        x = jnp.zeros((2, plan.num_limbs, N), jnp.uint32)
        f = lambda v, p=plan: ntt_kernels.intt(ntt_kernels.ntt(v, p), p)  # noqa: E731
        cpu = jax.jit(f).lower(x).as_text()
        assert re.search(r"custom_call\s*@hemx_ntt_forward", cpu) and re.search(r"custom_call\s*@hemx_ntt_inverse",
                                                                               cpu), name
        export_text(f, x, platform=platform)  # asserts: no hemx custom call


@pytest.mark.parametrize("inverse", [False, True])
def test_native_plan_butterfly_branch_is_bit_exact(native_plans, inverse):
    """The JAX branch of a native plan's ``ntt`` / ``intt`` (what a cuda / tpu export runs) equals the native kernel
    on random residues, for the full plan and for plans selecting rows of its tables (one also with ``limb_axis=0``)."""
    rng = np.random.default_rng(7)
    for name, plan in native_plans.items():
        qs = np.asarray(plan.table.q).reshape(-1, 1).astype(np.uint64)
        cases = [(-2, (3, plan.num_limbs, N))] + ([(0, (plan.num_limbs, 2, N))] if name == "gather" else [])
        for limb_axis, shape in cases:
            qcol = qs if limb_axis == -2 else qs[:, None]
            x = jnp.asarray((rng.integers(0, 1 << 62, shape, dtype=np.uint64) % qcol).astype(np.uint32))
            lay = ntt_kernels._layout(x, plan, limb_axis)
            want = (native.intt if inverse else native.ntt)(x, plan, limb_axis)
            got = ntt_kernels._butterfly_of_native(x, plan, inverse=inverse, lay=lay)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=f"{name}, limb_axis={limb_axis}")
            with native.disabled():  # the public call takes that branch where the native kernels are off
                off = (ntt_kernels.intt if inverse else ntt_kernels.ntt)(x, plan, limb_axis)
            np.testing.assert_array_equal(np.asarray(off), np.asarray(want), err_msg=f"{name}, disabled")


@pytest.mark.parametrize("platform", PLATFORMS)
def test_bat_and_bconv_export(moduli, platform):
    q = moduli[0]
    rng = np.random.default_rng(0)
    mat = bat.compile_known_matrix(rng.integers(0, q, (16, 16)), [q])
    x = jnp.zeros((1, 1, 16, 8), jnp.uint32)  # (M, A, V, B): one modulus
    text = export_text(lambda v: bat.apply_known(v, mat), x, platform=platform)
    assert INT8_DOT.search(text), "BAT should be an int8 x int8 -> int32 matmul"
    src, dst = moduli[:2], tuple(ntt_primes(31, 2, N))
    for centered in (False, True):
        plan = bconv.make_bconv_plan(src, dst, centered=centered)
        y = jnp.zeros((2, len(src), N), jnp.uint32)
        for method in ("auto", "bat", "elementwise"):
            export_text(lambda v, m=method: bconv.bconv(v, plan, method=m), y, platform=platform)


@pytest.fixture(scope="module")
def ckks_case():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = hemx.CKKSParameters.create(LOG_N, levels=3, dnum=2, base_bits=(31, 31), allow_insecure=True,
                                            primes_per_level=2, prime_bits=28, special_bits=31)
    ctx = hemx.Context(params, ntt="mat3", reduction="shoup", planning="off", sampler=Sampler.insecure_for_tests(3))
    rng = np.random.default_rng(1)
    lt = LinearTransform(ctx, {0: rng.uniform(-1, 1, ctx.slots), 1: rng.uniform(-1, 1, ctx.slots)})
    keys = ctx.keygen(rotations=sorted(set(lt.rotations) | {1}))
    a = ctx.encrypt(rng.uniform(-1, 1, (2, ctx.slots)), keys)
    b = ctx.encrypt(rng.uniform(-1, 1, (2, ctx.slots)), keys)

    def f(a, b):
        return {
            "mul": ctx.mul(a, b, keys, rescale=False),
            "mul_rescale": ctx.mul(a, b, keys, rescale=True),
            "rescale": ctx.rescale(ctx.mul(a, 0.5, rescale=False)),
            "rotate": ctx.rotate(a, 1, keys),
            "linear_transform": lt.apply(a, keys),
            "polynomial": evaluate_polynomial(ctx, a, (0.1, 0.5, -0.25, 0.125), keys),
        }

    return f, a, b


@pytest.mark.parametrize("platform", PLATFORMS)
def test_ckks_operations_export(ckks_case, platform):
    """HE-Mult(+rescale), Rescale, Rotate, a linear transform and a polynomial in one exported program."""
    f, a, b = ckks_case
    exported = jax.export.export(jax.jit(f), platforms=[platform])(a, b)
    text = exported.mlir_module()
    assert not CUSTOM_CALL.search(text)
    assert INT8_DOT.search(text), "the mat3 context's kernels should hold int8 x int8 -> int32 dots"
    out = jax.tree_util.tree_leaves(exported.out_avals)
    assert len(out) == 6 and all(v.dtype == jnp.uint32 for v in out)


@pytest.fixture(scope="module")
def default_case():
    """A default Context made on this CPU (no ``ntt=``: the static default, the native NTT where it is built)."""
    _need_native()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = hemx.CKKSParameters.create(LOG_N, levels=3, dnum=2, base_bits=(31, 31), allow_insecure=True,
                                            primes_per_level=2, prime_bits=28, special_bits=31)
    ctx = hemx.Context(params, planning="off", sampler=Sampler.insecure_for_tests(3))
    assert ctx.plan.method == ntt_kernels.NATIVE_METHOD
    keys = ctx.keygen(rotations=[1])
    rng = np.random.default_rng(2)
    a, b = (ctx.encrypt(rng.uniform(-1, 1, (2, ctx.slots)), keys) for _ in range(2))

    def f(a, b):
        return {"mul_rescale": ctx.mul(a, b, keys, rescale=True), "rotate": ctx.rotate(a, 1, keys)}

    cpu = jax.jit(f).lower(a, b).as_text()  # the same program lowered for this CPU runs the native kernels
    assert CUSTOM_CALL.search(cpu)
    return f, a, b


@pytest.mark.parametrize("platform", PLATFORMS)
def test_default_context_exports(default_case, platform):
    """HE-Mult+Rescale and Rotate of a default CPU context export for the accelerator: no native call (the NTT takes
    the JAX butterfly there, so its own int8 dots are absent; the basis conversions of more than two limbs are BAT
    int8 x int8 -> int32 matmuls)."""
    f, a, b = default_case
    text = export_text(f, a, b, platform=platform)
    assert INT8_DOT.search(text), "the key switch's BAT basis conversions should hold int8 x int8 -> int32 dots"
    out = jax.eval_shape(f, a, b)
    assert out["mul_rescale"].data.shape == a.data.shape[:-2] + (a.data.shape[-2] - 2, N)
    assert out["rotate"].data.shape == a.data.shape


@pytest.fixture(scope="module")
def bootstrap_case():
    """boot_12 with 8 sparse slots (a ten-step trace, small transforms) in a default CPU context (no ``ntt=``: the
    native NTT where it is built, whose accelerator lowering is the JAX butterfly; the matrix-engine NTT's exports
    are checked above); the switching keys enter the exported program as arguments (closed over, ~80 MiB of them
    would be embedded as constants)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = hemx.CKKSParameters.preset("boot_12", allow_insecure=True)
    ctx = hemx.Context(params, slots=8, planning="off", sampler=Sampler.insecure_for_tests(3))
    assert (ctx.plan.method, ctx.reduction) == variants.static_default("cpu")
    bt = bootstrapper_for(ctx)
    ev = ctx.keygen(bootstrap=bt).evaluation_keys()
    ct = ctx.drop_level(ctx.encrypt(np.linspace(-1, 1, 8), ev.public), 0)
    rep = dataclasses.replace

    def boot(c, relin, galois, switching):
        keys = rep(ev, relin=rep(ev.relin, data=relin),
                   galois={g: rep(k, data=galois[g]) for g, k in ev.galois.items()},
                   switching={n: rep(k, data=switching[n]) for n, k in ev.switching.items()})
        return bootstrap(ctx, c, keys)

    args = (ev.relin.data, {g: k.data for g, k in ev.galois.items()}, {n: k.data for n, k in ev.switching.items()})
    return boot, ct, args, params.limbs_at_level(bt.plan.output_level)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_bootstrap_export(bootstrap_case, platform):
    """The whole bootstrap (ModRaise, encapsulation, trace, CoeffsToSlots, EvalMod, SlotsToCoeffs) of a default CPU
    context lowers for the accelerator: no native call, int8 dots (the BAT basis conversions), a ciphertext at the
    output level's limbs."""
    boot, ct, args, limbs = bootstrap_case
    exported = jax.export.export(jax.jit(boot), platforms=[platform])(ct, *args)
    assert exported.platforms == (platform,)
    text = exported.mlir_module()
    assert not CUSTOM_CALL.search(text)
    assert INT8_DOT.search(text)
    (out,) = jax.tree_util.tree_leaves(exported.out_avals)
    assert out.dtype == jnp.uint32 and out.shape[-3:] == (2, limbs, 1 << 12)
