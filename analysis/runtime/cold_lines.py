"""The strides with which loads first touch their cache lines, and what column walks' cold lines cost.

A region starts with cold caches (the harness flushes them, as the paper's measurements do), so each
line's first load comes from DRAM. Hardware prefetchers follow a walk along a row, and a stream of such
lines costs line / bandwidth, which is what T_mem charges for DRAM. A walk down a column, whose loads
land half a page or more apart, is not followed the same way: on the Intel host its cold lines cost
8 ns each when they spread over all 64 L1 sets and 13-15 ns when they fall into 16 or fewer (bicg's
3840-byte rows), against 5.4 ns along a row (machines/microbench/strided.c). This module finds, in one
streaming pass over the sequential trace, for every first touch, whether it is strided: its distance from
the same load's previous address (a load is a block and its position in the block's execution) is half a
page or more. A strided first touch's walk is then measured by how many of the L1's sets the block's
last WALK_WINDOW strided first touches fall into: per block and not per load, because an unrolled loop
splits one walk over several loads (bicg's column loop, unrolled twice, has two loads of stride 7680
that together walk 3840 bytes at a time over 16 sets, where either alone would say 8).
When a walk moves on to the next line-column, its first WALK_WINDOW touches still share the window with
the last column's sets (bicg: 16 sets, then 17-32 for 64 touches out of every 500).
`strided_extra_ns` prices the table for a machine. Memory grows with the distinct lines (a hash set of
them), not with the trace.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np
import pandas as pd

from common.errors import InputError
from common.hashing import fib_product

COLUMNS = ["sets_reached", "first_touches"]   # sets_reached 0: not strided (a stream's first touch)
SITES_PER_BLOCK = 64          # loads of a block told apart; later ones share the last slot
STRIDED_MIN_BYTES = 2048      # half a 4 KiB page: at most two loads of the walk per page
WALK_WINDOW = 64              # a block's recent strided first touches whose sets are counted
_EMPTY = np.int64(-1)


class TraceRows(NamedTuple):
    """The columns of a trace chunk the passes read, bundled for their kernels."""

    addr: np.ndarray       # uint64 byte address
    is_store: np.ndarray   # bool
    block: np.ndarray      # int64 block id
    instance: np.ndarray   # int64 execution of the block

    @staticmethod
    def of(chunk) -> "TraceRows":
        """A TraceChunk's columns (the block ids widened to int64)."""
        return TraceRows(chunk.addr, chunk.is_store, chunk.block.astype(np.int64), chunk.block_instance)


class LoadSites(NamedTuple):
    """Every load's (and store's) previous address: prev_addr[b, p] for access p of block b's execution (the
    last slot shared by later ones); last_instance[b] and position[b] number the accesses of the current one."""

    prev_addr: np.ndarray
    last_instance: np.ndarray
    position: np.ndarray


class WalkWindow(NamedTuple):
    """Per block, the L1 sets of its last WALK_WINDOW strided first touches (ring, ring_next), a scratch of
    zeros per set (present) and the L1's set count."""

    ring: np.ndarray
    ring_next: np.ndarray
    present: np.ndarray
    n_sets: np.int64


@numba.njit(cache=True, nogil=True, inline="always")
def site_previous(b, inst, a, sites):
    """The previous address of this access's load or store (a block and its position in the block's
    execution; -1 before its first), recording `a` as the new one in `sites` (LoadSites)."""
    if inst != sites.last_instance[b]:
        sites.last_instance[b] = inst
        sites.position[b] = 0
    p = min(sites.position[b], sites.prev_addr.shape[1] - 1)
    sites.position[b] += 1
    before = sites.prev_addr[b, p]
    sites.prev_addr[b, p] = a
    return before


@numba.njit(cache=True, nogil=True, inline="always")
def is_strided(before, a):
    """A walk down a column: the same load's previous address half a page or more away."""
    return before >= 0 and abs(a - before) >= STRIDED_MIN_BYTES


# The set of lines seen is an open-addressing array rather than numba.typed.Dict: the pass does one
# lookup per trace row, and a typed dict's per-call overhead would dominate it (the engine in reuse.py
# keeps its line table the same way).
@numba.njit(cache=True, nogil=True)
def set_insert(table, key):
    """Add `key` (>= 0) to the open-addressing set; True when it was not there."""
    mask = table.shape[0] - 1
    h = np.int64(fib_product(key) >> np.uint64(17)) & mask  # (the low 47 bits: the same as signed arithmetic)
    while table[h] != _EMPTY:
        if table[h] == key:
            return False
        h = (h + 1) & mask
    table[h] = key
    return True


@numba.njit(cache=True, nogil=True)
def _rehash(old, new):
    """Move every key of `old` into the (larger, empty) set `new`."""
    for i in range(old.shape[0]):
        if old[i] != _EMPTY:
            set_insert(new, old[i])


@numba.njit(cache=True, nogil=True)
def _distinct_sets(ring, filled, present):
    """How many distinct values the first `filled` entries of `ring` hold (`present`: scratch of zeros)."""
    distinct = 0
    for i in range(filled):
        if present[ring[i]] == 0:
            present[ring[i]] = 1
            distinct += 1
    for i in range(filled):
        present[ring[i]] = 0
    return distinct


@numba.njit(cache=True, nogil=True)
def walk_sets(walks, b, set_index):
    """Record that block b's walk reached L1 set `set_index` (WalkWindow); returns the distinct sets of its last
    WALK_WINDOW records."""
    window = walks.ring.shape[1]
    walks.ring[b, walks.ring_next[b] % window] = set_index
    walks.ring_next[b] += 1
    return _distinct_sets(walks.ring[b], min(walks.ring_next[b], window), walks.present)


def new_walk_window(n_blocks: int, sets: int) -> WalkWindow:
    """An empty WalkWindow for `n_blocks` blocks over an L1 of `sets` sets."""
    return WalkWindow(np.zeros((n_blocks, WALK_WINDOW), dtype=np.int64), np.zeros(n_blocks, dtype=np.int64),
                      np.zeros(sets, dtype=np.int8), np.int64(sets))


def cost_at_sets(costs_ns: tuple[float, ...], sets_reached: np.ndarray) -> np.ndarray:
    """A figure per walk over 2^i sets (`costs_ns[i]`), interpolated at log2 of each walk's sets reached (2mm's
    non-aligned rows reach 50-53 of 64 sets)."""
    return np.interp(np.log2(np.asarray(sets_reached, dtype=float)), np.arange(len(costs_ns)), costs_ns)


@numba.njit(cache=True, nogil=True)
def _first_touches(rows, shift, seen, sites, walks, out):
    """Classify the loads in this chunk (TraceRows) that touch a line first: out[n] = sets their walk
    reaches (WalkWindow), 0 if not strided; returns n and how many lines (loads' and stores') the set
    `seen` gained.

    A first touch whose load has no previous address (LoadSites) is not strided; a line a store touches
    first is no load's first touch (the store brought it in)."""
    n = 0
    added = 0
    for r in range(rows.addr.shape[0]):
        b = rows.block[r]
        a = np.int64(rows.addr[r])
        before = site_previous(b, rows.instance[r], a, sites)
        if not set_insert(seen, a >> shift):
            continue
        added += 1
        if rows.is_store[r]:
            continue
        out[n] = walk_sets(walks, b, (a >> shift) % walks.n_sets) if is_strided(before, a) else 0
        n += 1
    return n, added


class TraceWalk:
    """What a streaming pass over a sequential trace keeps between chunks: the lines seen so far (a line's
    first access is its first touch) and every load's previous address (a column walk or a row)."""

    def __init__(self, n_blocks: int, line_bytes: int = 64, initial_slots: int = 1 << 16):
        if line_bytes <= 0 or line_bytes & (line_bytes - 1):
            raise InputError(f"line size {line_bytes}: must be a power of two")
        self.shift = np.int64(line_bytes.bit_length() - 1)
        self.n_blocks = n_blocks
        self.seen = np.full(max(2, 1 << (initial_slots - 1).bit_length()), _EMPTY, dtype=np.int64)
        self.lines = 0
        self.sites = LoadSites(np.full((n_blocks, SITES_PER_BLOCK), _EMPTY, dtype=np.int64),
                               np.full(n_blocks, -1, dtype=np.int64), np.zeros(n_blocks, dtype=np.int64))

    def prepare(self, chunk) -> None:
        """Check the chunk's block ids and grow the line set so that it stays at most half full after
        the chunk's rows (a pass adds to `lines` what its kernel reports it added)."""
        if int(chunk.block.max()) >= self.n_blocks:
            raise InputError(f"block id {int(chunk.block.max())} in the trace is not in its block table "
                             f"({self.n_blocks} blocks); the trace is corrupt")
        size = self.seen.shape[0]
        while 2 * (self.lines + len(chunk)) > size:
            size *= 2
        if size != self.seen.shape[0]:
            bigger = np.full(size, _EMPTY, dtype=np.int64)
            _rehash(self.seen, bigger)
            self.seen = bigger


class FirstTouchCounter:
    """Streams chunks of one sequential trace and tallies the strides of first-touching loads."""

    def __init__(self, n_blocks: int, line_bytes: int = 64, sets: int = 64, initial_slots: int = 1 << 16):
        if sets <= 0:
            raise InputError(f"{sets} cache sets: must be positive")
        self.walk = TraceWalk(n_blocks, line_bytes, initial_slots)
        self.walks = new_walk_window(n_blocks, sets)
        self.counts: dict[int, int] = {}

    def add(self, chunk) -> None:
        """Tally one TraceChunk."""
        if not len(chunk):
            return
        w = self.walk
        w.prepare(chunk)
        out = np.empty(len(chunk), dtype=np.int64)
        n, added = _first_touches(TraceRows.of(chunk), w.shift, w.seen, w.sites, self.walks, out)
        w.lines += added
        classes, counts = np.unique(out[:n], return_counts=True)
        for s, c in zip(classes.tolist(), counts.tolist()):
            self.counts[s] = self.counts.get(s, 0) + c

    def table(self) -> pd.DataFrame:
        """(sets_reached, first_touches), one row per distinct set count (0: not strided)."""
        rows = sorted(self.counts.items())
        return pd.DataFrame(rows, columns=COLUMNS).astype("int64")


def first_touch_table(trace: Path, line_bytes: int = 64, sets: int = 64) -> pd.DataFrame:
    """The loads that first touch each line of a sequential trace, by the L1 sets their walk reaches."""
    import instrument

    reader = instrument.open_trace(trace)
    counter = FirstTouchCounter(max(reader.info.blocks, default=-1) + 1, line_bytes, sets)
    for chunk in reader.chunks():
        counter.add(chunk)
    return counter.table()


def strided_extra_ns(table: pd.DataFrame | None, costs_ns: tuple[float, ...], stream_ns: float) -> float:
    """Whole-region ns the strided first touches cost beyond a stream's line / bandwidth.

    `costs_ns[i]`: ns per cold line of a walk over 2^i sets (the machine's ram.strided_cold_line_ns), read at
    each walk's sets by cost_at_sets."""
    if table is None or not costs_ns or table.empty:
        return 0.0
    missing = set(COLUMNS) - set(table.columns)
    if missing:
        raise InputError(f"first-touch table: missing column(s) {', '.join(sorted(missing))}")
    strided = table[table["sets_reached"] > 0]
    cost = cost_at_sets(costs_ns, strided["sets_reached"].to_numpy())
    return float(np.sum(strided["first_touches"].to_numpy() * np.maximum(0.0, cost - stream_ns)))
