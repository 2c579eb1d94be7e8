"""hemx.circuits.bootstrap.placement: the lazy rule (bootstrap a value right before the step that needs more levels
than it has), shared by the nn compiler's bootstrap pass and the bootstrapped logistic regression; on a chain it
places the fewest bootstraps (checked against every placement of small chains). And
``CKKSParameters.rescale_divisor``, the divisor planners read without a context, equal to the context's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import hemx
from hemx.circuits.bootstrap.placement import bootstrap_before, chain_bootstraps
from hemx.errors import LevelError, ParameterError

from tests.helpers.ckks_helpers import INSECURE, small_params

pytestmark = pytest.mark.filterwarnings(INSECURE)


def test_bootstrap_before():
    assert not bootstrap_before(5, 5, output_level=8) and not bootstrap_before(5, 2, output_level=None)
    assert bootstrap_before(4, 5, output_level=8) and bootstrap_before(np.int64(0), 8, output_level=8)
    with pytest.raises(LevelError, match=r"step 'x' needs 5 levels, its input 'v' is at level 4; these parameters "
                                         r"cannot bootstrap: use more levels or a boot_\* preset"):
        bootstrap_before(4, 5, output_level=None, what="step 'x'", value="its input 'v'")
    with pytest.raises(LevelError, match=r"needs 9 levels, more than a bootstrap returns \(8\): try this"):
        bootstrap_before(4, 9, output_level=8, advice="try this")
    for bad in (-1, 1.5, True, "3", None):
        with pytest.raises(ParameterError, match="non-negative integer"):
            bootstrap_before(bad, 3, output_level=8)
        with pytest.raises(ParameterError, match="non-negative integer"):
            bootstrap_before(3, bad, output_level=8)
    with pytest.raises(ParameterError, match="output_level"):
        bootstrap_before(2, 3, output_level=-1)


def _feasible(start: int, needs, costs, output_level: int, placed) -> bool:
    level = start
    for i, (need, cost) in enumerate(zip(needs, costs)):
        if i in placed:
            level = output_level
        if level < need:
            return False
        level -= cost
    return True


def test_chain_is_the_fewest_bootstraps():
    rng = np.random.default_rng(7)
    for _ in range(300):
        steps = int(rng.integers(0, 8))
        output_level = int(rng.integers(1, 9))
        costs = [int(c) for c in rng.integers(0, output_level + 1, steps)]
        needs = [min(output_level, c + int(rng.integers(0, 2))) for c in costs]
        start = int(rng.integers(0, 12))
        placed = chain_bootstraps(start, needs, costs, output_level=output_level)
        assert list(placed) == sorted(set(placed)) and _feasible(start, needs, costs, output_level, set(placed))
        fewest = min(k for k in range(steps + 1) for subset in itertools.combinations(range(steps), k)
                     if _feasible(start, needs, costs, output_level, set(subset)))
        assert len(placed) == fewest


def test_chain_values_and_errors():
    # the logistic regression's chain: 4 levels per iteration, 5 before the last, 8 after a bootstrap
    assert chain_bootstraps(8, [4] * 4 + [5], [4] * 5, output_level=8) == (2, 4)
    assert chain_bootstraps(3, [], [], output_level=None) == ()
    assert chain_bootstraps(9, [4, 4], [4, 4], output_level=None) == ()
    with pytest.raises(LevelError, match="step 1 needs 4 levels, its input is at level 1; these parameters cannot"):
        chain_bootstraps(5, [4, 4], [4, 4], output_level=None)
    with pytest.raises(LevelError, match=r"step 0 needs 9 levels, more than a bootstrap returns \(8\)"):
        chain_bootstraps(3, [9], [2], output_level=8)
    with pytest.raises(ParameterError, match="one entry per step"):
        chain_bootstraps(3, [1, 2], [1], output_level=8)
    with pytest.raises(ParameterError, match="step 0 consumes 3 levels but needs only 2"):
        chain_bootstraps(3, [2], [3], output_level=8)
    with pytest.raises(ParameterError, match=r"costs\[1\]"):
        chain_bootstraps(3, [1, 1], [1, -1], output_level=8)


def test_rescale_divisor_from_the_parameters():
    params = small_params(10, 3)
    ctx = hemx.Context(params)
    for level in range(1, params.max_level + 1):
        assert params.rescale_divisor(level) == ctx.rescale_divisor(level)
    boot = hemx.CKKSParameters.preset("boot_12", allow_insecure=True)
    stop = list(itertools.accumulate(boot.level_sizes))
    for level in range(1, boot.max_level + 1):
        primes = boot.moduli[stop[level - 1]: stop[level]]
        assert len(primes) == boot.level_sizes[level] and boot.rescale_divisor(level) == float(np.prod(
            np.array(primes, dtype=object)))
    for bad in (0, params.max_level + 1, -1, 1.0):
        with pytest.raises(LevelError, match="no rescale at level"):
            params.rescale_divisor(bad)
