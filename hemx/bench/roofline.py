"""A roofline for the kernel benchmarks: measured machine peaks and the work each NTT / BAT call does.

Peaks (measured once per run; a peak is a best case, so each is the fastest of several timed calls after a
warm-up):

* ``int8_ops``: an ``int8 x int8 -> int32`` dot of two ``D x D`` matrices (``D = 2048``): ``2 D^3`` ops per call;
* ``mulmod``: the library's own known-operand modular multiply (:func:`hemx.kernels.modarith.mul_known`,
  Shoup) over uint32 residues; the best of 2^20 and 2^22 residues;
* ``bandwidth``: bytes per second of ``x += 1`` in place (buffer donated, so no output is allocated) over a
  64 MiB uint32 array (read + write: 2 x 64 MiB). Kernels that allocate a fresh output per call also pay
  its first-touch page faults, which this peak does not include.

Counting convention (one call, all limbs and batch entries):

* element-wise work is counted in modular multiplies (``mulmods``): the butterfly does ``N/2 log2 N`` per
  limb (one twiddle product per butterfly; its modular add and subtract are not counted); a matrix method
  does ``N`` per limb for each twiddle stage and ``N`` for each BAT merge (one reduction per output residue);
* BAT work is counted in int8 operations, 2 per multiply-accumulate of the dense chunk matrices:
  ``2 (H K) (V K) (N / V)`` per limb for a stage contracting V inputs into H outputs with K chunks;
* bytes are the compulsory traffic: the input read and the output written once (4 bytes a residue), and
  the tables read once (twiddles ``2 x 4`` bytes a residue, dense int8 matrices 1 byte an entry).

The roofline time of a call is ``max(int8_ops / peak_int8 + mulmods / peak_mulmod, bytes / bandwidth)``
(compute on one set of cores is additive; memory overlaps it), and a result's *fraction of the roofline* is
that time over the measured time: 1.0 means the kernel runs at the machine's limit for its method.
"""

from __future__ import annotations

import dataclasses
import math
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from hemx.bench.timing import time_call
from hemx.kernels import modarith
from hemx.kernels import ntt as ntt_kernels
from hemx.nt import ntt_primes

MATMUL_DIM = 2048
MULMOD_SIZES = (1 << 20, 1 << 22)
COPY_BYTES = 64 << 20


@dataclasses.dataclass(frozen=True)
class Peaks:
    """Measured machine peaks (per second) and the sizes they were measured at."""

    int8_ops: float
    mulmod: float
    bandwidth: float
    detail: dict = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Work:
    """What one call does, in the units of the peaks."""

    int8_ops: float = 0.0
    mulmods: float = 0.0
    bytes: float = 0.0

    def __add__(self, other: "Work") -> "Work":
        return Work(self.int8_ops + other.int8_ops, self.mulmods + other.mulmods, self.bytes + other.bytes)

    def scaled(self, factor: float) -> "Work":
        return Work(self.int8_ops * factor, self.mulmods * factor, self.bytes * factor)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _random_u32(shape, q: int, seed: int = 0) -> jax.Array:
    return jnp.asarray(np.random.default_rng(seed).integers(0, q, size=shape, dtype=np.int64).astype(np.uint32))


def measure_peaks(repeats: int = 5) -> Peaks:
    """Measure the three peaks on the default device (a few seconds)."""
    rng = np.random.default_rng(0)
    d = MATMUL_DIM
    a = jnp.asarray(rng.integers(-128, 128, size=(d, d), dtype=np.int8))
    b = jnp.asarray(rng.integers(-128, 128, size=(d, d), dtype=np.int8))
    dot = jax.jit(partial(jnp.matmul, preferred_element_type=jnp.int32))
    t_dot = time_call(dot, a, b, repeats=repeats)
    int8 = 2 * d**3 / t_dot.min_s

    q = ntt_primes(28, 1, 1 << 12)[0]
    table = modarith.make_modulus_table([q])
    mul = jax.jit(partial(modarith.mul_known, method="shoup"))
    rates = {}
    for size in MULMOD_SIZES:
        x = _random_u32((1, size), q, 1)
        w = jax.device_put(modarith.known_operand(rng.integers(0, q, size=(1, size), dtype=np.int64),
                                                  np.array([[q]], dtype=np.int64)))
        t = time_call(mul, x, w, table, repeats=repeats, min_time_s=0.1)
        rates[size] = size / t.min_s

    copy_s = _in_place_increment_seconds(COPY_BYTES // 4, repeats)
    bandwidth = 2 * COPY_BYTES / copy_s
    return Peaks(int8, max(rates.values()), bandwidth, {
        "int8_dot": f"{d}x{d} @ {d}x{d} int8 -> int32, best {t_dot.min_s * 1e3:.2f} ms",
        "mulmod_per_size": {str(k): v for k, v in rates.items()},
        "bandwidth_copy": f"x += 1 in place over {COPY_BYTES >> 20} MiB uint32, best {copy_s * 1e3:.2f} ms",
    })


def _in_place_increment_seconds(words: int, repeats: int) -> float:
    """Fastest of ``repeats`` calls of a donated ``x + 1`` over ``words`` uint32 (the buffer is reused)."""
    inc = jax.jit(lambda v: v + jnp.uint32(1), donate_argnums=0)
    y = jax.block_until_ready(inc(jnp.zeros((words,), jnp.uint32)))  # compile + warm-up
    best = math.inf
    for _ in range(max(repeats, 3)):
        start = time.perf_counter()
        y = jax.block_until_ready(inc(y))
        best = min(best, time.perf_counter() - start)
    return best


# ----------------------------------------------------------------------------------------------------------
# work counts
# ----------------------------------------------------------------------------------------------------------


def _table_bytes(tree) -> int:
    return int(sum(np.asarray(leaf).nbytes for leaf in jax.tree_util.tree_leaves(tree)))


def ntt_work(plan: ntt_kernels.NTTPlan, batch: int = 1) -> Work:
    """Work of one forward NTT call on ``(batch, L, N)`` with ``plan`` (see the module docstring)."""
    n, limbs = plan.n, plan.num_limbs
    data = 2 * 4 * n * limbs * batch  # read the input, write the output
    if plan.method == "butterfly":
        mulmods = n // 2 * int(math.log2(n)) * limbs * batch
        twiddles = 2 * 4 * n * limbs  # value + Shoup (or Montgomery) twiddle per residue, read once
        return Work(0.0, float(mulmods), float(data + twiddles))
    int8_ops = mulmods = 0
    tables = 0
    for st in plan.forward:
        if isinstance(st, ntt_kernels.MatrixStage):
            k, h, v = st.mat.num, st.mat.rows, st.mat.cols
            int8_ops += 2 * (h * k) * (v * k) * (n // v)
            mulmods += n  # the merge reduces one output residue each
            tables += int(np.asarray(st.mat.dense).nbytes)
        elif isinstance(st, ntt_kernels.TwiddleStage):
            mulmods += n
            tables += _table_bytes(st.tw) * 2 // 3  # two of the three precomputed forms are read
    return Work(float(int8_ops * limbs * batch), float(mulmods * limbs * batch), float(data + tables))


def bat_work(h: int, v: int, w: int, k: int) -> Work:
    """Work of one ``(H x V) @ (V x W) mod q`` BAT product with K chunks (one modulus)."""
    int8_ops = 2 * (h * k) * (v * k) * w
    return Work(float(int8_ops), float(h * w), float(4 * (v * w + h * w) + (h * k) * (v * k)))


def roofline(work: Work, seconds: float, peaks: Peaks) -> dict:
    """Roofline time of ``work``, its bound and the fraction of it a call of ``seconds`` reaches."""
    compute = work.int8_ops / peaks.int8_ops + work.mulmods / peaks.mulmod
    memory = work.bytes / peaks.bandwidth
    bound_s = max(compute, memory)
    return {
        "roofline_s": bound_s,
        "bound": "compute" if compute >= memory else "memory",
        "fraction": bound_s / seconds if seconds else None,
        "int8_ops_per_s": work.int8_ops / seconds if seconds else None,
        "mulmods_per_s": work.mulmods / seconds if seconds else None,
        "work": work.as_dict(),
    }


def annotate(results, peaks: Peaks) -> None:
    """Add ``extra["roofline"]`` to every result that carries ``extra["work"]`` and a time (in place)."""
    for r in results:
        work = r.extra.get("work")
        if work and r.median_s:
            r.extra["roofline"] = roofline(Work(**work), r.median_s, peaks)


__all__ = ["Peaks", "Work", "measure_peaks", "ntt_work", "bat_work", "roofline", "annotate"]
