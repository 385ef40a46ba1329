"""DRAM traffic per core count: lines the last level fetches and dirty lines it writes back (MAPredict).

Reads: every access that misses every level fetches one line (stores too: write-allocate), so the read
bytes are (1 - the last level's cumulative hit rate) x accesses x line, from the hit-rate table of
whichever predictor made it. Write-backs: the shared trace's write-back profiles
(analysis/profiles/writebacks.py) read with SDCM for the last level's geometry: sum P(hit | M) over
the gaps' starts minus sum P(hit | d) over their ends. A last level of several instances (an L3 per CCX)
is read as one cache of their combined lines (approximate: the write-back profiles are of the whole
shared trace, not per instance).
"""
from __future__ import annotations

import pandas as pd

from analysis.hitrates.sdcm import expected_hits
from analysis.profiles.profileset import ProfileSet
from common.errors import InputError
from analysis.profiles.groups import grouping_of
from machines.model import Machine

COLUMNS = ["cores", "dram_read_bytes", "dram_writeback_bytes", "writebacks", "accesses"]


def dram_traffic(profiles: ProfileSet, hits: pd.DataFrame, machine: Machine, placement: str = "close"
                 ) -> pd.DataFrame:
    """One row per core count of the hit-rate table that has write-back profiles."""
    llc = machine.caches[-1]
    rows = []
    for cores, part in hits[hits["level"] == llc.name].groupby("cores", sort=True):
        pair = profiles.writebacks.get(int(cores))
        if pair is None:
            raise InputError(f"profiles have no write-back profiles for {cores} cores; rerun the profile step "
                             f"with write-backs (pptmc profile --writebacks)")
        cum, accesses = float(part["cumulative_hit_rate"].iloc[0]), int(part["accesses"].iloc[0])
        instances = _instances(machine, int(cores), placement)
        n_lines, ways = llc.n_lines * instances, llc.associativity * instances if llc.associativity else 0
        starts, ends = pair
        writebacks = max(expected_hits(starts, ways, n_lines) - expected_hits(ends, ways, n_lines), 0.0)
        rows.append({"cores": int(cores), "dram_read_bytes": (1.0 - cum) * accesses * llc.line_bytes,
                     "dram_writeback_bytes": writebacks * llc.line_bytes, "writebacks": writebacks,
                     "accesses": accesses})
    return pd.DataFrame(rows, columns=COLUMNS)


def _instances(machine: Machine, cores: int, placement: str) -> int:
    """Instances of the last level that `cores` threads placed by `placement` occupy."""
    return max(grouping_of(machine, len(machine.caches) - 1, cores, placement)) + 1
