"""The sampling sink: the sampling decode (TraceReader.sampled_batches) reduces each row to one word and keeps
the rows whose line passes the SHARDS filter while it decodes, so the sampler never reads the rows back.

The kernels here write one row (sink_row), a run of whole block instances (sink_block_run), cut the runs of
rows with one (loop, iteration) (sink_cut) and store the sink's counters (sink_save). A plain decode passes
placeholders (no_sink()): 2-D words, so every store here is compiled away.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from common.errors import InputError
from instrument.decode_base import DecodeState, SiteTables, Tally, Where, stack_top
from common.hashing import shards_keep

# SampledBatch.words: the line (address >> shift) with two flags above it
WORD_STACK = np.uint64(1) << np.uint64(63)
WORD_STORE = np.uint64(1) << np.uint64(62)
WORD_LINE = WORD_STORE - np.uint64(1)


class SinkArrays(NamedTuple):
    """A sampling sink's arrays, as the kernels take them (SampleSink.arrays())."""

    words: np.ndarray   # uint64 per row (2-D placeholder: no sink)
    sel: np.ndarray     # int64 kept rows
    runs: np.ndarray    # int64 (n, 3): first row, loop, iteration of each run
    params: np.ndarray  # uint64 [shift, salt, threshold]
    state: np.ndarray   # uint64 [kept rows, runs, highest address] when the kernel returns


@dataclass
class SampledBatch:
    """A batch of the sampling decode: each row reduced to one word, the rows whose line is kept, and the
    runs of rows with one (loop, iteration). Views into the sink's arrays: valid until the next batch."""

    words: np.ndarray      # uint64 per row: line | WORD_STACK (is_stack) | WORD_STORE (is_store); with copies,
    #                        one copy's: row i's word is words[i % len(words)]
    sel: np.ndarray        # int64 rows whose line's salted hash is below the threshold, increasing
    starts: np.ndarray     # int64 first row of each run (a change of loop or iteration), then len(words)
    loop: np.ndarray       # int64 loop instance of each run (-1: none)
    iteration: np.ndarray  # int64 iteration of each run (-1: none)
    addr_max: int          # the highest address of any row, as uint64 (range checks)
    copies: int = 0        # > 0: the batch is that many repeats of one recorded copy (DecodeReplay.batch), ...
    recording: int = -1    # ... recording number `recording` of its reader (words, flags and kept rows alike)

    def __len__(self) -> int:
        return int(self.starts[-1])


class SampleSink:
    """Where the sampling decode (TraceReader.sampled_batches) puts its batches of at most `max_rows` rows.

    A row is kept when SHARDS keeps its line x = address >> shift (common/hashing.py: shards_keep, the
    filter analysis/sampling applies too) with this salt and threshold, so
    the sampler never reads the rows back to pick them."""

    def __init__(self, max_rows: int, shift: int, salt: int, threshold: int) -> None:
        if max_rows < 1:
            raise InputError(f"max_rows={max_rows}: must be at least 1")
        self.words = np.empty(max_rows, np.uint64)
        self.sel = np.empty(max_rows, np.int64)
        self.runs = np.empty((max_rows + 2, 3), np.int64)
        self.params = np.array([shift, salt, threshold], np.uint64)
        self.state = np.zeros(3, np.uint64)

    def arrays(self) -> SinkArrays:
        """The kernel's sink bundle."""
        return SinkArrays(self.words, self.sel, self.runs, self.params, self.state)

    def batch(self, k: int) -> SampledBatch:
        """The k rows the last kernel call produced."""
        ns, nr = int(self.state[0]), int(self.state[1])
        starts = np.empty(nr + 1, np.int64)
        starts[:nr] = self.runs[:nr, 0]
        starts[nr] = k
        return SampledBatch(self.words[:k], self.sel[:ns], starts, self.runs[:nr, 1], self.runs[:nr, 2],
                            int(self.state[2]))


def no_sink() -> SinkArrays:
    """The sink argument of a plain decode: placeholders (only the words' ndim is looked at)."""
    return SinkArrays(np.empty((1, 1), np.uint64), np.empty(1, np.int64), np.empty((1, 3), np.int64),
                      np.zeros(3, np.uint64), np.zeros(3, np.uint64))


@numba.njit(cache=True, _nrt=False)
def sink_row(sink, k, a, stack, store, ns, both):
    """Row k into a sampling sink: its word (line | stack flag | store flag), and its index appended to the
    kept rows when its line passes the filter (branch-free: write, then advance by the flag). `both` is the
    highest address; returns the new (kept rows, highest address)."""
    words, sel, params = sink.words, sink.sel, sink.params
    line = a >> params[0]
    words[k] = line | (np.uint64(stack) << np.uint64(63)) | (np.uint64(store) << np.uint64(62))
    sel[ns] = k
    ns += shards_keep(line, params[1], params[2])
    return ns, max(both, a)


@numba.njit(cache=True, _nrt=False)
def sink_cut(sink: SinkArrays, t: Tally, w: Where) -> Tally:
    """A sampling sink's runs of rows with one (loop, iteration): called when the state changes to w's before
    row t.k. A run with no row yet takes the new keys (or is dropped when they are the previous run's again),
    so runs are cut exactly where two consecutive rows differ. Returns the tally with its runs."""
    runs, nr, k, lp, it = sink.runs, t.nr, t.k, w.lp, w.it
    if sink.words.ndim != 1:
        return t
    if runs[nr - 1, 0] == k:
        if nr > 1 and runs[nr - 2, 1] == lp and runs[nr - 2, 2] == it:
            return Tally(k, t.ns, nr - 1, t.both)
        runs[nr - 1, 1] = lp
        runs[nr - 1, 2] = it
        return t
    if runs[nr - 1, 1] == lp and runs[nr - 1, 2] == it:
        return t
    runs[nr, 0] = k
    runs[nr, 1] = lp
    runs[nr, 2] = it
    return Tally(k, t.ns, nr + 1, t.both)


@numba.njit(cache=True, _nrt=False)
def sink_save(sink: SinkArrays, t: Tally) -> None:
    """Store a sampling sink's counters when the kernel returns: [kept rows, runs (an empty last one
    dropped), highest address]."""
    if sink.words.ndim == 1:
        nr = t.nr
        if nr > 1 and sink.runs[nr - 1, 0] == t.k:
            nr -= 1
        sink.state[0] = np.uint64(t.ns)
        sink.state[1] = np.uint64(nr)
        sink.state[2] = t.both


@numba.njit(cache=True)
def sink_block_run(sink: SinkArrays, tabs: SiteTables, state: DecodeState, w: Where, t: Tally, b: int,
                   r: int) -> Tally:
    """Rows t.k.. of r whole instances of block b, whose sites are all predicted: row k + e * n + j is site j's
    access in instance e, at last + (e + 1) * stride of site j. Written site by site: a site's words in a loop
    without branches (its stack flag is the same for the whole run unless the run crosses a stack bound), and
    its lines hashed once per line its addresses cross (_kept_rows), not per row; the kept rows are then put
    back in row order. Returns the tally after them."""
    words, k, ns, high = sink.words, t.k, t.ns, t.both
    shift, salt, thr = sink.params[0], sink.params[1], sink.params[2]
    pred_last, pred_stride = state.pred_last, state.pred_stride
    stack_lo, stack_hi = w.stack_lo, stack_top(w)
    o = tabs.bs_off[b]
    sites = tabs.bs[o:tabs.bs_off[b + 1]]
    n = sites.shape[0]
    ns0 = ns
    contributing = 0
    for j in range(n):
        s = sites[j]
        st = pred_stride[s]
        a = pred_last[s]
        first, last = a + st, a + r * st
        lo, hi = min(first, last), max(first, last)
        flag = np.uint64(tabs.site_store[s]) << np.uint64(62)
        if lo >= 0 and (hi < stack_lo or lo >= stack_hi or (lo >= stack_lo and hi < stack_hi)):
            flag |= np.uint64(lo >= stack_lo and hi < stack_hi) << np.uint64(63)
            for e in range(j, j + r * n, n):
                a += st
                words[k + e] = (np.uint64(a) >> shift) | flag
            high = max(high, np.uint64(hi))
        else:  # the run crosses a stack bound, or its addresses wrap (a corrupt trace): per row
            for e in range(j, j + r * n, n):
                a += st
                stack = np.uint64(a >= stack_lo and a < stack_hi) << np.uint64(63)
                words[k + e] = (np.uint64(a) >> shift) | stack | flag
                high = max(high, np.uint64(a))
        pred_last[s] = a
        if not _none_kept(first - st, st, r, shift, salt, thr):
            before = ns
            ns = _kept_rows(sink, first - st, st, r, k + j, n, ns)
            contributing += ns > before
    if contributing > 1:
        _sort_rows(sink.sel, ns0, ns)
    return Tally(k + r * n, ns, t.nr, high)


@numba.njit(cache=True)
def _sort_rows(sel, a, b):
    """Sort sel[a:b] in place: a few sites' increasing rows one after the other (insertion sort, no allocation;
    np.sort beyond 64 rows)."""
    if b - a > 64:
        sel[a:b] = np.sort(sel[a:b])
        return
    for i in range(a + 1, b):
        x = sel[i]
        j = i - 1
        while j >= a and sel[j] > x:
            sel[j + 1] = sel[j]
            j -= 1
        sel[j + 1] = x


@numba.njit(cache=True, inline="always")
def _none_kept(a0, st, r, shift, salt, threshold):
    """Whether surely none of one site's accesses a0 + (e + 1) * st, e < r, has a line that passes the filter:
    for strides shorter than a line (and 0), no line they cross passes (scalars only: a cheap test before
    _kept_rows, whose array arguments cost reference counting per call; most sites' lines in a run are not
    kept). False when it cannot tell (other strides, addresses that wrap)."""
    size = np.int64(1) << np.int64(shift)
    last = a0 + r * st
    if not (-size < st < size) or a0 < 0 or last < 0 or a0 + st < 0:
        return False
    lo = np.uint64(min(a0 + st, last)) >> shift
    hi = np.uint64(max(a0 + st, last)) >> shift
    line = lo
    while line <= hi:
        if shards_keep(line, salt, threshold):
            return False
        line += np.uint64(1)
    return True


@numba.njit(cache=True, _nrt=False)
def _kept_rows(sink, a0, st, r, row, n, ns):
    """Append to the sink's kept rows those of one site's accesses a0 + (e + 1) * st, e < r (rows row + e * n)
    whose line passes the filter. A stride shorter than a line (addresses that do not wrap) visits each line
    once, finding a kept line's rows by division; other strides are hashed per row."""
    sel, params = sink.sel, sink.params
    shift, salt, thr = params[0], params[1], params[2]
    size = np.int64(1) << np.int64(shift)
    last = a0 + r * st
    if st == 0:
        if shards_keep(np.uint64(a0) >> shift, salt, thr):
            for e in range(r):
                sel[ns] = row + e * n
                ns += 1
        return ns
    if 0 < st < size and a0 >= 0 and last >= 0:  # e + 1 in [ceil((lo_a - a0) / st), ceil((hi_a - a0) / st))
        line, end = np.uint64(a0 + st) >> shift, np.uint64(last) >> shift
        while line <= end:
            if shards_keep(line, salt, thr):
                lo_a = np.int64(line << shift)
                e_lo, e_hi = -((a0 - lo_a) // st) - 1, -((a0 - lo_a - size) // st) - 1
                for e in range(max(e_lo, 0), min(e_hi, r)):
                    sel[ns] = row + e * n
                    ns += 1
            line += np.uint64(1)
        return ns
    if -size < st < 0 and a0 >= 0 and last >= 0:  # e + 1 in (floor((a0 - hi_a) / -st), floor((a0 - lo_a) / -st)]
        line, end = np.uint64(a0 + st) >> shift, np.uint64(last) >> shift
        while line >= end:
            if shards_keep(line, salt, thr):
                lo_a = np.int64(line << shift)
                e_lo, e_hi = (a0 - lo_a - size) // -st, (a0 - lo_a) // -st
                for e in range(max(e_lo, 0), min(e_hi, r)):
                    sel[ns] = row + e * n
                    ns += 1
            if line == 0:
                break
            line -= np.uint64(1)
        return ns
    for e in range(r):
        if shards_keep(np.uint64(a0 + (e + 1) * st) >> shift, salt, thr):
            sel[ns] = row + e * n
            ns += 1
    return ns
