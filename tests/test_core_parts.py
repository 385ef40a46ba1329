"""core_parts.CorePart (a core's accesses read in place from its chunk's ids) against each core's
rows copied out one by one (copied_parts) and the plain round-robin layout."""
from __future__ import annotations

import numpy as np
import pytest

from analysis.profiles.core_parts import CorePart, rounds
from analysis.profiles.interleave import HELD_CHUNKS, Interleaver, interleave_arrays
from analysis.profiles.private_traces import ALL_CORES, OFFSET_BITS, PreparedChunk, split_in_place, scatter
from analysis.profiles.reuse import LeadTrace, ReuseEngine
from analysis.profiles.line_index import LineIndex

SHIFT = 6


def split_chunk(rng: np.random.Generator, n: int, p: int) -> tuple[PreparedChunk, np.ndarray]:
    """A chunk of n random ids in runs of random length, each run on a random core (or all),
    with a few offset (stack) rows."""
    cuts = np.unique(rng.integers(1, n, max(1, n // 40)))
    starts = np.concatenate([[0], cuts, [n]]).astype(np.int64)
    run_core = rng.integers(-1, p, len(starts) - 1).astype(np.int64)
    run_core[run_core < 0] = ALL_CORES
    offrows = np.flatnonzero(rng.random(n) < 0.05).astype(np.int64)
    lines = rng.integers(0, 1 << 20, n).astype(np.uint64)
    zero = np.zeros(n, dtype=np.int64)
    return PreparedChunk(lines, offrows, starts, zero, zero, offsets=bool(len(offrows))), run_core


def copied_parts(prep: PreparedChunk, run_core: np.ndarray, p: int) -> list[np.ndarray]:
    """Every core's ids, row by row: the rows of its runs and of the every-core runs, in order,
    with the offset at the offset rows."""
    core_of_row = np.repeat(run_core, np.diff(prep.starts))
    stack = np.isin(np.arange(len(prep.lines)), prep.offrows)
    out = []
    for c in range(p):
        rows = np.flatnonzero((core_of_row == c) | (core_of_row == ALL_CORES))
        out.append(prep.lines[rows] + (stack[rows] * (c << (OFFSET_BITS - SHIFT))).astype(np.uint64))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_core_parts_gather_the_rows_of_each_core_and_slice_like_arrays(seed):
    rng = np.random.default_rng(seed)
    p = int(rng.integers(2, 6))
    prep, run_core = split_chunk(rng, int(rng.integers(50, 3000)), p)
    copied = copied_parts(prep, run_core, p)
    assert [x.tolist() for x in scatter(prep, run_core, p, SHIFT)] == [x.tolist() for x in copied]
    parts = split_in_place(prep, run_core, p, SHIFT)
    for want, part in zip(copied, parts):
        assert len(part) == len(want) and part.gather().tolist() == want.tolist()
        a = int(rng.integers(0, len(want) + 1))
        b = int(rng.integers(a, len(want) + 1))
        middle = part.after(a).head(b - a)
        assert len(middle) == b - a and middle.gather().tolist() == want[a:b].tolist()
        assert part.after(a).gather(b - a).tolist() == want[a:b].tolist()


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("n_chunks", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", range(3))
def test_rounds_of_core_parts_of_several_chunks_and_arrays_equal_the_plain_layout(k, n_chunks, seed):
    """Each core's next references are a CorePart of one of n_chunks chunks, or an array (one
    chunk, two or three, more: each a path of its own)."""
    rng = np.random.default_rng(seed)
    p = int(rng.integers(2, 9))
    chunks = [split_chunk(rng, int(rng.integers(3000, 6000)), p) for _ in range(n_chunks)]
    parts = [split_in_place(prep, rc, p, SHIFT) for prep, rc in chunks]
    n = min(len(x) for x in sum(parts, [])) // k
    if n == 0:
        pytest.skip("a core without references")
    chosen = []
    for c in range(p):
        part = parts[c % n_chunks if c < n_chunks else int(rng.integers(n_chunks))][c]
        part = part.after(int(rng.integers(0, len(part) - n * k + 1))).head(n * k)
        chosen.append(CorePart.whole(part.gather()) if rng.random() < 0.2 else part)
    out = np.empty(n * k * p + 5, dtype=np.uint64)
    want = interleave_arrays([x.gather() for x in chosen], "rr", refs_per_turn=k)[0]
    assert rounds(chosen, k, out).tolist() == want.tolist()


def core_part_chunks(rng: np.random.Generator, p: int) -> list[tuple[PreparedChunk, np.ndarray]]:
    """Six chunks in which the last core has few references, so the others wait over several."""
    chunks = [split_chunk(rng, int(rng.integers(20_000, 60_000)), p) for _ in range(6)]
    for _, rc in chunks:
        rc[(rc == p - 1) & (rng.random(len(rc)) < 0.8)] = 0
    return chunks


def reference_trace(chunks: list, p: int, strategy: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The shared trace of the copied-out parts (copied_parts)."""
    private = [np.concatenate([copied_parts(prep, rc, p)[c] for prep, rc in chunks]) for c in range(p)]
    return interleave_arrays(private, strategy, seed=3, refs_per_turn=k)


@pytest.mark.parametrize("k", [1, 3])
def test_interleaver_fed_core_parts_chunk_by_chunk_lays_out_the_reference_trace(k):
    """Pushed CoreParts, settled after each chunk's drain (only the last chunks' kept), give
    the shared trace of the copied-out parts; the Batches' pieces have their lengths."""
    p = 4
    chunks = core_part_chunks(np.random.default_rng(5), p)
    itl = Interleaver(p, "rr", refs_per_turn=k, reuse=True)
    got, cores, got_chunks = [], [], []
    copied_out = 0

    def drain():
        for b in itl.drain():
            got.append(b.lines.copy())
            cores.append(b.core)
            assert len(b.lines) == sum(len(piece) for _, piece in b.pieces)

    for prep, rc in chunks:
        for c, part in enumerate(split_in_place(prep, rc, p, SHIFT)):
            itl.push(c, part)
        drain()
        itl.settle()
        held = [x.ids for lane in itl.lanes for x in lane.mem if isinstance(x, CorePart)]
        recent = [q.lines for q, _ in chunks[:len(got_chunks) + 1][-HELD_CHUNKS:]]
        assert all(any(ids is r for r in recent) for ids in held)  # no older chunk is held
        got_chunks.append(prep)
        copied_out += sum(isinstance(x, np.ndarray) for lane in itl.lanes for x in lane.mem)
    assert copied_out  # the parts of chunks older than the held ones were copied out
    itl.close_all()
    drain()
    want, want_cores = reference_trace(chunks, p, "rr", k)
    assert np.concatenate(got).tolist() == want.tolist()
    assert np.concatenate(cores).tolist() == want_cores.tolist()


@pytest.mark.parametrize("strategy", ["rr", "random"])
def test_core_parts_spilled_to_disk_or_taken_at_random_give_the_reference_trace(strategy, tmp_path):
    """CoreParts pushed beyond the memory budget are copied out into the spill files; random
    turns take them copied out: the same shared trace either way."""
    p = 3
    chunks = core_part_chunks(np.random.default_rng(7), p)
    itl = Interleaver(p, strategy, seed=3, memory_budget=8 * 30_000, spill_dir=tmp_path, reuse=strategy == "rr")
    got, spilled = [], False
    for prep, rc in chunks:
        for c, part in enumerate(split_in_place(prep, rc, p, SHIFT)):
            itl.push(c, part)
        spilled |= any(lane.disk_items for lane in itl.lanes)
        got += [b.lines.copy() for b in itl.drain()]
        itl.settle()
    assert spilled
    itl.close_all()
    got += [b.lines.copy() for b in itl.drain()]
    assert np.concatenate(got).tolist() == reference_trace(chunks, p, strategy, 1)[0].tolist()


@pytest.mark.parametrize("seed", range(8))
def test_feed_runs_reads_a_core_part_in_place_like_its_copy(seed):
    """feed_runs of a CorePart (ids read from the chunk, offsets added at its stack rows) gives
    the distances and stack of feed_runs of the copied-out part."""
    rng = np.random.default_rng(seed)
    p = 3
    prep, run_core = split_chunk(rng, int(rng.integers(100, 4000)), p)
    prep.lines = rng.integers(0, int(rng.integers(5, 300)), len(prep.lines)).astype(np.uint64)
    prep.lines, prev, nxt = LineIndex().number(prep.lines, None, 0, 0)
    lead = LeadTrace(ReuseEngine().feed_distances(prep.lines, dtype=np.int32), prev, nxt)
    for part in split_in_place(prep, run_core, p, SHIFT):
        if not len(part):
            continue
        in_place, copied = ReuseEngine(), ReuseEngine()
        got = in_place.feed_runs(part, lead, part.rows, part.breaks)
        want = copied.feed_runs(part.gather(), lead, part.rows, part.breaks)
        assert got.tolist() == want.tolist()
        probe = prep.lines[rng.integers(0, len(prep.lines), 200)] + np.uint64(part.offset)
        assert in_place.feed_distances(probe).tolist() == copied.feed_distances(probe).tolist()
    with pytest.raises(ValueError, match="followed whole"):
        ReuseEngine().feed_runs(part.after(1), lead, part.rows, part.breaks - 1)
