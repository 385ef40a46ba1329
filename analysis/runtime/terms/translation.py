"""T_TLB, address translation (not in the paper): the busiest core's loads that miss each data-TLB level.

    T_TLB = s x loads x sum_i m_i x miss_cycles_i  +  s x U x max(0, rmw_miss_cycles_0 - miss_cycles_0)

m_i: the fraction of accesses missing TLB level i (analysis/runtime/tlb.py, SDCM on page-granular profiles);
U: the region's in-place updates whose page missed the first level (tlb.update_misses). Only loads pay: a
store's translation miss hides behind its commit. Machine fields: tlbs[i].name, tlbs[i].miss_cycles,
tlbs[0].rmw_miss_cycles. No [[tlbs]] (the shipped machines) or no rates: no term.
"""
from __future__ import annotations

from typing import Mapping

from common.errors import InputError
from machines.model import Machine


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


def update_extra_cycles(machine: Machine) -> float:
    """What an in-place update whose page misses the first TLB level costs beyond its load's miss (tlb.c)."""
    if not machine.tlbs or not machine.tlbs[0].rmw_miss_cycles:
        return 0.0
    return max(0.0, machine.tlbs[0].rmw_miss_cycles - machine.tlbs[0].miss_cycles)


def tlb_cycles(machine: Machine, loads: float, share: float, miss_rates: Mapping[str, float] | None,
               update_misses: float) -> float:
    """T_TLB in cycles for the busiest core (`loads` and `update_misses` count the whole region)."""
    # loads only: a store's translation miss costs nothing measurable (tlb.c, machines/SCHEMA.md)
    return (loads * share * tlb_cycles_per_access(machine, miss_rates or {})
            + share * update_misses * update_extra_cycles(machine))
