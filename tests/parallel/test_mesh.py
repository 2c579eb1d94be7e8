"""``hemx.Context(params, mesh=mesh)`` on 8 simulated CPU devices: bit-identical to one device, outputs spread.

The parent pytest process has one CPU device (XLA's device count is fixed when the backend starts), so one
subprocess with ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` runs every mesh (8x1, 2x4, 1x8) and every
operation (:mod:`tests.parallel._mesh_worker`) and prints a JSON summary; the tests below assert on it.

What "spread" means here (measured, docs/parallel.md): batch axes go on "batch" and the RNS limb axis on "limbs"
when the axis size divides them, else that array is replicated along that mesh axis. The ring (N = 2^6, 8 Q limbs
at the top level, 6 after one rescale, 4 after two; dnum 1, so 8 special limbs and 16-limb keys) makes 8 and 16
limbs split on 4 or 8 devices, 4 limbs on 4, and 6 limbs on neither: on the 1x8 mesh a 6-limb or 4-limb result
is replicated on all 8 devices.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import pathlib

import pytest

from hemx.errors import ParameterError

ROOT = pathlib.Path(__file__).resolve().parents[2]
TIMEOUT_S = 400
OPS = ("add", "mul_rescale", "rotate", "linear_transform", "polynomial", "sub", "negate", "mul", "mul_plain",
       "mul_scalar", "rescale", "drop_level", "rotate_many", "conjugate", "switch_key", "sum_slots")
EAGER = ("encrypt", "encrypt_secret", "eager_add", "eager_mul_rescale")
MESHES = ("8x1", "2x4", "1x8")  # made by hemx.parallel.make_mesh (auto axes)
# the same meshes made by jax.make_mesh (explicit axis types, JAX's default): hemx converts them to auto axes
ALL_MESHES = MESHES + tuple(f"{m}/jax" for m in MESHES)


def run_worker(module: str, *, devices: int, timeout: float = TIMEOUT_S, extra_env: dict | None = None) -> dict:
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    env.update(extra_env or {})
    proc = subprocess.run([sys.executable, "-m", module], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("HEMX_SUMMARY ")]
    assert proc.returncode == 0 and lines, f"worker failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n" \
                                           f"{proc.stderr[-6000:]}"
    return json.loads(lines[-1].split(" ", 1)[1])


@pytest.fixture(scope="module")
def summary():
    return run_worker("tests.parallel._mesh_worker", devices=8)


def test_eight_devices_and_a_working_reference(summary):
    assert summary["devices"] == 8
    assert summary["mul_rescale_max_error"] < 1e-6  # the computation is meaningful, not just equal
    assert summary["reference_native_custom_calls"] >= 0


@pytest.mark.parametrize("mesh", ALL_MESHES)
@pytest.mark.parametrize("op", OPS + EAGER)
def test_bit_identical_to_one_device(summary, mesh, op):
    entry = summary["meshes"][mesh]["ops"][op]
    assert entry["identical"], f"{op} on mesh {mesh} differs from the unsharded context"
    assert entry["same_meta"]


@pytest.mark.parametrize("mesh", ALL_MESHES)
def test_decrypts_equal(summary, mesh):
    assert summary["meshes"][mesh]["decrypt_equal"]
    assert summary["meshes"][mesh]["plain"] == {"encode": True, "decode": True, "decrypt": True}


def test_jax_make_mesh_has_explicit_axes(summary):
    """The jax.make_mesh meshes really are the explicit-axes kind that used to fail (issue 26)."""
    for mesh in MESHES:
        assert any("Explicit" in t for t in summary["meshes"][f"{mesh}/jax"]["axis_types"]), mesh


@pytest.mark.parametrize("mesh", ALL_MESHES)
def test_no_native_custom_calls_in_a_sharded_program(summary, mesh):
    """The C++ kernels have no partitioning rule: a sharded context traces the pure-JAX kernels only."""
    assert summary["meshes"][mesh]["native_custom_calls"] == 0


def _expected_pieces(mesh: str, shape) -> int:
    """Distinct pieces the placement rule gives a ciphertext (batch, 2, limbs, N) on a rows x cols mesh."""
    rows, cols = map(int, mesh.split("/")[0].split("x"))
    pieces = rows if shape[0] % rows == 0 else 1
    return pieces * (cols if shape[-2] % cols == 0 else 1)


@pytest.mark.parametrize("mesh", ALL_MESHES)
@pytest.mark.parametrize("op", OPS + EAGER)
def test_outputs_on_all_devices_and_split_where_divisible(summary, mesh, op):
    entry = summary["meshes"][mesh]["ops"][op]
    assert entry["devices"] == 8  # every output lives on the whole mesh
    assert entry["distinct_pieces"] == _expected_pieces(mesh, entry["shape"]), entry


def test_top_level_ciphertexts_spread_over_all_eight_devices(summary):
    """At the top level (8 limbs, batch 8) every mesh splits a ciphertext into 8 distinct pieces."""
    for mesh in MESHES:
        for op in ("encrypt", "add", "rotate", "eager_add"):
            assert summary["meshes"][mesh]["ops"][op]["distinct_pieces"] == 8, (mesh, op)


def test_what_idles_on_1x8(summary):
    """On 1x8, results with 6 or 4 limbs (fewer than / not divisible by 8) are replicated: the limb work of those
    levels is not split (the batch axis has size 1). This pins the measured behaviour."""
    ops = summary["meshes"]["1x8"]["ops"]
    for op in ("mul_rescale", "linear_transform", "polynomial", "eager_mul_rescale"):
        assert ops[op]["shape"][-2] in (4, 6)
        assert ops[op]["distinct_pieces"] == 1 and ops[op]["fully_replicated"]


def test_keys_placed(summary):
    """Keys: limbs on "limbs" (16 = 8 special + 8 Q limbs for switching keys and the secret, 8 for the public
    key), never on "batch" (every batch shard needs the whole key)."""
    for mesh, pieces in (("8x1", 1), ("2x4", 4), ("1x8", 8)):
        for key in ("relin", "public", "secret_ntt"):
            entry = summary["meshes"][mesh]["keys"][key]
            assert entry["devices"] == 8 and entry["distinct_pieces"] == pieces, (mesh, key, entry)


def test_stored_program_on_a_mesh(summary):
    """hemx.jit on the 2x4 mesh: compiled once, loaded by a new Program, bit-identical to one device. The mesh
    made by jax.make_mesh (explicit axes, converted to the same auto mesh) finds the very same stored program."""
    assert summary["meshes"]["2x4"]["program"] == {"how": ["compiled", "loaded"], "identical": True}
    assert summary["meshes"]["2x4/jax"]["program"] == {"how": ["loaded", "loaded"], "identical": True}


def test_mesh_validation():
    """Wrong axis names, a non-mesh or a bad keyswitch_path raise ParameterError; a mesh gives a Context holding a
    MeshPlacement (in this 1-device process)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    import hemx
    from hemx import parallel
    from hemx.ckks import placement
    from tests.helpers.ckks_helpers import small_params

    params = small_params(6, 1)
    with pytest.raises(ParameterError):
        hemx.Context(params, mesh="batch x limbs")
    with pytest.raises(ParameterError):
        hemx.Context(params, mesh=Mesh(np.asarray(jax.devices()[:1]).reshape(1, 1), ("data", "model")))
    with pytest.raises(ParameterError):
        hemx.Context(params, mesh=Mesh(np.asarray(jax.devices()[:1]), ("batch",)))
    mesh = parallel.make_mesh(1, 1)
    with pytest.raises(ParameterError):
        hemx.Context(params, mesh=mesh, ntt="native")
    with pytest.raises(ParameterError):
        parallel.make_mesh(2, 1)  # one device here
    with pytest.raises(ParameterError):
        hemx.Context(params, mesh=mesh, keyswitch_path="everywhere")
    with pytest.raises(ParameterError):
        hemx.Context(params, keyswitch_path="partitioner")  # a choice for a mesh's key switches, without a mesh
    ctx = hemx.Context(params, mesh=mesh, planning="off")
    # one Context class: the mesh is a placement strategy it holds, not a subclass
    assert type(ctx) is hemx.Context and isinstance(ctx.placement, placement.MeshPlacement)
    assert ctx.mesh is mesh and ctx.plan.method == "mat3" and "mesh={'batch': 1, 'limbs': 1}" in repr(ctx)
    assert isinstance(ctx.tables, placement.ShardedTableCache) and ctx.tables.keyswitch_path == "auto"
    with pytest.raises(ParameterError):
        ctx.tables.keyswitch_path = "everywhere"
    single = hemx.Context(params, planning="off")
    assert single.mesh is None and single.placement is placement.SINGLE_DEVICE and "mesh" not in repr(single)
    assert hemx.Context(params, mesh=mesh, planning="off", keyswitch_path="partitioner").tables.keyswitch_path \
        == "partitioner"


def test_program_fingerprint_follows_the_keyswitch_path():
    """hemx.jit's stored programs are keyed by the context's fingerprint: the mesh's key-switch path (settable on
    ``ctx.tables`` after the context is made) is part of it, so a program lowered with the shard_map key switch is
    never loaded for the partitioner's (or back)."""
    import hemx
    from hemx import parallel
    from hemx.circuits.program import context_fingerprint
    from tests.helpers.ckks_helpers import small_params

    params = small_params(6, 1)
    mesh = parallel.make_mesh(1, 1)
    ctx = hemx.Context(params, mesh=mesh, planning="off")
    auto = context_fingerprint(ctx)
    assert auto == context_fingerprint(hemx.Context(params, mesh=mesh, planning="off"))
    ctx.tables.keyswitch_path = "partitioner"
    assert context_fingerprint(ctx) != auto
    assert context_fingerprint(ctx) == context_fingerprint(
        hemx.Context(params, mesh=mesh, planning="off", keyswitch_path="partitioner"))
    assert context_fingerprint(hemx.Context(params, planning="off")) != auto  # one device: no mesh at all
