"""Scratchpad residency and timing of a key-switching schedule.

Two passes over a :class:`~hemx.dataflow.schedule.Schedule`:

1. **Residency** (:func:`plan_residency`): walk the tasks in program order with a scratchpad of
   ``floor(scratchpad_bytes / tower_bytes)`` tower slots and decide, before each task, which towers to load,
   which to evict and which evictions need a write-back. This fixes the DRAM traffic; it does not depend on
   bandwidth or compute rate (FHE is data-oblivious, so a compiler knows every address and every future use).
2. **Timing** (:func:`replay`): run the resulting memory and compute events on two in-order queues, one DRAM
   channel of ``bandwidth`` bytes/s and one compute unit of ``modops`` modular ops/s. A transfer waits for
   the channel and for its slot to be free; a task waits for the compute unit, its operands and its output
   slots. Memory runs ahead of compute as far as slots allow (decoupled prefetch), as in CiFlow §V-C.

Residency policy (explicit, compiler-managed; ``policy="belady"``, the default):

- a task's operands and results must all be resident while it runs; streamed key towers land in the
  scratchpad like any other operand and are dropped after their single use;
- a value that has no later use is freed at once, without a write-back; an element-wise or transform task
  writes its result into the slot of an operand that dies with it (in place);
- when a slot is needed, the resident value whose next use is furthest in the future is evicted (Belady's
  MIN), a clean one before a dirty one on ties; a dirty value (produced or updated on chip since it was last
  in DRAM) is written back, a clean one (the input, or a reloaded spill) is dropped for free;
- results of the key switch are written to DRAM as soon as they are computed.

``policy="lru"`` evicts the least recently used value instead (for comparison only).
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import Any

from hemx.dataflow.schedule import (
    INPUT, KEY, OUTPUT, STAGES, OpCosts, Schedule, ScheduleOptions, build_schedule, normalize_dataflow,
)
from hemx.dataflow.shape import MIB, KeySwitchShape
from hemx.errors import ParameterError

# CiFlow §V-A / §VI-C: the RPU with 128 HPLE lanes (one modular multiplier each) at 1.7 GHz.
RPU_MODOPS = 128 * 1.7e9
GB = 1e9  # bandwidths are decimal (DDR4-3200 = 25.6 GB/s); data sizes are MiB

KEY_MODES = ("stream", "onchip", "seeded")
POLICIES = ("belady", "lru")

# trace event codes
_LOAD, _STORE, _DROP, _FREE, _TASK = range(5)


@dataclasses.dataclass(frozen=True)
class Machine:
    """The accelerator the key switch runs on.

    Attributes:
        scratchpad_bytes: on-chip data memory (inputs and intermediates); default 32 MiB as CiFlow.
        bandwidth: DRAM bandwidth in bytes/s (decimal GB/s x 1e9).
        modops: compute throughput in modular operations per second.
        keys: "stream" (key towers read from DRAM through the scratchpad, once each), "onchip" (keys preloaded
            into a separate key SRAM, as CiFlow's 392 MB = 32 MB data + 360 MB keys: no key traffic, no
            scratchpad space) or "seeded" (streamed, but the uniform half of every key pair is regenerated on
            chip from a seed, halving key traffic: the key compression CiFlow §IV-D mentions).
        policy: "belady" (default) or "lru".
    """

    scratchpad_bytes: int = 32 * MIB
    bandwidth: float = 64 * GB
    modops: float = RPU_MODOPS
    keys: str = "stream"
    policy: str = "belady"

    def __post_init__(self):
        if self.keys not in KEY_MODES:
            raise ParameterError(f"keys must be one of {KEY_MODES}, got {self.keys!r}")
        if self.policy not in POLICIES:
            raise ParameterError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        if self.scratchpad_bytes <= 0:
            raise ParameterError(f"scratchpad must be positive, got {self.scratchpad_bytes} bytes")
        if not self.bandwidth > 0 or not self.modops > 0:
            raise ParameterError("bandwidth and compute rate must be positive")

    @classmethod
    def create(cls, scratchpad_mb: float = 32, bandwidth_gbs: float = 64, modops: float = RPU_MODOPS,
               keys: str = "stream", policy: str = "belady") -> "Machine":
        return cls(scratchpad_bytes=int(scratchpad_mb * MIB), bandwidth=bandwidth_gbs * GB, modops=modops,
                   keys=keys, policy=policy)

    def with_(self, **changes) -> "Machine":
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True)
class Traffic:
    """Bytes moved between DRAM and the scratchpad by one key switch."""

    input_read: int  # first load of each input tower
    spill_read: int  # reloads: evicted towers brought back (the input included)
    spill_write: int  # write-backs of evicted dirty towers
    output_write: int  # the 2 l result towers
    key_read: int  # switching-key towers streamed in

    @property
    def data(self) -> int:
        return self.input_read + self.spill_read + self.spill_write + self.output_write

    @property
    def total(self) -> int:
        return self.data + self.key_read

    @property
    def reads(self) -> int:
        return self.input_read + self.spill_read + self.key_read

    @property
    def writes(self) -> int:
        return self.spill_write + self.output_write


@dataclasses.dataclass(frozen=True)
class Trace:
    """Residency decisions of one schedule on one scratchpad: the traffic and the event list to time."""

    schedule: Schedule
    slots: int
    keys: str
    policy: str
    traffic: Traffic
    peak_slots: int
    events: tuple


def scratchpad_slots(shape: KeySwitchShape, scratchpad_bytes: int) -> int:
    return int(scratchpad_bytes // shape.tower_bytes)


def min_slots(schedule: Schedule, keys: str = "stream") -> int:
    """The fewest slots any task of the schedule needs at once (its operands, keys included, and results)."""
    on_chip_keys = keys != "onchip"
    need = 0
    for t in schedule.tasks:
        vals = set(t.inputs) | set(t.outputs)
        if not on_chip_keys:
            vals = {v for v in vals if schedule.kinds[v] != KEY}
        need = max(need, len(vals))
    return need


def plan_residency(schedule: Schedule, slots: int, keys: str = "stream", policy: str = "belady") -> Trace:
    """Walk the schedule with ``slots`` tower slots; see the module docstring for the policy."""
    if keys not in KEY_MODES:
        raise ParameterError(f"keys must be one of {KEY_MODES}, got {keys!r}")
    if policy not in POLICIES:
        raise ParameterError(f"policy must be one of {POLICIES}, got {policy!r}")
    need = min_slots(schedule, keys)
    if slots < need:
        tb = schedule.shape.tower_bytes
        raise ParameterError(
            f"scratchpad of {slots} towers ({slots * tb / MIB:g} MiB) is too small: the {schedule.dataflow} "
            f"schedule has a task touching {need} towers ({need * tb / MIB:g} MiB) at once")
    kinds, names, tasks = schedule.kinds, schedule.names, schedule.tasks
    nv = len(kinds)
    tower = schedule.shape.tower_bytes
    # use lists: task indices at which each value is read
    uses: list[list[int]] = [[] for _ in range(nv)]
    for n, t in enumerate(tasks):
        for v in t.inputs:
            uses[v].append(n)
    ptr = [0] * nv
    inf = math.inf

    def next_use(v: int, now: int) -> float:
        u, p = uses[v], ptr[v]
        while p < len(u) and u[p] < now:
            p += 1
        ptr[v] = p
        return u[p] if p < len(u) else inf

    slot_of: dict[int, int] = {}  # resident value -> slot
    dirty: dict[int, bool] = {}
    in_dram = [k == INPUT for k in kinds]
    touched = [0] * nv
    free_slots = deque(range(slots))
    events: list[tuple] = []
    input_read = spill_read = spill_write = output_write = key_read = 0
    loaded_once = [False] * nv
    peak = 0

    def evict(now: int, pinned: set[int]) -> None:
        nonlocal spill_write
        best_key, victim = None, -1
        for v in slot_of:
            if v in pinned:
                continue
            clean = 0 if dirty[v] else 1
            key = (next_use(v, now), clean) if policy == "belady" else (-touched[v], clean)
            if best_key is None or key > best_key:
                best_key, victim = key, v
        if victim < 0:  # cannot happen when slots >= min_slots
            raise ParameterError("scratchpad too small for one task's operands")
        s = slot_of.pop(victim)
        if dirty.pop(victim):
            spill_write += tower
            in_dram[victim] = True
            events.append((_STORE, victim, s, tower))
        else:
            events.append((_DROP, victim, s))
        free_slots.append(s)

    def take_slot(now: int, pinned: set[int]) -> int:
        if not free_slots:
            evict(now, pinned)
        return free_slots.popleft()

    for n, t in enumerate(tasks):
        pinned = set(t.inputs) | set(t.outputs)
        for v in t.inputs:
            kind = kinds[v]
            if kind == KEY:
                if keys == "onchip":
                    continue
                s = take_slot(n, pinned)
                slot_of[v], dirty[v] = s, False
                generated = keys == "seeded" and names[v][2] == 1
                nbytes = 0 if generated else tower
                key_read += nbytes
                events.append((_LOAD, v, s, nbytes))
                continue
            if v in slot_of:
                touched[v] = n
                continue
            if not in_dram[v]:
                raise ParameterError(f"schedule bug: {names[v]} is read before it is computed")
            s = take_slot(n, pinned)
            slot_of[v], dirty[v] = s, False
            touched[v] = n
            if loaded_once[v]:
                spill_read += tower
            else:
                loaded_once[v] = True
                if kind == INPUT:
                    input_read += tower
                else:
                    spill_read += tower
            events.append((_LOAD, v, s, tower))
        outs = set(t.outputs)
        reusable = []
        for v in t.inputs:
            if v in slot_of and v not in outs and next_use(v, n + 1) == inf:
                reusable.append(slot_of.pop(v))
                dirty.pop(v)
        new_slots = []
        for v in t.outputs:
            if v in slot_of:
                dirty[v] = True
                touched[v] = n
                continue
            s = reusable.pop() if reusable else take_slot(n, pinned)
            slot_of[v], dirty[v] = s, True
            touched[v] = n
            new_slots.append(s)
        peak = max(peak, len(slot_of) + len(reusable))
        events.append((_TASK, t.ops, t.inputs, t.outputs, tuple(new_slots)))
        for s in reusable:
            events.append((_FREE, -1, s))
            free_slots.append(s)
        for v in t.outputs:
            if next_use(v, n + 1) == inf:
                s = slot_of.pop(v)
                dirty.pop(v)
                if kinds[v] == OUTPUT:
                    output_write += tower
                    events.append((_STORE, v, s, tower))
                else:
                    events.append((_FREE, v, s))
                free_slots.append(s)
    traffic = Traffic(input_read=input_read, spill_read=spill_read, spill_write=spill_write,
                      output_write=output_write, key_read=key_read)
    return Trace(schedule=schedule, slots=slots, keys=keys, policy=policy, traffic=traffic, peak_slots=peak,
                 events=tuple(events))


@dataclasses.dataclass(frozen=True)
class Timing:
    runtime_s: float
    compute_s: float  # compute-unit busy time
    memory_s: float  # DRAM channel busy time

    @property
    def idle_s(self) -> float:
        """Time the compute unit waits (for operands or for slots)."""
        return max(0.0, self.runtime_s - self.compute_s)

    @property
    def idle_fraction(self) -> float:
        return self.idle_s / self.runtime_s if self.runtime_s > 0 else 0.0


def replay(trace: Trace, bandwidth: float, modops: float) -> Timing:
    """Time the trace on one DRAM channel (bytes/s) and one compute unit (modular ops/s)."""
    if not bandwidth > 0 or not modops > 0:
        raise ParameterError("bandwidth and compute rate must be positive")
    nv = len(trace.schedule.kinds)
    ready = [0.0] * nv  # when a value's current copy is on chip
    last_end = [0.0] * nv  # when the latest task touching it finished
    slot_free = [0.0] * trace.slots
    mem_t = comp_t = busy_c = busy_m = 0.0
    for ev in trace.events:
        code = ev[0]
        if code == _TASK:
            _, ops, ins, outs, new_slots = ev
            start = comp_t
            for v in ins:
                if ready[v] > start:
                    start = ready[v]
            for s in new_slots:
                if slot_free[s] > start:
                    start = slot_free[s]
            dur = ops / modops
            comp_t = start + dur
            busy_c += dur
            for v in ins:
                last_end[v] = comp_t
            for v in outs:
                ready[v] = comp_t
                last_end[v] = comp_t
        elif code == _LOAD:
            _, v, s, nbytes = ev
            start = max(mem_t, slot_free[s])
            if nbytes:
                dur = nbytes / bandwidth
                mem_t = start + dur
                busy_m += dur
                ready[v] = mem_t
            else:
                ready[v] = start
        elif code == _STORE:
            _, v, s, nbytes = ev
            start = max(mem_t, ready[v])
            dur = nbytes / bandwidth
            mem_t = start + dur
            busy_m += dur
            slot_free[s] = max(mem_t, last_end[v])
        elif code == _DROP:
            _, v, s = ev
            slot_free[s] = max(ready[v], last_end[v])
        else:  # _FREE: the slot is free once the task that last touched it is done
            _, v, s = ev
            slot_free[s] = comp_t if v < 0 else max(comp_t, last_end[v])
    return Timing(runtime_s=max(mem_t, comp_t), compute_s=busy_c, memory_s=busy_m)


@dataclasses.dataclass(frozen=True)
class KeySwitchAnalysis:
    """What the model predicts for one key switch, one dataflow, one machine."""

    shape: KeySwitchShape
    dataflow: str
    machine: Machine
    traffic: Traffic
    ops: int
    ops_by_stage: dict
    peak_slots: int  # most towers resident at once in the given scratchpad
    working_set_towers: int  # most towers live at once with an unlimited scratchpad
    timing: Timing

    @property
    def dram_bytes(self) -> int:
        return self.traffic.total

    @property
    def dram_mb(self) -> float:
        return self.traffic.total / MIB

    @property
    def arithmetic_intensity(self) -> float:
        """Modular operations per DRAM byte (keys included when they come from DRAM)."""
        return self.ops / self.traffic.total if self.traffic.total else math.inf

    @property
    def working_set_bytes(self) -> int:
        return self.working_set_towers * self.shape.tower_bytes

    @property
    def scratchpad_peak_bytes(self) -> int:
        return self.peak_slots * self.shape.tower_bytes

    def as_dict(self) -> dict[str, Any]:
        tr, tm, m = self.traffic, self.timing, self.machine
        return {
            "benchmark": self.shape.name,
            "dataflow": self.dataflow,
            "dram_mb": round(self.dram_mb, 3),
            "arithmetic_intensity": round(self.arithmetic_intensity, 4),
            "data_mb": round(tr.data / MIB, 3),
            "evk_traffic_mb": round(tr.key_read / MIB, 3),
            "input_mb": round(tr.input_read / MIB, 3),
            "output_mb": round(tr.output_write / MIB, 3),
            "spill_read_mb": round(tr.spill_read / MIB, 3),
            "spill_write_mb": round(tr.spill_write / MIB, 3),
            "working_set_mb": round(self.working_set_bytes / MIB, 3),
            "scratchpad_peak_mb": round(self.scratchpad_peak_bytes / MIB, 3),
            "evk_mb": round(self.shape.evk_bytes / MIB, 3),
            "gops": round(self.ops / 1e9, 6),
            "runtime_ms": round(tm.runtime_s * 1e3, 6),
            "compute_ms": round(tm.compute_s * 1e3, 6),
            "idle_ms": round(tm.idle_s * 1e3, 6),
            "idle_fraction": round(tm.idle_fraction, 4),
            "scratchpad_mb": round(m.scratchpad_bytes / MIB, 3),
            "bandwidth_gbs": round(m.bandwidth / GB, 4),
            "modops_g": round(m.modops / 1e9, 4),
            "keys": m.keys,
            "policy": m.policy,
            "n": self.shape.n,
            "towers": self.shape.towers,
            "special": self.shape.special,
            "dnum": self.shape.dnum,
            "word_bytes": self.shape.word_bytes,
        }


def working_set(schedule: Schedule, keys: str = "stream") -> int:
    """Most towers live at once when nothing ever has to be evicted (the scratchpad that avoids all spills)."""
    return plan_residency(schedule, len(schedule.kinds), keys=keys, policy="belady").peak_slots


class Analyzer:
    """Caches schedules, residency traces and working sets so sweeps over bandwidth or compute rate only
    re-run the (cheap) timing pass."""

    def __init__(self, costs: OpCosts | None = None, options: ScheduleOptions | None = None,
                 max_entries: int | None = None):
        self.costs = costs or OpCosts()
        self.options = options or ScheduleOptions()
        self.max_entries = max_entries
        self._schedules: dict = {}
        self._traces: dict = {}
        self._ws: dict = {}

    def schedule(self, shape: KeySwitchShape, dataflow: str) -> Schedule:
        key = (shape, normalize_dataflow(dataflow))
        if key not in self._schedules:
            self._schedules[key] = build_schedule(shape, key[1], self.costs, self.options)
        return self._schedules[key]

    def trace(self, shape: KeySwitchShape, dataflow: str, machine: Machine) -> Trace:
        sched = self.schedule(shape, dataflow)
        slots = scratchpad_slots(shape, machine.scratchpad_bytes)
        key = (shape, sched.dataflow, slots, machine.keys, machine.policy)
        if self.max_entries is not None and len(self._traces) >= self.max_entries and key not in self._traces:
            self._traces.clear()
            self._schedules.clear()
        if key not in self._traces:
            self._traces[key] = plan_residency(sched, slots, machine.keys, machine.policy)
        return self._traces[key]

    def working_set(self, shape: KeySwitchShape, dataflow: str, keys: str) -> int:
        sched = self.schedule(shape, dataflow)
        key = (shape, sched.dataflow, keys)
        if key not in self._ws:
            self._ws[key] = working_set(sched, keys)
        return self._ws[key]

    def analyze(self, shape: KeySwitchShape, dataflow: str, machine: Machine | None = None) -> KeySwitchAnalysis:
        machine = machine or Machine()
        tr = self.trace(shape, dataflow, machine)
        sched = tr.schedule
        return KeySwitchAnalysis(
            shape=shape, dataflow=sched.dataflow, machine=machine, traffic=tr.traffic, ops=sched.total_ops,
            ops_by_stage=sched.ops_by_stage(), peak_slots=tr.peak_slots,
            working_set_towers=self.working_set(shape, dataflow, machine.keys),
            timing=replay(tr, machine.bandwidth, machine.modops),
        )


_DEFAULT = Analyzer(max_entries=64)


def analyze(shape: KeySwitchShape, dataflow: str, machine: Machine | None = None, *,
            costs: OpCosts | None = None, options: ScheduleOptions | None = None) -> KeySwitchAnalysis:
    """DRAM traffic, working set, arithmetic intensity, runtime and idle time of one key switch.

    Schedules and residency traces of the default op costs and options are cached across calls.
    """
    costs, options = costs or OpCosts(), options or ScheduleOptions()
    an = _DEFAULT if (costs, options) == (_DEFAULT.costs, _DEFAULT.options) else Analyzer(costs, options)
    return an.analyze(shape, dataflow, machine)


def predict(params, dataflow: str, level: int | None = None, scratchpad_mb: float = 32, keys: str = "stream",
            word_bytes: int = 4, bandwidth_gbs: float = 64, modops: float = RPU_MODOPS,
            policy: str = "belady", options: ScheduleOptions | None = None) -> dict[str, Any]:
    """The model's prediction for one hybrid key switch of a hemx parameter set.

    Args:
        params: a :class:`hemx.CKKSParameters`.
        dataflow: "MP", "DC" or "OC".
        level: ciphertext level of the switched polynomial (default: the top level, ``params.max_level``).
        scratchpad_mb: on-chip data memory in MiB.
        keys: "stream", "onchip" or "seeded" (see :class:`Machine`).
        word_bytes: bytes per residue; hemx stores residues below 2^31 in 4-byte words.
        bandwidth_gbs, modops: DRAM bandwidth (GB/s, decimal) and compute rate (modular ops/s) for the
            runtime; traffic and working set do not depend on them.
        policy: scratchpad eviction, "belady" or "lru".
        options: :class:`ScheduleOptions` (e.g. ``mp_key_product="fused"`` for the order of
            ``hemx.ckks.keyswitch``, which adds each digit's key product to the sum as it goes).

    Returns:
        A dict with ``dram_mb`` (MiB moved, keys included when streamed), ``working_set_mb`` (peak live data
        with an unlimited scratchpad: the memory the schedule needs to run without spills),
        ``scratchpad_peak_mb``, ``arithmetic_intensity`` (ops/byte), ``runtime_s``, ``idle_s`` and the
        breakdown fields of :meth:`KeySwitchAnalysis.as_dict`.
    """
    shape = KeySwitchShape.from_params(params, level, word_bytes=word_bytes)
    res = analyze(shape, dataflow, Machine.create(scratchpad_mb, bandwidth_gbs, modops, keys, policy),
                  options=options)
    out = res.as_dict()
    out["runtime_s"] = res.timing.runtime_s
    out["idle_s"] = res.timing.idle_s
    out["level"] = params.max_level if level is None else level
    out["ops"] = res.ops
    out["dram_bytes"] = res.dram_bytes
    out["working_set_bytes"] = res.working_set_bytes
    return out


__all__ = [
    "Machine", "Traffic", "Trace", "Timing", "KeySwitchAnalysis", "Analyzer", "analyze", "predict",
    "plan_residency", "replay", "working_set", "scratchpad_slots", "min_slots", "RPU_MODOPS", "GB",
    "KEY_MODES", "POLICIES", "STAGES",
]
