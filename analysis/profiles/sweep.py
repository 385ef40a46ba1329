"""Private-stack (PRD) and concurrent (CRD) reuse profiles for several core counts.

On-disk layout of a profile directory (written by `ProfileSet.save`, read by `load`):

* `profiles.json`  metadata: line_size, mode, interleave, seed, refs_per_turn, trace, cores,
  paper_chunk, trace_complete (False when the traced run crashed or was cut short),
  coherence (PRDs count write-invalidate coherence misses; absent = False).
* `summary.csv` / `summary.parquet`  one row per profile: kind ("prd"|"crd"), cores,
  core (-1 for crd), total accesses, cold (infinite-distance) accesses, coherence (those
  of the cold that are coherence misses; absent = 0).
* `bins.csv` / `bins.parquet`  the non-empty histogram bins: kind, cores, core,
  lower (inclusive distance), upper (exclusive), count, dist_sum (sum of distances in the bin).
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from analysis.profiles.core_parts import CorePart, as_array
from analysis.profiles.interleave import Batch, Interleaver, Lanes, resolve_memory_budget
from analysis.profiles.private_traces import (ALL_CORES, OFFSET_BITS, CoreMap, InterleaveSpec, PreparedChunk, core_segments,
                                     line_shift, loop_starts, prepare_chunk, resolve_mode, rows_before)
from instrument.trace_types import TraceChunk, TraceInfo
from common.errors import InputError, PptmcError
from analysis.profiles.profileset import ProfileSet, ReuseProfile

ChunkFactory = Callable[[], Iterable[TraceChunk]]



def compute_profiles_from(info: TraceInfo, chunks: ChunkFactory, cores: list[int], mode: str = "auto",
                          interleave: str = "rr", seed: int = 0, refs_per_turn: int = 1,
                          line_size: int = 64, progress: bool = False, paper_chunk: int = 0,
                          coherence: bool = True, jobs: int = 1) -> ProfileSet:
    """Profiles for each core count from a re-streamable chunk source, in one pass over it
    (or one pass per worker process with jobs > 1; same profiles)."""
    _check_cores(cores)
    resolved = resolve_mode(info, mode)
    ps = ProfileSet(line_size, resolved, interleave, seed, refs_per_turn, info.path, paper_chunk=paper_chunk,
                    trace_complete=info.complete, coherence=coherence)
    counts = sorted(set(int(c) for c in cores))
    results = profile_configs(info, chunks, counts, resolved, interleave, seed, refs_per_turn, line_size, progress,
                              paper_chunk, coherence=coherence, jobs=jobs)
    for p, (prd, crd) in zip(counts, results):
        ps.prd.update({(p, c): prof for c, prof in enumerate(prd)})
        ps.crd[p] = crd
    return ps


def profile_configs(info: TraceInfo, chunks: ChunkFactory, counts: list[int], mode: str, interleave: str,
                    seed: int, refs_per_turn: int, line_size: int, progress: bool = False,
                    paper_chunk: int = 0, memory_budget: int | None = None,
                    spill_dir: str | None = None, coherence: bool = True, jobs: int = 1
                    ) -> list[tuple[list[ReuseProfile], ReuseProfile]]:
    """Every core's PRD and the CRD for each core count; each count is an independent task
    (call with one count per worker to distribute), sharing one trace pass when run together.
    jobs > 1: groups of counts (`job_groups`) run in that many processes, each reading the
    trace through `chunks` itself; the results are the same as with jobs = 1.

    What does not depend on the core count (line ids, offset masks, the runs on which cores
    are decided) is computed once per chunk and shared by every task, and so are private
    traces that coincide (see `_Mirrors`; with coherence too, see CoreCountTask). With the
    one-core task among them, the private engines of the others follow its distances within
    their unbroken stretches of rows (`ReuseEngine.feed_runs`); without it they are fed every
    access (same profiles).
    coherence: count write-invalidate coherence misses in the PRDs of p > 1 (ANALYSIS.md).
    """
    if jobs < 1:
        raise InputError(f"--jobs {jobs}: give a positive number of worker processes")
    memory_budget = resolve_memory_budget(memory_budget)  # waiting references, whole pass ($PPTMC_MEMORY_BUDGET)
    groups = job_groups(counts, jobs)
    if len(groups) > 1:
        return _run_groups(groups, counts, lambda group, budget, bar: profile_configs(
            info, chunks, group, mode, interleave, seed, refs_per_turn, line_size, bar, paper_chunk, budget,
            spill_dir, coherence), memory_budget, progress)
    resolved = resolve_mode(info, mode)
    shift = line_shift(line_size)
    n_shared = sum(1 for p in counts if p > 1)  # only interleaving tasks buffer references
    tasks = [CoreCountTask(info, InterleaveSpec(p, interleave, seed, refs_per_turn), resolved, shift, paper_chunk,
                           memory_budget // max(n_shared, 1), spill_dir, coherence)
             for p in with_lead(info, counts, resolved, line_size)]
    mirrors = _Mirrors(tasks, shift)
    tag = any(t.coherent for t in tasks)
    for t in tasks:
        t.tagged = tag
    from analysis.profiles.line_index import LineIndex  # (it imports analysis.profiles.reuse, which imports this module)

    # Dense line ids (analysis/profiles/line_index.py) for the engines that see every line: the shared
    # traces' and the one-core trace's (iteration mode offsets only stack rows, so nearly all
    # their ids are dense). Measured over the whole sweep: atax-like bench 0.79 -> 0.71 s, 2mm
    # MEDIUM 5.3 -> 5.0 s, gramschmidt 4.95 -> 4.55 s; jacobi-2d MEDIUM +0.11 s (its engines
    # replay most copies, the numbering sees them all).
    index = LineIndex() if resolved == "iteration" and n_shared else None
    # Private traces of p > 1 follow the one-core trace within their unbroken stretches of rows
    # (ReuseEngine.feed_runs).
    one = next((j for j, t in enumerate(tasks) if t.spec.cores == 1), None)
    follow_one = index is not None and one is not None and _may_follow_one(resolved, line_size)
    rows_seen = 0  # accesses of the trace before this chunk
    by_cores = sorted(range(len(tasks)), key=lambda j: tasks[j].spec.cores)
    suffixes = _Suffixes(tasks, by_cores, memory_budget // 8)
    watching = [t for t in tasks if t.loop_period]
    seen = -1  # the highest loop instance started so far
    bar = _progress(progress, info, len(counts))
    for ch in chunks():
        if not tasks:
            break
        tasks[0].cmap.check(ch)  # the header tables checked are the same for every core count
        ids, prev, nxt = index.number(ch.addr, ch.is_store if tag else None, shift, rows_seen, follow_one) \
            if index is not None else (None, None, None)
        prep = prepare_chunk(ch, resolved, tasks[0].cmap.shared_block, shift, info.path, stores=tag, line_ids=ids)
        # with dense ids, a chunk's split parts are read in place (core_parts.CorePart)
        splits = [t.cmap.split_runs(prep, shift, in_place=index is not None) for t in tasks]
        if watching:
            marks, started = loop_starts(prep, seen)
            if len(started):
                seen = int(started[-1])
                for j, t in enumerate(tasks):
                    if t.loop_period:  # before the chunk is fed: positions count what came before
                        t.watch(started, rows_before(prep, splits[j][1], marks, t.spec.cores))
        mirrors.update([run_core for _, run_core in splits])  # forks before the leaders take this chunk
        leader_of = mirrors.leader_of
        follow = suffixes.update(prep, splits, mirrors)
        lenders = {leader[0] for follower, leader in leader_of.items() if tasks[follower[0]].coherent}
        lenders |= suffixes.lenders(follow, leader_of)
        for j, t in enumerate(tasks):  # a one-core task may lead the engines of coherent tasks' cores 0
            t.distances = t.coherent or j in lenders or (follow_one and j == one)
        lead = (prev, nxt) if follow_one else None  # where each access's line was touched before and next
        rows_seen += len(prep.lines)
        for j in by_cores:  # class leaders (fewest cores first, then lower cores) are fed before their followers
            def lend(c: int, j: int = j) -> np.ndarray:
                lj, lc = leader_of[(j, c)]
                return tasks[lj].last_distances[lc]

            tasks[j].feed(splits[j][0], skip=mirrors.following(j), lend=lend if tag else None,
                          shared=mirrors.members(j), follow=suffixes.providers(follow.get(j, {}), leader_of),
                          ids=index.count if index is not None else 0,
                          runs=_lead_runs(lead, tasks, one, j, prep, splits[j][1]))
        if bar is not None:
            bar.update(len(ch) * len(counts))
    if bar is not None:
        bar.close()
    mirrors.finish()
    return [task.finish() for task in tasks][:len(counts)]  # without the lead with_lead added


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


def _lead_runs(neighbours: tuple[np.ndarray, np.ndarray] | None, tasks: list["CoreCountTask"], one: int | None,
               j: int, prep: PreparedChunk, run_core: np.ndarray) -> "LeadRuns | None":
    """What task j's private engines need to follow the one-core trace through this chunk (its
    engine fed before them; neighbours: LineIndex.number's previous and next accesses), or None
    (not following, or the one-core engine kept no distances, e.g. a replay)."""
    from analysis.profiles.reuse import LeadTrace

    if neighbours is None or j == one:
        return None
    distances = tasks[one].last_distances.get(0)
    if distances is None or len(distances) != len(prep.lines):
        return None
    return LeadRuns(LeadTrace(distances, *neighbours), prep, run_core, tasks[j].spec.cores)


class LeadRuns:
    """What ReuseEngine.feed_runs follows for the cores of one task in one chunk: the one-core
    trace's accesses, and each core's unbroken stretches of them (private_traces.core_segments,
    made when first needed)."""

    def __init__(self, trace: "LeadTrace", prep: PreparedChunk, run_core: np.ndarray, cores: int) -> None:
        self.trace, self.prep, self.run_core, self.cores = trace, prep, run_core, cores
        self._segments: list[tuple[np.ndarray, np.ndarray]] | None = None

    def segments(self, core: int) -> tuple[np.ndarray, np.ndarray]:
        """Core's stretches: their first rows and where they begin in its part (plus its length)."""
        if self._segments is None:
            self._segments = core_segments(self.prep, self.run_core, self.cores)
        return self._segments[core]


def job_groups(counts: list[int], jobs: int) -> list[list[int]]:
    """Split the core counts into at most `jobs` runs of neighbouring counts (sorted), with the
    largest estimated cost as small as possible.

    Cost estimate: one trace's worth of engine work for p = 1, two for p > 1 (private
    engines and the CRD). Neighbours stay together because p and 2p share engines
    (`_Mirrors`), e.g. {1, 2, 4, 8, 16} on 2 jobs gives {1, 2, 4} and {8, 16}."""
    order = sorted(counts)
    cost = [1 if p == 1 else 2 for p in order]
    n_groups = max(1, min(jobs, len(order)))
    best: tuple[int, list[list[int]]] | None = None
    for cuts in itertools.combinations(range(1, len(order)), n_groups - 1):
        bounds = (0, *cuts, len(order))
        worst = max(sum(cost[a:b]) for a, b in zip(bounds, bounds[1:]))
        if best is None or worst < best[0]:
            best = (worst, [order[a:b] for a, b in zip(bounds, bounds[1:])])
    return best[1] if best else [order]


def _run_groups(groups: list[list[int]], counts: list[int], run: Callable, memory_budget: int,
                progress: bool) -> list[tuple[list[ReuseProfile], ReuseProfile]]:
    """run(group, budget, progress) for every group: the first in this process, the others in
    forked worker processes (each re-reads the trace), started first; results in `counts` order.

    fork: the chunk factory (often a closure) reaches the workers without pickling. Where
    fork is unavailable the groups run one after another here (same results)."""
    import multiprocessing as mp

    budget = memory_budget // len(groups)  # the processes run at the same time
    if "fork" not in mp.get_all_start_methods():
        done = {p: r for g in groups for p, r in zip(g, run(g, budget, progress))}
        return [done[p] for p in counts]
    ctx = mp.get_context("fork")
    workers = []
    for group in groups[1:]:
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=(run, group, budget, send), daemon=True)
        proc.start()
        send.close()
        workers.append((group, proc, recv))
    try:
        done = dict(zip(groups[0], run(groups[0], budget, progress)))
        for group, proc, recv in workers:
            ok, value = _receive(recv, proc)
            if not ok:
                raise value
            done.update(zip(group, value))
    finally:
        for _, proc, recv in workers:
            recv.close()
            if proc.is_alive():
                proc.terminate()
            proc.join()
    return [done[p] for p in counts]


def _worker(run: Callable, group: list[int], budget: int, send) -> None:
    """Body of a worker process: send (True, results) or (False, the exception)."""
    try:
        result: tuple[bool, object] = (True, run(group, budget, False))
    except BaseException as exc:  # noqa: BLE001 - handed to the parent, which re-raises it
        result = (False, exc if isinstance(exc, Exception) else PptmcError(f"worker stopped: {exc!r}"))
    try:
        try:
            send.send(result)
        except Exception as exc:  # noqa: BLE001 - e.g. an exception that does not pickle: send its text
            send.send((False, PptmcError(f"profiling worker for cores {group}: {result[1]!r} ({exc})")))
    finally:
        send.close()


def _receive(recv, proc) -> tuple[bool, object]:
    """A worker's message, or an error naming how it ended when it died without one."""
    try:
        return recv.recv()
    except EOFError:
        proc.join()
        return False, PptmcError(f"profiling worker process ended with exit code {proc.exitcode} before "
                                 f"sending its profiles (out of memory?); rerun with --jobs 1")


class _Mirrors:
    """Private traces that have been the same accesses so far share one engine.

    An access goes to core c of p cores as decided per run of rows, so two private traces
    hold the same rows exactly when their run masks agree chunk after chunk. Their line
    ids can still differ by the per-core offset (core c adds c * 2^47 to stack data), but
    distances depend only on which accesses share a line, and for two cores that are both
    0 or both non-zero the offsets map lines one-to-one. So the (task, core) pairs are kept
    in classes of equal rows so far; only the first of each class (its leader) is fed.
    When a chunk splits a class, each part without the leader gets a copy of the leader's
    engine made before the chunk, offsets relabelled, and leads that part (exact: equal
    inputs give equal states). With a static schedule core 0 follows the one-core trace
    through the first 1/p of the first loop, and core 2c of 2p follows core c of p
    through half of its block.

    With write-invalidate coherence this still holds: coherence changes how a core count's
    accesses are counted (CoreCountTask), not the engines' stack states. A follower then
    takes its leader's distances for the chunk (`leader_of`); leaders are fed first.
    """

    def __init__(self, tasks: list["CoreCountTask"], shift: int) -> None:
        self.tasks, self.shift = tasks, shift
        order = sorted(range(len(tasks)), key=lambda j: tasks[j].spec.cores)
        members = [(j, c) for j in order for c in range(tasks[j].spec.cores)]
        self.classes = [cls for cls in ([m for m in members if m[1] == 0], [m for m in members if m[1]])
                        if len(cls) > 1]
        self._followers = self._followers_of(self.classes)

    @staticmethod
    def _followers_of(classes: list[list[tuple[int, int]]]) -> set[tuple[int, int]]:
        return {m for cls in classes for m in cls[1:]}

    @property
    def leader_of(self) -> dict[tuple[int, int], tuple[int, int]]:
        """The fed (task, core) of every follower."""
        return {m: cls[0] for cls in self.classes for m in cls[1:]}

    def following(self, j: int) -> set[int]:
        """Cores of task j whose engines are not fed (their class leader's is)."""
        return {c for (j2, c) in self._followers if j2 == j}

    def members(self, j: int) -> set[int]:
        """Cores of task j in a class (leaders and followers); the others' engines are their own for good."""
        return {c for cls in self.classes for (j2, c) in cls if j2 == j}

    def update(self, run_cores: list[np.ndarray]) -> None:
        """Split the classes by this chunk's rows; fork a leader for every part that lost its own."""
        classes = []
        for cls in self.classes:
            parts: dict[bytes, list[tuple[int, int]]] = {}
            for j, c in cls:
                rc = run_cores[j]
                parts.setdefault(np.packbits((rc == c) | (rc == ALL_CORES)).tobytes(), []).append((j, c))
            for part in parts.values():
                if part[0] != cls[0] and cls[0] not in part:
                    self._fork(cls[0], part[0])
                elif part[0] != cls[0]:
                    part.remove(cls[0])
                    part.insert(0, cls[0])
                if len(part) > 1:
                    classes.append(part)
        self.classes = classes
        self._followers = self._followers_of(classes)

    def _fork(self, leader: tuple[int, int], follower: tuple[int, int]) -> None:
        """Follower's engine := a copy of the leader's, its offset lines moved to its own core."""
        engine = self.tasks[leader[0]].private[leader[1]].copy()
        if leader[1] != follower[1]:  # both non-zero: lines >= 2^(47-shift) carry the core's offset
            step = 1 << (OFFSET_BITS - self.shift)
            engine.relabel(step, (follower[1] - leader[1]) * step)
        self.tasks[follower[0]].private[follower[1]] = engine

    def finish(self) -> None:
        """Followers end in their leader's state."""
        for cls in self.classes:
            for m in cls[1:]:
                self._fork(cls[0], m)
        self.classes, self._followers = [], set()


_SUFFIX_BASE_LINES = 1 << 16  # lines an engine may hold when it starts following (a copy is made of it)


class _Suffixes:
    """Private traces that repeat another's accesses from some point on take their distances
    from it (_Suffix) instead of an engine pass.

    With a static schedule core 2c+1 of 2p runs the second half of core c of p's block, so from
    where its block starts its trace repeats core c's (core 2c of 2p, a prefix, is _Mirrors'):
    on a single work-shared loop that is half of every p > 1's private accesses. A core (its
    engine fed here, not a _Mirrors follower, not replaying, holding at most _SUFFIX_BASE_LINES
    lines, and never made to stop following before) starts following in a chunk where it has
    rows of its own that are a run of the rows of a core of a task with fewer cores (fed earlier
    in the chunk, so its distances are known), and follows it while each chunk gives it the rows
    its lead takes next: when it has rows again after its lead took rows without it, or rows
    that are not its lead's next, it stops (its engine is made from the kept references when next
    fed); while all followers together keep more than `limit` references (8 B each: the pass's
    memory budget), those keeping the most stop. Lines must correspond one to one between
    the two: both cores 0 or both not (the per-core offsets map lines one to one, as for
    _Mirrors), or no offset row among the rows."""

    def __init__(self, tasks: list["CoreCountTask"], by_cores: list[int], limit: int) -> None:
        self.tasks, self.by_cores, self.limit = tasks, by_cores, limit
        self.stopped: set[tuple[int, int]] = set()  # made to stop following: never again
        self.had = [np.zeros(t.spec.cores, dtype=bool) for t in tasks]  # cores with rows of their own, last chunk

    def update(self, prep: PreparedChunk, splits: list[tuple[list[np.ndarray], np.ndarray]],
               mirrors: "_Mirrors") -> dict[int, dict[int, tuple[tuple[int, int], int]]]:
        """Stop or start following for this chunk's rows; {task: {core: (lead, first row in the
        lead's part)}} of the cores that follow in this chunk. Copies of a following engine that
        _Mirrors gave to other cores follow the same lead."""
        if len(self.tasks) < 2:  # a lead is a core of a task with fewer cores: none (one-core analysis)
            return {}
        masks: dict[tuple[int, int], np.ndarray] = {}
        lengths = np.diff(prep.starts)

        def at(m: tuple[int, int], lead: tuple[int, int]) -> tuple[int, int] | None:
            for x in (m, lead):
                if x not in masks:
                    rc = splits[x[0]][1]
                    masks[x] = (rc == x[1]) | (rc == ALL_CORES)
            return _run_within(masks[m], masks[lead], lengths)

        rows = [[len(a) for a in parts] for parts, _ in splits]
        offset_runs = _offset_runs(prep)
        out: dict[int, dict[int, tuple[tuple[int, int], int]]] = {}
        for j in self.by_cores:
            for c, engine in enumerate(self.tasks[j].private):
                if isinstance(engine, _Suffix) and engine.lead is not None:
                    self._keep((j, c), engine, rows, offset_runs, masks, at, out)
        self._bound(out)
        own = [np.bincount(rc[rc >= 0], minlength=self.tasks[j].spec.cores) > 0 for j, (_, rc) in enumerate(splits)]
        for j in self.by_cores:  # a core tries when rows of its own begin (after a chunk without any)
            for c in np.flatnonzero(own[j] & ~self.had[j]).tolist():
                if self._may_follow(j, c, mirrors):
                    self._start(j, c, offset_runs, masks, rows, at, out)
        self.had = own
        return out

    def _bound(self, out: dict) -> None:
        """Stop the followers that keep the most references until all of them keep at most `limit`
        (arrays shared by several, e.g. with a _Mirrors copy, counted once per follower)."""
        following = [((j, c), e) for j, t in enumerate(self.tasks) for c, e in enumerate(t.private)
                     if isinstance(e, _Suffix) and e.lead is not None]
        total = sum(e.kept for _, e in following)
        for m, engine in sorted(following, key=lambda f: -f[1].kept):
            if total <= self.limit:
                return
            total -= engine.kept
            engine.stop()
            self.stopped.add(m)
            out.get(m[0], {}).pop(m[1], None)

    def _keep(self, m: tuple[int, int], engine: "_Suffix", rows: list, offset_runs: np.ndarray | None,
              masks: dict, at: Callable, out: dict) -> None:
        """Go on following if m's rows in this chunk are its lead's next, else stop."""
        lead = engine.lead
        if not rows[m[0]][m[1]]:
            engine.behind = engine.behind or bool(rows[lead[0]][lead[1]])  # its lead took rows without it
            return
        where = None if engine.behind else at(m, lead)
        if where is None or where[0] or not self._lines_match(offset_runs, masks, m, lead):
            engine.stop()
            self.stopped.add(m)
        else:
            self._note(out, m, engine, where)

    @staticmethod
    def _note(out: dict, m: tuple[int, int], engine: "_Suffix", where: tuple[int, int]) -> None:
        """m follows its lead in this chunk from the lead's row where[0]; behind when rows of the
        lead's remain after its own."""
        out.setdefault(m[0], {})[m[1]] = (engine.lead, where[0])
        if where[1]:
            engine.behind = True

    def _may_follow(self, j: int, c: int, mirrors: "_Mirrors") -> bool:
        """Whether core c of task j could start following: fed here, a plain small engine, not
        replaying, never stopped."""
        t = self.tasks[j]
        engine = t.private[c]
        return (t.spec.cores > 1 and (j, c) not in self.stopped and c not in mirrors.following(j)
                and not t.private_period[c] and t.own_replay[c] is None and not isinstance(engine, _Suffix)
                and engine.distinct_lines <= _SUFFIX_BASE_LINES)

    def _start(self, j: int, c: int, offset_runs: np.ndarray | None, masks: dict, rows: list, at: Callable,
               out: dict) -> None:
        """Follow the first core of a task with fewer cores whose rows hold this core's as a run."""
        p = self.tasks[j].spec.cores
        for j2 in self.by_cores:
            if self.tasks[j2].spec.cores >= p:
                return
            for c2 in range(self.tasks[j2].spec.cores):
                if rows[j2][c2] < rows[j][c]:
                    continue
                where = at((j, c), (j2, c2))
                if where is not None and self._lines_match(offset_runs, masks, (j, c), (j2, c2)):
                    t = self.tasks[j]
                    t.private[c] = _Suffix(t.private[c], t.tagged, (j2, c2))
                    self._note(out, (j, c), t.private[c], where)
                    return

    @staticmethod
    def _lines_match(offset_runs: np.ndarray | None, masks: dict, m: tuple[int, int], lead: tuple[int, int]) -> bool:
        """Whether the two cores' line ids of their common rows correspond one to one (masks[m]:
        m's runs, made by `at`)."""
        return (m[1] == 0) == (lead[1] == 0) or offset_runs is None or not (offset_runs & masks[m]).any()

    @staticmethod
    def lenders(follow: dict, leader_of: dict[tuple[int, int], tuple[int, int]]) -> set[int]:
        """Tasks whose engines must return distances this chunk (those the followers' leads take)."""
        return {leader_of.get(lead, lead)[0] for cores in follow.values() for lead, _ in cores.values()}

    def providers(self, follow: dict[int, tuple[tuple[int, int], int]],
                  leader_of: dict[tuple[int, int], tuple[int, int]]) -> dict[int, Callable[[int], np.ndarray | None]]:
        """For each following core, a function of its row count giving its lead's distances of those
        rows (None if the lead's engine returned none, e.g. a replay that keeps no distances)."""
        def provider(lead: tuple[int, int], first: int) -> Callable[[int], np.ndarray | None]:
            j, c = leader_of.get(lead, lead)

            def distances(n: int) -> np.ndarray | None:
                d = self.tasks[j].last_distances.get(c)
                return None if d is None else d[first:first + n]
            return distances

        return {c: provider(lead, first) for c, (lead, first) in follow.items()}


def _offset_runs(prep: PreparedChunk) -> np.ndarray | None:
    """Which runs of a prepared chunk hold offset rows (None: no row has an offset)."""
    if not prep.offsets:
        return None
    if prep.offmask is not None:  # dense (paper mode): one pass over the mask
        return np.add.reduceat(prep.offmask, prep.starts[:-1]) > 0 if len(prep.starts) > 1 else np.zeros(0, bool)
    out = np.zeros(len(prep.starts) - 1, dtype=bool)
    out[np.searchsorted(prep.starts, prep.offrows, side="right") - 1] = True
    return out


def _run_within(inner: np.ndarray, outer: np.ndarray, lengths: np.ndarray) -> tuple[int, int] | None:
    """Where the rows of the runs in `inner` lie among those of `outer` (bool masks over the runs
    of `lengths` rows each): (rows of outer before them, rows of outer after them) when they are
    a non-empty unbroken stretch of outer's rows, else None."""
    if (inner & ~outer).any():
        return None
    sub = np.flatnonzero(inner[outer])
    if not len(sub) or sub[-1] - sub[0] + 1 != len(sub):
        return None
    lens = lengths[outer]
    return int(lens[:sub[0]].sum()), int(lens[sub[-1] + 1:].sum())


class _Suffix:
    """The engine of a private trace that follows another (_Suffixes): its accesses since it
    began are the lead's since then, so its distances come from the lead's (reuse.suffix_scan).
    An access whose lead distance d is below the number of lines touched since then reused one
    of them: nothing before counts, so its distance is d in both traces (every line between the
    two uses was touched since then). The others are the first touches since then: cold unless
    the engine as it was (`origin`, never fed while following) held the line; then the lines
    touched since, plus the held lines above it not touched since, which `ahead` (a copy of it
    fed only the held first touches) counts. The accesses are kept (`parts`): the engine's state
    is made from them only when it is needed (`materialise`: its trace stopped following, or a
    copy that _Mirrors gave another core is fed something else); at the end only the counts
    are. Copies share `origin` and the parts so far; one relabelled for another core
    (`relabel`) relabels its small `base` and `ahead` at once, and its engine when it is made,
    after the parts that came before."""

    def __init__(self, origin, tagged: bool, lead: tuple[int, int]) -> None:
        from analysis.profiles.reuse import N_BINS

        self.origin, self.base, self.tagged = origin, origin, tagged  # base: origin in this core's lines
        self.ahead = origin.copy()
        self.lead: tuple[int, int] | None = lead  # the (task, core) followed; None once stopped
        self.behind = False  # the lead took rows without this trace: its next rows stop it
        self.parts: list[np.ndarray] = []
        self.relabels: list[tuple[int, int, int]] = []  # (parts before it, at_least, delta)
        self.kept = 0   # references in parts
        self.seen = 0   # lines touched since following began
        self.known = 0  # of them, lines the origin held
        self.hist = np.zeros(N_BINS + 1, dtype=np.int64)  # counts since following began, as the engine's
        self.hist_sum = np.zeros(N_BINS + 1, dtype=np.int64)

    def follow(self, lines: np.ndarray, lead: np.ndarray) -> np.ndarray:
        """Distances (int32) of the next accesses, which are the lead's with distances `lead`."""
        from analysis.profiles.reuse import suffix_firsts, suffix_scan

        n = len(lines)
        out = np.empty(n, dtype=np.int32)
        first = np.empty(n, dtype=np.int64)
        m = suffix_scan(np.ascontiguousarray(lead, dtype=np.int32), self.seen, out, first, self.hist, self.hist_sum)
        first = first[:m]
        touched = lines[first]
        held = self.base.holds(touched, self.tagged)
        ahead = self.ahead.feed_distances(touched[held], tagged=self.tagged, dtype=np.int32)
        suffix_firsts(first, held, ahead, self.seen, self.known, out, self.hist, self.hist_sum)
        self.seen += m
        self.known += len(ahead)
        self.parts.append(lines)
        self.kept += n
        return out

    def stop(self) -> None:
        """Follow no more (the engine is made when it is next fed)."""
        self.lead, self.ahead = None, None

    def copy(self) -> "_Suffix":
        """A copy in the same state (following the same lead)."""
        twin = _Suffix.__new__(_Suffix)
        for name, value in vars(self).items():
            setattr(twin, name, value.copy() if isinstance(value, (np.ndarray, list)) else value)
        if self.ahead is not None:
            twin.ahead = self.ahead.copy()
        return twin

    def relabel(self, at_least: int, delta: int) -> None:
        """ReuseEngine.relabel: base and ahead now, the engine when it is made."""
        self.relabels.append((len(self.parts), at_least, delta))
        self.base = self.base.copy()
        self.base.relabel(at_least, delta)
        if self.ahead is not None:
            self.ahead.relabel(at_least, delta)

    def materialise(self):
        """The engine itself: the origin fed the kept accesses (so its counts are its own)."""
        engine = self.origin.copy()
        marks = list(self.relabels)
        for k, part in enumerate(self.parts + [None]):
            while marks and marks[0][0] == k:
                engine.relabel(*marks.pop(0)[1:])
            if part is not None:
                engine.feed(part, tagged=self.tagged)
        return engine

    def final(self):
        """An engine with the right counts (its state is not: for histogram() and reclassify only)."""
        engine = self.base.copy()
        engine.add_tally(self.hist, self.hist_sum)
        return engine


class CoreCountTask:
    """The profiles of one core count: a private engine per core, the interleaver and the
    CRD engine. Independent of every other core count's task (a unit of distribution).

    With coherence (p > 1) the private engines are still fed in each core's own order, as
    the chunks arrive (so `_Mirrors` can share them), and return every access's plain
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
                 coherence: bool = False) -> None:
        from analysis.profiles.coherence import CoherenceMisses
        from analysis.profiles.reuse import ReuseEngine  # lazy: reuse imports ReuseProfile from this module

        self.spec, self.shift = spec, shift
        self.coherent = coherence and spec.cores > 1
        if self.coherent and spec.cores >= 1 << (63 - OFFSET_BITS):
            raise InputError(f"--cores {spec.cores}: coherence modelling supports fewer than "
                             f"{1 << (63 - OFFSET_BITS)} cores; use --no-coherence")
        self.tagged = self.coherent  # parts carry store tags (profile_configs sets it for a whole sweep)
        self.distances = self.coherent  # feed() returns the plain distances (also to lead coherent followers)
        self.misses = CoherenceMisses(spec.cores) if self.coherent else None
        self.last_distances: dict[int, np.ndarray] = {}
        self.cmap = CoreMap(info, spec.cores, mode, paper_chunk)
        self.private = [ReuseEngine() for _ in range(spec.cores)]
        # one core: the shared trace is the private one, so the CRD is the PRD
        self.shared = ReuseEngine(sharer_cores=spec.cores if self.coherent else 0) if spec.cores > 1 else None
        # line ids (8 B) and, with coherence, their distances (4 B) wait alike: split the budget 2:1
        memory_budget = resolve_memory_budget(memory_budget)
        budget = memory_budget * 2 // 3 if self.coherent else memory_budget
        self.itl = Interleaver(spec.cores, spec.strategy, spec.seed, spec.refs_per_turn, budget,
                               spill_dir, reuse=True) if spec.cores > 1 else None
        self.dlanes = Lanes(spec.cores, np.int32, memory_budget - budget, spill_dir) if self.coherent else None
        period = loop_period(info) if mode == "iteration" else 0
        self.replay = _Replay(self) if period and spec.cores > 1 and spec.strategy == "rr" else None
        self.longest_copy = memory_budget // 16  # references: a replayed copy is kept (8 B each) in half the budget
        self.loop_period = period  # loop instances i and i + period have the same loop, trip count and schedule
        self.pushed = np.zeros(spec.cores, dtype=np.int64)  # references of each core's private trace so far
        self.starts_at: dict[int, np.ndarray] = {}  # private-trace positions where recent loop instances started
        self.private_period = [0] * spec.cores  # each core's period, where it repeats (see watch)
        self.own_replay: list[_PrivateReplay | None] = [None] * spec.cores

    def feed(self, parts: list[np.ndarray | CorePart], skip: set[int] | frozenset[int] = frozenset(),
             lend: Callable[[int], np.ndarray] | None = None, shared: set[int] | None = None,
             follow: dict[int, Callable[[int], np.ndarray | None]] | None = None, ids: int = 0,
             runs: LeadRuns | None = None) -> None:
        """Add every core's part of one chunk (CoreMap.split); the engines of cores in skip are kept
        elsewhere, and lend(core) gives their distances for this chunk when they are needed. When
        self.distances, the distances (int32) of the parts fed here are left in self.last_distances.
        The engines of cores not in `shared` (None: all) are shared with no other task ever again
        (_Mirrors), so they may replay their periodic stretches (_PrivateReplay). follow[core](n)
        gives the distances of the n accesses a following core (_Suffix) repeats, None if unknown.
        ids > 0: the parts are dense ids below it (analysis.profiles.line_index), for every chunk.
        runs: the parts' distances in the one-core trace, which plain engines follow (feed_runs)."""
        from analysis.profiles.coherence import strip

        own: dict[int, np.ndarray] = {}
        self.last_distances = own
        if ids:  # the engines that see every line take dense slots for them
            engine = self.shared if self.shared is not None else self.private[0]
            if not isinstance(engine, _Suffix):
                engine.reserve_dense(ids)
            for engine in self.private if self.shared is not None else ():
                if not isinstance(engine, _Suffix) and 2 * engine.distinct_lines >= ids:  # <= 48 B a line it holds
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
        self._drain()

    def _feed_core(self, core: int, lines: np.ndarray | CorePart, shared: set[int] | None,
                   lead: Callable[[int], np.ndarray | None] | None,
                   runs: LeadRuns | None = None) -> np.ndarray | None:
        """Feed one core's accesses to its engine (through its replay, from its lead's distances
        while it follows one, or following the one-core trace's distances within its unbroken
        stretches: `runs`); their distances (int32) when wanted or known."""
        engine = self.private[core]
        if isinstance(engine, _Suffix):
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

    def feed_chunk(self, prep: PreparedChunk) -> None:
        """Add one prepared chunk of the sequential trace (the task on its own; with coherence,
        prepared with prepare_chunk(stores=True))."""
        self.feed(self.cmap.split_prepared(prep, self.shift))

    def watch(self, started: np.ndarray, before: np.ndarray) -> None:
        """Loop instances `started` begin in the next chunk, after before[i, c] of core c's accesses
        in it. Instances loop_period apart that start s accesses apart in core c's private trace
        make s that trace's period, where it repeats (_PrivateReplay); when s is the same for
        every core, the shared trace may repeat with s rounds (_Replay)."""
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
                if _SHORTEST_PRIVATE_COPY <= step[c] <= self.longest_copy // p:
                    self.private_period[c] = int(step[c])
            if self.replay is not None and step[0] % k == 0 and (step == step[0]).all() \
                    and _SHORTEST_COPY <= step[0] * p <= self.longest_copy:
                self.replay.arm(int(step[0]) * p)

    def _own_replay(self, core: int) -> "_PrivateReplay":
        """The replay of core's engine (made on first use), armed with its latest period."""
        r = self.own_replay[core]
        if r is None:
            r = self.own_replay[core] = _PrivateReplay(self.private[core], self.coherent, self.tagged)
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
        self.private = [e.final() if isinstance(e, _Suffix) else e for e in self.private]
        if self.misses is not None:
            for core, engine in enumerate(self.private):
                engine.reclassify(self.misses.moved[core], self.misses.moved_sum[core])
        prd = [e.histogram() for e in self.private]
        return prd, (self.shared.histogram() if self.shared is not None else prd[0])


def loop_period(info: TraceInfo, longest: int = 64) -> int:
    """The smallest n (at most `longest`) such that every loop instance i + n has the same loop,
    trip count, schedule and chunk as instance i (0: none, or fewer than 3n instances)."""
    loops = sorted(info.loops, key=lambda lp: lp.instance)
    sig = np.array([(lp.loop_id, lp.trip_count, lp.schedule, lp.chunk) for lp in loops], dtype=np.int64)
    for n in range(1, min(longest, len(sig) // 3) + 1):
        if np.array_equal(sig[n:], sig[:-n]):
            return n
    return 0


_SHORTEST_COPY = 1 << 15  # references: shorter copies would split the CRD's input into too many engine calls
_SHORTEST_PRIVATE_COPY = 1 << 13  # the same for a private trace (a private segment costs one engine call)


class _Copies:
    """The bookkeeping shared by the replays of a shared (_Replay) and a private (_PrivateReplay)
    trace: the stream is cut into copies of `period` references from where it was armed; the
    first copy is fed and kept, the next is fed and compared (its repeat), and each further copy
    is compared without being fed, its counts being the repeat's (`_skip`). A copy that differs is
    fed (`_fed`, with any part held back) and starts a new run. Copies that keep differing are
    compared less and less often: after f such copies in a row (f >= 2) the next 2^(f-1) - 1
    copies are fed without keeping or comparing them, so a trace whose loop table repeats but
    whose accesses do not costs a few copies' comparisons, not one per copy."""

    def __init__(self) -> None:
        self.pos = 0      # references seen so far
        self.period = 0   # references per copy; 0: not replaying
        self.start = 0    # position of the current copy's first reference
        self.copies = 0   # 0: keeping a first copy, 1: feeding its repeat, 2+: holding copies back
        self.ref = np.zeros(0, dtype=np.uint64)  # the previous copy's line ids
        self.before: list[np.ndarray] = []  # counters when the repeat began
        self.delta: list[np.ndarray] = []   # counters the repeat added
        self.skipped = 0   # copies not fed
        self.owed = 0      # of them, copies whose counts are not added yet (_settle: once per run)
        self.failures = 0  # copies that differed since the last one skipped
        self.resume = 0    # position from which copies are kept and compared again
        self.backoff = False  # the copy being kept differed from its predecessor, again

    def arm(self, period: int) -> None:
        """Compare copies of `period` references from the current position on."""
        if period == self.period:
            return
        self.flush()
        self.period, self.start, self.copies, self.failures = period, self.pos, 0, 0
        self.ref = np.empty(period, dtype=np.uint64)

    def flush(self) -> None:
        """Feed the part of the current copy held back, add the counts owed, and stop replaying."""
        self._settle()
        if self.period and self.copies >= 2:
            self._fed(self.ref[:self.pos - self.start], self.start)
        self.period, self.copies = 0, 0

    def _run(self, lines: np.ndarray) -> list:
        """Take the next references; what _fed / _held return for each segment, in order."""
        outs, i, n = [], 0, len(lines)
        while i < n:
            if not self.period or self.pos < self.resume:  # plain feeding
                m = n - i if not self.period else min(n - i, self.resume - self.pos)
                outs.append(self._fed(lines[i:i + m], self.pos))
                i += m
                self.pos += m
                if self.period and self.pos == self.resume:
                    self.start, self.copies = self.pos, 0
                continue
            off = self.pos - self.start
            m = min(n - i, self.period - off)
            outs.append(self._segment(lines[i:i + m], off))
            i += m
            self.pos += m
            if off + m == self.period:
                self._copy_end()
        return outs

    def _segment(self, seg: np.ndarray, off: int):
        """References off.. of the current copy."""
        m = len(seg)
        if self.copies == 0:
            self.ref[off:off + m] = seg
            return self._fed(seg, self.pos)
        if self.copies == 1:
            out = self._fed(seg, self.pos)
            self._repeat_part(off, out)
            if not np.array_equal(seg, self.ref[off:off + m]):  # not a repeat: it is the first copy
                self.ref[off:off + m] = seg
                self._differs()
            return out
        if np.array_equal(seg, self.ref[off:off + m]):
            return self._held(off, m)
        self._fed(self.ref[:off], self.start)  # the equal part held back
        self.ref[off:off + m] = seg
        self._differs()
        return self._fed(seg, self.pos)

    def _differs(self) -> None:
        """The current copy is not a repeat: it becomes the first copy of a new run."""
        self.copies = 0
        self.failures += 1
        self.backoff = self.failures >= 2

    def _copy_end(self) -> None:
        """The current copy is complete: keep it, take the repeat's counts, or add them again."""
        self.start += self.period
        if self.copies == 0:
            if self.backoff:  # back off: feed the next 2^(f-1) - 1 copies as they are
                self.backoff = False
                self.resume = self.start + self.period * ((1 << min(self.failures - 1, 30)) - 1)
                if self.resume > self.start:
                    return
            self._settle()  # what is owed is the old delta's: added before the new one is measured
            self.before = self._counters()
        elif self.copies == 1:
            self.delta = [a - b for a, b in zip(self._counters(), self.before)]
        else:
            self._skip()
            self.skipped += 1
            self.owed += 1
            self.failures = 0
        self.copies += 1

    def _fed(self, seg: np.ndarray, at: int):
        raise NotImplementedError

    def _held(self, off: int, m: int):
        """What a held-back segment returns."""
        return None

    def _repeat_part(self, off: int, out) -> None:
        """Keep what the repeat's segment at off returned."""

    def _counters(self) -> list[np.ndarray]:
        raise NotImplementedError

    def _skip(self) -> None:
        """What a copy not fed needs at once (its counts are added by _settle)."""

    def _settle(self) -> None:
        """Add the repeat's counts once for all the copies skipped since the last call (counts are
        sums, and the snapshots that make delta cancel what is owed, so adding late is exact)."""
        if self.owed:
            self._add(self.owed)
            self.owed = 0

    def _add(self, k: int) -> None:
        """Add k times the counters the repeat added (delta)."""
        raise NotImplementedError


class _Replay(_Copies):
    """Exact replay of the periodic stretches of one core count's round-robin shared trace.

    For an LRU stack, a window W fed right after W leaves the stack as W alone left it, so in
    consecutive copies of W every copy after the first has the same distances. The sharer sets
    repeat from the first copy on as well (a line stored in W ends W with the set W gives it, a
    line only loaded ends with its old set plus W's loaders), so the stale accesses of every
    copy after the first are the same; and each core's part of the copies is a run of copies of
    its own window, so their private distances, which decide the coherence misses, repeat too.
    So once the second copy of a run has been fed (and the histogram counts and coherence
    misses it added recorded), each further copy that compares equal to it is not fed: those
    counts are added again. Copies are compared exactly (line ids with their store tags, and
    every core taking its turns in order); the period (CoreCountTask.watch) only says where to
    compare, and a copy that differs is fed, with the part of it that was held back (_Copies).
    """

    def __init__(self, task: "CoreCountTask") -> None:
        super().__init__()
        self.task = task
        p, k = task.spec.cores, task.spec.refs_per_turn
        self.pattern = np.repeat(np.arange(p, dtype=np.int64), k)  # cores of one round
        self.round = p * k

    def feed(self, batch: Batch) -> None:
        """The next Batch of the shared trace."""
        if self.period and not self._in_turn(batch):  # a core has finished: the pattern changes
            self.flush()
        if not self.period:
            self.task.feed_batch(batch)
            self.pos += len(batch.lines)
            return
        self._run(batch.lines)

    def _in_turn(self, batch: Batch) -> bool:
        """Whether the Batch's references are the turns of every core in order from self.pos."""
        pat, n = batch.core_pattern, len(batch.lines)
        want = self.pattern[(self.pos + np.arange(len(pat))) % self.round]
        return np.array_equal(pat, want) and (len(pat) == n or len(pat) % self.round == 0)

    def _counters(self) -> list[np.ndarray]:
        """The CRD's histogram counters and the coherence misses found so far (copies)."""
        t = self.task
        out = list(t.shared.tally())
        if t.misses is not None:
            out += [t.misses.moved.copy(), t.misses.moved_sum.copy()]
        return out

    def _skip(self) -> None:
        """A copy not fed: its private distances are not needed."""
        t = self.task
        if t.misses is not None:
            for c in range(t.spec.cores):
                t.dlanes.take(c, self.period // t.spec.cores)

    def _add(self, k: int) -> None:
        """The repeat's CRD counts and coherence misses, k times."""
        t = self.task
        t.shared.add_tally(self.delta[0] * k, self.delta[1] * k)
        if t.misses is not None:
            t.misses.moved += self.delta[2] * k
            t.misses.moved_sum += self.delta[3] * k

    def _fed(self, seg: np.ndarray, at: int) -> None:
        """Feed the references at positions at.. of the shared trace to the CRD engine."""
        n = len(seg)
        if not n:
            return
        phase = at % self.round
        pat = np.roll(self.pattern, -phase) if n >= self.round else self.pattern[(phase + np.arange(n)) % self.round]
        t = self.task
        if t.misses is None:
            t.shared.feed(seg)
            return
        stale = t.shared.feed_shared(seg, pat)
        p, k = t.spec.cores, t.spec.refs_per_turn
        dists = [t.dlanes.take(c, n_c) for c, n_c in enumerate(self._turns(at + n, p, k) - self._turns(at, p, k))]
        t.misses.add(stale, list(enumerate(dists)), dists, pat)

    def _turns(self, x: int, p: int, k: int) -> np.ndarray:
        """References of each core among the first x of the shared trace (every core in turn)."""
        return (x // self.round) * k + np.clip(x % self.round - np.arange(p) * k, 0, k)


class _PrivateReplay(_Copies):
    """Exact replay of the periodic stretches of one private trace, for its engine: as in _Replay,
    once the repeat of a copy has been fed, each further copy that compares equal to it is not
    fed and the repeat's histogram counts are added again. The distances of a copy's part equal
    to the repeat's are the repeat's (same stack before it, same accesses) before the copy is
    complete, so they are returned at once (want); a copy that turns out to differ is fed from
    its start (the held part's distances, already returned, are dropped)."""

    def __init__(self, engine, want: bool, tagged: bool) -> None:
        super().__init__()
        self.engine, self.want, self.tagged = engine, want, tagged
        self.dist = np.zeros(0, dtype=np.int32)  # the repeat's distances (want)
        self.lent = False  # views of dist were handed out (_held)

    def arm(self, period: int) -> None:
        """Compare copies of `period` references from the current position on."""
        if period != self.period:
            super().arm(period)
            self.dist, self.lent = np.empty(period if self.want else 0, dtype=np.int32), False

    def feed(self, lines: np.ndarray) -> np.ndarray | None:
        """The next accesses of the private trace; their distances (int32) when want."""
        outs = self._run(lines)
        if not self.want:
            return None
        return outs[0] if len(outs) == 1 else np.concatenate(outs)

    def _held(self, off: int, m: int) -> np.ndarray | None:
        """The repeat's distances, a view the caller keeps (dist is never written again, _repeat_part)."""
        if not self.want:
            return None
        self.lent = True
        return self.dist[off:off + m]

    def _repeat_part(self, off: int, out: np.ndarray | None) -> None:
        if self.want:
            if self.lent:  # views of the old repeat's distances may still wait: a new array for this one
                self.dist, self.lent = np.empty_like(self.dist), False
            self.dist[off:off + len(out)] = out

    def _counters(self) -> list[np.ndarray]:
        return list(self.engine.tally())

    def _add(self, k: int) -> None:
        self.engine.add_tally(self.delta[0] * k, self.delta[1] * k)

    def _fed(self, seg: np.ndarray, at: int) -> np.ndarray | None:
        """Feed the engine; the distances when want."""
        if self.want:
            return self.engine.feed_distances(seg, tagged=self.tagged, dtype=np.int32)
        if len(seg):
            self.engine.feed(seg, tagged=self.tagged)
        return None


def _progress(enabled: bool, info: TraceInfo, n_configs: int):
    """A tqdm bar on stderr over the mimicked references (about n_accesses per core count), or None."""
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(desc="profiling", total=info.n_accesses * n_configs or None, unit="ref", unit_scale=True,
                leave=False)


def _check_cores(cores: list[int]) -> None:
    if not cores or any(int(c) < 1 for c in cores):
        raise InputError(f"--cores {cores}: give one or more positive core counts, e.g. 1,2,4,8")


def compute_profiles(trace_path: str | Path, cores: list[int], mode: str = "auto", interleave: str = "rr",
                     seed: int = 0, refs_per_turn: int = 1, line_size: int = 64,
                     progress: bool = False, max_rows: int = 1 << 20, paper_chunk: int = 0,
                     coherence: bool = True, jobs: int = 1) -> ProfileSet:
    """Open a trace file and compute its ProfileSet (jobs: worker processes, see profile_configs)."""
    info, factory = open_chunks(trace_path, max_rows)
    return compute_profiles_from(info, factory, cores, mode, interleave, seed, refs_per_turn, line_size, progress,
                                 paper_chunk, coherence, jobs)


def open_chunks(trace_path: str | Path, max_rows: int = 1 << 20) -> tuple[TraceInfo, ChunkFactory]:
    """TraceInfo and a factory that opens a fresh chunk stream each call."""
    from instrument import open_trace

    reader = open_trace(trace_path)

    def factory() -> Iterator[TraceChunk]:
        return open_trace(trace_path).chunks(max_rows)

    return reader.info, factory
