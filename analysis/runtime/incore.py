"""In-core throughput of the hot innermost loops, from the compiled code by llvm-mca.

The critical-path CPU form (analysis/runtime/terms/block_core.py: block_core_cycles) prices a block from
its IR operation mix.
The machine code can cost more than that mix says: register spills and reloads, address arithmetic,
shuffles and moves on a dependence chain, the front end's dispatch width. Like kerncraft's in-core
model (which runs IACA, OSACA or llvm-mca on the compiled loop), we hand the compiled innermost
loops to llvm-mca with the machine's scheduling model (`[core] llvm_mcpu`) and take its cycles per
iteration as a lower bound on the loop's core time (analysis/RUNTIME_MODEL.md, "In-core bound").

Input: the build's assembly side file (instrument.build, `<binary>.s`): the optimised, uninstrumented
code of the traced functions, as the native build compiles it, with LLVM's comments that name each
machine block's IR block (`# %for.body25`) and its innermost loop (`# in Loop: Header=BB1_19`).
We parse those comments ourselves: no library exposes LLVM's assembly comments.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from common.errors import InputError, ToolError

_FUNC_RE = re.compile(r"^([A-Za-z_.$][\w.$]*):\s*#\s*@")
_LABEL_RE = re.compile(r"^(?:\.L(BB\d+_\d+)|# %(bb\.\d+)):\s*(.*)$")
_IR_NAME_RE = re.compile(r"^#\s*%([-\w.$]+)")
_INNER_HEADER_RE = re.compile(r"=>\s*This Inner Loop Header")
_IN_LOOP_RE = re.compile(r"in Loop: Header=(BB\d+_\d+)")
_REGION_RE = re.compile(r"^\[(\d+)\] Code Region - loop(\d+)")
_MIN_SHARE = 0.5  # a machine block executed in fewer iterations than this is left out of the loop body
_MARKER_CALL = re.compile(r"^call\w*\s+XOMP_trace_")  # the translator's trace markers: not in the native program
# One dependent instruction per operation class, so llvm-mca reports the latency its scheduling model
# assumes; the model corrects a loop's simulated chain by the machine file's measured latencies.
_LATENCY_PROBES = {"fp_add": "addsd %xmm0, %xmm0", "fp_mul": "mulsd %xmm0, %xmm0", "fp_div": "divsd %xmm0, %xmm0",
                   "int_add": "addq %rax, %rax", "int_mul": "imulq %rax, %rax"}


@dataclass(frozen=True)
class AsmBlock:
    """One machine basic block: its IR block name (None for blocks codegen made) and instructions."""

    name: str
    ir_label: str | None
    loop_header: str | None   # innermost loop's header block (its own name if it is one)
    instructions: tuple[str, ...]


@dataclass(frozen=True)
class AsmLoop:
    """An innermost loop of a function: its machine blocks in layout order."""

    function: str
    header: str
    blocks: tuple[AsmBlock, ...]


@dataclass(frozen=True)
class LoopThroughput:
    """llvm-mca's verdict on one loop body: simulated cycles per iteration (dependences included)
    and the resource bound alone (its Block RThroughput)."""

    cycles_per_iteration: float
    resource_cycles: float


@dataclass(frozen=True)
class LoopBound:
    """An in-core lower bound for the model: the trace blocks of an innermost loop, its iterations
    over the region (the header's executions), llvm-mca's cycles per iteration (simulated, and its
    resource bound alone) and the latencies llvm-mca assumed per operation class (to correct chains)."""

    blocks: frozenset[int]
    iterations: float
    cycles_per_iteration: float
    resource_cycles: float
    mca_latencies: Mapping[str, float] = field(default_factory=dict)


def parse_functions(asm_text: str, functions: str = r"^OUT__") -> dict[str, list[AsmBlock]]:
    """Machine blocks of every function whose name matches `functions`, in layout order."""
    rx = re.compile(functions)
    out: dict[str, list[AsmBlock]] = {}
    current: list[AsmBlock] | None = None
    block: dict | None = None
    for line in asm_text.splitlines():
        func = _FUNC_RE.match(line)
        if func:
            _close(current, block)
            current, block = (out.setdefault(func.group(1), []) if rx.search(func.group(1)) else None), None
            continue
        if current is None:
            continue
        if line.startswith(".Lfunc_end"):
            _close(current, block)
            current, block = None, None
            continue
        label = _LABEL_RE.match(line)
        if label:
            _close(current, block)
            block = _new_block(label.group(1) or label.group(2), label.group(3))
        elif block is not None:
            _add_line(block, line)
    _close(current, block)
    return out


def _new_block(name: str, comment: str) -> dict:
    """A block being parsed, from its label line's comment."""
    block = {"name": name, "ir": None, "header": None, "ins": []}
    ir = _IR_NAME_RE.match(comment.strip())
    if ir:
        block["ir"] = ir.group(1)
    _loop_comment(block, comment)
    return block


def _loop_comment(block: dict, comment: str) -> None:
    """Record the innermost loop that a block comment names."""
    if _INNER_HEADER_RE.search(comment):
        block["header"] = block["name"]
    inside = _IN_LOOP_RE.search(comment)
    if inside and block["header"] is None:
        block["header"] = inside.group(1)


def _add_line(block: dict, line: str) -> None:
    """An instruction (comments stripped) or a loop comment of the block being parsed."""
    text = line.strip()
    if not text:
        return
    if text.startswith("#"):
        _loop_comment(block, text)
        return
    if text.startswith(".") or text.endswith(":"):
        return  # assembler directive or local label
    block["ins"].append(text.split("#", 1)[0].strip())


def _close(func: list[AsmBlock] | None, block: dict | None) -> None:
    """Append the finished block to its function."""
    if func is not None and block is not None and (block["ins"] or block["ir"]):
        func.append(AsmBlock(block["name"], block["ir"], block["header"], tuple(block["ins"])))


def innermost_loops(functions: Mapping[str, Sequence[AsmBlock]]) -> list[AsmLoop]:
    """Innermost loops: the blocks whose innermost loop has the same header, per function."""
    loops = []
    for name, blocks in functions.items():
        headers = [b.name for b in blocks if b.loop_header == b.name]
        for header in headers:
            loops.append(AsmLoop(name, header, tuple(b for b in blocks if b.loop_header == header)))
    return loops


def loop_body(loop: AsmLoop, counts: Mapping[str, float]) -> tuple[tuple[str, ...], float, frozenset[str]]:
    """The instructions of one iteration, the loop's iterations and the IR blocks it covers.

    Iterations are the most-executed IR block's count (the header runs every iteration). A named
    block run in fewer than half the iterations is left out with the unnamed blocks codegen split
    from it (they follow it in layout), so a rare branch is not priced as if taken every time.
    Blocks that call the translator's trace markers (XOMP_trace_*) are left out (the native program
    never runs them); other calls are dropped, as the model prices library calls separately."""
    iterations = max((counts.get(b.ir_label, 0.0) for b in loop.blocks if b.ir_label), default=0.0)
    kept, labels, keep = [], set(), True
    for b in loop.blocks:
        if b.ir_label is not None:
            keep = counts.get(b.ir_label, 0.0) >= _MIN_SHARE * iterations
            if keep:
                labels.add(b.ir_label)
        if keep and not any(_MARKER_CALL.match(i) for i in b.instructions):
            kept.extend(i for i in b.instructions if not i.startswith("call"))
    return tuple(kept), iterations, frozenset(labels)


def mca_throughputs(bodies: Sequence[Sequence[str]], mcpu: str, iterations: int = 200) -> list[LoopThroughput]:
    """llvm-mca on every loop body at once (one code region each): cycles per iteration and the
    resource bound."""
    if not bodies:
        return []
    text = "".join(f"# LLVM-MCA-BEGIN loop{i}\n" + "\n".join(body) + f"\n# LLVM-MCA-END loop{i}\n"
                   for i, body in enumerate(bodies))
    proc = subprocess.run([_mca_tool(), f"-mcpu={mcpu}", f"-iterations={iterations}", "-instruction-info=false",
                           "-resource-pressure=false", "-"], input=text, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        err = proc.stderr.strip()[-2000:]
        kind = InputError if "not a recognized processor" in err or "-mcpu" in err else ToolError
        raise kind(f"llvm-mca -mcpu={mcpu} failed:\n{err}\n(check the machine file's core.llvm_mcpu: "
                   f"`llc-19 -mcpu=help` lists the processors)")
    return _parse_mca(proc.stdout, len(bodies), iterations)


def _parse_mca(report: str, n: int, iterations: int) -> list[LoopThroughput]:
    """Per region: Total Cycles / Iterations, and Block RThroughput."""
    found: dict[int, dict[str, float]] = {}
    current = 0 if n == 1 else None
    for line in report.splitlines():
        region = _REGION_RE.match(line.strip())
        if region:
            current = int(region.group(2))
            continue
        if current is None or ":" not in line:
            continue
        key, _, value = line.partition(":")
        if key.strip() in ("Total Cycles", "Block RThroughput", "Iterations"):
            found.setdefault(current, {})[key.strip()] = float(value.split()[0])
    missing = [i for i in range(n) if {"Total Cycles", "Block RThroughput"} - set(found.get(i, {}))]
    if missing:
        raise ToolError(f"llvm-mca: no result for loop regions {missing[:5]} in its report")
    return [LoopThroughput(found[i]["Total Cycles"] / found[i].get("Iterations", iterations),
                           found[i]["Block RThroughput"]) for i in range(n)]


def find_mca() -> str | None:
    """llvm-mca of the LLVM 19 installation (package llvm-19), or None."""
    for name in ("llvm-mca-19", "/usr/lib/llvm-19/bin/llvm-mca", "llvm-mca"):
        path = shutil.which(name) or (name if Path(name).is_file() else None)
        if path:
            return path
    return None


def _mca_tool() -> str:
    """llvm-mca, or a clear error saying how to install it."""
    path = find_mca()
    if path is None:
        raise ToolError("llvm-mca not found: install the LLVM 19 tools (apt-get install llvm-19)")
    return path


def loop_bounds(asm: Path, mcpu: str, blocks: Mapping[int, tuple[str, str]],
                block_counts: Mapping[int, float], functions: str = r"^OUT__") -> tuple[LoopBound, ...]:
    """In-core bounds of the executed innermost loops of the traced functions.

    `blocks`: trace block id -> (function, IR label) from the block table; `block_counts`: executions."""
    if not Path(asm).is_file():
        raise InputError(f"{asm}: assembly side file not found; rebuild the binary with `pptmc instrument`")
    ids = {(f, label): b for b, (f, label) in blocks.items()}
    selected = []
    for loop in innermost_loops(parse_functions(Path(asm).read_text(), functions)):
        counts = {label: float(block_counts.get(ids.get((loop.function, label), -1), 0))
                  for label in (b.ir_label for b in loop.blocks) if label}
        body, iterations, labels = loop_body(loop, counts)
        if iterations > 0 and body:
            selected.append((body, iterations, frozenset(ids[(loop.function, x)] for x in labels)))
    probes = [[line] for line in _LATENCY_PROBES.values()]
    results = mca_throughputs([s[0] for s in selected] + probes, mcpu)
    latencies = {cls: r.cycles_per_iteration for cls, r in zip(_LATENCY_PROBES, results[len(selected):])}
    return tuple(LoopBound(members, iterations, r.cycles_per_iteration, r.resource_cycles, latencies)
                 for (_, iterations, members), r in zip(selected, results))
