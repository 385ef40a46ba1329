"""The LRU cache simulator against pycachesim and a brute LRU list, and SDCM against it."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from cachesim import Cache, CacheSimulator, MainMemory

from analysis.cachesim import LevelSim, simulate_hierarchy, simulate_stream
from analysis.hitrates import predict_hit_rates
from analysis.interleave import interleave_arrays
from analysis.profiles import compute_profiles_from
from instrument.trace_types import SCHED_DYNAMIC, SCHED_STATIC
from machines.model import CacheLevel, Machine, Ram
from test_private_traces import chunker, make_trace


def level(name, lines, ways, shared=False):
    return CacheLevel(name, lines * 64, 64, ways, 4.0, 1.0, shared)


def machine(*levels) -> Machine:
    return Machine("test", "synthetic", 16, 2.0, tuple(levels), Ram(80.0, 10.0, 40.0), 8, 256, {})


def pycachesim_hits(addrs, levels_spec):
    """Hits per level from pycachesim for a load-only stream (L_{i+1} sees L_i misses)."""
    mem = MainMemory()
    caches = []
    below = None
    for name, sets, ways in reversed(levels_spec):
        c = Cache(name, sets, ways, 64, "LRU", store_to=below, load_from=below)
        if below is None:
            mem.load_to(c)
            mem.store_from(c)
        caches.insert(0, c)
        below = c
    sim = CacheSimulator(caches[0], mem)
    for a in addrs:
        sim.load(int(a), length=1)
    return [c.stats()["HIT_count"] for c in caches]


@pytest.mark.parametrize("sets,ways,seed", [(8, 2, 0), (16, 4, 1), (1, 8, 2), (64, 1, 3)])
def test_single_level_matches_pycachesim(sets, ways, seed):
    rng = np.random.default_rng(seed)
    addrs = np.concatenate([rng.integers(0, 64 * sets * ways * 3, 3000), np.arange(0, 64 * 200, 8)])
    sim = LevelSim(level("L1", sets * ways, ways), 1)
    hits = sim.access(addrs.astype(np.uint64) >> np.uint64(6), np.zeros(len(addrs), dtype=np.int64))
    assert int(hits.sum()) == pycachesim_hits(addrs, [("L1", sets, ways)])[0]


def test_two_levels_hierarchical_match_pycachesim():
    rng = np.random.default_rng(5)
    addrs = np.concatenate([rng.integers(0, 64 * 512, 4000), np.tile(np.arange(0, 64 * 96, 64), 5)])
    lines = addrs.astype(np.uint64) >> np.uint64(6)
    batches = [(lines, np.zeros(len(lines), dtype=np.int64))]
    counts, total = simulate_stream(batches, (level("L1", 32, 4), level("L2", 256, 8)), 1, hierarchical=True)
    assert [c.hits for c in counts] == pycachesim_hits(addrs, [("L1", 8, 4), ("L2", 32, 8)])
    assert counts[1].reached == total - counts[0].hits


def brute_lru_hits(lines, inst, cap):
    caches: dict[int, OrderedDict] = {}
    out = []
    for x, c in zip(lines.tolist(), inst.tolist()):
        od = caches.setdefault(c, OrderedDict())
        out.append(x in od)
        if x in od:
            od.move_to_end(x)
        else:
            od[x] = True
            if len(od) > cap:
                od.popitem(last=False)
    return out


@pytest.mark.parametrize("cap", [1, 3, 17, 64])
def test_fully_associative_matches_brute_lru(cap):
    rng = np.random.default_rng(cap)
    lines = rng.integers(0, 100, 5000).astype(np.uint64)
    inst = rng.integers(0, 3, 5000)
    sim = LevelSim(level("L", cap, 0), 3)
    got = np.concatenate([sim.access(lines[:1234], inst[:1234]), sim.access(lines[1234:], inst[1234:])])
    assert got.tolist() == brute_lru_hits(lines, inst, cap)


FA = machine(level("L1", 8, 0), level("L2", 32, 0), level("L3", 96, 0, shared=True))


@pytest.mark.parametrize("mode,interleave,k,sched", [("iteration", "rr", 1, SCHED_STATIC),
                                                     ("iteration", "random", 3, SCHED_DYNAMIC),
                                                     ("paper", "rr", 2, SCHED_STATIC)])
def test_sdcm_equals_simulator_for_fully_associative(mode, interleave, k, sched):
    info, ch = make_trace(trip=150, schedule=sched, n_loops=3, seed=4)
    cores = [1, 2, 3, 4, 8]
    ps = compute_profiles_from(info, chunker(ch, 41), cores, mode, interleave, seed=9, refs_per_turn=k)
    pred = predict_hit_rates(ps, FA)
    sim = simulate_hierarchy(info, chunker(ch, 67), FA, cores, mode, interleave, seed=9, refs_per_turn=k)
    assert pred["level_hit_rate"].to_numpy() == pytest.approx(sim["level_hit_rate"].to_numpy(), abs=1e-12)
    private = pred["level"] != "L3"  # nested private levels: cumulative agrees too
    assert pred["cumulative_hit_rate"][private].to_numpy() == pytest.approx(
        sim["cumulative_hit_rate"][private].to_numpy(), abs=1e-12)
    assert (pred["accesses"] == sim["accesses"]).all()


def test_simulator_counts_true_sharing():
    """Two cores reading the same 4 lines: the shared level sees them once (true sharing)."""
    same = np.arange(4, dtype=np.uint64)
    lines, who = interleave_arrays([np.tile(same, 3), np.tile(same, 3)], "rr")
    counts, total = simulate_stream([(lines, who)], (level("L1", 2, 0), level("L3", 8, 0, shared=True)), 2)
    assert total == 24 and counts[1].own_hits == 24 - 4  # only the first touch of each line misses


def test_bad_machine():
    with pytest.raises(Exception, match="multiple of associativity"):
        LevelSim(level("L1", 10, 4), 1)
