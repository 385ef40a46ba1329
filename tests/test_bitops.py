"""The hardware population count against Python's bin(x).count("1") and the portable SWAR version."""
from __future__ import annotations

import numba
import numpy as np

from analysis.profiles.bitops import popcount
from analysis.profiles.kernel_ops import popcount_swar


@numba.njit(cache=True)
def _counts(xs):
    """popcount and popcount_swar of every value."""
    out = np.empty((xs.shape[0], 2), np.int64)
    for i in range(xs.shape[0]):
        out[i, 0] = popcount(xs[i])
        out[i, 1] = popcount_swar(xs[i])
    return out


def test_popcount_counts_set_bits():
    """Edge values (0, all ones, single bits, the top bit) and random words."""
    rng = np.random.default_rng(7)
    edge = [0, 1, 2**63, 2**64 - 1, 2**32 - 1, 0x5555555555555555] + [1 << b for b in range(64)]
    xs = np.concatenate([np.array(edge, np.uint64), rng.integers(0, 2**64 - 1, 1000, dtype=np.uint64)])
    got = _counts(xs)
    want = [bin(int(x)).count("1") for x in xs]
    assert got[:, 0].tolist() == want and got[:, 1].tolist() == want
