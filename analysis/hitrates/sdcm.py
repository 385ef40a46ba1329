"""Stack Distance Cache Model (Brehob and Enbody): hit probability from reuse distance.

Eq. 1 (A-way, B lines):  P(h | D) = P(X <= A-1), X ~ Binomial(D, A/B), evaluated as the
regularised incomplete beta I_{1-q}(D-A+1, A), which scipy computes stably for D up to
1e9 and beyond and which is monotone non-increasing in D (PPT's hand-written sum dips at
D = A). Eq. 2 (direct-mapped): ((B-1)/B)^D in log space. Fully associative LRU: hit iff
D < B. Cold accesses (infinite distance) always miss.

Histogram bins wider than one distance are evaluated at the bin's mean distance, except
for fully associative caches, where the hit fraction of a bin is the part of [lower,
upper) below B (exact whenever B is a bin edge, which holds for every B below 4096 and
every B = m * 2^j with m < 64).
"""
from __future__ import annotations

import numpy as np
from scipy.special import betainc

from analysis.profiles.profileset import ReuseProfile
from machines.model import CacheLevel
from common.errors import InputError


def hit_probability(distances: np.ndarray, associativity: int, n_lines: int) -> np.ndarray:
    """P(hit | D) per distance; associativity 0 = fully associative, 1 = direct-mapped."""
    d = np.asarray(distances, dtype=np.float64)
    a, b = int(associativity), int(n_lines)
    if b < 1 or a < 0:
        raise InputError(f"cache with {n_lines} lines and associativity {associativity}: "
                         f"need at least one line and associativity >= 0")
    if a == 0 or a >= b:
        return (d < b).astype(np.float64)
    if a == 1:
        return np.exp(d * np.log1p(-1.0 / b))
    out = np.ones_like(d)
    big = d > a - 1  # X <= A-1 is certain when D <= A-1
    out[big] = betainc(d[big] - (a - 1), a, 1.0 - a / b)
    return out


def hit_rate(profile: ReuseProfile, level: CacheLevel) -> float:
    """Eq. 3: expected fraction of the profile's accesses that hit this cache level."""
    return expected_hits(profile, level.associativity, level.n_lines) / profile.total if profile.total else 0.0


def expected_hits(profile: ReuseProfile, associativity: int, n_lines: int) -> float:
    """Sum over bins of count * P(hit | D); cold accesses contribute nothing."""
    if len(profile.count) == 0:
        return 0.0
    if associativity == 0 or associativity >= n_lines:
        lo, hi = profile.lower.astype(np.float64), profile.upper.astype(np.float64)
        frac = np.clip((n_lines - lo) / np.maximum(hi - lo, 1.0), 0.0, 1.0)
        return float(np.dot(profile.count, frac))
    p = hit_probability(profile.mean_distance(), associativity, n_lines)
    return float(np.dot(profile.count, p))
