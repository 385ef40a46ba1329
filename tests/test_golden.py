"""Golden regression: the built-in suite's predictions at MINI on one shipped machine, pinned exactly.

Any change that moves a prediction fails here. If the move is intended, regenerate the files in the
same commit and say why in its message:

    PPTMC_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from pptmc import cli

GOLDEN = Path(__file__).parent / "golden"
MACHINE = "haswell-i7-5960x"
CORES = "1,2,4,8,16"
TABLES = {  # result table -> the columns pinned (keys first)
    "hit_rates": ["benchmark", "cores", "level", "cumulative_hit_rate", "local_hit_rate", "accesses"],
    "runtimes": ["benchmark", "cores", "runtime_s", "t_mem_s", "t_cpu_s", "t_incore_s", "t_overhead_s",
                 "t_coherence_s", "contention_s", "dram_bytes"],
}


def _pinned(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The pinned columns in a canonical row order."""
    keys = [c for c in ("benchmark", "cores", "level") if c in columns]
    return table[columns].sort_values(keys, kind="stable").reset_index(drop=True)


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory) -> Path:
    """One `pptmc suite` run at MINI on the pinned machine."""
    out = tmp_path_factory.mktemp("golden") / "suite"
    assert cli.run(["suite", "--size", "MINI", "--machines", MACHINE, "--cores", CORES, "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize("name", sorted(TABLES))
def test_suite_predictions_match_the_golden_files(suite_run, name):
    """Every pinned value equals the checked-in one exactly (CSV round-trips floats exactly)."""
    got = _pinned(pd.read_csv(suite_run / f"{name}.csv"), TABLES[name])
    path = GOLDEN / f"{name}.csv"
    if os.environ.get("PPTMC_UPDATE_GOLDEN") == "1":
        got.to_csv(path, index=False)
    want = pd.read_csv(path)
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want), f"{name}: {len(got)} rows, golden has {len(want)}"
    diff = ~((got == want) | (got.isna() & want.isna()))
    bad = diff.any(axis=1)
    assert not bad.any(), f"{name}: {int(bad.sum())} rows moved, first:\n{got[bad].head(3)}\nwas\n{want[bad].head(3)}"
