"""Process-wide C allocator settings for the analysis' allocation pattern.

Why: a profile sweep allocates and frees chunk-sized arrays (megabytes each) for every
chunk and core count. With glibc's defaults the heap top is given back to the kernel once
enough of it is free, so the next chunk's arrays come back as fresh pages, each zeroed by
the kernel on first touch. lu MEDIUM's sweep of {1, 2, 4, 8, 16} cores took 45-65 K page
faults and 0.13-0.28 s of system time that way; with these settings it takes almost none,
and its peak memory stays the same (it is reached anyway).

The settings change the whole process, so only entry points call `keep_freed_memory`
(`pptmc`'s main, and the benchmarks, which measure what the command does); library code
never does. There is no Python package for mallopt(3), hence ctypes.
"""
from __future__ import annotations

import ctypes

_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # bytes: glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit)
TRIM_THRESHOLD = 1 << 30  # bytes of free heap top kept before any is given back


def keep_freed_memory() -> bool:
    """Keep freed heap memory for reuse: blocks below 32 MiB come from the heap, and the heap
    top is trimmed only past 1 GiB free. False (nothing changed) where the C library has no
    mallopt (not glibc) or refuses a setting."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # Both, and mmap first: a fixed trim threshold alone also fixes the mmap threshold at its
    # 128 KiB default, which maps every array separately (lu's sweep: 750 K faults).
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
