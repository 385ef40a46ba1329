"""Where the threads wait: the sequential trace's barriers, which the shared traces keep (ANALYSIS.md, section 2).

Every barrier (a construct's implied one, `#pragma omp barrier`, a region's start) is a loop record of schedule
SCHED_BARRIER in the trace (instrument/FORMAT.md, "Barriers"), and the accesses after it carry its instance until
the next construct begins. Loop instances are numbered in trace order, so an access lies after barrier b when the
highest loop instance seen up to it is at least b. A phase is the stretch between two barriers: no core's
accesses of one phase are interleaved with another core's of the next, as no thread passes a barrier before all
have reached it.
"""
from __future__ import annotations

import numpy as np

from instrument.trace_types import SCHED_BARRIER, TraceInfo


class PhaseMarks:
    """Finds, chunk by chunk, the runs of an iteration-mode trace where a new phase begins."""

    def __init__(self, info: TraceInfo, mode: str, enabled: bool = True) -> None:
        """enabled=False, or a mode other than iteration: no phases (the paper's Algorithm 2)."""
        keep = enabled and mode == "iteration"
        instances = [lp.instance for lp in info.loops if lp.schedule == SCHED_BARRIER] if keep else []
        self.barriers = np.asarray(sorted(instances), dtype=np.int64)
        self.top = -1    # the highest loop instance of the accesses so far
        self.phase = 0   # barriers at or below it

    @property
    def any(self) -> bool:
        """Whether the trace records barriers (traces recorded before they were, and paper mode, have none)."""
        return len(self.barriers) > 0

    def runs(self, starts: np.ndarray, loop: np.ndarray) -> np.ndarray:
        """Indices of a chunk's runs that begin a new phase, in order (`starts`: the runs' first rows, plus the
        chunk's length, as PreparedChunk.starts; `loop`: every row's loop instance)."""
        if not self.any or len(starts) < 2:
            return np.zeros(0, dtype=np.int64)
        first = loop[starts[:-1]].astype(np.int64)  # each run's loop instance (NO_LOOP = -1)
        top = np.maximum.accumulate(np.maximum(first, self.top))
        phase = np.searchsorted(self.barriers, top, side="right")
        before = np.concatenate(([self.phase], phase[:-1]))
        self.top, self.phase = int(top[-1]), int(phase[-1])
        return np.flatnonzero(phase > before).astype(np.int64)


def thread_phases(info: TraceInfo) -> np.ndarray:
    """For a multithreaded trace (the validator's ground truth): the phase, within its region, that each barrier
    record opens on the thread that made it (index = loop instance; -1 for other records). A thread's region
    start opens phase 0 and each of its barriers the next, so the k-th barrier of every thread opens phase k,
    whichever order the threads recorded them in."""
    loops = sorted(info.loops, key=lambda lp: lp.instance)
    out = np.full(loops[-1].instance + 1 if loops else 0, -1, dtype=np.int64)
    phase: dict[int, int] = {}
    for lp in loops:
        if lp.schedule == SCHED_BARRIER:
            thread = lp.chunk  # the recording thread's id; trip count 1 marks a region's start
            phase[thread] = 0 if lp.trip_count == 1 else phase.get(thread, 0) + 1
            out[lp.instance] = phase[thread]
    return out
