"""Loop-carried dependence chains of single-block loops: the latency floor of their iterations.

An out-of-order core overlaps independent work, so a loop body normally runs at the throughput
of its operations. When an iteration needs the previous iteration's result (a reduction
`s += a[i] * b[i]` that -O2 may not reorder, or `x[j] = f(x[j-1])` through memory), the
operations on that chain run one after another, and the iteration cannot be faster than the
sum of their latencies. clang-19 -O2 does not reassociate floating-point reductions, so this
is common in the PolyBench kernels (atax, bicg, mvt, adi).

For a block that branches to itself we find, for every value carried around the back edge
(a phi's incoming value from the block itself, or a value stored to a loop-invariant address
and loaded again from it), the longest path of dependent operations from the carried value to
its next value, and report its operations by class. The machine's latencies are applied later
by the runtime model (analysis/runtime/model.py); here a nominal table only picks the longest
of several chains. Chains that span several blocks (loops with internal control flow) are not
found; those loops are then modelled at throughput, as before.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Nominal latencies (cycles) to rank chains; the reported chain is machine-independent counts.
NOMINAL_LATENCY = {"int_add": 1, "int_mul": 3, "int_div": 20, "fp_add": 3, "fp_mul": 4, "fp_div": 13,
                   "fp_fma": 4, "load": 5}
_CLASS_OF = {"add": "int_add", "sub": "int_add", "mul": "int_mul", "sdiv": "int_div", "udiv": "int_div",
             "srem": "int_div", "urem": "int_div", "fadd": "fp_add", "fsub": "fp_add", "fmul": "fp_mul",
             "fdiv": "fp_div", "frem": "fp_div", "load": "load"}
FMA_RE = re.compile(r"@llvm\.(fma|fmuladd)\.")  # also the pass's op counter's
_VALUE_RE = re.compile(r'%(?:"(?:[^"\\]|\\.)*"|[-\w.$]+)')
_INCOMING_RE = re.compile(r'\[\s*([^\[\],]+?)\s*,\s*(%(?:"(?:[^"\\]|\\.)*"|[-\w.$]+))\s*\]')
_DEF_RE = re.compile(r'^\s*(%(?:"(?:[^"\\]|\\.)*"|[-\w.$]+))\s*=')


@dataclass(frozen=True)
class Inst:
    """What the chain search needs of one instruction: its result, opcode and text."""

    name: str | None
    opcode: str
    text: str


def parse_inst(opcode: str, text: str) -> Inst:
    """An Inst from an instruction's opcode and one-line text."""
    m = _DEF_RE.match(text)
    return Inst(m.group(1) if m else None, opcode, text)


def latency_classes(inst: Inst, via: str, fused: bool) -> tuple[str, ...]:
    """Operation classes whose latencies an instruction adds to a chain reaching it through operand
    `via` (none for free ones such as casts). Without FMA hardware llvm.fmuladd(a, b, c) is a
    multiply then an add, so a chain through the addend c pays only the add."""
    if inst.opcode == "call":
        if not FMA_RE.search(inst.text):
            return ()
        if fused or "@llvm.fma." in inst.text:
            return ("fp_fma",)
        args = operands(inst)
        return ("fp_add",) if len(args) >= 3 and args[-1] == via and via not in args[:-1] else ("fp_mul", "fp_add")
    cls = _CLASS_OF.get(inst.opcode)
    return (cls,) if cls else ()


def operands(inst: Inst) -> list[str]:
    """SSA values an instruction reads (labels and its own result excluded)."""
    body = inst.text.split("=", 1)[1] if inst.name else inst.text
    return _VALUE_RE.findall(body.replace("label %", "label "))


def loop_carried_chain(label: str, insts: list[Inst], fused: bool = True) -> dict[str, int]:
    """Operation classes of the longest loop-carried chain of a self-looping block ({} if none)."""
    self_ref = "%" + label
    term = insts[-1] if insts else None
    if term is None or term.opcode not in ("br", "switch") or self_ref not in _VALUE_RE.findall(term.text):
        return {}
    best: tuple[int, dict[str, int]] = (0, {})
    for start, end, extra in _carried_pairs(self_ref, insts):
        found = _longest_path(start, end, insts, fused)
        if found is None:
            continue
        cost, counts = found
        if extra:
            counts = {**counts, extra: counts.get(extra, 0) + 1}
            cost += NOMINAL_LATENCY[extra]
        if cost > best[0]:
            best = (cost, counts)
    return best[1]


def _carried_pairs(self_ref: str, insts: list[Inst]) -> list[tuple[str, str, str | None]]:
    """(start value, value it becomes next iteration, extra class paid between them)."""
    pairs = []
    for inst in insts:
        if inst.opcode != "phi" or inst.name is None:
            continue
        for value, block in _INCOMING_RE.findall(inst.text):
            if block == self_ref and value.startswith("%"):
                pairs.append((inst.name, value, None))
    local = {i.name for i in insts if i.name}
    loads = {}
    for inst in insts:
        ops = operands(inst)
        if inst.opcode == "load" and ops and ops[-1] not in local and inst.name:
            loads.setdefault(ops[-1], inst.name)
        elif inst.opcode == "store" and len(ops) >= 2 and ops[-1] in loads and ops[0].startswith("%"):
            # stored to an address this block loaded first: the next iteration's load sees it
            pairs.append((loads[ops[-1]], ops[0], "load"))
    return pairs


def _longest_path(start: str, end: str, insts: list[Inst], fused: bool) -> tuple[int, dict[str, int]] | None:
    """Longest nominal-latency path of dependent instructions from `start` to `end` within the block."""
    reach: dict[str, tuple[int, dict[str, int]]] = {start: (0, {})}
    for inst in insts:
        if inst.name is None or inst.opcode == "phi" or inst.name == start:
            continue
        paths = [_extend(reach[v], latency_classes(inst, v, fused)) for v in operands(inst) if v in reach]
        if paths:
            reach[inst.name] = max(paths, key=lambda p: p[0])
    return reach.get(end)


def _extend(path: tuple[int, dict[str, int]], classes: tuple[str, ...]) -> tuple[int, dict[str, int]]:
    """A path one instruction longer."""
    cost, counts = path
    counts = dict(counts)
    for cls in classes:
        counts[cls] = counts.get(cls, 0) + 1
        cost += NOMINAL_LATENCY[cls]
    return cost, counts
