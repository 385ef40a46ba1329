"""Data TLB miss rates per core count: SDCM over reuse profiles taken at page granularity.

A TLB is a cache of page translations, so the machinery of the cache levels applies unchanged:
the private reuse profiles (PRD) of the same mimicked per-core traces, with the page as the
"line", give each level's expected hits by SDCM (Eq. 1-3). TLBs are private, so only the PRDs
count; coherence does not apply to translations. The runtime model charges each miss the
level's measured `miss_cycles` (analysis/RUNTIME_MODEL.md).
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numba
import numpy as np
import pandas as pd

from analysis.profiles.sweep import compute_profiles
from analysis.profiles.profileset import ProfileSet
from analysis.hitrates.sdcm import expected_hits
from machines.model import Machine, TlbLevel
from common.errors import InputError

COLUMNS = ["cores", "level", "miss_rate", "accesses"]


def page_sizes(machine: Machine) -> list[int]:
    """The distinct page sizes of the machine's TLB levels (each needs its own profiles)."""
    return sorted({t.page_bytes for t in machine.tlbs})


def page_profiles(trace: Path, cores: Sequence[int], page_bytes: int, mode: str = "auto",
                  interleave: str = "rr", seed: int = 0) -> ProfileSet:
    """Reuse profiles of the per-core traces with pages as lines (no coherence: translations are not
    invalidated by stores)."""
    return compute_profiles(trace, list(cores), mode=mode, interleave=interleave, seed=seed,
                            line_size=page_bytes, coherence=False)


def tlb_miss_rates(profiles: Mapping[int, ProfileSet], machine: Machine) -> pd.DataFrame:
    """One row per (cores, TLB level): the fraction of all accesses that miss the level.

    `profiles` maps a page size to its ProfileSet. Cores are weighted by their accesses, as the cache
    levels' rates are (analysis/hitrates/rates.py).
    """
    rows = []
    for level in machine.tlbs:
        ps = profiles.get(level.page_bytes)
        if ps is None or ps.line_size != level.page_bytes:
            raise InputError(f"machine {machine.name}: TLB {level.name} maps {level.page_bytes}-byte pages but no "
                             f"profiles at that granularity were given")
        for cores in sorted({p for p, _ in ps.prd}):
            miss, total = _misses(ps, cores, level)
            rows.append({"cores": cores, "level": level.name, "miss_rate": miss / total if total else 0.0,
                         "accesses": total})
    return pd.DataFrame(rows, columns=COLUMNS)


def _misses(ps: ProfileSet, cores: int, level: TlbLevel) -> tuple[float, int]:
    """Expected misses of every core's PRD at this level, and their accesses."""
    parts = ps.prds(cores)
    total = sum(prof.total for prof in parts)
    hits = sum(expected_hits(prof, level.associativity, level.entries) for prof in parts)
    return total - hits, total


def miss_rates_by_cores(table: pd.DataFrame | None) -> dict[int, dict[str, float]]:
    """cores -> {TLB level: miss rate} from a tlb_miss_rates table (empty for None)."""
    from analysis.hitrates.rates import rates_by_cores

    return {} if table is None else rates_by_cores(table, "miss_rate", "TLB miss-rate table")


# --- In-place updates whose page misses the first-level TLB ---------------------------------------
#
# tlb.c: a loop walking down a column hides its loads' TLB misses behind the loop (about 0 extra cycles
# on the Intel host), but a loop updating the column in place pays ~1.4 cycles per row when each row is
# on another page (the store to the page the load just missed). The model charges those stores the
# first level's rmw_miss_cycles beyond miss_cycles; this pass counts them in the sequential trace: stores
# to a page that a load of the same block execution missed, the first level modelled as a fully
# associative LRU of `entries` pages (the engine's stack distance at page granularity).

_MISSED_PAGES_PER_EXECUTION = 8  # a block execution's missed load pages remembered for its stores


@numba.njit(cache=True, nogil=True)
def _count_updates(pages, is_store, block, instance, missed, last_instance, missed_pages, n_missed) -> int:
    """Stores to a page a load of the same block execution missed; the per-block state carries over."""
    count = 0
    for r in range(pages.shape[0]):
        b = block[r]
        if instance[r] != last_instance[b]:
            last_instance[b] = instance[r]
            n_missed[b] = 0
        if is_store[r]:
            for k in range(n_missed[b]):
                if missed_pages[b, k] == pages[r]:
                    count += 1
                    break
        elif missed[r] and n_missed[b] < missed_pages.shape[1]:
            missed_pages[b, n_missed[b]] = pages[r]
            n_missed[b] += 1
    return count


def update_misses(chunks, n_blocks: int, page_bytes: int, entries: int) -> int:
    """In-place updates whose load missed a fully associative TLB of `entries` pages, over TraceChunks."""
    from analysis.profiles.reuse import ReuseEngine

    if page_bytes <= 0 or page_bytes & (page_bytes - 1):
        raise InputError(f"page size {page_bytes}: must be a power of two")
    shift = np.uint64(page_bytes.bit_length() - 1)
    engine = ReuseEngine()
    last_instance = np.full(n_blocks, -1, dtype=np.int64)
    missed_pages = np.zeros((n_blocks, _MISSED_PAGES_PER_EXECUTION), dtype=np.uint64)
    n_missed = np.zeros(n_blocks, dtype=np.int64)
    total = 0
    for chunk in chunks:
        if not len(chunk):
            continue
        if int(chunk.block.max()) >= n_blocks:
            raise InputError(f"block id {int(chunk.block.max())} in the trace is not in its block table "
                             f"({n_blocks} blocks); the trace is corrupt")
        pages = chunk.addr >> shift
        distance = engine.feed_distances(pages)
        missed = (distance < 0) | (distance >= entries)
        total += _count_updates(pages, chunk.is_store, chunk.block.astype(np.int64), chunk.block_instance, missed,
                                last_instance, missed_pages, n_missed)
    return total


def trace_update_misses(trace: Path, level: TlbLevel) -> int:
    """update_misses over a sequential trace file for one TLB level."""
    import instrument

    reader = instrument.open_trace(trace)
    return update_misses(reader.chunks(), max(reader.info.blocks, default=-1) + 1, level.page_bytes, level.entries)
