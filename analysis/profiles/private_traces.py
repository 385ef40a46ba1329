"""Mimicked per-core (private) traces from one sequential trace (Algorithm 1 and beyond).

Two modes decide which core runs each access:

* paper (Algorithm 1): a block entered fewer than p times is copied to every core; other
  blocks have their instances split into p contiguous, even runs (instance * p // count),
  or dealt round-robin in runs of `paper_chunk` instances. Every address except those in
  shared-variable blocks gets a per-core offset.
* iteration (default when the trace has loop markers): each iteration of a work-shared
  loop goes to the core its OpenMP schedule gives it; accesses outside any work-shared
  iteration are replicated on every core. Only thread-private stack data is offset, so
  shared arrays keep their real address and true sharing shows up in the CRD.
  Schedules: static (balanced contiguous blocks, as libomp/libgomp: the first trip % p
  cores get one extra iteration), static with chunk (round-robin chunks), master (core 0).
  Three depend on which thread asks first, which the sequential trace does not record; the
  threads are taken to run at equal speed:
  - dynamic: libomp's static stealing (analysis/profiles/handouts.py): each core starts
    on its own block of chunks of `chunk` (1 if unset) iterations and, once it is done,
    steals from the end of another's, timed by the references each chunk makes; with
    fewer chunks than cores, chunk k runs on core k;
  - guided: libomp's shrinking chunks (remaining / 2p iterations, at least `chunk`),
    each to the core that asks first (handouts.guided_starts);
  - single: core 0 after a barrier; after constructs without one (`nowait`), the core with
    the fewest references since the phase began (handouts.place_singles).
  Each keeps every iteration on exactly one core; see analysis/ANALYSIS.md.

Core c's copy of an offset address is addr + c * 2^47: user-space addresses on x86-64
and AArch64 are below 2^47, so mimicked addresses never collide with real ones. An access
is attributed to the line of its first byte.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, NamedTuple

import numba
import numpy as np

from analysis.options import MODES
from analysis.profiles.core_parts import CorePart
from analysis.profiles.handouts import (ChunkCosts, DealTables, LoopTable, chunk_costs, deal_tables, late_single_phases,
                                        place_singles)
from analysis.profiles.interleave import Batch, Interleaver, resolve_memory_budget
from common.errors import InputError
from analysis.profiles.barriers import PhaseMarks
from instrument.trace_types import (NO_LOOP, SCHED_DYNAMIC, SCHED_GUIDED, SCHED_SINGLE, SCHED_STATIC, TraceChunk,
                                    TraceInfo)

OFFSET_BITS = 47
ALL_CORES = -1  # core_of value of an access that every core executes


def resolve_mode(info: TraceInfo, mode: str) -> str:
    """auto -> iteration when the trace has loop markers, else paper."""
    if mode not in MODES:
        raise InputError(f"--mode {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "auto":
        return "iteration" if info.loops else "paper"
    if mode == "iteration" and not info.loops:
        raise InputError(f"{info.path}: trace has no loop markers; use --mode paper or re-trace with markers")
    return mode


def line_shift(line_size: int) -> int:
    """log2 of the line size, validated."""
    if line_size < 1 or line_size & (line_size - 1):
        raise InputError(f"--line-size {line_size}: must be a power of two (e.g. 64)")
    return int(line_size).bit_length() - 1


@numba.njit(cache=True, nogil=True, inline="always")
def static_core(it, trip, p):
    """OpenMP static schedule without chunk: the first trip % p cores get one extra iteration."""
    q = trip // p
    r = trip % p
    big = r * (q + 1)
    if it < big:
        return it // (q + 1)
    return r + (it - big) // max(q, 1)


@numba.njit(cache=True, nogil=True, inline="always")
def iteration_core(loop, it, trip, sched, chunk, dstart, dcore, dptr, p):
    """Core of one access in iteration mode (ALL_CORES outside work-shared loops, and inside one before its
    first iteration: the loop's entry, its bounds and the runtime's first hand-out, which every thread runs;
    a barrier's record has no iteration, so the accesses after it, up to the next construct, are every
    thread's too)."""
    if loop == NO_LOOP or it < 0:
        return ALL_CORES
    s = sched[loop]
    if s == SCHED_STATIC:
        c = chunk[loop]
        if c <= 0:
            return static_core(it, trip[loop], p)
        return (it // c) % p
    if s == SCHED_DYNAMIC or s == SCHED_GUIDED:
        lo = dptr[loop]
        hi = dptr[loop + 1]
        if lo == hi:  # a dynamic loop with fewer chunks than cores: chunk k on core k
            return (it // max(chunk[loop], 1)) % p
        while hi - lo > 1:  # the run of chunks by binary search in this loop's run starts
            mid = (lo + hi) // 2
            if dstart[mid] <= it:
                lo = mid
            else:
                hi = mid
        return dcore[lo]
    if s == SCHED_SINGLE and dptr[loop + 1] > dptr[loop]:  # a single after nowait constructs (handouts.py)
        return dcore[dptr[loop]]
    return 0  # master; a single after a barrier


@numba.njit(cache=True, nogil=True, inline="always")
def paper_core(block, inst, count, paper_chunk, p):
    """Algorithm 1: replicate blocks entered fewer than p times, split the others' instances."""
    n = count[block]
    if n < p:
        return ALL_CORES
    if paper_chunk > 0:
        return (inst // paper_chunk) % p
    return min(inst * p // n, p - 1)


@numba.njit(cache=True, nogil=True)
def _runs(key0, key1):
    """Starts of the runs of equal (key0, key1) rows, plus len; consecutive accesses usually
    share an iteration (or block instance), so cores are decided once per run."""
    n = key0.shape[0]
    starts = np.empty(n + 1, dtype=np.int64)
    r = 0
    for i in range(n):
        if i == 0 or key0[i] != key0[i - 1] or key1[i] != key1[i - 1]:
            starts[r] = i
            r += 1
    starts[r] = n
    return starts[:r + 1].copy()


class CoreTables(NamedTuple):
    """A CoreMap's lookup tables, as one kernel argument: per block its entry count and the
    paper mode's chunk; per loop instance its trip count, schedule and chunk, and the dealt
    loops' runs of chunks one core runs (first iterations dstart[dptr[l]:dptr[l+1]], cores dcore[...]);
    the core count."""

    count: np.ndarray
    paper_chunk: int
    trip: np.ndarray
    sched: np.ndarray
    chunk: np.ndarray
    dstart: np.ndarray
    dcore: np.ndarray
    dptr: np.ndarray
    p: int


@numba.njit(cache=True, nogil=True)
def _run_cores(iteration_mode, starts, key0, key1, tables):
    """Core of each run (ALL_CORES when every core runs it), from the CoreMap's CoreTables."""
    count, paper_chunk, trip, sched, chunk, dstart, dcore, dptr, p = tables
    n_runs = starts.shape[0] - 1
    out = np.zeros(n_runs, dtype=np.int64)
    if p == 1:
        return out
    for r in range(n_runs):
        i = starts[r]
        if iteration_mode:
            out[r] = iteration_core(key0[i], key1[i], trip, sched, chunk, dstart, dcore, dptr, p)
        else:
            out[r] = paper_core(key0[i], key1[i], count, paper_chunk, p)
    return out


@numba.njit(cache=True, nogil=True)
def _core_runs(starts, run_core, p):
    """Runs of each core in order (counting sort): core c's are order[first[c]:first[c+1]];
    the runs every core runs (ALL_CORES), in order; and each core's number of rows."""
    n_runs = run_core.shape[0]
    first = np.zeros(p + 1, dtype=np.int64)
    rows = np.zeros(p, dtype=np.int64)
    n_all = 0
    all_rows = 0
    for r in range(n_runs):
        o = run_core[r]
        if o == ALL_CORES:
            n_all += 1
            all_rows += starts[r + 1] - starts[r]
        else:
            first[o + 1] += 1
            rows[o] += starts[r + 1] - starts[r]
    for c in range(p):
        first[c + 1] += first[c]
        rows[c] += all_rows
    fill = first[:p].copy()
    order = np.empty(first[p], dtype=np.int64)
    every = np.empty(n_all, dtype=np.int64)
    a = 0
    for r in range(n_runs):
        o = run_core[r]
        if o == ALL_CORES:
            every[a] = r
            a += 1
        else:
            order[fill[o]] = r
            fill[o] += 1
    return order, first, every, rows


@numba.njit(cache=True, nogil=True)
def _merge_runs(own, every):
    """A core's runs in row order: its own runs and the every-core runs (both sorted), merged."""
    out = np.empty(own.shape[0] + every.shape[0], dtype=np.int64)
    x = 0
    y = 0
    for f in range(out.shape[0]):
        if y == every.shape[0] or (x < own.shape[0] and own[x] < every[y]):
            out[f] = own[x]
            x += 1
        else:
            out[f] = every[y]
            y += 1
    return out


@numba.njit(cache=True, nogil=True)
def _gather_core_dense(lines, offmask, starts, runs, n, core, shift):
    """A core's line ids (its runs in row order, _merge_runs) for chunks where most rows take the
    offset (paper mode): one pass that adds the offset where the row's mask is set."""
    out = np.empty(n, dtype=np.uint64)
    coff = np.uint64(core) << np.uint64(OFFSET_BITS - shift)
    f = 0
    for r in runs:
        for i in range(starts[r], starts[r + 1]):
            out[f] = lines[i] + coff if offmask[i] else lines[i]
            f += 1
    return out


@numba.njit(cache=True, nogil=True)
def _instance_starts(starts, key0, seen):
    """Runs that start a loop instance numbered above `seen` (instances are numbered in trace
    order), and those instances."""
    n_runs = starts.shape[0] - 1
    runs = np.empty(n_runs, dtype=np.int64)
    inst = np.empty(n_runs, dtype=np.int64)
    m = 0
    for r in range(n_runs):
        k = np.int64(key0[starts[r]])
        if k > seen:
            runs[m] = r
            inst[m] = k
            m += 1
            seen = k
    return runs[:m].copy(), inst[:m].copy()


@numba.njit(cache=True, nogil=True)
def _rows_before(starts, run_core, marks, p):
    """Every core's rows (its own runs and the every-core runs) before each of the sorted runs
    `marks`: an array (len(marks), p)."""
    out = np.zeros((marks.shape[0], p), dtype=np.int64)
    own = np.zeros(p, dtype=np.int64)
    every = 0
    j = 0
    for r in range(run_core.shape[0]):
        while j < marks.shape[0] and marks[j] == r:
            for c in range(p):
                out[j, c] = own[c] + every
            j += 1
        if j == marks.shape[0]:
            break
        n = starts[r + 1] - starts[r]
        if run_core[r] == ALL_CORES:
            every += n
        else:
            own[run_core[r]] += n
    return out


def loop_starts(prep: PreparedChunk, seen: int) -> tuple[np.ndarray, np.ndarray]:
    """(runs, instances) of the loop instances above `seen` that start in an iteration-mode chunk."""
    return _instance_starts(prep.starts, prep.key0, seen)


def phase_counts(prep: PreparedChunk, run_core: np.ndarray, runs: np.ndarray, cores: int) -> np.ndarray | None:
    """Each core's references in the chunk before each of the phase starts `runs` (barriers.PhaseMarks): an
    array runs x cores for Interleaver.barriers, once each core's earlier references are added; None for none."""
    if not len(runs) or cores == 1:
        return None
    return rows_before(prep, run_core, runs, cores)


def rows_before(prep: PreparedChunk, run_core: np.ndarray, runs: np.ndarray, p: int) -> np.ndarray:
    """How many accesses each of p cores has in the chunk before each of `runs` (sorted run
    indices; run_core from CoreMap.split_runs): an array (len(runs), p)."""
    if p == 1:
        return (prep.starts[runs] if len(runs) else np.zeros(0, dtype=np.int64)).reshape(-1, 1)
    return _rows_before(prep.starts, run_core, np.ascontiguousarray(runs, dtype=np.int64), p)


def scatter(prep: PreparedChunk, run_core: np.ndarray, p: int, shift: int) -> list[np.ndarray]:
    """Every core's line ids, offsets applied, each its own array (an Interleaver keeps it
    without copying; parts of one shared array were copied, 0.14 s of the jacobi-2d sweep)."""
    if prep.offmask is not None:
        order, first, every, rows = _core_runs(prep.starts, run_core, p)
        return [_gather_core_dense(prep.lines, prep.offmask, prep.starts, _merge_runs(order[first[c]:first[c + 1]],
                                                                                       every), rows[c], c, shift)
                for c in range(p)]
    return [part.gather() for part in split_in_place(prep, run_core, p, shift)]  # (few offset rows: copies)


def split_in_place(prep: PreparedChunk, run_core: np.ndarray, p: int, shift: int) -> list[CorePart]:
    """scatter() without the copies: every core's stretches of the chunk's rows."""
    offrows = prep.offrows if prep.offsets else prep.offrows[:0]
    return [CorePart(prep.lines, offrows, c << (OFFSET_BITS - shift), rows, breaks)
            for c, (rows, breaks) in enumerate(core_segments(prep, run_core, p))]


@numba.njit(cache=True, nogil=True)
def _segments(starts, runs):
    """A core's unbroken stretches of rows (its runs, those that follow each other merged): the
    first row of each, and where each begins in the core's part, plus the part's length."""
    rows = np.empty(runs.shape[0], dtype=np.int64)
    breaks = np.empty(runs.shape[0] + 1, dtype=np.int64)
    f = 0
    k = 0
    end = -1
    for r in runs:
        a = starts[r]
        if a != end:
            rows[k] = a
            breaks[k] = f
            k += 1
        f += starts[r + 1] - a
        end = starts[r + 1]
    breaks[k] = f
    return rows[:k].copy(), breaks[:k + 1].copy()


def whole_core(run_core: np.ndarray) -> int:
    """The core that runs every run of a chunk, or ALL_CORES when the runs are split between cores
    (or every core runs them)."""
    return int(run_core[0]) if len(run_core) and (run_core == run_core[0]).all() else ALL_CORES


def core_segments(prep: PreparedChunk, run_core: np.ndarray, p: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each core, its part's (split_runs) unbroken stretches of the chunk's rows: the first
    row of each and where each begins in the part, plus its length (for ReuseEngine.feed_runs)."""
    n = int(prep.starts[-1]) if len(prep.starts) else 0
    whole = 0 if p == 1 else whole_core(run_core)
    if whole != ALL_CORES:
        none = (np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64))
        return [(np.zeros(1, dtype=np.int64), np.array([0, n], dtype=np.int64)) if c == whole else none
                for c in range(p)]
    order, first, every, _ = _core_runs(prep.starts, run_core, p)
    return [_segments(prep.starts, _merge_runs(order[first[c]:first[c + 1]], every)) for c in range(p)]


@dataclass
class PreparedChunk:
    """What every core count's split of one chunk shares: computed once per chunk."""

    lines: np.ndarray    # uint64 line id of every access (first byte)
    offrows: np.ndarray  # int64 indices (sorted) of the accesses whose address gets the per-core offset
    starts: np.ndarray   # int64 run starts (+ len) of equal (loop, iteration) / (block, instance)
    key0: np.ndarray     # loop (iteration mode) or block (paper mode) of every access
    key1: np.ndarray     # iteration or block instance
    offsets: bool = True  # some access gets the per-core offset (False: every core's ids are the lines)
    offmask: np.ndarray | None = None  # bool per access, kept when most accesses take the offset (paper mode)


def prepare_chunk(ch: TraceChunk, mode: str, shared_block: np.ndarray, shift: int, path: str,
                  stores: bool = False, line_ids: np.ndarray | None = None) -> PreparedChunk:
    """Line ids, offset masks and core-decision runs of a chunk, for any number of cores.

    stores: tag store accesses' line ids with analysis.profiles.coherence.STORE_TAG (for coherence);
    every consumer of tagged ids must strip the tag first.
    line_ids: the chunk's line ids, already made (as stores asks; line_index.LineIndex.number)."""
    if len(ch) and int(ch.addr.max()) >> OFFSET_BITS:
        raise InputError(f"{path}: address {int(ch.addr.max()):#x} is above 2^{OFFSET_BITS}; "
                         f"per-core offsets would collide (unsupported address space)")
    iteration = mode == "iteration"
    flag = ch.is_stack if iteration else ~shared_block[ch.block]
    offrows = np.flatnonzero(flag)
    key0, key1 = (ch.loop, ch.iteration) if iteration else (ch.block, ch.block_instance)
    if line_ids is not None:
        lines = line_ids
    elif stores:
        from analysis.profiles.coherence import tagged_lines

        lines = tagged_lines(ch.addr, ch.is_store, shift)
    else:
        lines = ch.addr >> np.uint64(shift)
    dense = 4 * len(offrows) > len(flag)
    return PreparedChunk(lines, offrows, _runs(key0, key1), key0, key1, bool(len(offrows)),
                         np.ascontiguousarray(flag) if dense else None)


class CoreMap:
    """Per-trace lookup tables that map each access of a chunk to its core for p cores."""

    def __init__(self, info: TraceInfo, cores: int, mode: str, paper_chunk: int = 0,
                 costs: ChunkCosts | None = None) -> None:
        """costs: the references of each chunk of the trace's dynamic loops (handouts.chunk_costs), which
        decide who steals what; None: every iteration costs the same."""
        self.cores = cores
        self.mode = mode
        self.paper_chunk = paper_chunk
        n_blocks = max(list(info.blocks) + list(info.block_counts) + [-1]) + 1
        self.block_count = np.zeros(n_blocks, dtype=np.int64)
        self.shared_block = np.zeros(n_blocks, dtype=np.bool_)
        for b, n in info.block_counts.items():
            self.block_count[b] = n
        for b, blk in info.blocks.items():
            self.shared_block[b] = blk.is_shared_var_block
        loops = sorted(info.loops, key=lambda lp: lp.instance)
        n_loops = (loops[-1].instance + 1) if loops else 0
        self.trip = np.zeros(n_loops, dtype=np.int64)
        self.sched = np.full(n_loops, SCHED_STATIC, dtype=np.int64)
        self.chunk = np.zeros(n_loops, dtype=np.int64)
        for lp in loops:
            self.trip[lp.instance], self.sched[lp.instance], self.chunk[lp.instance] = \
                lp.trip_count, lp.schedule, lp.chunk
        self.path = info.path
        table = LoopTable(self.sched, self.trip, self.chunk)
        phases = late_single_phases(loops) if mode == "iteration" else []
        self.dstart, self.dcore, self.dptr = deal_tables(table, cores, costs, {i for ph in phases for i in ph})
        if cores > 1:
            place_singles(phases, table, cores, costs, DealTables(self.dstart, self.dcore, self.dptr),
                          self._piece_cores)

    def _piece_cores(self, instance: int, first: np.ndarray) -> np.ndarray:
        """Core of each piece (its first iteration) of one loop instance, by the tables as they stand."""
        runs = np.arange(len(first) + 1, dtype=np.int64)
        return _run_cores(True, runs, np.full(len(first), instance, dtype=np.int64),
                          np.asarray(first, dtype=np.int64), self.tables())

    def check(self, ch: TraceChunk) -> None:
        """Block and loop ids must be in the header's tables, or the lookups would be wrong."""
        if not len(ch):
            return
        if int(ch.block.min()) < 0 or int(ch.block.max()) >= len(self.block_count):
            raise InputError(f"{self.path}: access in block {int(ch.block.max())} that the trace header does "
                             f"not list; the trace is corrupt, re-record it")
        if self.mode == "iteration" and int(ch.loop.max()) >= len(self.trip):
            raise InputError(f"{self.path}: access in loop instance {int(ch.loop.max())} missing from the "
                             f"trace's loop table; the trace is corrupt, re-record it")

    def tables(self) -> CoreTables:
        """The lookup tables, for the kernels (here and in analysis/sampling/core_runs.py)."""
        return CoreTables(self.block_count, self.paper_chunk, self.trip, self.sched, self.chunk, self.dstart,
                          self.dcore, self.dptr, self.cores)

    def core_of(self, ch: TraceChunk) -> np.ndarray:
        """Core that runs each access, or ALL_CORES when every core runs it."""
        self.check(ch)
        if self.cores == 1:
            return np.zeros(len(ch), dtype=np.int64)
        iteration = self.mode == "iteration"
        key0, key1 = (ch.loop, ch.iteration) if iteration else (ch.block, ch.block_instance)
        starts = _runs(key0, key1)  # the per-run decision split() uses, expanded to rows
        return np.repeat(_run_cores(iteration, starts, key0, key1, self.tables()), np.diff(starts))

    def split(self, ch: TraceChunk, shift: int) -> list[np.ndarray]:
        """Line ids (uint64, program order) of every core's accesses in this chunk, offsets applied."""
        self.check(ch)
        return self.split_prepared(prepare_chunk(ch, self.mode, self.shared_block, shift, self.path), shift)

    def split_prepared(self, prep: PreparedChunk, shift: int) -> list[np.ndarray]:
        """split() of a chunk already checked and prepared (shared by every core count)."""
        return self.split_runs(prep, shift)[0]

    def split_runs(self, prep: PreparedChunk, shift: int, in_place: bool = False
                   ) -> tuple[list[np.ndarray | CorePart], np.ndarray]:
        """split_prepared(), and the core of each of prep's runs (ALL_CORES: every core).

        in_place: a chunk split between cores gives each core a CorePart (read through, not
        copied out) unless most rows take the offset (paper mode)."""
        run_core = _run_cores(self.mode == "iteration", prep.starts, prep.key0, prep.key1, self.tables())
        if self.cores == 1:  # one core: the sequential trace itself (core 0's offset is zero)
            return [prep.lines], run_core
        whole = whole_core(run_core)
        if whole != ALL_CORES:  # the chunk is one core's (static schedules, mostly): no scatter copy
            return _one_core(prep, whole, self.cores, shift), run_core
        if in_place and prep.offmask is None:
            return split_in_place(prep, run_core, self.cores, shift), run_core
        return scatter(prep, run_core, self.cores, shift), run_core


def _one_core(prep: PreparedChunk, core: int, cores: int, shift: int) -> list[np.ndarray]:
    """split_runs() of a chunk whose rows all run on `core`: its line ids (the prepared array
    itself when no offset applies, never modified by the consumers), nothing for the others."""
    lines = prep.lines
    if core and prep.offsets:
        lines = lines.copy()
        lines[prep.offrows] += np.uint64(core << (OFFSET_BITS - shift))
    empty = lines[:0]
    return [lines if c == core else empty for c in range(cores)]


@numba.njit(cache=True)
def _static_cores(it, trip, p):
    out = np.empty(it.shape[0], dtype=np.int64)
    for i in range(it.shape[0]):
        out[i] = static_core(it[i], trip[i], p)
    return out


def static_block_core(it: np.ndarray, trip: np.ndarray, p: int) -> np.ndarray:
    """Vectorised static_core (the kernels' own formula), for callers and tests."""
    return _static_cores(np.asarray(it, dtype=np.int64), np.asarray(trip, dtype=np.int64), int(p))


def core_lines(ch: TraceChunk, cmap: CoreMap, core: int, shift: int) -> np.ndarray:
    """Line ids (uint64, program order) that `core` accesses in this chunk, offsets applied."""
    return cmap.split(ch, shift)[core].copy()


def core_stream(info: TraceInfo, chunks: Callable[[], Iterable[TraceChunk]], cores: int, core: int,
                mode: str, line_size: int = 64, paper_chunk: int = 0,
                costs: ChunkCosts | None = None) -> Iterator[np.ndarray]:
    """One core's private trace as a lazy stream of line-id arrays (its own pass over the trace; costs: the
    dynamic loops' chunk costs, computed here when not given)."""
    resolved = resolve_mode(info, mode)
    cmap = CoreMap(info, cores, resolved, paper_chunk,
                   costs if costs is not None else chunk_costs(info, chunks, resolved))
    shift = line_shift(line_size)
    for ch in chunks():
        lines = core_lines(ch, cmap, core, shift)
        if len(lines):
            yield lines


def core_streams(info: TraceInfo, chunks: Callable[[], Iterable[TraceChunk]], cores: int, mode: str,
                 line_size: int = 64, paper_chunk: int = 0) -> list[Iterator[np.ndarray]]:
    """Every core's private trace, each an independent lazy reader over the same trace."""
    costs = chunk_costs(info, chunks, resolve_mode(info, mode))
    return [core_stream(info, chunks, cores, c, mode, line_size, paper_chunk, costs) for c in range(cores)]


@dataclass(frozen=True)
class InterleaveSpec:
    """How the shared trace of one core count is built."""

    cores: int
    strategy: str = "rr"
    seed: int = 0
    refs_per_turn: int = 1


def mimic(info: TraceInfo, chunks: Callable[[], Iterable[TraceChunk]], specs: list[InterleaveSpec], mode: str,
          line_size: int = 64, paper_chunk: int = 0, memory_budget: int | None = None,
          spill_dir: str | None = None, stores: bool = False) -> Iterator[tuple[int, Batch]]:
    """One pass over the trace: yield (spec index, Interleaver batch) of every shared trace, in order.

    Each core's references are pushed into that spec's Interleaver as the sequential trace
    is read; what waits for slower cores is bounded by `memory_budget` bytes (shared evenly
    by the specs) and spilled to compressed temporary files beyond it. `stores`: store line ids
    carry analysis.profiles.coherence.STORE_TAG (for a coherent simulation).
    """
    resolved = resolve_mode(info, mode)
    shift = line_shift(line_size)
    costs = chunk_costs(info, chunks, resolved)
    maps = [CoreMap(info, s.cores, resolved, paper_chunk, costs) for s in specs]
    total = resolve_memory_budget(memory_budget)
    budget = total // max(len(specs), 1)
    itls = [Interleaver(s.cores, s.strategy, s.seed, s.refs_per_turn, budget, spill_dir) for s in specs]
    phases = PhaseMarks(info, resolved)
    for ch in chunks():
        if maps:
            maps[0].check(ch)  # the tables checked do not depend on the core count
            prep = prepare_chunk(ch, resolved, maps[0].shared_block, shift, info.path, stores)
            starts = phases.runs(prep.starts, prep.key0)
        for i, (cmap, itl) in enumerate(zip(maps, itls)):
            parts, run_core = cmap.split_runs(prep, shift)
            counts = phase_counts(prep, run_core, starts, cmap.cores)
            if counts is not None:  # barriers first: the parts may hold the references after them
                itl.barriers(counts + itl.pushed()[None, :])
            for core, lines in enumerate(parts):
                if len(lines):
                    itl.push(core, lines)
            for batch in itl.drain():
                yield i, batch
    for i, itl in enumerate(itls):
        itl.close_all()
        for batch in itl.drain():
            yield i, batch
