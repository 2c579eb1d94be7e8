"""``hemx.parallel.traffic`` (collective bytes from optimized HLO text) and ``hemx.dataflow.device_traffic``
(the inter-device traffic model of one key switch under limb sharding).

The parser is checked on a hand-written HLO snippet (every collective kind, every replica-group syntax, async
start/done) and on a real partitioned program: one subprocess with 4 simulated CPU devices compiles a relinearized
multiplication of a limb-sharded context (``tests/parallel/_traffic_worker.py``).
"""

from __future__ import annotations

import re
import warnings

import pytest

from hemx import parallel
from hemx.dataflow import DEVICE_DATAFLOWS, KeySwitchShape, device_traffic, device_traffic_all
from hemx.dataflow.devices import rescale_towers
from hemx.errors import ParameterError
from hemx.parallel import traffic

from tests.parallel.test_mesh import run_worker

SNIPPET = """\
HloModule jit_f, is_scheduled=true, entry_computation_layout={(u32[2,2,64]{2,1,0})->u32[2,8,64]{2,1,0}}, num_partitions=4

%add.clone (x.1: s32[], y.1: s32[]) -> s32[] {
  %x.1 = s32[] parameter(0)
  %y.1 = s32[] parameter(1)
  ROOT %add.0 = s32[] add(%x.1, %y.1)
}

ENTRY %main.5_spmd (param: u32[2,2,64]) -> u32[2,8,64] {
  %param = u32[2,2,64]{2,1,0} parameter(0), sharding={devices=[1,4,1]<=[4]}
  %all-gather = u32[2,8,64]{2,1,0} all-gather(%param), channel_id=1, replica_groups=[1,4]<=[4], dimensions={1}, use_global_device_ids=true
  %ag2 = u32[2,4,64]{2,1,0} all-gather(u32[2,2,64]{2,1,0} %param), channel_id=2, replica_groups={{0,1},{2,3}}, dimensions={1}
  %a2a = (u32[2,1,16]{2,1,0}, u32[2,1,16]{2,1,0}, u32[2,1,16]{2,1,0}, u32[2,1,16]{2,1,0}) all-to-all(%s0, %s1, %s2, %s3), channel_id=3, replica_groups=mesh['axis_0'=1,'axis_1'=4] {'axis_1'}
  %a2a.1 = u32[4,64]{1,0} all-to-all(%flat), channel_id=4, replica_groups={}, dimensions={0}
  %all-reduce = s32[32,64]{1,0} all-reduce(%dot), channel_id=5, replica_groups=mesh['axis_0'=4,'axis_1'=1] {'axis_0'}, use_global_device_ids=true, to_apply=%add.clone
  %rs = s32[8,64]{1,0} reduce-scatter(%dot), channel_id=6, replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=%add.clone
  %collective-permute.1 = u32[2,2,64]{2,1,0} collective-permute(%param), channel_id=7, source_target_pairs={{0,1},{1,2},{2,3}}
  %cp.2 = u32[2,1,64]{2,1,0} collective-permute(%param), channel_id=8, source_target_pairs={{0,3},{1,3},{2,2}}
  %ags = (u32[2,2,64]{2,1,0}, u32[2,8,64]{2,1,0}) all-gather-start(%param), channel_id=9, replica_groups=[1,4]<=[4], dimensions={1}
  %agd = u32[2,8,64]{2,1,0} all-gather-done(%ags)
  %s0 = u32[2,1,16]{2,1,0} slice(%param), slice={[0:2], [0:1], [0:16]}
  %s1 = u32[2,1,16]{2,1,0} slice(%param), slice={[0:2], [0:1], [16:32]}
  %s2 = u32[2,1,16]{2,1,0} slice(%param), slice={[0:2], [0:1], [32:48]}
  %s3 = u32[2,1,16]{2,1,0} slice(%param), slice={[0:2], [0:1], [48:64]}
  %flat = u32[4,64]{1,0} reshape(%param)
  %dot = s32[32,64]{1,0} constant({...})
  ROOT %out = u32[2,8,64]{2,1,0} copy(%all-gather)
}
"""


def test_shape_bytes():
    assert traffic.shape_bytes("u32[2,1,16]{2,1,0}") == 128
    assert traffic.shape_bytes("(u32[2,1,16]{2,1,0}, s8[4,4]{1,0})") == 128 + 16
    assert traffic.shape_bytes("s64[]") == 8
    assert traffic.shape_bytes("bf16[3]") == 6
    with pytest.raises(ValueError):
        traffic.shape_bytes("q99[4]")


def test_replica_group_syntaxes():
    assert traffic.replica_groups("replica_groups={{0,1},{2,3}}, dimensions={0}", 4) == (2, 2)
    assert traffic.replica_groups("replica_groups=[2,4]<=[8]", 8) == (4, 2)
    assert traffic.replica_groups("replica_groups=[4,2]<=[2,4]T(1,0)", 8) == (2, 4)
    assert traffic.replica_groups("replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_1'}", 8) == (4, 2)
    assert traffic.replica_groups("replica_groups={}, dimensions={0}", 8) == (8, 1)
    assert traffic.replica_groups("channel_id=1", 4) == (4, 1)


def test_snippet_every_kind():
    cs = {c.name: c for c in traffic.collectives(SNIPPET)}
    assert set(cs) == {"all-gather", "ag2", "a2a", "a2a.1", "all-reduce", "rs", "collective-permute.1", "cp.2",
                       "ags"}  # -done skipped, non-collectives ignored
    tower = 2 * 64 * 4  # two polynomials x one limb x N=64 x 4 bytes
    ag = cs["all-gather"]
    assert (ag.group_size, ag.num_groups, ag.operand_bytes, ag.result_bytes) == (4, 1, 2 * tower, 8 * tower)
    assert ag.bytes_per_device == 6 * tower and ag.total_bytes == 24 * tower
    assert cs["ag2"].bytes_per_device == 2 * tower and cs["ag2"].total_bytes == 2 * tower * 4  # 2 groups of 2
    assert cs["a2a"].operand_bytes == 4 * 128 and cs["a2a"].bytes_per_device == 3 * 128  # tuple: all but one
    assert cs["a2a.1"].bytes_per_device == 4 * 64 * 4 * 3 / 4  # array form, one group of all 4
    ar = cs["all-reduce"]
    assert ar.group_size == 4 and ar.bytes_per_device == 2 * 32 * 64 * 4 * 3 / 4
    rs = cs["rs"]
    assert rs.operand_bytes == 32 * 64 * 4 and rs.result_bytes == 8 * 64 * 4
    assert rs.bytes_per_device == 24 * 64 * 4 and rs.total_bytes == 4 * 24 * 64 * 4
    cp = cs["collective-permute.1"]
    assert cp.bytes_per_device == 2 * tower and cp.total_bytes == 3 * 2 * tower
    cp2 = cs["cp.2"]  # {2,2} moves nothing; device 3 receives twice
    assert cp2.bytes_per_device == 2 * 512 and cp2.total_bytes == 2 * 512
    ags = cs["ags"]  # async start: the result half of its (operand, result) tuple
    assert ags.result_bytes == 8 * tower and ags.bytes_per_device == 6 * tower
    assert {c.computation for c in cs.values()} == {"main.5_spmd"}

    s = traffic.summarize(SNIPPET)
    assert s.devices == 4
    assert s.count == {"all-gather": 3, "all-to-all": 2, "all-reduce": 1, "reduce-scatter": 1,
                       "collective-permute": 2}
    assert s.bytes == pytest.approx(sum(c.total_bytes for c in cs.values()))
    assert s.mean_bytes_per_device == pytest.approx(s.bytes / 4)
    assert parallel.summarize(list(cs.values())).count == s.count


def test_no_collectives():
    s = traffic.summarize("HloModule m, num_partitions=1\nENTRY %e (p: u32[4]) -> u32[4] {\n"
                          "  ROOT %p = u32[4]{0} parameter(0)\n}\n")
    assert s.collectives == 0 and s.bytes == 0 and s.devices == 1


# ---------------------------------------------------------------- a real partitioned program (4 devices)
KINDS_RE = re.compile(r"=\s*(?:\(.*?\)|\S+)\s+(all-gather|all-to-all|all-reduce|reduce-scatter|collective-permute)"
                      r"(-start)?\(")


@pytest.fixture(scope="module")
def real():
    return run_worker("tests.parallel._traffic_worker", devices=4, timeout=300)


def test_real_program_has_collectives_and_is_correct(real):
    assert real["devices"] == 4
    assert real["max_error"] < 1e-3  # the sharded mul computes the right thing
    s = real["summary"]
    assert s["devices"] == 4 and s["collectives"] > 0 and s["bytes"] > 0
    assert s == real["from_text"]  # a Compiled and its text give the same answer


def test_real_program_matches_a_direct_count_of_the_text(real):
    text, s = real["hlo"], real["summary"]
    direct = {k: 0 for k in traffic.KINDS}
    permute_bytes = 0
    for line in text.splitlines():
        m = KINDS_RE.search(line)
        if not m:
            continue
        direct[m.group(1)] += 1
        if m.group(1) == "collective-permute":  # independent byte count: result shape x real pairs
            typ = line.split("=", 1)[1].split("collective-permute(")[0]
            dtype, dims = re.search(r"([a-z0-9]+)\[([0-9,]*)\]", typ).groups()
            size = {"u32": 4, "s32": 4, "s8": 1, "u8": 1, "s64": 8, "u64": 8}[dtype]
            for d in dims.split(","):
                size *= int(d) if d else 1
            pairs = re.search(r"source_target_pairs=\{(.*?)\}\}", line).group(1) + "}"
            permute_bytes += size * sum(a != b for a, b in re.findall(r"\{(\d+),(\d+)\}", pairs))
    assert s["count"] == direct
    assert s["total_bytes"]["collective-permute"] == pytest.approx(permute_bytes)
    assert sum(c["total_bytes"] for c in real["collectives"]) == pytest.approx(s["bytes"])


def test_model_is_a_lower_bound_of_the_real_program(real):
    from hemx.bench.scaling import small_params

    shape = KeySwitchShape.from_params(small_params())
    model = device_traffic(shape, "MP", 4)
    assert 0 < model.total_bytes <= real["summary"]["bytes"]


# ---------------------------------------------------------------- the model
SHAPE = KeySwitchShape(n=64, towers=8, special=4, digit_sizes=(4, 4), word_bytes=4)


@pytest.mark.parametrize("flow", DEVICE_DATAFLOWS)
def test_model_one_device_moves_nothing(flow):
    t = device_traffic(SHAPE, flow, 1, rescale=2)
    assert t.bytes_per_device == 0 and t.total_bytes == 0 and t.rounds == 0 and t.peak_towers == 0


def test_model_values_and_units():
    t = device_traffic(SHAPE, "mp", 4)
    assert t.steps == {"modup": 8 * 3 / 4, "moddown": 2 * 4 * 3 / 4, "rescale": 0.0}
    assert t.words_per_device == (6 + 6) * 64 and t.bytes_per_device == 12 * 64 * 4
    assert t.total_bytes == 4 * t.bytes_per_device
    assert t.as_dict()["total_bytes"] == t.total_bytes


def test_model_grows_with_limbs_special_devices_and_rescale():
    def total(shape, d=4, **kw):
        return device_traffic(shape, "MP", d, **kw).total_bytes

    more_limbs = KeySwitchShape(n=64, towers=12, special=4, digit_sizes=(6, 6), word_bytes=4)
    more_special = KeySwitchShape(n=64, towers=8, special=8, digit_sizes=(8,), word_bytes=4)
    assert total(more_limbs) > total(SHAPE)
    assert total(more_special) > total(SHAPE)
    assert total(SHAPE, 2) < total(SHAPE, 4) < total(SHAPE, 8)  # total volume grows with D
    per = [device_traffic(SHAPE, "MP", d).bytes_per_device for d in (2, 4, 8)]
    assert per == sorted(per) and per[-1] < SHAPE.towers * 3 * SHAPE.tower_bytes  # bounded by (l + 2K) towers
    assert total(SHAPE, rescale=2) > total(SHAPE)
    big_n = KeySwitchShape(n=128, towers=8, special=4, digit_sizes=(4, 4), word_bytes=4)
    assert total(big_n) == 2 * total(SHAPE)


def test_model_dataflows_same_volume_different_rounds():
    flows = device_traffic_all(SHAPE, 4)
    assert len({f.total_bytes for f in flows.values()}) == 1  # owner-computes: same conversions, same volume
    assert flows["DC"].rounds == SHAPE.dnum + 1 > flows["MP"].rounds == flows["OC"].rounds == 2
    assert flows["DC"].peak_towers <= flows["MP"].peak_towers
    folded = device_traffic(SHAPE, "MP", 4, rescale=2, folded=True)
    separate = device_traffic(SHAPE, "MP", 4, rescale=2)
    assert folded.total_bytes == separate.total_bytes and folded.rounds == separate.rounds - 1


def test_model_rejects_bad_arguments():
    with pytest.raises(ParameterError):
        device_traffic(SHAPE, "XX", 2)
    with pytest.raises(ParameterError):
        device_traffic(SHAPE, "MP", 0)
    with pytest.raises(ParameterError):
        device_traffic(SHAPE, "MP", 2, rescale=8)


def test_model_from_hemx_params():
    from hemx.bench.scaling import small_params

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shape = KeySwitchShape.from_params(small_params())
    assert (shape.towers, shape.special, shape.digit_sizes) == (8, 4, (4, 4))
    assert device_traffic(shape, "OC", 8).towers_per_device == pytest.approx((8 + 8) * 7 / 8)


def test_by_operation_groups_by_primitive():
    cs = [traffic.Collective("all-reduce", "a", "e", 8, 8, 2, 1, 8.0, 16.0, "jit(f)/jit(g)/dot_general"),
          traffic.Collective("all-reduce", "b", "e", 8, 8, 2, 1, 8.0, 16.0, "jit(f)/dot_general"),
          traffic.Collective("collective-permute", "c", "e", 4, 4, 2, 1, 4.0, 4.0, "jit(f)/slice"),
          traffic.Collective("collective-permute", "d", "e", 4, 4, 2, 1, 4.0, 40.0)]
    groups = traffic.by_operation(cs)
    assert list(groups) == ["collective-permute <- ?", "all-reduce <- dot_general", "collective-permute <- slice"]
    assert groups["all-reduce <- dot_general"] == {"count": 2, "total_bytes": 32.0}


def test_real_program_op_names(real):
    groups = traffic.by_operation([traffic.Collective(**c) for c in real["collectives"]])
    assert sum(g["total_bytes"] for g in groups.values()) == pytest.approx(real["summary"]["bytes"])
    assert all(c["op_name"] for c in real["collectives"])  # every collective says what it was inserted for


def test_accepts_lowered_compiled_and_text():
    import jax
    import jax.numpy as jnp

    lowered = jax.jit(lambda x: x * 2).lower(jnp.ones(4, jnp.uint32))
    compiled = lowered.compile()
    for obj in (lowered, compiled, compiled.as_text()):
        s = parallel.summarize(obj)
        assert s.collectives == 0 and s.devices == 1
    assert parallel.collectives(lowered) == []


def test_model_key_aligned_relayout():
    """``key_aligned=True`` (the shard_map key switch's layouts): the relayout step, counted by hand for the bench
    ring on 4 devices (key blocks of 3 rows over P0-3, Q0-7; ciphertext blocks of 2 Q towers)."""
    t = device_traffic(SHAPE, "MP", 4, key_aligned=True)
    # Q0,Q1 (key block 1 -> layout 0), Q2,Q3 (2 -> 1), Q5 (3 -> 2): 5 towers of 2 polynomials, over 4 devices
    assert t.steps["relayout"] == 2 * 5 / 4 and t.steps["modup"] == 6 and t.rounds == 3
    assert t.total_bytes == device_traffic(SHAPE, "MP", 4).total_bytes + 10 * SHAPE.tower_bytes
    # folded rescale (r = 2, 6 kept towers, replicated on 4 devices): every kept tower to the 3 devices without
    # it (2 * (6 * 4 - 6) = 36 towers), plus the addend to the key blocks (Q0-3, Q5 as above: 10 towers)
    f = device_traffic(SHAPE, "MP", 4, rescale=2, folded=True, key_aligned=True)
    assert f.steps["relayout"] == (36 + 10) / 4
    # a replicated input (D does not divide l) needs no ModUp exchange
    odd = KeySwitchShape(n=64, towers=6, special=2, digit_sizes=(3, 3), word_bytes=4)
    assert device_traffic(odd, "MP", 4, key_aligned=True, key_rows=12).steps["modup"] == 0.0
    assert device_traffic(SHAPE, "MP", 1, key_aligned=True).total_bytes == 0
    # a separate rescale (8 -> 6 towers on 4 devices: split -> replicated): the 2 dropped towers of both polynomials
    # to the 3 devices without them (12), every kept tower to the 3 devices without it (2 * 6 * 3 = 36)
    assert rescale_towers(8, 2, 4) == {"rescale": 12 / 4, "relayout": 36 / 4}
    assert rescale_towers(8, 2, 2) == {"rescale": 4 / 2, "relayout": 2 / 2}  # blocks of 4 -> 3: Q3 moves
    assert rescale_towers(6, 2, 4) == {"rescale": 0.0, "relayout": 0.0}  # replicated -> split: all local
    s = device_traffic(SHAPE, "MP", 4, rescale=2, key_aligned=True)
    assert s.steps["rescale"] == 3 and s.steps["relayout"] == t.steps["relayout"] + 9
    with pytest.raises(ParameterError):
        device_traffic(SHAPE, "MP", 8, key_aligned=True)  # 8 does not divide the key's 12 rows
