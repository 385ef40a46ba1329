"""Describe the current host as a machine file: cache geometry from sysfs, figures from microbenchmarks.

The C microbenchmarks in machines/microbench/ are compiled with clang-19 -O2 and run once each:
ops.c (latency: dependent chains; throughput: independent chains), chase.c (pointer-chasing
latency per working-set size), lines.c (lines per second each level delivers) and stream.c
(OpenMP read bandwidth from RAM), tlb.c (cost of touching more pages than the TLBs map), stores.c
(stores that cannot pair in one line), transfer.c (lines last written by another core). Times come back in ns and
become cycles with the frequency measured by the dependent integer-add chain (1 cycle per add).
"""
from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from importlib import resources

import numpy as np
from pathlib import Path
from typing import Callable, Iterable

from machines.loader import SCHEMA_VERSION, validate_machine_dict
from machines.model import OP_CLASSES
from common.errors import ToolError
from common.toolchain import toolchain

SYSFS_CPU = Path("/sys/devices/system/cpu")
Progress = Callable[[str], None]
_KIB = 1024
_MIB = 1024 * 1024


@dataclass(frozen=True)
class SysCache:
    """One data or unified cache as sysfs describes it."""

    level: int
    size_bytes: int
    line_bytes: int
    associativity: int
    shared: bool
    # physical cores sharing one instance of a shared level (0 when private). Not compared: two descriptions of
    # one chip must agree on its geometry; the grouping needs every CPU's topology (physical_cores)
    cores_sharing: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Effort:
    """How long each microbenchmark runs; quick mode trades accuracy for a few seconds."""

    op_iterations: int
    op_runs: int
    chase_loads: int
    stream_reps: int
    ram_set_bytes: int
    sync_rounds: int = 20_000
    chase_runs: int = 1
    cold_reps: int = 15   # coldstart.c: each repetition writes and frees a 64 MiB flush buffer (~15 ms)


# Many short stream repetitions (64 MiB each, ~1 ms in L2) and the best kept: a repetition longer than
# a scheduler time slice is preempted on a busy host, which halved the L2 figure when they were 512 MiB.
# Pointer chases likewise: 7 runs of 500k loads, the fastest kept.
FULL = Effort(op_iterations=500_000, op_runs=3, chase_loads=500_000, stream_reps=15, ram_set_bytes=1024 * _MIB,
              chase_runs=7)
QUICK = Effort(op_iterations=200_000, op_runs=1, chase_loads=200_000, stream_reps=1, ram_set_bytes=128 * _MIB,
               sync_rounds=2_000, cold_reps=3)


def _read(path: Path) -> str:
    return path.read_text().strip()


def parse_size(text: str) -> int:
    """sysfs/lscpu sizes like '48K', '2048K', '480 MiB' -> bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"unrecognised size {text!r}")
    return int(m.group(1)) * {"": 1, "K": _KIB, "M": _MIB, "G": 1024 * _MIB}[m.group(2).upper()]


def cpu_list(text: str) -> set[int]:
    """'0-3,8' -> {0, 1, 2, 3, 8}."""
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def sysfs_caches(cpu_dir: Path = SYSFS_CPU / "cpu0") -> list[SysCache]:
    """Data and unified caches of one CPU, L1 first; shared = serves more than this core's threads, and then
    cores_sharing = the physical cores in its shared_cpu_list (hyperthreads folded)."""
    siblings = cpu_list(_read(cpu_dir / "topology" / "thread_siblings_list"))
    out = []
    for index in sorted((cpu_dir / "cache").glob("index*")):
        if _read(index / "type") == "Instruction":
            continue
        ways_file = index / "ways_of_associativity"
        sharing = cpu_list(_read(index / "shared_cpu_list"))
        shared = bool(sharing - siblings)
        out.append(SysCache(level=int(_read(index / "level")), size_bytes=parse_size(_read(index / "size")),
                            line_bytes=int(_read(index / "coherency_line_size")),
                            associativity=int(_read(ways_file)) if ways_file.exists() else 0,
                            shared=shared, cores_sharing=physical_cores(cpu_dir.parent, sharing) if shared else 0))
    return sorted(out, key=lambda c: c.level)


def lscpu_caches(text: str, cores: int) -> list[SysCache]:
    """Parse `lscpu -C --bytes`; a level is shared when one instance serves more than one of the chip's `cores`
    (cores x one instance / the total: all of them when one instance is the whole total)."""
    lines = [line.split() for line in text.strip().splitlines()]
    if not lines:
        return []
    head = lines[0]
    out = []
    for cols in lines[1:]:
        row = dict(zip(head, cols))
        if row.get("TYPE") == "Instruction":
            continue
        one, total = parse_size(row["ONE-SIZE"]), parse_size(row["ALL-SIZE"])
        group = cores * one // total if total >= one > 0 else 0
        out.append(SysCache(level=int(row["LEVEL"]), size_bytes=one, line_bytes=int(row["COHERENCY-SIZE"]),
                            associativity=int(row.get("WAYS") or 0), shared=group > 1,
                            cores_sharing=group if group > 1 else 0))
    return sorted(out, key=lambda c: c.level)


def host_caches(cores: int) -> list[SysCache]:
    """Cache geometry from sysfs, else from lscpu."""
    try:
        return sysfs_caches()
    except (OSError, ValueError) as sys_exc:
        try:
            res = subprocess.run(["lscpu", "-C", "--bytes"], capture_output=True, text=True, check=True)
            return lscpu_caches(res.stdout, cores)
        except (OSError, subprocess.CalledProcessError, ValueError, KeyError) as exc:
            raise ToolError(f"{SYSFS_CPU}/cpu0/cache: cannot read the cache description ({sys_exc}) and "
                            f"lscpu failed ({exc}); write the machine file by hand (see machines/SCHEMA.md)") from exc


def physical_cores(root: Path = SYSFS_CPU, cpus: Iterable[int] | None = None) -> int:
    """Distinct (package, core) pairs among `cpus` (default: the CPUs this process may run on)."""
    cores = set()
    for cpu in os.sched_getaffinity(0) if cpus is None else cpus:
        topo = root / f"cpu{cpu}" / "topology"
        try:
            cores.add((_read(topo / "physical_package_id"), _read(topo / "core_id")))
        except OSError:
            cores.add(("?", str(cpu)))
    return max(1, len(cores))


def cpu_flags() -> set[str]:
    """The CPU feature flags of /proc/cpuinfo (empty where there is none)."""
    try:
        return set(re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M).group(1).split())
    except (OSError, AttributeError):
        return set()


def simd_width_bits() -> tuple[int, str]:
    """Widest vector ISA the CPU flags advertise."""
    flags = cpu_flags()
    for flag, bits in (("avx512f", 512), ("avx2", 256), ("avx", 256), ("sse2", 128)):
        if flag in flags:
            return bits, f"/proc/cpuinfo flag {flag}"
    return 128, f"assumed 128-bit vectors on {platform.machine()}"


def cpuinfo_mhz() -> float | None:
    """Nominal MHz from /proc/cpuinfo, for a cross-check of the measured frequency."""
    try:
        m = re.search(r"^cpu MHz\s*:\s*([\d.]+)", Path("/proc/cpuinfo").read_text(), re.M)
    except OSError:
        return None
    return float(m.group(1)) if m else None


def _compile(source: str, out: Path, extra: list[str], openmp: bool = False) -> Path:
    """Build one shipped microbenchmark with clang-19 -O2."""
    tc = toolchain()
    with resources.as_file(resources.files("machines") / "microbench" / source) as src:
        cmd = [str(tc.clang), "-O2", "-w", *extra, str(src), "-o", str(out)]
        if openmp:
            cmd[1:1] = tc.openmp_compile_flags()
            cmd += tc.openmp_link_flags()
        res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        raise ToolError(f"{src}: clang failed ({res.stderr.strip()[:500]}); run `pptmc doctor`")
    return out


def _run(binary: Path, *args: object, env: dict | None = None) -> dict[str, float]:
    """Run a microbenchmark and parse its key=value lines."""
    res = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, env=env, timeout=300)
    if res.returncode:
        raise ToolError(f"{binary.name} {' '.join(map(str, args))} failed: {res.stderr.strip()[:300]}")
    out = {}
    for line in res.stdout.splitlines():
        key, _, value = line.partition("=")
        if key != "sink":
            out[key] = float(value)
    return out


def _ops_flags() -> list[str]:
    """No vectorising or contraction, so each C operation stays one instruction; native ISA for FMA."""
    flags = ["-fno-vectorize", "-fno-slp-vectorize", "-ffp-contract=off"]
    return flags + (["-march=native"] if platform.machine() in ("x86_64", "aarch64") else [])


def measure_ops(workdir: Path, effort: Effort, progress: Progress) -> tuple[float, dict[str, dict[str, float]]]:
    """(frequency GHz, op -> {latency, recip_throughput} in cycles)."""
    progress("compiling and running ops.c (operation latency and throughput)")
    binary = _compile("ops.c", workdir / "ops", _ops_flags())
    runs = [_run(binary, effort.op_iterations) for _ in range(effort.op_runs)]
    cycles = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    ghz = max(run["ghz"] for run in runs)  # a dependent 64-bit add takes one cycle on every x86/Arm core
    ops = {op: {"latency": round(cycles[f"{op}.latency"], 2),
                "recip_throughput": round(cycles[f"{op}.recip_throughput"], 3)} for op in OP_CLASSES}
    return ghz, ops


def _chase_ns(binary: Path, size: int, loads: int) -> float:
    return _run(binary, size, loads, 12345)["ns_per_load"]


def _stream_gbs(binary: Path, size: int, reps: int, threads: list[int]) -> dict[int, float]:
    kib = max(4, size // _KIB)
    passes = max(1, (64 * _MIB) // (kib * _KIB)) if size < 64 * _MIB else 1
    reps = reps if size < 64 * _MIB else max(1, reps // 3)  # a RAM-sized pass is long already
    res = _run(binary, kib, passes, reps, *threads)
    return {t: res[f"gbs_{t}"] for t in threads}


def _line_ns(binary: Path, size: int, line_bytes: int, reps: int) -> float:
    """Nanoseconds per line a level delivers (lines.c), over about 64 MiB of lines per repetition."""
    kib = max(4, size // _KIB)
    passes = max(1, (64 * _MIB) // (kib * _KIB))
    return _run(binary, kib, line_bytes, passes, reps)["ns_per_line"]


def measure_memory(workdir: Path, caches: list[SysCache], cores: int, ghz: float, l1_recip: float,
                   effort: Effort, progress: Progress) -> tuple[list[dict], dict]:
    """Latency per cache level and for RAM (pointer chase), line throughput per level (lines),
    bandwidths (stream)."""
    chase = _compile("chase.c", workdir / "chase", [])
    lines = _compile("lines.c", workdir / "lines", [])
    stream = _compile("stream.c", workdir / "stream", [], openmp=True)
    levels = []
    for i, cache in enumerate(caches):
        # Just beyond the previous level (at most half this one): huge, partly virtual LLCs of
        # cloud VMs would otherwise time TLB walks and far slices instead of the common case.
        size = cache.size_bytes // 2 if i == 0 else min(cache.size_bytes // 2, 4 * caches[i - 1].size_bytes)
        size = min(size, effort.ram_set_bytes // 2)
        progress(f"L{cache.level}: pointer chase and line throughput over {size // _KIB} KiB")
        lat_ns = min(_chase_ns(chase, size, effort.chase_loads) for _ in range(effort.chase_runs))
        # L1 serves one access per load; deeper levels move one line per access they serve.
        if i == 0:
            recip, how = l1_recip, "ops.c independent loads"
        else:
            line_ns = _line_ns(lines, size, cache.line_bytes, effort.stream_reps)
            recip, how = round(line_ns * ghz, 2), f"lines.c, one load per line ({line_ns:.3f} ns per line)"
        if cache.associativity < 1:
            raise ToolError(f"L{cache.level}: this host reports no associativity (sysfs ways_of_associativity, "
                            f"lscpu WAYS); write the machine file by hand from the CPU's manual")
        group, group_note = instance_grouping(cache, cores)
        levels.append({"name": f"L{cache.level}", "size_bytes": cache.size_bytes, "line_bytes": cache.line_bytes,
                       "associativity": cache.associativity, "latency_cycles": round(lat_ns * ghz, 1),
                       "recip_throughput_cycles": recip, "shared": cache.shared, **group,
                       "source": f"geometry: sysfs or lscpu{group_note}; latency: chase.c over {size // _KIB} KiB "
                                 f"({lat_ns:.2f} ns); throughput: {how}"})
    ram_set = min(effort.ram_set_bytes, max(2 * caches[-1].size_bytes, 64 * _MIB))
    progress(f"RAM: pointer chase over {ram_set // _MIB} MiB, stream on 1 and {cores} threads")
    # Two runs only: each builds a random cycle over the whole set, which takes seconds.
    ram_ns = min(_chase_ns(chase, ram_set, max(1, effort.chase_loads // 4))
                 for _ in range(min(2, effort.chase_runs)))
    bw = _stream_gbs(stream, ram_set, effort.stream_reps, sorted({1, cores}))
    note = "" if ram_set >= 2 * caches[-1].size_bytes else " (set not above the last-level cache: may be optimistic)"
    ram = {"latency_ns": round(ram_ns, 1), "bandwidth_one_core_gbs": round(bw[1], 2),
           "bandwidth_all_cores_gbs": round(max(bw.values()), 2),
           "source": f"chase.c over {ram_set // _MIB} MiB; stream.c read bandwidth on 1 and {cores} threads{note}"}
    return levels, ram


COLD_FLUSH_BYTES = 64 << 20  # the benchmark harness's default flush (benchmarks/polybench/pbench.c)
STRIDED_ROWS = 500           # rows of strided.c's column walks (a PolyBench MEDIUM matrix)


def instance_grouping(cache: SysCache, cores: int) -> tuple[dict, str]:
    """The level's `cores_per_instance` entry ({} when one instance serves all `cores`, or it is private) and a
    note for its source: a shared level shared by fewer cores than the machine's gets one per group, when the
    group divides the cores (a process allowed on some cores of a group's only cannot say)."""
    k = cache.cores_sharing
    if not cache.shared or not 0 < k < cores:
        return {}, ""
    if cores % k:
        return {}, (f" (one instance per {k} cores, which does not divide the {cores} cores this process may use: "
                    f"written as shared by all)")
    return {"cores_per_instance": k}, f"; one instance per {k} cores (sysfs shared_cpu_list or lscpu totals)"


def measure_strided(workdir: Path, l1: SysCache, effort: Effort, progress: Progress) -> dict:
    """ns per cold line of a column walk over 1, 2, 4, .. of the L1's sets (strided.c), as ram fields."""
    sets = l1.size_bytes // (l1.line_bytes * l1.associativity) if l1.associativity > 0 else 1
    if sets & (sets - 1):
        return {}
    progress(f"compiling and running strided.c (cold column walks over 1..{sets} L1 sets)")
    res = _run(_compile("strided.c", workdir / "strided", []), sets, l1.line_bytes, STRIDED_ROWS, effort.cold_reps)
    costs = [round(res[f"sets_{1 << i}"], 2) for i in range(sets.bit_length())]
    return {"strided_cold_line_ns": costs,
            "source": f"strided.c: cold column walks of {STRIDED_ROWS} rows, one load per line, over 1..{sets} "
                      f"L1 sets, median of {effort.cold_reps}"}


def measure_parallel(workdir: Path, cores: int, effort: Effort, progress: Progress) -> dict:
    """Fork/join and barrier cost with all cores (overhead.c, best of 5 repetitions)."""
    progress(f"compiling and running overhead.c (OpenMP fork/join and barrier on {cores} threads)")
    binary = _compile("overhead.c", workdir / "overhead", [], openmp=True)
    res = _run(binary, effort.sync_rounds, 5, cores)
    progress("compiling and running coldstart.c (the first parallel region after a cache flush)")
    env = dict(os.environ, OMP_PROC_BIND="close", OMP_PLACES="cores")
    cold = _run(_compile("coldstart.c", workdir / "coldstart", [], openmp=True), COLD_FLUSH_BYTES, effort.cold_reps,
                *sorted({1, cores}), env=env)
    extra = {t: max(0.0, cold[f"cold_ns_{t}"] - cold[f"warm_ns_{t}"]) for t in sorted({1, cores})}
    return {"fork_join_ns": round(res[f"fork_join_ns_{cores}"], 1), "barrier_ns": round(res[f"barrier_ns_{cores}"], 1),
            "cold_start_ns": round(extra[cores], 1), "cold_start_one_ns": round(extra[1], 1),
            "source": f"overhead.c on this host, {cores} threads: empty parallel region (fork/join) and a "
                      f"one-iteration-per-thread omp for (implied barrier), best of 5 x {effort.sync_rounds}; "
                      f"coldstart.c: the first region after a {COLD_FLUSH_BYTES >> 20} MiB flush as the benchmark "
                      f"harness does it, less a warm one, median of {effort.cold_reps}, on {cores} threads and on 1"}


def measure_calls(workdir: Path, ghz: float, effort: Effort, progress: Progress) -> dict:
    """Cost of common C math library calls in cycles (libm.c, built like the benchmarks)."""
    progress("compiling and running libm.c (C math library calls)")
    binary = _compile("libm.c", workdir / "libm", ["-lm"])
    res = _run(binary, max(4, effort.op_iterations * 2))
    names = sorted({key.split(".")[0] for key in res})
    return {name: {"latency": round(res[f"{name}.latency_ns"] * ghz, 1),
                   "recip_throughput": round(res[f"{name}.recip_ns"] * ghz, 1),
                   "source": "libm.c on this host (clang -O2, default target): independent calls "
                             "(throughput); dependent calls, one multiply-add included (latency)"}
            for name in names}


# Page counts tlb.c sweeps: first-level knee (lines stay in L1), then the second level's.
TLB_FIRST_PAGES = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768)
TLB_SECOND_PAGES = (1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
TLB_MIN_STEP_CYCLES = 0.1   # a smaller paged - dense step is noise: no TLB level is reported
TLB_WALK_MIN_CYCLES = 2.0   # a page walk costs more than this over the first level's miss


def tlb_levels(extra_cycles: dict[int, float], page_bytes: int,
               rmw_cycles: dict[int, float] | None = None) -> list[dict]:
    """TLB levels from the extra cycles per load that touching P pages costs (tlb.c, paged - dense).

    The first level's miss cost is the plateau over 256-768 pages; its entries, the largest page count
    before the curve is half-way up to it. The second level's cost is the plateau past its knee (the
    median from twice the first count that costs TLB_WALK_MIN_CYCLES more) less the first level's, its
    entries found the same way. A cyclic sweep measures capacity, not ways: levels are reported fully
    associative. `rmw_cycles` (tlb.c's in-place column updates, paged - dense) gives the first level's
    rmw_miss_cycles, the median over the same plateau.
    """
    first = [extra_cycles[p] for p in TLB_FIRST_PAGES if 256 <= p and p in extra_cycles]
    if not first or statistics.median(first) < TLB_MIN_STEP_CYCLES:
        return []
    step1 = statistics.median(first)
    entries1 = _knee(extra_cycles, TLB_FIRST_PAGES, 0.0, step1)
    levels = [{"name": "DTLB", "entries": entries1, "page_bytes": page_bytes, "step": step1}]
    # the second level's plateau: the median past twice the first count that costs a walk (the largest
    # counts also pay for page-table lines that no longer fit the caches, so the maximum is no plateau)
    jump = next((p for p in TLB_SECOND_PAGES if extra_cycles.get(p, 0.0) >= step1 + TLB_WALK_MIN_CYCLES), None)
    if jump is not None:
        plateau = statistics.median([v for p, v in extra_cycles.items() if p >= 2 * jump] or [extra_cycles[jump]])
        entries2 = _knee(extra_cycles, TLB_SECOND_PAGES, step1, plateau)
        if entries2 > entries1 and plateau - step1 >= TLB_MIN_STEP_CYCLES:
            levels.append({"name": "STLB", "entries": entries2, "page_bytes": page_bytes, "step": plateau - step1})
    rmw = [rmw_cycles[p] for p in TLB_FIRST_PAGES if 256 <= p and p in (rmw_cycles or {})]
    if rmw and statistics.median(rmw) > step1:
        levels[0]["rmw"] = statistics.median(rmw)
    return [{"name": lv["name"], "entries": lv["entries"], "associativity": 0, "fully_associative": True,
             "page_bytes": lv["page_bytes"],
             "miss_cycles": round(lv["step"], 2), **({"rmw_miss_cycles": round(lv["rmw"], 2)} if "rmw" in lv else {})}
            for lv in levels]


def _knee(extra_cycles: dict[int, float], pages: tuple[int, ...], low: float, high: float) -> int:
    """Largest page count whose extra cost, and that of every smaller count, is below half-way."""
    entries = pages[0]
    for p in pages:
        if extra_cycles.get(p, high) >= low + 0.5 * (high - low):
            break
        entries = p
    return entries


def measure_tlb(workdir: Path, ghz: float, line_bytes: int, effort: Effort, progress: Progress) -> list[dict]:
    """Data TLB levels of this host from tlb.c ([] when touching more pages costs nothing measurable)."""
    progress("compiling and running tlb.c (address translation: TLB reach and miss costs)")
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    pages = TLB_FIRST_PAGES + TLB_SECOND_PAGES
    res = _run(_compile("tlb.c", workdir / "tlb", []), page, line_bytes, max(1_000_000, effort.op_iterations * 10),
               *pages)
    extra = {p: (res[f"paged_{p}"] - res[f"dense_{p}"]) * ghz for p in pages}
    rmw = {p: (res[f"rmw_paged_{p}"] - res[f"rmw_dense_{p}"]) * ghz for p in pages if f"rmw_paged_{p}" in res}
    levels = tlb_levels(extra, page, rmw)
    curve = ", ".join(f"{p}: {extra[p]:.2f}" for p in pages)
    rmw_curve = ", ".join(f"{p}: {rmw[p]:.2f}" for p in TLB_FIRST_PAGES if p in rmw)
    for lv in levels:
        lv["source"] = (f"tlb.c on this host: extra cycles per load when each load is on its own {page}-byte page "
                        f"(page count: cycles) {curve}; entries = knee of that curve, cost = step past it "
                        f"(fully associative assumed)"
                        + (f"; in-place updates down a column, one row per page: {rmw_curve}" if "rmw_miss_cycles" in lv
                           else ""))
    return levels


def measure_stores(workdir: Path, ghz: float, line_bytes: int, effort: Effort, progress: Progress) -> dict:
    """Cycles per store into L1 when each store writes another line than the one before (stores.c)."""
    progress("compiling and running stores.c (stores to the same or to another line)")
    res = _run(_compile("stores.c", workdir / "stores", []), line_bytes, max(1_000_000, effort.op_iterations * 20))
    return {"store_new_line_cycles": round(res["new_line_ns"] * ghz, 3),
            "source": f"stores.c on this host: independent stores into L1, each to another line "
                      f"({res['new_line_ns']:.4f} ns) against along one line ({res['same_line_ns']:.4f} ns)"}


TRANSFER_PHASES = 100


def measure_transfer(workdir: Path, ghz: float, caches: list[SysCache], cores: int, progress: Progress) -> dict:
    """The [coherence] table: cycles per line a core pays for lines another core just wrote (transfer.c
    over a quarter of the private L2, the size of a thread's share of a shared matrix); {} on one core."""
    if cores < 2:
        return {}
    progress("compiling and running transfer.c (lines last written by another core)")
    private = [c for c in caches if not c.shared] or caches[:1]
    lines = max(64, private[-1].size_bytes // private[-1].line_bytes // 4)
    env = dict(os.environ, OMP_PROC_BIND="close", OMP_PLACES="cores")
    res = _run(_compile("transfer.c", workdir / "transfer", [], openmp=True), caches[0].line_bytes, lines,
               TRANSFER_PHASES, env=env)
    return {"transfer_cycles": round(res["other_ns"] * ghz, 2),
            "source": f"transfer.c on this host, 2 threads on 2 cores at once: {lines} lines in rows of one page "
                      f"that change owner every phase ({res['other_ns']:.3f} ns per line per core; "
                      f"{res['same_ns']:.3f} ns when every row keeps its owner)"}


def core_table(window: dict, stores: dict, mcpu: dict | None = None) -> dict:
    """The [core] table from the window, store and llvm-mca figures (any may be missing), one source."""
    parts = (window, stores, mcpu or {})
    figures = {k: v for part in parts for k, v in part.items() if k != "source"}
    if not figures:
        return {}
    return {**figures, "source": "; ".join(part["source"] for part in parts if part)}


# CPUID features that only newer cores have: a hypervisor may report an older model number (this
# project's KVM guest shows family 6 model 167, Rocket Lake, on Golden Cove cores with AMX and
# AVX512-FP16), and clang's -march=native then names the older core.
_FEATURE_CORES = (("amx_tile", "sapphirerapids"), ("avx512_fp16", "sapphirerapids"))


def llvm_processor(progress: Progress) -> dict:
    """The [core] llvm_mcpu figure: the scheduling model llvm-mca should use for this host ({} if unknown)."""
    progress("naming the core for llvm-mca (clang -march=native)")
    flags = cpu_flags()
    for feature, name in _FEATURE_CORES:
        if feature in flags:
            return {"llvm_mcpu": name, "source": f"llvm_mcpu: CPUID feature {feature} (Golden Cove or later)"}
    proc = subprocess.run([str(toolchain().clang), "-march=native", "-###", "-c", "-x", "c", "/dev/null"],
                          capture_output=True, text=True, check=False)
    found = re.search(r'"-target-cpu" "([^"]+)"', proc.stderr)
    if not found or found.group(1) in ("x86-64", "generic"):
        return {}
    return {"llvm_mcpu": found.group(1), "source": f"llvm_mcpu: clang-19 -march=native on this host"}


WINDOW_OPS_PER_ITERATION = 6  # window.c's loops: load, fmul or fdiv, fadd, index add, compare, branch
LONG_CHAIN_MIN_ITERATIONS = 256  # window.c's instances from here on save a constant time each


def measure_window(workdir: Path, effort: Effort, progress: Progress) -> dict:
    """How chain instances overlap in the out-of-order window, from window.c ({} when nothing fits)."""
    progress("compiling and running window.c (overlap of dependence chain instances)")
    binary = _compile("window.c", workdir / "window", [])
    runs = [_run(binary, max(100_000, effort.op_iterations * 4)) for _ in range(3)]
    return window_figures({key: statistics.median(run[key] for run in runs) for key in runs[0]})


def window_figures(res: dict[str, float]) -> dict:
    """reorder_window_ops from short instances and chain_lookahead_ops from long ones (either may be missing).

    Short instances of L iterations overlap 1 + W / (6 L) times (on the Intel host within 10% for
    L = 64..128 of the divide chain): W is the median over the lengths where that overlap is neither
    capped by divide throughput nor lost in noise (1.15 to 3). Long instances (L >= 256) take c L - b
    cycles each: the next instance's first k iterations run under this one's tail, less a loop-exit
    cost P, so b = c k - P; the two chains (different c) give k and P, and the lookahead is 6 k.
    """
    out, how = {}, []
    div = _series(res, "div")
    fits = [_instance_line(_series(res, kind)) for kind in ("add", "div")]
    if div:
        full = fits[1][0] if fits[1] else div[max(div)]  # the chain's own cost per iteration, no overlap
        estimates = [(full / t - 1.0) * WINDOW_OPS_PER_ITERATION * n for n, t in div.items()
                     if n < LONG_CHAIN_MIN_ITERATIONS and 1.15 <= full / t <= 3.0]
        if estimates:
            out["reorder_window_ops"] = round(statistics.median(estimates))
            how.append(f"short instances overlap 1 + W / (6 L), median over {len(estimates)} lengths")
    if all(fits) and fits[1][0] > fits[0][0] * 1.5:
        (c_add, b_add), (c_div, b_div) = fits
        ahead = (b_div - b_add) / (c_div - c_add)
        if ahead > 0:
            out["chain_lookahead_ops"] = round(ahead * WINDOW_OPS_PER_ITERATION)
            how.append(f"long instances (L >= {LONG_CHAIN_MIN_ITERATIONS}) cost c L - b: c = {c_add:.2f} / "
                       f"{c_div:.2f} ns per iteration (add / divide chain), next instance's first "
                       f"{ahead:.1f} iterations run under the tail, loop exit {c_add * ahead - b_add:.1f} ns")
    if not out:
        return {}
    return {**out, "source": "window.c on this host: " + "; ".join(how)}


def _series(res: dict[str, float], kind: str) -> dict[int, float]:
    """window.c's ns per iteration by instance length for one chain kind."""
    return {int(k.split("_")[1]): v for k, v in res.items() if k.startswith(kind + "_")}


def _instance_line(series: dict[int, float]) -> tuple[float, float] | None:
    """Least-squares (c, b) of ns per instance = c L - b over the long instances (None if fewer than 3)."""
    long = sorted(n for n in series if n >= LONG_CHAIN_MIN_ITERATIONS)
    if len(long) < 3:
        return None
    lengths = np.array(long, dtype=float)
    per_instance = np.array([series[n] * n for n in long])
    (c, minus_b), *_ = np.linalg.lstsq(np.vstack([lengths, np.ones_like(lengths)]).T, per_instance, rcond=None)
    return float(c), float(-minus_b)


def detect_host(quick: bool = False, progress: Progress | None = None) -> dict:
    """A TOML-ready, validated machine dict for this host (quick: seconds instead of ~a minute)."""
    say = progress or (lambda _msg: None)
    effort = QUICK if quick else FULL
    start = time.monotonic()
    cores = physical_cores()
    # whether a cache is shared is a property of the chip, not of this process's CPU affinity
    caches = host_caches(physical_cores(cpus=range(os.cpu_count() or 1)))
    if not caches:
        raise ToolError(f"{SYSFS_CPU}/cpu0/cache: no cache description found; write the machine file by hand "
                        "(see machines/SCHEMA.md)")
    simd, simd_src = simd_width_bits()
    with tempfile.TemporaryDirectory(prefix="pptmc-detect-") as tmp:
        ghz, ops = measure_ops(Path(tmp), effort, say)
        levels, ram = measure_memory(Path(tmp), caches, cores, ghz, ops["load"]["recip_throughput"], effort, say)
        strided = measure_strided(Path(tmp), caches[0], effort, say)
        if strided:
            ram = {**ram, "strided_cold_line_ns": strided["strided_cold_line_ns"],
                   "source": f"{ram['source']}; {strided['source']}"}
        parallel = measure_parallel(Path(tmp), cores, effort, say)
        calls = measure_calls(Path(tmp), ghz, effort, say)
        core = core_table(measure_window(Path(tmp), effort, say),
                          measure_stores(Path(tmp), ghz, caches[0].line_bytes, effort, say), llvm_processor(say))
        tlbs = measure_tlb(Path(tmp), ghz, caches[0].line_bytes, effort, say)
        coherence = measure_transfer(Path(tmp), ghz, caches, cores, say)
    nominal = cpuinfo_mhz()
    data = {"schema_version": SCHEMA_VERSION, "name": f"host-{platform.node() or 'unknown'}",
            "description": f"{_model_name()} as measured by pptmc machines detect"
                           f"{' --quick' if quick else ''} on {time.strftime('%Y-%m-%d')}",
            "cores": cores, "frequency_ghz": round(ghz, 3), "bus_width_bytes": 8, "simd_width_bits": simd,
            "source": f"cores: sysfs topology; frequency: dependent add chain in ops.c "
                      f"(/proc/cpuinfo says {nominal} MHz); bus width: assumed one 64-bit DDR channel; "
                      f"SIMD: {simd_src}",
            "caches": levels, "ram": ram,
            "ops": {op: {**ops[op], "source": "ops.c on this host: dependent chain (latency), 8 independent "
                                              "chains (throughput)"} for op in OP_CLASSES},
            "parallel": parallel, "calls": calls, **({"core": core} if core else {}),
            **({"tlbs": tlbs} if tlbs else {}), **({"coherence": coherence} if coherence else {})}
    validate_machine_dict(data, "detected host")
    say(f"done in {time.monotonic() - start:.1f} s")
    return data


def _model_name() -> str:
    try:
        m = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
    except OSError:
        m = None
    return m.group(1).strip() if m else platform.processor() or platform.machine()
