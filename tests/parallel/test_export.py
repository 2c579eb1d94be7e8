"""The accelerator path, proven without an accelerator: ``jax.export`` for ``cuda`` and ``tpu``.

Every NTT method (forward and inverse), BAT, basis conversion, the CKKS operations HE-Mult(+rescale), Rotate,
Rescale, a linear transform, polynomial evaluation and the whole bootstrap lower for both platforms from this
CPU-only machine, and
the exports hold no hemx native custom call (the native kernels are CPU-only; the "auto" kernels choose them with
``jax.lax.platform_dependent``, so a cuda / tpu lowering takes the JAX path). The native NTT *method* calls its
custom call directly, so it is excluded from accelerator exports: a plan with ``ntt="native"`` is CPU only
(asserted below: its export for cuda / tpu is refused, never silently wrong). The matrix-engine NTT (mat3) is
checked for int8 x int8 -> int32 ``dot_general`` in its StableHLO.
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
from hemx.kernels import bat, bconv
from hemx.kernels import native
from hemx.kernels import ntt as ntt_kernels
from hemx.nt import ntt_primes

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


@pytest.mark.parametrize("platform", PLATFORMS)
def test_native_ntt_method_is_cpu_only(moduli, platform):
    """``ntt="native"`` is the C++ butterfly as an XLA custom call registered for CPU: no accelerator export."""
    if not native.available():
        pytest.skip(f"native kernels unavailable: {native.reason()}")
    ring = hemx.ring.RNSRing(N, moduli, ntt="native")
    x = jnp.zeros((len(moduli), N), jnp.uint32)
    with pytest.raises(Exception, match="(?i)custom|target|platform|hemx_ntt"):
        jax.export.export(jax.jit(lambda v: ntt_kernels.ntt(v, ring.plan)), platforms=[platform])(x)


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
            "mul": ctx.mul(a, b, keys),
            "mul_rescale": ctx.mul(a, b, keys, rescale=True),
            "rescale": ctx.rescale(ctx.mul(a, 0.5)),
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
def bootstrap_case():
    """boot_12 with 8 sparse slots (a ten-step trace, small transforms), the matrix-engine NTT; the switching keys
    enter the exported program as arguments (closed over, ~80 MiB of them would be embedded as constants)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        params = hemx.CKKSParameters.preset("boot_12", allow_insecure=True)
    ctx = hemx.Context(params, slots=8, ntt="mat3", reduction="shoup", planning="off",
                       sampler=Sampler.insecure_for_tests(3))
    ev = ctx.keygen(bootstrap=True).evaluation_keys()
    ct = ctx.drop_level(ctx.encrypt(np.linspace(-1, 1, 8), ev.public), 0)
    rep = dataclasses.replace

    def boot(c, relin, galois, switching):
        keys = rep(ev, relin=rep(ev.relin, data=relin),
                   galois={g: rep(k, data=galois[g]) for g, k in ev.galois.items()},
                   switching={n: rep(k, data=switching[n]) for n, k in ev.switching.items()})
        return ctx.bootstrap(c, keys)

    args = (ev.relin.data, {g: k.data for g, k in ev.galois.items()}, {n: k.data for n, k in ev.switching.items()})
    return boot, ct, args, params.limbs_at_level(ctx.bootstrapper().plan.output_level)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_bootstrap_export(bootstrap_case, platform):
    """The whole bootstrap (ModRaise, encapsulation, trace, CoeffsToSlots, EvalMod, SlotsToCoeffs) lowers for the
    accelerator: no native call, the matrix-engine NTT's int8 dots, a ciphertext at the output level's limbs."""
    boot, ct, args, limbs = bootstrap_case
    exported = jax.export.export(jax.jit(boot), platforms=[platform])(ct, *args)
    assert exported.platforms == (platform,)
    text = exported.mlir_module()
    assert not CUSTOM_CALL.search(text)
    assert INT8_DOT.search(text)
    (out,) = jax.tree_util.tree_leaves(exported.out_avals)
    assert out.dtype == jnp.uint32 and out.shape[-3:] == (2, limbs, 1 << 12)
