"""T_strided, column walks (not in the paper): what their cold lines, conflict refills and in-place updates cost
beyond a stream's.

    T_strided = s x (cold + conflict + updates)
    cold      = sum over strided first touches of max(0, cost(sets reached) - line / one-core bandwidth)
    conflict  = sum over levels i of R_i x max(0, caches[i].conflict_refill_ns - caches[i].recip_throughput / f)
    updates   = sum over sets reached d of U_d x max(0, update(d) - caches[1].recip_throughput / f)

cost: the machine's ram.strided_cold_line_ns interpolated at log2 of the L1 sets the walk reaches
(analysis/runtime/cold_lines.py counts the first touches in one pass over the trace). R_i: the column walks'
refills that conflict out of L1 and L2 and come from level i (analysis/runtime/conflict_refills.py, in the
walk pass). U_d: the column walks' L1 refills of lines the walk then writes, the walk reaching d of L1's sets
(analysis/runtime/l1_walks.py, one pass); update(d): caches[0].column_update_ns interpolated at log2 d;
priced as L2 serves them. The busiest core pays its share:
each core's walk waits on its own misses. Machine fields: ram.strided_cold_line_ns, ram.bandwidth_one_core_gbs,
caches[].conflict_refill_ns, caches[0].column_update_ns, caches[].recip_throughput_cycles, line_bytes,
frequency_ghz. Without the figures: no term.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from machines.model import Machine


def strided_cold_extra_ns(machine: Machine, first_touches) -> float:
    """The region's column-walk cold lines (a cold_lines first-touch table, or None) priced for this machine:
    its ram.strided_cold_line_ns beyond a stream's line / one-core bandwidth."""
    from analysis.runtime.cold_lines import strided_extra_ns

    return strided_extra_ns(first_touches, machine.ram.strided_cold_line_ns,
                            machine.line_bytes / machine.ram.bandwidth_one_core_gbs)


def conflict_extra_ns(machine: Machine, refills: Mapping[int, int]) -> float:
    """The region's conflict refills (level index -> count, l1_walks.refills_by_level) priced for this
    machine: each level's conflict_refill_ns beyond the reciprocal throughput T_mem already charged (RAM and
    levels without the figure: nothing)."""
    extra = 0.0
    for level, count in refills.items():
        if level < len(machine.caches) and machine.caches[level].conflict_refill_ns:
            cache = machine.caches[level]
            extra += count * max(0.0, cache.conflict_refill_ns - cache.recip_throughput_cycles / machine.frequency_ghz)
    return extra


def update_extra_ns(machine: Machine, updates: Mapping[int, int]) -> float:
    """The region's dirtied column-walk refills (sets reached -> count, l1_walks.updates_by_sets) priced for
    this machine: L1's column_update_ns at that many sets beyond L2's reciprocal throughput, which T_mem already
    charged (no figure: nothing)."""
    from analysis.runtime.cold_lines import cost_at_sets

    figures = machine.caches[0].column_update_ns
    if not figures or len(machine.caches) < 2 or not updates:
        return 0.0
    charged = machine.caches[1].recip_throughput_cycles / machine.frequency_ghz
    sets, counts = np.array(list(updates)), np.array(list(updates.values()), dtype=float)
    return float(np.sum(counts * np.maximum(0.0, cost_at_sets(figures, sets) - charged)))


def strided_cycles(machine: Machine, share: float, strided_extra_ns: float) -> float:
    """T_strided in cycles: the busiest core's share of the region's extra nanoseconds."""
    return share * strided_extra_ns * machine.frequency_ghz
