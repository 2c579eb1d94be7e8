"""Training past the depth of the chain: ``hemx.apps.logreg`` with bootstrapping.

The circuit is :func:`hemx.apps._logreg_circuit.train_refreshed`: the same packed data, sigmoid polynomial and
Nesterov steps as the depth-bounded :func:`~hemx.apps._logreg_circuit.train`, with the state (weights ``w`` and
Nesterov's look-ahead ``v``, two ciphertexts) bootstrapped, as one batch of two, whenever its level drops below
what the next iteration needs (4 levels with the degree-3 sigmoid, one more before the last iteration so the
trained weights can still score test samples): the lazy rule of
:func:`hemx.circuits.bootstrap.placement.chain_bootstraps`, applied to the chain of iterations before training
(:func:`refresh_iterations`). The encrypted training data is never bootstrapped: it stays at the top level and is
dropped to the state's level for each product.

Bootstrapping needs slot values in [-1, 1]. The state is kept divided by a public power of two ``shrink``
(folded into the gradient step's plaintext constants, so it costs no level) and its :class:`Scaled` factor
multiplies it back in plaintext. The client, who holds the data, picks ``shrink`` before training by running
the packed circuit on the exact slot simulator (:func:`schedule`): the largest state value met at any bootstrap,
divided by ``shrink``, must be at most :data:`STATE_TARGET`. When no admissible ``shrink`` does it (the
training diverges, or an explicit ``shrink`` is too small) :func:`schedule` raises
:class:`~hemx.errors.ParameterError` naming the iteration and the value. The server cannot check encrypted
values; it relies on the client's schedule.

Parameters (:func:`bootstrap_parameters`): the ``boot_*`` presets; the bootstrap's depth and output level are
:class:`~hemx.circuits.bootstrap.BootstrapParameters`' (15 levels at the presets). ``boot_16`` is the 128-bit
choice (10 levels left after a bootstrap: two iterations per bootstrap). ``boot_12`` / ``boot_13`` are test-size
rings and NOT secure; they leave only 3 levels after a bootstrap, less than one iteration's 4, so hemx grows their
chain to the bootstrap's depth plus ``ITERATIONS_PER_BOOTSTRAP * 4`` levels (the preset's ``levels`` override;
same primes, same bootstrap), which gives the same two iterations per bootstrap as ``boot_16``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import warnings
from typing import Callable

import jax
import numpy as np

from hemx.apps import _logreg_circuit as circuit
from hemx.circuits import CKKSEvaluator, SlotSimulator
from hemx.circuits.bootstrap import BootstrapParameters, bootstrapper_for
from hemx.circuits.bootstrap.placement import chain_bootstraps
from hemx.ckks import CKKSParameters, Ciphertext, Context, EvaluationKeys
from hemx.ckks import params as ckks_params
from hemx.errors import LevelError, ParameterError, SlotError

ITERATIONS_PER_BOOTSTRAP = 2  # boot_16's 10 levels hold two 4-level iterations; the test rings are grown to match
STATE_TARGET = 0.5  # largest |slot| of the shrunk state at a bootstrap: half the bootstrap's [-1, 1] range
MAX_SHRINK = 2.0 ** 12  # beyond it the bootstrap error (about 2^-18 of its range on boot_12) reaches 2^-6 in w / kappa
SECURE_PRESET = "boot_16"
INSECURE_PRESETS = {12: "boot_12", 13: "boot_13"}
BOOT16_SECONDS_PER_BOOTSTRAP = 20.2  # median, docs/results/bootstrap-cpu.md (2-core AMD EPYC Zen 4, 2026-11-24)
BOOT16_KEY_GIB = 7.63
# the depth-bounded run's learning rate 3 and sigmoid interval [-10, 10] diverge within 10 Nesterov iterations
# (|z| leaves the interval, where the cubic turns the wrong way); these keep 30 iterations inside it
LEARNING_RATE = 0.2
BOUND = 16.0

Progress = Callable[[str, int, int], None]


def insecure_note(params: CKKSParameters) -> str:
    """One line for reports: whether the ring is secure, and what the 128-bit choice would cost."""
    if params.name == SECURE_PRESET:
        return f"{SECURE_PRESET} is 128-bit (HE standard, special primes counted)"
    return (f"INSECURE test ring ({params.name}, N = 2^{params.log_n}): for demonstration only. The 128-bit choice "
            f"is {SECURE_PRESET} (--secure): about {BOOT16_SECONDS_PER_BOOTSTRAP:.0f} s per bootstrap on a 2-core CPU, "
            f"{BOOT16_KEY_GIB} GiB of keys")


def bootstrap_parameters(spec, *, secure: bool = False, log_n: int | None = None) -> CKKSParameters:
    """Parameters for bootstrapped training of ``spec`` (its slots must fit in N/2).

    ``secure=True``: the 128-bit ``boot_16`` preset as it is (10 levels left after a bootstrap). Otherwise the
    test ring ``boot_<log_n>`` (12 or 13; default the smallest whose N/2 holds ``spec.slots``), NOT secure, with
    its chain grown to the bootstrap's depth (:func:`bootstrap_of`) plus ``ITERATIONS_PER_BOOTSTRAP * depth``
    levels.
    """
    depth = spec.depth_per_iteration
    if secure:
        if log_n not in (None, 16):
            raise ParameterError(f"the 128-bit bootstrapping preset is {SECURE_PRESET} (N = 2^16); log_n={log_n!r}")
        params = CKKSParameters.preset(SECURE_PRESET)
    else:
        if log_n is None:
            fitting = [ln for ln in INSECURE_PRESETS if (1 << ln) // 2 >= spec.slots]
            if not fitting:
                raise SlotError(f"the layout needs {spec.slots} slots; the test rings hold at most "
                                f"{(1 << max(INSECURE_PRESETS)) // 2}: use fewer samples or secure=True "
                                f"({SECURE_PRESET})")
            log_n = min(fitting)
        if log_n not in INSECURE_PRESETS:
            raise ParameterError(f"test rings for bootstrapped training: log_n in {sorted(INSECURE_PRESETS)}, "
                                 f"got {log_n!r} (or secure=True for {SECURE_PRESET})")
        name = INSECURE_PRESETS[log_n]
        bootstrap_depth = bootstrap_of(_grown_preset(name, 0), spec.slots).depth
        params = _grown_preset(name, bootstrap_depth + ITERATIONS_PER_BOOTSTRAP * depth)
    if params.n // 2 < spec.slots:
        raise SlotError(f"{params.name} has {params.n // 2} slots; the layout needs {spec.slots}")
    left = bootstrap_of(params, spec.slots).output_level
    if left < depth + spec.inference_depth:
        raise LevelError(f"{params.name} leaves {left} levels after a bootstrap; one iteration and inference need "
                         f"{depth + spec.inference_depth}")
    return params


@functools.lru_cache(maxsize=8)
def bootstrap_of(params: CKKSParameters, slots: int) -> BootstrapParameters:
    """The bootstrap ``bootstrapper_for`` builds on a context of ``params`` with ``slots`` slots (its depth, output
    level and keys), from the parameters alone; cached (it lists the bootstrap's rotations, most of a second)."""
    return BootstrapParameters.create(params, slots=slots)


def _grown_preset(name: str, levels: int) -> CKKSParameters:
    """The test preset ``name`` with at least ``levels`` levels (0: the preset as it is): the added ones are user
    levels, at the bottom of the chain (level 1 first), with the preset's lowest level's prime size; the bootstrap's
    own levels are unchanged."""
    base = dict(ckks_params.PRESETS[name])
    extra = max(0, levels - int(base["levels"]))
    overrides = {"levels": int(base["levels"]) + extra}
    if base.get("level_bits") is not None:
        bits = tuple(base["level_bits"])
        overrides["level_bits"] = (bits[0],) * extra + bits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the caller is told by insecure_note(); the preset's name says it
        return CKKSParameters.preset(name, allow_insecure=True, **overrides)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """What client and server agree on for bootstrapped training (all public).

    Attributes:
        shrink: the state ciphertexts hold ``state / shrink`` (a power of two).
        top_level: level of the training data (and of the state before the first bootstrap): by default the
            bootstrap's output level, so every iteration runs on the same levels (fewer kernels to compile).
        output_level: level of a bootstrap's result.
        refresh_at: iterations before which the state is bootstrapped (:func:`refresh_iterations`).
        largest: largest ``|state / shrink|`` at those bootstraps in the simulation of the client's data.
        largest_state: the same before shrinking (in the packed units ``w / kappa``).
    """

    shrink: float
    top_level: int
    output_level: int
    refresh_at: tuple[int, ...]
    largest: float
    largest_state: float

    @property
    def bootstraps(self) -> int:
        return len(self.refresh_at)


def refresh_iterations(spec, *, top_level: int, output_level: int) -> tuple[int, ...]:
    """The iterations before which the state is bootstrapped: the lazy placement on the chain of iterations 1 to
    T - 1 (iteration 0 costs no level), the state starting at ``top_level``; each iteration consumes
    ``spec.depth_per_iteration`` levels and needs them, the last one also ``spec.inference_depth`` more."""
    steps = range(1, spec.iterations)
    needs = [spec.depth_per_iteration + (spec.inference_depth if t == spec.iterations - 1 else 0) for t in steps]
    placed = chain_bootstraps(top_level, needs, [spec.depth_per_iteration] * len(needs), output_level=output_level)
    return tuple(steps[i] for i in placed)


def _simulate(data_slots: np.ndarray, spec, *, top_level: int, output_level: int, shrink: float, limit: float | None):
    """The packed circuit on the exact slot simulator; bootstraps (before the iterations of
    :func:`refresh_iterations`) reset the level and (with ``limit``) check the range. Returns (final weights slots,
    refresh iterations, largest |shrunk state| at a refresh)."""
    ev = SlotSimulator(None, slots=spec.slots, max_level=top_level)
    refreshes, largest = [], [0.0]
    refresh_at = refresh_iterations(spec, top_level=top_level, output_level=output_level)

    def refresh(t: int, cts: list) -> list:
        biggest = max(float(np.max(np.abs(c.values))) for c in cts)
        if not math.isfinite(biggest):
            raise ParameterError(f"the training diverges: the state is not finite before iteration {t}; lower the "
                                 "learning rate, use fewer iterations or widen the sigmoid's interval")
        if limit is not None and biggest > limit:
            raise ParameterError(
                f"before iteration {t} the state reaches |w / kappa| = {biggest * shrink:.4g}; divided by "
                f"shrink = {shrink:g} that is {biggest:.3g}, beyond the bootstrap's range (|x| <= {limit:g} kept "
                "here). Use a larger shrink, fewer iterations or a lower learning rate")
        refreshes.append(t)
        largest[0] = max(largest[0], biggest)
        return [dataclasses.replace(c, level=output_level) for c in cts]

    with np.errstate(over="ignore", invalid="ignore"):
        batches = [ev.encrypt(row) for row in np.asarray(data_slots).reshape(-1, spec.slots)]
        out = circuit.train_refreshed(ev, batches, gammas=spec.gammas, poly=spec.sigmoid,
                                      layout=spec.layout, shrink=shrink, refresh_at=refresh_at, refresh=refresh)
    if out.level < spec.inference_depth:  # the placement assumes depth_per_iteration levels per iteration
        raise LevelError(f"internal: the trained weights are at level {out.level}, below inference's "
                         f"{spec.inference_depth}: the circuit's depth differs from the schedule's")
    return ev.decrypt(out), tuple(refreshes), largest[0]


def schedule(data_slots: np.ndarray, spec, params: CKKSParameters, *, shrink: float | None = None,
             output_level: int | None = None, data_level: int | None = None) -> Schedule:
    """Client: the bootstrapping schedule for the packed training data (:func:`pack_training`: ``(slots,)``, or
    :func:`pack_training_batches`: ``(n_batches, slots)``, the mini-batches).

    Runs the packed circuit on the exact :class:`~hemx.circuits.SlotSimulator` with the level plan of
    ``params`` (``output_level`` defaults to the bootstrap's, :func:`bootstrap_of`; the data is encrypted at
    ``data_level``, default ``output_level``, up to ``params.max_level``), records the state at every
    bootstrap and picks ``shrink`` (default: the least power of two that brings it within
    :data:`STATE_TARGET`, at most :data:`MAX_SHRINK`). Raises :class:`ParameterError` when the state is not
    finite, when no admissible ``shrink`` brings it in range, or when an explicit ``shrink`` does not.
    """
    out_level = bootstrap_of(params, spec.slots).output_level if output_level is None else int(output_level)
    top = out_level if data_level is None else data_level
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or not out_level <= top <= params.max_level:
        raise LevelError(f"data_level must be an integer in [{out_level}, {params.max_level}], got {data_level!r}")
    top = int(top)
    if out_level < spec.depth_per_iteration + spec.inference_depth:
        raise LevelError(f"a bootstrap leaves {out_level} levels; one iteration and inference need "
                         f"{spec.depth_per_iteration + spec.inference_depth}")
    if shrink is not None:
        if isinstance(shrink, bool) or not isinstance(shrink, (int, float)) or not shrink > 0 \
                or not math.isfinite(shrink) or math.frexp(shrink)[0] != 0.5:
            raise ParameterError(f"shrink must be a positive power of two, got {shrink!r}")
        chosen = float(shrink)
    else:
        _, _, raw = _simulate(data_slots, spec, top_level=top, output_level=out_level, shrink=1.0, limit=None)
        chosen = 2.0 ** max(0, math.ceil(math.log2(raw / STATE_TARGET))) if raw > 0 else 1.0
        if chosen > MAX_SHRINK:
            raise ParameterError(
                f"the state reaches |w / kappa| = {raw:.4g} at a bootstrap: it would need shrink = {chosen:g} > "
                f"{MAX_SHRINK:g}, where the bootstrap's error swamps the weights. The training diverges or grows too "
                "far: lower the learning rate, use fewer iterations or widen the sigmoid's interval")
    _, refreshes, largest = _simulate(data_slots, spec, top_level=top, output_level=out_level, shrink=chosen,
                                      limit=STATE_TARGET if shrink is None else 1.0)
    return Schedule(chosen, top, out_level, refreshes, largest, largest * chosen)


def simulate(data_slots: np.ndarray, spec, plan: Schedule) -> np.ndarray:
    """The packed, bootstrapped circuit on the exact slot simulator: final weight slots ``(slots,)``."""
    values, _, _ = _simulate(data_slots, spec, top_level=plan.top_level, output_level=plan.output_level,
                             shrink=plan.shrink, limit=1.0)
    return values


@dataclasses.dataclass
class BootstrapLog:
    """What the server's bootstrapped training did: iterations at which it bootstrapped and the seconds each took
    (a batch of two ciphertexts; the first includes compilation), levels before and after."""

    at: list = dataclasses.field(default_factory=list)
    seconds: list = dataclasses.field(default_factory=list)
    level_before: list = dataclasses.field(default_factory=list)
    level_after: int | None = None

    @property
    def count(self) -> int:
        return len(self.at)


def train_encrypted(ctx: Context, eval_keys: EvaluationKeys, ct_data, spec, plan: Schedule,
                    progress: Progress | None = None, log: BootstrapLog | None = None) -> Ciphertext:
    """Server: bootstrapped training on the encrypted packed data (one ciphertext, or a list of mini-batch
    ciphertexts: iteration ``t`` uses ``ct_data[t mod len]``); returns the encrypted ``w_T / kappa``.

    ``eval_keys`` must hold the bootstrapping keys (``ctx.keygen(rotations=spec.rotation_steps,
    bootstrap=bootstrapper_for(ctx))``). The state is bootstrapped before the iterations ``plan.refresh_at``.
    ``progress("bootstrap", k, K)`` after each bootstrap (``K = plan.bootstraps``) and ``progress("train", t, T)``
    after each iteration; ``log`` collects the bootstraps' times and levels.
    """
    batches = circuit.mini_batches(ct_data)
    lowest = min(c.level for c in batches)
    if lowest < plan.top_level:
        raise LevelError(f"the training data is at level {lowest}; the schedule starts at {plan.top_level}")
    bootstrapper = bootstrapper_for(ctx)
    if bootstrapper.plan.output_level != plan.output_level:
        raise LevelError(f"the context's bootstrap returns level {bootstrapper.plan.output_level}; the schedule "
                         f"was made for {plan.output_level}")
    batches = [ctx.drop_level(c, plan.top_level) if c.level > plan.top_level else c for c in batches]
    report = progress or (lambda stage, done, total: None)
    log = log if log is not None else BootstrapLog()
    ev = CKKSEvaluator(ctx, eval_keys)

    def refresh(t: int, cts: list) -> list:
        start = time.perf_counter()
        levels = [c.level for c in cts]
        low = min(levels)
        batch = ev.stack([ctx.drop_level(c, low) if c.level > low else c for c in cts])
        # the training keeps the weights and the Nesterov vector in range by construction (the kappa scaling, checked
        # against plaintext training in tests/apps/test_logreg_bootstrap.py); the bound the operations propagate
        # through the sums and the sigmoid is far looser than that, so it is not what the bootstrap checks
        fresh = bootstrapper.bootstrap(batch.replace(bound=None), eval_keys)
        jax.block_until_ready(fresh.data)
        log.at.append(t)
        log.seconds.append(time.perf_counter() - start)
        log.level_before.append(low)
        log.level_after = fresh.level
        report("bootstrap", log.count, max(plan.bootstraps, log.count))
        return [ev.take(fresh, i) for i in range(len(cts))]

    report("bootstrap", 0, plan.bootstraps)
    return circuit.train_refreshed(ev, batches, gammas=spec.gammas, poly=spec.sigmoid, layout=spec.layout,
                                   shrink=plan.shrink, refresh_at=plan.refresh_at, refresh=refresh, progress=progress)
