"""Private-trace mimicking (Algorithm 1 and iteration mode) on hand-built traces."""
from __future__ import annotations

import numpy as np
import pytest

from analysis.profiles.handouts import guided_starts
from analysis.profiles.private_traces import (ALL_CORES, OFFSET_BITS, CoreMap, core_stream, core_streams,
                                     resolve_mode, static_block_core)
from instrument.trace_types import (CHUNK_DTYPES, NO_LOOP, SCHED_DYNAMIC, SCHED_GUIDED, SCHED_MASTER,
                                    SCHED_STATIC, BlockInfo, LoopInstance, TraceChunk, TraceInfo)
from common.errors import InputError

STACK = 0x7FF000000000
HEAP = 0x100000
SHARED = 0x200000


def rows_to_trace(rows: list[tuple], blocks: dict[int, BlockInfo], loops: list[LoopInstance]):
    """(info, chunk) from rows (addr, block, loop, iteration, is_stack); instances counted here."""
    inst: dict[int, int] = {}
    full = []
    prev_key = None
    for addr, block, loop, it, stack in rows:
        key = (block, loop, it)
        if key != prev_key:  # a new entry into the block
            inst[block] = inst.get(block, -1) + 1
            prev_key = key
        full.append((addr, 8, False, block, inst[block], 0, 0, loop, it, stack))
    cols = list(zip(*full))
    chunk = TraceChunk(*(np.array(c, dtype=d) for c, d in zip(cols, CHUNK_DTYPES.values())))
    counts = {b: n + 1 for b, n in inst.items()}
    info = TraceInfo("synthetic.trace", 1, "prog", [], True, len(chunk), blocks, counts, loops=loops)
    return info, chunk


def make_trace(trip: int = 10, schedule: int = SCHED_STATIC, chunk: int = 0, n_loops: int = 1, seed: int = 0):
    """A region: entry block (stack), a shared-var block, then a work-shared loop touching heap data."""
    rng = np.random.default_rng(seed)
    blocks = {0: BlockInfo(0, "OUT__1", "entry", False), 1: BlockInfo(1, "OUT__1", "shared_var_trace1", True),
              2: BlockInfo(2, "OUT__1", "for.body", False)}
    rows, loops = [], []
    for lp in range(n_loops):
        rows += [(STACK, 0, NO_LOOP, -1, True), (SHARED, 1, NO_LOOP, -1, False)]
        loops.append(LoopInstance(lp, 0, trip, schedule, chunk))
        for it in range(trip):
            rows.append((HEAP + 64 * it, 2, lp, it, False))
            rows.append((STACK - 64, 2, lp, it, True))
            rows.append((SHARED + 64 * (1 + int(rng.integers(0, 64))), 2, lp, it, False))
    return rows_to_trace(rows, blocks, loops)


def chunker(chunk: TraceChunk, size: int):
    """A re-streamable factory cutting one chunk into pieces of `size` rows."""
    def factory():
        for i in range(0, len(chunk), size):
            yield TraceChunk(*(getattr(chunk, k)[i:i + size] for k in CHUNK_DTYPES))
    return factory


def stream(info, chunk, cores, core, mode, size=7, line=64):
    parts = list(core_stream(info, chunker(chunk, size), cores, core, mode, line))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)


def off(core: int, line: int = 64) -> int:
    return core << (OFFSET_BITS - 6)


def test_iteration_mode_static_split_replication_and_offsets():
    info, ch = make_trace(trip=10)
    c0, c1 = stream(info, ch, 2, 0, "iteration"), stream(info, ch, 2, 1, "iteration")
    # expected by hand: both cores run the two NO_LOOP accesses; core 0 iterations 0-4, core 1 5-9
    shared_lines = [int(a) >> 6 for a in ch.addr[4::3]]  # third access of each iteration
    exp0 = [STACK >> 6, SHARED >> 6]
    exp1 = [(STACK >> 6) + off(1), SHARED >> 6]
    for it in range(10):
        row = [(HEAP >> 6) + it, ((STACK - 64) >> 6), shared_lines[it]]
        if it < 5:
            exp0 += row
        else:
            exp1 += [row[0], row[1] + off(1), row[2]]  # only the stack address is offset
    assert c0.tolist() == exp0
    assert c1.tolist() == exp1


def test_one_core_chunks_with_and_without_offset_rows():
    """A chunk whose rows all run on one core > 0 is passed on as the prepared line ids when
    none of its rows is offset (PreparedChunk.offsets False) and offset otherwise: chunks of
    1 and 2 rows give both kinds, and core 1's stream is the hand-checked one of the test above."""
    from analysis.profiles.private_traces import prepare_chunk

    info, ch = make_trace(trip=10)
    want = stream(info, ch, 2, 1, "iteration")
    for size in (1, 2):
        assert stream(info, ch, 2, 1, "iteration", size=size).tolist() == want.tolist()
    cmap = CoreMap(info, 2, "iteration")
    flags = [prepare_chunk(part, "iteration", cmap.shared_block, 6, info.path).offsets
             for part in chunker(ch, 1)()]
    assert flags == ch.is_stack.tolist()


def test_one_core_is_the_sequential_trace():
    info, ch = make_trace(trip=13, schedule=SCHED_GUIDED)
    for mode in ("iteration", "paper"):
        assert stream(info, ch, 1, 0, mode).tolist() == (ch.addr >> np.uint64(6)).tolist()


@pytest.mark.parametrize("n,p", [(10, 4), (3, 8), (16, 4), (17, 16), (1, 2), (100, 7)])
def test_static_block_core_matches_openmp_balanced_split(n, p):
    # oracle: libgomp/libomp static without chunk: thread t gets q+1 iterations if t < n % p, else q
    expect = []
    for t in range(p):
        expect += [t] * (n // p + (1 if t < n % p else 0))
    got = static_block_core(np.arange(n), np.full(n, n), p)
    assert got.tolist() == expect


def core_of_iterations(schedule, chunk, trip, p):
    info, ch = make_trace(trip=trip, schedule=schedule, chunk=chunk)
    cmap = CoreMap(info, p, "iteration")
    owner = cmap.core_of(ch)
    return owner[2::3], cmap


def test_static_chunk_is_round_robin_and_dynamic_is_libomps_blocks_of_chunks():
    """Static chunks are dealt round robin. libomp steals dynamic chunks: with equal costs each thread keeps its
    own block (9 chunks on 4: 3, 2, 2, 2; nobody finds a chunk to steal); with fewer chunks than threads,
    chunk k runs on thread k (analysis/profiles/handouts.py; tests/test_handouts.py runs real libomp)."""
    owner, _ = core_of_iterations(SCHED_STATIC, 3, 20, 4)
    assert owner.tolist() == [(i // 3) % 4 for i in range(20)]
    owner, _ = core_of_iterations(SCHED_DYNAMIC, 0, 9, 4)
    assert owner.tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3]
    owner, _ = core_of_iterations(SCHED_DYNAMIC, 2, 9, 8)  # 5 chunks of 2 on 8 threads
    assert owner.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4]


def test_guided_chunks_shrink_and_cover_every_iteration_once():
    """libomp's guided chunks: remaining / 8 iterations on 4 threads while at least 2 x 4 x (2 + 1) = 24 remain,
    then 2; each chunk to the thread that asks first (equal-cost iterations: list scheduling)."""
    owner, cmap = core_of_iterations(SCHED_GUIDED, 2, 100, 4)
    starts = guided_starts(100, 4, 2)
    sizes = np.diff(np.append(starts, 100))
    assert sizes.tolist()[:3] == [12, 11, 9]  # floor(100/8), floor(88/8), floor(77/8)
    assert (np.diff(sizes) <= 0).all() and sizes[:-1].min() >= 2 and sizes.sum() == 100
    free = [(0, t) for t in range(4)]  # (time, thread): a plain list-scheduling oracle
    want = []
    for size in sizes.tolist():
        free.sort()
        time, t = free.pop(0)
        want += [t] * size
        free.append((time + size, t))
    assert owner.tolist() == want


@pytest.mark.parametrize("schedule,chunk", [(SCHED_STATIC, 0), (SCHED_STATIC, 1), (SCHED_DYNAMIC, 2),
                                            (SCHED_GUIDED, 1), (SCHED_MASTER, 0)])
def test_a_loops_entry_before_its_first_iteration_is_every_cores(schedule, chunk):
    """Accesses inside a loop before its first iteration marker (iteration -1: the bounds stored for the
    runtime, the first hand-out) are every thread's, whatever the schedule; they went to the last core under
    chunked schedules before."""
    blocks = {0: BlockInfo(0, "OUT__1", "entry", False), 2: BlockInfo(2, "OUT__1", "for.body", False)}
    trip = 1 if schedule == SCHED_MASTER else 8
    rows = [(STACK - 64, 0, 0, -1, True), (STACK - 128, 0, 0, -1, True)]
    rows += [(HEAP + 64 * it, 2, 0, it, False) for it in range(trip)]
    info, ch = rows_to_trace(rows, blocks, [LoopInstance(0, 0, trip, schedule, chunk)])
    owner = CoreMap(info, 4, "iteration").core_of(ch)
    assert owner[:2].tolist() == [ALL_CORES, ALL_CORES]
    assert (owner[2:] >= 0).all()


def test_master_goes_to_core_zero():
    owner, _ = core_of_iterations(SCHED_MASTER, 0, 1, 4)
    assert owner.tolist() == [0]


def test_paper_mode_algorithm1():
    info, ch = make_trace(trip=8)
    # blocks 0 and 1 run once (< 2 cores): copied; block 2 runs 8 times: instances 0-3 core 0, 4-7 core 1
    c1 = stream(info, ch, 2, 1, "paper")
    expect = [(STACK >> 6) + off(1), SHARED >> 6]  # shared-variable block keeps its address
    for it in range(4, 8):
        expect += [int(a >> np.uint64(6)) + off(1) for a in ch.addr[2 + 3 * it:5 + 3 * it]]
    assert c1.tolist() == expect
    c0 = stream(info, ch, 2, 0, "paper")
    assert c0.tolist() == (ch.addr[:2 + 12] >> np.uint64(6)).tolist()  # master: no offset


def test_paper_mode_uneven_split_keeps_every_instance():
    info, ch = make_trace(trip=10)
    total = sum(len(stream(info, ch, 4, c, "paper")) for c in range(4))
    assert total == 4 * 2 + 30  # 2 replicated accesses per core + every loop access once


def test_chunking_does_not_change_streams():
    info, ch = make_trace(trip=50, schedule=SCHED_GUIDED, n_loops=3)
    for size in (1, 5, 1000):
        assert stream(info, ch, 4, 3, "iteration", size).tolist() == stream(info, ch, 4, 3, "iteration", 64).tolist()


def test_streams_partition_loop_accesses():
    info, ch = make_trace(trip=37, n_loops=2)
    lens = [sum(len(a) for a in s) for s in core_streams(info, chunker(ch, 9), 8, "iteration")]
    assert sum(lens) == 8 * 4 + 2 * 37 * 3


def test_modes_and_errors():
    info, ch = make_trace()
    assert resolve_mode(info, "auto") == "iteration"
    info.loops = []
    assert resolve_mode(info, "auto") == "paper"
    with pytest.raises(InputError, match="no loop markers"):
        resolve_mode(info, "iteration")
    with pytest.raises(InputError, match="--mode"):
        resolve_mode(info, "fast")
    info, ch = make_trace()
    ch.addr[0] = np.uint64(1) << np.uint64(50)
    with pytest.raises(InputError, match="2\\^47"):
        stream(info, ch, 2, 1, "iteration")
    with pytest.raises(InputError, match="line-size"):
        stream(info, ch, 2, 1, "iteration", line=48)


def test_paper_mode_with_chunk_size_deals_instances_round_robin():
    info, ch = make_trace(trip=12)
    cmap = CoreMap(info, 3, "paper", paper_chunk=2)
    owner = cmap.core_of(ch)
    assert owner[:2].tolist() == [-1, -1]  # single-instance blocks: every core
    assert owner[2::3].tolist() == [(i // 2) % 3 for i in range(12)]


def test_guided_chunk_starts_hand_computed():
    """20 iterations, 3 threads, minimum chunk 2 (libomp): 20 >= 2 x 3 x 3 = 18 remain, so floor(20 / 6) = 3;
    then 17 < 18: chunks of 2. Equal-cost iterations: chunks 0-2 go to threads 0, 1, 2 (times 3, 2, 2); chunk 3
    to thread 1 (time 2, the lower id), 4 to 2, 5 to 0 (time 3), 6 to 1, 7 to 2, 8 to 0, 9 (one iteration) to 1.
    With (2c + 1)p >= trip every chunk has c iterations; chunk 0 means 1."""
    assert guided_starts(20, 3, 2).tolist() == [0, 3, 5, 7, 9, 11, 13, 15, 17, 19]
    owner, _ = core_of_iterations(SCHED_GUIDED, 2, 20, 3)
    assert owner.tolist() == [0] * 3 + [1] * 2 + [2] * 2 + [1] * 2 + [2] * 2 + [0] * 2 + [1] * 2 + [2] * 2 + [0] * 2 + [1]
    assert guided_starts(5, 8, 0).tolist() == [0, 1, 2, 3, 4]
