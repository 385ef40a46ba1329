"""Core time of one execution of a block on an out-of-order core, its data in L1 (critical-path CPU form).

    core_b = max(chain_b / overlap_b, FP_b, INT_b, PORTS_b) + calls_b

FP_b and INT_b: the block's floating-point and integer operations times their reciprocal throughputs;
PORTS_b: loads x ops.load plus the stores (store_cycles); chain_b: the latencies of the loop-carried
dependence chain, overlapped across consecutive entries (chain_overlap); calls_b: priced library calls.
Machine fields: ops[*].latency, ops[*].recip_throughput, caches[0].latency_cycles (a load on a chain),
store_new_line_cycles, reorder_window_ops, chain_lookahead_ops, calls[*].recip_throughput.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from analysis.runtime.inputs import FP_CLASSES, INT_CLASSES, BlockWork
from common.errors import InputError
from machines.model import Machine


def block_core_cycles(blk: BlockWork, machine: Machine) -> float:
    """Cycles of one execution of a block on an out-of-order core, its data in L1.

    The bound is the slowest of: the loop-carried chain (its latencies in sequence), the
    floating-point pipes, the integer ALUs and the load/store ports (each the sum of its
    classes' reciprocal throughputs). Work on different resources overlaps, as an out-of-order
    core issues independent operations to separate pipes (llvm-mca and OSACA take the same max).
    Loads and stores share one resource (the address-generation units and the L1 they both use on
    Haswell, Broadwell and Zen), each at its own reciprocal throughput: a store costs more than a
    load on every shipped machine (1 against 0.5 cycles) and on the hosts measured (0.5 against 0.33).
    """
    return block_issue_cycles(blk, machine) + library_call_cycles(blk.calls, machine)


def block_issue_cycles(blk: BlockWork, machine: Machine) -> float:
    """block_core_cycles without the library calls: the part llvm-mca's loop bound is compared with."""
    return max(block_resources(blk, machine))


def block_resources(blk: BlockWork, machine: Machine) -> tuple[float, float, float, float]:
    """Cycles of one execution on each resource: the overlapped chain, FP pipes, integer ALUs, load/store ports."""
    mix = blk.mix()
    fp = sum(getattr(mix, c) * machine.ops[c].recip_throughput for c in FP_CLASSES)
    integer = sum(getattr(mix, c) * machine.ops[c].recip_throughput for c in INT_CLASSES)
    ports = mix.load * machine.ops["load"].recip_throughput + store_cycles(mix.store, blk.new_line_stores, machine)
    chain = sum(n * op_latency(machine, cls) for cls, n in blk.chain.items()) / chain_overlap(blk, machine)
    return chain, fp, integer, ports


def store_cycles(stores: float, new_line: float, machine: Machine) -> float:
    """Load/store-port cycles of a block's stores: `ops.store` each, and the machine's new-line cost
    ([core] store_new_line_cycles, measured) for those writing another line than the store before them
    (a core commits two stores in a cycle only to one line: 0.6 against 1.0 cycles per store measured on
    Golden Cove). Without the figure every store costs `ops.store`."""
    same = machine.ops["store"].recip_throughput
    new = machine.store_new_line_cycles or same
    new_line = min(max(new_line, 0.0), stores)
    return (stores - new_line) * same + new_line * new


def chain_overlap(blk: BlockWork, machine: Machine) -> float:
    """How many chain instances run at once: consecutive entries into a loop start independent chains,
    and the core works on the next one with the W operations its window holds past the stalled
    chain. The window must first hold everything executed between two entries: the instance's own
    trip x ops and the rest of the enclosing loop's body (span_ops; e.g. gramschmidt's update loop
    between two reductions), so an instance runs 1 + W / span at a time (window.c measures W with
    nothing in between; machines/SCHEMA.md [core]). A long instance gains less: only the next
    instance's first lookahead operations (less what lies between) run under its tail, so it takes
    trip - those iterations of chain time (window.c's long instances)."""
    ops = blk.op_total
    if machine.reorder_window_ops <= 0 or blk.trip <= 0 or ops <= 0:
        return 1.0
    short = 1.0 + machine.reorder_window_ops / max(blk.trip * ops, blk.span_ops)
    if machine.chain_lookahead_ops <= 0:
        return short
    between = max(0.0, blk.span_ops - blk.trip * ops)
    ahead = max(0.0, machine.chain_lookahead_ops - between) / ops  # next instance's iterations under the tail
    if ahead >= blk.trip:
        return short
    return min(short, blk.trip / (blk.trip - ahead))


def op_latency(machine: Machine, cls: str) -> float:
    """Latency of one chain operation class; a load on the chain is store-to-load forwarding (~ an L1 hit)."""
    if cls in machine.ops:
        return machine.ops[cls].latency
    if cls == "load":
        return machine.caches[0].latency_cycles
    raise InputError(f"machine {machine.name}: no latency for operation class {cls!r} on a dependence "
                     f"chain; add [ops.{cls}] to the machine file")


def library_call_cycles(calls: Mapping[str, int], machine: Machine) -> float:
    """Calls to functions the machine file prices ([calls]), at their reciprocal throughput; a call
    runs its own instructions on the same pipes, so it adds to the block rather than overlapping."""
    return sum(n * machine.calls[name].recip_throughput for name, n in calls.items() if name in machine.calls)


def uncosted_calls(blocks: Sequence[BlockWork], machine: Machine) -> float:
    """Executed calls of functions the machine file does not price (their time is missing)."""
    return sum(b.count * n for b in blocks for name, n in b.calls.items() if name not in machine.calls)
