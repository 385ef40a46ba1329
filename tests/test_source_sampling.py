"""Source sampling (analysis/sampling/source.py) against exact oracles: the exact ProfileSet at rate 1,
the real interleaver for the merge order, brute-force window segments, and exact hit rates below rate 1."""
from __future__ import annotations

import json

import numpy as np
import pytest

from analysis.profiles.handouts import chunk_costs
from analysis.sampling import core_runs as CR, source as SS, source_rows as SR
from analysis.sampling.near import windows as W
from analysis.sampling.binning import scale_profile
from analysis.profiles.interleave import interleave_arrays
from analysis.profiles.private_traces import ALL_CORES
from analysis.profiles.sweep import compute_profiles_from
from analysis.profiles.profileset import ProfileSet
from instrument.trace_types import (CHUNK_DTYPES, NO_LOOP, SCHED_DYNAMIC, SCHED_GUIDED, SCHED_STATIC, BlockInfo,
                                    LoopInstance, TraceChunk, TraceInfo)
from common.errors import InputError
from fake_source import fake_source_traces  # noqa: F401 (fixture)
from test_private_traces import chunker
from tracerows import chunk_from_rows

CORES = [1, 2, 3, 4, 8, 16]


def random_trace(seed: int, n_iters: int, loops: bool, schedule: int, chunk: int = 0, n_loops: int = 2):
    """Regions with replicated (outside-loop) and work-shared accesses, stores, stack and shared data."""
    rng = np.random.default_rng(seed)
    blocks = {0: BlockInfo(0, "OUT__1", "entry", False), 1: BlockInfo(1, "OUT__1", "shared_var_trace1", True),
              2: BlockInfo(2, "OUT__1", "for.body", False)}
    rows, loop_table, inst = [], [], {0: -1, 1: -1, 2: -1}
    for lp in range(n_loops):
        for b, addr, stack in ((0, 0x7FF000, True), (1, 0x200000 + 64 * int(rng.integers(0, 4)), False)):
            inst[b] += 1
            rows.append((addr, bool(rng.random() < 0.5), b, inst[b], NO_LOOP, -1, stack))
        loop_table.append(LoopInstance(lp, 0, n_iters, schedule, chunk))
        for it in range(n_iters):
            inst[2] += 1
            for _ in range(int(rng.integers(1, 6))):
                stack = bool(rng.random() < 0.15)
                addr = 0x7FF000 - 64 * int(rng.integers(0, 3)) if stack else 0x100000 + 64 * int(rng.integers(0, 40))
                rows.append((addr + int(rng.integers(0, 64)), bool(rng.random() < 0.3), 2, inst[2], lp, it, stack))
            if rng.random() < 0.5:
                inst[1] += 1
                rows.append((0x200000 + 64 * int(rng.integers(0, 2)), bool(rng.random() < 0.5), 1, inst[1], lp, it,
                             False))
    ch = chunk_from_rows(rows)
    info = TraceInfo("synthetic.trace", 1, "prog", [], True, len(ch), blocks, {b: n + 1 for b, n in inst.items()},
                     loops=loop_table if loops else [])
    return info, ch


def same(a, b) -> bool:
    """Bit-identical profiles (bins, sums, cold, total, coherence misses)."""
    return (a.cold, a.total, a.coherence) == (b.cold, b.total, b.coherence) and a.lower.tolist() == b.lower.tolist() \
        and a.upper.tolist() == b.upper.tolist() and a.count.tolist() == b.count.tolist() \
        and a.dist_sum.tolist() == b.dist_sum.tolist()


def source_set(info, factory, cores, mode, k, coherence, sampling):
    """The source-sampled ProfileSet's profiles as {(kind, p, c): profile}."""
    res = SS.source_profiles(info, factory(), cores, sampling, mode, k, 64, 0, coherence,
                             costs=chunk_costs(info, factory, mode))
    out = {}
    for p, (prd, crd) in zip(cores, res):
        out.update({("prd", p, c): x for c, x in enumerate(prd)})
        out[("crd", p, -1)] = crd
    return out


def exact_set(info, factory, cores, mode, k, coherence):
    ps = compute_profiles_from(info, factory, cores, mode, "rr", 0, k, 64, paper_chunk=0, coherence=coherence)
    return {**{("prd", p, c): x for (p, c), x in ps.prd.items()}, **{("crd", p, -1): x for p, x in ps.crd.items()}}


@pytest.mark.parametrize("mode", ["iteration", "paper"])
@pytest.mark.parametrize("schedule,chunk", [(SCHED_STATIC, 0), (SCHED_STATIC, 3), (SCHED_DYNAMIC, 2),
                                            (SCHED_GUIDED, 1)])
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("coherence", [True, False])
@pytest.mark.parametrize("rows", [1, 13, 10_000])
def test_full_rate_equals_exact_profile_set(mode, schedule, chunk, k, coherence, rows):
    """Rate 1 keeps every line: every PRD and CRD (coherence misses included) is the exact engine's, bit for
    bit, for every core count, schedule, turn size and chunking."""
    info, ch = random_trace(7 + rows, 40, mode == "iteration", schedule, chunk)
    factory = chunker(ch, rows)
    got = source_set(info, factory, CORES, mode, k, coherence, SS.SourceSampling(1.0, seed=3))
    want = exact_set(info, factory, CORES, mode, k, coherence)
    assert got.keys() == want.keys()
    bad = [key for key in want if not same(got[key], want[key])]
    assert not bad
    if coherence and mode == "iteration":
        assert sum(want[key].coherence for key in want) > 0  # the case exercises coherence misses


@pytest.mark.parametrize("p,k", [(2, 1), (3, 1), (4, 3), (5, 2)])
def test_merge_key_is_the_round_robin_order(p, k):
    """The (turn, core, position) key sorts accesses into the real Interleaver's order, for any lengths."""
    from analysis.sampling.shards.shards_kernel import rr_key

    rng = np.random.default_rng(p * 10 + k)
    for _ in range(20):
        lengths = rng.integers(0, 30, p)
        private = [np.arange(n, dtype=np.uint64) + np.uint64(1000 * c) for c, n in enumerate(lengths)]
        want, _ = interleave_arrays(private, "rr", refs_per_turn=k)
        core = np.concatenate([np.full(n, c, np.int64) for c, n in enumerate(lengths)])
        pos = np.concatenate([np.arange(n, dtype=np.int64) for n in lengths])
        keys = np.array([rr_key(int(x), int(c), p, k) for x, c in zip(pos, core)], np.int64)
        order = np.argsort(keys, kind="stable")
        assert (pos[order] + 1000 * core[order]).tolist() == want.tolist()


def brute_pieces(starts, run_core, counters, p, next_start, period, length, look):
    """Row by row: (core, row, private position, window start) of every row inside a window segment."""
    out = []
    pos = list(counters)
    for r in range(len(run_core)):
        cores = range(p) if run_core[r] == ALL_CORES else [run_core[r]]
        for c in cores:
            for row in range(starts[r], starts[r + 1]):
                q = pos[c]
                w = next_start[c]
                while q >= w + length:
                    w += period
                if max(w - look, 0) <= q:
                    out.append((c, row, q, w))
                pos[c] += 1
    return sorted(out)


def test_paper_span_is_where_the_core_changes():
    """_paper_span(x) is the first instance after x that Algorithm 1 gives another core (or never)."""
    from analysis.profiles.private_traces import paper_core

    for n in (1, 3, 7, 16, 100, 1001):
        count = np.array([n], np.int64)
        for p in (2, 3, 4, 16):
            for pc in (0, 1, 3):
                cores = [paper_core(0, x, count, pc, p) for x in range(n + 5)]
                for x in range(n + 5):
                    end = CR.paper_span(0, x, count, pc, p)
                    later = [y for y in range(x + 1, n + 5) if cores[y] != cores[x]]
                    assert end == (later[0] if later else end) and (later or end > n + 4)
                    assert all(cores[y] == cores[x] for y in range(x, min(end, n + 5)))


def test_static_span_is_the_core_s_block_of_iterations():
    """_static_span(it) is the block of iterations a static schedule without chunk gives its core (the first
    trip % p cores one more), checked against private_traces.static_core per iteration; other schedules and
    rows outside loops get no span."""
    from analysis.profiles.private_traces import static_core

    for trip in range(0, 41):
        for p in (1, 2, 3, 4, 7, 16, 17):
            t = np.array([trip, trip, trip], np.int64)
            sched = np.array([SCHED_STATIC, SCHED_STATIC, SCHED_DYNAMIC], np.int64)
            chunk = np.array([0, 3, 0], np.int64)
            cores = [static_core(it, trip, p) for it in range(trip)]
            for it in range(trip):
                lo, hi = CR.static_span(0, it, t, sched, chunk, p)
                assert lo <= it < hi and [c for c in cores if c == cores[it]] == cores[lo:hi]
                assert CR.static_span(1, it, t, sched, chunk, p) == (0, 0)
                assert CR.static_span(2, it, t, sched, chunk, p) == (0, 0)
            assert CR.static_span(-1, 0, t, sched, chunk, p) == (0, 0)


def test_walk_segment_matches_brute_force():
    """In-segment distances (distinct lines since the previous use) for gaps within `look`, -1 otherwise."""
    rng = np.random.default_rng(4)
    lens = rng.integers(1, 200, 30)  # several bitset words
    bounds = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    lines = rng.integers(0, 90, int(bounds[-1])).astype(np.uint64)
    pos = np.cumsum(rng.integers(1, 3, lines.shape[0])).astype(np.int64)
    look = 150  # gaps across several bitset words
    want = []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        for i in range(a, b):
            prev = next((j for j in range(i - 1, a - 1, -1) if lines[j] == lines[i]), None)
            ok = prev is not None and pos[i] - pos[prev] <= look
            want.append(len(set(lines[prev + 1:i].tolist())) if ok else -1)
    table = W.walk_table(256, int(lens.max()))
    got = np.zeros(lines.shape[0], np.int64)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # one table, a stamp each
        W.walk_segment(lines, a, b - a, pos, look, table, got)
    assert got.tolist() == want and (got > 0).sum() > 50
    firsts = rng.integers(0, lens + 1)  # a lookback of `first` accesses: not measured, but still the history
    got[:] = 7
    for a, b, first in zip(bounds[:-1].tolist(), bounds[1:].tolist(), firsts.tolist()):
        W.walk_segment(lines, a, b - a, pos, look, table, got, first)
        assert got[a + first:b].tolist() == want[a + first:b]


def test_window_pieces_match_brute_force():
    """The run-level window arithmetic selects exactly the rows a row-by-row walk puts in each segment."""
    rng = np.random.default_rng(5)
    for _ in range(40):
        p = int(rng.integers(1, 5))
        lens = rng.integers(1, 40, int(rng.integers(1, 12)))
        starts = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        run_core = rng.integers(-1, p, lens.shape[0]).astype(np.int64)
        counters = rng.integers(0, 50, p).astype(np.int64)
        length, look = int(rng.integers(1, 6)), int(rng.integers(0, 8))
        period = length + look + int(rng.integers(0, 10))
        first = int(rng.integers(0, period))
        next_start = np.full(p, first, np.int64)
        while True:  # the task keeps next_start at the first window whose segment has not ended
            ends = next_start + length <= counters
            if not ends.any():
                break
            next_start[ends] += period
        want = brute_pieces(starts, run_core, counters, p, next_start.tolist(), period, length, look)
        out = np.zeros((500, 6), np.int64)
        n = CR.window_pieces(starts, run_core, counters, p, CR.WindowGrid(next_start.copy(), period, length, look),
                             out)
        got = sorted((c, row, int(pos + row - ra), w) for c, ra, rb, pos, _, w in out[:n].tolist()
                     for row in range(ra, rb))
        assert got == want


@pytest.mark.parametrize("look", [0, 7, 300])
def test_fused_stacks_match_brute_force(look):
    """The fused kernel's private stack (through table and axis growth, in batches that stop and resume):
    every distance is the exact engine's, and the window tallies split the samples by their gap in private
    positions to the previous use of the line (a direct scan) at `look`."""
    from analysis.profiles.reuse import ReuseEngine
    from analysis.sampling.shards.shards_kernel import PairBatch, ShardsStreams

    rng = np.random.default_rng(2 + look)
    n = 30_000
    lines = np.concatenate([rng.integers(0, 40, n // 2), rng.integers(0, 3000, n // 2)]).astype(np.uint64)
    rows = np.sort(rng.choice(10 * n, n, replace=False)).astype(np.int64)  # sampled rows of a 10n-row trace
    last: dict[int, int] = {}
    gaps = []
    for x, q in zip(lines.tolist(), rows.tolist()):
        gaps.append(q - last[x] if x in last else -1)
        last[x] = q
    gaps = np.array(gaps)
    dist = ReuseEngine().feed_distances(lines)
    s = ShardsStreams(1, 1, False, True, look, False, 0)
    counters = np.zeros(1, np.int64)
    for a in range(0, 10 * n, 7777):  # batches of rows, one run each
        b = min(a + 7777, 10 * n)
        j = (rows >= a) & (rows < b)
        s.feed(PairBatch(rows[j] - a, lines[j], np.zeros(int(j.sum()), bool), np.zeros(int(j.sum()), bool),
                         np.array([0, b - a], np.int64), np.zeros(1, np.int64), np.uint64(30)), counters)
    assert counters.tolist() == [10 * n]
    assert same(s.private.profile(0), _engine_profile(lines))
    near = (gaps >= 0) & (gaps <= look)
    assert s.tally[0].tolist() == [int(near.sum()), 0, 0]
    [(keys, counts)], _ = s.tails()
    want_keys, want_counts = np.unique(dist[~near], return_counts=True)
    assert keys.tolist() == want_keys.tolist() and counts.tolist() == want_counts.tolist()


def _engine_profile(lines):
    """The exact engine's profile of a stream."""
    from analysis.profiles.reuse import ReuseEngine

    e = ReuseEngine()
    e.feed(lines)
    return e.histogram()


def workload(n_blocks: int = 6, seed: int = 0):
    """A work-shared loop nest: per iteration a hot private stack slot, a row of a shared matrix, a vector and
    random gathers (about 330K accesses; reuses from a few lines to beyond the largest test cache)."""
    rng = np.random.default_rng(seed)
    rows_n, cols_n = 96, 160
    addr, loop, it, stack, store = [], [], [], [], []
    for lp in range(n_blocks):
        for i in range(rows_n):
            a = (1 << 30) + (i * cols_n + np.arange(cols_n)) * 8 * 4
            x = (2 << 30) + np.arange(cols_n) * 8
            g = (3 << 30) + rng.integers(0, 1 << 15, cols_n) * 64
            s = np.full(cols_n, 0x7FF000)
            seq = np.stack([a, x, g, s], -1).ravel()
            addr.append(seq)
            loop.append(np.full(seq.shape[0], lp))
            it.append(np.full(seq.shape[0], i))
            stack.append(np.tile([False, False, False, True], cols_n))
            store.append(np.tile([False, False, False, True], cols_n))
    addr = np.concatenate(addr).astype(np.uint64)
    n = addr.shape[0]
    cols = {"addr": addr, "size": np.full(n, 8), "is_store": np.concatenate(store), "block": np.zeros(n),
            "block_instance": np.concatenate(it) + np.concatenate(loop) * rows_n, "thread": np.zeros(n),
            "region": np.zeros(n), "loop": np.concatenate(loop), "iteration": np.concatenate(it),
            "is_stack": np.concatenate(stack)}
    ch = TraceChunk(*(np.asarray(cols[k]).astype(d) for k, d in CHUNK_DTYPES.items()))
    loops = [LoopInstance(lp, 0, rows_n, SCHED_STATIC, 0) for lp in range(n_blocks)]
    info = TraceInfo("work.trace", 1, "prog", [], True, n, {0: BlockInfo(0, "OUT__1", "body", False)},
                     {0: rows_n * n_blocks}, loops=loops)
    return info, ch


def level_rates(prof: dict, p: int, kind: str, assoc: int, lines: int) -> float:
    from analysis.hitrates.sdcm import expected_hits

    parts = [prof[("crd", p, -1)]] if kind == "crd" else [prof[("prd", p, c)] for c in range(p)]
    return sum(expected_hits(x, assoc, lines) for x in parts) / sum(x.total for x in parts)


@pytest.fixture(scope="module")
def work():
    info, ch = workload()
    factory = chunker(ch, 1 << 16)
    return info, factory, exact_set(info, factory, [1, 2, 4], "iteration", 1, True)


@pytest.mark.parametrize("rate,seed", [(0.1, 1), (0.1, 2), (0.05, 3)])
def test_sampled_hit_rates_close_to_exact(work, rate, seed):
    """At 5-10% every private and shared level's SDCM hit rate is within 2 pp of the exact profiles', and every
    stream keeps its exact access count (the oracle: the exact ProfileSet of the same trace)."""
    info, factory, exact = work
    got = source_set(info, factory, [1, 2, 4], "iteration", 1, True, SS.SourceSampling(rate, seed))
    for key in exact:
        assert got[key].total == exact[key].total
        assert got[key].count.sum() + got[key].cold == got[key].total
    for p in (1, 2, 4):
        for kind, assoc, lines in (("prd", 8, 64), ("prd", 8, 512), ("crd", 16, 4096)):
            e, s = level_rates(exact, p, kind, assoc, lines), level_rates(got, p, kind, assoc, lines)
            assert abs(e - s) < 0.02, (p, kind, lines, e, s)


def test_seeded_and_deterministic(work):
    """Same seed, same profiles; another seed, other ones."""
    info, factory, _ = work
    a, b, c = (source_set(info, factory, [2], "iteration", 1, True, SS.SourceSampling(0.05, s)) for s in (4, 4, 5))
    assert all(same(a[k], b[k]) for k in a)
    assert not all(same(a[k], c[k]) for k in a)


def test_estimate_does_not_depend_on_batches():
    """Below rate 1 too, the profiles do not depend on how the trace is cut into chunks, nor on when the
    samples are fed in batches (rate 0.3: over 2^16 samples, so batches end inside the trace)."""
    info, ch = workload()
    sampling = SS.SourceSampling(0.3, 7, window=64, length=32)
    a, b = (source_set(info, chunker(ch, rows), [1, 3, 4], "iteration", 2, True, sampling) for rows in (1 << 16, 777))
    assert all(same(a[k], b[k]) for k in a)


def test_scale_profile_keeps_totals_and_adjusts_toward_expected_size():
    """Distances are scaled by 1/rate; SHARDS-adj moves the sample-size gap to distance 0; totals are exact."""
    from analysis.profiles.profileset import ReuseProfile

    raw = ReuseProfile.from_distances(np.array([0, 0, 3, 5, -1]))
    plain = scale_profile(raw, 0.1, 100, adjust=False)
    assert plain.total == 100 and plain.count.sum() + plain.cold == 100
    assert dict(zip(plain.lower.tolist(), plain.count.tolist())) == {0: 40, 30: 20, 50: 20} and plain.cold == 20
    adj = scale_profile(raw, 0.1, 100, adjust=True)  # expected 10 samples, drew 5: 5 more at distance 0
    assert dict(zip(adj.lower.tolist(), adj.count.tolist())) == {0: 70, 30: 10, 50: 10} and adj.cold == 10
    assert scale_profile(raw, 1.0, 5, adjust=True) is raw


def test_bad_parameters():
    with pytest.raises(InputError, match="sample-rate"):
        SS.SourceSampling(0.0)
    with pytest.raises(InputError, match="seed"):
        SS.SourceSampling(0.5, seed=-1)
    with pytest.raises(InputError, match="sample-window"):
        SS.SourceSampling(0.5, window=-1)


def _tables(d):
    import pandas as pd

    return pd.read_csv(d / "summary.csv"), pd.read_csv(d / "bins.csv")


def exact_and_full_rate(tmp_path, traces: dict, set_bits: str) -> tuple:
    """`pptmc profile` of a small in-memory trace (cores 1, 2, 4, paper mode, --set-bits set_bits; traces: the
    fake_source_traces fixture), exact and at --sample-rate 1; the two output folders and the command's common
    arguments."""
    from pptmc import cli

    info, ch = random_trace(3, 30, True, SCHED_STATIC)
    trace = tmp_path / "mem.trace"
    trace.touch()
    traces[str(trace)] = (info, ch.addr, ch.block, ch.block_instance)
    common = ["profile", str(trace), "--cores", "1,2,4", "--mode", "paper", "--set-bits", set_bits]
    assert cli.run([*common, "-o", str(tmp_path / "exact")]) == 0
    assert cli.run([*common, "--sample-rate", "1", "-o", str(tmp_path / "full")]) == 0
    return tmp_path / "exact", tmp_path / "full", common


def test_cli_default_is_source_and_full_rate_is_exact(tmp_path, fake_source_traces):  # noqa: F811 (the fixture)
    """`pptmc profile --sample-rate 1` (source, the default) writes the exact command's tables; random
    interleaving falls back to the window stream sampler and says so."""
    from pptmc import cli

    exact, full, common = exact_and_full_rate(tmp_path, fake_source_traces, "0")
    for a, b in zip(_tables(exact), _tables(full)):
        assert a.equals(b)
    meta = json.loads((tmp_path / "full" / "profiles.json").read_text())
    assert meta["sampling"]["method"] == "source" and meta["coherence"] is True
    assert ProfileSet.load(tmp_path / "full").cores == [1, 2, 4]
    assert cli.run([*common, "--sample-rate", "0.5", "--interleave", "random", "-o", str(tmp_path / "rnd")]) == 0
    meta = json.loads((tmp_path / "rnd" / "profiles.json").read_text())
    assert meta["sampling"]["method"] == "window" and "source" in meta["sampling"]["requested"]


def brute_shared_windows(plain: list[list[int]], k: int, s_offset: int, task) -> tuple:
    """brute_windows over the shared trace: the private traces `plain` interleaved rr, k references per turn,
    by the real Interleaver, each access at its private position and timed in turns (task: its shared windows'
    period, length and lookback)."""
    ids = [np.array([(c << 32) | i for i in range(len(x))], np.uint64) for c, x in enumerate(plain)]
    order, _ = interleave_arrays(ids, "rr", refs_per_turn=k)
    core, pos = (order >> np.uint64(32)).astype(np.int64), (order & np.uint64((1 << 32) - 1)).astype(np.int64)
    shared = [plain[c][q] for c, q in zip(core.tolist(), pos.tolist())]
    return brute_windows([shared], lambda e, i: int(pos[i]), [s_offset], task.s_period, task.s_length, task.s_look,
                         turn_of=lambda q: q // k)


def brute_windows(streams, pos_of, offsets, period, length, look, turn_of=lambda q: q):
    """Near distances, far and measured counts of the windows of streams, row by row: stream e's windows
    start at offsets[e] + j * period over positions pos_of(e, i); a window row is near when the previous use
    of its line inside the segment [start - look, start + length) is at most `look` (in turn_of units) back."""
    near: dict[int, int] = {}
    n_far = n_measured = 0
    for e, lines in enumerate(streams):
        pos = [pos_of(e, i) for i in range(len(lines))]
        top = max(pos) if pos else -1
        s = offsets[e]
        while s - look <= top:
            seg = [i for i in range(len(lines)) if max(s - look, 0) <= pos[i] < s + length]
            for a, i in enumerate(seg):
                if pos[i] < s:
                    continue
                n_measured += 1
                prev = next((b for b in range(a - 1, -1, -1) if lines[seg[b]] == lines[i]), None)
                if prev is not None and turn_of(pos[i]) - turn_of(pos[seg[prev]]) <= turn_of(look):
                    d = len({lines[seg[b]] for b in range(prev + 1, a)})
                    near[d] = near.get(d, 0) + 1
                else:
                    n_far += 1
            s += period
    return near, n_far, n_measured


@pytest.mark.parametrize("p,k", [(2, 1), (3, 2), (4, 1)])
@pytest.mark.parametrize("schedule", [SCHED_DYNAMIC, SCHED_STATIC])
@pytest.mark.parametrize("spacing", [1, SS.SHARED_WINDOW_SPACING])
def test_windows_match_brute_force(p, k, schedule, spacing, monkeypatch):
    """Private and shared window tallies equal a row-by-row walk over the fully built private traces and the
    real Interleaver's shared trace (positions, turns, segments and lookbacks). Static: each core runs a
    contiguous part, so many shared segments wait for the later cores (with shared windows as dense as the
    private ones, the ring of buffers grows)."""
    from analysis.profiles.private_traces import CoreMap, line_shift

    monkeypatch.setattr(SS, "SHARED_WINDOW_SPACING", spacing)
    info, ch = random_trace(p * 7 + k, 120, True, schedule, 2 if schedule == SCHED_DYNAMIC else 0, n_loops=3)
    sampling = SS.SourceSampling(0.2, seed=p, window=12, length=8)
    task = SS.SourceTask(CoreMap(info, p, "iteration", 0), 6, k, True, sampling)
    offsets, s_offset = task.next_start.copy(), int(task.s_next[0])
    picker = SR.Picker(sampling.salt, sampling.threshold, "iteration", 6, task.cmap, info.path)
    for piece in chunker(ch, 37)():
        task.feed(picker.rows(piece))
    task.finish(sampling)
    private = [x.copy() for x in CoreMap(info, p, "iteration").split(ch, line_shift(64))]
    plain = [(x & ~np.uint64(1 << 63)).tolist() for x in private]
    got = ({}, 0, 0)
    for est in task.est:
        got = ({d: got[0].get(d, 0) + est.near.get(d, 0) for d in set(got[0]) | set(est.near)},
               got[1] + est.n_far, got[2] + est.n_measured)
    want = brute_windows(plain, lambda e, i: i, offsets.tolist(), task.period, task.length, task.look)
    assert got == want and want[2] > 0
    want = brute_shared_windows(plain, k, s_offset, task)
    assert (task.s_est.near, task.s_est.n_far, task.s_est.n_measured) == want and want[2] > 0
    assert schedule == SCHED_DYNAMIC or spacing > 1 or task.s_pool.buf.shape[0] > 4


def test_shards_only_keeps_totals_and_is_seeded(work):
    """window=0 (SHARDS alone, scaled and adjusted): every stream keeps its exact length; same seed, same result."""
    info, factory, exact = work
    a, b = (source_set(info, factory, [1, 4], "iteration", 1, True, SS.SourceSampling(0.1, 6, window=0))
            for _ in range(2))
    for key in a:
        assert a[key].total == exact[key].total and same(a[key], b[key])


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory):
    """A traced ROSE-style kernel with loop markers, in several disk chunks (tests/instrument_cases)."""
    import os

    from instrument import build_instrumented, run_trace
    from test_instrument import CASE

    d = tmp_path_factory.mktemp("src")
    build = build_instrumented(CASE, d / "rk.trace", mode="trace")
    run_trace(build.binary, ["3000"], d / "t.trace", env={**os.environ, "PPTMC_CHUNK_BYTES": "4096"})
    return d / "t.trace"


@pytest.mark.parametrize("rate,rows", [(1.0, 1 << 18), (0.3, 1 << 18), (0.3, 97)])
def test_sampling_decode_gives_the_profiles_of_the_rows_pass(real_trace, monkeypatch, rate, rows):
    """On a real trace, the reader's sampling decode (the default path in iteration mode) gives the same
    profiles as the pass over decoded rows; at rate 1 both equal the exact ProfileSet."""
    from analysis.profiles.sweep import compute_profiles

    sampling = SS.SourceSampling(rate, 5, window=16, length=8)
    fused, _ = SS.sampled_profile_set(str(real_trace), [1, 2, 3, 4], sampling, max_rows=rows)
    assert fused.mode == "iteration"
    reader_of = SS.source_trace
    monkeypatch.setattr(SS, "source_trace", lambda path: reader_of(path)[:2] + (None,))
    plain, _ = SS.sampled_profile_set(str(real_trace), [1, 2, 3, 4], sampling, max_rows=rows)
    keys = list(plain.prd) + list(plain.crd)
    assert sorted(fused.prd) == sorted(plain.prd) and sorted(fused.crd) == sorted(plain.crd)
    assert all(same(fused.prd[k], plain.prd[k]) for k in plain.prd) and len(keys) > 10
    assert all(same(fused.crd[k], plain.crd[k]) for k in plain.crd)
    if rate == 1.0:
        exact = compute_profiles(str(real_trace), [1, 2, 3, 4], barriers=False)  # the sampler's interleaving
        assert all(same(fused.prd[k], exact.prd[k]) for k in exact.prd)
        assert all(same(fused.crd[k], exact.crd[k]) for k in exact.crd)


@pytest.mark.parametrize("iteration_mode", [True, False])
def test_line_of_words_equals_line_of_columns(iteration_mode):
    """The windows read a row's line as each core sees it from the sampling decode's words (line, stack and
    store flags) exactly as from the decoded columns (iteration mode: stack rows get the offset)."""
    from instrument.tracefile import WORD_STACK, WORD_STORE

    rng = np.random.default_rng(3)
    n = 500
    addr = rng.integers(0, 1 << 47, n).astype(np.uint64)
    stack, store = rng.random(n) < 0.4, rng.random(n) < 0.5
    block = np.zeros(n, np.int32)
    words = (addr >> np.uint64(6)) | np.where(stack, WORD_STACK, 0) | np.where(store, WORD_STORE, 0)
    shared = np.zeros(1, bool)
    for row in range(n):
        for core in (0, 1, 5):
            want = SR.line_of(addr, stack, block, shared, True, np.uint64(6), row, core)
            got = SR.line_of(words, SR.NO_STACK, SR.NO_BLOCK, shared, iteration_mode, np.uint64(6), row, core)
            assert got == want


def test_line_tally_finds_the_heaviest_sampled_line():
    tally = SR.LineTally()
    assert tally.heaviest_share() == 0.0
    tally.add(np.array([5, 5, 7], np.uint64))
    tally.add(np.array([7, 7, 9, 5], np.uint64))
    assert tally.heaviest_share() == pytest.approx(3 / 7)


def test_line_tally_counts_like_unique_across_growth():
    """Thousands of distinct lines in batches (the table doubles several times): the same counts as np.unique."""
    rng = np.random.default_rng(3)
    batches = [np.concatenate([rng.integers(0, 1 << 40, 700).astype(np.uint64), np.full(b, 12345, np.uint64)])
               for b in range(1, 9)]
    tally = SR.LineTally()
    for b in batches:
        tally.add(b)
    _, cnt = np.unique(np.concatenate(batches), return_counts=True)
    assert tally.heaviest_share() == pytest.approx(cnt.max() / cnt.sum()) and cnt.max() == 36
    used = tally.counts > 0
    assert sorted(tally.counts[used].tolist()) == sorted(cnt.tolist())


def _seed_drawing(line: int, rate: float, draw: bool) -> int:
    """A seed whose SHARDS hash draws `line` (draw=True) or leaves it out (False)."""
    for seed in range(1, 2000):
        s = SS.SourceSampling(rate, seed)
        x = (line ^ (line >> 32) ^ int(s.salt)) & 0xFFFFFFFF
        if (((x * 0x9E3779B1) & 0xFFFFFFFF) < int(s.threshold)) == draw:
            return seed
    raise AssertionError("no such seed")


def heavy_trace(sweeps: int = 20, lines_n: int = 2000):
    """A loop sweeping lines_n lines sweeps times, one line per iteration, reloading one scalar (its own line)
    every fourth iteration: the scalar is accessed 10,000 times, each swept line 20 times."""
    n_it = sweeps * lines_n
    sweep = (1 << 30) + (np.arange(n_it) % lines_n) * 64
    scalar = np.where(np.arange(n_it) % 4 == 0, 0x7FF000, 0)
    addr = np.stack([sweep, scalar], -1).ravel()
    keep = addr != 0
    addr = addr[keep].astype(np.uint64)
    it = np.repeat(np.arange(n_it), 2)[keep]
    n = addr.shape[0]
    cols = {"addr": addr, "size": np.full(n, 8), "is_store": np.zeros(n, bool), "block": np.zeros(n),
            "block_instance": it, "thread": np.zeros(n), "region": np.zeros(n), "loop": np.zeros(n),
            "iteration": it, "is_stack": addr == 0x7FF000}
    ch = TraceChunk(*(np.asarray(cols[k]).astype(d) for k, d in CHUNK_DTYPES.items()))
    info = TraceInfo("heavy.trace", 1, "prog", [], True, n, {0: BlockInfo(0, "OUT__1", "body", False)},
                     {0: n_it}, loops=[LoopInstance(0, 0, n_it, SCHED_STATIC, 0)])
    return info, ch


def test_a_seed_that_draws_a_heavy_line_is_flagged(tmp_path, fake_source_traces, capsys):  # noqa: F811 (fixture)
    """A seed that draws the scalar gets a sample whose heaviest line is far above HEAVY_SHARE_WARN (and the
    CLI says so); a seed that does not stays far below."""
    from pptmc import cli

    info, ch = heavy_trace()
    scalar_line = 0x7FF000 >> 6
    shares = {}
    for draw in (True, False):
        found: dict = {}
        seed = _seed_drawing(scalar_line, 0.05, draw)
        SS.source_profiles(info, chunker(ch, 4096)(), [1, 2], SS.SourceSampling(0.05, seed), "iteration", 1, 64, 0,
                           True, diagnostics=found)
        shares[draw] = found["heaviest_line_share"]
    assert shares[True] > 4 * SS.HEAVY_SHARE_WARN and shares[False] < SS.HEAVY_SHARE_WARN / 2
    trace = tmp_path / "heavy.trace"
    trace.touch()
    fake_source_traces[str(trace)] = (info, ch.addr, ch.block, ch.block_instance)
    args = ["profile", str(trace), "--cores", "1,2", "--sample-rate", "0.05", "-o", str(tmp_path / "p")]
    assert cli.run([*args, "--seed", str(_seed_drawing(scalar_line, 0.05, True))]) == 0
    assert "one sampled line takes" in capsys.readouterr().err
    meta = json.loads((tmp_path / "p" / "profiles.json").read_text())
    assert meta["sampling"]["heaviest_line_share"] > SS.HEAVY_SHARE_WARN
