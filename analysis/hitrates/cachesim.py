"""Oracle: an LRU multicore cache simulator run on the same mimicked traces as the model.

Private levels have one instance per core and see that core's accesses; shared levels see the
interleaved trace: one instance for every core, or, given a thread placement (`pptmc hitrates --simulate
--placement`), one per group of `cores_per_instance` cores (an L3 per CCX), thread t using its core's
group's (lru_sets.instance_map, as the ground truth does). Two ways to feed lower levels:

* `hierarchical=False` (default, what SDCM assumes): every level sees every access of its
  stream, so a fully associative level hits iff its stack distance < lines, and the
  simulator must agree with SDCM exactly.
* `hierarchical=True`: a level sees only the accesses that missed every level above it
  (a non-inclusive, read-allocate hierarchy, like pycachesim without write-back traffic).

Set-associative levels use a tag/timestamp array per set; a line's set follows the level's
`indexing` (set_index.py: the virtual line, or the physical line behind seeded random page frames
of `page_bytes`, or a hash of it); the tag is the virtual line. Fully associative levels use a hash
map plus a doubly linked LRU list, an implementation independent of the reuse engine so the
agreement test means something.

`CoherentHierarchy` / `simulate_coherent` is the ground truth of `pptmc validate`: the merged
stream of a real multithreaded run through private levels per core and shared levels,
hierarchical, with write-invalidate coherence (a store by core c removes the line from every other
core's private caches, and from every other instance of a shared level with one instance per group of
cores, e.g. an L3 per CCX, when it is given the machine's core count and thread placement; their next
miss on it is counted as an invalidation miss). It shares lru_sets.lookup, the one LRU set lookup, with
`LevelSim`. A directory (open-addressing hash table: line -> bit mask of threads that may hold it) finds
the copies to invalidate without scanning every core.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np
import pandas as pd
from numba import types
from numba.typed import Dict

from analysis.profiles.private_traces import InterleaveSpec, line_shift, mimic, resolve_mode
from analysis.profiles.sweep import ChunkFactory
from analysis.hitrates.rates import COLUMNS
from analysis.hitrates.lru_sets import EMPTY, Levels, Slots, geometry, instance_map, invalidate, level_base, lookup
from analysis.hitrates.set_index import placement as set_placement
from analysis.profiles.reuse import STORE_TAG
from instrument.trace_types import TraceInfo
from machines.model import CacheLevel, Machine
from common.errors import InputError
from common.hashing import fib_product

@numba.njit(cache=True, nogil=True)
def _set_assoc(lines, inst, slots, levels, clock, hits):
    """LRU set-associative lookup of each access in the one level of `levels`; returns the clock."""
    ways = levels.ways[0]
    for i in range(lines.shape[0]):
        line = lines[i]
        clock += 1
        hits[i] = lookup(slots.tags, slots.stamps, level_base(levels, 0, inst[i], line), ways, line, clock)
    return clock


class LruLists(NamedTuple):
    """Per instance, a doubly linked list of its lines, most recent first: node arrays and list ends."""

    keys: np.ndarray
    prev: np.ndarray
    nxt: np.ndarray
    head: np.ndarray
    tail: np.ndarray
    size: np.ndarray


@numba.njit(cache=True, nogil=True, inline="always")
def _unlink_to_head(lru, c, node):
    """Move a hit node to the head of instance c's list."""
    if lru.head[c] == node:
        return
    p = lru.prev[node]
    q = lru.nxt[node]
    lru.nxt[p] = q
    if q >= 0:
        lru.prev[q] = p
    else:
        lru.tail[c] = p
    lru.prev[node] = -1
    lru.nxt[node] = lru.head[c]
    lru.prev[lru.head[c]] = node
    lru.head[c] = node


@numba.njit(cache=True, nogil=True, inline="always")
def _victim(lru, where, c, cap):
    """A free node of instance c, or its least recently used one (unlinked, its line forgotten)."""
    if lru.size[c] < cap:
        node = c * cap + lru.size[c]
        lru.size[c] += 1
        return node
    node = lru.tail[c]
    del where[lru.keys[node]]
    t = lru.prev[node]
    lru.tail[c] = t
    if t >= 0:
        lru.nxt[t] = -1
    else:
        lru.head[c] = -1
    return node


@numba.njit(cache=True, nogil=True)
def _fully_assoc(lines, inst, where, lru, cap, hits):
    """LRU fully associative lookup: hash map line -> node, list ordered most recent first."""
    for i in range(lines.shape[0]):
        c = inst[i]
        key = (np.uint64(c) << np.uint64(48)) | lines[i]
        if key in where:
            hits[i] = True
            _unlink_to_head(lru, c, where[key])
            continue
        hits[i] = False
        node = _victim(lru, where, c, cap)
        lru.keys[node] = key
        where[key] = node
        lru.prev[node] = -1
        lru.nxt[node] = lru.head[c]
        if lru.head[c] >= 0:
            lru.prev[lru.head[c]] = node
        else:
            lru.tail[c] = node
        lru.head[c] = node


class LevelSim:
    """State of one cache level with `instances` copies (one per core, or one if shared)."""

    def __init__(self, level: CacheLevel, instances: int, page_bytes: int = 4096, placement_seed: int = 0) -> None:
        self.level = level
        n_sets, ways = geometry(level, 0)
        n_lines = n_sets * ways
        self.fully = n_sets == 1
        if self.fully:
            self.cap = n_lines
            self.where = Dict.empty(key_type=types.uint64, value_type=types.int64)
            self.lru = LruLists(np.zeros(instances * n_lines, dtype=np.uint64),
                                np.full(instances * n_lines, -1, dtype=np.int64),
                                np.full(instances * n_lines, -1, dtype=np.int64),
                                np.full(instances, -1, dtype=np.int64), np.full(instances, -1, dtype=np.int64),
                                np.zeros(instances, dtype=np.int64))
        else:
            self.n_sets, self.ways = n_lines // ways, ways
            self.levels = Levels(*(np.array([a], dtype=np.int64) for a in (0, self.n_sets, ways, 0, 0)),
                                 np.zeros((1, 1), dtype=np.int64),  # the caller gives each access's instance
                                 *set_placement((level,), (self.n_sets,), page_bytes, placement_seed))
            self.slots = Slots(np.full(instances * n_lines, EMPTY, dtype=np.uint64),
                               np.zeros(instances * n_lines, dtype=np.int64))
            self.clock = 0

    def access(self, lines: np.ndarray, inst: np.ndarray) -> np.ndarray:
        """Look up each access; returns a hit flag per access."""
        hits = np.zeros(len(lines), dtype=np.bool_)
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        inst = np.ascontiguousarray(inst, dtype=np.int64)
        if self.fully:
            _fully_assoc(lines, inst, self.where, self.lru, self.cap, hits)
        else:
            self.clock = _set_assoc(lines, inst, self.slots, self.levels, self.clock, hits)
        return hits


@dataclass
class LevelCounts:
    """Accesses reaching and hitting a level, and accesses missing it and all above."""

    name: str
    reached: int = 0
    hits: int = 0
    missed_all: int = 0
    own_hits: int = 0  # hits among every access this level saw


def simulate_stream(batches, caches: tuple[CacheLevel, ...], cores: int, hierarchical: bool = False,
                    page_bytes: int = 4096, placement_seed: int = 0, machine_cores: int = 0,
                    placement: str = "close") -> tuple[list[LevelCounts], int]:
    """Run (lines, core) batches of an interleaved trace through the hierarchy (one page-frame map for all levels;
    a shared level has one instance per group of cores of a `machine_cores`-core machine, threads placed by
    `placement`; machine_cores 0: one instance)."""
    inst_of = instance_map(caches, cores, machine_cores, placement)
    sims = [LevelSim(lv, int(row.max()) + 1, page_bytes, placement_seed) for lv, row in zip(caches, inst_of)]
    counts = [LevelCounts(lv.name) for lv in caches]
    total = 0
    for lines, core in batches:
        total += len(lines)
        missing = np.ones(len(lines), dtype=bool)  # missed every level so far
        for sim, cnt, row in zip(sims, counts, inst_of):
            sel = missing if hierarchical else slice(None)
            inst = row[np.asarray(core, dtype=np.int64)]
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
                       hierarchical: bool = False, paper_chunk: int = 0, coherent: bool = False,
                       placement: str | None = None) -> pd.DataFrame:
    """Simulated hit rates for each core count, same table shape as predict_hit_rates.

    Pages are machine.page_bytes; `seed` seeds the interleaving and the random page frames.
    coherent: write-invalidate between the private levels and between the instances of a shared level
    (machine_hierarchy, which is hierarchical, so `hierarchical` must be True too); `level_hit_rate` is then
    not measured (NaN). placement (close or spread): threads on the machine's cores, one instance of a shared
    level per group of cores (machine.caches[i].cores_per_instance); None: one instance for all threads."""
    if coherent and not hierarchical:
        raise InputError("a coherent simulation is hierarchical (a level sees the misses above it): "
                         "ask for hierarchical=True (pptmc hitrates --simulate ... --hierarchical --coherent)")
    resolved = resolve_mode(info, mode)
    line = machine.line_bytes
    line_shift(line)
    if any(lv.line_bytes != line for lv in machine.caches):
        raise InputError(f"machine {machine.name}: cache levels use different line sizes; not supported")
    tables = []
    for p in sorted(set(cores)):  # one pass per core count: each is an independent task
        spec = InterleaveSpec(p, interleave, seed, refs_per_turn)
        stream = (b for _, b in mimic(info, chunks, [spec], resolved, line, paper_chunk, stores=coherent))
        if coherent:
            tables.append(_coherent_rates(stream, machine_hierarchy(machine, p, seed, placement), p))
            continue
        counts, total = simulate_stream(((b.lines, b.core) for b in stream), machine.caches, p, hierarchical,
                                        machine.page_bytes, seed, 0 if placement is None else machine.cores,
                                        placement or "close")
        tables.append(rates_table(p, counts, total))
    return pd.concat(tables, ignore_index=True)


def _coherent_rates(batches, sim: CoherentHierarchy, cores: int) -> pd.DataFrame:
    """Hit-rate table of mimicked batches (store line ids tagged) through a coherent hierarchy."""
    for b in batches:
        sim.access(b.lines & ~STORE_TAG, b.core.astype(np.int64), (b.lines & STORE_TAG) != 0)
    table = sim.counts.table(cores).assign(level_hit_rate=np.nan)
    return table[COLUMNS]


def simulate_file(trace_path: str, machine: Machine, cores: list[int], **kwargs) -> pd.DataFrame:
    """simulate_hierarchy on a trace file."""
    from analysis.profiles.sweep import open_chunks

    info, factory = open_chunks(trace_path)
    return simulate_hierarchy(info, factory, machine, cores, **kwargs)


def simulate_like(trace_path: str, machine: Machine, ps, cores: list[int] | None = None,
                  hierarchical: bool = False, coherent: bool = False, placement: str | None = None) -> pd.DataFrame:
    """simulate_file on the private/shared traces a ProfileSet `ps` was made from (its mode,
    interleaving, seed, refs per turn and paper chunk), for `cores` (default: the set's); the seed
    also draws the page frames of physically indexed levels (machine.page_bytes pages); `placement`:
    simulate_hierarchy's (None: every shared level one instance)."""
    return simulate_file(str(trace_path), machine, list(ps.cores if cores is None else cores), mode=ps.mode,
                         interleave=ps.interleave, seed=ps.seed, refs_per_turn=ps.refs_per_turn,
                         paper_chunk=ps.paper_chunk, hierarchical=hierarchical, coherent=coherent,
                         placement=placement)


# ---------------------------------------------------------------------------------------------
# Ground-truth multicore hierarchy: private levels per core, shared levels, write-invalidate.
# ---------------------------------------------------------------------------------------------

MAX_COHERENT_CORES = 64  # the sharer set of a line is one uint64 bit mask


@numba.njit(cache=True, nogil=True, inline="always")
def _dir_slot(keys, line, mask):
    """Open-addressing (linear probing) slot of `line` in the directory, inserting it if absent.

    Groups of 8 neighbouring lines hash to 8 neighbouring slots, so a sequential sweep touches
    one directory cache line per 8 lines instead of one per line. Keys hold line + 1, so a
    zero-filled (lazily allocated) table is empty."""
    h = ((fib_product(line >> np.uint64(3)) >> np.uint64(17)) << np.uint64(3)) | (line & np.uint64(7))
    j = np.int64(h & np.uint64(mask))
    key = line + np.uint64(1)
    while True:
        k = keys[j]
        if k == key:
            return j, False
        if k == 0:
            keys[j] = key
            return j, True
        j = (j + 1) & mask


@numba.njit(cache=True, nogil=True)
def _dir_rehash(keys, state, new_keys, new_state):
    """Move every directory entry into larger tables."""
    mask = new_keys.shape[0] - 1
    for j in range(keys.shape[0]):
        if keys[j] != 0:
            k, _ = _dir_slot(new_keys, keys[j] - np.uint64(1), mask)
            new_state[k, :] = state[j, :]


class Stream(NamedTuple):
    """One batch of the merged stream: line id, core and store flag per access."""

    lines: np.ndarray
    core: np.ndarray
    store: np.ndarray


class Directory(NamedTuple):
    """Per line (open addressing on `keys`): [sharer mask (threads), lost-copy mask (instances) per level with
    several instances]."""

    keys: np.ndarray
    state: np.ndarray


class Counters(NamedTuple):
    """Per level: accesses reaching it, hits, invalidation misses, copies invalidated."""

    reached: np.ndarray
    hits: np.ndarray
    inval_miss: np.ndarray
    invalidated: np.ndarray


@numba.njit(cache=True, nogil=True, inline="always")
def _look_up(line, c, clock, levels, slots, directory, counters, slot, entries):
    """Walk thread c's instances of the levels until one hits; a miss of a copy another core's store removed
    from that instance counts as an invalidation miss. Returns (first level hit or the level count, directory
    row or -1, entries)."""
    mask = directory.keys.shape[0] - 1
    n_lev = levels.off.shape[0]
    for lv in range(n_lev):
        inst = c if levels.priv[lv] else levels.inst[lv, c]  # a private level's instance is the thread's
        counters.reached[lv] += 1
        if lookup(slots.tags, slots.stamps, level_base(levels, lv, inst, line), levels.ways[lv], line, clock):
            counters.hits[lv] += 1
            return lv, slot, entries
        k = levels.col[lv]
        if k > 0:
            if slot < 0:
                slot, new = _dir_slot(directory.keys, line, mask)
                entries += new
            ibit = np.uint64(1) << np.uint64(inst)
            if directory.state[slot, k] & ibit:
                counters.inval_miss[lv] += 1
                directory.state[slot, k] &= ~ibit
    return n_lev, slot, entries


@numba.njit(cache=True, nogil=True, inline="always")
def _invalidate_others(line, c, others, slot, levels, slots, directory, counters):
    """A store by thread c: remove the line from every instance of a multi-instance level (each thread's
    private caches, each group's shared one) that another sharer uses and c does not; remember the loss."""
    for lv in range(levels.off.shape[0]):
        k = levels.col[lv]
        if k == 0:
            continue
        own = levels.inst[lv, c]
        done = np.uint64(0)
        rest = others
        d = 0
        while rest:
            if rest & np.uint64(1):
                i = levels.inst[lv, d]
                ibit = np.uint64(1) << np.uint64(i)
                if i != own and not done & ibit:
                    done |= ibit
                    if invalidate(slots.tags, slots.stamps, level_base(levels, lv, i, line), levels.ways[lv], line):
                        counters.invalidated[lv] += 1
                        directory.state[slot, k] |= ibit
            rest >>= np.uint64(1)
            d += 1


@numba.njit(cache=True, nogil=True)
def _coherent(stream, start, coherent, levels, slots, directory, counters, clock, entries):
    """Run accesses from `start` through the hierarchy until the directory is half full.

    Returns (clock, directory entries, index of the first access not simulated).

    A level sees the misses of the level above and allocates on a miss (non-inclusive, write-allocate).
    A store by thread c removes the line from every other thread's private levels and from every other
    instance of a shared level with several (write-invalidate); the directory remembers which instances lost
    it, so their next miss there is counted as an invalidation miss (one directory row per line, so one
    memory line per access). A thread's sharer bit stays set while any instance it uses may hold the line."""
    mask = directory.keys.shape[0] - 1
    limit = directory.keys.shape[0] // 2
    for i in range(start, stream.lines.shape[0]):
        if entries >= limit:
            return clock, entries, i
        line = stream.lines[i]
        c = stream.core[i]
        bit = np.uint64(1) << np.uint64(c)
        clock += 1
        # the directory row is looked up only when needed (not for a load hitting a private L1)
        first_hit, slot, entries = _look_up(line, c, clock, levels, slots, directory, counters, -1, entries)
        st = stream.store[i] and coherent
        if first_hit == 0 and levels.priv[0] and not st:
            continue  # a line in c's private L1 already has c's sharer bit (only a store clears it, and
            # that store also removed the line from c's caches)
        if slot < 0:
            slot, new = _dir_slot(directory.keys, line, mask)
            entries += new
        if st:
            _invalidate_others(line, c, directory.state[slot, 0] & ~bit, slot, levels, slots, directory, counters)
            directory.state[slot, 0] = bit
        else:
            directory.state[slot, 0] |= bit
    return clock, entries, stream.lines.shape[0]


@dataclass
class CoherentCounts:
    """Per-level counts of one coherent simulation (hierarchical: a level sees the misses above it)."""

    names: list[str]
    shared: list[bool]
    reached: np.ndarray
    hits: np.ndarray
    invalidation_misses: np.ndarray
    invalidated: np.ndarray  # copies removed by other cores' stores (private levels, other shared instances)
    total: int = 0

    def table(self, cores: int) -> pd.DataFrame:
        """cumulative = 1 - accesses missing this level and all above / all accesses (the paper's Table 6)."""
        rows = []
        for i, name in enumerate(self.names):
            missed = int(self.reached[i] - self.hits[i])
            rows.append({"cores": cores, "level": name, "shared": self.shared[i],
                         "cumulative_hit_rate": 1.0 - missed / self.total if self.total else 0.0,
                         "local_hit_rate": self.hits[i] / self.reached[i] if self.reached[i] else 0.0,
                         "accesses": self.total, "misses": missed,
                         "invalidations": int(self.invalidation_misses[i]),
                         "invalidated_copies": int(self.invalidated[i])})
        return pd.DataFrame(rows)


class CoherentHierarchy:
    """A multicore cache hierarchy fed with a merged (line, core, is_store) stream.

    Private levels get one instance per core (per thread: with more threads than the machine has
    cores, each thread still gets its own private caches, as the model assumes); a shared level one per
    group of `CacheLevel.instance_cores` cores of a `machine_cores`-core machine, thread t using its core's
    group's, the core given by `placement` (lru_sets.instance_map; machine_cores 0, the default: one
    instance for all threads). `fully_associative_up_to` > 0 turns every level of at most that many lines
    into a single fully associative LRU set (used to measure conflict misses); `coherent=False` turns write-invalidate
    off (used to measure what coherence costs). Sets follow each level's indexing, with pages of
    `page_bytes` backed by frames drawn from `placement_seed` (set_index.py)."""

    def __init__(self, caches: tuple[CacheLevel, ...], cores: int, fully_associative_up_to: int = 0,
                 coherent: bool = True, page_bytes: int = 4096, placement_seed: int = 0, machine_cores: int = 0,
                 placement: str = "close") -> None:
        if not 1 <= cores <= MAX_COHERENT_CORES:
            raise InputError(f"cores={cores}: the coherent simulator supports 1 to {MAX_COHERENT_CORES} cores")
        inst = instance_map(caches, cores, machine_cores, placement)
        off, sets, ways, col = [], [], [], []
        size, n_cols = 0, 0
        for lv, row in zip(caches, inst):
            s, w = geometry(lv, fully_associative_up_to)
            n_inst = int(row.max()) + 1
            off.append(size), sets.append(s), ways.append(w)
            n_cols += n_inst > 1  # a level with one instance needs no lost-copy mask
            col.append(n_cols if n_inst > 1 else 0)
            size += n_inst * s * w
        priv = [0 if lv.shared else 1 for lv in caches]
        self.levels = Levels(*(np.array(a, dtype=np.int64) for a in (off, sets, ways, priv, col)), inst,
                             *set_placement(caches, sets, page_bytes, placement_seed))
        self.slots = Slots(np.full(size, EMPTY, dtype=np.uint64), np.zeros(size, dtype=np.int64))
        self.clock, self.coherent, self.cores = 0, coherent, cores
        self.n_cols, self.entries = max(n_cols, 1), 0
        self._alloc_directory(1 << 16)
        n = len(caches)
        self.counts = CoherentCounts([lv.name for lv in caches], [lv.shared for lv in caches],
                                     np.zeros(n, np.int64), np.zeros(n, np.int64),
                                     np.zeros(n, np.int64), np.zeros(n, np.int64))

    def _alloc_directory(self, size: int) -> None:
        self.keys = np.zeros(size, dtype=np.uint64)
        self.state = np.zeros((size, 1 + self.n_cols), dtype=np.uint64)

    def _grow(self) -> None:
        """Grow the directory 4x (it holds one entry per distinct line and is kept at most half full)."""
        keys, state = self.keys, self.state
        self._alloc_directory(4 * keys.shape[0])
        _dir_rehash(keys, state, self.keys, self.state)

    def access(self, lines: np.ndarray, core: np.ndarray, is_store: np.ndarray) -> None:
        """Simulate one batch of the merged stream, in order."""
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        if np.any(lines == EMPTY):
            raise InputError("line id 2^64-1 is reserved by the simulator")
        core = np.ascontiguousarray(core, dtype=np.int64)
        is_store = np.ascontiguousarray(is_store, dtype=np.bool_)
        if not len(lines) == len(core) == len(is_store):
            raise InputError(f"batch arrays differ in length ({len(lines)}, {len(core)}, {len(is_store)})")
        if len(core) and (core.min() < 0 or core.max() >= self.cores):  # the kernel does not bounds-check
            raise InputError(f"core id {int(core.max())} in the stream, but the hierarchy has {self.cores} cores")
        c = self.counts
        stream = Stream(lines, core, is_store)
        counters = Counters(c.reached, c.hits, c.invalidation_misses, c.invalidated)
        done = 0
        while True:
            self.clock, self.entries, done = _coherent(
                stream, done, self.coherent, self.levels, self.slots, Directory(self.keys, self.state), counters,
                self.clock, self.entries)
            if done == len(lines):
                break
            self._grow()
        c.total += len(lines)


def simulate_coherent(batches, caches: tuple[CacheLevel, ...], cores: int, fully_associative_up_to: int = 0,
                      page_bytes: int = 4096, placement_seed: int = 0, machine_cores: int = 0,
                      placement: str = "close") -> CoherentCounts:
    """Run (lines, core, is_store) batches of a merged multithreaded stream through the hierarchy (shared levels
    split per group of cores when `machine_cores` is given: CoherentHierarchy)."""
    sim = CoherentHierarchy(caches, cores, fully_associative_up_to, page_bytes=page_bytes,
                            placement_seed=placement_seed, machine_cores=machine_cores, placement=placement)
    for lines, core, store in batches:
        sim.access(lines, core, store)
    return sim.counts


def machine_hierarchy(machine: Machine, threads: int, seed: int = 0, placement: str | None = "close",
                      **options) -> CoherentHierarchy:
    """The coherent simulator of `machine` for `threads` threads, its page frames drawn from `seed`: private
    levels per thread, a shared level once per group of cores, threads on cores by `placement` (close or
    spread; None: one instance of each shared level for all threads). The ground truth (pptmc validate) and
    `pptmc hitrates --simulate --coherent` both build theirs here. `options`: CoherentHierarchy's
    (fully_associative_up_to, coherent)."""
    return CoherentHierarchy(machine.caches, threads, page_bytes=machine.page_bytes, placement_seed=seed,
                             machine_cores=0 if placement is None else machine.cores,
                             placement=placement or "close", **options)
