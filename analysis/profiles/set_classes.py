"""Per-set-class reuse profiles: distances that count only the lines that can share a cache set.

A line's set class, at `bits` bits, is its id's low `bits` bits (its line index within a page when
bits = log2(page / line)). Two lines of different classes never share a set of a cache whose set
index holds those bits, so for such a cache only the distinct lines of the access's own class between
two accesses to a line can evict it. For a cache with 2^bits sets that index is exact: an access hits
an A-way LRU set iff its class distance is below A (analysis/hitrates/rates.py reads these profiles).

The distance of an access within its class is its plain distance in the trace filtered to that class,
so a ClassEngine is one ReuseEngine per class, fed each class's accesses in order; coherence needs no
change (a line's invalidations concern that line only, and the line stays in its class). The class
profiles of a core count are made by the same CoreCountTask as the plain ones, with ClassEngines, in
a pass of their own (sweep_pass.SweepPass with plain=False). Private traces that coincide share one
ClassEngine (Mirrors: equal accesses give equal class stacks, and relabelling by a per-core offset keeps
every line in its class); the plain sweep's other sharing (dense ids, following the one-core trace,
Suffixes) compares distances with the lines of the whole trace and is left out. Private engines replay
the stretches of their traces that repeat (a class stack repeats whenever the whole stack does). Without
class CRDs (no shared level reads them), the shared role is a `StaleOnly`: the coherence directory's
walk, for the class PRDs' coherence misses.
"""
from __future__ import annotations

from functools import partial

import numba
import numpy as np

from analysis.profiles.class_partition import NO_PATTERN, Partition, PartitionBuffers, partition
from analysis.profiles.coherence import Directory
from analysis.profiles.interleave import resolve_memory_budget
from analysis.profiles.private_traces import InterleaveSpec, line_shift, resolve_mode
from analysis.profiles.profileset import ReuseProfile
from analysis.profiles.reuse import N_BINS, ReuseEngine, profile_from_counters
from analysis.profiles.sweep_pass import SweepPass
from analysis.profiles.handouts import ChunkCosts, chunk_costs
from analysis.profiles.task import CoreCountTask
from common.errors import InputError
from instrument.trace_types import TraceInfo

MAX_CLASS_BITS = 10  # 1024 engines per trace: a 1024-set cache with every set bit known (2 MiB pages)


def check_class_bits(bits: list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """The distinct class widths asked for, sorted; an InputError naming the limit otherwise."""
    out = tuple(sorted(set(int(b) for b in bits)))
    bad = [b for b in out if not 1 <= b <= MAX_CLASS_BITS]
    if bad:
        raise InputError(f"--set-bits {bad[0]}: give set-class widths from 1 to {MAX_CLASS_BITS} bits "
                         f"(6 = the 64 line slots of a 4 KiB page)")
    return out


@numba.njit(cache=True, nogil=True, _nrt=False)
def _unsort(by_class, order, out):
    """out[order[k]] = by_class[k]: distances back in the accesses' own order (numpy's fancy
    assignment checks every index and casts through a temporary)."""
    for k in range(order.shape[0]):
        out[order[k]] = by_class[k]


class ClassEngine:
    """ReuseEngine's interface (feed, feed_distances, feed_shared, reclassify, histogram) over one
    engine per set class, made when the class is first seen; distances are within the class.
    buffers: the partition's arrays, shared by the engines of one pass (None: its own).
    initial_lines: each class engine's first table size (class_lines: grown from a few lines,
    thousands of small engines spent more time growing and tallying than counting)."""

    def __init__(self, bits: int, sharer_cores: int = 0, buffers: PartitionBuffers | None = None,
                 initial_lines: int = 16) -> None:
        self.bits, self.sharer_cores, self.initial_lines = bits, sharer_cores, initial_lines
        self.mask = np.uint64((1 << bits) - 1)
        self.engines: dict[int, ReuseEngine] = {}
        self.buffers = buffers if buffers is not None else PartitionBuffers()
        self.moved = np.zeros(N_BINS, dtype=np.int64)      # coherence misses found after the fact (reclassify)
        self.moved_sum = np.zeros(N_BINS, dtype=np.int64)
        # every class engine counts into these, and a replay (add_tally) adds its repeated copies' counts
        self.counters = np.zeros(N_BINS + 1, dtype=np.int64), np.zeros(N_BINS + 1, dtype=np.int64)

    @property
    def distinct_lines(self) -> int:
        return sum(e.distinct_lines for e in self.engines.values())

    def copy(self) -> ClassEngine:
        """ReuseEngine.copy: an independent ClassEngine in the same state (its engines count into its own
        counters; the partition buffers stay shared, as engines of one pass are fed one after another)."""
        twin = ClassEngine(self.bits, self.sharer_cores, self.buffers, self.initial_lines)
        twin.moved, twin.moved_sum = self.moved.copy(), self.moved_sum.copy()
        twin.counters = self.counters[0].copy(), self.counters[1].copy()
        twin.engines = {c: e.copy(twin.counters) for c, e in self.engines.items()}
        return twin

    def relabel(self, at_least: int, delta: int) -> None:
        """ReuseEngine.relabel, class by class: a delta that is a multiple of 2^bits keeps every line in
        its class (the per-core offsets are multiples of 2^41)."""
        if delta % (1 << self.bits):
            raise ValueError(f"relabel: a delta of {delta} would move lines between {self.bits}-bit classes")
        for engine in self.engines.values():
            engine.relabel(at_least, delta)

    def _partition(self, lines: np.ndarray, pattern: np.ndarray = NO_PATTERN,
                   order: bool = True) -> tuple[Partition, list[int]]:
        """The accesses ordered by class (with where each came from, when `order`), and the classes
        present, each with its engine (made now for classes first seen); the arrays are the buffers',
        valid until the next call."""
        part, present = partition(self.buffers, lines, self.mask, pattern, order)
        new = [c for c in present if c not in self.engines]
        if new:
            self.engines.update(zip(new, ReuseEngine.many(len(new), self.initial_lines, self.sharer_cores,
                                                          self.counters)))
        return part, present

    def feed(self, lines: np.ndarray, stale: np.ndarray | None = None, tagged: bool = False) -> None:
        """ReuseEngine.feed, class by class."""
        part, present = self._partition(lines, order=stale is not None)
        flags = None if stale is None else np.asarray(stale)[part.order]
        for c in present:
            lo, hi = part.bounds[c], part.bounds[c + 1]
            self.engines[c].feed(part.lines[lo:hi], None if flags is None else flags[lo:hi], tagged)

    def feed_distances(self, lines: np.ndarray, stale: np.ndarray | None = None, tagged: bool = False,
                       dtype: type = np.int64) -> np.ndarray:
        """ReuseEngine.feed_distances: each access's distance within its class, in the given order."""
        part, present = self._partition(lines)
        flags = None if stale is None else np.asarray(stale)[part.order]
        by_class = self.buffers.distances[:len(part.lines)]
        for c in present:
            lo, hi = part.bounds[c], part.bounds[c + 1]
            self.engines[c].feed_distances(part.lines[lo:hi], None if flags is None else flags[lo:hi], tagged,
                                           np.int32, by_class[lo:hi])
        out = np.empty(len(part.lines), dtype=dtype)
        _unsort(by_class, part.order, out)
        return out

    def feed_shared(self, lines: np.ndarray, core_pattern: np.ndarray) -> np.ndarray:
        """ReuseEngine.feed_shared: the indices (ascending) of the stale accesses among `lines`."""
        part, present = self._partition(lines, np.ascontiguousarray(core_pattern, dtype=np.int64))
        stale = []
        for c in present:
            lo, hi = part.bounds[c], part.bounds[c + 1]
            stale.append(part.order[lo + self.engines[c].feed_shared(part.lines[lo:hi], part.cores[lo:hi])])
        return np.sort(np.concatenate(stale)).astype(np.int64) if stale else np.zeros(0, dtype=np.int64)

    def reclassify(self, moved: np.ndarray, moved_sum: np.ndarray) -> None:
        """ReuseEngine.reclassify, over the sum of the classes' histograms."""
        self.moved += moved
        self.moved_sum += moved_sum

    def tally(self) -> tuple[np.ndarray, np.ndarray]:
        """ReuseEngine.tally over every class (what replay.PrivateReplay compares and repeats)."""
        return self.counters[0].copy(), self.counters[1].copy()

    def add_tally(self, counts: np.ndarray, sums: np.ndarray) -> None:
        """ReuseEngine.add_tally: a replayed copy's counts (its classes' stacks repeat as the whole one does)."""
        self.counters[0][:] += counts
        self.counters[1][:] += sums

    def histogram(self) -> ReuseProfile:
        """The sum of every class's profile, with the reclassified coherence misses counted cold."""
        hist, sums = self.tally()
        hist[:N_BINS] -= self.moved
        sums[:N_BINS] -= self.moved_sum
        moved = int(self.moved.sum())
        hist[N_BINS] += moved
        coherence = sum(e.coherence_misses for e in self.engines.values()) + moved
        return profile_from_counters(hist, sums, coherence)


class StaleOnly:
    """The shared-engine role when no class CRD is wanted: only the stale accesses (coherence.Directory's
    walk over the shared trace), which the class PRDs' coherence misses need; no distances."""

    def __init__(self, sharer_cores: int = 0) -> None:
        self.directory = Directory(max(sharer_cores, 1))

    def feed(self, lines: np.ndarray, stale: np.ndarray | None = None, tagged: bool = False) -> None:
        return None  # no coherence: nothing to find

    def feed_shared(self, lines: np.ndarray, core_pattern: np.ndarray) -> np.ndarray:
        """ReuseEngine.feed_shared's stale accesses (ascending indices), without distances."""
        return self.directory.stale_of(lines, core_pattern)

    def histogram(self) -> ReuseProfile:
        return ReuseProfile.empty()


def class_lines(info: TraceInfo, line_size: int, bits: int, cores: int) -> int:
    """A class engine's first table size: the trace's distinct lines (its footer's estimate) shared
    evenly among the classes and the cores, twice that for p > 1 cores (read-shared data puts more than
    1/p of the lines in each core's trace); 16 without an estimate, 2^16 at most. Over a task's classes
    and cores that adds up to at most twice the lines one plain engine holds (check_memory counts a class
    engine's lines per core)."""
    estimate = info.distinct_lines_estimate
    if not estimate:
        return 16
    lines = estimate * 64 // max(line_size, 64) * min(2, cores) // ((1 << bits) * cores)
    return int(min(max(lines, 16), 1 << 16))


def _class_engine(bits: int, crds: bool, buffers: PartitionBuffers, lines: tuple[int, int],
                  sharer_cores: int | None = None):
    """CoreCountTask's engine factory: ClassEngines, and in the shared role a StaleOnly unless CRDs are
    wanted; lines: a private and a shared class engine's first table size (class_lines)."""
    if sharer_cores is None:
        return ClassEngine(bits, buffers=buffers, initial_lines=lines[0])
    return ClassEngine(bits, sharer_cores, buffers, lines[1]) if crds else StaleOnly(sharer_cores)


def class_profiles(info: TraceInfo, chunks, counts: list[int], settings, bits: int, progress=None,
                   memory_budget: int | None = None, spill_dir: str | None = None, crds: bool = True,
                   costs: ChunkCosts | None = None) -> list[tuple[list[ReuseProfile], ReuseProfile]]:
    """Every core's class PRD and the class CRD for each core count (sweep.profile_configs' result
    shape), from one pass over the trace; `settings` is the plain sweep's SweepSettings, so both
    model the same private and shared traces. progress: a tqdm bar to advance, or None. crds=False:
    no class CRDs for p > 1 (an empty profile in their place), which saves the shared traces' engines. costs: the
    dealt loops' chunk costs when the caller has them, else read here."""
    mode = resolve_mode(info, settings.mode)
    shift = line_shift(settings.line_size)
    budget = resolve_memory_budget(memory_budget) // max(sum(1 for p in counts if p > 1), 1)
    buffers = PartitionBuffers()  # the tasks' engines are fed one after another
    costs = costs if costs is not None else chunk_costs(info, chunks, mode)
    tasks = [CoreCountTask(info, InterleaveSpec(p, settings.interleave, settings.seed, settings.refs_per_turn),
                           mode, shift, settings.paper_chunk, budget, spill_dir, settings.coherence,
                           engine=partial(_class_engine, bits, crds, buffers, (
                               class_lines(info, settings.line_size, bits, p),
                               class_lines(info, settings.line_size, bits, 1))), costs=costs) for p in counts]
    for t in tasks:  # the shared traces are walked whole
        t.replay = None
    sweep = SweepPass(info, tasks, mode, settings.line_size, budget, plain=False, barriers=settings.barriers)
    for ch in chunks():
        sweep.take(ch)
        if progress is not None:
            progress.update(len(ch) * len(counts))
    sweep.mirrors.finish()
    return [t.finish() for t in tasks]

