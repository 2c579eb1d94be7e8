"""hemx.Client / hemx.Server: an end-to-end computation through bytes, and a server that holds no secret.

The end-to-end test uses the main small parameter shapes of the CKKS suite (N = 2^12, 8 limbs, dnum 3), so in
a full run its compiled kernels are shared with tests/test_ckks_ops.py; the other tests use N = 2^6.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect

import jax
import numpy as np
import pytest

import hemx
import hemx.io as hio
from hemx.ckks import EvaluationKeys, KeySet, Sampler, SecretKey
from hemx.errors import (
    ContextMismatchError,
    KeyMismatchError,
    ParameterError,
    SecretMaterialError,
    SerializationError,
)

from tests.helpers.ckks_helpers import FAST_NTT, INSECURE, MAIN_LEVELS, MAIN_LOG_N, check_bits, small_params

pytestmark = pytest.mark.filterwarnings(INSECURE)


@functools.lru_cache(maxsize=None)
def make_client(log_n: int, levels: int, seed: int, slots: int | None = None, rotations=(1,), conjugation=True):
    return hemx.Client(small_params(log_n, levels), rotations=list(rotations), conjugation=conjugation, slots=slots,
                       sampler=Sampler.insecure_for_tests(seed), ntt=FAST_NTT)


def tiny_client(seed: int = 11, slots: int | None = None) -> hemx.Client:
    return make_client(6, 2, seed, slots)


def server_for(client: hemx.Client, **options) -> hemx.Server:
    return hemx.Server.from_bytes(client.parameters_bytes(), client.evaluation_keys_bytes(), ntt=FAST_NTT, **options)


# ------------------------------------------------------------------------------------------------------------
# end to end
# ------------------------------------------------------------------------------------------------------------


def test_client_server_round_trip_precision():
    client = make_client(MAIN_LOG_N, MAIN_LEVELS, seed=21)
    server = server_for(client)
    assert server.context.id != client.context.id and server.context.slots == client.context.slots
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, (2, client.context.slots))
    x_bytes, y_bytes = client.encrypt(x), client.encrypt(y)
    assert hio.kind_of(x_bytes) == "ciphertext"

    cx, cy = server.load_ciphertext(x_bytes), server.load_ciphertext(y_bytes)
    prod = server.mul(cx, cy, rescale=True)
    out = server.add(server.rotate(prod, 1), server.conjugate(prod))  # x y rolled by one, plus x y
    out = server.sub(out, 0.25)
    reply = server.dump_ciphertext(out)

    want = np.roll(x * y, -1) + x * y - 0.25
    check_bits("client -> server (mul, rotate, conjugate) -> client", want, client.decrypt(reply), "n12/service")
    # decrypting the loaded object or its bytes gives the same numbers
    assert np.array_equal(client.decrypt(reply), client.decrypt(hio.loads(reply, client.context)))


def test_batched_ciphertexts_through_bytes():
    client = tiny_client()
    server = server_for(client)
    x = np.random.default_rng(1).uniform(-1, 1, (3, client.context.slots))
    ct = server.load_ciphertext(client.encrypt(x))
    assert ct.batch_shape == (3,)
    back = client.decrypt(server.dump_ciphertext(server.add(ct, ct)))
    check_bits("batched, doubled", 2 * x, back, "n12/service")


# ------------------------------------------------------------------------------------------------------------
# the server never holds a secret
# ------------------------------------------------------------------------------------------------------------


def secret_rows(client: hemx.Client) -> set[bytes]:
    """Every row that would reveal the secret: coefficients, their residues, the NTT form (as int64 bytes)."""
    secret = client.keys.secret
    coeffs = np.asarray(secret.coeffs, dtype=np.int64)
    basis = client.context.basis
    rows = [coeffs, coeffs + 1] + [np.mod(coeffs, q) for q in basis] + list(np.asarray(secret.ntt, dtype=np.int64))
    return {r.astype(np.int64).tobytes() for r in rows}


def reachable(root):
    """Every object reachable from ``root`` through attributes, slots, dataclass fields and containers."""
    seen, stack = set(), [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, (str, bytes, int, float, complex, bool)):
            continue
        if inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isroutine(obj):
            continue
        seen.add(id(obj))
        yield obj
        if isinstance(obj, (np.ndarray, jax.Array)):
            continue
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        if dataclasses.is_dataclass(obj):
            stack.extend(getattr(obj, f.name, None) for f in dataclasses.fields(obj))
        stack.extend(vars(obj).values() if hasattr(obj, "__dict__") else ())
        for cls in type(obj).__mro__:
            for name in getattr(cls, "__slots__", ()):
                stack.append(getattr(obj, name, None))


def secret_material(root, rows: set[bytes], n: int) -> list[str]:
    """Descriptions of SecretKey / KeySet objects and arrays holding a secret row of length N, reachable from root."""
    found = []
    for obj in reachable(root):
        if isinstance(obj, (SecretKey, KeySet)):
            found.append(type(obj).__name__)
        elif isinstance(obj, (np.ndarray, jax.Array)) and obj.ndim >= 1 and obj.shape[-1] == n:
            host = np.asarray(obj)
            if np.issubdtype(host.dtype, np.integer):
                for row in host.reshape(-1, host.shape[-1]).astype(np.int64):
                    if row.tobytes() in rows:
                        found.append(f"array {host.shape} {host.dtype}")
                        break
    return found


def test_server_holds_no_secret_material():
    client = tiny_client()
    server = server_for(client)
    ct = server.load_ciphertext(client.encrypt(np.ones(4)))
    server.rotate(ct, 1)  # fill the server context's caches too
    rows, n = secret_rows(client), client.context.params.n
    # the search finds the secret where it is: a client holds it
    on_client = secret_material(client, rows, n)
    assert "SecretKey" in on_client and "KeySet" in on_client and any(f.startswith("array") for f in on_client)
    assert secret_material(server, rows, n) == []
    assert not any(hasattr(server, name) for name in ("decrypt", "secret", "secret_key", "keyset"))
    with pytest.raises(AttributeError):
        server.secret = client.keys.secret  # no place to put one


def test_server_refuses_secret_material():
    client = tiny_client()
    with pytest.raises(SecretMaterialError, match="evaluation_keys"):
        hemx.Server(client.context, client.keys)
    with pytest.raises(SecretMaterialError):
        hemx.Server(client.context, client.keys.secret)
    with pytest.raises(SecretMaterialError):
        hemx.Server.from_bytes(client.parameters_bytes(), client.secret_key_bytes())
    with pytest.raises(ParameterError):
        hemx.Server(client.context, client.keys.public)
    server = hemx.Server(client.context, client.evaluation_keys())  # in-process: public material is fine
    assert type(server.keys) is EvaluationKeys


# ------------------------------------------------------------------------------------------------------------
# settings that must agree between client and server
# ------------------------------------------------------------------------------------------------------------


def test_sparse_slots_travel_with_the_context_bytes():
    client = tiny_client(slots=8)
    server = server_for(client)
    assert server.context.slots == 8
    x = np.arange(8) / 8
    back = client.decrypt(server.dump_ciphertext(server.rotate(server.load_ciphertext(client.encrypt(x)), 1)))
    check_bits("sparse rotation", np.roll(x, -1), back, "n12/service")
    # bare parameters carry no slot count: a server that assumes N/2 slots cannot take this client's keys
    bare = hio.dumps(client.context.params)
    with pytest.raises(ContextMismatchError, match="slots=8"):
        hemx.Server.from_bytes(bare, client.evaluation_keys_bytes(), ntt=FAST_NTT)
    assert hemx.Server.from_bytes(bare, client.evaluation_keys_bytes(), ntt=FAST_NTT, slots=8).context.slots == 8


def test_mismatched_parameters_and_key_sets_are_rejected():
    client, other = tiny_client(), tiny_client(seed=12)
    server = server_for(client)
    with pytest.raises(ContextMismatchError, match="parameter set"):  # keys made with a longer modulus chain
        hemx.Server.from_bytes(client.parameters_bytes(), make_client(6, 3, seed=11).evaluation_keys_bytes())
    foreign = server.load_ciphertext(other.encrypt(np.ones(4)))  # same parameters, another key set
    mine = server.load_ciphertext(client.encrypt(np.ones(4)))
    with pytest.raises(KeyMismatchError):
        server.add(mine, foreign)
    with pytest.raises(KeyMismatchError):
        server.rotate(foreign, 1)
    with pytest.raises(KeyMismatchError):
        other.decrypt(server.dump_ciphertext(mine))
    with pytest.raises(SerializationError, match="expected a serialized Ciphertext"):
        server.load_ciphertext(client.evaluation_keys_bytes())
    with pytest.raises(SerializationError):
        hemx.Server.from_bytes(client.encrypt(np.ones(4)), client.evaluation_keys_bytes())


def test_client_restores_from_its_own_storage():
    client = tiny_client()
    stored = (client.parameters_bytes(), client.secret_key_bytes(), client.evaluation_keys_bytes())
    restored = hemx.Client.restore(*stored, ntt=FAST_NTT)
    assert restored.context.id != client.context.id
    x = np.linspace(-1, 1, client.context.slots)
    server = server_for(client)
    reply = server.dump_ciphertext(server.mul(server.load_ciphertext(client.encrypt(x)), 3.0, rescale=True))
    assert np.array_equal(restored.decrypt(reply), client.decrypt(reply))
    check_bits("restored client", 3 * x, restored.decrypt(reply), "n12/service")
    # the restored client encrypts for the same server
    check_bits("restored encrypt", x, client.decrypt(server.dump_ciphertext(
        server.load_ciphertext(restored.encrypt(x)))), "n12/service")
    with pytest.raises(KeyMismatchError):
        hemx.Client.restore(stored[0], tiny_client(seed=12).secret_key_bytes(), stored[2], ntt=FAST_NTT)
