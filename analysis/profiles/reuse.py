"""Exact LRU stack (reuse) distances over a stream of cache-line ids, in O(N log M).

Design (why not a library): PARDA-style splay trees measured 0.9 M refs/s here, and no
maintained Python package streams exact stack distances. The engine keeps

* an open-addressing hash table line -> time of its last access (uint64 key + int32 time),
  after an optional run of dense slots, one per id below `dense` (ids from analysis/profiles/line_index.py),
  each in its own slot (ids numbered in order of first touch, so near ids share cache lines),
* the time axis (analysis/profiles/time_axis.py): a bitmap with a 1 at each line's
  last-access time, plus a Fenwick tree of per-64-bit-word counts, and
* nothing else: compaction renumbers each live key's time by its rank among the live
  marks (a prefix popcount), in one sequential pass over the hash table.

The distance of an access at time `now` to a line last seen at `t` is the number of
distinct lines touched after `t`: `live - prefix(t)`. Memory is O(distinct lines) (12 B per
hash slot + 3/16 B per time slot), never O(trace length). Kernels stop and return when a
table must grow; Python reallocates and calls again, which keeps every numba function
allocation-free.

The kernel (_process) reads each line id as lines[i] & line_mask (all ones, or without the
store tag of analysis/profiles/coherence.py, so tagged ids need no stripped copy). A hit moves
a mark from word a to now's word b. Its distance counts the marks after it: within a word one
popcount; up to NEAR_WORDS words back a popcount per word between (no tree); further back
`live` minus a prefix walk, which only reads committed words. The tree changes only for a mark
leaving a committed word (one walk), or entering one right after a compaction (which commits
every word). When use_stale, an access with stale[i] set whose line is in the stack is a
coherence miss: it moves to the top as a hit does, but its distance is infinite (counted cold,
and in state[5]). The slot of the access _AHEAD on is prefetched: the probes of cold and
long-unused lines miss every cache. Rare paths are calls; the per-access helpers are inlined
(a numba call taking arrays costs about 14 ns, the arrays' reference counts, more than an access),
and the kernel keeps no reference counts (_nrt=False).

Sharer sets: an engine made with `sharer_cores` (a shared trace's, with coherence) also keeps
every line's set of cores holding a valid copy beside its hash slot, so the write-invalidate
walk of analysis/profiles/coherence.py shares the engine's lookup (`feed_shared`). Access i is
by core pattern[i % len(pattern)] (pattern None otherwise: numba compiles that separately, so
the plain engine pays nothing); a hit whose core is not a sharer is stale and its index goes to
events. A store leaves only its core; a load adds it; a line never stored is valid everywhere (its
set holds the cores that touched it and a flag, bit `sharer_cores`, that says so). A store by a core
that holds the line while another core holds it too is an upgrade (an invalidation the store waits
for, though it hits): `upgrades` counts them per core, except a store of the core that took its copy
by a transfer since the line's last store (a read-modify-write of a line that moved: the transfer's
measured cost covers it; the sets' last word remembers that core).

Kernel arguments: tables, the engine's arrays (ReuseEngine._tables), and feed, the call's input
and options (ReuseEngine._run), are plain tuples: numba's dispatcher types a NamedTuple in Python
(1.6 us a call, against 0.15). pattern and retimes stay arguments of their own (numba prunes their
`is None` branches). _nrt=False: the inlined helpers' arrays took reference counts at every
access (20 against 49 M refs/s); the kernel allocates nothing.

Retimes (ReuseEngine.feed_runs, None otherwise): an access with retimes[i] >= 0 is counted and
its distance goes to out[retimes[i]]; one with retimes[i] = r < 0 is the last touch of a
segment whose u first touches were just fed, so they hold the top u live times, consecutive
(nothing in between killed one, and a compaction keeps them so): its line takes time now + r,
and the -r - 1 after it in the segment take the times above. That is the stack the whole
segment leaves; the bitmap, the tree and the histogram do not change.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.core_parts import CorePart
from analysis.profiles.kernel_ops import (EMPTY, EXACT_BITS, EXACT_LIMIT, N_BINS, STORE_TAG, SUB_BITS, free_slot, hash_shift_for, home_slot, popcount_swar, prefetch)
from analysis.profiles.profileset import ReuseProfile, histogram_bins
from analysis.profiles.runs import RUN_SHARE, LeadTrace, RunPlan, RunSegments, count, plan_runs
from analysis.profiles.sharers import sharer_words, update_sharers
from analysis.profiles.time_axis import (MAX_TIME_AXIS, MIN_TIME_AXIS, NEAR_WORDS, axis_words, commit_words, compact,
                                         target_axis, tree_add)
from common.errors import PptmcError

__all__ = ["EXACT_BITS", "EXACT_LIMIT", "N_BINS", "RUN_SHARE", "STORE_TAG", "SUB_BITS", "LeadTrace", "ReuseEngine",
           "profile_from_counters", "reuse_distances"]

_ALL_BITS = np.uint64(0xFFFFFFFFFFFFFFFF)
_UNTAGGED = ~STORE_TAG
_MAX_LOAD = 0.7
_NO_FLAGS = np.zeros(0, dtype=np.bool_)  # stale flags when coherence is off (never read)
_NO_SHARERS = np.zeros((0, 1), dtype=np.uint64)  # sharer sets of an engine without them
_NO_EVENTS = np.zeros(0, dtype=np.int64)
_AHEAD = 12  # accesses between a hash slot's prefetch and its probe


@numba.njit(cache=True, nogil=True, _nrt=False)
def _process(tables, feed, pattern, retimes):
    """Feed lines from state[3] on (module docstring: The kernel), compacting the time axis when
    it fills; stop early when a table must grow. Returns the next index. Arguments: module docstring."""
    keys, times, bits, tree, state, hist, hist_sum, sharers = tables
    lines, out, want_out, stale, use_stale, line_mask, events, limit, min_axis, dense, upgrades, flag = feed
    now, live, n_keys, i, c_hi, n_ev, hashed = state[0], state[1], state[2], state[3], state[4], state[6], state[7]
    mask = np.uint64(keys.shape[0] - dense - 1)  # the hashed slots follow the dense ones
    hash_shift = hash_shift_for(mask)
    base = np.uint64(dense)
    t_len = bits.shape[0] * 64
    n = lines.shape[0]
    q, plen = 0, 1
    if pattern is not None:
        plen = pattern.shape[0]
        q = i % plen
    s_words = np.uint64(sharers.shape[1])
    flat_sharers = sharers.reshape(-1)
    cb = now >> 6  # now's bitmap word is kept in cw (a register, not memory) until now leaves it
    cw = bits[cb] if cb < bits.shape[0] else np.uint64(0)
    c_hi = commit_words(bits, tree, c_hi, cb - NEAR_WORDS)  # the previous call may have ended on a new word
    while i < n:
        if now >= t_len:  # the time axis is full: compact it here unless it must grow (Python)
            if 4 * live >= MAX_TIME_AXIS or target_axis(live, min_axis) > t_len:
                break
            if cb < bits.shape[0]:  # (a call may start with now at the axis' end: then cw holds nothing)
                bits[cb] = cw
            now = compact(keys, times, bits, now, bits, tree)
            c_hi, cb, cw = (now >> 6) + 1, now >> 6, bits[now >> 6]  # the rebuilt tree counts every mark
        b = now >> 6
        if b != cb:
            cw, cb, c_hi = _enter_word(bits, tree, cw, cb, b, c_hi)
        if i + _AHEAD < n:  # the slot of a later access: cold lines' probes miss the caches
            ahead = _prefetch_slot(keys, times, lines[i + _AHEAD] & line_mask, base, hash_shift, mask)
            if pattern is not None:
                prefetch(flat_sharers, ahead * s_words)
        raw = lines[i]
        line = raw & line_mask
        slot = free_slot(keys, line, dense, hash_shift, mask)  # a dense id is its own slot
        if retimes is not None and retimes[i] < 0:  # a last touch to retime (module docstring)
            times[slot] = now + retimes[i]
            i += 1
            continue
        hit = keys[slot] == line
        if hit:
            d, cw = _hit_distance(bits, tree, cw, times[slot], b, live, c_hi)
            if use_stale and stale[i]:  # the stale copy's slot is reused as the line moves to the top
                d = -1
                state[5] += 1
        else:
            if line >= base:
                if hashed + 1 > limit:
                    break
                hashed += 1
            keys[slot] = line
            n_keys += 1
            live += 1
            d = -1
            tree_add(tree, b, c_hi, 1)
        if pattern is not None:
            n_ev = update_sharers(sharers, slot, pattern[q], hit, raw != line, events, n_ev, i, upgrades, flag)
            q += 1
            if q == plen:
                q = 0
        times[slot] = now
        cw |= np.uint64(1) << np.uint64(now & 63)
        now += 1
        if want_out:
            if retimes is not None:  # feed_runs: each counted access's distance goes to its place
                out[retimes[i]] = d
            else:
                out[i] = d
        count(d, hist, hist_sum)
        i += 1
    if cb < bits.shape[0]:
        bits[cb] = cw
    state[0], state[1], state[2], state[3], state[4], state[6], state[7] = now, live, n_keys, i, c_hi, n_ev, hashed
    return i


@numba.njit(cache=True, nogil=True, inline="always")
def _enter_word(bits, tree, cw, cb, b, c_hi):
    """Now has left word cb (held in cw) for word b: store cw, load b's, and commit the words
    fallen out of the near window; (cw, cb, c_hi) for word b."""
    bits[cb] = cw
    return bits[b], b, commit_words(bits, tree, c_hi, b - NEAR_WORDS)


@numba.njit(cache=True, nogil=True, inline="always")
def _prefetch_slot(keys, times, line, base, hash_shift, mask):
    """Start loading the home slot of a line (its own when dense); the slot."""
    slot = line
    if line >= base:
        slot = base + home_slot(line, hash_shift, mask)
    prefetch(keys, slot)
    prefetch(times, slot)
    return slot


@numba.njit(cache=True, nogil=True, inline="always")
def _hit_distance(bits, tree, cw, t, b, live, c_hi):
    """A hit on a line last touched at t, now in word b (cw: that word): take its mark off and
    count the marks after it (module docstring); (the distance, the new cw)."""
    one = np.uint64(1)
    full = np.uint64(0xFFFFFFFFFFFFFFFF)
    a = t >> 6
    tb = np.uint64(t & 63)
    if a == b:
        word = cw
        cw = word & ~(one << tb)
    else:
        word = bits[a]
        bits[a] = word & ~(one << tb)
    d = popcount_swar(word & ((full << tb) << one))  # marks strictly after t in its word
    if a != b:  # the mark moves between words: their counts change
        if b - a <= NEAR_WORDS:
            d += popcount_swar(cw)
            for w in range(a + 1, b):
                d += popcount_swar(bits[w])
        else:  # far apart: words up to a are committed
            d = live - popcount_swar(word & (full >> (np.uint64(63) - tb)))
            k = a
            while k > 0:
                d -= tree[k]
                k &= k - 1
        tree_add(tree, a, c_hi, -1)
        tree_add(tree, b, c_hi, 1)
    return d, cw


@numba.njit(cache=True, nogil=True)
def _rehash(keys, times, sharers, new_keys, new_times, new_sharers, new_dense):
    """Move every key (and its sharer set, if the engine keeps them) into a larger table, whose
    first new_dense slots are dense (see _process)."""
    mask = np.uint64(new_keys.shape[0] - new_dense - 1)
    hash_shift = hash_shift_for(mask)
    for s in range(keys.shape[0]):
        line = keys[s]
        if line == np.uint64(0xFFFFFFFFFFFFFFFF):
            continue
        slot = free_slot(new_keys, line, new_dense, hash_shift, mask)
        new_keys[slot] = line
        new_times[slot] = times[s]
        if sharers.shape[0]:
            for w in range(sharers.shape[1]):  # word by word: a row assignment made an array view per key
                new_sharers[slot, w] = sharers[s, w]


@numba.njit(cache=True, nogil=True)
def _relabel(keys, times, new_keys, new_times, at_least, delta, dense):
    """Copy the table into new_keys/new_times, adding delta to every line id >= at_least (all
    of them hashed: at_least and the ids it gives are at least `dense`)."""
    mask = np.uint64(new_keys.shape[0] - dense - 1)
    hash_shift = hash_shift_for(mask)
    for s in range(keys.shape[0]):
        line = keys[s]
        if line == np.uint64(0xFFFFFFFFFFFFFFFF):
            continue
        if line >= at_least:
            line += delta
        slot = free_slot(new_keys, line, dense, hash_shift, mask)
        new_keys[slot] = line
        new_times[slot] = times[s]


@numba.njit(cache=True, nogil=True)
def _holds(keys, lines, line_mask, dense):
    """Whether each of the lines (tag stripped by line_mask) is in the table."""
    mask = np.uint64(keys.shape[0] - dense - 1)
    hash_shift = hash_shift_for(mask)
    out = np.empty(lines.shape[0], dtype=np.bool_)
    for i in range(lines.shape[0]):
        line = lines[i] & line_mask
        out[i] = keys[free_slot(keys, line, dense, hash_shift, mask)] == line
    return out


class FirstTables(NamedTuple):
    """The first tables of `count` engines, one row each: hash keys and last-access times, sharer
    sets (words per line 0: none), the time axis' bitmap and tree, and the kernel state."""

    keys: np.ndarray
    times: np.ndarray
    sharers: np.ndarray
    bits: np.ndarray
    tree: np.ndarray
    state: np.ndarray


def _first_tables(count: int, initial_lines: int, words: int) -> FirstTables:
    """Empty tables for count engines of initial_lines lines (the hash table at most _MAX_LOAD full)."""
    cap = 1 << max(4, int(np.ceil(np.log2(max(initial_lines, 16) / _MAX_LOAD))))
    t_words = axis_words(max(MIN_TIME_AXIS, 2 * initial_lines))
    return FirstTables(np.full((count, cap), EMPTY, dtype=np.uint64), np.zeros((count, cap), dtype=np.int32),
                       np.zeros((count, cap if words else 0, words), dtype=np.uint64),
                       np.zeros((count, t_words), dtype=np.uint64), np.zeros((count, t_words + 1), dtype=np.int32),
                       np.zeros((count, 8), dtype=np.int64))


class ReuseEngine:
    """Streaming exact stack-distance engine; memory grows with distinct lines only."""

    def __init__(self, initial_lines: int = 1 << 12, sharer_cores: int = 0,
                 counters: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """sharer_cores > 0: also keep every line's sharer set among that many cores (feed_shared).
        counters: histogram counters (counts and distance sums, N_BINS + 1 each) to count into,
        shared by engines whose profiles are only wanted summed (set_classes: 118 KB an engine
        otherwise, for thousands of them); None: the engine's own."""
        self._adopt(_first_tables(1, initial_lines, sharer_words(sharer_cores)), 0, counters, sharer_cores)

    @classmethod
    def many(cls, count: int, initial_lines: int = 1 << 12, sharer_cores: int = 0,
             counters: tuple[np.ndarray, np.ndarray] | None = None) -> list[ReuseEngine]:
        """count engines as ReuseEngine(initial_lines, sharer_cores, counters) makes them, their first tables rows
        of one block per array (the set-class pass makes thousands of small engines: one allocation
        each spent more time in numpy than their first chunk's counting). A block is freed once every
        engine has outgrown its row."""
        tables = _first_tables(count, initial_lines, sharer_words(sharer_cores))
        engines = []
        for k in range(count):
            engine = cls.__new__(cls)
            engine._adopt(tables, k, counters, sharer_cores)
            engines.append(engine)
        return engines

    def _adopt(self, tables: FirstTables, k: int, counters: tuple[np.ndarray, np.ndarray] | None,
               sharer_cores: int = 0) -> None:
        """Take row k of the first tables, and the given histogram counters (None: its own)."""
        self._keys, self._times = tables.keys[k], tables.times[k]
        self._words = tables.sharers.shape[2]
        self._sharers = tables.sharers[k] if self._words else _NO_SHARERS
        self._flag = sharer_cores  # the sharer sets' never-stored bit, after the cores' bits
        self._upgrades = np.zeros(sharer_cores, dtype=np.int64)
        self._min_axis = MIN_TIME_AXIS  # read here, so a test can make compactions frequent
        self._bits, self._tree = tables.bits[k], tables.tree[k]
        self._dense = 0  # slots 0.. of the ids below this are dense (reserve_dense); the rest are hashed
        # now, live, n_keys, start, committed words, coherence misses, stale accesses found by feed_shared,
        # keys in the hashed slots
        self._state = tables.state[k]
        if counters is None:  # the last slot counts cold misses
            counters = np.zeros(N_BINS + 1, dtype=np.int64), np.zeros(N_BINS + 1, dtype=np.int64)
        self._hist, self._hist_sum = counters

    @property
    def distinct_lines(self) -> int:
        return int(self._state[1])

    @property
    def upgrades(self) -> np.ndarray:
        """Upgrades per core so far (feed_shared: stores to a line the core holds while another core holds it
        too; module docstring). A view: replay.Replay adds a repeat's counts to it."""
        return self._upgrades

    @property
    def nbytes(self) -> int:
        """Bytes held by the tables that grow with distinct lines."""
        return sum(a.nbytes for a in (self._keys, self._times, self._sharers, self._bits, self._tree))

    def copy(self, counters: tuple[np.ndarray, np.ndarray] | None = None) -> ReuseEngine:
        """An independent engine in the same state (continues exactly as this one would); counters: the
        histogram counters the copy counts into (as the constructor's), None: copies of this one's."""
        twin = ReuseEngine.__new__(ReuseEngine)
        given = {} if counters is None else {"_hist": counters[0], "_hist_sum": counters[1]}
        for name, value in vars(self).items():
            if name in given:  # taken as given, not copied only to be replaced (a ClassEngine forks one per class)
                setattr(twin, name, given[name])
            else:
                setattr(twin, name, value.copy() if isinstance(value, np.ndarray) else value)
        return twin

    def relabel(self, at_least: int, delta: int) -> None:
        """Add delta (mod 2^64) to every line id >= at_least seen so far.

        Distances depend only on which accesses touch the same line, so a relabelling that
        keeps distinct lines distinct leaves the engine exact; it lets core c's engine carry
        on as core c' (whose per-core offsets differ). Not for engines with sharer sets."""
        if self._words:
            raise ValueError("relabel: an engine with sharer sets (a shared trace's) is never relabelled")
        if at_least < self._dense:  # (a core's offset ids, from 2^41 on, are never dense)
            raise ValueError(f"relabel: ids from {at_least} would include dense ones (below {self._dense})")
        keys = np.full(self._keys.shape[0], EMPTY, dtype=np.uint64)
        times = np.zeros(self._times.shape[0], dtype=np.int32)
        _relabel(self._keys, self._times, keys, times, np.uint64(at_least), np.uint64(delta % (1 << 64)), self._dense)
        self._keys, self._times = keys, times

    def feed(self, lines: np.ndarray, stale: np.ndarray | None = None, tagged: bool = False) -> None:
        """Add accesses (cache-line ids, program order) to the stream.

        stale (bool per access, optional): the line was invalidated in this core's copy since
        its last access here, so a reuse is a coherence miss (infinite distance).
        tagged: the ids may carry analysis.profiles.coherence.STORE_TAG, which is ignored."""
        self._run(np.ascontiguousarray(lines, dtype=np.uint64), None, stale, tagged)

    def feed_distances(self, lines: np.ndarray, stale: np.ndarray | None = None, tagged: bool = False,
                       dtype: type = np.int64, out: np.ndarray | None = None) -> np.ndarray:
        """Like feed, and also return each access's distance (-1 = cold or coherence miss).

        dtype np.int32 halves what callers keep: distances are below the engine's 2^29 lines.
        out: a contiguous array of that dtype and the lines' length to write them to (returned)."""
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        if np.dtype(dtype) not in (np.dtype(np.int64), np.dtype(np.int32)):
            raise ValueError(f"dtype {dtype}: distances are returned as int64 or int32")
        if out is None:
            out = np.empty(lines.shape[0], dtype=dtype)
        elif out.dtype != np.dtype(dtype) or out.shape != lines.shape or not out.flags.c_contiguous:
            raise ValueError(f"feed_distances: out must be a contiguous {np.dtype(dtype)} array of {len(lines)}")
        self._run(lines, out, stale, tagged)
        return out

    def feed_runs(self, lines: np.ndarray | CorePart, lead: LeadTrace, rows: np.ndarray, breaks: np.ndarray,
                  tagged: bool = False) -> np.ndarray:
        """Like feed_distances (int32), for accesses that are stretches of another trace (the lead):
        segment s, lines[breaks[s]:breaks[s+1]], is the lead's rows rows[s].. in order, and within
        a segment line ids correspond one to one to the lead's. lines may be a whole CorePart of
        the lead's chunk (its rows and breaks given): its ids are read in place.

        Why: a private trace is stretches of the sequential one. An access that reuses a line
        touched earlier in its segment does so at the same distance in both traces (every line
        between was touched in the segment). The others are first touches: fed here, their
        distance is the stack above them plus the lines seen so far in the segment. Then the
        segment's last touches, in order, take the times its first touches were given (the kernel's
        retimes), which puts the stack in its true order. A segment of long reuses costs the
        engine its distinct lines and a retiming of each, not its length."""
        given = rows
        rows = np.ascontiguousarray(rows, dtype=np.int64)  # (a new view even when no copy is needed)
        breaks = np.ascontiguousarray(breaks, dtype=np.int64)
        n = len(lines)
        if len(breaks) != len(rows) + 1 or breaks[-1] != n:
            raise ValueError(f"feed_runs: breaks ({len(breaks)}) must bound the {len(rows)} segments of "
                             f"{n} accesses")
        if self._words:
            raise ValueError("feed_runs: an engine with sharer sets is fed by feed_shared")
        if isinstance(lines, CorePart):
            if lines.start or lines.stop != n or (given is not lines.rows and not np.array_equal(lines.rows, rows)):
                raise ValueError("feed_runs: a CorePart is followed whole, through its own stretches")
            src, at, offrows, offset = lines.ids, rows, lines.offrows, np.uint64(lines.offset)
        else:
            src, at = np.ascontiguousarray(lines, dtype=np.uint64), breaks[:-1]
            offrows, offset = np.zeros(0, dtype=np.int64), np.uint64(0)
        plan = RunPlan(np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32),
                       np.empty(n, np.uint64), np.empty(n, dtype=np.int64))
        m = plan_runs(RunSegments(src, at, offrows, offset, rows, breaks), lead, plan, self._hist, self._hist_sum)
        self._run(plan.lines[:m], plan.dist, tagged=tagged, retimes=plan.pos[:m])
        return plan.dist

    @property
    def coherence_misses(self) -> int:
        return int(self._state[5])

    def reclassify(self, moved: np.ndarray, moved_sum: np.ndarray) -> None:
        """Count accesses already histogrammed at finite distances (moved[bin], and their
        distance sums for inexact bins) as coherence misses instead: the stack state is the
        same either way (analysis/profiles/coherence.py finds them after the interleaving)."""
        n = int(moved.sum())
        self._hist[:N_BINS] -= moved
        self._hist_sum[:N_BINS] -= moved_sum
        self._hist[N_BINS] += n
        self._state[5] += n

    def holds(self, lines: np.ndarray, tagged: bool = False) -> np.ndarray:
        """Whether each line (store tag ignored when tagged) has been seen (bool per line)."""
        return _holds(self._keys, np.ascontiguousarray(lines, dtype=np.uint64), _UNTAGGED if tagged else _ALL_BITS,
                      self._dense)

    def stack_depths(self) -> tuple[np.ndarray, np.ndarray]:
        """(line ids, stack depths) of every line seen: how many distinct lines were touched after
        each one's last access (what its distance would be if it were touched next)."""
        held = self._keys != EMPTY
        lines, times = self._keys[held], self._times[held]
        order = np.argsort(times, kind="stable")
        depths = np.empty(len(lines), dtype=np.int64)
        depths[order] = np.arange(len(lines) - 1, -1, -1)
        return lines, depths

    def tally(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the histogram counters (counts and distance sums, cold slot last)."""
        return self._hist.copy(), self._hist_sum.copy()

    def add_tally(self, counts: np.ndarray, sums: np.ndarray) -> None:
        """Add histogram counters (a difference of two tally() results: the accesses of a replayed
        window, whose distances equal those of the window it repeats)."""
        self._hist += counts
        self._hist_sum += sums

    def feed_shared(self, lines: np.ndarray, core_pattern: np.ndarray) -> np.ndarray:
        """feed(lines, tagged=True) of a run of a shared trace whose access i is by core
        core_pattern[i % len(core_pattern)], keeping every line's sharer set (write-invalidate,
        see the module docstring); returns the indices of the stale accesses (a core touching a line it
        held and another core stored since). For engines made with sharer_cores."""
        if not self._words:
            raise ValueError("feed_shared: make the engine with sharer_cores")
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        events = np.empty(lines.shape[0], dtype=np.int64)
        self._run(lines, None, None, True, np.ascontiguousarray(core_pattern, dtype=np.int64), events)
        return events[:int(self._state[6])]

    def _run(self, lines: np.ndarray, out: np.ndarray | None, stale: np.ndarray | None = None,
             tagged: bool = False, pattern: np.ndarray | None = None, events: np.ndarray = _NO_EVENTS,
             retimes: np.ndarray | None = None) -> None:
        """Drive the kernel, growing tables whenever it stops early."""
        want = out is not None
        buf = out if want else np.empty(0, dtype=np.int64)
        use_stale = stale is not None
        if use_stale and len(stale) != len(lines):
            raise ValueError(f"stale flags ({len(stale)}) and lines ({len(lines)}) differ in length")
        flags = np.ascontiguousarray(stale, dtype=np.bool_) if use_stale else _NO_FLAGS
        if self._words and pattern is None and lines.shape[0]:
            raise ValueError("an engine with sharer sets is fed by feed_shared")
        self._state[3] = 0
        self._state[6] = 0
        mask = _UNTAGGED if tagged else _ALL_BITS
        # out receives distances (-1 cold) when want; the hashed slots may hold up to the key limit
        while _process(self._tables(), (lines, buf, want, flags, use_stale, mask, events, self._key_limit(),
                                        self._min_axis, self._dense, self._upgrades, self._flag),
                       pattern, retimes) < lines.shape[0]:
            if self._state[7] + 1 > self._key_limit():
                self._grow_hash()
            if self._state[0] >= self._bits.shape[0] * 64:
                self._compact()

    def _tables(self) -> tuple:
        """The arrays, for the kernel (made anew at each call: the tables are reallocated as they grow).
        state = [now, live, n_keys, start, committed words, coherence misses, n_events, hashed keys];
        hist's last slot counts cold misses."""
        return (self._keys, self._times, self._bits, self._tree, self._state, self._hist, self._hist_sum,
                self._sharers)

    def _key_limit(self) -> int:
        return int((self._keys.shape[0] - self._dense) * _MAX_LOAD)

    def _grow_hash(self) -> None:
        """Double the hashed slots."""
        self._resize(self._dense, 2 * (self._keys.shape[0] - self._dense))

    def reserve_dense(self, ids: int) -> None:
        """Give every line id below `ids` its own slot (ids from a LineIndex: dense, numbered
        from 0): no hashing for them, and ids touched together sit together. Grows by at least
        doubling, so reserving as ids arrive costs O(1) per id."""
        if ids > self._dense:
            self._resize(max(ids, 2 * self._dense), self._keys.shape[0] - self._dense)

    def _resize(self, dense: int, hashed: int) -> None:
        """Move the table to `dense` dense slots followed by `hashed` (a power of two) hashed ones."""
        cap = dense + hashed
        keys = np.full(cap, EMPTY, dtype=np.uint64)
        times = np.zeros(cap, dtype=np.int32)
        sharers = np.zeros((cap, self._words), dtype=np.uint64) if self._words else _NO_SHARERS
        _rehash(self._keys, self._times, self._sharers, keys, times, sharers, dense)
        self._keys, self._times, self._sharers, self._dense = keys, times, sharers, dense
        self._state[7] = int(np.count_nonzero(keys[dense:] != EMPTY))

    def _compact(self) -> None:
        """Renumber the time axis; size it at a multiple of the live lines so compaction is amortised O(1)."""
        live = int(self._state[1])
        if 4 * live >= MAX_TIME_AXIS:
            raise PptmcError(f"{live} distinct cache lines: above the engine's 2^29 limit (int32 times); "
                             f"profile a smaller input or a larger --line-size")
        n = max(int(target_axis(live, self._min_axis)), self._bits.shape[0] * 64)  # never shrink: the renumbering needs the room
        if n == self._bits.shape[0] * 64:
            bits, tree = self._bits, self._tree  # in place: no allocation
        else:
            bits, tree = np.empty(n // 64, dtype=np.uint64), np.empty(n // 64 + 1, dtype=np.int32)
        self._state[0] = compact(self._keys, self._times, self._bits, int(self._state[0]), bits, tree)
        self._state[4] = (int(self._state[0]) >> 6) + 1  # the rebuilt tree counts every mark: all committed
        self._bits, self._tree = bits, tree

    def histogram(self) -> ReuseProfile:
        """The reuse profile of everything fed so far."""
        return profile_from_counters(self._hist, self._hist_sum, self.coherence_misses)


def profile_from_counters(hist: np.ndarray, hist_sum: np.ndarray, coherence: int,
                          paths: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> ReuseProfile:
    """The ReuseProfile of an engine's histogram counters (counts and distance sums per bin, cold
    slot last; the kernel skips exact bins' sums), with `coherence` of its cold accesses and, for
    write-back profiles, the bins' turnover sums, turnover x removal-position sums and gaps with turnover
    (kept only where some turnover is non-zero)."""
    counts = hist[:N_BINS]
    sums = hist_sum[:N_BINS].copy()
    sums[:EXACT_LIMIT] = counts[:EXACT_LIMIT] * np.arange(EXACT_LIMIT)
    lower, upper = histogram_bins(N_BINS, EXACT_LIMIT, EXACT_BITS, SUB_BITS)
    nz = np.nonzero(counts)[0]
    kept = paths is not None and paths[0][nz].any()
    turn, position, moving = (a[nz].copy() if kept else None for a in (paths or (None,) * 3))
    return ReuseProfile(lower=lower[nz].copy(), upper=upper[nz].copy(), count=counts[nz].copy(),
                        dist_sum=sums[nz].copy(), cold=int(hist[N_BINS]), total=int(counts.sum() + hist[N_BINS]),
                        coherence=int(coherence), turnover_sum=turn, position_sum=position,
                        moving_count=moving)


def reuse_distances(lines: np.ndarray) -> np.ndarray:
    """Stack distance of every access in an in-memory array of line ids (-1 = cold)."""
    return ReuseEngine(initial_lines=max(16, min(len(lines), 1 << 20))).feed_distances(lines)
