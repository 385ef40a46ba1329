"""The numba passes of the per-block samplers (analysis/sampling/amm/blocks.py): AMM Algorithm 1 over the sampled
block instances (`instance_chunk`) and the SHARDS selection with per-block access counts (`hash_select`)."""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.sampling.hashing import shards_keep, slot_of

NOT_FOUND = -(1 << 62)  # _previous_use: no use of the line within the window


class InstanceDraw(NamedTuple):
    """Which block instances are sampled: instance j of block b is when flat[offset[b] + j] (size[b] instances)."""

    flat: np.ndarray
    offset: np.ndarray
    size: np.ndarray


class ScanState(NamedTuple):
    """AMM Algorithm 1's look back: the previous chunk's last lines (history), how far back (window), and a
    stamped open-addressing set of the distinct lines (keys, stamp)."""

    history: np.ndarray
    window: int
    keys: np.ndarray
    stamp: np.ndarray


class InstanceOut(NamedTuple):
    """What instance_chunk counts: accesses per block, and the block and distance of each sampled access."""

    access_counts: np.ndarray
    block: np.ndarray
    dist: np.ndarray


@numba.njit(cache=True, nogil=True)
def instance_chunk(addr, block, instance, shift, draw, scan, tag, out):
    """One fused pass over a chunk: count accesses per block, and for accesses of sampled instances
    run AMM Algorithm 1 (distinct lines back to the previous use within `window`, else -1).

    Positions are virtual: t < 0 is hist[len(hist) + t], the previous chunk's tail, so no copy of
    the chunk is made. Returns (status, number of sampled accesses, next tag); status -1 = a block
    id outside access_counts, -2 = an instance beyond the block's count.
    """
    flat, offset, size = draw.flat, draw.offset, draw.size
    hist, window, keys, stamp = scan.history, scan.window, scan.keys, scan.stamp
    access_counts, out_block, out_d = out.access_counts, out.block, out.dist
    n = addr.shape[0]
    h = hist.shape[0]
    k = 0
    if n == 0:
        return 0, 0, tag
    run_block = block[0]
    if run_block < 0 or run_block >= access_counts.shape[0]:
        return -1, 0, tag
    run = 0
    for i in range(n):
        b = block[i]
        if b != run_block:  # count runs: a += 1 per access on one slot stalls on the store
            if b < 0 or b >= access_counts.shape[0]:
                return -1, 0, tag
            access_counts[run_block] += run
            run_block = b
            run = 0
        run += 1
        j = instance[i]
        if j < 0 or j >= size[b]:
            return -2, 0, tag
        if not flat[offset[b] + j]:
            continue
        line = addr[i] >> shift
        p = _previous_use(addr, shift, hist, line, i, max(i - window, -h))
        d = -1
        if p != NOT_FOUND:
            tag += 1
            d = _distinct(addr, shift, hist, p, i, keys, stamp, tag)
        out_block[k] = b
        out_d[k] = d
        k += 1
    access_counts[run_block] += run
    return 0, k, tag


@numba.njit(cache=True, nogil=True, inline="always")
def _previous_use(addr, shift, hist, line, q, stop):
    """Last virtual t in [stop, q) holding `line`; scans 32 entries per step so the test vectorises."""
    hi = q
    lo_bound = max(stop, 0)
    while hi > lo_bound:
        lo = max(lo_bound, hi - 32)
        hit = False
        for t in range(lo, hi):
            hit |= (addr[t] >> shift) == line
        if hit:
            for t in range(hi - 1, lo - 1, -1):
                if (addr[t] >> shift) == line:
                    return t
        hi = lo
    h = hist.shape[0]
    hi = min(q, 0) + h
    while hi > stop + h:
        lo = max(stop + h, hi - 32)
        hit = False
        for t in range(lo, hi):
            hit |= hist[t] == line
        if hit:
            for t in range(hi - 1, lo - 1, -1):
                if hist[t] == line:
                    return t - h
        hi = lo
    return NOT_FOUND


@numba.njit(cache=True, nogil=True, inline="always")
def _distinct(addr, shift, hist, p, q, keys, stamp, tag):
    """Number of distinct lines at virtual positions p+1 .. q-1 (a stamped open-addressing set)."""
    mask = np.uint64(keys.shape[0] - 1)
    h = hist.shape[0]
    distinct = 0
    for t in range(q - 1, p, -1):
        x = (addr[t] >> shift) if t >= 0 else hist[t + h]
        slot = slot_of(x, mask)
        while stamp[slot] == tag and keys[slot] != x:
            slot = (slot + np.uint64(1)) & mask
        if stamp[slot] != tag:
            stamp[slot] = tag
            keys[slot] = x
            distinct += 1
    return distinct


@numba.njit(cache=True, nogil=True)
def hash_select(addr, block, shift, salt, threshold, access_counts):
    """Indices of accesses whose line SHARDS keeps; counts per block (a block id outside access_counts:
    [-1]).

    One fused pass: at ~50M accesses/s for the exact engine, separate numpy passes would cost
    more than the sampling itself.
    """
    out = np.empty(addr.shape[0], dtype=np.int64)
    k = 0
    n = addr.shape[0]
    run_block = block[0] if n else 0
    if n and (run_block < 0 or run_block >= access_counts.shape[0]):
        out[0] = -1
        return out[:1]
    run = 0
    for i in range(n):
        if block[i] != run_block:  # count runs: a += 1 per access on one slot stalls on the store
            if block[i] < 0 or block[i] >= access_counts.shape[0]:
                out[0] = -1
                return out[:1]
            access_counts[run_block] += run
            run_block = block[i]
            run = 0
        run += 1
        if shards_keep(addr[i] >> shift, salt, threshold):
            out[k] = i
            k += 1
    if n:
        access_counts[run_block] += run
    return out[:k]
