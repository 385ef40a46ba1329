"""The SHARDS samples of one core count in two fused numba kernels per batch (analysis/sampling/source.py).

Source sampling feeds every sampled (row, core) pair to its core's private stack, and the round-robin merge
of those pairs to the shared stack with write-invalidate coherence. This module does that with one kernel
that places the pairs and feeds them to the private stacks (`_feed_pairs`), and one that merges the
per-core queues by round-robin key and feeds the shared stack (`_release`), instead of a dozen array
passes and three engine calls per batch. The results are those of analysis.profiles.reuse.ReuseEngine and
analysis.profiles.coherence.Directory, bit for bit (rate 1 equals the exact ProfileSet: tests/test_source_sampling.py):

* `Stacks`: n LRU stacks with the exact engine's algorithm (a hash table line -> last time, a bitmap of
  latest uses over a time axis, a Fenwick tree of the words that fell more than NEAR_WORDS behind, and
  renumbering of the live times when the axis fills) and its histogram bins. The n stacks share one
  table size and axis length (2-D arrays, grown together: n times the largest stack's memory, small for
  a sample; at rate 1 as much as n engines with that many lines), and each slot also keeps an auxiliary
  position (the private position or turn of the line's last use, for the windows' gaps) and, for the
  shared stack, the line's sharer set (the Directory's rules: all cores until the first store, a store
  leaves only its core, a load adds its core; an access by a core not in the set is stale);
* the pairs' private distances, gaps and store tags wait in per-core queues (each in its core's order)
  until every core's running count has passed them in the round-robin order (see source_sampling);
* a stale shared access with a finite private distance is a coherence miss: its private histogram entry
  moves to the cold slot at once (what ReuseEngine.reclassify does in bulk);
* the windows' SHARDS tallies (near samples, their coherence misses, the far samples' distances) are
  counted as the samples pass.
"""
from __future__ import annotations

import numba
import numpy as np

from analysis.profiles.bitops import popcount as popcount
from analysis.profiles.private_traces import ALL_CORES
from analysis.profiles.profileset import ReuseProfile
from analysis.profiles.kernel_ops import EXACT_LIMIT, N_BINS, bin_of
from analysis.sampling.blocks import engine_bins

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)  # never a line id
TAG = np.uint64(1 << 63)  # a store's line id in the queues (as analysis.profiles.reuse.STORE_TAG)
NEAR_WORDS = 16  # hits at most this many bitmap words back sum popcounts; older words are in the tree
MIN_AXIS = 1 << 12  # time slots of a new stack (a sampled stream has few distinct lines)
AXIS_PER_LINE = 8  # the axis grows when fewer than 7/8 of its slots would be free after renumbering
MAX_LOAD = 0.6

# _feed_pairs / _release stop for Python to grow: the stacks' tables or axes, a queue, a tail buffer
DONE, GROW_TABLE, GROW_AXIS, GROW_QUEUE, GROW_TAIL = 0, 1, 2, 3, 4


class Stacks:
    """n LRU stacks (see the module docstring); sharers: keep each line's sharer set among that many cores."""

    def __init__(self, n: int, sharers: int = 0) -> None:
        self.n, self.words = n, max(1, (sharers + 63) // 64)
        self.keys = np.full((n, 64), EMPTY, np.uint64)
        self.times = np.zeros((n, 64), np.int64)
        self.aux = np.zeros((n, 64), np.int64)
        self.sharers = np.zeros((n, 64, self.words if sharers else 0), np.uint64)
        self.bits = np.zeros((n, MIN_AXIS // 64), np.uint64)
        self.tree = np.zeros((n, MIN_AXIS // 64 + 1), np.int64)
        self.state = np.zeros((n, 5), np.int64)  # now, live lines, committed words, coherence misses, limit
        self.state[:, 4] = int(64 * MAX_LOAD)
        self.hist = np.zeros((n, N_BINS + 1), np.int64)  # last slot: cold
        self.hist_sum = np.zeros((n, N_BINS + 1), np.int64)
        self.mru = np.full((n, 2), EMPTY, np.uint64)  # each stack's most recent line and its slot

    def arrays(self) -> tuple:
        """The arrays the kernels take, in their order."""
        return self.keys, self.times, self.aux, self.sharers, self.bits, self.tree, self.state, self.hist, \
            self.hist_sum, self.mru

    def grow(self, status: int) -> None:
        """Twice the hash tables (GROW_TABLE) or the time axes (GROW_AXIS), every stack alike."""
        if status == GROW_TABLE:
            cap = 2 * self.keys.shape[1]
            keys, times, aux = np.full((self.n, cap), EMPTY, np.uint64), np.zeros((self.n, cap), np.int64), \
                np.zeros((self.n, cap), np.int64)
            sharers = np.zeros((self.n, cap, self.sharers.shape[2]), np.uint64)
            _rehash(self.keys, self.times, self.aux, self.sharers, keys, times, aux, sharers)
            self.keys, self.times, self.aux, self.sharers = keys, times, aux, sharers
            self.state[:, 4] = int(cap * MAX_LOAD)
            self.mru[:, 0] = EMPTY  # its slot moved
        elif status == GROW_AXIS:
            w = 2 * self.bits.shape[1]
            bits, tree = np.zeros((self.n, w), np.uint64), np.zeros((self.n, w + 1), np.int64)
            for e in range(self.n):
                _compact(self.keys, self.times, self.bits, self.state, e, bits, tree)
            self.bits, self.tree = bits, tree

    def profile(self, e: int) -> ReuseProfile:
        """Stack e's reuse profile (as ReuseEngine.histogram)."""
        counts = self.hist[e, :N_BINS]
        sums = self.hist_sum[e, :N_BINS].copy()
        sums[:EXACT_LIMIT] = counts[:EXACT_LIMIT] * np.arange(EXACT_LIMIT)
        lower, upper = engine_bins()
        nz = np.nonzero(counts)[0]
        return ReuseProfile(lower=lower[nz].copy(), upper=upper[nz].copy(), count=counts[nz].copy(),
                            dist_sum=sums[nz].copy(), cold=int(self.hist[e, N_BINS]),
                            total=int(counts.sum() + self.hist[e, N_BINS]), coherence=int(self.state[e, 3]))


@numba.njit(cache=True, nogil=True)
def _rehash(keys, times, aux, sharers, n_keys, n_times, n_aux, n_sharers):
    """Every stack's keys (with their time, aux and sharers) moved into larger tables."""
    mask = np.uint64(n_keys.shape[1] - 1)
    for e in range(keys.shape[0]):
        for s in range(keys.shape[1]):
            x = keys[e, s]
            if x == EMPTY:
                continue
            slot = _home(x, mask)
            while n_keys[e, slot] != EMPTY:
                slot = (slot + np.uint64(1)) & mask
            n_keys[e, slot], n_times[e, slot], n_aux[e, slot] = x, times[e, s], aux[e, s]
            for w in range(sharers.shape[2]):
                n_sharers[e, slot, w] = sharers[e, s, w]


@numba.njit(cache=True, nogil=True, inline="always")
def _home(x, mask):
    """Home slot of a line id (a Fibonacci product's bits 40..)."""
    return ((x * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask


@numba.njit(cache=True, nogil=True)
def _compact(keys, times, bits, state, e, new_bits, new_tree):
    """Renumber stack e's live times 0..M-1 in order (rank among the live marks) into new_bits / new_tree
    (which may be bits / tree: they are written after the last read); every word committed."""
    now = state[e, 0]
    n_w = (now + 63) >> 6
    ranks = np.empty(n_w, np.int64)
    m = 0
    for w in range(n_w):
        ranks[w] = m
        m += popcount(bits[e, w])
    for s in range(keys.shape[1]):
        if keys[e, s] != EMPTY:
            t = times[e, s]
            w = t >> 6
            times[e, s] = ranks[w] + popcount(bits[e, w] & ((np.uint64(1) << np.uint64(t & 63)) - np.uint64(1)))
    for w in range(new_bits.shape[1]):
        new_bits[e, w] = 0
    for w in range(m >> 6):
        new_bits[e, w] = EMPTY
    if m & 63:
        new_bits[e, m >> 6] = (np.uint64(1) << np.uint64(m & 63)) - np.uint64(1)
    for k in range(1, new_tree.shape[1]):  # Fenwick node k: words k - lowbit(k) .. k - 1, full up to m
        low = k & (-k)
        new_tree[e, k] = max(0, min(64 * k, m) - 64 * (k - low))
    new_tree[e, 0] = 0
    state[e, 0] = m
    state[e, 2] = (m >> 6) + 1


@numba.njit(cache=True, nogil=True, inline="always")
def _room(now, live, limit, t_len):
    """DONE when a stack (now, live lines, most keys its table holds, axis length) can take one more access
    (renumbering its axis in place if it is full), else GROW_TABLE or GROW_AXIS."""
    if live + 1 > limit:
        return GROW_TABLE
    if now >= t_len and AXIS_PER_LINE * (live + 1) > t_len:
        return GROW_AXIS
    return DONE


@numba.njit(cache=True, nogil=True)
def _tree_add(tree, e, word, v):
    """Add v to word's count in stack e's Fenwick tree."""
    k = word + 1
    n = tree.shape[1] - 1
    while k <= n:
        tree[e, k] += v
        k += k & (-k)


@numba.njit(cache=True, nogil=True, inline="always")
def _rr_key(pos, core, p, k):
    """Place of core `core`'s private position `pos` in the round-robin shared trace (k per turn), as one int64:
    (turn, core, position) in lexicographic order (see analysis/sampling/source.py)."""
    if k == 1:
        return pos * p + core
    return ((pos // k) * p + core) * k + pos % k



@numba.njit(cache=True, nogil=True)
def _drop_heads(q_pos, q_line, q_dist, q_gap, q_head, q_tail, c):
    """Move core c's queued pairs to the front of its queue (the released ones are dropped); DONE."""
    h = q_head[c]
    for i in range(h, q_tail[c]):
        q_pos[c, i - h], q_line[c, i - h], q_dist[c, i - h], q_gap[c, i - h] = q_pos[c, i], q_line[c, i], \
            q_dist[c, i], q_gap[c, i]
    q_tail[c] -= h
    q_head[c] = 0
    return DONE


@numba.njit(cache=True, nogil=True)
def _feed_pairs(sel, lines, offset, store, starts, run_core, counters, p, step, resume,
                keys, times, aux, sharers, bits, tree, state, hist, hist_sum, mru,
                windows, look, account, tally, tail, queued, tag, q_pos, q_line, q_dist, q_gap, q_head, q_tail):
    """Place the batch's sampled rows on the cores running them, core by core (its stack's state in
    registers): each pair's private position (counters: each core's, advanced over its runs), stack distance
    and, with windows, gap to the line's previous use in private positions; tally it (account: no coherence
    walk follows) and queue it (queued: a shared trace follows). resume = [core, run, sampled row (-1: the
    core's first), core's position at that run] to start from. Returns DONE or what to grow (resume then says
    where it stopped). The stack's code is written out here: inlined numba functions taking arrays cost
    reference counting per call (twice the time)."""
    m = sel.shape[0]
    t_len = bits.shape[1] * 64
    mask = np.uint64(keys.shape[1] - 1)
    one = np.uint64(1)
    cold = hist.shape[1] - 1
    for c in range(resume[0], p):
        fresh = c != resume[0] or resume[2] < 0
        r0 = 0 if fresh else resume[1]
        j = -1 if fresh else resume[2]
        q = counters[c] if fresh else resume[3]
        now, live, c_hi, limit = state[c, 0], state[c, 1], state[c, 2], state[c, 4]
        mru_x, mru_s = mru[c, 0], mru[c, 1]
        for r in range(r0, run_core.shape[0]):
            core = run_core[r]
            if core != c and core != ALL_CORES:
                continue
            a = starts[r]
            b = starts[r + 1]
            if j < 0:
                j = np.searchsorted(sel, a)  # the first selected row at or after a
            while j < m and sel[j] < b:
                status = _room(now, live, limit, t_len)
                if status == DONE and queued and q_tail[c] >= q_pos.shape[1]:
                    status = GROW_QUEUE if q_head[c] == 0 else _drop_heads(q_pos, q_line, q_dist, q_gap, q_head,
                                                                          q_tail, c)
                if status == DONE and account and live + 1 >= tail.shape[1]:  # a distance is below live
                    status = GROW_TAIL
                if status != DONE:
                    state[c, 0], state[c, 1], state[c, 2] = now, live, c_hi
                    mru[c, 0], mru[c, 1] = mru_x, mru_s
                    resume[0], resume[1], resume[2], resume[3] = c, r, j, q
                    return status
                pos = q + sel[j] - a
                x = lines[j] + (np.uint64(c) << step) * np.uint64(offset[j])
                if x == mru_x:  # the stack's most recent line again: distance 0, its order unchanged
                    slot = mru_s
                    d = 0
                    hist[c, 0] += 1
                else:
                    if now >= t_len:  # the axis is full: renumber it in place (room was checked)
                        state[c, 0], state[c, 1] = now, live
                        _compact(keys, times, bits, state, c, bits, tree)
                        now, c_hi = state[c, 0], state[c, 2]
                    bw = now >> 6
                    while c_hi < bw - NEAR_WORDS:  # words falling out of the near window join the tree
                        _tree_add(tree, c, c_hi, popcount(bits[c, c_hi]))
                        c_hi += 1
                    slot = _home(x, mask)
                    while keys[c, slot] != x and keys[c, slot] != EMPTY:
                        slot = (slot + one) & mask
                    if keys[c, slot] == x:
                        t = times[c, slot]
                        aw = t >> 6
                        tb = np.uint64(t & 63)
                        word = bits[c, aw]
                        bits[c, aw] = word & ~(one << tb)
                        d = popcount(word & ((EMPTY << tb) << one))  # marks after t in its word
                        if aw != bw:
                            if bw - aw <= NEAR_WORDS:
                                for w in range(aw + 1, bw + 1):
                                    d += popcount(bits[c, w])
                            else:  # words up to aw are in the tree
                                d = live - popcount(word & (EMPTY >> (np.uint64(63) - tb)))
                                f = aw
                                while f > 0:
                                    d -= tree[c, f]
                                    f &= f - 1
                            if aw < c_hi:
                                _tree_add(tree, c, aw, -1)
                            if bw < c_hi:
                                _tree_add(tree, c, bw, 1)
                    else:
                        keys[c, slot] = x
                        live += 1
                        d = -1
                        if bw < c_hi:
                            _tree_add(tree, c, bw, 1)
                    times[c, slot] = now
                    bits[c, bw] |= one << np.uint64(now & 63)
                    now += 1
                    if d < 0:
                        hist[c, cold] += 1
                    elif d < EXACT_LIMIT:
                        hist[c, d] += 1
                    else:
                        bi = bin_of(d)
                        hist[c, bi] += 1
                        hist_sum[c, bi] += d
                    mru_x, mru_s = x, slot
                gap = 0
                if windows:
                    gap = pos - aux[c, slot] if d >= 0 else -1  # a private stack's cold access is a first use
                    aux[c, slot] = pos
                if account:
                    if 0 <= gap <= look:  # near: counted; far: its distance + 1 (0: coherence miss or cold) tallied
                        tally[c, 0] += 1
                        tally[c, 1] += False
                    else:
                        tally[c, 2] += False
                        tail[c, d + 1] += 1
                if queued:
                    t = q_tail[c]
                    q_pos[c, t] = pos
                    q_line[c, t] = x | (TAG if tag and store[j] else np.uint64(0))
                    q_dist[c, t] = d
                    q_gap[c, t] = gap
                    q_tail[c] = t + 1
                j += 1
            j = -1
            q += b - a
        state[c, 0], state[c, 1], state[c, 2] = now, live, c_hi
        mru[c, 0], mru[c, 1] = mru_x, mru_s
        counters[c] = q
    resume[0], resume[1], resume[2], resume[3] = p, 0, -1, 0
    return DONE


@numba.njit(cache=True, nogil=True)
def _release(limit, p, k, q_pos, q_line, q_dist, q_gap, q_head, q_tail,
             keys, times, aux, sharers, bits, tree, state, hist, hist_sum, mru,
             coherent, windows, look, tally, tail, p_state, p_hist, p_hist_sum,
             s_windows, s_look, s_tally, s_tail):
    """Merge the queued pairs whose round-robin key is below limit into shared-trace order and feed them to
    the shared stack (stack 0 of keys...): with coherence, its sharer sets find the stale accesses, a stale
    one with a finite private distance is a coherence miss (moved to the cold slot of its core's private
    histogram, p_*) and the pairs are tallied for the private estimates here (windows); with shared windows
    (s_windows) each access's turn gap and shared distance is tallied for the shared estimate. Returns DONE
    or what to grow (the queues' heads say where it stopped)."""
    big = np.iinfo(np.int64).max
    head = np.full(p, big, np.int64)  # each core's next key
    for c in range(p):
        if q_head[c] < q_tail[c]:
            head[c] = _rr_key(q_pos[c, q_head[c]], c, p, k)
    t_len = bits.shape[1] * 64
    mask = np.uint64(keys.shape[1] - 1)
    one = np.uint64(1)
    cold = hist.shape[1] - 1
    now, live, c_hi, lim = state[0, 0], state[0, 1], state[0, 2], state[0, 4]
    mru_x, mru_s = mru[0, 0], mru[0, 1]
    while True:
        best, best_key = -1, limit
        for c in range(p):
            if head[c] < best_key:
                best, best_key = c, head[c]
        status = DONE if best >= 0 else -1
        if status == DONE:
            status = _room(now, live, lim, t_len)
        if status == DONE and windows and coherent and p_state[best, 1] + 1 >= tail.shape[1]:
            status = GROW_TAIL  # a private distance is below its stack's live lines
        if status == DONE and s_windows and live + 1 >= s_tail.shape[1]:
            status = GROW_TAIL
        if status != DONE:
            state[0, 0], state[0, 1], state[0, 2] = now, live, c_hi
            mru[0, 0], mru[0, 1] = mru_x, mru_s
            return max(status, DONE)
        c = best
        i = q_head[c]
        raw = q_line[c, i]
        x = raw & ~TAG
        pos, dist, gap = q_pos[c, i], q_dist[c, i], q_gap[c, i]
        if x == mru_x:  # the stack's most recent line again: distance 0, its order unchanged
            slot = mru_s
            d = 0
            hist[0, 0] += 1
        else:
            if now >= t_len:  # the axis is full: renumber it in place (room was checked)
                state[0, 0], state[0, 1] = now, live
                _compact(keys, times, bits, state, 0, bits, tree)
                now, c_hi = state[0, 0], state[0, 2]
            bw = now >> 6
            while c_hi < bw - NEAR_WORDS:  # words falling out of the near window join the tree
                _tree_add(tree, 0, c_hi, popcount(bits[0, c_hi]))
                c_hi += 1
            slot = _home(x, mask)
            while keys[0, slot] != x and keys[0, slot] != EMPTY:
                slot = (slot + one) & mask
            if keys[0, slot] == x:
                t = times[0, slot]
                aw = t >> 6
                tb = np.uint64(t & 63)
                word = bits[0, aw]
                bits[0, aw] = word & ~(one << tb)
                d = popcount(word & ((EMPTY << tb) << one))  # marks after t in its word
                if aw != bw:
                    if bw - aw <= NEAR_WORDS:
                        for w in range(aw + 1, bw + 1):
                            d += popcount(bits[0, w])
                    else:  # words up to aw are in the tree
                        d = live - popcount(word & (EMPTY >> (np.uint64(63) - tb)))
                        f = aw
                        while f > 0:
                            d -= tree[0, f]
                            f &= f - 1
                    if aw < c_hi:
                        _tree_add(tree, 0, aw, -1)
                    if bw < c_hi:
                        _tree_add(tree, 0, bw, 1)
            else:
                keys[0, slot] = x
                live += 1
                d = -1
                if bw < c_hi:
                    _tree_add(tree, 0, bw, 1)
            times[0, slot] = now
            bits[0, bw] |= one << np.uint64(now & 63)
            now += 1
            if d < 0:
                hist[0, cold] += 1
            elif d < EXACT_LIMIT:
                hist[0, d] += 1
            else:
                bi = bin_of(d)
                hist[0, bi] += 1
                hist_sum[0, bi] += d
            mru_x, mru_s = x, slot
        if coherent:  # analysis.profiles.coherence.Directory's rules on the stack's sharer sets
            w = c >> 6
            bit = one << np.uint64(c & 63)
            stale = d >= 0 and (sharers[0, slot, w] & bit) == 0
            if raw != x:  # a store: only this core's copy stays valid
                for v in range(sharers.shape[2]):
                    sharers[0, slot, v] = 0
                sharers[0, slot, w] = bit
            elif d >= 0:
                sharers[0, slot, w] |= bit
            else:  # valid wherever it is touched until its first store
                for v in range(sharers.shape[2]):
                    sharers[0, slot, v] = EMPTY
            coh = stale and dist >= 0
            if coh:  # ReuseEngine.reclassify, at once
                bi = bin_of(dist)
                p_hist[c, bi] -= 1
                p_hist[c, cold] += 1
                if dist >= EXACT_LIMIT:
                    p_hist_sum[c, bi] -= dist
                p_state[c, 3] += 1
            if windows:
                if 0 <= gap <= look:  # near: counted; far: its distance + 1 (0: coherence miss or cold) tallied
                    tally[c, 0] += 1
                    tally[c, 1] += coh
                else:
                    tally[c, 2] += coh
                    tail[c, 0 if coh else dist + 1] += 1
        if s_windows:
            turn = pos if k == 1 else pos // k
            tg = turn - aux[0, slot] if d >= 0 else -1
            aux[0, slot] = turn
            if 0 <= tg <= s_look:  # near: counted; far: its distance + 1 (0: coherence miss or cold) tallied
                s_tally[0, 0] += 1
                s_tally[0, 1] += False
            else:
                s_tally[0, 2] += False
                s_tail[0, d + 1] += 1
        q_head[c] = i + 1
        head[c] = _rr_key(q_pos[c, i + 1], c, p, k) if i + 1 < q_tail[c] else big


class ShardsStreams:
    """One core count's SHARDS samples: p private stacks, the per-core queues of the round-robin merge, the
    shared stack with its sharer sets, and the windows' SHARDS tallies (see the module docstring)."""

    def __init__(self, p: int, k: int, coherence: bool, windows: bool, look: int, s_windows: bool,
                 s_look: int) -> None:
        self.p, self.k, self.look, self.s_look = p, k, look, s_look
        self.coherent, self.windows, self.s_windows = coherence and p > 1, windows, s_windows
        self.private = Stacks(p)
        self.shared = Stacks(1, p if self.coherent else 0) if p > 1 else None
        self.queue = (np.zeros((p, 1024), np.int64), np.zeros((p, 1024), np.uint64), np.zeros((p, 1024), np.int64),
                      np.zeros((p, 1024), np.int64))  # private position, line (TAG on stores), distance, gap
        self.q_head, self.q_tail = np.zeros(p, np.int64), np.zeros(p, np.int64)
        # per core: [near samples, their coherence misses, far coherence misses]; far samples per distance + 1
        self.tally, self.tail = np.zeros((p, 3), np.int64), np.zeros((p, 64), np.int64)
        self.s_tally, self.s_tail = np.zeros((1, 3), np.int64), np.zeros((1, 64), np.int64)
        self.resume = np.zeros(4, np.int64)

    def feed(self, sel: np.ndarray, lines: np.ndarray, offset: np.ndarray, store: np.ndarray, starts: np.ndarray,
             run_core: np.ndarray, counters: np.ndarray, step: int) -> None:
        """A batch's sampled rows (sel, their lines without offset, offset and store flags) over the runs
        (starts, run_core): fed to the private stacks and queued; counters advanced over the runs; the
        queued pairs every core has passed are released to the shared stack."""
        self.resume[:] = (0, 0, -1, 0)
        queued = self.shared is not None
        while True:
            status = _feed_pairs(sel, lines, offset, store, starts, run_core, counters, self.p, np.uint64(step),
                                 self.resume, *self.private.arrays(), self.windows, self.look,
                                 self.windows and not self.coherent, self.tally, self.tail, queued,
                                 self.coherent, *self.queue, self.q_head, self.q_tail)
            if status == DONE:
                break
            self._grow(status, self.private)
        if queued:
            self.release(counters)

    def release(self, counters: np.ndarray | None) -> None:
        """Feed the shared stack the queued pairs before every core's next one (counters; None: all)."""
        big = np.iinfo(np.int64).max
        limit = big if counters is None else min(int(_rr_key(int(x), c, self.p, self.k))
                                                 for c, x in enumerate(counters.tolist()))
        while True:
            status = _release(limit, self.p, self.k, *self.queue, self.q_head, self.q_tail, *self.shared.arrays(),
                              self.coherent, self.windows, self.look, self.tally, self.tail,
                              self.private.state, self.private.hist, self.private.hist_sum, self.s_windows,
                              self.s_look, self.s_tally, self.s_tail)
            if status == DONE:
                return
            self._grow(status, self.shared)

    def _grow(self, status: int, stacks: Stacks) -> None:
        """Make room for what a kernel stopped on."""
        if status in (GROW_TABLE, GROW_AXIS):
            stacks.grow(status)
        elif status == GROW_TAIL:  # distances up to the stacks' live lines
            self.tail, self.s_tail = (np.concatenate([t, np.zeros_like(t)], axis=1) for t in (self.tail, self.s_tail))
        elif status == GROW_QUEUE:  # a core's queue is full of pairs waiting: twice the room
            self.queue = tuple(np.concatenate([q, np.zeros_like(q)], axis=1) for q in self.queue)

    def tails(self) -> tuple[list[tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray]]:
        """The far SHARDS samples' distances (-1: coherence miss or cold) and how many had each, ascending: per
        core, and the shared trace's."""
        def of(row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            nz = np.flatnonzero(row)
            return nz - 1, row[nz]

        return [of(self.tail[c]) for c in range(self.p)], of(self.s_tail[0])
