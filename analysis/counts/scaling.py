"""Input scaling (AMM Sec. 3.2.3): a larger input's reuse profile from a small trace and large counts.

AMM keeps each block's conditional profile P(D | BB_i), measured on the small input, and only
re-weights it with the block counts of the large input (from a counting run or solved counts):
P_large(D) = sum_i w_i' P_small(D | BB_i), w_i' proportional to N_i' * m_i.

Where it breaks (measured in benchmarks/bench_sampling.py and tests/test_scaling.py): reuse
distances that grow with the input (matmul's reuse of B grows with n^2) keep their small-input
values, so caches that the large working set overflows are predicted to hit; blocks that never
ran on the small input have no profile and are dropped (listed in `missing_blocks`); cold misses
stay a fixed fraction of each block's accesses instead of following the data size.

Measured SMALL -> MEDIUM on the built-in benchmarks (counts solved from a MEDIUM counting run,
Haswell-like 32K/256K/20M levels): blackscholes 0.00 pp at every level (streaming, distances do
not depend on the input size); convolution-2d within 0.08 pp (stencil: reuse distances are a few
rows, which fit L1 at both sizes); atax and bicg L1 +10.5 pp, L2 +1.1 pp, L3 0.0 pp: the
column-wise sweep of A (y[j] += A[i][j] * tmp[i]) re-touches a line of A one column later,
after M other lines of A and M/8 of tmp: about 225 lines at M = 200, which fit the 512-line
L1, and about 563 at M = 500, which do not; the small trace's hits are carried over where
MEDIUM misses. Predicted access totals are within 0.03% of the MEDIUM trace, except convolution-2d
(-5%): the traced build reloads a value after each trace-marker call, in a block the counting
run (tracing off) never enters, so those accesses have no count at the large input.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from analysis.profiles.profileset import ReuseProfile
from analysis.sampling.amm.blocks import SampledProfile
from machines.model import CacheLevel

# The reference hierarchy (Haswell-like): used when no machine is given.
DEFAULT_LEVELS = (
    CacheLevel("L1", 32 << 10, 64, 8, 4.0, 0.5, False),
    CacheLevel("L2", 256 << 10, 64, 8, 12.0, 1.0, False),
    CacheLevel("L3", 20 << 20, 64, 20, 36.0, 2.0, True),
)


@dataclass
class ScaledProfile:
    """A predicted profile for the large input and what it could not cover."""

    profile: ReuseProfile
    missing_blocks: list[int] = field(default_factory=list)  # counted at the large input, never traced
    expected_accesses: float = 0.0


def scale_profile(small: SampledProfile, large_counts: dict[int, float]) -> ScaledProfile:
    """Re-weight the small trace's per-block profiles with the large input's block counts."""
    missing = sorted(b for b, n in large_counts.items() if n > 0 and small.block_counts.get(b, 0) <= 0)
    profile = small.combined(large_counts)
    expected = sum(n * small.accesses_per_instance.get(b, 0.0) for b, n in large_counts.items())
    return ScaledProfile(profile, missing, expected)


def hit_rates(profile: ReuseProfile, levels: tuple[CacheLevel, ...] = DEFAULT_LEVELS) -> dict[str, float]:
    """SDCM hit rate (analysis.hitrates.sdcm) of each level, each computed from the same profile (AMM Eq. 1)."""
    from analysis.hitrates.sdcm import hit_rate

    return {lvl.name: hit_rate(profile, lvl) for lvl in levels}


def compare(predicted: ReuseProfile, exact: ReuseProfile,
            levels: tuple[CacheLevel, ...] = DEFAULT_LEVELS) -> pd.DataFrame:
    """Per level: predicted and exact hit rates and the error in percentage points."""
    p, e = hit_rates(predicted, levels), hit_rates(exact, levels)
    return pd.DataFrame([{"level": k, "predicted": p[k], "exact": e[k], "error_pp": 100 * (p[k] - e[k])}
                         for k in p])
