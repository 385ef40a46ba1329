"""Concurrent reuse profiles per cache instance: a shared level whose instances each serve a group of cores.

An AMD CCX's L3 serves its 4 cores, a socket's L3 its socket's cores. With p threads placed on cores
(machines.model.thread_cores), instance i of such a level sees only the interleaved accesses of the
threads placed on it, so its CRD is the shared trace filtered to those threads. A *grouping* names the
instance of each thread (a tuple of p ints, occupied instances numbered 0, 1, ... in thread order).

Coherence between instances is write-invalidate, as between private caches: a store by a thread of
instance j leaves the line valid only in j; another instance's next access to it, if the line is still
in its stack, is a coherence miss (infinite distance). `coherence.Directory` walks the whole shared
trace with instance ids as its "cores" and gives each access's stale flag; each instance's engine
takes its accesses with their flags (ReuseEngine.feed's `stale`).

The group CRDs are made in a pass of their own over the same mimicked traces as the plain sweep
(CoreCountTask, same interleaving): its private engines are `_Idle` (nothing is read from them) and its
shared engine is a `GroupEngine`, fed the shared trace's Batches as the CRD engine would be. The same
pass gives each core count's write-back profiles (writebacks.py) of the whole shared trace (for one
core, of the sequential trace, through its private engine) and, for each grouping of those core counts,
each instance's (writebacks.InstanceWritebacks: its threads' accesses, a store by another instance
removing the line, a dirty copy moving cache to cache), keyed (grouping name, instance) beside the whole
trace's.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np

from analysis.profiles.coherence import Directory, strip
from analysis.profiles.interleave import pattern_cores, resolve_memory_budget
from analysis.profiles.barriers import PhaseMarks
from analysis.profiles.private_traces import InterleaveSpec, line_shift, prepare_chunk, resolve_mode
from analysis.profiles.profileset import ReuseProfile
from analysis.profiles.reuse import ReuseEngine
from analysis.profiles.handouts import ChunkCosts, chunk_costs
from analysis.profiles.task import CoreCountTask
from analysis.profiles.writebacks import InstanceWritebacks, stream_tracker
from common.errors import InputError
from instrument.trace_types import TraceInfo
from machines.model import Machine, thread_cores

Grouping = tuple[int, ...]


def grouping_of(machine: Machine, level_index: int, threads: int, placement: str) -> Grouping:
    """The instance (renumbered 0, 1, ... in thread order) of each thread at one level of `machine`."""
    level = machine.caches[level_index]
    per = level.instance_cores(machine.cores)
    if threads > machine.cores and per < machine.cores:
        raise InputError(f"machine {machine.name}: {threads} threads placed {placement} on its {machine.cores} cores "
                         f"(its `cores` field): which instance of {level.name} (one per {per} cores) a thread "
                         f"shares depends on how the OS would stack them; give --cores up to {machine.cores}")
    raw = [core // per for core in thread_cores(threads, machine.cores, placement)]
    order = {inst: k for k, inst in enumerate(dict.fromkeys(raw))}
    return tuple(order[inst] for inst in raw)


def groupings_for(machines: list[Machine], cores: list[int], placement: str) -> tuple[Grouping, ...]:
    """Every grouping with more than one occupied instance that these machines' shared levels need."""
    found = {grouping_of(m, i, p, placement) for m in machines for i, lv in enumerate(m.caches)
             if lv.shared for p in cores}
    return tuple(sorted(g for g in found if max(g) > 0))


def grouping_name(grouping: Grouping) -> str:
    """The grouping as written in profile files: instance ids joined by dots, e.g. "0.0.1.1"."""
    return ".".join(map(str, grouping))


class GroupCrds:
    """The CRD of every instance of one grouping, fed the shared trace's batches in order (and, with
    `writebacks`, every instance's write-back profiles)."""

    def __init__(self, grouping: Grouping, coherent: bool, writebacks: bool = False, writeback_bits: int = 0) -> None:
        self.instance = np.asarray(grouping, dtype=np.int64)  # per thread
        n = int(self.instance.max()) + 1
        self.engines = [ReuseEngine() for _ in range(n)]
        self.directory = Directory(n) if coherent else None
        self.writebacks = InstanceWritebacks(n, coherent, writeback_bits) if writebacks else None

    def feed(self, lines: np.ndarray, threads: np.ndarray) -> None:
        """Accesses of the shared trace (tagged with stores when coherent) and each one's thread."""
        inst = self.instance[threads]
        if self.directory is not None:
            plain, stale = self.directory.walk(lines, inst)
        else:
            plain, stale = strip(np.asarray(lines, dtype=np.uint64)), None
        for i, engine in enumerate(self.engines):
            mine = inst == i
            engine.feed(plain[mine], None if stale is None else stale[mine])
        if self.writebacks is not None:
            self.writebacks.feed(lines, inst)

    def profiles(self) -> list[ReuseProfile]:
        return [e.histogram() for e in self.engines]


class GroupEngine:
    """The shared-engine role of a CoreCountTask (feed, feed_shared): every grouping's GroupCrds, and
    the write-back profiles (writebacks.py) of the whole shared trace and of each instance when asked."""

    def __init__(self, groupings: list[Grouping], coherent: bool, writebacks: bool = False,
                 writeback_bits: int = 0) -> None:
        self.groups = {g: GroupCrds(g, coherent, writebacks, writeback_bits) for g in groupings}
        self.tracker = stream_tracker(writeback_bits) if writebacks else None

    def feed(self, lines: np.ndarray, stale: np.ndarray | None = None, tagged: bool = False) -> None:
        raise InputError("group CRDs need each access's thread: feed them through feed_shared")

    def feed_shared(self, lines: np.ndarray, core_pattern: np.ndarray) -> np.ndarray:
        """Feed one Batch; no access is reported stale (the idle private engines keep no distances)."""
        if self.groups:
            threads = pattern_cores(core_pattern, len(lines))
            for g in self.groups.values():
                g.feed(lines, threads)
        if self.tracker is not None:
            self.tracker.feed(lines)
        return np.zeros(0, dtype=np.int64)

    def histogram(self) -> ReuseProfile:
        return ReuseProfile.empty()


class _Idle:
    """A private engine whose profiles are not wanted: it takes accesses and keeps nothing."""

    distinct_lines = 0

    def feed(self, lines: np.ndarray, stale: np.ndarray | None = None, tagged: bool = False) -> None:
        return None

    def feed_distances(self, lines: np.ndarray, stale: np.ndarray | None = None, tagged: bool = False,
                       dtype: type = np.int64) -> np.ndarray:
        return np.full(len(lines), -1, dtype=dtype)

    def reclassify(self, moved: np.ndarray, moved_sum: np.ndarray) -> None:
        return None

    def histogram(self) -> ReuseProfile:
        return ReuseProfile.empty()


class _OneCore(_Idle):
    """The private engine of a one-core task whose write-backs are wanted (its trace is the shared one)."""

    def __init__(self, writeback_bits: int = 0) -> None:
        self.tracker = stream_tracker(writeback_bits)

    def feed(self, lines: np.ndarray, stale: np.ndarray | None = None, tagged: bool = False) -> None:
        self.tracker.feed(lines)


def _engine_for(groupings: list[Grouping], coherent: bool, writebacks: bool, one_core: bool, writeback_bits: int,
                sharer_cores: int | None = None):
    """CoreCountTask's engine factory: idle private engines (a write-back tracker for a one-core task's),
    a GroupEngine in the shared role."""
    if sharer_cores is None:
        return _OneCore(writeback_bits) if writebacks and one_core else _Idle()
    return GroupEngine(groupings, coherent, writebacks, writeback_bits)


class SharedProfiles(NamedTuple):
    """What a shared-trace pass gives: per-instance CRDs of each grouping, and (starts, ends) write-back
    profiles of each core count's whole shared trace (key: cores) and of each instance of its groupings
    (key: (grouping name, instance); ProfileSet.writebacks)."""

    groups: dict[Grouping, list[ReuseProfile]]
    writebacks: dict[int | tuple[str, int], tuple[ReuseProfile, ReuseProfile]]


def shared_profiles(info: TraceInfo, chunks, groupings: tuple[Grouping, ...], settings,
                    writeback_cores: tuple[int, ...] = (), memory_budget: int | None = None,
                    spill_dir: str | None = None, costs: ChunkCosts | None = None,
                    writeback_bits: int = 0) -> SharedProfiles:
    """Every grouping's per-instance CRDs and the write-back profiles of the core counts in
    writeback_cores (their whole shared traces' and their groupings' instances'), in one pass over the
    trace (settings: the plain sweep's SweepSettings, so the shared traces are the same; costs: the dealt
    loops' chunk costs when the caller has them, else read here; writeback_bits: the write-back profiles'
    set-class width, writebacks.ClassWritebacks)."""
    counts = sorted({len(g) for g in groupings} | set(writeback_cores))
    if not counts:
        return SharedProfiles({}, {})
    mode, shift = resolve_mode(info, settings.mode), line_shift(settings.line_size)
    budget = resolve_memory_budget(memory_budget) // len(counts)
    tasks, costs = [], costs if costs is not None else chunk_costs(info, chunks, mode)
    for p in counts:
        mine = [g for g in groupings if len(g) == p]
        task = CoreCountTask(info, InterleaveSpec(p, settings.interleave, settings.seed, settings.refs_per_turn),
                             mode, shift, settings.paper_chunk, budget, spill_dir, True,
                             engine=partial(_engine_for, mine, settings.coherence, p in writeback_cores, p == 1,
                                            writeback_bits),
                             costs=costs)
        task.replay, task.tagged = None, True  # every batch is fed, with store tags
        tasks.append(task)
    phases = PhaseMarks(info, mode, settings.barriers)
    for ch in chunks():
        tasks[0].cmap.check(ch)
        prep = prepare_chunk(ch, mode, tasks[0].cmap.shared_block, shift, info.path, stores=True)
        starts = phases.runs(prep.starts, prep.key0)
        for t in tasks:
            t.feed_chunk(prep, starts)
    out = SharedProfiles({}, {})
    for p, t in zip(counts, tasks):
        t.finish()
        if t.shared is not None:
            out.groups.update({g: crds.profiles() for g, crds in t.shared.groups.items()})
            out.writebacks.update({(grouping_name(g), k): pair for g, crds in t.shared.groups.items()
                                   if crds.writebacks is not None
                                   for k, pair in enumerate(crds.writebacks.profiles())})
        tracker = t.shared.tracker if t.shared is not None else getattr(t.private[0], "tracker", None)
        if tracker is not None:
            out.writebacks[p] = tracker.profiles()
    return out
