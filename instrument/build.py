"""`pptmc instrument`: compile a C file into a binary whose selected functions record a trace.

Pipeline (all with clang-19, so the logged references are the ones the real -O build makes):
1. clang -O<l> -Xclang -disable-llvm-passes -emit-llvm: unoptimised IR with -O<l> attributes.
2. mark the selected functions `noinline` (the real build calls them through a function
   pointer, XOMP_parallel_start or __kmpc_fork_call, so they are never inlined there either).
3. clang -O<l> on that IR: the normal optimisation pipeline.
4. passes.irpass inserts the hooks into the optimised IR text; llvmlite re-parses and verifies.
5. clang -c -O<l> -Xclang -disable-llvm-passes: codegen only, so the optimiser cannot move or
   drop accesses around the hooks; then link with the C runtime, libzstd and libomp.
"""
from __future__ import annotations

import json
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from passes.irpass import OP_KEYS, PassResult, instrument_ir
from passes.irtext import shared_labels
from common.errors import InputError, ToolError
from common.io import write_json, write_table
from common.toolchain import toolchain

from instrument.trace_types import BlockInfo
from translate.buildinfo import BuildInputs, build_inputs_of

SIDE_VERSION = 1
RUNTIME_C = Path(__file__).parent / "runtime" / "pptmc_rt.c"
TURNS_C = Path(__file__).parent / "runtime" / "pptmc_turns.c"  # equal-speed turns of the original program's threads
MODES = ("trace", "count", "native")


@dataclass
class BuildResult:
    """Where the build put the binary and its side files."""

    binary: Path
    block_table: Path
    cfg: Path
    mix_csv: Path
    mode: str
    table_hash: str
    n_blocks: int
    n_sites: int


@dataclass(frozen=True)
class BlockEntry:
    """One row of the block table: identity plus the static Byfl-style instruction mix."""

    block_id: int
    function: str
    label: str
    is_shared_var_block: bool
    host_block: int
    ops: dict[str, int]
    chain: dict[str, int] = field(default_factory=dict)  # loop-carried chain's operations (FORMAT.md)
    calls: dict[str, int] = field(default_factory=dict)  # direct calls per execution, by callee (FORMAT.md)
    barriers: int = 0  # explicit `#pragma omp barrier`s per execution (FORMAT.md)
    nowait: int = 0    # work-sharing constructs per execution that end without their barrier (FORMAT.md)

    @property
    def name(self) -> str:
        return f"{self.function}:{self.label}"


@dataclass
class BlockTable:
    """The block and site tables of one instrumented binary (`<binary>.blocks.json`)."""

    mode: str
    table_hash: str
    blocks: dict[int, BlockEntry]
    sites: list[dict] = field(default_factory=list)   # {site, block, size, is_store, kind}
    functions: dict[str, dict] = field(default_factory=dict)

    def __getitem__(self, block_id: int) -> BlockEntry:
        return self.blocks[block_id]

    def __len__(self) -> int:
        return len(self.blocks)

    def block_infos(self) -> dict[int, BlockInfo]:
        """The trace contract's view of the blocks."""
        return {b.block_id: BlockInfo(b.block_id, b.function, b.label, b.is_shared_var_block)
                for b in self.blocks.values()}


def side_paths(binary: Path) -> dict[str, Path]:
    """Side files live next to the binary and share its name."""
    binary = Path(binary)
    return {"blocks": binary.with_name(binary.name + ".blocks.json"),
            "cfg": binary.with_name(binary.name + ".cfg.json"),
            "mix": binary.with_name(binary.name + ".mix.csv"),
            "asm": binary.with_name(binary.name + ".s")}


def assembly_path(binary: Path) -> Path:
    """The build's assembly side file: the uninstrumented optimised code (analysis/runtime/incore.py reads it)."""
    return side_paths(binary)["asm"]


def _run(cmd: list[str], what: str) -> None:
    """Run one compiler step; its stderr becomes the error message."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        err = proc.stderr.strip()[-3000:]
        kind = InputError if "error:" in err and what.startswith("compile") else ToolError
        raise kind(f"{what} failed ({' '.join(cmd[:2])} ...):\n{err}")


def mark_noinline(ir: str, pattern: str) -> str:
    """Give the selected functions an attribute group with `noinline` and without `alwaysinline`.

    clang marks OpenMP-outlined functions `alwaysinline` at -O2; they must stay separate
    functions to be instrumented, as they are when the runtime calls them through pointers.
    """
    rx = re.compile(pattern)
    groups = dict(re.findall(r"^attributes #(\d+) = \{ (.*) \}$", ir, flags=re.M))
    made: dict[str, str] = {}
    next_id = max((int(g) for g in groups), default=0) + 1

    def fix(m: re.Match) -> str:
        nonlocal next_id
        line = m.group(0)
        name = re.search(r'@("(?:[^"\\]|\\.)*"|[-\w.$]+)\(', line).group(1).strip('"')
        if not rx.search(name):
            return line
        ref = re.search(r"#(\d+)\s*\{$", line)
        if ref is None:
            return re.sub(r"\s*\{$", " noinline {", line)
        old_id = ref.group(1)
        if old_id not in made:
            attrs = [a for a in groups.get(old_id, "").split() if a not in ("alwaysinline", "noinline")]
            made[old_id] = str(next_id)
            groups[str(next_id)] = " ".join(["noinline", *attrs])
            next_id += 1
        return line[:ref.start()] + f"#{made[old_id]} {{"

    out = re.sub(r"^define [^\n]*\{$", fix, ir, flags=re.M)
    extra = "".join(f"attributes #{new} = {{ {groups[new]} }}\n" for new in made.values())
    return out + "\n" + extra


def _llvm_tool(name: str) -> str:
    """An LLVM tool from the same installation as clang-19 (opt, llvm-link)."""
    path = Path(toolchain().clang).resolve().parent / name
    if not path.is_file():
        raise ToolError(f"{path} not found; install the LLVM 19 tools (apt-get install llvm-19)")
    return str(path)


def _link_runtime(module: Path, work: Path) -> Path:
    """Link the runtime's bitcode into the instrumented module and inline its hot path.

    Only `always-inline` runs, so the program's own instructions stay exactly as analysed;
    the per-access hook becomes a few inline instructions instead of a call.
    """
    rt_bc, turns_bc = work / "rt.bc", work / "turns.bc"
    linked, inlined = work / "linked.bc", work / "inlined.bc"
    for src, bc in ((RUNTIME_C, rt_bc), (TURNS_C, turns_bc)):
        _run([str(toolchain().clang), "-O2", "-c", "-emit-llvm", str(src), "-o", str(bc)], "build the trace runtime")
    _run([_llvm_tool("llvm-link"), str(module), str(rt_bc), str(turns_bc), "-o", str(linked)],
         "llvm-link with the runtime")
    _run([_llvm_tool("opt"), "-passes=always-inline", str(linked), "-o", str(inlined)], "inline the runtime")
    return inlined


def _c_flags(opt_level: str, include_dirs, defines, quote_dirs=()) -> list[str]:
    """Compiler flags shared by the program and the extra sources, as in the real build (`quote_dirs`:
    searched for `#include "..."` only, as a compiler searches the including file's own folder)."""
    tc = toolchain()
    return ([f"-O{opt_level}", *tc.openmp_compile_flags()] + [f"-iquote{d}" for d in quote_dirs]
            + [f"-I{d}" for d in include_dirs] + [f"-D{d}" for d in defines])


def _with_marked_inputs(sources: list[Path], extras: list[Path]) -> tuple[list[Path], BuildInputs]:
    """The extra sources plus those the translated files' markers name (translate/buildinfo.py: the XOMP
    runtime), each once; and the markers' folders, merged. So `pptmc instrument` builds `pptmc translate`'s
    output with no flags, and finds the original program's local headers."""
    marks = [build_inputs_of(s) for s in sources]
    marked = BuildInputs(*(list(dict.fromkeys(p for m in marks for p in getattr(m, f))) for f in BuildInputs._fields))
    seen = {e.resolve() for e in extras}
    return [e for e in marked.extra_sources if e.resolve() not in seen] + extras, marked


def _raw_ir(sources: list[Path], work: Path, flags: list[str]) -> Path:
    """Step 1: the unoptimised IR of the program's instrumented files, linked into one module (llvm-link of
    clang's own version) when there are several, so block and site ids are unique across them."""
    tc = toolchain()
    raws = [work / f"raw{i}.ll" for i in range(len(sources))]
    for source, raw in zip(sources, raws):
        _run([str(tc.clang), *flags, "-fno-discard-value-names", "-Xclang", "-disable-llvm-passes", "-S",
              "-emit-llvm", str(source), "-o", str(raw)], f"compile {source}")
    if len(raws) == 1:
        return raws[0]
    _run([str(tc.llvm_tool("llvm-link")), "-S", *map(str, raws), "-o", str(work / "raw.ll")],
         "link the program's files into one module")
    return work / "raw.ll"


def _optimised_ir(sources: list[Path], work: Path, flags: list[str], functions: str) -> tuple[str, str]:
    """Steps 1-3: the optimised IR text of the program's files and their unoptimised IR (for label names)."""
    clang = str(toolchain().clang)
    source = sources[0]
    raw, marked, opt = _raw_ir(sources, work, flags), work / "marked.ll", work / "opt.ll"
    raw_text = raw.read_text()
    marked.write_text(mark_noinline(raw_text, functions))
    _run([clang, *flags, "-fno-discard-value-names", "-S", "-emit-llvm", str(marked), "-o", str(opt)],
         f"optimise {source}")
    return opt.read_text(), raw_text


def _write_assembly(ir: str, work: Path, opt_level: str, dest: Path) -> None:
    """The uninstrumented optimised code as assembly, with LLVM's block and loop comments: what the
    native build runs, for the in-core loop bound (analysis/runtime/incore.py)."""
    plain = work / "plain.ll"
    plain.write_text(ir)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.part")
    _run([str(toolchain().clang), f"-O{opt_level}", "-Xclang", "-disable-llvm-passes", "-S", str(plain),
          "-o", str(tmp)], "codegen of the uninstrumented IR to assembly")
    tmp.replace(dest)


def build_instrumented(source: Path, output: Path, functions: str = r"^OUT__", opt_level: str = "2",
                       include_dirs=(), defines=(), extra_sources=(), mode: str = "trace",
                       more_sources=()) -> BuildResult:
    """Build `output` from `source` (and `more_sources`, the program's other files with parallel regions)
    with the functions matching `functions` instrumented; `extra_sources` are compiled as they are."""
    source, output = Path(source), Path(output)
    sources = [source, *map(Path, more_sources)]
    if mode not in MODES:
        raise InputError(f"mode {mode!r}: use one of {', '.join(MODES)}")
    for s in sources:
        if not s.is_file():
            raise InputError(f"{s}: no such C file")
    try:
        re.compile(functions)
    except re.error as exc:
        raise InputError(f"--functions {functions!r}: not a valid regular expression ({exc})") from exc
    opt_level = str(opt_level).lstrip("O")
    if opt_level not in ("0", "1", "2", "3", "s", "z"):
        raise InputError(f"-O{opt_level}: use one of -O0 -O1 -O2 -O3 -Os -Oz")
    extras, marked = _with_marked_inputs(sources, [Path(e) for e in extra_sources])
    for e in extras:
        if not e.is_file():
            raise InputError(f"{e}: extra source file not found")
    incs = [*include_dirs, *marked.include_dirs, *dict.fromkeys(s.parent for s in sources),
            *dict.fromkeys(e.parent for e in extras)]
    flags = _c_flags(opt_level, incs, defines, marked.quote_dirs)
    tc = toolchain()
    clang = str(tc.clang)
    with tempfile.TemporaryDirectory(prefix="pptmc-inst-") as tmp:
        work = Path(tmp)
        ir, raw = _optimised_ir(sources, work, flags, functions)
        result = instrument_ir(ir, functions, "count" if mode == "count" else "trace", str(source),
                               shared_labels(raw))
        _write_assembly(ir, work, opt_level, assembly_path(output))
        module = work / "inst.ll"
        module.write_text(ir if mode == "native" else result.ir_text)
        if mode != "native":
            module = _link_runtime(module, work)
        objs = [work / "inst.o"]
        _run([clang, f"-O{opt_level}", "-Xclang", "-disable-llvm-passes", "-c", str(module),
              "-o", str(objs[0])], "codegen of the instrumented IR")
        for i, e in enumerate(extras):
            objs.append(work / f"extra{i}.o")
            _run([clang, *flags, "-c", str(e), "-o", str(objs[-1])], f"compile {e}")
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp_bin = output.with_name(f".{output.name}.part")
        _run([clang, *map(str, objs), "-o", str(tmp_bin), *tc.openmp_link_flags(), "-lzstd", "-lm",
              "-lpthread"], f"link {output}")
        tmp_bin.replace(output)
    return _write_side_files(output, result, mode)


def _write_side_files(output: Path, result: PassResult, mode: str) -> BuildResult:
    """Block table (JSON), per-block instruction mix (CSV) and CFG (JSON) next to the binary."""
    paths = side_paths(output)
    write_json(paths["blocks"], {
        "version": SIDE_VERSION, "mode": mode, "table_hash": result.table_hash,
        "blocks": [{"id": b.block_id, "function": b.function, "label": b.label,
                    "is_shared_var_block": b.is_shared_var_block, "host_block": b.host_block,
                    "ops": b.ops, "chain": b.chain,
                    "calls": b.calls, "barriers": b.barriers, "nowait": b.nowait} for b in result.blocks],
        "sites": [{"site": s.site_id, "block": s.block_id, "size": s.size, "is_store": s.is_store,
                   "kind": s.kind, "host_block": s.host_block} for s in result.sites],
        "functions": result.functions})
    rows = [{"block_id": b.block_id, "function": b.function, "label": b.label,
             "is_shared_var_block": b.is_shared_var_block, **b.ops} for b in result.blocks]
    write_table(pd.DataFrame(rows, columns=["block_id", "function", "label", "is_shared_var_block",
                                            *OP_KEYS]), paths["mix"])
    write_json(paths["cfg"], cfg_json(result))
    return BuildResult(output, paths["blocks"], paths["cfg"], paths["mix"], mode, result.table_hash,
                       len(result.blocks), len(result.sites))


def cfg_json(result: PassResult) -> dict:
    """The CFG side file: per function its entry, real blocks and edges (pseudo-blocks excluded)."""
    by_id = {b.block_id: b for b in result.blocks}
    funcs = {}
    for name, f in result.functions.items():
        edges = [[b, s] for b in f["blocks"] for s in by_id[b].successors]
        funcs[name] = {"entry": f["entry"], "calls": None, "blocks": f["blocks"], "edges": edges}
    return {"version": 1, "functions": funcs}


def load_block_table(binary: Path) -> BlockTable:
    """Read `<binary>.blocks.json`; a missing or foreign file is an InputError naming it."""
    path = side_paths(binary)["blocks"]
    data = _read_json(path, "block table")
    if data.get("version") != SIDE_VERSION:
        raise InputError(f"{path}: block table version {data.get('version')!r}, expected {SIDE_VERSION}; "
                         f"rebuild with pptmc instrument")
    blocks = {b["id"]: BlockEntry(b["id"], b["function"], b["label"], b["is_shared_var_block"],
                                  b["host_block"], {k: int(b["ops"][k]) for k in OP_KEYS},
                                  {k: int(v) for k, v in b.get("chain", {}).items()},
                                  {k: int(v) for k, v in b.get("calls", {}).items()},
                                  int(b.get("barriers", 0)), int(b.get("nowait", 0)))
              for b in data["blocks"]}
    return BlockTable(data["mode"], data["table_hash"], blocks, data["sites"], data["functions"])


def load_cfg(binary: Path) -> dict:
    """Read `<binary>.cfg.json` (schema in instrument/FORMAT.md)."""
    path = side_paths(binary)["cfg"]
    data = _read_json(path, "CFG")
    if data.get("version") != 1:
        raise InputError(f"{path}: CFG version {data.get('version')!r}, expected 1; rebuild with pptmc instrument")
    return data


def _read_json(path: Path, what: str) -> dict:
    """A side file's JSON; missing or unreadable files name the fix."""
    if not path.is_file():
        raise InputError(f"{path}: {what} side file not found; build the binary with pptmc instrument")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: {what} is not valid JSON (line {exc.lineno}): rebuild with pptmc instrument") from exc
