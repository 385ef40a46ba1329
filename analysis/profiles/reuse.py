"""Exact LRU stack (reuse) distances over a stream of cache-line ids, in O(N log M).

Design (why not a library): PARDA-style splay trees measured 0.9 M refs/s here, and no
maintained Python package streams exact stack distances. The engine keeps

* an open-addressing hash table line -> time of its last access (uint64 key + int32 time),
  after an optional run of dense slots, one per id below `dense` (ids from analysis/profiles/line_index.py),
* a bitmap over the time axis with a 1 at each line's last-access time, plus a Fenwick
  tree of per-64-bit-word counts (64x smaller than a Fenwick over times, so it stays in
  cache; a prefix count is a Fenwick walk plus one popcount), and
* nothing else: compaction renumbers each live key's time by its rank among the live
  marks (a prefix popcount), in one sequential pass over the hash table.

The distance of an access at time `now` to a line last seen at `t` is the number of
distinct lines touched after `t`: `live - prefix(t)`. When the time axis fills up, the
live times are renumbered 0..M-1 (order kept) and the bitmap and tree rebuilt, so memory
is O(distinct lines) (12 B per hash slot + 3/16 B per time slot), never
O(trace length). Kernels stop and return when a table must grow;
Python reallocates and calls again, which keeps every numba function allocation-free.

An engine made with `sharer_cores` (a shared trace's, with coherence) also keeps every
line's set of cores holding a valid copy beside its hash slot, so the write-invalidate walk
of analysis/profiles/coherence.py shares the engine's lookup (`feed_shared`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from analysis.profiles.core_parts import CorePart, add_offsets
from analysis.profiles.kernel_ops import (EMPTY, EXACT_BITS, EXACT_LIMIT, N_BINS, STORE_TAG, SUB_BITS, bin_of,
                                          bit_length, free_slot, hash_shift_for, home_slot, popcount_swar, prefetch)
from analysis.profiles.profileset import ReuseProfile, histogram_bins
from common.errors import PptmcError

_ALL_BITS = np.uint64(0xFFFFFFFFFFFFFFFF)
_UNTAGGED = ~STORE_TAG
_MAX_LOAD = 0.7
_MIN_TIME_AXIS = 1 << 16
_MAX_TIME_AXIS = (1 << 31) - (1 << 27)  # times are int32; a multiple of every _axis_length step
_NEAR_WORDS = 16  # hits at most this many bitmap words back count popcounts; older words are in the tree
_NO_FLAGS = np.zeros(0, dtype=np.bool_)  # stale flags when coherence is off (never read)
_NO_SHARERS = np.zeros((0, 1), dtype=np.uint64)  # sharer sets of an engine without them
_NO_EVENTS = np.zeros(0, dtype=np.int64)
_AHEAD = 12  # accesses between a hash slot's prefetch and its probe
_TIME_AXIS_PER_LINE = 16  # time slots per live line after compaction: 3/16 B each (bitmap + tree)


@numba.njit(cache=True, nogil=True, inline="always")
def _commit(bits, tree, c_hi, upto):
    """Add words c_hi..upto-1 (fallen out of the near window) to the tree; the new c_hi."""
    n_words = tree.shape[0] - 1
    while c_hi < upto:
        v = popcount_swar(bits[c_hi])
        k = c_hi + 1
        while k <= n_words:
            tree[k] += v
            k += k & (-k)
        c_hi += 1
    return c_hi


@numba.njit(cache=True, nogil=True)
def _process(lines, keys, times, bits, tree, state, out, hist, hist_sum, want_out, limit, stale, use_stale,
             line_mask, sharers, pattern, events, min_axis, dense, retimes):
    """Feed lines from state[3]; compact the time axis in place when it fills, and stop early when
    a table must grow (or the axis must be longer). Returns the next index.

    Each line id is read as lines[i] & line_mask (all ones, or without the store tag of
    analysis/profiles/coherence.py, so tagged ids need no stripped copy).

    state = [now, live, n_keys, start, committed words, coherence, n_events, hashed keys]; out receives
    distances (-1 cold) when want_out; limit is the most keys the hashed slots may hold. The first
    `dense` slots are the lines (ids) below `dense`, each in its own slot (ids a LineIndex gave,
    numbered in order of first touch, so near ids share cache lines); the others are hashed. When use_stale,
    an access with stale[i] set whose line is in the stack is a coherence miss: it moves to
    the top as a hit does, but its distance is infinite (counted cold, and in state[5]).

    Sharer sets (a shared trace with coherence, when pattern is not None, which numba
    compiles separately, so the plain engine pays nothing for them; line_mask strips the
    tag): access i is by core pattern[i % len(pattern)], and sharers[slot] has a bit per
    core holding a valid copy of the slot's line (all ones until its first store: a line
    never stored is valid wherever it was touched). A hit whose core is not a sharer is
    stale: its index goes to events[state[6]]. A store leaves only its core; a load adds it.
    This is coherence.Directory's walk, sharing the engine's hash lookup.
    Marks live in a bitmap over time; `tree` is a Fenwick tree of per-word counts, kept only
    for the committed words, those below state[4] (at least b - _NEAR_WORDS, b = now's word):
    a word is added to the tree in one walk when it falls that far behind now. A hit moves a
    mark from word a to b. Its distance counts the marks after it: within a word one
    popcount; up to _NEAR_WORDS words back a popcount per word between (no tree); further
    back `live` minus a prefix walk, which only reads committed words. The tree changes only
    for a mark leaving a committed word (one walk), or entering one right after a compaction
    (which commits every word), so short and near reuses and first touches never walk it.

    Retimes (ReuseEngine.feed_runs, None otherwise): an access with retimes[i] >= 0 is counted
    and its distance goes to out[retimes[i]]; one with retimes[i] = r < 0 is the
    last touch of a segment whose u first touches were just fed, so they hold the top u live
    times, consecutive (nothing in between killed one, and a compaction keeps them so): its line
    takes time now + r, and the -r - 1 after it in the segment take the times above. That is the
    stack the whole segment leaves; the bitmap, the tree and the histogram do not change.

    The slot (key, time, sharer set) of the access _AHEAD on is prefetched: the probes of cold
    and long-unused lines miss every cache.
    One long function on purpose: a numba helper taking arrays costs about 14 ns a call (the
    arrays' reference counts), more than an access, so only rare paths are calls.
    """
    now = state[0]
    live = state[1]
    n_keys = state[2]
    i = state[3]
    c_hi = state[4]  # words below c_hi are in the tree
    mask = np.uint64(keys.shape[0] - dense - 1)  # the hashed slots follow the dense ones
    hash_shift = hash_shift_for(mask)
    base = np.uint64(dense)
    hashed = state[7]
    t_len = bits.shape[0] * 64
    n_words = tree.shape[0] - 1  # Fenwick is 1-indexed: position k holds word k-1
    n = lines.shape[0]
    one = np.uint64(1)
    full = np.uint64(0xFFFFFFFFFFFFFFFF)
    cold = hist.shape[0] - 1  # the last slot counts cold misses
    plen = 1
    q = 0
    if pattern is not None:
        plen = pattern.shape[0]
        q = i % plen
    n_ev = state[6]
    s_words = sharers.shape[1]
    flat_sharers = sharers.reshape(-1)
    cb = now >> 6  # now's bitmap word is kept in cw (a register, not memory) until now leaves it
    cw = bits[cb] if cb < bits.shape[0] else np.uint64(0)
    c_hi = _commit(bits, tree, c_hi, cb - _NEAR_WORDS)  # the previous call may have ended on a new word
    while i < n:
        if now >= t_len:  # the time axis is full: compact it here unless it must grow (Python)
            if 4 * live >= _MAX_TIME_AXIS or _target_axis(live, min_axis) > t_len:
                break
            bits[cb] = cw
            now = _compact(keys, times, bits, now, bits, tree)
            c_hi = (now >> 6) + 1  # the rebuilt tree counts every mark: all committed
            cb = now >> 6
            cw = bits[cb]
        b = now >> 6
        if b != cb:
            bits[cb] = cw
            cw = bits[b]
            cb = b
            c_hi = _commit(bits, tree, c_hi, b - _NEAR_WORDS)
        if i + _AHEAD < n:  # the slot of a later access: cold lines' probes miss the caches
            ahead = lines[i + _AHEAD] & line_mask
            if ahead >= base:
                ahead = base + home_slot(ahead, hash_shift, mask)
            prefetch(keys, ahead)
            prefetch(times, ahead)
            if pattern is not None:
                prefetch(flat_sharers, ahead * np.uint64(s_words))
        raw = lines[i]
        line = raw & line_mask
        slot = line  # a dense id is its own slot
        if line >= base:
            slot = base + home_slot(line, hash_shift, mask)
            while keys[slot] != line and keys[slot] != full:
                slot = base + ((slot - base + one) & mask)
        if retimes is not None and retimes[i] < 0:  # a last touch to retime (see Retimes above)
            times[slot] = now + retimes[i]
            i += 1
            continue
        hit = keys[slot] == line
        if hit:
            t = times[slot]
            a = t >> 6
            tb = np.uint64(t & 63)
            if a == b:
                word = cw
                cw = word & ~(one << tb)
            else:
                word = bits[a]
                bits[a] = word & ~(one << tb)
            d = popcount_swar(word & ((full << tb) << one))  # marks strictly after t in its word
            if a == b:  # the mark moves within one word: the word counts do not change
                pass
            else:
                if b - a <= _NEAR_WORDS:
                    d += popcount_swar(cw)
                    for w in range(a + 1, b):
                        d += popcount_swar(bits[w])
                else:  # far apart: words up to a are committed
                    d = live - popcount_swar(word & (full >> (np.uint64(63) - tb)))
                    k = a
                    while k > 0:
                        d -= tree[k]
                        k &= k - 1
                if a < c_hi:
                    k = a + 1
                    while k <= n_words:
                        tree[k] -= 1
                        k += k & (-k)
                if b < c_hi:
                    k = b + 1
                    while k <= n_words:
                        tree[k] += 1
                        k += k & (-k)
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
            if b < c_hi:
                k = b + 1
                while k <= n_words:
                    tree[k] += 1
                    k += k & (-k)
        if pattern is not None:
            c = pattern[q]
            w = c >> 6
            bit = one << np.uint64(c & 63)
            cur = sharers[slot, w]
            if hit and (cur & bit) == 0:
                events[n_ev] = i
                n_ev += 1
            store = raw != line
            if s_words == 1:  # one word: selects instead of branches (stores are unpredictable)
                sharers[slot, 0] = bit if store else (cur | bit if hit else full)
            elif store:  # only this core's copy stays valid
                for x in range(s_words):
                    sharers[slot, x] = 0
                sharers[slot, w] = bit
            elif hit:
                sharers[slot, w] = cur | bit
            else:
                for x in range(s_words):
                    sharers[slot, x] = full
            q += 1
            if q == plen:
                q = 0
        times[slot] = now
        cw |= one << np.uint64(now & 63)
        now += 1
        if want_out:
            if retimes is not None:  # feed_runs: each counted access's distance goes to its place
                out[retimes[i]] = d
            else:
                out[i] = d
        if d < 0:
            hist[cold] += 1
        elif d < EXACT_LIMIT:  # exact bin: its sum is count * d, filled in by histogram()
            hist[d] += 1
        else:
            bi = bin_of(d)
            hist[bi] += 1
            hist_sum[bi] += d
        i += 1
    if cb < bits.shape[0]:
        bits[cb] = cw
    state[0] = now
    state[1] = live
    state[2] = n_keys
    state[3] = i
    state[4] = c_hi
    state[6] = n_ev
    state[7] = hashed
    return i


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


@numba.njit(cache=True, nogil=True, inline="always")
def _count(d, hist, hist_sum):
    """Add one distance (-1: cold) to a histogram laid out as the engine's."""
    if d < 0:
        hist[hist.shape[0] - 1] += 1
    else:
        _add_count(d, 1, hist, hist_sum)


@numba.njit(cache=True, nogil=True)
def suffix_scan(lead, seen, out, first, hist, hist_sum):
    """Distances of a trace whose accesses since some point are those of another trace (the
    lead's distances given): an access whose lead distance is below the number of lines
    touched since that point (seen, counted here) reused a line touched since then, at that
    distance; the others are first touches since then, listed in first (their count returned)."""
    m = 0
    for i in range(lead.shape[0]):
        d = lead[i]
        if d >= 0 and d < seen:
            out[i] = d
            _count(d, hist, hist_sum)
        else:
            first[m] = i
            m += 1
            seen += 1
    return m


@numba.njit(cache=True, nogil=True)
def suffix_firsts(first, held, ahead, seen, known, out, hist, hist_sum):
    """Distances of the first touches found by suffix_scan: cold unless the engine held the
    line before; then the lines touched since (seen, plus one per first touch before it) and
    the held lines above it not touched since (ahead: its distance in a copy of the engine fed
    only the held first touches, minus those fed before it, known)."""
    h = 0
    cold = hist.shape[0] - 1
    for x in range(first.shape[0]):
        if held[x]:
            d = seen + x + ahead[h] - (known + h)
            h += 1
            out[first[x]] = d
            _count(d, hist, hist_sum)
        else:  # a branch of its own: with one _count for both the loop ran 10x slower
            out[first[x]] = -1
            hist[cold] += 1


_RUN_SHARE = 0.7  # feed_runs: a segment's first and last touches replace it when they are at most this share of it


@numba.njit(cache=True, nogil=True)
def _plan_runs(src, at, offrows, offset, lead, prev, nxt, rows, breaks, share, out_lines, out_pos, lasts, dist,
               hist, hist_sum):
    """What the engine must be fed for feed_runs, segment by segment; returns how many.

    Segment s is the part's accesses breaks[s]..breaks[s+1], rows rows[s].. of the lead trace,
    with line ids src[at[s]..] (plus offset at src's rows offrows, sorted; none when offset
    is 0). A segment whose first touches (no previous access in it: prev below its first row)
    and last touches (next access beyond it) together are at most `share` of it is fed as its
    first touches, counted (out_pos = their index in the part, where _process writes their
    distance in dist), then its last touches in order, which _process retimes (out_pos = j - g
    for the j-th of g); its other accesses reuse a line touched in it, and are counted here at
    their lead distance (also written to dist). Any other segment is fed whole.
    One pass over a segment (the last touches wait in `lasts`); the reuses of a segment that is
    fed whole after all are taken off the histogram again."""
    m = 0
    j = 0
    n_off = offrows.shape[0] if offset else 0
    last_at = np.empty(lasts.shape[0], dtype=np.int64)
    offs = offrows[:n_off]
    for s in range(breaks.shape[0] - 1):
        f0 = breaks[s]
        n = breaks[s + 1] - f0
        a = rows[s]
        b = a + n
        sa = at[s]
        if j < n_off and offs[j] < sa:  # other cores' offset rows lie between: skip by bisection
            j += np.searchsorted(offs[j:], sa)
        j0 = j
        f = m
        g = 0
        run_d = -1  # reuses at one distance are counted in registers, then added at once: a
        run_n = 0   # column walk's reuses are mostly at one distance, and hist[d] += 1 each waits on the last
        for k in range(n):
            r = a + k
            d = lead[r]
            if prev[r] < a:
                out_lines[f] = src[sa + k]
                out_pos[f] = f0 + k
                f += 1
            else:
                dist[f0 + k] = d
                if d == run_d:
                    run_n += 1
                else:
                    _add_count(run_d, run_n, hist, hist_sum)
                    run_d = d
                    run_n = 1
            if nxt[r] >= b:
                lasts[g] = src[sa + k]
                last_at[g] = k
                g += 1
        _add_count(run_d, run_n, hist, hist_sum)
        while j < n_off and offs[j] < sa + n:  # the offset rows' ids, fixed afterwards: a check per
            k = offs[j] - sa                    # access in the scan made it 20 % slower
            if prev[a + k] < a:
                out_lines[m + np.searchsorted(out_pos[m:f], f0 + k)] += offset
            if nxt[a + k] >= b:
                lasts[np.searchsorted(last_at[:g], k)] += offset
            j += 1
        if f - m + g <= share * n:
            out_lines[f:f + g] = lasts[:g]
            for x in range(g):  # the x-th of g last touches takes the time of the x-th first touch
                out_pos[f + x] = x - g
            m = f + g
            continue
        for k in range(n):  # fed whole after all: the reuses come off the histogram
            r = a + k
            if prev[r] >= a:
                _add_count(lead[r], -1, hist, hist_sum)
        out_lines[m:m + n] = src[sa:sa + n]
        for k in range(n):
            out_pos[m + k] = f0 + k
        add_offsets(out_lines, m, 1, 1, 0, sa, n, offs, j0, offset)
        m += n
    return m


@numba.njit(cache=True, nogil=True, _nrt=False)
def _add_count(d, n, hist, hist_sum):
    """Add n accesses (n < 0: take -n off) at distance d >= 0 to a histogram laid out as the
    engine's (none for n = 0).
    _nrt=False: no reference counts (see instrument/tracefile.py's _decode helpers)."""
    if n == 0:
        return
    if d < EXACT_LIMIT:  # exact bin: its sum is filled in by histogram()
        hist[d] += n
    else:
        bi = bin_of(d)
        hist[bi] += n
        hist_sum[bi] += n * d


@numba.njit(cache=True, nogil=True)
def _compact(keys, times, bits, now, new_bits, new_tree):
    """Renumber live times 0..M-1 in order; rebuild bitmap and Fenwick tree. Returns M.

    A live time's new number is its rank among the live marks: the marks in earlier words
    (a running count, kept in new_tree while it is free) plus those below it in its word.
    The new arrays may be the old ones: they are written only after the last read.
    """
    n_w = (now + 63) >> 6
    m = 0
    for w in range(n_w):
        new_tree[w] = m
        m += popcount_swar(bits[w])
    for s in range(keys.shape[0]):
        if keys[s] != np.uint64(0xFFFFFFFFFFFFFFFF):
            t = times[s]
            w = t >> 6
            times[s] = new_tree[w] + popcount_swar(bits[w] & ((np.uint64(1) << np.uint64(t & 63)) - np.uint64(1)))
    full = m >> 6
    for w in range(full):
        new_bits[w] = np.uint64(0xFFFFFFFFFFFFFFFF)
    if m & 63:
        new_bits[full] = (np.uint64(1) << np.uint64(m & 63)) - np.uint64(1)
    for w in range((m + 63) >> 6, new_bits.shape[0]):
        new_bits[w] = np.uint64(0)
    for k in range(1, new_tree.shape[0]):  # words k-lowbit(k)..k-1, each 64 full until m
        low = k & (-k)
        new_tree[k] = max(0, min(64 * k, m) - 64 * (k - low))
    new_tree[0] = 0
    return m


@numba.njit(cache=True, nogil=True)
def _axis_length(t_len: int) -> int:
    """Round a time-axis length up to a multiple of 64 on a 1/8-octave grid, so that a
    growing engine keeps the same length (and compacts in place) over most compactions."""
    step = max(64, 1 << max(0, bit_length(t_len) - 4))
    return (t_len + step - 1) // step * step


@numba.njit(cache=True, nogil=True)
def _target_axis(live: int, min_axis: int) -> int:
    """Time-axis length for `live` lines after a compaction: a multiple of them (so compaction
    is amortised O(1)), at least min_axis."""
    return _axis_length(min(max(min_axis, _TIME_AXIS_PER_LINE * live), _MAX_TIME_AXIS))


def _time_axis(t_len: int) -> tuple[np.ndarray, np.ndarray]:
    """The live bitmap and the per-word Fenwick tree for t_len times."""
    t_len = int(_axis_length(t_len))
    return np.zeros(t_len // 64, dtype=np.uint64), np.zeros(t_len // 64 + 1, dtype=np.int32)


@dataclass
class LeadTrace:
    """A trace's accesses as another follows them (ReuseEngine.feed_runs): each access's distance
    (int32, -1 cold) and the positions of the previous and next access to its line (int32, -1
    and len when there is none; line_index.LineIndex.number)."""

    distances: np.ndarray
    prev: np.ndarray
    next: np.ndarray


class ReuseEngine:
    """Streaming exact stack-distance engine; memory grows with distinct lines only."""

    def __init__(self, initial_lines: int = 1 << 12, sharer_cores: int = 0) -> None:
        """sharer_cores > 0: also keep every line's sharer set among that many cores (feed_shared)."""
        cap = 1 << max(4, int(np.ceil(np.log2(max(initial_lines, 16) / _MAX_LOAD))))
        self._keys = np.full(cap, EMPTY, dtype=np.uint64)
        self._times = np.zeros(cap, dtype=np.int32)
        self._words = (sharer_cores + 63) // 64
        self._sharers = np.zeros((cap, self._words), dtype=np.uint64) if self._words else _NO_SHARERS
        self._min_axis = _MIN_TIME_AXIS  # read here, so a test can make compactions frequent
        self._bits, self._tree = _time_axis(max(self._min_axis, 2 * initial_lines))
        self._dense = 0  # slots 0.. of the ids below this are dense (reserve_dense); the rest are hashed
        # now, live, n_keys, start, committed words, coherence misses, stale accesses found by feed_shared,
        # keys in the hashed slots
        self._state = np.zeros(8, dtype=np.int64)
        self._hist = np.zeros(N_BINS + 1, dtype=np.int64)  # last slot counts cold misses
        self._hist_sum = np.zeros(N_BINS + 1, dtype=np.int64)

    @property
    def distinct_lines(self) -> int:
        return int(self._state[1])

    @property
    def nbytes(self) -> int:
        """Bytes held by the tables that grow with distinct lines."""
        return sum(a.nbytes for a in (self._keys, self._times, self._sharers, self._bits, self._tree))

    def copy(self) -> "ReuseEngine":
        """An independent engine in the same state (continues exactly as this one would)."""
        twin = ReuseEngine.__new__(ReuseEngine)
        for name, value in vars(self).items():
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
                       dtype: type = np.int64) -> np.ndarray:
        """Like feed, and also return each access's distance (-1 = cold or coherence miss).

        dtype np.int32 halves what callers keep: distances are below the engine's 2^29 lines."""
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        if np.dtype(dtype) not in (np.dtype(np.int64), np.dtype(np.int32)):
            raise ValueError(f"dtype {dtype}: distances are returned as int64 or int32")
        out = np.empty(lines.shape[0], dtype=dtype)
        self._run(lines, out, stale, tagged)
        return out

    def feed_runs(self, lines: "np.ndarray | CorePart", lead: "LeadTrace", rows: np.ndarray, breaks: np.ndarray,
                  tagged: bool = False) -> np.ndarray:
        """Like feed_distances (int32), for accesses that are stretches of another trace (the lead):
        segment s, lines[breaks[s]:breaks[s+1]], is the lead's rows rows[s].. in order, and within
        a segment line ids correspond one to one to the lead's. lines may be a whole CorePart of
        the lead's chunk (its rows and breaks given): its ids are read in place.

        Why: a private trace is stretches of the sequential one. An access that reuses a line
        touched earlier in its segment does so at the same distance in both traces (every line
        between was touched in the segment). The others are first touches: fed here, their
        distance is the stack above them plus the lines seen so far in the segment. Then the
        segment's last touches, in order, take the times its first touches were given (_process's
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
        out_lines, out_pos, lasts = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.int32), np.empty(n, np.uint64)
        dist = np.empty(n, dtype=np.int32)
        m = _plan_runs(src, at, offrows, offset, lead.distances, lead.prev, lead.next, rows, breaks, _RUN_SHARE,
                       out_lines, out_pos, lasts, dist, self._hist, self._hist_sum)
        self._run(out_lines[:m], dist, tagged=tagged, retimes=out_pos[:m])
        return dist

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
        see _process); returns the indices of the stale accesses (a core touching a line it
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
        while _process(lines, self._keys, self._times, self._bits, self._tree, self._state,
                       buf, self._hist, self._hist_sum, want, self._key_limit(), flags, use_stale,
                       _UNTAGGED if tagged else _ALL_BITS, self._sharers, pattern, events,
                       self._min_axis, self._dense, retimes) < lines.shape[0]:
            if self._state[7] + 1 > self._key_limit():
                self._grow_hash()
            if self._state[0] >= self._bits.shape[0] * 64:
                self._compact()

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
        if 4 * live >= _MAX_TIME_AXIS:
            raise PptmcError(f"{live} distinct cache lines: above the engine's 2^29 limit (int32 times); "
                             f"profile a smaller input or a larger --line-size")
        n = max(int(_target_axis(live, self._min_axis)), self._bits.shape[0] * 64)  # never shrink: the renumbering needs the room
        if n == self._bits.shape[0] * 64:
            bits, tree = self._bits, self._tree  # in place: no allocation
        else:
            bits, tree = np.empty(n // 64, dtype=np.uint64), np.empty(n // 64 + 1, dtype=np.int32)
        self._state[0] = _compact(self._keys, self._times, self._bits, int(self._state[0]), bits, tree)
        self._state[4] = (int(self._state[0]) >> 6) + 1  # the rebuilt tree counts every mark: all committed
        self._bits, self._tree = bits, tree

    def histogram(self) -> ReuseProfile:
        """The reuse profile of everything fed so far."""
        counts = self._hist[:N_BINS]
        sums = self._hist_sum[:N_BINS].copy()
        sums[:EXACT_LIMIT] = counts[:EXACT_LIMIT] * np.arange(EXACT_LIMIT)  # the kernel skips exact bins' sums
        lower, upper = histogram_bins(N_BINS, EXACT_LIMIT, EXACT_BITS, SUB_BITS)
        nz = np.nonzero(counts)[0]
        return ReuseProfile(lower=lower[nz].copy(), upper=upper[nz].copy(), count=counts[nz].copy(),
                            dist_sum=sums[nz].copy(), cold=int(self._hist[N_BINS]),
                            total=int(counts.sum() + self._hist[N_BINS]), coherence=self.coherence_misses)


def reuse_distances(lines: np.ndarray) -> np.ndarray:
    """Stack distance of every access in an in-memory array of line ids (-1 = cold)."""
    return ReuseEngine(initial_lines=max(16, min(len(lines), 1 << 20))).feed_distances(lines)
