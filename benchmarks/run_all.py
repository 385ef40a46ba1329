"""`make bench`: run every benchmarks/bench_*.py module and print one table of measured figures.

Each module exposes `run() -> list[dict]` with keys benchmark, metric, value, unit, target, ok.
Results are also written to bench-out/results.csv so notes can quote them.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback
from pathlib import Path

import pandas as pd

from common.allocator import keep_freed_memory
from common.io import write_table

COLUMNS = ["benchmark", "metric", "value", "unit", "target", "ok"]


def discover() -> list[str]:
    """Names of the bench modules beside this file, in sorted order."""
    here = Path(__file__).parent
    return sorted(f"benchmarks.{m.name}" for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))


def run_module(name: str) -> list[dict]:
    """Run one bench module; a crash becomes a failing row instead of stopping the others."""
    start = time.perf_counter()
    try:
        rows = importlib.import_module(name).run()
    except Exception as exc:  # a broken benchmark must be visible, not fatal to the table
        traceback.print_exc()
        rows = [{"benchmark": name, "metric": "crashed", "value": float("nan"), "unit": "",
                 "target": "", "ok": False, "error": str(exc)}]
    print(f"[bench] {name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the selected (default: all) bench modules and print the table."""
    keep_freed_memory()  # measure with the allocator settings the pptmc command runs with
    names = argv if argv else discover()
    rows = [row for name in names for row in run_module(name)]
    table = pd.DataFrame(rows, columns=COLUMNS + [c for c in {k for r in rows for k in r} if c not in COLUMNS])
    out = Path("bench-out")
    write_table(table, out / "results.csv")
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 60):
        print(table[COLUMNS].to_string(index=False))
    return 0 if bool(table["ok"].fillna(False).all()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
