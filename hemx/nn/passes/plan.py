"""Pass ``plan``: the :class:`Plan`, what the compiled network will do, known before any key is made.

Every step (level in/out, rotations, plaintext and ciphertext products, bootstraps) and the totals: the rotation
steps and the highest level each is used at (its key serves that level and below), the key count and bytes (with a
Context: the bootstrap's own keys too), the bootstraps and the ciphertexts they refresh.
"""

from __future__ import annotations

import dataclasses

from hemx.circuits.bootstrap import BootstrapParameters
from hemx.ckks.context import resolve_key_storage
from hemx.ckks.keygen import key_bytes as switch_key_bytes
from hemx.nn.passes.ir import Compilation
from hemx.nn.steps import Bootstrap, Step


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the compiled network will do, known before any key is made.

    Attributes:
        steps: every :class:`Step` in execution order.
        slots: slots per ciphertext; ``input_level`` the level inputs are encrypted at; ``bootstrap_level`` the
            level a bootstrap returns (None: no bootstrapping); ``poly_level`` the highest level polynomials run at
            (None: any).
        images_per_ciphertext: the images each ciphertext holds, interleaved (the steps' layouts and rotations
            are per image, on ``slots / images_per_ciphertext`` slots).
        rotations: the rotation steps the network itself needs (without the bootstrap's), on the ciphertext's
            slots (a step's rotation ``r`` times ``images_per_ciphertext``).
        bootstraps: bootstrap placements; ``bootstrapped_ciphertexts`` the ciphertexts they refresh in total.
        rotation_levels: the highest level each rotation step is used at (its key needs that level's digits and
            limbs only: ``ctx.keygen(rotation_level=...)``, :meth:`CompiledNetwork.keygen`).
        key_bytes: estimated bytes of the evaluation keys: the relinearization key and the bootstrap's keys (when
            known: ``boot_key_count``) in full, ``dnum x 2 x (L + K) x N x 4`` bytes each, the network's rotation
            keys at their levels (:func:`hemx.ckks.keygen.key_bytes`); half of that (and a 32-byte stream key each)
            where the context holds keys compact (``ctx.key_storage``; compiled for parameters alone: the storage
            a Context would choose here, :func:`hemx.ckks.context.resolve_key_storage`).
    """

    steps: tuple[Step, ...]
    slots: int
    input_level: int
    bootstrap_level: int | None
    poly_level: int | None
    rotations: tuple[int, ...]
    bootstraps: int
    bootstrapped_ciphertexts: int
    key_switches: int
    plaintext_mults: int
    ct_mults: int
    key_bytes: int | None
    key_count: int | None
    boot_key_count: int | None
    params_name: str | None
    rotation_levels: dict = dataclasses.field(default_factory=dict)
    images_per_ciphertext: int = 1

    def rows(self) -> list[dict]:
        out = []
        for s in self.steps:
            out.append(dict(step=s.output, node=s.node, kind=s.kind, level=f"{s.level_in}->{s.level_out}",
                            cts=s.ciphertexts, rot=s.key_switches, pmul=s.plaintext_mults, cmul=s.ct_mults,
                            note=s.note))
        return out

    def summary(self) -> str:
        """A readable table of the steps and the totals."""
        head = f"{'step':<24} {'kind':<9} {'levels':>7} {'cts':>4} {'rot':>5} {'pmul':>6} {'cmul':>5}  note"
        lines = [head, "-" * len(head)]
        for r in self.rows():
            lines.append(f"{r['step'][:24]:<24} {r['kind']:<9} {r['level']:>7} {r['cts']:>4} {r['rot']:>5} "
                         f"{r['pmul']:>6} {r['cmul']:>5}  {r['note']}")
        lines.append("-" * len(head))
        lines.extend(self.totals())
        return "\n".join(lines)

    def totals(self) -> list[str]:
        kb = "unknown" if self.key_bytes is None else f"{self.key_bytes / 2**30:.2f} GiB"
        boot = "" if self.boot_key_count is None else f" + {self.boot_key_count} bootstrap keys"
        return [
            f"parameters: {self.params_name or 'simulator'}, {self.slots} slots, input at level {self.input_level}, "
            f"bootstrap -> level {self.bootstrap_level}",
            f"bootstraps: {self.bootstraps} placements, {self.bootstrapped_ciphertexts} ciphertexts bootstrapped",
            f"rotations (key switches): {self.key_switches}; plaintext products: {self.plaintext_mults}; "
            f"ciphertext products: {self.ct_mults}",
            f"rotation keys: {len(self.rotations)} steps{boot}; keys (with relinearization): "
            f"{self.key_count if self.key_count is not None else '?'}, {kb}",
        ]

    def __rich__(self):
        from rich.table import Table  # noqa: PLC0415

        table = Table(title="hemx.nn plan", caption="\n".join(self.totals()))
        for col in ("step", "kind", "levels", "cts", "rot", "pmul", "cmul", "note"):
            table.add_column(col, justify="right" if col in ("cts", "rot", "pmul", "cmul", "levels") else "left")
        for r in self.rows():
            table.add_row(r["step"], r["kind"], r["level"], str(r["cts"]), str(r["rot"]), str(r["pmul"]),
                          str(r["cmul"]), r["note"])
        return table


def plan(c: Compilation) -> Compilation:
    """``c.plan``: the :class:`Plan` of ``c.steps``."""
    steps, slots, level0, boot_level = c.steps, c.target.slots, c.input_level, c.boot_level
    params, ctx, poly_cap = c.target.params, c.target.ctx, c.poly_cap
    images = c.target.images  # interleaved images: a rotation by r per image is one by r * images
    rotation_levels: dict[int, int] = {}
    for s in steps:
        for r in s.rotations:
            r = int(r) % slots * images
            if r:
                level = s.level_in if s.level_in is not None else level0
                rotation_levels[r] = max(level, rotation_levels.get(r, level))
    rotations = sorted(rotation_levels)
    boots = [s for s in steps if isinstance(s.op, Bootstrap)]
    boot_keys = None
    key_count = None
    key_bytes = None
    if params is not None:
        key_count = 1 + len(rotations)  # relinearization + rotations
        shared: set[int] = set()
        if boots and ctx is not None:
            bt = BootstrapParameters.create(params, slots=ctx.slots)  # (its keys; no bootstrapper is built)
            # at full slots a network rotation that the bootstrap also uses shares its (full) key
            shared = set(bt.rotations) & set(rotations) if slots * images == params.max_slots else set()
            extra = set(bt.rotations) - shared
            boot_keys = len(extra) + 1 + (2 if bt.encapsulation_weight is not None else 0)  # + conjugation
            key_count += boot_keys
        if not boots or boot_keys is not None:
            compact = (ctx.key_storage if ctx is not None else resolve_key_storage()) == "compact"
            key_bytes = (1 + (boot_keys or 0) + len(shared)) * switch_key_bytes(params, compact=compact) + sum(
                switch_key_bytes(params, rotation_levels[r], compact=compact) for r in rotations if r not in shared)
    return c.replace(plan=Plan(
        steps=tuple(steps), slots=slots * images, input_level=level0, bootstrap_level=boot_level, poly_level=poly_cap,
        rotations=tuple(rotations), bootstraps=len(boots), bootstrapped_ciphertexts=sum(s.ciphertexts for s in boots),
        key_switches=sum(s.key_switches for s in steps), plaintext_mults=sum(s.plaintext_mults for s in steps),
        ct_mults=sum(s.ct_mults for s in steps), key_bytes=key_bytes, key_count=key_count, boot_key_count=boot_keys,
        params_name=None if params is None else params.name, rotation_levels=rotation_levels,
        images_per_ciphertext=images))


__all__ = ["plan", "Plan"]
