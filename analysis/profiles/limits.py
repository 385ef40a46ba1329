"""What the profiling sweep can take, checked before any work: how many cores, and how much memory a
trace's core counts need against what the machine has."""
from __future__ import annotations

import os
from typing import Sequence

from common.errors import InputError

# The round-robin layout of a shared trace compiles one numba kernel per core count whose tuples have one
# item per core (core_parts.rounds): 256 cores compile in about 12 s, 1024 fail inside numba.
MAX_CORES = 256
BYTES_PER_LINE = 48        # the most a reuse engine holds per line (ANALYSIS.md, line numbering)
BYTES_PER_CORE = 256 << 10  # per-core buffers of a core count (lanes, parts, counters), measured at ~200 KiB


def check_core_counts(cores: Sequence[int], option: str = "--cores") -> None:
    """Refuse core counts the engine cannot take, naming the limit."""
    too_many = [c for c in cores if c > MAX_CORES]
    if too_many:
        raise InputError(f"{option} {','.join(map(str, too_many))}: the profiling sweep takes at most "
                         f"{MAX_CORES} cores (its per-core-count kernels are compiled with one slot per core)")


def estimated_bytes(cores: Sequence[int]) -> int:
    """The memory a sweep needs whatever the trace: every core count's per-core buffers. (What the engines
    hold grows with the trace's distinct lines, at most BYTES_PER_LINE each per engine; the trace's header
    does not count them, and its access count overstates them by orders of magnitude, so they are not
    part of this bound.)"""
    return sum(p * BYTES_PER_CORE for p in cores)


def available_bytes() -> int:
    """Memory the machine has free now (MemAvailable), or all of it where /proc/meminfo is missing."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(cores: Sequence[int], what: str) -> None:
    """Refuse core counts the engine cannot take, or whose buffers alone exceed the free memory."""
    check_core_counts(cores)
    need, have = estimated_bytes(cores), available_bytes()
    if need > have:
        raise InputError(f"{what}: cores {','.join(map(str, cores))} need at least {need / 2**30:.1f} GiB of "
                         f"per-core buffers ({BYTES_PER_CORE >> 10} KiB per core of each core count), but "
                         f"{have / 2**30:.1f} GiB is free; give fewer or smaller core counts")
