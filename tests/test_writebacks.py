"""Write-back profiles against a brute-force LRU cache with dirty bits."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from analysis.hitrates.sdcm import expected_hits
from analysis.profiles.reuse import STORE_TAG
from analysis.profiles.writebacks import WritebackTracker


def brute_writebacks(lines, stores, cap):
    """Dirty lines a fully associative LRU cache of `cap` lines evicts (lines dirty at the end are not counted)."""
    cache: OrderedDict = OrderedDict()
    out = 0
    for x, st in zip(lines.tolist(), stores.tolist()):
        if x in cache:
            cache.move_to_end(x)
            cache[x] = cache[x] or st
        else:
            cache[x] = st
            if len(cache) > cap:
                _, dirty = cache.popitem(last=False)
                out += dirty
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_writebacks_match_brute_force_for_every_capacity(seed):
    rng = np.random.default_rng(seed)
    n = 6000
    lines = np.concatenate([rng.integers(0, 120, n // 2), np.tile(np.arange(60), n // 120)]).astype(np.uint64)
    stores = rng.random(len(lines)) < 0.3
    tracker = WritebackTracker(initial_lines=16)  # small: the table grows on the way
    tagged = lines | (stores.astype(np.uint64) << np.uint64(63))
    tracker.feed(tagged[:2500])
    tracker.feed(tagged[2500:])
    starts, ends = tracker.profiles()
    for cap in (1, 2, 7, 30, 59, 60, 61, 100, 119, 200):
        got = expected_hits(starts, 0, cap) - expected_hits(ends, 0, cap)
        assert got == pytest.approx(brute_writebacks(lines, stores, cap), abs=1e-9), cap
    assert tagged.dtype == np.uint64 and int(STORE_TAG) == 1 << 63


def test_dram_write_backs_of_a_shared_last_level_match_brute_force():
    """Whole pipeline of profiles: the shared trace's dirty evictions from a fully associative last level."""
    from analysis.hitrates.dram import dram_traffic
    from analysis.hitrates.rates import predict_hit_rates
    from analysis.profiles.sweep import compute_profiles_from
    from instrument.trace_types import SCHED_STATIC
    from machines.model import CacheLevel, Machine, Ram
    from test_coherence import random_trace
    from test_groups import shared_stream
    from test_private_traces import chunker

    llc = CacheLevel("L3", 8 * 64, 64, 0, 40.0, 4.0, True, "hashed")
    machine = Machine("m", "", 8, 2.0, (CacheLevel("L1", 2 * 64, 64, 0, 4.0, 1.0, False), llc),
                      Ram(80.0, 10.0, 40.0), 8, 256, {})
    info, ch = random_trace(12, 40, True, SCHED_STATIC)
    ps = compute_profiles_from(info, chunker(ch, 11), [1, 2, 4], "iteration", "rr", writebacks=True)
    table = dram_traffic(ps, predict_hit_rates(ps, machine), machine)
    for p, got in zip(table["cores"], table["writebacks"]):
        tagged, _ = shared_stream(info, chunker(ch, 11), p, "rr", 0, 1) if p > 1 else _sequential(info, ch)
        lines, stores = tagged & ~STORE_TAG, (tagged & STORE_TAG) != 0
        assert got == pytest.approx(brute_writebacks(lines, stores, 8), abs=1e-9)
        assert got > 0


def _sequential(info, ch):
    """The one-core trace's tagged line ids (its shared trace)."""
    from test_groups import shared_stream
    from test_private_traces import chunker

    return shared_stream(info, chunker(ch, 11), 1, "rr", 0, 1)


@pytest.mark.parametrize("seed", [3, 4])
def test_the_write_back_simulator_matches_brute_force_when_fully_associative(seed):
    from analysis.hitrates.writeback_sim import simulate_writebacks
    from machines.model import CacheLevel

    rng = np.random.default_rng(seed)
    lines = rng.integers(0, 90, 5000).astype(np.uint64)
    stores = rng.random(len(lines)) < 0.25
    tagged = lines | (stores.astype(np.uint64) << np.uint64(63))
    level = CacheLevel("L3", 32 * 64, 64, 0, 40.0, 4.0, True, "hashed")
    misses, wb = simulate_writebacks([tagged[:1000], tagged[1000:]], level)
    assert wb == brute_writebacks(lines, stores, 32)


def test_sdcm_write_backs_track_a_set_associative_hashed_level():
    """Set-associative, hashed sets: the profiles read with SDCM land near the simulator (random sets)."""
    from analysis.hitrates.writeback_sim import simulate_writebacks
    from machines.model import CacheLevel

    rng = np.random.default_rng(9)
    hot = rng.integers(0, 1500, 60000)
    lines = np.where(rng.random(60000) < 0.5, hot, rng.integers(0, 400, 60000)).astype(np.uint64)
    stores = rng.random(len(lines)) < 0.3
    tagged = lines | (stores.astype(np.uint64) << np.uint64(63))
    level = CacheLevel("L3", 512 * 64, 64, 8, 40.0, 4.0, True, "hashed")
    tracker = WritebackTracker()
    tracker.feed(tagged)
    starts, ends = tracker.profiles()
    predicted = expected_hits(starts, 8, 512) - expected_hits(ends, 8, 512)
    _, simulated = simulate_writebacks([tagged], level)
    assert simulated > 1000
    assert predicted == pytest.approx(simulated, rel=0.05)


def test_runtime_reads_the_predicted_write_backs_per_access():
    """analysis.predict.writeback_shares: a dram_traffic table's write-back bytes over its accesses, per core count
    (hand-computed), and None without a table (the runtime model then takes the store-fraction estimate)."""
    import pandas as pd

    from analysis.predict import writeback_shares

    table = pd.DataFrame({"cores": [1, 2], "dram_read_bytes": [640.0, 1280.0], "dram_writeback_bytes": [320.0, 0.0],
                          "writebacks": [5, 0], "accesses": [100, 200]})
    assert writeback_shares(table) == {1: 3.2, 2: 0.0}
    assert writeback_shares(None) is None
