"""Exact stack distances against a brute-force O(N*M) reference."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.profiles.profileset import ReuseProfile
from analysis.profiles.reuse import EXACT_LIMIT, N_BINS, ReuseEngine, reuse_distances


def brute_distances(lines) -> list[int]:
    """Definition: distinct lines touched since the previous access to the same line."""
    last: dict[int, int] = {}
    out = []
    for t, x in enumerate(int(v) for v in lines):
        if x in last:
            out.append(sum(1 for lt in last.values() if lt > last[x]))
        else:
            out.append(-1)
        last[x] = t
    return out


def fed_in_pieces(lines: np.ndarray, cuts: list[int], initial: int = 16) -> np.ndarray:
    """Distances from the streaming engine fed in arbitrary pieces."""
    engine = ReuseEngine(initial_lines=initial)
    edges = [0] + sorted(set(c % (len(lines) + 1) for c in cuts)) + [len(lines)]
    parts = [engine.feed_distances(lines[a:b]) for a, b in zip(edges, edges[1:])]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def test_paper_table1_and_table2():
    w, x, y, z = 1, 2, 3, 4
    trace = np.array([w, x, w, y, x, z, z, w], dtype=np.uint64)
    assert reuse_distances(trace).tolist() == [-1, -1, 1, -1, 2, -1, 0, 3]
    engine = ReuseEngine()
    engine.feed(trace)
    prof = engine.histogram()
    assert prof.lower.tolist() == [0, 1, 2, 3] and prof.count.tolist() == [1, 1, 1, 1]
    assert (prof.cold, prof.total) == (4, 8)
    probs, p_inf = prof.probabilities()
    assert probs.tolist() == [1 / 8] * 4 and p_inf == 4 / 8


def test_paper_table3_concurrent_distances():
    u, v, w, x, y = 1, 2, 3, 4, 5
    shared = np.array([u, w, v, u, y, x, v, x, u, v], dtype=np.uint64)
    d = reuse_distances(shared)
    assert d[3] == 2 and d[8] == 3 and d[9] == 2  # dilation, overlap, shared reuse (Sec. 2.4)
    core1 = np.array([u, v, u, y, x, u, v], dtype=np.uint64)
    assert reuse_distances(core1)[2] == 1  # u's PRD at time 4


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=300), st.lists(st.integers(0, 400), max_size=5))
def test_random_traces_match_brute_force(values, cuts):
    lines = np.array(values, dtype=np.uint64)
    assert fed_in_pieces(lines, cuts).tolist() == brute_distances(values)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 2**63), min_size=1, max_size=60), st.integers(1, 8))
def test_huge_line_ids_and_repeats(ids, reps):
    lines = np.array(ids * reps, dtype=np.uint64)
    assert reuse_distances(lines).tolist() == brute_distances(lines)


@pytest.mark.parametrize("name", ["strided", "reverse_sweep", "growing", "few_lines_long"])
def test_adversarial_traces(name):
    rng = np.random.default_rng(3)
    if name == "strided":
        lines = np.concatenate([np.arange(0, 3000, 7), np.arange(0, 3000, 7)] * 3)
    elif name == "reverse_sweep":  # every reuse at the maximum distance
        a = np.arange(2500)
        lines = np.concatenate([a, a[::-1], a, a[::-1]])
    elif name == "growing":  # forces several hash-table growths mid-chunk
        lines = np.concatenate([np.arange(n) for n in (10, 100, 1000, 3000)])
    else:  # 6 lines over a long trace: the time axis is compacted many times
        lines = rng.integers(0, 6, 40000)
    lines = lines.astype(np.uint64) * np.uint64(977)
    assert fed_in_pieces(lines, [123, 4567], initial=16).tolist() == brute_distances(lines)


def test_histogram_bins_match_brute_force():
    rng = np.random.default_rng(7)
    lines = np.concatenate([rng.integers(0, 30000, 60000), np.arange(20000), np.arange(20000)]).astype(np.uint64)
    d = reuse_distances(lines)
    engine = ReuseEngine()
    for piece in np.array_split(lines, 7):
        engine.feed(piece)
    prof = engine.histogram()
    assert prof.total == len(lines) and prof.cold == int((d < 0).sum())
    warm = d[d >= 0]
    for lo, hi, n, s in zip(prof.lower, prof.upper, prof.count, prof.dist_sum):
        inside = warm[(warm >= lo) & (warm < hi)]
        assert len(inside) == n and inside.sum() == s
    assert prof.count.sum() == len(warm)
    big = prof.lower >= EXACT_LIMIT
    assert big.any() and ((prof.upper - prof.lower)[~big] == 1).all()
    # log bins: 64 per power of two, so an edge at every cache size m * 2^j with m < 64
    assert all(((hi - lo) * 64) == (1 << int(lo).bit_length() - 1) for lo, hi in zip(prof.lower[big], prof.upper[big]))


def test_memory_is_per_distinct_line_not_per_access():
    rng = np.random.default_rng(1)
    engine = ReuseEngine()
    distinct = 200_000
    for _ in range(5):
        engine.feed(rng.permutation(distinct).astype(np.uint64) + np.uint64(1 << 40))
    assert engine.distinct_lines == distinct
    assert engine.nbytes / distinct <= 64


def test_profile_from_distances_is_exact():
    prof = ReuseProfile.from_distances(np.array([-1, 0, 3, 3, -1, 7]))
    assert prof.lower.tolist() == [0, 3, 7] and prof.count.tolist() == [1, 2, 1]
    assert (prof.cold, prof.total) == (2, 6)


def lru_stack_distances(lines) -> list[int]:
    """Independent oracle: position in an explicit LRU stack (most recent first)."""
    stack: list[int] = []
    out = []
    for x in (int(v) for v in lines):
        try:
            d = stack.index(x)
            del stack[d]
        except ValueError:
            d = -1
        stack.insert(0, x)
        out.append(d)
    return out


@pytest.mark.parametrize("min_axis", [64, 1 << 16])
def test_near_far_walks_and_compaction_match_lru_stack(monkeypatch, min_axis):
    """Short reuses (same bitmap word, a few words back), far ones, and many compactions."""
    import analysis.profiles.reuse as reuse

    monkeypatch.setattr(reuse, "MIN_TIME_AXIS", min_axis)
    rng = np.random.default_rng(5)
    parts = []
    for k in range(12):  # mixes of tight loops, sweeps over 1500 lines, and random reuse
        if k % 3 == 0:
            parts.append(np.tile(np.arange(k, k + 5), 300))
        elif k % 3 == 1:
            parts.append(np.arange(1500) * 3 + k)
        else:
            parts.append(rng.integers(0, 2000, 3000))
    lines = np.concatenate(parts).astype(np.uint64)
    engine_d = fed_in_pieces(lines, [999, 12345, 20000], initial=16)
    assert engine_d.tolist() == lru_stack_distances(lines)


@pytest.mark.parametrize("piece", [1, 63, 64, 65])
def test_pieces_ending_anywhere_in_a_bitmap_word_match_lru_stack(monkeypatch, piece):
    """The tree takes a word once it is NEAR_WORDS behind now, also when a call ended on the
    word boundary (pieces of 1 and 64 references), across compactions (a 64-slot minimum axis)."""
    import analysis.profiles.reuse as reuse

    monkeypatch.setattr(reuse, "MIN_TIME_AXIS", 64)
    rng = np.random.default_rng(9)
    lines = np.concatenate([rng.integers(0, 40, 3000), np.arange(3000) % 700 + 100,
                            rng.integers(0, 3000, 3000)]).astype(np.uint64)
    engine = ReuseEngine(initial_lines=16)
    got = [engine.feed_distances(lines[s:s + piece]) for s in range(0, len(lines), piece)]
    assert np.concatenate(got).tolist() == lru_stack_distances(lines)


def test_engines_made_together_stay_apart_when_a_call_ends_at_the_axis_end(monkeypatch):
    """ReuseEngine.many's engines share blocks (their first tables are rows of one array). A call that
    ends with now at the time axis' end, followed by one that compacts, once wrote the held bitmap word
    one past the axis: into the next engine's first word here (into the allocator's memory before).
    Each engine must still give brute-force LRU distances."""
    import analysis.profiles.reuse as reuse

    monkeypatch.setattr(reuse, "MIN_TIME_AXIS", 64)
    first, second = ReuseEngine.many(2, initial_lines=16)
    early = np.arange(10, dtype=np.uint64)  # marks in the second engine's first bitmap word
    loop = np.tile(np.arange(4, dtype=np.uint64), 16)  # 64 accesses: now ends at the 64-slot axis' end
    got_second = [second.feed_distances(early)]
    got_first = [first.feed_distances(loop), first.feed_distances(loop)]  # the second call compacts first
    got_second.append(second.feed_distances(early))
    assert np.concatenate(got_first).tolist() == lru_stack_distances(np.concatenate([loop, loop]))
    assert np.concatenate(got_second).tolist() == lru_stack_distances(np.concatenate([early, early]))


def test_copy_and_relabel_continue_exactly():
    """A copied engine whose high lines are relabelled continues as if fed relabelled lines."""
    rng = np.random.default_rng(9)
    high = np.uint64(1 << 41)
    first = rng.integers(0, 300, 2000).astype(np.uint64)
    first[::3] += high  # "offset" lines of core 1
    later = rng.integers(0, 300, 2000).astype(np.uint64)
    later[::4] += np.uint64(3) * high  # the same kind of lines as core 3 sees them
    engine = ReuseEngine(initial_lines=16)
    engine.feed(first)
    twin = engine.copy()
    twin.relabel(int(high), 2 * int(high))
    relabelled = np.where(first >= high, first + np.uint64(2) * high, first)
    assert twin.feed_distances(later).tolist() == lru_stack_distances(np.concatenate([relabelled, later]))[2000:]
    assert engine.feed_distances(later).tolist() == lru_stack_distances(np.concatenate([first, later]))[2000:]


def test_tagged_ids_and_int32_distances():
    """feed(tagged=True) ignores the store tag; int32 distances equal the int64 ones."""
    from analysis.profiles.coherence import tag_stores

    rng = np.random.default_rng(3)
    lines = rng.integers(0, 500, 5000).astype(np.uint64)
    tagged = tag_stores(lines, rng.random(5000) < 0.5)
    want = brute_distances(lines)
    got = ReuseEngine().feed_distances(tagged, tagged=True, dtype=np.int32)
    assert got.dtype == np.int32 and got.tolist() == want
    a, b = ReuseEngine(), ReuseEngine()
    a.feed(tagged, tagged=True)
    b.feed(lines)
    pa, pb = a.histogram(), b.histogram()
    assert (pa.count.tolist(), pa.cold, pa.dist_sum.tolist()) == (pb.count.tolist(), pb.cold, pb.dist_sum.tolist())
    with pytest.raises(ValueError, match="int64 or int32"):
        ReuseEngine().feed_distances(lines, dtype=np.float32)


def test_engines_sharing_counters_count_both_streams():
    """Two engines given one pair of counters: their histogram is that of both streams' brute-force distances."""
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 90, 3000).astype(np.uint64), rng.integers(0, 40, 2000).astype(np.uint64)
    counters = np.zeros(N_BINS + 1, dtype=np.int64), np.zeros(N_BINS + 1, dtype=np.int64)
    first, second = ReuseEngine(16, counters=counters), ReuseEngine(16, counters=counters)
    first.feed(a[:1000])
    second.feed(b)
    first.feed(a[1000:])
    want = ReuseProfile.from_distances(np.array(brute_distances(a) + brute_distances(b)))
    got = first.histogram()
    assert got.total == want.total == 5000 and got.cold == want.cold
    assert got.count.tolist() == want.count.tolist() and got.lower.tolist() == want.lower.tolist()


def test_distances_written_to_a_given_array():
    lines = np.array([1, 2, 1, 3, 2, 1], dtype=np.uint64)
    out = np.full(6, 99, dtype=np.int32)
    got = ReuseEngine(16).feed_distances(lines, dtype=np.int32, out=out)
    assert got is out and out.tolist() == brute_distances(lines)
    with pytest.raises(ValueError, match="contiguous int32 array of 6"):
        ReuseEngine(16).feed_distances(lines, dtype=np.int32, out=np.zeros(6, dtype=np.int64))
