"""Per-set-class SHARDS stacks of source sampling (analysis/sampling/source.py), and the class estimates.

A line's set class at b bits is its id's low b bits (analysis/profiles/set_classes.py); its class distance is its
distance in the trace filtered to its class. The SHARDS hash picks lines whatever their class, so the sampled
lines of one class are a SHARDS sample of that class's lines: a sample's distance in the stack of the sampled
lines of its own class, divided by the rate, estimates its class distance as the plain stack's does its plain
distance. `ClassShards` keeps one stack per (core, class) and, when class CRDs are wanted, one per class of
the shared trace. It takes the samples from the plain kernels' log (shards_kernel.Log: every core's samples in
its order, each with its private gap, whether it is a coherence miss, and its shared turn gap) after each kernel
call, so the plain kernels only append to the log and the class stacks need no merge or sharer sets of their
own: a coherence miss concerns one line, which stays in its class, so a class PRD counts the plain one's. A
class stack's state is a function of the plain stack's (its lines in the same LRU order), so the replay of
periodic stretches (replay.py) repeats the class counts with the plain ones. At rate 1 the class profiles are
the exact ClassEngine's (tests/test_sampled_classes.py). With windows, p plain private stacks (and one shared
when the class CRDs have windows) are fed the same samples, so a far sample's plain distance comes with its
class distance: those with few class lines are tallied per (class distance, plain distance bin) for the far
tail's posterior (class_tail.py).

Memory: the p * 2^b private stacks share one table size and time axis (stacks.Stacks), so they take
p * 2^b times the largest class stack's memory; a column walk, which puts every line of a core into one
class, makes that the core's whole sample.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.profileset import ReuseProfile
from analysis.sampling.shards.class_tail import FEW, PLAIN_BINS, ClassEstimate, ClassTail, plain_bin
from analysis.sampling.shards.stacks import (DONE, GROW_TAIL, RENUMBER, StackArrays, Stacks, hot_helper, hot_loop, load_regs,
                                      renumber, room, store_regs, touch_row, uncount)


class ClassConfig(NamedTuple):
    """The scalars of one width and core count: classes (2^b), their mask, the windows' lookbacks (private
    positions, shared turns), whether private and shared windows are measured, whether shared stacks are kept;
    few: far samples with a class count below it are tallied with their plain count (class_tail.py)."""

    classes: int
    mask: np.uint64
    look: int
    s_look: int
    windows: bool
    s_windows: bool
    shared: bool
    few: int


class ClassTallies(NamedTuple):
    """Per core, the class coherence misses (coh), [near samples, their coherence misses, far coherence misses]
    (tally, near: gap at most the class windows' lookback) and far samples per class distance + 1 (tail; 0:
    coherence miss or cold) when that is at least cfg.few, else per (class distance, bin of the plain distance)
    (pairs; class_tail.plain_bin); the shared trace's far samples likewise (s_tail, s_pairs)."""

    coh: np.ndarray
    tally: np.ndarray
    tail: np.ndarray
    s_tail: np.ndarray
    pairs: np.ndarray
    s_pairs: np.ndarray


class PlainStacks(NamedTuple):
    """The plain stacks that give a far sample's plain distance (windows only): private (stack core) and shared."""

    pv: StackArrays
    sh: StackArrays


@numba.njit(cache=True, nogil=True)
def drain_log(log, resume, pv, sh, pl, ct, cfg):
    """Feed the logged samples from resume[0] on to their class stacks (pv: private, stack core * classes +
    class, histogram row core; sh: shared, stack class) and, with windows, to the plain stacks (pl:
    PlainStacks); tally coherence misses and far samples. Returns DONE or what to grow (resume = [entry, stacks
    (0 private, 1 shared, 2 plain private, 3 plain shared), stack])."""
    while True:
        status = _drain(log, resume, pv, sh, pl, ct, cfg)
        if status != RENUMBER:
            return status
        if resume[1] == 0:
            renumber(pv, resume[2])
        elif resume[1] == 1:
            renumber(sh, resume[2])
        elif resume[1] == 2:
            renumber(pl.pv, resume[2])
        else:
            renumber(pl.sh, resume[2])


@hot_helper
def _room(st, e, regs, tail, grows):
    """room() for stack e, or GROW_TAIL when its next distance may not fit the tail (grows: the tail is by
    distance)."""
    status = room(regs, st.bits.shape[1] * 64)
    if status == DONE and grows and regs.live + 1 >= tail.shape[1]:
        status = GROW_TAIL
    return status


@hot_loop
def _drain(log, resume, pv, sh, pl, ct, cfg):
    """drain_log's loop; also stops with RENUMBER (resume says which stack)."""
    s_win = cfg.s_windows
    for i in range(resume[0], log.n[0]):
        c, x = log.core[i], log.line[i]
        k = np.int64(x & cfg.mask)
        e = c * cfg.classes + k
        regs = load_regs(pv, e)
        p_regs = load_regs(pl.pv, c if cfg.windows else 0)
        status = _room(pv, e, regs, ct.tail, cfg.windows)
        if status == DONE and cfg.windows:
            status = room(p_regs, pl.pv.bits.shape[1] * 64)
            if status != DONE:
                resume[0], resume[1], resume[2] = i, 2, c
                return status
        if status != DONE:
            resume[0], resume[1], resume[2] = i, 0, e
            return status
        s_regs = load_regs(sh, k if cfg.shared else 0)
        q_regs = load_regs(pl.sh, 0)
        if cfg.shared:
            status = _room(sh, k, s_regs, ct.s_tail, s_win)
            if status != DONE:
                resume[0], resume[1], resume[2] = i, 1, k
                return status
            if s_win:
                status = room(q_regs, pl.sh.bits.shape[1] * 64)
                if status != DONE:
                    resume[0], resume[1], resume[2] = i, 3, 0
                    return status
        _private(log, i, pv, pl.pv, ct, cfg, c, e, x, regs, p_regs)
        if cfg.shared:
            _shared(log, i, sh, pl.sh, ct, cfg, k, x, s_regs, q_regs)
    resume[0] = log.n[0]
    return DONE


@hot_helper
def _private(log, i, pv, pp, ct, cfg, c, e, x, regs, p_regs):
    """Entry i on its private class stack e (histogram row c) and, with windows, on core c's plain stack pp:
    its class distance, moved to cold when the plain kernel found a coherence miss (stacks.uncount), and its far tally."""
    slot, d, regs = touch_row(pv, e, x, regs, c)
    store_regs(pv, e, regs)
    coh = log.coh[i] != 0 and d >= 0
    if coh:
        uncount(pv, c, d)
        ct.coh[c] += 1
    if not cfg.windows:
        return
    _, big, p_regs = touch_row(pp, c, x, p_regs, c)
    store_regs(pp, c, p_regs)
    gap = log.gap[i]
    if 0 <= gap <= cfg.look:
        ct.tally[c, 0] += 1
        ct.tally[c, 1] += coh
    else:
        ct.tally[c, 2] += coh
        _far(ct.tail, ct.pairs, c, -1 if coh else d, big, cfg.few)


@hot_helper
def _far(tail, pairs, row, d, big, few):
    """A far sample of class distance d (-1: cold or coherence miss) and plain distance big into row's tail
    (d at least few, or cold) or pairs."""
    if 0 <= d < few:
        pairs[row, d, plain_bin(big)] += 1
    else:
        tail[row, d + 1] += 1


@hot_helper
def _shared(log, i, sh, sp, ct, cfg, k, x, regs, q_regs):
    """Entry i on the shared stack of its class k and, with shared windows, on the plain shared stack sp, and
    its far tally."""
    slot, d, regs = touch_row(sh, k, x, regs, 0)
    store_regs(sh, k, regs)
    if not cfg.s_windows:
        return
    _, big, q_regs = touch_row(sp, 0, x, q_regs, 0)
    store_regs(sp, 0, q_regs)
    tg = log.tg[i]
    if not 0 <= tg <= cfg.s_look:
        _far(ct.s_tail, ct.s_pairs, 0, d, big, cfg.few)


class ClassShards:
    """The per-set-class SHARDS stacks of one width and core count (a sink of shards_kernel.ShardsStreams:
    `drain` takes its log); shared: keep the shared trace's class stacks (class CRDs wanted, p > 1); with
    windows, plain stacks too, for the far samples' plain distances (class_tail.py)."""

    def __init__(self, bits: int, p: int, shared: bool, windows: bool, look: int, s_windows: bool,
                 s_look: int) -> None:
        classes = 1 << bits
        self.bits, self.p = bits, p
        self.private = Stacks(p * classes, rows=p)
        self.shared = Stacks(classes, rows=1) if shared and p > 1 else None
        self._idle = self.shared if self.shared is not None else Stacks(1)  # the kernel's sh when none is kept
        s_windows = s_windows and self.shared is not None
        self.plain = [Stacks(p) if windows else Stacks(1), Stacks(1)]  # private, shared: the plain distances
        self.coh, self.tally = np.zeros(p, np.int64), np.zeros((p, 3), np.int64)
        self.tail, self.s_tail = np.zeros((p, 64), np.int64), np.zeros((1, 64), np.int64)
        few = FEW if windows else 0
        self.pairs = np.zeros((p if windows else 0, few, PLAIN_BINS), np.int64)
        self.s_pairs = np.zeros((1 if s_windows else 0, few, PLAIN_BINS), np.int64)
        self.resume = np.zeros(3, np.int64)
        self.config = ClassConfig(classes, np.uint64(classes - 1), look, s_look, windows, s_windows,
                                  self.shared is not None, few)

    def drain(self, log) -> None:
        """The log's samples onto the class stacks."""
        self.resume[:] = 0
        while True:
            tallies = ClassTallies(self.coh, self.tally, self.tail, self.s_tail, self.pairs, self.s_pairs)
            status = drain_log(log, self.resume, self.private.arrays(), self._idle.arrays(),
                               PlainStacks(self.plain[0].arrays(), self.plain[1].arrays()), tallies, self.config)
            if status == DONE:
                return
            if status == GROW_TAIL:
                self.tail, self.s_tail = (np.concatenate([t, np.zeros_like(t)], axis=1)
                                          for t in (self.tail, self.s_tail))
            else:
                which = int(self.resume[1])
                (self.private, self._idle, *self.plain)[which].grow(status)

    def counts(self) -> list[np.ndarray]:
        """The arrays the samples add counts to (the live arrays: replay.ShardsReplay repeats them)."""
        out = [self.private.hist, self.private.hist_sum, self.coh, self.tally, self.tail, self.s_tail, self.pairs,
               self.s_pairs]
        if self.shared is not None:
            out += [self.shared.hist, self.shared.hist_sum]
        return out

    def norm(self) -> list[np.ndarray]:
        """Nothing for replay.ShardsReplay to compare: a class stack's state follows the plain stack's."""
        return []

    def raw(self) -> tuple[list[ReuseProfile], ReuseProfile | None]:
        """Every core's class SHARDS profile (coherence misses counted cold) and the shared trace's (None: not
        kept)."""
        prd = []
        for c in range(self.p):
            prof = self.private.profile(c)
            prof.coherence = int(self.coh[c])
            prd.append(prof)
        if self.shared is None:
            return prd, None
        crd = self.shared.profile(0)
        crd.coherence = 0  # as the plain CRD: coherence misses are the private levels'
        return prd, crd

    def tails(self) -> tuple[list[ClassTail], ClassTail]:
        """The far samples (class_tail.ClassTail): per core, and the shared trace's."""
        def of(row: np.ndarray, pairs: np.ndarray) -> ClassTail:
            nz = np.flatnonzero(row)
            return ClassTail(nz - 1, row[nz], pairs, self.bits)

        none = np.zeros((0, PLAIN_BINS), np.int64)
        s_pairs = self.s_pairs[0] if self.s_pairs.shape[0] else none
        return ([of(self.tail[c], self.pairs[c] if self.pairs.shape[0] else none) for c in range(self.p)],
                of(self.s_tail[0], s_pairs))


def class_estimate(est, near: dict[int, int], tail: ClassTail, tally=None) -> ClassEstimate:
    """A windows.Estimate as a ClassEstimate (class_tail.py): the near class distances measured in the windows
    and the far SHARDS samples' (a class distance is never longer than the plain one, so every near reuse's is
    measurable); tally: the SHARDS samples' [near, near coherence misses, far coherence misses] when the class
    windows' lookback is not the estimate's (None: the same split, est's counts)."""
    out = ClassEstimate(est.look)
    out.__dict__.update(est.__dict__)
    out.near = near
    out.tail_keys, out.tail_cnt, out.pairs, out.bits = tail
    if tally is not None:
        out.shards_near, out.shards_near_coh, out.tail_coh = (int(x) for x in tally)
    return out
