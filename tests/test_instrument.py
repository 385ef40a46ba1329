"""End-to-end tests of the tracer on a hand-written ROSE-style program with known accesses."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from instrument import (build_instrumented, export_text, load_block_table, load_cfg, open_trace, run_counts,
                        run_trace)
from instrument.trace_types import NO_LOOP, SCHED_BARRIER, SCHED_MASTER, SCHED_STATIC, TraceChunk
from pptmc import cli
from common.errors import InputError, RunError
from common.toolchain import toolchain

CASE = Path(__file__).parent / "instrument_cases" / "rose_kernel.c"
N = 300


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Trace, count and native builds of the test program (built once for the module)."""
    d = tmp_path_factory.mktemp("inst")
    return {m: build_instrumented(CASE, d / f"rk.{m}", mode=m) for m in ("trace", "count", "native")}


def _trace(binary: Path, out: Path, args, capfd, env=None):
    """Run the tracer and parse the symbol addresses the program prints to stderr."""
    info = run_trace(binary, [str(a) for a in args], out, env=env)
    err = capfd.readouterr().err
    addrs = {k: int(v, 16) for k, v in re.findall(r"(\w+)=0x([0-9a-f]+)", err.split("ADDR", 1)[1])}
    return info, addrs


def _all(reader) -> TraceChunk:
    parts = list(reader.chunks())
    return TraceChunk(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in TraceChunk.__dataclass_fields__})


def test_instrumented_output_equals_native(builds, tmp_path):
    plain = tmp_path / "plain"
    subprocess.run([str(toolchain().clang), "-O2", str(CASE), "-o", str(plain)], check=True)
    expected = subprocess.run([str(plain), str(N)], capture_output=True, text=True, check=True).stdout
    assert "checksum" in expected
    native = subprocess.run([str(builds["native"].binary), str(N)], capture_output=True, text=True).stdout
    assert native == expected
    out = tmp_path / "t.trace"
    proc = subprocess.run([".venv/bin/pptmc", "trace", str(builds["trace"].binary), "-o", str(out), "--", str(N)],
                          capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(expected)


def test_exact_addresses_of_known_kernel(builds, tmp_path, capfd):
    info, ad = _trace(builds["trace"].binary, tmp_path / "t.trace", [N], capfd)
    assert info.complete and info.n_threads == 1
    c = _all(open_trace(tmp_path / "t.trace"))
    assert len(c) == info.n_accesses
    A, B, C, d1, n_addr = ad["A"], ad["B"], ad["C"], ad["d1"], ad["n"]
    names = {b: i.name for b, i in info.blocks.items()}
    r0 = c.region == 0
    # shared-variable unpacking of region 0: the three struct members, in the pseudo-block
    shared = np.array([info.blocks[int(b)].is_shared_var_block for b in c.block])
    assert sorted(c.addr[r0 & shared].tolist()) == [d1, d1 + 8, d1 + 16]
    assert {names[int(b)] for b in c.block[r0 & shared]} == {"OUT__1__1__:shared_var_trace1"}
    # constructs, and a barrier record at each region's start (instrument/FORMAT.md, "Barriers"; this
    # hand-written kernel calls no XOMP_barrier)
    assert [(lp.loop_id, lp.trip_count, lp.schedule) for lp in info.loops] == [
        (-1, 1, SCHED_BARRIER), (0, N, SCHED_STATIC), (-1, 1, SCHED_BARRIER), (1, 1, SCHED_MASTER),
        (-1, 1, SCHED_BARRIER), (0, N, SCHED_STATIC)]
    work = [lp.instance for lp in info.loops if lp.schedule != SCHED_BARRIER]
    # the loop: iteration i reads A[i], A[N-1-i] and writes B[i]; nothing else
    in_loop = r0 & (c.loop == work[0])
    assert np.array_equal(np.unique(c.iteration[in_loop]), np.arange(N))
    assert np.all(np.diff(c.iteration[in_loop]) >= 0)  # iterations in order
    for i in (0, 1, N // 2, N - 1):
        sel = in_loop & (c.iteration == i)
        got = sorted(zip(c.addr[sel].tolist(), c.is_store[sel].tolist(), c.size[sel].tolist()))
        assert got == sorted([(A + 8 * i, False, 8), (A + 8 * (N - 1 - i), False, 8), (B + 8 * i, True, 8)])
    assert in_loop.sum() == 3 * N
    other = r0 & ~shared & ~np.isin(c.loop, work)
    assert c.addr[other].tolist() == [n_addr]  # the one load of *n_p before the loop
    assert c.loop[other].tolist() == [0]  # after the region's start: its barrier record
    # the master construct (region 1): private scratch is stack, C and B are not
    r1 = c.region == 1
    c_stores = r1 & (c.addr >= C) & (c.addr < C + 8 * N)
    assert sorted(c.addr[c_stores].tolist()) == sorted([C + 8 * i for i in range(N) if i % 3] + [C])
    b_loads = r1 & (c.addr >= B) & (c.addr < B + 8 * N)
    assert sorted(c.addr[b_loads].tolist()) == [B + 8 * i for i in range(N)]
    priv = r1 & c.is_stack
    assert priv.sum() >= 2 * (N // 3) and not c.is_stack[~r1 & (c.addr >= A)].any()
    assert not c.is_stack[c.addr == n_addr].any()  # main's locals are shared, not private
    # region 2 repeats region 0 exactly; each block's instances continue after region 0's
    r2 = c.region == 2
    assert np.array_equal(c.addr[r2], c.addr[r0]) and np.array_equal(c.block[r2], c.block[r0])
    per_call = np.array([info.block_counts[int(b)] // 2 for b in c.block[r0]])
    assert np.array_equal(c.block_instance[r2], c.block_instance[r0] + per_call)
    assert set(np.unique(c.region).tolist()) == {0, 1, 2}
    assert set(np.unique(c.loop[np.isin(c.loop, work)]).tolist()) == set(work)


def test_block_counts_agree_with_edges_and_count_mode(builds, tmp_path, capfd):
    info, _ = _trace(builds["trace"].binary, tmp_path / "t.trace", [N], capfd)
    cfg = load_cfg(builds["trace"].binary)
    table = load_block_table(builds["trace"].binary)
    calls = {"OUT__1__1__": 2, "OUT__2__1__": 1}
    for fname, f in cfg["functions"].items():
        assert info.block_counts[f["entry"]] == calls[fname]
        for b in f["blocks"]:
            inc = sum(n for (s, t), n in info.edge_counts.items() if t == b)
            out = sum(n for (s, t), n in info.edge_counts.items() if s == b)
            static_out = [e for e in f["edges"] if e[0] == b]
            if b != f["entry"]:
                assert info.block_counts[b] == inc, table[b].name
            if static_out:
                assert info.block_counts[b] == out, table[b].name
        assert all([s, t] in f["edges"] for (s, t) in info.edge_counts if s in f["blocks"])
    # count mode leaves xomp_trace_enabled at 0 like the real build, so only the marker-call
    # blocks differ; every block that touches memory runs equally often
    counted = run_counts(builds["count"].binary, [N])
    mem_blocks = [b for b, e in table.blocks.items() if e.ops["load"] + e.ops["store"] > 0]
    assert len(mem_blocks) > 5
    assert all(counted.block_counts[b] == info.block_counts[b] for b in mem_blocks)
    for fname, f in cfg["functions"].items():
        for b in f["blocks"]:
            if b != f["entry"]:
                assert counted.block_counts[b] == sum(n for (s, t), n in counted.edge_counts.items() if t == b)
    assert builds["count"].table_hash == builds["trace"].table_hash
    # block instances: every access's instance is below its block's count
    c = _all(open_trace(tmp_path / "t.trace"))
    for b in np.unique(c.block):
        assert c.block_instance[c.block == b].max() < info.block_counts[int(b)]


def test_small_chunks_decode_identically(builds, tmp_path, capfd):
    """Chunk boundaries must not change any decoded column (state carries across chunks)."""
    big, ad1 = _trace(builds["trace"].binary, tmp_path / "a.trace", [2000], capfd)
    small, ad2 = _trace(builds["trace"].binary, tmp_path / "b.trace", [2000], capfd,
                        env={**os.environ, "PPTMC_CHUNK_BYTES": "4096"})
    assert small.extra["n_chunks"] > 5 and big.extra["n_chunks"] == 1
    a, b = _all(open_trace(tmp_path / "a.trace")), _all(open_trace(tmp_path / "b.trace"))
    for k in TraceChunk.__dataclass_fields__:
        if k != "addr":
            assert np.array_equal(getattr(a, k), getattr(b, k)), k

    def rel(c, ad):
        glob = c.addr < ad["d1"] - (1 << 32)  # globals lie far below the stack
        return np.where(glob, c.addr - ad["A"], c.addr - ad["d1"])
    assert np.array_equal(rel(a, ad1), rel(b, ad2))
    # re-streaming with a small max_rows yields the same rows
    rows = list(open_trace(tmp_path / "b.trace").chunks(max_rows=100))
    assert all(len(r) <= 100 for r in rows)
    assert np.array_equal(np.concatenate([r.addr for r in rows]), b.addr)


def test_chosen_columns_decode_identically(builds, tmp_path, capfd):
    """chunks(columns=...): the chosen columns (and addr) equal the full decode's, in the same batches; the
    others are zeros; an unknown column is refused."""
    _trace(builds["trace"].binary, tmp_path / "a.trace", [2000], capfd,
           env={**os.environ, "PPTMC_CHUNK_BYTES": "4096"})
    reader = open_trace(tmp_path / "a.trace")
    full = list(reader.chunks(max_rows=300))
    for cols in (("loop", "iteration", "is_stack", "is_store"), ("block", "block_instance", "thread"), ()):
        part = list(reader.chunks(max_rows=300, columns=cols))
        assert [len(c) for c in part] == [len(c) for c in full] and len(full) > 3
        for a, b in zip(full, part):
            for k in TraceChunk.__dataclass_fields__:
                want = getattr(a, k) if k in cols or k == "addr" else np.zeros(len(a), getattr(a, k).dtype)
                assert getattr(b, k).dtype == want.dtype and np.array_equal(getattr(b, k), want), k
    assert any(c.block_instance.any() and c.is_stack.any() and c.is_store.any() for c in full)
    with pytest.raises(ValueError, match="unknown trace columns"):
        list(reader.chunks(columns=("adress",)))


def test_truncated_and_corrupt_traces(builds, tmp_path, capfd):
    _trace(builds["trace"].binary, tmp_path / "t.trace", [N], capfd)
    data = (tmp_path / "t.trace").read_bytes()
    cut = tmp_path / "cut.trace"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"cut\.trace.*truncated"):
        open_trace(cut)
    bad = bytearray(data)
    reader = open_trace(tmp_path / "t.trace")
    hdr, _ = next(reader.disk_chunks())
    pos = hdr.offset + 88 + hdr.comp_len // 2
    bad[pos] ^= 0xFF
    corrupt = tmp_path / "bad.trace"
    corrupt.write_bytes(bytes(bad))
    with pytest.raises(InputError, match=r"bad\.trace: chunk 0 .*corrupt"):
        list(open_trace(corrupt).chunks())
    with pytest.raises(InputError, match="not a pptmc trace"):
        open_trace(CASE)


@pytest.mark.parametrize("how,expect", [("crash", "SIGSEGV"), ("fail", "status 3")])
def test_failed_run_leaves_incomplete_trace(builds, tmp_path, how, expect):
    out = tmp_path / "t.trace"
    with pytest.raises(RunError, match=f"{expect}.*marked incomplete"):
        run_trace(builds["trace"].binary, [str(N), how], out)
    info = open_trace(out).info
    assert not info.complete and expect in info.extra["reason"]
    rows = sum(len(c) for c in open_trace(out).chunks())
    assert rows == info.n_accesses
    # "fail" exits after the regions; "crash" raises SIGSEGV inside region 1, and the runtime's
    # handler still writes region 0 and region 1's accesses up to the crash, with the counts
    assert rows > 3 * N and info.edge_counts


def test_export_and_cli(builds, tmp_path, capfd):
    info, _ = _trace(builds["trace"].binary, tmp_path / "t.trace", [20], capfd)
    txt = tmp_path / "t.txt"
    assert export_text(tmp_path / "t.trace", txt) == info.n_accesses
    lines = txt.read_text().splitlines()
    assert lines[0] == "BB_START OUT__1__1__:shared_var_trace1"
    assert sum(1 for ln in lines if ln.startswith("0x")) == info.n_accesses
    assert sum(ln.startswith("BB_START") for ln in lines) == sum(ln.startswith("BB_END") for ln in lines)
    assert cli.run(["trace-info", str(tmp_path / "t.trace"), "--json"]) == 0
    assert '"complete": true' in capfd.readouterr().out
    out = tmp_path / "c.csv"
    assert cli.run(["count", str(builds["count"].binary), "-o", str(out), "--", "20"]) == 0
    assert out.read_text().startswith("kind,from,to,count")
    with pytest.raises(InputError, match="built in 'count' mode"):
        run_trace(builds["count"].binary, ["5"], tmp_path / "x.trace")


def test_side_files(builds):
    table = load_block_table(builds["trace"].binary)
    body = [b for b in table.blocks.values() if b.function == "OUT__1__1__" and b.ops["store"] == 1]
    assert len(body) == 1 and body[0].ops["load"] == 2 and body[0].ops["fp_add"] == 1
    assert body[0].ops["load_bytes"] == 16 and body[0].ops["store_bytes"] == 8
    shared = [b for b in table.blocks.values() if b.is_shared_var_block]
    assert [(b.function, b.label, b.ops["load"]) for b in shared] == [
        ("OUT__1__1__", "shared_var_trace1", 3), ("OUT__2__1__", "shared_var_trace2", 2)]
    cfg = load_cfg(builds["trace"].binary)
    assert cfg["version"] == 1 and set(cfg["functions"]) == {"OUT__1__1__", "OUT__2__1__"}


def test_bad_inputs(tmp_path):
    with pytest.raises(InputError, match="no such C file"):
        build_instrumented(tmp_path / "nope.c", tmp_path / "x")
    with pytest.raises(InputError, match="no defined function matches"):
        build_instrumented(CASE, tmp_path / "x", functions="^nothing_here")
    broken = tmp_path / "broken.c"
    broken.write_text("int main( { return 0; }\n")
    with pytest.raises(InputError, match="broken.c"):
        build_instrumented(broken, tmp_path / "x")


def test_nested_instrumented_call_keeps_program_order(tmp_path, capfd):
    """Accesses before, inside and after a call to another instrumented function stay in order."""
    case = CASE.parent / "nested_calls.c"
    binary = build_instrumented(case, tmp_path / "nested", functions=r"^OUT__").binary
    n = 50
    info, ad = _trace(binary, tmp_path / "n.trace", [n], capfd)
    c = _all(open_trace(tmp_path / "n.trace"))
    A, B, C = ad["A"], ad["B"], ad["C"]
    glob = c.addr < A + (1 << 30)
    got = list(zip(c.addr[glob].tolist(), c.is_store[glob].tolist()))
    expected = []
    for i in range(n):
        expected += [(A + 8 * i, False), (A + 8 * i, True), (B + 8 * i, True)]
        expected += [(C + 8 * i, True)]
    # the optimiser may keep A[i] in a register and reload B[i] or not; compare as the program
    # must order them: A load/store, then the helper's B store, then the C store
    keep = [(a, s) for a, s in got if not (B <= a < B + 8 * n and not s)]
    assert keep == expected
    assert set(np.unique(c.region).tolist()) == {0}
    helper = [b for b, i in info.blocks.items() if i.function == "OUT__helper"]
    assert helper and all(info.block_counts[b] == n for b in helper)


def test_irregular_addresses_exact(tmp_path, capfd):
    """A gather through a pseudo-random index array decodes to exactly the program's addresses."""
    binary = build_instrumented(CASE.parent / "gather.c", tmp_path / "gather").binary
    n = 3000
    info, ad = _trace(binary, tmp_path / "g.trace", [n], capfd)
    x, idx = 12345, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) % (1 << 32)
        idx.append((x >> 8) % 1024)
    c = _all(open_trace(tmp_path / "g.trace"))
    loads = c.addr[~c.is_store].tolist()
    t_loads = [a for a, z in zip(loads, c.size[~c.is_store].tolist()) if ad["T"] <= a < ad["T"] + 8 * 1024 and z == 8]
    i_loads = [a for a in loads if ad["idx"] <= a < ad["idx"] + 4 * 4096]
    assert t_loads == [ad["T"] + 8 * i for i in idx]
    assert i_loads == [ad["idx"] + 4 * i for i in range(n)]
    # the region ends with the store to T[0], memcpy(D, T, 512) and memset(E, 0, 8n)
    tail = list(zip(c.addr[-4:].tolist(), c.size[-4:].tolist(), c.is_store[-4:].tolist()))
    assert tail[0] == (ad["T"], 8, True)
    assert sorted(tail[1:3]) == sorted([(ad["T"], 512, False), (ad["D"], 512, True)])
    assert tail[3] == (ad["E"], 8 * n, True)
    # plus the read of *arg, which the pass files under the shared-variable pseudo-block
    shared = [b for b, i in info.blocks.items() if i.is_shared_var_block]
    assert int(np.isin(c.block, shared).sum()) == 1
    assert info.n_accesses == len(c) == 2 * n + 2 + 3


def test_openmp_program_gives_per_thread_streams(tmp_path, capfd):
    """Tracing clang's outlined region with 2 threads: each thread's rows carry its id and region 0."""
    binary = build_instrumented(CASE.parent / "omp_static.c", tmp_path / "omp", functions=r"\.omp_outlined").binary
    n = 10000
    info = run_trace(binary, [str(n)], tmp_path / "o.trace", threads=2)
    x = int(re.search(r"X=0x([0-9a-f]+)", capfd.readouterr().err).group(1), 16)
    c = _all(open_trace(tmp_path / "o.trace"))
    assert info.n_threads == 2 and set(np.unique(c.thread).tolist()) == {0, 1}
    assert set(np.unique(c.region).tolist()) == {0}
    covered = {}
    for t in (0, 1):  # element indices each thread wrote (stores may be vectors)
        sel = c.is_store & (c.thread == t)
        covered[t] = sorted((a - x) // 8 + j for a, sz in zip(c.addr[sel].tolist(), c.size[sel].tolist())
                            for j in range(sz // 8))
    halves = [list(range(0, n // 2)), list(range(n // 2, n))]
    assert sorted([covered[0], covered[1]]) == halves  # static schedule: one contiguous half each


CRASH = CASE.parent / "crash.c"
SMALL_CHUNKS = {"PPTMC_CHUNK_BYTES": "4096"}


@pytest.fixture(scope="module")
def crash_binary(tmp_path_factory):
    """crash.c: the region stores A[i] for i < n, then ends the way its second argument says."""
    return build_instrumented(CRASH, tmp_path_factory.mktemp("crash") / "crash").binary


def _stores_into_a(c: TraceChunk, a: int) -> list[int]:
    """Addresses of the 8-byte stores into crash.c's array A, in trace order."""
    sel = c.is_store & (c.addr >= a) & (c.addr < a + 8 * 100000)
    return c.addr[sel].tolist()


def _crash_run(binary, out, args, capfd, match, env=None, threads=1):
    """run_trace must fail with a RunError matching `match`; returns (info, rows, printed addresses)."""
    with pytest.raises(RunError, match=match):
        run_trace(binary, [str(x) for x in args], out, threads=threads, env={**os.environ, **(env or {})})
    ad = {k: int(v, 16) for k, v in re.findall(r"(\w+)=0x([0-9a-f]+)", capfd.readouterr().err)}
    info = open_trace(out).info
    c = _all(open_trace(out))
    assert not info.complete and len(c) == info.n_accesses
    return info, c, ad


@pytest.mark.parametrize("mode,sig,env", [
    ("segv", "SIGSEGV", SMALL_CHUNKS), ("segv", "SIGSEGV", None), ("stack", "SIGSEGV", SMALL_CHUNKS),
    ("fpe", "SIGFPE", SMALL_CHUNKS), ("ill", "SIGILL", SMALL_CHUNKS), ("abrt", "SIGABRT", SMALL_CHUNKS),
    ("term", "SIGTERM", SMALL_CHUNKS)])
def test_fatal_signal_flushes_every_event(crash_binary, tmp_path, capfd, mode, sig, env):
    """The signal handler writes the queued chunks and the thread's buffer; nothing before the crash is lost."""
    n = 3000
    info, c, ad = _crash_run(crash_binary, tmp_path / "c.trace", [n, mode], capfd,
                             rf"killed by {sig}; {sig} in traced thread 0: .*marked incomplete", env)
    assert _stores_into_a(c, ad["A"]) == [ad["A"] + 8 * i for i in range(n)]
    assert sig in info.extra["reason"] and info.extra["exit_status"] < 0
    assert info.edge_counts and max(info.block_counts.values()) == n  # the runtime's counts are kept
    assert info.extra["n_chunks"] > (3 if env else 0)  # small chunks: queued ones and the thread's own


def test_sigkill_keeps_the_flushed_chunks(crash_binary, tmp_path, capfd):
    """SIGKILL cannot be caught: the trace keeps the chunks already written and says what is lost."""
    n = 3000
    info, c, ad = _crash_run(crash_binary, tmp_path / "k.trace", [n, "kill"], capfd,
                             r"SIGKILL; SIGKILL cannot be caught.*events after the last flushed chunk .*lost",
                             SMALL_CHUNKS)
    stores = _stores_into_a(c, ad["A"])
    # a thread waits for its previous buffer to be written before filling the next, so all but
    # the last two buffers (512 words each, one block entry per iteration) reached the file
    assert n - 2 * 512 <= len(stores) < n
    assert stores == [ad["A"] + 8 * i for i in range(len(stores))]
    assert info.edge_counts == {} and "SIGKILL" in info.extra["reason"]


@pytest.mark.parametrize("mode,status", [("_exit", 5), ("exit", 4)])
def test_exit_inside_region_keeps_every_event(crash_binary, tmp_path, capfd, mode, status):
    """exit() runs the runtime's destructor, _exit() its interposed flush: both keep every access."""
    n = 3000
    info, c, ad = _crash_run(crash_binary, tmp_path / "e.trace", [n, mode], capfd, rf"status {status}",
                             SMALL_CHUNKS)
    assert _stores_into_a(c, ad["A"]) == [ad["A"] + 8 * i for i in range(n)]
    assert info.extra["exit_status"] == status and info.edge_counts
    assert ("_exit(5) in traced thread 0" in info.extra["reason"]) == (mode == "_exit")


def test_exit0_after_the_region_gives_a_complete_trace(crash_binary, tmp_path, capfd):
    """_exit(0) outside any region with nothing left in other threads loses nothing."""
    n = 3000
    info = run_trace(crash_binary, [str(n), "_exit0"], tmp_path / "z.trace", env={**os.environ, **SMALL_CHUNKS})
    a = int(re.search(r"A=0x([0-9a-f]+)", capfd.readouterr().err).group(1), 16)
    c = _all(open_trace(tmp_path / "z.trace"))
    assert info.complete and len(c) == info.n_accesses == n + 2  # plus the two shared-variable loads
    assert _stores_into_a(c, a) == [a + 8 * i for i in range(n)]


def test_crash_in_one_thread_keeps_its_own_events(tmp_path, capfd):
    """Thread 1 crashes after its half of the loop: its stores are all there; thread 0's buffer is lost."""
    binary = build_instrumented(CASE.parent / "omp_static.c", tmp_path / "ompc", functions=r"\.omp_outlined").binary
    n = 10000
    info, c, ad = _crash_run(binary, tmp_path / "oc.trace", [n, "crash"], capfd,
                             r"SIGSEGV in traced thread 1: .* 1 other thread\(s\) had events still in memory",
                             threads=2)
    sel = c.is_store & (c.thread == 1) & (c.addr >= ad["X"]) & (c.addr < ad["X"] + 8 * n)
    covered = sorted((a - ad["X"]) // 8 + j for a, sz in zip(c.addr[sel].tolist(), c.size[sel].tolist())
                     for j in range(sz // 8))
    assert covered == list(range(n // 2, n))
    assert info.extra["lost_threads"] == 1


MASKED_KINDS = {f"masked.{k}" for k in ("load", "store", "gather", "scatter", "expandload", "compressstore")}


@pytest.fixture(scope="module")
def masked_lanes_binary(tmp_path_factory):
    """masked_lanes.ll: each llvm.masked.* intrinsic on 4 doubles, mask = argv[1]'s low 4 bits."""
    return build_instrumented(CASE.parent / "masked_lanes.ll", tmp_path_factory.mktemp("ml") / "ml").binary


@pytest.mark.parametrize("bits", [0b1011, 0b0100, 0])
def test_masked_intrinsics_log_each_active_lane(masked_lanes_binary, tmp_path, capfd, bits):
    """One 8-byte access per active lane, at the lane's address; inactive lanes leave no row."""
    kinds = {s["kind"] for s in load_block_table(masked_lanes_binary).sites}
    assert MASKED_KINDS <= kinds  # -O2 kept every intrinsic, so each is checked below
    info, ad = _trace(masked_lanes_binary, tmp_path / "m.trace", [bits], capfd)
    c = _all(open_trace(tmp_path / "m.trace"))
    a, b = ad["A"], ad["B"]
    sel = ((c.addr >= a) & (c.addr < a + 512)) | ((c.addr >= b) & (c.addr < b + 512))
    got = list(zip(c.addr[sel].tolist(), c.size[sel].tolist(), c.is_store[sel].tolist()))
    on = [k for k in range(4) if bits >> k & 1]
    gather, scatter = [7, 3, 12, 1], [20, 30, 25, 21]
    expected = ([(a + 8 * k, 8, False) for k in on] + [(b + 32 + 8 * k, 8, True) for k in on]
                + [(a + 8 * gather[k], 8, False) for k in on] + [(b + 8 * scatter[k], 8, True) for k in on]
                + [(a + 128 + 8 * r, 8, False) for r in range(len(on))]
                + [(b + 256 + 8 * r, 8, True) for r in range(len(on))]
                + [(b + 8 * scatter[k], 8, False) for k in (0, 2, 3)]  # the constant-mask gather
                + [(b + 384, 32, True)])
    assert got == expected
    # plus the shared-variable load of *arg and the volatile load of @pa
    assert info.complete and info.n_accesses == len(c) == len(expected) + 2


def _cpu_has(flag: str) -> bool:
    """Whether /proc/cpuinfo lists `flag` (False where there is no /proc)."""
    try:
        return flag in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False


@pytest.mark.skipif(not _cpu_has("avx2"), reason="masked.c is vectorised for AVX2")
def test_clang_masked_load_store_and_gather_are_traced(tmp_path, capfd):
    """clang-19 -O2 emits masked.load/store (AVX2) and masked.gather (Skylake tuning) for masked.c."""
    binary = build_instrumented(CASE.parent / "masked.c", tmp_path / "masked").binary
    kinds = {s["kind"] for s in load_block_table(binary).sites}
    assert {"masked.load", "masked.store", "masked.gather"} <= kinds
    n = 1001
    info, ad = _trace(binary, tmp_path / "k.trace", [n], capfd)
    x, cond, idx = 12345, [], []
    for _ in range(n):
        x = (x * 1103515245 + 12345) % (1 << 32)
        cond.append((x >> 12) % 3 == 0)
        idx.append((x >> 8) % 1024)
    c = _all(open_trace(tmp_path / "k.trace"))
    assert info.complete and info.n_accesses == len(c)

    def addrs(region, base, store):
        sel = (c.region == region) & (c.is_store == store) & (c.addr >= base) & (c.addr < base + 8 * 4096)
        return c.addr[sel].tolist()
    assert addrs(0, ad["A"], True) == [ad["A"] + 8 * i for i in range(n) if cond[i]]
    assert addrs(0, ad["B"], False) == [ad["B"] + 8 * i for i in range(n) if cond[i]]
    assert addrs(1, ad["T"], False) == [ad["T"] + 8 * i for i in idx]


def _export_oracle(trace: Path) -> str:
    """The paper's text format built row by row in plain Python: the independent oracle."""
    reader = open_trace(trace)
    names = {b: i.name for b, i in reader.info.blocks.items()}
    lines, prev = [], None
    for c in reader.chunks():
        for i in range(len(c)):
            key = (int(c.block[i]), int(c.block_instance[i]), int(c.thread[i]))
            if key != prev:
                if prev is not None:
                    lines.append(f"BB_END {names[prev[0]]}")
                lines.append(f"BB_START {names[key[0]]}")
                prev = key
            lines.append(f"{hex(int(c.addr[i]))} {'S' if c.is_store[i] else 'L'} {int(c.size[i])}")
    if prev is not None:
        lines.append(f"BB_END {names[prev[0]]}")
    return "\n".join(lines) + "\n"


def test_export_matches_row_by_row_oracle(builds, tmp_path, capfd):
    """Vectorised export = the per-row oracle, for any batch size, across blocks, instances and threads."""
    _trace(builds["trace"].binary, tmp_path / "r.trace", [50], capfd)
    omp = build_instrumented(CASE.parent / "omp_static.c", tmp_path / "omp", functions=r"\.omp_outlined").binary
    run_trace(omp, ["300"], tmp_path / "o.trace", threads=2)
    for trace in (tmp_path / "r.trace", tmp_path / "o.trace"):
        expected = _export_oracle(trace)
        assert expected.count("BB_START") > 3
        for max_rows in (1, 7, 1 << 20):
            out = tmp_path / f"{trace.stem}.{max_rows}.txt"
            assert export_text(trace, out, max_rows=max_rows) == open_trace(trace).info.n_accesses
            assert out.read_text() == expected


def test_damaged_chunk_is_cut_even_with_a_runtime_footer(crash_binary, tmp_path):
    """mark_incomplete verifies every chunk: a damaged one and all after it are dropped, counts rebuilt."""
    from instrument.tracefile import mark_incomplete
    out = tmp_path / "d.trace"
    with pytest.raises(RunError, match="status 4"):
        run_trace(crash_binary, ["3000", "exit"], out, env={**os.environ, **SMALL_CHUNKS})
    headers = [h for h, _ in open_trace(out).disk_chunks()]
    assert len(headers) > 4
    data = bytearray(out.read_bytes())
    data[headers[2].offset + 88 + headers[2].comp_len // 2] ^= 0xFF
    out.write_bytes(bytes(data))
    reason = mark_incomplete(out, "test", 4)
    assert f"chunk at byte {headers[2].offset} is damaged" in reason
    info = open_trace(out).info
    rows = sum(len(c) for c in open_trace(out).chunks())
    assert info.extra["n_chunks"] == 2 and rows == info.n_accesses and info.edge_counts == {}
