"""The stream sampler: sampled reuse profiles of line streams without block ids (`pptmc profile
--sample-method window|spatial|exact`, and the fallback of source sampling for `--interleave random`).

`sampled_profiles` builds each per-core private stream and each interleaved shared stream exactly as for
the exact profiles (analysis.profiles.sweep) and feeds it to its own seeded StreamSampler (same seed for
all, so all streams sample the same SHARDS lines and window offsets); it saves only the reuse-engine share
of `pptmc profile`, since decoding, mimicking and interleaving still touch every access, and it does not
model coherence (benchmarks/bench_sampling.py measures it against source sampling, analysis/sampling/source.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from analysis.profiles.profileset import ReuseProfile
from analysis.sampling.binning import binned_profile, cat, counts_of, exact_distances
from analysis.sampling.hashing import draw_salt, hash_pick, shards_threshold, slot_of
from common.errors import InputError
from analysis.sampling.options import DEFAULT_WINDOW_LENGTH, STREAM_METHODS, STREAM_WINDOW


class StreamSampler:
    """A sampled stand-in for ReuseEngine on one stream of line ids (same feed/histogram API).

    Line streams carry no block ids (a per-core private trace, an interleaved shared trace), so
    the per-block AMM samplers do not apply; the estimate combines two samples of the stream:

    * ``window`` (default): time windows of `length` accesses, one every length / rate accesses
      from a seeded offset (systematic sampling). Each window is measured by the exact engine
      over it and the `window` accesses before it, so an access whose previous use of its line
      lies at most `window` accesses back gets its exact distance. The rest (longer reuse gaps,
      cold) are given the distribution of the SHARDS distances of accesses with such gaps, SHARDS
      at the same rate. Short reuses, which set the L1 hit rate, are exact; long ones,
      which set L2/L3, come from SHARDS, whose relative error shrinks as distances grow.
    * ``spatial``: SHARDS alone (lines whose seeded hash is below rate, distances / rate).
    * ``exact``: the exact engine on every access (a 100% "sample").

    At rate 1 every method returns the exact engine's profile. The histogram uses the engine's
    bin layout (analysis.profiles.reuse) so that sampled and exact ProfileSets read the same way.
    """

    def __init__(self, rate: float, seed: int = 0, method: str = "window", window: int = STREAM_WINDOW,
                 length: int = DEFAULT_WINDOW_LENGTH) -> None:
        check_stream_parameters(rate, seed, method, window, length)
        self.method, self.rate, self.window, self.length = method, rate, window, length
        rng = np.random.default_rng(seed)
        self.salt = draw_salt(rng)
        self.threshold = shards_threshold(rate)
        self.period = max(length, int(round(length / rate)))
        self.next_start = int(rng.integers(0, self.period - length + 1))  # window starts are seeded
        self.pos = 0                                   # stream index of the next line fed
        self.pending: list[np.ndarray] = []            # lines not yet measured, from stream index self.base
        self.base = 0
        self.near: dict[int, int] = {}                 # exact in-window distances -> count
        self.n_far = 0                                 # window accesses with a longer gap (or cold)
        self.n_measured = 0
        self.lines: list[np.ndarray] = []              # SHARDS sample: lines and their stream positions
        self.positions: list[np.ndarray] = []
        self.mask = np.zeros(0, dtype=np.bool_)          # scratch of the hash pass, reused across feeds
        self.engine = None
        if method == "exact":
            from analysis.profiles.reuse import ReuseEngine

            self.engine = ReuseEngine()

    def feed(self, lines: np.ndarray) -> None:
        """Add accesses (line ids, program order)."""
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        n = lines.shape[0]
        if n == 0:
            return
        if self.engine is not None:
            self.engine.feed(lines)
            self.pos += n
            return
        if self.mask.shape[0] < n:
            self.mask = np.empty(n, dtype=np.bool_)
        sel = hash_pick(lines, self.salt, self.threshold, self.mask[:n])
        self.lines.append(lines[sel])
        self.positions.append(sel + self.pos)
        if self.method == "window":
            self.pending.append(lines)
            self._measure_windows(self.pos + n, final=False)
        self.pos += n

    def _measure_windows(self, end: int, final: bool) -> None:
        """Measure every window that ends before stream index `end`; drop lines no window needs."""
        segments, firsts = [], []
        while self.next_start < end and (self.next_start + self.length <= end or final):
            lo = max(self.base, self.next_start - self.window)
            segments.append(slice_parts(self.pending, self.base, lo, min(self.next_start + self.length, end)))
            firsts.append(self.next_start - lo)
            self.next_start += self.period
        if segments:
            self._measure(segments, firsts)
        keep = max(self.base, min(self.next_start - self.window, end))
        self.pending = [slice_parts(self.pending, self.base, keep, end)] if keep < end else []
        self.base = keep

    def _measure(self, segments: list[np.ndarray], firsts: list[int]) -> None:
        """Exact distances of each segment's accesses from its `first` on, binned as near (gap <= window)
        or far. One engine call for all segments: each segment's lines get their own tag in the top
        bits, so no reuse crosses segments (line ids are addresses >> log2(line), far below 2^52)."""
        from analysis.profiles.reuse import reuse_distances

        tags = np.repeat(np.arange(1, len(segments) + 1, dtype=np.uint64) << np.uint64(52),
                         [x.shape[0] for x in segments])
        lines = np.concatenate(segments) | tags
        starts = np.cumsum([0] + [x.shape[0] for x in segments[:-1]])
        measured = np.zeros(lines.shape[0], dtype=bool)
        for st, first, seg in zip(starts.tolist(), firsts, segments):
            measured[st + first:st + seg.shape[0]] = True
        d = reuse_distances(lines)[measured]
        gap = gaps(lines)[measured]
        near = (gap > 0) & (gap <= self.window)
        vals, cnt = np.unique(d[near], return_counts=True)
        for v, c in zip(vals.tolist(), cnt.tolist()):
            self.near[v] = self.near.get(v, 0) + c
        self.n_far += int((~near).sum())
        self.n_measured += int(d.shape[0])

    def histogram(self) -> ReuseProfile:
        """The estimated profile of the whole stream, in the engine's bins, totalling every access."""
        if self.engine is not None:
            return self.engine.histogram()
        if self.method == "window":
            self._measure_windows(self.pos, final=True)
        lines, pos = cat(self.lines, np.uint64), cat(self.positions, np.int64)
        d = exact_distances(lines) if lines.shape[0] else np.zeros(0, np.int64)
        scaled = np.where(d >= 0, np.rint(d / self.rate), -1).astype(np.int64)
        if self.method == "spatial" or self.n_measured == 0:  # no window fell in a very short stream
            return binned_profile(*counts_of(scaled), self.pos / max(lines.shape[0], 1), self.pos)
        gap = gaps_at(lines, pos)
        tail = scaled[(gap < 0) | (gap > self.window)]
        scale = self.pos / self.n_measured
        far_total = self.n_far * scale
        t_vals, t_cnt = counts_of(tail)
        if t_cnt.sum() == 0:  # no far SHARDS sample: the far share stays cold
            t_vals, t_cnt = np.array([-1]), np.array([1])
        vals = np.concatenate([np.array(sorted(self.near), np.int64), t_vals])
        cnt = np.concatenate([np.array([self.near[v] * scale for v in sorted(self.near)], float),
                              t_cnt * (far_total / t_cnt.sum())])
        return binned_profile(vals, cnt, 1.0, self.pos)

    def measured(self) -> int:
        """Accesses whose distance was measured (windows plus SHARDS sample)."""
        if self.engine is not None:
            return self.pos
        return self.n_measured + int(sum(x.shape[0] for x in self.lines))


def check_stream_parameters(rate: float, seed: int, method: str, window: int, length: int) -> None:
    """InputError for out-of-range stream-sampling parameters."""
    if not 0.0 < rate <= 1.0:
        raise InputError(f"--sample-rate must be in (0, 1], got {rate}; e.g. 0.01 for 1%")
    if method not in STREAM_METHODS:
        raise InputError(f"--sample-method must be one of {', '.join(STREAM_METHODS)}, got {method!r}")
    if seed < 0:
        raise InputError(f"--seed must be >= 0, got {seed}")
    if window < 1 or length < 1:
        raise InputError(f"--window and --window-length must be >= 1 access, got {window} and {length}")


def slice_parts(parts: list[np.ndarray], base: int, lo: int, hi: int) -> np.ndarray:
    """Stream indices [lo, hi) of the concatenation of parts, which starts at stream index base."""
    out, start = [], base
    for p in parts:
        end = start + p.shape[0]
        if end > lo and start < hi:
            out.append(p[max(lo - start, 0):min(hi, end) - start])
        start = end
    return cat(out, np.uint64)


def gaps(lines: np.ndarray) -> np.ndarray:
    """Accesses since the previous use of each access's line within the array (-1: none)."""
    return gaps_at(lines, np.arange(lines.shape[0], dtype=np.int64))


def gaps_at(lines: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Like gaps for accesses at increasing stream positions `pos` (one pass with an open-addressing
    table sized so it never fills; an argsort costs several times more)."""
    size = 1 << max(4, int(2 * max(lines.shape[0], 1) - 1).bit_length())
    out = np.empty(lines.shape[0], dtype=np.int64)
    gap_update(lines, pos, np.empty(size, np.uint64), np.full(size, -1, np.int64),
               np.array([0, size], dtype=np.int64), out, 0)
    return out


@numba.njit(cache=True, nogil=True)
def gap_update(lines, pos, keys, last, state, out, start):
    """out[i] = pos[i] minus the position of the previous access to lines[i] (-1: none), from index
    start, in a persistent open-addressing table (keys valid where last >= 0; state = [n_keys, limit]).
    Returns the index reached: it stops before a new key would exceed the load limit."""
    mask = np.uint64(keys.shape[0] - 1)
    for i in range(start, lines.shape[0]):
        x = lines[i]
        slot = slot_of(x, mask)
        while last[slot] >= 0 and keys[slot] != x:
            slot = (slot + np.uint64(1)) & mask
        if last[slot] < 0:
            if state[0] + 1 > state[1]:
                return i
            state[0] += 1
            keys[slot] = x
            out[i] = -1
        else:
            out[i] = pos[i] - last[slot]
        last[slot] = pos[i]
    return lines.shape[0]


@dataclass(frozen=True)
class StreamSampling:
    """How `pptmc profile --sample-rate` samples each stream; saved in the profile metadata."""

    rate: float
    method: str = "window"
    seed: int = 0
    window: int = STREAM_WINDOW
    length: int = DEFAULT_WINDOW_LENGTH

    def sampler(self) -> StreamSampler:
        """A fresh sampler: every stream gets the same seed, hence the same SHARDS lines and window offsets."""
        return StreamSampler(self.rate, self.seed, self.method, self.window, self.length)

    def metadata(self) -> dict:
        """The sampling's entry in the profile metadata."""
        return {"sampled": True, "rate": self.rate, "method": self.method, "seed": self.seed,
                "window": self.window, "window_length": self.length}


def sampled_profiles(trace_path: str, cores: list[int], sampling: StreamSampling, mode: str = "auto",
                     interleave: str = "rr", seed: int = 0, refs_per_turn: int = 1, line_size: int = 64,
                     paper_chunk: int = 0, max_rows: int = 1 << 20):
    """A ProfileSet whose PRDs and CRDs are sampled estimates: each per-core private stream and each
    interleaved shared stream is built exactly as for the exact profiles (analysis.profiles.sweep), then fed
    to its own StreamSampler instead of the exact engine. Sampling after the mimicking is what keeps the
    estimates consistent: the private and shared streams are not sub-samples of the sequential trace."""
    from analysis.profiles import sweep as profiles
    from analysis.profiles.private_traces import InterleaveSpec, mimic, resolve_mode

    sampling.sampler()  # validate the parameters before reading the trace
    info, chunks = profiles.open_chunks(trace_path, max_rows)
    if not cores or min(cores) < 1:
        raise InputError(f"--cores {cores}: give one or more positive core counts, e.g. 1,2,4,8")
    counts = sorted(set(int(c) for c in cores))
    resolved = resolve_mode(info, mode)
    ps = profiles.ProfileSet(line_size, resolved, interleave, seed, refs_per_turn, info.path,
                             paper_chunk=paper_chunk, trace_complete=info.complete)
    specs = [InterleaveSpec(p, interleave, seed, refs_per_turn) for p in counts]
    private = [[sampling.sampler() for _ in range(p)] for p in counts]
    shared = [sampling.sampler() if p > 1 else None for p in counts]  # one core: the CRD is the PRD
    for i, batch in mimic(info, chunks, specs, resolved, line_size, paper_chunk):
        for core, piece in batch.pieces:
            private[i][core].feed(piece)
        if shared[i] is not None:
            shared[i].feed(batch.lines)
    for p, prd, crd in zip(counts, private, shared):
        hists = [s.histogram() for s in prd]
        ps.prd.update({(p, c): h for c, h in enumerate(hists)})
        ps.crd[p] = crd.histogram() if crd is not None else hists[0]
    return ps
