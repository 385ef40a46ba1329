"""Streamed L1 refills per block (analysis/runtime/l1_walks.py) against a brute force, and what the model does with them."""
from collections import OrderedDict
from dataclasses import replace

import pandas as pd
import pytest

from analysis.runtime import l1_walks as lw
from analysis.runtime import model as rm
from analysis.runtime.inputs import BlockWork, op_counts_from_blocks
from analysis.runtime.terms.block_core import block_resources
from analysis.runtime.terms.fill_overlap import fill_overlap_cycles
from analysis.runtime.cold_lines import STRIDED_MIN_BYTES
from machines import load_machine
from machines.model import CacheLevel
from common.errors import InputError
from tests.test_cold_lines import BruteSites, interleaved_walks, trace_chunk

SMALL_L1 = CacheLevel(name="L1", size_bytes=4 * 2 * 64, line_bytes=64, associativity=2, latency_cycles=4,
                      recip_throughput_cycles=0.5, shared=False)


def _brute(addr, block, instance, line=64, sets=4, ways=2) -> dict[int, int]:
    """The module's definition with Python containers: an LRU set of OrderedDicts, the site rule, a seen set."""
    cache = [OrderedDict() for _ in range(sets)]
    seen, sites, fills = set(), BruteSites(), {}
    for a, b, i in zip(addr, block, instance):
        before = sites.before(a, b, i)
        ln = a // line
        way = cache[ln % sets]
        hit = ln in way
        if hit:
            way.move_to_end(ln)
        else:
            if len(way) == ways:
                way.popitem(last=False)
            way[ln] = True
        first = ln not in seen
        seen.add(ln)
        if not first and not hit and before is not None and abs(a - before) < STRIDED_MIN_BYTES:
            fills[b] = fills.get(b, 0) + 1
    return fills


def _place(b: int, t: int, rng) -> int:
    """Block 0 walks a row in 8-byte steps, block 1 down 16 rows of 4 KiB, block 2 jumps at random over 64 KiB."""
    if b == 0:
        return 0x10000 + (8 * t) % 4096
    if b == 1:
        return 0x40000 + (t % 16) * 4096 + (8 * (t // 16)) % 512
    return 0x80000 + int(rng.integers(0, 64 * 1024))


def _random_walks(seed: int, n: int = 6000):
    """Rows, column walks and random jumps in three blocks (_place), each going round its area again and again
    so that lines come back after the L1 lost them."""
    return interleaved_walks(seed, n, _place, per_instance=3)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("chunk", [97, 1000, 6000])
def test_streamed_fills_match_brute_force(seed, chunk):
    """Per block, over several chunk sizes: the same L1 misses, first touches and strides as a brute force."""
    addr, block, instance = _random_walks(seed)
    counter = lw.L1WalkCounter(3, (SMALL_L1,), initial_slots=4)
    for s in range(0, len(addr), chunk):
        counter.add(trace_chunk(addr[s:s + chunk], block[s:s + chunk], instance[s:s + chunk]))
    got = lw.fills_by_block(counter.table())
    assert got == _brute(addr, block, instance)
    assert got.get(0, 0) > 20 * got.get(1, 0)  # rows refill along the row; column walks (almost) never count


def test_second_pass_over_a_row_larger_than_l1_refills_it_along_the_row():
    """Hand count: a 64-line row read twice through an 8-line L1 by one load: the first pass is first
    touches (cold, not counted); the second misses every line, and the 63 reached by an 8-byte step are
    refills along the row, while its first load jumped back 4088 bytes (a column walk's step)."""
    row = [0x20000 + 8 * k for k in range(64 * 8)]
    counter = lw.L1WalkCounter(1, (SMALL_L1,))
    counter.add(trace_chunk(row, [0] * len(row), range(len(row))))
    assert counter.table().empty
    counter.add(trace_chunk(row, [0] * len(row), range(len(row), 2 * len(row))))
    assert counter.table().to_dict("records") == [{"kind": lw.STREAMED, "key": 0, "count": 63}]


def test_the_walk_table_is_read_by_kind_and_needs_its_columns():
    table = pd.DataFrame({"kind": [lw.STREAMED, lw.DIRTIED], "key": [3, 2], "count": [7, 9]})
    assert lw.fills_by_block(table) == {3: 7} and lw.updates_by_sets(table) == {2: 9}
    assert lw.fills_by_block(None) == {} and lw.updates_by_sets(None) == {}
    with pytest.raises(InputError, match="count"):
        lw.fills_by_block(pd.DataFrame({"kind": [lw.STREAMED], "key": [3]}))


def _block(fills: float, **ops) -> BlockWork:
    return BlockWork(count=1000.0, ops=ops, chain={}, streamed_fills=fills, block_id=0)


def test_fill_overlap_hand_cases():
    """jacobi-like (FP-bound, port slack): fills hide up to the slack; lu-like (port-bound): none hide;
    a block with no fills or a one-level machine: nothing."""
    m = load_machine("haswell-i7-5960x")
    l2 = m.caches[1].recip_throughput_cycles
    fp_bound = _block(0.5, fp_add=8, fp_mul=2, load=2)
    chain, fp, integer, ports = block_resources(fp_bound, m)
    assert fp > ports + 0.5 * l2  # all the fills fit in the port slack
    assert fill_overlap_cycles(fp_bound, m) == pytest.approx(0.5 * l2)
    squeezed = _block(0.5, fp_add=8, fp_mul=2, load=2 + 2 * int(fp / m.ops["load"].recip_throughput))
    assert fill_overlap_cycles(squeezed, m) == 0.0  # bound by its ports: the fills add in full
    partial = _block(4.0, fp_add=8, fp_mul=2, load=2)
    assert fill_overlap_cycles(partial, m) == pytest.approx(fp - ports)
    assert fill_overlap_cycles(_block(0.0, fp_add=8), m) == 0.0
    assert fill_overlap_cycles(fp_bound, replace(m, caches=m.caches[:1])) == 0.0


def test_prediction_takes_the_hidden_fills_off_t_cpu():
    """The critical-path T_CPU drops by share x count x the block's overlap, which is reported."""
    m = load_machine("haswell-i7-5960x")
    blocks = [_block(0.5, fp_add=8, fp_mul=2, load=2)]
    args = dict(mem_accesses=2000.0, mem_bytes=16000.0, layout="pipelined", cpu_form="critical-path")
    rates = {c.name: 0.9 for c in m.caches}
    ops = op_counts_from_blocks({0: blocks[0].ops}, {0: 1000})
    with_fills = rm.predict_runtime(m, 2, rates, ops, blocks=blocks, work_share=0.5, **args)
    without = rm.predict_runtime(m, 2, rates, ops, blocks=[replace(blocks[0], streamed_fills=0.0)], work_share=0.5,
                                 **args)
    hidden = 0.5 * 1000 * fill_overlap_cycles(blocks[0], m) / (m.frequency_ghz * 1e9)
    assert hidden > 0
    assert without.t_cpu_s - with_fills.t_cpu_s == pytest.approx(hidden)
    assert with_fills.t_fill_overlap_s == pytest.approx(hidden) and without.t_fill_overlap_s == 0.0
