"""Runtime model T = T_mem + T_CPU of PPT-Multicore (Sec. 3.4, Eq. 4-7), plus DRAM contention.

Pure functions over small dataclasses so every formula is testable without a trace. The
derivation, the units and where this departs from the paper are in analysis/RUNTIME_MODEL.md:

* Eq. 6-7 take *local* (conditional) hit probabilities: the fraction of all accesses that
  level i serves is h_i * prod_{j<i} (1 - h_j). Cumulative rates (the paper's Table 6 and
  PAPI definition, fraction of all accesses hitting at or above level i) are converted first.
* Eq. 5 is evaluated in units of accesses: a block of b accesses pays one latency and b-1
  reciprocal throughputs, T = n * (delta + (b-1) * beta) / b.
* Memory contention (not in the paper): all cores share the DRAM bandwidth, so the region
  cannot finish faster than DRAM bytes / min(cores * one-core bandwidth, all-core bandwidth).
  The prediction is max(T_mem + T_CPU, T_DRAM); the excess is reported as the contention term.
* Layout "pipelined" (not in the paper): Eq. 5 in the limit of an unbounded block, T = n * beta_avg,
  for out-of-order cores whose prefetchers and miss buffers overlap the latency of independent accesses.
* Contention "queuing" (not in the paper): a closed queuing network solved by mean value analysis
  (after Yook and Egger) instead of the roofline floor; it adds queueing delay below saturation.
* Parallel overhead (not in the paper): regions x fork/join + barriers x barrier cost of the machine's
  optional [parallel] table, added for more than one core.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from instrument.trace_types import SCHED_DYNAMIC, SCHED_MASTER, SCHED_SINGLE, SCHED_STATIC, LoopInstance
from machines.model import Machine
from analysis.hitrates.rates import rates_by_cores
from common.errors import InputError

# Operation classes that cost CPU time; loads and stores are priced by T_mem instead.
CPU_CLASSES = ("int_add", "int_mul", "int_div", "fp_add", "fp_mul", "fp_div", "fp_fma")
# Block-table keys folded into each class (subtraction runs on the adder).
_BLOCK_KEYS = {"int_add": ("int_add", "int_sub"), "int_mul": ("int_mul",), "int_div": ("int_div",),
               "fp_add": ("fp_add", "fp_sub"), "fp_mul": ("fp_mul",), "fp_div": ("fp_div",),
               "fp_fma": ("fp_fma",), "load": ("load",), "store": ("store",),
               "load_bytes": ("load_bytes",), "store_bytes": ("store_bytes",)}
LAYOUTS = ("contiguous", "noncontiguous", "pipelined")
CPU_FORMS = ("throughput", "latency", "critical-path")
CONTENTIONS = ("roofline", "queuing")


@dataclass(frozen=True)
class OpCounts:
    """Dynamic operation counts of a parallel region (all cores together)."""

    int_add: float = 0.0
    int_mul: float = 0.0
    int_div: float = 0.0
    fp_add: float = 0.0
    fp_mul: float = 0.0
    fp_div: float = 0.0
    fp_fma: float = 0.0
    load: float = 0.0
    store: float = 0.0
    load_bytes: float = 0.0
    store_bytes: float = 0.0

    def scaled(self, factor: float) -> "OpCounts":
        """The counts one core executes when it does `factor` of the work."""
        return OpCounts(**{f.name: getattr(self, f.name) * factor for f in fields(self)})

    @property
    def store_fraction(self) -> float:
        """Stores among memory operations; 0 when there are none."""
        total = self.load + self.store
        return self.store / total if total else 0.0


_NOT_OPS = ("load_bytes", "store_bytes", "vector_width")


@dataclass(frozen=True)
class BlockWork:
    """An executed block: its executions, static mix per execution and the operations on its
    loop-carried dependence chain (passes/chains.py; empty if none), for the critical-path CPU form."""

    count: float
    ops: Mapping[str, float]
    chain: Mapping[str, int]
    calls: Mapping[str, int] = field(default_factory=dict)  # direct calls per execution, by callee
    trip: float = 0.0  # mean executions per entry into the (self-looping) block; 0 = unknown
    # operations executed per entry into the (self-looping) block by its innermost enclosing loop,
    # the block's own trip x ops included (block_work, from the CFG); 0 = unknown, take trip x ops
    span_ops: float = 0.0
    # stores per execution that write another cache line than the store before them in program order
    # (store_lines.py); they cannot pair with it when the L1 commits stores; 0 = unknown, all pair
    new_line_stores: float = 0.0
    # L1 refills per execution along a row, not a line's first touch (l1_fills.py); 0 = unknown, none
    streamed_fills: float = 0.0
    block_id: int = -1  # the trace's block id (matches analysis.runtime.incore.LoopBound.blocks); -1 = unknown

    @property
    def op_total(self) -> float:
        """Counted operations of one execution (sizes and the vector width are not operations)."""
        return sum(v for k, v in self.ops.items() if k not in _NOT_OPS)


@dataclass(frozen=True)
class HitRates:
    """Per-level local (conditional) hit probabilities, L1 first."""

    levels: tuple[str, ...]
    local: tuple[float, ...]

    @staticmethod
    def from_local(local: Mapping[str, float], levels: Sequence[str]) -> "HitRates":
        """Order a level -> local rate mapping by the machine's levels; every level is required."""
        missing = [name for name in levels if name not in local]
        if missing:
            raise InputError(f"hit rates: no rate for cache level(s) {', '.join(missing)}; "
                             f"give one per level of the machine ({', '.join(levels)})")
        rates = tuple(float(local[name]) for name in levels)
        for name, rate in zip(levels, rates):
            if not 0.0 <= rate <= 1.0:
                raise InputError(f"hit rates: {name} = {rate} is not a probability in [0, 1]")
        return HitRates(tuple(levels), rates)

    @staticmethod
    def from_cumulative(cumulative: Mapping[str, float], levels: Sequence[str]) -> "HitRates":
        """Convert cumulative rates (hit at or above level i) to local ones."""
        cum = [float(cumulative[name]) for name in levels]
        return HitRates.from_local(dict(zip(levels, local_from_cumulative(cum))), levels)

    def served(self) -> list[float]:
        """Fraction of all accesses each level serves, then RAM as the last entry."""
        return served_fractions(self.local)

    def cumulative(self) -> list[float]:
        """Fraction of all accesses that hit at or above each level."""
        return list(_running_sum(self.served()[:-1]))


@dataclass(frozen=True)
class RuntimePrediction:
    """One core count's prediction; times in seconds, for the busiest core."""

    cores: int
    work_share: float                # fraction of the region's work on the busiest core
    local_hit_rates: dict[str, float]
    cumulative_hit_rates: dict[str, float]
    delta_avg_cycles: float          # Eq. 6
    beta_avg_cycles: float           # Eq. 7
    block_accesses_contiguous: float
    block_accesses_noncontiguous: float
    t_mem_contiguous_s: float        # Eq. 5
    t_mem_noncontiguous_s: float     # Eq. 5 with Sec. 3.4.2's block size
    t_mem_pipelined_s: float         # Eq. 5 as the block grows without bound: n * beta_avg
    t_cpu_throughput_s: float
    t_cpu_latency_s: float
    t_cpu_critical_path_s: float     # per block max(chain, FP, integer, load/store), less T_mem's L1 part
    layout: str
    cpu_form: str
    t_mem_s: float
    t_cpu_s: float
    dram_bytes: float                # whole region, all cores
    dram_bandwidth_gbs: float        # min(cores x one-core, all-core)
    t_dram_s: float                  # DRAM bytes / bandwidth: the contention floor
    contention_s: float              # max(0, t_dram - (t_mem + t_cpu))
    t_overhead_s: float              # fork/join and barriers (0 on one core or without [parallel])
    t_tlb_s: float                   # data TLB misses x their cost (0 without [[tlbs]] or miss rates)
    t_coherence_s: float             # coherence misses x what a transfer costs beyond the level charged
    runtime_s: float                 # Eq. 4 plus T_TLB, with the contention floor, plus the overhead
    uncosted_calls: float = 0.0      # library calls executed (whole region) that the machine file does not price
    t_incore_s: float = 0.0          # part of t_cpu_s: llvm-mca's loop bodies beyond the per-block model
    t_strided_s: float = 0.0         # column walks' cold lines beyond a stream's cost (analysis/runtime/cold_lines.py)
    t_fill_overlap_s: float = 0.0    # taken off t_cpu_s: streamed L2 fills hidden under core time (l1_fills.py)

    def as_row(self) -> dict:
        """Flat dict for a table: hit rates become one column per level."""
        row = {k: v for k, v in asdict(self).items() if not isinstance(v, dict)}
        for name, rate in self.local_hit_rates.items():
            row[f"{name}_local_hit_rate"] = rate
        for name, rate in self.cumulative_hit_rates.items():
            row[f"{name}_cumulative_hit_rate"] = rate
        return row


def _running_sum(values: Iterable[float]) -> Iterable[float]:
    total = 0.0
    for v in values:
        total += v
        yield total


def served_fractions(local: Sequence[float]) -> list[float]:
    """Level i serves h_i * prod_{j<i}(1 - h_j) of all accesses; the rest (last entry) go to RAM."""
    out, reach = [], 1.0
    for h in local:
        out.append(reach * h)
        reach *= 1.0 - h
    return out + [reach]


def local_from_cumulative(cumulative: Sequence[float]) -> list[float]:
    """h_i = (C_i - C_{i-1}) / (1 - C_{i-1}); a level nothing reaches gets local rate 1."""
    out, prev = [], 0.0
    for c in cumulative:
        if c < prev - 1e-12:
            raise InputError(f"hit rates: cumulative rate {c} is below the previous level's {prev}; "
                             "cumulative rates cannot decrease with depth (are these local rates?)")
        reach = 1.0 - prev
        out.append(min(1.0, max(0.0, (c - prev) / reach)) if reach > 0 else 1.0)
        prev = max(prev, c)
    return out


def average_cost(local: Sequence[float], level_costs: Sequence[float], ram_cost: float) -> float:
    """Eq. 6 (latencies) and Eq. 7 (reciprocal throughputs): cost weighted by who serves the access."""
    return sum(f * c for f, c in zip(served_fractions(local), list(level_costs) + [ram_cost]))


def ram_costs_cycles(machine: Machine) -> tuple[float, float]:
    """RAM latency and reciprocal throughput (one line at one-core bandwidth) in core cycles."""
    latency = machine.ram.latency_ns * machine.frequency_ghz
    bytes_per_cycle = machine.ram.bandwidth_one_core_gbs / machine.frequency_ghz
    return latency, machine.line_bytes / bytes_per_cycle


def memory_time_cycles(delta: float, beta: float, block: float, n_accesses: float) -> float:
    """Eq. 5: a block of `block` accesses pays one latency and block-1 throughputs."""
    if block < 1:
        raise InputError(f"block size {block} accesses is below 1; give a block of at least one access")
    return (delta + (block - 1.0) * beta) / block * n_accesses


def effective_block_bytes(block_bytes: float, transfer_bytes: float, limit_bytes: float) -> float:
    """Sec. 3.4.2: a block moves in units of C (the bus width) and never beyond S (a cache line)."""
    if block_bytes <= transfer_bytes:
        return float(transfer_bytes)
    if block_bytes >= limit_bytes:
        return float(limit_bytes)
    return math.ceil(block_bytes / transfer_bytes) * float(transfer_bytes)


def cpu_time_cycles(ops: OpCounts, machine: Machine, form: str) -> float:
    """T_CPU per op class: throughput form delta + (N-1)*beta, latency form N*delta."""
    if form not in CPU_FORMS[:2]:
        raise InputError(f"cpu form {form!r}: use throughput or latency (critical-path needs the blocks: "
                         "predict_runtime)")
    total = 0.0
    for name in CPU_CLASSES:
        n = getattr(ops, name)
        if n <= 0:
            continue
        cost = machine.ops[name]
        total += cost.latency + (n - 1.0) * cost.recip_throughput if form == "throughput" else n * cost.latency
    return total


_FP_CLASSES = ("fp_add", "fp_mul", "fp_div", "fp_fma")
_INT_CLASSES = ("int_add", "int_mul", "int_div")


def block_core_cycles(blk: BlockWork, machine: Machine) -> float:
    """Cycles of one execution of a block on an out-of-order core, its data in L1.

    The bound is the slowest of: the loop-carried chain (its latencies in sequence), the
    floating-point pipes, the integer ALUs and the load/store ports (each the sum of its
    classes' reciprocal throughputs). Work on different resources overlaps, as an out-of-order
    core issues independent operations to separate pipes (llvm-mca and OSACA take the same max).
    Loads and stores share one resource (the address-generation units and the L1 they both use on
    Haswell, Broadwell and Zen), each at its own reciprocal throughput: a store costs more than a
    load on every shipped machine (1 against 0.5 cycles) and on the hosts measured (0.5 against 0.33).
    """
    return block_issue_cycles(blk, machine) + library_call_cycles(blk.calls, machine)


def block_issue_cycles(blk: BlockWork, machine: Machine) -> float:
    """block_core_cycles without the library calls: the part llvm-mca's loop bound is compared with."""
    return max(_block_resources(blk, machine))


def _block_resources(blk: BlockWork, machine: Machine) -> tuple[float, float, float, float]:
    """Cycles of one execution on each resource: the overlapped chain, FP pipes, integer ALUs, load/store ports."""
    mix = op_counts_from_blocks({0: blk.ops}, {0: 1})
    fp = sum(getattr(mix, c) * machine.ops[c].recip_throughput for c in _FP_CLASSES)
    integer = sum(getattr(mix, c) * machine.ops[c].recip_throughput for c in _INT_CLASSES)
    ports = mix.load * machine.ops["load"].recip_throughput + store_cycles(mix.store, blk.new_line_stores, machine)
    chain = sum(n * _op_latency(machine, cls) for cls, n in blk.chain.items()) / chain_overlap(blk, machine)
    return chain, fp, integer, ports


def fill_overlap_cycles(blk: BlockWork, machine: Machine) -> float:
    """Cycles per execution by which the block's streamed L1 refills hide under its core time.

    T_mem charges each refill from L2 the L2's reciprocal throughput on top of the core time. Along a row
    the prefetchers bring the lines ahead of the loads, and the fills take L1 port cycles that the loads
    and stores need, but not the floating-point pipes or a chain's stalls: a block bound by its loads and
    stores pays them in full (lu's row update: 1.2 cycles per line, as the L2's figure), one bound
    elsewhere hides them up to its slack (jacobi-2d's stencil runs as fast from L2 as from L1). So the
    block takes max(chain, FP, integer, ports + fills) instead of max(...) + fills; the difference is
    returned (0 without streamed refills or without a second cache level)."""
    if blk.streamed_fills <= 0 or len(machine.caches) < 2:
        return 0.0
    fills = blk.streamed_fills * machine.caches[1].recip_throughput_cycles
    chain, fp, integer, ports = _block_resources(blk, machine)
    return max(chain, fp, integer, ports) + fills - max(chain, fp, integer, ports + fills)


def in_core_extra_cycles(blocks: Sequence[BlockWork], machine: Machine, bounds: Sequence[Any]) -> float:
    """Whole-region cycles by which innermost loops take longer by llvm-mca (analysis/runtime/incore.py: cycles
    per iteration of the compiled body, spills, address arithmetic and dispatch included) than by the
    per-block model: the bound replaces the model's sum over the loop's blocks where it is larger."""
    by_id = {blk.block_id: blk for blk in blocks}
    extra = 0.0
    for bound in bounds:
        members = [by_id[x] for x in bound.blocks if x in by_id]
        modelled = sum(blk.count * block_issue_cycles(blk, machine) for blk in members)
        extra += max(0.0, bound.iterations * in_core_cycles_per_iteration(bound, members, machine) - modelled)
    return extra


def in_core_cycles_per_iteration(bound: Any, members: Sequence[BlockWork], machine: Machine) -> float:
    """llvm-mca's cycles per iteration of a loop, made consistent with the rest of the model: its
    simulated chain re-timed with the machine file's measured latencies (llvm-mca's scheduling model
    may assume others: 3 cycles for addsd where Golden Cove measures 2), then overlapped across
    consecutive entries as chain_overlap says; never below its resource bound."""
    retime = sum(n * (bound.mca_latencies.get(cls, _op_latency(machine, cls)) - _op_latency(machine, cls))
                 for blk in members for cls, n in blk.chain.items())
    overlap = max([chain_overlap(blk, machine) for blk in members] or [1.0])
    return max(bound.resource_cycles, (bound.cycles_per_iteration - retime) / overlap)


def store_cycles(stores: float, new_line: float, machine: Machine) -> float:
    """Load/store-port cycles of a block's stores: `ops.store` each, and the machine's new-line cost
    ([core] store_new_line_cycles, measured) for those writing another line than the store before them
    (a core commits two stores in a cycle only to one line: 0.6 against 1.0 cycles per store measured on
    Golden Cove). Without the figure every store costs `ops.store`."""
    same = machine.ops["store"].recip_throughput
    new = machine.store_new_line_cycles or same
    new_line = min(max(new_line, 0.0), stores)
    return (stores - new_line) * same + new_line * new


def chain_overlap(blk: BlockWork, machine: Machine) -> float:
    """How many chain instances run at once: consecutive entries into a loop start independent chains,
    and the core works on the next one with the W operations its window holds past the stalled
    chain. The window must first hold everything executed between two entries: the instance's own
    trip x ops and the rest of the enclosing loop's body (span_ops; e.g. gramschmidt's update loop
    between two reductions), so an instance runs 1 + W / span at a time (window.c measures W with
    nothing in between; machines/SCHEMA.md [core]). A long instance gains less: only the next
    instance's first lookahead operations (less what lies between) run under its tail, so it takes
    trip - those iterations of chain time (window.c's long instances)."""
    ops = blk.op_total
    if machine.reorder_window_ops <= 0 or blk.trip <= 0 or ops <= 0:
        return 1.0
    short = 1.0 + machine.reorder_window_ops / max(blk.trip * ops, blk.span_ops)
    if machine.chain_lookahead_ops <= 0:
        return short
    between = max(0.0, blk.span_ops - blk.trip * ops)
    ahead = max(0.0, machine.chain_lookahead_ops - between) / ops  # next instance's iterations under the tail
    if ahead >= blk.trip:
        return short
    return min(short, blk.trip / (blk.trip - ahead))


def library_call_cycles(calls: Mapping[str, int], machine: Machine) -> float:
    """Calls to functions the machine file prices ([calls]), at their reciprocal throughput; a call
    runs its own instructions on the same pipes, so it adds to the block rather than overlapping."""
    return sum(n * machine.calls[name].recip_throughput for name, n in calls.items() if name in machine.calls)


def uncosted_calls(blocks: Sequence[BlockWork], machine: Machine) -> float:
    """Executed calls of functions the machine file does not price (their time is missing)."""
    return sum(b.count * n for b in blocks for name, n in b.calls.items() if name not in machine.calls)


def critical_path_cpu_cycles(blocks: Sequence[BlockWork], machine: Machine, share: float,
                             l1_issue_cycles: float, in_core_extra: float = 0.0) -> float:
    """T_CPU of the critical-path form: the busiest core's block-by-block core time (plus what the
    in-core loop bound adds), less the L1 load/store issue that T_mem already charges (so
    T_mem + T_CPU = core time + transfers beyond L1)."""
    core = sum(blk.count * share * block_core_cycles(blk, machine) for blk in blocks)
    return max(0.0, core + in_core_extra - l1_issue_cycles - fill_overlap_total(blocks, machine, share))


def fill_overlap_total(blocks: Sequence[BlockWork], machine: Machine, share: float) -> float:
    """The busiest core's cycles of streamed L2 fills hidden under core time (fill_overlap_cycles)."""
    return sum(blk.count * share * fill_overlap_cycles(blk, machine) for blk in blocks)


def _op_latency(machine: Machine, cls: str) -> float:
    """Latency of one chain operation class; a load on the chain is store-to-load forwarding (~ an L1 hit)."""
    if cls in machine.ops:
        return machine.ops[cls].latency
    if cls == "load":
        return machine.caches[0].latency_cycles
    raise InputError(f"machine {machine.name}: no latency for operation class {cls!r} on a dependence "
                     f"chain; add [ops.{cls}] to the machine file")


def overhead_seconds(machine: Machine, cores: int, regions: float, barriers: float) -> float:
    """Fork/join and barrier time: the machine's all-core costs, scaled by tree depth log2(p) / log2(cores),
    plus the cold start of the first region.

    libomp joins and releases threads along a tree, so a p-thread barrier costs about log2(p)
    steps; one thread runs a region serially (measured ~80 ns per region, taken as 0).
    """
    par = machine.parallel
    depth = math.log2(cores) / math.log2(machine.cores) if cores > 1 and machine.cores > 1 else 0.0
    cold = par.cold_start_one_ns + (par.cold_start_ns - par.cold_start_one_ns) * depth if regions else 0.0
    return ((regions * par.fork_join_ns + barriers * par.barrier_ns) * depth + cold) * 1e-9


def mva(demands: Sequence[float], think: float, population: int) -> tuple[float, list[float]]:
    """Exact single-class mean value analysis of a closed network: throughput X(N) and the residence
    time at each queueing centre, for `population` customers with think (delay) time `think`.

    Hand-written: the recursion is five lines and no maintained Python package provides it.
    """
    queue = [0.0] * len(demands)
    throughput, residence = 0.0, list(demands)
    for n in range(1, population + 1):
        residence = [d * (1.0 + q) for d, q in zip(demands, queue)]
        throughput = n / (think + sum(residence))
        queue = [throughput * r for r in residence]
    return throughput, residence


def memory_credits(machine: Machine) -> int:
    """Outstanding line requests one core sustains, by Little's law: one-core bandwidth x RAM latency / line."""
    return max(1, round(machine.ram.bandwidth_one_core_gbs * machine.ram.latency_ns / machine.line_bytes))


def queuing_seconds(machine: Machine, cores: int, unloaded_s: float, dram_bytes_per_core: float) -> float:
    """Runtime of `cores` identical cores sharing the DRAM controller, as a closed queuing network.

    Each core keeps k = memory_credits requests in flight (customers); a customer thinks for the
    core's unloaded time per DRAM line (k x unloaded / m - S) and is then served by the controller,
    S = line / all-core bandwidth. Without contention this returns `unloaded_s`; at saturation the
    total DRAM bytes / all-core bandwidth (the roofline floor), with queueing delay in between.
    """
    lines = dram_bytes_per_core / machine.line_bytes
    if lines <= 0:
        return unloaded_s
    credits = memory_credits(machine)
    service = machine.line_bytes / (machine.ram.bandwidth_all_cores_gbs * 1e9)
    think = max(0.0, credits * unloaded_s / lines - service)
    throughput, _ = mva([service], think, cores * credits)
    return cores * lines / throughput


def dram_bandwidth_gbs(machine: Machine, cores: int) -> float:
    """Bandwidth `cores` cores can draw: each adds one core's worth until the machine saturates."""
    return min(cores * machine.ram.bandwidth_one_core_gbs, machine.ram.bandwidth_all_cores_gbs)


def dram_traffic_bytes(mem_accesses: float, local: Sequence[float], line_bytes: int,
                       store_fraction: float) -> float:
    """Last-level misses fetch a line each (stores too: write-allocate); stored lines are written back."""
    misses = mem_accesses * served_fractions(local)[-1]
    return misses * line_bytes * (1.0 + store_fraction)


def busiest_share(loops: Sequence[LoopInstance], cores: int) -> float:
    """Fraction of all work-shared iterations the busiest core runs, as each schedule divides them."""
    total = sum(loop.trip_count for loop in loops)
    if total == 0:
        return 1.0 / cores
    return sum(_busiest_iterations(loop, cores) for loop in loops) / total


def _busiest_iterations(loop: LoopInstance, cores: int) -> int:
    """Iterations of the busiest thread for one loop instance."""
    n = loop.trip_count
    if loop.schedule in (SCHED_MASTER, SCHED_SINGLE) or n == 0:
        return n
    if loop.schedule == SCHED_STATIC and loop.chunk == 0:
        return math.ceil(n / cores)   # libomp: contiguous pieces of ceil or floor n/p
    if loop.schedule in (SCHED_STATIC, SCHED_DYNAMIC):
        # Round-robin chunks (dynamic assumed to deal them like static): thread t gets chunks t, t+p, ...
        chunk = max(1, loop.chunk)
        full, rem = divmod(n, chunk)
        counts = [((full - t + cores - 1) // cores) * chunk if t < full else 0 for t in range(cores)]
        if rem:
            counts[full % cores] += rem
        return max(counts)
    return math.ceil(n / cores)       # guided: balanced to within a chunk


def op_counts_from_blocks(block_table_ops: Mapping[int, Mapping[str, float]],
                          block_counts: Mapping[int, int]) -> OpCounts:
    """Static per-block mix times block executions; blocks without an entry contribute nothing."""
    totals = dict.fromkeys(_BLOCK_KEYS, 0.0)
    for block, count in block_counts.items():
        mix = block_table_ops.get(block)
        if not mix or not count:
            continue
        for name, keys in _BLOCK_KEYS.items():
            totals[name] += count * sum(float(mix.get(k, 0)) for k in keys)
    return OpCounts(**totals)


def predict_runtime(machine: Machine, cores: int, local_hit_rates: Mapping[str, float], ops: OpCounts,
                    mem_accesses: float, mem_bytes: float, dram_bytes: float | None = None, *,
                    block_bytes: float | None = None, gap_bytes: float = 0.0, layout: str = "contiguous",
                    cpu_form: str = "throughput", work_share: float | None = None, regions: float = 0.0,
                    barriers: float = 0.0, contention: str = "roofline",
                    blocks: Sequence[BlockWork] = (),
                    tlb_miss_rates: Mapping[str, float] | None = None,
                    coherence_miss_rate: float = 0.0, loop_bounds: Sequence[Any] = (),
                    strided_extra_ns: float = 0.0, tlb_update_misses: float = 0.0) -> RuntimePrediction:
    """Predict the region's runtime on `cores` cores (Eq. 4-7, the DRAM contention floor, the overhead).

    `ops`, `mem_accesses`, `mem_bytes` and `dram_bytes` count the whole region (all cores).
    `block_bytes` is the contiguous block (default: the mean access size, the paper's word);
    `gap_bytes` the gap v of Sec. 3.4.2; `work_share` the busiest core's fraction (default 1/cores);
    `regions` and `barriers` the parallel regions and barriers executed (for the overhead term);
    `contention` the DRAM model: "roofline" floor or "queuing" network; `blocks` the executed
    blocks (whole-region counts) for cpu_form="critical-path" (without them it is the throughput form);
    `tlb_miss_rates` the fraction of accesses missing each of the machine's TLB levels (analysis/runtime/tlb.py);
    `coherence_miss_rate` the fraction of accesses that are coherence misses (hitrates.coherence_miss_rates);
    `loop_bounds` llvm-mca's in-core bounds of innermost loops (analysis/runtime/incore.py; critical-path form only);
    `strided_extra_ns` what the region's column walks' cold lines cost beyond a stream's (all cores,
    analysis/runtime/cold_lines.py); each core's walk waits on its own misses, so the busiest core pays its share;
    `tlb_update_misses` the region's in-place updates whose page missed the first TLB level (tlb.update_misses),
    charged that level's rmw_miss_cycles beyond the miss_cycles their load already pays.
    """
    _check_args(machine, cores, layout, cpu_form, mem_accesses, mem_bytes)
    if contention not in CONTENTIONS:
        raise InputError(f"contention {contention!r}: use one of {', '.join(CONTENTIONS)}")
    share = 1.0 / cores if work_share is None else float(work_share)
    if not 0.0 < share <= 1.0:
        raise InputError(f"work share {share}: must be in (0, 1]")
    rates = HitRates.from_local(local_hit_rates, [c.name for c in machine.caches])
    ram_latency, ram_recip = ram_costs_cycles(machine)
    delta = average_cost(rates.local, [c.latency_cycles for c in machine.caches], ram_latency)
    beta = average_cost(rates.local, [c.recip_throughput_cycles for c in machine.caches], ram_recip)
    word = mem_bytes / mem_accesses if mem_accesses else 8.0
    contiguous = (block_bytes or word) / word
    noncontiguous = effective_block_bytes((block_bytes or word) + gap_bytes, machine.bus_width_bytes,
                                          machine.line_bytes) / word
    per_core = mem_accesses * share
    t_mem = {"contiguous": memory_time_cycles(delta, beta, max(1.0, contiguous), per_core),
             "noncontiguous": memory_time_cycles(delta, beta, max(1.0, noncontiguous), per_core),
             "pipelined": beta * per_core}
    core_ops = ops.scaled(share)
    t_cpu = {form: cpu_time_cycles(core_ops, machine, form) for form in CPU_FORMS[:2]}
    l1_issue = per_core * rates.served()[0] * machine.caches[0].recip_throughput_cycles
    incore = share * in_core_extra_cycles(blocks, machine, loop_bounds) if blocks else 0.0
    t_cpu["critical-path"] = (critical_path_cpu_cycles(blocks, machine, share, l1_issue, incore) if blocks
                              else t_cpu["throughput"])
    if dram_bytes is None:
        dram_bytes = dram_traffic_bytes(mem_accesses, rates.local, machine.line_bytes, ops.store_fraction)
    overhead = overhead_seconds(machine, cores, regions, barriers)
    # loads only: a store's translation miss costs nothing measurable (tlb.c, machines/SCHEMA.md)
    t_tlb = (ops.load * share * tlb_cycles_per_access(machine, tlb_miss_rates or {})
             + share * tlb_update_misses * update_extra_cycles(machine))
    t_coherence = per_core * coherence_miss_rate * transfer_extra_cycles(machine)
    t_strided = share * strided_extra_ns * machine.frequency_ghz
    pred = _assemble(machine, cores, share, rates, delta, beta, contiguous, noncontiguous, t_mem, t_cpu,
                     layout, cpu_form, dram_bytes, overhead, contention, t_tlb, t_coherence, t_strided)
    critical = cpu_form == "critical-path"
    return replace(pred, uncosted_calls=uncosted_calls(blocks, machine),
                   t_incore_s=machine.cycles_to_seconds(incore) if critical else 0.0,
                   t_fill_overlap_s=machine.cycles_to_seconds(fill_overlap_total(blocks, machine, share))
                   if critical else 0.0)


def transfer_extra_cycles(machine: Machine) -> float:
    """What a coherence miss costs beyond the price T_mem already gives it.

    The profiles count a coherence miss as a miss in every private level; the shared trace keeps one
    copy of each line, so the first shared level (RAM without one) serves it at that level's reciprocal
    throughput. A line modified in another core's cache moves at the machine's measured transfer cost
    instead ([coherence] transfer_cycles, transfer.c); without the figure there is no correction.
    """
    if not machine.transfer_cycles:
        return 0.0
    shared = [c for c in machine.caches if c.shared]
    charged = shared[0].recip_throughput_cycles if shared else ram_costs_cycles(machine)[1]
    return machine.transfer_cycles - charged


def strided_cold_extra_ns(machine: Machine, first_touches) -> float:
    """The region's column-walk cold lines (a cold_lines first-touch table, or None) priced for this machine:
    its ram.strided_cold_line_ns beyond a stream's line / one-core bandwidth."""
    from analysis.runtime.cold_lines import strided_extra_ns

    return strided_extra_ns(first_touches, machine.ram.strided_cold_line_ns,
                            machine.line_bytes / machine.ram.bandwidth_one_core_gbs)


def update_extra_cycles(machine: Machine) -> float:
    """What an in-place update whose page misses the first TLB level costs beyond its load's miss (tlb.c)."""
    if not machine.tlbs or not machine.tlbs[0].rmw_miss_cycles:
        return 0.0
    return max(0.0, machine.tlbs[0].rmw_miss_cycles - machine.tlbs[0].miss_cycles)


def tlb_cycles_per_access(machine: Machine, miss_rates: Mapping[str, float]) -> float:
    """Mean address-translation cycles per access: each TLB level's miss rate times its miss cost.

    Every level's rate counts all accesses that miss it (an STLB miss also missed the DTLB), and each
    level's `miss_cycles` is the step its misses add (machines/SCHEMA.md), so the costs add up.
    No rates (or no [[tlbs]]) mean no term.
    """
    if not miss_rates:
        return 0.0
    unknown = sorted(set(miss_rates) - {t.name for t in machine.tlbs})
    if unknown:
        raise InputError(f"TLB miss rates for {', '.join(unknown)}: machine {machine.name} has TLB levels "
                         f"{', '.join(t.name for t in machine.tlbs) or '(none)'}")
    for name, rate in miss_rates.items():
        if not 0.0 <= rate <= 1.0:
            raise InputError(f"TLB miss rate {name} = {rate} is not a probability in [0, 1]")
    return sum(miss_rates.get(t.name, 0.0) * t.miss_cycles for t in machine.tlbs)


def _check_args(machine: Machine, cores: int, layout: str, cpu_form: str, mem_accesses: float,
                mem_bytes: float) -> None:
    """Reject arguments the formulas cannot take, naming the argument."""
    if not isinstance(cores, int) or cores < 1:
        raise InputError(f"cores {cores!r}: must be a positive integer")
    if layout not in LAYOUTS:
        raise InputError(f"layout {layout!r}: use one of {', '.join(LAYOUTS)}")
    if cpu_form not in CPU_FORMS:
        raise InputError(f"cpu form {cpu_form!r}: use one of {', '.join(CPU_FORMS)}")
    if mem_accesses < 0 or mem_bytes < 0:
        raise InputError("memory accesses and bytes must not be negative")
    if cores > machine.cores:
        raise InputError(f"cores {cores}: machine {machine.name} has only {machine.cores} cores")


def _assemble(machine: Machine, cores: int, share: float, rates: HitRates, delta: float, beta: float,
              contiguous: float, noncontiguous: float, t_mem: dict, t_cpu: dict, layout: str,
              cpu_form: str, dram_bytes: float, overhead_s: float = 0.0,
              contention: str = "roofline", tlb_cycles: float = 0.0,
              coherence_cycles: float = 0.0, strided_cycles: float = 0.0) -> RuntimePrediction:
    """Convert cycles to seconds, apply the contention floor and add the parallel overhead."""
    sec = machine.cycles_to_seconds
    mem_s, cpu_s, tlb_s, coh_s = sec(t_mem[layout]), sec(t_cpu[cpu_form]), sec(tlb_cycles), sec(coherence_cycles)
    strided_s = sec(strided_cycles)
    bandwidth = dram_bandwidth_gbs(machine, cores)
    t_dram = dram_bytes / (bandwidth * 1e9)
    unloaded = mem_s + cpu_s + tlb_s + coh_s + strided_s
    if contention == "queuing":
        loaded = queuing_seconds(machine, cores, unloaded, dram_bytes * share)
    else:
        loaded = max(unloaded, t_dram)
    runtime = loaded + overhead_s
    return RuntimePrediction(
        cores=cores, work_share=share, local_hit_rates=dict(zip(rates.levels, rates.local)),
        cumulative_hit_rates=dict(zip(rates.levels, rates.cumulative())), delta_avg_cycles=delta,
        beta_avg_cycles=beta, block_accesses_contiguous=contiguous, block_accesses_noncontiguous=noncontiguous,
        t_mem_contiguous_s=sec(t_mem["contiguous"]), t_mem_noncontiguous_s=sec(t_mem["noncontiguous"]),
        t_mem_pipelined_s=sec(t_mem["pipelined"]),
        t_cpu_throughput_s=sec(t_cpu["throughput"]), t_cpu_latency_s=sec(t_cpu["latency"]),
        t_cpu_critical_path_s=sec(t_cpu["critical-path"]), layout=layout,
        cpu_form=cpu_form, t_mem_s=mem_s, t_cpu_s=cpu_s, dram_bytes=dram_bytes, dram_bandwidth_gbs=bandwidth,
        t_dram_s=t_dram, contention_s=max(0.0, loaded - unloaded), t_overhead_s=overhead_s, t_tlb_s=tlb_s,
        t_coherence_s=coh_s, t_strided_s=strided_s,
        runtime_s=runtime)


# --- Glue: the model's inputs from a trace, its block table and a hit-rate table -----------------


@dataclass(frozen=True)
class RegionFacts:
    """What the model needs from a trace and its block table."""

    ops: OpCounts
    mem_accesses: float
    mem_bytes: float
    loops: tuple[LoopInstance, ...]
    regions: int = 0        # parallel-region invocations (entries into the outlined OUT__ functions)
    blocks: tuple[BlockWork, ...] = ()  # executed blocks: mix and loop-carried chain (critical-path form)
    explicit_barriers: int = 0  # `#pragma omp barrier`s executed (block table `barriers` x block counts)
    nowait: int = 0  # work-shared loop or single instances that ended without their barrier

    @property
    def barriers(self) -> int:
        """Barriers executed: one per work-shared loop or single instance (master has none) unless it
        was nowait, plus the explicit ones."""
        implied = sum(1 for loop in self.loops if loop.schedule != SCHED_MASTER)
        return implied - self.nowait + self.explicit_barriers


def _block_ops(table: Any) -> dict[int, Mapping[str, float]]:
    """Accept a BlockTable (its .blocks), {id: ops-dict}, {id: obj with .ops} or {id: {'ops': ...}}."""
    table = getattr(table, "blocks", table)
    out = {}
    for block_id, entry in table.items():
        ops = getattr(entry, "ops", None)
        if ops is None and isinstance(entry, Mapping):
            ops = entry.get("ops", entry)
        out[int(block_id)] = ops or {}
    return out


def region_facts(trace: Path, binary: Path | None = None,
                 new_line_stores: Mapping[int, float] | None = None,
                 streamed_fills: Mapping[int, int] | None = None) -> RegionFacts:
    """Operation counts, access counts and loop schedules of the traced regions (with the blocks'
    unpaired stores, analysis/runtime/store_lines.py, and streamed L1 refills, analysis/runtime/l1_fills.py, when given)."""
    import instrument  # lazy: the formulas above need no tracer

    info = instrument.open_trace(trace).info
    binary = Path(binary or info.program)
    if not binary.is_file():
        raise InputError(f"{binary}: instrumented binary of {trace} not found; pass it with --binary")
    table = instrument.load_block_table(binary)
    ops = op_counts_from_blocks(_block_ops(table), info.block_counts)
    mem_bytes = ops.load_bytes + ops.store_bytes or 8.0 * info.n_accesses
    return RegionFacts(ops=ops, mem_accesses=float(info.n_accesses), mem_bytes=float(mem_bytes),
                       loops=tuple(info.loops), regions=region_count(getattr(info, "blocks", {}), info.block_counts),
                       blocks=block_work(table, info.block_counts, getattr(info, "edge_counts", {}),
                                         _enclosing_loops(binary), new_line_stores, streamed_fills),
                       explicit_barriers=_executed(table, info.block_counts, "barriers"),
                       nowait=_executed(table, info.block_counts, "nowait"))


def in_core_bounds(machine: Machine, trace: Path, binary: Path | None = None) -> tuple:
    """llvm-mca's bounds of the traced innermost loops on `machine` (analysis/runtime/incore.py); () when its
    file names no `[core] llvm_mcpu`."""
    if not machine.llvm_mcpu:
        return ()
    import instrument
    from analysis.runtime.incore import loop_bounds

    info = instrument.open_trace(trace).info
    binary = Path(binary or info.program)
    table = instrument.load_block_table(binary)
    labels = {b: (entry.function, entry.label) for b, entry in table.blocks.items()}
    return loop_bounds(instrument.assembly_path(binary), machine.llvm_mcpu, labels, info.block_counts)


def _executed(table: Any, block_counts: Mapping[int, int], field_name: str) -> int:
    """Executions of a per-block construct count of the block table (e.g. barriers) over the region."""
    return sum(n * getattr(table.blocks[b], field_name, 0) for b, n in block_counts.items() if b in table.blocks)


def _enclosing_loops(binary: Path) -> dict[int, frozenset[int]]:
    """Innermost enclosing loop body of every block, from the binary's exported CFG."""
    from analysis.counts.bbcounts import enclosing_loops, load_cfg

    return {b: body for f in load_cfg(binary).functions.values() for b, body in enclosing_loops(f).items()}


def block_work(table: Any, block_counts: Mapping[int, int],
               edge_counts: Mapping[tuple[int, int], int] | None = None,
               loops: Mapping[int, frozenset[int]] | None = None,
               new_line_stores: Mapping[int, float] | None = None,
               streamed_fills: Mapping[int, int] | None = None) -> tuple[BlockWork, ...]:
    """The executed blocks of a block table with their mixes, loop-carried chains and, from the
    edge counts, the mean executions per entry of self-looping blocks; with `loops` (block ->
    innermost enclosing loop body, bbcounts.enclosing_loops) also their span_ops; with
    `new_line_stores` (block -> per execution, store_lines.py) their unpaired stores; with
    `streamed_fills` (block -> over the region, l1_fills.py) their streamed L1 refills."""
    entries = getattr(table, "blocks", table)
    edges = edge_counts or {}
    unpaired = new_line_stores or {}
    fills = streamed_fills or {}
    work = {b: BlockWork(float(block_counts[b]), entry.ops, getattr(entry, "chain", {}), getattr(entry, "calls", {}),
                         _trip(block_counts[b], edges.get((b, b), 0)), new_line_stores=unpaired.get(b, 0.0),
                         streamed_fills=fills.get(b, 0) / block_counts[b], block_id=b)
            for b, entry in sorted(entries.items()) if block_counts.get(b)}
    for b, blk in work.items():
        body = (loops or {}).get(b)
        if blk.trip > 0 and body:
            executed = sum(work[x].count * work[x].op_total for x in body if x in work)
            work[b] = replace(blk, span_ops=executed / (blk.count / blk.trip))
    return tuple(work.values())


def _trip(count: int, back_edges: int) -> float:
    """Executions per entry: entries are the executions not reached from the block itself."""
    entered = count - back_edges
    return count / entered if back_edges and entered > 0 else 0.0


def region_count(blocks: Mapping[int, Any], block_counts: Mapping[int, int]) -> int:
    """Region invocations: entries into the entry block of each translator-outlined OUT__ function."""
    return sum(count for block, count in block_counts.items()
               if block in blocks and blocks[block].function.startswith("OUT__") and blocks[block].label == "entry")


def local_rates_by_cores(hit_df) -> dict[int, dict[str, float]]:
    """cores -> {level: local hit rate} from a table with cores, level, local_hit_rate columns."""
    return rates_by_cores(hit_df, "local_hit_rate", "hit-rate table")


def predict_many(machine: Machine, cores: Sequence[int], rates: Mapping[int, Mapping[str, float]],
                 facts: RegionFacts, tlb_rates: Mapping[int, Mapping[str, float]] | None = None,
                 coherence: Mapping[int, float] | None = None, **model_args: Any) -> list[RuntimePrediction]:
    """One prediction per core count; the busiest core's share follows the loops' schedules.
    `tlb_rates` (cores -> TLB level -> miss rate), when given, must cover every core count;
    `coherence` (cores -> coherence-miss fraction) defaults to none."""
    out = []
    for c in cores:
        if c not in rates:
            raise InputError(f"hit rates: none for {c} cores; recompute them for cores {','.join(map(str, cores))}")
        if tlb_rates is not None and c not in tlb_rates:
            raise InputError(f"TLB miss rates: none for {c} cores; recompute them for cores "
                             f"{','.join(map(str, cores))}")
        out.append(predict_runtime(machine, c, rates[c], facts.ops, facts.mem_accesses, facts.mem_bytes,
                                   work_share=busiest_share(list(facts.loops), c), regions=facts.regions,
                                   barriers=facts.barriers, blocks=facts.blocks,
                                   tlb_miss_rates=tlb_rates[c] if tlb_rates is not None else None,
                                   coherence_miss_rate=(coherence or {}).get(c, 0.0), **model_args))
    return out


def region_inputs(machine: Machine, trace: Path, binary: Path | None, terms=None) -> tuple[RegionFacts, dict]:
    """The region's facts and predict_runtime's trace-term arguments for `machine`, from its TraceTerms
    (analysis/runtime/trace_terms.py; None: no trace terms)."""
    from analysis.runtime.l1_fills import fills_by_block
    from analysis.runtime.store_lines import new_line_by_block
    from analysis.runtime.trace_terms import TraceTerms

    terms = terms or TraceTerms()
    facts = region_facts(Path(trace), binary, new_line_by_block(terms.store_lines), fills_by_block(terms.l1_fills))
    return facts, {"strided_extra_ns": strided_cold_extra_ns(machine, terms.first_touches),
                   "tlb_update_misses": terms.tlb_updates if machine.tlbs else 0}


def predict_table(machine: Machine, hits, trace: Path, binary: Path | None = None, tlb=None,
                  coherence: Mapping[int, float] | None = None, terms=None, **model_args: Any):
    """DataFrame of RuntimePrediction rows for every core count in `hits` up to the machine's cores.

    Core counts above `machine.cores` are left out (a multi-machine run asks for 16 cores on an
    8-core part); `predict_runtime` itself refuses them. `tlb`: a TLB miss-rate table
    (analysis/runtime/tlb.py) or None for no TLB term; `coherence`: cores -> coherence-miss fraction
    (hitrates.coherence_miss_rates) or None; `terms`: the machine's TraceTerms (analysis/runtime/trace_terms.py)
    or None for none of their terms.
    """
    import pandas as pd

    from analysis.runtime.tlb import miss_rates_by_cores

    rates = local_rates_by_cores(hits)
    cores = [c for c in sorted(rates) if c <= machine.cores]
    tlb_rates = miss_rates_by_cores(tlb) if tlb is not None and machine.tlbs else None
    facts, term_args = region_inputs(machine, Path(trace), binary, terms)
    bounds = in_core_bounds(machine, Path(trace), binary) if model_args.get("cpu_form") == "critical-path" else ()
    preds = predict_many(machine, cores, rates, facts, tlb_rates, coherence, loop_bounds=bounds, **term_args,
                         **model_args)
    return pd.DataFrame([p.as_row() for p in preds])
