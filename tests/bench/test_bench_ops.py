"""hemx bench ops: one result per library, set, operation and batch size, with the figures filled in."""

from __future__ import annotations

import io
from collections import Counter

import numpy as np
import pytest
from rich.console import Console

from hemx.bench import peers
from hemx.bench.ops import batch_sizes, bench_ops, print_ops_report

from tests.helpers.expected import bound

OPS = {"add", "mul", "rescale", "mul_rescale", "rotate", "rotate16"}


def test_batch_one_is_timed_once():
    assert batch_sizes(1) == (1,)
    assert batch_sizes(8) == (1, 8)


def test_other_batches_add_rows_with_the_figures_filled_in():
    """One run at batch 2 (the batch-1 rows come with it: one set of compilations, not two)."""
    results = bench_ops(["A"], batch=2, repeats=1, console=Console(file=io.StringIO()))
    keys = [(r.name, r.params["set"], r.params["op"], r.params["batch"]) for r in results]
    assert len(keys) == len(set(keys)) == 11
    assert Counter(k[3] for k in keys) == {1: 6, 2: 5}  # the 16 hoisted rotations: batch 1 only
    assert {k[2] for k in keys} == OPS and {k[0] for k in keys} == {"hemx"}
    assert all(r.median_s > 0 and r.throughput > 0 for r in results)
    assert all(r.throughput > r.params["batch"] / r.median_s * 0.999 for r in results)
    mul_rescale = [r for r in results if r.params["op"] == "mul_rescale"]
    assert all(r.extra["precision_min_bits"] >= bound("set_a/ks_mul") for r in mul_rescale)  # the bench's own figure
    rotations = {r.params["op"]: r for r in results if r.params["op"] in ("rotate", "rotate16") and r.params["batch"] == 1}
    assert {op: r.extra["precision_min_bits"] >= bound("set_a/ks_rotate") for op, r in rotations.items()} == {
        "rotate": True, "rotate16": True}  # decrypted and checked against numpy.roll, all 16 steps
    out = io.StringIO()
    print_ops_report(results, Console(file=out, width=200), batch=2)
    assert "Rotate x16 (hoisted)" in out.getvalue() and "Rotate x16 (hoisted) precision, set A" in out.getvalue()


class _RotatelessPeer:
    """A peer whose setup has no ``rotate16`` entry (and a wrong-way ``rotate`` for the precision figure)."""

    name = "rotateless"

    def __init__(self, threads):
        pass

    @staticmethod
    def available():
        return None

    def setup(self, n, levels):
        x = np.linspace(-1, 1, n // 2)
        bits, _ = peers.rotations_precision(x, (np.roll(x, 1), [np.roll(x, -k) for k in peers.ROTATE_MANY_STEPS]))
        return peers.PeerSetup(self.name, n, levels, None, "fake", {"add": lambda: 0, "mul": None, "rotate": lambda: 0},
                               precision={"rotate": bits})


def test_a_peer_without_the_hoisted_rotations_has_no_row_for_them(monkeypatch):
    monkeypatch.setitem(peers.ADAPTERS, _RotatelessPeer.name, _RotatelessPeer)
    results = bench_ops(["A"], batch=1, repeats=1, peers=[_RotatelessPeer.name], console=Console(file=io.StringIO()))
    fake = {r.params["op"]: r for r in results if r.name == _RotatelessPeer.name}
    assert set(fake) == {"add", "mul", "rotate"}  # rescale, mul_rescale, rotate16: left out, no row
    assert fake["mul"].median_s is None and fake["mul"].extra["skipped"] == "no such primitive"
    assert fake["rotate"].median_s > 0 and fake["rotate"].extra["precision_min_bits"] < 2  # rolled the wrong way
    assert {r.params["op"] for r in results if r.name == "hemx"} == OPS


def test_rotations_precision_checks_every_step_against_numpy():
    x = np.random.default_rng(0).uniform(-1, 1, 64)
    many = [np.roll(x, -k) + 1e-9 for k in peers.ROTATE_MANY_STEPS]
    one, sixteen = peers.rotations_precision(x, (np.roll(x, -1), many))
    assert one == 60.0 and 29 < sixteen < 30
    many[9] = np.roll(x, -9)  # one step wrong
    assert peers.rotations_precision(x, (np.roll(x, -1), many))[1] < 2
    with pytest.raises(ValueError):
        peers.rotations_precision(x, (x, many[:15]))


@pytest.mark.parametrize("peer,n", [("desilofhe", 1 << 13), ("tenseal", 1 << 13)])
def test_peer_rotate16_returns_the_16_rotations_checked_against_numpy(peer, n):
    pytest.importorskip(peer)
    setup = peers.ADAPTERS[peer](2).setup(n, 2)
    assert setup is not None and setup.n == n
    assert len(setup.ops["rotate16"]()) == len(peers.ROTATE_MANY_STEPS) == 16
    assert setup.precision["rotate16"] >= 15 and setup.precision["rotate"] >= 15  # every step, worst slot
    assert "rotate16" in setup.note


def test_isa_is_forced_for_the_run_recorded_per_row_and_restored():
    """``isa=``: the native kernels run that instruction set for the run, each hemx row says which, and the
    previous one is active again afterwards (hemx bench ops --isa)."""
    import pytest

    from hemx.kernels import native

    if not native.available():
        pytest.skip(f"native kernels unavailable: {native.reason()}")
    before = native.isa()
    results = bench_ops(["A"], batch=1, repeats=1, isa="scalar", console=Console(file=io.StringIO()))
    assert {r.params["isa"] for r in results if r.name == "hemx"} == {"scalar"}
    assert native.isa() == before
