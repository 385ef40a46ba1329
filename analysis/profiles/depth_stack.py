"""An LRU stack with lines leaving it: each access's deepest point since the line's last access (the
per-instance write-back profiles' engine, analysis/profiles/writebacks.py).

Write-invalidate between instances of a cache removes a copy from an instance: its way is free again,
so the lines that were below it move up one. A fully associative LRU cache of C lines then evicts a line
as soon as its depth (the lines touched since its last access that are still in the stack) reaches C,
and an evicted line stays out even if removals later lift its depth below C again. So a reuse hits iff
the *largest* depth the line had since its last access is below C, for every C at once: that maximum is
what `DepthStack.feed_distances` returns (without removals it is the plain reuse distance).

State: a hash table line -> time of its last access (-1: not in the stack; gone lines: below); a bitmap
with a 1 at each stacked line's time and a Fenwick tree of its words' counts (depth = stacked lines - marks up to the
line's time); and each time's *deficit*, the line's largest depth minus its depth now, kept as composable
maps x -> max(x + a, b): one per time, one per block of 64 times, and a segment tree of maps over the
blocks (range update, point query). An access to a line at time t lifts the depth of every line after t
by one (deficit x -> max(x - 1, 0)); a line leaving from time t lowers every line before t by one
(x -> x + 1), and adds one to their count of lines that left from above them (`left`, in the same maps,
below). A range touches at most two blocks time by time and O(log) tree nodes. When the time axis is used
up, the stacked and gone lines' times are renumbered by rank and the maps carried over (compaction), so
memory stays O(distinct lines). Tests compare it with a list-based stack (tests/test_instance_writebacks.py).

Beside the largest depth D, `feed_gaps` gives each access its *turnover* K: the distinct lines touched in
its gap (all came above the line) minus D, so the lines that came above it and are not counted in D. K = 0
without removals, and a line that left and came back counts once: it lands in the same set each time, so
only new lines can fill the line's set beyond what D gives. A set-associative cache needs it: a set can fill
while the whole stack is below its deepest point, when lines leave and others arrive
(analysis/hitrates/turnover.py). The distinct lines touched since time t are the stacked lines after t and
the *gone* ones (left, not touched since) whose last access was after t: a second set of marks keeps the gone
lines' last times, and a gone line's hash slot keeps its time as -2 - t.
When in the gap the removals came matters too (lines that leave once the stack is deep fill sets more than
ones that leave early), so `feed_gaps` also gives the gap's removals R (its `left`) and their *position*:
the mean, over the removals, of the share of the gap's arrivals (D plus the lines that came above it beyond
D, a line that came back counted again) that had come by then. Each time's
maps carry (left, acc, rise) beside the deficit: lines that left from above, the sum of the depth at each of
those removals, and the depth's net change, composing as affine maps of (acc, depth): after an older
(l1, c1, r1), a newer (l2, c2, r2) gives (l1 + l2, c1 + c2 + l2 * r1, r1 + r2). A removal from above is
(1, 0, -1), an arrival (0, 0, 1); a line starts at depth 0, so its acc is the sum of its depths at the
removals, and the arrivals by the i-th removal are that depth plus i.
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


class Maps(NamedTuple):
    """One composable map per time or per segment tree node: the deficit's x -> max(x + a, b), and the
    path's (left, acc, rise) (module docstring)."""

    a: np.ndarray
    b: np.ndarray
    left: np.ndarray
    acc: np.ndarray
    rise: np.ndarray


class Marks(NamedTuple):
    """A set of times: a bitmap, and the Fenwick tree of its word counts (1-based)."""

    bits: np.ndarray
    tree: np.ndarray


class StackTables(NamedTuple):
    """Hash table (line keys, last-access times: t >= 0 stacked, -1 never stacked, -2 - t gone since its
    last access at t); the stacked lines' times (marks) and the gone lines' (gone); the maps of each time
    (pos) and of each block of 64 times' segment tree node (seg, leaves from index blocks); state = [now,
    stacked lines, keys in the table, 1 once a line left since the maps were last all identities but the
    rises (which are then brought up to date), gone lines]."""

    keys: np.ndarray
    times: np.ndarray
    marks: Marks
    gone: Marks
    pos: Maps
    seg: Maps
    state: np.ndarray


class GapStats(NamedTuple):
    """Per access (or per stacked line, as if touched now): the largest depth D since the line's last access
    (-1: not in the stack), the turnover K (distinct lines touched in the gap beyond D), the removals from
    above R and their position in the gap (0 to 1; 0.5 without removals) (module docstring)."""

    distance: np.ndarray
    turnover: np.ndarray
    left: np.ndarray
    position: np.ndarray


@numba.njit(cache=True, nogil=True, inline="always")
def _mark(m, t, v):
    """Set (v = 1) or clear (v = -1) the mark at time t of the Marks m."""
    w = t >> 6
    bit = np.uint64(1) << np.uint64(t & 63)
    if v > 0:
        m.bits[w] |= bit
    else:
        m.bits[w] &= ~bit
    i = w + 1
    while i < m.tree.shape[0]:
        m.tree[i] += v
        i += i & -i


@numba.njit(cache=True, nogil=True, inline="always")
def _marks_to(m, t):
    """Marks of m at times 0..t."""
    w = t >> 6
    b = t & 63
    low = _ALL if b == 63 else (np.uint64(1) << np.uint64(b + 1)) - np.uint64(1)
    n = popcount_swar(m.bits[w] & low)
    i = w
    while i > 0:
        n += m.tree[i]
        i -= i & -i
    return n


@numba.njit(cache=True, nogil=True, inline="always")
def _compose(m, k, f):
    """Map k, then f = (a, b, left, acc, rise): x -> max(x + a, b) and the path's affine map."""
    a, b, left, acc, rise = f
    m.acc[k] += acc + left * m.rise[k]
    m.left[k] += left
    m.rise[k] += rise
    m.b[k] = max(m.b[k] + a, b)
    m.a[k] += a


@numba.njit(cache=True, nogil=True, inline="always")
def _map_at(m, k):
    """Map k as a tuple."""
    return (np.int64(m.a[k]), np.int64(m.b[k]), np.int64(m.left[k]), np.int64(m.acc[k]), np.int64(m.rise[k]))


@numba.njit(cache=True, nogil=True, inline="always")
def _reset(m, k):
    """Map k to the identity."""
    m.a[k] = 0
    m.b[k] = _NONE
    m.left[k] = 0
    m.acc[k] = 0
    m.rise[k] = 0


@numba.njit(cache=True, nogil=True, inline="always")
def _is_identity(m, k):
    return m.a[k] == 0 and m.b[k] == _NONE and m.left[k] == 0 and m.acc[k] == 0 and m.rise[k] == 0


@numba.njit(cache=True, nogil=True, inline="always")
def _push(m, k):
    """Hand tree node k's pending map to its children."""
    if not _is_identity(m, k):
        f = _map_at(m, k)
        _compose(m, 2 * k, f)
        _compose(m, 2 * k + 1, f)
        _reset(m, k)


@numba.njit(cache=True, nogil=True, inline="always")
def _open_block(s, blk, levels):
    """Hand every map above block `blk` down to its 64 times (before some of them change alone)."""
    n = s.seg.a.shape[0] // 2
    k = blk + n
    for i in range(levels, 0, -1):
        _push(s.seg, k >> i)
    if not _is_identity(s.seg, k):
        f = _map_at(s.seg, k)
        for t in range(blk * 64, blk * 64 + 64):
            _compose(s.pos, t, f)
        _reset(s.seg, k)


@numba.njit(cache=True, nogil=True, inline="always")
def _apply_blocks(seg, levels, lo, hi, f):
    """Apply map f to blocks lo..hi-1 of the segment tree."""
    if lo >= hi:
        return
    n = seg.a.shape[0] // 2
    lo += n
    hi += n
    for i in range(levels, 0, -1):  # older maps above the range's ends go down first
        if ((lo >> i) << i) != lo:
            _push(seg, lo >> i)
        if ((hi >> i) << i) != hi:
            _push(seg, (hi - 1) >> i)
    while lo < hi:
        if lo & 1:
            _compose(seg, lo, f)
            lo += 1
        if hi & 1:
            hi -= 1
            _compose(seg, hi, f)
        lo >>= 1
        hi >>= 1


@numba.njit(cache=True, nogil=True, inline="always")
def _apply(s, levels, lo, hi, f):
    """Apply map f to times lo..hi-1."""
    if lo >= hi:
        return
    first, last = lo >> 6, (hi - 1) >> 6
    if lo & 63:  # a partial first block, time by time
        _open_block(s, first, levels)
        for t in range(lo, min(hi, first * 64 + 64)):
            _compose(s.pos, t, f)
        first += 1
    if first > last:
        return
    if hi & 63:
        _open_block(s, last, levels)
        for t in range(last * 64, hi):
            _compose(s.pos, t, f)
        last -= 1
    _apply_blocks(s.seg, levels, first, last + 1, f)


@numba.njit(cache=True, nogil=True, inline="always")
def _point(s, t):
    """(deficit, left, acc, rise) at time t: its own map, then every map above its block, oldest first,
    applied to deficit 0, acc 0 and depth 0."""
    p, g = s.pos, s.seg
    a, b = np.int64(p.a[t]), np.int64(p.b[t])
    left, acc, rise = np.int64(p.left[t]), np.int64(p.acc[t]), np.int64(p.rise[t])
    k = (t >> 6) + g.a.shape[0] // 2
    while k > 0:
        b = max(b + g.a[k], g.b[k])
        a += g.a[k]
        acc += g.acc[k] + g.left[k] * rise
        left += g.left[k]
        rise += g.rise[k]
        k >>= 1
    return max(a, b), left, acc, rise


@numba.njit(cache=True, nogil=True)
def _bring_rises_up(s):
    """Each stacked line's rise set to its depth now (before the first removal since the maps were all
    identities, arrivals are not applied: the rises are stale, and nothing else is)."""
    for j in range(s.keys.shape[0]):
        t = s.times[j]
        if s.keys[j] != EMPTY and t >= 0:
            s.pos.rise[t] += s.state[1] - _marks_to(s.marks, t) - _point(s, t)[3]


_LEAVE = (1, _NONE, 1, 0, -1)  # a line left from above: deficit + 1, one more removal, depth - 1
_ARRIVE = (-1, 0, 0, 0, 1)  # a line came above: deficit - 1 (not below 0), depth + 1


@numba.njit(cache=True, nogil=True, inline="always")
def _record(s, t, i, out):
    """Access i's gap statistics into out = (distance, arrivals beyond it, left, acc, distinct lines beyond it)
    for a stacked line at time t. The lines touched since t are those stacked after it and those gone since
    their last access after it."""
    deficit, left, acc, _ = _point(s, t) if s.state[3] else (0, 0, 0, 0)
    out[0][i] = s.state[1] - _marks_to(s.marks, t) + deficit
    out[1][i] = left - deficit
    out[2][i] = left
    out[3][i] = acc
    out[4][i] = (s.state[4] - _marks_to(s.gone, t) if s.state[4] else 0) - deficit


@numba.njit(cache=True, nogil=True, inline="always")
def _leave(s, levels, slot, t):
    """The line at time t leaves the stack; the lines below it move up."""
    if not s.state[3]:
        _bring_rises_up(s)
    _mark(s.marks, t, -1)
    _mark(s.gone, t, 1)
    s.times[slot] = -2 - t
    s.state[1] -= 1
    s.state[4] += 1
    _apply(s, levels, 0, t, _LEAVE)
    s.state[3] = 1


@numba.njit(cache=True, nogil=True, inline="always")
def _arrive(s, levels, slot, t, now, span):
    """The line (last at time t: stacked; -1, never stacked; -2 - its last time, gone) comes to the top at
    time now."""
    if t >= 0:
        _mark(s.marks, t, -1)
    else:
        s.state[1] += 1
    if t < -1:
        _mark(s.gone, -2 - t, -1)
        s.state[4] -= 1
    if s.state[3]:  # (nothing to shrink or count before the first removal since the maps were identities)
        _apply(s, levels, max(t, -1) + 1, span, _ARRIVE)  # the lines after t sink (unused times too: offset below)
        s.pos.rise[now] -= _point(s, now)[3]  # the line starts at depth 0
        s.pos.left[now] = 0
        s.pos.acc[now] = 0
    s.times[slot] = now
    _mark(s.marks, now, 1)
    s.state[0] = now + 1


@numba.njit(cache=True, nogil=True, _nrt=False)
def _walk(s, lines, drop, out, begin, key_limit):
    """Each access's largest depth since the line's last access (-1: not in the stack) into out[0], from
    `begin`, moving the line to the top; with drop[i] set, the same, and the line leaves the stack; each
    access's turnover, removals from above and sum of depths at them into out[1:] (module docstring). Stops
    when the time axis is used up or the table holds key_limit lines; returns the next index."""
    mask = np.uint64(s.keys.shape[0] - 1)
    hs = hash_shift_for(mask)
    span = s.pos.a.shape[0]
    levels = bit_length(s.seg.a.shape[0] // 2) - 1
    for i in range(begin, lines.shape[0]):
        line = lines[i] & ~STORE_TAG
        slot = free_slot(s.keys, line, 0, hs, mask)
        known = s.keys[slot] == line
        t = s.times[slot] if known else -1
        if t >= 0:
            _record(s, t, i, out)
        else:
            out[0][i] = -1
            out[1][i] = 0
            out[2][i] = 0
            out[3][i] = 0
            out[4][i] = 0
        if drop is not None and drop[i]:
            if t >= 0:
                _leave(s, levels, slot, t)
            continue
        now = s.state[0]
        if now >= span:
            return i
        if not known:
            if s.state[2] + 1 > key_limit:
                return i
            s.keys[slot] = line
            s.state[2] += 1
        _arrive(s, levels, slot, t, now, span)
    return lines.shape[0]


@numba.njit(cache=True, nogil=True)
def _line_paths(s, deficit, left, acc):
    """Every stacked line's deficit, lines that left from above it and sum of its depths at those removals,
    by hash slot."""
    for j in range(s.keys.shape[0]):
        t = s.times[j]
        if s.keys[j] != EMPTY and t >= 0 and s.state[3]:
            deficit[j], left[j], acc[j], _ = _point(s, t)
        else:
            deficit[j], left[j], acc[j] = 0, 0, 0


@numba.njit(cache=True, nogil=True)
def _fill_marks(m, times):
    """Marks of m at `times` only; the word tree built in O(words)."""
    m.bits[:] = 0
    for t in times:
        m.bits[t >> 6] |= np.uint64(1) << np.uint64(t & 63)
    m.tree[:] = 0
    for j in range(1, m.tree.shape[0]):
        m.tree[j] += popcount_swar(m.bits[j - 1])
        parent = j + (j & -j)
        if parent < m.tree.shape[0]:
            m.tree[parent] += m.tree[j]


def removal_position(distance: np.ndarray, beyond: np.ndarray, left: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """Mean share of a gap's arrivals (D + `beyond`, a line that came back counted again) that had come at
    each of its R removals (the i-th came when the depth was d_i: d_i + i arrivals; acc = sum of d_i); 0.5
    where nothing left."""
    arrivals = (distance + beyond).astype(np.float64)
    came = acc + left * (left - 1) / 2.0
    den = left * arrivals
    return np.divide(came, den, out=np.full(len(den), 0.5), where=den > 0).clip(0.0, 1.0)


def _maps(n: int) -> Maps:
    """n identity maps."""
    return Maps(np.zeros(n, dtype=np.int32), np.full(n, _NONE, dtype=np.int32), np.zeros(n, dtype=np.int64),
                np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int32))


class DepthStack:
    """LRU stack of a stream of line ids (STORE_TAG ignored) whose lines can leave it; an access's distance
    is the largest depth the line had since its last access (module docstring)."""

    def __init__(self, initial_lines: int = 1 << 10) -> None:
        self.s = self._tables(1 << max(4, int(np.ceil(np.log2(initial_lines / _MAX_LOAD)))))

    @staticmethod
    def _tables(cap: int, state: np.ndarray | None = None) -> StackTables:
        span = max(2 * cap, 128)  # times; a power of two, whole 64-time blocks, at least two of them
        blocks = span >> 6
        marks = lambda: Marks(np.zeros(blocks, dtype=np.uint64), np.zeros(blocks + 1, dtype=np.int32))  # noqa: E731
        return StackTables(np.full(cap, EMPTY, dtype=np.uint64), np.full(cap, -1, dtype=np.int64), marks(), marks(),
                           _maps(span), _maps(2 * blocks), np.zeros(5, dtype=np.int64) if state is None else state)

    def feed_distances(self, lines: np.ndarray, tagged: bool = True, drop: np.ndarray | None = None) -> np.ndarray:
        """Each access's largest depth since the line's last access (-1: not in the stack: first touch, or
        dropped since), in order; where `drop` is set, the same, and the line leaves the stack (the lines
        below it move up). (tagged: the ids may carry STORE_TAG, always ignored; ReuseEngine's signature.)"""
        return self.feed_gaps(lines, drop).distance

    def feed_gaps(self, lines: np.ndarray, drop: np.ndarray | None = None) -> GapStats:
        """feed_distances' distances, and each access's turnover, removals from above and their position
        (module docstring; 0, 0 and 0.5 where the distance is -1)."""
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        if drop is not None and len(drop) != len(lines):
            raise ValueError(f"{len(drop)} drop flags for {len(lines)} accesses")
        out = tuple(np.empty(len(lines), dtype=np.int64) for _ in range(5))
        i = 0
        while (i := _walk(self.s, lines, drop, out, i, self._limit())) < len(lines):
            self._rebuild(grow=self.s.state[2] + 1 > self._limit())
        return GapStats(out[0], out[4], out[2], removal_position(out[0], out[1], out[2], out[3]))

    def _limit(self) -> int:
        """Keys the table may hold before it must grow."""
        return int(self.s.keys.shape[0] * _MAX_LOAD)

    def _rebuild(self, grow: bool) -> None:
        """Compaction: the stacked and the gone lines' times renumbered 0..n-1 by recency, the stacked ones'
        deficits and paths carried over (the rise as the depth), the time axis free above them; with `grow`,
        into tables twice as large."""
        old = self.s
        kept = [np.zeros(old.keys.shape[0], dtype=np.int64) for _ in range(3)]
        _line_paths(old, *kept)
        if grow:
            self.s = self._tables(2 * old.keys.shape[0], old.state)
            new = [np.zeros(self.s.keys.shape[0], dtype=np.int64) for _ in range(3)]
            move_values(rehash_slots(old.keys, self.s.keys), [(old.times, self.s.times), *zip(kept, new)])
            kept = new
        s = self.s
        for m in (s.pos, s.seg):
            m.a[:] = 0
            m.b[:] = _NONE
            m.left[:] = 0
            m.acc[:] = 0
            m.rise[:] = 0
        used = np.flatnonzero((s.keys != EMPTY) & (s.times != -1))
        stacked = s.times[used] >= 0
        ranks = np.empty(len(used), dtype=np.int64)
        ranks[np.argsort(np.where(stacked, s.times[used], -2 - s.times[used]), kind="stable")] = np.arange(len(used))
        s.times[used] = np.where(stacked, ranks, -2 - ranks)
        held, ranks = used[stacked], ranks[stacked]
        deficit, left, acc = (k[held] for k in kept)
        s.pos.a[ranks] = deficit  # the map x -> max(x + d, -inf): deficit d
        s.pos.left[ranks] = left
        s.pos.acc[ranks] = acc
        s.pos.rise[ranks] = _depths(ranks)
        _fill_marks(s.marks, ranks)
        _fill_marks(s.gone, -2 - s.times[used[~stacked]])
        s.state[0] = len(used)
        s.state[3] = int(deficit.any() or left.any())

    def stack_depths(self) -> tuple[np.ndarray, np.ndarray]:
        """(line ids, distances) of every stacked line as if it were touched now: the largest depth it had
        since its last access."""
        ids, gaps = self.stack_gaps()
        return ids, gaps.distance

    def stack_gaps(self) -> tuple[np.ndarray, GapStats]:
        """Every stacked line's id and feed_gaps' statistics as if it were touched now."""
        deficit, left, acc = (np.zeros(self.s.keys.shape[0], dtype=np.int64) for _ in range(3))
        _line_paths(self.s, deficit, left, acc)
        known = self.s.keys != EMPTY
        held = np.flatnonzero(known & (self.s.times >= 0))
        times = self.s.times[held]
        gone = np.sort(-2 - self.s.times[known & (self.s.times < -1)])
        gone_after = len(gone) - np.searchsorted(gone, times, side="right")
        d = _depths(times) + deficit[held]
        k, r = left[held] - deficit[held], left[held]
        return self.s.keys[held], GapStats(d, gone_after - deficit[held], r, removal_position(d, k, r, acc[held]))


def _depths(times: np.ndarray) -> np.ndarray:
    """Depth of each of a set of stacked lines from their distinct times: how many of them are later."""
    depths = np.empty(len(times), dtype=np.int64)
    depths[np.argsort(times, kind="stable")] = np.arange(len(times) - 1, -1, -1)
    return depths
