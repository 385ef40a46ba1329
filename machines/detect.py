"""Describe a host as a machine file: cache geometry from sysfs, figures from microbenchmarks.

The C microbenchmarks in machines/microbench/ are compiled with clang-19 -O2 and run as
machines/probeplan.py plans them: ops.c (latency: dependent chains; throughput: independent chains),
chase.c (pointer-chasing latency per working-set size), lines.c (lines per second each level delivers)
and stream.c (OpenMP read bandwidth from RAM), tlb.c (cost of touching more pages than the TLBs map),
stores.c (stores that cannot pair in one line), transfer.c (lines last written by another core), and per
active-core count cores.c (one core's throughput while p run) with stream.c, overhead.c and transfer.c again
for the [curves] table (machines/detect_curves.py). Times
come back in ns and become cycles with the frequency measured by the dependent integer-add chain (1 cycle
per add). `machine_from_raw` turns the runs' raw output into the machine file, for `detect_host` on this
host and for a probe kit's results (pptmc machines ingest) alike.
"""
from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from machines import probeplan
from machines.detect_curves import cold_extra_ns, curve_figures
from machines.loader import SCHEMA_VERSION, validate_machine_dict
from machines.model import OP_CLASSES
from machines.probeplan import (COLD_FLUSH_BYTES, FULL, QUICK, STRIDED_ROWS, SYSFS_CPU, TLB_FIRST_PAGES,  # noqa: F401
                                TLB_SECOND_PAGES, TRANSFER_PHASES, Effort, ProbeError, Step, SysCache, cpu_flags,
                                cpu_list, facts_caches, lines_args, lscpu_caches, parse_size, physical_cores,
                                sysfs_caches)
from common.errors import InputError, ToolError
from common.toolchain import toolchain

Progress = Callable[[str], None]
OPENMP_PROGRAMS = frozenset({"stream", "overhead", "coldstart", "transfer", "cores"})
_KIB = 1024
_MIB = 1024 * 1024


def simd_width_bits(flags: set[str] | None = None, machine: str | None = None) -> tuple[int, str]:
    """Widest vector ISA the CPU flags advertise (this host's unless given)."""
    flags = cpu_flags() if flags is None else flags
    for flag, bits in (("avx512f", 512), ("avx2", 256), ("avx", 256), ("sse2", 128)):
        if flag in flags:
            return bits, f"/proc/cpuinfo flag {flag}"
    return 128, f"assumed 128-bit vectors on {machine or platform.machine()}"


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


def ops_flags(march: str | None = "native") -> list[str]:
    """No vectorising or contraction, so each C operation stays one instruction; -march=`march` on x86-64 and
    Arm for FMA (detect: this host's ISA; a probe kit names a portable one, or None for the default target)."""
    flags = ["-fno-vectorize", "-fno-slp-vectorize", "-ffp-contract=off"]
    return flags + ([f"-march={march}"] if march and platform.machine() in ("x86_64", "aarch64") else [])


def build_program(program: str, out: Path, ops: list[str] | None = None) -> Path:
    """Compile microbench/<program>.c into `out` with the flags detect uses (`ops` replaces ops.c's
    native-ISA flags, for a probe kit built for other machines)."""
    # -lm: a target without FMA instructions (a kit's ops-base) calls fma() for __builtin_fma
    extra = {"ops": [*(ops_flags() if ops is None else ops), "-lm"], "libm": ["-lm"]}.get(program, [])
    return _compile(f"{program}.c", out, extra, openmp=program in OPENMP_PROGRAMS)


def _run(binary: Path, *args: object, env: dict | None = None) -> dict[str, float]:
    """Run a microbenchmark and parse its key=value lines."""
    try:
        return probeplan.run_program(binary, args, env)
    except ProbeError as exc:
        raise ToolError(str(exc)) from exc


def run_steps(workdir: Path, steps: list[Step], progress: Progress) -> dict[str, list[dict]]:
    """Compile the programs `steps` name into workdir and run them here: the raw results."""
    binaries = {s.program: build_program(s.program, workdir / s.program) for s in steps}
    try:
        return probeplan.run_plan(steps, binaries.__getitem__, os.environ, progress)
    except ProbeError as exc:
        raise ToolError(str(exc)) from exc


def _median_run(runs: list[dict]) -> dict[str, float]:
    """Per key, the median over the runs of one step."""
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def _line_ns(binary: Path, size: int, line_bytes: int, reps: int) -> float:
    """Nanoseconds per line a level delivers (lines.c), over about 64 MiB of lines per repetition."""
    return _run(binary, *lines_args(size, line_bytes, reps))["ns_per_line"]


def ops_figures(runs: list[dict]) -> tuple[float, dict[str, dict[str, float]]]:
    """(frequency GHz, op -> {latency, recip_throughput} in cycles) from ops.c's runs."""
    cycles = _median_run(runs)
    ghz = max(run["ghz"] for run in runs)  # a dependent 64-bit add takes one cycle on every x86/Arm core
    ops = {op: {"latency": round(cycles[f"{op}.latency"], 2),
                "recip_throughput": round(cycles[f"{op}.recip_throughput"], 3)} for op in OP_CLASSES}
    return ghz, ops


def memory_figures(raw: Mapping[str, list[dict]], caches: list[SysCache], cores: int, ghz: float,
                   l1_recip: float, effort: Effort, geometry_from: str = "sysfs or lscpu") -> tuple[list[dict], dict]:
    """Latency per cache level and for RAM (pointer chase), line throughput per level (lines),
    bandwidths (stream); `geometry_from` says where the cache geometry was read."""
    levels = []
    for i, cache in enumerate(caches):
        size = probeplan.level_set_bytes(caches, i, effort)
        lat_ns = min(run["ns_per_load"] for run in raw[f"chase.L{cache.level}"])
        # L1 serves one access per load; deeper levels move one line per access they serve.
        if i == 0:
            recip, how = l1_recip, "ops.c independent loads"
        else:
            line_ns = raw[f"lines.L{cache.level}"][0]["ns_per_line"]
            recip, how = round(line_ns * ghz, 2), f"lines.c, one load per line ({line_ns:.3f} ns per line)"
        group, group_note = instance_grouping(cache, cores)
        levels.append({"name": f"L{cache.level}", "size_bytes": cache.size_bytes, "line_bytes": cache.line_bytes,
                       "associativity": cache.associativity, "latency_cycles": round(lat_ns * ghz, 1),
                       "recip_throughput_cycles": recip, "shared": cache.shared, **group,
                       "source": f"geometry: {geometry_from}{group_note}; latency: chase.c over {size // _KIB} KiB "
                                 f"({lat_ns:.2f} ns); throughput: {how}"})
    ram_set = probeplan.ram_set_bytes(caches, effort)
    ram_ns = min(run["ns_per_load"] for run in raw["chase.RAM"])
    bw = {t: raw["stream"][0][f"gbs_{t}"] for t in sorted({1, cores})}
    note = "" if ram_set >= 2 * caches[-1].size_bytes else " (set not above the last-level cache: may be optimistic)"
    ram = {"latency_ns": round(ram_ns, 1), "bandwidth_one_core_gbs": round(bw[1], 2),
           "bandwidth_all_cores_gbs": round(max(bw.values()), 2),
           "source": f"chase.c over {ram_set // _MIB} MiB; stream.c read bandwidth on 1 and {cores} threads{note}"}
    return levels, ram


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


def strided_figures(res: Mapping[str, float], l1: SysCache, effort: Effort, flush: int = COLD_FLUSH_BYTES) -> dict:
    """ns per cold line of a column walk over 1, 2, 4, .. of the L1's sets (strided.c), as ram fields."""
    sets = probeplan.l1_sets(l1)
    costs = [round(res[f"sets_{1 << i}"], 2) for i in range(sets.bit_length())]
    return {"strided_cold_line_ns": costs,
            "source": f"strided.c: cold column walks of {STRIDED_ROWS} rows, one load per line, over 1..{sets} "
                      f"L1 sets, each after a {flush >> 20} MiB flush, median of {effort.cold_reps}"}


def conflict_figures(levels: list[dict], res: Mapping[str, float], caches: list[SysCache], page_bytes: int) -> list[dict]:
    """`levels` with the third level's conflict_refill_ns from walks.c's conflict walk (ns per load)."""
    stride, rows = probeplan.conflict_walk(caches, page_bytes)
    ns = round(res["column_0"], 3)
    third = {**levels[2], "conflict_refill_ns": ns,
             "source": f"{levels[2]['source']}; conflict refills: walks.c, a column of {rows} rows {stride} B apart "
                       f"walked round and round ({ns} ns per load)"}
    return [*levels[:2], third, *levels[3:]]


def update_figures(levels: list[dict], res: Mapping[str, float], caches: list[SysCache], page_bytes: int) -> list[dict]:
    """`levels` with the first level's column_update_ns from updates.c's walks (ns per update over 1, 2, .. sets;
    `res`: the median of its stable runs)."""
    walks = probeplan.update_walks(caches, page_bytes)
    ns = [round(res[f"update_{k}"], 3) for k in range(len(walks))]
    first = {**levels[0], "column_update_ns": ns,
             "source": f"{levels[0]['source']}; column updates: updates.c, one column updated in place round and "
                       f"round, median of the stable runs, {walks[0][1]} rows {walks[0][0]} B apart (1 set) .. {walks[-1][1]} rows "
                       f"{walks[-1][0]} B apart ({1 << (len(walks) - 1)} sets)"}
    return [first, *levels[1:]]


def parallel_figures(res: Mapping[str, float], cold: Mapping[str, float], cores: int, effort: Effort,
                     flush: int = COLD_FLUSH_BYTES) -> dict:
    """Fork/join and barrier cost with all cores (overhead.c, best of 5 repetitions), and the extra cost of
    the first region after a flush (coldstart.c, of `flush` bytes)."""
    extra = {t: cold_extra_ns(cold, t) for t in sorted({1, cores})}
    return {"fork_join_ns": round(res[f"fork_join_ns_{cores}"], 1), "barrier_ns": round(res[f"barrier_ns_{cores}"], 1),
            "cold_start_ns": round(extra[cores], 1), "cold_start_one_ns": round(extra[1], 1),
            "source": f"overhead.c on this host, {cores} threads: empty parallel region (fork/join) and a "
                      f"one-iteration-per-thread omp for (implied barrier), best of 5 x {effort.sync_rounds}; "
                      f"coldstart.c: the first region after a {flush >> 20} MiB flush as the benchmark "
                      f"harness does it (written, read and freed), less a warm one, median of {effort.cold_reps}, "
                      f"on {cores} threads and on 1"}


def calls_figures(res: Mapping[str, float], ghz: float) -> dict:
    """Cost of common C math library calls in cycles (libm.c, built like the benchmarks)."""
    names = sorted({key.split(".")[0] for key in res})
    return {name: {"latency": round(res[f"{name}.latency_ns"] * ghz, 1),
                   "recip_throughput": round(res[f"{name}.recip_ns"] * ghz, 1),
                   "source": "libm.c on this host (clang -O2, default target): independent calls "
                             "(throughput); dependent calls, one multiply-add included (latency)"}
            for name in names}


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


def tlb_figures(res: Mapping[str, float], ghz: float, page: int) -> list[dict]:
    """Data TLB levels from tlb.c's output ([] when touching more pages costs nothing measurable)."""
    pages = TLB_FIRST_PAGES + TLB_SECOND_PAGES
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


def _step_here(workdir: Path, steps: list[Step], progress: Progress) -> dict[str, float]:
    """Build and run the one step of `steps` here (its first run)."""
    return run_steps(workdir, steps, progress)[steps[0].key][0]


def measure_tlb(workdir: Path, ghz: float, line_bytes: int, effort: Effort, progress: Progress) -> list[dict]:
    """tlb_figures of a tlb.c run here."""
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    return tlb_figures(_step_here(workdir, [probeplan.tlb_step(page, line_bytes, effort)], progress), ghz, page)


def stores_figures(res: Mapping[str, float], ghz: float) -> dict:
    """Cycles per store into L1 when each store writes another line than the one before (stores.c)."""
    return {"store_new_line_cycles": round(res["new_line_ns"] * ghz, 3),
            "source": f"stores.c on this host: independent stores into L1, each to another line "
                      f"({res['new_line_ns']:.4f} ns) against along one line ({res['same_line_ns']:.4f} ns)"}


def measure_stores(workdir: Path, ghz: float, line_bytes: int, effort: Effort, progress: Progress) -> dict:
    """stores_figures of a stores.c run here."""
    return stores_figures(_step_here(workdir, [probeplan.stores_step(line_bytes, effort)], progress), ghz)


def transfer_figures(res: Mapping[str, float], ghz: float, lines: int) -> dict:
    """The [coherence] table: cycles per line a core pays for lines another core just wrote, and per line it
    stores to while another core holds it too (transfer.c over a quarter of the private L2, the size of a
    thread's share of a shared matrix; results without upgrade_ns, from an older kit, give no upgrade figure)."""
    upgrade = res.get("upgrade_ns")
    return {"transfer_cycles": round(res["other_ns"] * ghz, 2),
            **({} if upgrade is None else {"upgrade_cycles": round(upgrade * ghz, 2)}),
            "source": f"transfer.c on this host, 2 threads on 2 cores at once: {lines} lines in rows of one page "
                      f"that change owner every phase ({res['other_ns']:.3f} ns per line per core; "
                      f"{res['same_ns']:.3f} ns when every row keeps its owner)"
                      + ("" if upgrade is None else
                         f"; each owner updating its rows after the other thread read them: {upgrade:.3f} ns per "
                         f"line more than with no reader (upgrade_cycles)")}


def measure_transfer(workdir: Path, ghz: float, caches: list[SysCache], cores: int, progress: Progress) -> dict:
    """transfer_figures of a transfer.c run here; {} on one core."""
    if cores < 2:
        return {}
    res = _step_here(workdir, [probeplan.transfer_step(caches)], progress)
    return transfer_figures(res, ghz, probeplan.transfer_lines(caches))


def core_table(window: dict, stores: dict, mcpu: dict | None = None) -> dict:
    """The [core] table from the window, store and llvm-mca figures (any may be missing), one source."""
    parts = (window, stores, mcpu or {})
    figures = {k: v for part in parts for k, v in part.items() if k != "source"}
    if not figures:
        return {}
    return {**figures, "source": "; ".join(part["source"] for part in parts if part)}


WINDOW_OPS_PER_ITERATION = 6  # window.c's loops: load, fmul or fdiv, fadd, index add, compare, branch
LONG_CHAIN_MIN_ITERATIONS = 256  # window.c's instances from here on save a constant time each


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


# CPUID features that only newer cores have: a hypervisor may report an older model number (this
# project's KVM guest shows family 6 model 167, Rocket Lake, on Golden Cove cores with AMX and
# AVX512-FP16), and clang's -march=native then names the older core.
_FEATURE_CORES = (("amx_tile", "sapphirerapids"), ("avx512_fp16", "sapphirerapids"))


def llvm_processor(progress: Progress, flags: set[str] | None = None, ask_clang: bool = True) -> dict:
    """The [core] llvm_mcpu figure: the scheduling model llvm-mca should use for a host ({} if unknown): from
    `flags` (this host's unless given), else clang -march=native, which only names this host (`ask_clang`)."""
    progress("naming the core for llvm-mca (clang -march=native)")
    flags = cpu_flags() if flags is None else flags
    for feature, name in _FEATURE_CORES:
        if feature in flags:
            return {"llvm_mcpu": name, "source": f"llvm_mcpu: CPUID feature {feature} (Golden Cove or later)"}
    if not ask_clang:
        return {}
    proc = subprocess.run([str(toolchain().clang), "-march=native", "-###", "-c", "-x", "c", "/dev/null"],
                          capture_output=True, text=True, check=False)
    found = re.search(r'"-target-cpu" "([^"]+)"', proc.stderr)
    if not found or found.group(1) in ("x86-64", "generic"):
        return {}
    return {"llvm_mcpu": found.group(1), "source": "llvm_mcpu: clang-19 -march=native on this host"}


def machine_from_raw(facts: Mapping, raw: Mapping[str, list[dict]], effort_name: str, mcpu: dict,
                     measured_by: str = "pptmc machines detect", date: str | None = None) -> dict:
    """A TOML-ready, validated machine dict from a host's facts and the raw results of probeplan.plan's runs
    there (InputError naming the step when the raw results lack one)."""
    effort = probeplan.EFFORTS[effort_name]
    missing = probeplan.raw_problems(probeplan.plan(facts, effort), raw)
    if missing:
        raise InputError(f"raw microbenchmark results: {'; '.join(missing)}; run the microbenchmarks again")
    try:
        return _machine_dict(facts, raw, effort, mcpu, f"{measured_by}{' --quick' * (effort is QUICK)}"
                             f" on {date or time.strftime('%Y-%m-%d')}")
    except KeyError as exc:
        raise InputError(f"raw microbenchmark results: a run lacks the figure {exc}; the microbenchmarks that "
                         f"printed them are not this pptmc's; run them again") from exc


def _machine_dict(facts: Mapping, raw: Mapping[str, list[dict]], effort: Effort, mcpu: dict, how: str) -> dict:
    """machine_from_raw without the checks."""
    caches, cores = facts_caches(facts), int(facts["cores"])
    flags = set(facts["flags"])
    simd, simd_src = simd_width_bits(flags, facts["machine"])
    ghz, ops = ops_figures(raw["ops"])
    levels, ram = memory_figures(raw, caches, cores, ghz, ops["load"]["recip_throughput"], effort,
                                 facts.get("cache_source", "sysfs or lscpu"))
    flush = probeplan.cold_flush_bytes(caches, cores)
    if "walks" in raw:
        levels = conflict_figures(levels, raw["walks"][0], caches, int(facts["page_bytes"]))
    if "updates" in raw:
        levels = update_figures(levels, _median_run(probeplan.stable_window(raw["updates"])), caches,
                                int(facts["page_bytes"]))
    if "strided" in raw:
        strided = strided_figures(raw["strided"][0], caches[0], effort, flush)
        ram = {**ram, "strided_cold_line_ns": strided["strided_cold_line_ns"],
               "source": f"{ram['source']}; {strided['source']}"}
    core = core_table(window_figures(_median_run(raw["window"])), stores_figures(raw["stores"][0], ghz), mcpu)
    tlbs = tlb_figures(raw["tlb"][0], ghz, int(facts["page_bytes"]))
    coherence = transfer_figures(raw["transfer"][0], ghz, probeplan.transfer_lines(caches)) if cores >= 2 else {}
    data = {"schema_version": SCHEMA_VERSION, "name": f"host-{facts['node']}",
            "description": f"{facts['model_name']} as measured by {how}",
            "cores": cores, "frequency_ghz": round(ghz, 3), "bus_width_bytes": 8, "simd_width_bits": simd,
            "source": f"cores: sysfs topology; frequency: dependent add chain in ops.c "
                      f"(/proc/cpuinfo says {facts['cpu_mhz']} MHz); bus width: assumed one 64-bit DDR channel; "
                      f"SIMD: {simd_src}",
            "caches": levels, "ram": ram,
            "ops": {op: {**ops[op], "source": "ops.c on this host: dependent chain (latency), 8 independent "
                                              "chains (throughput)"} for op in OP_CLASSES},
            "parallel": parallel_figures(raw["overhead"][0], raw["coldstart"][0], cores, effort, flush),
            "calls": calls_figures(raw["libm"][0], ghz), **({"core": core} if core else {}),
            **({"tlbs": tlbs} if tlbs else {}), **({"coherence": coherence} if coherence else {}),
            "curves": curve_figures(raw, caches, cores, ghz, effort)}
    validate_machine_dict(data, f"machine measured by {how}")
    return data


def detect_host(quick: bool = False, progress: Progress | None = None) -> dict:
    """A TOML-ready, validated machine dict for this host (quick: seconds instead of ~a minute)."""
    say = progress or (lambda _msg: None)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pptmc-detect-") as tmp:
        try:
            facts = probeplan.host_facts(build_program("cpuid", Path(tmp) / "cpuid"))
            steps = probeplan.plan(facts, QUICK if quick else FULL)
        except ProbeError as exc:
            raise ToolError(str(exc)) from exc
        say(f"compiling {len({s.program for s in steps})} microbenchmarks, then {len(steps)} runs")
        raw = run_steps(Path(tmp), steps, say)
    data = machine_from_raw(facts, raw, "quick" if quick else "full", llvm_processor(say))
    say(f"done in {time.monotonic() - start:.1f} s")
    return data
