"""The profiles of one core count (CoreCountTask): the unit of a sweep over core counts."""
from __future__ import annotations

from typing import Callable

import numpy as np

from analysis.profiles.coherence import CoherenceMisses, strip
from analysis.profiles.core_parts import CorePart, as_array
from analysis.profiles.handouts import ChunkCosts
from analysis.profiles.interleave import Batch, Interleaver, Lanes, resolve_memory_budget
from analysis.profiles.private_traces import (OFFSET_BITS, CoreMap, InterleaveSpec, PreparedChunk, core_segments,
                                              phase_counts)
from analysis.profiles.profileset import ReuseProfile
from analysis.profiles.replay import PrivateReplay, Replay, loop_period
from analysis.profiles.reuse import ReuseEngine
from analysis.profiles.runs import LeadTrace
from analysis.profiles.suffixes import Suffix
from common.errors import InputError
from instrument.trace_types import TraceInfo

SHORTEST_COPY = 1 << 15  # references: shorter copies would split the CRD's input into too many engine calls
SHORTEST_PRIVATE_COPY = 1 << 13  # the same for a private trace (a private segment costs one engine call)


class LeadRuns:
    """What ReuseEngine.feed_runs follows for the cores of one task in one chunk: the one-core
    trace's accesses, and each core's unbroken stretches of them (private_traces.core_segments,
    made when first needed)."""

    def __init__(self, trace: LeadTrace, prep: PreparedChunk, run_core: np.ndarray, cores: int) -> None:
        self.trace, self.prep, self.run_core, self.cores = trace, prep, run_core, cores
        self._segments: list[tuple[np.ndarray, np.ndarray]] | None = None

    def segments(self, core: int) -> tuple[np.ndarray, np.ndarray]:
        """Core's stretches: their first rows and where they begin in its part (plus its length)."""
        if self._segments is None:
            self._segments = core_segments(self.prep, self.run_core, self.cores)
        return self._segments[core]


class CoreCountTask:
    """The profiles of one core count: a private engine per core, the interleaver and the
    CRD engine. Independent of every other core count's task (a unit of distribution).

    With coherence (p > 1) the private engines are still fed in each core's own order, as
    the chunks arrive (so `Mirrors` can share them), and return every access's plain
    distance (int32). The distances wait in per-core FIFOs (`Lanes`) beside the line ids in
    the Interleaver; each Batch takes as many from each core as its piece holds, and the CRD
    engine, which keeps every line's sharer set (`ReuseEngine.feed_shared`), walks the Batch
    in order and reports the stale accesses, whose distances only are read to find the
    coherence misses (`CoherenceMisses`); their counts are moved to the cold slot at the end
    (`ReuseEngine.reclassify`). That is exact:
    an invalidation changes how an access is counted, never the stack state that later
    distances see.
    """

    def __init__(self, info: TraceInfo, spec: InterleaveSpec, mode: str, shift: int, paper_chunk: int = 0,
                 memory_budget: int | None = None, spill_dir: str | None = None,
                 coherence: bool = False, engine: Callable[..., ReuseEngine] = ReuseEngine,
                 costs: ChunkCosts | None = None) -> None:
        self.spec, self.shift = spec, shift
        self.coherent = coherence and spec.cores > 1
        if self.coherent and spec.cores >= 1 << (63 - OFFSET_BITS):
            raise InputError(f"--cores {spec.cores}: coherence modelling supports fewer than "
                             f"{1 << (63 - OFFSET_BITS)} cores; use --no-coherence")
        self.tagged = self.coherent  # parts carry store tags (profile_configs sets it for a whole sweep)
        self.distances = self.coherent  # feed() returns the plain distances (also to lead coherent followers)
        self.misses = CoherenceMisses(spec.cores) if self.coherent else None
        self.last_distances: dict[int, np.ndarray] = {}
        self.cmap = CoreMap(info, spec.cores, mode, paper_chunk, costs)
        # engine: how an engine is made (ReuseEngine; a set_classes.ClassEngine for per-set-class profiles)
        self.private = [engine() for _ in range(spec.cores)]
        # one core: the shared trace is the private one, so the CRD is the PRD
        self.shared = engine(sharer_cores=spec.cores if self.coherent else 0) if spec.cores > 1 else None
        # line ids (8 B) and, with coherence, their distances (4 B) wait alike: split the budget 2:1
        memory_budget = resolve_memory_budget(memory_budget)
        budget = memory_budget * 2 // 3 if self.coherent else memory_budget
        self.itl = Interleaver(spec.cores, spec.strategy, spec.seed, spec.refs_per_turn, budget,
                               spill_dir, reuse=True) if spec.cores > 1 else None
        self.dlanes = Lanes(spec.cores, np.int32, memory_budget - budget, spill_dir) if self.coherent else None
        period = loop_period(info) if mode == "iteration" else 0
        self.replay = Replay(self) if period and spec.cores > 1 and spec.strategy == "rr" else None
        self.longest_copy = memory_budget // 16  # references: a replayed copy is kept (8 B each) in half the budget
        self.loop_period = period  # loop instances i and i + period have the same loop, trip count and schedule
        self.pushed = np.zeros(spec.cores, dtype=np.int64)  # references of each core's private trace so far
        self.starts_at: dict[int, np.ndarray] = {}  # private-trace positions where recent loop instances started
        self.private_period = [0] * spec.cores  # each core's period, where it repeats (see watch)
        self.own_replay: list[PrivateReplay | None] = [None] * spec.cores
        self.phase_start = np.zeros(spec.cores, dtype=np.int64)  # each core's references before the current phase
        self.critical = 0  # references on the critical path of the phases before the current one

    def feed(self, parts: list[np.ndarray | CorePart], skip: set[int] | frozenset[int] = frozenset(),
             lend: Callable[[int], np.ndarray] | None = None, shared: set[int] | None = None,
             follow: dict[int, Callable[[int], np.ndarray | None]] | None = None, ids: int = 0,
             runs: LeadRuns | None = None, phases: np.ndarray | None = None) -> None:
        """Add every core's part of one chunk (CoreMap.split); the engines of cores in skip are kept
        elsewhere, and lend(core) gives their distances for this chunk when they are needed. When
        self.distances, the distances (int32) of the parts fed here are left in self.last_distances.
        The engines of cores not in `shared` (None: all) are shared with no other task ever again
        (Mirrors), so they may replay their periodic stretches (PrivateReplay). follow[core](n)
        gives the distances of the n accesses a following core (Suffix) repeats, None if unknown.
        ids > 0: the parts are dense ids below it (analysis.profiles.line_index), for every chunk.
        runs: the parts' distances in the one-core trace, which plain engines follow (feed_runs).
        phases: each core's references in the chunk before each barrier in it (private_traces.phase_counts)."""
        own: dict[int, np.ndarray] = {}
        before = self.pushed.copy()
        self.last_distances = own
        if ids:  # the engines that see every line take dense slots for them
            engine = self.shared if self.shared is not None else self.private[0]
            if not isinstance(engine, Suffix):
                engine.reserve_dense(ids)
            for engine in self.private if self.shared is not None else ():
                if not isinstance(engine, Suffix) and 2 * engine.distinct_lines >= ids:  # <= 48 B a line it holds
                    engine.reserve_dense(ids)
        for core, lines in enumerate(parts):
            if not len(lines):
                continue
            if core not in skip:  # the engines ignore the store tag themselves
                out = self._feed_core(core, lines, shared, (follow or {}).get(core), runs)
                if out is not None:
                    own[core] = out
            self.pushed[core] += len(lines)
            if self.itl is not None:
                self.itl.push(core, lines if self.coherent or not self.tagged else strip(as_array(lines)))
            if self.dlanes is not None:
                self.dlanes.push(core, own[core] if core not in skip else lend(core))
        if phases is not None:
            self._phases(phases + before[None, :])
        self._drain()

    def _phases(self, ends: np.ndarray) -> None:
        """Phases that end in this chunk (each core's references before each barrier): the interleaver waits
        there, and the critical path grows by each phase's busiest core."""
        if self.itl is not None:
            self.itl.barriers(ends)
        for end in ends:
            self.critical += int((end - self.phase_start).max())
            self.phase_start = end

    @property
    def critical_path(self) -> int:
        """References of the busiest core, phase by phase, summed: the work that cannot overlap (with one
        phase, the busiest core's references)."""
        return self.critical + int((self.pushed - self.phase_start).max())

    def _feed_core(self, core: int, lines: np.ndarray | CorePart, shared: set[int] | None,
                   lead: Callable[[int], np.ndarray | None] | None,
                   runs: LeadRuns | None = None) -> np.ndarray | None:
        """Feed one core's accesses to its engine (through its replay, from its lead's distances
        while it follows one, or following the one-core trace's distances within its unbroken
        stretches: `runs`); their distances (int32) when wanted or known."""
        engine = self.private[core]
        if isinstance(engine, Suffix):
            dist = lead(len(lines)) if lead is not None else None
            if dist is not None:
                return engine.follow(as_array(lines), dist)
            engine = self.private[core] = engine.materialise()  # its trace stopped following
        if shared is not None and core not in shared and self.private_period[core]:
            return self._own_replay(core).feed(as_array(lines))
        if runs is not None:
            stretches = (lines.rows, lines.breaks) if isinstance(lines, CorePart) else runs.segments(core)
            return engine.feed_runs(lines, runs.trace, *stretches, tagged=self.tagged)
        lines = as_array(lines)
        if self.distances:
            return engine.feed_distances(lines, tagged=self.tagged, dtype=np.int32)
        engine.feed(lines, tagged=self.tagged)
        return None

    def feed_chunk(self, prep: PreparedChunk, phase_runs: np.ndarray | None = None) -> None:
        """Add one prepared chunk of the sequential trace (the task on its own; with coherence,
        prepared with prepare_chunk(stores=True)); phase_runs: its runs that begin a phase (PhaseMarks)."""
        parts, run_core = self.cmap.split_runs(prep, self.shift)
        runs = np.zeros(0, dtype=np.int64) if phase_runs is None else phase_runs
        self.feed(parts, phases=phase_counts(prep, run_core, runs, self.spec.cores))

    def watch(self, started: np.ndarray, before: np.ndarray) -> None:
        """Loop instances `started` begin in the next chunk, after before[i, c] of core c's accesses
        in it. Instances loop_period apart that start s accesses apart in core c's private trace
        make s that trace's period, where it repeats (PrivateReplay); when s is the same for
        every core, the shared trace may repeat with s rounds (Replay)."""
        k, n, p = self.spec.refs_per_turn, self.loop_period, self.spec.cores
        for inst, rows in zip(started.tolist(), before):
            at = self.pushed + rows
            self.starts_at[inst] = at
            self.starts_at.pop(inst - n - 1, None)
            prev = self.starts_at.get(inst - n)
            if prev is None:
                continue
            step = at - prev
            for c in range(p):
                if SHORTEST_PRIVATE_COPY <= step[c] <= self.longest_copy // p:
                    self.private_period[c] = int(step[c])
            if self.replay is not None and step[0] % k == 0 and (step == step[0]).all() \
                    and SHORTEST_COPY <= step[0] * p <= self.longest_copy:
                self.replay.arm(int(step[0]) * p)

    def _own_replay(self, core: int) -> PrivateReplay:
        """The replay of core's engine (made on first use), armed with its latest period."""
        r = self.own_replay[core]
        if r is None:
            r = self.own_replay[core] = PrivateReplay(self.private[core], self.coherent, self.tagged)
        r.arm(self.private_period[core])
        return r

    def _drain(self) -> None:
        """Feed the CRD whatever the Interleaver can lay out now (through the replay, if any)."""
        if self.itl is None:
            return
        for batch in self.itl.drain():
            if self.replay is not None:
                self.replay.feed(batch)
            else:
                self.feed_batch(batch)
        self.itl.settle()

    def feed_batch(self, batch: Batch) -> None:
        """Feed one Batch of the shared trace to the CRD engine (and find its coherence misses)."""
        if self.misses is None:
            self.shared.feed(batch.lines)
            return
        # only the stale accesses' distances are read, by their index in their core's piece
        stale = self.shared.feed_shared(batch.lines, batch.core_pattern)
        dists = [self.dlanes.take(core, len(piece)) for core, piece in batch.pieces]
        self.misses.add(stale, batch.pieces, dists, batch.core_pattern)

    def upgrade_counters(self) -> np.ndarray | None:
        """The CRD engine's upgrades per core (ReuseEngine.upgrades: stores to a line the core holds while another
        core holds it too), counted as the engine walks the sharer sets; None without coherence, on one core, or
        when the shared role is not a ReuseEngine (the set-class and group passes)."""
        return self.shared.upgrades if self.misses is not None and isinstance(self.shared, ReuseEngine) else None

    def finish(self) -> tuple[list[ReuseProfile], ReuseProfile]:
        """Flush the interleaver; every core's PRD and the CRD."""
        if self.itl is not None:
            self.itl.close_all()
            self._drain()
        if self.replay is not None:
            self.replay.flush()
        for r in self.own_replay:
            if r is not None:
                r.flush()
        self.private = [e.final() if isinstance(e, Suffix) else e for e in self.private]
        if self.misses is not None:
            for core, engine in enumerate(self.private):
                engine.reclassify(self.misses.moved[core], self.misses.moved_sum[core])
        prd = [e.histogram() for e in self.private]
        return prd, (self.shared.histogram() if self.shared is not None else prd[0])
