"""Sampled PRD/CRD profiles that sample the sequential trace at its source (`pptmc profile --sample-rate`).

The mimicked private traces and the interleaved shared traces are made of the sequential trace's
accesses (with a per-core offset on private data), so both samples the estimate needs can be
taken from the sequential trace, right after decoding and before Algorithm 1 (private traces)
and Algorithm 2 (interleaving). One fused pass over the decoded rows computes each row's line,
its seeded hash and keep flag, and the runs of rows sharing a loop iteration (iteration mode) or
a block with non-decreasing instances (paper mode); on a trace file in iteration mode the reader's
sampling decode (instrument.tracefile.SampleSink) does this pass itself while decoding, one word per
row (line and flags, for the windows), so no column is written and read back. Everything after it
touches a few percent of the accesses:

* cores are decided per run on the full trace, with the same per-access rule as CoreMap in the
  exact profiles (paper mode: a run is cut where its instances leave a core's contiguous span),
  and a running count per core gives every access its position in its core's private trace;
* SHARDS (Waldspurger et al., FAST'15): the accesses of the lines whose hash (of the line before
  the offset) is below the rate. In every private and shared trace these are exactly that
  trace's accesses to the sampled lines, in order. Private traces: each core's sampled accesses
  in row order. Shared trace: round-robin interleaving with k references per turn puts private
  position i of core c before (i', c') iff (i // k, c, i) < (i' // k, c', i'), whatever the
  traces' lengths (core c's j-th turn is in the j-th cycle: every active core takes one turn per
  cycle), so the sampled accesses are merged by that key, streaming: each core's wait in a queue in
  its order, and an access is released once every core's running count has passed it (a numba p-way
  merge of the queues' heads; the queues hold about `rate` of what waits in the exact interleaver, in
  one block pool per core count that spills beyond the memory budget: analysis/sampling/shards/queues.py).
  Write-invalidate coherence works line by line, so the Directory walk over
  the merged sampled stream finds exactly the coherence misses of the sampled lines. All of this
  (placing, private stacks, merge, sharer sets, shared stack, tallies) is two fused kernels per core
  count and batch (analysis/sampling/shards/shards_kernel.py);
* time windows (the stream sampler's `window` method, analysis/sampling/streams.py): SHARDS alone is
  coarse for small caches (a 1% sample of a 512-line L1 sees distances of about 5 lines) and
  gives a few hot lines a coin-toss weight, so short reuses are measured exactly in windows of
  `length` accesses, one every length / rate, each with `window` accesses of lookback. A private
  window is a range of private positions, found per run by arithmetic (independently seeded
  offsets per core, so that symmetric cores do not err alike). A shared window is the same
  turn-aligned range of private positions in every core (about (window + length) / p each),
  which is one contiguous run of the round-robin shared trace; its reuses are timed in turns. Shared
  windows are SHARED_WINDOW_SPACING (4) times sparser than private ones: the CRD sets only the shared
  level, whose near reuses are all hits, so it needs their share, not their distances in detail.
  Rows are copied into per-core segment buffers as they are decoded (shared segments wait in a
  ring until every core has passed them, spilled beyond the memory budget, then are read in round-robin order:
  analysis/sampling/near/shared_windows.py) and each segment
  is measured in one pass (a hash table for previous uses, a bitset of latest uses whose
  popcount between two uses is the distance). A reuse at most `window` positions (turns) back
  is near and keeps its exact in-window distance; the others (and cold accesses) take the
  distribution of the SHARDS distances of accesses with such gaps (distances / rate). Counts
  are scaled to each stream's exact length. In the private estimates, the share of near reuses
  that are coherence misses is taken from the SHARDS sample (the windows' lines are not all
  tracked by the Directory).

Periodic traces (iteration mode, analysis.profiles.sweep.loop_period): the SHARDS samples are cut into copies at the
loop instances that start a period and fed copy by copy; a copy whose sampled part repeats the previous one is
not fed once a fed copy left the kernels' state as it found it (relative to every core's position): its counts
are added again (analysis/sampling/shards/replay.py; bit for bit the same profiles). The reader's sampling decode does not
decode the copies of the events that repeat either (instrument.tracefile.DecodeReplay, `decode_replay`): they come
as batches of repeats of one recorded copy, whose SHARDS columns and copies the sampler takes once per recording.
The windows still read every row (of the recorded words, laid out once per repeat).

At rate 1 no window is used and the result equals the exact ProfileSet bit for bit
(tests/test_source_sampling.py). Without windows (window=0) each histogram is the scaled
SHARDS one (`binning.scale_profile`); `adjust` is SHARDS-adj: the gap between the expected (rate *
total) and the drawn sample size goes to distance 0 first (it comes mostly from hot lines drawn
more or less often than their share, whose reuses are short).

Heavy lines: SHARDS weighs each sampled line 1/rate, so a seed that draws a line taking a large share of
the trace (a scalar reloaded every iteration) can err by several points. The metadata records the
heaviest sampled line's share of the sample (`heaviest_line_share`), and `pptmc profile` warns above
HEAVY_SHARE_WARN; stratifying heavy lines would need weighted distances in the engine (not done).

`--interleave random` cannot be merged by a key (the turn order depends on the draws and on
when cores run out), so `sampled_profile_set` falls back to the stream sampler (analysis/sampling/
streams.py StreamSampler, method ``window``, on fully built streams, without coherence) and
records that in the metadata.

Modules: this one (the options, one core count's work, the entry points); source_rows.py (the source pass);
core_runs.py (cores per run, window pieces); windows.py and shared_windows.py (the time windows); shards_kernel.py,
stacks.py and queues.py (the SHARDS samples, the merge's queues); spill.py (the spill files); memory.py (the memory
check before a pass); class_shards.py (the per-set-class profiles: class stacks fed from the kernels' log, the
windows' class distances, the same estimator); replay.py (periodic stretches); hashing.py and binning.py (shared
with the other samplers).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np

from analysis.profiles.handouts import ChunkCosts, chunk_costs
from analysis.profiles.groups import grouping_name
from analysis.profiles.interleave import resolve_memory_budget
from analysis.profiles.set_classes import check_class_bits
from analysis.profiles.sweep import loop_period
from analysis.profiles.private_traces import OFFSET_BITS, CoreMap, line_shift, resolve_mode
from analysis.profiles.profileset import ReuseProfile
from analysis.sampling.binning import scale_profile
from analysis.sampling.shards.class_shards import ClassShards, class_estimate
from analysis.sampling.shards.group_shards import GroupShards
from analysis.sampling.core_runs import WindowGrid, core_runs, window_pieces
from analysis.sampling.hashing import draw_salt, shards_threshold
from analysis.sampling.memory import SHARED_SPACING, check_sampled_memory, ring_budget
from analysis.sampling.shards.shards_kernel import PairBatch, ShardsStreams
from analysis.sampling.shards import replay as source_replay
from analysis.sampling.shards.replay import Copy, CopyBuffer, ShardsReplay, advance, even_split
from analysis.sampling.source_rows import Picker, Rows
from analysis.sampling.streams import DEFAULT_WINDOW_LENGTH
from analysis.sampling.near.shared_windows import SharedWindows
from analysis.sampling.near.windows import Estimate, PrivateWindows
from instrument.trace_types import TraceChunk, TraceInfo
from instrument import open_trace
from instrument.tracefile import SampledBatch
from common.errors import InputError
from analysis.sampling.options import SOURCE_WINDOW

# Decoded rows per batch: small enough (about 11 MB of columns) to be still cached when the source pass
# reads them; 2^20-row batches made the whole 1% profile of jacobi-2d MEDIUM 0.73 s instead of 0.60 s.
SOURCE_ROWS = 1 << 18
# Rows per batch of the reader's sampling decode (8 B a row, 4 MB): fewer batches, half the per-batch calls
# (jacobi-2d MEDIUM 1%: about 0.01 s less than 2^18 rows, 2^20 no better)
SAMPLED_ROWS = 1 << 19
# The columns the source pass reads, per mode (the reader skips the others: a fifth less decoding time)

# The shared trace's windows are this many times sparser than the private traces' (they measure rate / 4 of
# the shared accesses): the CRD sets only the shared level's hit rate, whose near reuses are all hits, so its
# windows need only the share of near reuses, not their distances' detail (see analysis/SAMPLING.md).
SHARED_WINDOW_SPACING = SHARED_SPACING

# A sample whose heaviest line takes more than this share of the sampled accesses is flagged: SHARDS weighs
# the line 1/rate, and its reuses then stand for far more of the trace than they are (see heaviest_share).
HEAVY_SHARE_WARN = 0.05

# Lookback (accesses) of the per-set-class profiles' private windows, at least --sample-window: an L1 set's 8-12
# ways need class distances of a few lines, which the SHARDS tail resolves only to about 1 / rate lines (a reuse
# of a 1% sample's far tail with fewer than about 100 lines of its class between comes out as distance 0)
CLASS_WINDOW = 4096

# Replay the SHARDS samples' periodic stretches (analysis/sampling/shards/replay.py) in iteration mode; False: feed every
# copy (the same profiles, bit for bit; tests compare the two)
REPLAY = True

SOURCE_COLUMNS = {"iteration": ("addr", "is_store", "loop", "iteration", "is_stack"),
                  "paper": ("addr", "is_store", "block", "block_instance")}


@dataclass(frozen=True)
class SourceSampling:
    """How `pptmc profile --sample-rate` samples at the source; saved in the profile metadata."""

    rate: float
    seed: int = 0
    adjust: bool = True  # SHARDS-adj: the sample-size gap goes to distance 0
    window: int = SOURCE_WINDOW  # reuses at most this many accesses apart are measured in windows (0: SHARDS only)
    length: int = DEFAULT_WINDOW_LENGTH  # accesses per window

    def __post_init__(self) -> None:
        if not 0.0 < self.rate <= 1.0:
            raise InputError(f"--sample-rate must be in (0, 1], got {self.rate}; e.g. 0.01 for 1%")
        if self.seed < 0:
            raise InputError(f"--seed must be >= 0, got {self.seed}")
        if self.window < 0 or self.length < 1:
            raise InputError(f"--sample-window must be >= 0 and --window-length >= 1 access, "
                             f"got {self.window} and {self.length}")

    @property
    def period(self) -> int:
        """Accesses from one window start to the next: length / rate, but segments never overlap."""
        return max(int(round(self.length / self.rate)), self.window + self.length)

    def window_offsets(self, cores: int) -> np.ndarray:
        """Seeded start of the first window of each core's private trace (p cores). Independent per core:
        with one offset for all, symmetric cores (an even split of one loop) would put their windows at the
        same places in their parts and their errors would add up instead of averaging out."""
        rng = np.random.default_rng([self.seed, cores])
        return rng.integers(0, self.period - self.length + 1, cores).astype(np.int64)

    @property
    def salt(self) -> np.uint64:
        """The seeded hash salt (drawn as the stream sampler draws it, so one seed picks the same lines)."""
        return draw_salt(np.random.default_rng(self.seed))

    @property
    def threshold(self) -> np.uint64:
        """The SHARDS hash threshold of the rate."""
        return shards_threshold(self.rate)

    def metadata(self) -> dict:
        """The sampling's entry in the profile metadata."""
        return {"sampled": True, "rate": self.rate, "method": "source", "seed": self.seed, "adjust": self.adjust,
                "window": self.window, "window_length": self.length}


class SourceTask:
    """One core count: the SHARDS samples of its private and shared traces (ShardsStreams: private stacks, the
    key merge of the shared trace, its sharer sets and stack) and, below rate 1, the window segments of every
    private trace and of the shared trace."""

    def __init__(self, cmap: CoreMap, shift: int, refs_per_turn: int, coherence: bool, sampling: SourceSampling,
                 replay: int = 0, class_bits: tuple[int, ...] = (), class_crds: bool = True,
                 budget: int = 1 << 30, spill_dir: str | None = None, groupings: tuple = ()) -> None:
        """class_bits: also estimate the per-set-class profiles of these widths (class_shards.py); class_crds:
        with their CRDs (p > 1); groupings: also the per-instance CRDs of these groupings of the p threads
        (group_shards.py); budget, spill_dir: bytes of samples waiting for the merge (queues.QueuePool) and
        of shared window segments (shared_windows.SharedWindows: memory.ring_budget of it) kept in memory, and
        where the rest spills."""
        cores = cmap.cores
        self.class_bits, self.class_crds = tuple(class_bits), class_crds and cores > 1
        self.p, self.k, self.shift = cores, refs_per_turn, shift
        self.step = np.uint64(OFFSET_BITS - shift)  # the per-core offset's shift in line ids
        self.cmap = cmap
        self.tables = self.cmap.tables()
        self.counters = np.zeros(cores, dtype=np.int64)  # private positions the rows have reached
        self.windows = sampling.rate < 1.0 and sampling.window > 0
        self.look, self.length, self.period = sampling.window, sampling.length, sampling.period
        self.next_start = sampling.window_offsets(cores)
        self.grid = WindowGrid(self.next_start, self.period, self.length, self.look)
        self.est = [Estimate(sampling.window) for _ in range(cores)]
        self.pool = PrivateWindows(cores, sampling.window, sampling.length)
        self.scratch = np.zeros((64, 6), dtype=np.int64)
        self._init_shared_windows(sampling, ring_budget(budget, self.windows and cores > 1), spill_dir)
        self._init_class_windows(sampling)
        s_look = self.s_look // refs_per_turn
        self.classes = [ClassShards(b, cores, self.class_crds, self.windows, self.c_look, self.shared_windows, s_look)
                        for b in self.class_bits]
        self.groups = [GroupShards(g, coherence and cores > 1) for g in groupings if len(g) == cores]
        self.shards = ShardsStreams(cores, refs_per_turn, coherence, self.windows, self.look, self.shared_windows,
                                    s_look, tuple(self.classes) + tuple(self.groups),
                                    budget - ring_budget(budget, self.shared_windows), spill_dir)
        replay = replay and even_split(self.cmap, replay)
        # with replay (periodic traces) the SHARDS samples are fed copy by copy, behind the rows: own positions
        self.s_counters = np.zeros(cores, dtype=np.int64) if replay else self.counters
        self.replay = ShardsReplay(self.shards, self.s_counters, self.feed_copy) if replay else None

    def _init_shared_windows(self, sampling: SourceSampling, budget: int, spill_dir: str | None) -> None:
        """Windows of the shared trace: the same private positions [s - look, s + length) in every core,
        on turn boundaries, are one contiguous run of the round-robin shared trace (keys
        [key(s - look, 0), key(s + length, 0))), whatever the private traces' lengths. budget, spill_dir: bytes
        of waiting segments kept in memory, and where the rest spills (shared_windows.SharedWindows)."""
        k = self.k
        up = lambda x: -(-x // k) * k  # noqa: E731
        self.shared_windows = self.windows and self.p > 1
        # about `look` + `length` shared accesses per segment, as in a private trace: 1/p of them per core
        self.s_look, self.s_length = up(-(-self.look // self.p)), up(-(-self.length // self.p))
        spacing = SHARED_WINDOW_SPACING * self.s_length / sampling.rate
        self.s_period = max(up(int(round(spacing))), self.s_look + self.s_length)
        rng = np.random.default_rng([sampling.seed, self.p, k])
        self.s_next = np.full(self.p, int(rng.integers(0, (self.s_period - self.s_length) // k + 1)) * k, np.int64)
        self.s_grid = WindowGrid(self.s_next, self.s_period, self.s_length, self.s_look)
        self.s_est = Estimate(self.s_look // k)  # positions are turns
        self.s_pool = SharedWindows(self.p, k, self.s_look, self.s_length, int(self.s_next[0]), self.s_period,
                                    self.class_bits if self.class_crds else (), budget, spill_dir)

    def _init_class_windows(self, sampling: SourceSampling) -> None:
        """The private windows of the per-set-class profiles: the plain windows' starts with a lookback of at least
        CLASS_WINDOW (a set's few ways need class distances of a few lines, which a 1% SHARDS sample cannot
        resolve: SAMPLING.md section 3), spaced at least lookback + length apart."""
        self.c_look = max(CLASS_WINDOW, sampling.window)
        period = max(sampling.period, self.c_look + sampling.length)
        self.c_grid = WindowGrid(sampling.window_offsets(self.p), period, sampling.length, self.c_look)
        self.c_pool = PrivateWindows(self.p, self.c_look, sampling.length, self.class_bits)
        self.c_est = [Estimate(self.c_look) for _ in range(self.p)]

    def feed(self, rows: Rows) -> None:
        """Add one chunk's rows: window pieces, then the sampled rows placed, fed and merged (ShardsStreams)."""
        starts, run_core = core_runs(rows.mode == "iteration", rows.starts, rows.key0, rows.key1, self.tables)
        if self.windows:
            self._windows(rows, starts, run_core)
        if self.replay is None:
            self.shards.feed(PairBatch(rows.sel, rows.lines, rows.offset, rows.store, starts, run_core, self.step),
                             self.counters)
        else:  # the SHARDS samples come copy by copy (feed_copy)
            advance(starts, run_core, self.counters)
        if self.shared_windows:
            self.s_pool.measure(int(self.counters.min()))

    def feed_copy(self, copy: Copy) -> None:
        """Feed one copy's SHARDS samples (rows counted from the copy's start)."""
        starts, run_core = core_runs(True, copy.starts, copy.key0, copy.key1, self.tables)
        self.shards.feed(PairBatch(copy.sel, copy.lines, copy.offset, copy.store, starts, run_core, self.step),
                         self.s_counters)

    def _windows(self, rows: Rows, starts: np.ndarray, run_core: np.ndarray) -> None:
        """Pool the chunk's rows that fall in each core's window segments, and in the shared trace's."""
        self.pool.add(self._pieces(starts, run_core, self.grid), rows)
        if self.class_bits:
            self.c_pool.add(self._pieces(starts, run_core, self.c_grid), rows)
        if not self.shared_windows:
            return
        self.s_pool.add(self._pieces(starts, run_core, self.s_grid), rows)

    def _pieces(self, starts: np.ndarray, run_core: np.ndarray, grid: WindowGrid) -> np.ndarray:
        """window_pieces with a scratch array grown until it fits (grid.next_start advanced in place)."""
        while True:
            before = grid.next_start.copy()
            n = window_pieces(starts, run_core, self.counters, self.p, grid, self.scratch)
            if n >= 0:
                return self.scratch[:n]
            grid.next_start[:] = before
            self.scratch = np.zeros((2 * self.scratch.shape[0], 6), dtype=np.int64)

    def finish(self, sampling: SourceSampling) -> tuple[list, object]:
        """Every core's estimated PRD and the estimated CRD, each totalling its stream's exact length."""
        sh = self.shards
        if self.replay is not None:
            self.replay.unwind()
        if sh.shared is not None:
            sh.release(None)
        if self.windows:
            self.pool.finish(self.est)
            self.c_pool.finish(self.c_est)
            tails, s_tail = sh.tails()
            for c, est in enumerate(self.est):
                est.shards_near, est.shards_near_coh, est.tail_coh = (int(x) for x in sh.tally[c])
                est.tail_keys, est.tail_cnt = tails[c]
        if self.shared_windows:
            self.s_pool.finish(self.s_est)
            self.s_est.shards_near, (self.s_est.tail_keys, self.s_est.tail_cnt) = int(sh.s_tally[0, 0]), s_tail
        raw = [sh.private.profile(c) for c in range(self.p)]
        out = self._estimate(raw, sh.shared.profile(0) if sh.shared is not None else None, sampling,
                             self.est, self.s_est)
        self.class_results = [self._class_estimate(w, cs, sampling) for w, cs in enumerate(self.classes)]
        self.group_results = {g.grouping: g.profiles(self.counters, sampling.rate, sampling.adjust)
                              for g in self.groups}
        return out

    def _estimate(self, raw: list, raw_crd, sampling: SourceSampling, est: list, s_est) -> tuple[list, object]:
        """Every core's PRD and the CRD (raw_crd None: the one core's PRD) from their SHARDS profiles and, with
        windows, their estimates (windows.Estimate)."""
        rate, adjust = sampling.rate, sampling.adjust
        if self.windows:
            prd = [e.profile(h, rate, int(n), adjust) for e, h, n in zip(est, raw, self.counters)]
        else:
            prd = [scale_profile(h, rate, int(n), adjust) for h, n in zip(raw, self.counters)]
        if raw_crd is None:
            return prd, prd[0]
        total = int(self.counters.sum())
        if self.shared_windows:
            return prd, s_est.profile(raw_crd, rate, total, adjust)
        return prd, scale_profile(raw_crd, rate, total, adjust)

    def _class_estimate(self, w: int, cs: ClassShards, sampling: SourceSampling) -> tuple[list, object]:
        """The per-set-class PRDs and CRD of width class_bits[w] (set_classes.class_profiles' shape: without
        class CRDs, an empty profile in the CRD's place for p > 1), estimated as the plain ones are."""
        raw, raw_crd = cs.raw()
        est, s_est = self.est, self.s_est
        if self.windows:
            tails, s_tail = cs.tails()
            est = [class_estimate(e, self.c_pool.class_near(w, c), tails[c], cs.tally[c])
                   for c, e in enumerate(self.c_est)]
            if self.shared_windows and raw_crd is not None:
                s_est = class_estimate(s_est, self.s_pool.class_near(w), s_tail)
        prd, crd = self._estimate(raw, raw_crd, sampling, est, s_est)
        return prd, (crd if raw_crd is not None or self.p == 1 else ReuseProfile.empty())


BatchSource = Callable[[int, int, int], Iterator[SampledBatch]]  # (shift, salt, threshold) -> sampling decode


@dataclass
class ClassRequest:
    """The per-set-class profiles source_profiles is asked for: widths (set_classes.check_class_bits), whether
    with class CRDs (rates.shared_classes_needed), and, after it, each width's (PRDs, CRD) per core count."""

    bits: tuple[int, ...] = ()
    crds: bool = True
    results: dict = field(default_factory=dict)
    groupings: tuple = ()  # also the per-instance CRDs of these groupings (group_shards.py) ...
    groups: dict = field(default_factory=dict)  # ... after it, grouping -> its instances' CRDs


def source_profiles(info: TraceInfo, chunks: Iterable[TraceChunk] | None, counts: list[int],
                    sampling: SourceSampling, mode: str, refs_per_turn: int = 1, line_size: int = 64,
                    paper_chunk: int = 0, coherence: bool = True,
                    batches: BatchSource | None = None, diagnostics: dict | None = None,
                    classes: ClassRequest | None = None, memory_budget: int | None = None,
                    spill_dir: str | None = None, costs: ChunkCosts | None = None) -> list[tuple[list, object]]:
    """Sampled (PRDs, CRD) of each core count, from one pass over the chunks (round-robin interleaving).
    costs: the chunk costs of the trace's dynamic loops (analysis.profiles.handouts; None: equal costs).
    batches: instead of chunks, in iteration mode, the trace reader's sampling decode (the decoder hashes the
    lines and finds the runs itself, so the rows are never read back; same profiles). diagnostics, when
    given, receives `heaviest_line_share` (LineTally.heaviest_share). classes: also the per-set-class profiles
    of its widths, into classes.results[bits] (one (PRDs, CRD) per core count, as set_classes.class_profiles), and
    the per-instance CRDs of its groupings into classes.groups.
    memory_budget: bytes of samples waiting for the round-robin merge and of shared window segments kept in memory,
    shared by the core counts (None: analysis.profiles.interleave's default, $PPTMC_MEMORY_BUDGET); the rest spills to
    spill_dir."""
    if refs_per_turn < 1:
        raise InputError(f"--refs-per-turn {refs_per_turn}: must be at least 1")
    resolved = resolve_mode(info, mode)
    shift = line_shift(line_size)
    period = loop_period(info) if resolved == "iteration" and REPLAY else 0
    bits, crds = (classes.bits, classes.crds) if classes is not None else ((), True)
    groupings = classes.groupings if classes is not None else ()
    budget = resolve_memory_budget(memory_budget) // max(1, sum(1 for p in counts if p > 1))
    tasks = [SourceTask(CoreMap(info, p, resolved, paper_chunk, costs), shift, refs_per_turn, coherence, sampling, period,
                        bits, crds, budget, spill_dir, groupings) for p in counts]
    if not tasks:
        return []
    copies = CopyBuffer(period) if any(t.replay is not None for t in tasks) else None
    picker = Picker(sampling.salt, sampling.threshold, resolved, shift, tasks[0].cmap, info.path)
    if batches is not None and resolved == "iteration":
        rows = (picker.batch_rows(b) for b in batches(shift, int(sampling.salt), int(sampling.threshold)))
    else:
        rows = (picker.rows(ch) for ch in chunks if len(ch))
    for r in rows:
        for t in tasks:
            t.feed(r)
        if copies is not None:
            _feed_copies(tasks, copies.add(r))
    if copies is not None:
        _feed_copies(tasks, copies.finish())
    if diagnostics is not None:
        diagnostics["heaviest_line_share"] = picker.tally.heaviest_share()
    out = [t.finish(sampling) for t in tasks]
    if classes is not None:
        classes.results.update({b: [t.class_results[w] for t in tasks] for w, b in enumerate(bits)})
        classes.groups.update({g: crds for t in tasks for g, crds in t.group_results.items()})
    return out


def _feed_copies(tasks: list[SourceTask], done: list) -> None:
    """Completed copies (source_replay.CopyBuffer) to every core count's replay."""
    for copy, same in done:
        for t in tasks:
            if t.replay is not None:
                t.replay.feed(copy, same)


def source_trace(trace_path: str) -> tuple[TraceInfo, Callable[[int, tuple[str, ...]], Iterator[TraceChunk]],
                                          Callable[..., Iterator[SampledBatch]] | None]:
    """TraceInfo of a trace file, its reader's chunks(max_rows, columns) (the source pass decodes only the
    columns it reads) and sampled_batches(max_rows, shift, salt, threshold), the decode that does the source
    pass itself (None: not available). Tests swap in in-memory traces here, as for
    analysis.profiles.sweep.open_chunks."""
    reader = open_trace(trace_path)
    return reader.info, reader.chunks, reader.sampled_batches


def decode_replay(info: TraceInfo) -> dict:
    """The sampling decode's replay arguments for a trace (iteration mode): on periodic traces the decoder does not
    decode the copies that repeat (instrument.tracefile.DecodeReplay), copies as long as the sampler's."""
    period = loop_period(info) if REPLAY else 0
    return {"period": period, "min_rows": source_replay.MIN_COPY_ROWS} if period else {}


def sampled_profile_set(trace_path: str, cores: list[int], sampling: SourceSampling, mode: str = "auto",
                        interleave: str = "rr", seed: int = 0, refs_per_turn: int = 1, line_size: int = 64,
                        paper_chunk: int = 0, coherence: bool = True, max_rows: int | None = None,
                        class_bits: tuple[int, ...] = (), class_crds: bool = True, memory_budget: int | None = None,
                        spill_dir: str | None = None, groupings: tuple = ()):
    """(ProfileSet, sampling metadata) of a trace file: sampled at the source for round-robin
    interleaving; for `--interleave random`, the stream sampler (window method) on the full streams, without
    per-set-class profiles. max_rows: decoded rows per batch (default SAMPLED_ROWS with the reader's sampling
    decode, else SOURCE_ROWS; 2^20 for the stream sampler). class_bits, class_crds: the per-set-class profiles
    to estimate too and groupings, the per-instance CRDs (compute_profiles' keywords); memory_budget, spill_dir:
    source_profiles'. Refuses a run whose
    worst case does not fit in the free memory (memory.check_sampled_memory) before any work."""
    from analysis.profiles import sweep as profiles
    from analysis.sampling.streams import StreamSampling, sampled_profiles

    if not cores or min(cores) < 1:
        raise InputError(f"--cores {cores}: give one or more positive core counts, e.g. 1,2,4,8")
    if interleave != "rr":
        fallback = StreamSampling(sampling.rate, "window", sampling.seed)
        ps = sampled_profiles(trace_path, cores, fallback, mode, interleave, seed, refs_per_turn, line_size,
                              paper_chunk, max_rows or 1 << 20)
        return ps, {**fallback.metadata(), "requested": "source (rr interleaving only)"}
    info, chunks, sampled = source_trace(trace_path)
    counts = sorted(set(int(c) for c in cores))
    budget = resolve_memory_budget(memory_budget)
    check_sampled_memory(str(trace_path), info.n_accesses, info.distinct_lines_estimate, counts, sampling.rate,
                         sampling.window, sampling.length, budget, sum(max(g) + 1 for g in groupings))
    resolved = resolve_mode(info, mode)
    ps = profiles.ProfileSet(line_size, resolved, interleave, seed, refs_per_turn, info.path,
                             paper_chunk=paper_chunk, trace_complete=info.complete, coherence=coherence)
    found: dict = {}
    classes = ClassRequest(check_class_bits(class_bits), class_crds, groupings=tuple(tuple(g) for g in groupings))
    costs = chunk_costs(info, lambda: chunks(SOURCE_ROWS, ("loop", "iteration")), resolved)  # a pass if it deals any
    if sampled is not None and resolved == "iteration":
        rows, replay = max_rows or SAMPLED_ROWS, decode_replay(info)
        results = source_profiles(info, None, counts, sampling, resolved, refs_per_turn, line_size, paper_chunk,
                                  coherence, lambda *hash_args: sampled(rows, *hash_args, **replay), found, classes,
                                  budget, spill_dir, costs)
    else:
        results = source_profiles(info, chunks(max_rows or SOURCE_ROWS, SOURCE_COLUMNS[resolved]), counts,
                                  sampling, resolved, refs_per_turn, line_size, paper_chunk, coherence,
                                  diagnostics=found, classes=classes, memory_budget=budget, spill_dir=spill_dir,
                                  costs=costs)
    for p, (prd, crd) in zip(counts, results):
        ps.prd.update({(p, c): h for c, h in enumerate(prd)})
        ps.crd[p] = crd
    for b, res in classes.results.items():
        ps.add_classes(b, counts, res, class_crds)
    for g, crds in classes.groups.items():
        ps.group_crd.update({(grouping_name(g), i): prof for i, prof in enumerate(crds)})
    return ps, {**sampling.metadata(), "heaviest_line_share": round(found["heaviest_line_share"], 6)}
