"""Kernels for traces that follow another's distances instead of an engine pass: a private
trace's unbroken stretches of the one-core trace (`plan_runs`, for ReuseEngine.feed_runs),
and a private trace that repeats another's accesses from some point on (`suffix_scan`,
`suffix_firsts`, for analysis/profiles/suffixes.py). Histograms are laid out as the engine's
(analysis/profiles/kernel_ops.py: the last slot counts cold misses)."""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from analysis.profiles.core_parts import add_offsets
from analysis.profiles.kernel_ops import add_to_bin

RUN_SHARE = 0.7  # feed_runs: a segment's first and last touches replace it when they are at most this share of it


class LeadTrace(NamedTuple):
    """A trace's accesses as another follows them (ReuseEngine.feed_runs): each access's distance
    (int32, -1 cold) and the positions of the previous and next access to its line (int32, -1
    and len when there is none; line_index.LineIndex.number)."""

    distances: np.ndarray
    prev: np.ndarray
    next: np.ndarray


class RunSegments(NamedTuple):
    """A part's accesses as segments of the lead trace: segment s is the part's accesses
    breaks[s]..breaks[s+1], the lead's rows rows[s].., with line ids src[at[s]..] (plus offset
    at src's rows offrows, sorted; none when offset is 0)."""

    src: np.ndarray
    at: np.ndarray
    offrows: np.ndarray
    offset: np.uint64
    rows: np.ndarray
    breaks: np.ndarray


class RunPlan(NamedTuple):
    """What plan_runs writes: the ids to feed and their places (see plan_runs), the
    distances it knows, and its scratch for a segment's last touches (ids, positions)."""

    lines: np.ndarray
    pos: np.ndarray
    dist: np.ndarray
    lasts: np.ndarray
    last_at: np.ndarray


@numba.njit(cache=True, nogil=True, _nrt=False)
def add_count(d, n, hist, hist_sum):
    """Add n accesses (n < 0: take -n off) at distance d >= 0 to a histogram laid out as the
    engine's (none for n = 0).
    _nrt=False: no reference counts (as the trace decoder's per-row helpers, instrument/decode_kernel.py)."""
    if n == 0:
        return
    add_to_bin(d, n, hist, hist_sum)


@numba.njit(cache=True, nogil=True, inline="always")
def count(d, hist, hist_sum):
    """Add one distance (-1: cold) to a histogram laid out as the engine's."""
    if d < 0:
        hist[hist.shape[0] - 1] += 1
    else:
        add_count(d, 1, hist, hist_sum)


@numba.njit(cache=True, nogil=True)
def suffix_scan(lead, seen, out, first, hist, hist_sum):
    """Distances of a trace whose accesses since some point are those of another trace (the
    lead's distances given): an access whose lead distance is below the number of lines
    touched since that point (seen, counted here) reused a line touched since then, at that
    distance; the others are first touches since then, listed in first (their count returned)."""
    m = 0
    for i in range(lead.shape[0]):
        d = lead[i]
        if d >= 0 and d < seen:
            out[i] = d
            count(d, hist, hist_sum)
        else:
            first[m] = i
            m += 1
            seen += 1
    return m


@numba.njit(cache=True, nogil=True)
def suffix_firsts(first, held, ahead, seen, known, out, hist, hist_sum):
    """Distances of the first touches found by suffix_scan: cold unless the engine held the
    line before; then the lines touched since (seen, plus one per first touch before it) and
    the held lines above it not touched since (ahead: its distance in a copy of the engine fed
    only the held first touches, minus those fed before it, known)."""
    h = 0
    cold = hist.shape[0] - 1
    for x in range(first.shape[0]):
        if held[x]:
            d = seen + x + ahead[h] - (known + h)
            h += 1
            out[first[x]] = d
            count(d, hist, hist_sum)
        else:  # a branch of its own: with one count for both the loop ran 10x slower
            out[first[x]] = -1
            hist[cold] += 1


@numba.njit(cache=True, nogil=True, _nrt=False)
def plan_runs(seg, lead, plan, hist, hist_sum):
    """What the engine must be fed for feed_runs, segment by segment (seg: RunSegments, lead:
    LeadTrace, plan: RunPlan); returns how many.

    A segment whose first touches (no previous access in it: prev below its first row) and
    last touches (next access beyond it) together are at most RUN_SHARE of it is fed as its
    first touches, counted (plan.pos = their index in the part, where the engine writes their
    distance in plan.dist), then its last touches in order, which the engine retimes
    (plan.pos = j - g for the j-th of g); its other accesses reuse a line touched in it, and
    are counted here at their lead distance (also written to dist). Any other segment is fed
    whole. One pass over a segment (the last touches wait in plan.lasts); the reuses of a
    segment that is fed whole after all are taken off the histogram again.
    _nrt=False: no reference counts for the inlined helpers' arrays (it allocates nothing)."""
    m = 0
    j = 0
    offs = seg.offrows[:seg.offrows.shape[0] if seg.offset else 0]
    for s in range(seg.breaks.shape[0] - 1):
        n = seg.breaks[s + 1] - seg.breaks[s]
        sa = seg.at[s]
        if j < offs.shape[0] and offs[j] < sa:  # other cores' offset rows lie between: skip by bisection
            j += np.searchsorted(offs[j:], sa)
        j0 = j
        f, g = _scan_segment(seg, s, m, lead, plan, hist, hist_sum)
        j = _offset_firsts_and_lasts(seg, s, offs, j, (m, f, g), lead, plan)
        if f - m + g <= RUN_SHARE * n:
            _append_lasts(plan, f, g)
            m = f + g
            continue
        _uncount_reuses(seg, s, lead, hist, hist_sum)  # fed whole after all
        _copy_whole(seg, s, offs, j0, m, plan)
        m += n
    return m


@numba.njit(cache=True, nogil=True, inline="always")
def _scan_segment(seg, s, m, lead, plan, hist, hist_sum):
    """Segment s's first touches to plan.lines from m on, its last touches to plan.lasts, its
    reuses counted at their lead distance; (the end of its first touches, its last touches)."""
    f0 = seg.breaks[s]
    n = seg.breaks[s + 1] - f0
    a = seg.rows[s]
    b = a + n
    sa = seg.at[s]
    src, (dist, prev, nxt), (lines, pos, known, lasts, last_at) = seg.src, lead, plan
    f = m
    g = 0
    run_d = -1  # reuses at one distance are counted in registers, then added at once: a
    run_n = 0   # column walk's reuses are mostly at one distance, and hist[d] += 1 each waits on the last
    for k in range(n):
        r = a + k
        d = dist[r]
        if prev[r] < a:
            lines[f] = src[sa + k]
            pos[f] = f0 + k
            f += 1
        else:
            known[f0 + k] = d
            if d == run_d:
                run_n += 1
            else:
                add_count(run_d, run_n, hist, hist_sum)
                run_d = d
                run_n = 1
        if nxt[r] >= b:
            lasts[g] = src[sa + k]
            last_at[g] = k
            g += 1
    add_count(run_d, run_n, hist, hist_sum)
    return f, g


@numba.njit(cache=True, nogil=True, inline="always")
def _offset_firsts_and_lasts(seg, s, offs, j, span, lead, plan):
    """Add the offset to segment s's first and last touches at offset rows (offs[j..]; span:
    where its first touches begin and end in plan.lines, and its last touches' count); the
    new j. Fixed afterwards: a check per access in the scan made it 20 % slower."""
    m, f, g = span
    n = seg.breaks[s + 1] - seg.breaks[s]
    f0 = seg.breaks[s]
    a = seg.rows[s]
    sa = seg.at[s]
    while j < offs.shape[0] and offs[j] < sa + n:
        k = offs[j] - sa
        if lead.prev[a + k] < a:
            plan.lines[m + np.searchsorted(plan.pos[m:f], f0 + k)] += seg.offset
        if lead.next[a + k] >= a + n:
            plan.lasts[np.searchsorted(plan.last_at[:g], k)] += seg.offset
        j += 1
    return j


@numba.njit(cache=True, nogil=True, inline="always")
def _append_lasts(plan, f, g):
    """The g last touches to plan.lines from f on; the x-th of them takes the time of the x-th
    first touch (plan.pos = x - g)."""
    lines, pos, lasts = plan.lines, plan.pos, plan.lasts
    for x in range(g):  # two loops, each of one store stream, vectorise
        lines[f + x] = lasts[x]
    for x in range(g):
        pos[f + x] = x - g


@numba.njit(cache=True, nogil=True, inline="always")
def _uncount_reuses(seg, s, lead, hist, hist_sum):
    """Take segment s's reuses (counted by _scan_segment) off the histogram again."""
    a = seg.rows[s]
    for k in range(seg.breaks[s + 1] - seg.breaks[s]):
        r = a + k
        if lead.prev[r] >= a:
            add_count(lead.distances[r], -1, hist, hist_sum)


@numba.njit(cache=True, nogil=True, inline="always")
def _copy_whole(seg, s, offs, j0, m, plan):
    """Segment s's accesses, all of them, to plan.lines from m on (offsets added from offs[j0..])."""
    f0 = seg.breaks[s]
    n = seg.breaks[s + 1] - f0
    sa = seg.at[s]
    lines, pos, src = plan.lines, plan.pos, seg.src
    for k in range(n):  # two loops, each of one store stream, vectorise (a slice copy would need numba's NRT)
        lines[m + k] = src[sa + k]
    for k in range(n):
        pos[m + k] = f0 + k
    add_offsets(plan.lines, m, (1, 1, 0), sa, n, offs, j0, seg.offset)
