"""The ProfileSet contract: reuse-distance histograms per core count, and their files.

A ProfileSet is what the profiling sweep (analysis/profiles/sweep.py) produces and what every
later stage (hit rates, runtime, sampling, validation) reads; its on-disk form is documented in
ProfileSet.save.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from common.errors import InputError
from common.manifest import check_manifest
from common.io import write_json, write_table


def histogram_bins(n_bins: int, exact_limit: int, exact_bits: int, sub_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Lower (inclusive) and upper (exclusive) distance of every engine histogram bin."""
    lower = np.empty(n_bins, dtype=np.int64)
    upper = np.empty(n_bins, dtype=np.int64)
    lower[:exact_limit] = np.arange(exact_limit)
    upper[:exact_limit] = lower[:exact_limit] + 1
    idx = np.arange(n_bins - exact_limit)
    j = exact_bits + idx // (1 << sub_bits)
    sub = idx % (1 << sub_bits)
    width = np.left_shift(np.ones_like(j, dtype=np.uint64), (j - sub_bits).astype(np.uint64))
    lo = (np.left_shift(np.ones_like(j, dtype=np.uint64), j.astype(np.uint64)) + sub.astype(np.uint64) * width)
    hi = lo + width
    big = np.iinfo(np.int64).max
    lower[exact_limit:] = np.minimum(lo, big).astype(np.int64)
    upper[exact_limit:] = np.where(hi < lo, big, np.minimum(hi, big)).astype(np.int64)
    return lower, upper


@dataclass
class ReuseProfile:
    """A reuse-distance histogram: bins [lower, upper), their counts, and cold misses."""

    lower: np.ndarray      # int64 inclusive lower distance of each non-empty bin
    upper: np.ndarray      # int64 exclusive upper distance (lower + 1 for exact bins)
    count: np.ndarray      # int64 accesses in the bin
    dist_sum: np.ndarray   # int64 sum of the distances in the bin (mean = dist_sum / count)
    cold: int              # accesses with infinite distance (first touch of a line, or a coherence miss)
    total: int             # all accesses, cold included
    coherence: int = 0     # of the cold accesses, those that are coherence misses (line invalidated by a store)
    turnover_sum: np.ndarray | None = None  # write-back profiles of an instance whose lines leave: sum of the
    # gaps' turnovers per bin (depth_stack.py; None: no line leaves, every turnover 0)
    position_sum: np.ndarray | None = None  # with turnover_sum: float sum of turnover x removal position per bin
    moving_count: np.ndarray | None = None  # with turnover_sum: the bin's gaps with turnover (None: all of them)

    def mean_turnover(self) -> np.ndarray:
        """Each bin's mean turnover (zeros without turnover sums)."""
        if self.turnover_sum is None:
            return np.zeros(len(self.count))
        return self.turnover_sum / np.maximum(self.count, 1)

    def mean_position(self) -> np.ndarray:
        """Each bin's mean position of its removals in their gaps, over all its gaps' removals (0.5, evenly
        spread, where not recorded)."""
        turn, position, _ = self.path_sums()
        return np.divide(position, turn, out=np.full(len(self.count), 0.5), where=turn > 0)

    def path_sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per bin, the sums of the gaps' turnovers and of turnover x removal position (without positions:
        0.5 each), and how many gaps had turnover (without the count: all where some did)."""
        if self.turnover_sum is None:
            zero = np.zeros(len(self.count), dtype=np.int64)
            return zero, zero * 0.5, zero
        turn = self.turnover_sum
        moving = np.where(turn > 0, self.count, 0) if self.moving_count is None else self.moving_count
        return turn, 0.5 * turn if self.position_sum is None else self.position_sum, moving

    def mean_distance(self) -> np.ndarray:
        """Representative distance of each bin (exact for single-distance bins)."""
        return self.dist_sum / np.maximum(self.count, 1)

    def probabilities(self) -> tuple[np.ndarray, float]:
        """P(D) of each bin and P(D = infinity), as in the paper's Table 2."""
        if self.total == 0:
            return np.zeros(len(self.count)), 0.0
        return self.count / self.total, self.cold / self.total

    @staticmethod
    def empty() -> ReuseProfile:
        z = np.zeros(0, dtype=np.int64)
        return ReuseProfile(z, z.copy(), z.copy(), z.copy(), 0, 0)

    @staticmethod
    def from_distances(distances: np.ndarray) -> ReuseProfile:
        """Exact (one bin per distance) profile of an array of distances, -1 = cold."""
        d = np.asarray(distances, dtype=np.int64)
        warm = d[d >= 0]
        vals, counts = np.unique(warm, return_counts=True)
        return ReuseProfile(vals, vals + 1, counts.astype(np.int64), vals * counts,
                            int((d < 0).sum()), int(d.shape[0]))


def sum_profiles(profiles: list[ReuseProfile]) -> ReuseProfile:
    """The sum of profiles binned alike (each bin by its lower distance): counts, sums, cold, totals."""
    if not profiles:
        return ReuseProfile.empty()
    lower = np.concatenate([p.lower for p in profiles])
    keys, first, where = np.unique(lower, return_index=True, return_inverse=True)
    add = lambda arrays: np.bincount(where, np.concatenate(arrays), len(keys)).astype(np.int64)  # noqa: E731
    sums = [p.path_sums() for p in profiles]
    turn = add([t for t, _, _ in sums])
    paths = (turn, np.bincount(where, np.concatenate([u for _, u, _ in sums]), len(keys)), add([m for _, _, m in sums]))
    return ReuseProfile(keys, np.concatenate([p.upper for p in profiles])[first], add([p.count for p in profiles]),
                        add([p.dist_sum for p in profiles]), sum(p.cold for p in profiles),
                        sum(p.total for p in profiles), sum(p.coherence for p in profiles),
                        *(paths if turn.any() else (None,) * 3))


@dataclass
class ProfileSet:
    """PRD per (cores, core) and CRD per cores, plus how they were made."""

    line_size: int
    mode: str
    interleave: str
    seed: int
    refs_per_turn: int
    trace: str
    prd: dict[tuple[int, int], ReuseProfile] = field(default_factory=dict)
    crd: dict[int, ReuseProfile] = field(default_factory=dict)
    paper_chunk: int = 0  # paper mode: block instances dealt round-robin in runs of this many (0 = even split)
    trace_complete: bool = True  # False: the traced run crashed or its file was cut short
    coherence: bool = False  # PRDs count write-invalidate coherence misses (compute_profiles: on by default)
    barriers: bool = False  # the shared traces keep the trace's barriers (analysis/profiles/barriers.py)
    # cores -> references of the busiest core phase by phase, summed (CoreCountTask.critical_path; exact sweeps)
    critical_path: dict[int, int] = field(default_factory=dict)
    # cores -> each core's upgrades: stores to a line it holds while another core holds it too (CoreCountTask.
    # upgrade_counters; exact sweeps with coherence, p > 1)
    upgrades: dict[int, list[int]] = field(default_factory=dict)
    # per-set-class profiles (analysis/profiles/set_classes.py), keyed by class bits first
    class_prd: dict[tuple[int, int, int], ReuseProfile] = field(default_factory=dict)
    class_crd: dict[tuple[int, int], ReuseProfile] = field(default_factory=dict)
    # per-instance CRDs of shared levels whose instances serve groups of threads (analysis/profiles/groups.py),
    # keyed by (grouping name, instance)
    group_crd: dict[tuple[str, int], ReuseProfile] = field(default_factory=dict)
    # (starts, ends) of write-back gaps (analysis/profiles/writebacks.py): key cores for a core count's whole
    # shared trace, (grouping name, instance) for one instance of a level serving groups of threads
    writebacks: dict[int | tuple[str, int], tuple[ReuseProfile, ReuseProfile]] = field(default_factory=dict)
    writeback_bits: int = 0  # the write-back profiles count distances within set classes of this many bits

    @property
    def cores(self) -> list[int]:
        return sorted(self.crd)

    @property
    def class_bits(self) -> list[int]:
        """The set-class widths (bits) this set has per-class profiles for (0, plain, is not listed)."""
        return sorted({bits for bits, _, _ in self.class_prd})

    def prds(self, cores: int, bits: int = 0) -> list[ReuseProfile]:
        """The per-core PRDs of one core count, in core order (bits > 0: the per-set-class ones)."""
        if bits:
            return [prof for (b, p, _), prof in sorted(self.class_prd.items()) if b == bits and p == cores]
        return [prof for (p, _), prof in sorted(self.prd.items()) if p == cores]

    def crd_of(self, cores: int, bits: int = 0) -> ReuseProfile:
        """The CRD of one core count (bits > 0: the per-set-class one)."""
        if bits and (bits, cores) not in self.class_crd:
            raise InputError(f"profiles of {self.trace}: no per-set-class CRD of {bits} bits for {cores} cores (a "
                             f"shared level indexed by address bits needs one); rerun `pptmc profile --set-bits "
                             f"{bits}`, or use --hit-rates sdcm")
        return self.class_crd[(bits, cores)] if bits else self.crd[cores]

    def instance_crds(self, grouping: str) -> list[ReuseProfile]:
        """The per-instance CRDs of one grouping (groups.grouping_name), in instance order."""
        return [prof for (g, _), prof in sorted(self.group_crd.items()) if g == grouping]

    def instance_writebacks(self, grouping: str) -> list[tuple[ReuseProfile, ReuseProfile]]:
        """The per-instance write-back (starts, ends) of one grouping, in instance order."""
        return [pair for (g, _), pair in sorted(_keyed_by_instance(self.writebacks)) if g == grouping]

    def add_classes(self, bits: int, counts: list[int], results: list[tuple[list[ReuseProfile], ReuseProfile]],
                    crds: bool = True) -> None:
        """Keep the per-set-class profiles of `bits` bits (set_classes.class_profiles' result; crds=False:
        it made no CRDs for p > 1, only the one-core trace's, which is its PRD)."""
        for p, (prd, crd) in zip(counts, results):
            self.class_prd.update({(bits, p, c): prof for c, prof in enumerate(prd)})
            if crds or p == 1:
                self.class_crd[(bits, p)] = crd

    def metadata(self) -> dict:
        return {"line_size": self.line_size, "mode": self.mode, "interleave": self.interleave,
                "seed": self.seed, "refs_per_turn": self.refs_per_turn, "trace": self.trace,
                "cores": self.cores, "paper_chunk": self.paper_chunk, "trace_complete": self.trace_complete,
                "coherence": self.coherence, "barriers": self.barriers,
                "critical_path": {str(p): n for p, n in sorted(self.critical_path.items())},
                "upgrades": {str(p): list(n) for p, n in sorted(self.upgrades.items())},
                "class_bits": self.class_bits,
                "groupings": sorted({g for g, _ in self.group_crd}),
                "writebacks": sorted(k for k in self.writebacks if isinstance(k, int)),
                "writeback_bits": self.writeback_bits}

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(summary, bins) tables in the documented layout."""
        items = [("prd", 0, "", c, k, p) for (c, k), p in sorted(self.prd.items())]
        items += [("crd", 0, "", c, -1, p) for c, p in sorted(self.crd.items())]
        items += [("prd", b, "", c, k, p) for (b, c, k), p in sorted(self.class_prd.items())]
        items += [("crd", b, "", c, -1, p) for (b, c), p in sorted(self.class_crd.items())]
        items += [("grd", 0, g, g.count(".") + 1, k, p) for (g, k), p in sorted(self.group_crd.items())]
        wb = self.writeback_bits
        items += [(kind, wb, "", c, -1, p) for c, pair in sorted((k, v) for k, v in self.writebacks.items()
                                                                  if isinstance(k, int))
                  for kind, p in zip(("wbs", "wbe"), pair)]
        items += [(kind, wb, g, g.count(".") + 1, k, p) for (g, k), pair in sorted(_keyed_by_instance(self.writebacks))
                  for kind, p in zip(("wbs", "wbe"), pair)]
        summary = pd.DataFrame([{"kind": kind, "class_bits": b, "grouping": g, "cores": c, "core": k,
                                 "total": p.total, "cold": p.cold, "coherence": p.coherence}
                                for kind, b, g, c, k, p in items],
                               columns=["kind", "class_bits", "grouping", "cores", "core", "total", "cold",
                                        "coherence"])
        parts = [pd.DataFrame({"kind": kind, "class_bits": b, "grouping": g, "cores": c, "core": k,
                               "lower": p.lower, "upper": p.upper, "count": p.count, "dist_sum": p.dist_sum,
                               **dict(zip(("turnover_sum", "position_sum", "moving_count"), p.path_sums()))})
                 for kind, b, g, c, k, p in items]
        cols = ["kind", "class_bits", "grouping", "cores", "core", "lower", "upper", "count", "dist_sum",
                "turnover_sum", "position_sum", "moving_count"]
        bins = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)
        return summary, bins[cols]

    def save(self, directory: str | Path) -> Path:
        """Write metadata and both tables (CSV and Parquet), each file atomically."""
        out = Path(directory)
        summary, bins = self.tables()
        for name, df in (("summary", summary), ("bins", bins)):
            write_table(df, out / f"{name}.csv")
            write_table(df, out / f"{name}.parquet")
        write_json(out / "profiles.json", self.metadata())
        return out

    @staticmethod
    def load(directory: str | Path) -> ProfileSet:
        """Read a directory written by save()."""
        d = Path(directory)
        meta_path = d / "profiles.json"
        if not meta_path.is_file():
            raise InputError(f"{meta_path}: not found; pass a directory written by `pptmc profile -o DIR`")
        check_manifest(d, "rerun `pptmc profile` into this folder")
        try:
            meta = json.loads(meta_path.read_text())
            summary, bins = (_read_table(d, name) for name in ("summary", "bins"))
            ps = ProfileSet(int(meta["line_size"]), str(meta["mode"]), str(meta["interleave"]),
                            int(meta["seed"]), int(meta["refs_per_turn"]), str(meta["trace"]),
                            paper_chunk=int(meta.get("paper_chunk", 0)),
                            trace_complete=bool(meta.get("trace_complete", True)),
                            coherence=bool(meta.get("coherence", False)),
                            barriers=bool(meta.get("barriers", False)),
                            critical_path={int(p): int(n) for p, n in meta.get("critical_path", {}).items()},
                            upgrades={int(p): [int(x) for x in n] for p, n in meta.get("upgrades", {}).items()},
                            writeback_bits=int(meta.get("writeback_bits", 0)))
        except (KeyError, ValueError, TypeError) as exc:
            raise InputError(f"{d}: malformed profile directory ({exc}); regenerate it with `pptmc profile`") from exc
        for table in (summary, bins):  # columns added since the first layout
            for name, default in (("class_bits", 0), ("grouping", ""), ("turnover_sum", 0)):
                if name not in table.columns:
                    table[name] = default
            table["grouping"] = table["grouping"].astype(object).where(table["grouping"].notna(), "").astype(str)
        groups = {key: g for key, g in bins.groupby(["kind", "class_bits", "grouping", "cores", "core"])}
        for row in summary.itertuples(index=False):
            g = groups.get((row.kind, row.class_bits, row.grouping, row.cores, row.core))
            prof = _profile_from_rows(g, int(row.cold), int(row.total), int(getattr(row, "coherence", 0)))
            if row.kind == "grd":
                ps.group_crd[(row.grouping, int(row.core))] = prof
            elif row.kind in ("wbs", "wbe"):
                key = (row.grouping, int(row.core)) if row.grouping else int(row.cores)
                pair = ps.writebacks.get(key, (ReuseProfile.empty(), ReuseProfile.empty()))
                ps.writebacks[key] = (prof, pair[1]) if row.kind == "wbs" else (pair[0], prof)
            else:
                _keep(ps, str(row.kind), int(row.class_bits), int(row.cores), int(row.core), prof, d)
        return ps


def _keyed_by_instance(writebacks: dict) -> list[tuple[tuple[str, int], tuple[ReuseProfile, ReuseProfile]]]:
    """The per-instance entries of ProfileSet.writebacks (keys (grouping name, instance)), sortable by key."""
    return [(k, pair) for k, pair in writebacks.items() if isinstance(k, tuple)]


def _keep(ps: ProfileSet, kind: str, bits: int, cores: int, core: int, prof: ReuseProfile, d: Path) -> None:
    """File one loaded profile under its kind and set-class width."""
    if kind not in ("prd", "crd"):
        raise InputError(f"{d / 'summary.csv'}: field kind={kind!r}; expected prd, crd, grd, wbs or wbe")
    if kind == "prd" and bits:
        ps.class_prd[(bits, cores, core)] = prof
    elif kind == "prd":
        ps.prd[(cores, core)] = prof
    elif bits:
        ps.class_crd[(bits, cores)] = prof
    else:
        ps.crd[cores] = prof


def _read_table(d: Path, name: str) -> pd.DataFrame:
    """Prefer Parquet (typed), fall back to CSV."""
    pq, csv = d / f"{name}.parquet", d / f"{name}.csv"
    if pq.is_file():
        return pd.read_parquet(pq)
    if csv.is_file():
        return pd.read_csv(csv)
    raise InputError(f"{pq}: not found; regenerate the directory with `pptmc profile`")


def _profile_from_rows(g: pd.DataFrame | None, cold: int, total: int, coherence: int = 0) -> ReuseProfile:
    """Rebuild one ReuseProfile from its bin rows."""
    if g is None:
        return ReuseProfile(*(np.zeros(0, dtype=np.int64) for _ in range(4)), cold, total, coherence)
    cols = [g[c].to_numpy(dtype=np.int64) for c in ("lower", "upper", "count", "dist_sum")]
    turn = g["turnover_sum"].to_numpy(dtype=np.int64) if "turnover_sum" in g.columns else None
    if turn is None or not turn.any():
        return ReuseProfile(*cols, cold, total, coherence)
    position, moving = (g[name].to_numpy(dtype=kind) if name in g.columns else None  # (older layouts: None)
                        for name, kind in (("position_sum", np.float64), ("moving_count", np.int64)))
    return ReuseProfile(*cols, cold, total, coherence, turn, position, moving)
