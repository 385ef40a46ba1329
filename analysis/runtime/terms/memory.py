"""T_mem, the paper's Eq. 5-7: the busiest core's accesses priced by the levels that serve them.

Eq. 6 (latencies) and Eq. 7 (reciprocal throughputs) weight each level's cost by the fraction of accesses
it serves. Eq. 5 in units of accesses: a block of b accesses pays one latency and b-1 reciprocal
throughputs, T = n (delta + (b-1) beta) / b. Layouts: "contiguous" (b = block / word), "noncontiguous"
(Sec. 3.4.2's block of C-byte transfers up to a line) and "pipelined" (b unbounded: T = n beta).
RAM's latency is the busiest core's DRAM latency: ram.latency_ns on one socket, else the mix of local and
remote lines its socket sees (terms/numa.py: dram_latency_ns).
Machine fields: caches[].latency_cycles, caches[].recip_throughput_cycles, ram.latency_ns,
ram.remote_latency_ns, ram.bandwidth_one_core_gbs, frequency_ghz, line_bytes, bus_width_bytes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from analysis.runtime.inputs import HitRates, served_fractions
from common.errors import InputError
from machines.model import Machine


@dataclass(frozen=True)
class MemoryTime:
    """Eq. 5-7 for the busiest core: the average costs, the blocks in accesses, cycles per layout."""

    delta_avg: float            # Eq. 6, cycles
    beta_avg: float             # Eq. 7, cycles
    block_contiguous: float     # accesses per block, Sec. 3.4.1
    block_noncontiguous: float  # accesses per block, Sec. 3.4.2
    cycles: Mapping[str, float]  # layout -> T_mem in cycles


def average_cost(local: Sequence[float], level_costs: Sequence[float], ram_cost: float) -> float:
    """Eq. 6 (latencies) and Eq. 7 (reciprocal throughputs): cost weighted by who serves the access."""
    return sum(f * c for f, c in zip(served_fractions(local), list(level_costs) + [ram_cost]))


def ram_costs_cycles(machine: Machine, latency_ns: float | None = None) -> tuple[float, float]:
    """RAM latency (`latency_ns`, default the local ram.latency_ns) and reciprocal throughput (one line at one-core
    bandwidth) in core cycles."""
    latency = (machine.ram.latency_ns if latency_ns is None else latency_ns) * machine.frequency_ghz
    bytes_per_cycle = machine.ram.bandwidth_one_core_gbs / machine.frequency_ghz
    return latency, machine.line_bytes / bytes_per_cycle


def memory_time_cycles(delta: float, beta: float, block: float, n_accesses: float) -> float:
    """Eq. 5: a block of `block` accesses pays one latency and block-1 throughputs."""
    if block < 1:
        raise InputError(f"block size {block} accesses is below 1; give a block of at least one access")
    return (delta + (block - 1.0) * beta) / block * n_accesses


def effective_block_bytes(block_bytes: float, transfer_bytes: float, limit_bytes: float) -> float:
    """Sec. 3.4.2: a block moves in units of C (the bus width) and never beyond S (a cache line)."""
    if block_bytes <= transfer_bytes:
        return float(transfer_bytes)
    if block_bytes >= limit_bytes:
        return float(limit_bytes)
    return math.ceil(block_bytes / transfer_bytes) * float(transfer_bytes)


def memory_time(machine: Machine, rates: HitRates, per_core_accesses: float, word_bytes: float,
                block_bytes: float | None, gap_bytes: float, ram_latency_ns: float | None = None) -> MemoryTime:
    """T_mem of every layout for the busiest core's accesses (`block_bytes` None: one word per block;
    `ram_latency_ns` the DRAM latency it pays, default the local one)."""
    ram_latency, ram_recip = ram_costs_cycles(machine, ram_latency_ns)
    delta = average_cost(rates.local, [c.latency_cycles for c in machine.caches], ram_latency)
    beta = average_cost(rates.local, [c.recip_throughput_cycles for c in machine.caches], ram_recip)
    contiguous = (block_bytes or word_bytes) / word_bytes
    noncontiguous = effective_block_bytes((block_bytes or word_bytes) + gap_bytes, machine.bus_width_bytes,
                                          machine.line_bytes) / word_bytes
    cycles = {"contiguous": memory_time_cycles(delta, beta, max(1.0, contiguous), per_core_accesses),
              "noncontiguous": memory_time_cycles(delta, beta, max(1.0, noncontiguous), per_core_accesses),
              "pipelined": beta * per_core_accesses}
    return MemoryTime(delta, beta, contiguous, noncontiguous, cycles)
