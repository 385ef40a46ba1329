"""One core's accesses in a chunk, kept as stretches of the chunk's line ids instead of a copy.

A core's private trace within a chunk is a few long stretches of the chunk's rows (its
loop iterations), with the per-core offset added at the few stack rows. `CorePart` keeps
the stretches; the round-robin layout (`rounds`) and ReuseEngine.feed_runs read the
chunk's ids through them, so a core's ids are not copied out first. Measured on lu
MEDIUM, that copy and the layout's read of it cost 0.43 s of the 3.6 s sweep over
{1, 2, 4, 8, 16} cores (analysis/ANALYSIS.md, section 2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np


@dataclass
class CorePart:
    """Core's accesses start..stop of its part of a chunk: stretch s is the chunk's rows
    rows[s].., at breaks[s].. of the part (breaks ends with the part's length); `offset` is
    added to the ids at the chunk's rows `offrows` (sorted). ids and offrows are shared by
    every core's part."""

    ids: np.ndarray
    offrows: np.ndarray
    offset: int
    rows: np.ndarray
    breaks: np.ndarray
    start: int = 0
    stop: int = -1  # -1: the part's end

    def __post_init__(self) -> None:
        if self.stop < 0:
            self.stop = int(self.breaks[-1])

    @staticmethod
    def whole(lines: np.ndarray) -> CorePart:
        """An array of ids as a CorePart (one stretch, no offset rows)."""
        return CorePart(np.require(lines, np.uint64, ["C", "W"]), _NO_ROWS, 0, _FIRST_ROW,
                        np.array([0, len(lines)], dtype=np.int64))

    def __len__(self) -> int:
        return self.stop - self.start

    def gather(self, n: int | None = None) -> np.ndarray:
        """The next n (all when None) ids as an array."""
        n = len(self) if n is None else n
        return _gather(self.ids, self.offrows, np.uint64(self.offset), self.rows, self.breaks, self.start, n)

    def head(self, n: int) -> CorePart:
        """Its next n accesses (no copy)."""
        return CorePart(self.ids, self.offrows, self.offset, self.rows, self.breaks, self.start, self.start + n)

    def after(self, n: int) -> CorePart:
        """Without its next n accesses (no copy)."""
        return CorePart(self.ids, self.offrows, self.offset, self.rows, self.breaks, self.start + n, self.stop)


_NO_ROWS = np.zeros(0, dtype=np.int64)
_FIRST_ROW = np.zeros(1, dtype=np.int64)


def as_array(part: CorePart | np.ndarray) -> np.ndarray:
    """A part as an array (an array is itself)."""
    return part.gather() if isinstance(part, CorePart) else part


@numba.njit(cache=True, nogil=True, inline="always")
def _stretch_at(breaks, f):
    """The stretch holding position f of a part (f below its length)."""
    return np.searchsorted(breaks, f, side="right") - 1


@numba.njit(cache=True, nogil=True)
def _gather(ids, offrows, offset, rows, breaks, start, n):
    """CorePart.gather: n ids from position start, stretch by stretch (a copy, then the sparse
    offset fix: offset rows are few)."""
    out = np.empty(n, dtype=np.uint64)
    f = 0
    s = _stretch_at(breaks, start)
    j = 0
    while f < n:
        at = start + f
        a = rows[s] + at - breaks[s]
        m = min(n - f, breaks[s + 1] - at)
        out[f:f + m] = ids[a:a + m]
        if offset:
            j = add_offsets(out, f, (1, 1, 0), a, m, offrows, j, offset)
        f += m
        s += 1
    return out


_BLOCK = 1024  # rounds laid out at a time: the cores of each chunk in turn write to the block in L1/L2


class PartFields(NamedTuple):
    """The fields of one CorePart per core, for the layout kernels: tuples of the cores'
    arrays (one item per core, so numba compiles a kernel once per core count) and arrays."""

    ids: tuple
    offrows: tuple
    offsets: np.ndarray
    rows: tuple
    breaks: tuple
    starts: np.ndarray

    @staticmethod
    def of(parts: list[CorePart]) -> PartFields:
        """The fields of equal-length parts."""
        return PartFields(tuple(x.ids for x in parts), tuple(x.offrows for x in parts),
                          np.array([x.offset for x in parts], dtype=np.uint64), tuple(x.rows for x in parts),
                          tuple(x.breaks for x in parts), np.array([x.start for x in parts], dtype=np.int64))


@numba.njit(cache=True, nogil=True)
def _single_turns(parts, order, group, rounds, out):
    """Round-robin layout, one reference per turn, of `rounds` rounds of CoreParts (their
    PartFields): round by round, core by core, each reading its chunk's ids
    at its own place, over as many rounds as every core's stretch lasts (at most _BLOCK); the
    cores order[group[i]:group[i+1]] read the same chunk's ids, a group at a time. Measured
    0.8 ns a reference for 16 cores of one chunk, against 2.7 for copying each core's part
    out and laying those out."""
    ids_t, offrows_t, offsets, rows_t, breaks_t, starts = parts
    p = len(rows_t)
    pos = np.empty(p, dtype=np.int64)  # each core's next id, in its chunk's ids
    left = np.empty(p, dtype=np.int64)  # ids left in its stretch
    seg = np.empty(p, dtype=np.int64)
    jj = np.zeros(p, dtype=np.int64)
    which = np.zeros(p, dtype=np.int64)  # (two or three chunks) which the core reads
    for i in range(group.shape[0] - 1):
        which[order[group[i]:group[i + 1]]] = i
    for c in range(p):
        s = _stretch_at(breaks_t[c], starts[c])
        seg[c] = s
        pos[c] = rows_t[c][s] + starts[c] - breaks_t[c][s]
        left[c] = breaks_t[c][s + 1] - starts[c]
    f = 0
    while f < rounds:
        m = min(rounds - f, _BLOCK)
        for c in range(p):
            m = min(m, left[c])
        if group.shape[0] == 2:  # one chunk (most rounds: without the cores' order, 10 % faster)
            ids = ids_t[0]
            for r in range(m):
                o = (f + r) * p
                for c in range(p):
                    out[o + c] = ids[pos[c] + r]
        elif group.shape[0] <= 4:  # two or three chunks (some cores still read earlier ones): a
            ids = ids_t[order[0]]      # branch per reference, as the cores come, not the cores in
            other = ids_t[order[group[1]]]  # groups (1.7 against 2.6 ns a reference)
            third = ids_t[order[group[-2]]]
            for r in range(m):
                o = (f + r) * p
                for c in range(p):
                    w = which[c]
                    x = pos[c] + r
                    out[o + c] = ids[x] if w == 0 else (other[x] if w == 1 else third[x])
        else:
            for i in range(group.shape[0] - 1):
                ids = ids_t[order[group[i]]]
                for r in range(m):
                    o = (f + r) * p
                    for x in range(group[i], group[i + 1]):
                        c = order[x]
                        out[o + c] = ids[pos[c] + r]
        for c in range(p):
            if offsets[c]:
                jj[c] = add_offsets(out, f, (1, p, c), pos[c], m, offrows_t[c], jj[c], offsets[c])
            pos[c] += m
            left[c] -= m
            if left[c] == 0 and f + m < rounds:
                s = seg[c] + 1
                seg[c] = s
                pos[c] = rows_t[c][s]
                left[c] = breaks_t[c][s + 1] - breaks_t[c][s]
        f += m
    return out[:rounds * p]


@numba.njit(cache=True, nogil=True)
def _rounds_from(parts, rounds, k, out):
    """Round-robin layout, k > 1 per turn, of `rounds` rounds of CoreParts (their PartFields),
    into out: each core's stretches in turn, a reference at a time."""
    ids_t, offrows_t, offsets, rows_t, breaks_t, starts = parts
    p = len(rows_t)
    step = p * k
    n = rounds * k
    for c in range(p):
        ids = ids_t[c]
        rows = rows_t[c]
        breaks = breaks_t[c]
        s = _stretch_at(breaks, starts[c])
        j = 0
        f = 0
        while f < n:
            at = starts[c] + f
            a = rows[s] + at - breaks[s]
            m = min(n, breaks[s + 1] - starts[c]) - f
            for x in range(m):  # reference g is turn g // k's (g % k)-th
                g = f + x
                out[(g // k) * step + c * k + g % k] = ids[a + x]
            if offsets[c]:
                j = add_offsets(out, f, (k, step, c), a, m, offrows_t[c], j, offsets[c])
            f += m
            s += 1
    return out[:n * p]


@numba.njit(cache=True, nogil=True)
def add_offsets(out, f, layout, a, m, offrows, j, offset):
    """Add offset where a core's references f..f+m (chunk rows a..a+m) are at offset rows, in
    a round-robin layout (k per turn, `step` per round, core c) = layout (a plain copy: (1, 1, 0)).
    j: where to look in offrows (it only moves forward); returns the new j."""
    k, step, c = layout
    n_off = offrows.shape[0]
    if j < n_off and offrows[j] < a:
        j += np.searchsorted(offrows[j:n_off], a)
    while j < n_off and offrows[j] < a + m:
        g = f + offrows[j] - a
        out[(g // k) * step + c * k + g % k] += offset
        j += 1
    return j


def rounds(parts: list[CorePart], k: int, out: np.ndarray) -> np.ndarray:
    """Round-robin layout of equal-length parts, k per turn, into out (numba compiles once
    per core count)."""
    fields = tuple(PartFields.of(parts))  # plain: numba's dispatcher types a NamedTuple in Python (1 us a call)
    if k > 1:
        return _rounds_from(fields, len(parts[0]) // k, k, out)
    # the cores grouped by the chunk they read, in plain Python: numpy's argsort and diff cost
    # more for 16 cores (0.04 s of lu's sweep)
    numbers: dict[int, int] = {}  # id() of a chunk's ids -> its number
    chunk_of = [numbers.setdefault(id(x.ids), len(numbers)) for x in parts]
    order = sorted(range(len(parts)), key=chunk_of.__getitem__)
    group = [0, *(x for x in range(1, len(parts)) if chunk_of[order[x]] != chunk_of[order[x - 1]]), len(parts)]
    return _single_turns(fields, np.array(order, dtype=np.int64), np.array(group, dtype=np.int64), len(parts[0]),
                         out)
