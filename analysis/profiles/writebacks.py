"""Write-back profiles: how many dirty lines a cache of any size evicts (DRAM write traffic, MAPredict).

A store makes its line dirty; a dirty line is written back when it is evicted. In a fully associative
LRU cache of C lines, the line is evicted in the gap before an access of distance d iff C <= d, and
it is still dirty then iff every gap since the last store had a distance below C. With M the largest
gap distance since the last store (0 right after it), a gap of distance d writes the line back iff
M < C <= d. So every gap with d > M adds one write-back for each C in (M, d]: its *start* M and *end*
d (infinite when the line is never touched again within a cold-miss gap) make two histograms, and the
write-backs of a C-line cache are (starts below C) - (ends below C). For SDCM's set-associative
hit probability P(d) the same reads as sum P(M) - sum P(d): an access hits iff its distance is below a
random effective capacity, the same one for both ends of a gap. A dirty line's last gap runs to the
end of the stream, with d its stack depth then: a cache of C <= d has evicted it within the stream; a
larger one still holds it, and that write-back falls outside the stream (not counted).

`WritebackTracker` keeps each stored line's M (-1 when clean) in an open-addressing table beside a
ReuseEngine that gives each access's distance, and adds the starts and ends to two ReuseProfiles'
counters (their `cold` slot counts infinite ends). analysis/hitrates/dram.py turns them into bytes.

Instances of a level serving groups of threads (an L3 per CCX; groups.py): `InstanceWritebacks` keeps
one tracker per instance, fed the shared trace filtered to its threads, with write-invalidate between the
instances as hardware does it: a store by instance j removes the line from every other instance holding
it (a directory of sharers per line, as coherence.Directory keeps per core), which frees its way there;
a dirty copy moves to j cache to cache, unwritten; a load leaves the other copies as they are (a dirty one
stays dirty where it is, as in MOESI's Owned state). The removal ends the copy's last gap like an access
would (a cache of C lines wrote it back if M < C <= d: it was evicted, dirty, before the store), and the
line is clean and gone from that instance afterwards. Removals lift the lines below, and a line once
deeper than C stays evicted, so d is the largest depth the line had in its gap: the trackers' engine is a
`depth_stack.DepthStack`, and the profiles are exact for fully associative instances of every size. A
set-associative instance also needs each gap's turnover K and its removals' position u (the DepthStack's):
a line's exposure since its store is the largest (d, K) of its gaps, component by component, with the u of
the gap with the larger K, so a gap that raises either adds its start and end, and the histograms keep per
bin the gaps with turnover, their turnover sum and their sum of K x u (`moving_count`, `turnover_sum`,
`position_sum`, read by analysis/hitrates/turnover.py; ANALYSIS.md section 14).
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.class_partition import PartitionBuffers, partition
from analysis.profiles.depth_stack import DepthStack
from analysis.profiles.kernel_ops import (EMPTY, N_BINS, STORE_TAG, add_to_bin, bin_of, free_slot, hash_shift_for,
                                         move_values, rehash_slots)
from analysis.profiles.profileset import ReuseProfile, sum_profiles
from analysis.profiles.reuse import ReuseEngine, profile_from_counters
from common.errors import InputError

_MAX_LOAD = 0.6


class TrackerTables(NamedTuple):
    """The kernel's state: line keys, each line's M (-1 clean) and largest turnover since its last store
    (its KM) with that gap's removal position, [n_keys]; and the two histograms' counters (counts, distance
    sums, the sums of turnovers and of turnover x removal position, and the gaps with turnover, infinite slot
    last)."""

    keys: np.ndarray
    dirty: np.ndarray
    kmax: np.ndarray
    kpos: np.ndarray
    state: np.ndarray
    starts: np.ndarray
    starts_sum: np.ndarray
    starts_turn: np.ndarray
    starts_pos: np.ndarray
    starts_moving: np.ndarray
    ends: np.ndarray
    ends_sum: np.ndarray
    ends_turn: np.ndarray
    ends_pos: np.ndarray
    ends_moving: np.ndarray


@numba.njit(cache=True, nogil=True, inline="always")
def _add_gap(t, m, slot, d, k, pos):
    """One gap that raises the line's exposure from (M, KM) (with KM's removal position, in the line's
    slot) to (d, k) (with the position of whichever gap has the larger turnover): its start and its end."""
    add_to_bin(m, 1, t.starts, t.starts_sum)
    b = bin_of(m)
    t.starts_turn[b] += t.kmax[slot]
    t.starts_pos[b] += t.kmax[slot] * t.kpos[slot]
    t.starts_moving[b] += t.kmax[slot] > 0
    if d < 0:
        t.ends[N_BINS] += 1
    else:
        add_to_bin(d, 1, t.ends, t.ends_sum)
        b = bin_of(d)
        t.ends_turn[b] += k
        t.ends_pos[b] += k * pos
        t.ends_moving[b] += k > 0


@numba.njit(cache=True, nogil=True, inline="always")
def _clean_path(t, slot):
    """A store: nothing has come above the line yet."""
    t.kmax[slot] = 0
    t.kpos[slot] = 0.5


@numba.njit(cache=True, nogil=True)
def _track(t, lines, dist, gaps, inval, begin, limit):
    """Walk accesses from `begin` (tagged line ids, their distances, -1 = infinite, and gaps, None when no
    line leaves, else (turnovers, removal positions); inval, None or a flag per access:
    an invalidation, which ends the gap and leaves the line clean); stop when the table holds `limit` keys
    and must grow. Returns the next index (module docstring for the rule)."""
    mask = np.uint64(t.keys.shape[0] - 1)
    hs = hash_shift_for(mask)
    for i in range(begin, lines.shape[0]):
        line = lines[i] & ~STORE_TAG
        store = lines[i] != line
        slot = free_slot(t.keys, line, 0, hs, mask)
        if t.keys[slot] != line:  # never stored: clean, and nothing to keep until its first store
            if not store:
                continue
            if t.state[0] + 1 > limit:
                return i
            t.keys[slot] = line
            t.dirty[slot] = -1
            t.state[0] += 1
        m, d, km = t.dirty[slot], dist[i], t.kmax[slot]
        k, pos = (gaps[0][i], gaps[1][i]) if gaps is not None else (0, 0.5)
        if k <= km:  # the exposure's path stays that of the gap with the larger turnover
            pos = t.kpos[slot]
        if m >= 0 and (d < 0 or d > m or k > km):  # this gap writes the line back for C in (m, d]
            _add_gap(t, m, slot, -1 if d < 0 else max(m, d), max(km, k), pos)
        if store:
            t.dirty[slot] = 0
            _clean_path(t, slot)
        elif inval is not None and inval[i]:
            t.dirty[slot] = -1  # another instance's store took the line (a dirty copy unwritten): gone here
        elif m >= 0:
            t.dirty[slot] = -1 if d < 0 else max(m, d)
            t.kmax[slot], t.kpos[slot] = max(km, k), pos
    return lines.shape[0]


class WritebackTracker:
    """Write-back starts and ends of one access stream (tagged line ids in order)."""

    def __init__(self, initial_lines: int = 1 << 12, engine: ReuseEngine | DepthStack | None = None) -> None:
        self.engine = ReuseEngine(initial_lines) if engine is None else engine
        self.tables = self._tables(1 << max(4, int(np.ceil(np.log2(initial_lines / _MAX_LOAD)))))

    @staticmethod
    def _tables(cap: int) -> TrackerTables:
        z = lambda: np.zeros(N_BINS + 1, dtype=np.int64)  # noqa: E731
        f = lambda: np.zeros(N_BINS + 1, dtype=np.float64)  # noqa: E731
        return TrackerTables(np.full(cap, EMPTY, dtype=np.uint64), np.full(cap, -1, dtype=np.int64),
                             np.zeros(cap, dtype=np.int64), np.full(cap, 0.5), np.zeros(1, dtype=np.int64),
                             z(), z(), z(), f(), z(), z(), z(), z(), f(), z())

    def feed(self, lines: np.ndarray, invalidated: np.ndarray | None = None) -> None:
        """Add accesses (line ids carrying STORE_TAG on stores; `invalidated`, optional, flags the entries
        that are another instance's taking of the line, untagged: module docstring; it needs a DepthStack
        engine)."""
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        flags = None if invalidated is None else np.ascontiguousarray(invalidated, dtype=np.bool_)
        if flags is not None and len(flags) != len(lines):
            raise InputError(f"write-back tracker: {len(flags)} invalidation flags for {len(lines)} accesses")
        paths = None
        if isinstance(self.engine, DepthStack):
            g = self.engine.feed_gaps(lines, drop=flags)
            dist, paths = g.distance, (g.turnover, g.position)
        elif flags is None:
            dist = self.engine.feed_distances(lines, tagged=True)
        else:
            raise InputError("write-back tracker: invalidations need a DepthStack engine (InstanceWritebacks)")
        i = 0
        while (i := _track(self.tables, lines, dist, paths, flags, i, self._limit())) < len(lines):
            self._grow()

    def _limit(self) -> int:
        """Keys the line table may hold before it must grow."""
        return int(self.tables.keys.shape[0] * _MAX_LOAD)

    def _grow(self) -> None:
        """Double the line table (rehashing every line's state)."""
        old = self.tables
        new = self._tables(2 * old.keys.shape[0])
        new.state[0] = old.state[0]
        move_values(rehash_slots(old.keys, new.keys), [(old.dirty, new.dirty), (old.kmax, new.kmax),
                                                       (old.kpos, new.kpos)])
        self.tables = new._replace(**{name: getattr(old, name) for name in _COUNTERS})

    def profiles(self) -> tuple[ReuseProfile, ReuseProfile]:
        """(starts, ends) as ReuseProfiles: bins of M and of d; ends' cold slot = infinite ends; with a
        DepthStack engine, each bin's turnover sum too (module docstring). The last gap of each dirty line
        runs to the end of the stream: its d is the line's stack depth then (a cache of C <= d has evicted
        it, dirty, within the stream)."""
        last = self.tables._replace(**{name: getattr(self.tables, name).copy() for name in _COUNTERS})
        paths = None
        if isinstance(self.engine, DepthStack):
            lines, g = self.engine.stack_gaps()
            depths, paths = g.distance, (g.turnover, g.position)
        else:
            lines, depths = self.engine.stack_depths()
        _last_gaps(last, lines, depths, paths)
        with_paths = paths is not None
        return (profile_from_counters(last.starts, last.starts_sum, 0,
                                      (last.starts_turn, last.starts_pos, last.starts_moving) if with_paths else None),
                profile_from_counters(last.ends, last.ends_sum, 0,
                                      (last.ends_turn, last.ends_pos, last.ends_moving) if with_paths else None))


_COUNTERS = [f"{end}{part}" for end in ("starts", "ends") for part in ("", "_sum", "_turn", "_pos", "_moving")]


@numba.njit(cache=True, nogil=True)
def _last_gaps(t, lines, depths, gaps):
    """Add the gap from each dirty line's last access to the stream's end (its stack depth and path)."""
    mask = np.uint64(t.keys.shape[0] - 1)
    hs = hash_shift_for(mask)
    for j in range(lines.shape[0]):
        slot = free_slot(t.keys, lines[j], 0, hs, mask)
        m, km, d = t.dirty[slot], t.kmax[slot], depths[j]
        k, pos = (gaps[0][j], gaps[1][j]) if gaps is not None else (0, 0.5)
        if k <= km:
            pos = t.kpos[slot]
        if m >= 0 and (d > m or k > km):
            _add_gap(t, m, slot, max(m, d), max(km, k), pos)


class ClassWritebacks:
    """Write-back profiles of one stream for a level whose set index takes `bits` bits from the line id (a
    physically indexed level's in-page bits): lines of different set classes never share a set, so each
    class has its own tracker (made when the class is first seen), fed its accesses in order, and their
    histograms are summed; a level of lines / 2^bits lines and the same ways reads them (ANALYSIS.md section
    14). WritebackTracker's interface."""

    def __init__(self, bits: int, removals: bool = False) -> None:
        self.mask, self.removals = np.uint64((1 << bits) - 1), removals
        self.trackers: dict[int, WritebackTracker] = {}
        self.buffers = PartitionBuffers()

    def feed(self, lines: np.ndarray, invalidated: np.ndarray | None = None) -> None:
        """WritebackTracker.feed, each access to its class's tracker."""
        part, present = partition(self.buffers, lines, self.mask, order=invalidated is not None)
        flags = None if invalidated is None else np.asarray(invalidated)[part.order]
        for c in present:
            lo, hi = part.bounds[c], part.bounds[c + 1]
            if c not in self.trackers:
                self.trackers[c] = WritebackTracker(16, DepthStack(16) if self.removals else None)
            self.trackers[c].feed(part.lines[lo:hi], None if flags is None else flags[lo:hi])

    def profiles(self) -> tuple[ReuseProfile, ReuseProfile]:
        """(starts, ends), summed over the classes."""
        pairs = [t.profiles() for t in self.trackers.values()]
        return sum_profiles([s for s, _ in pairs]), sum_profiles([e for _, e in pairs])


def stream_tracker(class_bits: int = 0, removals: bool = False) -> WritebackTracker | ClassWritebacks:
    """The write-back tracker of one stream: per set class of `class_bits` bits when > 0; a DepthStack
    engine when lines leave it (`removals`: invalidations)."""
    if class_bits:
        return ClassWritebacks(class_bits, removals)
    return WritebackTracker(engine=DepthStack() if removals else None)


class Sharers(NamedTuple):
    """The walk's directory: line keys, the instances holding a valid copy of each (a bit mask), [n_keys]."""

    keys: np.ndarray
    mask: np.ndarray
    state: np.ndarray


class SharerRun(NamedTuple):
    """One batch to walk: tagged line ids and each access's instance; out: the accesses with the
    invalidations put in (line id, instance, invalidation flag)."""

    lines: np.ndarray
    inst: np.ndarray
    out_lines: np.ndarray
    out_inst: np.ndarray
    out_inval: np.ndarray


@numba.njit(cache=True, nogil=True)
def _invalidations(t, run, begin, n_out, limit):
    """Copy accesses from `begin` to the outputs, putting before each store an invalidation of the line in
    every other instance holding a valid copy (a load adds its instance, a store leaves only its own); stop
    when the table holds `limit` keys or the outputs may not hold the next access. Returns (next index,
    entries written)."""
    mask = np.uint64(t.keys.shape[0] - 1)
    hs = hash_shift_for(mask)
    room = run.out_lines.shape[0] - 65  # an access puts in at most 64 entries and itself
    for i in range(begin, run.lines.shape[0]):
        if n_out > room:
            return i, n_out
        line = run.lines[i] & ~STORE_TAG
        c = run.inst[i]
        bit = np.uint64(1) << np.uint64(c)
        slot = free_slot(t.keys, line, 0, hs, mask)
        if t.keys[slot] != line:
            if t.state[0] + 1 > limit:
                return i, n_out
            t.keys[slot] = line
            t.mask[slot] = 0
            t.state[0] += 1
        if run.lines[i] != line:
            rest = t.mask[slot] & ~bit
            o = 0
            while rest:
                if rest & np.uint64(1):
                    run.out_lines[n_out] = line
                    run.out_inst[n_out] = o
                    run.out_inval[n_out] = True
                    n_out += 1
                rest >>= np.uint64(1)
                o += 1
            t.mask[slot] = bit
        else:
            t.mask[slot] |= bit
        run.out_lines[n_out] = run.lines[i]
        run.out_inst[n_out] = c
        run.out_inval[n_out] = False
        n_out += 1
    return run.lines.shape[0], n_out


MAX_INSTANCES = 64  # a line's sharers are one uint64 bit mask


class InstanceWritebacks:
    """Write-back profiles of each instance of a level serving groups of threads, fed the shared trace
    with each access's instance (module docstring: with `coherent`, write-invalidate between the instances;
    without, they ignore each other; per set class of `class_bits` bits when > 0)."""

    def __init__(self, instances: int, coherent: bool = True, class_bits: int = 0) -> None:
        if coherent and instances > MAX_INSTANCES:
            raise InputError(f"write-back profiles of {instances} instances of a cache level: at most "
                             f"{MAX_INSTANCES} with write-invalidate between them")
        self.trackers = [stream_tracker(class_bits, coherent) for _ in range(instances)]
        self.coherent = coherent
        self.sharers = self._sharers(1 << 12)

    @staticmethod
    def _sharers(cap: int) -> Sharers:
        return Sharers(np.full(cap, EMPTY, dtype=np.uint64), np.zeros(cap, dtype=np.uint64), np.zeros(1, np.int64))

    def feed(self, lines: np.ndarray, inst: np.ndarray) -> None:
        """Add accesses of the shared trace (tagged line ids) and the instance of each one's thread."""
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        inst = np.ascontiguousarray(inst, dtype=np.int64)
        if len(inst) != len(lines) or (len(inst) and not 0 <= inst.min() <= inst.max() < len(self.trackers)):
            raise InputError(f"write-back profiles of {len(self.trackers)} instances: got {len(lines)} accesses "
                             f"and {len(inst)} instance ids, which must be 0 to {len(self.trackers) - 1}")
        flags = None
        if self.coherent:
            lines, inst, flags = self._with_invalidations(lines, inst)
        for i, tracker in enumerate(self.trackers):
            mine = inst == i
            tracker.feed(lines[mine], None if flags is None else flags[mine])

    def _with_invalidations(self, lines: np.ndarray, inst: np.ndarray) -> tuple[np.ndarray, ...]:
        """The batch with the invalidations put in (SharerRun's outputs, in order)."""
        n = len(lines)
        size = n + n // 4 + 128
        parts, i = [], 0
        while i < n:
            run = SharerRun(lines, inst, np.empty(size, np.uint64), np.empty(size, np.int64), np.empty(size, np.bool_))
            i, n_out = _invalidations(self.sharers, run, i, 0, int(self.sharers.keys.shape[0] * _MAX_LOAD))
            parts.append((run.out_lines[:n_out], run.out_inst[:n_out], run.out_inval[:n_out]))
            if i < n and self.sharers.state[0] + 1 > int(self.sharers.keys.shape[0] * _MAX_LOAD):
                old, self.sharers = self.sharers, self._sharers(2 * self.sharers.keys.shape[0])
                self.sharers.state[0] = old.state[0]
                move_values(rehash_slots(old.keys, self.sharers.keys), [(old.mask, self.sharers.mask)])
        if not parts:
            return lines, inst, np.zeros(0, np.bool_)
        return tuple(np.concatenate([part[k] for part in parts]) for k in range(3))

    def profiles(self) -> list[tuple[ReuseProfile, ReuseProfile]]:
        """(starts, ends) of each instance, in instance order."""
        return [t.profiles() for t in self.trackers]
