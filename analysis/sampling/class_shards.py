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
the exact ClassEngine's (tests/test_sampled_classes.py).

Memory: the p * 2^b private stacks share one table size and time axis (stacks.Stacks), so they take
p * 2^b times the largest class stack's memory; a column walk, which puts every line of a core into one
class, makes that the core's whole sample.
"""
from __future__ import annotations

import copy
from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.kernel_ops import EXACT_LIMIT, bin_of
from analysis.profiles.profileset import ReuseProfile
from analysis.sampling.stacks import (DONE, GROW_TAIL, RENUMBER, Stacks, hot_helper, hot_loop, load_regs, renumber,
                                      room, store_regs, touch_row)


class ClassConfig(NamedTuple):
    """The scalars of one width and core count: classes (2^b), their mask, the windows' lookbacks (private
    positions, shared turns), whether private and shared windows are measured, whether shared stacks are kept."""

    classes: int
    mask: np.uint64
    look: int
    s_look: int
    windows: bool
    s_windows: bool
    shared: bool


class ClassTallies(NamedTuple):
    """Per core, the class coherence misses (coh), [near samples, their coherence misses, far coherence misses]
    (tally, near: gap at most the class windows' lookback) and far samples per class distance + 1 (tail; 0:
    coherence miss or cold); the shared trace's far samples per class distance + 1 (s_tail)."""

    coh: np.ndarray
    tally: np.ndarray
    tail: np.ndarray
    s_tail: np.ndarray


@numba.njit(cache=True, nogil=True)
def drain_log(log, resume, pv, sh, ct, cfg):
    """Feed the logged samples from resume[0] on to their class stacks (pv: private, stack core * classes +
    class, histogram row core; sh: shared, stack class); tally coherence misses and far samples. Returns DONE or
    what to grow (resume = [entry, 0 private / 1 shared, stack])."""
    while True:
        status = _drain(log, resume, pv, sh, ct, cfg)
        if status != RENUMBER:
            return status
        if resume[1] == 0:
            renumber(pv, resume[2])
        else:
            renumber(sh, resume[2])


@hot_loop
def _drain(log, resume, pv, sh, ct, cfg):
    """drain_log's loop; also stops with RENUMBER (resume says which stack)."""
    for i in range(resume[0], log.n[0]):
        c, x = log.core[i], log.line[i]
        k = np.int64(x & cfg.mask)
        e = c * cfg.classes + k
        regs = load_regs(pv, e)
        status = room(regs, pv.bits.shape[1] * 64)
        if status == DONE and cfg.windows and regs.live + 1 >= ct.tail.shape[1]:
            status = GROW_TAIL
        if status != DONE:
            resume[0], resume[1], resume[2] = i, 0, e
            return status
        s_regs = load_regs(sh, k if cfg.shared else 0)
        if cfg.shared:
            status = room(s_regs, sh.bits.shape[1] * 64)
            if status == DONE and cfg.s_windows and s_regs.live + 1 >= ct.s_tail.shape[1]:
                status = GROW_TAIL
            if status != DONE:
                resume[0], resume[1], resume[2] = i, 1, k
                return status
        _private(log, i, pv, ct, cfg, c, e, x, regs)
        if cfg.shared:
            _shared(log, i, sh, ct, cfg, k, x, s_regs)
    resume[0] = log.n[0]
    return DONE


@hot_helper
def _private(log, i, pv, ct, cfg, c, e, x, regs):
    """Entry i on its private class stack e (histogram row c): its class distance, moved to cold when the plain
    kernel found a coherence miss (shards_kernel._reclassify's rule), and its far tally."""
    slot, d, regs = touch_row(pv, e, x, regs, c)
    store_regs(pv, e, regs)
    coh = log.coh[i] != 0 and d >= 0
    if coh:
        bi = bin_of(d)
        pv.hist[c, bi] -= 1
        pv.hist[c, pv.hist.shape[1] - 1] += 1
        if d >= EXACT_LIMIT:
            pv.hist_sum[c, bi] -= d
        ct.coh[c] += 1
    gap = log.gap[i]
    if cfg.windows and 0 <= gap <= cfg.look:
        ct.tally[c, 0] += 1
        ct.tally[c, 1] += coh
    elif cfg.windows:
        ct.tally[c, 2] += coh
        ct.tail[c, 0 if coh else d + 1] += 1


@hot_helper
def _shared(log, i, sh, ct, cfg, k, x, regs):
    """Entry i on the shared stack of its class k, and its far tally."""
    slot, d, regs = touch_row(sh, k, x, regs, 0)
    store_regs(sh, k, regs)
    tg = log.tg[i]
    if cfg.s_windows and not 0 <= tg <= cfg.s_look:
        ct.s_tail[0, d + 1] += 1


class ClassShards:
    """The per-set-class SHARDS stacks of one width and core count (a sink of shards_kernel.ShardsStreams:
    `drain` takes its log); shared: keep the shared trace's class stacks (class CRDs wanted, p > 1)."""

    def __init__(self, bits: int, p: int, shared: bool, windows: bool, look: int, s_windows: bool,
                 s_look: int) -> None:
        classes = 1 << bits
        self.bits, self.p = bits, p
        self.private = Stacks(p * classes, rows=p)
        self.shared = Stacks(classes, rows=1) if shared and p > 1 else None
        self._idle = self.shared if self.shared is not None else Stacks(1)  # the kernel's sh when none is kept
        self.coh, self.tally = np.zeros(p, np.int64), np.zeros((p, 3), np.int64)
        self.tail, self.s_tail = np.zeros((p, 64), np.int64), np.zeros((1, 64), np.int64)
        self.resume = np.zeros(3, np.int64)
        self.config = ClassConfig(classes, np.uint64(classes - 1), look, s_look, windows,
                                  s_windows and self.shared is not None, self.shared is not None)

    def drain(self, log) -> None:
        """The log's samples onto the class stacks."""
        self.resume[:] = 0
        while True:
            status = drain_log(log, self.resume, self.private.arrays(), self._idle.arrays(),
                               ClassTallies(self.coh, self.tally, self.tail, self.s_tail), self.config)
            if status == DONE:
                return
            if status == GROW_TAIL:
                self.tail, self.s_tail = (np.concatenate([t, np.zeros_like(t)], axis=1)
                                          for t in (self.tail, self.s_tail))
            else:
                (self.private if self.resume[1] == 0 else self._idle).grow(status)

    def counts(self) -> list[np.ndarray]:
        """The arrays the samples add counts to (the live arrays: replay.ShardsReplay repeats them)."""
        out = [self.private.hist, self.private.hist_sum, self.coh, self.tally, self.tail, self.s_tail]
        if self.shared is not None:
            out += [self.shared.hist, self.shared.hist_sum]
        return out

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

    def tails(self) -> tuple[list[tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray]]:
        """The far samples' class distances (-1: coherence miss or cold) and their counts, ascending: per core,
        and the shared trace's."""
        def of(row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            nz = np.flatnonzero(row)
            return nz - 1, row[nz]

        return [of(self.tail[c]) for c in range(self.p)], of(self.s_tail[0])


def class_estimate(est, near: dict[int, int], tail: tuple[np.ndarray, np.ndarray], tally=None):
    """A copy of a windows.Estimate with the class distances in its place: the near ones measured in the windows
    and the far SHARDS samples' (a class distance is never longer than the plain one, so every near reuse's is
    measurable); tally: the SHARDS samples' [near, near coherence misses, far coherence misses] when the class
    windows' lookback is not the estimate's (None: the same split, est's counts)."""
    out = copy.copy(est)
    out.near = near
    out.tail_keys, out.tail_cnt = tail
    if tally is not None:
        out.shards_near, out.shards_near_coh, out.tail_coh = (int(x) for x in tally)
    return out
