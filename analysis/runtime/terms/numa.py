"""Sockets and where the data's pages live (not in the paper): the DRAM latency the busiest core pays and the
bandwidth the sockets' memory controllers serve.

Threads sit on cores by the placement (machines.model.thread_cores: OpenMP proc_bind close or spread), core c
on socket c // (cores / sockets). The page policy (choices.NUMA_PAGES) homes the threads' DRAM lines:

    master      every page on socket 0 (a serial initialisation touched them first, as in PolyBench programs)
    interleave  pages spread evenly over the S sockets (numactl --interleave=all)
    local       each thread's pages on its own socket (each thread first touched its own data)

Latency. A thread on socket s finds f(s) of its lines on its own socket: master 1 on socket 0 and 0 elsewhere,
interleave 1/S, local 1. It pays latency(s) = f(s) x ram.latency_ns + (1 - f(s)) x ram.remote_latency_ns; the
busiest core's time takes the worst socket any thread sits on (`dram_latency_ns`).

Bandwidth. Each thread draws at most one core's bandwidth, spread over the controllers its pages live on, so
controller c carries q_c threads' worth of demand: master q_0 = p; interleave q_c = p / S on every socket;
local q_c = the threads on socket c. It serves them at

    served(q) = curves.bandwidth_gbs(min(q, cores per socket))   where the machine has that curve
              = min(q x one-core bandwidth, bandwidth_socket)     otherwise

Every thread does the same work, so the region waits for the most loaded controller: it moves its share q_c / p
of the traffic at served(q_c), and the bandwidth the p threads draw is B = min over c of served(q_c) x p / q_c
(without the curve also at most the all-core figure). Balanced, that is the sum of the controllers' served
bandwidths. With one socket every policy gives q_0 = p, so B = the curve at p, else min(p x one-core, all-core):
the one-socket model. The curve was measured with threads placed close, each on its own pages (stream.c), so
its points up to the cores of one socket are one controller serving that many cores.
Machine fields: sockets, cores, ram.latency_ns, ram.remote_latency_ns, ram.bandwidth_one_core_gbs,
ram.bandwidth_socket_gbs, ram.bandwidth_all_cores_gbs, curves.bandwidth_gbs.
"""
from __future__ import annotations

from collections import Counter

from analysis.runtime.terms.core_curves import curve_value
from machines.model import Machine, thread_cores


def thread_sockets(machine: Machine, threads: int, placement: str) -> list[int]:
    """The socket each of `threads` threads runs on, threads placed on cores by `placement`."""
    return [machine.socket_of(core) for core in thread_cores(threads, machine.cores, placement)]


def local_fraction(numa_pages: str, socket: int, sockets: int) -> float:
    """The fraction of its DRAM lines a thread on `socket` finds on its own socket's memory."""
    if numa_pages == "master":
        return 1.0 if socket == 0 else 0.0
    if numa_pages == "interleave":
        return 1.0 / sockets
    return 1.0


def dram_latency_ns(machine: Machine, threads: int, placement: str = "close", numa_pages: str = "master") -> float:
    """The DRAM latency of the busiest core: the worst over the sockets the threads sit on, each a mix of local
    and remote lines by the page policy."""
    local, remote = machine.ram.latency_ns, machine.remote_latency_ns
    return max(f * local + (1.0 - f) * remote
               for f in (local_fraction(numa_pages, s, machine.sockets)
                         for s in set(thread_sockets(machine, threads, placement))))


def controller_demand(machine: Machine, threads: int, placement: str = "close",
                      numa_pages: str = "master") -> dict[int, float]:
    """Socket -> the threads' worth of DRAM demand its memory controller carries (sockets without any left out)."""
    if numa_pages == "master":
        return {0: float(threads)}
    if numa_pages == "interleave":
        return {s: threads / machine.sockets for s in range(machine.sockets)}
    return {s: float(n) for s, n in sorted(Counter(thread_sockets(machine, threads, placement)).items())}


def controller_bandwidth_gbs(machine: Machine, demand: float) -> float:
    """What one socket's memory controller serves to `demand` threads' worth of requests: the bandwidth curve
    at that many cores of one socket, else each thread adds one core's worth until the controller saturates."""
    measured = curve_value(machine, "bandwidth_gbs", min(demand, machine.cores_per_socket))
    if measured is not None:
        return measured
    return min(demand * machine.ram.bandwidth_one_core_gbs, machine.socket_bandwidth_gbs)


def numa_bandwidth_gbs(machine: Machine, threads: int, placement: str = "close", numa_pages: str = "master") -> float:
    """Bandwidth `threads` threads draw together: the most loaded controller's served bandwidth over its share of
    the traffic (without a curve at most the all-core figure)."""
    demand = controller_demand(machine, threads, placement, numa_pages)
    bandwidth = min(controller_bandwidth_gbs(machine, q) / (q / threads) for q in demand.values())
    if machine.curves is None or not machine.curves.has("bandwidth_gbs"):
        bandwidth = min(bandwidth, machine.ram.bandwidth_all_cores_gbs)
    return bandwidth
