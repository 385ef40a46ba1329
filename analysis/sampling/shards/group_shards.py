"""Per-instance CRDs of source sampling (analysis/sampling/source.py): a shared level whose instances each serve a
group of cores (an L3 per 4-core CCX).

Instance i of a grouping (analysis.profiles.groups: each thread's instance) sees the shared trace filtered to its
threads, with write-invalidate coherence between instances (groups.GroupCrds). The SHARDS hash picks lines whatever
their thread, so the samples of instance i's threads are exactly that filtered trace's accesses to the sampled
lines, in order: `GroupShards` keeps one SHARDS stack per instance (stacks.Stacks, row i) and takes the samples
from the plain kernels' log (shards_kernel.Log: every core's samples in the shared trace's order, with their store
flags), as the per-set-class stacks do (class_shards.py).

Coherence (only when the plain kernels tag stores, i.e. with coherence): a directory of the sampled lines that
were stored keeps each one's last store as a sequence number of the log; each instance stack's slot keeps
(`aux`) the sequence number of the instance's last access to its line. An access is stale when the line's last
store is later than the instance's last access (a store by another instance since then: the Directory's sharer
rule, as every store by this instance is an access of it), and a stale access whose line is in the instance's
stack (finite distance) is a coherence miss: counted cold, as ReuseEngine.feed's `stale` does.

Estimate: each instance's SHARDS profile scaled to its exact access count (the sum of its threads' private trace
lengths; binning.scale_profile, SHARDS-adj). The time windows that measure the plain CRD's near reuses exactly are
not used here (no per-instance windows): an instance CRD feeds a last level (megabytes, hundreds of thousands of
lines), whose hit rate depends on distances the SHARDS sample resolves. At rate 1 the profiles are groups.GroupCrds'
bit for bit (tests/test_sampled_groups.py); the replay of periodic stretches (replay.py) compares the instance
stacks' state too (`norm`) and repeats their counts (`counts`).

Memory: per grouping one Stacks of as many rows as instances (they share a table size: instances times the largest
instance stack's memory, at most the sampled distinct lines each) and the directory (at most the sampled distinct
lines); memory.check_sampled_memory counts both.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.profileset import ReuseProfile
from analysis.sampling.binning import scale_profile
from analysis.sampling.hashing import slot_of
from analysis.sampling.shards.stacks import (
    DONE,
    EMPTY,
    RENUMBER,
    Stacks,
    hot_helper,
    hot_loop,
    load_regs,
    renumber,
    room,
    store_regs,
    touch,
    uncount,
)

GROW_DIRECTORY = 8  # beyond stacks' statuses: the directory of stored lines must grow
DIRECTORY_LOAD = 0.6


class StoreDirectory(NamedTuple):
    """The sampled lines stored so far: keys (EMPTY: free), each one's last store (log sequence number); state =
    [keys held, most keys the table holds, next sequence number]."""

    keys: np.ndarray
    last: np.ndarray
    state: np.ndarray


def store_directory(size: int = 64) -> StoreDirectory:
    """An empty StoreDirectory of `size` slots (a power of two)."""
    return StoreDirectory(np.full(size, EMPTY, np.uint64), np.zeros(size, np.int64),
                          np.array([0, int(size * DIRECTORY_LOAD), 0], np.int64))


@numba.njit(cache=True, nogil=True)
def regrow_directory(old, new):
    """Every key of `old` (with its last store) into the empty, larger `new`; new.state takes old's counts."""
    mask = np.uint64(new.keys.shape[0] - 1)
    for s in range(old.keys.shape[0]):
        x = old.keys[s]
        if x == EMPTY:
            continue
        slot = slot_of(x, mask)
        while new.keys[slot] != EMPTY:
            slot = (slot + np.uint64(1)) & mask
        new.keys[slot], new.last[slot] = x, old.last[s]
    new.state[0], new.state[2] = old.state[0], old.state[2]


@numba.njit(cache=True, nogil=True)
def drain_groups(log, resume, inst, st, dr, coherent):
    """Feed the logged samples from resume[0] on to their instance's stack (inst: each core's instance; st: the
    instance stacks; dr: the StoreDirectory, with coherence). Returns DONE or what to grow (resume = [entry,
    stack])."""
    while True:
        status = _drain(log, resume, inst, st, dr, coherent)
        if status != RENUMBER:
            return status
        renumber(st, resume[1])


@hot_loop
def _drain(log, resume, inst, st, dr, coherent):
    """drain_groups' loop; also stops with RENUMBER (resume[1]: the stack)."""
    for i in range(resume[0], log.n[0]):
        e = inst[log.core[i]]
        regs = load_regs(st, e)
        status = room(regs, st.bits.shape[1] * 64)
        if status == DONE and coherent and dr.state[0] + 1 > dr.state[1]:
            status = GROW_DIRECTORY
        if status != DONE:
            resume[0], resume[1] = i, e
            return status
        x = log.line[i]
        slot, d, regs = touch(st, e, x, regs)
        store_regs(st, e, regs)
        if coherent:
            _coherence(st, dr, e, slot, x, d, log.st[i] != 0)
    resume[0] = log.n[0]
    return DONE


@hot_helper
def _coherence(st, dr, e, slot, x, d, store):
    """Instance e's access to line x (its stack slot, distance d): a coherence miss when a store by another
    instance came after e's last access and the line is in e's stack (moved to the cold slot); its last access
    and, for a store, the line's last store become this access."""
    seq = dr.state[2]
    dr.state[2] = seq + 1
    mask = np.uint64(dr.keys.shape[0] - 1)
    h = slot_of(x, mask)
    while dr.keys[h] != x and dr.keys[h] != EMPTY:
        h = (h + np.uint64(1)) & mask
    if d >= 0 and dr.keys[h] == x and dr.last[h] > st.aux[e, slot]:
        uncount(st, e, d)
        st.state[e, 3] += 1
    st.aux[e, slot] = seq
    if store:
        if dr.keys[h] != x:
            dr.keys[h] = x
            dr.state[0] += 1
        dr.last[h] = seq


class GroupShards:
    """The per-instance SHARDS stacks of one grouping (a sink of shards_kernel.ShardsStreams: `drain` takes its
    log); coherent: write-invalidate between the instances (the log carries store flags)."""

    def __init__(self, grouping: tuple[int, ...], coherent: bool) -> None:
        self.grouping = tuple(int(g) for g in grouping)
        self.inst = np.asarray(self.grouping, dtype=np.int64)  # per thread (core of the core count)
        self.n = int(self.inst.max()) + 1
        self.stacks = Stacks(self.n)
        self.directory = store_directory()
        self.coherent = coherent
        self.resume = np.zeros(2, np.int64)

    def drain(self, log) -> None:
        """The log's samples onto the instance stacks."""
        self.resume[:] = 0
        while True:
            status = drain_groups(log, self.resume, self.inst, self.stacks.arrays(), self.directory, self.coherent)
            if status == DONE:
                return
            if status == GROW_DIRECTORY:
                new = store_directory(2 * self.directory.keys.shape[0])
                regrow_directory(self.directory, new)
                self.directory = new
            else:
                self.stacks.grow(status)

    def counts(self) -> list[np.ndarray]:
        """The arrays the samples add counts to (live arrays or views: replay.ShardsReplay repeats them)."""
        return [self.stacks.hist, self.stacks.hist_sum, self.stacks.state[:, 3]]

    def norm(self) -> list[np.ndarray]:
        """The state that decides the counts to come (replay.ShardsReplay compares it at copy boundaries): per
        instance, its lines by id with their LRU rank and whether its copy is still valid."""
        st, dr = self.stacks, self.directory
        held = dr.keys != EMPTY
        d_keys, d_last = dr.keys[held], dr.last[held]
        order = np.argsort(d_keys)
        d_keys, d_last = d_keys[order], d_last[order]
        out = []
        for e in range(self.n):
            live = st.keys[e] != EMPTY
            keys, aux = st.keys[e][live], st.aux[e][live]
            by_id = np.argsort(keys)
            ranks = np.argsort(np.argsort(st.times[e][live]))
            at = np.minimum(np.searchsorted(d_keys, keys), max(len(d_keys) - 1, 0))
            stale = (d_keys[at] == keys) & (d_last[at] > aux) if len(d_keys) else np.zeros(len(keys), bool)
            out += [keys[by_id], ranks[by_id], stale[by_id]]
        return out

    def profiles(self, counters: np.ndarray, rate: float, adjust: bool) -> list[ReuseProfile]:
        """Every instance's estimated CRD, totalling its threads' accesses (counters: each core's private trace
        length)."""
        out = []
        for e in range(self.n):
            total = int(counters[self.inst == e].sum())
            out.append(scale_profile(self.stacks.profile(e), rate, total, adjust))
        return out
