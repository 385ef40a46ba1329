"""Ground truth: the region-by-region merge of real per-thread streams, and the whole ground_truth() run."""
from __future__ import annotations

import numpy as np
import pytest

import instrument
from analysis.validate.groundtruth import RegionMerger, ground_truth, merged_stream, thread_accesses
from machines.model import CacheLevel, Machine, Ram
from common.errors import InputError, RunError

# Region 0: each thread stores its own contiguous slice of a; region 1: each thread stores its slice
# of b. `volatile` keeps every store scalar (8 bytes), so each thread's sequence is known exactly.
PROGRAM = r"""
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#define N 6000
double a[N], b[N];
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 0) abort();
  volatile double *va = a, *vb = b;
#pragma omp parallel
  {
    int t = omp_get_thread_num(), p = omp_get_num_threads();
    for (int i = t * n / p; i < (t + 1) * n / p; i++) va[i] = i;
  }
#pragma omp parallel
  {
    int t = omp_get_thread_num(), p = omp_get_num_threads();
    for (int i = t * n / p; i < (t + 1) * n / p; i++) vb[i] = 2 * i;
  }
  fprintf(stderr, "A=%p B=%p\n", (void *)a, (void *)b);
  return 0;
}
"""
N = 1000


@pytest.fixture(scope="module")
def slices(tmp_path_factory):
    """Build once; trace with 2 and 3 threads. Returns (workdir, binary, {threads: trace})."""
    from analysis.validate.groundtruth import build_original, trace_threads

    work = tmp_path_factory.mktemp("gt")
    src = work / "slices.c"
    src.write_text(PROGRAM)
    binary = build_original(src, work)
    return work, binary, {p: trace_threads(binary, work, p, [str(N)]) for p in (2, 3)}


def rows_by_thread_region(trace, shift=3):
    """Per (thread, region): the (line, store) sequence straight from the trace file."""
    seqs: dict[tuple[int, int], list] = {}
    for ch in instrument.open_trace(trace).chunks():
        for t, r, x, s in zip(ch.thread.tolist(), ch.region.tolist(), (ch.addr >> np.uint64(shift)).tolist(),
                              ch.is_store.tolist()):
            seqs.setdefault((t, r), []).append((x, s))
    return seqs


def brute_rr(seqs, n_threads, k=1):
    """Round-robin, k references per turn, region by region; finished threads drop out."""
    out = []
    for r in sorted({r for _, r in seqs}):
        lanes = [list(seqs.get((t, r), [])) for t in range(n_threads)]
        pos = [0] * n_threads
        while any(pos[t] < len(lanes[t]) for t in range(n_threads)):
            for t in range(n_threads):
                for _ in range(k):
                    if pos[t] < len(lanes[t]):
                        out.append((lanes[t][pos[t]][0], t, lanes[t][pos[t]][1]))
                        pos[t] += 1
    return out


def merged(trace, strategy, seed=0):
    parts = list(merged_stream(trace, strategy, seed, line_size=8))
    return (np.concatenate([p.lines for p in parts]), np.concatenate([p.core for p in parts]),
            np.concatenate([p.is_store for p in parts]))


@pytest.mark.parametrize("threads", [2, 3])
def test_rr_merge_equals_brute_force_and_alternates(slices, threads):
    _, _, traces = slices
    lines, core, store = merged(traces[threads], "rr")
    want = brute_rr(rows_by_thread_region(traces[threads]), threads)
    assert list(zip(lines.tolist(), core.tolist(), store.tolist())) == want
    # the program's own facts: the stores to a come first (region 0), each thread's a contiguous slice
    a0 = int(lines[store].min())
    in_a = store & (lines >= a0) & (lines < a0 + N)
    in_b = store & ~in_a & (lines > a0 + N)  # b's elements (b follows a in .bss)
    assert in_a.sum() == N and in_b.sum() == N
    assert np.flatnonzero(in_a).max() < np.flatnonzero(in_b).min()  # region boundary respected
    slices_of = sorted(sorted((lines[in_a & (core == t)] - a0).tolist()) for t in range(threads))
    assert slices_of == [list(range(k * N // threads, (k + 1) * N // threads)) for k in range(threads)]
    # while every thread still has stores of its slice, consecutive stores come from different threads
    cores_a = core[in_a]
    m = threads * (N // threads) - threads * 2
    assert all(len(set(cores_a[i:i + threads].tolist())) == threads for i in range(0, m, threads))


def test_random_merge_keeps_each_threads_order_and_regions(slices):
    _, _, traces = slices
    seqs = rows_by_thread_region(traces[3])
    lines, core, store = merged(traces[3], "random", seed=5)
    for t in range(3):
        mine = list(zip(lines[core == t].tolist(), store[core == t].tolist()))
        assert mine == seqs.get((t, 0), []) + seqs.get((t, 1), [])
    again = merged(traces[3], "random", seed=5)
    other = merged(traces[3], "random", seed=6)
    assert np.array_equal(again[1], core) and not np.array_equal(other[1], core)
    assert not np.array_equal(core, merged(traces[3], "rr")[1])


@pytest.mark.parametrize("k", [1, 7])
def test_region_merger_handles_any_chunk_order_and_spills(tmp_path, k):
    """Threads' chunks arriving late and out of step, with a zero memory budget (everything spills)."""
    rng = np.random.default_rng(1)
    seqs = {(t, r): [(int(x), False) for x in rng.integers(0, 1 << 20, rng.integers(1, 300))]
            for t in range(3) for r in range(4) if (t, r) != (2, 1)}  # thread 2 makes no access in region 1
    pushes = [(t, r, np.array([x << 1 for x, _ in seq], dtype=np.uint64)) for (t, r), seq in seqs.items()]
    order = sorted(pushes, key=lambda p: (-p[0], p[1]))  # thread 2 entirely first, then 1, then 0
    m = RegionMerger(3, "rr", 0, tmp_path, budget=0, refs_per_turn=k)
    got = []
    for t, r, codes in order:
        m.push(t, r, codes)
        got += [(int(x), int(c), False) for b in m.drain() for x, c in zip(b.lines, b.core)]
    got += [(int(x), int(c), False) for b in m.drain(final=True) for x, c in zip(b.lines, b.core)]
    assert got == brute_rr(seqs, 3, k)


def test_region_merger_rejects_going_back():
    m = RegionMerger(2, "rr", 0, None)
    m.push(0, 3, np.zeros(2, dtype=np.uint64))
    with pytest.raises(InputError, match="went back"):
        m.push(0, 1, np.zeros(2, dtype=np.uint64))
    with pytest.raises(InputError, match="thread 5"):
        m.push(5, 3, np.zeros(2, dtype=np.uint64))


def tiny_machine():
    lv = [CacheLevel("L1", 16 * 64, 64, 4, 4.0, 1.0, False), CacheLevel("L2", 64 * 64, 64, 8, 12.0, 2.0, False),
          CacheLevel("L3", 256 * 64, 64, 16, 40.0, 4.0, True)]
    return Machine("tiny", "test", 4, 2.0, tuple(lv), Ram(80.0, 10.0, 40.0), 8, 256, {})


def test_ground_truth_table_against_hand_counts(slices):
    """Every element of a and b is stored once: 8 doubles per 64 B line, so each level misses once per
    line (cold) plus the few argument loads; no line is written by two threads except at slice edges."""
    work, _, _ = slices
    src = work / "slices.c"
    df = ground_truth(src, work, [tiny_machine()], [2, 3], args=[str(N)], interleaves=("rr", "random"))
    assert set(df["cores"]) == {2, 3} and set(df["interleave"]) == {"rr", "random"}
    assert len(df) == 2 * 2 * 3
    for (p, il), g in df.groupby(["cores", "interleave"]):
        counts = thread_accesses(work / f"trace-{p}" / "slices.pptrace", p)
        assert (g["accesses"] == counts.sum()).all()
        l1 = g[g["level"] == "L1"].iloc[0]
        lines_touched = 2 * N * 8 // 64  # a and b
        assert lines_touched <= l1["misses"] <= lines_touched + 2 * p + 8 + 2 * 2 * p  # edges, args
        assert (g["invalidations"] <= 2 * 2 * p).all()  # at most the slice-edge lines
        assert g["cumulative_hit_rate"].is_monotonic_increasing
        assert (g["distinct_lines"] >= lines_touched).all()
    # cached: a second call reads the stored tables
    again = ground_truth(src, work, [tiny_machine()], [2, 3], args=[str(N)], interleaves=("rr", "random"))
    assert again.equals(df)


def test_crashing_program_is_a_run_error(slices):
    work, _, _ = slices
    with pytest.raises(RunError):
        ground_truth(work / "slices.c", work, [tiny_machine()], [2], args=["-1"], interleaves=("rr",))


def test_bad_inputs(tmp_path):
    with pytest.raises(InputError, match="no such C file"):
        ground_truth(tmp_path / "nope.c", tmp_path, [tiny_machine()], [1])
    (tmp_path / "x.c").write_text("int main(void){return 0;}\n")
    with pytest.raises(InputError, match="interleave"):
        ground_truth(tmp_path / "x.c", tmp_path, [tiny_machine()], [1], interleaves=("zigzag",))
    with pytest.raises(InputError, match="cores"):
        ground_truth(tmp_path / "x.c", tmp_path, [tiny_machine()], [0])
