"""Predicted cache hit rates per core count and level from PRD/CRD profiles (SDCM, set-aware or not).

Set-aware (`set_aware=True`): a level whose set index takes k low bits from the virtual line id
(CacheLevel.known_set_bits: all of them when virtually indexed, those inside the page when
physically indexed) reads the per-set-class profiles of k bits, whose distances count only lines
of the access's own class (analysis/profiles/set_classes.py). Only those lines can share its set;
each lands in it with probability 2^-(s-k) (s = log2 sets; the frame's bits are taken as random),
so SDCM's Eq. 1 applies with the class distance and n_lines / 2^k lines (A ways, 2^(s-k) sets). With
k = s that is exact: a hit iff the class distance is below A. Hashed levels (k = 0) read the plain
profiles, which is SDCM. Profiles lacking the k-bit classes are read at the widest width below k
(the bits between taken as random), and such rows say so in a `note` column (present only then);
`set_aware=False` is the paper's SDCM everywhere.

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

from typing import NamedTuple, Sequence

import pandas as pd

from analysis.profiles.groups import grouping_name, grouping_of, groupings_for
from analysis.profiles.profileset import ProfileSet, ReuseProfile
from analysis.profiles.set_classes import MAX_CLASS_BITS
from analysis.hitrates.sdcm import expected_hits
from machines.model import CacheLevel, Machine
from common.errors import InputError

COLUMNS = ["cores", "level", "cumulative_hit_rate", "local_hit_rate", "level_hit_rate", "accesses"]


def predict_hit_rates(profiles: ProfileSet, machine: Machine, set_aware: bool = False,
                      placement: str = "close") -> pd.DataFrame:
    """One row per (cores, level): cumulative and local hit rates (threads placed on cores by
    `placement`, which decides the instances of a shared level that serves groups of cores); a `note`
    column when a set-aware level is read at fewer set bits than it knows (narrow_note)."""
    _check_lines(profiles, machine)
    rows = []
    for p in profiles.cores:
        prev = 0.0
        for i, level in enumerate(machine.caches):
            bits = class_width(profiles, machine, level) if set_aware else 0
            cum, total = _level_rate(*_level_profiles(profiles, machine, i, p, bits, placement), level)
            local = (cum - prev) / (1.0 - prev) if prev < 1.0 else 0.0
            rows.append({"cores": p, "level": level.name, "cumulative_hit_rate": cum,
                         "local_hit_rate": local, "level_hit_rate": cum, "accesses": total})
            note = narrow_note(machine, level, bits) if set_aware else ""
            if note:
                rows[-1]["note"] = note
            prev = cum
    notes = ["note"] if any("note" in row for row in rows) else []
    return pd.DataFrame(rows, columns=COLUMNS + notes).fillna({"note": ""}) if notes else \
        pd.DataFrame(rows, columns=COLUMNS)


def narrow_note(machine: Machine, level: CacheLevel, bits: int) -> str:
    """Why a set-aware level's rate is less exact than it could be: the profiles lack its known set bits' classes
    and it is read at `bits` (class_width); "" when nothing is missing."""
    known = level.known_set_bits(machine.page_bytes)
    if bits >= known:
        return ""
    return (f"{level.name} read at {bits} of its {known} known set bits: the profiles lack {known}-bit set classes "
            f"(rerun `pptmc profile --set-bits {known}`)")


def class_widths(machines: Sequence[Machine], hit_rates: str = "set-aware") -> tuple[int, ...]:
    """The per-set-class profile widths the hit-rate predictor `hit_rates` needs for these machines
    (each level's known set bits; none for the other predictors)."""
    if hit_rates != "set-aware":
        return ()
    return tuple(sorted({lv.known_set_bits(m.page_bytes) for m in machines for lv in m.caches} - {0}))


class ProfileNeeds(NamedTuple):
    """What the hit rates of some machines read beyond the plain profiles (compute_profiles' keywords):
    per-set-class widths, whether class CRDs too, the groupings of shared instances, and the set-class
    width of write-back profiles (used only when they are made)."""

    class_bits: tuple[int, ...]
    class_crds: bool
    groupings: tuple[tuple[int, ...], ...]
    writeback_bits: int = 0


def profile_needs(machines: Sequence[Machine], cores: Sequence[int], hit_rates: str = "set-aware",
                  placement: str = "close") -> ProfileNeeds:
    """The profiles these machines' hit rates read with predictor `hit_rates` and threads placed by
    `placement` at these core counts (one place for the pipeline, pptmc predict and pptmc profile)."""
    return ProfileNeeds(class_widths(machines, hit_rates), shared_classes_needed(machines, hit_rates),
                        groupings_for(machines, list(cores), placement), writeback_class_bits(machines))


def writeback_class_bits(machines: Sequence[Machine]) -> int:
    """The set-class width of write-back profiles every one of these machines' last levels can read: the
    fewest set bits one of them takes from the address (0 for a hashed one; none given: 0), at most
    MAX_CLASS_BITS (a tracker per class; the bits above are read as random, as for the class profiles)."""
    return min([m.caches[-1].known_set_bits(m.page_bytes) for m in machines] + [MAX_CLASS_BITS]) if machines else 0


def shared_classes_needed(machines: Sequence[Machine], hit_rates: str = "set-aware") -> bool:
    """Whether the set-aware model reads per-set-class CRDs for these machines: a shared level with one
    instance whose set index takes bits from the address (a hashed last level takes none)."""
    return hit_rates == "set-aware" and any(
        lv.shared and lv.instance_cores(m.cores) >= m.cores and lv.known_set_bits(m.page_bytes)
        for m in machines for lv in m.caches)


def class_width(profiles: ProfileSet, machine: Machine, level: CacheLevel) -> int:
    """The set-class width (bits) of the profiles the set-aware model reads for `level`: its known set
    bits, or the widest width below them that the profiles have (module docstring)."""
    known = level.known_set_bits(machine.page_bytes)
    if known and not profiles.class_bits:
        raise InputError(f"machine {machine.name}: {level.name}'s set index takes {known} bits from the address, "
                         f"but the profiles have no per-set-class profiles; rerun `pptmc profile --set-bits "
                         f"{known}`, or use --hit-rates sdcm")
    return max((b for b in profiles.class_bits if b <= known), default=0)


def _level_profiles(profiles: ProfileSet, machine: Machine, index: int, cores: int, bits: int,
                    placement: str) -> tuple[list[ReuseProfile], int]:
    """The profiles one level's instances see with `cores` threads, and their class width: each core's
    PRD (private), the CRD (one shared instance), or each occupied instance's CRD (groups.py; plain
    distances: per-instance CRDs are not kept per set class)."""
    level = machine.caches[index]
    if not level.shared:
        parts = profiles.prds(cores, bits)
        if len(parts) != cores:
            raise InputError(f"profiles for {cores} cores lack some per-core PRDs; regenerate with `pptmc profile`")
        return parts, bits
    grouping = grouping_of(machine, index, cores, placement)
    if max(grouping) == 0:  # every thread on one instance: it sees the whole shared trace
        return [profiles.crd_of(cores, bits)], bits
    crds = profiles.instance_crds(grouping_name(grouping))
    if len(crds) != max(grouping) + 1:
        raise InputError(f"machine {machine.name}: {level.name} serves {level.instance_cores(machine.cores)} cores "
                         f"per instance, so {cores} threads placed {placement} use {max(grouping) + 1} instances, "
                         f"but the profiles have no CRDs for that grouping; rerun `pptmc profile --machines "
                         f"{machine.name} --placement {placement}` (pptmc run and suite make them)")
    return crds, 0


def _level_rate(parts: list[ReuseProfile], bits: int, level: CacheLevel) -> tuple[float, int]:
    """SDCM hit fraction of all accesses the profiles count, and that access count; bits > 0: they are
    per-set-class profiles of that width, each class seeing n_lines / 2^bits of the level's lines."""
    n_lines = level.n_lines >> bits
    total = sum(p.total for p in parts)
    hits = sum(expected_hits(p, level.associativity, n_lines) for p in parts)
    return (hits / total if total else 0.0), total


def _check_lines(profiles: ProfileSet, machine: Machine) -> None:
    """Profiles are per line size; a mismatch would silently mis-predict."""
    for level in machine.caches:
        if level.line_bytes != profiles.line_size:
            raise InputError(f"machine {machine.name}: {level.name} line is {level.line_bytes} B but the "
                             f"profiles use {profiles.line_size} B lines; rerun `pptmc profile "
                             f"--line-size {level.line_bytes}`")


def with_mpki(table: pd.DataFrame, operations: float) -> pd.DataFrame:
    """The hit-rate table with `mpki`: misses of each level and every level above (1 - cumulative hit
    rate, times its accesses) per 1000 counted operations (OpCounts.operations: the pass's arithmetic,
    loads and stores, the model's stand-in for instructions; Wu and Yeung's MPKI); NaN without a count."""
    if operations <= 0 or "accesses" not in table.columns:  # (a given table may lack the access counts)
        return table.assign(mpki=float("nan"))
    misses = (1.0 - table["cumulative_hit_rate"]) * table["accesses"]
    return table.assign(mpki=1000.0 * misses / operations)


def coherence_miss_rates(profiles: ProfileSet) -> dict[int, float]:
    """cores -> fraction of all accesses that are coherence misses (a line another core's store
    invalidated), over every core's PRD; 0 for profiles made without coherence."""
    out = {}
    for p in profiles.cores:
        parts = profiles.prds(p)
        total = sum(prof.total for prof in parts)
        out[p] = sum(prof.coherence for prof in parts) / total if total else 0.0
    return out


def busiest_upgrades(profiles: ProfileSet) -> dict[int, int]:
    """cores -> the most upgrades any one core made (stores to a line it holds while another core holds it too,
    ProfileSet.upgrades); empty for profiles that did not count them (no coherence, sampled, older folders)."""
    return {p: max(counts) for p, counts in profiles.upgrades.items() if counts}


def rates_by_cores(table, column: str, what: str) -> dict[int, dict[str, float]]:
    """cores -> {level: value of `column`} from a per-(cores, level) table (hit rates, TLB miss rates)."""
    missing = {"cores", "level", column} - set(table.columns)
    if missing:
        raise InputError(f"{what}: missing column(s) {', '.join(sorted(missing))}")
    out: dict[int, dict[str, float]] = {}
    for cores, level, value in zip(table["cores"], table["level"], table[column]):
        out.setdefault(int(cores), {})[str(level)] = float(value)
    return out
