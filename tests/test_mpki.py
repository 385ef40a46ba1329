"""Misses per kilo-operation (Wu and Yeung's MPKI, with the pass's counted operations): hand-computed cases."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.hitrates.rates import with_mpki
from analysis.runtime.inputs import OpCounts


def test_mpki_counts_the_misses_of_a_level_and_every_level_above():
    table = pd.DataFrame({"cores": [1, 1], "level": ["L1", "L2"], "cumulative_hit_rate": [0.9, 0.98],
                          "accesses": [1000, 1000]})
    got = with_mpki(table, 5000.0)["mpki"].tolist()
    assert got == pytest.approx([1000 * 100 / 5000, 1000 * 20 / 5000])  # 20 and 4 misses per 1000 operations
    assert math.isnan(with_mpki(table, 0.0)["mpki"].iloc[0])


def test_operations_are_arithmetic_loads_and_stores_not_bytes():
    ops = OpCounts(int_add=10, fp_fma=5, load=20, store=5, load_bytes=160, store_bytes=40)
    assert ops.operations == 40
