"""CiFlow's benchmarks and the numbers it publishes, kept as reference data.

Source: N. Neda, A. Ebel, B. Reynwar, B. Reagen, "CiFlow: Dataflow Analysis and Optimization of Key Switching
for Homomorphic Encryption" (ISPASS 2024), Tables II-IV and §IV-VI (``papers/ciflow.md`` in the shared
workspace). The benchmark parameters are those of its Tab. III (from BTS, ARK and DPRIVE). The paper's
"MB" are MiB: the evk column is reproduced exactly only with 2^20-byte megabytes and 8-byte words.
"""

from __future__ import annotations

import dataclasses

from hemx.dataflow.shape import KeySwitchShape
from hemx.errors import ParameterError

CIFLOW_WORD_BYTES = 8  # CiFlow §V-A: RNS moduli half the RPU's 128-bit words, i.e. 64-bit words
CIFLOW_SCRATCHPAD_MB = 32  # data memory; keys either streamed or in a separate 360 MB key SRAM (392 MB total)


@dataclasses.dataclass(frozen=True)
class CiflowBenchmark:
    name: str
    log_n: int
    towers: int  # k_l: towers of Q at the key switch
    special: int  # k_p: towers of P
    dnum: int
    alpha: int

    def shape(self, word_bytes: int = CIFLOW_WORD_BYTES) -> KeySwitchShape:
        return KeySwitchShape.ciflow(1 << self.log_n, self.towers, self.special, self.dnum, self.alpha,
                                     word_bytes=word_bytes, name=self.name)


# CiFlow Tab. III: N, k_l, k_p, dnum, alpha.
BENCHMARKS: dict[str, CiflowBenchmark] = {
    "BTS1": CiflowBenchmark("BTS1", 17, 28, 28, 1, 28),
    "BTS2": CiflowBenchmark("BTS2", 17, 40, 20, 2, 20),
    "BTS3": CiflowBenchmark("BTS3", 17, 45, 15, 3, 15),
    "ARK": CiflowBenchmark("ARK", 16, 24, 6, 4, 6),
    "DPRIVE": CiflowBenchmark("DPRIVE", 16, 26, 7, 3, 9),
}

# CiFlow Tab. II: DRAM transfers (MB, evk included, evks streamed, 32 MB on chip) and arithmetic intensity
# (ops/byte) per dataflow.
PAPER_TAB2: dict[str, dict[str, tuple[float, float]]] = {
    "BTS1": {"MP": (600, 1.81), "DC": (600, 1.81), "OC": (420, 2.59)},
    "BTS2": {"MP": (1352, 1.14), "DC": (1278, 1.2), "OC": (716, 2.15)},
    "BTS3": {"MP": (1850, 1.00), "DC": (1766, 1.04), "OC": (1119, 1.65)},
    "ARK": {"MP": (432, 1.05), "DC": (356, 1.27), "OC": (180, 2.52)},
    "DPRIVE": {"MP": (365, 1.26), "DC": (336, 1.37), "OC": (170, 2.71)},
}

# CiFlow Tab. III: evk size and "Temp data" (MB).
PAPER_TAB3: dict[str, tuple[float, float]] = {
    "BTS1": (112, 196),
    "BTS2": (240, 400),
    "BTS3": (360, 585),
    "ARK": (120, 192),
    "DPRIVE": (99, 163),
}

# CiFlow Tab. IV: OC_base (GB/s at which OC with keys on chip matches MP at 64 GB/s), saved bandwidth,
# OC and MP runtimes (ms) at OC_base, OC speedup.
PAPER_TAB4: dict[str, tuple[float, float, float, float, float]] = {
    "BTS1": (25.60, 2.50, 30.08, 39.13, 1.30),
    "BTS2": (12.80, 5.00, 43.24, 104.85, 2.42),
    "BTS3": (32.00, 2.00, 51.87, 71.50, 1.37),
    "ARK": (8.00, 8.00, 9.01, 37.54, 4.16),
    "DPRIVE": (12.80, 5.00, 7.81, 23.15, 2.96),
}

# Other figures quoted in the text.
PAPER_TEXT = {
    "bts3_mp_onchip_mb": 675,  # §IV-A: MP needs at least 675 MB on chip for BTS3
    "bts3_dc_onchip_mb": 255,  # §IV-B: DC needs 255 MB on chip for BTS3
    "oc_ai_with_key_compression": 3.82,  # §IV-D: best OC AI with keys halved (matches DPRIVE: 460.7 / 120.5)
    "baseline_bandwidth_gbs": 64.0,  # §VI-A: MP, keys on chip, 64 GB/s is the baseline
    "bts3_oc_stream_base_gbs": 45.62,  # §VI-B Fig. 5
    "ark_oc_stream_base_gbs": 23.4,  # §VI-B Fig. 6
}

# Bandwidths of CiFlow Fig. 4 (GB/s): DDR4 8-25.6, DDR5 32-64, then HBM up to 1 TB/s for ARK and BTS3.
SWEEP_GBS = (8.0, 12.8, 16.0, 25.6, 32.0, 51.2, 64.0, 128.0, 256.0, 512.0, 1024.0)


def benchmark(name: str) -> CiflowBenchmark:
    key = name.strip().upper()
    if key not in BENCHMARKS:
        raise ParameterError(f"unknown CiFlow benchmark {name!r}; choose one of {', '.join(BENCHMARKS)}")
    return BENCHMARKS[key]
