"""Which core runs each row, per run of rows, and which rows fall in each core's window segments: the per-run
arithmetic of source sampling (analysis/sampling/source.py), so that nothing downstream loops over rows.

`core_runs` makes CoreMap's per-access decision (analysis.profiles.private_traces) once per change of core;
`window_pieces` finds by arithmetic the row ranges of a chunk inside each core's window segments (private
positions [s - look, s + length) of the windows starting at s, one every `period`)."""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.private_traces import ALL_CORES, iteration_core, paper_core
from instrument.trace_types import SCHED_STATIC


class WindowGrid(NamedTuple):
    """One stream family's window segments: each core's next window start (advanced in place), the windows'
    period and length, and the lookback before each."""

    next_start: np.ndarray
    period: int
    length: int
    look: int


@numba.njit(cache=True, nogil=True)
def paper_span(block, inst, count, paper_chunk, p):
    """The first instance after inst of this block that Algorithm 1 (private_traces.paper_core) gives
    another core: the split is contiguous (or in chunks of paper_chunk instances)."""
    n = count[block]
    if n < p:
        return np.iinfo(np.int64).max
    if paper_chunk > 0:
        return (inst // paper_chunk + 1) * paper_chunk
    c = min(inst * p // n, p - 1)
    return np.iinfo(np.int64).max if c == p - 1 else ((c + 1) * n + p - 1) // p


@numba.njit(cache=True, nogil=True)
def static_span(loop, it, trip, sched, chunk, p):
    """The iterations [lo, hi) of loop instance `loop` that run on the same core as iteration `it` under a static
    schedule without chunk (private_traces' static rule: the first trip % p cores one more); (0, 0) otherwise."""
    if loop < 0 or sched[loop] != SCHED_STATIC or chunk[loop] > 0:
        return 0, 0
    n = trip[loop]
    q = n // p
    r = n % p
    big = r * (q + 1)
    if it < big:
        lo = it // (q + 1) * (q + 1)
        return lo, lo + q + 1
    if q == 0:
        return 0, 0
    lo = big + (it - big) // q * q
    return lo, lo + q


@numba.njit(cache=True, nogil=True)
def core_runs(iteration_mode, starts, key0, key1, tables):
    """Rows split where the core changes (CoreMap's per-run decision, as private_traces does it), consecutive
    pieces of one core merged, so the per-run loops downstream run once per change of core. Returns (starts +
    len, core of each). Iteration mode: one decision per run of one iteration (key0, key1: per run). Paper mode
    (key0, key1: per row): runs are one
    block's rows with non-decreasing instances (a block re-entered directly is one run), cut where the
    instance leaves its core's span (found by bisection); each block's last span is remembered (instances
    [span_from, span_end) run on span_core), since runs of a few blocks alternate. tables: CoreTables."""
    count, paper_chunk, trip, sched, chunk, dstart, dcore, dptr, p = tables
    n = starts.shape[0] - 1
    most = n + 1  # pieces: a run, or a span's part of it (p spans per block, or one per paper_chunk instances)
    if not iteration_mode and p > 1:
        most += p * count.shape[0] if paper_chunk == 0 else starts[n] - starts[0]
    out_starts = np.empty(most + 1, dtype=np.int64)
    out_core = np.empty(most, dtype=np.int64)
    span_from = np.full(count.shape[0], np.iinfo(np.int64).max, dtype=np.int64)
    span_end = np.zeros(count.shape[0], dtype=np.int64)
    span_core = np.zeros(count.shape[0], dtype=np.int64)
    it_loop, it_lo, it_hi, it_core = -2, 0, 0, 0  # iteration mode: the last static span's iterations and core
    m = 0
    for r in range(n):
        i = starts[r]
        b = starts[r + 1]
        while i < b:
            if p == 1:
                c, nxt = 0, b
            elif iteration_mode:  # runs of one loop mostly follow each other: one division-free test per run
                if key0[r] == it_loop and it_lo <= key1[r] < it_hi:
                    c = it_core
                else:
                    c = iteration_core(key0[r], key1[r], trip, sched, chunk, dstart, dcore, dptr, p)
                    it_lo, it_hi = static_span(key0[r], key1[r], trip, sched, chunk, p)
                    it_loop, it_core = key0[r], c
                nxt = b
            else:
                blk, x = key0[i], key1[i]
                if x < span_from[blk] or x >= span_end[blk]:
                    span_from[blk] = x
                    span_end[blk] = paper_span(blk, x, count, paper_chunk, p)
                    span_core[blk] = paper_core(blk, x, count, paper_chunk, p)
                c, end = span_core[blk], span_end[blk]
                nxt = b
                if key1[b - 1] >= end:  # the first row of the run at instance >= end
                    lo, nxt = i, b - 1
                    while nxt - lo > 1:
                        mid = (lo + nxt) // 2
                        if key1[mid] >= end:
                            nxt = mid
                        else:
                            lo = mid
            if m == 0 or c != out_core[m - 1]:
                out_starts[m] = i
                out_core[m] = c
                m += 1
            i = nxt
    out_starts[m] = starts[n]
    return out_starts[:m + 1].copy(), out_core[:m].copy()


@numba.njit(cache=True, nogil=True)
def window_pieces(starts, run_core, counters, p, grid, out):
    """Row ranges of this chunk inside each core's window segments (grid: WindowGrid; lookback + window in
    private positions: [max(s - look, 0), s + length) for the window starting at next_start[c]).

    Rows of out: core, first row, end row, private position of the first row, 1 if the piece ends
    its segment, the window's start. counters (private positions at the chunk start) is not modified; next_start is
    advanced past finished segments. Returns the number of pieces, or -1 when out is too small."""
    next_start, period, length, look = grid
    pos = counters.copy()
    o = 0
    for r in range(run_core.shape[0]):
        a = starts[r]
        n = starts[r + 1] - a
        lo_c = run_core[r] if run_core[r] != ALL_CORES else 0
        hi_c = run_core[r] + 1 if run_core[r] != ALL_CORES else p
        for c in range(lo_c, hi_c):
            q = pos[c]
            while True:
                s = next_start[c]
                seg_lo = max(s - look, 0)
                seg_hi = s + length
                lo = max(q, seg_lo)
                hi = min(q + n, seg_hi)
                if lo < hi:
                    if o >= out.shape[0]:
                        return -1
                    out[o, 0] = c
                    out[o, 1] = a + lo - q
                    out[o, 2] = a + hi - q
                    out[o, 3] = lo
                    out[o, 4] = 1 if hi == seg_hi else 0
                    out[o, 5] = s
                    o += 1
                if seg_hi <= q + n:
                    next_start[c] = s + period
                else:
                    break
            pos[c] = q + n
    return o

