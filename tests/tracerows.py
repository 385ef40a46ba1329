"""Build a TraceChunk from access rows, for tests that write small traces by hand."""
from __future__ import annotations

import numpy as np

from instrument.trace_types import CHUNK_DTYPES, TraceChunk


def chunk_from_rows(rows) -> TraceChunk:
    """rows of (addr, is_store, block, block_instance, loop, iteration, is_stack); 8-byte accesses,
    thread and region 0."""
    cols = {k: [] for k in CHUNK_DTYPES}
    for addr, store, block, instance, loop, iteration, stack in rows:
        for k, v in zip(CHUNK_DTYPES, (addr, 8, store, block, instance, 0, 0, loop, iteration, stack)):
            cols[k].append(v)
    return TraceChunk(*(np.array(cols[k], dtype=d) for k, d in CHUNK_DTYPES.items()))
