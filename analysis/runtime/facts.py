"""The region facts the runtime model is fed, gathered from a trace, its block table, the binary's CFG and
assembly, and the trace passes of this package (store_lines, l1_walks, cold_lines, conflict_refills, tlb).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from analysis.hitrates.rates import rates_by_cores
from analysis.runtime.inputs import BlockWork, OpCounts, op_counts_from_blocks
from analysis.runtime.terms.column_walks import conflict_extra_ns, strided_cold_extra_ns, update_extra_ns
from common.errors import InputError
from instrument.trace_types import SCHED_BARRIER, SCHED_DYNAMIC, SCHED_GUIDED, SCHED_MASTER, SCHED_STATIC, LoopInstance
from machines.model import Machine


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
    def work_shared_loops(self) -> int:
        """Work-shared loop instances (static, dynamic or guided; not master or single)."""
        return sum(1 for loop in self.loops if loop.schedule in (SCHED_STATIC, SCHED_DYNAMIC, SCHED_GUIDED))

    @property
    def barriers(self) -> int:
        """Barriers executed: one per work-shared loop or single instance (master has none) unless it
        was nowait, plus the explicit ones."""
        implied = sum(1 for loop in self.loops if loop.schedule not in (SCHED_MASTER, SCHED_BARRIER))
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


@dataclass(frozen=True)
class RegionRecord:
    """What a trace and its binary say about the traced regions, read from their files once per trace and
    handed to every machine's prediction: the trace's header and footer facts, the block table, and the
    innermost loop around every block (from the binary's exported CFG)."""

    trace: Path
    binary: Path
    info: Any                                 # instrument.TraceInfo
    table: Any                                # instrument.BlockTable
    enclosing_loops: Mapping[int, frozenset[int]]

    @classmethod
    def load(cls, trace: Path, binary: Path | None = None) -> "RegionRecord":
        """Read the trace's facts and its binary's side files (the binary the trace names by default)."""
        import instrument  # lazy: the formulas need no tracer

        info = instrument.open_trace(trace).info
        binary = Path(binary or info.program)
        if not binary.is_file():
            raise InputError(f"{binary}: instrumented binary of {trace} not found; pass it with --binary")
        return cls(Path(trace), binary, info, instrument.load_block_table(binary), _enclosing_loops(binary))


def region_facts(record: RegionRecord, new_line_stores: Mapping[int, float] | None = None,
                 streamed_fills: Mapping[int, int] | None = None) -> RegionFacts:
    """Operation counts, access counts and loop schedules of the traced regions (with the blocks'
    unpaired stores, analysis/runtime/store_lines.py, and streamed L1 refills, analysis/runtime/l1_walks.py, when given)."""
    info, table = record.info, record.table
    ops = op_counts_from_blocks(_block_ops(table), info.block_counts)
    mem_bytes = ops.load_bytes + ops.store_bytes or 8.0 * info.n_accesses
    return RegionFacts(ops=ops, mem_accesses=float(info.n_accesses), mem_bytes=float(mem_bytes),
                       loops=tuple(info.loops), regions=region_count(getattr(info, "blocks", {}), info.block_counts),
                       blocks=block_work(table, info.block_counts, getattr(info, "edge_counts", {}),
                                         record.enclosing_loops, new_line_stores, streamed_fills),
                       explicit_barriers=_executed(table, info.block_counts, "barriers"),
                       nowait=_executed(table, info.block_counts, "nowait"))


def operation_count(record: RegionRecord) -> float:
    """The traced regions' counted operations (OpCounts.operations), for misses per kilo-operation."""
    return op_counts_from_blocks(_block_ops(record.table), record.info.block_counts).operations


def in_core_bounds(machine: Machine, record: RegionRecord) -> tuple:
    """llvm-mca's bounds of the traced innermost loops on `machine` (analysis/runtime/incore.py); () when its
    file names no `[core] llvm_mcpu`."""
    if not machine.llvm_mcpu:
        return ()
    import instrument
    from analysis.runtime.incore import loop_bounds

    labels = {b: (entry.function, entry.label) for b, entry in record.table.blocks.items()}
    return loop_bounds(instrument.assembly_path(record.binary), machine.llvm_mcpu, labels, record.info.block_counts)


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
    `streamed_fills` (block -> over the region, l1_walks.py) their streamed L1 refills."""
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


def region_inputs(machine: Machine, record: RegionRecord, terms=None) -> tuple[RegionFacts, dict]:
    """The region's facts and predict_runtime's trace-term arguments for `machine`, from its TraceTerms
    (analysis/runtime/trace_terms.py; None: no trace terms)."""
    from analysis.runtime.l1_walks import fills_by_block, refills_by_level, updates_by_sets
    from analysis.runtime.store_lines import new_line_by_block
    from analysis.runtime.trace_terms import TraceTerms

    terms = terms or TraceTerms()
    facts = region_facts(record, new_line_by_block(terms.store_lines), fills_by_block(terms.l1_fills))
    strided = (strided_cold_extra_ns(machine, terms.first_touches)
               + conflict_extra_ns(machine, refills_by_level(terms.conflict_refills))
               + update_extra_ns(machine, updates_by_sets(terms.column_updates)))
    return facts, {"strided_extra_ns": strided,
                   "tlb_update_misses": terms.tlb_updates if machine.tlbs else 0}
