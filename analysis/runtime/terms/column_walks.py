"""T_strided, cold lines of column walks (not in the paper): what they cost beyond a stream's line.

    T_strided = s x sum over strided first touches of max(0, cost(sets reached) - line / one-core bandwidth)

cost: the machine's ram.strided_cold_line_ns interpolated at log2 of the L1 sets the walk reaches
(analysis/runtime/cold_lines.py counts the first touches in one pass over the trace). The busiest core pays
its share: each core's walk waits on its own misses. Machine fields: ram.strided_cold_line_ns,
ram.bandwidth_one_core_gbs, line_bytes, frequency_ghz. Without the figures: no term.
"""
from __future__ import annotations

from machines.model import Machine


def strided_cold_extra_ns(machine: Machine, first_touches) -> float:
    """The region's column-walk cold lines (a cold_lines first-touch table, or None) priced for this machine:
    its ram.strided_cold_line_ns beyond a stream's line / one-core bandwidth."""
    from analysis.runtime.cold_lines import strided_extra_ns

    return strided_extra_ns(first_touches, machine.ram.strided_cold_line_ns,
                            machine.line_bytes / machine.ram.bandwidth_one_core_gbs)


def strided_cycles(machine: Machine, share: float, strided_extra_ns: float) -> float:
    """T_strided in cycles: the busiest core's share of the region's extra nanoseconds."""
    return share * strided_extra_ns * machine.frequency_ghz
