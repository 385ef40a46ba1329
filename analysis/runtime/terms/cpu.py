"""T_CPU, the busiest core's time in its operations, in three forms.

* throughput (the paper's): sum over classes c of d_c + (N_c - 1) b_c, N_c = s x count_c;
* latency (the paper's, every operation charged): sum_c N_c d_c;
* critical-path (not in the paper): per executed block core_b (block_core.py), plus the in-core bound
  (loop_bound.py), less the L1 issue T_mem already charges and the streamed fills hidden under core time
  (fill_overlap.py):  T_CPU = max(0, sum_b s N_b core_b + T_incore - L1 hits x L1 recip. throughput - fills).
  Without the executed blocks it falls back to the throughput form.
While p cores run, one core's work on issue ports (FP pipes, integer ALUs, load/store ports, library calls,
llvm-mca's bound, the throughput form) is divided by curves.op_throughput_scale at p, and its dependence
chains (and the latency form) by curves.clock_scale at p (core_scales). A slower clock slows both; issue
ports shared with a sibling thread (vCPUs that are SMT siblings) slow only the first, as a dependent chain
issues one operation at a time. Without clock_scale both take op_throughput_scale, as if the clock alone
slowed; without either, nothing changes.
Loads and stores are priced by T_mem. Machine fields: ops[class].latency, ops[class].recip_throughput,
caches[0].recip_throughput_cycles (and those of block_core, loop_bound, fill_overlap), curves.op_throughput_scale,
curves.clock_scale.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from analysis.runtime.choices import PAPER_CPU_FORMS
from analysis.runtime.inputs import CPU_CLASSES, BlockWork, OpCounts
from analysis.runtime.terms.block_core import CoreScales, block_core_cycles, uncosted_calls
from analysis.runtime.terms.core_curves import curve_value
from analysis.runtime.terms.fill_overlap import fill_overlap_total
from analysis.runtime.terms.loop_bound import in_core_extra_cycles
from common.errors import InputError
from machines.model import Machine


@dataclass(frozen=True)
class CpuTime:
    """T_CPU of every form for the busiest core, with the critical-path form's parts (cycles)."""

    cycles: Mapping[str, float]  # CPU form -> T_CPU in cycles
    in_core: float               # what llvm-mca's loop bounds add (within the critical-path form)
    fill_overlap: float          # streamed L2 fills taken off the critical-path form
    uncosted_calls: float        # executed library calls the machine file does not price (whole region)


def cpu_time_cycles(ops: OpCounts, machine: Machine, form: str, scales: CoreScales = CoreScales()) -> float:
    """T_CPU per op class: throughput form delta + (N-1)*beta (over the port scale), latency form N*delta
    (over the clock scale)."""
    if form not in PAPER_CPU_FORMS:
        raise InputError(f"cpu form {form!r}: use throughput or latency (critical-path needs the blocks: "
                         "predict_runtime)")
    total = 0.0
    for name in CPU_CLASSES:
        n = getattr(ops, name)
        if n <= 0:
            continue
        cost = machine.ops[name]
        total += cost.latency + (n - 1.0) * cost.recip_throughput if form == "throughput" else n * cost.latency
    return total / (scales.ports if form == "throughput" else scales.clock)


def critical_path_cpu_cycles(blocks: Sequence[BlockWork], machine: Machine, share: float,
                             l1_issue_cycles: float, in_core_extra: float = 0.0) -> float:
    """T_CPU of the critical-path form: the busiest core's block-by-block core time (plus what the
    in-core loop bound adds), less the L1 load/store issue that T_mem already charges (so
    T_mem + T_CPU = core time + transfers beyond L1) and the streamed fills hidden under core time."""
    return _critical_path(blocks, machine, share, l1_issue_cycles, in_core_extra,
                          fill_overlap_total(blocks, machine, share), CoreScales())


def _critical_path(blocks: Sequence[BlockWork], machine: Machine, share: float, l1_issue_cycles: float,
                   in_core_extra: float, fill_overlap: float, scales: CoreScales) -> float:
    """critical_path_cpu_cycles with the hidden fills already summed, while p cores run (`scales`; the in-core
    extra, L1 issue and fills are port work, already divided by the caller)."""
    core = sum(blk.count * share * block_core_cycles(blk, machine, scales) for blk in blocks)
    return max(0.0, core + in_core_extra - l1_issue_cycles - fill_overlap)


def core_scales(machine: Machine, cores: int) -> CoreScales:
    """How one core's ports and clock slow while `cores` cores run, from the machine's curves (module
    docstring); 1 and 1 without them."""
    ports = curve_value(machine, "op_throughput_scale", cores)
    clock = curve_value(machine, "clock_scale", cores)
    if ports is None:
        return CoreScales(clock=1.0 if clock is None else clock)
    return CoreScales(ports=ports, clock=ports if clock is None else clock)


def cpu_time(machine: Machine, ops: OpCounts, share: float, blocks: Sequence[BlockWork],
             loop_bounds: Sequence[Any], l1_issue_cycles: float, scales: CoreScales = CoreScales()) -> CpuTime:
    """Every CPU form for the busiest core (share of the region's `ops` and `blocks`) while the cores that
    `scales` describes run."""
    core_ops = ops.scaled(share)
    cycles = {form: cpu_time_cycles(core_ops, machine, form, scales) for form in PAPER_CPU_FORMS}
    in_core = share * in_core_extra_cycles(blocks, machine, loop_bounds) / scales.ports if blocks else 0.0
    hidden = fill_overlap_total(blocks, machine, share) / scales.ports
    cycles["critical-path"] = (_critical_path(blocks, machine, share, l1_issue_cycles / scales.ports, in_core,
                                              hidden, scales) if blocks else cycles["throughput"])
    return CpuTime(cycles, in_core, hidden, uncosted_calls(blocks, machine))
