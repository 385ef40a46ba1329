"""The in-core bound of the innermost loops: llvm-mca's cycles where they exceed the per-block model.

    c_loop = max(c_res, (c_sim - chain re-timing) / overlap)
    T_incore = s x sum over loops of max(0, iterations x c_loop - sum_b N_b x core_b without calls)

c_sim and c_res come from analysis/runtime/incore.py (llvm-mca with [core] llvm_mcpu); the chain is re-timed
with the machine file's latencies and overlapped as block_core.chain_overlap says. Part of T_CPU
(critical-path form only). Machine fields: llvm_mcpu (for the bounds), ops[*].latency, reorder_window_ops,
chain_lookahead_ops (and block_core's).
"""
from __future__ import annotations

from typing import Any, Sequence

from analysis.runtime.inputs import BlockWork
from analysis.runtime.terms.block_core import block_issue_cycles, chain_overlap, op_latency
from machines.model import Machine


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
    retime = sum(n * (bound.mca_latencies.get(cls, op_latency(machine, cls)) - op_latency(machine, cls))
                 for blk in members for cls, n in blk.chain.items())
    overlap = max([chain_overlap(blk, machine) for blk in members] or [1.0])
    return max(bound.resource_cycles, (bound.cycles_per_iteration - retime) / overlap)
