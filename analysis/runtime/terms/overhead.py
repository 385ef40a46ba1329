"""T_ovh, OpenMP overhead (not in the paper): fork/join, barriers and the first region's cold start.

    T_ovh = (R x fork_join_ns + B x barrier_ns) x d + cold,   d = log2(p) / log2(cores) (0 on one core)
    cold  = cold_start_one_ns + (cold_start_ns - cold_start_one_ns) x d   (when any region ran)

R: parallel-region invocations, B: barriers executed (facts.RegionFacts). Added after contention.
Machine fields: cores, parallel.fork_join_ns, parallel.barrier_ns, parallel.cold_start_ns,
parallel.cold_start_one_ns (absent [parallel]: all 0, no term).
"""
from __future__ import annotations

import math

from machines.model import Machine


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
