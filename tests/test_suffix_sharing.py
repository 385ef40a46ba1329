"""Private traces that follow another's accesses (analysis.profiles.suffixes.Suffixes): same profiles as the plain path."""
from __future__ import annotations

import numpy as np
import pytest

from analysis.profiles.suffixes import Suffix, run_within
from analysis.profiles.sweep import compute_profiles_from
from instrument.trace_types import NO_LOOP, SCHED_STATIC, BlockInfo, LoopInstance, TraceInfo
from test_coherence import plain_coherent_profiles, same
from test_private_traces import chunker
from test_profiles import straightforward_profiles
from tracerows import chunk_from_rows


def loop_trace(seed: int, trips: list[int], stack_in_loop: bool):
    """Replicated head rows (a stack line, a shared variable), then one static loop per trip count
    whose iterations touch a few lines of a pool (stores among them), the head's lines now and then,
    and the shared variable's line from its own block too (in paper mode that block takes no offset,
    the loop body's does: one line, two line ids on cores other than 0)."""
    rng = np.random.default_rng(seed)
    blocks = {0: BlockInfo(0, "OUT__1", "entry", False), 1: BlockInfo(1, "OUT__1", "shared_var_trace1", True),
              2: BlockInfo(2, "OUT__1", "for.body", False)}
    rows, loops, inst = [], [], {0: -1, 1: -1, 2: -1}
    for lp, trip in enumerate(trips):
        for b, addr, stack in ((0, 0x7FF000, True), (1, 0x200000, False)):
            inst[b] += 1
            rows.append((addr, False, b, inst[b], NO_LOOP, -1, stack))
        loops.append(LoopInstance(lp, 0, trip, SCHED_STATIC, 0))
        for it in range(trip):
            inst[2] += 1
            for _ in range(int(rng.integers(1, 6))):
                r = rng.random()
                stack = stack_in_loop and r < 0.1
                addr = 0x7FF000 if stack else (0x200000 if r < 0.2 else 0x100000 + 64 * int(rng.integers(0, 40)))
                rows.append((addr, bool(rng.random() < 0.2), 2, inst[2], lp, it, stack))
            if rng.random() < 0.3:
                inst[1] += 1
                rows.append((0x200000, False, 1, inst[1], lp, it, False))
    chunk = chunk_from_rows(rows)
    counts = {b: n + 1 for b, n in inst.items()}
    return TraceInfo("synthetic.trace", 1, "prog", [], True, len(chunk), blocks, counts, loops=loops), chunk


def counting(monkeypatch) -> dict[str, int]:
    """Count Suffix.follow and Suffix.materialise calls."""
    calls = {"follow": 0, "materialise": 0}
    for name in calls:
        original = getattr(Suffix, name)

        def counted(self, *args, _original=original, _name=name):
            calls[_name] += 1
            return _original(self, *args)
        monkeypatch.setattr(Suffix, name, counted)
    return calls


@pytest.mark.parametrize("trips,stack_in_loop", [([64], False), ([64], True), ([48, 80, 48], False),
                                                 ([40, 40], True)])
@pytest.mark.parametrize("rows", [7, 37, 200])
@pytest.mark.parametrize("cores", [[1, 2, 3, 4, 8, 16], [2, 4, 8]])
@pytest.mark.parametrize("mode", ["iteration", "paper"])
def test_following_traces_match_the_plain_path(monkeypatch, trips, stack_in_loop, rows, cores, mode):
    """Every PRD and CRD equals the plain path's, with and without coherence, round robin and random."""
    info, ch = loop_trace(sum(trips) + rows, trips, stack_in_loop)
    calls = counting(monkeypatch)
    for interleave in ("rr", "random"):
        plain = compute_profiles_from(info, chunker(ch, rows), cores, mode, interleave, seed=5, coherence=False)
        ref = straightforward_profiles(info, chunker(ch, 53), cores, mode, interleave, 5, 1)
        coherent = compute_profiles_from(info, chunker(ch, rows), cores, mode, interleave, seed=5)
        for p in cores:
            assert same(plain.crd[p], ref[p][1]) and same(coherent.crd[p], ref[p][1])
            assert all(same(plain.prd[(p, c)], ref[p][0][c]) for c in range(p))
            if p > 1:
                want = plain_coherent_profiles(info, ch, p, mode, interleave, 5, 1)
                assert all(same(coherent.prd[(p, c)], want[c]) and coherent.prd[(p, c)].coherence == want[c].coherence
                           for c in range(p))
    if rows < 200:  # (chunks longer than a loop can hold no run of a lead's rows)
        assert calls["follow"] > 0
    if mode == "iteration" and len(set(trips)) > 1 and rows < 200:
        assert calls["materialise"] > 0  # loops of other trip counts end the following


def testrun_within():
    """Where one core's runs lie among another's rows."""
    lengths = np.array([3, 1, 4, 1, 5])
    outer = np.array([True, True, False, True, True])
    assert run_within(np.array([False, True, False, True, False]), outer, lengths) == (3, 5)
    assert run_within(np.array([True, False, False, False, False]), outer, lengths) == (0, 7)
    assert run_within(np.array([True, False, False, True, False]), outer, lengths) is None  # broken
    assert run_within(np.array([False, False, True, False, False]), outer, lengths) is None  # not outer's
    assert run_within(np.zeros(5, dtype=bool), outer, lengths) is None


def test_followers_within_a_small_memory_budget_stop_and_stay_exact(monkeypatch):
    """A budget too small for the kept references stops followers (their engines are made): same profiles."""
    from analysis.profiles.sweep import SweepSettings, profile_configs

    info, ch = loop_trace(3, [64], False)
    calls = counting(monkeypatch)
    args = (info, chunker(ch, 7), [1, 2, 4, 8], SweepSettings("iteration", "rr", 0, 1, 64))
    small = profile_configs(*args, memory_budget=8 * 40)
    assert calls["materialise"] > 0
    big = profile_configs(*args)
    for (prd_a, crd_a, *_), (prd_b, crd_b, *_) in zip(small, big):
        assert same(crd_a, crd_b) and all(same(a, b) and a.coherence == b.coherence for a, b in zip(prd_a, prd_b))
