"""Dense line ids: every distinct cache line gets the next integer, in order of first touch.

Why: the engines of a shared trace (one per core count) each look every access up in a hash
table of their own; those lookups, not the distance arithmetic, were most of their cost on
the all-core-count sweep. A LineIndex does the one hash lookup per access of the sequential
trace once for every core count, and an engine fed the ids (`ReuseEngine.reserve_dense`) finds
a line's slot without hashing, next to the lines first touched with it. Distances depend
only on which accesses share a line, so ids give the same profiles as line ids.

Ids keep the store tag (analysis.profiles.coherence.STORE_TAG) of the line ids they replace.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.kernel_ops import EMPTY, STORE_TAG, free_slot, hash_shift_for, home_slot, prefetch

_MAX_LOAD = 0.7
_AHEAD = 12  # accesses between a slot's prefetch and its probe
_RECENT = 64  # entries of the cache of recent lines (a power of two)


class IndexTables(NamedTuple):
    """A LineIndex's arrays, as one kernel argument: the table (keys, ids), state = [ids
    given, next index, most keys], the recent-lines cache, and each id's last trace position."""

    keys: np.ndarray
    ids: np.ndarray
    state: np.ndarray
    recent_keys: np.ndarray
    recent_ids: np.ndarray
    last: np.ndarray


class Numbering(NamedTuple):
    """One chunk to number (see _number): addresses, line shift, store flags (or none), the
    ids' output, the chunk's first trace position, and the neighbours' outputs (or none)."""

    lines: np.ndarray
    shift: int
    is_store: np.ndarray
    out: np.ndarray
    base: int
    prev: np.ndarray
    nxt: np.ndarray


@numba.njit(cache=True, nogil=True)
def _number(tables, chunk):
    """Write the id of each line, lines[i] >> shift, to out from state[1] on, with the store tag
    it carries or (is_store not empty) is_store[i] gives; number new lines from state[0]; stop
    when the table is full (state[2] keys at most). Returns the next index.

    prev not empty: also each access's previous and next access to its line in the chunk
    (LineIndex.number; last[id] holds trace positions, chunks start at base, so it is never
    cleared; nxt starts at len(lines)).
    recent_*: a small direct-mapped cache of (line, id) in front of the table (most accesses
    touch a line touched a few accesses before: 64 % within 8 on jacobi-2d)."""
    keys, ids, state, recent_keys, recent_ids, last = tables
    lines, shift, is_store, out, base, prev, nxt = chunk
    mask = np.uint64(keys.shape[0] - 1)
    hash_shift = hash_shift_for(mask)
    tag = np.uint64(STORE_TAG)
    sh = np.uint64(shift)
    r_mask = np.uint64(recent_keys.shape[0] - 1)
    stores = is_store.shape[0] > 0
    near = prev.shape[0] > 0
    n_ids = state[0]
    i = state[1]
    n = lines.shape[0]
    while i < n:
        raw = lines[i] >> sh
        line = raw & ~tag
        r = line & r_mask
        if recent_keys[r] != line:
            if i + _AHEAD < n:
                prefetch(keys, home_slot((lines[i + _AHEAD] >> sh) & ~tag, hash_shift, mask))
            slot = free_slot(keys, line, 0, hash_shift, mask)
            if keys[slot] != line:
                if n_ids + 1 > state[2]:
                    break
                keys[slot] = line
                ids[slot] = n_ids
                n_ids += 1
            recent_keys[r] = line
            recent_ids[r] = ids[slot]
        k = recent_ids[r]
        if stores:
            out[i] = np.uint64(k) | (np.uint64(is_store[i]) << np.uint64(63))
        else:
            out[i] = np.uint64(k) | (raw & tag)
        if near:
            p = last[k] - base
            if p >= 0:
                prev[i] = p
                nxt[p] = i
            else:
                prev[i] = -1
            last[k] = base + i
        i += 1
    state[0] = n_ids
    state[1] = i
    return i


@numba.njit(cache=True, nogil=True)
def _rehash_ids(keys, ids, new_keys, new_ids):
    """Move every (line, id) into a larger table."""
    mask = np.uint64(new_keys.shape[0] - 1)
    hash_shift = hash_shift_for(mask)
    for s in range(keys.shape[0]):
        if keys[s] == EMPTY:
            continue
        slot = free_slot(new_keys, keys[s], 0, hash_shift, mask)
        new_keys[slot] = keys[s]
        new_ids[slot] = ids[s]


class LineIndex:
    """Line id -> dense id, shared by the engines of one pass over a trace (12 B a slot)."""

    def __init__(self, initial_lines: int = 1 << 12) -> None:
        cap = 1 << max(4, int(np.ceil(np.log2(max(initial_lines, 16) / _MAX_LOAD))))
        self._keys = np.full(cap, EMPTY, dtype=np.uint64)
        self._ids = np.zeros(cap, dtype=np.uint32)
        self._state = np.zeros(3, dtype=np.int64)  # ids given, next index, most keys
        self._recent_keys = np.full(_RECENT, EMPTY, dtype=np.uint64)
        self._recent_ids = np.zeros(_RECENT, dtype=np.uint32)
        self._last = np.full(0, -1, dtype=np.int64)  # per id, where it was last touched (neighbours)
        self._seen = 0  # where the last chunk numbered with neighbours ended

    @property
    def count(self) -> int:
        """Ids given so far: every id is below it."""
        return int(self._state[0])

    def number(self, addr: np.ndarray, is_store: np.ndarray | None, shift: int, at: int, neighbours: bool = True
               ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """One pass over a chunk of the trace that begins at access `at`: the ids of its cache
        lines, addr >> shift (with the store tag where is_store is set, when given), and with
        neighbours, for each access the positions in the chunk of the previous and the next
        access to its line (int32; -1 and len(addr) where there is none in the chunk; else None).
        Chunks may be skipped, but come in trace order.
        Why one pass: the sweep's tagging, numbering and neighbour passes cost lu MEDIUM 0.2 s."""
        addr = np.ascontiguousarray(addr, dtype=np.uint64)
        n = addr.shape[0]
        if n >= 1 << 31:
            raise ValueError(f"LineIndex.number: {n} accesses in one chunk; at most 2^31 - 1")
        if at < self._seen:
            raise ValueError(f"LineIndex.number: a chunk at access {at}, before the end of the last ({self._seen})")
        stores = _NO_STORES if is_store is None else np.ascontiguousarray(is_store, dtype=np.bool_)
        if len(stores) not in (0, n):
            raise ValueError(f"LineIndex.number: {len(stores)} store flags for {n} accesses")
        out = np.empty(n, dtype=np.uint64)
        if not neighbours:
            self._run(addr, shift, stores, out, at, _NO_NEIGHBOURS, _NO_NEIGHBOURS)
            return out, None, None
        prev, nxt = np.empty(n, dtype=np.int32), np.full(n, n, dtype=np.int32)
        self._run(addr, shift, stores, out, at, prev, nxt)
        self._seen = at + n
        return out, prev, nxt

    def _run(self, lines, shift, stores, out, at, prev, nxt) -> None:
        """Drive _number over a chunk, growing the table (and the last-access table) as it fills."""
        self._state[1] = 0
        while True:
            self._state[2] = int(self._keys.shape[0] * _MAX_LOAD)
            if len(prev) and len(self._last) < self._state[2]:  # every id the kernel may give has a slot
                grown = np.full(self._state[2], -1, dtype=np.int64)
                grown[:len(self._last)] = self._last
                self._last = grown
            tables = IndexTables(self._keys, self._ids, self._state, self._recent_keys, self._recent_ids, self._last)
            if _number(tables, Numbering(lines, shift, stores, out, at, prev, nxt)) == lines.shape[0]:
                return
            keys = np.full(2 * self._keys.shape[0], EMPTY, dtype=np.uint64)
            ids = np.zeros(keys.shape[0], dtype=np.uint32)
            _rehash_ids(self._keys, self._ids, keys, ids)
            self._keys, self._ids = keys, ids


_NO_STORES = np.zeros(0, dtype=np.bool_)
_NO_NEIGHBOURS = np.zeros(0, dtype=np.int32)
