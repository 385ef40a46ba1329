"""The ground-truth simulator follows the machine's topology: a shared level has one instance per group of cores
(an L3 per CCX), thread t uses the instance of the core its placement puts it on, and a store invalidates the
line in every other instance. Checked against hand-computed cases and a pure-Python LRU per instance."""
from __future__ import annotations

import numpy as np
import pytest

from analysis.hitrates.cachesim import CoherentHierarchy, simulate_coherent
from analysis.validate.groundtruth import merged_stream, simulate_trace
from common.errors import InputError
from machines.model import CacheLevel, Machine, Ram


def level(name: str, sets: int, ways: int, shared: bool = False, group: int = 0) -> CacheLevel:
    """A level placed by the virtual line (set = line mod sets), so the oracle needs no page frames."""
    return CacheLevel(name, sets * ways * 64, 64, ways, 4.0, 1.0, shared, indexing="virtual",
                      cores_per_instance=group)


def ccx_caches(group: int) -> tuple[CacheLevel, ...]:
    """Private L1 and L2; an L3 shared by `group` cores."""
    return level("L1", 2, 2), level("L2", 4, 2), level("L3", 8, 4, shared=True, group=group)


class Oracle:
    """Pure-Python hierarchy: an LRU list per (level, instance, set), hierarchical (a level sees the misses above
    it); a store removes the line from every instance of every level except the storer's own."""

    def __init__(self, spec: list[tuple[int, int]], inst_of: list[list[int]]) -> None:
        self.spec, self.inst_of = spec, inst_of
        self.sets: dict[tuple[int, int, int], list[int]] = {}
        self.gone: set[tuple[int, int, int]] = set()  # (level, instance, line) invalidated and not refetched since
        n = len(spec)
        self.reached, self.hits, self.inval_miss, self.invalidated = [0] * n, [0] * n, [0] * n, [0] * n

    def access(self, x: int, t: int, store: bool) -> None:
        """One access of thread t."""
        for lv, (sets, ways) in enumerate(self.spec):
            i = self.inst_of[lv][t]
            lst = self.sets.setdefault((lv, i, x % sets), [])
            self.reached[lv] += 1
            if x in lst:
                lst.remove(x)
                lst.append(x)
                self.hits[lv] += 1
                break
            if (lv, i, x) in self.gone:
                self.inval_miss[lv] += 1
                self.gone.discard((lv, i, x))
            if len(lst) == ways:
                lst.pop(0)
            lst.append(x)
        if store:
            for lv, (sets, _) in enumerate(self.spec):
                for i in set(self.inst_of[lv]) - {self.inst_of[lv][t]}:
                    lst = self.sets.get((lv, i, x % sets), [])
                    if x in lst:
                        lst.remove(x)
                        self.invalidated[lv] += 1
                        self.gone.add((lv, i, x))

    def counts(self) -> list[list[int]]:
        return [self.reached, self.hits, self.inval_miss, self.invalidated]


def sim_counts(counts) -> list[list[int]]:
    return [counts.reached.tolist(), counts.hits.tolist(), counts.invalidation_misses.tolist(),
            counts.invalidated.tolist()]


def run(caches, threads: int, machine_cores: int, placement: str, accesses) -> list[list[int]]:
    """The simulator's counts for a list of (line, thread, store)."""
    x, t, s = (np.array(col) for col in zip(*accesses))
    got = simulate_coherent([(x.astype(np.uint64), t.astype(np.int64), s.astype(bool))], caches, threads,
                            machine_cores=machine_cores, placement=placement)
    return sim_counts(got)


def test_threads_on_different_ccxs_never_hit_each_others_l3():
    """4 cores, 2 CCXs of 2 (close: threads 0, 1 on CCX 0; 2, 3 on CCX 1). Thread 0 loads line 5; thread 2's
    load misses its CCX's L3; thread 1's (CCX 0) hits; thread 3's hits the copy thread 2 brought into CCX 1."""
    got = run(ccx_caches(2), 4, 4, "close", [(5, 0, False), (5, 2, False), (5, 1, False), (5, 3, False)])
    assert got[1] == [0, 0, 2]  # hits: L1, L2 private and cold; L3 hit by thread 1 and by thread 3
    assert got[0] == [4, 4, 4]
    # one L3 for all 4 cores: only the first load misses it
    assert run(ccx_caches(0), 4, 4, "close", [(5, 0, False), (5, 2, False), (5, 1, False), (5, 3, False)])[1] == \
        [0, 0, 3]


@pytest.mark.parametrize("placement,l3_hits", [("close", 1), ("spread", 0)])
def test_placement_decides_which_l3_two_threads_share(placement, l3_hits):
    """2 threads on a 4-core machine with an L3 per 2 cores: close puts them on cores 0 and 1 (one CCX, the second
    load hits the L3), spread on cores 0 and 2 (two CCXs, both miss)."""
    got = run(ccx_caches(2), 2, 4, placement, [(9, 0, False), (9, 1, False)])
    assert got[1] == [0, 0, l3_hits]


def test_store_on_one_ccx_invalidates_the_other_ccxs_l3_copy():
    """Thread 2 (CCX 1) loads line 7; thread 0 (CCX 0) stores it, removing it from thread 2's L1 and L2 and from
    CCX 1's L3; thread 3 (CCX 1) then misses CCX 1's L3 by invalidation; thread 2's reload misses its L1 and L2
    by invalidation and hits the copy thread 3 brought back into CCX 1's L3."""
    got = run(ccx_caches(2), 4, 4, "close", [(7, 2, False), (7, 0, True), (7, 3, False), (7, 2, False)])
    reached, hits, inval_miss, invalidated = got
    assert hits == [0, 0, 1]
    assert invalidated == [1, 1, 1]
    assert inval_miss == [1, 1, 1]
    assert reached == [4, 4, 4]


def random_accesses(seed: int, n: int, threads: int, lines: int, store_share: float):
    """(line, thread, store) drawn at random, with some lines shared by every thread."""
    rng = np.random.default_rng(seed)
    return list(zip(rng.integers(0, lines, n).tolist(), rng.integers(0, threads, n).tolist(),
                    (rng.random(n) < store_share).tolist()))


def hand_instances(threads: int, cores: int, group: int, placement: str) -> list[int]:
    """Shared-level instance of each thread, numbered as the cores' groups come (OpenMP close: core t mod cores;
    spread: t x cores / threads when threads fit)."""
    core = [t * cores // threads if placement == "spread" and threads <= cores else t % cores
            for t in range(threads)]
    groups = sorted({c // group for c in core})
    return [groups.index(c // group) for c in core]


@pytest.mark.parametrize("seed,threads,cores,group,placement", [
    (0, 4, 4, 2, "close"), (1, 2, 4, 2, "spread"), (2, 3, 8, 2, "spread"), (3, 6, 4, 2, "close"),
    (4, 8, 8, 4, "spread"), (5, 5, 4, 1 << 30, "close")])
def test_topology_matches_a_pure_python_lru_per_instance(seed, threads, cores, group, placement):
    """Random loads and stores through private L1, L2 and an L3 per group of cores (last case: one L3; case 4:
    more threads than cores, each keeping its own private caches)."""
    caches = ccx_caches(group if group <= cores else 0)
    accesses = random_accesses(seed, 5000, threads, 40, 0.3)
    shared = hand_instances(threads, cores, min(group, cores), placement)
    oracle = Oracle([(2, 2), (4, 2), (8, 4)], [list(range(threads)), list(range(threads)), shared])
    for x, t, s in accesses:
        oracle.access(x, t, s)
    assert run(caches, threads, cores, placement, accesses) == oracle.counts()
    assert sum(oracle.inval_miss) > 0  # the case exercises coherence


def test_an_l3_per_all_cores_is_the_single_instance_simulation():
    """cores_per_instance = every core of the machine: the same counts as the topology-free hierarchy (one L3 for
    all threads), on a random stream with stores, in batches."""
    rng = np.random.default_rng(7)
    n, threads = 60_000, 4
    x = np.where(rng.random(n) < 0.5, rng.integers(0, 3000, n), rng.integers(0, 60, n)).astype(np.uint64)
    t = rng.integers(0, threads, n)
    s = rng.random(n) < 0.25
    batches = [(x[i:i + 9999], t[i:i + 9999], s[i:i + 9999]) for i in range(0, n, 9999)]
    plain = (level("L1", 4, 2), level("L2", 8, 4), level("L3", 64, 8, shared=True))
    whole = plain[:2] + (level("L3", 64, 8, shared=True, group=8),)
    want = sim_counts(simulate_coherent(batches, plain, threads))
    for placement in ("close", "spread"):
        assert sim_counts(simulate_coherent(batches, whole, threads, machine_cores=8, placement=placement)) == want
    oracle = Oracle([(4, 2), (8, 4), (64, 8)], [list(range(threads))] * 2 + [[0] * threads])
    for a, b, c in zip(x.tolist(), t.tolist(), s.tolist()):
        oracle.access(a, b, c)
    assert want == oracle.counts()


def test_bad_placement_is_refused():
    with pytest.raises(InputError, match="placement 'scatter'"):
        CoherentHierarchy(ccx_caches(2), 2, machine_cores=4, placement="scatter")


# --- the ground truth of a real 2-thread run -----------------------------------------------------

PROGRAM = r"""
#include <stdlib.h>
#define N 512
double a[N];
int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 2;
  volatile double *va = a;
  double s = 0;
#pragma omp parallel reduction(+ : s)
  for (int r = 0; r < reps; r++) {
    for (int i = 0; i < N; i++) s += va[i];            /* every thread reads all of a */
#pragma omp for
    for (int i = 0; i < N; i++) va[i] = i + r;         /* each thread writes its half */
  }
  return s < 0;
}
"""


def ccx_machine() -> Machine:
    """4 cores, 2 CCXs of 2 cores; a's 64 lines fit every level, so only sharing and coherence decide hits."""
    caches = (level("L1", 16, 8), level("L2", 32, 8), level("L3", 64, 16, shared=True, group=2))
    return Machine("ccx", "test", 4, 2.0, caches, Ram(80.0, 10.0, 40.0), 8, 256, {})


@pytest.fixture(scope="module")
def shared_reads(tmp_path_factory):
    """The program's 2-thread trace."""
    from analysis.validate.groundtruth import build_original, trace_threads

    work = tmp_path_factory.mktemp("topo")
    src = work / "reads.c"
    src.write_text(PROGRAM)
    return trace_threads(build_original(src, work), work, 2, ["2"])


@pytest.mark.parametrize("placement,shared", [("close", [0, 0]), ("spread", [0, 1])])
def test_ground_truth_follows_the_placement(shared_reads, placement, shared):
    """simulate_trace with close (both threads on CCX 0) and spread (one per CCX) against the oracle fed the same
    merged stream; spread must lose the L3 hits that close's shared instance gives."""
    m = ccx_machine()
    oracle = Oracle([(16, 8), (32, 8), (64, 16)], [[0, 1], [0, 1], shared])
    for b in merged_stream(shared_reads, "rr", 0, 64):
        for x, t, s in zip(b.lines.tolist(), b.core.tolist(), b.is_store.tolist()):
            oracle.access(x, t, s)
    df = simulate_trace(shared_reads, [m], 2, "rr", placement=placement)
    total = df["accesses"].iloc[0]
    assert df["misses"].tolist() == [r - h for r, h in zip(oracle.reached, oracle.hits)]
    assert df["invalidations"].tolist() == oracle.inval_miss
    assert df["invalidated_copies"].tolist() == oracle.invalidated
    assert total == sum(1 for b in merged_stream(shared_reads, "rr", 0, 64) for _ in b.lines)
    if placement == "spread":
        assert oracle.invalidated[2] > 0  # a store on one CCX removed the other's L3 copy
