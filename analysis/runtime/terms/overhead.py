"""T_ovh, OpenMP overhead (not in the paper): fork/join, barriers and the first region's cold start.

    T_ovh = (R x fork_join_ns + B x barrier_ns) x d + cold,   d = log2(p) / log2(cores) (0 on one core)
    cold  = cold_start_one_ns + (cold_start_ns - cold_start_one_ns) x d   (when any region ran)

With curves over active cores, R x curves.fork_join_ns(p) and B x curves.barrier_ns(p) (each measured at p
threads) replace the scaled all-core figures for p > 1, each where its curve is given. One thread is charged
nothing, as without curves: a one-thread team's barrier returns at once in libomp, and the curves' p = 1
figures (overhead.c's loop around an empty region or `omp for`, ~80 and ~275 ns here) overstate it. On this
project's 2-core host durbin MEDIUM's constructs (about 8000 loop barriers) cost 1.15 ms at one thread
natively (the same source without -fopenmp), about 144 ns per barrier: charged 275 ns each
its prediction would be about 46% slow, charged nothing it is 40% fast (analysis/RUNTIME_MODEL.md).

R: parallel-region invocations, B: barriers executed (facts.RegionFacts). Added after contention.
Machine fields: cores, parallel.fork_join_ns, parallel.barrier_ns, parallel.cold_start_ns,
parallel.cold_start_one_ns (absent [parallel]: all 0, no term), curves.fork_join_ns, curves.barrier_ns.
"""
from __future__ import annotations

import math

from analysis.runtime.terms.core_curves import curve_value
from machines.model import Machine


def overhead_seconds(machine: Machine, cores: int, regions: float, barriers: float) -> float:
    """Fork/join and barrier time: the machine's all-core costs, scaled by tree depth log2(p) / log2(cores)
    (or each cost's curve at p, where the machine has one), plus the cold start of the first region.

    libomp joins and releases threads along a tree, so a p-thread barrier costs about log2(p)
    steps; one thread runs a region serially (measured ~80 ns per region, taken as 0).
    """
    par = machine.parallel
    depth = math.log2(cores) / math.log2(machine.cores) if cores > 1 and machine.cores > 1 else 0.0
    cold = par.cold_start_one_ns + (par.cold_start_ns - par.cold_start_one_ns) * depth if regions else 0.0
    if cores <= 1:
        return cold * 1e-9
    fork_join, barrier = curve_value(machine, "fork_join_ns", cores), curve_value(machine, "barrier_ns", cores)
    if fork_join is None and barrier is None:
        return ((regions * par.fork_join_ns + barriers * par.barrier_ns) * depth + cold) * 1e-9
    regions_ns = par.fork_join_ns * depth if fork_join is None else fork_join
    barriers_ns = par.barrier_ns * depth if barrier is None else barrier
    return (regions * regions_ns + barriers * barriers_ns + cold) * 1e-9
