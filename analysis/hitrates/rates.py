"""Predicted cache hit rates per core count and level from PRD/CRD profiles (SDCM).

Private levels use each core's PRD, summed over cores (so cores are weighted by their
accesses); shared levels use the CRD. Each level's SDCM hit rate over all accesses is the
paper's cumulative hit rate (Table 6: 1 - level misses / all accesses). The local rate is
the share of the accesses that missed the level above which hit this one:
(cum_L - cum_{L-1}) / (1 - cum_{L-1}). It can come out negative when the CRD's dilation
predicts fewer shared-level hits than the private level above: that is the model's
answer and is reported as is. `level_hit_rate` is the level's own SDCM hit rate over the
accesses of its stream (equal to the cumulative rate here; the simulator reports both).
"""
from __future__ import annotations

import pandas as pd

from analysis.profiles.profileset import ProfileSet, ReuseProfile
from analysis.hitrates.sdcm import expected_hits
from machines.model import CacheLevel, Machine
from common.errors import InputError

COLUMNS = ["cores", "level", "cumulative_hit_rate", "local_hit_rate", "level_hit_rate", "accesses"]


def predict_hit_rates(profiles: ProfileSet, machine: Machine) -> pd.DataFrame:
    """One row per (cores, level): cumulative and local hit rates."""
    _check_lines(profiles, machine)
    rows = []
    for p in profiles.cores:
        prev = 0.0
        for level in machine.caches:
            cum, total = _level_rate(profiles, p, level)
            local = (cum - prev) / (1.0 - prev) if prev < 1.0 else 0.0
            rows.append({"cores": p, "level": level.name, "cumulative_hit_rate": cum,
                         "local_hit_rate": local, "level_hit_rate": cum, "accesses": total})
            prev = cum
    return pd.DataFrame(rows, columns=COLUMNS)


def with_first_level(hits: pd.DataFrame, first_level: dict[int, float]) -> pd.DataFrame:
    """The hit-rate table with the first level's cumulative rate per core count replaced (e.g. by the
    set-associative simulator's), deeper levels' cumulative rates raised to at least it and every local
    rate recomputed.

    Why: the L1 is virtually indexed (its set index lies within the page offset on the machines we model:
    64 sets x 64-byte lines = 4 KiB), so a simulation on the trace's virtual addresses sees its set
    conflicts exactly (a column walk over 16 of 64 sets), where SDCM assumes random placement; L2 and L3
    are physically indexed and the OS places pages on random frames, which is SDCM's assumption."""
    missing = set(COLUMNS) - set(hits.columns)
    if missing:
        raise InputError(f"hit-rate table: missing column(s) {', '.join(sorted(missing))}")
    out = []
    for cores, part in hits.groupby("cores", sort=True):
        if int(cores) not in first_level:
            raise InputError(f"first-level hit rate: none for {cores} cores")
        part = part.copy()
        cum = [float(first_level[int(cores)])]
        for rate in part["cumulative_hit_rate"].iloc[1:]:
            cum.append(max(cum[0], float(rate)))
        prev = [0.0, *cum[:-1]]
        part["cumulative_hit_rate"] = cum
        part["local_hit_rate"] = [(c - p) / (1.0 - p) if p < 1.0 else 0.0 for c, p in zip(cum, prev)]
        part.iloc[0, part.columns.get_loc("level_hit_rate")] = cum[0]
        out.append(part)
    return pd.concat(out, ignore_index=True)


def _level_rate(profiles: ProfileSet, cores: int, level: CacheLevel) -> tuple[float, int]:
    """SDCM hit fraction of all accesses seen by this level, and that access count."""
    if level.shared:
        parts: list[ReuseProfile] = [profiles.crd[cores]]
    else:
        parts = [profiles.prd[(cores, c)] for c in range(cores) if (cores, c) in profiles.prd]
        if len(parts) != cores:
            raise InputError(f"profiles for {cores} cores lack some per-core PRDs; regenerate with `pptmc profile`")
    total = sum(p.total for p in parts)
    hits = sum(expected_hits(p, level.associativity, level.n_lines) for p in parts)
    return (hits / total if total else 0.0), total


def _check_lines(profiles: ProfileSet, machine: Machine) -> None:
    """Profiles are per line size; a mismatch would silently mis-predict."""
    for level in machine.caches:
        if level.line_bytes != profiles.line_size:
            raise InputError(f"machine {machine.name}: {level.name} line is {level.line_bytes} B but the "
                             f"profiles use {profiles.line_size} B lines; rerun `pptmc profile "
                             f"--line-size {level.line_bytes}`")


def coherence_miss_rates(profiles: ProfileSet) -> dict[int, float]:
    """cores -> fraction of all accesses that are coherence misses (a line another core's store
    invalidated), over every core's PRD; 0 for profiles made without coherence."""
    out = {}
    for p in profiles.cores:
        parts = profiles.prds(p)
        total = sum(prof.total for prof in parts)
        out[p] = sum(prof.coherence for prof in parts) / total if total else 0.0
    return out


def rates_by_cores(table, column: str, what: str) -> dict[int, dict[str, float]]:
    """cores -> {level: value of `column`} from a per-(cores, level) table (hit rates, TLB miss rates)."""
    missing = {"cores", "level", column} - set(table.columns)
    if missing:
        raise InputError(f"{what}: missing column(s) {', '.join(sorted(missing))}")
    out: dict[int, dict[str, float]] = {}
    for cores, level, value in zip(table["cores"], table["level"], table[column]):
        out.setdefault(int(cores), {})[str(level)] = float(value)
    return out
