"""Private-stack (PRD) and concurrent (CRD) reuse profiles for several core counts.

On-disk layout of a profile directory (written by `ProfileSet.save`, read by `load`):

* `profiles.json`  metadata: line_size, mode, interleave, seed, refs_per_turn, trace, cores,
  paper_chunk, trace_complete (False when the traced run crashed or was cut short),
  coherence (PRDs count write-invalidate coherence misses; absent = False), class_bits (the
  set-class widths with per-set-class profiles, analysis/profiles/set_classes.py; absent = none),
  groupings (the groupings with per-instance CRDs), writebacks (the core counts with write-back profiles
  of their whole shared trace), writeback_bits (the set-class width of every write-back profile, which
  the wbs/wbe rows' class_bits repeat; absent = 0).
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
  lower (inclusive distance), upper (exclusive), count, dist_sum (sum of distances in the bin),
  turnover_sum, position_sum, moving_count (wbs/wbe of one instance: the sums of the bin's gaps'
  turnovers and of turnover x removal position, and its gaps with turnover, ANALYSIS.md section 14;
  0 elsewhere; absent = 0).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

from analysis.profiles.barriers import PhaseMarks
from analysis.profiles.groups import grouping_name, shared_profiles
from analysis.profiles.interleave import resolve_memory_budget
from analysis.profiles.jobs import job_groups, run_groups
from analysis.profiles.private_traces import InterleaveSpec, line_shift, resolve_mode
from analysis.profiles.profileset import ProfileSet, ReuseProfile
from analysis.profiles.replay import loop_period
from analysis.profiles.set_classes import check_class_bits, class_profiles
from analysis.profiles.sweep_pass import SweepPass, may_follow_one
from analysis.profiles.handouts import ChunkCosts, chunk_costs
from analysis.profiles.task import CoreCountTask
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
    cache line size, paper mode's chunk, write-invalidate coherence in the PRDs of p > 1, and whether
    the shared traces keep the trace's barriers (analysis/profiles/barriers.py; False: the paper's
    Algorithm 2, as the sampled profiles interleave)."""

    mode: str = "auto"
    interleave: str = "rr"
    seed: int = 0
    refs_per_turn: int = 1
    line_size: int = 64
    paper_chunk: int = 0
    coherence: bool = True
    barriers: bool = True


class CountProfiles(NamedTuple):
    """What a sweep gives for one core count: every core's PRD, the CRD, the references on the critical
    path (CoreCountTask.critical_path) and each core's upgrades (CoreCountTask.upgrade_counters; empty
    without coherence or on one core)."""

    prd: list[ReuseProfile]
    crd: ReuseProfile
    critical_path: int
    upgrades: tuple[int, ...] = ()


def compute_profiles_from(info: TraceInfo, chunks: ChunkFactory, cores: list[int], mode: str = "auto",
                          interleave: str = "rr", seed: int = 0, refs_per_turn: int = 1,
                          line_size: int = 64, progress: bool = False, paper_chunk: int = 0,
                          coherence: bool = True, jobs: int = 1, class_bits: tuple[int, ...] = (),
                          groupings: tuple[tuple[int, ...], ...] = (), writebacks: bool = False,
                          class_crds: bool = True, barriers: bool = True, writeback_bits: int = 0) -> ProfileSet:
    """Profiles for each core count from a re-streamable chunk source, in one pass over it
    (or one pass per worker process with jobs > 1; same profiles), the per-set-class profiles
    of each width in class_bits, and the per-instance CRDs of each grouping and (writebacks) each
    core count's write-back profiles (analysis/profiles/groups.py, writebacks.py); one more pass
    each, in a thread beside the plain one (the engines release the GIL). class_crds=False: the
    per-set-class profiles have PRDs only (no shared level reads class CRDs); writeback_bits: the write-back
    profiles' set-class width (writebacks.ClassWritebacks)."""
    _check_cores(cores)
    class_bits = check_class_bits(class_bits)
    resolved = resolve_mode(info, mode)
    ps = ProfileSet(line_size, resolved, interleave, seed, refs_per_turn, info.path, paper_chunk=paper_chunk,
                    trace_complete=info.complete, coherence=coherence,
                    barriers=barriers and PhaseMarks(info, resolved).any,
                    writeback_bits=writeback_bits if writebacks else 0)
    counts = sorted(set(int(c) for c in cores))
    settings = SweepSettings(resolved, interleave, seed, refs_per_turn, line_size, paper_chunk, coherence, barriers)
    bar = _progress(progress and bool(class_bits), info, len(counts) * len(class_bits), "set classes", 1)
    costs = chunk_costs(info, chunks, resolved)  # one pre-pass for every pass below (handouts)
    with ThreadPoolExecutor(max_workers=1) as pool:  # the class passes, beside the plain one
        classes = pool.submit(lambda: [class_profiles(info, chunks, counts, settings, b, bar, crds=class_crds,
                                                      costs=costs) for b in class_bits])
        shared = pool.submit(shared_profiles, info, chunks, tuple(groupings), settings,
                             tuple(counts) if writebacks else (), costs=costs, writeback_bits=ps.writeback_bits)
        results = profile_configs(info, chunks, counts, settings, progress, jobs=jobs, costs=costs)
        for b, res in zip(class_bits, classes.result()):
            ps.add_classes(b, counts, res, class_crds)
        for grouping, crds in shared.result().groups.items():
            ps.group_crd.update({(grouping_name(grouping), k): prof for k, prof in enumerate(crds)})
        ps.writebacks.update(shared.result().writebacks)
    if bar is not None:
        bar.close()
    for p, (prd, crd, critical, upgrades) in zip(counts, results):
        ps.prd.update({(p, c): prof for c, prof in enumerate(prd)})
        ps.crd[p] = crd
        ps.critical_path[p] = critical
        if upgrades:
            ps.upgrades[p] = list(upgrades)
    return ps


def profile_configs(info: TraceInfo, chunks: ChunkFactory, counts: list[int], settings: SweepSettings,
                    progress: bool = False, memory_budget: int | None = None, spill_dir: str | None = None,
                    jobs: int = 1, costs: ChunkCosts | None = None) -> list[CountProfiles]:
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
    costs: the dealt loops' chunk costs (handouts.chunk_costs), when the caller has them; else read here.
    """
    if jobs < 1:
        raise InputError(f"--jobs {jobs}: give a positive number of worker processes")
    memory_budget = resolve_memory_budget(memory_budget)  # waiting references, whole pass ($PPTMC_MEMORY_BUDGET)
    resolved = resolve_mode(info, settings.mode)
    if costs is None:
        costs = chunk_costs(info, chunks, resolved)  # who steals which dynamic chunk (handouts)
    groups = job_groups(counts, jobs)
    if len(groups) > 1:
        return run_groups(groups, counts, lambda group, budget, bar: profile_configs(
            info, chunks, group, settings, bar, budget, spill_dir, costs=costs), memory_budget, progress)
    shift = line_shift(settings.line_size)
    n_shared = sum(1 for p in counts if p > 1)  # only interleaving tasks buffer references
    tasks = [CoreCountTask(info, InterleaveSpec(p, settings.interleave, settings.seed, settings.refs_per_turn),
                           resolved, shift, settings.paper_chunk, memory_budget // max(n_shared, 1), spill_dir,
                           settings.coherence, costs=costs)
             for p in with_lead(info, counts, resolved, settings.line_size)]
    sweep = SweepPass(info, tasks, resolved, settings.line_size, memory_budget, barriers=settings.barriers)
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
    return [CountProfiles(*task.finish(), task.critical_path, _upgrades(task))
            for task in tasks][:len(counts)]  # without the lead


def _upgrades(task: CoreCountTask) -> tuple[int, ...]:
    """A finished task's upgrades per core (CountProfiles.upgrades)."""
    counts = task.upgrade_counters()
    return () if counts is None else tuple(int(n) for n in counts)


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
    if 1 in counts or not may_follow_one(mode, line_size) or followers < _FOLLOWERS_FOR_A_LEAD:
        return list(counts)
    return list(counts) if loop_period(info) else [*counts, 1]


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
                     class_crds: bool = True, barriers: bool = True, writeback_bits: int = 0) -> ProfileSet:
    """Open a trace file and compute its ProfileSet (jobs: worker processes, see profile_configs)."""
    info, factory = open_chunks(trace_path, max_rows)
    return compute_profiles_from(info, factory, cores, mode, interleave, seed, refs_per_turn, line_size, progress,
                                 paper_chunk, coherence, jobs, class_bits, groupings, writebacks, class_crds,
                                 barriers, writeback_bits)


def open_chunks(trace_path: str | Path, max_rows: int = 1 << 20) -> tuple[TraceInfo, ChunkFactory]:
    """TraceInfo and a factory that opens a fresh chunk stream each call."""
    from instrument import open_trace

    reader = open_trace(trace_path)

    def factory() -> Iterator[TraceChunk]:
        return open_trace(trace_path).chunks(max_rows)

    return reader.info, factory
