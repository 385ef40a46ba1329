"""T_coh, coherence (not in the paper): what coherence misses cost beyond the level T_mem charges, and upgrades.

    T_coh = s x mem_accesses x f_p x (transfer_cycles - first shared level's reciprocal throughput) + U_p x upgrade_cycles

transfer_cycles is the curve curves.transfer_cycles at p writers where the machine has one (a line p cores
write in turn), else the [coherence] figure (two cores).

f_p: the fraction of accesses that are coherence misses at p cores (hitrates.coherence_miss_rates). The
profiles count such a miss in every private level, so T_mem charges it the first shared level (RAM without
one); the line really moves from another core's cache at the measured transfer cost (transfer.c).
U_p: the busiest core's upgrades at p cores (hitrates.busiest_upgrades): stores to a line the core holds while
another core holds it too. The profiles count them as hits, but the store waits for the other copy's
invalidation, at the machine's measured upgrade_cycles (transfer.c: an owner updating rows the other core
has just read, against the same update with no reader).
Machine fields: transfer_cycles ([coherence]; absent with no curve: no term), curves.transfer_cycles, caches[].shared,
caches[].recip_throughput_cycles (or the RAM line cost), upgrade_cycles ([coherence]; absent: no upgrade part).
"""
from __future__ import annotations

from analysis.runtime.terms.core_curves import curve_value
from analysis.runtime.terms.memory import ram_costs_cycles
from machines.model import Machine


def transfer_extra_cycles(machine: Machine, cores: int | None = None) -> float:
    """What a coherence miss costs beyond the price T_mem already gives it.

    The profiles count a coherence miss as a miss in every private level; the shared trace keeps one
    copy of each line, so the first shared level (RAM without one) serves it at that level's reciprocal
    throughput. A line modified in another core's cache moves at the machine's measured transfer cost
    instead ([coherence] transfer_cycles, transfer.c, or its curve at `cores` writers where the machine has one);
    without either there is no correction.
    """
    measured = None if cores is None else curve_value(machine, "transfer_cycles", cores)
    transfer = machine.transfer_cycles if measured is None else measured
    if not transfer:
        return 0.0
    shared = [c for c in machine.caches if c.shared]
    charged = shared[0].recip_throughput_cycles if shared else ram_costs_cycles(machine)[1]
    return transfer - charged


def coherence_cycles(machine: Machine, per_core_accesses: float, coherence_miss_rate: float,
                     cores: int | None = None, upgrades: float = 0.0) -> float:
    """T_coh in cycles for the busiest core's accesses on `cores` cores (None: the [coherence] figure) and its
    `upgrades`."""
    return (per_core_accesses * coherence_miss_rate * transfer_extra_cycles(machine, cores)
            + upgrades * machine.upgrade_cycles)
