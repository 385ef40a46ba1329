"""DRAM contention (not in the paper): the cores share the memory controllers' bandwidth, counted per socket.

    D = last-level misses x line + write-backs                   (write-allocate: a store's miss fetches too)
        write-backs = accesses x the write-back bytes per access the write-back profiles predict
                      (analysis/hitrates/dram.py, MAPredict), else misses x line x store fraction
    T_DRAM = D / B(p),   B(p) = the bandwidth p threads draw from the controllers their pages live on
                         (terms/numa.py; one socket: curves.bandwidth_gbs at p, else min(p x one-core, all-core))
    roofline:  T = max(T_unloaded, T_DRAM)
    queuing:   T = p m / X(p k), X from exact mean value analysis of a closed network (after Yook and Egger),
               one queueing centre per memory controller the threads' pages live on (master: one)

T_unloaded = T_mem + T_CPU + T_TLB + T_coh + T_strided of the busiest core; the excess T - T_unloaded is
the contention term. Machine fields: ram.bandwidth_one_core_gbs, ram.bandwidth_all_cores_gbs,
ram.bandwidth_socket_gbs, ram.latency_ns, sockets, line_bytes, curves.bandwidth_gbs (optional).
"""
from __future__ import annotations

from typing import Sequence

from analysis.hitrates.dram import dram_read_bytes
from analysis.runtime.inputs import served_fractions
from analysis.runtime.terms.core_curves import curve_value
from analysis.runtime.terms.numa import controller_demand, numa_bandwidth_gbs
from machines.model import Machine


def dram_bandwidth_gbs(machine: Machine, cores: int, placement: str = "close", numa_pages: str = "master") -> float:
    """Bandwidth `cores` threads can draw from the memory controllers their pages live on (terms/numa.py): on one
    socket the measured curve at p, else each adds one core's worth until the machine saturates."""
    return numa_bandwidth_gbs(machine, cores, placement, numa_pages)


def dram_traffic_bytes(mem_accesses: float, local: Sequence[float], line_bytes: int, store_fraction: float,
                       writeback_bytes_per_access: float | None = None) -> float:
    """Last-level misses fetch a line each (stores too: write-allocate), plus the dirty lines written back:
    the write-back profiles' bytes per access where the run computed them (one line per dirty eviction,
    whatever the store mix), else the stored share of the fetched lines."""
    reads = dram_read_bytes(mem_accesses, served_fractions(local)[-1], line_bytes)
    if writeback_bytes_per_access is None:
        return reads * (1.0 + store_fraction)
    return reads + mem_accesses * writeback_bytes_per_access


def dram_floor_seconds(machine: Machine, cores: int, dram_bytes: float, placement: str = "close",
                       numa_pages: str = "master") -> float:
    """T_DRAM: the region's DRAM bytes at the bandwidth `cores` threads can draw (the roofline floor)."""
    return dram_bytes / (dram_bandwidth_gbs(machine, cores, placement, numa_pages) * 1e9)


def loaded_seconds(machine: Machine, cores: int, unloaded_s: float, dram_bytes: float, share: float,
                   contention: str, placement: str = "close", numa_pages: str = "master") -> float:
    """The busiest core's time with DRAM contention applied: the roofline floor or the queuing network."""
    if contention == "queuing":
        return queuing_seconds(machine, cores, unloaded_s, dram_bytes * share, placement, numa_pages)
    return max(unloaded_s, dram_floor_seconds(machine, cores, dram_bytes, placement, numa_pages))


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


def controller_capacity_gbs(machine: Machine, demand: float) -> float:
    """The rate one memory controller serves at in the queuing network: the bandwidth curve at its `demand`
    threads' worth (at most one socket's cores) where the machine has one (the controller serves them at the
    rate they were measured to draw together), else one socket's bandwidth (on one socket the all-core figure)."""
    measured = curve_value(machine, "bandwidth_gbs", min(demand, machine.cores_per_socket))
    return machine.socket_bandwidth_gbs if measured is None else measured


def queue_groups(machine: Machine, cores: int, placement: str, numa_pages: str) -> list[tuple[int, list[float]]]:
    """The independent groups of identical threads and the service demand, in seconds per DRAM line, each puts on
    every controller it visits: master one group at controller 0; interleave one group visiting every controller
    with 1/S of its lines; local one group per socket, each at its own controller."""
    demand = controller_demand(machine, cores, placement, numa_pages)
    service = {s: machine.line_bytes / (controller_capacity_gbs(machine, q) * 1e9) for s, q in demand.items()}
    if numa_pages == "local":
        return [(round(q), [service[s]]) for s, q in demand.items()]
    return [(cores, [d / len(service) for d in service.values()])]


def queuing_seconds(machine: Machine, cores: int, unloaded_s: float, dram_bytes_per_core: float,
                    placement: str = "close", numa_pages: str = "master") -> float:
    """Runtime of `cores` identical cores sharing the memory controllers, as a closed queuing network.

    Each core keeps k = memory_credits requests in flight (customers); a customer thinks for the
    core's unloaded time per DRAM line (k x unloaded / m - sum of its service demands) and is then served by
    the controllers its lines live on (queue_groups; one socket: one controller, S = line / all-core bandwidth,
    or line / the bandwidth curve at p). Threads whose pages are on their own socket form one network per socket;
    the region takes the slowest. Without contention this returns `unloaded_s`; at saturation the total DRAM
    bytes / the controllers' bandwidth (the roofline floor), with queueing delay in between.
    """
    lines = dram_bytes_per_core / machine.line_bytes
    if lines <= 0:
        return unloaded_s
    credits = memory_credits(machine)
    slowest = 0.0
    for threads, demands in queue_groups(machine, cores, placement, numa_pages):
        think = max(0.0, credits * unloaded_s / lines - sum(demands))
        throughput, _ = mva(demands, think, threads * credits)
        slowest = max(slowest, threads * lines / throughput)
    return slowest

