"""The SHARDS samples of one core count in two fused numba kernels per batch (analysis/sampling/source.py).

Source sampling feeds every sampled (row, core) pair to its core's private stack, and the round-robin merge
of those pairs to the shared stack with write-invalidate coherence. This module does that with one kernel
that places the pairs and feeds them to the private stacks (`feed_pairs`), and one that merges the
per-core queues by round-robin key and feeds the shared stack (`release`), instead of a dozen array
passes and three engine calls per batch. The results are those of analysis.profiles.reuse.ReuseEngine and
analysis.profiles.coherence.Directory, bit for bit (rate 1 equals the exact ProfileSet: tests/test_source_sampling.py):

* the stacks (analysis/sampling/shards/stacks.py): p private ones and, for more than one core, the shared one, whose
  slots also keep each line's sharer set (the Directory's rules: all cores until the first store, a store
  leaves only its core, a load adds its core; an access by a core not in the set is stale);
* the pairs' private distances, gaps and store tags wait in per-core queues (each in its core's order)
  until every core's running count has passed them in the round-robin order (see analysis/sampling/source.py):
  chains of blocks of one pool, spilled to disk beyond a memory budget (analysis/sampling/shards/queues.py);
* a stale shared access with a finite private distance is a coherence miss: its private histogram entry
  moves to the cold slot at once (what ReuseEngine.reclassify does in bulk);
* the windows' SHARDS tallies (near samples, their coherence misses, the far samples' distances) are
  counted as the samples pass.

The kernels take their state bundled (NamedTuples of arrays: PairBatch, StackArrays, Queues, Tallies, and
the scalars of ShardsConfig) and keep each stack's scalar state in registers (stacks.Regs); their loops run
without reference counting (stacks.hot_loop).
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.private_traces import ALL_CORES
from analysis.sampling.shards.queues import HB, HI, QueuePool, q_advance, q_push, q_room
from analysis.sampling.shards.stacks import (DONE, EMPTY, GROW_AXIS, GROW_QUEUE, GROW_TABLE, GROW_TAIL, LOAD_QUEUE, LOG_FULL,
                                      RENUMBER, Stacks, hot_helper, hot_loop, load_regs, renumber, room, store_regs,
                                      touch, uncount)

TAG = np.uint64(1 << 63)  # a store's line id in the queues (as analysis.profiles.reuse.STORE_TAG)
LOG_ROWS = 1 << 16  # entries of the samples' log (2.5 MiB): the kernels stop for the sinks to drain a full one


class PairBatch(NamedTuple):
    """A batch's sampled rows (sel, their lines without offset, offset and store flags) over its runs (starts
    plus len, the core of each); step: the shift of the per-core offset (OFFSET_BITS - line shift)."""

    sel: np.ndarray
    lines: np.ndarray
    offset: np.ndarray
    store: np.ndarray
    starts: np.ndarray
    run_core: np.ndarray
    step: np.uint64


class Log(NamedTuple):
    """The SHARDS samples in the order the kernels finish them (cfg.log; for the per-set-class stacks,
    analysis/sampling/shards/class_shards.py; the per-instance stacks, group_shards.py): core, line (with offset), private
    gap, coherence miss, shared turn gap (-1: cold or no shared windows), store (1: a store, tagged only with
    coherence); n[0] entries. Private samples are logged when placed with one core, else
    when released (every core's in its order, all in the shared trace's order); a kernel stops with LOG_FULL
    for the caller to drain a full log."""

    core: np.ndarray
    line: np.ndarray
    gap: np.ndarray
    coh: np.ndarray
    tg: np.ndarray
    st: np.ndarray
    n: np.ndarray


def empty_log(size: int = 0) -> Log:
    """A Log with room for `size` entries."""
    return Log(np.zeros(size, np.int64), np.zeros(size, np.uint64), np.zeros(size, np.int64),
               np.zeros(size, np.int64), np.zeros(size, np.int64), np.zeros(size, np.int64), np.zeros(1, np.int64))


class Tallies(NamedTuple):
    """The windows' SHARDS tallies, per core (tally: [near samples, their coherence misses, far coherence
    misses]; tail: far samples per distance + 1) and of the shared trace (s_tally, s_tail); the samples' log."""

    tally: np.ndarray
    tail: np.ndarray
    s_tally: np.ndarray
    s_tail: np.ndarray
    log: Log


class ShardsConfig(NamedTuple):
    """The scalars of one core count: cores, references per turn, windows' lookbacks (private positions,
    shared turns), coherence, windows; account: tally the private samples when placed (no coherence walk
    follows); queued: queue them for the shared stack."""

    p: int
    k: int
    look: int
    s_look: int
    coherent: bool
    windows: bool
    s_windows: bool
    account: bool
    queued: bool
    log: bool


@numba.njit(cache=True, nogil=True, inline="always")
def rr_key(pos, core, p, k):
    """Place of core `core`'s private position `pos` in the round-robin shared trace (k per turn), as one int64:
    (turn, core, position) in lexicographic order (see analysis/sampling/source.py)."""
    if k == 1:
        return pos * p + core
    return ((pos // k) * p + core) * k + pos % k


@numba.njit(cache=True, nogil=True)
def feed_pairs(batch, counters, resume, st, qs, tl, cfg):
    """Place the batch's sampled rows on the cores running them, core by core (its stack's state in
    registers): each pair's private position (counters: each core's, advanced over its runs), stack distance
    and, with windows, gap to the line's previous use in private positions; tally it (cfg.account) and queue
    it (cfg.queued). resume = [core, run, sampled row (-1: the core's first), core's position at that run] to
    start from. Returns DONE or what to grow (resume then says where it stopped)."""
    while True:
        status = _feed_cores(batch, counters, resume, st, qs, tl, cfg)
        if status != RENUMBER:
            return status
        renumber(st, resume[0])


@hot_loop
def _feed_cores(batch, counters, resume, st, qs, tl, cfg):
    """feed_pairs' loop, from resume on; also stops with RENUMBER (resume[0]: the stack)."""
    for c in range(resume[0], cfg.p):
        status = _feed_core(batch, counters, resume, st, qs, tl, cfg, c)
        if status != DONE:
            return status
    resume[0], resume[1], resume[2], resume[3] = cfg.p, 0, -1, 0
    return DONE


@hot_helper
def _feed_core(batch, counters, resume, st, qs, tl, cfg, c):
    """feed_pairs for core c."""
    sel, starts, run_core = batch.sel, batch.starts, batch.run_core
    m = sel.shape[0]
    fresh = c != resume[0] or resume[2] < 0
    r0 = 0 if fresh else resume[1]
    j = -1 if fresh else resume[2]
    q = counters[c] if fresh else resume[3]
    regs = load_regs(st, c)
    for r in range(r0, run_core.shape[0]):
        core = run_core[r]
        if core != c and core != ALL_CORES:
            continue
        a = starts[r]
        b = starts[r + 1]
        if j < 0:
            j = np.searchsorted(sel, a)  # the first selected row at or after a
        while j < m and sel[j] < b:
            status = _pair_room(st, qs, tl, cfg, c, regs)
            if status != DONE:
                store_regs(st, c, regs)
                resume[0], resume[1], resume[2], resume[3] = c, r, j, q
                return status
            regs = _place(batch, st, qs, tl, cfg, c, j, q + sel[j] - a, regs)
            j += 1
        j = -1
        q += b - a
    store_regs(st, c, regs)
    counters[c] = q
    return DONE


@hot_helper
def _pair_room(st, qs, tl, cfg, c, regs):
    """DONE when core c's stack, queue, tail and log can take one more pair, else what to grow or drain (or
    RENUMBER)."""
    status = room(regs, st.bits.shape[1] * 64)
    if status == DONE and cfg.queued:
        status = q_room(qs, c)
    if status == DONE and cfg.account and regs.live + 1 >= tl.tail.shape[1]:  # a distance is below live
        status = GROW_TAIL
    if status == DONE and cfg.log and not cfg.queued and tl.log.n[0] >= tl.log.core.shape[0]:
        status = LOG_FULL
    return status


@hot_helper
def _place(batch, st, qs, tl, cfg, c, j, pos, regs):
    """Sampled row j on core c at private position pos: its stack distance, gap, tally and queue entry;
    returns the stack's registers after it."""
    x = batch.lines[j] + (np.uint64(c) << batch.step) * np.uint64(batch.offset[j])
    slot, d, regs = touch(st, c, x, regs)
    gap = 0
    if cfg.windows:
        gap = pos - st.aux[c, slot] if d >= 0 else -1  # a private stack's cold access is a first use
        st.aux[c, slot] = pos
    if cfg.account:
        _tally(tl.tally, tl.tail, c, gap, cfg.look, False, d)
    if cfg.log and not cfg.queued:
        _log(tl.log, c, x, gap, False, -1, batch.store[j])
    if cfg.queued:
        q_push(qs, c, pos, x | (TAG if cfg.coherent and batch.store[j] else np.uint64(0)), d, gap)
    return regs


@hot_helper
def _tally(tally, tail, row, gap, look, coh, dist):
    """A SHARDS sample's window tally: near (gap at most look): counted, with whether it is a coherence miss;
    far: its coherence miss counted, its distance + 1 (0: coherence miss or cold) tallied."""
    if 0 <= gap <= look:
        tally[row, 0] += 1
        tally[row, 1] += coh
    else:
        tally[row, 2] += coh
        tail[row, 0 if coh else dist + 1] += 1


@numba.njit(cache=True, nogil=True)
def release(limit, qs, sh, pv, tl, cfg):
    """Merge the queued pairs whose round-robin key is below limit into shared-trace order and feed them to
    the shared stack (stack 0 of sh): with coherence, its sharer sets find the stale accesses, a stale
    one with a finite private distance is a coherence miss (moved to the cold slot of its core's private
    histogram, pv) and the pairs are tallied for the private estimates here (windows); with shared windows
    each access's turn gap and shared distance is tallied for the shared estimate. Returns DONE
    or what to grow, load or drain (the queues' heads say where it stopped)."""
    head = np.full(cfg.p, np.iinfo(np.int64).max, np.int64)  # each core's next key
    for c in range(cfg.p):
        if qs.ctl[c, HB] >= 0:
            head[c] = rr_key(qs.pos[qs.ctl[c, HB], qs.ctl[c, HI]], c, cfg.p, cfg.k)
    while True:
        status = _merge(limit, head, qs, sh, pv, tl, cfg)
        if status != RENUMBER:
            return status
        renumber(sh, 0)


@hot_loop
def _merge(limit, head, qs, sh, pv, tl, cfg):
    """release's loop over the pairs in key order (head: each core's next key); also stops with RENUMBER."""
    big = np.iinfo(np.int64).max
    regs = load_regs(sh, 0)
    while True:
        best, best_key = -1, limit
        for c in range(cfg.p):
            if head[c] < best_key:
                best, best_key = c, head[c]
        status = _release_room(sh, pv, tl, cfg, best, regs)
        if status != DONE:
            store_regs(sh, 0, regs)
            return max(status, DONE)
        regs = _release_pair(qs, sh, pv, tl, cfg, best, qs.ctl[best, HB], qs.ctl[best, HI], regs)
        if q_advance(qs, best) != DONE:  # the next pairs are on disk
            store_regs(sh, 0, regs)
            return LOAD_QUEUE
        b = qs.ctl[best, HB]
        head[best] = rr_key(qs.pos[b, qs.ctl[best, HI]], best, cfg.p, cfg.k) if b >= 0 else big


@hot_helper
def _release_room(sh, pv, tl, cfg, best, regs):
    """DONE when pair of core best can be released (-1: no pair is below the limit), else what to grow (or
    RENUMBER)."""
    if best < 0:
        return -1
    status = room(regs, sh.bits.shape[1] * 64)
    if status == DONE and cfg.windows and cfg.coherent and pv.state[best, 1] + 1 >= tl.tail.shape[1]:
        status = GROW_TAIL  # a private distance is below its stack's live lines
    if status == DONE and cfg.s_windows and regs.live + 1 >= tl.s_tail.shape[1]:
        status = GROW_TAIL
    if status == DONE and cfg.log and tl.log.n[0] >= tl.log.core.shape[0]:
        status = LOG_FULL
    return status


@hot_helper
def _release_pair(qs, sh, pv, tl, cfg, c, b, i, regs):
    """Feed core c's queued pair (block b, index i) to the shared stack, with its coherence and window tallies;
    returns the shared stack's registers after it."""
    raw = qs.line[b, i]
    x = raw & ~TAG
    dist, gap = qs.dist[b, i], qs.gap[b, i]
    slot, d, regs = touch(sh, 0, x, regs)
    coh, tg = False, -1
    if cfg.coherent:  # analysis.profiles.coherence.Directory's rules on the stack's sharer sets
        coh = _coherence_miss(sh.sharers, slot, c, raw != x, d) and dist >= 0
        if coh:  # ReuseEngine.reclassify, at once
            _reclassify(pv, c, dist)
        if cfg.windows:
            _tally(tl.tally, tl.tail, c, gap, cfg.look, coh, dist)
    if cfg.s_windows:
        pos = qs.pos[b, i]
        turn = pos if cfg.k == 1 else pos // cfg.k
        tg = turn - sh.aux[0, slot] if d >= 0 else -1
        sh.aux[0, slot] = turn
        _tally(tl.s_tally, tl.s_tail, 0, tg, cfg.s_look, False, d)
    if cfg.log:
        _log(tl.log, c, x, gap, coh, tg, raw != x)
    return regs


@hot_helper
def _log(log, c, x, gap, coh, tg, store):
    """Append one sample to the log (room made by the caller)."""
    n = log.n[0]
    log.core[n], log.line[n], log.gap[n], log.coh[n], log.tg[n] = c, x, gap, 1 if coh else 0, tg
    log.st[n] = 1 if store else 0
    log.n[0] = n + 1


@hot_helper
def _coherence_miss(sharers, slot, c, store, d):
    """Whether core c's access (d: its shared distance, -1 cold) to the line in slot is stale; the line's sharer
    set updated: a store leaves only c, a load adds c, a first use is valid everywhere until its first store."""
    one = np.uint64(1)
    w = c >> 6
    bit = one << np.uint64(c & 63)
    stale = d >= 0 and (sharers[0, slot, w] & bit) == 0
    if store:  # only this core's copy stays valid
        for v in range(sharers.shape[2]):
            sharers[0, slot, v] = 0
        sharers[0, slot, w] = bit
    elif d >= 0:
        sharers[0, slot, w] |= bit
    else:  # valid wherever it is touched until its first store
        for v in range(sharers.shape[2]):
            sharers[0, slot, v] = EMPTY
    return stale


@hot_helper
def _reclassify(pv, c, dist):
    """Core c's private access at distance dist is a coherence miss: from its bin to the cold slot."""
    uncount(pv, c, dist)
    pv.state[c, 3] += 1


class ShardsStreams:
    """One core count's SHARDS samples: p private stacks, the per-core queues of the round-robin merge, the
    shared stack with its sharer sets, and the windows' SHARDS tallies (see the module docstring)."""

    def __init__(self, p: int, k: int, coherence: bool, windows: bool, look: int, s_windows: bool,
                 s_look: int, sinks: tuple = (), budget: int = 1 << 30, spill_dir: str | None = None) -> None:
        """sinks: objects whose drain(Log) takes the samples after each kernel call and whenever the log fills
        (the per-set-class stacks); budget, spill_dir: bytes of queued pairs kept in memory, and where the rest
        spills (queues.QueuePool)."""
        self.p, self.k, self.look, self.s_look = p, k, look, s_look
        self.sinks = tuple(sinks)
        self.log = empty_log(LOG_ROWS if self.sinks else 0)
        self.coherent, self.windows, self.s_windows = coherence and p > 1, windows, s_windows
        self.private = Stacks(p)
        self.shared = Stacks(1, p if self.coherent else 0) if p > 1 else None
        self.pool = QueuePool(p, budget, spill_dir)
        # per core: [near samples, their coherence misses, far coherence misses]; far samples per distance + 1
        self.tally, self.tail = np.zeros((p, 3), np.int64), np.zeros((p, 64), np.int64)
        self.s_tally, self.s_tail = np.zeros((1, 3), np.int64), np.zeros((1, 64), np.int64)
        self.resume = np.zeros(4, np.int64)
        self.config = ShardsConfig(p, k, look, s_look, self.coherent, windows, s_windows,
                                   windows and not self.coherent, self.shared is not None, bool(self.sinks))

    def idle(self) -> bool:
        """Whether no pair waits for the merge."""
        return self.pool.idle()

    def tallies(self) -> Tallies:
        """The tallies' arrays (which _grow replaces), for the kernels."""
        return Tallies(self.tally, self.tail, self.s_tally, self.s_tail, self.log)

    def feed(self, batch: PairBatch, counters: np.ndarray) -> None:
        """A batch's sampled rows over its runs: fed to the private stacks and queued; counters advanced over
        the runs; the queued pairs every core has passed are released to the shared stack."""
        self.resume[:] = (0, 0, -1, 0)
        while True:
            status = feed_pairs(batch, counters, self.resume, self.private.arrays(), self.pool.arrays(),
                                self.tallies(), self.config)
            if status == DONE:
                break
            self._grow(status, self.private)
        if self.config.queued:
            self.release(counters)
        else:
            self._drain()

    def release(self, counters: np.ndarray | None) -> None:
        """Feed the shared stack the queued pairs before every core's next one (counters; None: all)."""
        big = np.iinfo(np.int64).max
        limit = big if counters is None else min(int(rr_key(int(x), c, self.p, self.k))
                                                 for c, x in enumerate(counters.tolist()))
        while True:
            status = release(limit, self.pool.arrays(), self.shared.arrays(), self.private.arrays(), self.tallies(),
                             self.config)
            if status == DONE:
                break
            self._grow(status, self.shared)
        self._drain()

    def _drain(self) -> None:
        """Hand the logged samples to the sinks; the log empties."""
        if self.sinks and self.log.n[0]:
            for sink in self.sinks:
                sink.drain(self.log)
            self.log.n[0] = 0

    def _grow(self, status: int, stacks: Stacks) -> None:
        """Make room for what a kernel stopped on (or load or drain)."""
        if status == LOG_FULL:
            self._drain()
        elif status == LOAD_QUEUE:
            self.pool.load()
        elif status in (GROW_TABLE, GROW_AXIS):
            stacks.grow(status)
        elif status == GROW_TAIL:  # distances up to the stacks' live lines
            self.tail, self.s_tail = (np.concatenate([t, np.zeros_like(t)], axis=1) for t in (self.tail, self.s_tail))
        elif status == GROW_QUEUE:  # no free block for a core's queue: spill or grow the pool
            self.pool.make_room()

    def tails(self) -> tuple[list[tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray]]:
        """The far SHARDS samples' distances (-1: coherence miss or cold) and how many had each, ascending: per
        core, and the shared trace's."""
        def of(row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            nz = np.flatnonzero(row)
            return nz - 1, row[nz]

        return [of(self.tail[c]) for c in range(self.p)], of(self.s_tail[0])
