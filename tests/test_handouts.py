"""libomp's hand-outs of `schedule(dynamic)` and `schedule(guided)` chunks: the model's simulation
(analysis/profiles/handouts.py) against hand-computed cases and against the real libomp, run by the ground
truth's equal-speed turns."""
from __future__ import annotations

import numpy as np
import pytest

import instrument
from analysis.profiles.handouts import chunk_costs, costs_of_chunks, deal_runs, late_single_phases, stealing_owners
from analysis.profiles.private_traces import CoreMap
from instrument.trace_types import SCHED_DYNAMIC, SCHED_GUIDED, LoopInstance


@pytest.mark.parametrize("n,p", [(9, 4), (16, 4), (17, 16), (100, 7), (8, 8)])
def test_equal_costs_keep_each_threads_own_block(n, p):
    """Equal chunks at equal speed: nobody ever finds a chunk to steal, so thread t runs its own block, the
    first n % p threads one chunk more (libomp's initial ranges)."""
    want = [t for t in range(p) for _ in range(n // p + (t < n % p))]
    assert stealing_owners(np.ones(n, dtype=np.int64), p).tolist() == want


def test_fewer_chunks_than_threads_go_one_per_thread():
    assert stealing_owners(np.array([5, 1, 9]), 4).tolist() == [0, 1, 2]


def test_an_idle_thread_steals_the_last_chunk_of_a_busy_one():
    """2 threads, chunks 0-1 are thread 0's, 2-3 thread 1's. Thread 0 is busy in chunk 0 until time 10; thread 1
    runs 2 and 3 (time 2), then steals the last of thread 0's remaining chunks (1 of 1 remaining: chunk 1)."""
    assert stealing_owners(np.array([10, 1, 1, 1]), 2).tolist() == [0, 1, 1, 1]


def test_a_thief_takes_a_quarter_from_the_end_when_more_than_seven_remain():
    """3 threads, 30 chunks (10 each); thread 0's first chunk lasts 100, everything else 1. At time 10 thread 1
    asks first (ties to the lower id): thread 0 has 9 remaining (chunks 1-9), more than 7, so thread 1 takes the
    last 9 >> 2 = 2 (chunks 8, 9) and runs chunk 8; thread 2 then finds thread 1's own range empty, goes to its
    own first victim, thread 0 (chunks 1-7 left: 7, not more than 7), and takes chunk 7. At time 11 thread 1 runs
    chunk 9 (its stolen range), thread 2 steals chunk 6 from thread 0, and so on until thread 0 has no chunk
    left but the one it runs."""
    costs = np.ones(30, dtype=np.int64)
    costs[0] = 100
    owner = stealing_owners(costs, 3)
    assert owner[:1].tolist() == [0] and owner[10:20].tolist() == [1] * 10 and owner[20:].tolist() == [2] * 10
    assert owner[8] == 1 and owner[9] == 1 and owner[7] == 2
    assert sorted(owner[1:10].tolist()) == [1] * 5 + [2] * 4  # 1-9 shared by the two thieves, none left on 0


def test_runs_name_first_iterations_of_each_cores_stretch():
    first, core = deal_runs(SCHED_DYNAMIC, 18, 3, 2, None)  # 6 chunks of 3 iterations on 2 threads
    assert first.tolist() == [0, 9] and core.tolist() == [0, 1]
    first, core = deal_runs(SCHED_DYNAMIC, 9, 3, 4, None)  # 3 chunks on 4 threads: chunk k on thread k, no table
    assert first.tolist() == [] and core.tolist() == []
    assert costs_of_chunks(np.array([0, 4, 8]), 10, None).tolist() == [4, 4, 2]
    pieces = (np.array([0, 2, 4, 9]), np.array([5, 6, 7, 8]))  # pieces starting at 0, 2, 4, 9
    assert costs_of_chunks(np.array([0, 4, 8]), 10, pieces).tolist() == [11, 7, 8]


def test_chunk_costs_count_each_pieces_rows():
    """Rows carry their piece's first iteration; a piece's cost is its rows (rows before the first iteration,
    iteration -1, are every thread's and belong to no piece), also when a piece spans two batches."""
    from tests.test_private_traces import chunker, rows_to_trace
    from instrument.trace_types import BlockInfo

    blocks = {2: BlockInfo(2, "OUT__1", "for.body", False)}
    rows = [(64, 2, 0, -1, False)] + [(64 * i, 2, 0, it, False) for it, n in ((0, 3), (2, 1), (4, 5)) for i in range(n)]
    info, ch = rows_to_trace(rows, blocks, [LoopInstance(0, 0, 6, SCHED_DYNAMIC, 2)])
    costs = chunk_costs(info, chunker(ch, 3), "iteration")
    starts, refs = costs.per_instance[0]
    assert starts.tolist() == [0, 2, 4] and refs.tolist() == [3, 1, 5]
    assert chunk_costs(info, lambda: [ch], "paper") is None


def test_late_single_phases_end_at_their_last_late_single():
    """A single first in its phase (after a barrier) is not late; a phase with late singles is kept up to the last
    one, since what follows decides nothing."""
    from instrument.trace_types import SCHED_BARRIER, SCHED_SINGLE, SCHED_STATIC

    kinds = [SCHED_BARRIER, SCHED_SINGLE, SCHED_STATIC, SCHED_BARRIER, SCHED_STATIC, SCHED_SINGLE, SCHED_STATIC,
             SCHED_SINGLE, SCHED_STATIC, SCHED_BARRIER, SCHED_STATIC]
    loops = [LoopInstance(i, 0, 1, k, 0) for i, k in enumerate(kinds)]
    assert late_single_phases(loops[::-1]) == [[4, 5, 6, 7]]


TRIANGLE = r"""
#include <stdio.h>
#include <stdlib.h>
#define N 64
double a[N][N], b[N][N], s1[4];
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : N;
  if (n > N) abort();
  volatile double *va = &a[0][0], *vb = &b[0][0];
#pragma omp parallel
  {
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < n; i++)
      for (int j = 0; j <= i; j++) va[i * N + j] = i + j;
#pragma omp single
    { volatile double *v = s1; v[0] = 1; }
#pragma omp for schedule(guided)
    for (int i = 0; i < n; i++)
      for (int j = i; j < n; j++) vb[i * N + j] = i - j;
  }
  printf("%f %f\n", a[n - 1][n - 1], b[0][n - 1]);
  return 0;
}
"""
A_ROWS, B_ROWS = (0, 64), (64, 128)  # the triangle's rows of a (dynamic) and of b (guided), in rows of 512 bytes


def row_owners(chunks, core_of, rows=A_ROWS) -> dict[int, set]:
    """Which thread (or model core) stores each row of a triangle (a's, or b's just above it)."""
    owners: dict[int, set] = {}
    parts = [(ch.addr[m], core_of(ch)[m]) for ch in chunks for m in [ch.is_store & (ch.size == 8)]]
    addr = np.concatenate([a for a, _ in parts])
    who = np.concatenate([c for _, c in parts])
    row = (addr - addr.min()) // (64 * 8)
    for r, c in zip(row.tolist(), who.tolist()):
        if rows[0] <= r < rows[1]:
            owners.setdefault(r, set()).add(c)
    return owners


def validated(work, name: str, program: str):
    """Write the program and validate it at 4 and 8 threads with n = 64 (the ground truth's and the model's
    traces under work / "v"); returns the source's path."""
    from pptmc.validation import validate_program

    src = work / name
    src.write_text(program)
    validate_program(src, work / "v", ["haswell-i7-5960x"], [4, 8], args=["64"], modes=("iteration",),
                     interleaves=("rr",), show_progress=False)
    return src


@pytest.fixture(scope="module")
def triangle(tmp_path_factory):
    """The ground truth's traces of a triangular dynamic loop (twice at 8 threads) and the model's trace."""
    work = tmp_path_factory.mktemp("deal")
    src = validated(work, "tri.c", TRIANGLE)
    from analysis.validate.groundtruth import build_original, trace_threads

    again = trace_threads(build_original(src, work / "again"), work / "again", 8, ["64"])
    return work / "v", again


def test_ground_truth_deals_dynamic_chunks_the_same_on_every_run(triangle):
    """The ground truth's equal-speed turns (instrument/runtime/pptmc_turns.c) make the OS irrelevant: two runs
    give every thread the same rows (without them, 8 threads on this host's cores got 7-14 times their share)."""
    v, again = triangle
    first = row_owners(instrument.open_trace(v / "groundtruth" / "trace-8" / "tri.pptrace").chunks(), lambda c: c.thread)
    second = row_owners(instrument.open_trace(again).chunks(), lambda c: c.thread)
    assert first == second and all(len(s) == 1 for s in first.values())


def deals(triangle, p: int, rows: tuple[int, int]) -> tuple[dict, dict]:
    """(real libomp's, the model's) thread of each row of a's or b's triangle at p threads."""
    v, _ = triangle
    real = row_owners(instrument.open_trace(v / "groundtruth" / f"trace-{p}" / "tri.pptrace").chunks(),
                      lambda c: c.thread, rows)
    reader = instrument.open_trace(v / "model" / "trace" / "tri.pptrace")
    cmap = CoreMap(reader.info, p, "iteration", 0, chunk_costs(reader.info, reader.chunks, "iteration"))
    return real, row_owners(reader.chunks(), lambda c: np.where(c.loop >= 0, cmap.core_of(c), -1), rows)


@pytest.mark.parametrize("p", [4, 8])
def test_model_deals_dynamic_chunks_as_real_libomp(triangle, p):
    """Row i of a costs i + 1 stores: libomp's stealing moves the last rows between threads. The model's deal, from
    the translated program's sequential trace, gives every row the thread real libomp gave it (round-robin
    hand-outs, the model's old deal, agree on 5 of 64 rows at 8 threads)."""
    real, model = deals(triangle, p, A_ROWS)
    assert model == real


@pytest.mark.parametrize("p", [4, 8])
def test_model_deals_guided_chunks_as_real_libomp(triangle, p):
    """Row i of b costs 64 - i stores, in libomp's shrinking guided chunks (16, 14, ... rows at 4 threads). The model
    gives the first half of the rows the thread real libomp gave them; the last ones are one-row chunks of nearly
    equal cost, whose order hangs on the few references the two builds make differently around a hand-out (the
    model's deal agrees on the whole triangle: 52 of 64 rows at 4 threads, 44 at 8)."""
    real, model = deals(triangle, p, B_ROWS)
    first_half = range(B_ROWS[0], B_ROWS[0] + 32)
    assert all(model[r] == real[r] for r in first_half)
    assert sum(model[r] == real[r] for r in real) >= 0.65 * len(real)


CONSTRUCTS = r"""
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#define N 200
double a[N], b[N], c[N];
int main(void) {
  double sum = 0, mx = 0;
  int cnt = 0;
  for (int i = 0; i < N; i++) a[i] = i % 7, b[i] = i % 5;
#pragma omp parallel
  {
    double mine = 0;
#pragma omp for schedule(dynamic, 3) reduction(+ : sum) nowait
    for (int i = 0; i < N; i++) sum += a[i] * b[i];
#pragma omp for schedule(guided) nowait
    for (int i = 0; i < N; i++) c[i] = a[i] + i;
#pragma omp barrier
#pragma omp single copyprivate(mine)
    mine = c[3];
#pragma omp for schedule(dynamic) ordered
    for (int i = 0; i < N; i++) {
#pragma omp ordered
      cnt++;
    }
#pragma omp for schedule(static) reduction(max : mx)
    for (int i = 0; i < N; i++) if (c[i] > mx) mx = c[i];
#pragma omp critical
    sum += mine * 0;
#pragma omp sections
    {
#pragma omp section
      a[0] += 1;
#pragma omp section
      b[0] += 1;
    }
#pragma omp single
    {
      for (int t = 0; t < 8; t++) {
#pragma omp task firstprivate(t)
        c[t] += t;
      }
#pragma omp taskwait
    }
#pragma omp master
    c[1] += 1;
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < 4; i++) {
#pragma omp atomic
      c[10 + i] += 1;
    }
  }
  printf("%.1f %.1f %d %.1f\n", sum, mx, cnt, c[10]);
  return 0;
}
"""


def test_turns_never_stall_a_program_of_many_constructs(tmp_path):
    """Reductions (blocking and nowait), copyprivate, ordered, critical, sections, tasks, master and a nested
    region, around dynamic and guided loops: the ground truth's run with the equal-speed turns ends without
    their stall fallback and prints what the native build prints, at 4 and 16 threads."""
    import os
    import subprocess

    from analysis.validate.groundtruth import build_original, trace_threads
    from common.toolchain import toolchain

    src = tmp_path / "many.c"
    src.write_text(CONSTRUCTS)
    native = tmp_path / "many"
    subprocess.run([str(toolchain().clang), "-O2", *toolchain().openmp_compile_flags(), str(src), "-o", str(native),
                    *toolchain().openmp_link_flags()], check=True)
    binary = build_original(src, tmp_path / "gt")
    for p in (4, 16):
        trace_threads(binary, tmp_path / "gt", p)
        out = (tmp_path / "gt" / f"trace-{p}" / "program.out").read_text()
        want = subprocess.run([str(native)], env={**os.environ, "OMP_NUM_THREADS": str(p)},
                              capture_output=True, text=True, check=True).stdout
        assert "turns stopped" not in out and want.strip() in out


LATE_SINGLES = r"""
#include <stdio.h>
#include <stdlib.h>
#define N 64
double a[N + 4][N];
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : N;
  if (n > N) abort();
  volatile double *va = &a[0][0];
#pragma omp parallel
  {
#pragma omp for nowait
    for (int i = 0; i < n; i++)
      for (int j = i; j < n; j++) va[i * N + j] = i - j;
#pragma omp single
    va[N * N] = 1;
#pragma omp for nowait
    for (int i = 0; i < n + 2; i++) va[(N + 2) * N + i] += 1;
#pragma omp single
    va[(N + 1) * N] = 2;
  }
  printf("%f %f\n", a[N][0], a[N + 2][n]);
  return 0;
}
"""


@pytest.fixture(scope="module")
def late_singles(tmp_path_factory):
    """The ground truth's and the model's traces of two singles that follow loops without their barrier."""
    work = tmp_path_factory.mktemp("singles")
    validated(work, "late.c", LATE_SINGLES)
    return work / "v"


@pytest.mark.parametrize("p", [4, 8])
def test_a_single_after_nowait_goes_to_the_first_thread_to_arrive(late_singles, p):
    """The first single follows a triangle whose last rows are the cheapest: the last thread arrives first. The
    second follows n + 2 equal iterations, one more for threads 0 and 1 at 4 and 8 threads: thread 2 arrives
    first (tied with the others after it, the lower id). The model gives each single the thread real libomp gave
    it (it gave both to thread 0 before)."""
    singles = (64, 66)  # rows of a that only the singles store
    real = row_owners(instrument.open_trace(late_singles / "groundtruth" / f"trace-{p}" / "late.pptrace").chunks(),
                      lambda c: c.thread, singles)
    reader = instrument.open_trace(late_singles / "model" / "trace" / "late.pptrace")
    cmap = CoreMap(reader.info, p, "iteration", 0, chunk_costs(reader.info, reader.chunks, "iteration"))
    model = row_owners(reader.chunks(), lambda c: np.where(c.loop >= 0, cmap.core_of(c), -1), singles)
    assert real == model == {64: {p - 1}, 65: {2}}
