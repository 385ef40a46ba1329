"""What the profiling sweep can take, checked before any work: how many cores, and how much memory a
trace's core counts need against what the machine has."""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Sequence

from common.errors import InputError

# The round-robin layout of a shared trace compiles one numba kernel per core count whose tuples have one
# item per core (core_parts.rounds): 256 cores compile in about 12 s, 1024 fail inside numba.
MAX_CORES = 256
BYTES_PER_LINE = 48        # the most a reuse engine holds per line (ANALYSIS.md, line numbering)
BYTES_PER_CORE = 256 << 10  # per-core buffers of a core count (lanes, parts, counters), measured at ~200 KiB
SKETCH_LINE = 64  # bytes: the line of the trace's distinct-line sketch (instrument.distinct_lines.LINE_BYTES)


def check_core_counts(cores: Sequence[int], option: str = "--cores") -> None:
    """Refuse core counts the engine cannot take, naming the limit."""
    too_many = [c for c in cores if c > MAX_CORES]
    if too_many:
        raise InputError(f"{option} {','.join(map(str, too_many))}: the profiling sweep takes at most "
                         f"{MAX_CORES} cores (its per-core-count kernels are compiled with one slot per core)")


def estimated_bytes(cores: Sequence[int]) -> int:
    """The memory a sweep needs whatever the trace: every core count's per-core buffers. (What the engines
    hold grows with the trace's distinct lines: `engine_count` engines of at most BYTES_PER_LINE per line,
    added by check_memory where the trace's footer estimates its lines.)"""
    return sum(p * BYTES_PER_CORE for p in cores)


def engine_count(cores: Sequence[int], class_bits: Sequence[int] = (),
                 groupings: Sequence[Sequence[int]] = ()) -> int:
    """Reuse engines (and engine-sized tables) a sweep over these core counts makes, each holding at most
    every distinct line: a private engine per core of each core count, a shared (CRD) engine per count
    p > 1, the one-core lead analysis.profiles.sweep.with_lead adds when 1 is missing and at least three
    counts p > 1 would follow it, and the dense line numbering (LineIndex) when any count is p > 1; then,
    per set-class width in class_bits, a class engine per core of each core count and one in the shared
    role per count p > 1 (a class CRD, or the stale-access directory without one), and per grouping one
    CRD engine per instance. An upper bound: a private engine holds only its core's lines, and Mirrors
    share the engines of equal traces."""
    counts = set(int(c) for c in cores)
    shared = sum(1 for p in counts if p > 1)
    lead = 1 not in counts and shared >= 3
    plain = sum(counts) + shared + int(lead) + int(shared > 0)
    widths = len(set(int(b) for b in class_bits))
    instances = sum(max(int(i) for i in g) + 1 for g in set(tuple(g) for g in groupings) if len(g))
    return plain + widths * (sum(counts) + shared) + instances


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


def lines_bound(estimate: int, line_size: int = SKETCH_LINE) -> int:
    """Distinct lines of `line_size` bytes a trace with this sketch estimate (of SKETCH_LINE-byte lines) has at
    most, to three standard errors; a shorter line can split each sketched line into SKETCH_LINE // line_size."""
    from instrument.distinct_lines import RELATIVE_ERROR

    return math.ceil(estimate * (1 + 3 * RELATIVE_ERROR)) * max(1, SKETCH_LINE // max(int(line_size), 1))


def check_memory(cores: Sequence[int], trace: str | Path, line_size: int = SKETCH_LINE,
                 class_bits: Sequence[int] = (), groupings: Sequence[Sequence[int]] = ()) -> None:
    """Refuse core counts the engine cannot take, or whose engines and buffers exceed the free memory: the
    engines' part from the trace's distinct-line estimate (its footer), where the trace has one, for lines of
    `line_size` bytes, counting the engines of the set-class widths and groupings the sweep will also run."""
    from instrument.distinct_lines import RELATIVE_ERROR
    from instrument.tracefile import distinct_lines_of

    check_core_counts(cores)
    shown = ",".join(map(str, cores))
    buffers, have = estimated_bytes(cores), available_bytes()
    try:  # a file that is no readable trace is refused, with its own message, when the sweep opens it
        estimate = distinct_lines_of(Path(trace))
    except InputError:
        estimate = None
    if estimate is None:
        if buffers > have:
            raise InputError(f"{trace}: cores {shown} need at least {buffers / 2**30:.1f} GiB of per-core buffers "
                             f"({BYTES_PER_CORE >> 10} KiB per core of each core count), but {have / 2**30:.1f} GiB "
                             f"is free; give fewer or smaller core counts")
        return
    lines, engines = lines_bound(estimate, line_size), engine_count(cores, class_bits, groupings)
    need = buffers + lines * BYTES_PER_LINE * engines
    if need > have:
        raise InputError(
            f"{trace}: cores {shown} need up to {need / 2**30:.1f} GiB, but {have / 2**30:.1f} GiB is free "
            f"(MemAvailable): the trace touches about {estimate:,} distinct {SKETCH_LINE}-byte lines (its footer's "
            f"estimate, +/-{100 * RELATIVE_ERROR:.1f} %; up to {lines:,} counted), and each of the sweep's {engines} "
            f"reuse engines holds up to {BYTES_PER_LINE} B per line ({lines * BYTES_PER_LINE / 2**30:.2f} GiB each), "
            f"plus {buffers / 2**30:.2f} GiB of per-core buffers; give fewer or smaller core counts, or sample "
            f"with --sample-rate")
