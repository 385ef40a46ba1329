"""The LRU cache simulator against pycachesim and a brute LRU list, and SDCM against it."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from cachesim import Cache, CacheSimulator, MainMemory

from analysis.hitrates.cachesim import LevelSim, simulate_hierarchy, simulate_stream
from analysis.hitrates.rates import predict_hit_rates
from analysis.profiles.interleave import interleave_arrays
from analysis.profiles.sweep import compute_profiles_from
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


# --- the coherent ground-truth hierarchy -------------------------------------------------------

from analysis.hitrates.cachesim import CoherentHierarchy, simulate_coherent  # noqa: E402


def coherent_counts(lines, cores, stores, caches, n_cores, batch=None):
    lines = np.asarray(lines, dtype=np.uint64)
    batch = batch or len(lines)
    parts = [(lines[i:i + batch], np.asarray(cores)[i:i + batch], np.asarray(stores)[i:i + batch])
             for i in range(0, len(lines), batch)]
    return simulate_coherent(parts, caches, n_cores)


@pytest.mark.parametrize("seed,spec", [(0, [("L1", 4, 2), ("L2", 16, 4)]),
                                       (1, [("L1", 8, 4), ("L2", 32, 8), ("L3", 64, 16)]),
                                       (2, [("L1", 64, 1), ("L2", 8, 16)])])
def test_coherent_single_core_matches_pycachesim(seed, spec):
    """One core: stores cannot invalidate anything, so every level's hits equal pycachesim's (loads)."""
    rng = np.random.default_rng(seed)
    addrs = np.concatenate([rng.integers(0, 64 * 700, 5000), np.tile(np.arange(0, 64 * 150, 16), 3),
                            np.arange(0, 64 * 4096 * 3, 64 * 97)])
    caches = tuple(level(n, s * w, w, shared=(i == 2)) for i, (n, s, w) in enumerate(spec))
    stores = rng.random(len(addrs)) < 0.4
    got = coherent_counts(addrs.astype(np.uint64) >> np.uint64(6), np.zeros(len(addrs), int), stores, caches, 1,
                          batch=777)
    assert got.hits.tolist() == pycachesim_hits(addrs, spec)
    assert got.reached[0] == len(addrs) and got.reached[1] == len(addrs) - got.hits[0]
    assert got.invalidation_misses.sum() == 0 and got.invalidated.sum() == 0


def test_coherent_without_stores_equals_hierarchical_stream():
    """Loads only: no coherence traffic, so the result is the hierarchical per-core simulation
    (with enough distinct lines to make the directory grow several times, also mid-batch)."""
    rng = np.random.default_rng(3)
    n = 300_000
    lines = np.where(rng.random(n) < 0.5, rng.integers(0, 200_000, n), rng.integers(0, 300, n)).astype(np.uint64)
    cores = rng.integers(0, 4, n)
    caches = (level("L1", 16, 4), level("L2", 64, 8), level("L3", 512, 8, shared=True))
    got = coherent_counts(lines, cores, np.zeros(n, bool), caches, 4, batch=100_000)
    want, total = simulate_stream([(lines, cores)], caches, 4, hierarchical=True)
    assert got.total == total
    assert got.hits.tolist() == [c.hits for c in want]
    assert got.reached.tolist() == [c.reached for c in want]


def brute_coherent(lines, cores, stores, spec, n_cores):
    """Pure-Python reference: per-set LRU lists, hierarchical, write-invalidate on private levels."""
    caches = {}  # (level, instance, set) -> list of lines, most recent last
    reached, hits, inval_miss, invalidated = ([0] * len(spec) for _ in range(4))
    gone = set()  # (level, core, line) removed by another core's store and not refetched since

    def where(lv, inst, x):
        sets, ways, shared = spec[lv]
        return caches.setdefault((lv, 0 if shared else inst, x % sets), []), ways

    for x, c, st in zip(lines, cores, stores):
        for lv, (sets, ways, shared) in enumerate(spec):
            reached[lv] += 1
            lst, ways = where(lv, c, x)
            if x in lst:
                lst.remove(x)
                lst.append(x)
                hits[lv] += 1
                break
            if (lv, c, x) in gone:
                inval_miss[lv] += 1
                gone.discard((lv, c, x))
            if len(lst) == ways:
                lst.pop(0)
            lst.append(x)
        if st:
            for d in range(n_cores):
                for lv, (sets, ways, shared) in enumerate(spec):
                    if d == c or shared:
                        continue
                    lst, _ = where(lv, d, x)
                    if x in lst:
                        lst.remove(x)
                        invalidated[lv] += 1
                        gone.add((lv, d, x))
    return reached, hits, inval_miss, invalidated


@pytest.mark.parametrize("seed,n_cores", [(0, 2), (1, 3), (2, 5)])
def test_invalidation_matches_brute_force(seed, n_cores):
    rng = np.random.default_rng(seed)
    n = 6000
    lines = rng.integers(0, 48, n)
    cores = rng.integers(0, n_cores, n)
    stores = rng.random(n) < 0.3
    spec = [(2, 2, False), (4, 2, False), (8, 2, True)]
    caches = tuple(level(f"L{i + 1}", s * w, w, shared=sh) for i, (s, w, sh) in enumerate(spec))
    got = coherent_counts(lines, cores, stores, caches, n_cores, batch=1000)
    reached, hits, inval_miss, invalidated = brute_coherent(lines.tolist(), cores.tolist(), stores.tolist(), spec,
                                                            n_cores)
    assert got.reached.tolist() == reached and got.hits.tolist() == hits
    assert got.invalidation_misses.tolist() == inval_miss and got.invalidated.tolist() == invalidated
    assert sum(inval_miss) > 0  # the case exercises coherence


def test_ping_pong_store_gives_one_invalidation_miss_per_turn():
    """Two cores alternately storing one line: from the third access on every access misses L1 and L2
    by invalidation; only the very first misses the shared L3."""
    n = 100
    caches = (level("L1", 8, 2), level("L2", 32, 4), level("L3", 64, 4, shared=True))
    got = coherent_counts(np.full(n, 5), np.arange(n) % 2, np.ones(n, bool), caches, 2)
    assert got.hits.tolist() == [0, 0, n - 1]
    assert got.invalidation_misses.tolist() == [n - 2, n - 2, 0]


def test_fully_associative_option_removes_conflicts():
    """Lines 0, 64, 128, ... all map to set 0 of a 64-set cache; fully associative, they all fit."""
    lines = np.tile(np.arange(0, 64 * 8, 64), 10).astype(np.uint64)
    caches = (level("L1", 64 * 2, 2),)
    sa = CoherentHierarchy(caches, 1)
    fa = CoherentHierarchy(caches, 1, fully_associative_up_to=1024)
    for sim in (sa, fa):
        sim.access(lines, np.zeros(len(lines), int), np.zeros(len(lines), bool))
    assert sa.counts.hits[0] == 0 and fa.counts.hits[0] == len(lines) - 8
    assert sa.entries == 8


def test_coherent_rejects_too_many_cores():
    with pytest.raises(Exception, match="1 to 64 cores"):
        CoherentHierarchy((level("L1", 8, 2),), 65)
    sim = CoherentHierarchy((level("L1", 8, 2),), 2)
    with pytest.raises(Exception, match="core id 2"):
        sim.access(np.arange(3), np.arange(3), np.zeros(3, bool))


# --- coherent simulation of the mimicked traces ------------------------------------------------

BIG = machine(level("L1", 4096, 0), level("L2", 8192, 0), level("L3", 16384, 0, shared=True))


@pytest.mark.parametrize("mode,interleave,k", [("iteration", "rr", 1), ("iteration", "random", 3), ("paper", "rr", 2)])
def test_coherent_simulation_misses_equal_the_profiles_cold_and_coherence_misses(mode, interleave, k):
    """With caches larger than the footprint nothing is evicted, so a private miss is a first touch
    or an invalidation: the simulator's L1 misses must equal the coherent PRDs' infinite distances
    (cold + coherence misses), found by the reuse engine's sharer sets, an independent path."""
    from test_coherence import random_trace

    info, ch = random_trace(seed=11, n_iters=120, mode_loops=mode == "iteration", schedule=SCHED_STATIC)
    cores = [1, 2, 3, 4]
    ps = compute_profiles_from(info, chunker(ch, 29), cores, mode, interleave, seed=5, refs_per_turn=k,
                               coherence=True)
    sim = simulate_hierarchy(info, chunker(ch, 31), BIG, cores, mode, interleave, seed=5, refs_per_turn=k,
                             hierarchical=True, coherent=True)
    coherence_seen = 0
    for p in cores:
        prds = [ps.prd[(p, c)] for c in range(p)]
        misses = sum(prof.cold for prof in prds)
        coherence_seen += sum(prof.coherence for prof in prds)
        l1 = sim[(sim.cores == p) & (sim.level == "L1")].iloc[0]
        assert round((1 - l1.cumulative_hit_rate) * l1.accesses) == misses
    assert coherence_seen > 0  # the trace has true sharing with stores, so the test means something
    plain = simulate_hierarchy(info, chunker(ch, 31), BIG, cores, mode, interleave, seed=5, refs_per_turn=k,
                               hierarchical=True)
    assert (plain.cumulative_hit_rate >= sim.cumulative_hit_rate - 1e-12).all()


def test_coherent_simulation_must_be_hierarchical():
    info, ch = make_trace()
    with pytest.raises(Exception, match="hierarchical"):
        simulate_hierarchy(info, chunker(ch, 7), BIG, [2], coherent=True)
