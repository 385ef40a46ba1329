"""Private traces that share work with others in a sweep over core counts: traces that have
been the same accesses so far share one engine (Mirrors), and traces that repeat another's
accesses from some point on take their distances from it (Suffixes, Suffix)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from analysis.profiles.kernel_ops import N_BINS
from analysis.profiles.private_traces import ALL_CORES, OFFSET_BITS, PreparedChunk
from analysis.profiles.runs import suffix_firsts, suffix_scan

Tasks = list[Any]  # the sweep's CoreCountTasks (analysis/profiles/task.py, which imports this module)


class Mirrors:
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

    def __init__(self, tasks: Tasks, shift: int) -> None:
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


SUFFIX_BASE_LINES = 1 << 16  # lines an engine may hold when it starts following (a copy is made of it)


class Suffixes:
    """Private traces that repeat another's accesses from some point on take their distances
    from it (Suffix) instead of an engine pass.

    With a static schedule core 2c+1 of 2p runs the second half of core c of p's block, so from
    where its block starts its trace repeats core c's (core 2c of 2p, a prefix, is Mirrors'):
    on a single work-shared loop that is half of every p > 1's private accesses. A core (its
    engine fed here, not a Mirrors follower, not replaying, holding at most SUFFIX_BASE_LINES
    lines, and never made to stop following before) starts following in a chunk where it has
    rows of its own that are a run of the rows of a core of a task with fewer cores (fed earlier
    in the chunk, so its distances are known), and follows it while each chunk gives it the rows
    its lead takes next: when it has rows again after its lead took rows without it, or rows
    that are not its lead's next, it stops (its engine is made from the kept references when next
    fed); while all followers together keep more than `limit` references (8 B each: the pass's
    memory budget), those keeping the most stop. Lines must correspond one to one between
    the two: both cores 0 or both not (the per-core offsets map lines one to one, as for
    Mirrors), or no offset row among the rows."""

    def __init__(self, tasks: Tasks, by_cores: list[int], limit: int) -> None:
        self.tasks, self.by_cores, self.limit = tasks, by_cores, limit
        self.stopped: set[tuple[int, int]] = set()  # made to stop following: never again
        self.had = [np.zeros(t.spec.cores, dtype=bool) for t in tasks]  # cores with rows of their own, last chunk

    def update(self, prep: PreparedChunk, splits: list[tuple[list[np.ndarray], np.ndarray]],
               mirrors: Mirrors) -> dict[int, dict[int, tuple[tuple[int, int], int]]]:
        """Stop or start following for this chunk's rows; {task: {core: (lead, first row in the
        lead's part)}} of the cores that follow in this chunk. Copies of a following engine that
        Mirrors gave to other cores follow the same lead."""
        if len(self.tasks) < 2:  # a lead is a core of a task with fewer cores: none (one-core analysis)
            return {}
        masks: dict[tuple[int, int], np.ndarray] = {}
        lengths = np.diff(prep.starts)

        def at(m: tuple[int, int], lead: tuple[int, int]) -> tuple[int, int] | None:
            for x in (m, lead):
                if x not in masks:
                    rc = splits[x[0]][1]
                    masks[x] = (rc == x[1]) | (rc == ALL_CORES)
            return run_within(masks[m], masks[lead], lengths)

        rows = [[len(a) for a in parts] for parts, _ in splits]
        offset_runs = runs_with_offsets(prep)
        out: dict[int, dict[int, tuple[tuple[int, int], int]]] = {}
        for j in self.by_cores:
            for c, engine in enumerate(self.tasks[j].private):
                if isinstance(engine, Suffix) and engine.lead is not None:
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
        (arrays shared by several, e.g. with a Mirrors copy, counted once per follower)."""
        following = [((j, c), e) for j, t in enumerate(self.tasks) for c, e in enumerate(t.private)
                     if isinstance(e, Suffix) and e.lead is not None]
        total = sum(e.kept for _, e in following)
        for m, engine in sorted(following, key=lambda f: -f[1].kept):
            if total <= self.limit:
                return
            total -= engine.kept
            engine.stop()
            self.stopped.add(m)
            out.get(m[0], {}).pop(m[1], None)

    def _keep(self, m: tuple[int, int], engine: Suffix, rows: list, offset_runs: np.ndarray | None,
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
    def _note(out: dict, m: tuple[int, int], engine: Suffix, where: tuple[int, int]) -> None:
        """m follows its lead in this chunk from the lead's row where[0]; behind when rows of the
        lead's remain after its own."""
        out.setdefault(m[0], {})[m[1]] = (engine.lead, where[0])
        if where[1]:
            engine.behind = True

    def _may_follow(self, j: int, c: int, mirrors: Mirrors) -> bool:
        """Whether core c of task j could start following: fed here, a plain small engine, not
        replaying, never stopped."""
        t = self.tasks[j]
        engine = t.private[c]
        return (t.spec.cores > 1 and (j, c) not in self.stopped and c not in mirrors.following(j)
                and not t.private_period[c] and t.own_replay[c] is None and not isinstance(engine, Suffix)
                and engine.distinct_lines <= SUFFIX_BASE_LINES)

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
                    t.private[c] = Suffix(t.private[c], t.tagged, (j2, c2))
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


def runs_with_offsets(prep: PreparedChunk) -> np.ndarray | None:
    """Which runs of a prepared chunk hold offset rows (None: no row has an offset)."""
    if not prep.offsets:
        return None
    if prep.offmask is not None:  # dense (paper mode): one pass over the mask
        return np.add.reduceat(prep.offmask, prep.starts[:-1]) > 0 if len(prep.starts) > 1 else np.zeros(0, bool)
    out = np.zeros(len(prep.starts) - 1, dtype=bool)
    out[np.searchsorted(prep.starts, prep.offrows, side="right") - 1] = True
    return out


def run_within(inner: np.ndarray, outer: np.ndarray, lengths: np.ndarray) -> tuple[int, int] | None:
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


class Suffix:
    """The engine of a private trace that follows another (Suffixes): its accesses since it
    began are the lead's since then, so its distances come from the lead's (runs.suffix_scan).
    An access whose lead distance d is below the number of lines touched since then reused one
    of them: nothing before counts, so its distance is d in both traces (every line between the
    two uses was touched since then). The others are the first touches since then: cold unless
    the engine as it was (`origin`, never fed while following) held the line; then the lines
    touched since, plus the held lines above it not touched since, which `ahead` (a copy of it
    fed only the held first touches) counts. The accesses are kept (`parts`): the engine's state
    is made from them only when it is needed (`materialise`: its trace stopped following, or a
    copy that Mirrors gave another core is fed something else); at the end only the counts
    are. Copies share `origin` and the parts so far; one relabelled for another core
    (`relabel`) relabels its small `base` and `ahead` at once, and its engine when it is made,
    after the parts that came before."""

    def __init__(self, origin, tagged: bool, lead: tuple[int, int]) -> None:
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

    def copy(self) -> Suffix:
        """A copy in the same state (following the same lead)."""
        twin = Suffix.__new__(Suffix)
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
