"""n LRU stacks in 2-D arrays, for the SHARDS samples of source sampling (analysis/sampling/shards/shards_kernel.py).

Each stack runs the exact engine's algorithm (analysis.profiles.reuse.ReuseEngine): a hash table line -> last
time, a bitmap of latest uses over a time axis, a Fenwick tree of the words that fell more than NEAR_WORDS
behind, and renumbering of the live times when the axis fills; and its histogram bins. The n stacks share
one table size and axis length (grown together: n times the largest stack's memory, small for a sample; at
rate 1 as much as n engines with that many lines). Each slot also keeps an auxiliary position (the private
position or turn of the line's last use, for the windows' gaps) and, for the shared stack, the line's sharer
set (see shards_kernel.py).

The kernels keep a stack's scalar state in registers (`Regs`) across a batch and touch it with `touch`,
inlined: the arrays come bundled (`StackArrays`). Their loops over accesses are compiled without numba's
reference counting (`hot_loop`): an inlined helper that takes arrays costs an atomic increment and decrement
per array per call otherwise (source sampling 10x slower with the bundles, still 1.5x with non-inlined
helpers). Such a loop can allocate nothing: it stops with RENUMBER where a stack's axis is full, and its
caller renumbers the axis in place (`renumber`, which allocates) and calls it again.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.bitops import popcount
from analysis.profiles.kernel_ops import EXACT_LIMIT, N_BINS, bin_of
from analysis.profiles.profileset import ReuseProfile
from analysis.sampling.binning import engine_bins
from analysis.sampling.hashing import slot_of

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)  # never a line id
NEAR_WORDS = 16  # hits at most this many bitmap words back sum popcounts; older words are in the tree
MIN_AXIS = 1 << 12  # time slots of a new stack (a sampled stream has few distinct lines)
AXIS_PER_LINE = 8  # the axis grows when fewer than 7/8 of its slots would be free after renumbering
MAX_LOAD = 0.6

# the kernels stop for Python to grow: the stacks' tables or axes, a queue, a tail buffer; to read a queue's
# spilled pairs back, to drain a full log; their loops also stop for the kernel to renumber a full axis in place
DONE, GROW_TABLE, GROW_AXIS, GROW_QUEUE, GROW_TAIL, RENUMBER, LOAD_QUEUE, LOG_FULL = 0, 1, 2, 3, 4, 5, 6, 7

# The decorator of the loops over accesses and of their inlined helpers: numba without reference counting (the
# arrays belong to the caller; nothing may be allocated)
hot_loop = numba.njit(cache=True, nogil=True, _nrt=False)
hot_helper = numba.njit(cache=True, nogil=True, inline="always", _nrt=False)


class StackArrays(NamedTuple):
    """The arrays of n stacks, row e for stack e. state[e] = [now, live lines, committed words, coherence
    misses, most keys the table holds]; hist[e]: the engine's bins and, last, the cold count; mru[e] = [most
    recent line, its slot]."""

    keys: np.ndarray
    times: np.ndarray
    aux: np.ndarray
    sharers: np.ndarray
    bits: np.ndarray
    tree: np.ndarray
    state: np.ndarray
    hist: np.ndarray
    hist_sum: np.ndarray
    mru: np.ndarray


class Regs(NamedTuple):
    """A stack's scalar state while a kernel works on it (written back by store_regs)."""

    now: int
    live: int
    c_hi: int
    limit: int
    mru_x: np.uint64
    mru_s: np.uint64


class Stacks:
    """n LRU stacks (see the module docstring); sharers: keep each line's sharer set among that many cores."""

    def __init__(self, n: int, sharers: int = 0, rows: int | None = None) -> None:
        """rows: histogram rows (default one per stack; per-set-class stacks count into one row per core)."""
        self.n, self.words = n, max(1, (sharers + 63) // 64)
        self.keys = np.full((n, 64), EMPTY, np.uint64)
        self.times = np.zeros((n, 64), np.int64)
        self.aux = np.zeros((n, 64), np.int64)
        self.sharers = np.zeros((n, 64, self.words if sharers else 0), np.uint64)
        self.bits = np.zeros((n, MIN_AXIS // 64), np.uint64)
        self.tree = np.zeros((n, MIN_AXIS // 64 + 1), np.int64)
        self.state = np.zeros((n, 5), np.int64)  # now, live lines, committed words, coherence misses, limit
        self.state[:, 4] = int(64 * MAX_LOAD)
        self.hist = np.zeros((n if rows is None else rows, N_BINS + 1), np.int64)  # last slot: cold
        self.hist_sum = np.zeros_like(self.hist)
        self.mru = np.full((n, 2), EMPTY, np.uint64)  # each stack's most recent line and its slot

    def arrays(self) -> StackArrays:
        """The arrays the kernels take (grow replaces some: take them again after it)."""
        return StackArrays(self.keys, self.times, self.aux, self.sharers, self.bits, self.tree, self.state,
                           self.hist, self.hist_sum, self.mru)

    def grow(self, status: int) -> None:
        """Twice the hash tables (GROW_TABLE) or the time axes (GROW_AXIS), every stack alike."""
        if status == GROW_TABLE:
            cap = 2 * self.keys.shape[1]
            keys, times, aux = np.full((self.n, cap), EMPTY, np.uint64), np.zeros((self.n, cap), np.int64), \
                np.zeros((self.n, cap), np.int64)
            sharers = np.zeros((self.n, cap, self.sharers.shape[2]), np.uint64)
            _rehash(self.arrays(), keys, times, aux, sharers)
            self.keys, self.times, self.aux, self.sharers = keys, times, aux, sharers
            self.state[:, 4] = int(cap * MAX_LOAD)
            self.mru[:, 0] = EMPTY  # its slot moved
        elif status == GROW_AXIS:
            w = 2 * self.bits.shape[1]
            bits, tree = np.zeros((self.n, w), np.uint64), np.zeros((self.n, w + 1), np.int64)
            for e in range(self.n):
                compact(self.keys, self.times, self.bits, self.state, e, bits, tree)
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
def _rehash(st, n_keys, n_times, n_aux, n_sharers):
    """Every stack's keys (with their time, aux and sharers) moved into larger tables."""
    keys, times, aux, sharers = st.keys, st.times, st.aux, st.sharers
    mask = np.uint64(n_keys.shape[1] - 1)
    for e in range(keys.shape[0]):
        for s in range(keys.shape[1]):
            x = keys[e, s]
            if x == EMPTY:
                continue
            slot = slot_of(x, mask)
            while n_keys[e, slot] != EMPTY:
                slot = (slot + np.uint64(1)) & mask
            n_keys[e, slot], n_times[e, slot], n_aux[e, slot] = x, times[e, s], aux[e, s]
            for w in range(sharers.shape[2]):
                n_sharers[e, slot, w] = sharers[e, s, w]


@numba.njit(cache=True, nogil=True)
def compact(keys, times, bits, state, e, new_bits, new_tree):
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


@hot_loop
def tree_add(tree, e, word, v):
    """Add v to word's count in stack e's Fenwick tree."""
    k = word + 1
    n = tree.shape[1] - 1
    while k <= n:
        tree[e, k] += v
        k += k & (-k)


@hot_helper
def load_regs(st, e):
    """Stack e's scalar state, for registers."""
    return Regs(st.state[e, 0], st.state[e, 1], st.state[e, 2], st.state[e, 4], st.mru[e, 0], st.mru[e, 1])


@hot_helper
def store_regs(st, e, regs):
    """Write stack e's registers back to its arrays."""
    st.state[e, 0], st.state[e, 1], st.state[e, 2] = regs.now, regs.live, regs.c_hi
    st.mru[e, 0], st.mru[e, 1] = regs.mru_x, regs.mru_s


@hot_helper
def room(regs, t_len):
    """DONE when a stack (registers, axis length) can take one more access, else GROW_TABLE, GROW_AXIS or, when
    its full axis leaves room enough once renumbered, RENUMBER."""
    if regs.live + 1 > regs.limit:
        return GROW_TABLE
    if regs.now >= t_len:
        return GROW_AXIS if AXIS_PER_LINE * (regs.live + 1) > t_len else RENUMBER
    return DONE


@numba.njit(cache=True, nogil=True)
def renumber(st, e):
    """Renumber stack e's full axis in place (its registers stored; a loop stopped with RENUMBER). The loop renumbers
    before the access that found the axis full: the same state as renumbering at the stack's next access that is
    not to its most recent line (which leaves the marks alone), where ReuseEngine does."""
    compact(st.keys, st.times, st.bits, st.state, e, st.bits, st.tree)


@hot_helper
def touch(st, e, x, regs):
    """One access to line x on stack e (room was DONE): (its slot, its stack distance, -1 when cold, and the
    registers after it); the distance is counted in the stack's histogram."""
    return touch_row(st, e, x, regs, e)


@hot_helper
def touch_row(st, e, x, regs, row):
    """touch, with the distance counted in histogram row `row` (per-set-class stacks share their core's row)."""
    if x == regs.mru_x:  # the stack's most recent line again: distance 0, its order unchanged
        st.hist[row, 0] += 1
        return regs.mru_s, 0, regs
    now, live, c_hi = regs.now, regs.live, regs.c_hi
    bits = st.bits
    bw = now >> 6
    while c_hi < bw - NEAR_WORDS:  # words falling out of the near window join the tree
        tree_add(st.tree, e, c_hi, popcount(bits[e, c_hi]))
        c_hi += 1
    slot, d = _find(st, e, x, now, live, c_hi)
    if d < 0:
        live += 1
    st.times[e, slot] = now
    bits[e, bw] |= np.uint64(1) << np.uint64(now & 63)
    _count(st, row, d)
    return slot, d, Regs(now + 1, live, c_hi, regs.limit, x, slot)


@hot_helper
def _find(st, e, x, now, live, c_hi):
    """Line x's slot in stack e's table (taken when new) and its stack distance (-1: new), its last use's
    mark cleared and the tree's counts moved to now's word."""
    keys = st.keys
    mask = np.uint64(keys.shape[1] - 1)
    bw = now >> 6
    slot = slot_of(x, mask)
    while keys[e, slot] != x and keys[e, slot] != EMPTY:
        slot = (slot + np.uint64(1)) & mask
    if keys[e, slot] != x:
        keys[e, slot] = x
        if bw < c_hi:
            tree_add(st.tree, e, bw, 1)
        return slot, -1
    return slot, _distance(st, e, st.times[e, slot], bw, live, c_hi)


@hot_helper
def _distance(st, e, t, bw, live, c_hi):
    """Marks after time t on stack e (whose latest word is bw): t's own mark cleared, the tree's count of its
    word moved to bw."""
    bits, tree = st.bits, st.tree
    one = np.uint64(1)
    aw = t >> 6
    tb = np.uint64(t & 63)
    word = bits[e, aw]
    bits[e, aw] = word & ~(one << tb)
    d = popcount(word & ((EMPTY << tb) << one))  # marks after t in its word
    if aw != bw:
        if bw - aw <= NEAR_WORDS:
            for w in range(aw + 1, bw + 1):
                d += popcount(bits[e, w])
        else:  # words up to aw are in the tree
            d = live - popcount(word & (EMPTY >> (np.uint64(63) - tb)))
            f = aw
            while f > 0:
                d -= tree[e, f]
                f &= f - 1
        if aw < c_hi:
            tree_add(tree, e, aw, -1)
        if bw < c_hi:
            tree_add(tree, e, bw, 1)
    return d


@hot_helper
def uncount(st, row, d):
    """Move one access counted at distance d >= 0 in histogram row `row` to the cold slot (a coherence miss found
    after it was counted: ReuseEngine.reclassify's rule); the caller counts the coherence miss."""
    bi = bin_of(d)
    st.hist[row, bi] -= 1
    st.hist[row, st.hist.shape[1] - 1] += 1
    if d >= EXACT_LIMIT:
        st.hist_sum[row, bi] -= d


@hot_helper
def _count(st, e, d):
    """Count distance d (-1: cold) in stack e's histogram."""
    if d < 0:
        st.hist[e, st.hist.shape[1] - 1] += 1
    elif d < EXACT_LIMIT:
        st.hist[e, d] += 1
    else:
        bi = bin_of(d)
        st.hist[e, bi] += 1
        st.hist_sum[e, bi] += d
