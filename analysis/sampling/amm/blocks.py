"""AMM sampled per-block reuse profiles: P(D) = sum_i P(BB_i) * P(D | BB_i) (AMM Sec. 3.2, Eq. 2-3).

Four methods, all seeded and streaming (``hybrid`` is the default: it is the accurate one, see
benchmarks/bench_sampling.py):

* ``instance`` (AMM as published): each block instance is sampled with probability `rate`
  (optionally at most `sample_size` instances per block), drawn up front from the trace's
  block counts with a seeded numpy Generator. For every access of a sampled instance we scan
  back through a ring buffer of the last `window` accesses (AMM Algorithm 1, "max back
  reference") and count the distinct lines since the previous access to the same line.
  Bias: a line whose previous use lies more than `window` accesses back is recorded as cold
  (-1), so long reuses are under-counted and hit rates of big caches come out low; cost is
  O(sampled accesses * scan length), so large windows are slow. The instance choice costs one
  byte per block instance of the trace.
* ``spatial`` (SHARDS, Waldspurger et al., FAST'15): an access is sampled when a seeded hash of
  its line falls below `rate`; the exact engine (analysis.profiles.reuse) runs on the sampled lines only
  and each distance is scaled by 1/rate. Distances are estimates with relative noise about
  1/sqrt(D * rate): tiny caches (few hundred lines) are resolved coarsely, big ones well.
* ``hybrid``: ``instance`` for reuses found within the window (exact distances), and for the
  accesses it bins as beyond-window, the distribution of SHARDS distances of the same block's
  accesses whose previous use is more than `window` accesses back (or none), SHARDS at the same
  rate. Removes the
  window bias at the cost of running both samplers. A block with no far SHARDS sample keeps
  its beyond-window share as cold.
* ``exact``: every access with its exact distance (rate and window ignored), for small traces
  and as the reference.

`pptmc profile --sample-rate R` estimates the model's streams (the mimicked per-core private
traces and the interleaved shared traces), which carry no block ids. By default
(`--sample-method source`, analysis/sampling/source.py) it samples the sequential trace before
the mimicking and interleaving: SHARDS lines and time windows of each stream are picked from the
decoded rows, so only a few percent of the accesses go further. The stream sampler
(analysis/sampling/streams.py; `--sample-method window|spatial|exact`, and the fallback for
`--interleave random`) builds each stream in full and samples it. The numba passes of the samplers
below are in analysis/sampling/amm/block_kernels.py.

Distances are at cache-line granularity (addr // line_size). Per-block conditional profiles
are mixed with weights N_i * m_i / sum_j N_j * m_j where N_i is the block count and m_i its
accesses per instance: this is AMM Eq. 2 with P(BB_i) of Eq. 3 re-weighted by accesses,
which makes P(D) a distribution over accesses (Eq. 3 alone is exact only when every block
makes the same number of accesses).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from analysis.profiles.profileset import ReuseProfile
from analysis.sampling.binning import cat, exact_distances
from analysis.sampling.amm.block_kernels import InstanceDraw, InstanceOut, ScanState, hash_select, instance_chunk
from analysis.sampling.hashing import draw_salt, shards_threshold
from instrument.trace_types import TraceChunk, TraceInfo
from common.errors import InputError
from analysis.sampling.options import DEFAULT_WINDOW, METHODS

DistanceFn = Callable[[np.ndarray], np.ndarray]


class BadBlockError(Exception):
    """Internal: a chunk names a block id outside the footer's block counts."""


@dataclass
class SampledProfile:
    """Per-block conditional profiles P(D | BB_i) and what is needed to mix them."""

    per_block: dict[int, ReuseProfile]           # sampled distances of each block's accesses
    accesses_per_instance: dict[int, float]      # m_i, measured in the trace
    block_counts: dict[int, float]               # N_i of the traced input
    method: str
    sample_rate: float
    window: int
    seed: int
    line_size: int
    n_accesses: int                              # accesses in the trace
    n_sampled: int = 0                           # distances measured (hybrid: by both samplers, so may exceed n)
    extra: dict = field(default_factory=dict)

    def block_probabilities(self, counts: dict[int, float] | None = None) -> dict[int, float]:
        """P(BB_i) = N_i / sum N (AMM Eq. 3), for the traced or the given counts."""
        counts = self.block_counts if counts is None else counts
        total = float(sum(counts.values()))
        return {b: (float(n) / total if total > 0 else 0.0) for b, n in counts.items()}

    def combined(self, counts: dict[int, float] | None = None) -> ReuseProfile:
        """P(D) over all accesses, as expected access counts for the given block counts."""
        return mix_profiles(self.per_block, self.accesses_per_instance,
                            self.block_counts if counts is None else counts)


def mix_profiles(per_block: dict[int, ReuseProfile], m: dict[int, float],
                 counts: dict[int, float]) -> ReuseProfile:
    """AMM Eq. 2: sum over blocks of (expected accesses N_i * m_i) * P(D | BB_i), as one histogram."""
    acc: dict[int, float] = {}
    sums: dict[int, float] = {}
    cold = 0.0
    total = 0.0
    for b, prof in per_block.items():
        weight = float(counts.get(b, 0.0)) * m.get(b, 0.0)
        if weight <= 0 or prof.total == 0:
            continue
        scale = weight / prof.total
        total += weight
        cold += prof.cold * scale
        for lo, n, s in zip(prof.lower.tolist(), prof.count.tolist(), prof.dist_sum.tolist()):
            acc[lo] = acc.get(lo, 0.0) + n * scale
            sums[lo] = sums.get(lo, 0.0) + s * scale
    lower = np.array(sorted(acc), dtype=np.int64)
    count = np.rint([acc[k] for k in lower.tolist()]).astype(np.int64)
    dist_sum = np.rint([sums[k] for k in lower.tolist()]).astype(np.int64)
    keep = count > 0
    return ReuseProfile(lower[keep], lower[keep] + 1, count[keep], dist_sum[keep],
                        int(round(cold)), int(count[keep].sum() + round(cold)))


def check_parameters(rate: float, window: int, line_size: int, method: str) -> None:
    """InputError for out-of-range sampling parameters."""
    if not 0.0 < rate <= 1.0:
        raise InputError(f"--sample-rate must be in (0, 1], got {rate}; e.g. 0.01 for 1%")
    if window < 1:
        raise InputError(f"--window must be >= 1 access, got {window}")
    if line_size < 1 or line_size & (line_size - 1):
        raise InputError(f"--line-size must be a power of two, got {line_size}")
    if method not in METHODS:
        raise InputError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")


def sample_profile(info: TraceInfo, chunks: Iterable[TraceChunk], sample_rate: float,
                   window: int = DEFAULT_WINDOW, seed: int = 0, line_size: int = 64,
                   method: str = "hybrid", sample_size: int | None = None,
                   distance_fn: DistanceFn | None = None) -> SampledProfile:
    """Sampled per-block reuse profiles of one trace, streaming over its chunks."""
    check_parameters(sample_rate, window, line_size, method)
    if sample_size is not None and sample_size < 1:
        raise InputError(f"--sample-size must be >= 1 instance per block, got {sample_size}")
    if seed < 0:
        raise InputError(f"--seed must be >= 0, got {seed}")
    shift = np.uint64(line_size.bit_length() - 1)
    if method == "instance":
        sampler = _InstanceSampler(info, sample_rate, window, seed, sample_size)
    elif method == "exact":
        sampler = _ExactSampler()
    elif method == "hybrid":
        sampler = _HybridSampler(info, sample_rate, window, seed, sample_size, distance_fn or exact_distances)
    else:
        sampler = _SpatialSampler(sample_rate, seed, distance_fn or exact_distances)
    counts = {b: float(c) for b, c in info.block_counts.items()}
    access_counts = np.zeros(_block_table_size(info), dtype=np.int64)
    n = 0
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        try:
            sampler.feed(chunk.addr, chunk.block, chunk.block_instance, shift, access_counts)
        except BadBlockError as exc:
            raise InputError(f"{info.path}: an access names a block id missing from the footer's block "
                             "counts; the trace may be truncated, re-run the tracer") from exc
        n += len(chunk)
    per_block = sampler.finish()
    m = {}
    for b in np.flatnonzero(access_counts).tolist():
        if counts.get(b, 0) <= 0:
            raise InputError(f"{info.path}: block {b} makes accesses but has no block count in the trace "
                             "footer; the trace may be truncated, re-run the tracer")
        m[b] = float(access_counts[b]) / counts[b]
    return SampledProfile(per_block, m, counts, method, sample_rate, window, seed, line_size, n,
                          sampler.measured())


def sample_trace_file(trace_path: str, sample_rate: float, window: int = DEFAULT_WINDOW, seed: int = 0,
                      line_size: int = 64, method: str = "hybrid", sample_size: int | None = None,
                      max_rows: int = 1 << 20) -> SampledProfile:
    """Open a trace file and compute its per-block profiles (the entry point for `pptmc profile --sample-rate`)."""
    from analysis.profiles.sweep import open_chunks

    check_parameters(sample_rate, window, line_size, method)
    info, factory = open_chunks(trace_path, max_rows)
    return sample_profile(info, factory(), sample_rate, window, seed, line_size, method, sample_size)


def _block_table_size(info: TraceInfo) -> int:
    """One slot per block id of the footer's block counts."""
    ids = list(info.block_counts)
    if ids and min(ids) < 0:
        raise InputError(f"{info.path}: negative block id {min(ids)} in the block counts")
    return (max(ids) + 1) if ids else 0


class _BlockHistograms:
    """Per-block distance counts accumulated chunk by chunk, so memory follows distinct (block, D) pairs."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}

    def add(self, blocks: np.ndarray, dists: np.ndarray) -> None:
        """Count each (block, distance) pair; distances are < 2^32 lines, so one uint64 key holds both."""
        if blocks.shape[0] == 0:
            return
        keys = (blocks.astype(np.uint64) << np.uint64(33)) | (dists + 1).astype(np.uint64)
        vals, cnt = np.unique(keys, return_counts=True)
        for k, c in zip(vals.tolist(), cnt.tolist()):
            self.counts[k] = self.counts.get(k, 0) + c

    def profiles(self) -> dict[int, ReuseProfile]:
        """One exact-bin ReuseProfile per block."""
        keys = np.array(sorted(self.counts), dtype=np.uint64)
        cnt = np.array([self.counts[k] for k in keys.tolist()], dtype=np.int64)
        blocks = (keys >> np.uint64(33)).astype(np.int64)
        dists = (keys & np.uint64((1 << 33) - 1)).astype(np.int64) - 1
        out = {}
        for b in np.unique(blocks).tolist():
            sel = blocks == b
            d, c = dists[sel], cnt[sel]
            warm = d >= 0
            out[b] = ReuseProfile(d[warm], d[warm] + 1, c[warm], d[warm] * c[warm], int(c[~warm].sum()),
                                  int(c.sum()))
        return out


class _InstanceSampler:
    """AMM sampling: whole block instances, distances by scanning back within a window."""

    def __init__(self, info: TraceInfo, rate: float, window: int, seed: int, sample_size: int | None) -> None:
        self.draw = _draw_instances(info, np.random.default_rng(seed), rate, sample_size)
        self.path = info.path
        self.window = window
        self.history = np.zeros(0, dtype=np.uint64)
        table = 1 << max(4, int(np.ceil(np.log2(2 * window + 1))))
        self.keys = np.zeros(table, dtype=np.uint64)   # scratch hash set of Algorithm 1, reused by stamp
        self.stamp = np.zeros(table, dtype=np.int64)
        self.tag = 0
        self.hist = _BlockHistograms()
        self.n_measured = 0

    def feed(self, addr: np.ndarray, block: np.ndarray, instance: np.ndarray, shift: np.uint64,
             access_counts: np.ndarray) -> None:
        """Distances of this chunk's sampled accesses; keeps the last `window` lines for the next chunk."""
        n = addr.shape[0]
        out_block = np.empty(n, dtype=np.int32)
        out_d = np.empty(n, dtype=np.int64)
        scan = ScanState(self.history, self.window, self.keys, self.stamp)
        status, k, self.tag = instance_chunk(addr, block, instance, shift, self.draw, scan, self.tag,
                                             InstanceOut(access_counts, out_block, out_d))
        if status == -1:
            raise BadBlockError()
        if status == -2:
            raise InputError(f"{self.path}: an access names a block instance beyond the footer's block "
                             "counts; the trace is inconsistent, re-run the tracer")
        if n >= self.window:
            self.history = addr[n - self.window:] >> shift
        else:
            self.history = np.concatenate([self.history, addr >> shift])[-self.window:]
        self.hist.add(out_block[:k], out_d[:k])
        self.n_measured += k

    def measured(self) -> int:
        """Accesses whose distance was measured."""
        return self.n_measured

    def finish(self) -> dict[int, ReuseProfile]:
        """Per-block profiles of the sampled accesses."""
        return self.hist.profiles()

def _draw_instances(info: TraceInfo, rng: np.random.Generator, rate: float,
                    sample_size: int | None) -> InstanceDraw:
    """The sampled instances of every block of the footer's counts, drawn block by block in id order."""
    ids = sorted(info.block_counts)
    top = (max(ids) + 1) if ids else 1
    if ids and min(ids) < 0:
        raise InputError(f"{info.path}: negative block id {min(ids)} in the block counts")
    offset = np.zeros(top, dtype=np.int64)
    picks = []
    pos = 0
    for b in ids:  # sorted, so the draw order (and the sample) depends only on the seed
        n = int(info.block_counts[b])
        offset[b] = pos
        picks.append(_pick(rng, n, rate, sample_size))
        pos += n
    flat = np.concatenate(picks) if picks else np.zeros(0, bool)
    size = np.zeros(top, dtype=np.int64)
    size[ids] = [int(info.block_counts[b]) for b in ids]
    return InstanceDraw(flat, offset, size)


def _pick(rng: np.random.Generator, n: int, rate: float, sample_size: int | None) -> np.ndarray:
    """Which of a block's n instances are sampled: Bernoulli(rate), at least one, at most sample_size.

    At least one, because a block without a sampled instance has no P(D | BB_i) and would
    silently drop out of Eq. 2 (AMM likewise draws its windows per block).
    """
    chosen = rng.random(n) < rate
    if n and not chosen.any():
        chosen[rng.integers(0, n)] = True
    if sample_size is not None and chosen.sum() > sample_size:
        keep = rng.choice(np.flatnonzero(chosen), size=sample_size, replace=False)
        chosen[:] = False
        chosen[keep] = True
    return chosen


_NOT_FOUND = -(1 << 62)


class _SpatialSampler:
    """SHARDS: keep accesses whose hashed line is below rate; exact distances on them, scaled by 1/rate."""

    def __init__(self, rate: float, seed: int, distance_fn: DistanceFn) -> None:
        self.rate = rate
        self.threshold = shards_threshold(rate)
        self.salt = draw_salt(np.random.default_rng(seed))
        self.distance_fn = distance_fn
        self.lines: list[np.ndarray] = []
        self.blocks: list[np.ndarray] = []
        self.positions: list[np.ndarray] = []
        self.seen = 0

    def feed(self, addr: np.ndarray, block: np.ndarray, instance: np.ndarray, shift: np.uint64,
             access_counts: np.ndarray) -> None:
        """Keep this chunk's sampled lines (about rate * len of them) and count accesses per block."""
        sel = hash_select(addr, block, shift, self.salt, self.threshold, access_counts)
        if sel.shape[0] and sel[-1] < 0:
            raise BadBlockError()
        self.lines.append(addr[sel] >> shift)
        self.blocks.append(block[sel])
        self.positions.append(sel + self.seen)
        self.seen += addr.shape[0]

    def scaled(self) -> tuple[np.ndarray, np.ndarray]:
        """(block, distance / rate) per sampled access."""
        d = np.asarray(self.distance_fn(cat(self.lines, np.uint64)), dtype=np.int64)
        return cat(self.blocks, np.int32), np.where(d >= 0, np.rint(d / self.rate), -1).astype(np.int64)

    def gaps(self) -> np.ndarray:
        """Accesses since the previous use of the line (-1: none) per sampled access, in trace order."""
        lines = cat(self.lines, np.uint64)
        pos = cat(self.positions, np.int64)
        order = np.lexsort((pos, lines))  # by line, then time: a line's previous use is its predecessor
        gap = np.full(pos.shape[0], -1, dtype=np.int64)
        same = lines[order][1:] == lines[order][:-1]
        gap[order[1:][same]] = pos[order][1:][same] - pos[order][:-1][same]
        return gap

    def measured(self) -> int:
        """Accesses whose distance was measured."""
        return int(sum(x.shape[0] for x in self.lines))

    def finish(self) -> dict[int, ReuseProfile]:
        """Per-block profiles of the sampled accesses, distances scaled by 1/rate."""
        blocks, d = self.scaled()
        hist = _BlockHistograms()
        hist.add(blocks, d)
        return hist.profiles()


class _HybridSampler:
    """Instance sampling for reuses within the window (exact), SHARDS for the rest (AMM's lost long tail)."""

    def __init__(self, info: TraceInfo, rate: float, window: int, seed: int, sample_size: int | None,
                 distance_fn: DistanceFn) -> None:
        self.window = window
        self.instance = _InstanceSampler(info, rate, window, seed, sample_size)
        self.spatial = _SpatialSampler(rate, seed, distance_fn)
        self.scratch = np.zeros(0, dtype=np.int64)

    def feed(self, addr: np.ndarray, block: np.ndarray, instance: np.ndarray, shift: np.uint64,
             access_counts: np.ndarray) -> None:
        """Feed both samplers; only the instance sampler's access counts are kept."""
        self.instance.feed(addr, block, instance, shift, access_counts)
        if self.scratch.shape[0] != access_counts.shape[0]:
            self.scratch = np.zeros_like(access_counts)
        self.spatial.feed(addr, block, instance, shift, self.scratch)

    def measured(self) -> int:
        """Accesses whose distance was measured by either sampler."""
        return self.instance.measured() + self.spatial.measured()

    def finish(self) -> dict[int, ReuseProfile]:
        """Per block: exact in-window distances plus the beyond-window share spread over SHARDS's tail."""
        near = self.instance.finish()
        blocks, d = self.spatial.scaled()
        gap = self.spatial.gaps()
        far = (gap < 0) | (gap > self.window)
        tails = _BlockHistograms()
        tails.add(blocks[far], d[far])
        far_profiles = tails.profiles()
        return {b: _splice(p, far_profiles.get(b)) for b, p in near.items()}


def _splice(near: ReuseProfile, tail: ReuseProfile | None) -> ReuseProfile:
    """Replace the `cold` (beyond-window) share of `near` by the tail's distribution, in integer counts."""
    if tail is None or tail.total == 0 or near.cold == 0:
        return near
    k = tail.total  # scale near by the tail size so that near.cold * tail.count stays an integer
    acc: dict[int, int] = {}
    for lo, n in zip(near.lower.tolist(), near.count.tolist()):
        acc[lo] = acc.get(lo, 0) + n * k
    for lo, n in zip(tail.lower.tolist(), tail.count.tolist()):
        acc[lo] = acc.get(lo, 0) + n * near.cold
    lower = np.array(sorted(acc), dtype=np.int64)
    count = np.array([acc[x] for x in lower.tolist()], dtype=np.int64)
    cold = near.cold * tail.cold
    return ReuseProfile(lower, lower + 1, count, lower * count, cold, int(count.sum()) + cold)


class _ExactSampler:
    """Every access, exact distances from the streaming engine (AMM's "100% sampling")."""

    def __init__(self) -> None:
        from analysis.profiles.reuse import ReuseEngine

        self.engine = ReuseEngine()
        self.hist = _BlockHistograms()
        self.n_measured = 0

    def feed(self, addr: np.ndarray, block: np.ndarray, instance: np.ndarray, shift: np.uint64,
             access_counts: np.ndarray) -> None:
        """Exact distance of every access of the chunk, counted per block."""
        if block.min() < 0 or block.max() >= access_counts.shape[0]:
            raise BadBlockError()
        access_counts += np.bincount(block, minlength=access_counts.shape[0])
        self.hist.add(block, self.engine.feed_distances(addr >> shift))
        self.n_measured += addr.shape[0]

    def measured(self) -> int:
        """Accesses whose distance was measured (all of them)."""
        return self.n_measured

    def finish(self) -> dict[int, ReuseProfile]:
        """Per-block exact profiles."""
        return self.hist.profiles()


