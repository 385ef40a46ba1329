"""Oracle for DRAM traffic: one LRU cache level with dirty bits, fed a whole access stream.

The level sees every access of its stream (as SDCM and the write-back profiles assume: the last level
reading the shared trace), places lines as the machine does (analysis/hitrates/set_index.py: virtual,
physical with seeded random frames, hashed), allocates on every miss (write-allocate) and writes a dirty
line back when it evicts it. It counts misses (lines read from DRAM) and write-backs (lines written to
DRAM); lines still dirty at the end are not written back. Independent of the reuse engine and of the
write-back profiles (analysis/profiles/writebacks.py), which tests/test_writebacks.py compares with it.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

import numba
import numpy as np

from analysis.hitrates.lru_sets import geometry
from analysis.hitrates.set_index import placement, set_of
from analysis.profiles.kernel_ops import STORE_TAG
from machines.model import CacheLevel

_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)


class DirtySets(NamedTuple):
    """Every way of every set: its line, last use, dirty bit; counters = [clock, misses, write-backs]."""

    tags: np.ndarray
    stamps: np.ndarray
    dirty: np.ndarray
    counters: np.ndarray


@numba.njit(cache=True, nogil=True)
def _feed(c, lines, sets, ways, place):
    """LRU with write-allocate and write-back over tagged line ids (STORE_TAG on stores)."""
    mode, page_bits, word = place
    for i in range(lines.shape[0]):
        line = lines[i] & ~STORE_TAG
        store = lines[i] != line
        base = set_of(mode, page_bits, word, line, sets) * ways
        c.counters[0] += 1
        victim, oldest, hit = base, c.stamps[base], False
        for w in range(base, base + ways):
            if c.tags[w] == line:
                hit, victim = True, w
                break
            if c.stamps[w] < oldest:
                oldest, victim = c.stamps[w], w
        if not hit:
            c.counters[1] += 1
            if c.tags[victim] != _EMPTY and c.dirty[victim]:
                c.counters[2] += 1
            c.tags[victim] = line
            c.dirty[victim] = False
        c.stamps[victim] = c.counters[0]
        c.dirty[victim] = c.dirty[victim] or store


class WritebackSim:
    """One cache level of `level`'s geometry and placement, counting misses and dirty evictions."""

    def __init__(self, level: CacheLevel, page_bytes: int = 4096, seed: int = 0) -> None:
        self.sets, self.ways = geometry(level, 0)
        n = self.sets * self.ways
        self.state = DirtySets(np.full(n, _EMPTY, dtype=np.uint64), np.zeros(n, dtype=np.int64),
                               np.zeros(n, dtype=np.bool_), np.zeros(3, dtype=np.int64))
        p = placement([level], [self.sets], page_bytes, seed)
        self.place = (int(p.mode[0]), np.uint64(p.page_bits[0]), np.uint64(p.seed[0]))

    def feed(self, lines: np.ndarray) -> None:
        """Accesses in order: line ids carrying STORE_TAG on stores."""
        _feed(self.state, np.ascontiguousarray(lines, dtype=np.uint64), self.sets, self.ways, self.place)

    @property
    def misses(self) -> int:
        return int(self.state.counters[1])

    @property
    def writebacks(self) -> int:
        return int(self.state.counters[2])


def simulate_writebacks(batches: Iterable[np.ndarray], level: CacheLevel, page_bytes: int = 4096,
                        seed: int = 0) -> tuple[int, int]:
    """(misses, write-backs) of one level fed every batch of tagged line ids in order."""
    sim = WritebackSim(level, page_bytes, seed)
    for lines in batches:
        sim.feed(lines)
    return sim.misses, sim.writebacks
