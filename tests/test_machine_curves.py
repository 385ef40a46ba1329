"""Curves over active cores (issue #31): the [curves] table's validation, its interpolation, the runtime terms
that read it (hand-computed), the unchanged fallback without it, and detect's curve steps on this host."""
from __future__ import annotations

import copy
import os
import statistics
import stat
import tomllib
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from analysis.runtime import model as rm
from analysis.runtime.terms.coherence import transfer_extra_cycles
from analysis.runtime.terms.contention import dram_bandwidth_gbs, queuing_seconds
from analysis.runtime.terms.overhead import overhead_seconds
from common.errors import InputError
from machines import detect, probeplan
from machines.curves import Curves, interpolate
from machines.detect_curves import curve_figures
from machines.loader import dumps_toml, load_machine, machine_to_dict, validate_machine_dict
from machines.probeplan import SysCache

SHIPPED = "haswell-i7-5960x"   # 8 cores, 3.0 GHz, no [parallel], [coherence] or [curves]
FILE = tomllib.loads((Path(__file__).resolve().parents[1] / "machines" / "data" / f"{SHIPPED}.toml").read_text())
CURVES = {"cores": [1, 2, 4, 8], "op_throughput_scale": [1.0, 0.9, 0.8, 0.5], "bandwidth_gbs": [15.0, 28.0, 48.0, 66.0],
          "shared_line_ns": [2.0, 2.0, 2.5, 3.0], "fork_join_ns": [100.0, 400.0, 800.0, 1600.0],
          "barrier_ns": [50.0, 150.0, 350.0, 750.0], "transfer_cycles": [40.0, 60.0, 100.0], "source": "hand-made",
          "spread": {"bandwidth_gbs": [0.01, 0.02, 0.0, 0.04], "transfer_cycles": [0.1, 0.0, 0.03]}}


def with_curves(curves: dict | None = None) -> dict:
    """The shipped machine's dict with a [curves] table."""
    data = machine_to_dict(load_machine(SHIPPED))
    data["curves"] = copy.deepcopy(CURVES if curves is None else curves)
    return data


def curved_machine():
    """The shipped machine with CURVES, validated."""
    return validate_machine_dict(with_curves(), "test")


@pytest.mark.parametrize("change,message", [
    (lambda c: c.update(cores=[2, 4, 8, 16]), r"curves\.cores: must start at 1"),
    (lambda c: c.update(cores=[1, 4, 2, 8]), r"curves\.cores: must be strictly increasing"),
    (lambda c: c.update(cores=[1, 2, 4, 16]), r"curves\.cores: 16 exceeds the machine's 8 cores"),
    (lambda c: c.update(cores=[1, 2.0, 4, 8]), r"curves\.cores: expected a non-empty array of integers"),
    (lambda c: c.pop("cores"), r"curves\.cores: missing"),
    (lambda c: c.update(bandwidth_gbs=[15.0, 28.0]), r"curves\.bandwidth_gbs: has 2 values; it needs 4"),
    (lambda c: c.update(transfer_cycles=[40.0, 60.0, 80.0, 100.0]),
     r"curves\.transfer_cycles: has 4 values; it needs 3, one per entry of curves\.cores above 1"),
    (lambda c: c.update(fork_join_ns=[100.0, float("inf"), 800.0, 1600.0]),
     r"curves\.fork_join_ns\[1\]: inf is not a finite number"),
    (lambda c: c.update(barrier_ns=[0.0, 150.0, 350.0, 750.0]), r"curves\.barrier_ns\[0\]: must be a positive number"),
    (lambda c: c.update(op_throughput_scale=[0.9, 0.9, 0.8, 0.5]), r"curves\.op_throughput_scale\[0\]: must be 1"),
    (lambda c: c.update(clock_scale=[0.9, 0.9, 0.8, 0.5]), r"curves\.clock_scale\[0\]: must be 1"),
    (lambda c: c.update(cold_start_ns=[10.0, -1.0, 5.0, 5.0]), r"curves\.cold_start_ns\[1\]: must be a number >= 0"),
    (lambda c: c.update(bandwith_gbs=[1.0, 2.0, 3.0, 4.0]), r"curves\.bandwith_gbs: unknown field"),
    (lambda c: c.pop("source"), r"curves\.source: missing"),
    (lambda c: c["spread"].update(barrier=[0.0, 0.0, 0.0, 0.0]), r"curves\.spread\.barrier: names no figure"),
    (lambda c: c["spread"].update(bandwidth_gbs=[0.01, -0.02, 0.0, 0.04]),
     r"curves\.spread\.bandwidth_gbs\[1\]: must be a number >= 0"),
    (lambda c: [c.pop(k) for k in list(c) if k not in ("cores", "source")], r"curves: needs at least one of"),
])
def test_bad_curves_are_refused_naming_the_field(change, message):
    curves = copy.deepcopy(CURVES)
    change(curves)
    with pytest.raises(InputError, match=message):
        validate_machine_dict(with_curves(curves), "test.toml")


def test_curves_round_trip_through_toml():
    m = curved_machine()
    assert m.curves.cores == (1, 2, 4, 8) and m.curves.figures["transfer_cycles"] == (40.0, 60.0, 100.0)
    assert m.sources["curves"] == "hand-made" and m.curves.spread["bandwidth_gbs"] == (0.01, 0.02, 0.0, 0.04)
    text = dumps_toml(machine_to_dict(m))
    assert "[curves]" in text and "[curves.spread]" in text
    assert validate_machine_dict(tomllib.loads(text), "round trip") == m


def test_interpolation_hand_computed():
    points, values = [1, 2, 4, 8], [10.0, 14.0, 20.0, 24.0]
    assert interpolate(points, values, 3) == 17.0          # half-way from 14 to 20
    assert interpolate(points, values, 6) == 22.0          # half-way from 20 to 24
    assert interpolate(points, values, 2) == 14.0          # a measured point
    assert interpolate(points, values, 0.5) == 10.0 and interpolate(points, values, 16) == 24.0  # ends held
    assert interpolate([1], [5.0], 7) == 5.0
    pairs = Curves((1, 2, 4), {"transfer_cycles": (10.0, 30.0)})  # transfer: p >= 2 only
    assert pairs.points("transfer_cycles") == (2, 4)
    assert pairs.at("transfer_cycles", 3) == 20.0 and pairs.at("transfer_cycles", 1) == 10.0


def test_terms_read_the_curves_at_p():
    m = curved_machine()
    assert dram_bandwidth_gbs(m, 4) == 48.0 and dram_bandwidth_gbs(m, 3) == 38.0    # (28 + 48) / 2
    # fork/join at 3 = 600 ns, barrier 250 ns; no [parallel] table: no cold start
    assert overhead_seconds(m, 3, regions=10, barriers=50) == pytest.approx((10 * 600 + 50 * 250) * 1e-9)
    assert overhead_seconds(m, 1, regions=10, barriers=50) == 0.0  # one thread: no fork/join or barrier cost
    # ... but each work-shared loop sets up its schedule: the barrier curve's one-core figure, 50 ns
    assert overhead_seconds(m, 1, regions=10, barriers=50, loops=20) == pytest.approx(20 * 50 * 1e-9)
    assert overhead_seconds(m, 3, regions=10, barriers=50, loops=20) == pytest.approx((10 * 600 + 50 * 250) * 1e-9)
    # transfer at 3 writers = 50 cycles (40 at 2, 60 at 4), less what T_mem charged: the shared L3's 4 per line
    assert transfer_extra_cycles(m, 3) == pytest.approx(50.0 - 4.0)
    # queuing at saturation: p x bytes at the curve's bandwidth at p (48 GB/s on 4 cores)
    assert queuing_seconds(m, 4, 1e-12, 6.4e6) == pytest.approx(4 * 6.4e6 / 48e9, rel=1e-3)


def _predict(machine, cores: int, **kw):
    """A region of 4000 fp adds and 400 integer adds (no memory accesses) with 6 GB of DRAM traffic."""
    return rm.predict_runtime(machine, cores, {"L1": 1.0, "L2": 1.0, "L3": 1.0}, rm.OpCounts(fp_add=4000, int_add=400),
                              mem_accesses=0, mem_bytes=0, dram_bytes=6e9, **kw)


def test_prediction_with_curves_hand_computed():
    m = curved_machine()
    ops = FILE["ops"]
    cpu_cycles = (ops["fp_add"]["latency"] + 999 * ops["fp_add"]["recip_throughput"]
                  + ops["int_add"]["latency"] + 99 * ops["int_add"]["recip_throughput"])  # 1000 and 100 per core
    p = _predict(m, 4, regions=10, barriers=50, coherence_miss_rate=0.1)
    assert p.t_cpu_throughput_s == pytest.approx(cpu_cycles / 0.8 / 3e9)               # scale 0.8 at 4 cores
    assert p.dram_bandwidth_gbs == 48.0 and p.t_dram_s == pytest.approx(6e9 / 48e9)
    assert p.t_overhead_s == pytest.approx((10 * 800 + 50 * 350) * 1e-9)
    assert p.runtime_s == pytest.approx(6e9 / 48e9 + (10 * 800 + 50 * 350) * 1e-9)      # DRAM-bound
    assert p.core_scaling == ("curves (DRAM bandwidth, fork/join, barrier, coherence transfer, op throughput); "
                              "fallback (cold start)")
    only_bw = validate_machine_dict(with_curves({"cores": [1, 2], "bandwidth_gbs": [10.0, 12.0], "source": "x"}), "t")
    assert _predict(only_bw, 2).core_scaling == ("curves (DRAM bandwidth); fallback (fork/join, barrier, coherence "
                                                 "transfer, op throughput, cold start)")


def test_machine_without_curves_keeps_todays_forms():
    m = load_machine(SHIPPED)
    assert m.curves is None
    ops, ram = FILE["ops"], FILE["ram"]
    cpu_cycles = (ops["fp_add"]["latency"] + 999 * ops["fp_add"]["recip_throughput"]
                  + ops["int_add"]["latency"] + 99 * ops["int_add"]["recip_throughput"])
    p = _predict(m, 4, regions=10, barriers=50)
    bandwidth = min(4 * ram["bandwidth_one_core_gbs"], ram["bandwidth_all_cores_gbs"])   # 60 GB/s
    assert p.dram_bandwidth_gbs == bandwidth and p.t_dram_s == pytest.approx(6e9 / (bandwidth * 1e9))
    assert p.t_cpu_throughput_s == pytest.approx(cpu_cycles / 3e9)
    assert p.t_overhead_s == 0.0 and p.t_coherence_s == 0.0     # no [parallel], no [coherence]
    assert p.runtime_s == pytest.approx(6e9 / (bandwidth * 1e9))
    assert p.core_scaling == "fallback"
    # the fixed forms of the optional figures: overhead scaled by log2(p) / log2(cores), one transfer figure
    parallel = replace(m, parallel=replace(m.parallel, fork_join_ns=900.0, barrier_ns=300.0), transfer_cycles=30.0)
    assert overhead_seconds(parallel, 2, 10, 50) == pytest.approx((10 * 900 + 50 * 300) / 3 * 1e-9)
    assert overhead_seconds(parallel, 1, 10, 50) == 0.0
    assert overhead_seconds(parallel, 1, 10, 50, loops=20) == 0.0  # no curve measured at one core: no loop cost
    assert transfer_extra_cycles(parallel, 4) == pytest.approx(30.0 - 4.0)


def test_cold_flush_exceeds_the_last_level_cache():
    mib = 1 << 20
    vm_l3 = [SysCache(1, 48 << 10, 64, 12, False), SysCache(3, 480 * mib, 64, 16, True, 2)]
    assert probeplan.cold_flush_bytes(vm_l3, 2) == 960 * mib
    small = [SysCache(1, 32 << 10, 64, 8, False), SysCache(3, 20 * mib, 64, 20, True, 8)]
    assert probeplan.cold_flush_bytes(small, 8) == 64 * mib                      # the harness's 64 MiB at least
    per_ccx = [SysCache(1, 32 << 10, 64, 8, False), SysCache(3, 16 * mib, 64, 16, True, 4)]
    assert probeplan.cold_flush_bytes(per_ccx, 64) == 2 * 16 * 16 * mib          # 16 CCX x 16 MiB, twice
    facts = {"cores": 2, "caches": [asdict(c) for c in vm_l3], "page_bytes": 4096}
    steps = {s.key: s for s in probeplan.plan(facts, probeplan.QUICK)}
    assert steps["coldstart"].args[0] == 960 * mib and steps["strided"].args[-1] == 960 * mib
    assert steps["coldstart"].args[2:] == (1, 2)                                  # cold start on every curve point
    assert [s.key for s in steps.values() if s.key.startswith("curves.")] == [
        "curves.cores", "curves.stream", "curves.overhead", "curves.transfer"]
    assert steps["curves.transfer"].args[3:] == (2,) and steps["curves.stream"].args[3:] == (1, 2)
    assert probeplan.curve_cores(6) == [1, 2, 4, 6] and probeplan.curve_cores(1) == [1]


def test_steps_repeat_until_the_last_three_runs_agree(tmp_path):
    """A fake program printing 1, 2, 1, 1.01, 1.02, 5: stable after its fifth run (1, 1.01, 1.02 within 5%)."""
    values, counter = [1.0, 2.0, 1.0, 1.01, 1.02, 5.0], tmp_path / "n"
    counter.write_text("0")
    fake = tmp_path / "fake"
    fake.write_text(f"#!/bin/sh\nn=$(cat {counter}); echo $((n + 1)) > {counter}\n"
                    f"set -- {' '.join(map(str, values))}\nshift $n\necho x=$1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    step = probeplan.Step("fake", "fake", (), runs=3, max_runs=8)
    raw = probeplan.run_plan([step], lambda _p: fake, os.environ, lambda _m: None)
    assert [r["x"] for r in raw["fake"]] == values[:5]
    counter.write_text("0")
    capped = probeplan.run_plan([replace(step, max_runs=4)], lambda _p: fake, os.environ, lambda _m: None)
    assert len(capped["fake"]) == 4                                        # never stable: stops at max_runs
    assert probeplan.raw_problems([step], {"fake": raw["fake"][:2]}) == ["fake: expected 3 to 8 run(s), found 2"]
    assert probeplan.raw_problems([step], raw) == []


def test_detect_curve_steps_on_this_host_give_a_table_that_loads(tmp_path):
    facts = probeplan.host_facts()
    caches, cores = probeplan.facts_caches(facts), int(facts["cores"])
    if cores > 8:
        pytest.skip("the table goes into an 8-core machine file")
    effort = probeplan.QUICK
    raw = detect.run_steps(tmp_path, probeplan.curve_steps(caches, cores, effort), lambda _m: None)
    table = curve_figures(raw, caches, cores, 3.0, effort)
    m = validate_machine_dict(with_curves(table), "detected curves")
    points = sorted({2 ** k for k in range(8) if 2 ** k <= cores} | {cores})
    assert m.curves.cores == tuple(points) and m.curves.figures["op_throughput_scale"][0] == 1.0
    assert m.curves.figures["clock_scale"][0] == 1.0 and "cold_start_ns" not in m.curves.figures  # no coldstart run
    clock = [run[f"clock_ns_1"] / run[f"clock_ns_{points[-1]}"] for run in raw["curves.cores"][-3:]]
    assert m.curves.figures["clock_scale"][-1] == pytest.approx(statistics.median(clock), rel=1e-3)
    last = raw["curves.stream"][-3:]
    assert 3 <= len(raw["curves.stream"]) <= effort.curve_runs
    for i, p in enumerate(points):
        bw = [run[f"gbs_{p}"] for run in last]
        assert m.curves.figures["bandwidth_gbs"][i] == pytest.approx(statistics.median(bw), rel=1e-3)
        assert m.curves.spread["bandwidth_gbs"][i] == pytest.approx((max(bw) - min(bw)) / statistics.median(bw),
                                                                    abs=1e-4)
        assert m.curves.figures["fork_join_ns"][i] > 0 and m.curves.figures["barrier_ns"][i] > 0
    if cores >= 2:
        ns = [run["other_ns_2"] for run in raw["curves.transfer"][-3:]]
        assert m.curves.figures["transfer_cycles"][0] == pytest.approx(statistics.median(ns) * 3.0, rel=1e-3)
    assert "median of the last 3 runs" in m.sources["curves"]


def test_cold_start_curve_replaces_the_depth_interpolation():
    """With curves.cold_start_ns the first region's extra cost is the curve at p (here 300 ns at 3 cores, half-way
    from 200 to 400), once per run; without it, one thread's and all cores' figures by tree depth."""
    data = with_curves({**CURVES, "cold_start_ns": [100.0, 200.0, 400.0, 0.0]})
    data["parallel"] = {"fork_join_ns": 1600.0, "barrier_ns": 750.0, "cold_start_ns": 900.0, "cold_start_one_ns": 100.0,
                        "source": "hand-made"}
    m = validate_machine_dict(data, "t")
    assert overhead_seconds(m, 3, regions=10, barriers=50) == pytest.approx((10 * 600 + 50 * 250 + 300) * 1e-9)
    assert overhead_seconds(m, 8, regions=1, barriers=0) == pytest.approx((1600 + 0) * 1e-9)   # 0 measured at 8
    without = validate_machine_dict({**data, "curves": CURVES}, "t")
    # depth at 4 of 8 cores = 2/3: 100 + (900 - 100) x 2/3
    assert overhead_seconds(without, 4, regions=1, barriers=0) == pytest.approx((800 + 100 + 800 * 2 / 3) * 1e-9)


def test_curves_that_did_not_settle_are_named():
    """A curve the model reads whose repeats spread beyond detect's 5% is named with its worst point; settled
    ones, and figures the model does not read, are not."""
    from analysis.runtime.terms.core_curves import unsettled_curves

    m = curved_machine()   # bandwidth spread at most 4%, transfer 10% at 2 cores
    assert unsettled_curves(m) == ["coherence transfer transfer_cycles (spread 10% at 2 cores)"]
    quiet = validate_machine_dict(with_curves({**CURVES, "spread": {"bandwidth_gbs": [0.01, 0.02, 0.0, 0.04],
                                                                  "shared_line_ns": [0.5, 0.5, 0.5, 0.5]}}), "t")
    assert unsettled_curves(quiet) == [] and unsettled_curves(load_machine(SHIPPED)) == []
