"""Ground-truth hit rates from a real multithreaded run of the original OpenMP program.

1. Build: the *original* program with clang -fopenmp, the functions clang outlines for the
   parallel regions (`.omp_outlined*`) instrumented (instrument.build_instrumented).
2. Trace: run once per thread count N with OMP_NUM_THREADS=N; each thread writes its own
   chunks, every row carries its thread id and its per-thread region index.
3. Merge: region by region, the threads' streams are merged reference by reference, round-robin
   (Wu & Yeung) or uniformly at random (seeded), with analysis.profiles.interleave.Interleaver (which
   spills waiting references to disk).
4. Simulate: the merged stream through analysis.hitrates.cachesim.machine_hierarchy with the machine's
   geometry (private levels per thread, a shared level once per group of `cores_per_instance` cores, thread t
   using the instance of the core `placement` puts it on; write-invalidate) and set placement (each level's
   indexing; the machine's page size, page frames drawn from the seed).

Artifacts are cached in `workdir` under content keys (common.cache), so re-running with other
machines or core counts reuses the build and the traces. VALIDATION.md says what this ground
truth is and is not.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pandas as pd

from analysis.options import INTERLEAVES
from analysis.hitrates.cachesim import MAX_COHERENT_CORES, machine_hierarchy
from analysis.hitrates.set_index import FRAME_SEEDS  # a physical level's hit rate: the mean over frame maps
from analysis.profiles.barriers import thread_phases
from analysis.profiles.interleave import Interleaver
from analysis.profiles.private_traces import line_shift
from machines.model import PLACEMENTS, Machine
from common.cache import reuse_or_invalidate, mark_done, step_key
from common.errors import InputError
from common.io import program_output_to, write_table

OUTLINED = r"\.omp_outlined"  # clang's names for the functions of parallel regions
GT_COLUMNS = ["machine", "cores", "interleave", "level", "cumulative_hit_rate", "local_hit_rate", "accesses",
              "invalidations", "shared", "misses", "invalidated_copies", "distinct_lines", "fa_cumulative_hit_rate",
              "nocoh_cumulative_hit_rate", "placement_sd",
              "thread_imbalance"]
# Levels of at most this many lines are also simulated fully associative to measure conflict
# misses; larger ones (L3) would cost a scan of every way per access and keep their geometry.
FA_MAX_LINES = 8192
MEMORY_BUDGET = 64 << 20  # bytes of merge buffers kept in memory over all live regions; the rest spills
_SIM_VERSION = 7  # bump when the simulation's semantics change (invalidates cached tables)

Progress = Callable[[str], None] | None


@dataclasses.dataclass(frozen=True)
class MergedBatch:
    """A run of the merged stream: cache line, thread (= core) and store flag of each access."""

    lines: np.ndarray
    core: np.ndarray
    is_store: np.ndarray


def build_original(source: Path, workdir: Path, include_dirs=(), defines=(), extra_sources=(),
                   progress: Progress = None) -> Path:
    """Instrumented build of the original OpenMP program (cached by content)."""
    import instrument
    from common.cache import code_digest

    source = Path(source)
    if not source.is_file():
        raise InputError(f"{source}: no such C file")
    binary = Path(workdir) / "build" / f"{source.stem}.gt"
    headers = [p for d in include_dirs for p in Path(d).glob("*.h")]
    key = step_key([source, *headers, *map(Path, extra_sources)],
                   {"I": [str(d) for d in include_dirs], "D": list(defines), "functions": OUTLINED,
                    "tracer": code_digest("passes", "instrument")})  # a new tracer invalidates old builds
    stamp = binary.parent / ".key"
    if not reuse_or_invalidate(stamp, key, [binary]):
        _say(progress, f"build {source.name}")
        instrument.build_instrumented(source, binary, functions=OUTLINED, include_dirs=include_dirs,
                                      defines=defines, extra_sources=extra_sources)
        mark_done(stamp, key)
    return binary


def trace_threads(binary: Path, workdir: Path, threads: int, args=(), progress: Progress = None) -> Path:
    """Record the trace of one run with `threads` OpenMP threads (cached by content)."""
    import instrument

    out = Path(workdir) / f"trace-{threads}" / f"{Path(binary).stem}.pptrace"
    key = step_key([binary], {"args": [str(a) for a in args], "threads": threads})
    stamp = out.parent / ".key"
    if not reuse_or_invalidate(stamp, key, [out]):
        _say(progress, f"trace {threads} threads")
        with program_output_to(out.parent / "program.out"):
            instrument.run_trace(binary, [str(a) for a in args], out, threads=threads)
        mark_done(stamp, key)
    return out


class RegionMerger:
    """Routes a multithreaded trace's rows into per-region interleavers and drains them in region order.

    A thread's rows arrive in its program order, but chunks of different threads come in any
    order, so several regions can be waiting at once. Region k is drained only when no thread
    can still produce rows of an earlier region; a thread's lane of region k is closed when the
    thread's rows move past k (or the file ends). Memory over all live regions is capped at
    `budget` bytes, the rest spills to disk in `spill_dir`."""

    def __init__(self, n_threads: int, strategy: str, seed: int, spill_dir: Path | None,
                 budget: int = MEMORY_BUDGET, refs_per_turn: int = 1) -> None:
        self.n, self.strategy, self.seed, self.spill_dir, self.budget = n_threads, strategy, seed, spill_dir, budget
        self.k = refs_per_turn
        self.live: dict[int, Interleaver] = {}
        self.at = [0] * n_threads  # region each thread is in (rows of earlier regions cannot come)
        self.phase = [0] * n_threads  # the phase of its region each thread is in (barriers.thread_phases)

    def _region(self, r: int) -> Interleaver:
        if r not in self.live:  # each region gets its own seed, so a region's merge is reproducible alone
            self.live[r] = Interleaver(self.n, self.strategy, self.seed + r, self.k, self.budget, self.spill_dir)
        return self.live[r]

    def push(self, thread: int, region: int, codes: np.ndarray, phases: np.ndarray | None = None) -> None:
        """Append one thread's consecutive rows of one region (line << 1 | store); `phases`: each row's phase
        in the region, -1 where unknown (the previous row's), None for a trace without barrier records."""
        if not 0 <= thread < self.n:
            raise InputError(f"trace row of thread {thread}, but the trace has {self.n} threads; re-record it")
        if region < self.at[thread]:
            raise InputError(f"thread {thread} went back from region {self.at[thread]} to {region}; "
                             f"the trace is inconsistent, re-record it")
        for r in [r for r in self.live if self.at[thread] <= r < region]:
            self.live[r].close(thread)
        if region != self.at[thread]:
            self.phase[thread] = 0
        self.at[thread] = region
        itl = self._region(region)
        held = sum(ln.mem_items for other in self.live.values() if other is not itl for ln in other.lanes)
        itl.budget = max(0, self.budget - 8 * held)
        before = itl.lanes[thread].pushed
        itl.push(thread, codes)
        if phases is not None:
            self._barriers(itl, thread, before, phases)

    def _barriers(self, itl: Interleaver, thread: int, before: int, phases: np.ndarray) -> None:
        """Tell the region's interleaver where the thread's rows pass barriers (several at one row when the
        thread made no access between them), so no thread runs ahead of one still before a barrier."""
        now = self.phase[thread]
        reached = np.maximum.accumulate(np.concatenate(([now], phases)))
        steps = np.diff(reached)
        for row in np.flatnonzero(steps > 0).tolist():
            for _ in range(int(steps[row])):
                itl.barrier(thread, before + row)
        self.phase[thread] = int(reached[-1])

    def drain(self, final: bool = False) -> Iterator[MergedBatch]:
        """Merged batches of every region that can be (partly) merged now, in region order."""
        if final:
            for itl in self.live.values():
                itl.close_all()
        while self.live:
            r = min(self.live)
            if not final and r > min(self.at):
                return
            itl = self.live[r]
            for batch in itl.drain():
                codes = batch.lines
                yield MergedBatch(codes >> np.uint64(1), batch.core, (codes & np.uint64(1)).astype(bool))
            if not itl.finished:
                return
            del self.live[r]


def merged_stream(trace: Path, strategy: str, seed: int = 0, line_size: int = 64,
                  spill_dir: Path | None = None, refs_per_turn: int = 1) -> Iterator[MergedBatch]:
    """The merged multithreaded stream of a trace, region by region (an access counts at the line of its first byte)."""
    import instrument

    reader = instrument.open_trace(trace)
    info = reader.info
    if not info.complete:
        raise InputError(f"{trace}: incomplete trace ({info.extra.get('reason', 'cut short')}); re-record it")
    shift = np.uint64(line_shift(line_size))
    merger = RegionMerger(max(info.n_threads, 1), strategy, seed, spill_dir, refs_per_turn=refs_per_turn)
    phase_of = thread_phases(info)  # empty for a trace recorded before barrier records: no phases
    for ch in reader.chunks():
        if not len(ch):
            continue
        codes = ((ch.addr >> shift) << np.uint64(1)) | ch.is_store.astype(np.uint64)
        phases = np.where(ch.loop >= 0, phase_of[np.clip(ch.loop, 0, None)], -1) if len(phase_of) else None
        cuts = np.flatnonzero((np.diff(ch.region) != 0) | (np.diff(ch.thread.astype(np.int64)) != 0)) + 1
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(ch)]):
            merger.push(int(ch.thread[a]), int(ch.region[a]), codes[a:b], None if phases is None else phases[a:b])
        yield from merger.drain()
    yield from merger.drain(final=True)


def thread_accesses(trace: Path, threads: int) -> np.ndarray:
    """Accesses each thread made (index = trace thread id)."""
    import instrument

    counts = np.zeros(max(threads, 1), dtype=np.int64)
    for ch in instrument.open_trace(trace).chunks():
        got = np.bincount(ch.thread.astype(np.int64), minlength=len(counts))
        if len(got) > len(counts):
            counts = np.r_[counts, np.zeros(len(got) - len(counts), dtype=np.int64)]
        counts += got
    return counts


def imbalance(per_core: np.ndarray, cores: int) -> float:
    """max / mean accesses over `cores` cores (1.0 = perfectly balanced)."""
    per = np.zeros(max(cores, len(per_core)))
    per[:len(per_core)] = per_core
    mean = per.mean() if len(per) else 0.0
    return float(per.max() / mean) if mean > 0 else 1.0


def simulate_trace(trace: Path, machines: list[Machine], threads: int, interleave: str, seed: int = 0,
                   evidence: bool = False, spill_dir: Path | None = None, refs_per_turn: int = 1,
                   placement: str = "close", frame_seeds: int = 1) -> pd.DataFrame:
    """One merge of the trace, simulated on every machine at once; one row per machine and level.

    With `evidence`, the same merged stream also runs with the small levels fully associative
    (conflict misses) and without write-invalidate (coherence misses), for the outlier rules.
    `seed` seeds the random merge and the page frames of physically indexed and hashed levels; with
    `frame_seeds` > 1 the hit rates are the mean over that many frame maps (seeds seed, seed + 1, ...;
    placement_sd is their standard deviation). `placement` (OpenMP proc_bind close or spread) puts thread t
    on a core, whose group's instance of each shared level it uses (machines.model.thread_cores)."""
    line = _line_size(machines)
    variants = {"": {}}
    if evidence:
        variants |= {"fa_": {"fully_associative_up_to": FA_MAX_LINES}, "nocoh_": {"coherent": False}}
    sims = {(m.name, v, 0): machine_hierarchy(m, threads, seed, placement, **kw) for m in machines
            for v, kw in variants.items()}
    sims |= {(m.name, "", j): machine_hierarchy(m, threads, seed + j, placement) for m in machines
             for j in range(1, frame_seeds)}
    for batch in merged_stream(trace, interleave, seed, line, spill_dir, refs_per_turn):
        for sim in sims.values():
            sim.access(batch.lines, batch.core, batch.is_store)
    return pd.concat([_machine_rows(m, sims, threads, variants, frame_seeds) for m in machines], ignore_index=True)


def _machine_rows(m: Machine, sims: dict, threads: int, variants: dict, frame_seeds: int) -> pd.DataFrame:
    """One machine's rows: its first frame map's counts, hit rates averaged over the frame maps."""
    main = sims[(m.name, "", 0)]
    df = main.counts.table(threads).assign(machine=m.name, distinct_lines=main.entries)
    tables = [sims[(m.name, "", j)].counts.table(threads) for j in range(frame_seeds)]
    for column in ("cumulative_hit_rate", "local_hit_rate"):
        df[column] = np.mean([t[column].to_numpy() for t in tables], axis=0)
    df["placement_sd"] = np.std([t["cumulative_hit_rate"].to_numpy() for t in tables], axis=0)
    for v in ("fa_", "nocoh_"):
        df[f"{v}cumulative_hit_rate"] = (sims[(m.name, v, 0)].counts.table(threads)["cumulative_hit_rate"]
                                         if v in variants else np.nan)
    return df


def ground_truth(source: Path, workdir: Path, machines: list[Machine], cores: list[int], args=(),
                 include_dirs=(), defines=(), extra_sources=(), interleaves=INTERLEAVES, seed: int = 0,
                 progress=None, refs_per_turn: int = 1, placement: str = "close") -> pd.DataFrame:
    """Simulated hit rates of real N-thread runs, per machine, thread count, interleave and level.

    `refs_per_turn` > 1 merges the threads in coarser turns (less lockstep, less false-sharing ping-pong);
    `placement` (close or spread) puts the threads on the machine's cores, which picks the instance of a
    shared level split per group of cores (e.g. an L3 per CCX) each thread uses."""
    workdir = Path(workdir)
    bad = [s for s in interleaves if s not in INTERLEAVES]
    if bad or not interleaves:
        raise InputError(f"--interleave {', '.join(bad) or '(none)'}: expected rr, random or both")
    if not machines:
        raise InputError("no machine given; pass --machine NAME")
    if refs_per_turn < 1:
        raise InputError(f"--refs-per-turn {refs_per_turn}: must be at least 1")
    if placement not in PLACEMENTS:
        raise InputError(f"placement {placement!r}: use one of {', '.join(PLACEMENTS)}")
    if not cores or min(cores) < 1 or max(cores) > MAX_COHERENT_CORES:
        raise InputError(f"--cores {cores}: give thread counts from 1 to {MAX_COHERENT_CORES}")
    _line_size(machines)
    binary = build_original(Path(source), workdir, include_dirs, defines, extra_sources, progress)
    frames = [_one_count(binary, workdir, machines, p, args, interleaves, seed, refs_per_turn, progress, placement)
              for p in sorted(set(cores))]
    return pd.concat(frames, ignore_index=True)[GT_COLUMNS]


def _one_count(binary: Path, workdir: Path, machines: list[Machine], threads: int, args, interleaves,
               seed: int, refs_per_turn: int, progress: Progress, placement: str = "close") -> pd.DataFrame:
    """Ground-truth rows of one thread count (cached by trace content, machines and parameters)."""
    trace = trace_threads(binary, workdir, threads, args, progress)
    out = trace.parent / "groundtruth.parquet"
    key = step_key([trace], {"machines": [dataclasses.asdict(m) for m in machines], "interleaves": list(interleaves),
                             "seed": seed, "version": _SIM_VERSION, "fa": FA_MAX_LINES, "k": refs_per_turn,
                             "placement": placement, "frame_seeds": FRAME_SEEDS})
    stamp = trace.parent / ".gt-key"
    if reuse_or_invalidate(stamp, key, [out]):
        return pd.read_parquet(out)
    per_thread = thread_accesses(trace, threads)
    frames = []
    for strategy in interleaves:
        _say(progress, f"simulate {threads} threads, {strategy}")
        df = simulate_trace(trace, machines, threads, strategy, seed, evidence=True, spill_dir=trace.parent,
                            refs_per_turn=refs_per_turn, placement=placement, frame_seeds=FRAME_SEEDS)
        frames.append(df.assign(interleave=strategy, thread_imbalance=imbalance(per_thread, threads)))
    table = pd.concat(frames, ignore_index=True)[GT_COLUMNS]
    write_table(table, out)
    write_table(pd.DataFrame({"thread": np.arange(len(per_thread)), "accesses": per_thread}),
                trace.parent / "thread_accesses.csv")
    mark_done(stamp, key)
    return table


def _line_size(machines: list[Machine]) -> int:
    """The one line size of every level of every machine (the merge is done in lines)."""
    sizes = {lv.line_bytes for m in machines for lv in m.caches}
    if len(sizes) != 1:
        raise InputError(f"machines {', '.join(m.name for m in machines)}: cache levels use different line sizes "
                         f"({sorted(sizes)}); validate them separately")
    return sizes.pop()


def _say(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


__all__ = ["GT_COLUMNS", "MergedBatch", "RegionMerger", "build_original", "ground_truth", "merged_stream",
           "simulate_trace", "thread_accesses", "trace_threads"]
