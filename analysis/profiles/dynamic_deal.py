"""Which core runs each chunk of a `schedule(dynamic)` loop: libomp's work stealing, with equal-speed threads.

libomp (LLVM 19, kmp_dispatch.cpp) runs `schedule(dynamic[, c])` without a `monotonic:` modifier (OpenMP 5.0 made
nonmonotonic the default, and clang passes it) as *static stealing* whenever the loop has at least as many chunks
as threads; with fewer it hands chunks out from a shared counter. Static stealing:

* thread t owns a contiguous range of chunks, [t * n/p + min(t, n % p), ...) of n/p chunks, one more for the first
  n % p threads (as a static schedule of chunks), and takes its next chunk from the front of its range;
* a thread whose range is empty steals: starting from the victim it stole from last (at first its right
  neighbour), it skips threads whose own ranges ran out and takes, from the first one with chunks left, the
  *last* quarter of them (remaining >> 2) when more than 7 remain, else the last one; it runs the first chunk
  taken and keeps the rest as its own range, which others may steal from in turn; a thread that finds no chunks
  after p - 1 tries leaves the loop.

So equal-cost iterations give each thread its own block of chunks (round-robin hand-outs would interleave them),
and unequal costs (a triangular loop) move some chunks from the end of a busy thread's block to idle threads.
Which thread asks first is a matter of time: the threads are taken to run at equal speed, one reference per cycle,
and ties go to the lower thread id, as the validator's ground truth deals them (instrument/runtime/pptmc_turns.c).
A chunk's cost is the references the sequential trace makes in it (`ChunkCosts`, one pass over the trace); without
them (a trace with more than MAX_COSTED_CHUNKS dynamic chunks) every iteration costs the same.
Hand-written: no library simulates libomp's hand-out; the rules above are its documented behaviour.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple

import numba
import numpy as np

from instrument.trace_types import SCHED_DYNAMIC, TraceChunk, TraceInfo

MAX_COSTED_CHUNKS = 1 << 24  # chunks of dynamic loops the pre-pass keeps costs for (8 bytes each)


@dataclass(frozen=True)
class ChunkCosts:
    """References the sequential trace makes in each chunk of each dynamic loop instance."""

    per_instance: dict[int, np.ndarray]  # loop instance -> references per chunk (int64)


def chunk_count(trip: int, chunk: int) -> int:
    """Chunks of a loop of `trip` iterations dealt `chunk` at a time (chunk 0 = 1)."""
    c = max(int(chunk), 1)
    return -(-int(trip) // c)


def stealing_instances(info: TraceInfo) -> dict[int, int]:
    """Dynamic loop instances with at least two chunks (which static stealing may deal): instance -> chunk size."""
    return {lp.instance: max(lp.chunk, 1) for lp in info.loops
            if lp.schedule == SCHED_DYNAMIC and chunk_count(lp.trip_count, lp.chunk) >= 2}


def chunk_costs(info: TraceInfo, chunks: Callable[[], Iterable[TraceChunk]], mode: str) -> ChunkCosts | None:
    """One pass over the trace: the references of each chunk of its dynamic loops, for the iteration mode's deal
    (None: paper mode, no loop to deal by stealing, or more than MAX_COSTED_CHUNKS chunks: equal costs)."""
    sizes = stealing_instances(info) if mode == "iteration" else {}
    trips = {lp.instance: lp.trip_count for lp in info.loops if lp.instance in sizes}
    if not sizes or sum(chunk_count(trips[i], c) for i, c in sizes.items()) > MAX_COSTED_CHUNKS:
        return None
    costs = {i: np.zeros(chunk_count(trips[i], c), dtype=np.int64) for i, c in sizes.items()}
    top = max(sizes) + 1
    chunk_of = np.ones(top, dtype=np.int64)
    wanted = np.zeros(top, dtype=np.bool_)
    for i, c in sizes.items():
        chunk_of[i], wanted[i] = c, True
    for ch in chunks():
        _add_chunk_rows(ch.loop, ch.iteration, wanted, chunk_of, costs)
    return ChunkCosts(costs)


def _add_chunk_rows(loop: np.ndarray, iteration: np.ndarray, wanted: np.ndarray, chunk_of: np.ndarray,
                    costs: dict[int, np.ndarray]) -> None:
    """Count one decoded batch's rows into their chunks (rows before a loop's first iteration belong to none)."""
    keep = (loop >= 0) & (loop < len(wanted)) & (iteration >= 0)
    keep[keep] = wanted[loop[keep]]
    if not keep.any():
        return
    lp, it = loop[keep].astype(np.int64), iteration[keep].astype(np.int64)
    for inst in np.unique(lp).tolist():
        rows = it[lp == inst] // chunk_of[inst]
        c = costs[inst]
        np.add.at(c, np.minimum(rows, len(c) - 1), 1)


def equal_costs(trip: int, chunk: int) -> np.ndarray:
    """Costs of a loop whose iterations all cost the same: its chunks' iteration counts (the last may be short)."""
    c = max(int(chunk), 1)
    n = chunk_count(trip, c)
    out = np.full(n, c, dtype=np.int64)
    if n:
        out[-1] = int(trip) - c * (n - 1)
    return out


def stealing_runs(costs: np.ndarray, chunk: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """(first iteration, core) of each run of consecutive chunks one core runs, under libomp's dealing for p threads."""
    owners = dynamic_owners(np.asarray(costs, dtype=np.int64), int(p))
    cut = np.flatnonzero(np.diff(owners)) + 1 if len(owners) else np.zeros(0, dtype=np.int64)
    first = np.concatenate(([0], cut)).astype(np.int64) if len(owners) else np.zeros(0, dtype=np.int64)
    return first * max(int(chunk), 1), owners[first].astype(np.int64)


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


def dynamic_owners(costs: np.ndarray, p: int) -> np.ndarray:
    """The thread that runs each chunk: static stealing with n >= p chunks, else one chunk per thread in id order."""
    n = len(costs)
    if n < p:  # libomp's shared counter: the threads ask at time 0, in id order
        return np.arange(n, dtype=np.int64)
    return _deal(np.asarray(costs, dtype=np.int64), steal_state(n, p))


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
