"""Sampling's use of the two hashes of common/hashing.py (written once there, shared with the trace
decoder): SHARDS thresholds and salts, the array form of the line filter, and the slot of a line in
sampling's open-addressing tables (the Fibonacci product's bits 40.., masked to the table size).
One seed draws one salt, so every sampler (blocks, streams, source) with that seed picks the same lines.
"""
from __future__ import annotations

import numba
import numpy as np

from common.hashing import fib_product, shards_keep, shards_keep32

__all__ = ["HASH_SCALE", "FIB_SHIFT", "draw_salt", "hash_pick", "shards_keep", "shards_keep32",
           "shards_threshold", "slot_of"]

HASH_SCALE = 1 << 32  # the line hash is 32 bits
FIB_SHIFT = 40


def shards_threshold(rate: float) -> np.uint64:
    """Hash values kept at this rate: rate * 2^32 (2^32 keeps every line)."""
    return np.uint64(min(int(rate * HASH_SCALE), HASH_SCALE))


def draw_salt(rng: np.random.Generator) -> np.uint64:
    """The seeded hash salt, the first draw of a seed's generator (every sampler draws it alike)."""
    return np.uint64(rng.integers(0, 2**32))


@numba.njit(cache=True, nogil=True, inline="always")
def slot_of(x, mask):
    """Home slot of a line id in a table of mask + 1 slots (a Fibonacci product's bits 40..)."""
    return (fib_product(x) >> np.uint64(FIB_SHIFT)) & mask


def hash_pick(lines: np.ndarray, salt: np.uint64, threshold: np.uint64,
              scratch: np.ndarray | None = None) -> np.ndarray:
    """Indices of the lines SHARDS keeps (the array form of shards_keep)."""
    lines = np.ascontiguousarray(lines, dtype=np.uint64)  # (on a big-endian host the halves swap: same hash)
    keep = np.empty(lines.shape[0], dtype=np.bool_) if scratch is None else scratch
    return np.flatnonzero(_hash_mask(lines.view(np.uint32), np.uint32(salt), np.uint64(threshold), keep))


@numba.njit(cache=True, nogil=True)
def _hash_mask(halves, salt, threshold, keep):
    """keep[i] = whether SHARDS keeps line i, the line given as its two little-endian 32-bit halves.

    In 32-bit lanes and branch-free so that it vectorises (AVX2 multiplies 32-bit lanes only):
    this pass touches every access, so it bounds the sampled speed-up (1.7x faster than uint64 code).
    """
    if threshold >= np.uint64(HASH_SCALE):
        keep[:] = True
        return keep
    t = np.uint32(threshold)
    for j in range(keep.shape[0]):
        keep[j] = shards_keep32(halves[2 * j], halves[2 * j + 1], salt, t)
    return keep
