"""Barriers in the shared traces: no core's accesses after a barrier are interleaved before another core's
accesses before it (the threads wait there), against an independent phase-by-phase round robin, brute-force
coherent stacks, hand-computed coherence misses of a program, and the real run's own barriers."""
from __future__ import annotations

import numpy as np
import pytest

from analysis.profiles.barriers import PhaseMarks, thread_phases
from analysis.profiles.coherence import strip
from analysis.profiles.interleave import Interleaver, interleave_arrays
from analysis.profiles.reuse import ReuseEngine
from analysis.profiles.sweep import compute_profiles_from
from instrument.trace_types import (NO_LOOP, SCHED_BARRIER, SCHED_MASTER, SCHED_STATIC, BlockInfo, LoopInstance,
                                   TraceInfo)
from test_coherence import brute_coherent, private_tagged, profile_of, same
from test_private_traces import chunker
from tracerows import chunk_from_rows


def phased_round_robin(private: list[np.ndarray], barriers: np.ndarray, k: int) -> tuple[list[int], list[int]]:
    """Phase by phase, k references per turn from each core that has some left in the phase."""
    p = len(private)
    bounds = [np.zeros(p, dtype=int), *barriers, np.array([len(a) for a in private])]
    lines, cores = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        pos = np.array(lo)
        while (pos < hi).any():
            for c in range(p):
                n = int(min(k, hi[c] - pos[c]))
                if n > 0:
                    lines += private[c][pos[c]:pos[c] + n].tolist()
                    cores += [c] * n
                    pos[c] += n
    return lines, cores


def random_case(rng: np.random.Generator):
    """Per-core streams of random lengths and sorted barrier positions (some phases empty for some cores)."""
    p, k = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    lens = rng.integers(0, 30, size=p)
    private = [np.arange(1000 * c, 1000 * c + n, dtype=np.uint64) for c, n in enumerate(lens)]
    n_bar = int(rng.integers(0, 5))
    barriers = np.sort(np.stack([rng.integers(0, n + 1, size=n_bar) for n in lens], axis=1), axis=0) \
        if n_bar else np.zeros((0, p), dtype=np.int64)
    return private, barriers, k


@pytest.mark.parametrize("seed", range(6))
def test_round_robin_keeps_phases(seed):
    """Whole streams pushed at once: the phase-by-phase round robin, turn for turn."""
    rng = np.random.default_rng(seed)
    for _ in range(50):
        private, barriers, k = random_case(rng)
        lines, cores = interleave_arrays(private, "rr", 0, k, barriers=barriers)
        want_lines, want_cores = phased_round_robin(private, barriers, k)
        assert lines.tolist() == want_lines and cores.tolist() == want_cores, (private, barriers, k)


@pytest.mark.parametrize("seed", range(4))
def test_streamed_pushes_and_barriers_give_the_same_order(seed):
    """A sequential trace (each phase's references, core after core) read in chunks: each chunk's references
    pushed with the barriers that lie in it, and drained, as the sweep does, gives the whole-stream order."""
    rng = np.random.default_rng(100 + seed)
    for _ in range(40):
        private, barriers, k = random_case(rng)
        p = len(private)
        bounds = [np.zeros(p, dtype=np.int64), *barriers, np.array([len(a) for a in private])]
        rows = [(c, int(i)) for lo, hi in zip(bounds[:-1], bounds[1:]) for c in range(p) for i in range(lo[c], hi[c])]
        starts = np.cumsum([0] + [int((hi - lo).sum()) for lo, hi in zip(bounds[:-1], bounds[1:])])[1:-1]
        itl, got_lines, got_cores, done = Interleaver(p, "rr", 0, k), [], [], 0
        cuts = sorted({0, len(rows), *rng.integers(0, len(rows) + 1, size=4).tolist()})
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            for c in range(p):
                mine = [i for core, i in rows[lo:hi] if core == c]
                if mine:
                    itl.push(c, private[c][mine[0]:mine[-1] + 1])
            while done < len(starts) and starts[done] < hi:
                itl.barriers(barriers[done])
                done += 1
            for batch in itl.drain():
                got_lines += batch.lines.tolist()
                got_cores += batch.core.tolist()
        itl.barriers(barriers[done:])
        itl.close_all()
        for batch in itl.drain():
            got_lines += batch.lines.tolist()
            got_cores += batch.core.tolist()
        assert (got_lines, got_cores) == phased_round_robin(private, barriers, k)


def test_random_turns_keep_phases_and_program_order():
    rng = np.random.default_rng(7)
    for _ in range(100):
        private, barriers, k = random_case(rng)
        lines, cores = interleave_arrays(private, "random", 3, k, barriers=barriers)
        phase = np.zeros(len(lines), dtype=np.int64)
        for c, stream in enumerate(private):
            mine = np.flatnonzero(cores == c)
            assert lines[mine].tolist() == stream.tolist()
            if len(barriers):
                phase[mine] = np.searchsorted(barriers[:, c], np.arange(len(mine)), side="right")
        assert (np.diff(phase) >= 0).all()


def test_phase_marks_follow_barrier_records_across_chunks():
    """Loop instances 0 (barrier), 1 (loop), 2 (barrier), 3 (master), 4 (barrier): phases begin at the first
    row after instances 0, 2 and 4 (the rows in between, of a loop or outside any, carry no new phase)."""
    loops = [LoopInstance(0, -1, 1, SCHED_BARRIER, 0), LoopInstance(1, 5, 4, SCHED_STATIC, 0),
             LoopInstance(2, -1, 0, SCHED_BARRIER, 0), LoopInstance(3, 6, 1, SCHED_MASTER, 0),
             LoopInstance(4, -1, 0, SCHED_BARRIER, 0)]
    info = TraceInfo("t", 1, "prog", [], True, 0, {}, {}, loops=loops)
    loop = np.array([0, 0, 1, 1, NO_LOOP, 2, 3, 3, NO_LOOP, 4, 4])
    marks = PhaseMarks(info, "iteration")
    starts = np.arange(len(loop) + 1)  # one run per row
    found = [marks.runs(starts[:6], loop[:5]).tolist(), (marks.runs(starts[:7] , loop[5:]) + 5).tolist()]
    assert found == [[0], [5, 9]]
    assert not PhaseMarks(info, "paper").any


def test_thread_phases_number_each_threads_barriers_within_its_region():
    """Two threads whose records interleave in instance order; the second region starts over."""
    rec = [(1, 0), (1, 1), (0, 0), (0, 1), (0, 0), (0, 1), (1, 0), (1, 1), (0, 0)]  # (region start, thread)
    loops = [LoopInstance(i, -1, start, SCHED_BARRIER, thread) for i, (start, thread) in enumerate(rec)]
    loops.insert(4, LoopInstance(9, 3, 10, SCHED_STATIC, 0))
    info = TraceInfo("t", 2, "prog", [], True, 0, {}, {}, loops=loops)
    assert thread_phases(info).tolist() == [0, 0, 1, 1, 2, 2, 0, 0, 1, -1]


def barrier_trace(seed: int, rounds: int):
    """A region whose rounds are: a master section (core 0 reads a shared array), a barrier, a static loop
    (each core stores its part), a barrier: the threads' work is unequal in every phase."""
    rng = np.random.default_rng(seed)
    blocks = {0: BlockInfo(0, "OUT__1", "entry", False), 1: BlockInfo(1, "OUT__1", "shared_var_trace1", True),
              2: BlockInfo(2, "OUT__1", "body", False)}
    rows, loops, inst = [], [], {0: -1, 1: -1, 2: -1}

    def row(addr, store, block, lp, it, stack=False):
        inst[block] += 1
        rows.append((addr, store, block, inst[block], lp, it, stack))

    loops.append(LoopInstance(0, -1, 1, SCHED_BARRIER, 0))
    row(0x7FF000, True, 0, 0, -1, True)
    for _ in range(rounds):
        master = len(loops)
        loops.append(LoopInstance(master, 1, 1, SCHED_MASTER, 0))
        for _ in range(int(rng.integers(4, 20))):
            row(0x100000 + 64 * int(rng.integers(0, 8)), False, 2, master, 0)
        loops.append(LoopInstance(len(loops), -1, 0, SCHED_BARRIER, 0))
        if rng.random() < 0.5:  # an access between the barrier and the next construct: every core's
            row(0x200000, False, 1, len(loops) - 1, -1)
        work = len(loops)
        trip = int(rng.integers(2, 9))
        loops.append(LoopInstance(work, 2, trip, SCHED_STATIC, 0))
        for it in range(trip):
            row(0x100000 + 64 * int(rng.integers(0, 8)), bool(rng.random() < 0.7), 2, work, it)
        loops.append(LoopInstance(len(loops), -1, 0, SCHED_BARRIER, 0))
    chunk = chunk_from_rows(rows)
    info = TraceInfo("barriers.trace", 1, "prog", [], True, len(chunk), blocks, {b: n + 1 for b, n in inst.items()},
                     loops=loops)
    return info, chunk


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("chunk_rows", [7, 64])
def test_profiles_match_brute_force_with_barriers(seed, p, chunk_rows):
    """The sweep's PRDs (with coherence misses) and CRD equal brute-force stacks over the phase-by-phase
    round robin of the private traces, however the trace is chunked."""
    info, ch = barrier_trace(seed, 12)
    ps = compute_profiles_from(info, chunker(ch, chunk_rows), [1, p], "iteration", "rr")
    private = private_tagged(info, ch, p, "iteration")
    lines, cores = phased_round_robin(private, _barrier_counts(info, ch, p), 1)
    want = brute_coherent(lines, cores, p)
    for c in range(p):
        assert same(ps.prd[(p, c)], profile_of(want[c])), c
    plain = ReuseEngine()
    plain.feed(strip(np.array(lines, dtype=np.uint64)))
    assert same(ps.crd[p], plain.histogram())


def _barrier_counts(info: TraceInfo, ch, p: int) -> np.ndarray:
    """Each core's references before every barrier, counted row by row (independent of PhaseMarks)."""
    from analysis.profiles.private_traces import ALL_CORES, CoreMap

    where = CoreMap(info, p, "iteration").core_of(ch)
    barrier = {lp.instance for lp in info.loops if lp.schedule == SCHED_BARRIER}
    counts, out, top = np.zeros(p, dtype=np.int64), [], -1
    for i in range(len(ch)):
        now = max(top, int(ch.loop[i]))
        out += [counts.copy()] * sum(1 for b in barrier if top < b <= now)
        top = now
        if where[i] == ALL_CORES:
            counts += 1
        else:
            counts[where[i]] += 1
    return np.array(out, dtype=np.int64).reshape(-1, p)


HAND = r"""
#include <stdio.h>
#define N 64
#define K 10
static double a[N] __attribute__((aligned(64)));
static double s __attribute__((aligned(64)));
int main(void)
{
  int i, k;
#pragma omp parallel private(i, k)
  {
    for (k = 0; k < K; k++) {
#pragma omp master
      {
        double t = 0;
        for (i = 0; i < N; i++)
          t += a[i];
        s = t;
      }
#pragma omp barrier
#pragma omp for
      for (i = 0; i < N; i++)
        a[i] = s + i;
    }
  }
  printf("%f\n", a[N - 1] + s);
  return 0;
}
"""


def test_a_programs_coherence_misses_are_counted_at_its_barriers(tmp_path):
    """Each round, thread 0 alone reads all 8 lines of `a` (master), then after the barrier each of 2 threads
    stores its 4 lines of `a` after reading `s`, which the master stored. From the second round on, thread 0
    finds thread 1's 4 lines invalid and thread 1 finds `s` invalid: 4 (K - 1) = 36 and K - 1 = 9 coherence
    misses. Without the barriers thread 1, with far fewer accesses, ran ahead of thread 0's master sections.
    The real run's ground truth, merged at the original binary's own barriers, counts the same 45. Upgrades,
    the other way round: from the second round on, the master's store to `s`, which thread 1 read, and thread
    1's first store to each of its 4 lines, which the master read: K - 1 = 9 and 4 (K - 1) = 36."""
    from analysis.profiles.profileset import ProfileSet
    from pptmc.cli import run
    from pptmc.validation import validate_program

    (tmp_path / "hand.c").write_text(HAND)
    assert run(["run", str(tmp_path / "hand.c"), "--machines", "haswell-i7-5960x", "--cores", "1,2",
                "-o", str(tmp_path / "run")]) == 0
    profiles = ProfileSet.load(tmp_path / "run" / "profiles")
    assert [profiles.prd[(2, c)].coherence for c in (0, 1)] == [36, 9]
    assert profiles.upgrades[2] == [9, 36]  # s, which thread 1 read; thread 1's lines, which the master read
    table = validate_program(tmp_path / "hand.c", tmp_path / "v", ["haswell-i7-5960x"], [2], modes=("iteration",),
                             interleaves=("rr",), show_progress=False)
    l1 = table[table["level"] == "L1"].iloc[0]
    assert round(l1["gt_invalidation_pp"] / 100 * l1["gt_accesses"]) == 45
    assert l1["abs_error_pp"] < 0.1


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("p", [2, 3])
def test_critical_path_sums_each_phases_busiest_core(seed, p):
    """ProfileSet.critical_path: per phase the busiest core's accesses (every core's for accesses all make),
    summed; counted row by row here. One core: the whole trace."""
    info, ch = barrier_trace(seed, 9)
    ps = compute_profiles_from(info, chunker(ch, 11), [1, p], "iteration", "rr")
    ends = np.vstack([_barrier_counts(info, ch, p), [[len(a) for a in private_tagged(info, ch, p, "iteration")]]])
    starts = np.vstack([np.zeros((1, p), dtype=np.int64), ends[:-1]])
    assert ps.critical_path == {1: len(ch), p: int((ends - starts).max(axis=1).sum())}
    assert ps.critical_path[p] > len(ch) / p  # the master sections run on core 0 alone


def test_work_share_reads_the_critical_path():
    """The busiest core's share is the critical path over the trace's accesses where the profiles have it;
    without it, the loops' schedules (a master section weighs one iteration there)."""
    from analysis.runtime.facts import RegionFacts
    from analysis.runtime.inputs import OpCounts
    from analysis.runtime.model import work_share

    loops = (LoopInstance(0, 1, 1, SCHED_MASTER, 0), LoopInstance(1, 2, 99, SCHED_STATIC, 0))
    facts = RegionFacts(ops=OpCounts(), mem_accesses=1000.0, mem_bytes=8000.0, loops=loops)
    assert work_share(facts, 2, {2: 750}) == 0.75
    assert work_share(facts, 2, {4: 300}) == work_share(facts, 2) == (1 + 50) / 100


def test_a_time_loop_inside_one_region_repeats_from_its_first_step():
    """The region's fork (trip count 1) and the barriers (0) are alike to loop_period, so a time loop in one
    region keeps its period (replays of periodic stretches depend on it): fork, L1, barrier, L2, barrier, ..."""
    from analysis.profiles.replay import loop_period

    loops = [LoopInstance(0, -1, 1, SCHED_BARRIER, 0)]
    for step in range(6):
        for loop_id in (1, 2):
            loops += [LoopInstance(len(loops), loop_id, 100, SCHED_STATIC, 0),
                      LoopInstance(len(loops) + 1, -1, 0, SCHED_BARRIER, 0)]
    info = TraceInfo("t", 1, "prog", [], True, 0, {}, {}, loops=loops)
    assert loop_period(info) == 4
