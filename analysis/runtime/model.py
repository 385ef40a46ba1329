"""Runtime model T = T_mem + T_CPU of PPT-Multicore (Sec. 3.4, Eq. 4-7), with the added terms and DRAM contention.

This module gathers a region's facts (facts.py), evaluates every term for the busiest core (terms/*), sums
them and applies contention (prediction.assemble). The formulas, their units, the machine fields each term
reads and where this departs from the paper are in analysis/RUNTIME_MODEL.md.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from analysis.runtime.choices import CONTENTIONS, CPU_FORMS, LAYOUTS, ModelChoice
from analysis.runtime.facts import (RegionFacts, RegionRecord, in_core_bounds, local_rates_by_cores, region_facts,
                                     region_inputs)
from analysis.runtime.inputs import BlockWork, HitRates, OpCounts
from analysis.runtime.prediction import AddedCycles, RuntimePrediction, TermValues, assemble
from analysis.runtime.schedule import busiest_share
from analysis.runtime.terms.coherence import coherence_cycles
from analysis.runtime.terms.column_walks import strided_cycles
from analysis.runtime.terms.contention import dram_traffic_bytes
from analysis.runtime.terms.cpu import at_cores, cpu_time
from analysis.runtime.terms.memory import memory_time
from analysis.runtime.terms.numa import dram_latency_ns
from analysis.runtime.terms.overhead import overhead_seconds
from analysis.runtime.terms.translation import tlb_cycles
from common.errors import InputError
from machines.model import Machine

# The model's entry points, and the names callers have always imported from here.
__all__ = ["CONTENTIONS", "CPU_FORMS", "LAYOUTS", "OpCounts", "RegionFacts", "RegionRecord", "RuntimePrediction",
           "in_core_bounds", "local_rates_by_cores", "predict_many", "predict_runtime", "predict_runtimes",
           "prediction_table", "region_facts", "region_inputs"]


def _check_args(machine: Machine, cores: int, choice: ModelChoice, mem_accesses: float, mem_bytes: float) -> None:
    """Reject arguments the formulas cannot take, naming the argument."""
    if not isinstance(cores, int) or cores < 1:
        raise InputError(f"cores {cores!r}: must be a positive integer")
    choice.check()
    if mem_accesses < 0 or mem_bytes < 0:
        raise InputError("memory accesses and bytes must not be negative")
    if cores > machine.cores:
        raise InputError(f"cores {cores}: machine {machine.name} has only {machine.cores} cores")


def predict_runtime(machine: Machine, cores: int, local_hit_rates: Mapping[str, float], ops: OpCounts,
                    mem_accesses: float, mem_bytes: float, dram_bytes: float | None = None, *,
                    block_bytes: float | None = None, gap_bytes: float = 0.0, layout: str = "contiguous",
                    cpu_form: str = "throughput", work_share: float | None = None, regions: float = 0.0,
                    barriers: float = 0.0, loops: float = 0.0, contention: str = "roofline",
                    blocks: Sequence[BlockWork] = (),
                    tlb_miss_rates: Mapping[str, float] | None = None,
                    coherence_miss_rate: float = 0.0, upgrades: float = 0.0, loop_bounds: Sequence[Any] = (),
                    strided_extra_ns: float = 0.0, tlb_update_misses: float = 0.0, placement: str = "close",
                    numa_pages: str = "master", writeback_bytes_per_access: float | None = None) -> RuntimePrediction:
    """Predict the region's runtime on `cores` cores (Eq. 4-7, the added terms, contention, the overhead).

    `ops`, `mem_accesses`, `mem_bytes` and `dram_bytes` count the whole region (all cores).
    `block_bytes` is the contiguous block (default: the mean access size, the paper's word);
    `gap_bytes` the gap v of Sec. 3.4.2; `work_share` the busiest core's fraction (default 1/cores);
    `regions`, `barriers` and `loops` the parallel regions, barriers and work-shared loop instances executed
    (for the overhead term);
    `contention` the DRAM model: "roofline" floor or "queuing" network; `blocks` the executed
    blocks (whole-region counts) for cpu_form="critical-path" (without them it is the throughput form);
    `tlb_miss_rates` the fraction of accesses missing each of the machine's TLB levels (analysis/runtime/tlb.py);
    `coherence_miss_rate` the fraction of accesses that are coherence misses (hitrates.coherence_miss_rates);
    `upgrades` the busiest core's stores to lines another core holds too (hitrates.busiest_upgrades);
    `loop_bounds` llvm-mca's in-core bounds of innermost loops (analysis/runtime/incore.py; critical-path form only);
    `strided_extra_ns` what the region's column walks' cold lines cost beyond a stream's (all cores,
    analysis/runtime/cold_lines.py); each core's walk waits on its own misses, so the busiest core pays its share;
    `tlb_update_misses` the region's in-place updates whose page missed the first TLB level (tlb.update_misses),
    charged that level's rmw_miss_cycles beyond the miss_cycles their load already pays;
    `placement` (close or spread) puts the threads on cores and `numa_pages` (master, interleave or local) homes
    their pages on sockets: they set the DRAM latency and the controllers' bandwidth (terms/numa.py).
    """
    choice = ModelChoice(layout, cpu_form, contention, placement, numa_pages)
    _check_args(machine, cores, choice, mem_accesses, mem_bytes)
    share = 1.0 / cores if work_share is None else float(work_share)
    if not 0.0 < share <= 1.0:
        raise InputError(f"work share {share}: must be in (0, 1]")
    rates = HitRates.from_local(local_hit_rates, [c.name for c in machine.caches])
    per_core = mem_accesses * share
    word = mem_bytes / mem_accesses if mem_accesses else 8.0
    memory = memory_time(machine, rates, per_core, word, block_bytes, gap_bytes,
                         dram_latency_ns(machine, cores, placement, numa_pages))
    l1_issue = per_core * rates.served()[0] * machine.caches[0].recip_throughput_cycles
    cpu = at_cores(cpu_time(machine, ops, share, blocks, loop_bounds, l1_issue), machine, cores)
    added = AddedCycles(tlb=tlb_cycles(machine, ops.load, share, tlb_miss_rates, tlb_update_misses),
                        coherence=coherence_cycles(machine, per_core, coherence_miss_rate, cores, upgrades),
                        strided=strided_cycles(machine, share, strided_extra_ns))
    writebacks_from = "given" if dram_bytes is not None else (
        "store fraction" if writeback_bytes_per_access is None else "write-back profiles")
    if dram_bytes is None:
        dram_bytes = dram_traffic_bytes(mem_accesses, rates.local, machine.line_bytes, ops.store_fraction,
                                        writeback_bytes_per_access)
    terms = TermValues(memory, cpu, added, dram_bytes, overhead_seconds(machine, cores, regions, barriers, loops),
                       writebacks_from)
    return assemble(machine, cores, share, rates, terms, choice)


def predict_many(machine: Machine, cores: Sequence[int], rates: Mapping[int, Mapping[str, float]],
                 facts: RegionFacts, tlb_rates: Mapping[int, Mapping[str, float]] | None = None,
                 coherence: Mapping[int, float] | None = None, writebacks: Mapping[int, float] | None = None,
                 critical_path: Mapping[int, int] | None = None, upgrades: Mapping[int, int] | None = None,
                 **model_args: Any) -> list[RuntimePrediction]:
    """One prediction per core count; the busiest core's share is the profiles' critical path where they have
    one (work_share), else it follows the loops' schedules (schedule.busiest_share); `upgrades` (cores -> the
    busiest core's upgrades, hitrates.busiest_upgrades) defaults to none.
    `tlb_rates` (cores -> TLB level -> miss rate), when given, must cover every core count;
    `coherence` (cores -> coherence-miss fraction) defaults to none; `writebacks` (cores -> DRAM write-back
    bytes per access, analysis/hitrates/dram.py) to the store-fraction estimate."""
    out = []
    for c in cores:
        if c not in rates:
            raise InputError(f"hit rates: none for {c} cores; recompute them for cores {','.join(map(str, cores))}")
        if tlb_rates is not None and c not in tlb_rates:
            raise InputError(f"TLB miss rates: none for {c} cores; recompute them for cores "
                             f"{','.join(map(str, cores))}")
        out.append(predict_runtime(machine, c, rates[c], facts.ops, facts.mem_accesses, facts.mem_bytes,
                                   work_share=work_share(facts, c, critical_path), regions=facts.regions,
                                   barriers=facts.barriers, loops=facts.work_shared_loops, blocks=facts.blocks,
                                   tlb_miss_rates=tlb_rates[c] if tlb_rates is not None else None,
                                   coherence_miss_rate=(coherence or {}).get(c, 0.0),
                                   upgrades=(upgrades or {}).get(c, 0),
                                   writeback_bytes_per_access=(writebacks or {}).get(c), **model_args))
    return out


def work_share(facts: RegionFacts, cores: int, critical_path: Mapping[int, int] | None = None) -> float:
    """The busiest core's fraction of the region's accesses: the critical path's references (the busiest core
    of each phase between barriers; analysis/profiles/barriers.py) over the sequential trace's, where the
    profiles measured it, else the loops' schedules' estimate (iterations, busiest_share)."""
    measured = (critical_path or {}).get(cores)
    if measured is None or facts.mem_accesses <= 0:
        return busiest_share(list(facts.loops), cores)
    return min(1.0, max(measured / facts.mem_accesses, 1.0 / cores))


def predict_runtimes(machine: Machine, hits, record: RegionRecord, tlb=None,
                     coherence: Mapping[int, float] | None = None, terms=None,
                     writebacks: Mapping[int, float] | None = None,
                     critical_path: Mapping[int, int] | None = None, upgrades: Mapping[int, int] | None = None,
                     **model_args: Any) -> list[RuntimePrediction]:
    """One RuntimePrediction for every core count in `hits` up to the machine's cores.

    Core counts above `machine.cores` are left out (a multi-machine run asks for 16 cores on an
    8-core part); `predict_runtime` itself refuses them. `record`: the region's facts read once
    (facts.RegionRecord); `tlb`: a TLB miss-rate table (analysis/runtime/tlb.py) or None for no TLB
    term; `coherence`: cores -> coherence-miss fraction (hitrates.coherence_miss_rates) or None;
    `terms`: the machine's TraceTerms (analysis/runtime/trace_terms.py) or None for none of their terms;
    `writebacks`: cores -> DRAM write-back bytes per access (analysis/hitrates/dram.py) or None;
    `critical_path`: cores -> references on the critical path (ProfileSet.critical_path) or None;
    `upgrades`: cores -> the busiest core's upgrades (hitrates.busiest_upgrades) or None.
    """
    from analysis.runtime.tlb import miss_rates_by_cores

    rates = local_rates_by_cores(hits)
    cores = [c for c in sorted(rates) if c <= machine.cores]
    tlb_rates = miss_rates_by_cores(tlb) if tlb is not None and machine.tlbs else None
    facts, term_args = region_inputs(machine, record, terms)
    bounds = in_core_bounds(machine, record) if model_args.get("cpu_form") == "critical-path" else ()
    return predict_many(machine, cores, rates, facts, tlb_rates, coherence, writebacks, critical_path, upgrades,
                        loop_bounds=bounds, **term_args, **model_args)


def prediction_table(predictions: Sequence[RuntimePrediction]):
    """The predictions as a DataFrame, one row per core count (RuntimePrediction.as_row)."""
    import pandas as pd

    return pd.DataFrame([p.as_row() for p in predictions])
