"""The reuse engine's time axis (analysis/profiles/reuse.py): a bitmap with a 1 at each line's
last-access time, and a Fenwick tree of per-64-bit-word counts (64x smaller than a Fenwick
over times, so it stays in cache; a prefix count is a Fenwick walk plus one popcount).

The tree holds only the committed words, those below a boundary c_hi that stays at least
NEAR_WORDS words behind now's: a word is added in one walk when it falls that far behind, so
short and near reuses and first touches never walk it. When the axis fills up, compaction
renumbers the live times 0..M-1 (order kept) and rebuilds both, so memory is O(distinct
lines) (3/16 B per time slot), never O(trace length).
"""
from __future__ import annotations

import numba
import numpy as np

from analysis.profiles.kernel_ops import bit_length, popcount_swar

MIN_TIME_AXIS = 1 << 16
MAX_TIME_AXIS = (1 << 31) - (1 << 27)  # times are int32; a multiple of every axis_length step
NEAR_WORDS = 16  # hits at most this many bitmap words back count popcounts; older words are in the tree
TIME_AXIS_PER_LINE = 16  # time slots per live line after compaction: 3/16 B each (bitmap + tree)


@numba.njit(cache=True, nogil=True, inline="always")
def commit_words(bits, tree, c_hi, upto):
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


@numba.njit(cache=True, nogil=True, inline="always")
def tree_add(tree, word, c_hi, delta):
    """A mark entered (delta 1) or left (-1) bitmap word `word`: the tree counts it only when
    the word is committed (below c_hi). Fenwick is 1-indexed: position k holds word k-1."""
    if word < c_hi:
        n_words = tree.shape[0] - 1
        k = word + 1
        while k <= n_words:
            tree[k] += delta
            k += k & (-k)


@numba.njit(cache=True, nogil=True)
def compact(keys, times, bits, now, new_bits, new_tree):
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
def axis_length(t_len: int) -> int:
    """Round a time-axis length up to a multiple of 64 on a 1/8-octave grid, so that a
    growing engine keeps the same length (and compacts in place) over most compactions."""
    step = max(64, 1 << max(0, bit_length(t_len) - 4))
    return (t_len + step - 1) // step * step


@numba.njit(cache=True, nogil=True)
def target_axis(live: int, min_axis: int) -> int:
    """Time-axis length for `live` lines after a compaction: a multiple of them (so compaction
    is amortised O(1)), at least min_axis."""
    return axis_length(min(max(min_axis, TIME_AXIS_PER_LINE * live), MAX_TIME_AXIS))


def axis_words(t_len: int) -> int:
    """Bitmap words of a time axis for t_len times (its length rounded as axis_length does; the
    per-word Fenwick tree has one more slot)."""
    return int(axis_length(t_len)) // 64
