"""The refills of the trace's walks, from one pass through the machine's L1 (and, for conflict refills, the levels
below it): along rows (streamed refills, per block), down columns into lines the walk then writes (dirtied
refills, by the L1 sets the walk reaches) and down columns whose lines conflict out of L1 and L2 (conflict
refills, by serving level: analysis/runtime/conflict_refills.py says why and how).

**Streamed refills.** T_mem charges every access the L1 misses the reciprocal throughput of the level that
serves it, on top of the core time. For a walk along a row the hardware prefetchers bring the lines into L1
ahead of the loads, and the L2's fills then compete only for the load and store ports, not for the
floating-point pipes: on the Intel host jacobi-2d's stencil costs 1.31 cycles per point whether its rows sit
in L1 or in L2 (it is bound by its floating-point pipes), while lu's row update costs 0.237 ns per element
from L1 and 0.272 from L2 (bound by its loads and stores, the fills' 1.2 cycles per line in full).
`fill_overlap_cycles` (analysis/runtime/terms/fill_overlap.py) prices that. A streamed refill is an L1 miss
that is not the line's first touch (a first touch is a cold miss, which DRAM serves) and whose load or store
moved less than half a page since its previous execution (cold_lines' rule: a walk along a row, not down a
column); they are counted per block.

**Dirtied refills.** A walk down a column whose rows are a power of two apart puts its lines into one or a
few L1 sets. If it only loads, the misses overlap and the refills cost about L2's reciprocal throughput. If
it writes the lines (symm's C[k][j] += .., gramschmidt's and adi's column updates), every way of those sets
holds a dirty line, each refill must first write its victim back, and refills into one set wait on each
other: machines/microbench/updates.c measures 7.4 ns per update down one set on an AMD Zen 3 guest, 3.4
over two sets, 3.1 over four, 1.5 over eight, against 0.3-0.5 ns with the rows padded by one line
(terms/column_walks.update_extra_ns prices them). A dirtied refill is an L1 miss of a load or store that is
not the line's first touch and walks a column (the same rule: half a page or more), when the line is then
stored to before it leaves L1. The sets reached are the distinct L1 sets of the last WALK_WINDOW dirtied
refills of any block (cold_lines.walk_sets with one window): clang unrolls a column loop into accesses that
each stride two rows, even into two blocks, and the refills that wait on each other are those in flight
together, whichever access made them.

The L1 is the machine's, simulated as one set-associative LRU cache (cachesim.LevelSim, placed by
conflict_refills.as_placed: indexed by the virtual address, as L1s are), so its sets and ways decide the
misses as the trace's virtual addresses do on the hardware. Memory grows with the distinct lines, the
blocks and the caches' sizes, not with the trace.
"""
from __future__ import annotations

from pathlib import Path

import numba
import numpy as np
import pandas as pd
from numba import types
from numba.typed import Dict

from analysis.hitrates.cachesim import LevelSim
from analysis.runtime.cold_lines import (TraceRows, TraceWalk, is_strided, new_walk_window, set_insert, site_previous,
                                        walk_sets)
from analysis.runtime.conflict_refills import DeeperLevels, as_placed
from common.errors import InputError
from machines.model import CacheLevel

COLUMNS = ["kind", "key", "count"]
STREAMED = "streamed_fills"    # key: the block
DIRTIED = "dirtied_refills"    # key: the L1 sets the walk reached (1 .. L1's sets)
CONFLICT = "conflict_refills"  # key: the serving level (2 = L3; len(caches) = RAM)


class WalkCounts:
    """The pass's state beyond TraceWalk's: the lines whose residency in L1 began with a column walk's refill and
    that no store has dirtied yet, one window of the L1 sets the last dirtied refills reached, the dirtied
    refills per sets reached and the streamed refills per block."""

    def __init__(self, n_blocks: int, l1: CacheLevel):
        # A typed Dict, not an open-addressing array: it is read on L1 misses and stores only, and entries
        # leave once dirtied, so its per-call cost is small next to the L1 simulation's.
        self.pending = Dict.empty(key_type=types.int64, value_type=types.boolean)
        self.window = new_walk_window(1, l1.sets)
        self.dirtied = np.zeros(l1.sets + 1, dtype=np.int64)
        self.streamed = np.zeros(n_blocks, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _count_walks(rows, hit, shift, seen, sites, pending, window, dirtied, streamed, column_load):
    """Add this chunk's refills (TraceRows, `hit` per row in L1) to streamed[block] and dirtied[sets reached]
    (WalkCounts' arrays), and mark in column_load[r] the loads walking a column to a line touched before;
    returns how many lines the set `seen` gained."""
    added = 0
    for r in range(rows.addr.shape[0]):
        b = rows.block[r]
        a = np.int64(rows.addr[r])
        before = site_previous(b, rows.instance[r], a, sites)
        line = a >> shift
        first = set_insert(seen, line)
        if first:
            added += 1
        down_column = not first and is_strided(before, a)
        column_load[r] = down_column and not rows.is_store[r]
        if not hit[r]:
            if down_column:
                pending[line] = True
            else:
                if not first and before >= 0:
                    streamed[b] += 1
                if line in pending:
                    del pending[line]
        if rows.is_store[r] and line in pending:
            dirtied[walk_sets(window, 0, line % window.n_sets)] += 1
            del pending[line]
    return added


class L1WalkCounter:
    """Streams chunks of one sequential trace through the machine's L1 and tallies its walks' streamed and dirtied
    refills, and with `conflicts` their conflict refills through the levels below (three levels needed)."""

    def __init__(self, n_blocks: int, caches: tuple[CacheLevel, ...], conflicts: bool = False,
                 initial_slots: int = 1 << 16, page_bytes: int = 4096):
        l1 = caches[0]
        self.walk = TraceWalk(n_blocks, l1.line_bytes, initial_slots)
        self.cache = LevelSim(as_placed(l1), 1, page_bytes)
        self.counts = WalkCounts(n_blocks, l1)
        self.deeper = DeeperLevels(caches, page_bytes) if conflicts else None

    def add(self, chunk) -> None:
        """Tally one TraceChunk."""
        if not len(chunk):
            return
        w, c = self.walk, self.counts
        w.prepare(chunk)
        lines = np.asarray(chunk.addr, dtype=np.uint64) >> np.uint64(w.shift)
        hit = self.cache.access(lines, np.zeros(len(chunk), dtype=np.int64))
        column_load = np.zeros(len(chunk), dtype=np.bool_)
        w.lines += _count_walks(TraceRows.of(chunk), hit, w.shift, w.seen, w.sites, c.pending, c.window,
                                c.dirtied, c.streamed, column_load)
        if self.deeper is not None:
            self.deeper.serve(lines[~hit], column_load[~hit])

    def table(self) -> pd.DataFrame:
        """(kind, key, count): the streamed refills of each block with any, the dirtied ones of each set count, the
        conflict refills of each serving level (when counted)."""
        parts = [(STREAMED, self.counts.streamed), (DIRTIED, self.counts.dirtied)]
        parts += [(CONFLICT, self.deeper.counts)] if self.deeper is not None else []
        keys = [np.flatnonzero(counts) for _, counts in parts]
        return pd.DataFrame({"kind": [kind for (kind, _), k in zip(parts, keys) for _ in k],
                             "key": np.concatenate(keys).astype("int64"),
                             "count": np.concatenate([counts[k] for (_, counts), k in zip(parts, keys)])
                             .astype("int64")}, columns=COLUMNS)


def l1_walk_table(trace: Path, caches: tuple[CacheLevel, ...], conflicts: bool = False) -> pd.DataFrame:
    """The streamed and dirtied L1 refills of a sequential trace's walks for the machine's `caches`, and with
    `conflicts` the conflict refills by serving level."""
    import instrument

    reader = instrument.open_trace(trace)
    counter = L1WalkCounter(max(reader.info.blocks, default=-1) + 1, caches, conflicts)
    for chunk in reader.chunks():
        counter.add(chunk)
    return counter.table()


def _counts_of(table: pd.DataFrame | None, kind: str) -> dict[int, int]:
    """key -> count of one kind's rows of an l1_walk_table (None: no table, none)."""
    if table is None or table.empty:
        return {}
    missing = set(COLUMNS) - set(table.columns)
    if missing:
        raise InputError(f"L1 walk table: missing column(s) {', '.join(sorted(missing))}")
    rows = table[table["kind"] == kind]
    return dict(zip(rows["key"].astype(int).tolist(), rows["count"].astype(int).tolist()))


def fills_by_block(table: pd.DataFrame | None) -> dict[int, int]:
    """block -> streamed refills over the region, from an l1_walk_table (None: no table, no fills)."""
    return _counts_of(table, STREAMED)


def updates_by_sets(table: pd.DataFrame | None) -> dict[int, int]:
    """sets reached -> dirtied column-walk refills over the region, from an l1_walk_table (None: none)."""
    return _counts_of(table, DIRTIED)


def refills_by_level(table: pd.DataFrame | None) -> dict[int, int]:
    """serving level -> column walks' conflict refills over the region, from an l1_walk_table (None: none)."""
    return _counts_of(table, CONFLICT)
