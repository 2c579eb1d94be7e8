"""Collective traffic of a compiled SPMD program, read from its optimized HLO text.

``collectives(jax.jit(f).lower(*args).compile())`` (or the text of ``.as_text()``, or a ``Lowered``, which is
compiled first) lists every collective instruction of the partitioned program: ``all-gather``, ``all-to-all``,
``all-reduce``, ``reduce-scatter`` and ``collective-permute`` (their async ``-start`` halves too; ``-done`` is
skipped so nothing is counted twice), and :func:`summarize` totals them by kind.

What "bytes" means. The optimized HLO of a partitioned program is the *per-device* program: every shape is the
shape one device holds. For one collective over groups of ``g`` devices (``G`` groups, so ``g * G`` devices take
part), this module counts the bytes each participating device **receives** from other devices, with the
bandwidth-optimal algorithm for the collective (what a device must receive at least; a device's own share is
not counted):

* ``all-gather``: result minus operand bytes (``(g - 1) / g`` of the gathered result);
* ``all-to-all``: ``(g - 1) / g`` of the operand bytes (tuple form: all operands but one);
* ``reduce-scatter``: operand minus result bytes (``(g - 1)`` result-sized partial sums);
* ``all-reduce``: ``2 (g - 1) / g`` of the operand bytes (a reduce-scatter then an all-gather);
* ``collective-permute``: the operand (= result) bytes for each device that is a target of a ``source -> target`` pair
  with ``source != target``.

``Collective.bytes_per_device`` is that number for one receiving device (for a permute: the most any device
receives), ``Collective.total_bytes`` the sum over all receiving devices, i.e. the volume that crosses between
devices. Totals are static counts: a collective inside a loop body is counted once per appearance in the text
(``Collective.computation`` names where it sits; the key-switching programs of hemx have no loops).

This module reads text only; it imports nothing of ``hemx.ckks`` (the ``parallel`` layer is below it).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Iterable

#: The collectives counted (HLO opcodes, without an async ``-start`` / ``-done`` suffix).
KINDS: tuple[str, ...] = ("all-gather", "all-to-all", "all-reduce", "reduce-scatter", "collective-permute")

#: Bytes per element of HLO primitive types (sub-byte types rounded as XLA stores them unpacked: 1 byte).
DTYPE_BYTES: dict[str, float] = {
    "pred": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e5m2fnuz": 1,
    "f8e4m3fnuz": 1, "f8e4m3b11fnuz": 1, "f8e3m4": 1, "f8e8m0fnu": 1, "f4e2m1fn": 1,
    "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8,
    "c64": 8, "c128": 16, "token": 0,
}

_SHAPE = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]")
_INSTR = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<type>\(.*?\)|[a-z][a-z0-9]*\[[0-9,]*\](?:\{[^}]*\})?)\s+"
    r"(?P<op>" + "|".join(KINDS) + r")(?P<suffix>-start|-done)?\((?P<operands>[^)]*)\)(?P<attrs>.*)$")
_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_NUM_PARTITIONS = re.compile(r"num_partitions=(\d+)")
_REPLICA_COUNT = re.compile(r"replica_count=(\d+)")


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective instruction of the per-device program (module docstring for the byte counts).

    Attributes:
        kind: one of :data:`KINDS`.
        name: the instruction's name in the HLO text.
        computation: the computation that holds it (``ENTRY``'s name for the main program).
        operand_bytes / result_bytes: bytes of the per-device operand(s) / result (tuple elements summed).
        group_size: devices per replica group (``g``); num_groups: ``G``.
        bytes_per_device: bytes one receiving device receives (permute: the most any device receives).
        total_bytes: bytes received summed over every device (the volume crossing between devices).
        op_name: the JAX operation the partitioner made it for (``metadata={op_name=...}``; "" if none).
    """

    kind: str
    name: str
    computation: str
    operand_bytes: int
    result_bytes: int
    group_size: int
    num_groups: int
    bytes_per_device: float
    total_bytes: float
    op_name: str = ""


def shape_bytes(type_text: str) -> int:
    """Bytes of an HLO type: ``u32[2,1,16]{2,1,0}`` -> 128; a tuple ``(a, b)`` sums its elements."""
    total = 0.0
    for dtype, dims in _SHAPE.findall(type_text):
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"unknown HLO element type {dtype!r} in {type_text!r}")
        total += DTYPE_BYTES[dtype] * math.prod(int(d) for d in dims.split(",") if d)
    return int(total)


def _tuple_elements(type_text: str) -> list[int]:
    return [shape_bytes(f"{d}[{s}]") for d, s in _SHAPE.findall(type_text)]


def _braced(attrs: str, key: str) -> str | None:
    """The balanced ``{...}`` value of ``key=`` in an attribute list, or None."""
    at = attrs.find(key + "={")
    if at < 0:
        return None
    i = at + len(key) + 1
    depth = 0
    for j in range(i, len(attrs)):
        depth += {"{": 1, "}": -1}.get(attrs[j], 0)
        if depth == 0:
            return attrs[i : j + 1]
    return None


def replica_groups(attrs: str, devices: int) -> tuple[int, int]:
    """``(group_size, num_groups)`` from a collective's attributes, over ``devices`` devices in all.

    Understands the explicit ``{{0,1},{2,3}}``, the empty ``{}`` (one group of all devices), the iota form
    ``[G,g]<=[...]`` and the mesh form ``mesh['a'=2,'b'=4] {'b'}`` (groups along the listed axes).
    """
    m = re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", attrs)
    if m:
        sizes = {k.strip("'\" "): int(v) for k, v in (p.split("=") for p in m.group(1).split(",") if "=" in p)}
        axes = [a.strip("'\" ") for a in m.group(2).split(",") if a.strip("'\" ")]
        size = math.prod(sizes[a] for a in axes) if axes else 1
        total = math.prod(sizes.values())
        return size, max(1, total // max(size, 1))
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]<=", attrs)
    if m:
        return int(m.group(2)), int(m.group(1))
    groups = _braced(attrs, "replica_groups")
    if groups is not None:
        inner = re.findall(r"\{([0-9,\s]*)\}", groups[1:-1])
        members = [[int(x) for x in g.split(",") if x.strip()] for g in inner]
        members = [g for g in members if g]
        if members:
            return max(len(g) for g in members), len(members)
    return devices, 1  # no groups: every device in one group


def _permute_pairs(attrs: str) -> list[tuple[int, int]]:
    pairs = _braced(attrs, "source_target_pairs") or ""
    return [(int(a), int(b)) for a, b in re.findall(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}", pairs)]


def _operand_bytes(operands: str, types: dict[str, str], fallback: int) -> int:
    """Bytes of the operand list: inline types (``u32[4] %x``) where printed, else the operands' defining
    instructions; ``fallback`` when neither is known."""
    if _SHAPE.search(operands):
        return shape_bytes(operands)
    names = [n.strip().lstrip("%") for n in operands.split(",") if n.strip()]
    known = [types[n] for n in names if n in types]
    if names and len(known) == len(names):
        return sum(shape_bytes(t) for t in known)
    return fallback


def collectives(hlo) -> list[Collective]:
    """Every collective of a compiled program: ``hlo`` is its optimized HLO text, a ``jax.stages.Compiled``
    (``.as_text()`` is read) or a ``jax.stages.Lowered`` (compiled first, so the partitioner has run)."""
    if hasattr(hlo, "compile") and not hasattr(hlo, "input_shardings"):  # a Lowered: partition it first
        hlo = hlo.compile()
    text = hlo if isinstance(hlo, str) else hlo.as_text()
    m = _NUM_PARTITIONS.search(text)
    r = _REPLICA_COUNT.search(text)
    devices = max(int(m.group(1)) if m else 1, 1) * max(int(r.group(1)) if r else 1, 1)
    types: dict[str, str] = {}
    for line in text.splitlines():  # first pass: every instruction's type (operands may be defined later)
        d = re.match(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(\(.*?\)|[a-z][a-z0-9]*\[[0-9,]*\](?:\{[^}]*\})?)\s",
                     line)
        if d:
            types[d.group(1)] = d.group(2)
    out: list[Collective] = []
    computation = ""
    for line in text.splitlines():
        c = _COMPUTATION.match(line)
        if c and "=" not in line.split("{", 1)[0]:
            computation = c.group(1)
            continue
        i = _INSTR.match(line)
        if not i or i.group("suffix") == "-done":
            continue
        kind, rtype, attrs = i.group("op"), i.group("type"), i.group("attrs")
        result = shape_bytes(rtype)
        operand = _operand_bytes(i.group("operands"), types, result)
        if i.group("suffix") == "-start" and rtype.startswith("("):
            # async start: the result tuple holds (operands..., results...[, scratch]); keep the result half
            elems = _tuple_elements(rtype)
            half = len(elems) // 2
            result = sum(elems[half : 2 * half]) if half else result
        g, groups = replica_groups(attrs, devices)
        if kind == "collective-permute":
            pairs = [(s, t) for s, t in _permute_pairs(attrs) if s != t]
            counts: dict[int, int] = {}
            for _, t in pairs:
                counts[t] = counts.get(t, 0) + 1
            # a permute's operand and result have the same shape; the result is always printed inline
            per, total = float(result * max(counts.values(), default=0)), float(result * len(pairs))
            g, groups = 2, len(pairs)
        else:
            if kind == "all-gather":
                per = float(max(result - operand, 0))
            elif kind == "all-to-all":
                elems = _tuple_elements(rtype) if rtype.startswith("(") else []
                per = float(sum(elems) - max(elems)) if len(elems) > 1 else operand * (g - 1) / g
            elif kind == "reduce-scatter":
                per = float(max(operand - result, 0))
            else:  # all-reduce
                per = 2.0 * operand * (g - 1) / g
            if g <= 1:
                per = 0.0
            total = per * g * groups
        op = re.search(r'op_name="([^"]*)"', attrs)
        out.append(Collective(kind, i.group("name"), computation, operand, result, g, groups, per, total,
                              op.group(1) if op else ""))
    return out


@dataclasses.dataclass(frozen=True)
class TrafficSummary:
    """Collectives of one program totalled by kind.

    Attributes:
        count: ``{kind: instructions}`` for every kind of :data:`KINDS` (0 where absent).
        total_bytes: ``{kind: bytes received summed over devices}``.
        bytes_per_device: ``{kind: sum over instructions of the bytes one receiving device receives}``.
        devices: devices of the program (``num_partitions x replica_count`` of the module).
    """

    count: dict
    total_bytes: dict
    bytes_per_device: dict
    devices: int

    @property
    def collectives(self) -> int:
        return sum(self.count.values())

    @property
    def bytes(self) -> float:
        """Bytes received summed over every device and every collective."""
        return float(sum(self.total_bytes.values()))

    @property
    def mean_bytes_per_device(self) -> float:
        """:attr:`bytes` divided by the program's device count."""
        return self.bytes / max(self.devices, 1)

    def as_dict(self) -> dict:
        return {"count": dict(self.count), "total_bytes": dict(self.total_bytes),
                "bytes_per_device": dict(self.bytes_per_device), "devices": self.devices,
                "collectives": self.collectives, "bytes": self.bytes,
                "mean_bytes_per_device": self.mean_bytes_per_device}


def summarize(hlo_or_collectives) -> TrafficSummary:
    """:func:`collectives` totalled by kind (accepts what :func:`collectives` accepts, or its list)."""
    if isinstance(hlo_or_collectives, list):
        items: Iterable[Collective] = hlo_or_collectives
        devices = max((c.group_size * c.num_groups for c in items if c.kind != "collective-permute"), default=1)
    else:
        text = hlo_or_collectives if isinstance(hlo_or_collectives, str) else None
        if text is None:
            obj = hlo_or_collectives
            if hasattr(obj, "compile") and not hasattr(obj, "input_shardings"):
                obj = obj.compile()
            text = obj.as_text()
        items = collectives(text)
        m = _NUM_PARTITIONS.search(text)
        r = _REPLICA_COUNT.search(text)
        devices = max(int(m.group(1)) if m else 1, 1) * max(int(r.group(1)) if r else 1, 1)
    count = {k: 0 for k in KINDS}
    total = {k: 0.0 for k in KINDS}
    per = {k: 0.0 for k in KINDS}
    for c in items:
        count[c.kind] += 1
        total[c.kind] += c.total_bytes
        per[c.kind] += c.bytes_per_device
    return TrafficSummary(count, total, per, devices)


def by_operation(items: Iterable[Collective]) -> dict[str, dict]:
    """Collectives grouped by kind and the JAX primitive they were inserted for (the last component of
    ``op_name``, e.g. ``"all-reduce <- dot_general"``): ``{group: {"count": n, "total_bytes": b}}``, largest
    volume first. Says *why* the partitioner moved data (a sliced limb range, a sharded contraction...)."""
    groups: dict[str, dict] = {}
    for c in items:
        prim = c.op_name.rsplit("/", 1)[-1] if c.op_name else "?"
        g = groups.setdefault(f"{c.kind} <- {prim}", {"count": 0, "total_bytes": 0.0})
        g["count"] += 1
        g["total_bytes"] += c.total_bytes
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]["total_bytes"]))
