"""Exact LRU stack (reuse) distances over a stream of cache-line ids, in O(N log M).

Design (why not a library): PARDA-style splay trees measured 0.9 M refs/s here, and no
maintained Python package streams exact stack distances. The engine keeps

* an open-addressing hash table line -> time of its last access (uint64 key + int32 time),
* a bitmap over the time axis with a 1 at each line's last-access time, plus a Fenwick
  tree of per-64-bit-word counts (64x smaller than a Fenwick over times, so it stays in
  cache; a prefix count is a Fenwick walk plus one popcount), and
* `owner[time]` -> hash slot, so the time axis can be compacted in linear time.

The distance of an access at time `now` to a line last seen at `t` is the number of
distinct lines touched after `t`: `live - prefix(t)`. When the time axis fills up, the
live times are renumbered 0..M-1 (order kept) and the bitmap and tree rebuilt, so memory
is O(distinct lines) (about 12 B per hash slot + 8 B per line of time axis), never
O(trace length). Kernels stop and return when a table must grow;
Python reallocates and calls again, which keeps every numba function allocation-free.
"""
from __future__ import annotations

import numba
import numpy as np

from analysis.profiles import ReuseProfile, histogram_bins
from pptmc.errors import PptmcError

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)  # never a line id: line ids are addresses shifted right
_MAX_LOAD = 0.7
_MIN_TIME_AXIS = 1 << 14
_TIME_AXIS_PER_LINE = 4  # time slots per live line after compaction: 4 B each (owner), 1/8 B of bitmap

# Histogram layout: distances below EXACT_LIMIT get one bin each; above it, each power of
# two [2^j, 2^(j+1)) is split into SUB_BINS equal bins, so every m * 2^(j - SUB_BITS) is an
# edge (cache sizes such as 327680 or 901120 lines fall on edges and stay exact).
SUB_BITS = 6
SUB_BINS = 1 << SUB_BITS
EXACT_BITS = 12
EXACT_LIMIT = 1 << EXACT_BITS
N_BINS = EXACT_LIMIT + (64 - EXACT_BITS) * SUB_BINS


@numba.njit(cache=True, nogil=True, inline="always")
def _bin_of(d: int) -> int:
    """Histogram bin of a distance (see the layout above)."""
    if d < EXACT_LIMIT:
        return d
    j = 0  # floor(log2(d)) by binary search: a bit loop costs ~20 steps per access
    x = d
    if x >= 1 << 32:
        x >>= 32
        j += 32
    if x >= 1 << 16:
        x >>= 16
        j += 16
    if x >= 1 << 8:
        x >>= 8
        j += 8
    if x >= 1 << 4:
        x >>= 4
        j += 4
    if x >= 1 << 2:
        x >>= 2
        j += 2
    if x >= 1 << 1:
        j += 1
    sub = (d >> (j - SUB_BITS)) & (SUB_BINS - 1)
    return EXACT_LIMIT + (j - EXACT_BITS) * SUB_BINS + sub


@numba.njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    """Set bits of a uint64 (SWAR; numba exposes no popcount intrinsic)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@numba.njit(cache=True, nogil=True)
def _process(lines, keys, times, owner, bits, tree, state, out, hist, hist_sum, want_out, limit):
    """Feed lines from state[3]; stop early when a table must grow. Returns the next index.

    state = [now, live, n_keys, start]; out receives distances (-1 cold) when want_out;
    limit is the most keys the hash table may hold.
    The live marks are a bitmap over time; `tree` is a Fenwick tree of per-word counts, so
    a prefix count is a short Fenwick walk plus one popcount, all in cache-friendly arrays.
    """
    now = state[0]
    live = state[1]
    n_keys = state[2]
    i = state[3]
    cap = keys.shape[0]
    mask = np.uint64(cap - 1)
    t_len = owner.shape[0]
    n_words = tree.shape[0] - 1  # Fenwick is 1-indexed
    n = lines.shape[0]
    one = np.uint64(1)
    while i < n:
        if now >= t_len:
            break
        line = lines[i]
        slot = ((line * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask
        while keys[slot] != line and keys[slot] != np.uint64(0xFFFFFFFFFFFFFFFF):
            slot = (slot + one) & mask
        if keys[slot] == line:
            t = times[slot]
            w = t >> 6
            word = bits[w]
            s = _popcount(word & (np.uint64(0xFFFFFFFFFFFFFFFF) >> np.uint64(63 - (t & 63))))
            k = w  # words strictly before w: Fenwick prefix over 1-indexed positions 1..w
            while k > 0:
                s += tree[k]
                k &= k - 1
            d = live - s
            bits[w] = word & ~(one << np.uint64(t & 63))
            k = w + 1
            while k <= n_words:
                tree[k] -= 1
                k += k & (-k)
        else:
            if n_keys + 1 > limit:
                break
            keys[slot] = line
            n_keys += 1
            live += 1
            d = -1
        times[slot] = now
        owner[now] = slot
        w = now >> 6
        bits[w] |= one << np.uint64(now & 63)
        k = w + 1
        while k <= n_words:
            tree[k] += 1
            k += k & (-k)
        now += 1
        if want_out:
            out[i] = d
        if d < 0:
            hist[hist.shape[0] - 1] += 1  # the last slot counts cold misses
        else:
            b = _bin_of(d)
            hist[b] += 1
            hist_sum[b] += d
        i += 1
    state[0] = now
    state[1] = live
    state[2] = n_keys
    state[3] = i
    return i


@numba.njit(cache=True, nogil=True)
def _rehash(keys, times, new_keys, new_times, owner):
    """Move every key into a larger table and repoint owner[] at the new slots."""
    mask = np.uint64(new_keys.shape[0] - 1)
    for s in range(keys.shape[0]):
        line = keys[s]
        if line == np.uint64(0xFFFFFFFFFFFFFFFF):
            continue
        slot = ((line * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask
        while new_keys[slot] != np.uint64(0xFFFFFFFFFFFFFFFF):
            slot = (slot + np.uint64(1)) & mask
        new_keys[slot] = line
        new_times[slot] = times[s]
        owner[times[s]] = slot


@numba.njit(cache=True, nogil=True)
def _compact(owner, bits, now, times, new_owner, new_bits, new_tree):
    """Renumber live times 0..M-1 in order; rebuild bitmap and Fenwick tree. Returns M."""
    m = 0
    for w in range((now + 63) >> 6):
        word = bits[w]
        while word:  # visit set bits only, lowest first
            low = word & (~word + np.uint64(1))
            t = (w << 6) + _popcount(low - np.uint64(1))
            s = owner[t]
            times[s] = m
            new_owner[m] = s
            m += 1
            word ^= low
    full = m >> 6
    for w in range(full):
        new_bits[w] = np.uint64(0xFFFFFFFFFFFFFFFF)
    if m & 63:
        new_bits[full] = (np.uint64(1) << np.uint64(m & 63)) - np.uint64(1)
    for k in range(1, new_tree.shape[0]):  # words k-lowbit(k)..k-1, each 64 full until m
        low = k & (-k)
        new_tree[k] = max(0, min(64 * k, m) - 64 * (k - low))
    return m


def _time_axis(t_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """owner[time] -> slot, the live bitmap, and the per-word Fenwick tree for t_len times."""
    t_len = -(-t_len // 64) * 64
    return (np.zeros(t_len, dtype=np.int32), np.zeros(t_len // 64, dtype=np.uint64),
            np.zeros(t_len // 64 + 1, dtype=np.int32))


class ReuseEngine:
    """Streaming exact stack-distance engine; memory grows with distinct lines only."""

    def __init__(self, initial_lines: int = 1 << 12) -> None:
        cap = 1 << max(4, int(np.ceil(np.log2(max(initial_lines, 16) / _MAX_LOAD))))
        self._keys = np.full(cap, EMPTY, dtype=np.uint64)
        self._times = np.zeros(cap, dtype=np.int32)
        self._owner, self._bits, self._tree = _time_axis(max(_MIN_TIME_AXIS, 2 * initial_lines))
        self._state = np.zeros(4, dtype=np.int64)  # now, live, n_keys, start
        self._hist = np.zeros(N_BINS + 1, dtype=np.int64)  # last slot counts cold misses
        self._hist_sum = np.zeros(N_BINS + 1, dtype=np.int64)

    @property
    def distinct_lines(self) -> int:
        return int(self._state[1])

    @property
    def nbytes(self) -> int:
        """Bytes held by the tables that grow with distinct lines."""
        return sum(a.nbytes for a in (self._keys, self._times, self._owner, self._bits, self._tree))

    def feed(self, lines: np.ndarray) -> None:
        """Add accesses (cache-line ids, program order) to the stream."""
        self._run(np.ascontiguousarray(lines, dtype=np.uint64), None)

    def feed_distances(self, lines: np.ndarray) -> np.ndarray:
        """Like feed, and also return each access's distance (-1 = cold)."""
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        out = np.empty(lines.shape[0], dtype=np.int64)
        self._run(lines, out)
        return out

    def _run(self, lines: np.ndarray, out: np.ndarray | None) -> None:
        """Drive the kernel, growing tables whenever it stops early."""
        want = out is not None
        buf = out if want else np.empty(0, dtype=np.int64)
        self._state[3] = 0
        while _process(lines, self._keys, self._times, self._owner, self._bits, self._tree, self._state,
                       buf, self._hist, self._hist_sum, want, self._key_limit()) < lines.shape[0]:
            if self._state[2] + 1 > self._key_limit():
                self._grow_hash()
            if self._state[0] >= self._owner.shape[0]:
                self._compact()

    def _key_limit(self) -> int:
        return int(self._keys.shape[0] * _MAX_LOAD)

    def _grow_hash(self) -> None:
        """Double the hash table."""
        cap = self._keys.shape[0] * 2
        keys = np.full(cap, EMPTY, dtype=np.uint64)
        times = np.zeros(cap, dtype=np.int32)
        _rehash(self._keys, self._times, keys, times, self._owner)
        self._keys, self._times = keys, times

    def _compact(self) -> None:
        """Renumber the time axis; size it at a multiple of the live lines so compaction is amortised O(1)."""
        live = int(self._state[1])
        t_len = max(_MIN_TIME_AXIS, _TIME_AXIS_PER_LINE * live)
        if t_len >= 2**31 - 1:
            raise PptmcError(f"{live} distinct cache lines: above the engine's 2^29 limit (int32 times); "
                             f"profile a smaller input or a larger --line-size")
        owner, bits, tree = _time_axis(t_len)
        self._state[0] = _compact(self._owner, self._bits, int(self._state[0]), self._times, owner, bits, tree)
        self._owner, self._bits, self._tree = owner, bits, tree

    def histogram(self) -> ReuseProfile:
        """The reuse profile of everything fed so far."""
        counts = self._hist[:N_BINS]
        sums = self._hist_sum[:N_BINS]
        lower, upper = histogram_bins(N_BINS, EXACT_LIMIT, EXACT_BITS, SUB_BITS)
        nz = np.nonzero(counts)[0]
        return ReuseProfile(lower=lower[nz].copy(), upper=upper[nz].copy(), count=counts[nz].copy(),
                            dist_sum=sums[nz].copy(), cold=int(self._hist[N_BINS]),
                            total=int(counts.sum() + self._hist[N_BINS]))


def reuse_distances(lines: np.ndarray) -> np.ndarray:
    """Stack distance of every access in an in-memory array of line ids (-1 = cold)."""
    return ReuseEngine(initial_lines=max(16, min(len(lines), 1 << 20))).feed_distances(lines)
