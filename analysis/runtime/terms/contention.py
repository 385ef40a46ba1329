"""DRAM contention (not in the paper): all cores share the DRAM bandwidth.

    D = last-level misses x line x (1 + store fraction)          (write-allocate, stored lines written back)
    T_DRAM = D / B(p),   B(p) = curves.bandwidth_gbs at p, else min(p x one-core bandwidth, all-core bandwidth)
    roofline:  T = max(T_unloaded, T_DRAM)
    queuing:   T = p m / X(p k), X from exact mean value analysis of a closed network (after Yook and Egger),
               served at the curve's B(p) where there is one, else at the all-core bandwidth

T_unloaded = T_mem + T_CPU + T_TLB + T_coh + T_strided of the busiest core; the excess T - T_unloaded is
the contention term. Machine fields: ram.bandwidth_one_core_gbs, ram.bandwidth_all_cores_gbs,
ram.latency_ns, line_bytes, curves.bandwidth_gbs (optional).
"""
from __future__ import annotations

from typing import Sequence

from analysis.runtime.inputs import served_fractions
from analysis.runtime.terms.core_curves import curve_value
from machines.model import Machine


def dram_bandwidth_gbs(machine: Machine, cores: int) -> float:
    """Bandwidth `cores` cores can draw: the machine's measured curve at p, else each adds one core's worth until
    the machine saturates."""
    measured = curve_value(machine, "bandwidth_gbs", cores)
    if measured is not None:
        return measured
    return min(cores * machine.ram.bandwidth_one_core_gbs, machine.ram.bandwidth_all_cores_gbs)


def dram_traffic_bytes(mem_accesses: float, local: Sequence[float], line_bytes: int,
                       store_fraction: float) -> float:
    """Last-level misses fetch a line each (stores too: write-allocate); stored lines are written back."""
    misses = mem_accesses * served_fractions(local)[-1]
    return misses * line_bytes * (1.0 + store_fraction)


def dram_floor_seconds(machine: Machine, cores: int, dram_bytes: float) -> float:
    """T_DRAM: the region's DRAM bytes at the bandwidth `cores` cores can draw (the roofline floor)."""
    return dram_bytes / (dram_bandwidth_gbs(machine, cores) * 1e9)


def loaded_seconds(machine: Machine, cores: int, unloaded_s: float, dram_bytes: float, share: float,
                   contention: str) -> float:
    """The busiest core's time with DRAM contention applied: the roofline floor or the queuing network."""
    if contention == "queuing":
        return queuing_seconds(machine, cores, unloaded_s, dram_bytes * share)
    return max(unloaded_s, dram_floor_seconds(machine, cores, dram_bytes))


def mva(demands: Sequence[float], think: float, population: int) -> tuple[float, list[float]]:
    """Exact single-class mean value analysis of a closed network: throughput X(N) and the residence
    time at each queueing centre, for `population` customers with think (delay) time `think`.

    Hand-written: the recursion is five lines and no maintained Python package provides it.
    """
    queue = [0.0] * len(demands)
    throughput, residence = 0.0, list(demands)
    for n in range(1, population + 1):
        residence = [d * (1.0 + q) for d, q in zip(demands, queue)]
        throughput = n / (think + sum(residence))
        queue = [throughput * r for r in residence]
    return throughput, residence


def memory_credits(machine: Machine) -> int:
    """Outstanding line requests one core sustains, by Little's law: one-core bandwidth x RAM latency / line."""
    return max(1, round(machine.ram.bandwidth_one_core_gbs * machine.ram.latency_ns / machine.line_bytes))


def queuing_seconds(machine: Machine, cores: int, unloaded_s: float, dram_bytes_per_core: float) -> float:
    """Runtime of `cores` identical cores sharing the DRAM controller, as a closed queuing network.

    Each core keeps k = memory_credits requests in flight (customers); a customer thinks for the
    core's unloaded time per DRAM line (k x unloaded / m - S) and is then served by the controller,
    S = line / all-core bandwidth (line / the bandwidth curve at p where the machine has one: the controller
    serves p cores at the rate they were measured to draw together). Without contention this returns
    `unloaded_s`; at saturation the total DRAM bytes / that bandwidth (the roofline floor), with queueing
    delay in between.
    """
    lines = dram_bytes_per_core / machine.line_bytes
    if lines <= 0:
        return unloaded_s
    credits = memory_credits(machine)
    measured = curve_value(machine, "bandwidth_gbs", cores)
    service = machine.line_bytes / ((machine.ram.bandwidth_all_cores_gbs if measured is None else measured) * 1e9)
    think = max(0.0, credits * unloaded_s / lines - service)
    throughput, _ = mva([service], think, cores * credits)
    return cores * lines / throughput

