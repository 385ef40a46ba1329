"""Per block: how many of its stores write another cache line than the store before them.

An out-of-order core commits stores to L1 in program order, and Golden Cove commits two in one
cycle only when they write the same line: consecutive stores along a row pair up, stores down a
column (or alternating between two arrays) do not. The runtime model prices the unpaired ones at
the machine's `store_new_line_cycles` (analysis/RUNTIME_MODEL.md). This module counts them in one
streaming pass over the sequential trace; the counts are per block execution, so they carry over to
every core count (each core runs the same blocks over its share of the iterations).
"""
from __future__ import annotations

from pathlib import Path

import numba
import numpy as np
import pandas as pd

from analysis.profiles.private_traces import line_shift
from common.errors import InputError

COLUMNS = ["block", "stores_per_execution", "new_line_stores_per_execution"]


@numba.njit(cache=True, nogil=True)
def _count(addr, is_store, block, shift, last_line, new_line, stores):
    """Tally stores and new-line stores per block; last_line[0] carries the previous store's line."""
    prev = last_line[0]
    for r in range(addr.shape[0]):
        if is_store[r]:
            b = block[r]
            line = addr[r] >> shift
            stores[b] += 1
            if line != prev:
                new_line[b] += 1
                prev = line
    last_line[0] = prev


def count_new_line_stores(chunks, n_blocks: int, line_bytes: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """(stores, new-line stores) per block id over a stream of TraceChunks, in one pass."""
    shift = np.uint64(line_shift(line_bytes))
    stores = np.zeros(n_blocks, dtype=np.int64)
    new_line = np.zeros(n_blocks, dtype=np.int64)
    last = np.full(1, np.uint64(0xFFFFFFFFFFFFFFFF))
    for ch in chunks:
        if len(ch) and int(ch.block.max()) >= n_blocks:
            raise InputError(f"block id {int(ch.block.max())} in the trace is not in its block table "
                             f"({n_blocks} blocks); the trace is corrupt")
        _count(ch.addr, ch.is_store, ch.block.astype(np.int64), shift, last, new_line, stores)
    return stores, new_line


def store_line_table(trace: Path, line_bytes: int = 64) -> pd.DataFrame:
    """Per executed block with stores: stores and new-line stores per execution."""
    import instrument

    reader = instrument.open_trace(trace)
    info = reader.info
    n_blocks = max(info.blocks, default=-1) + 1
    stores, new_line = count_new_line_stores(reader.chunks(), n_blocks, line_bytes)
    rows = [{"block": b, "stores_per_execution": stores[b] / info.block_counts[b],
             "new_line_stores_per_execution": new_line[b] / info.block_counts[b]}
            for b in np.flatnonzero(stores).tolist() if info.block_counts.get(b)]
    return pd.DataFrame(rows, columns=COLUMNS)


def new_line_by_block(table: pd.DataFrame | None) -> dict[int, float]:
    """block -> new-line stores per execution from a store_line_table (empty for None)."""
    if table is None:
        return {}
    missing = set(COLUMNS) - set(table.columns)
    if missing:
        raise InputError(f"store-line table: missing column(s) {', '.join(sorted(missing))}")
    return {int(r.block): float(r.new_line_stores_per_execution) for r in table.itertuples(index=False)}
