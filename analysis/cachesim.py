"""Oracle: an LRU multicore cache simulator run on the same mimicked traces as the model.

Private levels have one instance per core and see that core's accesses; shared levels
have one instance and see the interleaved trace. Two ways to feed lower levels:

* `hierarchical=False` (default, what SDCM assumes): every level sees every access of its
  stream, so a fully associative level hits iff its stack distance < lines, and the
  simulator must agree with SDCM exactly.
* `hierarchical=True`: a level sees only the accesses that missed every level above it
  (a non-inclusive, read-allocate hierarchy, like pycachesim without write-back traffic).

Set-associative levels use a tag/timestamp array per set (set = line mod sets); fully
associative levels use a hash map plus a doubly linked LRU list, an implementation
independent of the reuse engine so the agreement test means something.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import pandas as pd
from numba import types
from numba.typed import Dict

from analysis.private_traces import InterleaveSpec, line_shift, mimic, resolve_mode
from analysis.profiles import ChunkFactory
from analysis.hitrates import COLUMNS
from instrument.trace_types import TraceInfo
from machines.model import CacheLevel, Machine
from pptmc.errors import InputError

_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)


@numba.njit(cache=True, nogil=True)
def _set_assoc(lines, inst, tags, stamps, clock, hits):
    """LRU set-associative lookup of each access; returns the advanced clock."""
    n_sets = tags.shape[1]
    ways = tags.shape[2]
    for i in range(lines.shape[0]):
        line = lines[i]
        c = inst[i]
        s = line % np.uint64(n_sets)
        clock += 1
        victim = 0
        oldest = stamps[c, s, 0]
        hit = False
        for w in range(ways):
            if tags[c, s, w] == line:
                stamps[c, s, w] = clock
                hit = True
                break
            if stamps[c, s, w] < oldest:
                oldest = stamps[c, s, w]
                victim = w
        if not hit:
            tags[c, s, victim] = line
            stamps[c, s, victim] = clock
        hits[i] = hit
    return clock


@numba.njit(cache=True, nogil=True)
def _fully_assoc(lines, inst, where, keys, prev, nxt, head, tail, size, cap, hits):
    """LRU fully associative lookup: hash map line -> node, list ordered most recent first."""
    for i in range(lines.shape[0]):
        c = inst[i]
        key = (np.uint64(c) << np.uint64(48)) | lines[i]
        if key in where:
            node = where[key]
            hits[i] = True
            if head[c] != node:  # unlink, then push at head
                p = prev[node]
                q = nxt[node]
                nxt[p] = q
                if q >= 0:
                    prev[q] = p
                else:
                    tail[c] = p
                prev[node] = -1
                nxt[node] = head[c]
                prev[head[c]] = node
                head[c] = node
            continue
        hits[i] = False
        if size[c] < cap:
            node = c * cap + size[c]
            size[c] += 1
        else:
            node = tail[c]
            del where[keys[node]]
            t = prev[node]
            tail[c] = t
            if t >= 0:
                nxt[t] = -1
            else:
                head[c] = -1
        keys[node] = key
        where[key] = node
        prev[node] = -1
        nxt[node] = head[c]
        if head[c] >= 0:
            prev[head[c]] = node
        else:
            tail[c] = node
        head[c] = node


class LevelSim:
    """State of one cache level with `instances` copies (one per core, or one if shared)."""

    def __init__(self, level: CacheLevel, instances: int) -> None:
        self.level = level
        n_lines = level.n_lines
        if n_lines < 1:
            raise InputError(f"cache {level.name}: size {level.size_bytes} B holds no {level.line_bytes} B line")
        ways = level.associativity
        self.fully = ways == 0 or ways >= n_lines
        if self.fully:
            self.cap = n_lines
            self.where = Dict.empty(key_type=types.uint64, value_type=types.int64)
            self.keys = np.zeros(instances * n_lines, dtype=np.uint64)
            self.prev = np.full(instances * n_lines, -1, dtype=np.int64)
            self.nxt = np.full(instances * n_lines, -1, dtype=np.int64)
            self.head = np.full(instances, -1, dtype=np.int64)
            self.tail = np.full(instances, -1, dtype=np.int64)
            self.size = np.zeros(instances, dtype=np.int64)
        else:
            if n_lines % ways:
                raise InputError(f"cache {level.name}: {n_lines} lines is not a multiple of "
                                 f"associativity {ways}; fix the machine description")
            self.tags = np.full((instances, n_lines // ways, ways), _EMPTY, dtype=np.uint64)
            self.stamps = np.zeros((instances, n_lines // ways, ways), dtype=np.int64)
            self.clock = 0

    def access(self, lines: np.ndarray, inst: np.ndarray) -> np.ndarray:
        """Look up each access; returns a hit flag per access."""
        hits = np.zeros(len(lines), dtype=np.bool_)
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        inst = np.ascontiguousarray(inst, dtype=np.int64)
        if self.fully:
            _fully_assoc(lines, inst, self.where, self.keys, self.prev, self.nxt, self.head, self.tail,
                         self.size, self.cap, hits)
        else:
            self.clock = _set_assoc(lines, inst, self.tags, self.stamps, self.clock, hits)
        return hits


@dataclass
class LevelCounts:
    """Accesses reaching and hitting a level, and accesses missing it and all above."""

    name: str
    reached: int = 0
    hits: int = 0
    missed_all: int = 0
    own_hits: int = 0  # hits among every access this level saw


def simulate_stream(batches, caches: tuple[CacheLevel, ...], cores: int,
                    hierarchical: bool = False) -> tuple[list[LevelCounts], int]:
    """Run (lines, core) batches of an interleaved trace through the hierarchy."""
    sims = [LevelSim(lv, 1 if lv.shared else cores) for lv in caches]
    counts = [LevelCounts(lv.name) for lv in caches]
    total = 0
    for lines, core in batches:
        total += len(lines)
        missing = np.ones(len(lines), dtype=bool)  # missed every level so far
        for sim, cnt in zip(sims, counts):
            sel = missing if hierarchical else slice(None)
            inst = np.zeros(len(lines), dtype=np.int64) if sim.level.shared else core
            hit = sim.access(lines[sel], inst[sel])
            reach_hits = hit if hierarchical else hit[missing]
            cnt.reached += int(missing.sum())
            cnt.hits += int(reach_hits.sum())
            cnt.own_hits += int(hit.sum())
            if hierarchical:
                missing[np.nonzero(missing)[0][hit]] = False
            else:
                missing &= ~hit
            cnt.missed_all += int(missing.sum())
    return counts, total


def rates_table(cores: int, counts: list[LevelCounts], total: int) -> pd.DataFrame:
    """cumulative = 1 - (misses of this and every level above) / all accesses; local = hits / reached;
    level = this level's own hits / all accesses (what SDCM predicts per level)."""
    rows = [{"cores": cores, "level": c.name,
             "cumulative_hit_rate": 1.0 - c.missed_all / total if total else 0.0,
             "local_hit_rate": c.hits / c.reached if c.reached else 0.0,
             "level_hit_rate": c.own_hits / total if total else 0.0,
             "accesses": total} for c in counts]
    return pd.DataFrame(rows, columns=COLUMNS)


def simulate_hierarchy(info: TraceInfo, chunks: ChunkFactory, machine: Machine, cores: list[int],
                       mode: str = "auto", interleave: str = "rr", seed: int = 0, refs_per_turn: int = 1,
                       hierarchical: bool = False, paper_chunk: int = 0) -> pd.DataFrame:
    """Simulated hit rates for each core count, same table shape as predict_hit_rates."""
    resolved = resolve_mode(info, mode)
    line = machine.line_bytes
    line_shift(line)
    if any(lv.line_bytes != line for lv in machine.caches):
        raise InputError(f"machine {machine.name}: cache levels use different line sizes; not supported")
    tables = []
    for p in sorted(set(cores)):  # one pass per core count: each is an independent task
        spec = InterleaveSpec(p, interleave, seed, refs_per_turn)
        batches = ((b.lines, b.core) for _, b in mimic(info, chunks, [spec], resolved, line, paper_chunk))
        counts, total = simulate_stream(batches, machine.caches, p, hierarchical)
        tables.append(rates_table(p, counts, total))
    return pd.concat(tables, ignore_index=True)


def simulate_file(trace_path: str, machine: Machine, cores: list[int], **kwargs) -> pd.DataFrame:
    """simulate_hierarchy on a trace file."""
    from analysis.profiles import open_chunks

    info, factory = open_chunks(trace_path)
    return simulate_hierarchy(info, factory, machine, cores, **kwargs)
