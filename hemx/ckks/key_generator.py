"""The CKKS key generator: a secret key and its public, relinearization, Galois and bootstrapping keys.

:class:`KeyGenerator` decides which keys a request needs (rotation steps, Galois elements, the keys of planned
circuits and bootstraps, the levels each key serves) and has :func:`hemx.ckks.keygen.generate_keys` make them.
Keys are made for a context (its ring, sampler, key storage and id); a :class:`~hemx.ckks.context.Context`
holds one as ``ctx.key_generator``. :func:`resolve_key_storage` resolves the ``key_storage`` setting.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from hemx.ckks import keygen as keygen_mod
from hemx.ckks import placement as placement_mod
from hemx.ckks.keys import KeySet
from hemx.ckks.validation import check_int
from hemx.errors import ParameterError
from hemx.kernels import automorphism, native

on_placement = placement_mod.on_placement

#: How switching keys are held in memory (``Context(..., key_storage=...)``): "compact" keeps each key's b halves
#: and a 32-byte stream key, its uniform halves generated inside every key switch (half the memory; the native CPU
#: kernels generate them as they go, other backends expand them first); "full" keeps both halves; "auto" is compact
#: where the native kernels have the seeded inner product, full elsewhere.
KEY_STORAGE = ("auto", "compact", "full")


def resolve_key_storage(storage: str = "auto") -> str:
    """How a Context made with ``key_storage=storage`` holds switching keys: "compact" or "full" ("auto": compact
    where the native kernels generate the uniform halves inside the key switch, full elsewhere)."""
    if storage not in KEY_STORAGE:
        raise ParameterError(f"key_storage must be one of {KEY_STORAGE}, got {storage!r}")
    if storage == "auto":
        return "compact" if native.has_seeded_keys() else "full"
    return storage


class KeyGenerator:
    """Generates key sets for ``context``.

    Args:
        context: the :class:`~hemx.ckks.context.Context` the keys belong to (its parameters, ring, NTT plan,
            tables, sampler, ``key_storage``, id and placement are read when keys are made; circuits given to
            ``for_circuits`` are traced with its operations).
    """

    def __init__(self, context):
        self.context = context
        self.placement = context.placement

    def __repr__(self) -> str:
        return f"KeyGenerator({self.context!r})"

    @on_placement()
    def generate(
        self,
        rotations: Iterable[int] | str = (),
        *,
        conjugation: bool = False,
        relin: bool = True,
        galois_elements: Iterable[int] = (),
        bootstrap: keygen_mod.BootstrapKeys | None = None,
        sum_slots: bool = False,
        for_circuits: Iterable = (),
        rotation_level: int | Mapping[int, int] | None = None,
    ) -> KeySet:
        """Generate a secret key and its public, relinearization and Galois keys.

        Args:
            rotations: slot rotation steps that get a Galois key; "power_of_two" gives 1, 2, 4, ... < slots
                (enough for ``ctx.sum_slots``, and for any rotation by composition).
            conjugation: also generate the conjugation key.
            relin: generate the relinearization key (needed by ``ctx.mul``).
            galois_elements: raw Galois elements ``g`` (automorphisms ``X -> X^g``) that also get a key.
            bootstrap: also every key a bootstrap needs (its rotations, the conjugation key and, where it switches
                to an ephemeral sparse secret, the encapsulation keys), read from a value describing it
                (:class:`hemx.ckks.keygen.BootstrapKeys`: ``hemx.BootstrapParameters.create(ctx.params,
                slots=ctx.slots)`` or a bootstrapper, ``hemx.circuits.bootstrap.bootstrapper_for(ctx)``). ``True``
                raises :class:`~hemx.errors.ParameterError` saying so.
            sum_slots: also the power-of-two rotation keys ``ctx.sum_slots`` needs.
            for_circuits: circuits the keys must serve; their rotation, conjugation and bootstrapping keys are
                added (:func:`hemx.ckks.keygen.plan_keys`): ``LinearTransform`` objects, bootstraps (as
                ``bootstrap=``), ``"sum_slots"``, a function ``fn(ct, keys)`` (traced once, abstractly, on a fresh
                top-level ciphertext) or a tuple ``(fn, *example_args)`` (traced as ``fn(*example_args, keys)``;
                example ciphertexts may be ``hemx.ckks.keygen.placeholder(ctx, ...)``); a traced bootstrap also
                needs the bootstrap itself here or in ``bootstrap=`` (for its encapsulation keys). See
                ``docs/jit.md``.
            rotation_level: the highest level the rotation and conjugation keys asked for here serve (None: every
                level), or a mapping ``{step: level}`` for some rotation steps (the others serve every level).
                Such a key holds only that level's digits and limbs: at ``boot_16``'s level 10 a quarter of a full
                key's bytes. A ciphertext above it raises :class:`~hemx.errors.LevelError`. A bootstrap's own keys
                (``bootstrap=...``) always serve every level.
        """
        ctx = self.context
        n, slots = ctx.params.n, ctx.slots
        per_step: dict[int, int] = {}
        if isinstance(rotation_level, Mapping):
            per_step = {check_int("a rotation step", r): check_int("rotation_level", v)
                        for r, v in rotation_level.items()}
            for v in per_step.values():
                ctx.params.limbs_at_level(v)  # ParameterError beyond the chain
            rotation_level = None
        elif rotation_level is not None:
            rotation_level = check_int("rotation_level", rotation_level)
            ctx.params.limbs_at_level(rotation_level)  # ParameterError beyond the chain
        steps = keygen_mod.rotation_steps(rotations, slots)
        elements = list(galois_elements)
        if sum_slots:
            steps += keygen_mod.rotation_steps("power_of_two", slots)
        planned_boots, switching = [], set()
        if for_circuits is not None and (callable(for_circuits) or isinstance(for_circuits, str) or for_circuits):
            more_steps, more_elements, planned_boots, switching = keygen_mod.plan_keys(ctx, for_circuits)
            steps += more_steps
            elements += sorted(more_elements)
        boot = keygen_mod.bootstrap_keys(ctx, bootstrap, planned_boots, switching)
        rotations = sorted(set(steps))
        weight = None
        levelled: dict[int, int] = {}
        if rotation_level is not None:
            asked = {automorphism.galois_element(n, r % slots) for r in rotations if r % slots}
            asked |= {int(g) for g in elements if isinstance(g, (int, np.integer)) and not isinstance(g, bool)}
            if conjugation:
                asked.add(automorphism.conjugation_element(n))
            levelled = dict.fromkeys(asked, rotation_level)
        for r, v in per_step.items():
            if r % slots:
                g = automorphism.galois_element(n, r % slots)
                levelled[g] = max(v, levelled.get(g, v))
        if boot is not None:
            boot_elements, weight = boot
            elements += list(boot_elements)
            for g in boot_elements:  # the bootstrap's keys serve every level
                levelled.pop(g, None)
            levelled.pop(automorphism.conjugation_element(n), None)
            relin = True
        return keygen_mod.generate_keys(ctx, rotations, conjugation=conjugation, relin=relin,
                                        galois_elements=elements, encapsulation_weight=weight, levels=levelled)

