"""The time windows of source sampling (analysis/sampling/source.py): short reuses measured exactly.

A private window is a range of private positions of one core; a shared window is the same turn-aligned range
of private positions in every core, one contiguous run of the round-robin shared trace (see source.py). Rows
are copied into per-core segment buffers as they are decoded (shared segments wait in a ring until every
core has passed them, then are read in round-robin order: analysis/sampling/near/shared_windows.py) and each segment is
measured in one pass (`walk_segment`). `Estimate` joins a stream's window tallies with its SHARDS tallies.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.bitops import popcount
from analysis.profiles.profileset import ReuseProfile
from analysis.sampling.binning import binned_profile, scale_profile
from analysis.sampling.hashing import slot_of
from analysis.sampling.source_rows import Rows, line_of


class WalkTable(NamedTuple):
    """walk_segment's scratch: a small open-addressing table (keys, last use, stamp; tag[0]: the stamp of the
    last segment walked) and a bitset of latest uses over a segment's positions."""

    tag: np.ndarray
    keys: np.ndarray
    last: np.ndarray
    stamp: np.ndarray
    bits: np.ndarray


def walk_table(size: int, positions: int) -> WalkTable:
    """A WalkTable of `size` slots (a power of two) for segments of at most `positions` accesses."""
    return WalkTable(np.zeros(1, np.int64), np.empty(size, np.uint64), np.empty(size, np.int64),
                     np.zeros(size, np.int64), np.empty((positions >> 6) + 1, np.uint64))


@numba.njit(cache=True, nogil=True)
def walk_segment(lines, a, n, gap_pos, look, table, out, start=0):
    """out[i] for the segment lines[a:a + n], from its start-th access on (the earlier ones, a lookback, only
    set the state): the distinct lines since the previous use of lines[i] in the
    segment when that use is at most `look` gap_pos back, else -1. Segments are short, so one small
    open-addressing table (cleared per segment by a new stamp, table.tag; it must hold a segment's lines at a low
    load) serves all, and a bitset over the segment's positions marks each line's latest use so far: the
    distance is the number of marks between the two uses (a few words for the short gaps that matter)."""
    keys, last, stamp, bits = table.keys, table.last, table.stamp, table.bits
    table.tag[0] += 1
    tag = table.tag[0]
    mask = np.uint64(keys.shape[0] - 1)
    one = np.uint64(1)
    bits[:(n >> 6) + 1] = 0
    for j in range(n):
        i = a + j
        x = lines[i]
        slot = slot_of(x, mask)
        while stamp[slot] == tag and keys[slot] != x:
            slot = (slot + one) & mask
        out[i] = -1
        if stamp[slot] == tag:
            q = last[slot]
            if j >= start and gap_pos[i] - gap_pos[a + q] <= look:
                d = 0
                if j - q > 1:  # marks at positions q + 1 .. j - 1
                    lo, hi = q + 1, j - 1
                    w, wh = lo >> 6, hi >> 6
                    first = ~np.uint64(0) << np.uint64(lo & 63)
                    end = ~np.uint64(0) >> np.uint64(63 - (hi & 63))
                    if w == wh:
                        d = popcount(bits[w] & first & end)
                    else:
                        d = popcount(bits[w] & first) + popcount(bits[wh] & end)
                        for v in range(w + 1, wh):
                            d += popcount(bits[v])
                out[i] = d
            bits[q >> 6] &= ~(one << np.uint64(q & 63))
        else:
            stamp[slot] = tag
            keys[slot] = x
        bits[j >> 6] |= one << np.uint64(j & 63)
        last[slot] = j


class ClassScratch(NamedTuple):
    """class_walk's scratch for segments of at most n accesses: the segment ordered by set class (lines, gap
    positions, index in the segment), each class's first place (bounds) and fill pointer (at), the distances;
    masks: the class widths' masks (none: no class distances are measured)."""

    masks: np.ndarray
    lines: np.ndarray
    pos: np.ndarray
    idx: np.ndarray
    bounds: np.ndarray
    at: np.ndarray
    dist: np.ndarray


def class_scratch(class_bits: tuple[int, ...], n: int) -> ClassScratch:
    """A ClassScratch for these widths and segments of at most n accesses."""
    classes = 1 << max(class_bits, default=0)
    return ClassScratch(np.array([(1 << b) - 1 for b in class_bits], np.uint64), np.empty(n, np.uint64),
                        np.empty(n, np.int64), np.empty(n, np.int64), np.zeros(classes + 1, np.int64),
                        np.zeros(classes, np.int64), np.empty(n, np.int64))


@numba.njit(cache=True, nogil=True)
def class_walk(lines, gap_pos, n, start, look, mask, cs, table, hist):
    """Near set-class distances of the segment lines[:n] (gap positions gap_pos) into hist: each class's
    accesses, in order, walked as a segment of their own (walk_segment), so a distance counts only the
    distinct lines of the access's class since its previous use; the near/far split (gap at most `look`) and
    the measured accesses (index from `start` on) are the plain walk's."""
    classes = int(mask) + 1
    bounds, at = cs.bounds, cs.at
    bounds[:classes + 1] = 0
    for i in range(n):
        bounds[int(lines[i] & mask) + 1] += 1
    for k in range(classes):
        bounds[k + 1] += bounds[k]
        at[k] = bounds[k]
    for i in range(n):
        k = int(lines[i] & mask)
        j = at[k]
        cs.lines[j], cs.pos[j], cs.idx[j] = lines[i], gap_pos[i], i
        at[k] = j + 1
    for k in range(classes):
        lo, hi = bounds[k], bounds[k + 1]
        s = lo
        while s < hi and cs.idx[s] < start:
            s += 1
        if s == hi:
            continue
        walk_segment(cs.lines, lo, hi - lo, cs.pos, look, table, cs.dist, s - lo)
        for i in range(s, hi):
            if cs.dist[i] >= 0:
                hist[cs.dist[i]] += 1


class PrivateSegments(NamedTuple):
    """Every core's buffered segment: buf[core] its lines by position from its lookback's start, cur[core] =
    [window start (-1: none), positions filled]; its near distances into hist[core], [far, measured] into
    tally[core]; dist and offsets (0, 1, ...) are walk_segment's output and positions; near set-class distances
    of width w into chist[w, core] (cs: class_walk's scratch)."""

    buf: np.ndarray
    cur: np.ndarray
    look: int
    hist: np.ndarray
    tally: np.ndarray
    dist: np.ndarray
    offsets: np.ndarray
    chist: np.ndarray
    cs: ClassScratch


@numba.njit(cache=True, nogil=True)
def fill_private(pieces, src, seg, table):
    """Copy the pieces' rows (lines as their core sees them; src: RowSource) into each core's segment buffer, at
    their place (private position - segment start), and measure every segment a piece completes (seg:
    PrivateSegments). Row i is src.addr[i % len(addr)] (a batch of repeats gives one copy's words, Rows.source)."""
    addr, is_stack, block, shared_block, iteration_mode, shift = src
    buf, cur, look = seg.buf, seg.cur, seg.look
    n = addr.shape[0]
    for r in range(pieces.shape[0]):
        c, ra, rb, q0, ends, s = pieces[r, 0], pieces[r, 1], pieces[r, 2], pieces[r, 3], pieces[r, 4], pieces[r, 5]
        lo = max(s - look, 0)
        at = ra % n
        for row in range(ra, rb):
            buf[c, q0 - lo + row - ra] = line_of(addr, is_stack, block, shared_block, iteration_mode, shift, at, c)
            at += 1
            if at == n:
                at = 0
        cur[c, 0] = s
        cur[c, 1] = q0 + rb - ra - lo
        if ends:
            measure_private(seg, c, table)


@numba.njit(cache=True, nogil=True)
def measure_private(seg, c, table):
    """Tally core c's buffered segment (rows from its window start on are measured) and empty the buffer."""
    cur, look, hist, tally, dist = seg.cur, seg.look, seg.hist, seg.tally, seg.dist
    s = cur[c, 0]
    n = cur[c, 1]
    first = s - max(s - look, 0)
    walk_segment(seg.buf[c], 0, n, seg.offsets, look, table, dist, first)
    for i in range(first, n):
        d = dist[i]
        if d >= 0:
            hist[c, d] += 1
        else:
            tally[c, 0] += 1
        tally[c, 1] += 1
    for w in range(seg.cs.masks.shape[0]):
        class_walk(seg.buf[c], seg.offsets, n, first, look, seg.cs.masks[w], seg.cs, table, seg.chist[w, c])
    cur[c, 0] = -1


@numba.njit(cache=True, nogil=True)
def finish_private(seg, table):
    """Measure the segments the private traces ended in."""
    for c in range(seg.buf.shape[0]):
        if seg.cur[c, 0] >= 0:
            measure_private(seg, c, table)


def hist_counts(hist: np.ndarray) -> dict[int, int]:
    """A histogram's non-zero entries as distance -> count."""
    nz = np.flatnonzero(hist)
    return dict(zip(nz.tolist(), hist[nz].tolist()))


class PrivateWindows:
    """The window segments of every core's private trace. A core's rows arrive in its order, so each segment
    is filled in place and measured as soon as it ends (nothing waits, nothing is sorted)."""

    def __init__(self, cores: int, look: int, length: int, class_bits: tuple[int, ...] = ()) -> None:
        """class_bits: also measure near set-class distances of these widths."""
        n = look + length
        size = 1 << max(4, (4 * n).bit_length())  # load at most 1/4
        cur = np.zeros((cores, 2), np.int64)
        cur[:, 0] = -1
        self.seg = PrivateSegments(np.zeros((cores, n), np.uint64), cur, look, np.zeros((cores, look + 1), np.int64),
                                   np.zeros((cores, 2), np.int64), np.empty(n, np.int64),
                                   np.arange(n, dtype=np.int64), np.zeros((len(class_bits), cores, look + 1), np.int64),
                                   class_scratch(class_bits, n))
        self.table = walk_table(size, n)

    def add(self, pieces: np.ndarray, rows: Rows) -> None:
        """Rows of the chunk's pieces (core_runs.window_pieces)."""
        fill_private(pieces, rows.source(), self.seg, self.table)

    def finish(self, estimates: list[Estimate]) -> None:
        """Measure the last segments; hand every core's tallies to its estimate."""
        finish_private(self.seg, self.table)
        hist, tally = self.seg.hist, self.seg.tally
        for c, est in enumerate(estimates):
            nz = np.flatnonzero(hist[c])
            est.near = dict(zip(nz.tolist(), hist[c][nz].tolist()))
            est.n_far, est.n_measured = int(tally[c, 0]), int(tally[c, 1])

    def class_near(self, w: int, c: int) -> dict[int, int]:
        """Core c's near set-class distances of width class_bits[w] -> count (after finish)."""
        return hist_counts(self.seg.chist[w, c])


class Estimate:
    """One stream's window and SHARDS tallies (the stream sampler's `window` estimate, analysis/sampling/streams.py
    StreamSampler): a private trace, with private positions, or a shared trace, with turns as positions
    (a reuse is near when its gap is at most `look` positions)."""

    def __init__(self, look: int) -> None:
        self.look = look
        self.near: dict[int, int] = {}       # exact in-window distances (gap <= look) -> count
        self.n_far = 0                       # window accesses with a longer gap, or none
        self.n_measured = 0
        self.shards_near = 0                 # SHARDS samples with gap <= look ...
        self.shards_near_coh = 0             # ... of which coherence misses
        self.tail_keys = np.zeros(0, np.int64)  # raw SHARDS distances (-1 cold) of the others, ascending ...
        self.tail_cnt = np.zeros(0, np.int64)   # ... and how many had each
        self.tail_coh = 0

    def profile(self, raw: ReuseProfile, rate: float, total: int, adjust: bool) -> ReuseProfile:
        """The stream's estimate: window distances (near), SHARDS tail for the rest; SHARDS alone
        when no window was measured (a stream shorter than the first window's start)."""
        if self.n_measured == 0 or total == 0:
            return scale_profile(raw, rate, total, adjust)
        scale = total / self.n_measured
        near_keys = np.array(sorted(self.near), dtype=np.int64)
        near_cnt = np.array([self.near[k] for k in near_keys.tolist()], dtype=np.float64)
        f_coh = self.shards_near_coh / self.shards_near if self.shards_near else 0.0
        tail_vals, tail_cnt = self.far_tail(rate)
        n_tail = int(np.rint(tail_cnt.sum()))
        if n_tail == 0:  # no far SHARDS sample: the far share stays cold
            tail_vals, tail_cnt = np.array([-1]), np.array([1.0])
        far = self.n_far * tail_cnt / tail_cnt.sum()
        vals = np.concatenate([near_keys, [-1], tail_vals])
        cnt = np.concatenate([near_cnt * (1 - f_coh), [near_cnt.sum() * f_coh], far]) * scale
        prof = binned_profile(vals.astype(np.int64), cnt, 1.0, total)
        tail_share = self.tail_coh / max(n_tail, 1)
        prof.coherence = min(int(round(scale * (near_cnt.sum() * f_coh + self.n_far * tail_share))), prof.cold)
        return prof

    def far_tail(self, rate: float) -> tuple[np.ndarray, np.ndarray]:
        """The far SHARDS samples as full-trace distances (-1: cold) and counts: each sample's distance / rate."""
        vals = np.where(self.tail_keys >= 0, np.rint(self.tail_keys / rate), -1)
        return vals, self.tail_cnt.astype(np.float64)
