"""Compare two `pptmc suite` result folders table by table, exactly (a refactor must change nothing).

    python -m benchmarks.compare_runs OLD_DIR NEW_DIR [--benchmarks atax,lu] [--model-only]

Every CSV table both folders hold is compared on the benchmarks and machines both hold (or the benchmarks
named), with timing columns (`seconds_*`) left out; columns only the new run has are listed, not compared. Prints one line per table and exits non-zero on any difference.
`--model-only` leaves out what real multithreaded runs measured (`--validate`'s ground truth and the
errors and outliers derived from it): with dynamic schedules and atomics, which thread runs what
varies from run to run, so two runs' ground truths differ while the model's predictions may not.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from common.errors import PptmcError

TIMING_PREFIXES = ("seconds_",)  # wall-clock figures differ between any two runs
GROUND_TRUTH_TABLES = ("validation_accuracy.csv", "validation_outliers.csv")  # derived from measured runs
GROUND_TRUTH_COLUMNS = ("ground_truth", "abs_error_pp", "error_vs_no_coherence_pp", "gt_")


@dataclass(frozen=True)
class TableDiff:
    """The outcome of comparing one table: rows compared and the cells that differ."""

    table: str
    rows: int
    differing_cells: int
    first_difference: str = ""
    added_columns: tuple[str, ...] = ()   # new in NEW: not a change of any old value

    @property
    def identical(self) -> bool:
        return self.differing_cells == 0 and not self.first_difference


def _kept(columns, model_only: bool) -> list[str]:
    """The columns compared: not timings and, with `model_only`, not the ground truth's."""
    skip = TIMING_PREFIXES + (GROUND_TRUTH_COLUMNS if model_only else ())
    return [c for c in columns if not c.startswith(skip)]


def _stable(frame: pd.DataFrame, benchmarks: set[str] | None) -> pd.DataFrame:
    """The table restricted to `benchmarks`, in a canonical row order."""
    if benchmarks is not None and "benchmark" in frame.columns:
        frame = frame[frame["benchmark"].isin(benchmarks)]
    return frame.sort_values(list(frame.columns), kind="stable").reset_index(drop=True)


def compare_table(name: str, old: pd.DataFrame, new: pd.DataFrame, benchmarks: set[str] | None,
                  model_only: bool = False) -> TableDiff:
    """Exact comparison (NaN equals NaN) of one table's cells."""
    if "machine" in old.columns and "machine" in new.columns:  # the machines both runs predicted for
        machines = set(old["machine"]) & set(new["machine"])
        old, new = old[old["machine"].isin(machines)], new[new["machine"].isin(machines)]
    old_cols, new_cols = _kept(old.columns, model_only), _kept(new.columns, model_only)
    removed = [c for c in old_cols if c not in new_cols]
    if removed:
        return TableDiff(name, len(old), 0, f"columns missing in the new run: {removed}")
    added = tuple(c for c in new_cols if c not in old_cols)
    a, b = _stable(old[old_cols], benchmarks), _stable(new[old_cols], benchmarks)
    if a.shape != b.shape:
        return TableDiff(name, len(a), 0, f"rows differ: {len(a)} vs {len(b)}", added)
    same = (a == b) | (a.isna() & b.isna())
    bad = ~same.to_numpy()
    if not bad.any():
        return TableDiff(name, len(a), 0, "", added)
    row, col = (int(x[0]) for x in bad.nonzero())
    column = a.columns[col]
    return TableDiff(name, len(a), int(bad.sum()),
                     f"row {row} column {column}: {a.iloc[row][column]!r} vs {b.iloc[row][column]!r}", added)


def common_benchmarks(old: Path, new: Path) -> set[str]:
    """Benchmarks present in both runs' status tables."""
    names = [set(pd.read_csv(d / "status.csv")["benchmark"]) for d in (old, new)]
    return names[0] & names[1]


def checked(folder: Path, tables: list[str]) -> None:
    """Refuse a suite folder whose results.json (written last by pptmc suite) does not match the tables
    read from it; a folder from before results.json existed is compared as it is."""
    from common.manifest import RESULTS, check_results

    if (folder / RESULTS).is_file():
        check_results(folder, tables, f"rerun `pptmc suite -o {folder}`")


def compare_runs(old: Path, new: Path, benchmarks: set[str] | None = None,
                 model_only: bool = False) -> list[TableDiff]:
    """One TableDiff per CSV table present in both folders (with `model_only`, not the ground truth's)."""
    wanted = benchmarks if benchmarks is not None else common_benchmarks(old, new)
    tables = sorted({p.name for p in old.glob("*.csv")} & {p.name for p in new.glob("*.csv")})
    if model_only:
        tables = [t for t in tables if t not in GROUND_TRUTH_TABLES]
    for folder in (old, new):
        checked(folder, tables)
    return [compare_table(t, pd.read_csv(old / t), pd.read_csv(new / t), wanted, model_only) for t in tables]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--benchmarks", default="", help="comma-separated names (default: those both runs hold)")
    parser.add_argument("--model-only", action="store_true",
                        help="leave out the ground truth of real multithreaded runs (it varies between runs)")
    args = parser.parse_args(argv)
    wanted = {b for b in args.benchmarks.split(",") if b} or None
    try:
        diffs = compare_runs(args.old, args.new, wanted, args.model_only)
    except PptmcError as exc:
        print(f"compare_runs: {exc}", file=sys.stderr)
        return 2
    for d in diffs:
        verdict = "identical" if d.identical else f"DIFFERENT ({d.differing_cells} cells; {d.first_difference})"
        added = f" (new columns: {', '.join(d.added_columns)})" if d.added_columns else ""
        print(f"{d.table:32s} {d.rows:6d} rows  {verdict}{added}")
    if not diffs:
        print("no table in common", file=sys.stderr)
        return 1
    return 0 if all(d.identical for d in diffs) else 1


if __name__ == "__main__":
    sys.exit(main())
