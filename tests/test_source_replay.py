"""Replay of periodic stretches in source sampling (analysis/sampling/shards/replay.py): the profiles must be bit for bit
those of feeding every copy (rate 1: the exact ProfileSet, the independent oracle; below rate 1: the sampler with
replay off), and copies must actually be skipped."""
from __future__ import annotations

import numpy as np
import pytest

from analysis.sampling.shards import replay as R
from analysis.sampling import source as SS
from analysis.sampling.source_rows import Picker
from analysis.profiles.private_traces import CoreMap
from instrument.trace_types import NO_LOOP, SCHED_DYNAMIC, SCHED_STATIC, BlockInfo, LoopInstance, TraceInfo
from test_private_traces import chunker
from test_source_sampling import exact_set, same, source_set
from tracerows import chunk_from_rows

CORES = [1, 2, 3, 4, 16]


def periodic_trace(seed: int, steps: int, n_iters: int, schedule: int, chunk: int = 0, odd_step: int = -1):
    """`steps` equal time steps of two work-shared loops (and replicated rows between them): the same addresses,
    stores and stack flags every step, except step odd_step, whose second loop touches other lines."""
    rng = np.random.default_rng(seed)
    blocks = {0: BlockInfo(0, "OUT__1", "entry", False), 1: BlockInfo(1, "OUT__1", "for.body", False)}
    body = []
    for lp in range(2):
        head = [(0x7FF000 - 64 * int(rng.integers(0, 2)), bool(rng.random() < 0.5), True) for _ in range(2)]
        iters = [[(0x7FF000 - 64 * int(rng.integers(0, 3)), bool(rng.random() < 0.3), True)
                  if rng.random() < 0.15 else
                  (0x100000 + 64 * int(rng.integers(0, 60)) + int(rng.integers(0, 64)), bool(rng.random() < 0.3),
                   False) for _ in range(3)] for _ in range(n_iters)]
        body.append((head, iters))
    rows, loop_table, inst = [], [], {0: -1, 1: -1}
    for step in range(steps):
        for lp, (head, iters) in enumerate(body):
            for addr, store, stack in head:
                inst[0] += 1
                rows.append((addr, store, 0, inst[0], NO_LOOP, -1, stack))
            loop_table.append(LoopInstance(len(loop_table), lp, n_iters, schedule, chunk))
            for it, accesses in enumerate(iters):
                inst[1] += 1
                for addr, store, stack in accesses:
                    moved = 4096 if step == odd_step and lp == 1 and not stack else 0
                    rows.append((addr + moved, store, 1, inst[1], len(loop_table) - 1, it, stack))
    ch = chunk_from_rows(rows)
    info = TraceInfo("periodic.trace", 1, "prog", [], True, len(ch), blocks, {b: n + 1 for b, n in inst.items()},
                     loops=loop_table)
    return info, ch


@pytest.fixture
def replays(monkeypatch):
    """Every ShardsReplay made while the test runs (copies of one period each, however short)."""
    monkeypatch.setattr(R, "MIN_COPY_ROWS", 1)
    made = []
    init = R.ShardsReplay.__init__

    def record(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(R.ShardsReplay, "__init__", record)
    return made


@pytest.mark.parametrize("schedule,chunk", [(SCHED_STATIC, 0), (SCHED_DYNAMIC, 2)])
@pytest.mark.parametrize("k", [1, 2])  # each core's step (a multiple of k) is a whole number of turns
@pytest.mark.parametrize("coherence", [True, False])
@pytest.mark.parametrize("odd_step", [-1, 6])
@pytest.mark.parametrize("rows", [97, 5000])
def test_full_rate_replay_equals_exact_profile_set(replays, schedule, chunk, k, coherence, odd_step, rows):
    """Rate 1 with replay: every PRD and CRD (coherence misses included) is the exact engine's, bit for bit, and
    every core count whose cores split a period evenly skipped copies (after a differing step too)."""
    info, ch = periodic_trace(5, 14, 12, schedule, chunk, odd_step)
    factory = chunker(ch, rows)
    got = source_set(info, factory, CORES, "iteration", k, coherence, SS.SourceSampling(1.0, seed=3))
    want = exact_set(info, factory, CORES, "iteration", k, coherence)
    assert [key for key in want if not same(got[key], want[key])] == []
    # 12 iterations split evenly on 1-4 cores (not 16); dynamic chunks of 2: 6 chunks, not on 4 cores either
    assert sorted(r.shards.p for r in replays) == ([1, 2, 3, 4] if schedule == SCHED_STATIC else [1, 2, 3])
    assert all(r.skipped >= (5 if odd_step >= 0 else 9) for r in replays)


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("rows", [131, 1 << 16])
def test_sampled_replay_equals_feeding_every_copy(replays, monkeypatch, k, rows):
    """Below rate 1, with private and shared windows: replay on and off give the same profiles, bit for bit."""
    info, ch = periodic_trace(8, 40, 24, SCHED_STATIC, 0, odd_step=20)
    sampling = SS.SourceSampling(0.5, 2, window=16, length=8)
    got = source_set(info, chunker(ch, rows), CORES, "iteration", k, True, sampling)
    assert replays and all(r.skipped > 0 for r in replays)
    monkeypatch.setattr(SS, "REPLAY", False)
    want = source_set(info, chunker(ch, rows), CORES, "iteration", k, True, sampling)
    assert [key for key in want if not same(got[key], want[key])] == []


def test_copies_repeat_whatever_the_batches():
    """CopyBuffer cuts copies at the loop instances that are multiples of the period, joins runs a batch boundary
    split, and finds the same copies and repeats for any batch size."""
    info, ch = periodic_trace(3, 9, 10, SCHED_STATIC, 0, odd_step=4)
    sampling = SS.SourceSampling(0.4, 1)
    picker = Picker(sampling.salt, sampling.threshold, "iteration", 6, CoreMap(info, 1, "iteration", 0), info.path)
    found = []
    for rows in (7, 100, 1 << 16):
        buf = R.CopyBuffer(2, min_rows=1)
        done = [c for part in chunker(ch, rows)() for c in buf.add(picker.rows(part))] + buf.finish()
        found.append([(c.inst0, int(c.starts[-1]), len(c.sel), len(c.key0), s) for c, s in done])
    assert found[0] == found[1] == found[2]
    # the rows before loop instance 0, then steps 0-8 (each with the next step's rows before its first loop):
    # step 4 differs from step 3 and step 5 from step 4; the last lacks the rows of a next step
    assert [s for *_, s in found[0]] == [False, False, True, True, True, False, False, True, True, False]
    assert [c[0] for c in found[0]] == [-1] + list(range(0, 18, 2))


def test_even_split():
    """A period splits evenly when every core gets as many iterations (248 rows: not on 16 cores)."""
    for trip, p, want in ((248, 8, True), (248, 16, False), (10, 3, False), (12, 3, True)):
        loops = [LoopInstance(i, 0, trip, SCHED_STATIC, 0) for i in range(6)]
        info = TraceInfo("t", 1, "prog", [], True, 0, {}, {}, loops=loops)
        assert R.even_split(CoreMap(info, p, "iteration", 0), 1) is want


def test_short_periods_are_taken_several_at_a_time(replays, monkeypatch):
    """Copies of at least MIN_COPY_ROWS rows: several periods each, still repeating (rate 1: the exact profiles,
    copies skipped), and the buffer's copies hold whole periods."""
    info, ch = periodic_trace(6, 30, 12, SCHED_STATIC, 0)
    period_rows = len(ch) // 30
    monkeypatch.setattr(R, "MIN_COPY_ROWS", 3 * period_rows)
    factory = chunker(ch, 1000)
    got = source_set(info, factory, [1, 2, 4], "iteration", 1, True, SS.SourceSampling(1.0, seed=3))
    want = exact_set(info, factory, [1, 2, 4], "iteration", 1, True)
    assert [key for key in want if not same(got[key], want[key])] == []
    assert replays and all(r.skipped >= 3 for r in replays)
    sampling = SS.SourceSampling(1.0, 1)
    picker = Picker(sampling.salt, sampling.threshold, "iteration", 6, CoreMap(info, 1, "iteration", 0), info.path)
    buf = R.CopyBuffer(2)
    done = [c for part in factory() for c in buf.add(picker.rows(part))] + buf.finish()
    # a copy ends at the first period start where it has MIN_COPY_ROWS rows: 3 periods of 2 instances each
    assert [c.inst1 - c.inst0 for c, _ in done[1:-1]] == [6] * (len(done) - 2)
