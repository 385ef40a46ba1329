"""Stores to new lines (analysis/runtime/store_lines.py) and their price in the runtime model."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from analysis.runtime.inputs import BlockWork
from analysis.runtime.terms.block_core import block_core_cycles, store_cycles
from analysis.runtime.store_lines import count_new_line_stores, new_line_by_block, store_line_table
from instrument.trace_types import CHUNK_DTYPES, TraceChunk
from common.errors import InputError
from tests.test_runtime_model import toy_machine


def chunks_of(addr, is_store, block, size):
    """TraceChunks of `size` rows (only the columns the counter reads are meaningful)."""
    n = len(addr)
    cols = {k: np.zeros(n, dtype=d) for k, d in CHUNK_DTYPES.items()}
    cols.update(addr=np.asarray(addr, np.uint64), is_store=np.asarray(is_store, bool), block=np.asarray(block, np.int32))
    return [TraceChunk(**{k: v[i:i + size] for k, v in cols.items()}) for i in range(0, n, size)]


def brute(addr, is_store, block, n_blocks, line=64):
    """Oracle: walk the stores in order, remember the previous store's line."""
    stores, new = [0] * n_blocks, [0] * n_blocks
    prev = None
    for a, s, b in zip(addr, is_store, block):
        if s:
            stores[b] += 1
            if a // line != prev:
                new[b] += 1
                prev = a // line
    return stores, new


@pytest.mark.parametrize("size", [1, 7, 1000])
def test_counts_equal_a_brute_force_walk_across_chunk_boundaries(size):
    rng = np.random.default_rng(3)
    n = 600
    # a row walk interleaved with stores to three other lines
    addr = np.where(rng.random(n) < 0.5, 4096 + 8 * np.arange(n), (1 << 20) + 64 * rng.integers(0, 3, n))
    addr = addr.astype(np.uint64)
    is_store, block = rng.random(n) < 0.6, rng.integers(0, 4, n)
    stores, new = count_new_line_stores(chunks_of(addr, is_store, block, size), 4)
    want_stores, want_new = brute(addr.tolist(), is_store.tolist(), block.tolist(), 4)
    assert stores.tolist() == want_stores and new.tolist() == want_new
    assert 0 < sum(want_new) < sum(want_stores)  # both kinds occur


def test_row_stores_pair_and_column_stores_do_not():
    row = 8 * np.arange(64)
    column = 4096 * np.arange(64)
    _, new_row = count_new_line_stores(chunks_of(row, np.ones(64, bool), np.zeros(64, int), 64), 1)
    _, new_col = count_new_line_stores(chunks_of(column, np.ones(64, bool), np.zeros(64, int), 64), 1)
    assert new_row[0] == 8 and new_col[0] == 64


def test_bad_block_and_line_size_are_refused():
    with pytest.raises(InputError, match="block id 5"):
        count_new_line_stores(chunks_of([0], [True], [5], 1), 2)
    with pytest.raises(InputError, match="power of two"):
        count_new_line_stores([], 1, line_bytes=48)
    with pytest.raises(InputError, match="missing column"):
        new_line_by_block(pd.DataFrame({"block": [1]}))


def test_unpaired_stores_are_priced_at_the_new_line_cost():
    machine = dataclasses.replace(toy_machine(), store_new_line_cycles=3.0)  # toy ops.store = 1.0
    assert store_cycles(4, 1.5, machine) == pytest.approx(2.5 * 1.0 + 1.5 * 3.0)
    assert store_cycles(4, 9.0, machine) == pytest.approx(4 * 3.0)  # never more than the stores
    assert store_cycles(4, 1.5, toy_machine()) == pytest.approx(4.0)  # no figure: all pair
    blk = BlockWork(100.0, {"load": 1, "store": 2}, {}, new_line_stores=2.0)
    # ports-bound block: 1 load x 1.0 + 2 unpaired stores x 3.0
    assert block_core_cycles(blk, machine) == pytest.approx(7.0)
    assert block_core_cycles(dataclasses.replace(blk, new_line_stores=0.0), machine) == pytest.approx(3.0)


COLUMN_STORES = r"""
#include <stdio.h>
static double a[256][512];
int main(void)
{
  int i, j;
#pragma omp parallel for private(i)
  for (j = 0; j < 512; j++)
    for (i = 0; i < 256; i++)
      a[i][j] = i * 0.5 + j;
  printf("%f\n", a[3][5]);
  return 0;
}
"""


def test_pipeline_prices_a_column_of_stores(tmp_path):
    """End to end: every store of a column walk writes another line than the one before it, so the
    store-line table says 1 per store, and the machine's new-line cost raises the prediction."""
    import machines
    from machines.loader import dumps_toml
    from pptmc import cli

    source = tmp_path / "colstore.c"
    source.write_text(COLUMN_STORES)
    data = machines.machine_to_dict(machines.load_machine("haswell-i7-5960x"))
    plain, priced = tmp_path / "plain.toml", tmp_path / "priced.toml"
    plain.write_text(dumps_toml(data))
    priced.write_text(dumps_toml({**data, "core": {"store_new_line_cycles": 10.0, "source": "test"}}))
    times = {}
    for name, path in (("plain", plain), ("priced", priced)):
        out = tmp_path / name
        assert cli.run(["run", str(source), "-o", str(out), "--machines", str(path), "--cores", "1"]) == 0
        times[name] = pd.read_csv(out / "runtimes.csv").t_cpu_s.item()
    table = store_line_table(next((tmp_path / "priced" / "trace").glob("*.pptrace")))
    busy = table[table.stores_per_execution > 0.5]
    share = busy.new_line_stores_per_execution / busy.stores_per_execution
    # the walk's block (the loop's set-up blocks also store its bounds on the stack, translate/README.md)
    assert (share > 0.99).any()
    assert times["priced"] > times["plain"]
