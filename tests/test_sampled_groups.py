"""Per-instance CRDs of source sampling (analysis/sampling/shards/group_shards.py).

Oracles: at rate 1 the exact sweep's per-instance CRDs (analysis.profiles.groups.GroupCrds: ReuseEngine and the
coherence Directory over instance ids); the instance stacks' drain against a brute-force LRU list per instance with
write-invalidate sets, on a hand-made log; below rate 1, the exact CRDs' totals and their hit rates at a large
capacity.
"""
from __future__ import annotations

import numpy as np
import pytest
from fake_source import fake_source_traces  # noqa: F401 (fixture)
from test_private_traces import chunker
from test_source_replay import periodic_trace, replays  # noqa: F401 (fixture)
from test_source_sampling import random_trace, same

from analysis.profiles.handouts import chunk_costs
from analysis.hitrates.sdcm import expected_hits
from analysis.profiles.groups import grouping_name
from analysis.profiles.profileset import ProfileSet
from analysis.profiles.sweep import compute_profiles_from
from analysis.sampling.shards import group_shards as G
from analysis.sampling.shards import replay as R
from analysis.sampling import source as SS
from analysis.sampling.binning import engine_bins
from analysis.sampling.shards.shards_kernel import empty_log
from instrument.trace_types import SCHED_DYNAMIC, SCHED_STATIC

CORES = [1, 2, 3, 4, 8]
GROUPINGS = ((0, 1), (0, 1, 1), (0, 0, 1, 1), (0, 1, 0, 1), (0, 1, 2, 3), (0, 0, 0, 0, 1, 1, 1, 1),
             (0, 1, 0, 1, 0, 1, 0, 1))


def sampled_groups(info, factory, cores, mode, k, coherence, sampling, groupings=GROUPINGS):
    """The source sampler's per-instance CRDs as {(grouping name, instance): profile}."""
    req = SS.ClassRequest(groupings=groupings)
    SS.source_profiles(info, factory(), cores, sampling, mode, k, 64, 0, coherence, classes=req,
                       costs=chunk_costs(info, factory, mode))
    return {(grouping_name(g), i): prof for g, crds in req.groups.items() for i, prof in enumerate(crds)}


def exact_groups(info, factory, cores, mode, k, coherence, groupings=GROUPINGS):
    """The exact sweep's per-instance CRDs, keyed as sampled_groups."""
    ps = compute_profiles_from(info, factory, cores, mode, "rr", 0, k, 64, paper_chunk=0, coherence=coherence,
                               groupings=groupings)
    return dict(ps.group_crd)


@pytest.mark.parametrize("mode", ["iteration", "paper"])
@pytest.mark.parametrize("schedule,chunk", [(SCHED_STATIC, 0), (SCHED_DYNAMIC, 2)])
@pytest.mark.parametrize("k,coherence", [(1, True), (3, True), (1, False)])
@pytest.mark.parametrize("rows", [13, 10_000])
def test_full_rate_instance_crds_equal_exact(mode, schedule, chunk, k, coherence, rows):
    """Rate 1: every instance CRD (coherence misses included) is the exact sweep's, bit for bit."""
    info, ch = random_trace(5 + rows, 40, mode == "iteration", schedule, chunk)
    factory = chunker(ch, rows)
    got = sampled_groups(info, factory, CORES, mode, k, coherence, SS.SourceSampling(1.0, seed=3))
    want = exact_groups(info, factory, CORES, mode, k, coherence)
    assert got.keys() == want.keys() and len(want) == sum(max(g) + 1 for g in GROUPINGS)
    assert [key for key in want if not same(got[key], want[key])] == []
    if coherence:
        assert sum(want[key].coherence for key in want) > 0  # the case exercises coherence between instances


def test_full_rate_instance_crds_with_replay_equal_exact(replays):  # noqa: F811 (the fixture)
    """Rate 1 on a periodic trace: copies are skipped and the instance CRDs are still the exact sweep's."""
    info, ch = periodic_trace(5, 14, 12, SCHED_STATIC, 0, 6)
    factory = chunker(ch, 97)
    groupings = ((0, 1), (0, 0, 1, 1), (0, 1, 0, 1))
    got = sampled_groups(info, factory, [1, 2, 4], "iteration", 1, True, SS.SourceSampling(1.0, seed=3), groupings)
    want = exact_groups(info, factory, [1, 2, 4], "iteration", 1, True, groupings)
    assert [key for key in want if not same(got[key], want[key])] == []
    assert sum(r.skipped for r in replays) > 0


def test_sampled_instance_crds_with_replay_equal_feeding_every_copy(monkeypatch):
    """Below rate 1: replay on and off give the same instance CRDs, bit for bit."""
    monkeypatch.setattr(R, "MIN_COPY_ROWS", 1)
    info, ch = periodic_trace(8, 40, 24, SCHED_STATIC, 0, odd_step=20)
    sampling = SS.SourceSampling(0.5, 2, window=16, length=8)
    groupings = ((0, 0, 1, 1), (0, 1, 0, 1))
    got = sampled_groups(info, chunker(ch, 131), [1, 2, 4], "iteration", 1, True, sampling, groupings)
    monkeypatch.setattr(SS, "REPLAY", False)
    want = sampled_groups(info, chunker(ch, 131), [1, 2, 4], "iteration", 1, True, sampling, groupings)
    assert [key for key in want if not same(got[key], want[key])] == []


def brute_instances(core, line, store, grouping):
    """Per instance, each access's distance (-1 cold or coherence miss) and its coherence misses: an LRU list per
    instance, a set of the instances holding a valid copy per stored line."""
    n = max(grouping) + 1
    stacks, valid = [[] for _ in range(n)], {}
    dist, coh = [[] for _ in range(n)], [0] * n
    for c, x, s in zip(core, line, store):
        e = grouping[c]
        st = stacks[e]
        d = len(st) - 1 - st.index(x) if x in st else -1
        if d >= 0 and x in valid and e not in valid[x]:
            d, coh[e] = -1, coh[e] + 1
        if x in st:
            st.remove(x)
        st.append(x)
        if s:
            valid[x] = {e}
        elif x in valid:
            valid[x].add(e)
        dist[e].append(d)
    return dist, coh


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_instance_stacks_match_brute_force(seed):
    """The drain of a log (thousands of lines, so the stacks and directory grow and renumber) gives the brute-force
    per-instance distances and coherence misses."""
    rng = np.random.default_rng(seed)
    grouping = (0, 1, 0, 2, 1, 2)
    n = 6000
    core = rng.integers(0, len(grouping), n)
    line = rng.integers(0, 300 if seed < 2 else 3000, n).astype(np.uint64)
    store = rng.random(n) < 0.3
    gs = G.GroupShards(grouping, True)
    log = empty_log(1024)
    for a in range(0, n, 1024):  # the log filled and drained in pieces, as the kernels do
        m = min(1024, n - a)
        log.core[:m], log.line[:m], log.st[:m], log.n[0] = core[a:a + m], line[a:a + m], store[a:a + m], m
        gs.drain(log)
    dist, coh = brute_instances(core.tolist(), line.tolist(), store.tolist(), grouping)
    for e in range(3):
        want = _from_distances(dist[e])
        got = gs.stacks.profile(e)
        assert (got.total, got.cold, got.coherence) == (want[0], want[1], coh[e])
        assert dict(zip(got.lower.tolist(), got.count.tolist())) == want[2]
        assert dict(zip(got.lower.tolist(), got.dist_sum.tolist())) == want[3]


def _from_distances(d: list[int]) -> tuple[int, int, dict[int, int], dict[int, int]]:
    """(total, cold, count and distance sum per engine bin, by its lower bound) of distances, -1 cold."""
    lower, _ = engine_bins()
    warm = np.array([x for x in d if x >= 0], np.int64)
    lo = lower[np.searchsorted(lower, warm, side="right") - 1]
    keys = sorted(set(lo.tolist()))
    return (len(d), len(d) - len(warm), {k: int((lo == k).sum()) for k in keys},
            {k: int(warm[lo == k].sum()) for k in keys})


def test_sampled_instance_crds_keep_totals_and_hit_rates():
    """Below rate 1: every instance CRD totals its exact one, and its hit rate in a cache of 16 lines (the trace's
    few dozen lines make one seed's sample a dozen lines: the mean over seeds) is near the exact one's."""
    info, ch = random_trace(3, 3000, True, SCHED_DYNAMIC, 4)
    factory = chunker(ch, 4096)
    groupings = ((0, 0, 1, 1), (0, 1, 0, 1))
    want = exact_groups(info, factory, [4], "iteration", 1, True, groupings)
    rate = (lambda prof: expected_hits(prof, 8, 16) / prof.total)
    errors = {key: [] for key in want}
    for seed in range(8):
        got = sampled_groups(info, factory, [4], "iteration", 1, True, SS.SourceSampling(0.25, seed=seed), groupings)
        assert got.keys() == want.keys()
        for key, w in want.items():
            assert got[key].total == w.total
            errors[key].append(rate(got[key]) - rate(w))
    assert max(abs(np.mean(e)) for e in errors.values()) < 0.03


def test_cli_sampled_profiles_carry_the_instance_crds(tmp_path, fake_source_traces):  # noqa: F811 (the fixture)
    """`pptmc profile --machines zen2-epyc-7702p --sample-rate 1` writes the exact command's tables, its per-instance
    CRDs included, for both placements."""
    import pandas as pd

    from pptmc import cli

    info, ch = random_trace(3, 30, True, SCHED_STATIC)
    trace = tmp_path / "mem.trace"
    trace.touch()
    fake_source_traces[str(trace)] = (info, ch.addr, ch.block, ch.block_instance)
    for placement in ("close", "spread"):
        common = ["profile", str(trace), "--cores", "1,2,8", "--mode", "paper", "--machines", "zen2-epyc-7702p",
                  "--placement", placement]
        assert cli.run([*common, "-o", str(tmp_path / "exact")]) == 0
        assert cli.run([*common, "--sample-rate", "1", "-o", str(tmp_path / "full")]) == 0
        for name in ("summary", "bins"):
            a, b = (pd.read_csv(tmp_path / d / f"{name}.csv") for d in ("exact", "full"))
            assert a.equals(b)
        assert len({g for g, _ in ProfileSet.load(tmp_path / "full").group_crd}) >= 1
