"""Instrument optimised LLVM IR text: block-entry events, memory-access events and region hooks.

llvmlite can parse and verify IR but cannot insert instructions, so this pass edits the IR
*text* one instruction line at a time. llvmlite's parsed module supplies what the text cannot
cheaply give (opcodes, result and operand types, ABI sizes); the text supplies the operand
spelling that the inserted calls reuse. The edited text is re-parsed and verified by llvmlite.
Inserted instructions never define unnamed values, so the numbering of the original
unnamed values (%0, %1, ...) stays valid.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

import llvmlite.binding as llvm

from passes.chains import FMA_RE, loop_carried_chain, parse_inst
from passes.irtext import (LABEL_RE, attribute_groups, body_after, call_args, function_spans, has_entry_label,
                            has_fma, operand_value, param_text, split_space, split_top)
from common.errors import InputError

OP_KEYS = ("int_add", "int_sub", "int_mul", "int_div", "fp_add", "fp_sub", "fp_mul", "fp_div",
           "fp_fma", "cmp", "branch", "load", "store", "load_bytes", "store_bytes", "vector_width")
_OPCODE_KEY = {"add": "int_add", "sub": "int_sub", "mul": "int_mul", "sdiv": "int_div",
               "udiv": "int_div", "srem": "int_div", "urem": "int_div", "fadd": "fp_add",
               "fsub": "fp_sub", "fmul": "fp_mul", "fdiv": "fp_div", "frem": "fp_div",
               "icmp": "cmp", "fcmp": "cmp", "br": "branch", "switch": "branch",
               "indirectbr": "branch"}
_LABEL_REF_RE = re.compile(r'label %("(?:[^"\\]|\\.)*"|[-\w.$]+)')
_MEM_INTRINSIC_RE = re.compile(r"@llvm\.(memcpy|memmove|memset)(?:\.inline)?\.")
_MASKED_RE = re.compile(r"@llvm\.masked\.(load|store|gather|scatter|expandload|compressstore)\.")
_MASKED_STORES = ("store", "scatter", "compressstore")
_VEC_RE = re.compile(r"<(\d+) x ")
_CALLEE_RE = re.compile(r"\bcall\b[^@]*@([-\w.$]+)\(")
# intrinsics (priced as operations), the XOMP/libomp runtime and the tracer are not library calls
_NOT_COUNTED_CALLS = ("llvm.", "XOMP_", "xomp_", "__pptmc", "__kmpc", "omp_")
EXPLICIT_BARRIER = "XOMP_barrier"  # the translator's `#pragma omp barrier` (implied barriers are in XOMP_loop_end)
OMP_BARRIERS = ("__kmpc_barrier", "__kmpc_cancel_barrier")  # libomp's barrier entry points
# libomp entry points whose calls in a traced program go through the runtime's equal-speed turns
# (instrument/runtime/pptmc_turns.c): hand-outs wait for their turn, team calls mark where a thread waits
TURN_CALLS = ("__kmpc_dispatch_next_4", "__kmpc_dispatch_next_4u", "__kmpc_dispatch_next_8",
              "__kmpc_dispatch_next_8u", "__kmpc_single", "__kmpc_barrier", "__kmpc_cancel_barrier",
              "__kmpc_reduce", "__kmpc_reduce_nowait", "__kmpc_end_reduce", "__kmpc_copyprivate")
TURN_PREFIX = "__pptmc_turn_"
LOOP_END = "XOMP_loop_end"  # XOMP_loop_end(&state, nowait): the translator passes nowait as a constant
_NOWAIT_ARG_RE = re.compile(r",\s*i32\s+(?:noundef\s+)?1\s*\)")
RUNTIME_PREFIXES = ("XOMP_", "__pptmc")
SKIP_GLOBAL_RE = re.compile(r"^@(xomp_|__pptmc)")


@dataclass
class Site:
    """One static memory-access site: the runtime records its address each time it runs."""

    site_id: int
    block_id: int          # the block the access is attributed to (may be a shared-var block)
    size: int              # bytes; 0 when the size is recorded at run time (memcpy/memset)
    is_store: bool
    kind: str              # load, store, atomic, memcpy.src, memcpy.dst, memset.dst, ...
    host_block: int        # the real block whose instructions contain it


@dataclass
class Block:
    """One instrumented basic block (or a shared-variable pseudo-block) and its static mix."""

    block_id: int
    function: str
    label: str
    is_shared_var_block: bool
    host_block: int                      # the real block that executes it (itself for real blocks)
    ops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OP_KEYS, 0))
    successors: list[int] = field(default_factory=list)
    terminator: str = ""
    n_host_sites: int = 0                # sites executed by this real block (incl. pseudo-block ones)
    chain: dict[str, int] = field(default_factory=dict)  # loop-carried dependence chain (passes/chains.py)
    calls: dict[str, int] = field(default_factory=dict)  # direct calls to other functions, e.g. libm's exp
    barriers: int = 0                    # explicit `#pragma omp barrier`s (XOMP_barrier calls) per execution
    nowait: int = 0                      # work-sharing constructs ended without their barrier (nowait)


@dataclass
class PassResult:
    """The instrumented IR text plus the static tables the runtime ids refer to."""

    ir_text: str
    blocks: list[Block]
    sites: list[Site]
    functions: dict[str, dict]           # name -> {"id", "entry", "blocks"}
    table_hash: str


@dataclass
class _Inst:
    lines: list[str]       # first line plus continuation lines (multi-line switch)
    ref: object            # llvmlite instruction ValueRef

    @property
    def text(self) -> str:
        return " ".join(s.strip() for s in self.lines)


@dataclass(frozen=True)
class FunctionSetup:
    """How one function is instrumented, so the pass needs no long argument list."""

    fn_id: int             # the function's id in the runtime's enter/exit hooks
    mode: str              # "trace" (memory sites too) or "count" (blocks only)
    shared_label: str      # the translator's shared_var_trace<n> label in this function
    fused: bool = True     # the target has FMA instructions: llvm.fmuladd is one fused operation
    turns: bool = False    # the module calls libomp's hand-out or team entry points (trace mode): block
    #                        entries also count the thread's references, the turns' virtual time


class _FunctionPass:
    """Instrument one function; block and site ids continue from the module-wide counters."""

    def __init__(self, fn, lines: list[str], td, next_block: int, next_site: int, setup: FunctionSetup):
        self.fn, self.lines, self.td, self.mode = fn, lines, td, setup.mode
        self.fused, self.turns = setup.fused, setup.turns
        self.fn_id, self.next_block, self.next_site = setup.fn_id, next_block, next_site
        self.shared_label = setup.shared_label
        self.blocks: list[Block] = []
        self.sites: list[Site] = []
        self.defs: dict[str, str] = {}
        self.arg_names = [operand_value(p) or "" for p in split_top(param_text(lines[0]))]
        self.shared_block: Block | None = None

    def split_blocks(self) -> list[tuple[str, list[_Inst]]]:
        """Pair the text's labels and instruction lines with llvmlite's blocks and instructions."""
        groups: list[tuple[str | None, list[list[str]]]] = [(None, [])]
        for line in self.lines[1:-1]:
            if not line.strip() or line.lstrip().startswith(";"):
                continue
            lab = LABEL_RE.match(line)
            if lab:
                groups.append((lab.group(1), []))
            elif line.startswith("    ") or line.strip() == "]":
                groups[-1][1][-1].append(line)
            else:
                groups[-1][1].append([line])
        if not groups[0][1]:
            groups.pop(0)
        ll_blocks = list(self.fn.blocks)
        if len(ll_blocks) != len(groups):
            raise InputError(f"function {self.fn.name}: {len(groups)} blocks in the IR text but "
                             f"{len(ll_blocks)} parsed; report this IR to the pptmc developers")
        out = []
        for (label, insts), blk in zip(groups, ll_blocks):
            refs = list(blk.instructions)
            if len(refs) != len(insts):
                raise InputError(f"function {self.fn.name} block {label}: instruction lines do not "
                                 f"match the parsed IR; report this IR to the pptmc developers")
            if label is None:
                label = str(len([a for a in self.arg_names if a[1:].isdigit()]))
            out.append((label, [_Inst(lines, ref) for lines, ref in zip(insts, refs)]))
        return out

    def run(self) -> list[str]:
        """Return the instrumented function text."""
        groups = self.split_blocks()
        label_to_id: dict[str, int] = {}
        for idx, (label, insts) in enumerate(groups):
            name = label.strip('"') if not label.isdigit() else f"bb.{idx}"
            blk = Block(self.next_block + idx, self.fn.name, name, False, self.next_block + idx)
            self.blocks.append(blk)
            label_to_id[label] = blk.block_id
            for inst in insts:
                m = re.match(r"\s*(%[-\w.$]+|%\"[^\"]*\")\s*=", inst.lines[0])
                if m:
                    self.defs[m.group(1)] = inst.text.split("=", 1)[1].strip()
        self.next_block += len(groups)
        out = [self.lines[0]]
        for idx, (label, insts) in enumerate(groups):
            blk = self.blocks[idx]
            out.extend(self._block_text(idx, label, insts, blk, label_to_id))
        out.append(self.lines[-1])
        return out

    def _block_text(self, idx: int, label: str, insts: list[_Inst], blk: Block,
                    label_to_id: dict[str, int]) -> list[str]:
        """Instrumented text of one block: its label, phis, entry hooks, then sites and code."""
        text: list[str] = []
        if idx > 0 or has_entry_label(self.lines):
            text.append(f"{label}:")
        n_lead = 0
        while n_lead < len(insts) and insts[n_lead].ref.opcode in ("phi", "landingpad"):
            n_lead += 1
        for inst in insts[:n_lead]:
            text.extend(inst.lines)
            self._count_ops(blk, inst)
        if idx == 0:
            text.append("  %__pptmc_prev = alloca i32, align 4")
            text.append("  store i32 -1, ptr %__pptmc_prev, align 4")
            if self.mode == "trace":
                # The return-address slot bounds this invocation's frames from above: stack
                # addresses below it are private to the region, those above belong to callers.
                text.append("  %__pptmc_top = call ptr @llvm.addressofreturnaddress.p0()")
                text.append(f"  call void @__pptmc_fn_enter(i32 {self.fn_id}, ptr %__pptmc_top)")
        hook = ("__pptmc_bbt" if self.turns else "__pptmc_bb") if self.mode == "trace" else "__pptmc_cbb"
        text.append(f"  call void @{hook}(i32 {blk.block_id}, ptr %__pptmc_prev)")
        for inst in insts[n_lead:]:
            self._count_ops(blk, inst)
            calls = self._site_calls(blk, inst)  # also in count mode, so block ids agree
            if self.mode == "trace":
                text.extend(calls)
                if _is_real_call(inst):
                    text.append(f"  call void @__pptmc_sync(i32 {blk.n_host_sites})")
                if _is_barrier_call(inst):  # where the original program's threads wait (instrument/FORMAT.md)
                    text.append("  call void @XOMP_trace_barrier()")
                if inst.ref.opcode == "ret":
                    text.append(f"  call void @__pptmc_fn_exit(i32 {self.fn_id})")
                text.extend(_through_turns(line) for line in inst.lines)
                continue
            text.extend(inst.lines)
        term = insts[-1]
        blk.terminator = term.ref.opcode
        blk.chain = loop_carried_chain(label, [parse_inst(i.ref.opcode, i.text) for i in insts], self.fused)
        if term.ref.opcode not in ("ret", "unreachable"):
            for ref in _LABEL_REF_RE.findall(term.text):
                succ = label_to_id.get(ref)
                if succ is not None and succ not in blk.successors:
                    blk.successors.append(succ)
        return text

    def _count_ops(self, blk: Block, inst: _Inst) -> None:
        """Byfl-style static mix: one count per instruction (a vector op counts once)."""
        op, text = inst.ref.opcode, inst.text
        key = _OPCODE_KEY.get(op)
        if key:
            blk.ops[key] += 1
        if op == "call" and FMA_RE.search(text):
            if self.fused or "@llvm.fma." in text:
                blk.ops["fp_fma"] += 1
            else:  # llvm.fmuladd without FMA hardware is lowered to a multiply and an add
                blk.ops["fp_mul"] += 1
                blk.ops["fp_add"] += 1
        callee = _CALLEE_RE.search(text) if op == "call" else None
        if callee and not callee.group(1).startswith(_NOT_COUNTED_CALLS):
            blk.calls[callee.group(1)] = blk.calls.get(callee.group(1), 0) + 1
        elif callee and callee.group(1) == EXPLICIT_BARRIER:
            blk.barriers += 1
        elif callee and callee.group(1) == LOOP_END and _NOWAIT_ARG_RE.search(text):
            blk.nowait += 1
        lanes = [int(x) for x in _VEC_RE.findall(text)]
        blk.ops["vector_width"] = max([blk.ops["vector_width"], 1, *lanes])

    def _add_site(self, blk: Block, size: int, is_store: bool, kind: str, shared: bool) -> int:
        """Register one site, attributing shared-variable loads to the pseudo-block."""
        target = blk
        if shared:
            target = self._shared_block(blk)
        site = Site(self.next_site, target.block_id, size, is_store, kind, blk.block_id)
        blk.n_host_sites += 1
        self.next_site += 1
        self.sites.append(site)
        key = "store" if is_store else "load"
        target.ops[key] += 1
        target.ops[f"{key}_bytes"] += size
        if target is not blk:
            target.ops["vector_width"] = max(target.ops["vector_width"], 1)
        return site.site_id

    def _shared_block(self, host: Block) -> Block:
        """The pseudo-block that holds this function's shared-variable unpacking loads."""
        if self.shared_block is None:
            self.shared_block = Block(-1, self.fn.name, self.shared_label, True, host.block_id)
        return self.shared_block

    def _site_calls(self, blk: Block, inst: _Inst) -> list[str]:
        """Calls that record the addresses of the memory accesses `inst` is about to make."""
        op, text = inst.ref.opcode, inst.text
        ops = list(inst.ref.operands)
        calls = []
        if op == "load":
            ptr = operand_value(split_top(body_after(text, "load"))[1])
            if ptr and not SKIP_GLOBAL_RE.match(ptr):
                size = self.td.get_abi_size(inst.ref.type)
                sid = self._add_site(blk, size, False, "load", self._is_shared_ptr(ptr))
                calls.append(f"  call void @__pptmc_mem(i32 {sid}, ptr {ptr})")
        elif op == "store":
            ptr = operand_value(split_top(body_after(text, "store"))[1])
            if ptr and not SKIP_GLOBAL_RE.match(ptr):
                sid = self._add_site(blk, self.td.get_abi_size(ops[0].type), True, "store", False)
                calls.append(f"  call void @__pptmc_mem(i32 {sid}, ptr {ptr})")
        elif op in ("atomicrmw", "cmpxchg"):
            body = split_top(body_after(text, op))
            first = body[0].split(None, 1)[1] if op == "atomicrmw" else body[0]
            ptr = operand_value(first)
            if ptr and not SKIP_GLOBAL_RE.match(ptr):
                sid = self._add_site(blk, self.td.get_abi_size(ops[1].type), True, op, False)
                calls.append(f"  call void @__pptmc_mem(i32 {sid}, ptr {ptr})")
        elif op == "call" and _MEM_INTRINSIC_RE.search(text):
            calls.extend(self._mem_intrinsic_calls(blk, text))
        elif op == "call" and _MASKED_RE.search(text):
            calls.extend(self._masked_calls(blk, inst))
        return calls

    def _masked_calls(self, blk: Block, inst: _Inst) -> list[str]:
        """llvm.masked.*: one site per lane, recorded only when the lane's mask bit is set.

        Lane addresses: load/store p + k*size; gather/scatter the k-th pointer; expandload/
        compressstore p + (active lanes before k)*size. Operands are found by type, not by
        position, because LLVM 22 (llvmlite) dropped the alignment operand that clang-19 prints.
        """
        kind = _MASKED_RE.search(inst.text).group(1)
        if "vscale" in inst.text:
            return []  # scalable vectors (not produced for x86): lane count unknown here, not traced
        args = [(split_space(a)[0], operand_value(a)) for a in call_args(inst.text)]
        mask_t, mask = next((t, v) for t, v in args if t.endswith(" x i1>"))
        vec = inst.ref.type if kind not in _MASKED_STORES else next(iter(inst.ref.operands)).type
        lanes, size = vec.element_count, self.td.get_abi_size(next(iter(vec.elements)))
        ptrs_t, ptrs = next(((t, v) for t, v in args if t.endswith(" x ptr>")), (None, None))
        base = next((v for t, v in args if t == "ptr"), None)
        calls, rank = [], "0"
        for k in range(lanes):
            sid = self._add_site(blk, size, kind in _MASKED_STORES, f"masked.{kind}", False)
            m, a = f"%__pptmc_m{sid}", f"%__pptmc_a{sid}"
            calls.append(f"  {m} = extractelement {mask_t} {mask}, i64 {k}")
            if kind in ("gather", "scatter"):
                calls.append(f"  {a} = extractelement {ptrs_t} {ptrs}, i64 {k}")
            elif kind in ("load", "store"):
                calls.append(f"  {a} = getelementptr i8, ptr {base}, i64 {k * size}")
            else:  # expandload/compressstore: consecutive elements for the active lanes
                calls.append(f"  %__pptmc_o{sid} = mul i64 {rank}, {size}")
                calls.append(f"  {a} = getelementptr i8, ptr {base}, i64 %__pptmc_o{sid}")
                calls.append(f"  %__pptmc_z{sid} = zext i1 {m} to i64")
                calls.append(f"  %__pptmc_r{sid} = add i64 {rank}, %__pptmc_z{sid}")
                rank = f"%__pptmc_r{sid}"
            calls.append(f"  call void @__pptmc_lane(i32 {sid}, ptr {a}, i64 {size}, i1 {m})")
        return calls

    def _mem_intrinsic_calls(self, blk: Block, text: str) -> list[str]:
        """memcpy/memmove record source (load) and destination (store); memset the destination."""
        name = _MEM_INTRINSIC_RE.search(text).group(1)
        args = call_args(text)
        size = operand_value(args[2])
        const = int(size) if size and size.lstrip("-").isdigit() else 0
        roles = [(1, False, "src"), (0, True, "dst")] if name != "memset" else [(0, True, "dst")]
        calls = []
        for pos, is_store, role in roles:
            ptr = operand_value(args[pos])
            if ptr:
                sid = self._add_site(blk, const, is_store, f"{name}.{role}", False)
                calls.append(f"  call void @__pptmc_memn(i32 {sid}, ptr {ptr}, i64 {size})")
        return calls

    def _is_shared_ptr(self, ptr: str) -> bool:
        """True when `ptr` is the function argument or a constant-offset GEP/cast chain of it."""
        seen = 0
        while seen < 32:
            seen += 1
            if ptr in self.arg_names[:1]:
                return True
            d = self.defs.get(ptr)
            if d is None:
                return False
            m = re.match(r"getelementptr (?:inbounds |nuw |nusw )*[^,]+, ptr (%[-\w.$]+)(.*)$", d)
            if m and "%" not in m.group(2):
                ptr = m.group(1)
                continue
            m = re.match(r"(?:bitcast|addrspacecast) ptr (%[-\w.$]+) to ptr", d)
            if not m:
                return False
            ptr = m.group(1)
        return False


def _is_barrier_call(inst: _Inst) -> bool:
    """A call of libomp's barrier (clang's lowering of explicit and implied OpenMP barriers)."""
    m = _CALLEE_RE.search(inst.text) if inst.ref.opcode == "call" else None
    return m is not None and m.group(1) in OMP_BARRIERS


_TURN_CALL_RE = re.compile(r"@(" + "|".join(TURN_CALLS) + r")\(")


def _through_turns(line: str) -> str:
    """A call of a libomp hand-out or team entry point, renamed to the runtime's wrapper of it."""
    return _TURN_CALL_RE.sub(lambda m: f"@{TURN_PREFIX}{m.group(1)}(", line) if "@__kmpc_" in line else line


def _calls_turns(lines: list[str], spans: list[tuple[int, int]]) -> bool:
    """Whether an instrumented function calls a libomp hand-out or team entry point (a translated program's
    functions call none: only its XOMP runtime, which is not instrumented, calls libomp)."""
    return any(_TURN_CALL_RE.search(lines[i]) for a, b in spans for i in range(a, b + 1))


def _turn_declarations(lines: list[str]) -> list[str]:
    """Declarations of the wrappers the renamed calls use, with the types of libomp's own declarations."""
    return [_through_turns(x) for x in lines if x.startswith("declare ") and _TURN_CALL_RE.search(x)]


def _is_real_call(inst: _Inst) -> bool:
    """A call that may run instrumented code or loop markers (not an LLVM intrinsic or inline asm)."""
    if inst.ref.opcode not in ("call", "invoke", "callbr"):
        return False
    return not re.search(r"@llvm\.|\basm\b", inst.text)


RUNTIME_DECLS = """
declare void @__pptmc_bb(i32, ptr)
declare void @__pptmc_bbt(i32, ptr)
declare void @__pptmc_cbb(i32, ptr)
declare void @__pptmc_fn_enter(i32, ptr)
declare ptr @llvm.addressofreturnaddress.p0()
declare void @__pptmc_fn_exit(i32)
declare void @__pptmc_sync(i32)
declare void @__pptmc_mem(i32, ptr)
declare void @__pptmc_memn(i32, ptr, i64)
declare void @__pptmc_lane(i32, ptr, i64, i1)
declare void @XOMP_trace_barrier()
"""


def select_functions(module, pattern: str) -> list:
    """Defined functions whose names match `pattern`, minus the runtime's own hooks."""
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise InputError(f"--functions {pattern!r}: not a valid regular expression ({exc})") from exc
    return [f for f in module.functions if not f.is_declaration and rx.search(f.name)
            and not f.name.startswith(RUNTIME_PREFIXES)]


def parse_ir(text: str, origin: str):
    """Parse and verify IR text with llvmlite; a failure names the file and the LLVM message."""
    try:
        mod = llvm.parse_assembly(text)
        mod.verify()
    except RuntimeError as exc:
        raise InputError(f"{origin}: LLVM IR does not parse or verify: {exc}") from exc
    return mod


def instrument_ir(text: str, pattern: str, mode: str = "trace", origin: str = "<ir>",
                  labels: dict[str, str] | None = None) -> PassResult:
    """Instrument every function matching `pattern`; mode 'trace' adds memory sites, 'count' only blocks."""
    mod = parse_ir(text, origin)
    td = llvm.create_target_data(mod.data_layout)
    chosen = select_functions(mod, pattern)
    if not chosen:
        raise InputError(f"{origin}: no defined function matches --functions {pattern!r}; "
                         f"check the regular expression (functions: "
                         f"{', '.join(f.name for f in mod.functions if not f.is_declaration)})")
    lines = text.splitlines()
    spans = function_spans(lines)
    groups = attribute_groups(lines)
    blocks, sites, functions, replace = [], [], {}, {}
    next_block = next_site = 0
    turns = mode == "trace" and _calls_turns(lines, [spans[fn.name] for fn in chosen])
    for fn_id, fn in enumerate(chosen):
        a, b = spans[fn.name]
        setup = FunctionSetup(fn_id, mode, (labels or {}).get(fn.name, "shared_var_trace"), has_fma(lines[a], groups),
                              turns)
        fp = _FunctionPass(fn, lines[a:b + 1], td, next_block, next_site, setup)
        replace[a] = (b, fp.run())
        fblocks = list(fp.blocks)
        if fp.shared_block is not None:
            fp.shared_block.block_id = fp.next_block
            for s in fp.sites:
                if s.block_id == -1:
                    s.block_id = fp.next_block
            fp.next_block += 1
            fblocks.append(fp.shared_block)
        functions[fn.name] = {"id": fn_id, "entry": fblocks[0].block_id,
                              "blocks": [x.block_id for x in fp.blocks]}
        blocks.extend(fblocks)
        sites.extend(fp.sites)
        next_block, next_site = fp.next_block, fp.next_site
    out: list[str] = []
    i = 0
    while i < len(lines):
        if i in replace:
            end, new = replace[i]
            out.extend(new)
            i = end + 1
        else:
            out.append(lines[i])
            i += 1
    table_hash = _table_hash(blocks, sites)
    out.append(RUNTIME_DECLS)
    if mode == "trace":
        out.extend(_turn_declarations(lines))
    out.append(f'@__pptmc_table_hash = constant [{len(table_hash) + 1} x i8] c"{table_hash}\\00"')
    out.append(f"@__pptmc_n_sites = constant i32 {len(sites)}")
    out.append(f"@__pptmc_n_blocks = constant i32 {len(blocks)}")
    out.extend(_pred_tables(blocks))
    out.append(_block_sites_table(blocks))
    new_text = "\n".join(out) + "\n"
    parse_ir(new_text, f"{origin} (instrumented)")
    return PassResult(new_text, blocks, sites, functions, table_hash)


def _pred_tables(blocks: list[Block]) -> list[str]:
    """Constant arrays listing each block's CFG predecessors, so the runtime counts edges by index."""
    preds: list[list[int]] = [[] for _ in blocks]
    for b in blocks:
        for s in b.successors:
            preds[s].append(b.block_id)
    off, flat = [0], []
    for p in preds:
        flat.extend(p)
        off.append(len(flat))
    flat = flat or [-1]
    return [f"@__pptmc_pred_off = constant [{len(off)} x i32] [{', '.join(f'i32 {x}' for x in off)}]",
            f"@__pptmc_pred = constant [{len(flat)} x i32] [{', '.join(f'i32 {x}' for x in flat)}]"]


def _block_sites_table(blocks: list[Block]) -> str:
    """Each block's memory sites, so the runtime counts a thread's references per block entry (its virtual time)."""
    vals = ", ".join(f"i32 {b.n_host_sites if not b.is_shared_var_block else 0}" for b in blocks) or "i32 0"
    return f"@__pptmc_block_sites = constant [{max(len(blocks), 1)} x i32] [{vals}]"


def _table_hash(blocks: list[Block], sites: list[Site]) -> str:
    """A short hash of the block and site tables (equal for trace and count builds of one source)."""
    payload = json.dumps([[(b.block_id, b.function, b.label, b.host_block) for b in blocks],
                          [(s.site_id, s.block_id, s.size, s.is_store, s.host_block) for s in sites]])
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
