"""Accesses sorted by set class (line & (2^bits - 1)), stably: the split that per-set-class engines
(set_classes.ClassEngine) and write-back trackers (writebacks.ClassWritebacks) feed their classes from."""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

NO_PATTERN = np.zeros(0, dtype=np.int64)  # no core pattern: the partition carries no cores


class Partition(NamedTuple):
    """A run of accesses ordered by class (stable): where each came from (when asked), its line (and
    core), and where each class's accesses begin in that order (bounds[c] .. bounds[c + 1]); `at` is
    the sort's scratch (one slot per class)."""

    order: np.ndarray
    lines: np.ndarray
    cores: np.ndarray
    bounds: np.ndarray
    at: np.ndarray


@numba.njit(cache=True, nogil=True, _nrt=False)
def _partition(lines, mask, pattern, part):
    """Counting sort of lines by class (line & mask), carrying access i's core pattern[i % len]
    when a pattern is given, and its index when part.order has room; fills `part` (a Partition
    of preallocated arrays; part.bounds must be zero). Lines are read twice rather than keeping
    their classes: a second read of a run that fits the caches is cheaper than a store and a load."""
    bounds = part.bounds
    n = lines.shape[0]
    if n == 0:
        return
    # a column walk repeats one class: its count and slot stay in registers until the class changes
    # (a load and a store of the same counter per access would chain through memory)
    prev, run = lines[0] & mask, 0
    for i in range(n):
        c = lines[i] & mask
        if c != prev:
            bounds[prev + 1] += run
            prev, run = c, 0
        run += 1
    bounds[prev + 1] += run
    for c in range(1, bounds.shape[0]):
        bounds[c] += bounds[c - 1]
    at = part.at
    for c in range(at.shape[0]):
        at[c] = bounds[c]
    plen, q = pattern.shape[0], 0
    keep_order = part.order.shape[0] == n
    prev = lines[0] & mask
    k = at[prev]
    for i in range(n):
        line = lines[i]
        c = line & mask
        if c != prev:
            at[prev] = k
            prev, k = c, at[c]
        part.lines[k] = line
        if keep_order:
            part.order[k] = i
        if plen:
            part.cores[k] = pattern[q]
            q = q + 1 if q + 1 < plen else 0
        k += 1


class PartitionBuffers:
    """The partition's arrays, kept between calls and grown as needed: fresh arrays each call cost a
    page fault per 4 KiB written (on lu MEDIUM's class pass, about a third of the sort's time). One
    pass's engines share one set (they are fed one after another); nothing returned points into it."""

    def __init__(self) -> None:
        self.order = np.empty(0, dtype=np.int32)  # a call's accesses are one chunk's (below 2^31)
        self.lines = np.empty(0, dtype=np.uint64)
        self.cores = np.empty(0, dtype=np.int64)
        self.distances = np.empty(0, dtype=np.int32)  # distances are below the engine's 2^29 lines

    def partition(self, n: int, classes: int, order: bool, cores: bool) -> Partition:
        """A Partition of views for n accesses (order and cores empty unless asked for)."""
        if len(self.lines) < n:
            size = max(n, 2 * len(self.lines))
            self.order, self.lines = np.empty(size, dtype=np.int32), np.empty(size, dtype=np.uint64)
            self.cores, self.distances = np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int32)
        return Partition(self.order[:n if order else 0], self.lines[:n], self.cores[:n if cores else 0],
                         np.zeros(classes + 1, dtype=np.int64), np.empty(classes, dtype=np.int64))


def partition(buffers: PartitionBuffers, lines: np.ndarray, mask: np.uint64, pattern: np.ndarray = NO_PATTERN,
              order: bool = True) -> tuple[Partition, list[int]]:
    """The accesses ordered by class (with where each came from, when `order`; each one's core from
    `pattern`, when given) and the classes present; the arrays are the buffers', valid until their next use."""
    part = buffers.partition(len(lines), int(mask) + 1, order, len(pattern) > 0)
    _partition(np.ascontiguousarray(lines, dtype=np.uint64), mask, pattern, part)
    return part, np.flatnonzero(np.diff(part.bounds)).tolist()
