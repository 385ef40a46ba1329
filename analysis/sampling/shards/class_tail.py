"""The far tail of the sampled per-set-class profiles (class_shards.py): a far sample's class distance estimated
from its class count and its plain count.

Model. A far reuse's interval holds D distinct lines, d of them in the reused line's set class (b bits). SHARDS
keeps each line with probability R whatever its class, so the sample sees K ~ Bin(D, R) of the D lines in its
core's plain stack and k ~ Bin(d, R) of the d in its class stack. k / R alone resolves d only to about 1/R lines
(k = 0, a hit, for any d below about 1/R). With K: D = K / R (the plain SHARDS estimate, so d <= D as in the
plain profile), and each of the D - K unseen lines is in the class with the interval's class share s. A priori
s is one class's share under shares uniform over the simplex of the 2^b classes (Dirichlet(1, ..., 1)), whose
marginal is Beta(1, 2^b - 1): mean 2^-b, no class preferred; the K seen lines, k of them in the class, make it
Beta(1 + k, 2^b - 1 + K - k), so d = k + BetaBinomial(D - K, 1 + k, 2^b - 1 + K - k). Each sample adds that
posterior (on a grid: every x up to GRID_EXACT, then GRID_OCTAVE points an octave) rather than one point.
Samples with k >= FEW keep d = k / R (their posterior's relative spread is under 1/sqrt(FEW)), and so do
samples without windows (rate 1: no far tail is estimated).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import betaln, gammaln

from analysis.sampling.shards.stacks import hot_helper
from analysis.sampling.near.windows import Estimate

FEW = 32  # class counts below this are tallied with their plain count
EXACT_K = 128  # plain counts below this are tallied exactly, larger ones in PLAIN_SUB bins an octave
PLAIN_SUB = 8
PLAIN_BINS = EXACT_K + PLAIN_SUB * (40 - 7)  # up to 2^40 sampled lines
GRID_EXACT, GRID_OCTAVE = 256, 32


class ClassTail(NamedTuple):
    """One stream's far class samples: class distances (-1: cold or coherence miss) with at least FEW sampled
    lines and their counts; pairs[k, j]: samples of class distance k < FEW and plain distance in bin j
    (plain_bin); bits: the class width."""

    keys: np.ndarray
    cnt: np.ndarray
    pairs: np.ndarray
    bits: int


@hot_helper
def plain_bin(big):
    """The pairs' bin of plain distance big: exact below EXACT_K, then PLAIN_SUB bins an octave."""
    if big < EXACT_K:
        return big
    e = 7
    while big >> (e + 1) and e < 39:
        e += 1
    return min(EXACT_K + PLAIN_SUB * (e - 7) + ((big >> (e - 3)) & 7), PLAIN_BINS - 1)


def bin_middle(j: np.ndarray) -> np.ndarray:
    """The plain distance a pairs bin stands for (exact ones: itself; others: their range's middle)."""
    j = np.asarray(j, np.int64)
    e = 7 + (j - EXACT_K) // PLAIN_SUB
    sub = (j - EXACT_K) % PLAIN_SUB
    mid = (PLAIN_SUB + sub + 0.5) * np.exp2(e - 3.0)
    return np.where(j < EXACT_K, j.astype(np.float64), mid)


def posterior(k: int, big: float, rate: float, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The class distance's posterior (module docstring) for class count k and plain count big: distances and
    probabilities (summing to 1)."""
    n = max(round(big / rate) - round(big), 0)
    a, b = 1.0 + k, float((1 << bits) - 1) + big - k
    x = np.arange(min(n, GRID_EXACT) + 1, dtype=np.float64)
    width = np.ones_like(x)
    if n > GRID_EXACT:
        steps = int(np.ceil(GRID_OCTAVE * np.log2(n / GRID_EXACT)))
        geo = np.unique(np.rint(GRID_EXACT * np.exp2(np.arange(1, steps + 1) / GRID_OCTAVE)).clip(max=n))
        geo = geo[geo > GRID_EXACT]
        edges = np.concatenate([[GRID_EXACT + 0.5], (geo[1:] + geo[:-1]) / 2, [n + 0.5]])
        x, width = np.concatenate([x, geo]), np.concatenate([width, np.diff(edges)])
    logp = (gammaln(n + 1) - gammaln(x + 1) - gammaln(n - x + 1) + betaln(x + a, n - x + b) - betaln(a, b))
    w = np.exp(logp - logp.max()) * width
    return k + x, w / w.sum()


class ClassEstimate(Estimate):
    """A windows.Estimate of class distances whose far tail is the model's (module docstring)."""

    def __init__(self, look: int) -> None:
        """An empty estimate (class_shards.class_estimate fills it from a windows.Estimate and a ClassTail)."""
        super().__init__(look)
        self.pairs = np.zeros((0, PLAIN_BINS), np.int64)  # ClassTail.pairs
        self.bits = 0

    def far_tail(self, rate: float) -> tuple[np.ndarray, np.ndarray]:
        """The far samples as full-trace class distances (-1: cold) and (fractional) counts: those with a class
        count of at least FEW (and the cold ones) as windows.Estimate's, the others spread over their
        posterior."""
        vals, cnt = super().far_tail(rate)
        ks, js = np.nonzero(self.pairs)
        parts_v, parts_c = [vals], [cnt]
        for k, j, m in zip(ks.tolist(), js.tolist(), self.pairs[ks, js].tolist()):
            d, p = posterior(k, float(bin_middle(j)), rate, self.bits)
            parts_v.append(np.rint(d))
            parts_c.append(m * p)
        return np.concatenate(parts_v), np.concatenate(parts_c)
