"""One core count's prediction: the terms in seconds, how the model combines them, and what binds.

    T_unloaded = T_mem + T_CPU + T_TLB + T_coh + T_strided
    T_pred     = contention(T_unloaded, T_DRAM) + T_ovh

`assemble` converts the busiest core's term cycles (terms/*) to seconds and applies that combination.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from analysis.runtime.choices import ModelChoice
from analysis.runtime.inputs import HitRates
from analysis.runtime.terms.contention import dram_bandwidth_gbs, dram_floor_seconds, loaded_seconds
from analysis.runtime.terms.core_curves import scaling_forms
from analysis.runtime.terms.cpu import CpuTime
from analysis.runtime.terms.memory import MemoryTime
from analysis.runtime.terms.numa import dram_latency_ns
from machines.model import Machine


@dataclass(frozen=True)
class RuntimePrediction:
    """One core count's prediction; times in seconds, for the busiest core."""

    cores: int
    work_share: float                # fraction of the region's work on the busiest core
    local_hit_rates: dict[str, float]
    cumulative_hit_rates: dict[str, float]
    delta_avg_cycles: float          # Eq. 6
    beta_avg_cycles: float           # Eq. 7
    block_accesses_contiguous: float
    block_accesses_noncontiguous: float
    t_mem_contiguous_s: float        # Eq. 5
    t_mem_noncontiguous_s: float     # Eq. 5 with Sec. 3.4.2's block size
    t_mem_pipelined_s: float         # Eq. 5 as the block grows without bound: n * beta_avg
    t_cpu_throughput_s: float
    t_cpu_latency_s: float
    t_cpu_critical_path_s: float     # per block max(chain, FP, integer, load/store), less T_mem's L1 part
    layout: str
    cpu_form: str
    t_mem_s: float
    t_cpu_s: float
    dram_bytes: float                # whole region, all cores
    dram_bandwidth_gbs: float        # what p threads draw from their pages' controllers (terms/numa.py)
    t_dram_s: float                  # DRAM bytes / bandwidth: the contention floor
    contention_s: float              # max(0, contended time - unloaded time)
    t_overhead_s: float              # fork/join and barriers (0 on one core or without [parallel])
    t_tlb_s: float                   # data TLB misses x their cost (0 without [[tlbs]] or miss rates)
    t_coherence_s: float             # coherence misses x what a transfer costs beyond the level charged
    runtime_s: float                 # Eq. 4 plus the added terms, with contention, plus the overhead
    uncosted_calls: float = 0.0      # library calls executed (whole region) that the machine file does not price
    t_incore_s: float = 0.0          # part of t_cpu_s: llvm-mca's loop bodies beyond the per-block model
    t_strided_s: float = 0.0         # column walks' cold lines beyond a stream's cost (terms/column_walks.py)
    t_fill_overlap_s: float = 0.0    # taken off t_cpu_s: streamed L2 fills hidden under core time (fill_overlap.py)
    # which terms read the machine's curves over active cores and which their fixed forms: "fallback" (no curves),
    # else "curves (DRAM bandwidth, ...)" and "; fallback (...)" for the rest (terms/core_curves.py)
    core_scaling: str = "fallback"
    placement: str = "close"         # threads on cores (OpenMP proc_bind close or spread)
    numa_pages: str = "master"       # where the data's pages live: master, interleave or local (terms/numa.py)
    dram_latency_ns: float = 0.0     # the busiest core's DRAM latency: local, remote or a mix by numa_pages
    # where dram_bytes' write-backs come from: "write-back profiles" (--dram-traffic), "store fraction" or "given"
    dram_writebacks: str = "store fraction"

    def as_row(self) -> dict:
        """Flat dict for a table: hit rates become one column per level."""
        row = {k: v for k, v in asdict(self).items() if not isinstance(v, dict)}
        for name, rate in self.local_hit_rates.items():
            row[f"{name}_local_hit_rate"] = rate
        for name, rate in self.cumulative_hit_rates.items():
            row[f"{name}_cumulative_hit_rate"] = rate
        return row

    @property
    def unloaded_s(self) -> float:
        """The busiest core's time before contention and overhead: the sum of the additive terms."""
        return self.t_mem_s + self.t_cpu_s + self.t_tlb_s + self.t_coherence_s + self.t_strided_s

    def contributions(self) -> dict[str, float]:
        """Seconds of each term as the model adds them up; they sum to runtime_s (up to rounding).

        "cpu" is T_CPU without the in-core bound's part ("in_core"); "contention" is what DRAM
        contention adds on top of the unloaded time; "overhead" is fork/join, barriers and cold start."""
        return {"memory": self.t_mem_s, "cpu": self.t_cpu_s - self.t_incore_s, "in_core": self.t_incore_s,
                "tlb": self.t_tlb_s, "coherence": self.t_coherence_s, "strided": self.t_strided_s,
                "contention": self.contention_s, "overhead": self.t_overhead_s}

    @property
    def bound_by(self) -> str:
        """The term that binds: "contention" when the DRAM floor reaches the unloaded time (the region
        runs at the bandwidth its cores can draw), otherwise the largest of contributions()."""
        if self.t_dram_s > 0 and self.t_dram_s >= self.unloaded_s:
            return "contention"
        parts = self.contributions()
        return max(parts, key=parts.__getitem__)


@dataclass(frozen=True)
class AddedCycles:
    """The busiest core's additive terms beyond T_mem and T_CPU, in cycles."""

    tlb: float = 0.0          # terms/translation.py
    coherence: float = 0.0    # terms/coherence.py
    strided: float = 0.0      # terms/column_walks.py


@dataclass(frozen=True)
class TermValues:
    """Every term of one core count, before the chosen forms are combined."""

    memory: MemoryTime
    cpu: CpuTime
    added: AddedCycles
    dram_bytes: float          # whole region, all cores (terms/contention.py)
    overhead_s: float          # terms/overhead.py
    writebacks_from: str = "store fraction"  # RuntimePrediction.dram_writebacks


def assemble(machine: Machine, cores: int, share: float, rates: HitRates, terms: TermValues,
             choice: ModelChoice) -> RuntimePrediction:
    """Convert cycles to seconds, apply DRAM contention to the chosen forms' sum and add the overhead."""
    sec = machine.cycles_to_seconds
    mem, cpu = terms.memory, terms.cpu
    mem_s, cpu_s = sec(mem.cycles[choice.layout]), sec(cpu.cycles[choice.cpu_form])
    tlb_s, coh_s, strided_s = sec(terms.added.tlb), sec(terms.added.coherence), sec(terms.added.strided)
    unloaded = mem_s + cpu_s + tlb_s + coh_s + strided_s
    where = (choice.placement, choice.numa_pages)
    loaded = loaded_seconds(machine, cores, unloaded, terms.dram_bytes, share, choice.contention, *where)
    critical = choice.cpu_form == "critical-path"
    return RuntimePrediction(
        cores=cores, work_share=share, local_hit_rates=dict(zip(rates.levels, rates.local)),
        cumulative_hit_rates=dict(zip(rates.levels, rates.cumulative())), delta_avg_cycles=mem.delta_avg,
        beta_avg_cycles=mem.beta_avg, block_accesses_contiguous=mem.block_contiguous,
        block_accesses_noncontiguous=mem.block_noncontiguous,
        t_mem_contiguous_s=sec(mem.cycles["contiguous"]), t_mem_noncontiguous_s=sec(mem.cycles["noncontiguous"]),
        t_mem_pipelined_s=sec(mem.cycles["pipelined"]), t_cpu_throughput_s=sec(cpu.cycles["throughput"]),
        t_cpu_latency_s=sec(cpu.cycles["latency"]), t_cpu_critical_path_s=sec(cpu.cycles["critical-path"]),
        layout=choice.layout, cpu_form=choice.cpu_form, t_mem_s=mem_s, t_cpu_s=cpu_s, dram_bytes=terms.dram_bytes,
        dram_bandwidth_gbs=dram_bandwidth_gbs(machine, cores, *where),
        t_dram_s=dram_floor_seconds(machine, cores, terms.dram_bytes, *where), contention_s=max(0.0, loaded - unloaded),
        t_overhead_s=terms.overhead_s, t_tlb_s=tlb_s, t_coherence_s=coh_s, runtime_s=loaded + terms.overhead_s,
        uncosted_calls=cpu.uncosted_calls, t_incore_s=sec(cpu.in_core) if critical else 0.0,
        t_strided_s=strided_s, t_fill_overlap_s=sec(cpu.fill_overlap) if critical else 0.0,
        core_scaling=scaling_forms(machine), placement=choice.placement, numa_pages=choice.numa_pages,
        dram_latency_ns=dram_latency_ns(machine, cores, *where), dram_writebacks=terms.writebacks_from)
