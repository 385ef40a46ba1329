"""Interleaving (Algorithm 2) against a direct reference implementation."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.profiles.interleave import Interleaver, interleave_arrays, interleave_streams
from common.errors import InputError


def reference_rr(private: list[list[int]], k: int) -> tuple[list[int], list[int]]:
    """Algorithm 2, round-robin: visit cores in order, each gives up to k refs, skip finished ones."""
    pos = [0] * len(private)
    out, who = [], []
    while any(p < len(t) for p, t in zip(pos, private)):
        for c, t in enumerate(private):
            take = t[pos[c]:pos[c] + k]
            out += take
            who += [c] * len(take)
            pos[c] += len(take)
    return out, who


def split_stream(arr: list[int], cuts: list[int]):
    """The same private trace delivered in arbitrary pieces (empty pieces never appear)."""
    edges = [0] + sorted(set(c % (len(arr) + 1) for c in cuts)) + [len(arr)]
    return iter([np.array(arr[a:b], dtype=np.uint64) for a, b in zip(edges, edges[1:]) if b > a])


def run(private, strategy, seed, k, cuts):
    parts = list(interleave_streams([split_stream(t, cuts) for t in private], strategy, seed, k))
    if not parts:
        return [], []
    return np.concatenate([p[0] for p in parts]).tolist(), np.concatenate([p[1] for p in parts]).tolist()


traces = st.lists(st.lists(st.integers(0, 1000), max_size=40), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(traces, st.integers(1, 5), st.lists(st.integers(0, 50), max_size=4))
def test_round_robin_matches_reference(private, k, cuts):
    assert run(private, "rr", 0, k, cuts) == reference_rr(private, k)


@settings(max_examples=100, deadline=None)
@given(traces, st.integers(1, 4), st.integers(0, 10**6), st.lists(st.integers(0, 50), max_size=4))
def test_random_keeps_each_core_in_order_and_ignores_chunking(private, k, seed, cuts):
    lines, who = run(private, "random", seed, k, cuts)
    for c, t in enumerate(private):
        assert [x for x, w in zip(lines, who) if w == c] == t
    assert (lines, who) == run(private, "random", seed, k, [])


def test_random_is_seeded_and_roughly_uniform():
    private = [np.zeros(20000, dtype=np.uint64) + c for c in range(4)]
    a = interleave_arrays(private, "random", seed=1)
    assert (a[1] == interleave_arrays(private, "random", seed=1)[1]).all()
    assert not (a[1] == interleave_arrays(private, "random", seed=2)[1]).all()
    first = a[1][:40000]  # all cores still active: each gets about a quarter
    assert np.abs(np.bincount(first, minlength=4) / 40000 - 0.25).max() < 0.02


def test_paper_figure4_two_core_round_robin():
    core0, core1 = [10, 11, 12], [20, 21, 22, 23, 24]
    lines, who = interleave_arrays([np.array(core0), np.array(core1)], "rr")
    assert lines.tolist() == [10, 20, 11, 21, 12, 22, 23, 24]
    assert who.tolist() == [0, 1, 0, 1, 0, 1, 1, 1]


def test_streams_are_pulled_lazily():
    """A long first core must not be buffered while the second core's stream is consulted."""
    pulled = []

    def gen(c, n):
        for i in range(n):
            pulled.append(c)
            yield np.full(10, c, dtype=np.uint64)

    batches = interleave_streams([gen(0, 1000), gen(1, 1000)], "rr")
    next(batches)
    assert len(pulled) <= 4


def test_bad_options():
    with pytest.raises(InputError, match="--interleave"):
        list(interleave_streams([iter([])], "zigzag"))
    with pytest.raises(InputError, match="--refs-per-turn"):
        list(interleave_streams([iter([])], "rr", refs_per_turn=0))


@pytest.mark.parametrize("strategy", ["rr", "random"])
def test_spilling_lanes_to_disk_changes_nothing(strategy, tmp_path):
    """Static schedules push core 0's references long before core 1's: a tiny budget forces spills."""
    rng = np.random.default_rng(0)
    private = [rng.integers(0, 1 << 40, n).astype(np.uint64) for n in (5000, 3000, 4000)]
    expect = interleave_arrays(private, strategy, seed=3, refs_per_turn=2)
    itl = Interleaver(3, strategy, seed=3, refs_per_turn=2, memory_budget=4096, spill_dir=tmp_path)
    got = []
    for c in range(3):  # the whole of core 0, then core 1, then core 2, as in a sequential trace
        for piece in np.array_split(private[c], 17):
            itl.push(c, piece)
            got += list(itl.drain())
        assert c == 2 or itl.lanes[0].disk_items or itl.lanes[0].mem_items * 8 <= 4096
    spilled = itl.lanes[0].disk_items
    itl.close_all()
    got += list(itl.drain())
    assert spilled > 0 and itl.finished
    assert np.concatenate([g.lines for g in got]).tolist() == expect[0].tolist()
    assert np.concatenate([g.core for g in got]).tolist() == expect[1].tolist()


def test_lanes_follow_the_pushes_in_memory_and_spilled(tmp_path):
    """Lanes (values beside the interleaved references) give back each core's values in push order."""
    from analysis.profiles.interleave import Lanes

    rng = np.random.default_rng(0)
    pushes = [(int(rng.integers(0, 3)), rng.integers(-1, 1 << 20, int(rng.integers(1, 50))).astype(np.int32))
              for _ in range(60)]
    want = {c: np.concatenate([v for cc, v in pushes if cc == c]).tolist() for c in range(3)}
    for budget in (1 << 20, 64):
        lanes = Lanes(3, np.int32, budget, tmp_path)
        for c, v in pushes:
            lanes.push(c, v)
        spilled = sum(ln.disk_items for ln in lanes.lanes)
        assert (spilled > 0) == (budget == 64)
        got = {c: [] for c in range(3)}
        for c in (0, 1, 2, 1, 0, 2):
            n = len(want[c]) // 2 if not got[c] else len(want[c]) - len(got[c])
            got[c] += lanes.take(c, n).tolist()
        assert got == want
        assert lanes.take(0, 0).tolist() == []


def test_memory_budget_default_and_override(monkeypatch):
    from analysis.profiles.interleave import BUDGET_ENV, default_memory_budget, parse_budget

    assert parse_budget("256M", "x") == 256 << 20 and parse_budget("1g", "x") == 1 << 30
    assert parse_budget("4096", "x") == 4096 and parse_budget("2KB", "x") == 2048
    for bad in ("", "-1", "lots", "0"):
        with pytest.raises(InputError, match="positive byte count"):
            parse_budget(bad, "x")
    monkeypatch.setenv(BUDGET_ENV, "300M")
    assert default_memory_budget() == 300 << 20 and Interleaver(2).budget == 300 << 20
    monkeypatch.setenv(BUDGET_ENV, "plenty")
    with pytest.raises(InputError, match="PPTMC_MEMORY_BUDGET"):
        Interleaver(2)
    monkeypatch.delenv(BUDGET_ENV)
    assert 128 << 20 <= default_memory_budget() <= 1 << 30


def test_pushed_arrays_are_copied_only_when_they_pin_much_more_memory():
    """Interleaver.push keeps an array unless it is a view of under half of its buffer: plain
    arrays, large views and numba-made arrays are kept; small views of an array or of bytes are copied."""
    import numba

    from analysis.profiles.interleave import pins_much

    a = np.arange(100, dtype=np.uint64)
    assert not pins_much(a) and not pins_much(a[:50]) and pins_much(a[:49])
    raw = np.frombuffer(a.tobytes(), dtype=np.uint64)
    assert not pins_much(raw) and pins_much(raw[:10])
    made = numba.njit(lambda n: np.arange(n))(30)  # a view of its whole numba buffer
    assert made.base is not None and not pins_much(made) and pins_much(made[:10])


@pytest.mark.parametrize("k", [1, 3])
def test_reused_layout_buffer_gives_the_same_batches_read_one_at_a_time(k):
    """Interleaver(reuse=True) writes each Batch's layout into one buffer and ends Batches where
    pushed arrays end: copied as drained, the shared trace is the reference one."""
    rng = np.random.default_rng(1)
    private = [rng.integers(0, 1 << 40, n).astype(np.uint64) for n in (300_000, 290_000, 310_000, 5)]
    expect = interleave_arrays(private, "rr", refs_per_turn=k)
    itl = Interleaver(4, "rr", refs_per_turn=k, reuse=True)
    got, cores = [], []
    pieces = [[a.copy() for a in np.array_split(private[c], 2)] if c % 2 else [private[c]] for c in range(4)]
    for c in range(4):
        for piece in pieces[c]:
            itl.push(c, piece)
    itl.close_all()
    for b in itl.drain():
        got.append(b.lines.copy())  # valid until the next Batch
        cores.append(b.core)
        assert all(len(p) <= k or any(np.shares_memory(p, q) for q in pieces[c]) for c, p in b.pieces)  # views
    assert max(len(g) for g in got) > 1 << 18  # larger than a plain Interleaver's Batches
    assert np.concatenate(got).tolist() == expect[0].tolist()
    assert np.concatenate(cores).tolist() == expect[1].tolist()


def test_a_partial_round_is_one_batch_up_to_the_core_that_waits():
    """Round robin with a core short of k references: the turns before it come as one Batch
    (one engine call, not one per turn) whose pieces and core pattern match its lines, and the
    whole shared trace is the reference one."""
    private = [[1, 2, 3], [11, 12, 13], [21, 22, 23, 24], [31, 32, 33]]
    itl = Interleaver(4, "rr", refs_per_turn=2)
    for c, n in enumerate((3, 3, 1, 3)):
        itl.push(c, np.array(private[c][:n], dtype=np.uint64))
    batches = list(itl.drain())
    assert itl.blocked == 2 and [[c for c, _ in b.pieces] for b in batches] == [[0, 1]]
    itl.push(2, np.array(private[2][1:], dtype=np.uint64))
    batches += list(itl.drain())
    assert itl.blocked == 0 and [c for c, _ in batches[-1].pieces] == [2, 3]
    itl.close_all()
    batches += list(itl.drain())
    assert itl.finished
    for b in batches:  # each core's piece is its references in the Batch, in order
        assert len(b.core) == len(b.lines)
        assert all(b.lines[b.core == c].tolist() == p.tolist() for c, p in b.pieces)
    expect = reference_rr(private, 2)
    assert np.concatenate([b.lines for b in batches]).tolist() == expect[0]
    assert np.concatenate([b.core for b in batches]).tolist() == expect[1]
