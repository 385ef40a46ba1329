"""The set-associative LRU pieces both simulators of cachesim.py share: the flat way arrays, one set lookup,
one invalidation, the per-level layout bundle and which instance of each level each thread uses.

A level has one instance per thread when private, and one per group of `CacheLevel.instance_cores` cores when
shared (one for the whole machine by default; e.g. one L3 per 4-core CCX). Thread t runs on core
`machines.model.thread_cores(threads, machine_cores, placement)[t]` and uses the instance of that core's group.
Instances no thread uses are not laid out: the instances used are numbered densely from 0. Without a
machine core count (0) every shared level has one instance, the topology-free hierarchy of the hit-rate models.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numba
import numpy as np

from analysis.hitrates.set_index import set_of
from common.errors import InputError
from machines.model import PLACEMENTS, CacheLevel, thread_cores

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)  # the tag of an empty way (no line id may take it)


class Levels(NamedTuple):
    """The hierarchy's layout, per level: first slot, sets, ways, 1 when one instance per thread (private),
    the directory column of its lost-copy mask (0: the level has one instance), the instance each thread uses
    (levels x threads), then the fields of set_index.Placement. Flat arrays only: a nested tuple costs
    reference counting on every access."""

    off: np.ndarray
    sets: np.ndarray
    ways: np.ndarray
    priv: np.ndarray
    col: np.ndarray
    inst: np.ndarray
    mode: np.ndarray
    page_bits: np.ndarray
    seed: np.ndarray


class Slots(NamedTuple):
    """Every way of every set of every level instance: its line and last-use time."""

    tags: np.ndarray
    stamps: np.ndarray


@numba.njit(cache=True, nogil=True, inline="always")
def lookup(tags, stamps, base, ways, line, clock):
    """The one LRU set lookup: ways base..base+ways-1 of flat arrays; a miss fills the LRU (or an invalid) way."""
    victim = base
    oldest = stamps[base]
    for w in range(base, base + ways):
        if tags[w] == line:
            stamps[w] = clock
            return True
        if stamps[w] < oldest:
            oldest = stamps[w]
            victim = w
    tags[victim] = line
    stamps[victim] = clock
    return False


@numba.njit(cache=True, nogil=True, inline="always")
def invalidate(tags, stamps, base, ways, line):
    """Drop `line` from one set (it becomes the next victim); True if it was there."""
    for w in range(base, base + ways):
        if tags[w] == line:
            tags[w] = EMPTY
            stamps[w] = 0
            return True
    return False


@numba.njit(cache=True, nogil=True, inline="always")
def level_base(levels, lv, inst, line):
    """First slot of the set of `line` in instance `inst` of level `lv`."""
    sets = levels.sets[lv]
    s = set_of(levels.mode[lv], levels.page_bits[lv], levels.seed[lv], line, sets)
    return levels.off[lv] + (inst * sets + s) * levels.ways[lv]


def geometry(level: CacheLevel, fully_up_to: int) -> tuple[int, int]:
    """(sets, ways) of a level as the simulators lay it out."""
    n_lines = level.n_lines
    if n_lines < 1:
        raise InputError(f"cache {level.name}: size {level.size_bytes} B holds no {level.line_bytes} B line")
    ways = level.associativity
    if ways == 0 or ways >= n_lines or n_lines <= fully_up_to:
        return 1, n_lines
    if n_lines % ways:
        raise InputError(f"cache {level.name}: {n_lines} lines is not a multiple of "
                         f"associativity {ways}; fix the machine description")
    return n_lines // ways, ways


def instance_map(caches: Sequence[CacheLevel], threads: int, machine_cores: int = 0,
                 placement: str = "close") -> np.ndarray:
    """The instance of each level each thread uses (levels x threads, dense from 0): its own when private,
    its core's group's when shared. machine_cores 0 = no topology: one instance of every shared level."""
    if placement not in PLACEMENTS:
        raise InputError(f"placement {placement!r}: use one of {', '.join(PLACEMENTS)}")
    if threads < 1 or machine_cores < 0:
        raise InputError(f"{threads} threads on {machine_cores} cores: give at least one thread")
    on_core = np.array(thread_cores(threads, machine_cores or 1, placement), dtype=np.int64)
    rows = []
    for lv in caches:
        if not lv.shared:
            rows.append(np.arange(threads, dtype=np.int64))  # private: one per thread, also oversubscribed
            continue
        group = lv.instance_cores(machine_cores) if machine_cores else 1 << 62
        if group < 1:
            raise InputError(f"cache {lv.name}: cores_per_instance {lv.cores_per_instance} must be at least 1")
        rows.append(np.unique(on_core // group, return_inverse=True)[1].astype(np.int64).reshape(threads))
    return np.array(rows, dtype=np.int64).reshape(len(caches), threads)
