"""The busiest core's share of a region's work, as the work-shared loops' schedules divide it.

Every term is priced for the busiest core: per loop instance, the iterations of its most loaded thread;
the share is their iteration-weighted mean (1/cores when the trace has no loop records).
"""
from __future__ import annotations

import math
from typing import Sequence

from instrument.trace_types import SCHED_BARRIER, SCHED_DYNAMIC, SCHED_MASTER, SCHED_SINGLE, SCHED_STATIC, LoopInstance


def busiest_share(loops: Sequence[LoopInstance], cores: int) -> float:
    """Fraction of all work-shared iterations the busiest core runs, as each schedule divides them."""
    loops = [loop for loop in loops if loop.schedule != SCHED_BARRIER]  # barriers have no iterations
    total = sum(loop.trip_count for loop in loops)
    if total == 0:
        return 1.0 / cores
    return sum(busiest_iterations(loop, cores) for loop in loops) / total


def busiest_iterations(loop: LoopInstance, cores: int) -> int:
    """Iterations of the busiest thread for one loop instance."""
    n = loop.trip_count
    if loop.schedule in (SCHED_MASTER, SCHED_SINGLE) or n == 0:
        return n
    if loop.schedule == SCHED_STATIC and loop.chunk == 0:
        return math.ceil(n / cores)   # libomp: contiguous pieces of ceil or floor n/p
    if loop.schedule in (SCHED_STATIC, SCHED_DYNAMIC):
        return _round_robin_busiest(n, max(1, loop.chunk), cores)
    return math.ceil(n / cores)       # guided: balanced to within a chunk


def _round_robin_busiest(n: int, chunk: int, cores: int) -> int:
    """Chunks dealt round robin (dynamic assumed to deal them like static): thread t gets chunks t, t+p, ..."""
    full, rem = divmod(n, chunk)
    counts = [((full - t + cores - 1) // cores) * chunk if t < full else 0 for t in range(cores)]
    if rem:
        counts[full % cores] += rem
    return max(counts)
