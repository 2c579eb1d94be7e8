"""Pass ``plan``: the :class:`Plan`, what the compiled network will do, known before any key is made.

Every step (level in/out, rotations, plaintext and ciphertext products, bootstraps) and the totals: the rotation
steps and the highest level each is used at (its key serves that level and below), the key count and bytes (with a
Context: the bootstrap's own keys too), the bootstraps and the ciphertexts they refresh.

And the precision: per activation (:func:`activation_rows`: each ReLU, max pool and sigmoid / tanh) its input's
calibrated and sound bounds, the one used, and the worst-case error of its approximation there, the ReLU's valid
domain (``relu_domain`` times the bound) and its error over it; the network's worst activation error; the extra
levels the ReLU domain costs (derived: the composite's depth minus the ``relu_domain=1`` composite's, per ReLU);
the bootstraps of each bound choice (compiled both ways by :func:`hemx.nn.compile` where both are given).
"""

from __future__ import annotations

import dataclasses

from hemx.circuits.bootstrap import BootstrapParameters
from hemx.ckks.context import resolve_key_storage
from hemx.ckks.keygen import key_bytes as switch_key_bytes
from hemx.nn import activations as acts
from hemx.nn.graph import Activation, MaxPool2D
from hemx.nn.passes.ir import Compilation
from hemx.nn.steps import Bootstrap, Linear, Step


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the compiled network will do, known before any key is made.

    Attributes:
        steps: every :class:`Step` in execution order.
        slots: slots per ciphertext; ``input_level`` the level inputs are encrypted at; ``bootstrap_level`` the
            level a bootstrap returns (None: no bootstrapping); ``poly_level`` the highest level polynomials run at
            (None: any).
        activations: per approximated activation, its bounds and worst-case errors (:func:`activation_rows`);
            ``composite`` the ReLU's :class:`~hemx.nn.activations.SignComposite` (None without ReLU), evaluated at
            ``x / (relu_domain B)``; ``relu_extra_levels`` its depth beyond the ``relu_domain=1`` default's;
            ``bounds_mode`` the bounds used and ``bound_choices`` ``{mode: bootstraps}`` (the other mode's where
            :func:`hemx.nn.compile` compiled both, or why it fails).
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
    activations: tuple = ()
    composite: object = None
    relu_domain: float = 1.0
    relu_extra_levels: int = 0
    bounds_mode: str = "calibrated"
    bound_choices: dict = dataclasses.field(default_factory=dict)

    @property
    def worst_activation_error(self) -> float | None:
        """The largest worst-case approximation error of any activation at its bound (None: no approximated
        activation): what the chosen approximations can add to one value, before later layers scale it."""
        errors = [a["error"] for a in self.activations if a["error"] is not None]
        return max(errors) if errors else None

    def activation_summary(self) -> list[str]:
        """The activations' bounds and errors as text lines (empty without approximated activations)."""
        if not self.activations:
            return []
        head = (f"{'activation':<24} {'kind':<8} {'calibrated':>10} {'sound':>10} {'used':>10} {'error':>9} "
                f"{'valid to':>10} {'error there':>11}")
        lines = [head]
        fmt = (lambda v: "-" if v is None else f"{v:.3g}")
        for a in self.activations:
            lines.append(f"{a['node'][:24]:<24} {a['kind']:<8} {fmt(a['calibrated']):>10} {fmt(a['sound']):>10} "
                         f"{fmt(a['bound']):>10} {fmt(a['error']):>9} {fmt(a['valid_to']):>10} "
                         f"{fmt(a['domain_error']):>11}")
        return lines

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
        lines.extend(self.activation_summary())
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
        ] + self.precision()

    def precision(self) -> list[str]:
        """The precision lines of :meth:`totals`: bounds used, the other bound choice's cost, the ReLU domain, the
        worst activation error."""
        out = [f"bounds: {self.bounds_mode}" + "".join(
            f"; {mode}: {n} bootstraps" if isinstance(n, int) else f"; {mode}: {n}"
            for mode, n in self.bound_choices.items())]
        if any(a["kind"] in ("relu", "maxpool") for a in self.activations):
            out.append(f"ReLU / max valid to {self.relu_domain:g} x bound: +{self.relu_extra_levels} levels per "
                       "ReLU over relu_domain=1 (derived from the composites' depths)")
        worst = self.worst_activation_error
        if worst is not None:
            out.append(f"worst-case activation error (approximation, at the bounds): {worst:.3g}")
        return out

    def __rich__(self):
        from rich.table import Table  # noqa: PLC0415

        table = Table(title="hemx.nn plan", caption="\n".join(self.totals()))
        for col in ("step", "kind", "levels", "cts", "rot", "pmul", "cmul", "note"):
            table.add_column(col, justify="right" if col in ("cts", "rot", "pmul", "cmul", "levels") else "left")
        for r in self.rows():
            table.add_row(r["step"], r["kind"], r["level"], str(r["cts"]), str(r["rot"]), str(r["pmul"]),
                          str(r["cmul"]), r["note"])
        if not self.activations:
            return table
        from rich.console import Group  # noqa: PLC0415

        acts_table = Table(title="activations: bounds and worst-case approximation errors")
        for col in ("activation", "kind", "calibrated", "sound", "used", "error", "valid to", "error there"):
            acts_table.add_column(col, justify="left" if col in ("activation", "kind") else "right")
        for line in self.activations:
            acts_table.add_row(line["node"], line["kind"], *("-" if line[k] is None else f"{line[k]:.3g}" for k in (
                "calibrated", "sound", "bound", "error", "valid_to", "domain_error")))
        return Group(table, acts_table)


def _maxpool_comparisons(window: int) -> int:
    """Comparisons along one axis of a max pool's separable chain (:mod:`hemx.nn.layers.maxpool`)."""
    count, cover = 0, 1
    while cover < window:
        cover += min(cover, window - cover)
        count += 1
    return count


def activation_rows(c: Compilation) -> tuple[dict, ...]:
    """One dict per approximated activation of ``c.nodes``: ``node``, ``kind`` (relu, maxpool, sigmoid, tanh),
    ``calibrated`` / ``sound`` (its input's bound in each mode, None where not given), ``bound`` (the one used),
    ``error`` (worst-case approximation error for inputs within ``bound``: :func:`hemx.nn.activations.relu_error_bound`
    at the runtime's scale ``relu_domain x bound``, a max pool's comparisons summed; a smooth fit's measured error),
    ``valid_to`` (the largest input it holds for: ``relu_domain x bound`` for ReLU and max, ``bound`` for the
    fits) and ``domain_error`` (the error bound there)."""
    rows = []
    comp, domain = c.composite, c.relu_domain
    for node in c.nodes:
        layer = node.layer
        kind = "maxpool" if isinstance(layer, MaxPool2D) else getattr(layer, "kind", None) if isinstance(
            layer, Activation) else None
        if kind not in ("relu", "maxpool", "sigmoid", "tanh"):
            continue
        value = node.inputs[0]
        b = c.bounds.get(value)
        row = dict(node=node.name, kind=kind, calibrated=c.calibrated_bounds.get(value),
                   sound=c.sound_bounds.get(value), bound=b, error=None, valid_to=None, domain_error=None)
        if b is not None and kind == "relu":
            row.update(error=acts.relu_error_bound(b, comp, domain=domain), valid_to=domain * b,
                       domain_error=acts.relu_error_bound(domain * b, comp))
        elif b is not None and kind == "maxpool":  # 2 x per-axis comparisons of differences bounded by 2 B
            n = 2 * _maxpool_comparisons(layer.window)
            row.update(error=n * acts.relu_error_bound(2 * b, comp, domain=domain), valid_to=domain * b,
                       domain_error=n * acts.relu_error_bound(2 * domain * b, comp))
        elif b is not None:
            fit = acts.smooth_fit(kind, b, layer.degree)
            row.update(error=fit.error, valid_to=b, domain_error=fit.error)
        rows.append(row)
    return tuple(rows)


def relu_extra_levels(c: Compilation) -> int:
    """Levels a ReLU of ``c`` needs beyond one with the ``relu_domain=1`` default composite (0 without ReLU)."""
    if c.composite is None:
        return 0
    return c.composite.depth - acts.domain_composite(1.0).depth


def share_rotations(steps) -> tuple:
    """``steps`` with each linear step's ``key_switches`` less the baby rotations of its input that an earlier step
    of the run already made: a value read by several linear maps (an LSTM's input by every gate of every time step,
    its hidden state by the four gates, a residual block's input by the convolution and the shortcut) has each
    rotation made once while the value lives (the runtime keeps them, :class:`hemx.nn.run.SharedRotations`)."""
    made: set = set()
    out = []
    for s in steps:
        if isinstance(s.op, Linear):
            babies = {(s.inputs[0], ji, r) for ji, r in s.op.baby_rotations()}
            reused = len(babies & made)
            made |= babies
            if reused:
                s = dataclasses.replace(s, key_switches=s.key_switches - reused,
                                        note=f"{s.note}; {reused} rotations of its input shared".lstrip("; "))
        out.append(s)
    return tuple(out)


def plan(c: Compilation) -> Compilation:
    """``c.plan``: the :class:`Plan` of ``c.steps`` (their rotation counts after :func:`share_rotations`)."""
    steps, slots, level0, boot_level = share_rotations(c.steps), c.target.slots, c.input_level, c.boot_level
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
        images_per_ciphertext=images, activations=activation_rows(c), composite=c.composite, relu_domain=c.relu_domain,
        relu_extra_levels=relu_extra_levels(c), bounds_mode=c.bounds_mode,
        bound_choices={c.bounds_mode: len(boots)}))


__all__ = ["plan", "Plan", "activation_rows", "relu_extra_levels", "share_rotations"]
