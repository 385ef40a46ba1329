"""DRAM traffic per core count: lines the last level fetches and dirty lines it writes back (MAPredict).

Reads: every access that misses every level fetches one line (stores too: write-allocate), so the read
bytes are (1 - the last level's cumulative hit rate) x accesses x line, from the hit-rate table of
whichever predictor made it. Write-backs: write-back profiles (analysis/profiles/writebacks.py) read with
SDCM for the last level's geometry: sum P(hit | M) over the gaps' starts minus sum P(hit | d) over their
ends. A last level with one instance for the threads reads the whole shared trace's profiles. A last level
whose instances each serve a group of cores (an L3 per CCX) is read per occupied instance, with one
instance's lines and ways: its write-backs from its own profiles (its threads' accesses, a store by another
instance moving a dirty line cache to cache, ANALYSIS.md section 14; each gap read with its turnover,
turnover.py), summed. Profiles made within set classes (ProfileSet.writeback_bits) are read with one class's
share of the lines; `dram_per_instance` also
gives each instance's reads (its CRD's expected misses, which the hit-rate models sum into the level's
cumulative rate).
"""
from __future__ import annotations

import dataclasses

import pandas as pd

from analysis.hitrates.sdcm import expected_hits
from analysis.hitrates.turnover import expected_hits_with_turnover
from analysis.profiles.groups import grouping_name, grouping_of
from analysis.profiles.profileset import ProfileSet, ReuseProfile
from common.errors import InputError
from machines.model import CacheLevel, Machine

COLUMNS = ["cores", "dram_read_bytes", "dram_writeback_bytes", "writebacks", "accesses"]
INSTANCE_COLUMNS = ["cores", "instance", "dram_read_bytes", "dram_writeback_bytes", "reads", "writebacks",
                    "accesses"]


def dram_read_bytes(accesses: float, llc_miss_fraction: float, line_bytes: int) -> float:
    """Bytes read from DRAM: a line per access that misses the last level (stores too: write-allocate),
    whether that level serves one core or many. One formula for this table and the runtime's DRAM term."""
    return accesses * llc_miss_fraction * line_bytes


def dram_traffic(profiles: ProfileSet, hits: pd.DataFrame, machine: Machine, placement: str = "close"
                 ) -> pd.DataFrame:
    """One row per core count of the hit-rate table that has write-back profiles."""
    llc = _class_level(profiles, machine)
    rows = []
    for cores, part in hits[hits["level"] == llc.name].groupby("cores", sort=True):
        cum, accesses = float(part["cumulative_hit_rate"].iloc[0]), int(part["accesses"].iloc[0])
        writebacks = sum(_writebacks(pair, llc) for pair in _llc_writebacks(profiles, machine, int(cores), placement))
        rows.append({"cores": int(cores), "dram_read_bytes": dram_read_bytes(accesses, 1.0 - cum, llc.line_bytes),
                     "dram_writeback_bytes": writebacks * llc.line_bytes, "writebacks": writebacks,
                     "accesses": accesses})
    return pd.DataFrame(rows, columns=COLUMNS)


def dram_per_instance(profiles: ProfileSet, machine: Machine, cores: int, placement: str = "close"
                      ) -> pd.DataFrame:
    """One row per occupied instance of the last level with `cores` threads placed by `placement`: the
    lines it reads (its SDCM misses, stores' lines too) and writes back, in lines and bytes."""
    llc = machine.caches[-1]
    grouping = grouping_of(machine, len(machine.caches) - 1, cores, placement)
    crds = [profiles.crd_of(cores)] if max(grouping) == 0 else profiles.instance_crds(grouping_name(grouping))
    pairs = _llc_writebacks(profiles, machine, cores, placement)
    if len(crds) != len(pairs):
        raise InputError(f"profiles of {profiles.trace}: no CRD per instance of {llc.name} for {cores} threads "
                         f"placed {placement}; rerun `pptmc profile --machines {machine.name} --placement "
                         f"{placement} --writebacks`")
    rows, per_class = [], _class_level(profiles, machine)
    for i, (crd, pair) in enumerate(zip(crds, pairs)):
        reads = crd.total - expected_hits(crd, llc.associativity, llc.n_lines)
        writebacks = _writebacks(pair, per_class)
        rows.append({"cores": cores, "instance": i, "dram_read_bytes": reads * llc.line_bytes,
                     "dram_writeback_bytes": writebacks * llc.line_bytes, "reads": reads,
                     "writebacks": writebacks, "accesses": crd.total})
    return pd.DataFrame(rows, columns=INSTANCE_COLUMNS)


def _llc_writebacks(profiles: ProfileSet, machine: Machine, cores: int, placement: str
                    ) -> list[tuple[ReuseProfile, ReuseProfile]]:
    """The write-back profiles of each occupied instance of the last level (the whole shared trace's when
    one instance serves every thread)."""
    grouping = grouping_of(machine, len(machine.caches) - 1, cores, placement)
    if max(grouping) == 0:
        pair = profiles.writebacks.get(cores)
        if pair is None:
            raise InputError(f"profiles have no write-back profiles for {cores} cores; rerun the profile step "
                             f"with write-backs (pptmc profile --writebacks)")
        return [pair]
    pairs = profiles.instance_writebacks(grouping_name(grouping))
    if len(pairs) != max(grouping) + 1:
        raise InputError(f"profiles have no per-instance write-back profiles of {machine.caches[-1].name} for "
                         f"{cores} threads placed {placement} (one instance per "
                         f"{machine.caches[-1].instance_cores(machine.cores)} cores); rerun `pptmc profile "
                         f"--machines {machine.name} --placement {placement} --writebacks` (pptmc run "
                         f"--dram-traffic makes them)")
    return pairs


def _class_level(profiles: ProfileSet, machine: Machine) -> CacheLevel:
    """The last level as its write-back profiles read it: one set class's share of its lines when they
    count distances within set classes (profiles.writeback_bits, which it must take from the address)."""
    llc, bits = machine.caches[-1], profiles.writeback_bits
    known = llc.known_set_bits(machine.page_bytes)
    if bits > known:
        raise InputError(f"profiles of {profiles.trace}: write-back profiles within {bits}-bit set classes, but "
                         f"{llc.name} of {machine.name} takes {known} set bits from the address; rerun `pptmc "
                         f"profile --writebacks --machines {machine.name}`")
    return dataclasses.replace(llc, size_bytes=llc.size_bytes >> bits) if bits else llc


def _writebacks(pair: tuple[ReuseProfile, ReuseProfile], level: CacheLevel) -> float:
    """Expected write-backs of one instance of `level` from its (starts, ends) profiles (read with their
    turnover where lines left the instance: turnover.py)."""
    starts, ends = pair
    return max(expected_hits_with_turnover(starts, level.associativity, level.n_lines)
               - expected_hits_with_turnover(ends, level.associativity, level.n_lines), 0.0)
