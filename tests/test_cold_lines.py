"""First touches of cache lines by column walks (analysis/runtime/cold_lines.py) against a brute force."""
from collections import deque

import numpy as np
import pandas as pd
import pytest

from analysis.runtime import cold_lines as cl
from analysis.runtime import model as rm
from instrument.trace_types import TraceChunk
from common.errors import InputError


def trace_chunk(addr, block, instance, store=None) -> TraceChunk:
    """A TraceChunk of the given rows (8-byte accesses, loads unless `store` says otherwise)."""
    n = len(addr)
    return TraceChunk(np.asarray(addr, dtype=np.uint64), np.full(n, 8, np.uint32),
                      np.asarray(store if store is not None else np.zeros(n), dtype=bool),
                      np.asarray(block, dtype=np.int32), np.asarray(instance, dtype=np.int64),
                      np.zeros(n, np.uint16), np.zeros(n, np.int32), np.full(n, -1, np.int32),
                      np.full(n, -1, np.int64), np.zeros(n, bool))


def interleaved_walks(seed: int, n: int, place, per_instance: int = 1):
    """n accesses of three blocks taken in a seeded random order: block b's t-th access is at place(b, t, rng);
    every `per_instance` accesses start a new block execution. Returns (addresses, blocks, executions)."""
    rng = np.random.default_rng(seed)
    addr, block, instance, steps = [], [], [], [0, 0, 0]
    for k in range(n):
        b = int(rng.integers(0, 3))
        addr.append(place(b, steps[b], rng))
        steps[b] += 1
        block.append(b)
        instance.append(k // per_instance)
    return addr, block, instance


class BruteSites:
    """Every load's previous address with Python dicts: a load is a block and its position in the block's
    execution (the last slot shared by later ones), as cold_lines.site_previous keeps them."""

    def __init__(self):
        self.prev, self.pos, self.last = {}, {}, {}

    def before(self, a: int, b: int, i: int) -> int | None:
        """The previous address of access `a` of block `b`'s execution `i` (None before its first)."""
        if self.last.get(b) != i:
            self.last[b], self.pos[b] = i, 0
        p = min(self.pos[b], cl.SITES_PER_BLOCK - 1)
        self.pos[b] += 1
        before = self.prev.get((b, p))
        self.prev[(b, p)] = a
        return before


def _brute(addr, block, instance, store, line=64, sets=64, window=cl.WALK_WINDOW) -> dict[int, int]:
    """The module's definition, spelled out with Python containers."""
    seen, sites, rings, counts = set(), BruteSites(), {}, {}
    for a, b, i, s in zip(addr, block, instance, store):
        before = sites.before(a, b, i)
        if a // line in seen or s:
            seen.add(a // line)
            continue
        seen.add(a // line)
        if before is None or abs(a - before) < cl.STRIDED_MIN_BYTES:
            cls = 0
        else:
            ring = rings.setdefault(b, deque(maxlen=window))
            ring.append((a // line) % sets)
            cls = len(set(ring))
        counts[cls] = counts.get(cls, 0) + 1
    return counts


def _table_dict(counter: cl.FirstTouchCounter) -> dict[int, int]:
    t = counter.table()
    return dict(zip(t.sets_reached.tolist(), t.first_touches.tolist()))


def test_column_walk_of_3840_byte_rows_reaches_16_sets():
    """Hand count: a walk down one column of 100 rows of 3840 bytes (60 lines) visits 16 of 64 sets; the
    first load has no stride, the next 15 fill the walk's window one new set at a time."""
    addr = [0x100000 + i * 3840 for i in range(100)]
    counter = cl.FirstTouchCounter(1)
    counter.add(trace_chunk(addr, [0] * 100, range(100)))
    assert _table_dict(counter) == {0: 1, **{k: 1 for k in range(1, 16)}, 16: 84}


def test_unrolled_walk_counts_its_loads_together():
    """bicg's column loop unrolled twice: two loads per execution, each of stride 7680 (alone: 8 sets), the
    walk together 3840 bytes at a time over 16 sets."""
    rows = 200
    addr = [0x200000 + r * 3840 for r in range(rows)]
    counter = cl.FirstTouchCounter(1)
    counter.add(trace_chunk(addr, [0] * rows, [r // 2 for r in range(rows)]))
    got = _table_dict(counter)
    assert max(got) == 16 and got[16] == rows - 2 - 15


def test_rows_and_stores_are_no_column_walks():
    """A row walk's first touches are 64 bytes from the load's last address; a line a store wrote first is
    no load's first touch."""
    n = 1000
    row = [0x300000 + 8 * i for i in range(n)]
    counter = cl.FirstTouchCounter(2)
    counter.add(trace_chunk(row, [0] * n, range(n)))
    stored = [0x400000 + 4096 * i for i in range(50)]
    counter.add(trace_chunk(stored + stored, [1] * 100, range(100), [True] * 50 + [False] * 50))
    assert _table_dict(counter) == {0: n * 8 // 64}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_walks_match_brute_force_across_chunks(seed):
    """Several blocks, unrolled loads, strides around a page, stores, revisits; chunks small enough that
    the line set grows several times."""
    rng = np.random.default_rng(seed)
    addr, block, instance, store = [], [], [], []
    count = {}
    for _ in range(400):
        b = int(rng.integers(0, 4))
        stride = int(rng.choice([8, 64, 1920, 3840, 4000, 4096, 7680, -3840]))
        base = int(rng.integers(1 << 20, 1 << 24)) & ~7
        loads = int(rng.integers(1, 4))
        for k in range(int(rng.integers(5, 60))):
            for j in range(loads):
                addr.append(base + (k * loads + j) * stride + j * 8)
                block.append(b)
                instance.append(count.get(b, 0))
                store.append(bool(rng.random() < 0.1))
            count[b] = count.get(b, 0) + 1
    addr = [a & ((1 << 40) - 1) for a in addr]
    counter = cl.FirstTouchCounter(4, sets=64, initial_slots=1024)
    for lo in range(0, len(addr), 3000):
        hi = lo + 3000
        counter.add(trace_chunk(addr[lo:hi], block[lo:hi], instance[lo:hi], store[lo:hi]))
    assert counter.walk.seen.shape[0] >= 8 * 1024  # the set grew
    assert _table_dict(counter) == _brute(addr, block, instance, store)


def test_line_set_grows_with_distinct_lines_not_trace_length():
    """50 chunks of 1000 accesses over the same 100 lines: the set stays sized for 100 lines plus one chunk."""
    counter = cl.FirstTouchCounter(1, initial_slots=1024)
    addr = [0x500000 + 64 * (i % 100) for i in range(1000)]
    for k in range(50):
        counter.add(trace_chunk(addr, [0] * 1000, [k * 1000 + i for i in range(1000)]))
    assert counter.walk.lines == 100
    assert counter.walk.seen.shape[0] <= 4096


def test_extra_cost_interpolates_between_set_counts():
    """costs over 1, 2, 4 sets = 20, 14, 10 ns; a stream line costs 5: 10 lines over 4 sets cost
    10 x 5 extra, 4 lines over 3 sets interpolate at log2 3, the stream's first touches nothing."""
    table = pd.DataFrame({"sets_reached": [0, 3, 4], "first_touches": [1000, 4, 10]})
    at3 = 14 + (10 - 14) * (np.log2(3) - 1)
    assert cl.strided_extra_ns(table, (20.0, 14.0, 10.0), 5.0) == pytest.approx(10 * 5 + 4 * (at3 - 5))
    assert cl.strided_extra_ns(table, (), 5.0) == 0.0
    assert cl.strided_extra_ns(table, (4.0, 4.0, 4.0), 5.0) == 0.0  # never cheaper than a stream
    with pytest.raises(InputError, match="missing column"):
        cl.strided_extra_ns(pd.DataFrame({"sets": [1]}), (1.0,), 1.0)


def test_runtime_adds_the_busiest_cores_share_of_the_walks(toy):
    base = rm.predict_runtime(toy, 2, {"L1": 0.5, "L2": 0.5, "L3": 0.5}, rm.OpCounts(), 100, 800, layout="pipelined", work_share=0.5)
    walk = rm.predict_runtime(toy, 2, {"L1": 0.5, "L2": 0.5, "L3": 0.5}, rm.OpCounts(), 100, 800, layout="pipelined", work_share=0.5,
                              strided_extra_ns=3000.0)
    assert walk.t_strided_s == pytest.approx(1500e-9)
    assert walk.runtime_s - base.runtime_s == pytest.approx(1500e-9)


def test_counter_rejects_a_block_outside_its_table():
    with pytest.raises(InputError, match="block id 5"):
        cl.FirstTouchCounter(2).add(trace_chunk([0], [5], [0]))


@pytest.fixture
def toy():
    from tests.test_runtime_model import toy_machine
    return toy_machine(bw_one=1e6, bw_all=1e6)


COLUMN_SUMS = r"""
#include <stdio.h>
static double a[300][480], s[480];
int main(void) {
  int i, j;
  for (i = 0; i < 300; i++)
    for (j = 0; j < 480; j++)
      a[i][j] = i + 0.5 * j;
#pragma omp parallel for private(i)
  for (j = 0; j < 480; j++)
    for (i = 0; i < 300; i++)
      s[j] += a[i][j];
  printf("%f\n", s[7]);
  return 0;
}
"""


def test_pipeline_prices_a_column_walk(tmp_path):
    """End to end: the column sums' first touches walk 3840-byte rows (16 of Haswell's 64 L1 sets), and a
    machine with strided costs charges them what its 16-set figure says beyond a stream's line."""
    import machines
    from machines.loader import dumps_toml
    from pptmc import cli

    source = tmp_path / "colsum.c"
    source.write_text(COLUMN_SUMS)
    data = machines.machine_to_dict(machines.load_machine("haswell-i7-5960x"))
    costs = [30.0, 30.0, 30.0, 30.0, 30.0, 20.0, 10.0]
    path = tmp_path / "walks.toml"
    path.write_text(dumps_toml({**data, "ram": {**data["ram"], "strided_cold_line_ns": costs}}))
    out = tmp_path / "out"
    assert cli.run(["run", str(source), "-o", str(out), "--machines", str(path), "--cores", "1,2"]) == 0
    table = pd.read_csv(out / "first_touches" / "line64_sets64.csv")
    touches = dict(zip(table.sets_reached, table.first_touches))
    lines = 300 * 480 * 8 // 64
    # each new line-column's first 64 touches share the window with the last one's 16 sets (17-32)
    assert touches[16] > 0.75 * lines and max(touches) == 32 and sum(touches.values()) <= lines + 480 // 8 + 8  # + s[] and a few stack lines
    m = machines.load_machine(path)
    stream = 64 / m.ram.bandwidth_one_core_gbs
    runtimes = pd.read_csv(out / "runtimes.csv").set_index("cores")
    expected = cl.strided_extra_ns(table, tuple(costs), stream) * 1e-9
    assert runtimes.loc[1, "t_strided_s"] == pytest.approx(expected)
    assert runtimes.loc[2, "t_strided_s"] == pytest.approx(expected * runtimes.loc[2, "work_share"])
    # `pptmc predict` on the same trace prices the same walks
    assert cli.run(["predict", str(next((out / "trace").glob("*.pptrace"))), "--machine", str(path), "--cores", "1",
                    "--layout", "pipelined", "--cpu-form", "critical-path", "-o", str(tmp_path / "p")]) == 0
    assert pd.read_csv(tmp_path / "p" / "predictions.csv").t_strided_s.item() == pytest.approx(expected)
