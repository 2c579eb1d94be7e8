"""Key-switching data-movement model (CiFlow, ISPASS 2024) and its reports.

Hybrid key switching is modelled as a task graph over *towers* (one RNS limb of one polynomial, ``N`` words),
run in the order of one of CiFlow's three dataflows:

- ``"MP"`` Max-Parallel: each stage (INTT, ModUp basis conversion, NTT, key product, reduction, ModDown)
  over all towers before the next;
- ``"DC"`` Digit-Centric: one digit at a time through ModUp, its key products added to a running sum;
- ``"OC"`` Output-Centric: one output tower at a time, the digit holding that tower bypassed, per-tower
  basis conversion and NTT, key product accumulated in place, ModDown per output tower.

A scratchpad of configurable size holds towers under an explicit policy (Belady's furthest-next-use eviction,
write-back of dirty data, dead data freed at once); keys are streamed, held on chip or half regenerated from a
seed; a DRAM channel and a compute unit run the transfers and tasks on two in-order queues. The model reports
DRAM traffic, working set, arithmetic intensity, runtime and idle time. See ``docs/dataflow.md``.

    >>> from hemx.dataflow import BENCHMARKS, analyze, Machine
    >>> res = analyze(BENCHMARKS["ARK"].shape(), "OC", Machine.create(scratchpad_mb=32, keys="stream"))
    >>> round(res.dram_mb), round(res.arithmetic_intensity, 2)  # CiFlow Tab. II: 180 MB, 2.52
    (176, 2.29)

For a hemx parameter set, :func:`predict` returns a dict (``dram_mb``, ``working_set_mb``,
``arithmetic_intensity``, ``runtime_s``...).
"""

from hemx.dataflow.benchmarks import (
    BENCHMARKS, PAPER_TAB2, PAPER_TAB3, PAPER_TAB4, PAPER_TEXT, SWEEP_GBS, CiflowBenchmark, benchmark,
)
from hemx.dataflow.model import (
    GB, KEY_MODES, POLICIES, RPU_MODOPS, Analyzer, KeySwitchAnalysis, Machine, Timing, Trace, Traffic, analyze,
    min_slots, plan_residency, predict, replay, scratchpad_slots, working_set,
)
from hemx.dataflow.schedule import (
    DATAFLOWS, DATAFLOW_NAMES, STAGES, OpCosts, Schedule, ScheduleOptions, Task, build_schedule,
)
from hemx.dataflow.devices import DEVICE_DATAFLOWS, DeviceTraffic, device_traffic, device_traffic_all
from hemx.dataflow.shape import MIB, KeySwitchShape


def predict_all(params, level: int | None = None, **kwargs) -> dict[str, dict]:
    """:func:`predict` for every dataflow: ``{"MP": {...}, "DC": {...}, "OC": {...}}``."""
    return {flow: predict(params, flow, level, **kwargs) for flow in DATAFLOWS}


__all__ = [
    "KeySwitchShape", "MIB", "GB",
    "OpCosts", "ScheduleOptions", "Task", "Schedule", "build_schedule", "DATAFLOWS", "DATAFLOW_NAMES", "STAGES",
    "Machine", "Traffic", "Trace", "Timing", "KeySwitchAnalysis", "Analyzer", "analyze", "predict", "predict_all",
    "plan_residency", "replay", "working_set", "scratchpad_slots", "min_slots", "RPU_MODOPS", "KEY_MODES",
    "POLICIES",
    "BENCHMARKS", "CiflowBenchmark", "benchmark", "PAPER_TAB2", "PAPER_TAB3", "PAPER_TAB4", "PAPER_TEXT",
    "SWEEP_GBS",
    "DEVICE_DATAFLOWS", "DeviceTraffic", "device_traffic", "device_traffic_all",
]
