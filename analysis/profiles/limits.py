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
ENGINES_PER_COUNT = 2      # a core count's private engines together and its shared engine each hold the lines
BYTES_PER_CORE = 256 << 10  # per-core buffers of a core count (lanes, parts, counters), measured at ~200 KiB


def check_core_counts(cores: Sequence[int], option: str = "--cores") -> None:
    """Refuse core counts the engine cannot take, naming the limit."""
    too_many = [c for c in cores if c > MAX_CORES]
    if too_many:
        raise InputError(f"{option} {','.join(map(str, too_many))}: the profiling sweep takes at most "
                         f"{MAX_CORES} cores (its per-core-count kernels are compiled with one slot per core)")


def estimated_bytes(n_accesses: int, cores: Sequence[int]) -> int:
    """An upper estimate of the sweep's memory: every core count's engines holding every line (a trace has
    at most as many distinct lines as accesses), plus per-core buffers."""
    return sum(ENGINES_PER_COUNT * n_accesses * BYTES_PER_LINE + p * BYTES_PER_CORE for p in cores)


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


def check_memory(n_accesses: int, cores: Sequence[int], what: str) -> None:
    """Refuse a sweep whose estimate exceeds the free memory, naming both."""
    check_core_counts(cores)
    need, have = estimated_bytes(n_accesses, cores), available_bytes()
    if need > have:
        raise InputError(f"{what}: profiling {n_accesses:,} accesses for cores {','.join(map(str, cores))} may "
                         f"need about {need / 2**30:.1f} GiB ({ENGINES_PER_COUNT} engines x {BYTES_PER_LINE} B per "
                         f"line per core count, {BYTES_PER_CORE >> 10} KiB per core), but {have / 2**30:.1f} GiB "
                         f"is free; give fewer core counts, or sample (--sample-rate)")
