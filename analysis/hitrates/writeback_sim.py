"""Oracle for DRAM traffic: LRU cache levels with dirty bits, fed a whole access stream.

The level sees every access of its stream (as SDCM and the write-back profiles assume: the last level
reading the shared trace), places lines as the machine does (analysis/hitrates/set_index.py: virtual,
physical with seeded random frames, hashed), allocates on every miss (write-allocate) and writes a dirty
line back when it evicts it. It counts misses (lines read from DRAM) and write-backs (lines written to
DRAM); lines still dirty at the end are not written back. Independent of the reuse engine and of the
write-back profiles (analysis/profiles/writebacks.py), which tests/test_writebacks.py compares with it.

A last level whose instances each serve a group of cores (an L3 per CCX) is simulated as one cache per
occupied instance, access i going to the instance of its thread (`simulate_dram_like`: the threads placed
as analysis/profiles/groups.grouping_of places them). Write-invalidate between them: a store removes the
line from every other instance, which frees its way; a dirty copy moves to the storer cache to cache and
is not written back; a load leaves the other copies as they are (a dirty one stays dirty there, as in
MOESI's Owned state). Every miss counts as a DRAM read, also one another instance could have served.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

import numba
import numpy as np
import pandas as pd

from analysis.hitrates.dram import INSTANCE_COLUMNS
from analysis.hitrates.lru_sets import geometry
from analysis.hitrates.set_index import FRAME_SEEDS, VIRTUAL, placement, set_of
from analysis.profiles.groups import grouping_of
from analysis.profiles.kernel_ops import STORE_TAG
from analysis.profiles.private_traces import InterleaveSpec, mimic, resolve_mode
from common.errors import InputError
from machines.model import CacheLevel, Machine

_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)


class DirtySets(NamedTuple):
    """Every way of every set of every instance (instance i's ways first at i x sets x ways): its line, last
    use, dirty bit; counters = [clock, then misses and write-backs of each instance]."""

    tags: np.ndarray
    stamps: np.ndarray
    dirty: np.ndarray
    counters: np.ndarray


@numba.njit(cache=True, nogil=True)
def _drop_elsewhere(c, line, own, base, span, ways):
    """A store by instance `own`: remove `line` from the same set of every other instance (span: the
    ways of one instance); a dirty copy moves to the storer cache to cache, nothing is written back."""
    for o in range(c.counters.shape[0] // 2):
        if o == own:
            continue
        first = o * span + base
        for w in range(first, first + ways):
            if c.tags[w] == line:
                c.tags[w] = _EMPTY
                c.stamps[w] = 0
                c.dirty[w] = False
                break


@numba.njit(cache=True, nogil=True)
def _feed(c, lines, inst, shape, place):
    """LRU with write-allocate and write-back over tagged line ids (STORE_TAG on stores), access i in
    instance inst[i]; shape = (sets, ways, coherent): with coherent, a store invalidates the other copies."""
    sets, ways, coherent = shape
    mode, page_bits, word = place
    span = sets * ways
    for i in range(lines.shape[0]):
        line = lines[i] & ~STORE_TAG
        store = lines[i] != line
        own = inst[i]
        s = set_of(mode, page_bits, word, line, sets) * ways
        if store and coherent:
            _drop_elsewhere(c, line, own, s, span, ways)
        base = own * span + s
        c.counters[0] += 1
        victim, oldest, hit = base, c.stamps[base], False
        for w in range(base, base + ways):
            if c.tags[w] == line:
                hit, victim = True, w
                break
            if c.stamps[w] < oldest:
                oldest, victim = c.stamps[w], w
        if not hit:
            c.counters[1 + 2 * own] += 1
            if c.tags[victim] != _EMPTY and c.dirty[victim]:
                c.counters[2 + 2 * own] += 1
            c.tags[victim] = line
            c.dirty[victim] = False
        c.stamps[victim] = c.counters[0]
        c.dirty[victim] = c.dirty[victim] or store


class WritebackSim:
    """`instances` copies of a cache level of `level`'s geometry and placement (one frame map for all),
    counting each one's misses and dirty evictions; with `coherent`, a store by one instance removes the
    line from the others (write-invalidate; a dirty copy moves cache to cache, no write-back)."""

    def __init__(self, level: CacheLevel, page_bytes: int = 4096, seed: int = 0, instances: int = 1,
                 coherent: bool = True) -> None:
        if instances < 1:
            raise InputError(f"write-back simulator of {level.name}: {instances} instances; give at least 1")
        self.sets, self.ways = geometry(level, 0)
        self.coherent = coherent
        n = instances * self.sets * self.ways
        self.state = DirtySets(np.full(n, _EMPTY, dtype=np.uint64), np.zeros(n, dtype=np.int64),
                               np.zeros(n, dtype=np.bool_), np.zeros(1 + 2 * instances, dtype=np.int64))
        p = placement([level], [self.sets], page_bytes, seed)
        self.place = (int(p.mode[0]), np.uint64(p.page_bits[0]), np.uint64(p.seed[0]))

    def feed(self, lines: np.ndarray, inst: np.ndarray | None = None) -> None:
        """Accesses in order: line ids carrying STORE_TAG on stores, and each one's instance (default 0)."""
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        inst = np.zeros(len(lines), np.int64) if inst is None else np.ascontiguousarray(inst, dtype=np.int64)
        n = (self.state.counters.shape[0] - 1) // 2
        if len(inst) != len(lines) or (len(inst) and not 0 <= inst.min() <= inst.max() < n):
            raise InputError(f"write-back simulator: {len(lines)} accesses and {len(inst)} instance ids, which "
                             f"must be 0 to {n - 1}")
        _feed(self.state, lines, inst, (self.sets, self.ways, self.coherent), self.place)

    @property
    def misses(self) -> int:
        return int(self.state.counters[1::2].sum())

    @property
    def writebacks(self) -> int:
        return int(self.state.counters[2::2].sum())

    def per_instance(self) -> list[tuple[int, int]]:
        """(misses, write-backs) of each instance."""
        c = self.state.counters
        return [(int(c[1 + 2 * i]), int(c[2 + 2 * i])) for i in range((len(c) - 1) // 2)]


def simulate_writebacks(batches: Iterable[np.ndarray], level: CacheLevel, page_bytes: int = 4096,
                        seed: int = 0) -> tuple[int, int]:
    """(misses, write-backs) of one level fed every batch of tagged line ids in order."""
    sim = WritebackSim(level, page_bytes, seed)
    for lines in batches:
        sim.feed(lines)
    return sim.misses, sim.writebacks


def simulate_dram_like(trace_path: str, machine: Machine, ps, cores: list[int] | None = None,
                       placement: str = "close") -> pd.DataFrame:
    """simulate_dram on a trace file, with the settings of the ProfileSet `ps` made from it."""
    from analysis.profiles.sweep import open_chunks

    info, chunks = open_chunks(str(trace_path))
    return simulate_dram(info, chunks, machine, ps, cores, placement)


def simulate_dram(info, chunks, machine: Machine, ps, cores: list[int] | None = None,
                  placement: str = "close", frame_seeds: int = FRAME_SEEDS) -> pd.DataFrame:
    """Per core count and occupied instance of `machine`'s last level, its simulated DRAM reads and
    write-backs (lines and bytes) on the shared traces the ProfileSet `ps` was made from (its mode,
    interleaving, seed, refs per turn, paper chunk; write-invalidate between the instances when `ps` counts
    coherence). A level placed by page frames (physical or hashed) is simulated under `frame_seeds` frame
    maps (seeds ps.seed ..) in the same walk, and the figures are their mean, with their standard deviation
    in reads_sd / writebacks_sd, as validate's ground truth does (set_index.FRAME_SEEDS: one map is one
    draw). Columns: dram.dram_per_instance's, then those two and frame_maps."""
    llc = machine.caches[-1]
    rows = []
    for p in sorted(set(ps.cores if cores is None else cores)):
        instance = np.asarray(grouping_of(machine, len(machine.caches) - 1, p, placement), dtype=np.int64)
        sims = _frame_sims(llc, machine.page_bytes, ps, int(instance.max()) + 1, frame_seeds)
        accesses = np.zeros(int(instance.max()) + 1, dtype=np.int64)
        spec = InterleaveSpec(p, ps.interleave, ps.seed, ps.refs_per_turn)
        for _, b in mimic(info, chunks, [spec], resolve_mode(info, ps.mode), ps.line_size, ps.paper_chunk,
                          stores=True):
            inst = instance[b.core.astype(np.int64)]
            for sim in sims:
                sim.feed(b.lines, inst)
            accesses += np.bincount(inst, minlength=len(accesses))
        rows += _instance_rows(p, sims, accesses, llc.line_bytes)
    return pd.DataFrame(rows, columns=SIM_COLUMNS)


SIM_COLUMNS = INSTANCE_COLUMNS + ["reads_sd", "writebacks_sd", "frame_maps"]


def _frame_sims(llc: CacheLevel, page_bytes: int, ps, instances: int, frame_seeds: int) -> list[WritebackSim]:
    """One simulator per frame map (one only when the level's placement does not read frames)."""
    first = WritebackSim(llc, page_bytes, ps.seed, instances, ps.coherence)
    if first.place[0] == VIRTUAL or frame_seeds <= 1:
        return [first]
    return [first] + [WritebackSim(llc, page_bytes, ps.seed + k, instances, ps.coherence)
                      for k in range(1, frame_seeds)]


def _instance_rows(cores: int, sims: list[WritebackSim], accesses: np.ndarray, line_bytes: int) -> list[dict]:
    """Each instance's mean reads and write-backs over the frame maps, and their spread."""
    counts = np.array([sim.per_instance() for sim in sims], dtype=np.float64)  # maps x instances x (reads, wbs)
    mean, sd = counts.mean(axis=0), counts.std(axis=0)
    return [{"cores": cores, "instance": i, "dram_read_bytes": m * line_bytes, "dram_writeback_bytes": w * line_bytes,
             "reads": m, "writebacks": w, "accesses": int(accesses[i]), "reads_sd": sd[i, 0],
             "writebacks_sd": sd[i, 1], "frame_maps": len(sims)} for i, (m, w) in enumerate(mean)]
