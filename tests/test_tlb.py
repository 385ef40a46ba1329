"""TLB miss rates (analysis/runtime/tlb.py) and their term in the runtime model."""
from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict

import numpy as np
import pandas as pd
import pytest

from analysis.runtime import model as rm
from analysis.runtime.terms.translation import tlb_cycles_per_access, update_extra_cycles
from analysis.profiles.profileset import ProfileSet, ReuseProfile
from analysis.runtime.tlb import miss_rates_by_cores, tlb_miss_rates
from machines.model import TlbLevel
from common.errors import InputError
from tests.test_runtime_model import HALF, OPS, toy_machine

DTLB = TlbLevel("DTLB", entries=8, associativity=0, page_bytes=4096, miss_cycles=0.5)
STLB = TlbLevel("STLB", entries=32, associativity=0, page_bytes=4096, miss_cycles=20.0)


def lru_misses(pages: list[int], entries: int) -> int:
    """Oracle: a fully associative LRU TLB of `entries` translations, simulated access by access."""
    tlb: OrderedDict[int, None] = OrderedDict()
    misses = 0
    for page in pages:
        if page in tlb:
            tlb.move_to_end(page)
            continue
        misses += 1
        tlb[page] = None
        if len(tlb) > entries:
            tlb.popitem(last=False)
    return misses


def stack_distances(pages: list[int]) -> np.ndarray:
    """Brute-force LRU stack distance of each access (-1 = first touch)."""
    out, stack = [], []
    for page in pages:
        if page in stack:
            out.append(len(stack) - 1 - stack.index(page))
            stack.remove(page)
        else:
            out.append(-1)
        stack.append(page)
    return np.array(out)


def test_miss_rates_equal_an_lru_tlb_simulation():
    rng = np.random.default_rng(7)
    traces = {(1, 0): list(rng.integers(0, 60, 3000))}
    traces.update({(2, c): list(rng.integers(0, 20 + 30 * c, 1500 + 500 * c)) for c in range(2)})
    ps = ProfileSet(4096, "iteration", "rr", 0, 1, "synthetic")
    for key, pages in traces.items():
        ps.prd[key] = ReuseProfile.from_distances(stack_distances(pages))
    machine = dataclasses.replace(toy_machine(), tlbs=(DTLB, STLB))
    table = tlb_miss_rates({4096: ps}, machine)
    for cores in (1, 2):
        parts = [pages for (p, _), pages in traces.items() if p == cores]
        total = sum(len(pages) for pages in parts)
        for level in (DTLB, STLB):
            want = sum(lru_misses(pages, level.entries) for pages in parts) / total
            got = table[(table.cores == cores) & (table.level == level.name)].miss_rate.item()
            assert got == pytest.approx(want, abs=1e-12)


def test_profiles_at_another_page_size_are_refused():
    machine = dataclasses.replace(toy_machine(), tlbs=(DTLB,))
    with pytest.raises(InputError, match="DTLB maps 4096-byte pages"):
        tlb_miss_rates({64: ProfileSet(64, "iteration", "rr", 0, 1, "t")}, machine)


def test_tlb_term_adds_misses_times_cost_for_the_busiest_core():
    machine = dataclasses.replace(toy_machine(bw_one=1e6, bw_all=1e6), tlbs=(DTLB, STLB))
    rates = {"DTLB": 0.2, "STLB": 0.01}
    assert tlb_cycles_per_access(machine, rates) == pytest.approx(0.2 * 0.5 + 0.01 * 20.0)
    base = rm.predict_runtime(machine, 2, HALF, OPS, 1000, 8000, work_share=0.5)
    with_tlb = rm.predict_runtime(machine, 2, HALF, OPS, 1000, 8000, work_share=0.5, tlb_miss_rates=rates)
    # the busiest core's loads (half of OPS.load = 750) pay; stores' misses were measured free (tlb.c)
    want_s = 375 * (0.2 * 0.5 + 0.01 * 20.0) / (machine.frequency_ghz * 1e9)
    assert base.t_tlb_s == 0.0 and with_tlb.t_tlb_s == pytest.approx(want_s)
    assert with_tlb.runtime_s - base.runtime_s == pytest.approx(want_s)


def test_tlb_rates_must_name_the_machines_levels_and_be_probabilities():
    machine = dataclasses.replace(toy_machine(), tlbs=(DTLB,))
    with pytest.raises(InputError, match="TLB miss rates for ITLB"):
        tlb_cycles_per_access(machine, {"ITLB": 0.1})
    with pytest.raises(InputError, match="not a probability"):
        tlb_cycles_per_access(machine, {"DTLB": 1.5})
    with pytest.raises(InputError, match="missing column"):
        miss_rates_by_cores(pd.DataFrame({"cores": [1]}))


COLUMN_WALK = r"""
#include <stdio.h>
static double a[128][1024];   /* each row is two 4 KiB pages */
int main(void)
{
  int i, j;
  double s = 0;
  for (i = 0; i < 128; i++)
    for (j = 0; j < 1024; j++)
      a[i][j] = i + j;
#pragma omp parallel for reduction(+:s) private(i)
  for (j = 0; j < 64; j++)
    for (i = 0; i < 128; i++)
      s += a[i][j];
  printf("%f\n", s);
  return 0;
}
"""


def test_pipeline_charges_a_column_walk_its_tlb_misses(tmp_path, capsys):
    """End to end: a column walk over 128 rows of 2 pages misses a 16-entry DTLB on nearly every access
    (it returns to a page only after touching 127 others), and the prediction carries the term."""
    import machines
    from machines.loader import dumps_toml
    from pptmc import cli

    source = tmp_path / "colwalk.c"
    source.write_text(COLUMN_WALK)
    data = machines.machine_to_dict(machines.load_machine("haswell-i7-5960x"))
    data["tlbs"] = [{"name": "DTLB", "entries": 16, "associativity": 0, "fully_associative": True, "page_bytes": 4096,
                     "miss_cycles": 1.0,
                     "source": "test"}]
    machine_file = tmp_path / "m.toml"
    machine_file.write_text(dumps_toml(data))
    out = tmp_path / "out"
    assert cli.run(["run", str(source), "-o", str(out), "--machines", str(machine_file), "--cores", "1,2"]) == 0
    tlb = pd.read_csv(out / "tlb_miss_rates.csv")
    runtimes = pd.read_csv(out / "runtimes.csv")
    assert sorted(tlb.cores) == [1, 2]
    # 64 columns x 128 rows: every access but the first of each 8-column line is to a page touched
    # 127 pages ago, so all 64 x 128 accesses miss a 16-entry TLB
    assert (tlb.miss_rate > 0.99).all()
    one = runtimes[runtimes.cores == 1].iloc[0]
    assert one.t_tlb_s == pytest.approx(64 * 128 * 1.0 / (data["frequency_ghz"] * 1e9), rel=0.02)
    # `pptmc predict` on the same trace computes the same term
    capsys.readouterr()
    assert cli.run(["predict", str(out / "trace" / "colwalk.pptrace"), "--machine", str(machine_file),
                    "--cores", "1", "--layout", "pipelined", "--cpu-form", "critical-path", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["t_tlb_s"] == pytest.approx(one.t_tlb_s)


def _updates_brute(addr, is_store, block, instance, page, entries) -> int:
    """Oracle for tlb.update_misses: an LRU TLB of `entries` pages (OrderedDict), and per block execution
    the pages its loads missed; a store to one of them is an in-place update that missed."""
    tlb: OrderedDict[int, None] = OrderedDict()
    missed: dict[int, set] = {}
    last: dict[int, int] = {}
    count = 0
    for a, s, b, i in zip(addr, is_store, block, instance):
        p = a // page
        hit = p in tlb
        if hit:
            tlb.move_to_end(p)
        else:
            tlb[p] = None
            if len(tlb) > entries:
                tlb.popitem(last=False)
        if last.get(b) != i:
            last[b], missed[b] = i, set()
        if s:
            count += p in missed[b]
        elif not hit:
            missed[b].add(p)
    return count


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_update_misses_match_an_lru_tlb(seed):
    """Column updates (load, store to the same address), column loads with a store elsewhere, row walks;
    several chunks so the per-block state carries over."""
    from analysis.runtime.tlb import update_misses
    from tests.test_cold_lines import trace_chunk

    rng = np.random.default_rng(seed)
    addr, store, block, instance = [], [], [], []
    count = {}
    for _ in range(300):
        b = int(rng.integers(0, 3))
        stride = int(rng.choice([8, 4160, 8256]))
        base = int(rng.integers(1 << 20, 1 << 26)) & ~7
        for k in range(int(rng.integers(2, 40))):
            a = base + k * stride
            ops = [(a, False), (a, True)] if b == 0 else [(a, False), (base - 64, True)] if b == 1 else [(a, False)]
            for x, s in ops:
                addr.append(x); store.append(s); block.append(b); instance.append(count.get(b, 0))
            count[b] = count.get(b, 0) + 1
    chunks = [trace_chunk(addr[lo:lo + 2000], block[lo:lo + 2000], instance[lo:lo + 2000], store[lo:lo + 2000])
              for lo in range(0, len(addr), 2000)]
    got = update_misses(chunks, 3, 4096, 16)
    assert got == _updates_brute(addr, store, block, instance, 4096, 16) and got > 0


def test_update_misses_hand_count():
    """A column of 40 rows, each on its own page, updated in place twice: 40 + 40 misses of an 8-entry TLB
    (every page was touched 39 pages ago); with 64 entries only the first pass misses."""
    from analysis.runtime.tlb import update_misses
    from tests.test_cold_lines import trace_chunk

    rows = [0x100000 + r * 4160 for r in range(40)] * 2
    addr = [a for a in rows for _ in (0, 1)]
    chunk = trace_chunk(addr, [0] * len(addr), [i // 2 for i in range(len(addr))], [i % 2 == 1 for i in range(len(addr))])
    assert update_misses([chunk], 1, 4096, 8) == 80
    assert update_misses([chunk], 1, 4096, 64) == 40


def test_update_term_is_the_rmw_cost_beyond_the_loads_miss():
    machine = dataclasses.replace(toy_machine(bw_one=1e6, bw_all=1e6),
                                  tlbs=(dataclasses.replace(DTLB, rmw_miss_cycles=1.5), STLB))
    assert update_extra_cycles(machine) == pytest.approx(1.0)
    base = rm.predict_runtime(machine, 2, HALF, OPS, 1000, 8000, work_share=0.5)
    upd = rm.predict_runtime(machine, 2, HALF, OPS, 1000, 8000, work_share=0.5, tlb_update_misses=400)
    assert upd.t_tlb_s - base.t_tlb_s == pytest.approx(0.5 * 400 * 1.0 / (machine.frequency_ghz * 1e9))
    assert update_extra_cycles(dataclasses.replace(machine, tlbs=(DTLB,))) == 0.0


def test_detect_reads_the_update_cost_off_the_plateau():
    from machines.detect import tlb_levels

    extra = {16: 0.0, 32: 0.0, 64: 0.0, 96: 0.0, 128: 0.3, 192: 0.45, 256: 0.47, 384: 0.47, 512: 0.47, 768: 0.5,
             1024: 0.5, 2048: 30.0, 4096: 30.0, 8192: 30.0}
    rmw = {p: (1.4 if p >= 256 else 0.0) for p in extra}
    levels = tlb_levels(extra, 4096, rmw)
    assert levels[0]["rmw_miss_cycles"] == 1.4 and "rmw_miss_cycles" not in levels[1]
    assert "rmw_miss_cycles" not in tlb_levels(extra, 4096)[0]
