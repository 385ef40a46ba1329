"""T_CPU, the busiest core's time in its operations, in three forms.

* throughput (the paper's): sum over classes c of d_c + (N_c - 1) b_c, N_c = s x count_c;
* latency (the paper's, every operation charged): sum_c N_c d_c;
* critical-path (not in the paper): per executed block core_b (block_core.py), plus the in-core bound
  (loop_bound.py), less the L1 issue T_mem already charges and the streamed fills hidden under core time
  (fill_overlap.py):  T_CPU = max(0, sum_b s N_b core_b + T_incore - L1 hits x L1 recip. throughput - fills).
  Without the executed blocks it falls back to the throughput form.
Where the machine has the curve curves.op_throughput_scale, every form is divided by its value at p: one
core's operations run that much slower while p cores run (at_cores).
Loads and stores are priced by T_mem. Machine fields: ops[class].latency, ops[class].recip_throughput,
caches[0].recip_throughput_cycles (and those of block_core, loop_bound, fill_overlap), curves.op_throughput_scale.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from analysis.runtime.choices import PAPER_CPU_FORMS
from analysis.runtime.inputs import CPU_CLASSES, BlockWork, OpCounts
from analysis.runtime.terms.block_core import block_core_cycles, uncosted_calls
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


def cpu_time_cycles(ops: OpCounts, machine: Machine, form: str) -> float:
    """T_CPU per op class: throughput form delta + (N-1)*beta, latency form N*delta."""
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
    return total


def critical_path_cpu_cycles(blocks: Sequence[BlockWork], machine: Machine, share: float,
                             l1_issue_cycles: float, in_core_extra: float = 0.0) -> float:
    """T_CPU of the critical-path form: the busiest core's block-by-block core time (plus what the
    in-core loop bound adds), less the L1 load/store issue that T_mem already charges (so
    T_mem + T_CPU = core time + transfers beyond L1) and the streamed fills hidden under core time."""
    return _critical_path(blocks, machine, share, l1_issue_cycles, in_core_extra,
                          fill_overlap_total(blocks, machine, share))


def _critical_path(blocks: Sequence[BlockWork], machine: Machine, share: float, l1_issue_cycles: float,
                   in_core_extra: float, fill_overlap: float) -> float:
    """critical_path_cpu_cycles with the hidden fills already summed."""
    core = sum(blk.count * share * block_core_cycles(blk, machine) for blk in blocks)
    return max(0.0, core + in_core_extra - l1_issue_cycles - fill_overlap)


def cpu_time(machine: Machine, ops: OpCounts, share: float, blocks: Sequence[BlockWork],
             loop_bounds: Sequence[Any], l1_issue_cycles: float) -> CpuTime:
    """Every CPU form for the busiest core (share of the region's `ops` and `blocks`)."""
    core_ops = ops.scaled(share)
    cycles = {form: cpu_time_cycles(core_ops, machine, form) for form in PAPER_CPU_FORMS}
    in_core = share * in_core_extra_cycles(blocks, machine, loop_bounds) if blocks else 0.0
    hidden = fill_overlap_total(blocks, machine, share)
    cycles["critical-path"] = (_critical_path(blocks, machine, share, l1_issue_cycles, in_core, hidden) if blocks
                               else cycles["throughput"])
    return CpuTime(cycles, in_core, hidden, uncosted_calls(blocks, machine))


def at_cores(cpu: CpuTime, machine: Machine, cores: int) -> CpuTime:
    """`cpu` while `cores` cores run: every form (and the in-core and hidden-fill parts of the critical-path
    form) divided by the machine's op-throughput curve at p; unchanged where the machine has no such curve."""
    scale = curve_value(machine, "op_throughput_scale", cores)
    if scale is None:
        return cpu
    return replace(cpu, cycles={form: c / scale for form, c in cpu.cycles.items()}, in_core=cpu.in_core / scale,
                   fill_overlap=cpu.fill_overlap / scale)
