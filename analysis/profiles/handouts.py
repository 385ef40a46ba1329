"""Which core runs each chunk of a `schedule(dynamic)` or `schedule(guided)` loop, and each `single`: libomp's
hand-outs, with equal-speed threads.

libomp (LLVM 19, kmp_dispatch.cpp) runs `schedule(dynamic[, c])` without a `monotonic:` modifier (OpenMP 5.0 made
nonmonotonic the default, and clang passes it) as *static stealing* whenever the loop has at least as many chunks
as threads:

* thread t owns a contiguous range of chunks, [t * n/p + min(t, n % p), ...) of n/p chunks, one more for the first
  n % p threads (as a static schedule of chunks), and takes its next chunk from the front of its range;
* a thread whose range is empty steals: starting from the victim it stole from last (at first its right
  neighbour), it skips threads whose own ranges ran out and takes, from the first one with chunks left, the
  *last* quarter of them (remaining >> 2) when more than 7 remain, else the last one; it runs the first chunk
  taken and keeps the rest as its own range, which others may steal from in turn; a thread that finds no chunks
  after p - 1 tries leaves the loop.

With fewer chunks than threads it hands chunks out from a shared counter, and so it does for `schedule(guided[,
c])` (kmp_sch_guided_iterative_chunked), whose chunks shrink: with r iterations left, the next chunk has
floor(r / (2p)) of them while r >= 2p(c + 1), then c (`guided_starts`); when (2c + 1)p >= n every chunk has c.

So equal-cost iterations give each thread its own block of dynamic chunks (round-robin hand-outs would interleave
them), and unequal costs (a triangular loop) move some chunks from the end of a busy thread's block to idle
threads. Which thread asks first is a matter of time: the threads are taken to run at equal speed, one reference
per cycle, and ties go to the lower thread id, as the validator's ground truth deals them
(instrument/runtime/pptmc_turns.c). A chunk's cost is the references the sequential trace makes in it
(`chunk_costs`, one pass over the trace, by pieces: a translated loop reports each piece's first iteration, and
its pieces end at every chunk start of the core counts traced); without them (a trace with more than
MAX_COSTED_PIECES such pieces) every iteration costs the same.
A `single` goes to the thread that reaches it first. After a barrier every thread arrives at the same time and
the lowest id, thread 0, takes it; after constructs without their barrier (`nowait`) the thread with the fewest
references since the phase began does (`place_singles`: each construct's references per core, from the same
pieces, a single's on the core that took it), as in the ground truth.
Hand-written: no library simulates libomp's hand-outs; the rules above are its documented behaviour.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple

import numba
import numpy as np

from instrument.trace_types import (SCHED_BARRIER, SCHED_DYNAMIC, SCHED_GUIDED, SCHED_SINGLE, LoopInstance, TraceChunk,
                                    TraceInfo)

MAX_COSTED_PIECES = 1 << 24  # pieces of dealt loops whose costs the pre-pass keeps (16 bytes each)
GUIDED_K = 2  # libomp's guided_int_param: chunks of remaining x 0.5 / p until fewer than K p (c + 1) remain


@dataclass(frozen=True)
class ChunkCosts:
    """References the sequential trace makes in each piece of each dealt (dynamic or guided) loop instance, and
    of each construct whose time decides who takes a later `single` (`late_single_phases`)."""

    per_instance: dict[int, tuple[np.ndarray, np.ndarray]]  # instance -> (piece first iterations, references)


def chunk_count(trip: int, chunk: int) -> int:
    """Chunks of a loop of `trip` iterations dealt `chunk` at a time (chunk 0 = 1)."""
    c = max(int(chunk), 1)
    return -(-int(trip) // c)


def dealt_instances(info: TraceInfo) -> set[int]:
    """Loop instances whose chunks go to whichever thread asks first: dynamic with two or more chunks, guided."""
    return {lp.instance for lp in info.loops if (lp.schedule == SCHED_DYNAMIC and chunk_count(lp.trip_count, lp.chunk)
                                                 >= 2) or (lp.schedule == SCHED_GUIDED and lp.trip_count >= 2)}


def chunk_costs(info: TraceInfo, chunks: Callable[[], Iterable[TraceChunk]], mode: str) -> ChunkCosts | None:
    """One pass over the trace: the references of each piece of its dealt loops, for the iteration mode's deal
    (None: paper mode, no loop to deal, or more than MAX_COSTED_PIECES pieces: equal costs)."""
    wanted_ids = dealt_instances(info) | {i for phase in late_single_phases(info.loops) for i in phase} if (
        mode == "iteration") else set()
    if not wanted_ids:
        return None
    wanted = np.zeros(max(wanted_ids) + 1, dtype=np.bool_)
    wanted[list(wanted_ids)] = True
    found: dict[int, list] = {}
    n_pieces = 0
    for ch in chunks():
        n_pieces += _add_piece_rows(ch.loop, ch.iteration, wanted, found)
        if n_pieces > MAX_COSTED_PIECES:
            return None
    return ChunkCosts({i: _merged(parts) for i, parts in found.items()})


def late_single_phases(loops: Iterable[LoopInstance]) -> list[list[int]]:
    """The phases (construct instances between two barriers, in order) in which a `single` comes after another
    construct, so its threads arrive at different times; each up to its last such single (what comes after
    decides nothing)."""
    phases: list[list[LoopInstance]] = [[]]
    for lp in sorted(loops, key=lambda x: x.instance):
        if lp.schedule == SCHED_BARRIER:
            phases.append([])
        else:
            phases[-1].append(lp)
    out = []
    for phase in phases:
        late = [k for k, lp in enumerate(phase) if k and lp.schedule == SCHED_SINGLE]
        if late:
            out.append([lp.instance for lp in phase[:late[-1] + 1]])
    return out


class DealTables(NamedTuple):
    """Runs of chunks one core runs, of every dealt loop instance and late single, flattened: instance l's are
    dstart[dptr[l]:dptr[l+1]] on cores dcore[...] (none: chunk k on core k; a single: thread 0)."""

    dstart: np.ndarray
    dcore: np.ndarray
    dptr: np.ndarray


class LoopTable(NamedTuple):
    """Every loop instance's schedule, trip count and chunk, indexed by instance."""

    sched: np.ndarray
    trip: np.ndarray
    chunk: np.ndarray


def deal_tables(loops: LoopTable, p: int, costs: ChunkCosts | None, late: set[int]) -> DealTables:
    """Each guided and dynamic loop's runs as libomp hands them out (deal_runs), and a run at iteration 0 for each
    single in `late` (of late_single_phases), on thread 0 until place_singles places it."""
    known = costs.per_instance if costs is not None else {}
    starts, cores, ptr = [], [], [0]
    for lp, (sched, trip, chunk) in enumerate(zip(*(x.tolist() for x in loops))):
        first = core = np.zeros(0, dtype=np.int64)
        if p > 1 and sched in (SCHED_GUIDED, SCHED_DYNAMIC):
            first, core = deal_runs(sched, trip, chunk, p, known.get(lp))
        elif p > 1 and sched == SCHED_SINGLE and lp in late:
            first = core = np.zeros(1, dtype=np.int64)
        starts.append(first)
        cores.append(core)
        ptr.append(ptr[-1] + len(first))
    flat = (lambda parts: np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64))
    return DealTables(flat(starts), flat(cores), np.asarray(ptr, dtype=np.int64))


def place_singles(phases: list[list[int]], loops: LoopTable, p: int, costs: ChunkCosts | None, tables: DealTables,
                  piece_cores: Callable[[int, np.ndarray], np.ndarray]) -> None:
    """Give each single of the late-single `phases` to the thread with the fewest references since its phase
    began (ties to the lower id), in `tables` (deal_tables'); piece_cores(instance, first iterations) says which
    core runs each piece with the tables as they stand. Without costs, every iteration costs the same."""
    known = costs.per_instance if costs is not None else {}
    for phase in phases:
        work = np.zeros(p, dtype=np.int64)
        for inst in phase:
            if loops.sched[inst] == SCHED_SINGLE:
                tables.dcore[tables.dptr[inst]] = int(np.argmin(work))
            n = int(loops.trip[inst])
            first, refs = known.get(inst, (np.arange(n, dtype=np.int64), np.ones(n, dtype=np.int64)))
            work += np.bincount(piece_cores(inst, first), weights=refs, minlength=p).astype(np.int64)


def _add_piece_rows(loop: np.ndarray, iteration: np.ndarray, wanted: np.ndarray, found: dict) -> int:
    """Count one decoded batch's rows by (instance, piece first iteration); rows before a loop's first iteration
    belong to no piece. Returns the number of (instance, piece) pairs added."""
    keep = (loop >= 0) & (loop < len(wanted)) & (iteration >= 0)
    keep[keep] = wanted[loop[keep]]
    if not keep.any():
        return 0
    lp, it = loop[keep].astype(np.int64), iteration[keep].astype(np.int64)
    added = 0
    for inst in np.unique(lp).tolist():
        starts, refs = np.unique(it[lp == inst], return_counts=True)
        found.setdefault(inst, []).append((starts, refs.astype(np.int64)))
        added += len(starts)
    return added


def _merged(parts: list) -> tuple[np.ndarray, np.ndarray]:
    """One (starts, references) pair from a piece's batches (a piece may span batches)."""
    starts = np.concatenate([s for s, _ in parts])
    refs = np.concatenate([r for _, r in parts])
    uniq, where = np.unique(starts, return_inverse=True)
    return uniq, np.bincount(where, weights=refs, minlength=len(uniq)).astype(np.int64)


def guided_starts(n: int, p: int, chunk: int) -> np.ndarray:
    """First iteration of each of libomp's guided chunks for p threads (kmp_sch_guided_iterative_chunked)."""
    c, n, p = max(int(chunk), 1), int(n), int(p)
    if p == 1:  # one thread runs the loop as one chunk
        return np.zeros(1, dtype=np.int64)
    if (2 * c + 1) * p >= n:  # chunks too large to shrink: dynamic-style chunks of c
        return np.arange(0, max(n, 1), c, dtype=np.int64)
    starts, pos = [], 0
    while pos < n:
        starts.append(pos)
        rest = n - pos
        pos += int(float(rest) * (0.5 / p)) if rest >= GUIDED_K * p * (c + 1) else c  # libomp's double arithmetic
    return np.asarray(starts, dtype=np.int64)


def costs_of_chunks(starts: np.ndarray, trip: int, pieces: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """References of each chunk beginning at `starts`: its pieces' (equal costs, its iterations, without them)."""
    if pieces is None:
        return np.diff(np.append(starts, int(trip))).astype(np.int64)
    first, refs = pieces
    k = np.searchsorted(starts, first, side="right") - 1
    return np.bincount(np.maximum(k, 0), weights=refs, minlength=len(starts)).astype(np.int64)


def deal_runs(sched: int, trip: int, chunk: int, p: int,
              pieces: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """(first iteration, core) of each run of consecutive chunks one of p cores runs, as libomp deals a dynamic or
    guided loop instance to equal-speed threads; empty when chunk k simply runs on core k (fewer chunks than p)."""
    if sched == SCHED_GUIDED:
        starts = guided_starts(trip, p, chunk)
        owners = shared_counter_owners(costs_of_chunks(starts, trip, pieces), p)
    else:
        c = max(int(chunk), 1)
        starts = np.arange(0, int(trip), c, dtype=np.int64)
        if len(starts) < p:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        owners = stealing_owners(costs_of_chunks(starts, trip, pieces), p)
    cut = np.flatnonzero(np.diff(owners)) + 1
    first = np.concatenate(([0], cut)).astype(np.int64)
    return starts[first], owners[first].astype(np.int64)


def shared_counter_owners(costs: np.ndarray, p: int) -> np.ndarray:
    """Chunks taken in order from one counter: each goes to the thread that asks first (equal speed, ties to the
    lower id)."""
    return _greedy(np.asarray(costs, dtype=np.int64), int(p))


@numba.njit(cache=True)
def _greedy(costs, p):
    """List scheduling: chunk k to the earliest free thread (its time is the references it ran)."""
    time = np.zeros(p, dtype=np.int64)
    owner = np.empty(costs.shape[0], dtype=np.int64)
    for k in range(costs.shape[0]):
        t = np.argmin(time)  # the first minimum: ties to the lower id
        owner[k] = t
        time[t] += costs[k]
    return owner


class StealState(NamedTuple):
    """Every thread's range of chunks [count, ub), where it steals next, its time, whether its range ran out, and
    whether it is still in the loop."""

    count: np.ndarray
    ub: np.ndarray
    victim: np.ndarray
    time: np.ndarray
    thief: np.ndarray
    active: np.ndarray


def steal_state(n: int, p: int) -> StealState:
    """At the loop's start: thread t owns chunks [t * (n // p) + min(t, n % p), ...), and steals first from t + 1."""
    small, extras = n // p, n % p
    t = np.arange(p, dtype=np.int64)
    count = t * small + np.minimum(t, extras)
    return StealState(count, count + small + (t < extras), (t + 1) % p, np.zeros(p, dtype=np.int64),
                      np.zeros(p, dtype=np.bool_), np.ones(p, dtype=np.bool_))


def stealing_owners(costs: np.ndarray, p: int) -> np.ndarray:
    """The thread that runs each chunk of a dynamic loop: static stealing with n >= p chunks, else the shared
    counter (the threads ask at time 0, in id order: chunk k on thread k)."""
    n = len(costs)
    if n < p:
        return np.arange(n, dtype=np.int64)
    return _deal(np.asarray(costs, dtype=np.int64), steal_state(int(n), int(p)))


@numba.njit(cache=True)
def _deal(costs, st):
    """Hand out every chunk, each to the thread that asks first (equal speed: its time is the references it ran)."""
    n = costs.shape[0]
    owner = np.full(n, -1, dtype=np.int64)
    left = n
    while left > 0:
        t = _next_thread(st)
        if t < 0:
            break
        k = _next_chunk(st, t)
        if k < 0:
            st.active[t] = False
            continue
        owner[k] = t
        st.time[t] += costs[k]
        left -= 1
    return owner


@numba.njit(cache=True, inline="always")
def _next_thread(st):
    """The thread that asks next: the earliest still in the loop, ties to the lower id (-1: none)."""
    best = -1
    for t in range(st.time.shape[0]):
        if st.active[t] and (best < 0 or st.time[t] < st.time[best]):
            best = t
    return best


@numba.njit(cache=True)
def _next_chunk(st, t):
    """Thread t's next chunk: the front of its own range, else one stolen (-1: it leaves the loop)."""
    p = st.time.shape[0]
    if st.count[t] < st.ub[t]:
        st.count[t] += 1
        return st.count[t] - 1
    st.thief[t] = True
    for _ in range(1, p):
        v = st.victim[t]
        stop = v - 1 if v else p - 1
        while (v == t or st.thief[v]) and v != stop:
            v = (v + 1) % p
        if v == t or st.thief[v]:
            continue
        if st.count[v] >= st.ub[v]:
            st.victim[t] = (v + 1) % p
            continue
        return _steal(st, t, v)
    return -1


@numba.njit(cache=True, inline="always")
def _steal(st, t, v):
    """Thread t takes the last quarter (or the last one) of v's remaining chunks and runs the first of them."""
    remaining = st.ub[v] - st.count[v]
    limit = st.ub[v]
    st.ub[v] -= (remaining >> 2) if remaining > 7 else 1
    first = st.ub[v]
    st.victim[t] = v
    st.count[t] = first + 1
    st.ub[t] = limit
    if st.count[t] < st.ub[t]:
        st.thief[t] = False
    return first
