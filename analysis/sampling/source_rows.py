"""The source pass of source sampling (analysis/sampling/source.py): from each decoded chunk (or each batch of
the reader's sampling decode) the rows SHARDS keeps, their lines and flags, and the runs every core count
decides cores on (`Picker`, `Rows`); how the windows read a row's line as a core sees it (`line_of`); and the
accesses per sampled line, for the heaviest line's share (`LineTally`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.private_traces import OFFSET_BITS, CoreMap
from analysis.sampling.hashing import shards_keep, slot_of
from instrument.trace_types import TraceChunk
from instrument.tracefile import WORD_LINE, WORD_STACK, WORD_STORE, SampledBatch
from common.errors import InputError


class ShardsFilter(NamedTuple):
    """The SHARDS line filter of a pass: line = address >> shift, kept when hashing.shards_keep(line, salt,
    threshold)."""

    shift: np.uint64
    salt: np.uint64
    threshold: np.uint64


@numba.njit(cache=True, nogil=True)
def pick_rows(addr, key0, key1, by_key1, filt, sel, starts):
    """One pass over a chunk: rows whose line SHARDS keeps (filt: ShardsFilter), the starts of the
    runs (plus len) of equal key0 and equal key1 (by_key1) or non-decreasing key1, and the OR of all
    addresses (range check).

    The keep test is a coin flip per line: a branch-free append (write, then advance by the flag)."""
    shift, salt, threshold = filt.shift, filt.salt, filt.threshold
    n = addr.shape[0]
    k = 0
    r = 0
    both = np.uint64(0)
    p0 = key0[0] if n else 0
    p1 = key1[0] if n else 0
    # a new run where key1 - previous key1, read as unsigned, reaches 1 (changed) or 2^63 (decreased)
    cut = np.uint64(1) if by_key1 else np.uint64(1) << np.uint64(63)
    for i in range(n):
        a = addr[i]
        both |= a
        sel[k] = i
        k += shards_keep(a >> shift, salt, threshold)
        k0 = key0[i]
        k1 = key1[i]
        if (i == 0) | (k0 != p0) | (np.uint64(k1 - p1) >= cut):  # rare: a branch
            starts[r] = i
            r += 1
        p0 = k0
        p1 = k1
    starts[r] = n
    return k, r, both


@numba.njit(cache=True, nogil=True)
def line_of(addr, is_stack, block, shared_block, iteration_mode, shift, row, core):
    """Line id of a row as `core` sees it (the per-core offset on stack data, or outside shared-variable blocks).
    With a 2-D placeholder for is_stack, addr holds the sampling decode's words (SampledBatch: line, flags)."""
    if is_stack.ndim != 1:
        w = addr[row]
        x = w & WORD_LINE
        if w & WORD_STACK:
            return x + (np.uint64(core) << (np.uint64(OFFSET_BITS) - shift))
        return x
    x = addr[row] >> shift
    moved = is_stack[row] if iteration_mode else not shared_block[block[row]]
    return x + (np.uint64(core) << (np.uint64(OFFSET_BITS) - shift)) if moved else x


class RowSource(NamedTuple):
    """line_of's first six arguments: where the windows read a batch's rows (Rows.source)."""

    addr: np.ndarray
    is_stack: np.ndarray
    block: np.ndarray
    shared_block: np.ndarray
    iteration_mode: bool
    shift: np.uint64


@numba.njit(cache=True, nogil=True)
def count_lines(lines, weights, keys, counts, state, start):
    """counts[slot of lines[i]] += weights[i] from index start, in an open-addressing table (a slot is used where
    its count is > 0; state = [used slots, most allowed]). Returns the index reached: it stops before a new line
    would pass the limit."""
    mask = np.uint64(keys.shape[0] - 1)
    for i in range(start, lines.shape[0]):
        x = lines[i]
        slot = slot_of(x, mask)
        while counts[slot] > 0 and keys[slot] != x:
            slot = (slot + np.uint64(1)) & mask
        if counts[slot] == 0:
            if state[0] + 1 > state[1]:
                return i
            state[0] += 1
            keys[slot] = x
        counts[slot] += weights[i]
    return lines.shape[0]


@numba.njit(cache=True, nogil=True)
def word_columns(words, sel):
    """Line id, stack flag and store flag of the rows sel of a sampling decode's words."""
    n = sel.shape[0]
    lines, stack, store = np.empty(n, np.uint64), np.empty(n, np.bool_), np.empty(n, np.bool_)
    for j in range(n):
        w = words[sel[j]]
        lines[j] = w & WORD_LINE
        stack[j] = (w & WORD_STACK) != np.uint64(0)
        store[j] = (w & WORD_STORE) != np.uint64(0)
    return lines, stack, store


@dataclass
class Rows:
    """The sampled rows of one chunk, and the runs every core count decides cores on."""

    sel: np.ndarray       # int64 sampled row indices, increasing
    lines: np.ndarray     # uint64 line id of each sampled row (no offset)
    offset: np.ndarray    # bool: the row's address gets the per-core offset
    store: np.ndarray     # bool: the row is a store
    starts: np.ndarray    # int64 run starts (+ len)
    key0: np.ndarray      # core decisions: loop of every run (iteration mode) or block of every row (paper mode)
    key1: np.ndarray      # iteration of every run, or block instance of every row
    chunk: TraceChunk | None  # the decoded rows, or None when they come as words
    mode: str
    shift: int
    shared_block: np.ndarray
    words: np.ndarray | None = None  # the sampling decode's words (instrument.tracefile.SampledBatch)
    copies: int = 0       # SampledBatch.copies: that many repeats of recording `recording` (source_replay takes them
    recording: int = -1   # as copies without joining rows)

    def source(self) -> RowSource:
        """Where line_of reads the rows: the chunk's columns, or the words with placeholders (a batch of
        repeats: one copy's words, row i's at i % len)."""
        iteration, shift = self.mode == "iteration", np.uint64(self.shift)
        if self.chunk is not None:
            return RowSource(self.chunk.addr, self.chunk.is_stack, self.chunk.block, self.shared_block, iteration,
                             shift)
        return RowSource(self.words, NO_STACK, NO_BLOCK, self.shared_block, iteration, shift)


NO_STACK = np.zeros((1, 1), np.bool_)  # line_of reads words when is_stack is 2-D
NO_BLOCK = np.zeros(1, np.int32)


class LineTally:
    """Accesses per sampled line, to find the heaviest one (heaviest_share): an open-addressing table counted
    into by a kernel, doubled when it fills."""

    def __init__(self) -> None:
        self.keys = np.zeros(1 << 10, np.uint64)
        self.counts = np.zeros(1 << 10, np.int64)  # 0: empty slot
        self.state = np.array([0, int(0.6 * (1 << 10))], np.int64)
        self.total = 0

    def add(self, lines: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Count one batch of sampled rows' lines (each weights[i] times; default once)."""
        w = np.ones(lines.shape[0], np.int64) if weights is None else weights
        i = 0
        while i < lines.shape[0]:
            i = count_lines(lines, w, self.keys, self.counts, self.state, i)
            if i < lines.shape[0]:
                self._grow()
        self.total += int(w.sum())

    def _grow(self) -> None:
        """Twice the slots, every line re-counted into them."""
        used = self.counts > 0
        keys, counts = self.keys[used], self.counts[used]
        size = 2 * self.keys.shape[0]
        self.keys, self.counts = np.zeros(size, np.uint64), np.zeros(size, np.int64)
        self.state = np.array([0, int(0.6 * size)], np.int64)
        count_lines(keys, counts, self.keys, self.counts, self.state, 0)

    def heaviest_share(self) -> float:
        """The share of the sampled accesses taken by the most accessed sampled line (0 without samples).

        SHARDS weighs every sampled line 1/rate. A line that alone takes a large share of the trace (a
        scalar a loop reloads every iteration) is drawn by few seeds, but a seed that draws it stands its
        reuses for 1/rate lines' worth: on a jacobi-2d MEDIUM trace the two seeds of eight whose heaviest
        line took 6% and 12% of the sample erred by 2.3 and 3.7 points in hit rate, the six below 1% by at
        most 0.3."""
        return int(self.counts.max()) / self.total if self.total else 0.0


class Picker:
    """The fused source pass, with scratch arrays reused across chunks."""

    def __init__(self, salt: np.uint64, threshold: np.uint64, mode: str, shift: int, cmap: CoreMap,
                 path: str) -> None:
        self.tally = LineTally()
        self.filter = ShardsFilter(np.uint64(shift), salt, threshold)
        self.mode, self.shift, self.shared_block, self.path = mode, shift, cmap.shared_block, path
        self.n_loops = cmap.trip.shape[0]
        self.sel = np.zeros(0, dtype=np.int64)
        self.starts = np.zeros(0, dtype=np.int64)
        self.recorded: tuple = (-1, None)  # (recording, its one copy's lines, stack and store flags)

    def rows(self, ch: TraceChunk) -> Rows:
        """Sampled rows, their line ids and flags, and the chunk's runs."""
        n = len(ch)
        if self.sel.shape[0] < n + 1:
            self.sel = np.empty(n + 1, dtype=np.int64)
            self.starts = np.empty(n + 1, dtype=np.int64)
        iteration = self.mode == "iteration"
        key0, key1 = (ch.loop, ch.iteration) if iteration else (ch.block, ch.block_instance)
        k, r, both = pick_rows(ch.addr, key0, key1, iteration, self.filter, self.sel, self.starts)
        if int(both) >> OFFSET_BITS:
            raise InputError(f"{self.path}: an address is above 2^{OFFSET_BITS}; per-core offsets would "
                             f"collide (unsupported address space)")
        heads = key0[self.starts[:r]]  # key0 is constant along a run
        lo, hi = (int(heads.min()), int(heads.max())) if r else (0, 0)
        if iteration and (lo < -1 or hi >= self.n_loops):
            raise InputError(f"{self.path}: access in loop instance {hi} missing from the trace's loop table; "
                             f"the trace is corrupt, re-record it")
        if not iteration and (lo < 0 or hi >= self.shared_block.shape[0]):
            raise InputError(f"{self.path}: access in a block that the trace header does not list; "
                             f"the trace is corrupt, re-record it")
        sel = self.sel[:k].copy()
        self.tally.add(ch.addr[sel] >> np.uint64(self.shift))
        starts = self.starts[:r + 1].copy()
        offset = ch.is_stack[sel] if iteration else ~self.shared_block[ch.block[sel]]
        if iteration:  # one core decision per run
            key0, key1 = heads.astype(np.int64), key1[starts[:r]]
        return Rows(sel, ch.addr[sel] >> np.uint64(self.shift), offset, ch.is_store[sel], starts, key0, key1, ch,
                    self.mode, self.shift, self.shared_block)

    def batch_rows(self, b: SampledBatch) -> Rows:
        """Rows of a batch of the sampling decode (iteration mode): the decoder did the pass."""
        if b.addr_max >> OFFSET_BITS:
            raise InputError(f"{self.path}: an address is above 2^{OFFSET_BITS}; per-core offsets would "
                             f"collide (unsupported address space)")
        if b.loop.shape[0] and (int(b.loop.min()) < -1 or int(b.loop.max()) >= self.n_loops):
            raise InputError(f"{self.path}: access in loop instance {int(b.loop.max())} missing from the trace's "
                             f"loop table; the trace is corrupt, re-record it")
        sel = b.sel.copy()
        if b.copies:  # repeats of one recorded copy: its kept rows' columns taken once, laid out as the rows are
            lines, stack, store = (np.tile(x, b.copies) for x in self._recorded(b))
        else:
            lines, stack, store = word_columns(b.words, sel)
            self.tally.add(lines)
        return Rows(sel, lines, stack, store, b.starts.copy(), b.loop.copy(), b.iteration.copy(), None, self.mode,
                    self.shift, self.shared_block, b.words, b.copies, b.recording)

    def _recorded(self, b: SampledBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The columns of one copy of a batch of repeats (computed once per recording), tallied for all of them."""
        if self.recorded[0] != b.recording:
            one = b.sel[:b.sel.shape[0] // b.copies]
            self.recorded = (b.recording, word_columns(b.words, one))
        cols = self.recorded[1]
        self.tally.add(cols[0], np.full(cols[0].shape[0], b.copies, np.int64))
        return cols

