"""Write-invalidate coherence between the private stacks of one core count (see ANALYSIS.md).

Stores travel with their line ids as a tag bit (STORE_TAG, bit 63: line ids are below
2^(47 - log2 line size) times the core count, so the bit is free below 65536 cores) from
the mimicked private traces through the Interleaver. `Directory` walks the shared trace
in its interleaved order and keeps, for every line stored at least once, the set of
cores holding a valid copy (a sharer bitmap, as a directory protocol would): a load adds
its core, a store leaves only its core. An access whose core is not a sharer just before
it is `stale`; if that core's private stack holds the line (its plain distance is finite)
it is a coherence miss. `walk` returns plain line ids and stale flags. The sweep does the
same walk inside the CRD engine, which keeps the sharer sets beside its own hash table
(`ReuseEngine.feed_shared`, one lookup per access instead of two) and reports the stale
accesses of each Interleaver Batch; `CoherenceMisses` looks up only their distances.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.kernel_ops import EXACT_LIMIT, N_BINS, STORE_TAG, bin_of, bit_length
from common.hashing import fib_product

_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_MAX_LOAD = 0.7


def tag_stores(lines: np.ndarray, is_store: np.ndarray) -> np.ndarray:
    """Line ids with STORE_TAG set on stores (a new array)."""
    return lines | (is_store.astype(np.uint64) << np.uint64(63))


@numba.njit(cache=True, nogil=True)
def tagged_lines(addr: np.ndarray, is_store: np.ndarray, shift: int) -> np.ndarray:
    """tag_stores(addr >> shift, is_store) in one pass (numpy's three passes measured 0.1 s of
    the jacobi-2d MEDIUM sweep)."""
    out = np.empty(addr.shape[0], dtype=np.uint64)
    sh = np.uint64(shift)
    for i in range(addr.shape[0]):
        out[i] = (addr[i] >> sh) | (np.uint64(is_store[i]) << np.uint64(63))
    return out


def strip(lines: np.ndarray) -> np.ndarray:
    """Line ids without the store tag."""
    return lines & ~STORE_TAG


@numba.njit(cache=True, nogil=True, inline="always")
def _home(line, hs):
    """Fibonacci hashing: the top log2(table size) bits of the product (hs = 64 - that)."""
    return fib_product(line) >> hs


class DirectoryTables(NamedTuple):
    """A Directory's arrays, as one kernel argument: its table of stored lines (keys, sharer
    sets), state = [n_keys], and the coherence misses found so far (moved, moved_sum)."""

    keys: np.ndarray
    sharers: np.ndarray
    state: np.ndarray
    moved: np.ndarray
    moved_sum: np.ndarray


class WalkRun(NamedTuple):
    """A run of the interleaved trace to walk: tagged line ids, each access's core and (when
    use_dist) plain private distance, and the outputs: plain line ids and stale flags."""

    tagged: np.ndarray
    core: np.ndarray
    dist: np.ndarray
    use_dist: bool
    lines_out: np.ndarray
    stale_out: np.ndarray


@numba.njit(cache=True, nogil=True)
def _walk(tables, run, start, limit):
    """Apply a WalkRun's accesses from `start` in order; stop when the table (DirectoryTables)
    holds `limit` keys and must grow. Returns the next index.

    Writes each access's plain line id and stale flag. Only lines stored at least once are
    in the table: until its first store a line is valid in every core that touched it, and
    a core that never touched it takes a cold miss anyway, so its flag is left False.
    With use_dist, dist[i] is the access's plain private distance (-1 cold): a stale access
    with a finite one is a coherence miss, added to moved[core, bin] (and moved_sum for
    inexact bins) so the private histogram can move it to the cold slot.
    sharers[slot, w] bit b: core 64 * w + b holds a valid copy."""
    keys, sharers, state, moved, moved_sum = tables
    tagged, core, dist, use_dist, lines_out, stale_out = run
    mask = np.uint64(keys.shape[0] - 1)
    hs = np.uint64(64 - bit_length(mask))
    n_words = sharers.shape[1]
    i = start
    while i < tagged.shape[0]:
        raw = tagged[i]
        line = raw & ~STORE_TAG
        store = raw != line
        c = core[i]
        w = c >> 6
        bit = np.uint64(1) << np.uint64(c & 63)
        slot = _home(line, hs)
        while keys[slot] != line and keys[slot] != _EMPTY:
            slot = (slot + np.uint64(1)) & mask
        stale = False
        if keys[slot] == line:
            stale = (sharers[slot, w] & bit) == 0
            if store:
                for x in range(n_words):
                    sharers[slot, x] = 0
            sharers[slot, w] |= bit
        elif store:  # first store: from now on only this core's copy is valid
            if state[0] + 1 > limit:
                break
            keys[slot] = line
            state[0] += 1
            sharers[slot, w] = bit
        lines_out[i] = line
        stale_out[i] = stale
        if use_dist and stale:
            d = dist[i]
            if d >= 0:
                b = bin_of(d)
                moved[c, b] += 1
                if d >= EXACT_LIMIT:
                    moved_sum[c, b] += d
        i += 1
    return i


@numba.njit(cache=True, nogil=True)
def _stale_walk(tables, tagged, pattern, events, progress, limit):
    """_walk's sharer-set updates for a run whose access i is by core pattern[i % len(pattern)],
    recording only the stale accesses' indices in events; progress = [next index, events so far],
    updated; stops early, as _walk does, when the table must grow. (_walk's body, not a shared
    helper: an inlined helper returning the flag made both walks 2-3 times slower.)"""
    keys, sharers, state = tables[0], tables[1], tables[2]
    mask = np.uint64(keys.shape[0] - 1)
    hs = np.uint64(64 - bit_length(mask))
    n_words = sharers.shape[1]
    plen = pattern.shape[0]
    i, n_ev = progress[0], progress[1]
    q = i % plen
    while i < tagged.shape[0]:
        raw = tagged[i]
        line = raw & ~STORE_TAG
        c = pattern[q]
        w = c >> 6
        bit = np.uint64(1) << np.uint64(c & 63)
        slot = _home(line, hs)
        while keys[slot] != line and keys[slot] != _EMPTY:
            slot = (slot + np.uint64(1)) & mask
        if keys[slot] == line:
            if (sharers[slot, w] & bit) == 0:
                events[n_ev] = i
                n_ev += 1
            if raw != line:
                for x in range(n_words):
                    sharers[slot, x] = 0
            sharers[slot, w] |= bit
        elif raw != line:  # first store: from now on only this core's copy is valid
            if state[0] + 1 > limit:
                break
            keys[slot] = line
            state[0] += 1
            sharers[slot, w] = bit
        q = q + 1 if q + 1 < plen else 0
        i += 1
    progress[0], progress[1] = i, n_ev


@numba.njit(cache=True, nogil=True)
def _add_stale(stale, pattern, per, occ, piece_core, dists, moved, moved_sum):
    """CoherenceMisses.add's walk: stale access i of a Batch is access r * per[k] + occ[q] of
    piece k = pattern[q] (q, r = i mod and div the pattern's length); its distance counts when
    finite. (In numpy, with a pass per piece, it cost 0.6 s of lu's 4.8 s sweep.)"""
    plen = pattern.shape[0]
    pow2 = plen & (plen - 1) == 0  # (rr rounds of 2^j cores) a mask and a shift, not a division
    bits = bit_length(np.uint64(plen - 1))  # log2(plen) when pow2
    for i in stale:
        if pow2:
            q = i & (plen - 1)
            r = i >> bits
        else:
            q = i % plen
            r = i // plen
        k = pattern[q]
        d = dists[k][r * per[k] + occ[q]]
        if d >= 0:
            b = bin_of(d)
            c = piece_core[k]
            moved[c, b] += 1
            if d >= EXACT_LIMIT:
                moved_sum[c, b] += d


@numba.njit(cache=True, nogil=True)
def _rehash(keys, sharers, new_keys, new_sharers):
    mask = np.uint64(new_keys.shape[0] - 1)
    hs = np.uint64(64 - bit_length(mask))
    for s in range(keys.shape[0]):
        if keys[s] == _EMPTY:
            continue
        slot = _home(keys[s], hs)
        while new_keys[slot] != _EMPTY:
            slot = (slot + np.uint64(1)) & mask
        new_keys[slot] = keys[s]
        new_sharers[slot] = sharers[s]


def _usable(d: np.ndarray) -> bool:
    """An int32 array numba can take as it is (a check that costs a tenth of np.require's)."""
    return d.dtype == np.int32 and d.flags.c_contiguous and d.flags.writeable


class CoherenceMisses:
    """Coherence misses per core and histogram bin, from the stale accesses of a shared trace
    found by its engine's sharer sets (ReuseEngine.feed_shared) and their private distances."""

    def __init__(self, n_cores: int) -> None:
        self.moved = np.zeros((n_cores, N_BINS), dtype=np.int64)
        self.moved_sum = np.zeros((n_cores, N_BINS), dtype=np.int64)  # distance sums, inexact bins

    def add(self, stale: np.ndarray, pieces: list[tuple[int, np.ndarray]], dists: list[np.ndarray],
            core_pattern: np.ndarray) -> None:
        """Count the stale accesses (indices into one Interleaver Batch) that had a finite
        private distance: dists[k] holds the distances of pieces[k] (as in Batch.pieces), and
        the Batch's access i is of core core_pattern[i % len(core_pattern)]."""
        if len(pieces) != len(dists) or any(len(d) != len(p) for (_, p), d in zip(pieces, dists)):
            raise ValueError("every piece needs one distance per access")
        if not len(stale):
            return
        piece_core = np.array([c for c, _ in pieces], dtype=np.int64)
        pattern, per, occ = _pattern_tables(np.ascontiguousarray(core_pattern, dtype=np.int64), piece_core)
        # a tuple of one array type: numba compiles it once per piece count and indexes it without
        # copying the pieces (read-only ones, spilled to disk, are copied to match the type)
        pieces_d = tuple(d if _usable(d) else np.require(d, dtype=np.int32, requirements=["C", "W"]) for d in dists)
        _add_stale(np.ascontiguousarray(stale, dtype=np.int64), pattern, per, occ, piece_core, pieces_d,
                   self.moved, self.moved_sum)


class Directory:
    """Sharer sets of every line seen in one core count's interleaved trace."""

    def __init__(self, n_cores: int, initial_lines: int = 1 << 12) -> None:
        self.n_cores = n_cores
        cap = 1 << max(4, int(np.ceil(np.log2(max(initial_lines, 16) / _MAX_LOAD))))
        self._keys = np.full(cap, _EMPTY, dtype=np.uint64)
        self._sharers = np.zeros((cap, (n_cores + 63) // 64), dtype=np.uint64)
        self._state = np.zeros(1, dtype=np.int64)
        # per core and histogram bin: coherence misses found so far, and their distance sums (inexact bins)
        self.moved = np.zeros((n_cores, N_BINS), dtype=np.int64)
        self.moved_sum = np.zeros((n_cores, N_BINS), dtype=np.int64)

    def walk(self, tagged: np.ndarray, core: np.ndarray, dist: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
        """(untagged line ids, stale flag of each access) of a run of the interleaved trace.

        dist (optional, int64, same order): each access's plain private distance; coherence
        misses among them are added to `moved` / `moved_sum` (see `corrections`)."""
        tagged = np.ascontiguousarray(tagged, dtype=np.uint64)
        core = np.ascontiguousarray(core, dtype=np.int64)
        use = dist is not None
        d = np.ascontiguousarray(dist, dtype=np.int64) if use else np.zeros(0, dtype=np.int64)
        if use and len(d) != len(tagged):
            raise ValueError(f"{len(d)} distances for {len(tagged)} accesses")
        lines = np.empty(len(tagged), dtype=np.uint64)
        stale = np.empty(len(tagged), dtype=np.bool_)
        i = 0
        run = WalkRun(tagged, core, d, use, lines, stale)
        while True:
            tables = DirectoryTables(self._keys, self._sharers, self._state, self.moved, self.moved_sum)
            i = _walk(tables, run, i, int(self._keys.shape[0] * _MAX_LOAD))
            if i >= len(tagged):
                return lines, stale
            self._grow()

    def stale_of(self, tagged: np.ndarray, core_pattern: np.ndarray) -> np.ndarray:
        """walk's stale accesses only, as ascending indices, for a run whose access i is by core
        core_pattern[i % len(core_pattern)] (what set_classes.StaleOnly needs: no line ids, no cores
        array)."""
        tagged = np.ascontiguousarray(tagged, dtype=np.uint64)
        pattern = np.ascontiguousarray(core_pattern, dtype=np.int64)
        if len(tagged) and not len(pattern):
            raise ValueError("stale_of: an empty core pattern for a non-empty run")
        events = np.empty(len(tagged), dtype=np.int64)
        progress = np.zeros(2, dtype=np.int64)
        while True:
            tables = DirectoryTables(self._keys, self._sharers, self._state, self.moved, self.moved_sum)
            _stale_walk(tables, tagged, pattern, events, progress, int(self._keys.shape[0] * _MAX_LOAD))
            if progress[0] >= len(tagged):
                return events[:progress[1]].copy()
            self._grow()

    def _grow(self) -> None:
        cap = self._keys.shape[0] * 2
        keys = np.full(cap, _EMPTY, dtype=np.uint64)
        sharers = np.zeros((cap, self._sharers.shape[1]), dtype=np.uint64)
        _rehash(self._keys, self._sharers, keys, sharers)
        self._keys, self._sharers = keys, sharers


@numba.njit(cache=True, nogil=True)
def _pattern_tables(core_pattern, piece_core):
    """Piece of every pattern position, positions per piece, and each position's rank among
    its piece's positions (numpy's versions cost more than the walk for short patterns)."""
    slot_of = np.full(piece_core.max() + 1, -1, dtype=np.int64)
    for k in range(piece_core.shape[0]):
        slot_of[piece_core[k]] = k
    pattern = np.empty(core_pattern.shape[0], dtype=np.int64)
    per = np.zeros(piece_core.shape[0], dtype=np.int64)
    occ = np.empty(core_pattern.shape[0], dtype=np.int64)
    for q in range(core_pattern.shape[0]):
        k = slot_of[core_pattern[q]]
        pattern[q] = k
        occ[q] = per[k]
        per[k] += 1
    return pattern, per, occ
