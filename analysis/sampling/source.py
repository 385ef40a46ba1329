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
  merge of the queues' heads; the queues hold about `rate` of what waits in the exact interleaver).
  Write-invalidate coherence works line by line, so the Directory walk over
  the merged sampled stream finds exactly the coherence misses of the sampled lines. All of this
  (placing, private stacks, merge, sharer sets, shared stack, tallies) is two fused kernels per core
  count and batch (analysis/sampling/shards_kernel.py);
* time windows (the stream sampler's `window` method, analysis/sampling/blocks.py): SHARDS alone is
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
  ring until every core has passed them, then are read in round-robin order) and each segment
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
are added again (analysis/sampling/replay.py; bit for bit the same profiles). The reader's sampling decode does not
decode the copies of the events that repeat either (instrument.tracefile.DecodeReplay, `decode_replay`): they come
as batches of repeats of one recorded copy, whose SHARDS columns and copies the sampler takes once per recording.
The windows still read every row (of the recorded words, laid out once per repeat).

At rate 1 no window is used and the result equals the exact ProfileSet bit for bit
(tests/test_source_sampling.py). Without windows (window=0) each histogram is the scaled
SHARDS one (`scale_profile`); `adjust` is SHARDS-adj: the gap between the expected (rate *
total) and the drawn sample size goes to distance 0 first (it comes mostly from hot lines drawn
more or less often than their share, whose reuses are short).

Heavy lines: SHARDS weighs each sampled line 1/rate, so a seed that draws a line taking a large share of
the trace (a scalar reloaded every iteration) can err by several points. The metadata records the
heaviest sampled line's share of the sample (`heaviest_line_share`), and `pptmc profile` warns above
HEAVY_SHARE_WARN; stratifying heavy lines would need weighted distances in the engine (not done).

`--interleave random` cannot be merged by a key (the turn order depends on the draws and on
when cores run out), so `sampled_profile_set` falls back to the stream sampler (analysis/
sampling.py StreamSampler, method ``window``, on fully built streams, without coherence) and
records that in the metadata.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numba
import numpy as np

from analysis.profiles.sweep import loop_period
from analysis.profiles.private_traces import (ALL_CORES, OFFSET_BITS, CoreMap, iteration_core, paper_core, line_shift,
                                     resolve_mode)
from analysis.profiles.bitops import popcount as _popcount
from analysis.sampling.blocks import DEFAULT_WINDOW_LENGTH, binned_profile
from analysis.sampling.shards_kernel import ShardsStreams
from analysis.sampling import replay as source_replay
from analysis.sampling.replay import CopyBuffer, ShardsReplay, advance, even_split
from instrument.trace_types import SCHED_STATIC, TraceChunk, TraceInfo
from instrument import open_trace
from instrument.tracefile import WORD_LINE, WORD_STACK, WORD_STORE, SampledBatch
from common.errors import InputError

_HASH_SCALE = 1 << 32  # the same salted 32-bit line hash as analysis.sampling.blocks (_hash_mask)
# Decoded rows per batch: small enough (about 11 MB of columns) to be still cached when the source pass
# reads them; 2^20-row batches made the whole 1% profile of jacobi-2d MEDIUM 0.73 s instead of 0.60 s.
SOURCE_ROWS = 1 << 18
# Rows per batch of the reader's sampling decode (8 B a row, 4 MB): fewer batches, half the per-batch calls
# (jacobi-2d MEDIUM 1%: about 0.01 s less than 2^18 rows, 2^20 no better)
SAMPLED_ROWS = 1 << 19
# The columns the source pass reads, per mode (the reader skips the others: a fifth less decoding time)
# Lookback of the windows. 1024 rather than the stream sampler's 512: a scalar reloaded every row of a loop
# nest is reused 700-1500 accesses apart, and only reuses within the lookback are measured in windows; the
# others come from the SHARDS far pool, which a seed that draws such a heavy line floods. jacobi-2d MEDIUM,
# 1%, seeds 1-8, worst of L1/L2/L3 x cores 1-16: 0.05-0.38 pp with 1024, 0.19-3.74 pp with 512 (seeds 3
# and 5 draw a heavy line), at about 5% more CPU time; the bench's synthetic trace: 1.01 pp either way.
SOURCE_WINDOW = 1 << 10

# The shared trace's windows are this many times sparser than the private traces' (they measure rate / 4 of
# the shared accesses): the CRD sets only the shared level's hit rate, whose near reuses are all hits, so its
# windows need only the share of near reuses, not their distances' detail (see analysis/SAMPLING.md).
SHARED_WINDOW_SPACING = 4

# A sample whose heaviest line takes more than this share of the sampled accesses is flagged: SHARDS weighs
# the line 1/rate, and its reuses then stand for far more of the trace than they are (see heaviest_share).
HEAVY_SHARE_WARN = 0.05

# Replay the SHARDS samples' periodic stretches (analysis/sampling/replay.py) in iteration mode; False: feed every
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
        return np.uint64(np.random.default_rng(self.seed).integers(0, 2**32))

    @property
    def threshold(self) -> np.uint64:
        return np.uint64(min(int(self.rate * _HASH_SCALE), _HASH_SCALE))

    def metadata(self) -> dict:
        return {"sampled": True, "rate": self.rate, "method": "source", "seed": self.seed, "adjust": self.adjust,
                "window": self.window, "window_length": self.length}


@numba.njit(cache=True, nogil=True)
def pick_rows(addr, key0, key1, by_key1, shift, salt, threshold, sel, starts):
    """One pass over a chunk: rows whose line's salted 32-bit hash is below threshold, the starts of the
    runs (plus len) of equal key0 and equal key1 (by_key1) or non-decreasing key1, and the OR of all
    addresses (range check).

    The keep test is a coin flip per line: a branch-free append (write, then advance by the flag)."""
    n = addr.shape[0]
    k = 0
    r = 0
    m32 = np.uint64(0xFFFFFFFF)
    mul = np.uint64(0x9E3779B1)
    both = np.uint64(0)
    p0 = key0[0] if n else 0
    p1 = key1[0] if n else 0
    # a new run where key1 - previous key1, read as unsigned, reaches 1 (changed) or 2^63 (decreased)
    cut = np.uint64(1) if by_key1 else np.uint64(1) << np.uint64(63)
    for i in range(n):
        a = addr[i]
        both |= a
        line = a >> shift
        x = (line ^ (line >> np.uint64(32)) ^ salt) & m32
        sel[k] = i
        k += ((x * mul) & m32) < threshold
        k0 = key0[i]
        k1 = key1[i]
        if (i == 0) | (k0 != p0) | (np.uint64(k1 - p1) >= cut):  # rare: a branch
            starts[r] = i
            r += 1
        p0 = k0
        p1 = k1
    starts[r] = n
    return k, r, both


@numba.njit(cache=True, nogil=True)
def _paper_span(block, inst, count, paper_chunk, p):
    """The first instance after inst of this block that Algorithm 1 (private_traces.paper_core) gives
    another core: the split is contiguous (or in chunks of paper_chunk instances)."""
    n = count[block]
    if n < p:
        return np.iinfo(np.int64).max
    if paper_chunk > 0:
        return (inst // paper_chunk + 1) * paper_chunk
    c = min(inst * p // n, p - 1)
    return np.iinfo(np.int64).max if c == p - 1 else ((c + 1) * n + p - 1) // p


@numba.njit(cache=True, nogil=True)
def _static_span(loop, it, trip, sched, chunk, p):
    """The iterations [lo, hi) of loop instance `loop` that run on the same core as iteration `it` under a static
    schedule without chunk (private_traces._static_core: the first trip % p cores one more); (0, 0) otherwise."""
    if loop < 0 or sched[loop] != SCHED_STATIC or chunk[loop] > 0:
        return 0, 0
    n = trip[loop]
    q = n // p
    r = n % p
    big = r * (q + 1)
    if it < big:
        lo = it // (q + 1) * (q + 1)
        return lo, lo + q + 1
    if q == 0:
        return 0, 0
    lo = big + (it - big) // q * q
    return lo, lo + q


@numba.njit(cache=True, nogil=True)
def _core_runs(iteration_mode, starts, key0, key1, count, paper_chunk, trip, sched, chunk, gstarts, gptr, p):
    """Rows split where the core changes (CoreMap's per-run decision, private_traces._run_cores), consecutive
    pieces of one core merged, so the per-run loops downstream run once per change of core. Returns (starts +
    len, core of each). Iteration mode: one decision per run of one iteration (key0, key1: per run). Paper mode
    (key0, key1: per row): runs are one
    block's rows with non-decreasing instances (a block re-entered directly is one run), cut where the
    instance leaves its core's span (found by bisection); each block's last span is remembered (instances
    [span_from, span_end) run on span_core), since runs of a few blocks alternate."""
    n = starts.shape[0] - 1
    most = n + 1  # pieces: a run, or a span's part of it (p spans per block, or one per paper_chunk instances)
    if not iteration_mode and p > 1:
        most += p * count.shape[0] if paper_chunk == 0 else starts[n] - starts[0]
    out_starts = np.empty(most + 1, dtype=np.int64)
    out_core = np.empty(most, dtype=np.int64)
    span_from = np.full(count.shape[0], np.iinfo(np.int64).max, dtype=np.int64)
    span_end = np.zeros(count.shape[0], dtype=np.int64)
    span_core = np.zeros(count.shape[0], dtype=np.int64)
    it_loop, it_lo, it_hi, it_core = -2, 0, 0, 0  # iteration mode: the last static span's iterations and core
    m = 0
    for r in range(n):
        i = starts[r]
        b = starts[r + 1]
        while i < b:
            if p == 1:
                c, nxt = 0, b
            elif iteration_mode:  # runs of one loop mostly follow each other: one division-free test per run
                if key0[r] == it_loop and it_lo <= key1[r] < it_hi:
                    c = it_core
                else:
                    c = iteration_core(key0[r], key1[r], trip, sched, chunk, gstarts, gptr, p)
                    it_lo, it_hi = _static_span(key0[r], key1[r], trip, sched, chunk, p)
                    it_loop, it_core = key0[r], c
                nxt = b
            else:
                blk, x = key0[i], key1[i]
                if x < span_from[blk] or x >= span_end[blk]:
                    span_from[blk] = x
                    span_end[blk] = _paper_span(blk, x, count, paper_chunk, p)
                    span_core[blk] = paper_core(blk, x, count, paper_chunk, p)
                c, end = span_core[blk], span_end[blk]
                nxt = b
                if key1[b - 1] >= end:  # the first row of the run at instance >= end
                    lo, nxt = i, b - 1
                    while nxt - lo > 1:
                        mid = (lo + nxt) // 2
                        if key1[mid] >= end:
                            nxt = mid
                        else:
                            lo = mid
            if m == 0 or c != out_core[m - 1]:
                out_starts[m] = i
                out_core[m] = c
                m += 1
            i = nxt
    out_starts[m] = starts[n]
    return out_starts[:m + 1].copy(), out_core[:m].copy()


@numba.njit(cache=True, nogil=True)
def _window_pieces(starts, run_core, counters, p, next_start, period, length, look, out):
    """Row ranges of this chunk inside each core's window segments (lookback + window in private
    positions: [max(s - look, 0), s + length) for the window starting at next_start[c]).

    Rows of out: core, first row, end row, private position of the first row, 1 if the piece ends
    its segment, the window's start. counters (private positions at the chunk start) is not modified; next_start is
    advanced past finished segments. Returns the number of pieces, or -1 when out is too small."""
    pos = counters.copy()
    o = 0
    for r in range(run_core.shape[0]):
        a = starts[r]
        n = starts[r + 1] - a
        lo_c = run_core[r] if run_core[r] != ALL_CORES else 0
        hi_c = run_core[r] + 1 if run_core[r] != ALL_CORES else p
        for c in range(lo_c, hi_c):
            q = pos[c]
            while True:
                s = next_start[c]
                seg_lo = max(s - look, 0)
                seg_hi = s + length
                lo = max(q, seg_lo)
                hi = min(q + n, seg_hi)
                if lo < hi:
                    if o >= out.shape[0]:
                        return -1
                    out[o, 0] = c
                    out[o, 1] = a + lo - q
                    out[o, 2] = a + hi - q
                    out[o, 3] = lo
                    out[o, 4] = 1 if hi == seg_hi else 0
                    out[o, 5] = s
                    o += 1
                if seg_hi <= q + n:
                    next_start[c] = s + period
                else:
                    break
            pos[c] = q + n
    return o


@numba.njit(cache=True, nogil=True)
def _walk_segment(lines, a, n, gap_pos, look, keys, last, stamp, bits, tag, out, start=0):
    """out[i] for the segment lines[a:a + n], from its start-th access on (the earlier ones, a lookback, only
    set the state): the distinct lines since the previous use of lines[i] in the
    segment when that use is at most `look` gap_pos back, else -1. Segments are short, so one small
    open-addressing table (cleared per segment by a new stamp `tag`; it must hold a segment's lines at a low
    load) serves all, and a bitset over the segment's positions marks each line's latest use so far: the
    distance is the number of marks between the two uses (a few words for the short gaps that matter)."""
    mask = np.uint64(keys.shape[0] - 1)
    one = np.uint64(1)
    bits[:(n >> 6) + 1] = 0
    for j in range(n):
        i = a + j
        x = lines[i]
        slot = ((x * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask
        while stamp[slot] == tag and keys[slot] != x:
            slot = (slot + one) & mask
        out[i] = -1
        if stamp[slot] == tag:
            q = last[slot]
            if j >= start and gap_pos[i] - gap_pos[a + q] <= look:
                d = 0
                if j - q > 1:  # marks at positions q + 1 .. j - 1
                    lo, hi = q + 1, j - 1
                    w, wh = lo >> 6, hi >> 6
                    first = ~np.uint64(0) << np.uint64(lo & 63)
                    end = ~np.uint64(0) >> np.uint64(63 - (hi & 63))
                    if w == wh:
                        d = _popcount(bits[w] & first & end)
                    else:
                        d = _popcount(bits[w] & first) + _popcount(bits[wh] & end)
                        for v in range(w + 1, wh):
                            d += _popcount(bits[v])
                out[i] = d
            bits[q >> 6] &= ~(one << np.uint64(q & 63))
        else:
            stamp[slot] = tag
            keys[slot] = x
        bits[j >> 6] |= one << np.uint64(j & 63)
        last[slot] = j


@numba.njit(cache=True, nogil=True)
def _fill_private(pieces, addr, is_stack, block, shared_block, iteration_mode, shift, buf, cur, look, length,
                  hist, tally, tag, keys, last, stamp, bits, dist, offsets):
    """Copy the pieces' rows (lines as their core sees them) into each core's segment buffer, at their place
    (private position - segment start), and measure every segment a piece completes: near distances into
    hist[core], [far, measured] into tally[core]. cur[core] = [window start of the buffered segment (-1:
    none), positions filled]; tag[0] = stamp of the last segment measured. Row i is addr[i % len(addr)] (a batch
    of repeats gives one copy's words, _Rows.columns)."""
    n = addr.shape[0]
    for r in range(pieces.shape[0]):
        c, ra, rb, q0, ends, s = pieces[r, 0], pieces[r, 1], pieces[r, 2], pieces[r, 3], pieces[r, 4], pieces[r, 5]
        lo = max(s - look, 0)
        src = ra % n
        for row in range(ra, rb):
            buf[c, q0 - lo + row - ra] = _line_of(addr, is_stack, block, shared_block, iteration_mode, shift, src, c)
            src += 1
            if src == n:
                src = 0
        cur[c, 0] = s
        cur[c, 1] = q0 + rb - ra - lo
        if ends:
            _measure_private(buf, c, cur, look, hist, tally, tag, keys, last, stamp, bits, dist, offsets)


@numba.njit(cache=True, nogil=True)
def _measure_private(buf, c, cur, look, hist, tally, tag, keys, last, stamp, bits, dist, offsets):
    """Tally core c's buffered segment (rows from its window start on are measured) and empty the buffer."""
    s = cur[c, 0]
    n = cur[c, 1]
    first = s - max(s - look, 0)
    tag[0] += 1
    _walk_segment(buf[c], 0, n, offsets, look, keys, last, stamp, bits, tag[0], dist, first)
    for i in range(first, n):
        d = dist[i]
        if d >= 0:
            hist[c, d] += 1
        else:
            tally[c, 0] += 1
        tally[c, 1] += 1
    cur[c, 0] = -1


@numba.njit(cache=True, nogil=True)
def _finish_private(buf, cur, look, hist, tally, tag, keys, last, stamp, bits, dist, offsets):
    """Measure the segments the private traces ended in."""
    for c in range(buf.shape[0]):
        if cur[c, 0] >= 0:
            _measure_private(buf, c, cur, look, hist, tally, tag, keys, last, stamp, bits, dist, offsets)


@numba.njit(cache=True, nogil=True)
def _line_of(addr, is_stack, block, shared_block, iteration_mode, shift, row, core):
    """Line id of a row as `core` sees it (the per-core offset on stack data, or outside shared-variable blocks).
    With a 2-D placeholder for is_stack, addr holds the sampling decode's words (SampledBatch: line, flags)."""
    if is_stack.ndim != 1:
        w = addr[row]
        x = w & WORD_LINE
        if w & WORD_STACK:
            return x + (np.uint64(core) << (np.uint64(OFFSET_BITS) - shift))
        return x
    x = addr[row] >> shift
    moved = is_stack[row] if iteration_mode else not shared_block[block[row]]
    return x + (np.uint64(core) << (np.uint64(OFFSET_BITS) - shift)) if moved else x


@numba.njit(cache=True, nogil=True)
def _fill_shared(pieces, r0, addr, is_stack, block, shared_block, iteration_mode, shift, buf, fill, state, first,
                 period, look):
    """Copy the pieces' rows from r0 on into the shared segment buffers: segment j (window start first + j *
    period) lives in slot j % capacity, one row of positions per core (private position - segment start);
    fill[slot, core] = positions filled. state = [oldest live segment, segments started]. Returns the piece
    reached: it stops before a segment that does not fit. Row i is addr[i % len(addr)] (see _fill_private)."""
    cap, n = buf.shape[0], addr.shape[0]
    for r in range(r0, pieces.shape[0]):
        c, ra, rb, q0, s = pieces[r, 0], pieces[r, 1], pieces[r, 2], pieces[r, 3], pieces[r, 5]
        seg = (s - first) // period
        if seg >= state[0] + cap:
            return r
        while state[1] <= seg:  # a segment no core has reached yet
            fill[state[1] % cap, :] = 0
            state[1] += 1
        slot = seg % cap
        lo = max(s - look, 0)
        src = ra % n
        for row in range(ra, rb):
            buf[slot, c, q0 - lo + row - ra] = _line_of(addr, is_stack, block, shared_block, iteration_mode, shift,
                                                       src, c)
            src += 1
            if src == n:
                src = 0
        fill[slot, c] = q0 + rb - ra - lo
    return pieces.shape[0]


@numba.njit(cache=True, nogil=True)
def _drain_shared(buf, fill, state, first, period, look, length, k, reached, hist, tally, tag, keys, last, stamp,
                  bits, dist, seq, turn):
    """Measure the live segments that end at or before private position `reached` of every core, oldest
    first: their rows in round-robin order (turn, core, position), reuses timed in turns (near: at most
    look // k turns back); near distances into hist, [far, measured] into tally."""
    cap = buf.shape[0]
    p = buf.shape[1]
    while state[0] < state[1]:
        s = first + state[0] * period
        if s + length > reached:
            return
        slot = state[0] % cap
        lo = max(s - look, 0)
        n = 0
        for t in range((s + length - lo) // k):
            for c in range(p):
                for x in range(t * k, t * k + k):
                    if x < fill[slot, c]:
                        seq[n] = buf[slot, c, x]
                        turn[n] = (lo + x) // k
                        n += 1
        m0 = 0  # the window proper starts at the first access of turn s // k (turns are aligned on k)
        while m0 < n and turn[m0] * k < s:
            m0 += 1
        tag[0] += 1
        _walk_segment(seq, 0, n, turn, look // k, keys, last, stamp, bits, tag[0], dist, m0)
        for i in range(m0, n):
            if dist[i] >= 0:
                hist[dist[i]] += 1
            else:
                tally[0] += 1
            tally[1] += 1
        state[0] += 1


class _SharedWindows:
    """The window segments of the round-robin shared trace: the same turn-aligned private positions in every
    core. Cores reach a segment at different times, so segments wait in a ring of buffers (grown as needed)
    until every core has passed them; then their rows are read in the shared trace's order."""

    def __init__(self, cores: int, k: int, look: int, length: int, first: int, period: int) -> None:
        n = look + length
        size = 1 << max(4, (4 * n * cores).bit_length())  # load at most 1/4
        self.k, self.look, self.length, self.first, self.period = k, look, length, first, period
        self.buf = np.empty((4, cores, n), np.uint64)
        self.fill = np.zeros((4, cores), np.int64)
        self.state = np.zeros(2, np.int64)
        self.hist = np.zeros(cores * n + 1, np.int64)
        self.tally = np.zeros(2, np.int64)
        self.scratch = (np.zeros(1, np.int64), np.empty(size, np.uint64), np.empty(size, np.int64),
                        np.zeros(size, np.int64), np.empty((cores * n >> 6) + 1, np.uint64),
                        np.empty(cores * n, np.int64),
                        np.empty(cores * n, np.uint64), np.empty(cores * n, np.int64))

    def add(self, pieces: np.ndarray, rows: "_Rows") -> None:
        """Rows of the chunk's pieces (_window_pieces)."""
        addr, is_stack, block = rows.columns()
        r = 0
        while True:
            r = _fill_shared(pieces, r, addr, is_stack, block, rows.shared_block, rows.mode == "iteration",
                             np.uint64(rows.shift), self.buf, self.fill, self.state, self.first, self.period,
                             self.look)
            if r == pieces.shape[0]:
                return
            self._grow()

    def _grow(self) -> None:
        """Twice the ring's slots, live segments moved to their new slots."""
        cap = self.buf.shape[0]
        buf = np.empty((2 * cap,) + self.buf.shape[1:], np.uint64)  # fill says what is valid
        fill = np.zeros((2 * cap, self.fill.shape[1]), np.int64)
        live = np.arange(self.state[0], self.state[1])
        buf[live % (2 * cap)], fill[live % (2 * cap)] = self.buf[live % cap], self.fill[live % cap]
        self.buf, self.fill = buf, fill

    def measure(self, reached: int) -> None:
        """Measure the segments every core has passed (private position `reached`)."""
        _drain_shared(self.buf, self.fill, self.state, self.first, self.period, self.look, self.length, self.k,
                      reached, self.hist, self.tally, *self.scratch)

    def finish(self, est: "_Estimate") -> None:
        """Measure the segments left (some cores' traces end before them); tallies to the estimate."""
        self.measure(np.iinfo(np.int64).max)
        nz = np.flatnonzero(self.hist)
        est.near = dict(zip(nz.tolist(), self.hist[nz].tolist()))
        est.n_far, est.n_measured = int(self.tally[0]), int(self.tally[1])


class _PrivateWindows:
    """The window segments of every core's private trace. A core's rows arrive in its order, so each segment
    is filled in place and measured as soon as it ends (nothing waits, nothing is sorted)."""

    def __init__(self, cores: int, look: int, length: int) -> None:
        n = look + length
        size = 1 << max(4, (4 * n).bit_length())  # load at most 1/4
        self.look = look
        self.buf = np.zeros((cores, n), np.uint64)
        self.cur = np.zeros((cores, 2), np.int64)
        self.cur[:, 0] = -1
        self.hist = np.zeros((cores, look + 1), np.int64)
        self.tally = np.zeros((cores, 2), np.int64)
        self.scratch = (np.zeros(1, np.int64), np.empty(size, np.uint64), np.empty(size, np.int64),
                        np.zeros(size, np.int64), np.empty((n >> 6) + 1, np.uint64), np.empty(n, np.int64),
                        np.arange(n, dtype=np.int64))

    def add(self, pieces: np.ndarray, rows: "_Rows") -> None:
        """Rows of the chunk's pieces (_window_pieces)."""
        addr, is_stack, block = rows.columns()
        _fill_private(pieces, addr, is_stack, block, rows.shared_block, rows.mode == "iteration",
                      np.uint64(rows.shift), self.buf, self.cur, self.look, self.buf.shape[1] - self.look,
                      self.hist, self.tally, *self.scratch)

    def finish(self, estimates: list["_Estimate"]) -> None:
        """Measure the last segments; hand every core's tallies to its estimate."""
        _finish_private(self.buf, self.cur, self.look, self.hist, self.tally, *self.scratch)
        for c, est in enumerate(estimates):
            nz = np.flatnonzero(self.hist[c])
            est.near = dict(zip(nz.tolist(), self.hist[c][nz].tolist()))
            est.n_far, est.n_measured = int(self.tally[c, 0]), int(self.tally[c, 1])


class _Estimate:
    """One stream's window and SHARDS tallies (the stream sampler's `window` estimate, analysis/sampling/blocks.py
    StreamSampler): a private trace, with private positions, or a shared trace, with turns as positions
    (a reuse is near when its gap is at most `look` positions)."""

    def __init__(self, look: int) -> None:
        self.look = look
        self.near: dict[int, int] = {}       # exact in-window distances (gap <= look) -> count
        self.n_far = 0                       # window accesses with a longer gap, or none
        self.n_measured = 0
        self.shards_near = 0                 # SHARDS samples with gap <= look ...
        self.shards_near_coh = 0             # ... of which coherence misses
        self.tail_keys = np.zeros(0, np.int64)  # raw SHARDS distances (-1 cold) of the others, ascending ...
        self.tail_cnt = np.zeros(0, np.int64)   # ... and how many had each
        self.tail_coh = 0

    def profile(self, raw, rate: float, total: int, adjust: bool):
        """The stream's estimate: window distances (near), SHARDS tail for the rest; SHARDS alone
        when no window was measured (a stream shorter than the first window's start)."""
        if self.n_measured == 0 or total == 0:
            return scale_profile(raw, rate, total, adjust)
        scale = total / self.n_measured
        near_keys = np.array(sorted(self.near), dtype=np.int64)
        near_cnt = np.array([self.near[k] for k in near_keys.tolist()], dtype=np.float64)
        f_coh = self.shards_near_coh / self.shards_near if self.shards_near else 0.0
        tail_keys, tail_cnt = self.tail_keys, self.tail_cnt
        n_tail = int(tail_cnt.sum())
        tail_cnt = tail_cnt.astype(np.float64)
        if n_tail == 0:  # no far SHARDS sample: the far share stays cold
            tail_keys, tail_cnt = np.array([-1]), np.array([1.0])
        far = self.n_far * tail_cnt / tail_cnt.sum()
        vals = np.concatenate([near_keys, [-1], np.where(tail_keys >= 0, np.rint(tail_keys / rate), -1)])
        cnt = np.concatenate([near_cnt * (1 - f_coh), [near_cnt.sum() * f_coh], far]) * scale
        prof = _engine_bins_of(vals.astype(np.int64), cnt, total)
        tail_share = self.tail_coh / max(n_tail, 1)
        prof.coherence = min(int(round(scale * (near_cnt.sum() * f_coh + self.n_far * tail_share))), prof.cold)
        return prof


def _engine_bins_of(vals: np.ndarray, cnt: np.ndarray, total: int):
    """Counts of distances (-1 = cold) in the exact engine's bins, summing to total."""
    return binned_profile(vals, cnt, 1.0, total)


@numba.njit(cache=True, nogil=True)
def _count_lines(lines, weights, keys, counts, state, start):
    """counts[slot of lines[i]] += weights[i] from index start, in an open-addressing table (a slot is used where
    its count is > 0; state = [used slots, most allowed]). Returns the index reached: it stops before a new line
    would pass the limit."""
    mask = np.uint64(keys.shape[0] - 1)
    for i in range(start, lines.shape[0]):
        x = lines[i]
        slot = ((x * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask
        while counts[slot] > 0 and keys[slot] != x:
            slot = (slot + np.uint64(1)) & mask
        if counts[slot] == 0:
            if state[0] + 1 > state[1]:
                return i
            state[0] += 1
            keys[slot] = x
        counts[slot] += weights[i]
    return lines.shape[0]


@numba.njit(cache=True, nogil=True)
def _word_columns(words, sel):
    """Line id, stack flag and store flag of the rows sel of a sampling decode's words."""
    n = sel.shape[0]
    lines, stack, store = np.empty(n, np.uint64), np.empty(n, np.bool_), np.empty(n, np.bool_)
    for j in range(n):
        w = words[sel[j]]
        lines[j] = w & WORD_LINE
        stack[j] = (w & WORD_STACK) != np.uint64(0)
        store[j] = (w & WORD_STORE) != np.uint64(0)
    return lines, stack, store


@dataclass
class _Rows:
    """The sampled rows of one chunk, and the runs every core count decides cores on."""

    sel: np.ndarray       # int64 sampled row indices, increasing
    lines: np.ndarray     # uint64 line id of each sampled row (no offset)
    offset: np.ndarray    # bool: the row's address gets the per-core offset
    store: np.ndarray     # bool: the row is a store
    starts: np.ndarray    # int64 run starts (+ len)
    key0: np.ndarray      # core decisions: loop of every run (iteration mode) or block of every row (paper mode)
    key1: np.ndarray      # iteration of every run, or block instance of every row
    chunk: TraceChunk | None  # the decoded rows, or None when they come as words
    mode: str
    shift: int
    shared_block: np.ndarray
    words: np.ndarray | None = None  # the sampling decode's words (instrument.tracefile.SampledBatch)
    copies: int = 0       # SampledBatch.copies: that many repeats of recording `recording` (source_replay takes them
    recording: int = -1   # as copies without joining rows)

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(addr, is_stack, block) for _line_of: the chunk's columns, or the words with placeholders (a batch of
        repeats: one copy's words, row i's at i % len)."""
        if self.chunk is not None:
            return self.chunk.addr, self.chunk.is_stack, self.chunk.block
        return self.words, _NO_STACK, _NO_BLOCK


_NO_STACK = np.zeros((1, 1), np.bool_)  # _line_of reads words when is_stack is 2-D
_NO_BLOCK = np.zeros(1, np.int32)


class _LineTally:
    """Accesses per sampled line, to find the heaviest one (heaviest_share): an open-addressing table counted
    into by a kernel, doubled when it fills."""

    def __init__(self) -> None:
        self.keys = np.zeros(1 << 10, np.uint64)
        self.counts = np.zeros(1 << 10, np.int64)  # 0: empty slot
        self.state = np.array([0, int(0.6 * (1 << 10))], np.int64)
        self.total = 0

    def add(self, lines: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Count one batch of sampled rows' lines (each weights[i] times; default once)."""
        w = np.ones(lines.shape[0], np.int64) if weights is None else weights
        i = 0
        while i < lines.shape[0]:
            i = _count_lines(lines, w, self.keys, self.counts, self.state, i)
            if i < lines.shape[0]:
                self._grow()
        self.total += int(w.sum())

    def _grow(self) -> None:
        """Twice the slots, every line re-counted into them."""
        used = self.counts > 0
        keys, counts = self.keys[used], self.counts[used]
        size = 2 * self.keys.shape[0]
        self.keys, self.counts = np.zeros(size, np.uint64), np.zeros(size, np.int64)
        self.state = np.array([0, int(0.6 * size)], np.int64)
        _count_lines(keys, counts, self.keys, self.counts, self.state, 0)

    def heaviest_share(self) -> float:
        """The share of the sampled accesses taken by the most accessed sampled line (0 without samples).

        SHARDS weighs every sampled line 1/rate. A line that alone takes a large share of the trace (a
        scalar a loop reloads every iteration) is drawn by few seeds, but a seed that draws it stands its
        reuses for 1/rate lines' worth: on a jacobi-2d MEDIUM trace the two seeds of eight whose heaviest
        line took 6% and 12% of the sample erred by 2.3 and 3.7 points in hit rate, the six below 1% by at
        most 0.3."""
        return int(self.counts.max()) / self.total if self.total else 0.0


class _Picker:
    """The fused source pass, with scratch arrays reused across chunks."""

    def __init__(self, sampling: SourceSampling, mode: str, shift: int, cmap: CoreMap, path: str) -> None:
        self.tally = _LineTally()
        self.salt, self.threshold = sampling.salt, sampling.threshold
        self.mode, self.shift, self.shared_block, self.path = mode, shift, cmap.shared_block, path
        self.n_loops = cmap.trip.shape[0]
        self.sel = np.zeros(0, dtype=np.int64)
        self.starts = np.zeros(0, dtype=np.int64)
        self.recorded: tuple = (-1, None)  # (recording, its one copy's lines, stack and store flags)

    def rows(self, ch: TraceChunk) -> _Rows:
        """Sampled rows, their line ids and flags, and the chunk's runs."""
        n = len(ch)
        if self.sel.shape[0] < n + 1:
            self.sel = np.empty(n + 1, dtype=np.int64)
            self.starts = np.empty(n + 1, dtype=np.int64)
        iteration = self.mode == "iteration"
        key0, key1 = (ch.loop, ch.iteration) if iteration else (ch.block, ch.block_instance)
        k, r, both = pick_rows(ch.addr, key0, key1, iteration, np.uint64(self.shift), self.salt, self.threshold,
                                self.sel, self.starts)
        if int(both) >> OFFSET_BITS:
            raise InputError(f"{self.path}: an address is above 2^{OFFSET_BITS}; per-core offsets would "
                             f"collide (unsupported address space)")
        heads = key0[self.starts[:r]]  # key0 is constant along a run
        lo, hi = (int(heads.min()), int(heads.max())) if r else (0, 0)
        if iteration and (lo < -1 or hi >= self.n_loops):
            raise InputError(f"{self.path}: access in loop instance {hi} missing from the trace's loop table; "
                             f"the trace is corrupt, re-record it")
        if not iteration and (lo < 0 or hi >= self.shared_block.shape[0]):
            raise InputError(f"{self.path}: access in a block that the trace header does not list; "
                             f"the trace is corrupt, re-record it")
        sel = self.sel[:k].copy()
        self.tally.add(ch.addr[sel] >> np.uint64(self.shift))
        starts = self.starts[:r + 1].copy()
        offset = ch.is_stack[sel] if iteration else ~self.shared_block[ch.block[sel]]
        if iteration:  # one core decision per run
            key0, key1 = heads.astype(np.int64), key1[starts[:r]]
        return _Rows(sel, ch.addr[sel] >> np.uint64(self.shift), offset, ch.is_store[sel], starts, key0, key1, ch,
                     self.mode, self.shift, self.shared_block)

    def batch_rows(self, b: SampledBatch) -> _Rows:
        """_Rows of a batch of the sampling decode (iteration mode): the decoder did the pass."""
        if b.addr_max >> OFFSET_BITS:
            raise InputError(f"{self.path}: an address is above 2^{OFFSET_BITS}; per-core offsets would "
                             f"collide (unsupported address space)")
        if b.loop.shape[0] and (int(b.loop.min()) < -1 or int(b.loop.max()) >= self.n_loops):
            raise InputError(f"{self.path}: access in loop instance {int(b.loop.max())} missing from the trace's "
                             f"loop table; the trace is corrupt, re-record it")
        sel = b.sel.copy()
        if b.copies:  # repeats of one recorded copy: its kept rows' columns taken once, laid out as the rows are
            lines, stack, store = (np.tile(x, b.copies) for x in self._recorded(b))
        else:
            lines, stack, store = _word_columns(b.words, sel)
            self.tally.add(lines)
        return _Rows(sel, lines, stack, store, b.starts.copy(), b.loop.copy(), b.iteration.copy(), None, self.mode,
                     self.shift, self.shared_block, b.words, b.copies, b.recording)


    def _recorded(self, b: SampledBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The columns of one copy of a batch of repeats (computed once per recording), tallied for all of them."""
        if self.recorded[0] != b.recording:
            one = b.sel[:b.sel.shape[0] // b.copies]
            self.recorded = (b.recording, _word_columns(b.words, one))
        cols = self.recorded[1]
        self.tally.add(cols[0], np.full(cols[0].shape[0], b.copies, np.int64))
        return cols


class _SourceTask:
    """One core count: the SHARDS samples of its private and shared traces (ShardsStreams: private stacks, the
    key merge of the shared trace, its sharer sets and stack) and, below rate 1, the window segments of every
    private trace and of the shared trace."""

    def __init__(self, info: TraceInfo, cores: int, mode: str, shift: int, refs_per_turn: int,
                 paper_chunk: int, coherence: bool, sampling: SourceSampling, replay: int = 0) -> None:
        self.p, self.k, self.shift = cores, refs_per_turn, shift
        self.cmap = CoreMap(info, cores, mode, paper_chunk)
        self.counters = np.zeros(cores, dtype=np.int64)  # private positions the rows have reached
        self.windows = sampling.rate < 1.0 and sampling.window > 0
        self.look, self.length, self.period = sampling.window, sampling.length, sampling.period
        self.next_start = sampling.window_offsets(cores)
        self.est = [_Estimate(sampling.window) for _ in range(cores)]
        self.pool = _PrivateWindows(cores, sampling.window, sampling.length)
        self.scratch = np.zeros((64, 6), dtype=np.int64)
        self._init_shared_windows(sampling)
        self.shards = ShardsStreams(cores, refs_per_turn, coherence, self.windows, self.look, self.shared_windows,
                                    self.s_look // refs_per_turn)
        replay = replay and even_split(self.cmap, replay)
        # with replay (periodic traces) the SHARDS samples are fed copy by copy, behind the rows: own positions
        self.s_counters = np.zeros(cores, dtype=np.int64) if replay else self.counters
        self.replay = ShardsReplay(self.shards, self.s_counters, self.feed_copy) if replay else None

    def _init_shared_windows(self, sampling: SourceSampling) -> None:
        """Windows of the shared trace: the same private positions [s - look, s + length) in every core,
        on turn boundaries, are one contiguous run of the round-robin shared trace (keys
        [key(s - look, 0), key(s + length, 0))), whatever the private traces' lengths."""
        k = self.k
        up = lambda x: -(-x // k) * k  # noqa: E731
        self.shared_windows = self.windows and self.p > 1
        # about `look` + `length` shared accesses per segment, as in a private trace: 1/p of them per core
        self.s_look, self.s_length = up(-(-self.look // self.p)), up(-(-self.length // self.p))
        spacing = SHARED_WINDOW_SPACING * self.s_length / sampling.rate
        self.s_period = max(up(int(round(spacing))), self.s_look + self.s_length)
        rng = np.random.default_rng([sampling.seed, self.p, k])
        self.s_next = np.full(self.p, int(rng.integers(0, (self.s_period - self.s_length) // k + 1)) * k, np.int64)
        self.s_est = _Estimate(self.s_look // k)  # positions are turns
        self.s_pool = _SharedWindows(self.p, k, self.s_look, self.s_length, int(self.s_next[0]), self.s_period)

    def feed(self, rows: _Rows) -> None:
        """Add one chunk's rows: window pieces, then the sampled rows placed, fed and merged (ShardsStreams)."""
        starts, run_core = _core_runs(rows.mode == "iteration", rows.starts, rows.key0, rows.key1,
                                      *self.cmap._tables())
        if self.windows:
            self._windows(rows, starts, run_core)
        if self.replay is None:
            self.shards.feed(rows.sel, rows.lines, rows.offset, rows.store, starts, run_core, self.counters,
                             OFFSET_BITS - self.shift)
        else:  # the SHARDS samples come copy by copy (feed_copy)
            advance(starts, run_core, self.counters)
        if self.shared_windows:
            self.s_pool.measure(int(self.counters.min()))

    def feed_copy(self, copy) -> None:
        """Feed one copy's SHARDS samples (source_replay.Copy: rows counted from the copy's start)."""
        starts, run_core = _core_runs(True, copy.starts, copy.key0, copy.key1, *self.cmap._tables())
        self.shards.feed(copy.sel, copy.lines, copy.offset, copy.store, starts, run_core, self.s_counters,
                         OFFSET_BITS - self.shift)

    def _windows(self, rows: _Rows, starts: np.ndarray, run_core: np.ndarray) -> None:
        """Pool the chunk's rows that fall in each core's window segments, and in the shared trace's."""
        self.pool.add(self._pieces(starts, run_core, self.next_start, self.period, self.length, self.look), rows)
        if not self.shared_windows:
            return
        self.s_pool.add(self._pieces(starts, run_core, self.s_next, self.s_period, self.s_length, self.s_look), rows)

    def _pieces(self, starts: np.ndarray, run_core: np.ndarray, next_start: np.ndarray, period: int,
                length: int, look: int) -> np.ndarray:
        """_window_pieces with a scratch array grown until it fits (next_start advanced in place)."""
        while True:
            before = next_start.copy()
            n = _window_pieces(starts, run_core, self.counters, self.p, next_start, period, length, look,
                               self.scratch)
            if n >= 0:
                return self.scratch[:n]
            next_start[:] = before
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
            tails, s_tail = sh.tails()
            for c, est in enumerate(self.est):
                est.shards_near, est.shards_near_coh, est.tail_coh = (int(x) for x in sh.tally[c])
                est.tail_keys, est.tail_cnt = tails[c]
        if self.shared_windows:
            self.s_pool.finish(self.s_est)
            self.s_est.shards_near, (self.s_est.tail_keys, self.s_est.tail_cnt) = int(sh.s_tally[0, 0]), s_tail
        rate, adjust = sampling.rate, sampling.adjust
        raw = [sh.private.profile(c) for c in range(self.p)]
        if self.windows:
            prd = [est.profile(h, rate, int(n), adjust) for est, h, n in zip(self.est, raw, self.counters)]
        else:
            prd = [scale_profile(h, rate, int(n), adjust) for h, n in zip(raw, self.counters)]
        if sh.shared is None:
            return prd, prd[0]
        total = int(self.counters.sum())
        crd = sh.shared.profile(0)
        if self.shared_windows:
            return prd, self.s_est.profile(crd, rate, total, adjust)
        return prd, scale_profile(crd, rate, total, adjust)


BatchSource = Callable[[int, int, int], Iterator[SampledBatch]]  # (shift, salt, threshold) -> sampling decode


def source_profiles(info: TraceInfo, chunks: Iterable[TraceChunk] | None, counts: list[int],
                    sampling: SourceSampling, mode: str, refs_per_turn: int = 1, line_size: int = 64,
                    paper_chunk: int = 0, coherence: bool = True,
                    batches: BatchSource | None = None, diagnostics: dict | None = None) -> list[tuple[list, object]]:
    """Sampled (PRDs, CRD) of each core count, from one pass over the chunks (round-robin interleaving).
    batches: instead of chunks, in iteration mode, the trace reader's sampling decode (the decoder hashes the
    lines and finds the runs itself, so the rows are never read back; same profiles). diagnostics, when
    given, receives `heaviest_line_share` (_LineTally.heaviest_share)."""
    if refs_per_turn < 1:
        raise InputError(f"--refs-per-turn {refs_per_turn}: must be at least 1")
    resolved = resolve_mode(info, mode)
    shift = line_shift(line_size)
    period = loop_period(info) if resolved == "iteration" and REPLAY else 0
    tasks = [_SourceTask(info, p, resolved, shift, refs_per_turn, paper_chunk, coherence, sampling, period)
             for p in counts]
    if not tasks:
        return []
    copies = CopyBuffer(period) if any(t.replay is not None for t in tasks) else None
    picker = _Picker(sampling, resolved, shift, tasks[0].cmap, info.path)
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
    return [t.finish(sampling) for t in tasks]


def _feed_copies(tasks: list[_SourceTask], done: list) -> None:
    """Completed copies (source_replay.CopyBuffer) to every core count's replay."""
    for copy, same in done:
        for t in tasks:
            if t.replay is not None:
                t.replay.feed(copy, same)


def scale_profile(raw, rate: float, total: int, adjust: bool = True):
    """The full stream's estimated profile from its sampled one: distances / rate, counts summing to total.

    A stream without any sampled access keeps every access cold (no evidence of reuse)."""
    from analysis.profiles.profileset import ReuseProfile
    from analysis.sampling.blocks import binned_profile

    if rate >= 1.0 or total == 0:
        return raw
    if raw.total == 0:
        z = np.zeros(0, dtype=np.int64)
        return ReuseProfile(z, z.copy(), z.copy(), z.copy(), total, total)
    vals = np.append(np.rint(raw.mean_distance() / rate).astype(np.int64), -1)
    cnt = np.append(raw.count.astype(np.float64), float(raw.cold))
    if adjust:  # SHARDS-adj: expected minus drawn sample size, at distance 0 (never below zero)
        gap = total * rate - raw.total
        if vals.shape[0] > 1 and vals[0] == 0:
            cnt[0] = max(cnt[0] + gap, 0.0)
        elif gap > 0:
            vals, cnt = np.append(0, vals), np.append(gap, cnt)
    prof = binned_profile(vals, cnt, 1.0, total)
    prof.coherence = min(int(round(raw.coherence * total / raw.total)), prof.cold)
    return prof


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
                        paper_chunk: int = 0, coherence: bool = True, max_rows: int | None = None):
    """(ProfileSet, sampling metadata) of a trace file: sampled at the source for round-robin
    interleaving; for `--interleave random`, the stream sampler (window method) on the full streams.
    max_rows: decoded rows per batch (default SAMPLED_ROWS with the reader's sampling decode, else SOURCE_ROWS;
    2^20 for the stream sampler)."""
    from analysis.profiles import sweep as profiles
    from analysis.sampling.blocks import StreamSampling, sampled_profiles

    if not cores or min(cores) < 1:
        raise InputError(f"--cores {cores}: give one or more positive core counts, e.g. 1,2,4,8")
    if interleave != "rr":
        fallback = StreamSampling(sampling.rate, "window", sampling.seed)
        ps = sampled_profiles(trace_path, cores, fallback, mode, interleave, seed, refs_per_turn, line_size,
                              paper_chunk, max_rows or 1 << 20)
        return ps, {**fallback.metadata(), "requested": "source (rr interleaving only)"}
    info, chunks, sampled = source_trace(trace_path)
    counts = sorted(set(int(c) for c in cores))
    resolved = resolve_mode(info, mode)
    ps = profiles.ProfileSet(line_size, resolved, interleave, seed, refs_per_turn, info.path,
                             paper_chunk=paper_chunk, trace_complete=info.complete, coherence=coherence)
    found: dict = {}
    if sampled is not None and resolved == "iteration":
        rows, replay = max_rows or SAMPLED_ROWS, decode_replay(info)
        results = source_profiles(info, None, counts, sampling, resolved, refs_per_turn, line_size, paper_chunk,
                                  coherence, lambda *hash_args: sampled(rows, *hash_args, **replay), found)
    else:
        results = source_profiles(info, chunks(max_rows or SOURCE_ROWS, SOURCE_COLUMNS[resolved]), counts,
                                  sampling, resolved, refs_per_turn, line_size, paper_chunk, coherence,
                                  diagnostics=found)
    for p, (prd, crd) in zip(counts, results):
        ps.prd.update({(p, c): h for c, h in enumerate(prd)})
        ps.crd[p] = crd
    return ps, {**sampling.metadata(), "heaviest_line_share": round(found["heaviest_line_share"], 6)}
