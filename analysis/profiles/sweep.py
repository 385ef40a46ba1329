"""Private-stack (PRD) and concurrent (CRD) reuse profiles for several core counts.

On-disk layout of a profile directory (written by `ProfileSet.save`, read by `load`):

* `profiles.json`  metadata: line_size, mode, interleave, seed, refs_per_turn, trace, cores,
  paper_chunk, trace_complete (False when the traced run crashed or was cut short),
  coherence (PRDs count write-invalidate coherence misses; absent = False), class_bits (the
  set-class widths with per-set-class profiles, analysis/profiles/set_classes.py; absent = none),
  groupings (the groupings with per-instance CRDs), writebacks (the core counts with write-back profiles
  of their whole shared trace).
* `summary.csv` / `summary.parquet`  one row per profile: kind ("prd"|"crd"|"grd": one instance's CRD
  of a shared level serving a group of cores, analysis/profiles/groups.py; "wbs"|"wbe": the starts and
  ends of write-back gaps, of a core count's whole shared trace or of one instance of a grouping,
  analysis/profiles/writebacks.py), class_bits (0: plain distances; b > 0: distances within the line's
  set class of b bits; absent = 0), grouping (grd, and wbs/wbe of one instance: each thread's instance,
  joined by dots, e.g. "0.0.1.1"; "" otherwise, as on a whole shared trace's wbs/wbe; absent = ""),
  cores (a grouped row: its number of threads), core (prd: the core; grd and grouped wbs/wbe: the
  instance; -1 for crd and ungrouped wbs/wbe), total accesses, cold (infinite-distance) accesses,
  coherence (those of the cold that are coherence misses; absent = 0).
* `bins.csv` / `bins.parquet`  the non-empty histogram bins: kind, class_bits, grouping, cores, core,
  lower (inclusive distance), upper (exclusive), count, dist_sum (sum of distances in the bin).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

import numpy as np

from analysis.profiles.groups import grouping_name, shared_profiles
from analysis.profiles.interleave import resolve_memory_budget
from analysis.profiles.jobs import job_groups, run_groups
from analysis.profiles.line_index import LineIndex
from analysis.profiles.private_traces import (InterleaveSpec, PreparedChunk, line_shift, loop_starts, prepare_chunk,
                                              resolve_mode, rows_before)
from analysis.profiles.profileset import ProfileSet, ReuseProfile
from analysis.profiles.replay import loop_period
from analysis.profiles.runs import LeadTrace
from analysis.profiles.set_classes import check_class_bits, class_profiles
from analysis.profiles.suffixes import Mirrors, Suffixes
from analysis.profiles.task import CoreCountTask, LeadRuns
from common.errors import InputError
from instrument.trace_types import TraceChunk, TraceInfo

__all__ = [
    "ChunkFactory",
    "ProfileSet",
    "ReuseProfile",
    "SweepSettings",
    "compute_profiles",
    "compute_profiles_from",
    "job_groups",
    "loop_period",
    "open_chunks",
    "profile_configs",
    "with_lead",
]

ChunkFactory = Callable[[], Iterable[TraceChunk]]


class SweepSettings(NamedTuple):
    """How a sweep models the traces (the profile options of `pptmc profile`): the private
    traces' mode, the shared traces' interleaving (strategy, seed, references per turn), the
    cache line size, paper mode's chunk, and write-invalidate coherence in the PRDs of p > 1."""

    mode: str = "auto"
    interleave: str = "rr"
    seed: int = 0
    refs_per_turn: int = 1
    line_size: int = 64
    paper_chunk: int = 0
    coherence: bool = True


def compute_profiles_from(info: TraceInfo, chunks: ChunkFactory, cores: list[int], mode: str = "auto",
                          interleave: str = "rr", seed: int = 0, refs_per_turn: int = 1,
                          line_size: int = 64, progress: bool = False, paper_chunk: int = 0,
                          coherence: bool = True, jobs: int = 1, class_bits: tuple[int, ...] = (),
                          groupings: tuple[tuple[int, ...], ...] = (), writebacks: bool = False,
                          class_crds: bool = True) -> ProfileSet:
    """Profiles for each core count from a re-streamable chunk source, in one pass over it
    (or one pass per worker process with jobs > 1; same profiles), the per-set-class profiles
    of each width in class_bits, and the per-instance CRDs of each grouping and (writebacks) each
    core count's write-back profiles (analysis/profiles/groups.py, writebacks.py); one more pass
    each, in a thread beside the plain one (the engines release the GIL). class_crds=False: the
    per-set-class profiles have PRDs only (no shared level reads class CRDs)."""
    _check_cores(cores)
    class_bits = check_class_bits(class_bits)
    resolved = resolve_mode(info, mode)
    ps = ProfileSet(line_size, resolved, interleave, seed, refs_per_turn, info.path, paper_chunk=paper_chunk,
                    trace_complete=info.complete, coherence=coherence)
    counts = sorted(set(int(c) for c in cores))
    settings = SweepSettings(resolved, interleave, seed, refs_per_turn, line_size, paper_chunk, coherence)
    bar = _progress(progress and bool(class_bits), info, len(counts) * len(class_bits), "set classes", 1)
    with ThreadPoolExecutor(max_workers=1) as pool:  # the class passes, beside the plain one
        classes = pool.submit(lambda: [class_profiles(info, chunks, counts, settings, b, bar, crds=class_crds)
                                       for b in class_bits])
        shared = pool.submit(shared_profiles, info, chunks, tuple(groupings), settings,
                             tuple(counts) if writebacks else ())
        results = profile_configs(info, chunks, counts, settings, progress, jobs=jobs)
        for b, res in zip(class_bits, classes.result()):
            ps.add_classes(b, counts, res, class_crds)
        for grouping, crds in shared.result().groups.items():
            ps.group_crd.update({(grouping_name(grouping), k): prof for k, prof in enumerate(crds)})
        ps.writebacks.update(shared.result().writebacks)
    if bar is not None:
        bar.close()
    for p, (prd, crd) in zip(counts, results):
        ps.prd.update({(p, c): prof for c, prof in enumerate(prd)})
        ps.crd[p] = crd
    return ps


def profile_configs(info: TraceInfo, chunks: ChunkFactory, counts: list[int], settings: SweepSettings,
                    progress: bool = False, memory_budget: int | None = None, spill_dir: str | None = None,
                    jobs: int = 1) -> list[tuple[list[ReuseProfile], ReuseProfile]]:
    """Every core's PRD and the CRD for each core count; each count is an independent task
    (call with one count per worker to distribute), sharing one trace pass when run together.
    jobs > 1: groups of counts (`job_groups`) run in that many processes, each reading the
    trace through `chunks` itself; the results are the same as with jobs = 1.

    What does not depend on the core count (line ids, offset masks, the runs on which cores
    are decided) is computed once per chunk and shared by every task, and so are private
    traces that coincide (see `Mirrors`; with coherence too, see CoreCountTask). With the
    one-core task among them, the private engines of the others follow its distances within
    their unbroken stretches of rows (`ReuseEngine.feed_runs`); without it they are fed every
    access (same profiles).
    settings.coherence: count write-invalidate coherence misses in the PRDs of p > 1 (ANALYSIS.md).
    """
    if jobs < 1:
        raise InputError(f"--jobs {jobs}: give a positive number of worker processes")
    memory_budget = resolve_memory_budget(memory_budget)  # waiting references, whole pass ($PPTMC_MEMORY_BUDGET)
    groups = job_groups(counts, jobs)
    if len(groups) > 1:
        return run_groups(groups, counts, lambda group, budget, bar: profile_configs(
            info, chunks, group, settings, bar, budget, spill_dir), memory_budget, progress)
    resolved = resolve_mode(info, settings.mode)
    shift = line_shift(settings.line_size)
    n_shared = sum(1 for p in counts if p > 1)  # only interleaving tasks buffer references
    tasks = [CoreCountTask(info, InterleaveSpec(p, settings.interleave, settings.seed, settings.refs_per_turn),
                           resolved, shift, settings.paper_chunk, memory_budget // max(n_shared, 1), spill_dir,
                           settings.coherence)
             for p in with_lead(info, counts, resolved, settings.line_size)]
    sweep = SweepPass(info, tasks, resolved, settings.line_size, memory_budget)
    bar = _progress(progress, info, len(counts))
    for ch in chunks():
        if not tasks:
            break
        sweep.take(ch)
        if bar is not None:
            bar.update(len(ch) * len(counts))
    if bar is not None:
        bar.close()
    sweep.mirrors.finish()
    return [task.finish() for task in tasks][:len(counts)]  # without the lead with_lead added


class SweepPass:
    """One pass over the trace for the tasks of several core counts: what does not depend on
    the core count is computed once per chunk, and the tasks share engines (Mirrors, Suffixes)."""

    def __init__(self, info: TraceInfo, tasks: list[CoreCountTask], mode: str, line_size: int,
                 memory_budget: int) -> None:
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
        self.index = LineIndex() if mode == "iteration" and any(t.spec.cores > 1 for t in tasks) else None
        # Private traces of p > 1 follow the one-core trace within their unbroken stretches of rows
        # (ReuseEngine.feed_runs).
        self.one = next((j for j, t in enumerate(tasks) if t.spec.cores == 1), None)
        self.follow_one = self.index is not None and self.one is not None and _may_follow_one(mode, line_size)
        self.rows_seen = 0  # accesses of the trace before this chunk
        self.by_cores = sorted(range(len(tasks)), key=lambda j: tasks[j].spec.cores)
        self.suffixes = Suffixes(tasks, self.by_cores, memory_budget // 8)
        self.watching = any(t.loop_period for t in tasks)
        self.seen = -1  # the highest loop instance started so far

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
        self._feed(prep, splits, lead)

    def _watch(self, prep: PreparedChunk, splits: list) -> None:
        """Tell the tasks that watch for repeating loops where this chunk's loop instances start."""
        marks, started = loop_starts(prep, self.seen)
        if len(started):
            self.seen = int(started[-1])
            for j, t in enumerate(self.tasks):
                if t.loop_period:  # before the chunk is fed: positions count what came before
                    t.watch(started, rows_before(prep, splits[j][1], marks, t.spec.cores))

    def _feed(self, prep: PreparedChunk, splits: list, lead: tuple[np.ndarray, np.ndarray] | None) -> None:
        """Feed every task its parts of the chunk, class leaders (fewest cores first, then lower
        cores) before their followers."""
        tasks, mirrors, suffixes = self.tasks, self.mirrors, self.suffixes
        leader_of = mirrors.leader_of
        follow = suffixes.update(prep, splits, mirrors)
        lenders = {leader[0] for follower, leader in leader_of.items() if tasks[follower[0]].coherent}
        lenders |= suffixes.lenders(follow, leader_of)
        for j, t in enumerate(tasks):  # a one-core task may lead the engines of coherent tasks' cores 0
            t.distances = t.coherent or j in lenders or (self.follow_one and j == self.one)
        for j in self.by_cores:
            def lend(c: int, j: int = j) -> np.ndarray:
                lj, lc = leader_of[(j, c)]
                return tasks[lj].last_distances[lc]

            tasks[j].feed(splits[j][0], skip=mirrors.following(j), lend=lend if self.tag else None,
                          shared=mirrors.members(j), follow=suffixes.providers(follow.get(j, {}), leader_of),
                          ids=self.index.count if self.index is not None else 0,
                          runs=_lead_runs(lead, tasks, self.one, j, prep, splits[j][1]))



_PAGE = 4096  # bytes: stack bounds are page aligned
_FOLLOWERS_FOR_A_LEAD = 3  # core counts p > 1 that make a one-core task worth adding (with_lead)


def with_lead(info: TraceInfo, counts: list[int], mode: str, line_size: int) -> list[int]:
    """The core counts to run: `counts`, and 1 after them when it is missing and at least
    _FOLLOWERS_FOR_A_LEAD counts p > 1 would follow it (ReuseEngine.feed_runs); its profiles
    are dropped.

    Why: the one-core engine costs about one pass over the trace; each task that follows it
    saves part of one. Measured (CPU s, MEDIUM traces, {2, 4, 8, 16} without -> with the lead):
    gramschmidt 4.28 -> 3.63, 2mm 4.93 -> 4.69, covariance 2.76 -> 2.33, lu 4.08 -> 4.16 (its
    one-iteration stretches save little). With two followers it does not pay on every trace:
    {8, 16} gramschmidt 2.57 -> 2.35, lu 2.47 -> 2.68. Not when loop instances repeat
    (loop_period): those engines replay their copies instead (jacobi-2d)."""
    followers = sum(1 for p in counts if p > 1)
    if 1 in counts or not _may_follow_one(mode, line_size) or followers < _FOLLOWERS_FOR_A_LEAD:
        return list(counts)
    return list(counts) if loop_period(info) else [*counts, 1]


def _may_follow_one(mode: str, line_size: int) -> bool:
    """Whether private traces can follow the one-core trace: their line ids correspond one to
    one to its ids within a stretch (iteration mode offsets only stack lines, and a line no
    longer than a page is all stack or none of it)."""
    return mode == "iteration" and line_size <= _PAGE


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



def _progress(enabled: bool, info: TraceInfo, n_configs: int, desc: str = "profiling", position: int = 0):
    """A tqdm bar on stderr over the mimicked references (about n_accesses per core count), or None."""
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(desc=desc, total=info.n_accesses * n_configs or None, unit="ref", unit_scale=True,
                leave=False, position=position)


def _check_cores(cores: list[int]) -> None:
    if not cores or any(int(c) < 1 for c in cores):
        raise InputError(f"--cores {cores}: give one or more positive core counts, e.g. 1,2,4,8")


def compute_profiles(trace_path: str | Path, cores: list[int], mode: str = "auto", interleave: str = "rr",
                     seed: int = 0, refs_per_turn: int = 1, line_size: int = 64,
                     progress: bool = False, max_rows: int = 1 << 20, paper_chunk: int = 0,
                     coherence: bool = True, jobs: int = 1, class_bits: tuple[int, ...] = (),
                     groupings: tuple[tuple[int, ...], ...] = (), writebacks: bool = False,
                     class_crds: bool = True) -> ProfileSet:
    """Open a trace file and compute its ProfileSet (jobs: worker processes, see profile_configs)."""
    info, factory = open_chunks(trace_path, max_rows)
    return compute_profiles_from(info, factory, cores, mode, interleave, seed, refs_per_turn, line_size, progress,
                                 paper_chunk, coherence, jobs, class_bits, groupings, writebacks, class_crds)


def open_chunks(trace_path: str | Path, max_rows: int = 1 << 20) -> tuple[TraceInfo, ChunkFactory]:
    """TraceInfo and a factory that opens a fresh chunk stream each call."""
    from instrument import open_trace

    reader = open_trace(trace_path)

    def factory() -> Iterator[TraceChunk]:
        return open_trace(trace_path).chunks(max_rows)

    return reader.info, factory
