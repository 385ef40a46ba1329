"""Source sampling's memory (analysis/sampling/shards/queues.py, memory.py): the block-pool queues of the round-robin merge
against per-core deques and a brute-force merge, through spills to disk; spilling changes no profile (rate 1
still equals the exact ProfileSet); the check before a pass refuses what does not fit, naming the options."""
from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from fake_source import fake_source_traces  # noqa: F401 (fixture)
from test_private_traces import chunker
from test_source_sampling import brute_shared_windows, exact_set, random_trace, same

from analysis.profiles.handouts import chunk_costs
from analysis.profiles.reuse import ReuseEngine
from analysis.sampling import memory as M
from analysis.sampling.shards import queues as Q
from analysis.sampling.near import shared_windows as SW
from analysis.sampling import source as SS
from analysis.sampling import source_rows as SR
from analysis.sampling.shards.shards_kernel import PairBatch, ShardsStreams, rr_key
from analysis.sampling.shards.stacks import DONE, GROW_QUEUE, LOAD_QUEUE
from common.errors import InputError
from instrument.trace_types import SCHED_DYNAMIC, SCHED_STATIC


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pool_queues_are_fifos_through_spills(seed):
    """Random pushes to and pops from p queues of 4-pair blocks, with a one-block budget and spills at random
    points: every pop returns what a per-core deque does, and the blocks in use are the queues' blocks."""
    rng = np.random.default_rng(seed)
    p = 3
    pool = Q.QueuePool(p, 4 * 32, block=4)
    want = [deque() for _ in range(p)]
    for step in range(6000):
        c = int(rng.integers(0, p))
        if rng.random() < 0.55:
            while (status := Q.q_room(pool.arrays(), c)) != DONE:
                assert status == GROW_QUEUE
                pool.make_room()
            pair = (step, step * 7 + c, step % 11, -step)
            Q.q_push(pool.arrays(), c, np.int64(pair[0]), np.uint64(pair[1]), np.int64(pair[2]), np.int64(pair[3]))
            want[c].append(pair)
        elif want[c]:
            qs = pool.arrays()
            b, i = int(qs.ctl[c, Q.HB]), int(qs.ctl[c, Q.HI])
            got = (int(qs.pos[b, i]), int(qs.line[b, i]), int(qs.dist[b, i]), int(qs.gap[b, i]))
            assert got == want[c].popleft()
            if Q.q_advance(qs, c) == LOAD_QUEUE:
                pool.load()
        if rng.random() < 0.05:
            pool.spill()
        assert pool.idle() == (not any(want))
    assert pool.spilled > 0
    for c in range(p):  # the rest, in order; then every block is free and no spill file is left
        while want[c]:
            qs = pool.arrays()
            b, i = int(qs.ctl[c, Q.HB]), int(qs.ctl[c, Q.HI])
            assert int(qs.line[b, i]) == want[c].popleft()[1]
            if Q.q_advance(qs, c) == LOAD_QUEUE:
                pool.load()
    assert pool.idle() and int(pool.free[1]) == 0 and pool.files == [None] * p


def _count_spills(monkeypatch) -> list[int]:
    """The blocks each QueuePool.spill call writes, in a list that fills as they run."""
    spilled: list[int] = []
    real = Q.QueuePool.spill

    def counting(pool):
        spilled.append(real(pool))
        return spilled[-1]

    monkeypatch.setattr(Q.QueuePool, "spill", counting)
    return spilled


def _recorder():
    """A ShardsStreams sink that keeps every logged sample's core and line, in log order."""
    class Sink:
        def __init__(self):
            self.core, self.line = [], []

        def drain(self, log):
            n = int(log.n[0])
            self.core += log.core[:n].tolist()
            self.line += log.line[:n].tolist()
    return Sink()


@pytest.mark.parametrize("p,k", [(2, 1), (4, 3), (5, 2)])
def test_merge_with_spills_matches_brute_force(monkeypatch, p, k):
    """Pairs of a static-schedule-like trace (each core's runs in turn, so core 0's pairs wait for the last
    core's), merged through 8-pair blocks with a budget of one block: the samples come out in the round-robin
    key order of a brute-force sort, and the shared stack's profile is the exact engine's on that order."""
    monkeypatch.setattr(Q, "BLOCK", 8)
    rng = np.random.default_rng(p * 10 + k)
    sink = _recorder()
    s = ShardsStreams(p, k, False, False, 0, False, 0, (sink,), budget=8 * 32)
    counters = np.zeros(p, np.int64)
    per_core: list[list[tuple[int, int]]] = [[] for _ in range(p)]
    for batch in range(6):
        n = 900
        run_core = np.arange(p, dtype=np.int64)  # one run per core, core 0 first
        starts = np.append(np.sort(rng.choice(np.arange(1, n), p - 1, replace=False)), [0, n])
        starts = np.sort(starts).astype(np.int64)
        sel = np.sort(rng.choice(n, 300, replace=False)).astype(np.int64)
        lines = rng.integers(0, 60, sel.shape[0]).astype(np.uint64)
        for j, row in enumerate(sel.tolist()):
            c = int(np.searchsorted(starts, row, side="right")) - 1
            per_core[c].append((int(counters[c]) + row - int(starts[c]), int(lines[j])))
        zeros = np.zeros(sel.shape[0], bool)
        s.feed(PairBatch(sel, lines, zeros, zeros, starts, run_core, np.uint64(30)), counters)
    s.release(None)
    assert s.pool.spilled > 0 and s.idle()
    order = sorted((int(rr_key(q, c, p, k)), c, x) for c in range(p) for q, x in per_core[c])
    assert sink.core == [c for _, c, _ in order] and sink.line == [x for _, _, x in order]
    e = ReuseEngine()
    e.feed(np.array([x for _, _, x in order], np.uint64))
    assert same(s.shared.profile(0), e.histogram())


@pytest.mark.parametrize("schedule", [SCHED_STATIC, SCHED_DYNAMIC])
@pytest.mark.parametrize("k", [1, 3])
def test_full_rate_with_spills_equals_exact(monkeypatch, schedule, k):
    """At rate 1, with 16-pair blocks and a budget of a few blocks (the waiting samples spill and come back
    many times), the profiles still equal the exact ProfileSet bit for bit."""
    monkeypatch.setattr(Q, "BLOCK", 16)
    info, ch = random_trace(5, 300, True, schedule)
    factory = chunker(ch, 257)
    cores = [1, 2, 3, 4, 8]
    sampling = SS.SourceSampling(1.0, 0)
    spilled = _count_spills(monkeypatch)
    res = SS.source_profiles(info, factory(), cores, sampling, "iteration", k, 64, 0, True, memory_budget=2048,
                             costs=chunk_costs(info, factory, "iteration"))
    got = {}
    for p, (prd, crd) in zip(cores, res):
        got.update({("prd", p, c): x for c, x in enumerate(prd)})
        got[("crd", p, -1)] = crd
    want = exact_set(info, factory, cores, "iteration", k, True)
    assert sum(spilled) > 0
    assert got.keys() == want.keys() and all(same(got[key], want[key]) for key in want)


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_sampled_profiles_do_not_depend_on_the_budget(monkeypatch, seed):
    """Below rate 1 (windows, coherence, replicated accesses), a budget that spills at every block gives the
    same profiles as one that never spills: the pairs come back unchanged."""
    monkeypatch.setattr(Q, "BLOCK", 16)
    info, ch = random_trace(seed, 400, True, SCHED_STATIC)
    factory = chunker(ch, 333)
    sampling = SS.SourceSampling(0.3, seed, window=40, length=16)
    cores = [1, 2, 4, 8]
    spilled = _count_spills(monkeypatch)
    small = SS.source_profiles(info, factory(), cores, sampling, "iteration", 1, 64, 0, True, memory_budget=1024)
    large = SS.source_profiles(info, factory(), cores, sampling, "iteration", 1, 64, 0, True, memory_budget=1 << 30)
    for (prd_a, crd_a), (prd_b, crd_b) in zip(small, large):
        assert all(same(a, b) for a, b in zip(prd_a, prd_b)) and same(crd_a, crd_b)
    assert sum(spilled) > 0


def _count_ring_spills(monkeypatch) -> list[int]:
    """The records each SharedWindows._flush call writes (a list that fills as they run)."""
    flushed: list[int] = []
    real = SW.SharedWindows._flush

    def counting(ring):
        before = ring.spilled
        real(ring)
        flushed.append(ring.spilled - before)

    monkeypatch.setattr(SW.SharedWindows, "_flush", counting)
    return flushed


@pytest.mark.parametrize("p,k", [(2, 1), (3, 2), (4, 1)])
@pytest.mark.parametrize("words", [64, 700])
def test_spilled_shared_windows_match_brute_force(monkeypatch, p, k, words):
    """A static schedule (every shared segment waits for the last core) with shared windows as dense as the
    private ones, a ring of 4 slots and a stage of `words` rows (many small frames, or frames straddling the
    slots' window): the shared window tallies equal a row-by-row walk over the real Interleaver's shared trace,
    and the ring did spill."""
    from analysis.profiles.private_traces import CoreMap, line_shift

    monkeypatch.setattr(SS, "SHARED_WINDOW_SPACING", 1)
    monkeypatch.setattr(SW, "STAGE_WORDS", words)
    spills = _count_ring_spills(monkeypatch)
    info, ch = random_trace(p * 7 + k, 160, True, SCHED_STATIC, n_loops=3)
    sampling = SS.SourceSampling(0.2, seed=p, window=12, length=8)
    task = SS.SourceTask(CoreMap(info, p, "iteration", 0), 6, k, True, sampling, budget=64)
    s_offset = int(task.s_next[0])
    picker = SR.Picker(sampling.salt, sampling.threshold, "iteration", 6, task.cmap, info.path)
    for piece in chunker(ch, 37)():
        task.feed(picker.rows(piece))
    task.finish(sampling)
    assert sum(spills) > 0 and task.s_pool.buf.shape[0] == 4 and task.s_pool.files == [None] * p
    private = [x.copy() for x in CoreMap(info, p, "iteration").split(ch, line_shift(64))]
    plain = [(x & ~np.uint64(1 << 63)).tolist() for x in private]
    want = brute_shared_windows(plain, k, s_offset, task)
    assert (task.s_est.near, task.s_est.n_far, task.s_est.n_measured) == want and want[2] > 0


@pytest.mark.parametrize("seed", [1, 4])
def test_ring_spills_change_no_profile(monkeypatch, seed):
    """Below rate 1 with set-class profiles and class CRDs, a budget whose ring part holds 4 slots (the shared
    segments of every core count p > 1 spill, through small frames) gives the same plain and class profiles as a
    budget that never spills."""
    monkeypatch.setattr(SW, "STAGE_WORDS", 96)
    info, ch = random_trace(seed, 500, True, SCHED_STATIC)
    factory = chunker(ch, 333)
    sampling = SS.SourceSampling(0.3, seed, window=40, length=16)
    cores = [1, 2, 4, 8]
    runs = []
    for budget, want_spills in ((4096, True), (1 << 30, False)):
        spills = _count_ring_spills(monkeypatch)
        classes = SS.ClassRequest((1, 3), True)
        res = SS.source_profiles(info, factory(), cores, sampling, "iteration", 1, 64, 0, True, classes=classes,
                                 memory_budget=budget)
        assert (sum(spills) > 0) == want_spills
        runs.append((res, classes.results))
    (small, small_cls), (large, large_cls) = runs
    for (prd_a, crd_a), (prd_b, crd_b) in zip(small, large):
        assert all(same(a, b) for a, b in zip(prd_a, prd_b)) and same(crd_a, crd_b)
    for b in small_cls:
        for (prd_a, crd_a), (prd_b, crd_b) in zip(small_cls[b], large_cls[b]):
            assert all(same(x, y) for x, y in zip(prd_a, prd_b)) and same(crd_a, crd_b)


def test_check_refuses_what_does_not_fit(monkeypatch, tmp_path, fake_source_traces, capsys):  # noqa: F811
    """With a tiny free-memory figure the check refuses before the pass, naming --sample-rate, --cores and the
    GiB needed and free; the CLI prints the message without a traceback. The worst case grows with the rate
    and the trace's accesses; the waiting samples stop at 3/4 of the budget, the shared window ring at twice its
    quarter (hand-computed: 2 core counts p > 1, 10^9 accesses, G + L = 3 L, 16 B per segment access)."""
    from pptmc import cli

    monkeypatch.setattr(M, "available_bytes", lambda: 1 << 20)
    with pytest.raises(InputError, match=r"--sample-rate 0\.3 with --cores 1,2,4 needs up to .* GiB.*0\.0 GiB is "
                                         r"free.*--sample-rate or fewer --cores"):
        M.check_sampled_memory("t.trace", 10**9, 10**6, [1, 2, 4], 0.3, 1024, 512, 1 << 30)
    a = M.sampled_bytes(10**9, 10**6, [1, 2, 4], 0.01, 1024, 512, 1 << 30)
    b = M.sampled_bytes(10**9, 10**6, [1, 2, 4], 0.1, 1024, 512, 1 << 30)
    assert a["shared window ring"] == 2 * 10**7 // 4 * 3 * 16 and b["shared window ring"] == 2 * (1 << 28)
    assert a["waiting samples"] == 2 * 10**7 * 32 and b["waiting samples"] == 3 << 28
    info, ch = random_trace(3, 30, True, SCHED_STATIC)
    trace = tmp_path / "mem.trace"
    trace.touch()
    fake_source_traces[str(trace)] = (info, ch.addr, ch.block, ch.block_instance)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["profile", str(trace), "--cores", "1,2", "--sample-rate", "0.1", "-o", str(tmp_path / "p")])
    err = capsys.readouterr().err
    assert exit_.value.code != 0 and "--sample-rate 0.1 with --cores 1,2" in err and "Traceback" not in err
    assert not (tmp_path / "p").exists()
