"""Exact replay of the periodic stretches of the SHARDS samples in source sampling (analysis/sampling/source.py).

Time-stepped codes repeat: in iteration mode `analysis.profiles.sweep.loop_period` finds the smallest n such that loop
instances i and i + n have the same loop, trip count, schedule and chunk (jacobi-2d: n = 2, one time step). The
sequential trace is cut into copies at the starts of the loop instances that are multiples of n, and only the
copies' SHARDS part (sampled rows, their lines and flags, and the runs of one loop iteration, with instances
counted from the copy's first) is kept, a few percent of the rows. Two consecutive copies with the same part give
every core the same sampled accesses at the same private positions, and every core count the same core decisions
(the loops' signatures repeat), so the kernels of analysis/sampling/shards/shards_kernel.py do the same work on them when they
start from the same state.

That is what `ShardsReplay` checks, per core count, instead of relying on a theorem: after a copy has been fed,
it compares the state at the copy's end with the state at its start, relative to each core's private position
(`_norm`: each stack's lines in LRU order, their last-use positions where a later access could still count them
near, the sharer sets; a copy counts only when every core advanced as far, by whole turns, and no pair waits
in the merge's queues). When they are equal, feeding the next copy, if its part is the same,
would add the same counts and leave the same state again, shifted by the copy's length; so such copies are not
fed: they are counted, and when a copy differs (or the trace ends) the counts of the last fed copy are added that
many times and the state's positions are shifted (`unwind`). The profiles are bit for bit those of feeding every
copy (tests/test_source_replay.py). The windows (analysis/sampling/near/windows.py) still read every row.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from analysis.profiles.private_traces import ALL_CORES, iteration_core
from analysis.sampling.shards.stacks import EMPTY

# Rows a copy has at least: periods shorter than this are taken several at a time (a copy per period would cost
# a feed call per core count each, and the state comparison after each fed copy); about half a decode batch, so
# copies that never repeat cost at most twice the feed calls of batches. jacobi-2d MEDIUM's period: 370K rows.
MIN_COPY_ROWS = 1 << 18


@dataclass
class Copy:
    """The SHARDS part of one copy, in rows counted from the copy's start."""

    sel: np.ndarray     # sampled rows (int64, increasing)
    lines: np.ndarray   # their line ids (no offset)
    offset: np.ndarray  # bool: per-core offset
    store: np.ndarray   # bool: store
    starts: np.ndarray  # run starts, plus the copy's row count
    key0: np.ndarray    # loop instance of each run (-1: outside loops)
    key1: np.ndarray    # iteration of each run
    inst0: int          # the copy's first loop instance (-1: the trace's head, before any cut)
    inst1: int          # the next copy's first loop instance (-1: none, the trace ends)
    origin: object = None  # the _Template the arrays come from (all but key0, which is shifted by inst0)

    def same_as(self, prev: "Copy | None") -> bool:
        """Whether this copy repeats prev (the copy before it): as many loop instances (a multiple of the period,
        so the same loops and schedules), the same rows, runs and flags."""
        if prev is None or prev.inst0 < 0 or self.inst1 < 0 or self.inst0 != prev.inst1 \
                or self.inst1 - self.inst0 != prev.inst1 - prev.inst0 or self.starts[-1] != prev.starts[-1]:
            return False
        if self.origin is not None and self.origin is prev.origin:  # the same arrays, instances shifted alike
            return True
        pairs = ((self.sel, prev.sel), (self.lines, prev.lines), (self.offset, prev.offset),
                 (self.store, prev.store), (self.starts, prev.starts), (self.key1, prev.key1))
        if not all(np.array_equal(a, b) for a, b in pairs):
            return False
        n = self.inst0 - prev.inst0
        return np.array_equal(np.where(self.key0 >= 0, self.key0 - n, self.key0), prev.key0)


@dataclass
class _Template:
    """One copy of a batch of repeats from the decoder (SampledBatch.copies): its SHARDS part, with the loop
    instances relative to its first (-1 stays -1)."""

    recording: int
    sel: np.ndarray
    lines: np.ndarray
    offset: np.ndarray
    store: np.ndarray
    starts: np.ndarray  # plus the copy's row count
    rel: np.ndarray
    key1: np.ndarray

    def copy(self, inst0: int, inst1: int) -> Copy:
        """The copy that starts at loop instance inst0."""
        return Copy(self.sel, self.lines, self.offset, self.store, self.starts, self.key0(inst0), self.key1, inst0,
                    inst1, self)

    def key0(self, inst0: int) -> np.ndarray:
        """The runs' loop instances in the copy that starts at inst0."""
        return np.where(self.rel >= 0, self.rel + inst0, self.rel)


class CopyBuffer:
    """Cuts the batches' SHARDS parts into copies at the starts of loop instances that are multiples of n, once a
    copy has min_rows rows (default MIN_COPY_ROWS)."""

    def __init__(self, n: int, min_rows: int | None = None) -> None:
        self.n = n
        self.min_rows = MIN_COPY_ROWS if min_rows is None else min_rows
        self.parts: list[tuple] = []
        self.rows = 0          # rows of the current copy so far
        self.inst0 = -1        # its first loop instance
        self.last_key = (-2, -2)  # (loop, iteration) of the last run seen
        self.prev: Copy | None = None
        self.template: _Template | None = None  # of the last batch of repeats
        self.open: _Template | None = None      # the current copy is this template's, instances from inst0

    def add(self, rows) -> list[tuple[Copy, bool]]:
        """A batch (source_rows.Rows, iteration mode): the copies it completes, each with whether it repeats
        the copy before it."""
        key0, key1, starts = rows.key0, rows.key1, rows.starts
        if not key0.shape[0]:
            return []
        before = np.concatenate([[self.last_key[0]], key0[:-1]])
        cut = np.flatnonzero((key0 >= 0) & (key0 % self.n == 0) & (key0 != before))
        if rows.copies:
            repeats = self._repeats(rows, cut)
            if repeats is not None:
                return repeats
        done = []
        lo = 0
        for r in cut.tolist() + [key0.shape[0]]:
            size = self.rows + int(starts[r]) - int(starts[lo]) if r < key0.shape[0] else 0
            if 0 < size < self.min_rows:
                continue  # too short yet: the copy goes on to a later cut
            if r > lo:
                self._part(rows, lo, r)
            if r < key0.shape[0]:
                if self.rows:
                    done.append(self._close(int(key0[r])))
                self.inst0 = int(key0[r])
            lo = r
        self.last_key = (int(key0[-1]), int(key1[-1]))
        return done

    def _repeats(self, rows, cut: np.ndarray) -> list[tuple[Copy, bool]] | None:
        """The copies of a batch of repeats when they are the decoder's (a cut at each repeat's start, each repeat
        long enough to be a copy, the repeats' other cuts too early in them to end a copy): made from one template
        per recording, so that no rows are joined and comparing two of them is comparing instances
        (Copy.same_as). None when they are not."""
        m = rows.copies
        nr, ns = rows.key0.shape[0] // m, rows.sel.shape[0] // m
        size = int(rows.starts[nr])
        head = cut % nr == 0
        inside = rows.starts[cut[~head]] - rows.starts[cut[~head] - cut[~head] % nr]
        if not np.array_equal(cut[head], np.arange(m) * nr) or (inside >= self.min_rows).any() \
                or size < self.min_rows or 0 < self.rows < self.min_rows:
            return None
        if self.template is None or self.template.recording != rows.recording:
            rel = np.where(rows.key0[:nr] >= 0, rows.key0[:nr] - rows.key0[0], -1)
            self.template = _Template(rows.recording, rows.sel[:ns], rows.lines[:ns], rows.offset[:ns],
                                      rows.store[:ns], np.append(rows.starts[:nr], size), rel, rows.key1[:nr])
        tpl, first = self.template, rows.key0[::nr].tolist()
        done = [self._close(first[0])] if self.rows else []
        for inst0, inst1 in zip(first[:-1], first[1:]):
            done.append(self._closed(tpl.copy(inst0, inst1)))
        t = tpl
        self.parts = [(t.sel, t.lines, t.offset, t.store, t.starts[:-1], t.key0(first[-1]), t.key1)]
        self.rows, self.inst0, self.open = size, first[-1], tpl
        self.last_key = (int(rows.key0[-1]), int(rows.key1[-1]))
        return done

    def finish(self) -> list[tuple[Copy, bool]]:
        """The last copy, if it has rows."""
        return [self._close(-1)] if self.rows else []

    def _part(self, rows, r0: int, r1: int) -> None:
        """Runs r0..r1 of the batch into the current copy (a run the batch boundary split is joined again)."""
        a, b = int(rows.starts[r0]), int(rows.starts[r1])
        i0, i1 = np.searchsorted(rows.sel, [a, b])
        shift = self.rows - a
        st, k0, k1 = rows.starts[r0:r1] + shift, rows.key0[r0:r1], rows.key1[r0:r1]
        if self.rows and r0 == 0 and (int(k0[0]), int(k1[0])) == self.last_key:
            st, k0, k1 = st[1:], k0[1:], k1[1:]
        self.parts.append((rows.sel[i0:i1] + shift, rows.lines[i0:i1], rows.offset[i0:i1], rows.store[i0:i1],
                           st, k0, k1))
        self.rows += b - a
        self.open = None

    def _close(self, inst1: int) -> tuple[Copy, bool]:
        """The current copy, complete (the next one begins at loop instance inst1)."""
        if self.open is not None:  # one repeat, nothing joined to it
            copy = self.open.copy(self.inst0, inst1)
        else:
            cols = [np.concatenate([p[i] for p in self.parts]) for i in range(7)]
            starts = np.append(cols[4], self.rows).astype(np.int64)
            copy = Copy(cols[0], cols[1], cols[2], cols[3], starts, cols[5].astype(np.int64),
                        cols[6].astype(np.int64), self.inst0, inst1)
        self.parts, self.rows, self.open = [], 0, None
        return self._closed(copy)

    def _closed(self, copy: Copy) -> tuple[Copy, bool]:
        """A complete copy, and whether it repeats the one before it."""
        same = copy.same_as(self.prev)
        self.prev = copy
        return copy, same


@numba.njit(cache=True, nogil=True)
def advance(starts, run_core, counters):
    """Each core's private position advanced over the runs (ALL_CORES: every core)."""
    for r in range(run_core.shape[0]):
        n = starts[r + 1] - starts[r]
        c = run_core[r]
        if c == ALL_CORES:
            counters += n
        else:
            counters[c] += n


@numba.njit(cache=True, nogil=True)
def _iterations_per_core(n, trip, sched, chunk, dstart, dcore, dptr, p):
    """Iterations each of p cores runs in loop instances 0..n-1 (CoreMap's decisions)."""
    out = np.zeros(p, np.int64)
    for lp in range(min(n, trip.shape[0])):
        for it in range(trip[lp]):
            c = iteration_core(lp, it, trip, sched, chunk, dstart, dcore, dptr, p)
            if c == ALL_CORES:
                out += 1
            elif 0 <= c < p:
                out[c] += 1
    return out


def even_split(cmap, n: int) -> bool:
    """Whether one period (loop instances 0..n-1) gives every core as many iterations: else the cores' private
    traces advance by different lengths per copy, so the shared trace does not repeat (jacobi-2d MEDIUM's 248
    rows on 16 cores) and ShardsReplay could never skip a copy; such core counts are fed batch by batch."""
    if cmap.cores == 1:
        return True
    per = _iterations_per_core(n, cmap.trip, cmap.sched, cmap.chunk, cmap.dstart, cmap.dcore, cmap.dptr, cmap.cores)
    return bool((per == per[0]).all())


class ShardsReplay:
    """Feeds one core count's SHARDS streams (shards_kernel.ShardsStreams) copy by copy, skipping the copies that
    repeat a copy whose end state equals its start state (see the module docstring)."""

    def __init__(self, shards, counters: np.ndarray, feed) -> None:
        self.shards, self.counters, self.feed_copy = shards, counters, feed
        self.norm: list[np.ndarray] | None = None  # the state at the current copy boundary (None: not taken)
        self.armed = False     # the state repeats: a copy equal to the last fed one need not be fed
        self.delta: list[np.ndarray] = []
        self.step = np.zeros_like(counters)  # each core's positions in the last fed copy
        self.held = 0          # copies not fed since the last fed one
        self.skipped = 0

    def feed(self, copy: Copy, same: bool) -> None:
        """The next copy; same: it repeats the previous one."""
        if self.armed and same:
            self.held += 1
            self.skipped += 1
            return
        self.unwind()
        norm0, start = self.norm, self.counters.copy()
        before = [t.copy() for t in self._tallies()] if norm0 is not None else []  # only a copy that may arm
        self.feed_copy(copy)
        self.step = self.counters - start
        sh = self.shards
        # every core as many positions further, a whole number of turns, and no pair waiting to be merged (so the
        # queues need no shifting, and every access to come follows every core's position)
        steady = sh.p == 1 or (bool((self.step == self.step[0]).all()) and int(self.step[0]) % sh.k == 0
                               and sh.idle())
        # only a copy that repeats the one before it can be followed by more: no state comparisons otherwise
        self.norm = self._norm() if same and steady and int(self.step[0]) > 0 else None
        self.armed = norm0 is not None and self.norm is not None and _equal(norm0, self.norm)
        if self.armed:
            self.delta = [a - _pad(b, a) for a, b in zip(self._tallies(), before)]

    def unwind(self) -> None:
        """Add the held copies' counts and shift the state's positions past them, as if they had been fed."""
        m = self.held
        if not m:
            return
        self.held = 0
        for t, d in zip(self._tallies(), self.delta):
            t += m * d
        sh, shift = self.shards, m * self.step
        self.counters += shift
        if sh.windows:
            sh.private.aux += shift[:, None]
        if sh.shared is not None and sh.s_windows:  # (the queues are empty: see feed)
            sh.shared.aux += int(shift[0]) // sh.k

    def _tallies(self) -> list[np.ndarray]:
        """The arrays a fed copy adds counts to (the live arrays or views of them: unwind adds in place)."""
        sh = self.shards
        out = [sh.private.hist, sh.private.hist_sum, sh.private.state[:, 3], sh.tally, sh.tail, sh.s_tally,
               sh.s_tail]
        if sh.shared is not None:
            out += [sh.shared.hist, sh.shared.hist_sum, sh.shared.state[:, 3]]
        for sink in sh.sinks:  # the per-set-class stacks (class_shards.ClassShards): their state follows the plain
            out += sink.counts()
        return out

    def _norm(self) -> list[np.ndarray]:
        """The state relative to each core's private position: what decides the counts of the accesses to come."""
        sh = self.shards
        out = []
        for c in range(sh.p):
            rel = (self.counters[c] - sh.private.aux[c]) if sh.windows else None
            out += _stack_norm(sh.private, c, rel, sh.look + 1)
        if sh.shared is None:
            return out
        rel = None
        if sh.s_windows:  # turns: a line's last use is near only within s_look turns of an access still to come
            t_now = int(self.counters.min()) // sh.k  # (the queues are empty: every access to come is after it)
            rel = t_now - sh.shared.aux[0]
        out += _stack_norm(sh.shared, 0, rel, sh.s_look + 1)
        for sink in sh.sinks:  # a sink whose state does not follow the plain stacks' (the per-instance stacks)
            out += sink.norm()
        return out


def _stack_norm(stacks, e: int, rel: np.ndarray | None, cap: int) -> list[np.ndarray]:
    """Stack e's lines by id: their rank in LRU order, their sharer sets, and their last-use positions relative
    to now (rel, capped where no access to come can be near)."""
    live = stacks.keys[e] != EMPTY
    keys = stacks.keys[e][live]
    order = np.argsort(keys)
    ranks = np.argsort(np.argsort(stacks.times[e][live]))
    out = [keys[order], ranks[order], stacks.sharers[e][live][order].ravel()]
    if rel is not None:
        out.append(np.minimum(rel[live], cap)[order])
    return out


def _equal(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    """Element-wise equal lists of arrays."""
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def _pad(b: np.ndarray, a: np.ndarray) -> np.ndarray:
    """b with a's shape (a tail array may have grown since b was copied: zeros on the right)."""
    if b.shape == a.shape:
        return b
    out = np.zeros_like(a)
    out[tuple(slice(0, s) for s in b.shape)] = b
    return out
