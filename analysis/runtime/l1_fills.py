"""The lines each block brings into L1 from the next level while it walks along a row (streamed refills).

T_mem charges every access the L1 misses the reciprocal throughput of the level that serves it, on top of
the core time. For a walk along a row the hardware prefetchers bring the lines into L1 ahead of the loads,
and the L2's fills then compete only for the load and store ports, not for the floating-point pipes: on
the Intel host jacobi-2d's stencil costs 1.31 cycles per point whether its rows sit in L1 or in L2 (it is
bound by its floating-point pipes), while lu's row update costs 0.237 ns per element from L1 and 0.272 from
L2 (bound by its loads and stores, the fills' 1.2 cycles per line in full). `fill_overlap_cycles`
(analysis/runtime/terms/fill_overlap.py) prices that; this module counts, in one streaming pass over the
sequential trace, each block's L1 misses that are not the line's first touch (a first touch is a cold
miss, which DRAM serves) and whose load or store moved less than half a page since its previous execution
(cold_lines' rule: a walk along a row, not down a column). The L1 is the machine's, simulated as one
set-associative LRU cache (cachesim.LevelSim), so its sets and ways decide the misses as the trace's
virtual addresses do on the hardware. Memory grows with the distinct lines (the first-touch set) and the
blocks, not with the trace.
"""
from __future__ import annotations

from pathlib import Path

import numba
import numpy as np
import pandas as pd

from analysis.hitrates.cachesim import LevelSim
from analysis.runtime.cold_lines import TraceRows, TraceWalk, is_strided, set_insert, site_previous
from machines.model import CacheLevel
from common.errors import InputError

COLUMNS = ["block", "streamed_fills"]


@numba.njit(cache=True, nogil=True)
def _streamed_fills(rows, hit, shift, seen, sites, fills):
    """Add each block's streamed L1 refills in this chunk (TraceRows, `hit` per row) to fills[block];
    returns the lines first seen (added to the set `seen`; sites: cold_lines.LoadSites)."""
    added = 0
    for r in range(rows.addr.shape[0]):
        b = rows.block[r]
        a = np.int64(rows.addr[r])
        before = site_previous(b, rows.instance[r], a, sites)
        if set_insert(seen, a >> shift):
            added += 1
        elif not hit[r] and before >= 0 and not is_strided(before, a):
            fills[b] += 1
    return added


class StreamedFillCounter:
    """Streams chunks of one sequential trace through an L1 and tallies each block's streamed refills."""

    def __init__(self, n_blocks: int, l1: CacheLevel, initial_slots: int = 1 << 16):
        self.walk = TraceWalk(n_blocks, l1.line_bytes, initial_slots)
        self.cache = LevelSim(l1, 1)
        self.fills = np.zeros(n_blocks, dtype=np.int64)

    def add(self, chunk) -> None:
        """Tally one TraceChunk."""
        if not len(chunk):
            return
        w = self.walk
        w.prepare(chunk)
        lines = np.asarray(chunk.addr, dtype=np.uint64) >> np.uint64(w.shift)
        hit = self.cache.access(lines, np.zeros(len(chunk), dtype=np.int64))
        w.lines += _streamed_fills(TraceRows.of(chunk), hit, w.shift, w.seen, w.sites, self.fills)

    def table(self) -> pd.DataFrame:
        """(block, streamed_fills), one row per block with any."""
        blocks = np.flatnonzero(self.fills)
        return pd.DataFrame({"block": blocks, "streamed_fills": self.fills[blocks]}, columns=COLUMNS).astype("int64")


def streamed_fill_table(trace: Path, l1: CacheLevel) -> pd.DataFrame:
    """Every block's streamed L1 refills over a sequential trace, for the L1 `l1`."""
    import instrument

    reader = instrument.open_trace(trace)
    counter = StreamedFillCounter(max(reader.info.blocks, default=-1) + 1, l1)
    for chunk in reader.chunks():
        counter.add(chunk)
    return counter.table()


def fills_by_block(table: pd.DataFrame | None) -> dict[int, int]:
    """block -> streamed refills over the region, from a streamed_fill_table (None: no table, no fills)."""
    if table is None or table.empty:
        return {}
    missing = set(COLUMNS) - set(table.columns)
    if missing:
        raise InputError(f"streamed-fill table: missing column(s) {', '.join(sorted(missing))}")
    return dict(zip(table["block"].astype(int).tolist(), table["streamed_fills"].astype(int).tolist()))
