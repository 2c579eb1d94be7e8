"""Soak (issue 17): 2,000 mixed operations on a small ring; resident memory must not grow after warm-up.

Encrypt, multiply (+ relinearize), rotate, rescale, serialize and deserialize in a loop on N = 2^10 (insecure
test parameters, cached context). After a warm-up that compiles every kernel and fills every legitimate cache,
the resident set size may grow by less than 5% over the remaining operations: no cache or table that grows
per call. Measured on this 2-core CPU: see the report in the module's history (about 20-40 s unloaded).
"""

from __future__ import annotations

import gc
import os
import resource
import time

import numpy as np
import pytest

import hemx.io

from tests.helpers.ckks_helpers import INSECURE, context_and_keys

pytestmark = pytest.mark.filterwarnings(INSECURE)

OPERATIONS = 2000
WARMUP_ROUNDS = 20  # rounds of the cycle below before the baseline is taken
CYCLE = 8  # operations per round


def rss_bytes() -> int:
    """Resident set size now, from /proc/self/statm (falls back to the peak from getrusage)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_soak_memory_is_flat():
    ctx, keys = context_and_keys(10, 2, rotations=(1, -1))
    rng = np.random.default_rng(17)
    x = rng.uniform(-1, 1, ctx.slots)
    done = 0

    def one_round(i):
        ct = ctx.encrypt(x, keys)  # 1
        prod = ctx.mul(ct, ct, keys, rescale=False)  # 2
        prod = ctx.rescale(prod)  # 3
        rot = ctx.rotate(prod, 1 if i % 2 else -1, keys)  # 4
        blob = hemx.io.dumps(rot, ctx)  # 5
        back = hemx.io.loads(blob, ctx)  # 6
        summed = ctx.add(back, ctx.drop_level(ct, back.level))  # 7
        out = ctx.decrypt(summed, keys)  # 8
        return out

    for i in range(WARMUP_ROUNDS):
        out = one_round(i)
        done += CYCLE
    want = np.roll(x * x, -1 if (WARMUP_ROUNDS - 1) % 2 else 1) + x
    np.testing.assert_allclose(out, want, atol=1e-3)
    gc.collect()
    base = rss_bytes()
    start = time.perf_counter()
    i = WARMUP_ROUNDS
    samples = []
    while done < OPERATIONS:
        out = one_round(i)
        i += 1
        done += CYCLE
        if i % 25 == 0:
            samples.append(rss_bytes())
    gc.collect()
    end = rss_bytes()
    elapsed = time.perf_counter() - start
    growth = (end - base) / base
    print(f"soak: {done} operations, {elapsed:.1f} s after warm-up, RSS {base / 2**20:.1f} -> {end / 2**20:.1f} MiB "
          f"({100 * growth:+.2f}%), samples {[round(s / 2**20, 1) for s in samples]}")
    assert growth < 0.05, f"resident memory grew by {100 * growth:.1f}% over {done} operations"
