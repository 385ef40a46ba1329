"""Eviction from a set-associative cache whose lines leave: SDCM's hit probability with turnover.

SDCM (Eq. 1) gives a line's hit probability from D, the lines above it in the LRU stack: it stays iff
fewer than A of them landed in its set (each does with probability q = A / lines). When other lines
leave the cache (write-invalidate between the instances of a level, ANALYSIS.md section 14), D is the
largest depth the line reached in its gap, and that undercounts evictions: as lines leave and others
arrive, the line's set can hold A lines above it at another time than when the whole stack is deepest.

The profiles give each gap its turnover K as well (analysis/profiles/depth_stack.py): D + K distinct lines
came above the line (one that left and came back counts once: it lands in the same set), the stack
reached D, so at least K of them left; and the removals' position u: the mean share of the gap's arrivals
that had come at each removal. The path is read in SEGMENTS steps of the arrivals (each: the removals due
by its middle, its arrivals, the rest), the K removals spread evenly over the shares [0, 2u] when u <= 1/2,
else over [2u - 1, 1]: u = 1/2 is the even path, and a u near 1 puts them after the stack has risen (a
line's rows arriving first, other instances taking lines later). Without a recorded position, u = 1/2. A
profile bin keeps how many of its gaps had turnover, their turnover sum and the sum of turnover x position:
its gaps without turnover are read by SDCM, the others at their mean K and their removals' mean u
(ANALYSIS.md section 14 says what these choices are worth against the simulator).
The count c of lines above the line in its set is then a Markov chain: an arrival joins the set with
probability q; when r of the n lines above it leave, each of the c does with probability r / n (which
lines leave does not depend on their sets, which the OS's page frames decide); the line is evicted once c
reaches A. With K = 0 that is SDCM's binomial exactly; with A = 1 it is 1 - (1 - q)^(D + K), since
a single arrival into the set evicts. Checked against a set-associative simulator with write-invalidate
on `benchmarks.dram_instances`' rows-then-columns (tests/test_turnover.py).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import comb
from scipy.stats import binom

from analysis.hitrates.sdcm import expected_hits, hit_probability
from analysis.profiles.profileset import ReuseProfile

SEGMENTS = 32  # steps of the evenly spread path; 512 move a probability by < 2 % of it or 2e-5 (test_turnover.py)


def hit_probability_with_turnover(distances: np.ndarray, turnovers: np.ndarray, associativity: int,
                                  n_lines: int, segments: int = SEGMENTS,
                                  positions: np.ndarray | None = None) -> np.ndarray:
    """P(the line is still cached | largest depth D, turnover K, removals at position u (default 1/2))
    per entry (module docstring)."""
    d = np.asarray(distances, dtype=np.float64)
    k = np.broadcast_to(np.asarray(turnovers, dtype=np.float64), d.shape)
    u = np.broadcast_to(np.asarray(0.5 if positions is None else positions, dtype=np.float64), d.shape)
    out = hit_probability(d, associativity, n_lines)
    a = int(associativity)
    moving = k > 0
    if a == 0 or a >= n_lines or not moving.any():  # fully associative: depth alone decides
        return out
    path = Path(d[moving] + k[moving], k[moving], u[moving].clip(0.0, 1.0))
    out[moving] = 1.0 - _eviction(path, a, a / n_lines, segments)
    return out


def expected_hits_with_turnover(profile: ReuseProfile, associativity: int, n_lines: int) -> float:
    """SDCM's expected hits of a profile, each bin's gaps without turnover read at its mean distance alone,
    and those with turnover at its mean distance, their mean turnover and their removals' mean position."""
    if len(profile.count) == 0:
        return 0.0
    if profile.turnover_sum is None or associativity == 0 or associativity >= n_lines:
        return expected_hits(profile, associativity, n_lines)
    turn, position, moving = profile.path_sums()
    d = profile.mean_distance()
    still = hit_probability(d, associativity, n_lines)
    mean_k = turn / np.maximum(moving, 1)
    moved = hit_probability_with_turnover(d, mean_k, associativity, n_lines, positions=profile.mean_position())
    return float(np.dot(profile.count - moving, still) + np.dot(moving, moved))


class Path(NamedTuple):
    """Gaps' paths: arrivals D + K, removals K and their position u, one entry per gap."""

    arrivals: np.ndarray
    removals: np.ndarray
    position: np.ndarray


def removed_by(position: np.ndarray, share: np.ndarray) -> np.ndarray:
    """Share of a gap's removals made once `share` of its arrivals came: spread evenly over [0, 2u] or
    [2u - 1, 1] (module docstring)."""
    lo = np.where(position <= 0.5, 0.0, 2.0 * position - 1.0)
    width = np.maximum(np.where(position <= 0.5, 2.0 * position, 2.0 - 2.0 * position), 1e-12)
    return ((share - lo) / width).clip(0.0, 1.0)


def _eviction(path: Path, ways: int, q: float, segments: int) -> np.ndarray:
    """P(the set count reaches `ways` on the path) for each gap, all at once. Each step is the removals due
    by its middle, its arrivals, the rest (symmetric: the error falls as 1 / segments^2)."""
    arrivals = np.rint(path.arrivals)
    state = np.zeros((len(arrivals), ways + 1))  # c = 0..ways-1, and evicted
    state[:, 0] = 1.0
    above = np.zeros(len(arrivals))
    steps = np.arange(2 * segments + 1) / (2 * segments)
    came = np.rint(np.outer(arrivals, steps[::2]))
    left = np.rint(path.removals[:, None] * removed_by(path.position[:, None], steps[None, :]))
    for s in range(segments):
        for half in (2 * s, 2 * s + 1):
            r = left[:, half + 1] - left[:, half]
            state = _leave(state, np.divide(r, above, out=np.zeros_like(r), where=above > 0).clip(0.0, 1.0))
            above -= r
            if half == 2 * s:
                a = came[:, s + 1] - came[:, s]
                state = _arrive(state, a, q)
                above += a
    return state[:, ways]


def _arrive(state: np.ndarray, arrivals: np.ndarray, q: float) -> np.ndarray:
    """Each of `arrivals` lines joins the set with probability q; reaching the last state evicts."""
    ways = state.shape[1] - 1
    c = np.arange(ways + 1)
    pmf = binom.pmf(np.arange(ways + 1)[None, :], arrivals[:, None], q)  # [entry, joined]
    step = c[None, :] - c[:, None]  # c' - c
    move = np.where((step >= 0) & (c[None, :] < ways), pmf[:, np.clip(step, 0, ways)], 0.0)  # [entry, c, c']
    move[:, :, ways] = np.clip(1.0 - move[:, :, :ways].sum(axis=2), 0.0, 1.0)
    move[:, ways, :] = 0.0
    move[:, ways, ways] = 1.0
    return np.einsum("ec,ecd->ed", state, move)


def _leave(state: np.ndarray, share: np.ndarray) -> np.ndarray:
    """A `share` of the lines above leaves: each of the set's c with that probability (binomial thinning)."""
    ways = state.shape[1] - 1
    c = np.arange(ways)
    gone = c[:, None] - c[None, :]  # c - c'
    ok = gone >= 0
    g = np.where(ok, gone, 0)
    p = share[:, None, None]
    move = np.where(ok, comb(c[:, None], g) * p ** g * (1.0 - p) ** (c[:, None] - g), 0.0)  # [entry, c, c']
    out = np.empty_like(state)
    out[:, :ways] = np.einsum("ec,ecd->ed", state[:, :ways], move)
    out[:, ways] = state[:, ways]
    return out
