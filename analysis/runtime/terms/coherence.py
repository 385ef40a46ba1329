"""T_coh, coherence transfers (not in the paper): what a coherence miss costs beyond the level T_mem charges.

    T_coh = s x mem_accesses x f_p x (transfer_cycles - first shared level's reciprocal throughput)

f_p: the fraction of accesses that are coherence misses at p cores (hitrates.coherence_miss_rates). The
profiles count such a miss in every private level, so T_mem charges it the first shared level (RAM without
one); the line really moves from another core's cache at the measured transfer cost (transfer.c).
Machine fields: transfer_cycles ([coherence]; absent: no term), caches[].shared,
caches[].recip_throughput_cycles (or the RAM line cost).
"""
from __future__ import annotations

from analysis.runtime.terms.memory import ram_costs_cycles
from machines.model import Machine


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


def coherence_cycles(machine: Machine, per_core_accesses: float, coherence_miss_rate: float) -> float:
    """T_coh in cycles for the busiest core's accesses."""
    return per_core_accesses * coherence_miss_rate * transfer_extra_cycles(machine)
