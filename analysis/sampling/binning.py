"""Sampled distances into the exact engine's histogram bins, so sampled and exact ProfileSets read alike.

Shared by the per-block samplers (analysis/sampling/amm/blocks.py), the stream sampler (streams.py) and source
sampling (source.py, windows.py, stacks.py).
"""
from __future__ import annotations

import functools

import numpy as np

from analysis.profiles.profileset import ReuseProfile


@functools.lru_cache(maxsize=1)
def engine_bins() -> tuple[np.ndarray, np.ndarray]:
    """The exact engine's histogram bins (lower, upper), built once, read-only (a profile takes copies)."""
    from analysis.profiles.profileset import histogram_bins
    from analysis.profiles.reuse import EXACT_BITS, EXACT_LIMIT, N_BINS, SUB_BITS

    lower, upper = histogram_bins(N_BINS, EXACT_LIMIT, EXACT_BITS, SUB_BITS)
    lower.flags.writeable = upper.flags.writeable = False
    return lower, upper


def binned_profile(vals: np.ndarray, cnt: np.ndarray, scale: float, total: int) -> ReuseProfile:
    """Scaled counts of distances (-1 = cold) in the exact engine's histogram bins; totals `total`."""
    from analysis.profiles.reuse import N_BINS

    lower, upper = engine_bins()
    warm = vals >= 0
    idx = np.searchsorted(lower, vals[warm], side="right") - 1
    w = cnt[warm] * scale
    expected = np.append(np.bincount(idx, weights=w, minlength=N_BINS), cnt[~warm].sum() * scale)
    count = _round_to_total(expected, total)
    mean = np.bincount(idx, weights=w * vals[warm], minlength=N_BINS) / np.maximum(expected[:-1], 1e-300)
    dist_sum = np.rint(mean * count[:-1]).astype(np.int64)
    keep = count[:-1] > 0
    return ReuseProfile(lower[keep], upper[keep], count[:-1][keep], dist_sum[keep], int(count[-1]), total)


def _round_to_total(x: np.ndarray, total: int) -> np.ndarray:
    """Integers near x summing to `total` (largest remainders), so every stream keeps its access count."""
    x = x * (total / x.sum()) if x.sum() > 0 else x
    out = np.floor(x).astype(np.int64)
    short = total - int(out.sum())
    if short > 0:
        out[np.argsort(out - x, kind="stable")[:short]] += 1
    return out


def scale_profile(raw: ReuseProfile, rate: float, total: int, adjust: bool = True) -> ReuseProfile:
    """The full stream's estimated profile from its SHARDS one: distances / rate, counts summing to total.

    A stream without any sampled access keeps every access cold (no evidence of reuse). adjust: SHARDS-adj,
    the gap between the expected (rate * total) and the drawn sample size goes to distance 0."""
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


def counts_of(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of d and how often each occurs."""
    vals, cnt = np.unique(d, return_counts=True)
    return vals.astype(np.int64), cnt.astype(np.float64)


def cat(parts: list, dtype) -> np.ndarray:
    """Concatenate, or an empty array of dtype."""
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def exact_distances(lines: np.ndarray) -> np.ndarray:
    """The exact engine's distances (imported lazily: numba compile only when needed)."""
    from analysis.profiles.reuse import reuse_distances

    return reuse_distances(lines)
