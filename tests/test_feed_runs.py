"""ReuseEngine.feed_runs (a private trace following the sequential one within its unbroken
stretches) and the tables it needs (LineIndex.neighbours, private_traces.core_segments),
against brute-force stack distances and plain feeding."""
from __future__ import annotations

import numpy as np
import pytest

from analysis.profiles.line_index import LineIndex
from analysis.profiles.private_traces import ALL_CORES, PreparedChunk, core_segments
from analysis.profiles.reuse import LeadTrace, ReuseEngine
from tests.test_reuse import brute_distances
from tests.test_reuse_repeats import OFFSET, periodic_trace

TAG = np.uint64(1 << 63)


def sequential_trace(rng: np.random.Generator, n: int) -> np.ndarray:
    """Dense ids (first-touch order) of a mix of periodic windows, strides and random lines."""
    kind = int(rng.integers(3))
    if kind == 0:
        raw = periodic_trace(rng, n)
    elif kind == 1:
        raw = (np.arange(n) * int(rng.integers(1, 9)) % int(rng.integers(5, 400))).astype(np.uint64)
    else:
        raw = rng.integers(0, int(rng.integers(2, 300)), n).astype(np.uint64)
    return LineIndex().number(raw, None, 0, 0, neighbours=False)[0]


def stretches(rng: np.random.Generator, n: int) -> list[tuple[int, int]]:
    """A private trace's rows: some of the stretches between random cuts, in order."""
    cuts = np.unique(rng.integers(1, n, int(rng.integers(0, 12)))) if n > 1 else np.zeros(0, dtype=np.int64)
    edges = [0, *cuts.tolist(), n]
    return [(a, b) for a, b in zip(edges, edges[1:]) if rng.random() < 0.7]


@pytest.mark.parametrize("seed", range(60))
def test_feed_runs_equals_plain_feeding_and_brute_force(seed):
    rng = np.random.default_rng(seed)
    seq = sequential_trace(rng, int(rng.integers(1, 2500)))
    tagged = seed % 3 == 0
    if tagged:  # store tags on the lead's ids are ignored like the engine's
        seq = seq | (rng.random(len(seq)) < 0.3).astype(np.uint64) << np.uint64(63)
    ids, prev, nxt = LineIndex().number(seq, None, 0, 0)
    assert ids.tolist() == seq.tolist()  # the same numbering: ids are already dense, tags kept
    lead = LeadTrace(ReuseEngine().feed_distances(seq, tagged=True, dtype=np.int32), prev, nxt)
    # core 1's stack lines carry the per-core offset: one to one with the lead's
    stack = rng.random(int((seq & ~TAG).max()) + 1) < 0.3
    core_ids = seq + np.uint64(OFFSET) * stack[(seq & ~TAG).astype(np.int64)].astype(np.uint64)
    kept = stretches(rng, len(seq))
    plain, follow = ReuseEngine(), ReuseEngine()
    got, want = [], []
    for group in np.array_split(np.arange(len(kept)), int(rng.integers(1, 4))):  # several calls
        segs = [kept[k] for k in group]
        lines = np.concatenate([core_ids[a:b] for a, b in segs]) if segs else np.zeros(0, dtype=np.uint64)
        rows = np.array([a for a, _ in segs], dtype=np.int64)
        breaks = np.concatenate([[0], np.cumsum([b - a for a, b in segs])]).astype(np.int64)
        want.append(plain.feed_distances(lines, tagged=tagged, dtype=np.int32))
        got.append(follow.feed_runs(lines, lead, rows, breaks, tagged=tagged))
    private = np.concatenate([core_ids[a:b] for a, b in kept]) if kept else np.zeros(0, dtype=np.uint64)
    assert np.concatenate(got).tolist() == brute_distances(private & ~TAG)
    assert np.concatenate(got).tolist() == np.concatenate(want).tolist()
    a, b = plain.histogram(), follow.histogram()
    assert (a.count.tolist(), a.dist_sum.tolist(), a.cold, a.total) == \
        (b.count.tolist(), b.dist_sum.tolist(), b.cold, b.total)
    more = core_ids[rng.integers(0, len(seq), 300)]  # the stack order after following is exact
    assert plain.feed_distances(more, tagged=tagged).tolist() == follow.feed_distances(more, tagged=tagged).tolist()


def test_feed_runs_feeds_only_first_and_last_touches_of_a_reuse_heavy_stretch():
    """A segment of 40 sweeps over 25 lines costs the engine its 25 first touches, not 1000 (the
    last touches are retimed), and leaves the stack in the order the plain feed leaves it."""
    seq = np.tile(np.arange(25, dtype=np.uint64), 40)
    lead = LeadTrace(ReuseEngine().feed_distances(seq, dtype=np.int32), *LineIndex().number(seq, None, 0, 0)[1:])
    engine = ReuseEngine()
    out = engine.feed_runs(seq, lead, np.array([0]), np.array([0, len(seq)]))
    assert out.tolist() == brute_distances(seq)
    assert engine._state[0] == 25  # the engine's clock: accesses it was fed
    plain = ReuseEngine()
    plain.feed(seq)
    after = np.array([3, 24, 0, 7, 7, 12], dtype=np.uint64)
    assert engine.feed_distances(after).tolist() == plain.feed_distances(after).tolist() == [21, 1, 24, 19, 0, 15]


def test_feed_runs_rejects_breaks_that_do_not_bound_the_accesses():
    seq = np.arange(4, dtype=np.uint64)
    lead = LeadTrace(np.full(4, -1, dtype=np.int32), *LineIndex().number(seq, None, 0, 0)[1:])
    with pytest.raises(ValueError, match="breaks"):
        ReuseEngine().feed_runs(seq, lead, np.array([0]), np.array([0, 3]))


def test_number_gives_first_touch_ids_store_tags_and_neighbours_within_each_chunk():
    """LineIndex.number against a dict numbering and brute-force neighbours: addresses of one
    line share an id, ids follow first touches across chunks (and table growth: 16 initial
    slots for up to 300 lines), stores carry the tag, and prev/next stay within a chunk."""
    rng = np.random.default_rng(3)
    index, numbering = LineIndex(initial_lines=16), {}
    at = 0
    for n in (50, 0, 80, 900, 30):
        addr = rng.integers(0, 300 * 64, n).astype(np.uint64)
        is_store = rng.random(n) < 0.3
        ids, prev, nxt = index.number(addr, is_store, 6, at)
        lines = (addr >> np.uint64(6)).tolist()
        want = [numbering.setdefault(line, len(numbering)) for line in lines]
        assert (ids & ~TAG).tolist() == want
        assert ((ids & TAG) != 0).tolist() == is_store.tolist()
        assert prev.tolist() == [max((j for j in range(i) if lines[j] == lines[i]), default=-1) for i in range(n)]
        assert nxt.tolist() == [min((j for j in range(i + 1, n) if lines[j] == lines[i]), default=n)
                                for i in range(n)]
        at += n + (7 if n == 80 else 0)  # a skipped stretch of the trace is allowed
    assert index.count == len(numbering)
    ids, prev, nxt = index.number(addr, None, 6, at, neighbours=False)  # tags only from is_store
    assert ids.tolist() == [numbering[int(a) >> 6] for a in addr] and prev is None and nxt is None
    with pytest.raises(ValueError, match="before the end"):
        index.number(addr, None, 6, 0)


def test_core_segments_merge_adjacent_runs_in_row_order():
    starts = np.array([0, 3, 5, 9, 10, 14], dtype=np.int64)  # five runs
    prep = PreparedChunk(np.zeros(14, dtype=np.uint64), np.zeros(0, dtype=np.int64), starts,
                         np.zeros(14, dtype=np.int64), np.zeros(14, dtype=np.int64), offsets=False)
    run_core = np.array([0, 0, 1, ALL_CORES, 0], dtype=np.int64)
    (rows0, breaks0), (rows1, breaks1) = core_segments(prep, run_core, 2)
    assert rows0.tolist() == [0, 9] and breaks0.tolist() == [0, 5, 10]  # rows 0-4, then 9-13
    assert rows1.tolist() == [5] and breaks1.tolist() == [0, 5]  # rows 5-9 (its run and the shared one)
    whole = core_segments(prep, np.array([1] * 5, dtype=np.int64), 2)
    assert whole[0][1].tolist() == [0] and whole[1][0].tolist() == [0] and whole[1][1].tolist() == [0, 14]


def column_walk_trace(seed: int):
    """gramschmidt-like: loop instances whose trip counts shrink (no two alike, so no mirrors or
    replays), each iteration walking a column (lines reused by the next iterations) and a shared
    vector, with stack accesses and random stores."""
    from instrument.trace_types import NO_LOOP, SCHED_STATIC, BlockInfo, LoopInstance
    from tests.test_private_traces import HEAP, SHARED, STACK, rows_to_trace

    blocks = {0: BlockInfo(0, "OUT__1", "entry", False), 1: BlockInfo(1, "OUT__1", "for.body", False)}
    rows, loops = [], []
    for lp in range(8):
        trip = 64 - 4 * lp
        loops.append(LoopInstance(lp, 0, trip, SCHED_STATIC, 0))
        rows.append((STACK, 0, NO_LOOP, -1, True))
        for it in range(trip):
            j = it + lp
            for i in range(6):
                rows.append((HEAP + 256 * i + 8 * j, 1, lp, it, False))
                rows.append((SHARED + 64 * i, 1, lp, it, False))
            rows.append((STACK - 64, 1, lp, it, True))
    info, chunk = rows_to_trace(rows, blocks, loops)
    chunk.is_store[:] = np.random.default_rng(seed).random(len(chunk)) < 0.2
    return info, chunk


@pytest.mark.parametrize("seed", range(3))
def test_sweep_that_follows_the_one_core_trace_equals_each_core_count_alone(seed, monkeypatch):
    """A sweep with one core follows it (feed_runs); each p > 1 alone does not: same profiles,
    coherence misses included, and without coherence the same as the plain mimicked traces."""
    import analysis.profiles.reuse as reuse
    from analysis.profiles.sweep import compute_profiles_from
    from tests.test_private_traces import chunker
    from tests.test_profiles import same, straightforward_profiles

    planned = []
    plan = reuse.plan_runs

    def counting_plan(segments, *args):
        fed = plan(segments, *args)
        planned.append((fed, len(segments.src)))
        return fed

    monkeypatch.setattr(reuse, "plan_runs", counting_plan)
    info, chunk = column_walk_trace(seed)
    cores = [1, 2, 3, 4, 8]
    for coherence in (True, False):
        sweep = compute_profiles_from(info, chunker(chunk, 997), cores, coherence=coherence)
        for p in cores[1:]:
            alone = compute_profiles_from(info, chunker(chunk, 997), [p], coherence=coherence)
            assert all(same(sweep.prd[(p, c)], alone.prd[(p, c)]) for c in range(p))
            assert same(sweep.crd[p], alone.crd[p])
    ref = straightforward_profiles(info, chunker(chunk, 53), cores, "iteration", "rr", 0, 1)
    for p in cores:
        assert all(same(sweep.prd[(p, c)], ref[p][0][c]) for c in range(p)) and same(sweep.crd[p], ref[p][1])
    assert sweep.prd[(8, 3)].coherence == 0 and \
        sum(compute_profiles_from(info, chunker(chunk, 997), cores).prd[(p, c)].coherence
            for p in cores[1:] for c in range(p)) > 0  # the stores made coherence misses to check
    fed, total = map(sum, zip(*planned))
    assert fed < 0.6 * total  # the stretches' reuses did not reach the engines


def test_core_counts_without_one_follow_a_hidden_one_core_task(monkeypatch):
    """With three or more counts p > 1 and no 1, a one-core task is added for them to follow
    (with_lead); its profiles are not returned, and the others equal the plain mimicked traces'."""
    import analysis.profiles.reuse as reuse
    from analysis.profiles.sweep import SweepSettings, compute_profiles_from, profile_configs, with_lead
    from tests.test_private_traces import chunker
    from tests.test_profiles import same, straightforward_profiles

    info, chunk = column_walk_trace(0)
    assert with_lead(info, [2, 3, 4], "iteration", 64) == [2, 3, 4, 1]
    assert with_lead(info, [1, 2, 3, 4], "iteration", 64) == [1, 2, 3, 4]
    assert with_lead(info, [8, 16], "iteration", 64) == [8, 16]  # two followers: not worth it
    assert with_lead(info, [2, 3, 4], "paper", 64) == [2, 3, 4]  # paper mode offsets every line
    assert with_lead(info, [2, 3, 4], "iteration", 8192) == [2, 3, 4]  # a line may be part stack
    followed = []
    plan = reuse.plan_runs
    monkeypatch.setattr(reuse, "plan_runs", lambda segments, *a: followed.append(len(segments.src)) or plan(segments, *a))
    cores = [2, 3, 4]
    assert len(profile_configs(info, chunker(chunk, 997), cores, SweepSettings("iteration"))) == 3  # one per count
    sweep = compute_profiles_from(info, chunker(chunk, 997), cores, coherence=False)
    assert followed and sorted(sweep.crd) == cores and {p for p, _ in sweep.prd} == set(cores)
    ref = straightforward_profiles(info, chunker(chunk, 53), cores, "iteration", "rr", 0, 1)
    for p in cores:
        assert all(same(sweep.prd[(p, c)], ref[p][0][c]) for c in range(p)) and same(sweep.crd[p], ref[p][1])
