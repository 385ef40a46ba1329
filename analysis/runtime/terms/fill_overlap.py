"""Streamed L2 fills hidden under core time (critical-path CPU form; taken off T_CPU).

T_mem charges each L1 refill from L2 the L2's reciprocal throughput c on top of the core time. Along a row
the prefetchers bring lines ahead of the loads and the fills compete only with the loads and stores for the
L1 ports, so a block with f streamed refills per execution (analysis/runtime/l1_walks.py) takes
max(chain, FP, INT, PORTS + f c) instead of max(chain, FP, INT, PORTS) + f c; the difference is returned.
Machine fields: caches[1].recip_throughput_cycles (and block_core's).
"""
from __future__ import annotations

from typing import Sequence

from analysis.runtime.inputs import BlockWork
from analysis.runtime.terms.block_core import block_resources
from machines.model import Machine


def fill_overlap_cycles(blk: BlockWork, machine: Machine) -> float:
    """Cycles per execution by which the block's streamed L1 refills hide under its core time.

    Along a row the prefetchers bring the lines ahead of the loads, and the fills take L1 port cycles that
    the loads and stores need, but not the floating-point pipes or a chain's stalls: a block bound by its
    loads and stores pays them in full (lu's row update: 1.2 cycles per line, as the L2's figure), one bound
    elsewhere hides them up to its slack (jacobi-2d's stencil runs as fast from L2 as from L1). 0 without
    streamed refills or without a second cache level."""
    if blk.streamed_fills <= 0 or len(machine.caches) < 2:
        return 0.0
    fills = blk.streamed_fills * machine.caches[1].recip_throughput_cycles
    chain, fp, integer, ports = block_resources(blk, machine)
    return max(chain, fp, integer, ports) + fills - max(chain, fp, integer, ports + fills)


def fill_overlap_total(blocks: Sequence[BlockWork], machine: Machine, share: float) -> float:
    """The busiest core's cycles of streamed L2 fills hidden under core time (fill_overlap_cycles)."""
    return sum(blk.count * share * fill_overlap_cycles(blk, machine) for blk in blocks)
