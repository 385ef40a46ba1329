"""Column walks that update their lines in place: how many L1 refills bring in a line the walk then dirties,
by how many L1 sets the walk reaches, from one trace pass.

A walk down a column whose rows are a power of two apart puts its lines into one or a few L1 sets. If it
only loads, the misses overlap and the refills cost about L2's reciprocal throughput, which T_mem charges.
If it writes the lines (symm's C[k][j] += .., gramschmidt's and adi's column updates), every way of those
sets holds a dirty line, each refill must first write its victim back, and refills into one set wait on
each other: machines/microbench/updates.c measures 7.4 ns per update down one set on an AMD Zen 3 guest,
3.4 over two sets, 3.1 over four, 1.5 over eight, against 0.3-0.5 ns with the rows padded by one line.

This module streams the sequential trace through the machine's L1 (a set-associative LRU, indexed by the
virtual address, as L1s are) and counts the refills of a load or store that is not its line's first touch
(cold_lines prices those) and walks a column (cold_lines' rule: half a page or more from the same
access's previous address), when the line is then stored to before it leaves L1. The sets reached are
the distinct L1 sets of the last WALK_WINDOW such refills of any block (cold_lines.walk_sets with one
window): clang unrolls a column loop into accesses that each stride two rows, even into two blocks, and
the refills that wait on each other are those in flight together, whichever access made them.
Memory grows with the distinct lines, not with the trace.
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
from common.errors import InputError
from machines.model import CacheLevel

COLUMNS = ["sets_reached", "refills"]   # sets_reached: 1 .. L1's sets


class UpdateWalk:
    """The pass's state beyond TraceWalk's: the lines whose residency in L1 began with a column walk's refill and
    that no store has dirtied yet, one window of the L1 sets the last dirtied refills reached, and the counts per
    sets reached."""

    def __init__(self, l1: CacheLevel):
        # A typed Dict, not an open-addressing array: it is read on L1 misses and stores only, and entries
        # leave once dirtied, so its per-call cost is small next to the L1 simulation's.
        self.pending = Dict.empty(key_type=types.int64, value_type=types.boolean)
        self.walks = new_walk_window(1, l1.sets)
        self.counts = np.zeros(l1.sets + 1, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _count_updates(rows, hit, shift, seen, sites, pending, walks, counts):
    """Add this chunk's dirtied walk refills (TraceRows, `hit` per row in L1) to counts[sets reached] (UpdateWalk's
    pending lines and windows); returns how many lines the set `seen` gained."""
    added = 0
    for r in range(rows.addr.shape[0]):
        a = np.int64(rows.addr[r])
        before = site_previous(rows.block[r], rows.instance[r], a, sites)
        line = a >> shift
        first = set_insert(seen, line)
        if first:
            added += 1
        if not hit[r]:
            if not first and is_strided(before, a):
                pending[line] = True
            elif line in pending:
                del pending[line]
        if rows.is_store[r] and line in pending:
            counts[walk_sets(walks, 0, line % walks.n_sets)] += 1
            del pending[line]
    return added


class ColumnUpdateCounter:
    """Streams chunks of one sequential trace through an L1 and tallies the column walks' dirtied refills."""

    def __init__(self, n_blocks: int, l1: CacheLevel, initial_slots: int = 1 << 16):
        self.walk = TraceWalk(n_blocks, l1.line_bytes, initial_slots)
        self.cache = LevelSim(l1, 1)
        self.state = UpdateWalk(l1)

    def add(self, chunk) -> None:
        """Tally one TraceChunk."""
        if not len(chunk):
            return
        w, s = self.walk, self.state
        w.prepare(chunk)
        lines = np.asarray(chunk.addr, dtype=np.uint64) >> np.uint64(w.shift)
        hit = self.cache.access(lines, np.zeros(len(chunk), dtype=np.int64))
        w.lines += _count_updates(TraceRows.of(chunk), hit, w.shift, w.seen, w.sites, s.pending, s.walks, s.counts)

    def table(self) -> pd.DataFrame:
        """(sets_reached, refills), one row per set count with any."""
        reached = np.flatnonzero(self.state.counts)
        return pd.DataFrame({"sets_reached": reached, "refills": self.state.counts[reached]},
                            columns=COLUMNS).astype("int64")


def column_update_table(trace: Path, l1: CacheLevel) -> pd.DataFrame:
    """The column walks' dirtied L1 refills over a sequential trace, by the L1 sets their walks reach."""
    import instrument

    reader = instrument.open_trace(trace)
    counter = ColumnUpdateCounter(max(reader.info.blocks, default=-1) + 1, l1)
    for chunk in reader.chunks():
        counter.add(chunk)
    return counter.table()


def updates_by_sets(table: pd.DataFrame | None) -> dict[int, int]:
    """sets reached -> dirtied walk refills over the region, from a column_update_table (None: none)."""
    if table is None or table.empty:
        return {}
    missing = set(COLUMNS) - set(table.columns)
    if missing:
        raise InputError(f"column-update table: missing column(s) {', '.join(sorted(missing))}")
    return dict(zip(table["sets_reached"].astype(int).tolist(), table["refills"].astype(int).tolist()))
