"""What a source-sampled pass (analysis/sampling/source.py) will hold in memory, checked before it starts.

Its memory grows with the sampled distinct lines (the SHARDS stacks) or is bounded by the memory budget (each core
count p > 1 gets an even share of it): the samples that wait for the round-robin merge (analysis/sampling/shards/queues.py)
and the ring of shared-trace window segments that wait until every core has passed them (analysis/sampling/
shared_windows.py; with a static schedule nearly a loop instance's worth) spill beyond their parts of the share
(`ring_budget`). `check_sampled_memory` adds the worst cases, from the trace's footer (TraceInfo.n_accesses,
distinct_lines_estimate), and refuses a run that would not fit in the free memory, as
analysis.profiles.limits.check_memory does for the exact sweep.
"""
from __future__ import annotations

from collections.abc import Sequence

from analysis.profiles.limits import SKETCH_LINE, available_bytes, lines_bound
from common.errors import InputError

PAIR_BYTES = 32  # a waiting sample: private position, line, private distance, gap
STACK_LINE_BYTES = 96  # a SHARDS stack's bytes per sampled line: hash slots at load 0.6, sharers, axis, grown 2x
SEGMENT_BYTES = 16  # a shared window's bytes per access (8 B rows; the ring doubles when full)
RING_SHARE = 4  # the shared window ring gets 1 / RING_SHARE of a core count's budget, the waiting samples the rest
SHARED_SPACING = 4  # shared windows are this many times sparser than private ones (source.SHARED_WINDOW_SPACING)
DIRECTORY_LINE_BYTES = 32  # the per-instance stacks' directory of stored lines, per sampled line (load 0.6, 2x)
BASE_BYTES = 512 << 20  # the fixed part: decode batches, window pools, the ring's stage and frames, numba, caches


def ring_budget(budget: int, windows: bool = True) -> int:
    """The bytes of a core count's budget that its shared window ring may hold before it spills (none without
    shared windows: the waiting samples then get it all)."""
    return budget // RING_SHARE if windows else 0


def sampled_bytes(n_accesses: int, lines: int | None, counts: Sequence[int], rate: float, window: int,
                  length: int, budget: int, instances: int = 0) -> dict[str, int]:
    """The most each part of a source-sampled pass holds (bytes; budget: the whole memory budget): the waiting
    samples and the shared window ring (each at most its part of the budget, twice that for the ring while it
    doubles, or every sample or segment of the trace at once if less), the SHARDS stacks (every sampled line in
    each; 0 when the trace's distinct lines are unknown), the per-instance stacks of the groupings (instances:
    their instances in all; every sampled line in each, and a directory per grouping, of at most as many) and the
    fixed part."""
    shared = [p for p in counts if p > 1]
    sample = rate * n_accesses
    windows = rate < 1.0 and window > 0
    ring_part = ring_budget(budget, windows)
    waiting = min(budget - ring_part, int(len(shared) * sample * PAIR_BYTES))
    ring = 0
    if windows:
        worst = int(len(shared) * sample / SHARED_SPACING * (window + length) / length * SEGMENT_BYTES)
        ring = min(worst, 2 * ring_part)
    stacks = int((lines or 0) * rate * STACK_LINE_BYTES * (sum(counts) + len(shared)))
    sampled = (lines or 0) * rate
    groups = int(sampled * (STACK_LINE_BYTES + DIRECTORY_LINE_BYTES) * instances)  # a directory per grouping, at most
    return {"waiting samples": waiting, "shared window ring": ring, "SHARDS stacks": stacks,
            "instance stacks": groups, "fixed": BASE_BYTES}


def check_sampled_memory(trace: str, n_accesses: int, lines: int | None, counts: Sequence[int], rate: float,
                         window: int, length: int, budget: int, instances: int = 0) -> None:
    """Refuse a sampled run whose worst case (sampled_bytes; lines: the footer's distinct-line estimate, None when
    it has none; instances: the groupings' instances in all) exceeds the free memory, naming the options that
    shrink it."""
    parts = sampled_bytes(n_accesses, None if lines is None else lines_bound(lines), counts, rate, window, length,
                          budget, instances)
    need, have = sum(parts.values()), available_bytes()
    if need <= have:
        return
    shown = ", ".join(f"{name} {b / 2**30:.2f}" for name, b in parts.items())
    cores = ",".join(str(p) for p in counts)
    raise InputError(
        f"{trace}: --sample-rate {rate:g} with --cores {cores} needs up to {need / 2**30:.1f} GiB ({shown} GiB; "
        f"{n_accesses:,} accesses, about {lines or 0:,} distinct {SKETCH_LINE}-byte lines), but "
        f"{have / 2**30:.1f} GiB is free (MemAvailable); give a lower --sample-rate or fewer --cores, or a "
        f"smaller $PPTMC_MEMORY_BUDGET for the waiting samples and the shared window ring")
