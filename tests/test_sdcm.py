"""SDCM hit probabilities against the paper's equations computed independently."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.profiles.profileset import ReuseProfile
from analysis.profiles.reuse import ReuseEngine
from analysis.hitrates.sdcm import expected_hits, hit_probability, hit_rate
from machines.model import CacheLevel


def eq1_exact(d: int, a: int, b: int) -> float:
    """Eq. 1 summed term by term in exact rational arithmetic."""
    q = Fraction(a, b)
    return float(sum(math.comb(d, k) * q**k * (1 - q)**(d - k) for k in range(min(a - 1, d) + 1)))


def eq1_logspace(d: int, a: int, b: int) -> float:
    """Eq. 1 with each term in log space (independent of scipy) for huge D."""
    lq, l1q = math.log(a / b), math.log1p(-a / b)
    terms = [math.lgamma(d + 1) - math.lgamma(k + 1) - math.lgamma(d - k + 1) + k * lq + (d - k) * l1q
             for k in range(min(a - 1, d) + 1)]
    m = max(terms)
    return math.exp(m) * sum(math.exp(t - m) for t in terms)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 300), st.sampled_from([2, 4, 8, 16]), st.sampled_from([16, 64, 512]))
def test_eq1_matches_exact_sum(d, a, b):
    got = hit_probability(np.array([d]), a, b)[0]
    assert got == pytest.approx(eq1_exact(d, a, b), rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("d", [10**4, 10**6, 10**8, 10**9])
def test_eq1_stable_for_huge_distances(d):
    b = 20 * 2**20 // 64  # a 20 MB 20-way cache
    got = hit_probability(np.array([d]), 20, b)[0]
    assert np.isfinite(got) and 0 <= got <= 1
    assert got == pytest.approx(eq1_logspace(d, 20, b), rel=1e-8, abs=1e-300)


def test_eq2_direct_mapped_and_fully_associative():
    d = np.array([0, 1, 5, 100])
    assert hit_probability(d, 1, 8).tolist() == pytest.approx([(7 / 8) ** k for k in (0, 1, 5, 100)])
    assert hit_probability(np.array([0, 3, 4, 5]), 0, 4).tolist() == [1, 1, 0, 0]
    # A >= B is fully associative
    assert hit_probability(np.array([3, 4]), 4, 4).tolist() == [1, 0]


@pytest.mark.parametrize("a,b", [(1, 512), (2, 64), (8, 512), (16, 4096), (20, 327680)])
def test_monotone_non_increasing(a, b):
    d = np.unique(np.concatenate([np.arange(0, 3 * a + 5), np.logspace(0, 9, 400).astype(np.int64)]))
    p = hit_probability(d, a, b)
    assert (np.diff(p) <= 1e-15).all() and p[0] == 1.0 and (p >= 0).all()


def test_hit_rate_on_paper_table2():
    engine = ReuseEngine()
    engine.feed(np.array([1, 2, 1, 3, 2, 4, 4, 1], dtype=np.uint64))
    prof = engine.histogram()
    # size four: no capacity misses, only the 4 compulsory ones (Sec. 2.3)
    assert hit_rate(prof, CacheLevel("L1", 4 * 64, 64, 0, 1, 1, False)) == 0.5
    assert hit_rate(prof, CacheLevel("L1", 2 * 64, 64, 0, 1, 1, False)) == 2 / 8
    dm = hit_rate(prof, CacheLevel("L1", 2 * 64, 64, 1, 1, 1, False))
    assert dm == pytest.approx(sum(0.5 ** k for k in range(4)) / 8)


def test_fully_associative_bins_split_at_cache_size():
    # one bin [4096, 4160) with 10 accesses: a 4128-line cache hits half of that bin's range
    prof = ReuseProfile(np.array([4096]), np.array([4160]), np.array([10]), np.array([41280]), 0, 10)
    assert expected_hits(prof, 0, 4160) == 10 and expected_hits(prof, 0, 4096) == 0
    assert expected_hits(prof, 0, 4128) == pytest.approx(5)
