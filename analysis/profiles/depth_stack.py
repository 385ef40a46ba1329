"""An LRU stack with lines leaving it: each access's deepest point since the line's last access (the
per-instance write-back profiles' engine, analysis/profiles/writebacks.py).

Write-invalidate between instances of a cache removes a copy from an instance: its way is free again,
so the lines that were below it move up one. A fully associative LRU cache of C lines then evicts a line
as soon as its depth (the lines touched since its last access that are still in the stack) reaches C,
and an evicted line stays out even if removals later lift its depth below C again. So a reuse hits iff
the *largest* depth the line had since its last access is below C, for every C at once: that maximum is
what `DepthStack.feed_distances` returns (without removals it is the plain reuse distance).

State: a hash table line -> time of its last access (-1: not in the stack); a bitmap with a 1 at each
stacked line's time and a Fenwick tree of its words' counts (depth = stacked lines - marks up to the
line's time); and each time's *deficit*, the line's largest depth minus its depth now, kept as composable
maps x -> max(x + a, b): one per time, one per block of 64 times, and a segment tree of maps over the
blocks (range update, point query). An access to a line at time t lifts the depth of every line after t
by one (deficit x -> max(x - 1, 0)); a line leaving from time t lowers every line before t by one
(x -> x + 1), and adds one to their count of lines that left from above them (`left`: plain sums, one per
time and one per segment tree node, range add and point query). A range touches at most two blocks time by time and O(log) tree nodes. When the time axis is
used up, the stacked lines' times are renumbered by rank and their deficits carried over (compaction), so
memory stays O(distinct lines). Tests compare it with a list-based stack (tests/test_instance_writebacks.py).

Beside the largest depth D, `feed_turnover` gives each access its *turnover* K: the lines that came above
the line in its gap (its depth now plus the lines that left from above it; a line that left and came back
counts twice) minus D. K = 0 without removals. A set-associative cache needs it: a set can fill while the
whole stack is below its deepest point, when lines leave and others arrive (analysis/hitrates/turnover.py).
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.kernel_ops import (EMPTY, STORE_TAG, bit_length, free_slot, hash_shift_for, move_values, popcount_swar,
                                         rehash_slots)

_MAX_LOAD = 0.6
_NONE = -(1 << 30)  # b of the identity map x -> max(x + 0, -inf)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


class StackTables(NamedTuple):
    """Hash table (line keys, last-access times, -1 when not stacked); the marks' bitmap and the Fenwick
    tree of its word counts (1-based); the deficit maps (a, b) of each time, of each block of 64 times'
    segment tree node (leaves from index blocks); the lines that left from above each time (pos_left) and
    each node's pending such count (seg_left); state = [now, stacked lines, keys in the table, 1 once a
    line left since the deficits were last all 0]."""

    keys: np.ndarray
    times: np.ndarray
    bits: np.ndarray
    tree: np.ndarray
    pos_a: np.ndarray
    pos_b: np.ndarray
    seg_a: np.ndarray
    seg_b: np.ndarray
    pos_left: np.ndarray
    seg_left: np.ndarray
    state: np.ndarray


@numba.njit(cache=True, nogil=True, inline="always")
def _mark(s, t, v):
    """Set (v = 1) or clear (v = -1) the mark at time t."""
    w = t >> 6
    bit = np.uint64(1) << np.uint64(t & 63)
    if v > 0:
        s.bits[w] |= bit
    else:
        s.bits[w] &= ~bit
    i = w + 1
    while i < s.tree.shape[0]:
        s.tree[i] += v
        i += i & -i


@numba.njit(cache=True, nogil=True, inline="always")
def _marks_to(s, t):
    """Marks at times 0..t."""
    w = t >> 6
    b = t & 63
    low = _ALL if b == 63 else (np.uint64(1) << np.uint64(b + 1)) - np.uint64(1)
    n = popcount_swar(s.bits[w] & low)
    i = w
    while i > 0:
        n += s.tree[i]
        i -= i & -i
    return n


@numba.njit(cache=True, nogil=True, inline="always")
def _compose(sa, sb, k, a, b):
    """Map k, then x -> max(x + a, b)."""
    sa[k] += a
    sb[k] = max(sb[k] + a, b)


@numba.njit(cache=True, nogil=True, inline="always")
def _push(sa, sb, k):
    """Hand tree node k's pending map to its children."""
    if sa[k] != 0 or sb[k] != _NONE:
        _compose(sa, sb, 2 * k, sa[k], sb[k])
        _compose(sa, sb, 2 * k + 1, sa[k], sb[k])
        sa[k] = 0
        sb[k] = _NONE


@numba.njit(cache=True, nogil=True, inline="always")
def _open_block(s, blk, levels):
    """Hand every map above block `blk` down to its 64 times (before some of them change alone)."""
    n = s.seg_a.shape[0] // 2
    k = blk + n
    for i in range(levels, 0, -1):
        _push(s.seg_a, s.seg_b, k >> i)
    a, b = s.seg_a[k], s.seg_b[k]
    if a != 0 or b != _NONE:
        pa, pb = s.pos_a, s.pos_b
        for t in range(blk * 64, blk * 64 + 64):
            _compose(pa, pb, t, a, b)
        s.seg_a[k] = 0
        s.seg_b[k] = _NONE


@numba.njit(cache=True, nogil=True, inline="always")
def _apply_blocks(sa, sb, levels, lo, hi, a, b):
    """Apply x -> max(x + a, b) to blocks lo..hi-1 of the segment tree."""
    if lo >= hi:
        return
    n = sa.shape[0] // 2
    lo += n
    hi += n
    for i in range(levels, 0, -1):  # older maps above the range's ends go down first
        if ((lo >> i) << i) != lo:
            _push(sa, sb, lo >> i)
        if ((hi >> i) << i) != hi:
            _push(sa, sb, (hi - 1) >> i)
    while lo < hi:
        if lo & 1:
            _compose(sa, sb, lo, a, b)
            lo += 1
        if hi & 1:
            hi -= 1
            _compose(sa, sb, hi, a, b)
        lo >>= 1
        hi >>= 1


@numba.njit(cache=True, nogil=True, inline="always")
def _apply(s, levels, lo, hi, a, b):
    """Apply x -> max(x + a, b) to the deficits of times lo..hi-1."""
    if lo >= hi:
        return
    first, last = lo >> 6, (hi - 1) >> 6
    pa, pb = s.pos_a, s.pos_b
    if lo & 63:  # a partial first block, time by time
        _open_block(s, first, levels)
        for t in range(lo, min(hi, first * 64 + 64)):
            _compose(pa, pb, t, a, b)
        first += 1
    if first > last:
        return
    if hi & 63:
        _open_block(s, last, levels)
        for t in range(last * 64, hi):
            _compose(pa, pb, t, a, b)
        last -= 1
    _apply_blocks(s.seg_a, s.seg_b, levels, first, last + 1, a, b)


@numba.njit(cache=True, nogil=True, inline="always")
def _deficit(s, t):
    """The deficit at time t: its own map, then every map above its block, oldest first, applied to 0."""
    a, b = s.pos_a[t], s.pos_b[t]
    k = (t >> 6) + s.seg_a.shape[0] // 2
    while k > 0:
        b = max(b + s.seg_a[k], s.seg_b[k])
        a += s.seg_a[k]
        k >>= 1
    return max(a, b)


@numba.njit(cache=True, nogil=True, inline="always")
def _add_left(s, hi):
    """One more line left from above every time 0..hi-1."""
    full = hi >> 6
    for t in range(full * 64, hi):
        s.pos_left[t] += 1
    n = s.seg_left.shape[0] // 2
    lo, up = n, full + n
    while lo < up:
        if lo & 1:
            s.seg_left[lo] += 1
            lo += 1
        if up & 1:
            up -= 1
            s.seg_left[up] += 1
        lo >>= 1
        up >>= 1


@numba.njit(cache=True, nogil=True, inline="always")
def _left(s, t):
    """Lines that left from above time t since it was marked."""
    n = s.pos_left[t]
    k = (t >> 6) + s.seg_left.shape[0] // 2
    while k > 0:
        n += s.seg_left[k]
        k >>= 1
    return n


@numba.njit(cache=True, nogil=True, _nrt=False)
def _walk(s, lines, drop, out, turn, begin, key_limit):
    """Each access's largest depth since the line's last access (-1: not in the stack) into out, from
    `begin`, moving the line to the top; with drop[i] set, the same, and the line leaves the stack; each
    access's turnover into `turn` (module docstring; None: not wanted). Stops when the time axis is used
    up or the table holds key_limit lines; returns the next index."""
    mask = np.uint64(s.keys.shape[0] - 1)
    hs = hash_shift_for(mask)
    span = s.pos_a.shape[0]
    levels = bit_length(s.seg_a.shape[0] // 2) - 1
    for i in range(begin, lines.shape[0]):
        line = lines[i] & ~STORE_TAG
        slot = free_slot(s.keys, line, 0, hs, mask)
        known = s.keys[slot] == line
        t = s.times[slot] if known else -1
        out[i] = -1
        if t >= 0:
            deficit = _deficit(s, t) if s.state[3] else 0
            out[i] = s.state[1] - _marks_to(s, t) + deficit
            if turn is not None:
                turn[i] = _left(s, t) - deficit
        elif turn is not None:
            turn[i] = 0
        if drop is not None and drop[i]:
            if t >= 0:
                _mark(s, t, -1)
                s.times[slot] = -1
                s.state[1] -= 1
                _apply(s, levels, 0, t, 1, _NONE)  # the lines below move up
                _add_left(s, t)
                s.state[3] = 1
            continue
        now = s.state[0]
        if now >= span:
            return i
        if not known:
            if s.state[2] + 1 > key_limit:
                return i
            s.keys[slot] = line
            s.state[2] += 1
        if t >= 0:
            _mark(s, t, -1)
        else:
            s.state[1] += 1
        if s.state[3]:  # (nothing to shrink before the first removal since a compaction that left no deficit)
            _apply(s, levels, t + 1, span, -1, 0)  # the lines after t sink (unused times stay at 0)
        s.times[slot] = now
        _mark(s, now, 1)
        s.state[0] = now + 1
    return lines.shape[0]


@numba.njit(cache=True, nogil=True)
def _deficits(s, out, left):
    """Every stacked line's deficit and count of lines that left from above it, by hash slot."""
    for j in range(s.keys.shape[0]):
        t = s.times[j]
        held = s.keys[j] != EMPTY and t >= 0
        out[j] = _deficit(s, t) if held else 0
        left[j] = _left(s, t) if held else 0


@numba.njit(cache=True, nogil=True)
def _fill_marks(s, n):
    """Marks at times 0..n-1 only; the word tree built in O(words)."""
    s.bits[:] = 0
    s.bits[:n >> 6] = _ALL
    if n & 63:
        s.bits[n >> 6] = (np.uint64(1) << np.uint64(n & 63)) - np.uint64(1)
    s.tree[:] = 0
    for j in range(1, s.tree.shape[0]):
        s.tree[j] += popcount_swar(s.bits[j - 1])
        parent = j + (j & -j)
        if parent < s.tree.shape[0]:
            s.tree[parent] += s.tree[j]


class DepthStack:
    """LRU stack of a stream of line ids (STORE_TAG ignored) whose lines can leave it; an access's distance
    is the largest depth the line had since its last access (module docstring)."""

    def __init__(self, initial_lines: int = 1 << 10) -> None:
        self.s = self._tables(1 << max(4, int(np.ceil(np.log2(initial_lines / _MAX_LOAD)))))

    @staticmethod
    def _tables(cap: int, state: np.ndarray | None = None) -> StackTables:
        span = max(2 * cap, 128)  # times; a power of two, whole 64-time blocks, at least two of them
        blocks = span >> 6
        return StackTables(np.full(cap, EMPTY, dtype=np.uint64), np.full(cap, -1, dtype=np.int64),
                           np.zeros(blocks, dtype=np.uint64), np.zeros(blocks + 1, dtype=np.int32),
                           np.zeros(span, dtype=np.int32), np.full(span, _NONE, dtype=np.int32),
                           np.zeros(2 * blocks, dtype=np.int32), np.full(2 * blocks, _NONE, dtype=np.int32),
                           np.zeros(span, dtype=np.int64), np.zeros(2 * blocks, dtype=np.int64),
                           np.zeros(4, dtype=np.int64) if state is None else state)

    def feed_distances(self, lines: np.ndarray, tagged: bool = True, drop: np.ndarray | None = None) -> np.ndarray:
        """Each access's largest depth since the line's last access (-1: not in the stack: first touch, or
        dropped since), in order; where `drop` is set, the same, and the line leaves the stack (the lines
        below it move up). (tagged: the ids may carry STORE_TAG, always ignored; ReuseEngine's signature.)"""
        return self._feed(lines, drop, None)

    def feed_turnover(self, lines: np.ndarray, drop: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """feed_distances' distances, and each access's turnover (module docstring; 0 where the distance
        is -1)."""
        turn = np.empty(len(lines), dtype=np.int64)
        return self._feed(lines, drop, turn), turn

    def _feed(self, lines: np.ndarray, drop: np.ndarray | None, turn: np.ndarray | None) -> np.ndarray:
        """Walk a batch, compacting or growing the tables whenever the walk stops short."""
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        if drop is not None and len(drop) != len(lines):
            raise ValueError(f"{len(drop)} drop flags for {len(lines)} accesses")
        out = np.empty(len(lines), dtype=np.int64)
        i = 0
        while (i := _walk(self.s, lines, drop, out, turn, i, self._limit())) < len(lines):
            self._rebuild(grow=self.s.state[2] + 1 > self._limit())
        return out

    def _limit(self) -> int:
        """Keys the table may hold before it must grow."""
        return int(self.s.keys.shape[0] * _MAX_LOAD)

    def _rebuild(self, grow: bool) -> None:
        """Compaction: the stacked lines' times renumbered 0..n-1 by recency, their deficits carried over, the
        time axis free above them; with `grow`, into tables twice as large."""
        old = self.s
        defs, left = (np.zeros(old.keys.shape[0], dtype=np.int64) for _ in range(2))
        _deficits(old, defs, left)
        if grow:
            self.s = self._tables(2 * old.keys.shape[0], old.state)
            new_defs, new_left = (np.zeros(self.s.keys.shape[0], dtype=np.int64) for _ in range(2))
            move_values(rehash_slots(old.keys, self.s.keys),
                        [(old.times, self.s.times), (defs, new_defs), (left, new_left)])
            defs, left = new_defs, new_left
        s = self.s
        for a, b in ((s.pos_a, s.pos_b), (s.seg_a, s.seg_b)):
            a[:] = 0
            b[:] = _NONE
        s.pos_left[:] = 0
        s.seg_left[:] = 0
        held = np.flatnonzero((s.keys != EMPTY) & (s.times >= 0))
        ranks = np.empty(len(held), dtype=np.int64)
        ranks[np.argsort(s.times[held], kind="stable")] = np.arange(len(held))
        s.times[held] = ranks
        s.pos_a[ranks] = defs[held]  # the map x -> max(x + d, -inf): deficit d
        s.pos_left[ranks] = left[held]
        _fill_marks(s, len(held))
        s.state[0] = len(held)
        s.state[3] = int(defs[held].any())

    def stack_depths(self) -> tuple[np.ndarray, np.ndarray]:
        """(line ids, distances) of every stacked line as if it were touched now: the largest depth it had
        since its last access."""
        ids, depths, _ = self.stack_turnover()
        return ids, depths

    def stack_turnover(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """stack_depths' (line ids, distances), and each stacked line's turnover as if it were touched now."""
        defs, left = (np.zeros(self.s.keys.shape[0], dtype=np.int64) for _ in range(2))
        _deficits(self.s, defs, left)
        held = np.flatnonzero((self.s.keys != EMPTY) & (self.s.times >= 0))
        depths = np.empty(len(held), dtype=np.int64)
        depths[np.argsort(self.s.times[held], kind="stable")] = np.arange(len(held) - 1, -1, -1)
        return self.s.keys[held], depths + defs[held], left[held] - defs[held]
