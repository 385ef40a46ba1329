"""Per-instance CRDs of a shared level serving groups of threads, against a brute-force per-instance LRU."""
from __future__ import annotations

from collections import Counter, OrderedDict

import numpy as np
import pytest

from analysis.hitrates.rates import predict_hit_rates
from analysis.profiles.groups import grouping_name, grouping_of, groupings_for
from analysis.profiles.private_traces import InterleaveSpec, mimic
from analysis.profiles.reuse import STORE_TAG
from analysis.profiles.sweep import compute_profiles_from
from common.errors import InputError
from instrument.trace_types import SCHED_DYNAMIC, SCHED_STATIC
from machines.model import CacheLevel, Machine, Ram
from test_coherence import random_trace
from test_private_traces import chunker


def shared_stream(info, chunks, p, interleave, seed, k, mode="iteration"):
    """The whole mimicked shared trace of p cores: tagged line ids and each access's thread."""
    parts = [(b.lines.copy(), b.core.copy()) for _, b in mimic(info, chunks, [InterleaveSpec(p, interleave, seed, k)],
                                                               mode, stores=True)]
    return np.concatenate([l for l, _ in parts]), np.concatenate([c for _, c in parts])


def brute_instance_distances(lines, threads, grouping, coherent):
    """Per instance: Counter of distances (-1: cold or coherence miss) with write-invalidate between instances."""
    stacks = [OrderedDict() for _ in range(max(grouping) + 1)]
    valid: dict[int, set] = {}
    out = [Counter() for _ in stacks]
    for raw, t in zip(lines.tolist(), threads.tolist()):
        store = bool(raw & int(STORE_TAG))
        line = raw & ~int(STORE_TAG)
        i = grouping[t]
        od = stacks[i]
        stale = coherent and line in valid and i not in valid[line]
        if line in od and not stale:
            keys = list(od)
            out[i][len(keys) - 1 - keys.index(line)] += 1
        else:
            out[i][-1] += 1
        od[line] = True
        od.move_to_end(line)
        if coherent and store:
            valid[line] = {i}
        elif line in valid:
            valid[line].add(i)
    return out


@pytest.mark.parametrize("interleave,k,coherent,sched", [("rr", 1, True, SCHED_STATIC), ("random", 2, True, SCHED_DYNAMIC),
                                                         ("rr", 3, False, SCHED_STATIC)])
def test_instance_crds_match_brute_force(interleave, k, coherent, sched):
    info, ch = random_trace(12, 40, True, sched)
    groupings = ((0, 0, 1, 1), (0, 1, 0, 1), (0, 0, 0, 1, 1, 1, 2, 2))
    ps = compute_profiles_from(info, chunker(ch, 11), [1, 4, 8], "iteration", interleave, seed=5, refs_per_turn=k,
                               coherence=coherent, groupings=groupings)
    for g in groupings:
        lines, threads = shared_stream(info, chunker(ch, 11), len(g), interleave, 5, k)
        want = brute_instance_distances(lines, threads, g, coherent)
        got = ps.instance_crds(grouping_name(g))
        assert len(got) == len(want)
        for prof, counts in zip(got, want):
            assert prof.cold == counts[-1] and prof.total == sum(counts.values())
            assert dict(zip(prof.lower.tolist(), prof.count.tolist())) == {d: n for d, n in counts.items() if d >= 0}


def level(name, lines, ways, shared=False, per=0):
    return CacheLevel(name, lines * 64, 64, ways, 4.0, 1.0, shared, "hashed" if shared else "virtual", per)


CCX = Machine("ccx", "synthetic", 8, 2.0, (level("L1", 8, 0), level("L3", 64, 0, shared=True, per=2)),
              Ram(80.0, 10.0, 40.0), 8, 256, {})


def test_groupings_follow_placement():
    with pytest.raises(InputError, match="16 threads placed close on its 8 cores"):
        grouping_of(CCX, 1, 16, "close")
    assert grouping_of(CCX, 1, 4, "close") == (0, 0, 1, 1)
    assert grouping_of(CCX, 1, 4, "spread") == (0, 1, 2, 3)
    assert grouping_of(CCX, 1, 2, "close") == (0, 0)
    assert groupings_for([CCX], [1, 2, 4], "close") == ((0, 0, 1, 1),)


def test_hit_rates_combine_the_instances_and_need_their_profiles():
    """A fully associative shared level: its hit rate is the instances' hits (brute force) over all accesses."""
    info, ch = random_trace(12, 40, True, SCHED_STATIC)
    cores = [1, 2, 4]
    ps = compute_profiles_from(info, chunker(ch, 11), cores, "iteration", "rr",
                               groupings=groupings_for([CCX], cores, "spread"))
    table = predict_hit_rates(ps, CCX, placement="spread")
    lines, threads = shared_stream(info, chunker(ch, 11), 4, "rr", 0, 1)
    want = brute_instance_distances(lines, threads, (0, 1, 2, 3), True)
    hits = sum(n for c in want for d, n in c.items() if 0 <= d < 64)
    got = table[(table["cores"] == 4) & (table["level"] == "L3")]["cumulative_hit_rate"].iloc[0]
    assert got == pytest.approx(hits / len(lines), abs=1e-12)
    with pytest.raises(InputError, match="--placement close"):
        predict_hit_rates(ps, CCX, placement="close")
