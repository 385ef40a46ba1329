"""Column walks whose lines conflict out of L1 and L2: which level serves those refills (the walk pass's levels below L1).

T_mem prices every L1 miss at the serving level's reciprocal throughput, the rate of a stream that the
hardware prefetchers fetch ahead; a column walk whose lines spread over the sets keeps many misses in
flight and costs about the same. A column walk whose rows are a power of two apart puts all its lines into
a few sets: they would fit L2's capacity but not its sets, so they keep coming from L3, and with few ways
per set only a few misses are in flight (machines/microbench/walks.c: 3.5-3.8 ns per load on an AMD Zen 3
guest, 4.7-5.0 on a 16-core Xeon guest, against 2.0 and 2.9 ns per line of a stream; atax at N = 1024 runs
its column loop at 7.9 and 5.4 ns per element there, 1.3 and 1.1 with its rows padded by one line).

The walk pass (analysis/runtime/l1_walks.py) streams the sequential trace through the machine's caches,
each a set-associative LRU (cachesim.LevelSim, placed by `as_placed`), each level seeing the misses of the
one above, beside a fully associative LRU of L2's size; `DeeperLevels` here is the part below L1. A conflict
refill is a load that is not its line's first touch (cold_lines prices those), walks a column (cold_lines'
rule: half a page or more from the same load's previous address), misses L1 and L2, and would have hit the
fully associative L2. They are counted by the level that served them. Memory grows with the distinct
lines and the caches' sizes, not with the trace.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from analysis.hitrates.cachesim import LevelSim
from common.errors import InputError
from machines.model import CacheLevel


def as_placed(level: CacheLevel) -> CacheLevel:
    """The level indexed by virtual address unless hashed, as if the OS had backed the arrays with consecutive
    frames. Real frames need not be consecutive, but only heavily overfilled sets cost: 2mm at N = 256 walks
    columns 2 KiB apart whose 256 lines fill 32 of L2's sets exactly, and runs at L2 speed on the Zen 3 guest,
    where a random frame map would send 2.3 M of its loads to L3 and predict it 51 % slow instead of 15 %;
    atax's columns overfill their sets 8 to 16 times under either placement."""
    return replace(level, indexing="virtual") if level.indexing == "physical" else level


class DeeperLevels:
    """The levels below L1 (placed by `as_placed`) and a fully associative LRU of L2's size beside L2, fed the L1
    misses in trace order; tallies, per serving level, the misses marked as column-walk loads that conflicted."""

    def __init__(self, caches: tuple[CacheLevel, ...], page_bytes: int = 4096):
        if len(caches) < 3:
            raise InputError("conflict refills need three cache levels (L1, L2 and one that serves them)")
        self.levels = [LevelSim(as_placed(c), 1, page_bytes) for c in caches[1:]]
        self.roomy_l2 = LevelSim(replace(caches[1], associativity=0), 1)
        self.counts = np.zeros(len(caches) + 1, dtype=np.int64)   # index: serving level; len(caches) = RAM

    def serve(self, lines: np.ndarray, marked: np.ndarray) -> None:
        """Look up the L1 misses `lines` (in trace order) level by level and count the `marked` ones that missed
        L2, would have hit the roomy L2, by serving level."""
        served = np.full(len(lines), len(self.counts) - 1, dtype=np.int64)   # RAM unless a level hits
        roomy = self.roomy_l2.access(lines, np.zeros(len(lines), dtype=np.int64))
        reaching = np.arange(len(lines))
        for i, sim in enumerate(self.levels, start=1):
            hit = sim.access(lines[reaching], np.zeros(len(reaching), dtype=np.int64))
            served[reaching[hit]] = i
            reaching = reaching[~hit]
            if not len(reaching):
                break
        self.counts += np.bincount(served[marked & roomy & (served > 1)], minlength=len(self.counts))
