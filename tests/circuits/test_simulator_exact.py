"""hemx.circuits.SlotSimulator without parameters (the exact mode the apps' layout tests use): levels counted as
in CKKS, scales all 1, constants not rounded; bad arguments raise hemx errors."""

from __future__ import annotations

import numpy as np
import pytest

from hemx.circuits import SlotSimulator
from hemx.errors import LevelError, ParameterError

from tests.helpers.ckks_helpers import small_params


def test_exact_mode_counts_levels_and_keeps_values_exact():
    sim = SlotSimulator(None, slots=8, max_level=2)
    assert (sim.slots, sim.max_level, sim.default_scale) == (8, 2, 1.0)
    x = sim.encrypt(np.arange(5.0))
    assert (x.level, x.scale) == (2, 1.0) and x.values.shape == (8,)
    c = 1.0 / 3.0
    y = sim.rescale(sim.mul_const(x, c, plain_scale=sim.rescale_divisor(2)))
    assert y.level == 1 and y.scale == 1.0
    np.testing.assert_array_equal(y.values[:5], np.arange(5.0) * c)  # not rounded to a plain scale
    z = sim.mul(y, y, rescale=True)  # the fused form equals a product then a rescale
    assert z.level == 0 and sim.products == 1
    unfused = sim.rescale(sim.mul(y, y))
    assert (unfused.level, unfused.scale) == (z.level, z.scale) and np.array_equal(unfused.values, z.values)
    with pytest.raises(LevelError):
        sim.rescale(z)
    with pytest.raises(LevelError):
        sim.rescale_divisor(3)
    with pytest.raises(LevelError):
        sim.encrypt(np.ones(8), level=3)
    assert sim.decrypt(sim.rotate(x, -1))[0] == 0.0 and sim.rotations_used == {7}
    assert SlotSimulator(None, slots=4).max_level == 0


@pytest.mark.parametrize("kwargs", [{}, {"slots": 0}, {"slots": 2.5}, {"slots": True},
                                    {"slots": 4, "max_level": -1}, {"slots": 4, "max_level": 1.5}])
def test_exact_mode_bad_arguments(kwargs):
    with pytest.raises(ParameterError):
        SlotSimulator(None, **kwargs)


def test_max_level_only_without_parameters():
    with pytest.raises(ParameterError):
        SlotSimulator(small_params(10, 2), max_level=1)
    with pytest.raises(ParameterError):
        SlotSimulator("params", slots=4)
