"""One pass over the trace for the tasks of several core counts (analysis/profiles/sweep.py, and the set-class pass
of analysis/profiles/set_classes.py): what does not depend on the core count is computed once per chunk, and the
tasks share engines where their private traces coincide (Mirrors) or repeat another's (Suffixes)."""
from __future__ import annotations

import numpy as np

from analysis.profiles.barriers import PhaseMarks
from analysis.profiles.line_index import LineIndex
from analysis.profiles.private_traces import (PreparedChunk, line_shift, loop_starts, phase_counts, prepare_chunk,
                                              rows_before)
from analysis.profiles.runs import LeadTrace
from analysis.profiles.suffixes import Mirrors, Suffixes
from analysis.profiles.task import CoreCountTask, LeadRuns
from instrument.trace_types import TraceChunk, TraceInfo

PAGE = 4096  # bytes: stack bounds are page aligned


class SweepPass:
    """One pass over the trace for the tasks of several core counts: what does not depend on
    the core count is computed once per chunk, and the tasks share engines (Mirrors, Suffixes).

    plain=False: the engines' distances are not plain stack distances (set_classes.ClassEngine): only
    Mirrors (equal accesses give equal states, whatever the engine counts) are shared; dense line ids
    (they renumber lines, losing their low bits), following the one-core trace and Suffixes (which
    compare a distance with the lines touched since a point) are plain distances' and are left out."""

    def __init__(self, info: TraceInfo, tasks: list[CoreCountTask], mode: str, line_size: int,
                 memory_budget: int, plain: bool = True, barriers: bool = True) -> None:
        self.info, self.tasks, self.mode, self.shift = info, tasks, mode, line_shift(line_size)
        self.mirrors = Mirrors(tasks, self.shift)
        self.tag = any(t.coherent for t in tasks)
        for t in tasks:
            t.tagged = self.tag
        # Dense line ids (analysis/profiles/line_index.py) for the engines that see every line: the shared
        # traces' and the one-core trace's (iteration mode offsets only stack rows, so nearly all
        # their ids are dense). Measured over the whole sweep: atax-like bench 0.79 -> 0.71 s, 2mm
        # MEDIUM 5.3 -> 5.0 s, gramschmidt 4.95 -> 4.55 s; jacobi-2d MEDIUM +0.11 s (its engines
        # replay most copies, the numbering sees them all).
        dense = plain and mode == "iteration" and any(t.spec.cores > 1 for t in tasks)
        self.index = LineIndex() if dense else None
        # Private traces of p > 1 follow the one-core trace within their unbroken stretches of rows
        # (ReuseEngine.feed_runs).
        self.one = next((j for j, t in enumerate(tasks) if t.spec.cores == 1), None)
        self.follow_one = self.index is not None and self.one is not None and may_follow_one(mode, line_size)
        self.rows_seen = 0  # accesses of the trace before this chunk
        self.by_cores = sorted(range(len(tasks)), key=lambda j: tasks[j].spec.cores)
        self.suffixes = Suffixes(tasks, self.by_cores, memory_budget // 8) if plain else None
        self.watching = any(t.loop_period for t in tasks)
        self.seen = -1  # the highest loop instance started so far
        self.phases = PhaseMarks(info, mode, barriers)

    def take(self, ch: TraceChunk) -> None:
        """Feed one chunk of the sequential trace to every task."""
        tasks, index = self.tasks, self.index
        tasks[0].cmap.check(ch)  # the header tables checked are the same for every core count
        ids, prev, nxt = index.number(ch.addr, ch.is_store if self.tag else None, self.shift, self.rows_seen,
                                      self.follow_one) if index is not None else (None, None, None)
        prep = prepare_chunk(ch, self.mode, tasks[0].cmap.shared_block, self.shift, self.info.path, stores=self.tag,
                             line_ids=ids)
        # with dense ids, a chunk's split parts are read in place (core_parts.CorePart)
        splits = [t.cmap.split_runs(prep, self.shift, in_place=index is not None) for t in tasks]
        if self.watching:
            self._watch(prep, splits)
        self.mirrors.update([run_core for _, run_core in splits])  # forks before the leaders take this chunk
        lead = (prev, nxt) if self.follow_one else None  # where each access's line was touched before and next
        self.rows_seen += len(prep.lines)
        self._feed(prep, splits, lead, self.phases.runs(prep.starts, prep.key0))

    def _watch(self, prep: PreparedChunk, splits: list) -> None:
        """Tell the tasks that watch for repeating loops where this chunk's loop instances start."""
        marks, started = loop_starts(prep, self.seen)
        if len(started):
            self.seen = int(started[-1])
            for j, t in enumerate(self.tasks):
                if t.loop_period:  # before the chunk is fed: positions count what came before
                    t.watch(started, rows_before(prep, splits[j][1], marks, t.spec.cores))

    def _feed(self, prep: PreparedChunk, splits: list, lead: tuple[np.ndarray, np.ndarray] | None,
              phase_runs: np.ndarray) -> None:
        """Feed every task its parts of the chunk, class leaders (fewest cores first, then lower
        cores) before their followers; phase_runs: the chunk's runs that begin a phase (PhaseMarks)."""
        tasks, mirrors, suffixes = self.tasks, self.mirrors, self.suffixes
        leader_of = mirrors.leader_of
        follow = suffixes.update(prep, splits, mirrors) if suffixes is not None else {}
        lenders = {leader[0] for follower, leader in leader_of.items() if tasks[follower[0]].coherent}
        if suffixes is not None:
            lenders |= suffixes.lenders(follow, leader_of)
        for j, t in enumerate(tasks):  # a one-core task may lead the engines of coherent tasks' cores 0
            t.distances = t.coherent or j in lenders or (self.follow_one and j == self.one)
        for j in self.by_cores:
            def lend(c: int, j: int = j) -> np.ndarray:
                lj, lc = leader_of[(j, c)]
                return tasks[lj].last_distances[lc]

            tasks[j].feed(splits[j][0], skip=mirrors.following(j), lend=lend if self.tag else None,
                          shared=mirrors.members(j),
                          follow=suffixes.providers(follow[j], leader_of) if j in follow else None,
                          ids=self.index.count if self.index is not None else 0,
                          runs=_lead_runs(lead, tasks, self.one, j, prep, splits[j][1]),
                          phases=phase_counts(prep, splits[j][1], phase_runs, tasks[j].spec.cores))


def may_follow_one(mode: str, line_size: int) -> bool:
    """Whether private traces can follow the one-core trace: their line ids correspond one to
    one to its ids within a stretch (iteration mode offsets only stack lines, and a line no
    longer than a page is all stack or none of it)."""
    return mode == "iteration" and line_size <= PAGE


def _lead_runs(neighbours: tuple[np.ndarray, np.ndarray] | None, tasks: list[CoreCountTask], one: int | None,
               j: int, prep: PreparedChunk, run_core: np.ndarray) -> LeadRuns | None:
    """What task j's private engines need to follow the one-core trace through this chunk (its
    engine fed before them; neighbours: LineIndex.number's previous and next accesses), or None
    (not following, or the one-core engine kept no distances, e.g. a replay)."""
    if neighbours is None or j == one:
        return None
    distances = tasks[one].last_distances.get(0)
    if distances is None or len(distances) != len(prep.lines):
        return None
    return LeadRuns(LeadTrace(distances, *neighbours), prep, run_core, tasks[j].spec.cores)


