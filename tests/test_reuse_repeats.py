"""Periodic traces (windows repeated whole or in part, as streaming loops give), with stale
flags and sharer sets; dense slots and dense line ids. Against brute-force references (no
engine involved in the oracles)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.profiles.coherence import STORE_TAG
from analysis.profiles.line_index import LineIndex
from analysis.profiles.reuse import ReuseEngine
from tests.test_reuse import brute_distances

OFFSET = 1 << 41  # per-core offset of line ids (private_traces: 1 << (OFFSET_BITS - 6))


def periodic_trace(rng: np.random.Generator, n: int, tags: bool = False) -> np.ndarray:
    """Windows repeated whole or in part, some copies broken, with random accesses between."""
    out: list[np.ndarray] = []
    while sum(map(len, out)) < n:
        w = int(rng.integers(1, 70))
        window = rng.integers(0, int(rng.integers(1, 150)), w).astype(np.uint64)
        if tags:
            window |= (rng.random(w) < 0.3).astype(np.uint64) << np.uint64(63)
        seq = np.tile(window, int(rng.integers(1, 14)))
        if rng.random() < 0.3:
            seq = seq[:int(rng.integers(0, len(seq) + 1))]
        if rng.random() < 0.2 and len(seq):
            seq = seq.copy()
            seq[int(rng.integers(len(seq)))] = np.uint64(rng.integers(0, 10))
        out.append(seq)
        if rng.random() < 0.3:
            out.append(rng.integers(0, 3000, int(rng.integers(1, 40))).astype(np.uint64))
    return np.concatenate(out)[:n]


def pieces(n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    cuts = sorted(set(int(c) for c in rng.integers(0, n + 1, 3)))
    edges = [0] + cuts + [n]
    return list(zip(edges, edges[1:]))


def brute_stale(lines, stale) -> list[int]:
    """Distances where a stale access to a line seen before is a coherence miss (-1)."""
    plain = brute_distances(lines)
    return [-1 if s and d >= 0 else d for d, s in zip(plain, stale)]


def brute_sharer_events(lines, pattern) -> list[int]:
    """Write-invalidate walk: indices of accesses whose core lost its copy to another's store."""
    holders: dict[int, set[int] | None] = {}  # None: never stored, valid wherever touched
    events = []
    for i, raw in enumerate(int(v) for v in lines):
        line, store, core = raw & ~(1 << 63), bool(raw >> 63), int(pattern[i % len(pattern)])
        if line in holders and holders[line] is not None and core not in holders[line]:
            events.append(i)
        if store:
            holders[line] = {core}
        elif line in holders and holders[line] is not None:
            holders[line].add(core)
        elif line not in holders:
            holders[line] = None
    return events


@pytest.mark.parametrize("seed", range(40))
def test_periodic_traces_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    lines = periodic_trace(rng, int(rng.integers(50, 4000)))
    engine = ReuseEngine(initial_lines=16)
    engine._min_axis = 64  # frequent compactions
    got = np.concatenate([engine.feed_distances(lines[a:b]) for a, b in pieces(len(lines), rng)])
    assert got.tolist() == brute_distances(lines)
    prof = engine.histogram()
    want = np.array(brute_distances(lines))
    assert prof.cold == int((want < 0).sum()) and int(prof.count.sum()) == int((want >= 0).sum())


@pytest.mark.parametrize("seed", range(25))
def test_periodic_traces_with_stale_flags_match_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    lines = periodic_trace(rng, int(rng.integers(50, 3000)))
    period = int(rng.integers(1, 9))  # stale flags that repeat with the windows, sometimes
    stale = np.tile(rng.random(period) < 0.3, len(lines) // period + 1)[:len(lines)]
    stale[rng.random(len(lines)) < 0.01] ^= True
    engine = ReuseEngine(initial_lines=16)
    got = np.concatenate([engine.feed_distances(lines[a:b], stale=stale[a:b])
                          for a, b in pieces(len(lines), rng)])
    want = brute_stale(lines, stale)
    assert got.tolist() == want
    assert engine.coherence_misses == sum(1 for d, s in zip(brute_distances(lines), stale) if s and d >= 0)


@pytest.mark.parametrize("seed", range(25))
def test_periodic_traces_keep_sharer_sets_exact(seed):
    rng = np.random.default_rng(200 + seed)
    cores = int(rng.integers(1, 5))
    pattern = np.repeat(np.arange(cores), int(rng.integers(1, 3)))
    lines = periodic_trace(rng, int(rng.integers(50, 3000)), tags=True)
    engine = ReuseEngine(initial_lines=16, sharer_cores=cores)
    events, at = [], 0
    for _, b in pieces(len(lines), rng):
        b = at + (b - at) // len(pattern) * len(pattern)  # each piece starts a turn of the pattern
        if b > at:
            events += (engine.feed_shared(lines[at:b], pattern) + at).tolist()
            at = b
    assert events == brute_sharer_events(lines[:at], pattern)
    assert engine.histogram().total == at


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.booleans()), max_size=400), st.integers(0, 400))
def test_dense_slots_match_hashed_slots(accesses, reserve):
    ids = np.array([v + (OFFSET if far else 0) for v, far in accesses], dtype=np.uint64)
    engine = ReuseEngine(initial_lines=16)
    engine.reserve_dense(reserve)  # ids below it dense, the others (and the offset ones) hashed
    assert engine.feed_distances(ids).tolist() == brute_distances(ids)
    assert engine.holds(ids).all() and not engine.holds(np.array([1000, OFFSET + 1000], dtype=np.uint64)).any()


def test_dense_engine_relabels_and_grows_exactly():
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 500, 3000).astype(np.uint64)
    ids[rng.random(3000) < 0.2] += np.uint64(OFFSET)
    engine = ReuseEngine(initial_lines=16)
    engine.reserve_dense(100)
    first = engine.feed_distances(ids[:1500])
    twin = engine.copy()
    twin.relabel(OFFSET, OFFSET)  # now core 2's: its offset ids move one bank up
    back = twin.copy()
    back.relabel(2 * OFFSET, -OFFSET)  # and back to core 1's bank: a move down is allowed too
    engine.reserve_dense(500)
    rest = engine.feed_distances(ids[1500:])
    moved = ids[1500:].copy()
    moved[moved >= OFFSET] += np.uint64(OFFSET)
    assert np.concatenate([first, rest]).tolist() == brute_distances(ids)
    assert twin.feed_distances(moved).tolist() == rest.tolist()
    assert back.feed_distances(ids[1500:]).tolist() == rest.tolist()
    with pytest.raises(ValueError):
        engine.relabel(10, 5)  # would move dense ids


def test_line_index_numbers_in_first_touch_order_and_keeps_tags():
    index = LineIndex(initial_lines=16)

    def ids(lines: np.ndarray) -> list[int]:
        return index.number(lines, None, 0, 0, neighbours=False)[0].tolist()

    lines = np.array([70, 5, 70, 1 << 40, 5, 9], dtype=np.uint64)
    lines[2] |= STORE_TAG
    assert ids(lines) == [0, 1, int(STORE_TAG), 2, 1, 3]
    many = np.random.default_rng(3).integers(0, 1 << 45, 20000).astype(np.uint64)
    got = ids(many)
    _, first = np.unique(many, return_index=True)
    order = np.argsort(first)  # the distinct lines in order of first touch
    want = {int(many[first[k]]): 4 + rank for rank, k in enumerate(order)}
    assert got == [want[int(v)] for v in many] and index.count == 4 + len(first)
    assert ids(np.array([9, 70], dtype=np.uint64)) == [3, 0]  # the same ids later
