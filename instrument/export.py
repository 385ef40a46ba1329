"""`pptmc trace-export`: the paper's text trace (block start marker, addresses, block end marker)."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np

from instrument.trace_types import TraceChunk
from instrument.tracefile import open_trace
from common.io import atomic_open

_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
_LINE_MAX = 32  # "0x" + 16 hex digits + " L " + 10 decimal digits + "\n" = 32 bytes at most


class _MarkerText(NamedTuple):
    """The bytes _format copies, bundled: block marker lines (as _name_table gives them) and the hex digits."""

    names: np.ndarray
    name_off: np.ndarray
    hexd: np.ndarray


@numba.njit(cache=True)
def _put(out, k, src, a, b):
    """Copy src[a:b] to out at k; returns the new end."""
    for j in range(a, b):
        out[k] = src[j]
        k += 1
    return k


@numba.njit(cache=True, inline="always")  # inlined, so the constant base divides by a shift
def _put_number(out, k, value, base, hexd, digits):
    """Write `value` in `base` (10 or 16, no prefix) at out[k]; returns the new end."""
    v, n = np.uint64(value), 0
    while True:
        digits[n] = hexd[np.int64(v % np.uint64(base))]
        n += 1
        v //= np.uint64(base)
        if v == 0:
            break
    for j in range(n - 1, -1, -1):
        out[k] = digits[j]
        k += 1
    return k


@numba.njit(cache=True)
def _format(addr, size, store, start, block, prev_block, text, out):
    """Write the text lines of one batch into `out`; returns the number of bytes written.

    start[i] is True where row i begins a new block execution; prev_block (-1: none) is the
    block whose group is still open from the previous batch; `text` the marker lines and hex digits
    (_MarkerText). Per-row formatting is done here,
    not in Python, because it dominates the export time (numpy has no variable-width hex).
    """
    names, name_off, hexd = text.names, text.name_off, text.hexd
    k = 0
    digits = np.empty(20, np.uint8)
    for i in range(addr.shape[0]):
        if start[i]:
            if prev_block >= 0:
                k = _put(out, k, names, name_off[2 * prev_block + 1], name_off[2 * prev_block + 2])
            k = _put(out, k, names, name_off[2 * block[i]], name_off[2 * block[i] + 1])
            prev_block = block[i]
        out[k] = 48  # "0x"
        out[k + 1] = 120
        k += 2
        k = _put_number(out, k, addr[i], 16, hexd, digits)
        out[k] = 32
        out[k + 1] = 83 if store[i] else 76  # S / L
        out[k + 2] = 32
        k = _put_number(out, k + 3, size[i], 10, hexd, digits)
        out[k] = 10
        k += 1
    return k


def _name_table(reader) -> tuple[np.ndarray, np.ndarray]:
    """Per block id, the bytes of its `BB_START name` and `BB_END name` lines, concatenated.

    Block b's start line is names[off[2b]:off[2b+1]], its end line names[off[2b+1]:off[2b+2]].
    """
    n = max(reader.info.blocks, default=-1) + 1
    parts = []
    for b in range(n):
        info = reader.info.blocks.get(b)
        name = info.name if info else f"block{b}"
        parts += [f"BB_START {name}\n".encode(), f"BB_END {name}\n".encode()]
    off = np.zeros(len(parts) + 1, np.int64)
    off[1:] = np.cumsum([len(p) for p in parts])
    return np.frombuffer(b"".join(parts) or b"\0", np.uint8), off


def _group_starts(c: TraceChunk, prev_key: tuple[int, int, int] | None) -> np.ndarray:
    """True where a row's (block, block instance, thread) differs from the row before it."""
    start = np.empty(len(c), np.bool_)
    start[1:] = ((c.block[1:] != c.block[:-1]) | (c.block_instance[1:] != c.block_instance[:-1])
                 | (c.thread[1:] != c.thread[:-1]))
    start[0] = prev_key != (int(c.block[0]), int(c.block_instance[0]), int(c.thread[0]))
    return start


def export_text(trace: Path, output: Path, max_rows: int = 1 << 20) -> int:
    """Write one `BB_START name` / hex addresses / `BB_END name` group per block execution.

    Blocks that made no memory access do not appear. Returns the number of address lines.
    Streams: one batch of at most `max_rows` accesses is formatted at a time.
    """
    reader = open_trace(trace)
    names, off = _name_table(reader)
    text = _MarkerText(names, off, _HEX)
    longest = int(np.diff(off).max()) if off.shape[0] > 1 else 0
    n, prev_key, prev_block = 0, None, -1
    with atomic_open(output, "wb") as out:
        for c in reader.chunks(max_rows):
            start = _group_starts(c, prev_key)
            buf = np.empty(len(c) * _LINE_MAX + int(start.sum()) * 2 * longest, np.uint8)
            k = _format(c.addr, c.size, c.is_store, start, c.block.astype(np.int64), prev_block, text, buf)
            out.write(buf[:k].data)
            n += len(c)
            prev_key = (int(c.block[-1]), int(c.block_instance[-1]), int(c.thread[-1]))
            prev_block = prev_key[0]
        if prev_block >= 0:
            out.write(names[off[2 * prev_block + 1]:off[2 * prev_block + 2]].tobytes())
    return n
