"""Exact replays of periodic stretches: copies of a trace's repeating window after the first
two are compared, not fed, and the repeat's counts are added again (Replay for a core count's
shared trace, PrivateReplay for one private trace; loop_period says where loops repeat)."""
from __future__ import annotations

from typing import Any

import numpy as np

from analysis.profiles.interleave import Batch
from instrument.trace_types import SCHED_BARRIER, LoopInstance, TraceInfo


def loop_period(info: TraceInfo, longest: int = 64) -> int:
    """The smallest n (at most `longest`) such that every loop instance i + n has the same loop,
    trip count, schedule and chunk as instance i (0: none, or fewer than 3n instances)."""
    loops = sorted(info.loops, key=lambda lp: lp.instance)
    sig = np.array([_signature(lp) for lp in loops], dtype=np.int64)
    for n in range(1, min(longest, len(sig) // 3) + 1):
        if np.array_equal(sig[n:], sig[:-n]):
            return n
    return 0




def _signature(lp: LoopInstance) -> tuple[int, int, int, int]:
    """What must repeat: a construct's loop, trip count, schedule and chunk. Every barrier record is alike (a
    region's fork and a barrier differ in their trip count, instrument/FORMAT.md): a time loop inside one
    region repeats from its first step although the region starts once. Copies are compared before they
    are replayed, so a looser signature costs a comparison, never a wrong profile."""
    if lp.schedule == SCHED_BARRIER:
        return (lp.loop_id, 0, SCHED_BARRIER, 0)
    return (lp.loop_id, lp.trip_count, lp.schedule, lp.chunk)


class Copies:
    """The bookkeeping shared by the replays of a shared (Replay) and a private (PrivateReplay)
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


class Replay(Copies):
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
    compare, and a copy that differs is fed, with the part of it that was held back (Copies).
    """

    def __init__(self, task: Any) -> None:
        """task: the CoreCountTask (analysis/profiles/task.py, which imports this module) whose CRD it feeds."""
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
        """The CRD's histogram counters, the coherence misses and the upgrades found so far (copies)."""
        t = self.task
        out = list(t.shared.tally())
        if t.misses is not None:
            out += [t.misses.moved.copy(), t.misses.moved_sum.copy()]
        upgrades = t.upgrade_counters()
        if upgrades is not None:
            out.append(upgrades.copy())
        return out

    def _skip(self) -> None:
        """A copy not fed: its private distances are not needed."""
        t = self.task
        if t.misses is not None:
            for c in range(t.spec.cores):
                t.dlanes.take(c, self.period // t.spec.cores)

    def _add(self, k: int) -> None:
        """The repeat's CRD counts, coherence misses and upgrades, k times (a copy's sharer sets repeat, so its
        upgrades do)."""
        t = self.task
        t.shared.add_tally(self.delta[0] * k, self.delta[1] * k)
        if t.misses is not None:
            t.misses.moved += self.delta[2] * k
            t.misses.moved_sum += self.delta[3] * k
        upgrades = t.upgrade_counters()
        if upgrades is not None:
            upgrades += self.delta[4] * k

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


class PrivateReplay(Copies):
    """Exact replay of the periodic stretches of one private trace, for its engine: as in Replay,
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
