"""Which set a line goes to, per cache level, as the real machine places it (used by cachesim's kernels).

The simulators see virtual line ids (address >> log2 line). A level's `indexing` (machines/model.py) says
where its set index comes from:

* virtual: the virtual line, set = line mod sets (first-level caches, VIPT).
* physical: the physical line. The OS backs each virtual page (page_bytes; 2 MiB with transparent huge
  pages) with a frame of its choosing, so the set bits inside the page offset are the virtual ones and
  the bits above come from the frame. The frame is a pseudo-random function of the virtual page number
  and a seed (`frame_of`): physical line = frame << page_bits | line offset in the page.
* hashed: a hash of the physical line, reduced to any set count (sliced last-level caches, whose slice
  and set come from a hash of address bits; the set count need not be a power of two).

The tag stays the virtual line id, so distinct lines stay distinct even when two pages draw one frame.
A level whose every set bit lies inside the page (or with one set) is placed as virtual: it is the same
placement, computed without a hash.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numba
import numpy as np

from common.errors import InputError
from common.hashing import FIB_MUL
from machines.model import INDEXINGS, CacheLevel

VIRTUAL, PHYSICAL, HASHED = 0, 1, 2
MODE = {"virtual": VIRTUAL, "physical": PHYSICAL, "hashed": HASHED}
MASK64 = (1 << 64) - 1
FRAME_SHIFT = 16  # frames are 48-bit numbers, so frame << page_bits never wraps
# One frame map is one draw of what the OS may do, and a program with few pages can land them in few colours
# (covariance at POW2 size: L2 hit rates from 0.52 to 0.78 over 12 maps): the simulators that grade the model
# (validate's ground truth, the DRAM oracle) report the mean over this many maps (seeds seed .. seed + 3)
FRAME_SEEDS = 4


class Placement(NamedTuple):
    """Per level: placement mode (VIRTUAL/PHYSICAL/HASHED), log2(lines per page), frame-map seed word."""

    mode: np.ndarray
    page_bits: np.ndarray
    seed: np.ndarray


@numba.njit(cache=True, nogil=True, inline="always")
def mix64(x):
    """splitmix64 of x (uint64): every output bit depends on every input bit, low bits included."""
    z = np.uint64(x) + np.uint64(FIB_MUL)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True, inline="always")
def frame_of(page, seed_word):
    """The frame the OS gave virtual page `page`: a 48-bit pseudo-random number fixed by the seed."""
    return mix64(np.uint64(page) ^ np.uint64(seed_word)) >> np.uint64(FRAME_SHIFT)


@numba.njit(cache=True, nogil=True, inline="always")
def physical_line(line, page_bits, seed_word):
    """Virtual line -> physical line: the page's frame above, the line's offset in its page below."""
    pb = np.uint64(page_bits)
    low = np.uint64(line) & ((np.uint64(1) << pb) - np.uint64(1))
    return (frame_of(np.uint64(line) >> pb, seed_word) << pb) | low


@numba.njit(cache=True, nogil=True, inline="always")
def line_mod(x, sets):
    """x mod sets; a mask when sets is a power of two (a 64-bit division costs tens of cycles)."""
    if sets & (sets - 1) == 0:
        return np.int64(np.uint64(x) & np.uint64(sets - 1))
    return np.int64(np.uint64(x) % np.uint64(sets))


@numba.njit(cache=True, nogil=True, inline="always")
def hashed_set(phys, sets):
    """A hashed level's set of a physical line: the hash's high 32 bits scaled to [0, sets) (no division)."""
    return np.int64(((mix64(phys) >> np.uint64(32)) * np.uint64(sets)) >> np.uint64(32))


@numba.njit(cache=True, nogil=True, inline="always")
def set_of(mode, page_bits, seed_word, line, sets):
    """The set of virtual line `line` in a level of `sets` sets under one level's Placement fields.

    Scalars, not the bundle: a tuple of arrays handed through nested inlined calls is reference
    counted on every access (atomic increments that cost more than the lookup)."""
    if mode == VIRTUAL:
        return line_mod(line, sets)
    phys = physical_line(line, page_bits, seed_word)
    if mode == PHYSICAL:
        return line_mod(phys, sets)
    return hashed_set(phys, sets)


def seed_word(seed: int) -> int:
    """The word XORed into page numbers: the seed mixed, so neighbouring seeds give unrelated frame maps."""
    return int(mix64(np.uint64(seed & MASK64)))


def page_line_bits(page_bytes: int, line_bytes: int) -> int:
    """log2(lines per page); the page must be a power of two holding whole lines."""
    if page_bytes < line_bytes or page_bytes & (page_bytes - 1) or page_bytes % line_bytes:
        raise InputError(f"page_bytes = {page_bytes}: must be a power of two of at least one {line_bytes} B "
                         f"line; fix the machine file's page_bytes")
    return (page_bytes // line_bytes).bit_length() - 1


def level_mode(level: CacheLevel, sets: int, page_bits: int) -> int:
    """A level's placement mode; physical with every set bit inside the page, or one set, is virtual."""
    if level.indexing not in INDEXINGS:
        raise InputError(f"cache {level.name}: indexing {level.indexing!r}; use one of {', '.join(INDEXINGS)}")
    if sets == 1 or level.indexing == "virtual":
        return VIRTUAL
    if level.indexing == "physical" and sets & (sets - 1) == 0 and sets <= 1 << page_bits:
        return VIRTUAL
    return MODE[level.indexing]


def placement(levels: Sequence[CacheLevel], sets: Sequence[int], page_bytes: int = 4096,
              seed: int = 0) -> Placement:
    """The kernels' placement bundle for `levels` laid out with `sets` sets each, one frame map for all."""
    bits = [page_line_bits(page_bytes, lv.line_bytes) for lv in levels]
    modes = [level_mode(lv, s, b) for lv, s, b in zip(levels, sets, bits)]
    word = seed_word(seed)
    return Placement(np.array(modes, dtype=np.int64), np.array(bits, dtype=np.uint64),
                     np.full(len(levels), word, dtype=np.uint64))
