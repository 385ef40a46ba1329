"""Shared (interleaved) trace from per-core private traces (Algorithm 2), streamed.

Each turn one core contributes `refs_per_turn` references. Round-robin visits the cores
in order; uniform random picks a core uniformly among those that still have references
(the paper redraws when it hits a finished core, which is the same distribution). A
finished core drops out; its last turn may be shorter. The random choice for each turn is
a uniform draw from a seeded generator, kept until used, so the result does not depend on
how the private streams are chunked.

`Interleaver` is push-based: callers push each core's references as they appear in the
sequential trace and drain whatever can already be interleaved. With a static schedule
core 0's references come first and core p-1's last, so lanes can wait a long time; once
the buffered references exceed `memory_budget` bytes, a lane's new references go to a
zstd-compressed temporary file (in order) and are read back as the lane drains, so memory
stays bounded whatever the trace length. `interleave_streams` is the pull-based wrapper.
"""
from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from typing import Iterable, Iterator

import numba
import numpy as np

from analysis.options import INTERLEAVES
from analysis.profiles import core_parts
from analysis.profiles.core_parts import CorePart
from common.errors import InputError, PptmcError
from common.spill import FrameFile

BUDGET_ENV = "PPTMC_MEMORY_BUDGET"  # overrides the default budget: bytes, or with a K, M or G suffix
_BUDGET_CAP = 1 << 30
_BUDGET_FLOOR = 128 << 20


def _physical_budget() -> int:
    """An eighth of the physical memory, at least 128 MiB and at most 1 GiB."""
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        phys = 0
    return int(min(_BUDGET_CAP, max(_BUDGET_FLOOR, phys // 8)))


def default_memory_budget() -> int:
    """Bytes of waiting references that one profiling pass keeps in memory before spilling.

    The budget is a cap, not a reservation: memory still grows with what actually waits
    (with a static schedule almost the whole trace, see ANALYSIS.md), never beyond it. It is
    DEFAULT_MEMORY_BUDGET (an eighth of the physical memory, at least 128 MiB and at most
    1 GiB) unless $PPTMC_MEMORY_BUDGET says otherwise (e.g. 256M); read at each call, so a
    bad value is reported when a pass starts."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    return parse_budget(raw, f"${BUDGET_ENV}") if raw else DEFAULT_MEMORY_BUDGET


def resolve_memory_budget(given: int | None) -> int:
    """`given` bytes, or the default budget when None (the library's memory_budget=None)."""
    return default_memory_budget() if given is None else given


def parse_budget(text: str, where: str) -> int:
    """A byte count such as 268435456, 256M or 1G."""
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B")
    mult = scale.get(t[-1:], 1)
    try:
        value = int(float(t[:-1] if t[-1:] in scale else t) * mult)
    except ValueError:
        value = -1
    if value < 1:
        raise InputError(f"{where}={text!r}: expected a positive byte count such as 268435456, 256M or 1G")
    return value


DEFAULT_MEMORY_BUDGET = _physical_budget()  # bytes of waiting references, shared by all core counts of one pass
_TURNS_PER_BATCH = 1 << 15
_REFS_PER_BATCH = 1 << 18  # round-robin batches stay cache-sized: the layout writes each line p times
# chunks whose CoreParts wait in place (older ones are copied out): with more than one, a core
# that has not finished the last chunk when the next one comes still reads it in place (lu
# MEDIUM: a fifth of the 16-core rounds); the chunks' arrays held are outside the memory budget's count
HELD_CHUNKS = 3


@dataclass
class Batch:
    """A run of the shared trace: line ids in order, and each core's part of them in order."""

    lines: np.ndarray
    pieces: list[tuple[int, np.ndarray | CorePart]]  # a CorePart only for its length (rr rounds of CoreParts)
    core_pattern: np.ndarray  # core of each reference is core_pattern tiled `repeats` times
    repeats: int = 1

    @property
    def core(self) -> np.ndarray:
        """Core of every reference (built on demand: only the simulator needs it)."""
        return np.tile(self.core_pattern, self.repeats) if self.repeats > 1 else self.core_pattern


def pattern_cores(core_pattern: np.ndarray, n: int) -> np.ndarray:
    """The core of each of n accesses whose i-th is by core_pattern[i % len(core_pattern)] (np.tile: a
    tenth of np.resize's time)."""
    pattern = np.asarray(core_pattern, dtype=np.int64)
    return np.tile(pattern, -(-n // max(len(pattern), 1)))[:n]


@numba.njit(cache=True, nogil=True)
def _rounds_of(parts, k, out):
    """Round-robin layout of a tuple of equal-length per-core parts, k references per turn,
    into out[:len(parts) * len(parts[0])]."""
    n_cores = len(parts)
    n = parts[0].shape[0]
    o = 0
    if k == 1:  # the common case, without the inner loop's overhead
        for r in range(n):
            for c in range(n_cores):
                out[o] = parts[c][r]
                o += 1
        return out[:o]
    for start in range(0, n, k):
        for c in range(n_cores):
            for q in range(start, start + k):
                out[o] = parts[c][q]
                o += 1
    return out[:o]


def _rounds(parts: list[np.ndarray], k: int, out: np.ndarray | None = None) -> np.ndarray:
    """Round-robin layout of equal-length per-core parts (numba compiles once per core count),
    into out when given (a reused buffer: no fresh pages to fault in), else a new array."""
    if len(parts) == 1:
        return parts[0]
    n = len(parts) * len(parts[0])
    if out is None or len(out) < n:
        out = np.empty(n, dtype=np.uint64)
    # one array type for the whole tuple: spilled frames come back read-only
    return _rounds_of(tuple(np.require(a, np.uint64, ["C", "W"]) for a in parts), k, out)


class _Lane:
    """One core's FIFO of references: a deque of arrays, then (if spilled) a file of frames."""

    def __init__(self, spill_dir: str | None, dtype: type = np.uint64) -> None:
        self.dtype = np.dtype(dtype)
        self.mem: deque[np.ndarray] = deque()
        self.mem_items = 0
        self.closed = False
        self._spill = FrameFile(spill_dir, "interleaving buffers")
        self.disk_items = 0
        self.taken = 0  # references taken so far
        self.marks: deque[int] = deque()  # positions (references taken) of the barriers ahead, in order

    def push_mem(self, lines: np.ndarray | CorePart) -> None:
        self.mem.append(lines)
        self.mem_items += len(lines)

    def push_disk(self, lines: np.ndarray | CorePart) -> None:
        """Append a compressed frame at the end of the spill file."""
        lines = core_parts.as_array(lines)
        self._spill.append(np.ascontiguousarray(lines, dtype=self.dtype).tobytes())
        self.disk_items += len(lines)

    def promote(self, need: int) -> None:
        """Read frames back from disk until `need` references are in memory (or the file is read)."""
        while self.disk_items and self.mem_items < need:
            frame = np.frombuffer(self._spill.pop(), dtype=self.dtype)
            self.disk_items -= len(frame)
            self.push_mem(frame)
        if not self.disk_items:
            self._spill.close()

    def take(self, n: int) -> np.ndarray:
        """Pop the first n in-memory references."""
        parts = []
        while n:
            head = self.mem[0]
            if len(head) <= n:
                parts.append(core_parts.as_array(self.mem.popleft()))
                n -= len(head)
            else:
                parts.append(head.gather(n) if isinstance(head, CorePart) else head[:n])
                self.mem[0] = head.after(n) if isinstance(head, CorePart) else head[n:]
                n = 0
        out = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self.mem_items -= len(out)
        self.taken += len(out)
        return out

    def take_head(self, n: int) -> np.ndarray | CorePart:
        """Pop the first n references, all in the first in-memory item, without copying."""
        head = self.mem[0]
        if len(head) == n:
            self.mem.popleft()
        else:
            self.mem[0] = head.after(n) if isinstance(head, CorePart) else head[n:]
            head = head.head(n) if isinstance(head, CorePart) else head[:n]
        self.mem_items -= n
        self.taken += n
        return head

    def settle(self, keep: list[np.ndarray]) -> None:
        """Copy out the CoreParts still waiting, except those of the chunks (ids) in `keep`, so
        that no other chunk's arrays are held."""
        def kept(x) -> bool:
            return isinstance(x, CorePart) and any(x.ids is ids for ids in keep)

        if any(isinstance(x, CorePart) and not kept(x) for x in self.mem):
            self.mem = deque(x if kept(x) else core_parts.as_array(x) for x in self.mem)

    @property
    def exhausted(self) -> bool:
        return self.closed and not self.mem_items and not self.disk_items

    @property
    def pushed(self) -> int:
        """References pushed so far (taken, waiting in memory or spilled)."""
        return self.taken + self.mem_items + self.disk_items

    @property
    def to_barrier(self) -> int | None:
        """References left before the next barrier (None: no barrier ahead)."""
        return self.marks[0] - self.taken if self.marks else None

    @property
    def phase_closed(self) -> bool:
        """No more references will come before the lane's next barrier (or at all)."""
        left = self.to_barrier
        return self.closed or (left is not None and self.mem_items + self.disk_items >= left)

    @property
    def at_barrier(self) -> bool:
        return self.to_barrier == 0


class Interleaver:
    """Push-based Algorithm 2 over `n_cores` lanes; `drain()` yields Batches of the shared trace."""

    def __init__(self, n_cores: int, strategy: str = "rr", seed: int = 0, refs_per_turn: int = 1,
                 memory_budget: int | None = None, spill_dir: str | os.PathLike | None = None,
                 reuse: bool = False) -> None:
        """reuse: the round-robin layout of every Batch is written into one buffer kept by the
        Interleaver (so a Batch's lines are valid only until the next one is drained), and
        Batches are 4x larger: a consumer that feeds each Batch to an engine before asking for
        the next saves the fresh pages and the engine's per-Batch table warm-up. A Batch then
        also ends where a lane's pushed array ends, so its pieces are views, not concatenations
        (which cost 0.1 s of the jacobi-2d MEDIUM sweep, references and distances)."""
        if strategy not in INTERLEAVES:
            raise InputError(f"--interleave {strategy!r}: expected one of {', '.join(INTERLEAVES)}")
        if refs_per_turn < 1:
            raise InputError(f"--refs-per-turn {refs_per_turn}: must be at least 1")
        self.lanes = [_Lane(None if spill_dir is None else os.fspath(spill_dir)) for _ in range(n_cores)]
        self.strategy, self.k = strategy, refs_per_turn
        self.budget = resolve_memory_budget(memory_budget)
        self.active = list(range(n_cores))
        self.turn = 0  # round-robin: index into active of the core whose turn it is
        self.rng = np.random.default_rng(seed)
        self.draws = np.zeros(0)
        self.blocked: int | None = None  # core whose references are needed to continue
        self.batch_refs = _REFS_PER_BATCH * (4 if reuse else 1)
        self.buffer = np.empty(self.batch_refs + 1, dtype=np.uint64) if reuse else None
        self.latest: list[np.ndarray] = []  # the ids of the chunks of the last CoreParts pushed (HELD_CHUNKS)
        self.waiting: list[int] = []  # cores at a barrier that some other core has not reached yet

    def push(self, core: int, lines: np.ndarray | CorePart) -> None:
        """Append references of one core (in its program order). A CorePart is kept as it is
        until `settle`."""
        lane = self.lanes[core]
        if lane.disk_items or (sum(ln.mem_items for ln in self.lanes) + len(lines)) * 8 > self.budget:
            lane.push_disk(lines)
        elif isinstance(lines, CorePart):
            lane.push_mem(lines)
            if not any(lines.ids is ids for ids in self.latest):
                self.latest = [*self.latest[1 - HELD_CHUNKS:], lines.ids]
        else:  # a view pins its whole parent array (all cores' lines): copy unless it is most of it
            lane.push_mem(np.array(lines, dtype=np.uint64, copy=pins_much(lines)))

    def settle(self) -> None:
        """Copy out the waiting CoreParts but those of the last HELD_CHUNKS chunks pushed
        (call after draining: each holds its whole chunk's arrays)."""
        for lane in self.lanes:
            lane.settle(self.latest)

    def pushed(self) -> np.ndarray:
        """Each core's references pushed so far (where the next one pushed will stand)."""
        return np.array([lane.pushed for lane in self.lanes], dtype=np.int64)

    def barriers(self, positions: np.ndarray) -> None:
        """Barriers ahead: row j of `positions` (barriers x cores) holds how many references each core
        pushes before barrier j (counted from its first). No core takes a reference after a barrier until
        every core has taken all of its references before it, as threads wait at an OpenMP barrier."""
        for row in np.asarray(positions, dtype=np.int64).reshape(-1, len(self.lanes)):
            for core, at in enumerate(row.tolist()):
                self.barrier(core, at)

    def barrier(self, core: int, at: int) -> None:
        """One core's next barrier: after its first `at` references (see barriers)."""
        lane = self.lanes[core]
        if at < lane.taken or (lane.marks and at < lane.marks[-1]):
            raise PptmcError(f"internal error: barrier at reference {at} of core {core}, which is past it; "
                             f"please report it with the trace")
        lane.marks.append(at)

    def close(self, core: int) -> None:
        """No more references will come for this core."""
        self.lanes[core].closed = True

    def close_all(self) -> None:
        for c in range(len(self.lanes)):
            self.close(c)

    @property
    def finished(self) -> bool:
        return not self.active and not self.waiting

    def _avail(self) -> np.ndarray:
        """References each core may take now: those in memory, up to its next barrier."""
        for lane in self.lanes:
            left = lane.to_barrier
            lane.promote(self.k if left is None else min(self.k, left))
        return np.array([lane.mem_items if lane.to_barrier is None else min(lane.mem_items, lane.to_barrier)
                         for lane in self.lanes], dtype=np.int64)

    def _drop(self, at: int) -> None:
        """Take core active[at] out of the turns: it has finished, or waits at a barrier."""
        c = self.active.pop(at)
        if self.lanes[c].at_barrier:
            self.waiting.append(c)

    def _release(self) -> bool:
        """When every core has reached the barrier, those that wait take turns again, in core order
        (past any barriers that end empty phases); whether some core has turns now."""
        while not self.active and self.waiting:
            back, self.waiting, self.turn = sorted(self.waiting), [], 0
            for c in back:
                self.lanes[c].marks.popleft()
            for c in back:
                lane = self.lanes[c]
                if lane.at_barrier:  # an empty phase for this core: it waits again at once
                    self.waiting.append(c)
                elif not lane.exhausted:
                    self.active.append(c)
        return bool(self.active)

    def drain(self) -> Iterator[Batch]:
        """Yield everything that can be interleaved now; sets `blocked` to the core it waits for.

        Each Batch also carries every core's part, so private-cache consumers need not re-split it."""
        yield from (self._drain_rr() if self.strategy == "rr" else self._drain_random())

    def _drain_rr(self) -> Iterator[Batch]:
        """Whole rounds at once while every active core has k per round buffered; else the rest of
        the round, up to the first core that must wait."""
        k = self.k
        while self.active or self._release():
            avail = self._avail()
            if self.turn == 0:
                rounds = min(int(avail[self.active].min()) // k, max(1, self.batch_refs // (len(self.active) * k)))
                if rounds and self.buffer is not None:  # end where a pushed array ends: take() copies nothing
                    rounds = min(rounds, max(1, min(len(self.lanes[c].mem[0]) for c in self.active) // k))
                if rounds:
                    pattern = np.repeat(np.asarray(self.active, dtype=np.int64), k)
                    yield self._full_rounds(rounds, pattern)
                    continue
            batch = self._partial_round(avail)
            if batch is not None:
                yield batch
            if self.blocked is not None:
                return
        self.blocked = None

    def _full_rounds(self, rounds: int, pattern: np.ndarray) -> Batch:
        """`rounds` whole rounds of the active cores: CoreParts read in place when some core's
        next references are one (reuse only, where every core's are in its first item)."""
        n = rounds * self.k
        heads = [self.lanes[c].mem[0] for c in self.active] if self.buffer is not None else []
        if len(heads) > 1 and any(isinstance(h, CorePart) for h in heads) and min(len(h) for h in heads) >= n:
            parts = [self.lanes[c].take_head(n) for c in self.active]
            lines = core_parts.rounds([x if isinstance(x, CorePart) else CorePart.whole(x) for x in parts],
                                      self.k, self.buffer)
        else:
            parts = [self.lanes[c].take(n) for c in self.active]
            lines = _rounds(parts, self.k, self.buffer)
        return Batch(lines, list(zip(self.active, parts)), pattern, rounds)

    def _partial_round(self, avail: np.ndarray) -> Batch | None:
        """The turns from the current one to the end of the round (or to the first core that
        must wait, which sets `blocked`), as one Batch (None if no turn is taken): one engine
        call instead of one per turn."""
        k = self.k
        self.blocked = None
        pieces = []
        while self.turn < len(self.active):
            c = self.active[self.turn]
            lane = self.lanes[c]
            if avail[c] < k and not lane.phase_closed:
                self.blocked = c
                break
            n = min(k, int(avail[c]))
            if n:
                pieces.append((c, lane.take(n)))
            if lane.exhausted or lane.at_barrier:
                self._drop(self.turn)
            else:
                self.turn += 1
        if self.turn >= len(self.active):
            self.turn = 0
        if not pieces:
            return None
        if len(pieces) == 1:
            return _single(pieces[0][1], pieces[0][0])
        lines = np.concatenate([a for _, a in pieces])
        pattern = np.concatenate([np.full(len(a), c, dtype=np.int64) for c, a in pieces])
        return Batch(lines, pieces, pattern)

    def _drain_random(self) -> Iterator[Batch]:
        """Uniform random turns among the cores that still have references (seeded)."""
        k = self.k
        while self.active or self._release():
            avail = self._avail()
            n_turns = min(_TURNS_PER_BATCH, int(avail[self.active].sum()) // k + len(self.active))
            if len(self.draws) < n_turns:
                self.draws = np.concatenate([self.draws, self.rng.random(_TURNS_PER_BATCH)])
            turns = np.asarray(self.active)[(self.draws[:n_turns] * len(self.active)).astype(np.int64)]
            cut = _full_turns(turns, avail, k, self.active)
            if cut:
                yield self._gather(turns[:cut])
                self.draws = self.draws[cut:]
            if cut == len(turns):
                continue
            c = int(turns[cut])
            lane = self.lanes[c]
            if lane.disk_items and (lane.to_barrier is None or lane.mem_items < lane.to_barrier):
                lane.promote(lane.mem_items + k)
                continue
            if not lane.phase_closed:
                self.blocked = c
                return
            left = int(self._avail()[c])
            if left:
                yield _single(lane.take(left), c)
            self.draws = self.draws[1:]
            self._drop(self.active.index(c))
        self.blocked = None

    def _gather(self, turns: np.ndarray) -> Batch:
        """Lay out the references of full turns in turn order."""
        k = self.k
        out = np.empty(len(turns) * k, dtype=np.uint64)
        ar = np.arange(k)
        pieces = []
        for c in self.active:
            idx = np.nonzero(turns == c)[0]
            if len(idx):
                pieces.append((c, self.lanes[c].take(len(idx) * k)))
                out[(idx[:, None] * k + ar).ravel()] = pieces[-1][1]
        return Batch(out, pieces, np.repeat(turns.astype(np.int64), k))


class Lanes:
    """Per-core FIFOs of values that travel beside an Interleaver's references (each access's
    private distance, for coherence): pushed in the same per-core order, taken per Batch
    piece. Beyond `memory_budget` bytes in memory, new values spill like the Interleaver's."""

    def __init__(self, n_cores: int, dtype: type, memory_budget: int | None = None,
                 spill_dir: str | os.PathLike | None = None) -> None:
        self.lanes = [_Lane(None if spill_dir is None else os.fspath(spill_dir), dtype) for _ in range(n_cores)]
        self.budget = resolve_memory_budget(memory_budget)
        self.itemsize = np.dtype(dtype).itemsize

    def push(self, core: int, values: np.ndarray) -> None:
        """Append values of one core (never modified afterwards: the array is kept, not copied)."""
        lane = self.lanes[core]
        if lane.disk_items or (sum(ln.mem_items for ln in self.lanes) + len(values)) * self.itemsize > self.budget:
            lane.push_disk(values)
        else:
            lane.push_mem(values)

    def take(self, core: int, n: int) -> np.ndarray:
        """The next n values of one core."""
        lane = self.lanes[core]
        lane.promote(n)
        if lane.mem_items < n:
            raise PptmcError(f"internal error: core {core} has {lane.mem_items} values for {n} interleaved "
                             f"references; please report it with the trace")
        return lane.take(n) if n else np.zeros(0, dtype=lane.dtype)


def pins_much(a: np.ndarray) -> bool:
    """Whether to copy before keeping: a view of less than half of the buffer it belongs to
    (keeping it would hold more than twice its bytes), or of an object that is not a buffer.
    Views of at least half are kept: with a static schedule most chunks belong to one or two
    cores, and copying them all measured 2-4 % of a sweep. An array made by numba is a view of
    its whole numba buffer, so it is kept."""
    base = a.base
    if base is None:
        return False
    try:
        whole = base.nbytes if isinstance(base, np.ndarray) else memoryview(base).nbytes
    except TypeError:
        return True
    return 2 * a.nbytes < whole


def _single(lines: np.ndarray, core: int) -> Batch:
    return Batch(lines, [(core, lines)], np.full(len(lines), core, dtype=np.int64))


def _full_turns(turns: np.ndarray, avail: np.ndarray, k: int, active: list[int]) -> int:
    """How many leading turns can each take k references from what is buffered."""
    occ = np.zeros(len(turns), dtype=np.int64)
    for c in active:
        sel = turns == c
        occ[sel] = np.arange(int(sel.sum()))
    bad = np.nonzero((occ + 1) * k > avail[turns])[0]
    return int(bad[0]) if len(bad) else len(turns)


def interleave_streams(streams: Iterable[Iterator[np.ndarray]], strategy: str = "rr", seed: int = 0,
                       refs_per_turn: int = 1) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pull-based: interleave lazy per-core streams, pulling only the core that is waited for."""
    its = [iter(s) for s in streams]
    itl = Interleaver(len(its), strategy, seed, refs_per_turn)
    while True:
        for batch in itl.drain():
            yield batch.lines, batch.core
        c = itl.blocked
        if itl.finished or c is None:
            return
        nxt = next(its[c], None)
        if nxt is None:
            itl.close(c)
        else:
            itl.push(c, nxt)


def interleave_arrays(private: list[np.ndarray], strategy: str = "rr", seed: int = 0,
                      refs_per_turn: int = 1, barriers: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """In-memory convenience: the whole interleaved trace and its core ids. `barriers` (barriers x
    cores): how many references each core makes before each barrier (Interleaver.barriers)."""
    itl = Interleaver(len(private), strategy, seed, refs_per_turn)
    for c, a in enumerate(private):
        if len(a):
            itl.push(c, np.asarray(a, dtype=np.uint64))
    if barriers is not None:
        itl.barriers(barriers)
    itl.close_all()
    parts = [(b.lines, b.core) for b in itl.drain()]
    if not parts:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
