"""Write-back profiles: how many dirty lines a cache of any size evicts (DRAM write traffic, MAPredict).

A store makes its line dirty; a dirty line is written back when it is evicted. In a fully associative
LRU cache of C lines, the line is evicted in the gap before an access of distance d iff C <= d, and
it is still dirty then iff every gap since the last store had a distance below C. With M the largest
gap distance since the last store (0 right after it), a gap of distance d writes the line back iff
M < C <= d. So every gap with d > M adds one write-back for each C in (M, d]: its *start* M and *end*
d (infinite when the line is never touched again within a cold-miss gap) make two histograms, and the
write-backs of a C-line cache are (starts below C) - (ends below C). For SDCM's set-associative
hit probability P(d) the same reads as sum P(M) - sum P(d): an access hits iff its distance is below a
random effective capacity, the same one for both ends of a gap. A dirty line's last gap runs to the
end of the stream, with d its stack depth then: a cache of C <= d has evicted it within the stream; a
larger one still holds it, and that write-back falls outside the stream (not counted).

`WritebackTracker` keeps each stored line's M (-1 when clean) in an open-addressing table beside a
ReuseEngine that gives each access's distance, and adds the starts and ends to two ReuseProfiles'
counters (their `cold` slot counts infinite ends). analysis/hitrates/dram.py turns them into bytes.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.kernel_ops import EMPTY, N_BINS, STORE_TAG, add_to_bin, free_slot, hash_shift_for
from analysis.profiles.profileset import ReuseProfile
from analysis.profiles.reuse import ReuseEngine, profile_from_counters

_MAX_LOAD = 0.6


class TrackerTables(NamedTuple):
    """The kernel's state: line keys and each line's M (-1 clean), [n_keys], and the two histograms'
    counters (counts and distance sums, infinite slot last)."""

    keys: np.ndarray
    dirty: np.ndarray
    state: np.ndarray
    starts: np.ndarray
    starts_sum: np.ndarray
    ends: np.ndarray
    ends_sum: np.ndarray


@numba.njit(cache=True, nogil=True)
def _track(t, lines, dist, begin, limit):
    """Walk accesses from `begin` (tagged line ids and their distances, -1 = infinite); stop when the
    table holds `limit` keys and must grow. Returns the next index (module docstring for the rule)."""
    mask = np.uint64(t.keys.shape[0] - 1)
    hs = hash_shift_for(mask)
    for i in range(begin, lines.shape[0]):
        line = lines[i] & ~STORE_TAG
        store = lines[i] != line
        slot = free_slot(t.keys, line, 0, hs, mask)
        if t.keys[slot] != line:  # never stored: clean, and nothing to keep until its first store
            if not store:
                continue
            if t.state[0] + 1 > limit:
                return i
            t.keys[slot] = line
            t.dirty[slot] = -1
            t.state[0] += 1
        m, d = t.dirty[slot], dist[i]
        if m >= 0 and (d < 0 or d > m):  # this gap writes the line back for C in (m, d]
            add_to_bin(m, 1, t.starts, t.starts_sum)
            if d < 0:
                t.ends[N_BINS] += 1
            else:
                add_to_bin(d, 1, t.ends, t.ends_sum)
        if store:
            t.dirty[slot] = 0
        elif m >= 0:
            t.dirty[slot] = -1 if d < 0 else max(m, d)
    return lines.shape[0]


class WritebackTracker:
    """Write-back starts and ends of one access stream (tagged line ids in order)."""

    def __init__(self, initial_lines: int = 1 << 12) -> None:
        self.engine = ReuseEngine(initial_lines)
        self.tables = self._tables(1 << max(4, int(np.ceil(np.log2(initial_lines / _MAX_LOAD)))))

    @staticmethod
    def _tables(cap: int) -> TrackerTables:
        z = lambda: np.zeros(N_BINS + 1, dtype=np.int64)  # noqa: E731
        return TrackerTables(np.full(cap, EMPTY, dtype=np.uint64), np.full(cap, -1, dtype=np.int64),
                             np.zeros(1, dtype=np.int64), z(), z(), z(), z())

    def feed(self, lines: np.ndarray) -> None:
        """Add accesses (line ids carrying STORE_TAG on stores)."""
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        dist = self.engine.feed_distances(lines, tagged=True)
        i = 0
        while (i := _track(self.tables, lines, dist, i, int(self.tables.keys.shape[0] * _MAX_LOAD))) < len(lines):
            self._grow()

    def _grow(self) -> None:
        """Double the line table (rehashing every line's state)."""
        old = self.tables
        new = self._tables(2 * old.keys.shape[0])
        new.state[0] = old.state[0]
        _rehash(old.keys, old.dirty, new.keys, new.dirty)
        self.tables = new._replace(starts=old.starts, starts_sum=old.starts_sum, ends=old.ends,
                                   ends_sum=old.ends_sum)

    def profiles(self) -> tuple[ReuseProfile, ReuseProfile]:
        """(starts, ends) as ReuseProfiles: bins of M and of d; ends' cold slot = infinite ends. The
        last gap of each dirty line runs to the end of the stream: its d is the line's stack depth
        then (a cache of C <= d has evicted it, dirty, within the stream)."""
        t = self.tables
        starts, starts_sum, ends, ends_sum = (a.copy() for a in (t.starts, t.starts_sum, t.ends, t.ends_sum))
        lines, depths = self.engine.stack_depths()
        _last_gaps(t.keys, t.dirty, lines, depths, (starts, starts_sum, ends, ends_sum))
        return profile_from_counters(starts, starts_sum, 0), profile_from_counters(ends, ends_sum, 0)


@numba.njit(cache=True, nogil=True)
def _last_gaps(keys, dirty, lines, depths, hists):
    """Add the gap from each dirty line's last access to the stream's end (its stack depth)."""
    starts, starts_sum, ends, ends_sum = hists
    mask = np.uint64(keys.shape[0] - 1)
    hs = hash_shift_for(mask)
    for j in range(lines.shape[0]):
        m, d = dirty[free_slot(keys, lines[j], 0, hs, mask)], depths[j]
        if 0 <= m < d:
            add_to_bin(m, 1, starts, starts_sum)
            add_to_bin(d, 1, ends, ends_sum)


@numba.njit(cache=True, nogil=True)
def _rehash(keys, dirty, new_keys, new_dirty):
    mask = np.uint64(new_keys.shape[0] - 1)
    hs = hash_shift_for(mask)
    for s in range(keys.shape[0]):
        if keys[s] != EMPTY:
            slot = free_slot(new_keys, keys[s], 0, hs, mask)
            new_keys[slot] = keys[s]
            new_dirty[slot] = dirty[s]
