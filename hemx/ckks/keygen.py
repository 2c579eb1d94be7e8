"""Key generation: the secret key and its public, relinearization and Galois (rotation, conjugation) keys.

Functions of a :class:`hemx.ckks.context.Context` (its parameters, ring, sampler and tables); the context's
``keygen`` method is the front users call.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, Iterable, Mapping, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from hemx.ckks import encoder, evaluator
from hemx.ckks import keyswitch as ks
from hemx.ckks.ciphertext import Ciphertext, Plaintext
from hemx.ckks.keys import DEFAULT_XOF, STREAM_XOFS, EvaluationKeys, KeySet, PublicKey, SecretKey, SwitchingKey, new_id
from hemx.ckks.sampling import expand_seed, stream_key, uniform_rows
from hemx.ckks.validation import check_int
from hemx.errors import ParameterError
from hemx.kernels import automorphism, modarith
from hemx.kernels import ntt as ntt_kernels

def rotation_steps(rotations: Iterable[int] | str, slots: int) -> list[int]:
    """The steps of ``keygen(rotations=...)``: a list, or "power_of_two" (1, 2, 4, ... < slots)."""
    if isinstance(rotations, str):
        if rotations != "power_of_two":
            raise ParameterError("rotations must be a list of steps or 'power_of_two'")
        return [1 << i for i in range(max(slots - 1, 0).bit_length())]
    if isinstance(rotations, bytes) or not isinstance(rotations, Iterable):
        raise ParameterError(f"rotations must be a list of integer steps or 'power_of_two', got {rotations!r}")
    return [check_int("a rotation step", r) for r in rotations]


def key_dims(params, level: int | None) -> tuple[int, int]:
    """``(D, k + L)`` of a switching key serving ciphertexts up to ``level`` (None: every level): the digits with a
    limb at that level and the ``P`` limbs plus the level's ``Q`` limbs."""
    limbs = params.num_limbs if level is None else params.limbs_at_level(level)
    return sum(1 for lo, _ in params.digits() if lo < limbs), len(params.special_moduli) + limbs


def key_bytes(params, level: int | None = None, *, compact: bool = False) -> int:
    """Bytes one switching key holds in memory serving ciphertexts up to ``level`` (None: every level):
    ``D x 2 x (k + L) x N x 4``, or with ``compact`` (``Context(key_storage="compact")``) its ``b`` halves,
    ``D x (k + L) x N x 4``, and a 32-byte stream key (``SwitchingKey.nbytes`` of the key made)."""
    num_d, m = key_dims(params, level)
    return num_d * (1 if compact else 2) * m * params.n * 4 + (32 if compact else 0)


def generate_keys(ctx, rotations: Iterable[int] | str = (), *, conjugation: bool = False,
                  relin: bool = True, galois_elements: Iterable[int] = (),
                  encapsulation_weight: int | None = None, levels: Mapping[int, int] | None = None) -> KeySet:
    """Secret key ``s`` (ternary), public key over Q, and the requested switching keys (see ``Context.keygen``).

    ``levels``: Galois element -> the highest level its key serves (smaller keys); the others serve every level."""
    p, smp = ctx.params, ctx.sampler
    num_p, num_q = ctx.num_p, p.num_limbs
    key_id = new_id()
    s = smp.ternary((p.n,), p.hamming_weight)
    s_ntt = ctx.ring.ntt(encoder.residues(s.astype(np.int64), ctx.basis))
    secret = SecretKey(s, s_ntt, ctx.id, key_id)
    a = jnp.asarray(smp.uniform(p.moduli, (num_q, p.n)))
    e = ctx.to_ntt_q(smp.gaussian((p.n,), p.sigma), p.max_level)
    b = evaluator.sub(e, evaluator.mul_elementwise(a, s_ntt[num_p:], ctx.plan, num_p=num_p, num_q=num_q), ctx.plan,
                      num_p=num_p, num_q=num_q)
    public = PublicKey(jnp.stack([b, a]), ctx.id, key_id)
    relin_key = None
    if relin:
        s2 = evaluator.mul_elementwise(s_ntt, s_ntt, ctx.plan, num_p=0, num_q=num_p + num_q)
        relin_key = switching_key(ctx, s_ntt, s2, kind="relin", galois=None, key_id=key_id)
    elements = {automorphism.galois_element(p.n, r % ctx.slots) for r in rotation_steps(rotations, ctx.slots)
                if r % ctx.slots}
    if conjugation:
        elements.add(automorphism.conjugation_element(p.n))
    for g in galois_elements:  # raw automorphisms X -> X^g (e.g. full-slot rotations of a sparse context)
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or int(g) % 2 == 0 or not 1 < g < 2 * p.n:
            raise ParameterError(f"a Galois element must be an odd integer in (1, 2N = {2 * p.n}), got {g!r}")
        elements.add(int(g))
    galois = {}
    for g in sorted(elements):
        s_g = automorphism.apply_ntt_automorphism(s_ntt, ctx.tables.index_map(g))
        galois[g] = switching_key(ctx, s_ntt, s_g, kind="galois", galois=g, key_id=key_id,
                                  level=(levels or {}).get(g))
    switching = {}
    if encapsulation_weight is not None:
        # an ephemeral sparse secret s' and the keys s -> s' and s' -> s (bootstrapping switches to s' just before
        # ModRaise, so the overflow q0 I stays small, and back right after it); s' itself is discarded
        sparse = smp.ternary((p.n,), int(encapsulation_weight))
        sparse_ntt = ctx.ring.ntt(encoder.residues(sparse.astype(np.int64), ctx.basis))
        switching["to_sparse"] = switching_key(ctx, sparse_ntt, s_ntt, kind="to_sparse", galois=None, key_id=key_id)
        switching["from_sparse"] = switching_key(ctx, s_ntt, sparse_ntt, kind="from_sparse", galois=None,
                                                 key_id=key_id)
    return KeySet(public=public, relin=relin_key, galois=galois, context_id=ctx.id, key_id=key_id,
                  switching=switching, secret=secret)


def switching_key(ctx, s_ntt, s_src, *, kind: str, galois: int | None, key_id: int,
                  level: int | None = None) -> SwitchingKey:
    """Hybrid key from ``s_src`` to ``s``: per digit ``b_d = -a_d s + e_d + P g_d s_src`` over ``P + Q``.

    The uniform ``a_d`` are the rows of a fresh 32-byte seed by the default expansion
    (:data:`hemx.ckks.keys.DEFAULT_XOF`, AES-128 in counter mode; :func:`hemx.ckks.sampling.expand_seed`), kept on the
    key (serialization stores ``b_d`` and the seed). The key holds uint32
    ``(D, 2, num_p + L, N)``, or with ``ctx.key_storage == "compact"`` only ``(D, 1, num_p + L, N)`` (the ``b_d``)
    and the stream key, its ``a_d`` generated inside each key switch. ``level``: serve ciphertexts up to that level
    only: the ``(D_l, ., num_p + L_l, N)`` leading rows of the key the same seed and errors would give in full
    (every row is a function of its own digit and limb)."""
    p, smp = ctx.params, ctx.sampler
    num_d, m = key_dims(p, level)
    num_p = ctx.num_p
    seed = smp.seed()
    stream = stream_key(seed)
    a = uniform_rows(stream, ctx.basis[:m], digits=num_d, n=p.n, xof=DEFAULT_XOF)
    errors = jnp.asarray(smp.gaussian((num_d, p.n), p.sigma).astype(np.int32))  # |e| <= 6 sigma
    big_p = math.prod(p.special_moduli)
    gadget = np.zeros((num_d, m, 1), dtype=np.uint32)  # [P]_{q_i} on digit d's own Q limbs, 0 elsewhere
    for d, (lo, hi) in enumerate(p.digits()[:num_d]):
        for i in range(lo, min(hi, m - num_p)):
            gadget[d, num_p + i, 0] = big_p % p.moduli[i]
    compact = ctx.key_storage == "compact"
    data = _key_data(errors, a, s_ntt, s_src, jnp.asarray(gadget), ctx.plan, rows=m, with_uniform=not compact)
    return SwitchingKey(data, kind, galois, ctx.id, key_id, stream=jnp.asarray(stream) if compact else None,
                        seed=seed, level=level, xof=DEFAULT_XOF)


@functools.partial(jax.jit, static_argnames=("rows", "with_uniform"))
def _key_data(errors, a, s, s_src, gadget, plan, *, rows: int, with_uniform: bool):
    """A switching key's data ``(D, 1, rows, N)`` (its ``b_d``) or, ``with_uniform``, ``(D, 2, rows, N)`` (``b_d``,
    ``a_d``), in one program: the key's only new buffer is its own (eager slicing, stacking or a new axis would each
    write a copy into freshly faulted pages: at ``boot_16`` a key is 97 MB). ``s`` and ``s_src``: ``(>= rows, N)``
    NTT domain (their first ``rows`` limbs are read); the rest as :func:`_key_halves`."""
    b = _key_halves(errors, a, s[:rows], s_src[:rows], gadget, plan, rows=rows)
    return jnp.stack([b, a], axis=1) if with_uniform else b[:, None]


def _key_halves(errors, a, s, s_src, gadget, plan, *, rows: int):
    """The ``b_d = e_d - a_d s + g_d s_src`` of a switching key over the plan's first ``rows`` limbs (traced inside
    :func:`_key_data`): ``errors`` int32 ``(D, N)`` (small: their residues are formed here), ``a`` ``(D, rows, N)``,
    ``s`` and ``s_src`` ``(rows, N)`` (NTT domain), ``gadget`` ``(D, rows, 1)`` (``[P]_{q_i}`` on each digit's limbs)."""
    table = ks.limb_table(plan, 0, rows)
    q = table.q.reshape(1, rows, 1)
    e = errors[:, None, :]
    res = jnp.where(e < 0, e + q.astype(jnp.int64), e).astype(jnp.uint32)  # exact residues of |e| < q
    e_ntt = ntt_kernels.ntt(res, ks.limb_plan(plan, 0, rows))
    term = modarith.mul_barrett(jnp.broadcast_to(s_src, a.shape), jnp.broadcast_to(gadget, a.shape), table)
    return modarith.sub_mod(modarith.add_mod(e_ntt, term, table.q), modarith.mul_barrett(a, s, table), table.q)


def full_key(ctx, key: SwitchingKey) -> SwitchingKey:
    """``key`` with both halves stored, ``(D, 2, M, N)``: a compact key's uniform halves generated from its stream key
    (the same values every key switch generates); a full key as it is."""
    if not key.compact:
        return key
    d, _, m, n = key.data.shape
    a = uniform_rows(np.asarray(key.stream), ctx.basis[:m], digits=d, n=n, xof=key.xof)
    return dataclasses.replace(key, data=jnp.concatenate([key.data, a[:, None]], axis=1), stream=None)


def compact_key(ctx, key: SwitchingKey) -> SwitchingKey:
    """``key`` as a compact key (its ``b_d`` and stream key; half the bytes): a full key seeded with a stream
    expansion (AES-128 or ChaCha20) drops its stored ``a_d`` after checking that they are the seed's expansion (every
    digit's first row); a compact key as it is. Keys without a seed, or seeded with SHAKE-256 (made before format
    version 5), cannot be compact (:class:`ParameterError`)."""
    if key.compact:
        return key
    if key.seed is None or key.xof not in STREAM_XOFS:
        raise ParameterError(f"only keys seeded with a stream expansion {STREAM_XOFS} can be compact; this one has "
                             f"{'no seed' if key.seed is None else 'a ' + key.xof + ' seed'}")
    stream = stream_key(key.seed)
    first = np.asarray(uniform_rows(stream, ctx.basis[:1], digits=key.data.shape[0], n=key.data.shape[-1],
                                    xof=key.xof))[:, 0]
    if not np.array_equal(np.asarray(key.data[:, 1, 0]), first):
        raise ParameterError("the key's uniform halves are not its seed's expansion (the key was changed after "
                             "keygen): it cannot be made compact")
    return dataclasses.replace(key, data=key.data[:, :1], stream=jnp.asarray(stream))


# ------------------------------------------------------------------------------------------ key planning
# ``ctx.keygen(for_circuits=[...])``: the rotation (Galois) and switching keys a set of circuits needs, found by
# asking the circuits (LinearTransform.rotations, a bootstrapper's galois_elements) or by tracing a function
# once, abstractly (jax.eval_shape: no arithmetic runs), with a key set that records every key it is asked for.

class _Requests:
    """What a traced circuit asked for (hashed by identity: static pytree data of the recorder)."""

    def __init__(self):
        self.elements: set[int] = set()
        self.switching: set[str] = set()


class _RecordingMapping(Mapping):
    """A key dictionary that has every key: each lookup records its name and returns a stand-in key."""

    def __init__(self, make, record):
        self._make, self._record = make, record

    def __getitem__(self, name):
        self._record(name)
        return self._make(name)

    def __contains__(self, name) -> bool:
        self._record(name)
        return True

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0


@dataclasses.dataclass(frozen=True, repr=False)
class KeyRecorder(EvaluationKeys):
    """Evaluation keys that record which Galois / switching keys a traced circuit uses (key planning only)."""

    requests: _Requests | None = None

    def __repr__(self) -> str:
        return f"KeyRecorder(elements={sorted(self.requests.elements)})"


def _recorder(context_id: int, key_id: int, requests: _Requests, public, switching) -> KeyRecorder:
    ids = dict(context_id=context_id, key_id=key_id)
    galois = _RecordingMapping(lambda g: SwitchingKey(switching, "galois", int(g), **ids),
                               lambda g: requests.elements.add(int(g)))
    other = _RecordingMapping(lambda name: SwitchingKey(switching, str(name), None, **ids),
                              lambda name: requests.switching.add(str(name)))
    return KeyRecorder(public=PublicKey(public, **ids), relin=SwitchingKey(switching, "relin", None, **ids),
                       galois=galois, switching=other, requests=requests, **ids)


jax.tree_util.register_pytree_node(
    KeyRecorder,
    lambda k: ((k.public.data, k.relin.data), (k.context_id, k.key_id, k.requests)),
    lambda aux, leaves: _recorder(aux[0], aux[1], aux[2], *leaves),
)


def placeholder(ctx, *, batch: tuple[int, ...] = (), level: int | None = None, key_id: int = 0) -> Ciphertext:
    """A ciphertext of ``ctx`` with abstract data (``jax.ShapeDtypeStruct``), for tracing a circuit before any key
    exists (``ctx.keygen(for_circuits=[(fn, placeholder(ctx, level=3))])``): fresh-encryption metadata at
    ``level`` (default the top level), ``batch`` leading axes, key set ``key_id``."""
    pt = jax.eval_shape(lambda: ctx.encode(np.zeros(tuple(batch) + (ctx.slots,)), level=level))
    shape = tuple(pt.data.shape[:-2]) + (2,) + tuple(pt.data.shape[-2:])
    return Ciphertext(data=jax.ShapeDtypeStruct(shape, np.uint32), level=pt.level, scale=pt.scale, slots=pt.slots,
                      is_complex=False, context_id=ctx.id, key_id=key_id)


def trace_requirements(ctx, fn: Callable, args: tuple) -> _Requests:
    """The keys ``fn(*args, keys)`` asks for, traced once abstractly. Ciphertexts / plaintexts in ``args`` are
    traced (their data may be ``jax.ShapeDtypeStruct``); anything else (matrices, coefficients) is passed as is."""
    leaves, treedef = jax.tree_util.tree_flatten(args, is_leaf=lambda x: isinstance(x, (Ciphertext, Plaintext)))
    where = [i for i, leaf in enumerate(leaves) if isinstance(leaf, (Ciphertext, Plaintext))]
    key_ids = {leaves[i].key_id for i in where if isinstance(leaves[i], Ciphertext)}
    if len(key_ids) > 1:
        raise ParameterError("the example ciphertexts of a traced circuit belong to different key sets")
    requests = _Requests()
    p = ctx.params
    m = ctx.num_p + p.num_limbs
    recorder = _recorder(ctx.id, key_ids.pop() if key_ids else 0, requests,
                         jax.ShapeDtypeStruct((2, p.num_limbs, p.n), np.uint32),
                         jax.ShapeDtypeStruct((len(p.digits()), 2, m, p.n), np.uint32))

    def run(traced, keys):
        full = list(leaves)
        for i, x in zip(where, traced):
            full[i] = x
        return fn(*jax.tree_util.tree_unflatten(treedef, full), keys)

    jax.eval_shape(run, [leaves[i] for i in where], recorder)
    return requests


def plan_keys(ctx, circuits: Iterable) -> tuple[list[int], set[int], list, set[str]]:
    """``(steps, galois_elements, bootstraps, switching)`` that ``circuits`` need (``Context.keygen(for_circuits=
    ...)``): rotation steps, raw Galois elements, the bootstrap values (:class:`BootstrapKeys`) among them and the
    names of the other switching keys traced functions asked for.

    Each circuit is one of: an object with ``rotations`` (steps, e.g. a :class:`~hemx.circuits.LinearTransform`);
    a :class:`BootstrapKeys` value (``galois_elements`` and ``encapsulation_weight``: a bootstrap's parameters or
    the bootstrapper, which also needs the encapsulation keys); ``"sum_slots"`` (power-of-two steps below the slot
    count); a function ``fn(ct, keys)`` traced once on a fresh top-level ciphertext (:func:`placeholder`); or a
    tuple ``(fn, *args)`` traced as ``fn(*args, keys)``, whose ciphertext arguments may be real or
    :func:`placeholder` ones.
    """
    if isinstance(circuits, (str, bytes)) or callable(circuits) or not isinstance(circuits, Iterable):
        circuits = [circuits]
    steps: list[int] = []
    elements: set[int] = set()
    bootstraps: list = []
    switching: set[str] = set()
    for item in circuits:
        if isinstance(item, str):
            if item == "sum_slots":
                steps += rotation_steps("power_of_two", ctx.slots)
            elif item == "bootstrap":
                raise ParameterError(f"for_circuits=['bootstrap'] is not enough: {_BOOTSTRAP_HINT}")
            else:
                raise ParameterError(f"unknown circuit name {item!r}; use 'sum_slots', or the bootstrap itself "
                                     f"({_BOOTSTRAP_HINT})")
        elif is_bootstrap_keys(item):
            bootstraps.append(item)
        elif hasattr(item, "rotations") and not callable(item):
            steps += rotation_steps(list(item.rotations), ctx.slots)
        elif isinstance(item, tuple) and item and callable(item[0]):
            requests = trace_requirements(ctx, item[0], tuple(item[1:]))
            elements |= requests.elements
            switching |= requests.switching
        elif callable(item):
            requests = trace_requirements(ctx, item, (placeholder(ctx),))
            elements |= requests.elements
            switching |= requests.switching
        else:
            raise ParameterError(
                "for_circuits takes LinearTransform-like objects (with .rotations), bootstraps (with "
                ".galois_elements), 'sum_slots', functions fn(ct, keys) or tuples (fn, *example_args); got "
                f"{item!r}")
    return steps, elements, bootstraps, switching


# ------------------------------------------------------------------------------------------ bootstrapping keys
# A bootstrap is a circuit (a layer above this one); keygen learns the keys it needs from a value that describes
# it, duck-typed through :class:`BootstrapKeys`.

_BOOTSTRAP_HINT = ("pass the bootstrap whose keys to make, bootstrap=hemx.BootstrapParameters.create(ctx.params, "
                   "slots=ctx.slots) or a Bootstrapper (hemx.circuits.bootstrap.bootstrapper_for(ctx))")


class BootstrapKeys(Protocol):
    """What ``ctx.keygen(bootstrap=...)`` reads of a bootstrap: any object with these attributes (a bootstrap's
    parameters or its prepared circuit; this layer imports neither).

    Attributes:
        galois_elements: the Galois elements (rotations and conjugation) whose keys it uses, at every level.
        encapsulation_weight: non-zeros of the ephemeral sparse secret of its ``"to_sparse"`` / ``"from_sparse"``
            switching keys; None where it needs none.
        params: optionally, the CKKS parameters it was made for (checked against the context's).
    """

    galois_elements: tuple[int, ...]
    encapsulation_weight: int | None


def is_bootstrap_keys(value) -> bool:
    """Whether ``value`` has the attributes of :class:`BootstrapKeys`."""
    return not isinstance(value, (bool, str, bytes)) and hasattr(value, "galois_elements") \
        and hasattr(value, "encapsulation_weight")


def bootstrap_keys(ctx, bootstrap, planned=(), switching=()) -> tuple[tuple[int, ...], int | None] | None:
    """``(galois_elements, encapsulation_weight)`` of the bootstraps ``keygen`` serves: ``bootstrap`` (the
    ``bootstrap=`` argument: None / False, or a :class:`BootstrapKeys` value) and the ``planned`` ones of
    ``for_circuits``; None when there are none. ``switching``: the switching keys traced circuits asked for, which
    only a bootstrap value can make."""
    if bootstrap is True:
        raise ParameterError(f"keygen(bootstrap=True) cannot tell which bootstrap: {_BOOTSTRAP_HINT}")
    values = [] if bootstrap is None or bootstrap is False else [bootstrap]
    values += list(planned)
    for value in values:
        if not is_bootstrap_keys(value):
            raise ParameterError(f"bootstrap must be a bootstrap's description (with .galois_elements and "
                                 f".encapsulation_weight), got {value!r:.80}: {_BOOTSTRAP_HINT}")
        params = getattr(value, "params", None)
        if params is not None and params != ctx.params:
            raise ParameterError("the bootstrap was made for other CKKS parameters than this context's: "
                                 f"{_BOOTSTRAP_HINT}")
    if not values:
        if switching:
            raise ParameterError(f"the traced circuit uses the switching keys {sorted(switching)} of a bootstrap: add "
                                 f"the bootstrap to for_circuits or keygen(bootstrap=...) ({_BOOTSTRAP_HINT})")
        return None
    weights = {value.encapsulation_weight for value in values}
    if len(weights) > 1:
        raise ParameterError(f"bootstraps with different encapsulation weights {sorted(weights, key=str)}: one key "
                             "set holds one pair of encapsulation keys")
    elements = tuple(sorted({int(g) for value in values for g in value.galois_elements}))
    return elements, weights.pop()
