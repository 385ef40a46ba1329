"""T_ovh, OpenMP overhead (not in the paper): fork/join, barriers and the first region's cold start.

    T_ovh = (R x fork_join_ns + B x barrier_ns) x d + cold,   d = log2(p) / log2(cores) (0 on one core)
    cold  = cold_start_one_ns + (cold_start_ns - cold_start_one_ns) x d   (when any region ran; the curve
            curves.cold_start_ns at p instead, where the machine has it)

With curves over active cores, R x curves.fork_join_ns(p) and B x curves.barrier_ns(p) (each measured at p
threads) replace the scaled all-core figures for p > 1, each where its curve is given.

The cold start is libomp's and the region's code and data coming from memory after the flush and, where the
flush outlasts libomp's spin time (KMP_BLOCKTIME), waking the workers that went to sleep meanwhile: not
log-shaped in p, hence its curve (analysis/RUNTIME_MODEL.md, T_ovh).

One thread: T_ovh = L x curves.barrier_ns(1) + cold, with L the work-shared loop instances
(nothing for them without the curve). A one-thread team's barrier, `single` and `master` return at once in
libomp (about 8, 16 and 7 ns each on this project's host, timed as overhead.c times its loop) and its
fork/join costs ~80 ns, but a work-shared loop still sets up its schedule (`__kmpc_for_static_init` /
`_fini`, about 260 ns with or without `nowait`): overhead.c's p = 1 figure, one `omp for` per round, is
that cost (275 ns there). durbin MEDIUM runs 3998 loop instances; the same source built without -fopenmp
is 1.15 ms faster at one thread (288 ns per loop), and charging them moves its prediction from -40% to 0%.

R: parallel-region invocations, B: barriers executed, L: work-shared loop instances (facts.RegionFacts).
Added after contention. Machine fields: cores, parallel.fork_join_ns, parallel.barrier_ns,
parallel.cold_start_ns, parallel.cold_start_one_ns (absent [parallel]: all 0, no term), curves.fork_join_ns,
curves.barrier_ns, curves.cold_start_ns.
"""
from __future__ import annotations

import math

from analysis.runtime.terms.core_curves import curve_value
from machines.model import Machine


def overhead_seconds(machine: Machine, cores: int, regions: float, barriers: float, loops: float = 0.0) -> float:
    """Fork/join and barrier time: the machine's all-core costs, scaled by tree depth log2(p) / log2(cores)
    (or each cost's curve at p, where the machine has one), plus the cold start of the first region.

    libomp joins and releases threads along a tree, so a p-thread barrier costs about log2(p)
    steps; one thread runs a region serially and pays only its work-shared loops' schedule set-up
    (module docstring).
    """
    par = machine.parallel
    depth = math.log2(cores) / math.log2(machine.cores) if cores > 1 and machine.cores > 1 else 0.0
    cold = cold_start_ns(machine, cores, depth) if regions else 0.0
    if cores <= 1:
        return (cold + loops * one_core_loop_ns(machine)) * 1e-9
    fork_join, barrier = curve_value(machine, "fork_join_ns", cores), curve_value(machine, "barrier_ns", cores)
    if fork_join is None and barrier is None:
        return ((regions * par.fork_join_ns + barriers * par.barrier_ns) * depth + cold) * 1e-9
    regions_ns = par.fork_join_ns * depth if fork_join is None else fork_join
    barriers_ns = par.barrier_ns * depth if barrier is None else barrier
    return (regions * regions_ns + barriers * barriers_ns + cold) * 1e-9


def cold_start_ns(machine: Machine, cores: int, depth: float) -> float:
    """The first region's extra cost after the flush on `cores` threads: the curve's figure at p where the
    machine has it, else the one-thread and all-core figures interpolated by tree depth."""
    curve = curve_value(machine, "cold_start_ns", cores)
    if curve is not None:
        return curve
    par = machine.parallel
    return par.cold_start_one_ns + (par.cold_start_ns - par.cold_start_one_ns) * depth


def one_core_loop_ns(machine: Machine) -> float:
    """A work-shared loop instance's cost on a one-thread team: the barrier curve's figure at one core
    (overhead.c's `omp for` round; curves start at one core), or 0 without the curve."""
    one = curve_value(machine, "barrier_ns", 1)
    return 0.0 if one is None else one
