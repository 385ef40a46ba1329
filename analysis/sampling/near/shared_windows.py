"""The shared trace's time windows of source sampling (analysis/sampling/source.py), in a ring bounded by a memory
budget.

A shared window is the same turn-aligned range of private positions in every core, one contiguous run of the
round-robin shared trace. Cores reach a segment at different times (with a static schedule a whole loop instance
apart), so a segment's rows wait in a ring of slots, one row of positions per core, until every core has passed
it; then they are read in round-robin order and measured in one pass (windows.walk_segment).

The ring doubles while it fits in its budget (bytes; memory.ring_budget of the core count's share). Once it
cannot grow, the slots hold the oldest live segments [oldest, loaded) only: rows of later segments are staged as
records (segment, core, offset, rows) and written, per core and in order, as zstd frames to a temporary file of
their core (spill.FrameFile). Segments are measured in order, so each time the oldest ones have been measured the
window of slots moves on and every core's records of the segments now inside it are read back into their slots
(a frame straddling the window's end waits, decoded, for the next move). Rows come back unchanged, in the same
places, so spilling changes no count, and nothing spills while the ring fits.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.sampling.source_rows import Rows, line_of
from common.spill import FrameFile
from analysis.sampling.near.windows import (
    ClassScratch,
    Estimate,
    class_scratch,
    class_walk,
    hist_counts,
    walk_segment,
    walk_table,
)

OLDEST, STARTED, LOADED, STAGED, RECORDS = range(5)  # SharedRing.state's entries
NO_LIMIT = np.iinfo(np.int64).max  # state[LOADED] while nothing spills
STAGE_WORDS = 1 << 15  # rows staged for the spill files between two writes (256 KiB; at least a segment's row)
STAGE_RECORDS = 1 << 12
NEED_LOAD = 1  # drain_shared stopped at a segment whose rows may be on disk


class SharedRing(NamedTuple):
    """The shared segments waiting for every core: segment j (window start first + j * period) lives in slot
    j % capacity of buf, one row of positions per core (private position - segment start, lookback first);
    fill[slot, core] = positions filled; state = [oldest live segment, segments started, segments below which
    every row is in the slots (NO_LIMIT: nothing spills), rows staged, records staged]; k: turn length; stage and
    heads: the staged rows and their records (segment, core, offset in the segment's row, rows)."""

    buf: np.ndarray
    fill: np.ndarray
    state: np.ndarray
    first: int
    period: int
    look: int
    length: int
    k: int
    stage: np.ndarray
    heads: np.ndarray


class SharedTallies(NamedTuple):
    """The shared windows' near distances (hist) and [far, measured] (tally), with drain_shared's scratch: the
    merged segment's lines (seq), turns and distances; near set-class distances of width w into chist[w]."""

    hist: np.ndarray
    tally: np.ndarray
    dist: np.ndarray
    seq: np.ndarray
    turn: np.ndarray
    chist: np.ndarray
    cs: ClassScratch


@numba.njit(cache=True, nogil=True)
def fill_shared(pieces, r0, src, ring):
    """Copy the pieces' rows from r0 on into the ring's segment buffers (src: RowSource, ring: SharedRing), or stage
    those of segments past the slots' window once the ring spills. Returns the piece reached: it stops before a
    segment that has no slot while nothing spills (the ring grows), or whose rows do not fit in the stage. Row i is
    src.addr[i % len(addr)] (a batch of repeats gives one copy's words, Rows.source)."""
    addr, is_stack, block, shared_block, iteration_mode, shift = src
    buf, fill, state, first, period, look = ring.buf, ring.fill, ring.state, ring.first, ring.period, ring.look
    stage, heads = ring.stage, ring.heads
    cap, n = buf.shape[0], addr.shape[0]
    for r in range(r0, pieces.shape[0]):
        c, ra, rb, q0, s = pieces[r, 0], pieces[r, 1], pieces[r, 2], pieces[r, 3], pieces[r, 5]
        seg = (s - first) // period
        limit = min(state[OLDEST] + cap, state[LOADED])
        lo = max(s - look, 0)
        if seg >= limit:
            w, m = state[STAGED], state[RECORDS]
            if state[LOADED] == NO_LIMIT or m == heads.shape[0] or w + rb - ra > stage.shape[0]:
                return r
            heads[m, 0], heads[m, 1], heads[m, 2], heads[m, 3] = seg, c, q0 - lo, rb - ra
            dst, at0 = stage, w
            state[STAGED], state[RECORDS] = w + rb - ra, m + 1
        else:
            dst, at0 = buf[seg % cap, c], q0 - lo
        while state[STARTED] <= seg:  # a segment no core has reached yet
            if state[STARTED] < limit:
                fill[state[STARTED] % cap, :] = 0
            state[STARTED] += 1
        at = ra % n
        for row in range(ra, rb):
            dst[at0 + row - ra] = line_of(addr, is_stack, block, shared_block, iteration_mode, shift, at, c)
            at += 1
            if at == n:
                at = 0
        if seg < limit:
            fill[seg % cap, c] = q0 + rb - ra - lo
    return pieces.shape[0]


@numba.njit(cache=True, nogil=True)
def drain_shared(ring, reached, out, table):
    """Measure the live segments that end at or before private position `reached` of every core, oldest
    first: their rows in round-robin order (turn, core, position), reuses timed in turns (near: at most
    look // k turns back); near distances into out.hist, [far, measured] into out.tally (out: SharedTallies).
    Returns 0, or NEED_LOAD when it stopped at a segment whose rows are not all in the slots yet."""
    buf, fill, state, first, period, look, length, k = (ring.buf, ring.fill, ring.state, ring.first, ring.period,
                                                        ring.look, ring.length, ring.k)
    hist, tally, dist, seq, turn, chist, cs = out
    cap = buf.shape[0]
    p = buf.shape[1]
    while state[OLDEST] < state[STARTED]:
        s = first + state[OLDEST] * period
        if s + length > reached:
            return 0
        if state[OLDEST] >= state[LOADED]:
            return NEED_LOAD
        slot = state[OLDEST] % cap
        lo = max(s - look, 0)
        n = 0
        for t in range((s + length - lo) // k):
            for c in range(p):
                for x in range(t * k, t * k + k):
                    if x < fill[slot, c]:
                        seq[n] = buf[slot, c, x]
                        turn[n] = (lo + x) // k
                        n += 1
        m0 = 0  # the window proper starts at the first access of turn s // k (turns are aligned on k)
        while m0 < n and turn[m0] * k < s:
            m0 += 1
        walk_segment(seq, 0, n, turn, look // k, table, dist, m0)
        for i in range(m0, n):
            if dist[i] >= 0:
                hist[dist[i]] += 1
            else:
                tally[0] += 1
            tally[1] += 1
        for w in range(cs.masks.shape[0]):
            class_walk(seq, turn, n, m0, look // k, cs.masks[w], cs, table, chist[w])
        state[OLDEST] += 1
    return 0


@numba.njit(cache=True, nogil=True)
def load_records(buf, fill, c, heads, words, at, limit):
    """Core c's records heads[at[0]:] (segment, offset, rows; their rows words[at[1]:] in order) of segments below
    `limit` into their slots; at = [next record, next word] is advanced past them."""
    cap = buf.shape[0]
    i, w = at[0], at[1]
    while i < heads.shape[0] and heads[i, 0] < limit:
        slot, off, m = heads[i, 0] % cap, heads[i, 1], heads[i, 2]
        buf[slot, c, off:off + m] = words[w:w + m]
        fill[slot, c] = off + m
        w += m
        i += 1
    at[0], at[1] = i, w


class SharedWindows:
    """The window segments of the round-robin shared trace: the same turn-aligned private positions in every
    core. Cores reach a segment at different times, so segments wait in a ring of buffers until every core has
    passed them; then their rows are read in the shared trace's order. The ring grows up to `budget` bytes, then
    spills the later segments' rows to spill_dir (see the module docstring)."""

    def __init__(self, cores: int, k: int, look: int, length: int, first: int, period: int,
                 class_bits: tuple[int, ...] = (), budget: int = NO_LIMIT, spill_dir: str | None = None) -> None:
        """class_bits: also measure near set-class distances of these widths."""
        n = look + length
        size = 1 << max(4, (4 * n * cores).bit_length())  # load at most 1/4
        self.k, self.look, self.length, self.first, self.period = k, look, length, first, period
        self.max_slots = max(4, budget // (cores * (n + 1) * 8))
        self.buf = np.empty((4, cores, n), np.uint64)
        self.fill = np.zeros((4, cores), np.int64)
        self.state = np.zeros(5, np.int64)
        self.state[LOADED] = NO_LIMIT
        self.stage, self.heads = np.empty(max(STAGE_WORDS, n), np.uint64), np.empty((STAGE_RECORDS, 4), np.int64)
        self.spill_dir = spill_dir
        self.files: list[FrameFile | None] = [None] * cores
        self.pending: list = [None] * cores  # per core: a frame read back, not all loaded (heads, words, at)
        self.spilled = 0  # records written to disk so far
        self.out = SharedTallies(np.zeros(cores * n + 1, np.int64), np.zeros(2, np.int64),
                                 np.empty(cores * n, np.int64), np.empty(cores * n, np.uint64),
                                 np.empty(cores * n, np.int64), np.zeros((len(class_bits), cores * n + 1), np.int64),
                                 class_scratch(class_bits, cores * n))
        self.table = walk_table(size, cores * n)

    def ring(self) -> SharedRing:
        """The ring's arrays (which _grow replaces) and geometry, for the kernels."""
        return SharedRing(self.buf, self.fill, self.state, self.first, self.period, self.look, self.length, self.k,
                          self.stage, self.heads)

    def add(self, pieces: np.ndarray, rows: Rows) -> None:
        """Rows of the chunk's pieces (core_runs.window_pieces); what was staged goes to the spill files."""
        src = rows.source()
        r = 0
        while True:
            r = fill_shared(pieces, r, src, self.ring())
            if r == pieces.shape[0]:
                break
            if self.state[LOADED] != NO_LIMIT:
                self._flush()
            elif self.buf.shape[0] < self.max_slots:
                self._grow()
            else:  # from now on, rows past the slots spill
                self.state[LOADED] = self.state[OLDEST] + self.buf.shape[0]
        self._flush()

    def _grow(self) -> None:
        """Twice the ring's slots (at most max_slots), live segments moved to their new slots."""
        cap = self.buf.shape[0]
        new = min(2 * cap, self.max_slots)
        buf = np.empty((new,) + self.buf.shape[1:], np.uint64)  # fill says what is valid
        fill = np.zeros((new, self.fill.shape[1]), np.int64)
        live = np.arange(self.state[OLDEST], self.state[STARTED])
        buf[live % new], fill[live % new] = self.buf[live % cap], self.fill[live % cap]
        self.buf, self.fill = buf, fill

    def _flush(self) -> None:
        """The staged records to their cores' spill files, one frame per core: record count, then the records
        (segment, offset, rows) and their rows."""
        m, w = int(self.state[RECORDS]), int(self.state[STAGED])
        if m == 0:
            return
        heads = self.heads[:m]
        word_core = np.repeat(heads[:, 1], heads[:, 3])
        for c in np.unique(heads[:, 1]).tolist():
            mine = heads[heads[:, 1] == c][:, [0, 2, 3]]
            if self.files[c] is None:
                self.files[c] = FrameFile(self.spill_dir, "the sampled profiles' shared window segments")
            self.files[c].append(np.int64(mine.shape[0]).tobytes() + mine.tobytes()
                                 + self.stage[:w][word_core == c].tobytes())
        self.spilled += m
        self.state[STAGED] = self.state[RECORDS] = 0

    def _load(self) -> None:
        """Move the slots' window up to the oldest live segment + capacity: clear the slots of the segments
        entering it that were started, and read every core's records of them back."""
        cap = self.buf.shape[0]
        limit = int(self.state[OLDEST]) + cap
        entering = np.arange(self.state[LOADED], min(limit, int(self.state[STARTED])))
        self.fill[entering % cap] = 0
        for c, f in enumerate(self.files):
            while f is not None:
                if self.pending[c] is None:
                    if f.empty():
                        break
                    raw = f.pop()
                    m = int(np.frombuffer(raw, np.int64, 1)[0])
                    heads = np.frombuffer(raw, np.int64, 3 * m, 8).reshape(m, 3)
                    self.pending[c] = (heads, np.frombuffer(raw, np.uint64, offset=8 * (1 + 3 * m)),
                                       np.zeros(2, np.int64))
                heads, words, at = self.pending[c]
                load_records(self.buf, self.fill, c, heads, words, at, limit)
                if at[0] < heads.shape[0]:
                    break
                self.pending[c] = None
        self.state[LOADED] = limit

    def measure(self, reached: int) -> None:
        """Measure the segments every core has passed (private position `reached`)."""
        while drain_shared(self.ring(), reached, self.out, self.table) == NEED_LOAD:
            self._load()
        if self.state[LOADED] != NO_LIMIT:
            self._load()

    def finish(self, est: Estimate) -> None:
        """Measure the segments left (some cores' traces end before them); tallies to the estimate; the spill
        files are dropped."""
        self.measure(np.iinfo(np.int64).max)
        for f in self.files:
            if f is not None:
                f.close()
        self.files = [None] * len(self.files)
        hist, tally = self.out.hist, self.out.tally
        nz = np.flatnonzero(hist)
        est.near = dict(zip(nz.tolist(), hist[nz].tolist()))
        est.n_far, est.n_measured = int(tally[0]), int(tally[1])

    def class_near(self, w: int) -> dict[int, int]:
        """The near set-class distances of width class_bits[w] -> count (after finish)."""
        return hist_counts(self.out.chist[w])
