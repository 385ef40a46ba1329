"""Column walks whose lines conflict out of L1 and L2: which level serves those refills, from one trace pass.

T_mem prices every L1 miss at the serving level's reciprocal throughput, the rate of a stream that the
hardware prefetchers fetch ahead; a column walk whose lines spread over the sets keeps many misses in
flight and costs about the same. A column walk whose rows are a power of two apart puts all its lines into
a few sets: they would fit L2's capacity but not its sets, so they keep coming from L3, and with few ways
per set only a few misses are in flight (machines/microbench/walks.c: 3.5-3.8 ns per load on an AMD Zen 3
guest, 4.7-5.0 on a 16-core Xeon guest, against 2.0 and 2.9 ns per line of a stream; atax at N = 1024 runs
its column loop at 7.9 and 5.4 ns per element there, 1.3 and 1.1 with its rows padded by one line).

This module streams the sequential trace through the machine's caches, each a set-associative LRU
(cachesim.LevelSim, placed by `as_placed`), each level seeing the misses of the one above, beside a fully
associative LRU of L2's size. A conflict refill is a load that is not its line's first touch (cold_lines
prices those), walks a column (cold_lines' rule: half a page or more from the same load's previous
address), misses L1 and L2, and would have hit the fully associative L2. It counts them by the level that
served them. Memory grows with the distinct lines and the caches' sizes, not with the trace.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numba
import numpy as np
import pandas as pd

from analysis.hitrates.cachesim import LevelSim
from analysis.runtime.cold_lines import TraceRows, TraceWalk, is_strided, set_insert, site_previous
from common.errors import InputError
from machines.model import CacheLevel

COLUMNS = ["level", "conflict_refills"]   # level: index of the serving cache (2 = L3); len(caches) = RAM


def as_placed(level: CacheLevel) -> CacheLevel:
    """The level indexed by virtual address unless hashed, as if the OS had backed the arrays with consecutive
    frames. Real frames need not be consecutive, but only heavily overfilled sets cost: 2mm at N = 256 walks
    columns 2 KiB apart whose 256 lines fill 32 of L2's sets exactly, and runs at L2 speed on the Zen 3 guest,
    where a random frame map would send 2.3 M of its loads to L3 and predict it 51 % slow instead of 15 %;
    atax's columns overfill their sets 8 to 16 times under either placement."""
    return replace(level, indexing="virtual") if level.indexing == "physical" else level


@numba.njit(cache=True, nogil=True)
def _column_loads(rows, shift, seen, sites, marked):
    """marked[r] = row r is a load walking a column to a line touched before (TraceRows; `seen` the lines
    touched so far, `sites` cold_lines.LoadSites); returns how many lines `seen` gained."""
    added = 0
    for r in range(rows.addr.shape[0]):
        a = np.int64(rows.addr[r])
        before = site_previous(rows.block[r], rows.instance[r], a, sites)
        first = set_insert(seen, a >> shift)
        if first:
            added += 1
        marked[r] = not first and not rows.is_store[r] and is_strided(before, a)
    return added


class ConflictRefillCounter:
    """Streams chunks of one sequential trace through a cache hierarchy and tallies, per serving level,
    the conflict refills of column walks."""

    def __init__(self, n_blocks: int, caches: tuple[CacheLevel, ...], page_bytes: int = 4096,
                 initial_slots: int = 1 << 16):
        if len(caches) < 3:
            raise InputError("conflict refills need three cache levels (L1, L2 and one that serves them)")
        self.walk = TraceWalk(n_blocks, caches[0].line_bytes, initial_slots)
        self.levels = [LevelSim(as_placed(c), 1, page_bytes) for c in caches]
        self.roomy_l2 = LevelSim(replace(caches[1], associativity=0), 1)
        self.counts = np.zeros(len(caches) + 1, dtype=np.int64)

    def add(self, chunk) -> None:
        """Tally one TraceChunk."""
        if not len(chunk):
            return
        w = self.walk
        w.prepare(chunk)
        marked = np.zeros(len(chunk), dtype=np.bool_)
        w.lines += _column_loads(TraceRows.of(chunk), w.shift, w.seen, w.sites, marked)
        lines = np.asarray(chunk.addr, dtype=np.uint64) >> np.uint64(w.shift)
        served = np.full(len(chunk), len(self.levels), dtype=np.int64)   # RAM unless a level hits
        roomy = np.zeros(len(chunk), dtype=np.bool_)
        reaching = np.arange(len(chunk))
        for i, sim in enumerate(self.levels):
            hit = sim.access(lines[reaching], np.zeros(len(reaching), dtype=np.int64))
            if i == 1:
                roomy[reaching] = self.roomy_l2.access(lines[reaching], np.zeros(len(reaching), dtype=np.int64))
            served[reaching[hit]] = i
            reaching = reaching[~hit]
            if not len(reaching):
                break
        self.counts += np.bincount(served[marked & roomy & (served > 1)], minlength=len(self.counts))

    def table(self) -> pd.DataFrame:
        """(level, conflict_refills), one row per level that served any (len(caches) = RAM)."""
        levels = np.flatnonzero(self.counts)
        return pd.DataFrame({"level": levels, "conflict_refills": self.counts[levels]}, columns=COLUMNS).astype("int64")


def conflict_refill_table(trace: Path, caches: tuple[CacheLevel, ...], page_bytes: int = 4096) -> pd.DataFrame:
    """The column walks' conflict refills over a sequential trace, by the level of `caches` that served them."""
    import instrument

    reader = instrument.open_trace(trace)
    counter = ConflictRefillCounter(max(reader.info.blocks, default=-1) + 1, caches, page_bytes)
    for chunk in reader.chunks():
        counter.add(chunk)
    return counter.table()


def refills_by_level(table: pd.DataFrame | None) -> dict[int, int]:
    """level -> conflict refills over the region, from a conflict_refill_table (None: no table, none)."""
    if table is None or table.empty:
        return {}
    missing = set(COLUMNS) - set(table.columns)
    if missing:
        raise InputError(f"conflict-refill table: missing column(s) {', '.join(sorted(missing))}")
    return dict(zip(table["level"].astype(int).tolist(), table["conflict_refills"].astype(int).tolist()))
