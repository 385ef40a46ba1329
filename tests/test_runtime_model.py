"""Runtime model: hand-computed Eq. 5-7 and T_CPU, local vs cumulative hit rates, DRAM contention."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from analysis.runtime import model as rm
from analysis.runtime.facts import block_work, region_count
from analysis.runtime.inputs import BlockWork, HitRates, local_from_cumulative, op_counts_from_blocks, served_fractions
from analysis.runtime.schedule import busiest_iterations, busiest_share
from analysis.runtime.terms.block_core import block_core_cycles, chain_overlap
from analysis.runtime.terms.contention import memory_credits, mva, queuing_seconds
from analysis.runtime.terms.memory import average_cost, effective_block_bytes
from analysis.runtime.terms.overhead import overhead_seconds
from instrument.trace_types import SCHED_DYNAMIC, SCHED_GUIDED, SCHED_MASTER, SCHED_STATIC, LoopInstance
from machines.model import CacheLevel, Machine, OpCost, Ram
from common.errors import InputError


def toy_machine(bw_one=8.0, bw_all=16.0, cores=8) -> Machine:
    """1 GHz so cycles = ns; RAM 100 cycles latency, 64 B / 8 B-per-cycle = 8 cycles per line."""
    caches = (CacheLevel("L1", 1024, 64, 2, 4, 1, False), CacheLevel("L2", 4096, 64, 4, 10, 2, False),
              CacheLevel("L3", 16384, 64, 4, 40, 4, True))
    ops = {op: OpCost(1.0, 1.0) for op in ("int_mul", "int_div", "fp_add", "fp_fma", "load", "store")}
    ops.update(int_add=OpCost(1.0, 0.25), fp_mul=OpCost(5.0, 0.5), fp_div=OpCost(20.0, 8.0))
    return Machine(name="toy", description="", cores=cores, frequency_ghz=1.0, caches=caches,
                   ram=Ram(100.0, bw_one, bw_all), bus_width_bytes=8, simd_width_bits=256, ops=ops)


HALF = {"L1": 0.5, "L2": 0.5, "L3": 0.5}
OPS = rm.OpCounts(int_add=100, fp_mul=10, fp_div=5, load=750, store=250)


def test_eq5_to_7_and_tcpu_hand_computed():
    p = rm.predict_runtime(toy_machine(), 1, HALF, OPS, mem_accesses=1000, mem_bytes=8000,
                           block_bytes=32, gap_bytes=16)
    # served fractions 0.5, 0.25, 0.125, RAM 0.125
    assert p.delta_avg_cycles == pytest.approx(0.5 * 4 + 0.25 * 10 + 0.125 * 40 + 0.125 * 100)  # 22
    assert p.beta_avg_cycles == pytest.approx(0.5 * 1 + 0.25 * 2 + 0.125 * 4 + 0.125 * 8)      # 2.5
    assert p.block_accesses_contiguous == 4            # 32 B / 8 B words
    assert p.t_mem_contiguous_s == pytest.approx((22 + 3 * 2.5) / 4 * 1000 * 1e-9)
    assert p.block_accesses_noncontiguous == 6         # 48 B: ceil(48 / 8) * 8 = 48 -> 6 words
    assert p.t_mem_noncontiguous_s == pytest.approx((22 + 5 * 2.5) / 6 * 1000 * 1e-9)
    assert p.t_cpu_throughput_s == pytest.approx(((1 + 99 * 0.25) + (5 + 9 * 0.5) + (20 + 4 * 8)) * 1e-9)
    assert p.t_cpu_latency_s == pytest.approx((100 * 1 + 10 * 5 + 5 * 20) * 1e-9)
    assert p.runtime_s == pytest.approx(p.t_mem_contiguous_s + p.t_cpu_throughput_s)
    # DRAM: 1000 accesses * 0.125 to RAM * 64 B * (1 + 0.25 stores)
    assert p.dram_bytes == pytest.approx(10000)
    assert p.contention_s == 0


def test_dram_bytes_take_the_write_back_profiles_where_given():
    """1000 accesses x 0.125 to RAM x 64 B = 8000 B read; the profiles' 3 B per access written back replace
    the store-fraction estimate (8000 x 0.25)."""
    p = rm.predict_runtime(toy_machine(), 1, HALF, OPS, 1000, 8000, writeback_bytes_per_access=3.0)
    assert p.dram_bytes == pytest.approx(8000 + 3000) and p.dram_writebacks == "write-back profiles"
    assert rm.predict_runtime(toy_machine(), 1, HALF, OPS, 1000, 8000).dram_writebacks == "store fraction"
    given = rm.predict_runtime(toy_machine(), 1, HALF, OPS, 1000, 8000, dram_bytes=5.0e3)
    assert given.dram_bytes == 5.0e3 and given.dram_writebacks == "given"


def test_forms_and_layouts_select_the_total():
    p = rm.predict_runtime(toy_machine(), 1, HALF, OPS, 1000, 8000, block_bytes=32, gap_bytes=16,
                           layout="noncontiguous", cpu_form="latency")
    assert p.runtime_s == pytest.approx(p.t_mem_noncontiguous_s + p.t_cpu_latency_s)


def test_work_divides_among_cores():
    one = rm.predict_runtime(toy_machine(bw_one=1e6, bw_all=1e6), 1, HALF, OPS, 1000, 8000)
    four = rm.predict_runtime(toy_machine(bw_one=1e6, bw_all=1e6), 4, HALF, OPS, 1000, 8000)
    assert four.t_mem_s == pytest.approx(one.t_mem_s / 4)
    # throughput form: one latency per class is not divided
    assert four.t_cpu_throughput_s == pytest.approx(((1 + 24 * 0.25) + (5 + 1.5 * 0.5) + (20 + 0.25 * 8)) * 1e-9)


def test_cumulative_rates_are_converted_to_local():
    rates = HitRates.from_cumulative({"L1": 0.9, "L2": 0.95, "L3": 0.99}, ["L1", "L2", "L3"])
    assert rates.local == pytest.approx((0.9, 0.5, 0.8))
    assert rates.served() == pytest.approx([0.9, 0.05, 0.04, 0.01])
    assert rates.cumulative() == pytest.approx([0.9, 0.95, 0.99])
    p = rm.predict_runtime(toy_machine(), 1, dict(zip(rates.levels, rates.local)), OPS, 1000, 8000)
    assert p.delta_avg_cycles == pytest.approx(0.9 * 4 + 0.05 * 10 + 0.04 * 40 + 0.01 * 100)
    # The paper's plug-in of cumulative rates would send 0.1*0.05*0.01 of accesses to RAM instead of 0.01.
    naive = average_cost([0.9, 0.95, 0.99], [4, 10, 40], 100)
    assert naive < p.delta_avg_cycles - 0.5
    assert p.cumulative_hit_rates == pytest.approx({"L1": 0.9, "L2": 0.95, "L3": 0.99})


@given(st.lists(st.floats(0, 1), min_size=1, max_size=4))
def test_local_cumulative_round_trip(local):
    served = served_fractions(local)
    assert sum(served) == pytest.approx(1.0)
    cum = np.cumsum(served[:-1])
    back = local_from_cumulative(list(cum))
    reach = np.concatenate([[1.0], np.cumprod(1 - np.array(local))[:-1]])
    for h, b, r in zip(local, back, reach):
        if r > 1e-9:  # a level nothing reaches has no defined local rate
            assert b == pytest.approx(h, abs=1e-6)


def test_bad_rates_rejected():
    with pytest.raises(InputError, match="cannot decrease"):
        local_from_cumulative([0.9, 0.8])
    with pytest.raises(InputError, match="L3"):
        rm.predict_runtime(toy_machine(), 1, {"L1": 0.5, "L2": 0.5}, OPS, 1000, 8000)
    with pytest.raises(InputError, match="not a probability"):
        rm.predict_runtime(toy_machine(), 1, {**HALF, "L2": 1.5}, OPS, 1000, 8000)
    with pytest.raises(InputError, match="only 8 cores"):
        rm.predict_runtime(toy_machine(), 16, HALF, OPS, 1000, 8000)


@pytest.mark.parametrize("block,expected", [(4, 8), (8, 8), (9, 16), (48, 48), (64, 64), (100, 64)])
def test_effective_block_piecewise(block, expected):
    assert effective_block_bytes(block, 8, 64) == expected


def test_contention_stops_scaling_when_dram_saturates():
    """All-DRAM streaming: 1e6 accesses, all misses -> 64 MB over at most 16 GB/s = 4 ms floor.

    Per core T_mem = 1e6/p * (100 + 7 * 8) / 8 ns = 19.5 ms / p, so the floor takes over above 4 cores.
    """
    m = toy_machine(bw_one=8.0, bw_all=16.0, cores=16)
    miss = {"L1": 0.0, "L2": 0.0, "L3": 0.0}
    ops = rm.OpCounts(load=1e6)
    preds = {p: rm.predict_runtime(m, p, miss, ops, 1e6, 8e6, block_bytes=64) for p in (1, 2, 4, 8, 16)}
    floor = 1e6 * 64 / 16e9
    assert preds[4].runtime_s == pytest.approx(19.5e-3 / 4) and preds[4].contention_s == 0
    assert preds[8].runtime_s == pytest.approx(floor)          # saturated: bytes / all-core bandwidth
    assert preds[16].runtime_s == pytest.approx(floor)         # no further speedup
    assert preds[8].contention_s == pytest.approx(floor - 19.5e-3 / 8)
    assert preds[16].t_mem_s + preds[16].t_cpu_s < preds[8].t_mem_s  # the paper's model keeps scaling
    assert preds[1].dram_bandwidth_gbs == 8.0 and preds[16].dram_bandwidth_gbs == 16.0


def test_ample_bandwidth_equals_paper_model():
    m = toy_machine(bw_one=1e4, bw_all=1e5)
    for p in (1, 2, 4, 8):
        pred = rm.predict_runtime(m, p, HALF, OPS, 1e6, 8e6)
        assert pred.contention_s == 0
        assert pred.runtime_s == pred.t_mem_s + pred.t_cpu_s


def test_op_counts_from_blocks():
    table = {1: {"int_add": 2, "int_sub": 1, "fp_fma": 1, "load": 2, "load_bytes": 16, "cmp": 1},
             2: {"fp_div": 1, "store": 1, "store_bytes": 8}}
    ops = op_counts_from_blocks(table, {1: 10, 2: 3, 99: 5})
    assert ops == rm.OpCounts(int_add=30, fp_fma=10, fp_div=3, load=20, store=3, load_bytes=160, store_bytes=24)
    assert ops.store_fraction == pytest.approx(3 / 23)


def _brute_busiest(n, p, sched, chunk):
    """Assign every iteration to a thread explicitly."""
    if sched == SCHED_MASTER:
        return n
    if sched == SCHED_STATIC and chunk == 0:
        return max(len(a) for a in np.array_split(np.arange(n), p))
    c = max(1, chunk)
    counts = [0] * p
    for i in range(n):
        counts[(i // c) % p] += 1
    return max(counts)


@settings(max_examples=200)
@given(st.integers(0, 300), st.integers(1, 16), st.sampled_from([SCHED_STATIC, SCHED_DYNAMIC, SCHED_MASTER]),
       st.integers(0, 20))
def test_busiest_iterations_match_brute_force(n, p, sched, chunk):
    loop = LoopInstance(instance=0, loop_id=0, trip_count=n, schedule=sched, chunk=chunk)
    assert busiest_iterations(loop, p) == _brute_busiest(n, p, sched, chunk)


def test_busiest_share_weights_loops_by_iterations():
    loops = [LoopInstance(0, 0, 100, SCHED_STATIC, 0), LoopInstance(1, 1, 10, SCHED_MASTER, 0),
             LoopInstance(2, 2, 30, SCHED_GUIDED, 0)]
    assert busiest_share(loops, 4) == pytest.approx((25 + 10 + 8) / 140)
    assert busiest_share([], 4) == 0.25
    assert math.isclose(busiest_share(loops[:1], 1), 1.0)


# --- Pipelined layout and the parallel-overhead term (issue #7) ----------------------------------


def test_pipelined_layout_is_eq5_without_a_block_bound():
    p = rm.predict_runtime(toy_machine(), 1, HALF, OPS, 1000, 8000, layout="pipelined")
    assert p.t_mem_pipelined_s == pytest.approx(2.5 * 1000 * 1e-9)     # beta_avg = 2.5 cycles per access
    assert p.t_mem_s == p.t_mem_pipelined_s
    assert p.runtime_s == pytest.approx(p.t_mem_pipelined_s + p.t_cpu_throughput_s)
    # Eq. 5 approaches it as the block grows: (22 + (b-1) 2.5) / b -> 2.5
    big = rm.predict_runtime(toy_machine(), 1, HALF, OPS, 1000, 8000, block_bytes=8e6)
    assert big.t_mem_contiguous_s == pytest.approx(p.t_mem_pipelined_s, rel=1e-4)


def _parallel_machine(cores=8):
    from dataclasses import replace

    from machines.model import Parallel
    return replace(toy_machine(bw_one=1e6, bw_all=1e6, cores=cores),
                   parallel=Parallel(fork_join_ns=1000.0, barrier_ns=400.0))


def test_overhead_hand_computed():
    m = _parallel_machine(cores=8)
    assert overhead_seconds(m, 1, regions=10, barriers=50) == 0.0     # one thread: serial region
    # 8 cores: full cost; 2 cores: one tree level of three
    assert overhead_seconds(m, 8, 10, 50) == pytest.approx((10 * 1000 + 50 * 400) * 1e-9)
    assert overhead_seconds(m, 2, 10, 50) == pytest.approx((10 * 1000 + 50 * 400) / 3 * 1e-9)
    assert overhead_seconds(toy_machine(), 8, 10, 50) == 0.0          # no [parallel] table


def test_cold_start_once_per_run_scaled_by_tree_depth():
    from dataclasses import replace

    m = _parallel_machine(cores=8)
    m = replace(m, parallel=replace(m.parallel, cold_start_ns=70_000.0, cold_start_one_ns=10_000.0))
    assert overhead_seconds(m, 1, regions=10, barriers=50) == pytest.approx(10_000e-9)  # one thread pays it too
    assert overhead_seconds(m, 8, 10, 50) == pytest.approx((10 * 1000 + 50 * 400 + 70_000) * 1e-9)
    assert overhead_seconds(m, 2, 10, 50) == pytest.approx(((10 * 1000 + 50 * 400) / 3 + 10_000 + 60_000 / 3)
                                                              * 1e-9)
    assert overhead_seconds(m, 2, regions=0, barriers=0) == 0.0      # no region ran: no cold start


def test_overhead_adds_to_the_runtime():
    m = _parallel_machine(cores=2)
    base = rm.predict_runtime(m, 2, HALF, OPS, 1000, 8000)
    p = rm.predict_runtime(m, 2, HALF, OPS, 1000, 8000, regions=3, barriers=7)
    assert p.t_overhead_s == pytest.approx((3 * 1000 + 7 * 400) * 1e-9)
    assert p.runtime_s == pytest.approx(base.runtime_s + p.t_overhead_s)
    assert base.t_overhead_s == 0.0


def test_region_count_and_barriers_from_trace_facts():
    from instrument.trace_types import SCHED_SINGLE, BlockInfo
    blocks = {0: BlockInfo(0, "OUT__1__7__", "entry", False), 1: BlockInfo(1, "OUT__1__7__", "for.body", False),
              2: BlockInfo(2, "OUT__2__9__", "entry", False), 3: BlockInfo(3, "main", "entry", False)}
    assert region_count(blocks, {0: 4, 1: 900, 2: 1, 3: 1}) == 5
    loops = (LoopInstance(0, 0, 10, SCHED_STATIC, 0), LoopInstance(1, 1, 1, SCHED_MASTER, 0),
             LoopInstance(2, 2, 1, SCHED_SINGLE, 0), LoopInstance(3, 0, 10, SCHED_DYNAMIC, 2))
    facts = rm.RegionFacts(ops=OPS, mem_accesses=1000, mem_bytes=8000, loops=loops, regions=5)
    assert facts.barriers == 3                                            # master has no implied barrier
    assert facts.work_shared_loops == 2                                   # the static and the dynamic loop


# --- Queuing-network contention (Yook-Egger style MVA) --------------------------------------------


def test_mva_hand_case():
    # n=1: R = 1, X = 1/2, Q = 1/2; n=2: R = 1 * (1 + 1/2) = 1.5, X = 2 / (1 + 1.5) = 0.8
    x, r = mva([1.0], think=1.0, population=2)
    assert x == pytest.approx(0.8) and r == pytest.approx([1.5])


def _repairman_throughput(service: float, think: float, n: int) -> float:
    """Independent oracle: machine-repairman model (M/M/1//N), X = (1 - p0) / S."""
    terms = [math.factorial(n) / math.factorial(n - k) * (service / think) ** k for k in range(n + 1)]
    return (1.0 - 1.0 / sum(terms)) / service


@pytest.mark.parametrize("service,think,n", [(1.0, 1.0, 2), (10.0, 990.0, 20), (3.0, 7.0, 9)])
def test_mva_matches_the_repairman_closed_form(service, think, n):
    assert mva([service], think, n)[0] == pytest.approx(_repairman_throughput(service, think, n))


def test_queuing_contention_limits_and_hand_case():
    m = toy_machine(bw_one=6.4, bw_all=6.4, cores=2)          # RAM 100 ns, 64 B lines
    assert memory_credits(m) == 10                          # 6.4 GB/s x 100 ns / 64 B
    assert queuing_seconds(m, 2, 1e-6, 0.0) == 1e-6         # no DRAM traffic: unloaded
    # 10 lines per core, S = 10 ns, think = 10 x 1000 / 10 - 10 = 990 ns, 20 customers
    expected = 2 * 10 / _repairman_throughput(10e-9, 990e-9, 20)
    assert queuing_seconds(m, 2, 1e-6, 640.0) == pytest.approx(expected)
    # saturated: all DRAM bytes / all-core bandwidth, the roofline floor
    assert queuing_seconds(m, 2, 1e-9, 6.4e6) == pytest.approx(2 * 6.4e6 / 6.4e9, rel=1e-3)
    # light load: barely above the unloaded time
    assert 1e-3 <= queuing_seconds(m, 1, 1e-3, 640.0) <= 1e-3 * 1.001


def test_queuing_selects_the_runtime_and_reports_contention():
    m = toy_machine(bw_one=0.5, bw_all=0.8, cores=8)           # starved DRAM: contention dominates at 8 cores
    q = rm.predict_runtime(m, 8, HALF, OPS, 1000, 8000, contention="queuing")
    roof = rm.predict_runtime(m, 8, HALF, OPS, 1000, 8000)
    assert q.runtime_s >= roof.runtime_s * 0.999               # queueing never beats the roofline floor
    assert q.contention_s == pytest.approx(q.runtime_s - q.t_mem_s - q.t_cpu_s)
    with pytest.raises(InputError, match="contention 'mm1'"):
        rm.predict_runtime(m, 8, HALF, OPS, 1000, 8000, contention="mm1")


def test_critical_path_form_hand_computed():
    """Per block max(chain, FP, integer, load/store), times executions, less T_mem's L1 issue."""
    m = toy_machine(bw_one=1e6, bw_all=1e6)
    reduction = BlockWork(100, {"fp_add": 2, "fp_mul": 2, "int_add": 1, "load": 4}, {"fp_add": 2})
    stream = BlockWork(10, {"fp_mul": 4, "int_add": 8, "load": 3, "store": 1}, {})
    ops = op_counts_from_blocks({0: reduction.ops, 1: stream.ops}, {0: 100, 1: 10})
    p = rm.predict_runtime(m, 1, HALF, ops, 440, 3520, layout="pipelined", cpu_form="critical-path",
                           blocks=[reduction, stream])
    # reduction: chain 2 x 1 (fp_add latency) = 2; FP 2 x 1 + 2 x 0.5 = 3; int 0.25; ports 4 x 1 -> 4
    # stream: chain 0; FP 4 x 0.5 = 2; int 8 x 0.25 = 2; ports 4 x 1 = 4 -> 4
    core = 100 * 4 + 10 * 4
    l1_issue = 440 * 0.5 * 1  # half of the accesses hit L1 at 1 cycle each
    assert p.t_cpu_critical_path_s == pytest.approx((core - l1_issue) * 1e-9)
    assert p.t_cpu_s == p.t_cpu_critical_path_s
    assert p.runtime_s == pytest.approx(p.t_mem_pipelined_s + p.t_cpu_critical_path_s)


def test_critical_path_chain_binds_and_divides_among_cores():
    m = toy_machine(bw_one=1e6, bw_all=1e6)
    div_chain = BlockWork(1000, {"fp_div": 1, "load": 1}, {"fp_div": 1})  # 20-cycle latency, 8 throughput
    ops = op_counts_from_blocks({0: div_chain.ops}, {0: 1000})
    one = rm.predict_runtime(m, 1, HALF, ops, 1000, 8000, layout="pipelined", cpu_form="critical-path",
                             blocks=[div_chain])
    two = rm.predict_runtime(m, 2, HALF, ops, 1000, 8000, layout="pipelined", cpu_form="critical-path",
                             blocks=[div_chain])
    assert one.t_cpu_s == pytest.approx((1000 * 20 - 1000 * 0.5 * 1) * 1e-9)
    assert two.t_cpu_s == pytest.approx(one.t_cpu_s / 2)
    # without blocks the form falls back to the throughput form
    plain = rm.predict_runtime(m, 1, HALF, ops, 1000, 8000, layout="pipelined", cpu_form="critical-path")
    assert plain.t_cpu_s == plain.t_cpu_throughput_s


def test_library_calls_add_their_cost_and_unpriced_ones_are_reported():
    m = toy_machine(bw_one=1e6, bw_all=1e6)
    from dataclasses import replace
    priced = replace(m, calls={"exp": OpCost(30.0, 12.0)})
    blk = BlockWork(10, {"fp_mul": 2, "load": 1}, {}, {"exp": 2, "erf": 1})
    ops = op_counts_from_blocks({0: blk.ops}, {0: 10})
    p = rm.predict_runtime(priced, 1, HALF, ops, 10, 80, layout="pipelined", cpu_form="critical-path", blocks=[blk])
    # per execution: max(chain 0, FP 2 x 0.5, int 0, ports 1 x 1) = 1, plus 2 exp x 12 cycles; erf unpriced
    assert p.t_cpu_s == pytest.approx((10 * (1 + 24) - 10 * 0.5 * 1) * 1e-9)
    assert p.uncosted_calls == 10


def test_short_chain_instances_overlap_in_the_reorder_window():
    from dataclasses import replace
    m = replace(toy_machine(bw_one=1e6, bw_all=1e6), reorder_window_ops=120.0)
    # chain: fp_div latency 20; 6 counted ops per execution (fp_div, load, int_add, cmp, branch, store)
    ops = {"fp_div": 1, "load": 1, "int_add": 1, "cmp": 1, "branch": 1, "store": 1, "load_bytes": 8}
    short = BlockWork(100, ops, {"fp_div": 1}, trip=10)  # 10 x 6 = 60 ops per instance
    assert chain_overlap(short, m) == pytest.approx(1 + 120 / 60)
    assert block_core_cycles(short, m) == pytest.approx(max(20 / 3, 8.0))  # divide throughput binds
    long = replace(short, trip=1000)
    assert block_core_cycles(long, m) == pytest.approx(20 / (1 + 120 / 6000))
    assert chain_overlap(replace(short, trip=0), m) == 1.0  # unknown trip: no overlap
    assert chain_overlap(short, toy_machine()) == 1.0        # machine without a [core] window


def test_long_chain_instances_gain_only_the_lookahead():
    """window.c on the Intel host: a 500-iteration fadd reduction runs 1.06x overlapped, not the 1 + W / span
    = 1.17x that short instances' window predicts; with a lookahead of L ops the next instance's first
    L / ops iterations run under the tail, so an instance of n iterations takes n - L / ops chain steps."""
    from dataclasses import replace
    m = replace(toy_machine(), reorder_window_ops=500.0, chain_lookahead_ops=300.0)
    ops = {"fp_add": 1, "load": 1, "fp_mul": 1, "int_add": 1, "cmp": 1, "branch": 1, "load_bytes": 8}
    long = BlockWork(5000, ops, {"fp_add": 1}, trip=500)   # 6 ops x 500 = 3000 per instance
    assert chain_overlap(long, m) == pytest.approx(500 / (500 - 50))
    assert chain_overlap(long, replace(m, chain_lookahead_ops=0.0)) == pytest.approx(1 + 500 / 3000)
    mid = replace(long, trip=64)   # 384 ops: the short-instance overlap is the smaller one
    assert chain_overlap(mid, m) == pytest.approx(1 + 500 / 384)
    short = replace(long, trip=40)  # the whole next instance is under the tail
    assert chain_overlap(short, m) == pytest.approx(1 + 500 / 240)
    between = replace(long, span_ops=3000 + 120)  # 120 ops of other work come first: 30 iterations ahead
    assert chain_overlap(between, m) == pytest.approx(500 / (500 - 30))


def test_block_work_trip_from_self_edges():
    class Entry:
        ops, chain, calls = {"int_add": 1}, {"int_add": 1}, {}
    work = block_work({3: Entry(), 4: Entry()}, {3: 100, 4: 7}, {(3, 3): 90, (2, 3): 10})
    assert [(w.count, w.trip) for w in work] == [(100.0, 10.0), (7.0, 0.0)]


def test_window_must_hold_the_enclosing_loops_other_work():
    """gramschmidt-like: a reduction (self-loop 2) and an update loop (self-loop 3) alternate in an outer
    loop, so two reductions are separated by a whole update loop that the window must hold first."""
    from dataclasses import replace
    from analysis.counts.bbcounts import FunctionCfg, enclosing_loops

    # 0 -> 1 (outer header) -> 2 (reduction) -> 3 (update) -> 4 (outer latch) -> 1 | 5 (exit)
    f = FunctionCfg("OUT__1", 0, 1.0, (0, 1, 2, 3, 4, 5),
                    ((0, 1), (1, 2), (2, 2), (2, 3), (3, 3), (3, 4), (4, 1), (4, 5)))
    loops = enclosing_loops(f)
    assert loops[2] == loops[3] == frozenset({1, 2, 3, 4}) and 0 not in loops and 5 not in loops

    class Entry:
        def __init__(self, ops, chain=None):
            self.ops, self.chain, self.calls = ops, chain or {}, {}

    table = {1: Entry({"branch": 1}), 2: Entry({"fp_add": 1, "load": 2, "branch": 1}, {"fp_add": 1}),
             3: Entry({"fp_mul": 1, "load": 2, "store": 1, "branch": 1}), 4: Entry({"int_add": 1})}
    counts = {1: 10, 2: 1000, 3: 500, 4: 10}
    edges = {(2, 2): 990, (3, 3): 490}
    work = {round(w.count): w for w in block_work(table, counts, edges, loops)}
    # per outer iteration: 1 + 100 x 4 + 50 x 5 + 1 = 652 operations
    assert work[1000].trip == 100 and work[1000].span_ops == pytest.approx(652)
    m = replace(toy_machine(), reorder_window_ops=163.0)
    assert chain_overlap(work[1000], m) == pytest.approx(1 + 163 / 652)
    alone = block_work(table, counts, edges)  # without the CFG: only the instance's own 100 x 4
    assert chain_overlap(next(w for w in alone if w.count == 1000), m) == pytest.approx(1 + 163 / 400)


def test_ports_charge_loads_and_stores_at_their_own_throughput():
    """A store-heavy block is bound by the shared load/store resource at the machine's store cost."""
    from dataclasses import replace
    m = toy_machine()
    m = replace(m, ops={**m.ops, "load": OpCost(4.0, 0.5), "store": OpCost(4.0, 2.0)})
    copy = BlockWork(1, {"load": 2, "store": 2, "int_add": 1}, {})
    assert block_core_cycles(copy, m) == pytest.approx(2 * 0.5 + 2 * 2.0)  # not 4 x the L1's 1 cycle


def test_contributions_add_up_and_name_what_binds():
    """Hand-computed: the memory-bound case of test_eq5_to_7 (T_mem 7375 ns, T_CPU 87.25 ns, DRAM floor
    10000 B / 8 GB/s = 1250 ns), a DRAM-bound one and a CPU-bound one."""
    p = rm.predict_runtime(toy_machine(), 1, HALF, OPS, 1000, 8000, block_bytes=32, gap_bytes=16)
    parts = p.contributions()
    assert parts["memory"] == pytest.approx(7375e-9) and parts["cpu"] == pytest.approx(87.25e-9)
    assert parts["in_core"] == parts["tlb"] == parts["coherence"] == parts["strided"] == 0.0
    assert parts["contention"] == parts["overhead"] == 0.0
    assert sum(parts.values()) == pytest.approx(p.runtime_s) and p.bound_by == "memory"
    # 1 GB/s: RAM costs 64 cycles a line, beta = 0.5 + 0.5 + 0.5 + 0.125 x 64 = 9.5, pipelined T_mem 9500 ns,
    # unloaded 9587.25 ns under the floor 10000 B / 1 GB/s = 10000 ns: contention adds 412.75 ns
    slow = rm.predict_runtime(toy_machine(bw_one=1.0, bw_all=1.0), 1, HALF, OPS, 1000, 8000, layout="pipelined")
    assert slow.contributions()["contention"] == pytest.approx(412.75e-9)
    assert sum(slow.contributions().values()) == pytest.approx(10e-6) and slow.bound_by == "contention"
    # 10 accesses: pipelined T_mem 10 x 2.5 = 25 ns against T_CPU 87.25 ns
    busy = rm.predict_runtime(toy_machine(), 1, HALF, OPS, 10, 80, layout="pipelined")
    assert busy.bound_by == "cpu"
    assert replace(busy, t_incore_s=busy.t_cpu_s * 0.9).bound_by == "in_core"
