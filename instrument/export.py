"""`pptmc trace-export`: the paper's text trace (block start marker, addresses, block end marker)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from instrument.tracefile import open_trace
from pptmc.io import atomic_open


def export_text(trace: Path, output: Path, max_rows: int = 1 << 20) -> int:
    """Write one `BB_START name` / hex addresses / `BB_END name` group per block execution.

    Blocks that made no memory access do not appear. Returns the number of address lines.
    """
    reader = open_trace(trace)
    names = {b: info.name for b, info in reader.info.blocks.items()}
    n = 0
    prev = None
    with atomic_open(output, "w") as out:
        for chunk in reader.chunks(max_rows):
            key = np.stack([chunk.block.astype(np.int64), chunk.block_instance, chunk.thread.astype(np.int64)])
            for i in range(len(chunk)):
                cur = (int(key[0, i]), int(key[1, i]), int(key[2, i]))
                if cur != prev:
                    if prev is not None:
                        out.write(f"BB_END {names[prev[0]]}\n")
                    out.write(f"BB_START {names[cur[0]]}\n")
                    prev = cur
                kind = "S" if chunk.is_store[i] else "L"
                out.write(f"0x{int(chunk.addr[i]):x} {kind} {int(chunk.size[i])}\n")
            n += len(chunk)
        if prev is not None:
            out.write(f"BB_END {names[prev[0]]}\n")
    return n
