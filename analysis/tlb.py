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

import pandas as pd

from analysis.profiles import ProfileSet, compute_profiles
from analysis.sdcm import expected_hits
from machines.model import Machine, TlbLevel
from pptmc.errors import InputError

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
    levels' rates are (analysis/hitrates.py).
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
    from analysis.runtime_model import rates_by_cores

    return {} if table is None else rates_by_cores(table, "miss_rate", "TLB miss-rate table")
