"""The host facts `pptmc machines detect` reads, the microbenchmark runs it makes from them, and running those.

Standard library only: a probe kit (`pptmc machines probe-kit`) ships this very file beside its prebuilt
microbenchmarks and runs it on machines without pptmc, numpy or a compiler. Both detect and the kit take
the runs from `plan` and execute them with `run_plan`; detect.py turns what they print (the raw results:
step key -> one key=value dict per run) into a machine file, for a local run and an ingested kit alike.
"""
from __future__ import annotations

import os
import platform
import re
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

SYSFS_CPU = Path("/sys/devices/system/cpu")
Progress = Callable[[str], None]
KIB = 1024
MIB = 1024 * 1024
PINNED = {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}  # one thread per core, no migration (pptmc measure)
COLD_FLUSH_BYTES = 64 << 20  # the harness's default flush (benchmarks/polybench/pbench.c): the least detect flushes
STABLE_WINDOW = 3            # a repeated step is stable when its last 3 runs agree ...
STABLE_SPREAD = 0.05         # ... within 5% (max - min over the median) on every figure
STRIDED_ROWS = 500           # rows of strided.c's column walks (a PolyBench MEDIUM matrix)
TRANSFER_PHASES = 100
CHASE_SEED = 12345
# Page counts tlb.c sweeps: first-level knee (lines stay in L1), then the second level's.
TLB_FIRST_PAGES = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768)
TLB_SECOND_PAGES = (1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
# CPU flags of x86-64-v3, the ISA a probe kit's ops.c is built for (ops-base, plain x86-64, elsewhere)
X86_64_V3_FLAGS = frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"})


class ProbeError(Exception):
    """A host fact could not be read or a microbenchmark failed; the message says what to do."""


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
    cold_reps: int = 15   # coldstart.c: each repetition writes and frees a flush buffer (cold_flush_bytes)
    curve_runs: int = 8   # the most runs of a curve step (repeated until stable: stable_window)
    curve_reps: int = 7   # repetitions inside one run of cores.c (best kept)


# Many short stream repetitions (64 MiB each, ~1 ms in L2) and the best kept: a repetition longer than
# a scheduler time slice is preempted on a busy host, which halved the L2 figure when they were 512 MiB.
# Pointer chases likewise: 7 runs of 500k loads, the fastest kept. ops.c runs three times in quick mode too
# (the median kept, 0.4 s each): its figures set every prediction's clock and L1 rate, and one run on a shared
# VM read the load throughput anywhere from 0.49 to 0.74 cycles (8 runs on the Zen 3 guest).
FULL = Effort(op_iterations=500_000, op_runs=3, chase_loads=500_000, stream_reps=15, ram_set_bytes=1024 * MIB,
              chase_runs=7)
QUICK = Effort(op_iterations=200_000, op_runs=3, chase_loads=200_000, stream_reps=1, ram_set_bytes=128 * MIB,
               sync_rounds=2_000, cold_reps=3, curve_runs=4, curve_reps=3)
EFFORTS = {"full": FULL, "quick": QUICK}


@dataclass(frozen=True)
class Step:
    """One microbenchmark run: `program` (a microbench/*.c name) with `args`, `runs` times; raw results
    keep every run under `key`. `pinned`: run with OMP_PROC_BIND=close and OMP_PLACES=cores. `max_runs` above
    `runs`: run again, up to max_runs times, until the last STABLE_WINDOW runs are stable (stable_window)."""

    key: str
    program: str
    args: tuple[int, ...]
    runs: int = 1
    pinned: bool = False
    note: str = ""
    max_runs: int = 0

    @property
    def most_runs(self) -> int:
        """The most runs the step may make."""
        return max(self.runs, self.max_runs)


def _read(path: Path) -> str:
    return path.read_text().strip()


def parse_size(text: str) -> int:
    """sysfs/lscpu sizes like '48K', '2048K', '480 MiB' -> bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"unrecognised size {text!r}")
    return int(m.group(1)) * {"": 1, "K": KIB, "M": MIB, "G": 1024 * MIB}[m.group(2).upper()]


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


def cpuid_caches(text: str, cores: int) -> list[SysCache]:
    """Parse microbench/cpuid.c's output; a level is shared when more logical CPUs than one core's (smt=)
    share an instance, and then serves that many cores, at most the chip's `cores`."""
    smt = 1
    out = []
    for line in text.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if line.startswith("smt="):
            smt = max(1, int(fields["smt"]))
        elif line.startswith("cache "):
            group = min(cores, -(-int(fields["sharing"]) // smt))
            out.append(SysCache(level=int(fields["level"]), size_bytes=int(fields["size"]),
                                line_bytes=int(fields["line"]), associativity=int(fields["ways"]),
                                shared=group > 1, cores_sharing=group if group > 1 else 0))
    return sorted(out, key=lambda c: c.level)


def host_caches(cores: int, cpuid_binary: Path | None = None) -> tuple[list[SysCache], str]:
    """(cache geometry, where it came from): from sysfs, else from lscpu, else from the CPU's own CPUID report
    (`cpuid_binary`, a build of microbench/cpuid.c, for sandboxes without either); ProbeError when none can."""
    try:
        if caches := sysfs_caches():
            return caches, "sysfs"
        problems = [f"{SYSFS_CPU}/cpu0/cache: no caches described"]
    except (OSError, ValueError) as sys_exc:
        problems = [f"{SYSFS_CPU}/cpu0/cache: {sys_exc}"]
    try:
        res = subprocess.run(["lscpu", "-C", "--bytes"], capture_output=True, text=True, check=True)
        if caches := lscpu_caches(res.stdout, cores):
            return caches, "lscpu"
        problems.append("lscpu -C: no caches listed")
    except (OSError, subprocess.CalledProcessError, ValueError, KeyError) as exc:
        problems.append(f"lscpu -C: {exc}")
    if cpuid_binary is not None:
        try:
            if caches := cpuid_caches(run_text(cpuid_binary, []), cores):
                return caches, "CPUID (sysfs and lscpu describe no caches)"
            problems.append(f"{cpuid_binary}: no caches reported")
        except (ProbeError, ValueError, KeyError) as exc:
            problems.append(f"{cpuid_binary}: {exc}")
    raise ProbeError(f"cannot read the cache description ({'; '.join(problems)}); write the machine file by "
                     f"hand (see machines/SCHEMA.md)")


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


def _cpuinfo(pattern: str) -> str | None:
    """The first match of `pattern`'s group 1 in /proc/cpuinfo (None where there is none)."""
    try:
        m = re.search(pattern, Path("/proc/cpuinfo").read_text(), re.M)
    except OSError:
        return None
    return m.group(1).strip() if m else None


def cpu_flags() -> set[str]:
    """The CPU feature flags of /proc/cpuinfo (empty where there is none)."""
    return set((_cpuinfo(r"^flags\s*:(.*)$") or "").split())


def host_facts(cpuid_binary: Path | None = None) -> dict:
    """What the plan and the figures need to know about this host, as JSON-ready values: the cores this
    process may use, the cache geometry (sharing judged over the whole chip; `cpuid_binary` as in
    host_caches), page size, CPU flags and names."""
    cores = physical_cores()
    caches, cache_source = host_caches(physical_cores(cpus=range(os.cpu_count() or 1)), cpuid_binary)
    if not caches:
        raise ProbeError(f"{SYSFS_CPU}/cpu0/cache: no cache description found; write the machine file by hand "
                         "(see machines/SCHEMA.md)")
    mhz = _cpuinfo(r"^cpu MHz\s*:\s*([\d.]+)")
    return {"cores": cores, "logical_cpus": len(os.sched_getaffinity(0)), "caches": [asdict(c) for c in caches],
            "cache_source": cache_source,
            "page_bytes": os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096,
            "flags": sorted(cpu_flags()), "cpu_mhz": float(mhz) if mhz else None,
            "model_name": _cpuinfo(r"^model name\s*:\s*(.+)$") or platform.processor() or platform.machine(),
            "machine": platform.machine(), "node": platform.node() or "unknown"}


def facts_caches(facts: Mapping) -> list[SysCache]:
    """The SysCache levels a facts dict records."""
    return [SysCache(**c) for c in facts["caches"]]


def level_set_bytes(caches: list[SysCache], i: int, effort: Effort) -> int:
    """Working set that times level i: just beyond the previous level (at most half this one). Huge, partly
    virtual LLCs of cloud VMs would otherwise time TLB walks and far slices instead of the common case."""
    size = caches[i].size_bytes // 2 if i == 0 else min(caches[i].size_bytes // 2, 4 * caches[i - 1].size_bytes)
    return min(size, effort.ram_set_bytes // 2)


def ram_set_bytes(caches: list[SysCache], effort: Effort) -> int:
    """Working set of the RAM latency and bandwidth runs."""
    return min(effort.ram_set_bytes, max(2 * caches[-1].size_bytes, 64 * MIB))


def stream_args(size: int, reps: int, threads: Iterable[int]) -> tuple[int, ...]:
    """stream.c's arguments: about 64 MiB read per repetition, fewer repetitions of a RAM-sized pass."""
    kib = max(4, size // KIB)
    passes = max(1, (64 * MIB) // (kib * KIB)) if size < 64 * MIB else 1
    reps = reps if size < 64 * MIB else max(1, reps // 3)  # a RAM-sized pass is long already
    return (kib, passes, reps, *threads)


def lines_args(size: int, line_bytes: int, reps: int) -> tuple[int, ...]:
    """lines.c's arguments: about 64 MiB of lines per repetition."""
    kib = max(4, size // KIB)
    return (kib, line_bytes, max(1, (64 * MIB) // (kib * KIB)), reps)


def memory_steps(caches: list[SysCache], cores: int, effort: Effort) -> list[Step]:
    """Pointer chase and line throughput per level, then RAM latency (chase) and bandwidth (stream)."""
    steps = []
    for i, cache in enumerate(caches):
        size = level_set_bytes(caches, i, effort)
        steps.append(Step(f"chase.L{cache.level}", "chase", (size, effort.chase_loads, CHASE_SEED), effort.chase_runs,
                          note=f"L{cache.level}: pointer chase over {size // KIB} KiB"))
        if i:
            steps.append(Step(f"lines.L{cache.level}", "lines", lines_args(size, cache.line_bytes, effort.stream_reps),
                              note=f"L{cache.level}: line throughput over {size // KIB} KiB"))
    ram = ram_set_bytes(caches, effort)
    # Two runs only: each builds a random cycle over the whole set, which takes seconds.
    steps.append(Step("chase.RAM", "chase", (ram, max(1, effort.chase_loads // 4), CHASE_SEED),
                      min(2, effort.chase_runs), note=f"RAM: pointer chase over {ram // MIB} MiB"))
    steps.append(Step("stream", "stream", stream_args(ram, effort.stream_reps, sorted({1, cores})),
                      note=f"RAM: stream on 1 and {cores} threads"))
    return steps


def l1_sets(l1: SysCache) -> int:
    """The L1's set count when it is a power of two (strided.c walks 1, 2, 4, .. of them), else 0."""
    sets = l1.size_bytes // (l1.line_bytes * l1.associativity) if l1.associativity > 0 else 1
    return 0 if sets & (sets - 1) else sets


def transfer_lines(caches: list[SysCache]) -> int:
    """transfer.c's line count: a quarter of the private L2, the size of a thread's share of a shared matrix."""
    private = [c for c in caches if not c.shared] or caches[:1]
    return max(64, private[-1].size_bytes // private[-1].line_bytes // 4)


def llc_total_bytes(caches: list[SysCache], cores: int) -> int:
    """The last-level cache of all `cores` cores: one instance per group of cores sharing it (one per core
    when private)."""
    last = caches[-1]
    if not last.shared:
        return last.size_bytes * cores
    return last.size_bytes * (-(-cores // last.cores_sharing) if last.cores_sharing else 1)


def cold_flush_bytes(caches: list[SysCache], cores: int) -> int:
    """The flush of detect's cold measurements (coldstart.c, strided.c): the harness's 64 MiB, or twice the
    last-level cache found where that is more, so that nothing measured before survives it."""
    return max(COLD_FLUSH_BYTES, 2 * llc_total_bytes(caches, cores))


def harness_flush_environment(facts: Mapping) -> dict[str, str]:
    """PBENCH_FLUSH_BYTES for cold native runs on the host `facts` describe: the flush detect's cold figures
    were measured after (cold_flush_bytes), so a measured region starts as cold as the model assumes."""
    return {"PBENCH_FLUSH_BYTES": str(cold_flush_bytes(facts_caches(facts), facts["cores"]))}


def curve_cores(cores: int) -> list[int]:
    """The active-core counts the curves are measured at: powers of two up to `cores`, and `cores`."""
    return sorted({1 << k for k in range(cores.bit_length()) if 1 << k <= cores} | {cores})


def shared_slice_bytes(caches: list[SysCache], effort: Effort) -> int:
    """Each thread's slice in cores.c's shared-cache reads: what lines.c times the first shared level over (just
    beyond the private levels), or the last level's set on a machine without a shared one."""
    shared = [i for i, c in enumerate(caches) if c.shared]
    return level_set_bytes(caches, shared[0] if shared else len(caches) - 1, effort)


def curve_steps(caches: list[SysCache], cores: int, effort: Effort) -> list[Step]:
    """The runs of the [curves] table: cores.c, stream.c, overhead.c and transfer.c on each curve_cores count,
    threads pinned, each repeated until stable (at least STABLE_WINDOW runs, at most effort.curve_runs)."""
    points, line = curve_cores(cores), caches[0].line_bytes
    ram, slice_kib = ram_set_bytes(caches, effort), shared_slice_bytes(caches, effort) // KIB
    on = f"on {','.join(map(str, points))} threads"
    runs = {"runs": STABLE_WINDOW, "max_runs": max(STABLE_WINDOW, effort.curve_runs), "pinned": True}
    steps = [Step("curves.cores", "cores", (effort.op_iterations * 4, slice_kib, line, effort.curve_reps, *points),
                  note=f"cores.c (one core's op and shared-cache line throughput {on})", **runs),
             # at least 3 repetitions of a RAM-sized pass (stream_args takes a third of them): best of 3
             Step("curves.stream", "stream", stream_args(ram, max(effort.stream_reps, 9), points),
                  note=f"stream.c (RAM bandwidth {on})", **runs),
             Step("curves.overhead", "overhead", (effort.sync_rounds, 5, *points),
                  note=f"overhead.c (fork/join and barrier {on})", **runs)]
    pairs = [p for p in points if p >= 2]
    if pairs:
        steps.append(Step("curves.transfer", "transfer", (line, transfer_lines(caches), TRANSFER_PHASES, *pairs),
                          note=f"transfer.c (lines written by p cores in turn, p = {','.join(map(str, pairs))})",
                          **runs))
    return steps


def stores_step(line_bytes: int, effort: Effort) -> Step:
    """stores.c: independent stores into L1, to the same and to another line."""
    return Step("stores", "stores", (line_bytes, max(1_000_000, effort.op_iterations * 20)),
                note="stores.c (stores to the same or to another line)")


def tlb_step(page_bytes: int, line_bytes: int, effort: Effort) -> Step:
    """tlb.c over every page count of the sweep."""
    return Step("tlb", "tlb", (page_bytes, line_bytes, max(1_000_000, effort.op_iterations * 10), *TLB_FIRST_PAGES,
                               *TLB_SECOND_PAGES), note="tlb.c (address translation: TLB reach and miss costs)")


def transfer_step(caches: list[SysCache]) -> Step:
    """transfer.c: 2 pinned threads hand lines to each other."""
    return Step("transfer", "transfer", (caches[0].line_bytes, transfer_lines(caches), TRANSFER_PHASES),
                pinned=True, note="transfer.c (lines last written by another core)")


def conflict_walk(caches: list[SysCache], page_bytes: int) -> tuple[int, int] | None:
    """walks.c's (stride, rows): one page apart, so the rows share the page offset's set bits in L1 and L2, and
    twice as many rows as L2 has lines per page offset (L2 size / page), so whatever frames the OS gives they
    overflow their L2 sets while fitting its capacity many times; None without a third level to serve them."""
    if len(caches) < 3 or caches[1].associativity < 1:
        return None
    return page_bytes, max(8, 2 * caches[1].size_bytes // page_bytes // 8 * 8)


def walks_step(caches: list[SysCache], page_bytes: int, effort: Effort) -> Step | None:
    """walks.c: a column walk whose lines conflict out of L1 and L2 and come from the third level (None
    without one)."""
    walk = conflict_walk(caches, page_bytes)
    if walk is None:
        return None
    stride, rows = walk
    return Step("walks", "walks", (max(1_000_000, effort.op_iterations * 10), stride, rows),
                note=f"walks.c (a column walk conflicting out of L{caches[1].level}: {rows} rows {stride} B apart)")


def update_walks(caches: list[SysCache], page_bytes: int) -> list[tuple[int, int]]:
    """updates.c's (stride, rows) for walks over 1, 2, 4, .. all of L1's sets: L1's way span / k apart, so the
    rows fall into k sets by their virtual address (the span being a page or less), and 2 x ways x k rows, twice
    what those sets hold and far less than L2; [] when L1's sets are no power of two, its way span exceeds a
    page, or no second level serves the refills."""
    l1, sets = caches[0], l1_sets(caches[0])
    span = sets * l1.line_bytes
    if not sets or span > page_bytes or len(caches) < 2:
        return []
    return [(span >> b, 2 * l1.associativity << b) for b in range(sets.bit_length())]


def updates_step(caches: list[SysCache], page_bytes: int, effort: Effort) -> Step | None:
    """updates.c: column updates whose dirty lines conflict out of L1, over 1, 2, .. all of its sets; repeated until
    stable (each run takes half a second)."""
    walks = update_walks(caches, page_bytes)
    if not walks:
        return None
    return Step("updates", "updates", (max(1_000_000, effort.op_iterations * 10), *(x for w in walks for x in w)),
                STABLE_WINDOW, max_runs=max(STABLE_WINDOW, effort.curve_runs),
                note=f"updates.c (column updates conflicting out of L1, over 1..{1 << (len(walks) - 1)} sets)")


def check_associativity(caches: list[SysCache]) -> None:
    """Every level needs its ways (the figures and the model do); ProbeError naming the level otherwise."""
    for cache in caches:
        if cache.associativity < 1:
            raise ProbeError(f"L{cache.level}: this host reports no associativity (sysfs ways_of_associativity, "
                             f"lscpu WAYS); write the machine file by hand from the CPU's manual")


def plan(facts: Mapping, effort: Effort) -> list[Step]:
    """Every microbenchmark run of detect, in detect's order, for the host `facts` describe."""
    caches, cores = facts_caches(facts), int(facts["cores"])
    check_associativity(caches)
    l1, sets = caches[0], l1_sets(caches[0])
    flush = cold_flush_bytes(caches, cores)
    steps = [Step("ops", "ops", (effort.op_iterations,), effort.op_runs,
                  note="ops.c (operation latency and throughput)"), *memory_steps(caches, cores, effort)]
    if sets:
        steps.append(Step("strided", "strided", (sets, l1.line_bytes, STRIDED_ROWS, effort.cold_reps, flush),
                          note=f"strided.c (cold column walks over 1..{sets} L1 sets)"))
    steps += [Step("overhead", "overhead", (effort.sync_rounds, 5, cores),
                   note=f"overhead.c (OpenMP fork/join and barrier on {cores} threads)"),
              Step("coldstart", "coldstart", (flush, effort.cold_reps, *curve_cores(cores)), pinned=True,
                   note="coldstart.c (the first parallel region after a cache flush, on 1 .. all cores)"),
              Step("libm", "libm", (max(4, effort.op_iterations * 2),), note="libm.c (C math library calls)"),
              Step("window", "window", (max(100_000, effort.op_iterations * 4),), 3,
                   note="window.c (overlap of dependence chain instances)"),
              stores_step(l1.line_bytes, effort), tlb_step(int(facts["page_bytes"]), l1.line_bytes, effort)]
    walks = walks_step(caches, int(facts["page_bytes"]), effort)
    updates = updates_step(caches, int(facts["page_bytes"]), effort)
    steps += [s for s in (walks, updates) if s]
    return steps + ([transfer_step(caches)] if cores >= 2 else []) + curve_steps(caches, cores, effort)


def parse_key_values(stdout: str) -> dict[str, float]:
    """A microbenchmark's `key=value` lines (the `sink` line, there to keep the work alive, left out)."""
    out = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and key != "sink":
            out[key] = float(value)
    return out


def run_text(binary: Path, args: Iterable[object], env: Mapping[str, str] | None = None,
             timeout: float = 300) -> str:
    """Run one microbenchmark once: its standard output; ProbeError naming the run on failure."""
    argv = [str(binary), *map(str, args)]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, env=None if env is None else dict(env),
                             timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProbeError(f"{' '.join(argv)}: could not run ({exc})") from exc
    if res.returncode:
        raise ProbeError(f"{Path(binary).name} {' '.join(argv[1:])} failed: {res.stderr.strip()[:300]}")
    return res.stdout


def run_program(binary: Path, args: Iterable[object], env: Mapping[str, str] | None = None,
                timeout: float = 300) -> dict[str, float]:
    """Run one microbenchmark once and parse its key=value lines; ProbeError naming the run on failure."""
    return parse_key_values(run_text(binary, args, env, timeout))


def pinned_environment(base: Mapping[str, str]) -> dict[str, str]:
    """`base` with OMP_PROC_BIND=close and OMP_PLACES=cores unless it sets them: how `pptmc measure` and a
    probe kit run the native programs."""
    return {**PINNED, **base}


def step_environment(step: Step, base: Mapping[str, str]) -> dict[str, str]:
    """`base`, with the PINNED settings over it for a pinned step (two threads on two cores, whatever it says)."""
    return {**base, **PINNED} if step.pinned else dict(base)


def relative_spread(values: list[float]) -> float:
    """(max - min) / median of `values`: how far repeats of one figure disagree (0 for a zero median)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return (ordered[-1] - ordered[0]) / abs(median) if median else 0.0


def stable_window(runs: list[dict]) -> list[dict]:
    """The runs a repeated step's figures come from: its last STABLE_WINDOW (all, when fewer)."""
    return runs[-STABLE_WINDOW:]


def is_stable(runs: list[dict]) -> bool:
    """The last STABLE_WINDOW runs agree within STABLE_SPREAD on every figure they print."""
    window = stable_window(runs)
    return len(window) == STABLE_WINDOW and all(relative_spread([run[key] for run in window]) < STABLE_SPREAD
                                                for key in window[0])


def run_plan(steps: list[Step], binary_of: Callable[[str], Path], env: Mapping[str, str],
             progress: Progress, done: Callable[[Step, float], None] | None = None) -> dict[str, list[dict]]:
    """Run every step (`binary_of(program)` gives the executable), one at a time, a step with max_runs again
    until stable or max_runs; the raw results."""
    raw: dict[str, list[dict]] = {}
    for number, step in enumerate(steps, start=1):
        progress(f"[{number}/{len(steps)}] {step.note or step.key}")
        start = time.monotonic()
        runs = [run_program(binary_of(step.program), step.args, step_environment(step, env))
                for _ in range(step.runs)]
        while len(runs) < step.max_runs and not is_stable(runs):
            runs.append(run_program(binary_of(step.program), step.args, step_environment(step, env)))
        raw[step.key] = runs
        if done:
            done(step, time.monotonic() - start)
    return raw


def raw_problems(steps: list[Step], raw: Mapping) -> list[str]:
    """What raw results lack against the plan: a step with no, too few or too many runs, or a run that is no
    mapping of numbers (an empty list means they are complete)."""
    problems = []
    for step in steps:
        runs = raw.get(step.key)
        if not isinstance(runs, list) or not step.runs <= len(runs) <= step.most_runs:
            expected = f"{step.runs} to {step.most_runs}" if step.most_runs > step.runs else str(step.runs)
            problems.append(f"{step.key}: expected {expected} run(s), found "
                            f"{len(runs) if isinstance(runs, list) else 'none'}")
        elif not all(isinstance(r, dict) and r and all(isinstance(v, (int, float)) for v in r.values())
                     for r in runs):
            problems.append(f"{step.key}: a run without key=value figures")
    return problems


def kit_binary_name(program: str, flags: Iterable[str], machine: str) -> str:
    """The probe kit's executable for `program` on a CPU with `flags`: ops.c comes as `ops` (x86-64-v3) and
    `ops-base` (plain x86-64), the first where the CPU has every x86-64-v3 flag."""
    if program == "ops" and machine == "x86_64" and not X86_64_V3_FLAGS <= set(flags):
        return "ops-base"
    return program
