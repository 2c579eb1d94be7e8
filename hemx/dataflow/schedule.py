"""Key switching as a task graph over towers, in the order each CiFlow dataflow runs it.

Every value is one tower (``N`` words). Every task reads whole towers and writes whole towers; a task that
names a value both as input and output updates it in place (an accumulator). The task list is in program
order: the residency pass (:mod:`hemx.dataflow.model`) walks it once, so the order *is* the dataflow.

Values (``c`` in {0, 1} is the output polynomial, ``t`` a tower of the extended basis ``Q_l u P``)::

    ("x", i)          input tower i of Q_l, NTT domain                       (in DRAM at the start)
    ("a", i)          INTT(x_i), scaled by the digit's CRT constant            ModUp P1
    ("b", d, t)       basis conversion of digit d onto tower t (accumulator)   ModUp P2
    ("e", d, t)       NTT(b_{d,t})                                             ModUp P3
    ("k", d, c, t)    switching-key tower                                      (DRAM, or key SRAM)
    ("m", d, c, t)    key product of digit d (materialized; MP and DC only)   ModUp P4
    ("s", c, t)       sum over digits of the key products (accumulator)        ModUp P5
    ("h", c, j)       INTT(s_{c, p_j}), scaled by the CRT constant of P        ModDown P1
    ("g", c, i)       basis conversion P -> q_i (accumulator)                  ModDown P2
    ("f", c, i)       NTT(g_{c,i})                                             ModDown P3
    ("o", c, i)       (s_{c, q_i} - f_{c,i}) * P^-1 mod q_i                    ModDown P4 (to DRAM)

The operand of digit d for tower t is ``x_t`` itself when ``t`` belongs to digit d (no conversion needed) and
``e_{d,t}`` otherwise.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, NamedTuple

from hemx.dataflow.shape import KeySwitchShape
from hemx.errors import ParameterError

DATAFLOWS = ("MP", "DC", "OC")
DATAFLOW_NAMES = {"MP": "Max-Parallel", "DC": "Digit-Centric", "OC": "Output-Centric"}

# value kinds
INPUT, KEY, TEMP, OUTPUT = "input", "key", "temp", "output"

STAGES = (
    "modup_intt", "modup_bconv", "modup_ntt", "key_mult", "reduce",
    "moddown_intt", "moddown_bconv", "moddown_ntt", "moddown_final",
)


@dataclasses.dataclass(frozen=True)
class OpCosts:
    """Modular operations charged per coefficient (the compute model; see docs/dataflow.md).

    Attributes:
        butterfly: modular ops per NTT butterfly (one multiply, one add, one subtract). A tower's (I)NTT has
            ``(N / 2) log2 N`` butterflies.
        mul: ops per modular multiplication of two towers, per coefficient.
        add: ops per modular addition or subtraction, per coefficient.
    """

    butterfly: int = 3
    mul: int = 1
    add: int = 1

    def transform(self, n: int) -> int:
        """One forward or inverse NTT of one tower."""
        return (n // 2) * (n.bit_length() - 1) * self.butterfly


@dataclasses.dataclass(frozen=True)
class ScheduleOptions:
    """Choices the paper leaves open, kept selectable for sensitivity studies (defaults: our reading).

    Attributes:
        dc_reduction: "running" (default): DC adds each digit's key products to the running sum right after
            that digit's key-product stage (P1-P5 per digit, each a stage over the digit's towers); "fused":
            each product is added to the running sum as it is formed (P4 and P5 one task); "deferred": DC
            keeps every digit's key products and sums them after the last digit, as MP does.
        dc_intt: "per_digit" (default): DC transforms a digit's input towers when it starts that digit;
            "upfront": the whole input is transformed first (``hemx.ckks.keyswitch.keyswitch_dc``).
        oc_order: "split" (default): CiFlow §IV-C, the towers of Q first, then the P towers take the partial
            sum of the first dnum - 1 digits before the last digit is brought in, then ModDown per output
            tower; "tower": as "split" but each P tower takes all digits in turn; "p_first": the P towers
            first (all digits each), their ModDown INTTs, then each Q tower followed at once by its own
            ModDown (``hemx.ckks.keyswitch.keyswitch_oc``).
        mp_key_product: "materialized" (default): MP's key-product stage (P4) writes every digit's products
            and the reduction (P5) is a stage of its own, as CiFlow §III-B and Fig. 1 draw it; "fused": each
            product is added to the sum as it is formed (``hemx.ckks.keyswitch.inner_product``).
    """

    dc_reduction: str = "running"
    dc_intt: str = "per_digit"
    oc_order: str = "split"
    mp_key_product: str = "materialized"

    def __post_init__(self):
        allowed = {
            "dc_reduction": ("running", "fused", "deferred"),
            "dc_intt": ("per_digit", "upfront"),
            "oc_order": ("split", "tower", "p_first"),
            "mp_key_product": ("materialized", "fused"),
        }
        for field, values in allowed.items():
            if getattr(self, field) not in values:
                raise ParameterError(f"{field} must be one of {values}, got {getattr(self, field)!r}")

    @classmethod
    def hemx(cls) -> "ScheduleOptions":
        """The orders ``hemx.ckks.keyswitch`` runs (for comparing the model with measured hemx schedules)."""
        return cls(dc_reduction="fused", dc_intt="upfront", oc_order="p_first", mp_key_product="fused")


class Task(NamedTuple):
    stage: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    ops: int


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A dataflow's task list over integer value ids.

    Attributes:
        shape: the key switch.
        dataflow: "MP", "DC" or "OC".
        names: value id -> descriptive tuple (see the module docstring).
        kinds: value id -> INPUT, KEY, TEMP or OUTPUT.
        tasks: program order.
    """

    shape: KeySwitchShape
    dataflow: str
    names: tuple[tuple, ...]
    kinds: tuple[str, ...]
    tasks: tuple[Task, ...]

    @property
    def total_ops(self) -> int:
        return sum(t.ops for t in self.tasks)

    def ops_by_stage(self) -> dict[str, int]:
        out = dict.fromkeys(STAGES, 0)
        for t in self.tasks:
            out[t.stage] += t.ops
        return out


class _Builder:
    def __init__(self, shape: KeySwitchShape, costs: OpCosts, options: ScheduleOptions):
        self.shape, self.costs, self.options = shape, costs, options
        n = shape.n
        self.ids: dict[tuple, int] = {}
        self.names: list[tuple] = []
        self.kinds: list[str] = []
        self.tasks: list[Task] = []
        self.made: set[int] = set()  # accumulators already initialized
        c = costs
        self.cost = {
            "intt": c.transform(n) + c.mul * n,  # INTT fused with the CRT scaling constant
            "ntt": c.transform(n),
            "mul": c.mul * n,
            "mac": (c.mul + c.add) * n,
            "add": c.add * n,
            "final": (c.add + c.mul) * n,
        }
        # towers: ("q", i) and ("p", j); digits own consecutive q towers
        self.q = [("q", i) for i in range(shape.towers)]
        self.p = [("p", j) for j in range(shape.special)]
        self.digits: list[list[int]] = []
        start = 0
        for a in shape.digit_sizes:
            self.digits.append(list(range(start, start + a)))
            start += a
        self.owner = {i: d for d, towers in enumerate(self.digits) for i in towers}
        self.intt_done: set[int] = set()

    # ---------------------------------------------------------------- values and tasks
    def v(self, *name) -> int:
        vid = self.ids.get(name)
        if vid is None:
            vid = len(self.names)
            self.ids[name] = vid
            self.names.append(name)
            kind = {"x": INPUT, "k": KEY, "o": OUTPUT}.get(name[0], TEMP)
            self.kinds.append(kind)
        return vid

    def task(self, stage: str, inputs: Iterable[int], outputs: Iterable[int], ops: int) -> None:
        self.tasks.append(Task(stage, tuple(inputs), tuple(outputs), ops))

    def accumulate(self, stage: str, acc: int, operands: list[int], first_cost: str, more_cost: str) -> None:
        """``acc (+)= f(operands)``: the first write creates the accumulator, later ones update it."""
        if acc in self.made:
            self.task(stage, operands + [acc], [acc], self.cost[more_cost])
        else:
            self.made.add(acc)
            self.task(stage, operands, [acc], self.cost[first_cost])

    # ---------------------------------------------------------------- HKS steps
    def targets(self, d: int) -> list[tuple]:
        return [t for t in self.q if self.owner[t[1]] != d] + self.p

    def operand(self, d: int, t: tuple) -> int:
        if t[0] == "q" and self.owner[t[1]] == d:
            return self.v("x", t[1])
        return self.v("e", d, t)

    def modup_intt(self, d: int) -> None:
        if d in self.intt_done:
            return
        self.intt_done.add(d)
        for i in self.digits[d]:
            self.task("modup_intt", [self.v("x", i)], [self.v("a", i)], self.cost["intt"])

    def modup_bconv(self, d: int, t: tuple) -> None:
        acc = self.v("b", d, t)
        for i in self.digits[d]:
            self.accumulate("modup_bconv", acc, [self.v("a", i)], "mul", "mac")

    def modup_ntt(self, d: int, t: tuple) -> None:
        self.task("modup_ntt", [self.v("b", d, t)], [self.v("e", d, t)], self.cost["ntt"])

    def key_mult_acc(self, d: int, t: tuple, c: int) -> None:
        """Key product accumulated straight into the running sum (P4 and P5 fused)."""
        self.accumulate("key_mult", self.v("s", c, t), [self.operand(d, t), self.v("k", d, c, t)], "mul", "mac")

    def key_mult_only(self, d: int, t: tuple, c: int) -> None:
        """Key product materialized (P4 alone); digit 0 becomes the running sum directly."""
        out = self.v("s", c, t) if d == 0 else self.v("m", d, c, t)
        if d == 0:
            self.made.add(out)
        self.task("key_mult", [self.operand(d, t), self.v("k", d, c, t)], [out], self.cost["mul"])

    def reduce(self, d: int, t: tuple, c: int) -> None:
        s = self.v("s", c, t)
        self.task("reduce", [s, self.v("m", d, c, t)], [s], self.cost["add"])

    def moddown_intt(self, c: int, j: int) -> None:
        self.task("moddown_intt", [self.v("s", c, ("p", j))], [self.v("h", c, j)], self.cost["intt"])

    def moddown_bconv(self, c: int, i: int) -> None:
        acc = self.v("g", c, i)
        for j in range(self.shape.special):
            self.accumulate("moddown_bconv", acc, [self.v("h", c, j)], "mul", "mac")

    def moddown_ntt(self, c: int, i: int) -> None:
        self.task("moddown_ntt", [self.v("g", c, i)], [self.v("f", c, i)], self.cost["ntt"])

    def moddown_final(self, c: int, i: int) -> None:
        self.task("moddown_final", [self.v("s", c, ("q", i)), self.v("f", c, i)], [self.v("o", c, i)],
                  self.cost["final"])

    # ---------------------------------------------------------------- ModDown, stage by stage (MP and DC)
    def moddown_stagewise(self) -> None:
        l, k = self.shape.towers, self.shape.special
        for c in (0, 1):
            for j in range(k):
                self.moddown_intt(c, j)
        for c in (0, 1):
            for i in range(l):
                self.moddown_bconv(c, i)
        for c in (0, 1):
            for i in range(l):
                self.moddown_ntt(c, i)
        for c in (0, 1):
            for i in range(l):
                self.moddown_final(c, i)


def _max_parallel(b: _Builder) -> None:
    """Each stage over all towers before the next (CiFlow §IV-A)."""
    dnum = b.shape.dnum
    ext = b.q + b.p
    for d in range(dnum):
        b.modup_intt(d)
    for d in range(dnum):
        for t in b.targets(d):
            b.modup_bconv(d, t)
    for d in range(dnum):
        for t in b.targets(d):
            b.modup_ntt(d, t)
    if b.options.mp_key_product == "fused":
        for d in range(dnum):  # P4 + P5: each product added to the sum as it is formed
            for t in ext:
                for c in (0, 1):
                    b.key_mult_acc(d, t, c)
        b.moddown_stagewise()
        return
    for d in range(dnum):  # P4 over all digits and towers
        for t in ext:
            for c in (0, 1):
                b.key_mult_only(d, t, c)
    for t in ext:  # P5
        for c in (0, 1):
            for d in range(1, dnum):
                b.reduce(d, t, c)
    b.moddown_stagewise()


def _digit_centric(b: _Builder) -> None:
    """One digit at a time through P1-P5, each stage over the digit's towers; running sum (CiFlow §IV-B)."""
    ext = b.q + b.p
    if b.options.dc_intt == "upfront":
        for d in range(b.shape.dnum):
            b.modup_intt(d)
    for d in range(b.shape.dnum):
        b.modup_intt(d)
        targets = b.targets(d)
        for t in targets:
            b.modup_bconv(d, t)
        for t in targets:
            b.modup_ntt(d, t)
        if b.options.dc_reduction == "fused":
            for t in ext:
                for c in (0, 1):
                    b.key_mult_acc(d, t, c)
            continue
        for t in ext:
            for c in (0, 1):
                b.key_mult_only(d, t, c)
        if d and b.options.dc_reduction == "running":
            for t in ext:
                for c in (0, 1):
                    b.reduce(d, t, c)
    if b.options.dc_reduction == "deferred":
        for t in ext:
            for c in (0, 1):
                for d in range(1, b.shape.dnum):
                    b.reduce(d, t, c)
    b.moddown_stagewise()


def _output_centric(b: _Builder) -> None:
    """One output tower at a time (CiFlow §IV-C).

    ModUp section 1 (towers of Q): for each tower, every digit that does not hold it converts onto that one
    tower only (BConv, NTT, key product accumulated in place), then the digit that holds it is used as is.
    Section 2 (towers of P): every digit contributes; the first dnum - 1 digits (whose INTTs are on chip)
    accumulate a partial sum for every P tower, then the last digit is brought in and each P tower, once
    complete, goes straight through the ModDown INTT. ModDown: one output tower at a time per polynomial,
    from the INTT'd P towers.
    """
    dnum = b.shape.dnum

    def q_tower(t: tuple) -> None:
        for d in range(dnum):
            if b.owner[t[1]] == d:
                continue
            b.modup_intt(d)
            b.modup_bconv(d, t)
            b.modup_ntt(d, t)
            for c in (0, 1):
                b.key_mult_acc(d, t, c)
        own = b.owner[t[1]]
        for c in (0, 1):
            b.key_mult_acc(own, t, c)

    if b.options.oc_order == "p_first":
        for t in b.p:
            for d in range(dnum):
                b.modup_intt(d)
                b.modup_bconv(d, t)
                b.modup_ntt(d, t)
                for c in (0, 1):
                    b.key_mult_acc(d, t, c)
            for c in (0, 1):
                b.moddown_intt(c, t[1])
        for t in b.q:
            q_tower(t)
            for c in (0, 1):
                b.moddown_bconv(c, t[1])
                b.moddown_ntt(c, t[1])
                b.moddown_final(c, t[1])
        return
    for t in b.q:
        q_tower(t)
    if dnum > 1 and b.options.oc_order == "split":
        groups = [list(range(dnum - 1)), [dnum - 1]]
    else:
        groups = [list(range(dnum))]
    for g in groups:
        for d in g:
            b.modup_intt(d)
        for t in b.p:
            for d in g:
                b.modup_bconv(d, t)
                b.modup_ntt(d, t)
                for c in (0, 1):
                    b.key_mult_acc(d, t, c)
            if g[-1] == dnum - 1:
                for c in (0, 1):
                    b.moddown_intt(c, t[1])
    for c in (0, 1):
        for i in range(b.shape.towers):
            b.moddown_bconv(c, i)
            b.moddown_ntt(c, i)
            b.moddown_final(c, i)


_BUILDERS = {"MP": _max_parallel, "DC": _digit_centric, "OC": _output_centric}


def normalize_dataflow(name: str) -> str:
    key = str(name).strip().upper()
    aliases = {"MAX-PARALLEL": "MP", "DIGIT-CENTRIC": "DC", "OUTPUT-CENTRIC": "OC"}
    key = aliases.get(key, key)
    if key not in _BUILDERS:
        raise ParameterError(f"unknown dataflow {name!r}; choose one of {', '.join(DATAFLOWS)}")
    return key


def build_schedule(shape: KeySwitchShape, dataflow: str, costs: OpCosts | None = None,
                   options: ScheduleOptions | None = None) -> Schedule:
    """The task list of ``dataflow`` ("MP", "DC" or "OC") for ``shape``."""
    flow = normalize_dataflow(dataflow)
    b = _Builder(shape, costs or OpCosts(), options or ScheduleOptions())
    _BUILDERS[flow](b)
    return Schedule(shape=shape, dataflow=flow, names=tuple(b.names), kinds=tuple(b.kinds), tasks=tuple(b.tasks))
