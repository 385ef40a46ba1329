"""`pptmc hitrates --simulate` follows the machine's topology and --placement: one instance of a shared level per
group of cores, as the ground truth of `pptmc validate` (the same simulator path). Checked against the
reuse-distance model where both are exact (fully associative, no coherence) and against the pure-Python
per-instance hierarchy of tests/test_topology_sim.py (with --coherent)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import instrument
import machines
from analysis.hitrates.cachesim import machine_hierarchy, simulate_hierarchy
from analysis.hitrates.rates import predict_hit_rates
from analysis.profiles.groups import grouping_of, groupings_for
from analysis.profiles.reuse import STORE_TAG
from analysis.profiles.sweep import compute_profiles_from
from instrument.trace_types import SCHED_DYNAMIC, SCHED_STATIC
from machines.model import CacheLevel, Machine, Ram
from pptmc.cli import run
from test_coherence import random_trace
from test_groups import shared_stream
from test_private_traces import chunker
from test_profiles import FakeReader
from test_topology_sim import Oracle


def level(name: str, sets: int, ways: int, shared: bool = False, group: int = 0) -> CacheLevel:
    """A level indexed by the virtual line (the oracle's set = line mod sets)."""
    return CacheLevel(name, sets * ways * 64, 64, ways, 4.0, 1.0, shared, "virtual", group)


def machine(*levels: CacheLevel) -> Machine:
    return Machine("m", "", 8, 2.0, tuple(levels), Ram(80.0, 10.0, 40.0), 8, 256, {})


FA_CCX = machine(level("L1", 1, 8), level("L3", 1, 48, shared=True, group=2))


@pytest.mark.parametrize("placement,sched", [("close", SCHED_STATIC), ("spread", SCHED_DYNAMIC)])
def test_grouped_simulation_equals_the_instance_crds_when_fully_associative(placement, sched):
    """Without coherence and fully associative, each instance's hits are those of its CRD: the simulator's
    own hit rate of the shared level equals the model's exactly, per thread count and placement."""
    info, ch = random_trace(12, 40, True, sched)
    cores = [1, 2, 4, 8]
    ps = compute_profiles_from(info, chunker(ch, 11), cores, "iteration", "rr", seed=2, coherence=False,
                               groupings=groupings_for([FA_CCX], cores, placement))
    pred = predict_hit_rates(ps, FA_CCX, placement=placement)
    sim = simulate_hierarchy(info, chunker(ch, 23), FA_CCX, cores, "iteration", "rr", seed=2, placement=placement)
    assert sim["level_hit_rate"].to_numpy() == pytest.approx(pred["level_hit_rate"].to_numpy(), abs=1e-12)
    whole = simulate_hierarchy(info, chunker(ch, 23), FA_CCX, [4], "iteration", "rr", seed=2)  # one instance
    assert whole[whole["level"] == "L3"]["level_hit_rate"].iloc[0] > sim.query("cores == 4 and level == 'L3'")[
        "level_hit_rate"].iloc[0]  # two or four instances hold less of what the threads share


CCX = machine(level("L1", 2, 2), level("L2", 4, 2), level("L3", 8, 4, shared=True, group=2))


def oracle_table(info, ch, m: Machine, p: int, placement: str) -> list[float]:
    """Cumulative hit rates of each level from the pure-Python hierarchy on the mimicked shared trace."""
    lines, threads = shared_stream(info, chunker(ch, 11), p, "rr", 0, 1)
    inst_of = [list(range(p)) if not lv.shared else list(grouping_of(m, i, p, placement))
               for i, lv in enumerate(m.caches)]
    oracle = Oracle([(lv.n_lines // lv.associativity, lv.associativity) for lv in m.caches], inst_of)
    for raw, t in zip(lines.tolist(), threads.tolist()):
        oracle.access(raw & ~int(STORE_TAG), t, bool(raw & int(STORE_TAG)))
    return [1.0 - (r - h) / len(lines) for r, h in zip(oracle.reached, oracle.hits)]


@pytest.mark.parametrize("placement", ["close", "spread"])
def test_cli_coherent_simulation_follows_the_placement(placement, tmp_path, monkeypatch, capsys):
    """`pptmc hitrates --simulate T --coherent --placement P`: the simulator rows are the per-instance hierarchy
    with write-invalidate between instances, threads placed by P (brute force)."""
    info, ch = random_trace(12, 40, True, SCHED_STATIC)
    path = tmp_path / "prog.trace"
    path.write_bytes(b"fake")
    monkeypatch.setattr(instrument, "open_trace", lambda p: FakeReader(info, ch), raising=False)
    monkeypatch.setattr(machines, "load_machine", lambda name: CCX)
    out = tmp_path / "prof"
    assert run(["profile", str(path), "--cores", "1,4", "--machines", "m", "--placement", placement,
                "-o", str(out)]) == 0
    assert run(["hitrates", str(out), "--machine", "m", "--placement", placement, "--simulate", str(path),
                "--coherent", "-o", str(tmp_path / "rates")]) == 0
    capsys.readouterr()
    table = pd.read_parquet(tmp_path / "rates.parquet").query("source == 'simulator' and cores == 4")
    assert table["cumulative_hit_rate"].tolist() == pytest.approx(oracle_table(info, ch, CCX, 4, placement),
                                                                  abs=1e-12)


def test_the_ground_truth_and_the_simulator_build_the_same_hierarchy():
    """machine_hierarchy is the one constructor: placement None is the topology-free hierarchy."""
    spread = machine_hierarchy(dataclasses.replace(CCX, cores=8), 4, placement="spread")
    assert spread.levels.inst[2].tolist() == [0, 1, 2, 3]
    assert machine_hierarchy(CCX, 4, placement="close").levels.inst[2].tolist() == [0, 0, 1, 1]
    assert machine_hierarchy(CCX, 4, placement=None).levels.inst[2].tolist() == [0, 0, 0, 0]
    assert np.array_equal(machine_hierarchy(CCX, 2).levels.inst[2], [0, 0])


def test_simulated_predictor_places_the_threads_on_the_l3_instances(monkeypatch):
    """The `simulated` predictor on zen2-epyc-7702p (an L3 per CCX of 4 cores) follows the options' placement. The
    trace touches a few lines on a few pages, so no level has a capacity or conflict miss, and without coherence
    an access misses the L3 only on its instance's first touch of the line: the L3's cumulative hit rate is
    1 - (sum over instances of the distinct lines their threads touch) / accesses. The instances are written by
    hand: close puts the 4 threads on CCX 0, spread on cores 0, 16, 32 and 48 (four CCXs)."""
    from pathlib import Path

    from analysis.hitrates.predictor import HitRateInputs, hit_rate_predictor

    info, ch = random_trace(12, 40, True, SCHED_STATIC)
    monkeypatch.setattr(instrument, "open_trace", lambda p: FakeReader(info, ch), raising=False)
    zen2 = machines.load_machine("zen2-epyc-7702p")
    ps = compute_profiles_from(info, chunker(ch, 11), [1, 4], "iteration", "rr", seed=0, coherence=False)
    lines, threads = shared_stream(info, chunker(ch, 11), 4, "rr", 0, 1)
    lines = lines & ~STORE_TAG
    got = {}
    for placement, instance in (("close", [0, 0, 0, 0]), ("spread", [0, 1, 2, 3])):
        table = hit_rate_predictor("simulated").predict(HitRateInputs(Path("prog.trace"), ps, placement), zen2, [4])
        got[placement] = table.query("level == 'L3'")["cumulative_hit_rate"].iloc[0]
        misses = sum(len(np.unique(lines[np.isin(threads, [t for t in range(4) if instance[t] == i])]))
                     for i in set(instance))
        assert got[placement] == pytest.approx(1 - misses / len(lines), abs=1e-12)
    assert got["spread"] < got["close"]  # four instances each fetch what the threads share
