"""Write-invalidate coherence in the private profiles, against a brute-force per-core LRU stack model."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.profiles.coherence import STORE_TAG, Directory, strip, tag_stores, tagged_lines
from analysis.profiles.interleave import interleave_arrays
from analysis.profiles.handouts import chunk_costs
from analysis.profiles.private_traces import ALL_CORES, OFFSET_BITS, CoreMap
from analysis.profiles.sweep import compute_profiles_from
from analysis.profiles.profileset import ProfileSet, ReuseProfile
from analysis.profiles.reuse import ReuseEngine
from instrument.trace_types import (CHUNK_DTYPES, NO_LOOP, SCHED_DYNAMIC, SCHED_STATIC, BlockInfo, LoopInstance,
                                   TraceChunk, TraceInfo)
from pptmc.cli import run
from test_private_traces import chunker
from tracerows import chunk_from_rows


def brute_coherent(shared: list[int], core: list[int], p: int) -> list[list[int]]:
    """Per-core distances (-1 = cold or coherence miss) of an interleaved, store-tagged trace.

    Each core has an LRU stack (a list, top first). A store by c marks the line stale in every
    other core's stack; the stale entry keeps its place until its core touches the line again,
    which is a coherence miss (infinite distance) that moves the line to the top."""
    stacks: list[list[int]] = [[] for _ in range(p)]
    stale: list[set[int]] = [set() for _ in range(p)]
    out: list[list[int]] = [[] for _ in range(p)]
    for raw, c in zip(shared, core):
        line, store = raw & ~int(STORE_TAG), bool(raw & int(STORE_TAG))
        st_c = stacks[c]
        if line in st_c:
            d = st_c.index(line)
            out[c].append(-1 if line in stale[c] else d)
            st_c.remove(line)
        else:
            out[c].append(-1)
        st_c.insert(0, line)
        stale[c].discard(line)
        if store:
            for o in range(p):
                if o != c and line in stacks[o]:
                    stale[o].add(line)
    return out


def random_trace(seed: int, n_iters: int, mode_loops: bool, schedule: int):
    """A region with replicated (outside-loop) and work-shared accesses, stores and stack data."""
    rng = np.random.default_rng(seed)
    blocks = {0: BlockInfo(0, "OUT__1", "entry", False), 1: BlockInfo(1, "OUT__1", "shared_var_trace1", True),
              2: BlockInfo(2, "OUT__1", "for.body", False)}
    rows, loops, inst = [], [], {0: -1, 1: -1, 2: -1}
    for lp in range(2):
        for b, addr, stack in ((0, 0x7FF000, True), (1, 0x200000 + 64 * int(rng.integers(0, 4)), False)):
            inst[b] += 1
            rows.append((addr, bool(rng.random() < 0.5), b, inst[b], NO_LOOP, -1, stack))
        loops.append(LoopInstance(lp, 0, n_iters, schedule, 2 if schedule == SCHED_DYNAMIC else 0))
        for it in range(n_iters):
            inst[2] += 1
            for _ in range(int(rng.integers(1, 5))):
                stack = bool(rng.random() < 0.15)
                addr = 0x7FF000 - 64 * int(rng.integers(0, 3)) if stack else 0x100000 + 64 * int(rng.integers(0, 8))
                rows.append((addr, bool(rng.random() < 0.3), 2, inst[2], lp, it, stack))
            if rng.random() < 0.8:  # a shared variable (its own block: shared in paper mode too)
                inst[1] += 1
                rows.append((0x200000 + 64 * int(rng.integers(0, 2)), bool(rng.random() < 0.5), 1, inst[1], lp, it,
                             False))
    chunk = chunk_from_rows(rows)
    counts = {b: n + 1 for b, n in inst.items()}
    info = TraceInfo("synthetic.trace", 1, "prog", [], True, len(chunk), blocks, counts,
                     loops=loops if mode_loops else [])
    return info, chunk


def private_tagged(info, ch, p: int, mode: str, shift: int = 6) -> list[np.ndarray]:
    """Each core's store-tagged line ids, built row by row in Python (an independent split; dynamic chunks go
    where the profiles' deal puts them, timed by the trace's own chunk costs)."""
    cmap = CoreMap(info, p, mode, 0, chunk_costs(info, lambda: [ch], mode))
    where = cmap.core_of(ch)
    offset = ch.is_stack if mode == "iteration" else ~cmap.shared_block[ch.block]
    out: list[list[int]] = [[] for _ in range(p)]
    for i in range(len(ch)):
        cores = range(p) if where[i] == ALL_CORES else [int(where[i])]
        for c in cores:
            line = (int(ch.addr[i]) >> shift) + (c << (OFFSET_BITS - shift) if offset[i] else 0)
            out[c].append(line | (int(STORE_TAG) if ch.is_store[i] else 0))
    return [np.array(o, dtype=np.uint64) for o in out]


def profile_of(distances: list[int]) -> ReuseProfile:
    return ReuseProfile.from_distances(np.array(distances, dtype=np.int64))


def same(a: ReuseProfile, b: ReuseProfile) -> bool:
    return (a.cold, a.total) == (b.cold, b.total) and a.lower.tolist() == b.lower.tolist() \
        and a.count.tolist() == b.count.tolist() and a.dist_sum.tolist() == b.dist_sum.tolist()


def check_against_brute_force(seed, p, interleave, k, mode, schedule=SCHED_STATIC, chunk_rows=17):
    info, ch = random_trace(seed, 16, mode == "iteration", schedule)
    cores = sorted({1, p})
    ps = compute_profiles_from(info, chunker(ch, chunk_rows), cores, mode, interleave, seed=seed, refs_per_turn=k)
    private = private_tagged(info, ch, p, mode)
    shared, core = interleave_arrays(private, interleave, seed=seed, refs_per_turn=k)
    want = brute_coherent([int(x) for x in shared], [int(c) for c in core], p)
    for c in range(p):
        assert same(ps.prd[(p, c)], profile_of(want[c])), (c, want[c])
    plain = ReuseEngine()
    plain.feed(strip(shared))
    assert same(ps.crd[p], plain.histogram())  # the shared cache is not affected
    return ps, want


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("interleave", ["rr", "random"])
@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("mode", ["iteration", "paper"])
def test_engine_matches_brute_force_stacks(p, interleave, k, mode):
    ps, want = check_against_brute_force(100 * p + 7 * k + len(interleave), p, interleave, k, mode)
    n_coh = sum(prof.coherence for (q, _), prof in ps.prd.items() if q == p)
    assert n_coh > 0  # the trace does exercise invalidations
    assert n_coh <= sum(prof.cold for (q, _), prof in ps.prd.items() if q == p)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), p=st.integers(2, 4), interleave=st.sampled_from(["rr", "random"]),
       k=st.sampled_from([1, 3]), mode=st.sampled_from(["iteration", "paper"]),
       schedule=st.sampled_from([SCHED_STATIC, SCHED_DYNAMIC]), chunk_rows=st.integers(1, 40))
def test_engine_matches_brute_force_random(seed, p, interleave, k, mode, schedule, chunk_rows):
    check_against_brute_force(seed, p, interleave, k, mode, schedule, chunk_rows)


def test_hand_computed_invalidation():
    """core 0: load A, load B; core 1: store A; core 0: load A (coherence miss), load B (distance 1)."""
    a, b = 10, 11
    tagged = np.array([a, b, a | int(STORE_TAG), a, b], dtype=np.uint64)
    core = np.array([0, 0, 1, 0, 0])
    lines, stale = Directory(2).walk(tagged, core)
    assert lines.tolist() == [a, b, a, a, b] and stale.tolist() == [False, False, False, True, False]
    engine = ReuseEngine()
    d = engine.feed_distances(lines[core == 0], stale[core == 0])
    # the stale A kept its place (second from top) until core 0 touched it again
    assert d.tolist() == [-1, -1, -1, 1] and engine.coherence_misses == 1
    assert engine.histogram().cold == 3 and engine.histogram().coherence == 1


def test_loads_never_invalidate_and_own_stores_do_not_either():
    tagged = np.array([5, 5, 5 | int(STORE_TAG), 5, 5], dtype=np.uint64)
    core = np.array([0, 1, 0, 0, 1])
    _, stale = Directory(2).walk(tagged, core)
    assert stale.tolist() == [False, False, False, False, True]  # core 1 lost its copy to core 0's store
    _, stale = Directory(2).walk(np.array([7, 7, 7, 7], dtype=np.uint64), np.array([0, 1, 0, 1]))
    assert stale.tolist() == [False] * 4


def test_many_cores_and_table_growth():
    """More than 64 cores (two bitmap words) and far more lines than the initial table."""
    rng = np.random.default_rng(3)
    p, n = 70, 20_000
    lines = rng.integers(0, 5000, n).astype(np.uint64)
    store = rng.random(n) < 0.2
    core = rng.integers(0, p, n)
    tagged = tag_stores(lines, store)
    d = Directory(p, initial_lines=16)
    got_lines, got_stale = d.walk(tagged, core)
    holders: dict[int, set[int]] = {}  # valid copies of lines stored at least once
    want = []
    for line, s, c in zip(lines.tolist(), store.tolist(), core.tolist()):
        want.append(line in holders and c not in holders[line])
        if s:
            holders[line] = set()
        if line in holders:
            holders[line].add(c)
    assert got_lines.tolist() == lines.tolist() and got_stale.tolist() == want


def test_without_coherence_or_stores_profiles_are_unchanged():
    info, ch = random_trace(5, 9, True, SCHED_STATIC)
    on = compute_profiles_from(info, chunker(ch, 13), [1, 2, 4], "iteration")
    off = compute_profiles_from(info, chunker(ch, 13), [1, 2, 4], "iteration", coherence=False)
    assert on.coherence and not off.coherence
    assert all(same(on.crd[p], off.crd[p]) for p in (1, 2, 4)) and same(on.prd[(1, 0)], off.prd[(1, 0)])
    assert sum(on.prd[(4, c)].cold for c in range(4)) > sum(off.prd[(4, c)].cold for c in range(4))
    assert all(off.prd[k].coherence == 0 for k in off.prd)
    loads = TraceChunk(*(np.zeros_like(ch.is_store) if k == "is_store" else getattr(ch, k) for k in CHUNK_DTYPES))
    on = compute_profiles_from(info, chunker(loads, 13), [1, 2, 4], "iteration")
    off = compute_profiles_from(info, chunker(loads, 13), [1, 2, 4], "iteration", coherence=False)
    assert all(same(on.prd[k], off.prd[k]) for k in off.prd)


def test_metadata_roundtrip_and_old_directories(tmp_path):
    import json

    info, ch = random_trace(6, 5, True, SCHED_STATIC)
    ps = compute_profiles_from(info, chunker(ch, 13), [1, 2], "iteration")
    ps.save(tmp_path)
    back = ProfileSet.load(tmp_path)
    assert back.coherence and back.metadata() == ps.metadata()
    assert all(back.prd[k].coherence == ps.prd[k].coherence for k in ps.prd)
    meta = json.loads((tmp_path / "profiles.json").read_text())
    del meta["coherence"]
    (tmp_path / "profiles.json").write_text(json.dumps(meta))
    assert not ProfileSet.load(tmp_path).coherence  # written before coherence was modelled


def test_cli_no_coherence_flag(tmp_path, monkeypatch):
    """`pptmc profile --no-coherence` gives the plain profiles; the default counts coherence misses."""
    import json

    import instrument
    from test_profiles import FakeReader

    info, ch = random_trace(8, 16, True, SCHED_STATIC)
    path = tmp_path / "prog.trace"
    path.write_bytes(b"fake")
    monkeypatch.setattr(instrument, "open_trace", lambda p: FakeReader(info, ch), raising=False)
    for name, extra in (("on", []), ("off", ["--no-coherence"])):
        assert run(["profile", str(path), "--cores", "1,4", "--mode", "iteration", "-o", str(tmp_path / name)]
                   + extra) == 0
    on, off = ProfileSet.load(tmp_path / "on"), ProfileSet.load(tmp_path / "off")
    assert json.loads((tmp_path / "off" / "profiles.json").read_text())["coherence"] is False
    assert on.coherence and sum(on.prd[(4, c)].coherence for c in range(4)) > 0
    plain = compute_profiles_from(info, chunker(ch, 50), [1, 4], "iteration", coherence=False)
    assert all(same(off.prd[k], plain.prd[k]) for k in plain.prd)


def plain_coherent_profiles(info, ch, p, mode, interleave, seed, k):
    """The straightforward coherent path for one core count: whole private traces, interleaved,
    one Directory walk, and a fresh engine per core fed its accesses with their stale flags."""
    private = private_tagged(info, ch, p, mode)
    shared, core = interleave_arrays(private, interleave, seed=seed, refs_per_turn=k)
    lines, stale = Directory(p).walk(shared, core)
    prd = []
    for c in range(p):
        engine = ReuseEngine()
        engine.feed(lines[core == c], stale[core == c])
        prd.append(engine.histogram())
    return prd


@pytest.mark.parametrize("mode,interleave,k,sched", [
    ("iteration", "rr", 1, SCHED_STATIC), ("iteration", "random", 2, SCHED_DYNAMIC),
    ("paper", "rr", 3, SCHED_STATIC), ("paper", "random", 1, SCHED_STATIC)])
def test_core_count_sweep_with_coherence_matches_plain_path(mode, interleave, k, sched):
    """The sweep's shared work between core counts must not leak one count's invalidations into another."""
    info, ch = random_trace(21, 40, mode == "iteration", sched)
    cores = [1, 2, 3, 4, 8, 16]
    ps = compute_profiles_from(info, chunker(ch, 37), cores, mode, interleave, seed=13, refs_per_turn=k)
    for p in cores[1:]:
        want = plain_coherent_profiles(info, ch, p, mode, interleave, 13, k)
        assert all(same(ps.prd[(p, c)], want[c]) and ps.prd[(p, c)].coherence == want[c].coherence
                   for c in range(p))
    assert same(ps.prd[(1, 0)], ps.crd[1]) and ps.prd[(1, 0)].coherence == 0
    assert sum(ps.prd[(16, c)].coherence for c in range(16)) > 0


def test_store_tags_never_reach_untagging_consumers():
    """mimic (the cache simulator's input) stays untagged; prepare_chunk tags only on request."""
    from analysis.profiles.private_traces import InterleaveSpec, mimic, prepare_chunk

    info, ch = random_trace(9, 8, True, SCHED_STATIC)
    assert ch.is_store.any()
    for _, batch in mimic(info, chunker(ch, 11), [InterleaveSpec(3)], "iteration"):
        assert int(batch.lines.max()) < int(STORE_TAG)
    cmap = CoreMap(info, 1, "iteration")
    plain = prepare_chunk(ch, "iteration", cmap.shared_block, 6, info.path)
    tagged = prepare_chunk(ch, "iteration", cmap.shared_block, 6, info.path, stores=True)
    assert (tagged.lines >= STORE_TAG).tolist() == ch.is_store.tolist()
    assert strip(tagged.lines).tolist() == plain.lines.tolist()


@pytest.mark.parametrize("interleave", ["rr", "random"])
def test_spilled_coherent_sweep_matches_in_memory(tmp_path, interleave):
    """Lanes of line ids and of distances spilled to disk must interleave alike."""
    from analysis.profiles.sweep import SweepSettings, profile_configs

    info, ch = random_trace(12, 40, True, SCHED_STATIC)
    args = (info, chunker(ch, 11), [1, 2, 4, 8], SweepSettings("iteration", interleave, 5, 2, 64))
    small = profile_configs(*args, memory_budget=64, spill_dir=str(tmp_path))
    big = profile_configs(*args)
    assert sum(prof.coherence for prd, *_ in big for prof in prd) > 0
    for (prd_a, crd_a, _, up_a), (prd_b, crd_b, _, up_b) in zip(small, big):
        assert same(crd_a, crd_b) and all(same(a, b) and a.coherence == b.coherence for a, b in zip(prd_a, prd_b))
        assert up_a == up_b


@pytest.mark.parametrize("interleave,k", [("rr", 1), ("rr", 3), ("random", 2)])
def test_jobs_give_the_plain_path_profiles(interleave, k):
    """Core counts split over worker processes (jobs > 1) give the plain path's profiles,
    bit-identical to one process, coherence misses included."""
    info, ch = random_trace(21, 40, True, SCHED_STATIC)
    cores = [1, 2, 3, 4, 8, 16]
    one = compute_profiles_from(info, chunker(ch, 37), cores, "iteration", interleave, seed=13, refs_per_turn=k)
    for jobs in (2, 3, 7):
        ps = compute_profiles_from(info, chunker(ch, 37), cores, "iteration", interleave, seed=13,
                                   refs_per_turn=k, jobs=jobs)
        assert all(x.equals(y) for x, y in zip(ps.tables(), one.tables())) and ps.metadata() == one.metadata()
    for p in (3, 16):
        want = plain_coherent_profiles(info, ch, p, "iteration", interleave, 13, k)
        assert all(same(ps.prd[(p, c)], want[c]) and ps.prd[(p, c)].coherence == want[c].coherence
                   for c in range(p))


@pytest.mark.parametrize("p", [4, 5, 70])
def test_engine_sharer_sets_match_directory_walk(p):
    """The CRD engine's sharer sets (ReuseEngine.feed_shared, as the sweep calls it on
    Interleaver Batches) and CoherenceMisses.add against Directory.walk of the laid-out trace
    with the distances in interleaved order: the same stale accesses and coherence misses
    (exact and inexact distances), on rr and random batches with many stores, hash table
    growth in mid-batch, and sharer sets of one and of two 64-bit words; the engine's
    distances are those of a plain engine."""
    from analysis.profiles.coherence import CoherenceMisses
    from analysis.profiles.interleave import Interleaver

    rng = np.random.default_rng(4)
    private = [tag_stores(rng.integers(0, 3000, 4000).astype(np.uint64), rng.random(4000) < 0.3)
               for _ in range(p)]
    dists = [rng.integers(-1, 9000, 4000).astype(np.int32) for _ in range(p)]
    for strategy, k in (("rr", 1), ("rr", 4), ("random", 3)):
        itl = Interleaver(p, strategy, seed=2, refs_per_turn=k)
        for c in range(p):  # unequal lengths: rounds of all cores, then of fewer cores, then single turns
            itl.push(c, private[c][:3000 + 900 * c // p])
            itl.close(c)
        engine, plain = ReuseEngine(initial_lines=16, sharer_cores=p), ReuseEngine(initial_lines=16)
        fast, slow = CoherenceMisses(p), Directory(p, initial_lines=16)
        used = [0] * p
        for b in itl.drain():
            ds = []
            for c, piece in b.pieces:
                ds.append(dists[c][used[c]:used[c] + len(piece)])
                used[c] += len(piece)
            stale = engine.feed_shared(b.lines, b.core_pattern)
            fast.add(stale, b.pieces, ds, b.core_pattern)
            plain.feed(b.lines, tagged=True)
            d_laid = np.empty(len(b.lines), dtype=np.int64)
            for (c, piece), d in zip(b.pieces, ds):
                d_laid[b.core == c] = d
            _, want_stale = slow.walk(b.lines, b.core, d_laid)
            assert stale.tolist() == np.nonzero(want_stale)[0].tolist()
        assert used == [3000 + 900 * c // p for c in range(p)]
        assert same(engine.histogram(), plain.histogram())
        assert fast.moved.tolist() == slow.moved.tolist() and fast.moved_sum.tolist() == slow.moved_sum.tolist()
        assert fast.moved.sum() > 0 and fast.moved_sum.sum() > 0


def _upgrades_by_holder_sets(lines: np.ndarray, cores: np.ndarray, p: int) -> list[int]:
    """Upgrades per core, brute force: a store by a core that holds the line while another core does too,
    unless that core took its copy by a transfer since the line's last store (it loaded the line, stored
    before, without holding it). A store leaves only the storing core holding it, a load adds the loading
    core (infinite private caches)."""
    holders: dict[int, set[int]] = {}
    stored: set[int] = set()
    mover: dict[int, int] = {}
    out = [0] * p
    for raw, c in zip(lines.tolist(), cores.tolist()):
        line, store = raw & ~(1 << 63), raw >> 63
        held = holders.setdefault(line, set())
        if store:
            if c in held and len(held) > 1 and mover.get(line) != c:
                out[c] += 1
            holders[line] = {c}
            stored.add(line)
            mover.pop(line, None)
        else:
            if line in stored and held and c not in held:
                mover[line] = c
            held.add(c)
    return out


@pytest.mark.parametrize("p", [3, 64, 70])
def test_engine_counts_upgrades_as_holder_sets_do(p):
    """ReuseEngine.upgrades (stores to a line the core holds while another core holds it too: an invalidation
    the store waits for, though it hits; not a read-modify-write of a line that just moved) against holder
    sets kept in Python, on interleaved batches with many stores, lines loaded by several cores before their
    first store, and sharer sets of one, two (64 cores: the never-stored flag in the second word) and two
    words of cores."""
    from analysis.profiles.interleave import Interleaver

    rng = np.random.default_rng(9)
    private = [tag_stores(rng.integers(0, 400, 3000).astype(np.uint64), rng.random(3000) < 0.25)
               for _ in range(p)]
    itl = Interleaver(p, "rr")
    for c in range(p):
        itl.push(c, private[c])
        itl.close(c)
    engine = ReuseEngine(initial_lines=16, sharer_cores=p)
    seen_lines, seen_cores = [], []
    for b in itl.drain():
        engine.feed_shared(b.lines, b.core_pattern)
        seen_lines.append(b.lines)
        seen_cores.append(b.core)
    want = _upgrades_by_holder_sets(np.concatenate(seen_lines), np.concatenate(seen_cores), p)
    assert engine.upgrades.tolist() == want
    assert sum(want) > 100


def test_tagged_lines_is_tag_stores_of_the_shifted_addresses():
    """The one-pass kernel of prepare_chunk(stores=True) against the numpy expression."""
    rng = np.random.default_rng(5)
    addr = rng.integers(0, 1 << 47, 3000).astype(np.uint64)
    store = rng.random(3000) < 0.4
    for shift in (0, 6, 7):
        assert tagged_lines(addr, store, shift).tolist() == tag_stores(addr >> np.uint64(shift), store).tolist()


def periodic_trace(seed: int, steps: int, n_iters: int, change_step: int = -1):
    """Time steps of two work-shared loops over the same addresses (as jacobi-2d's), each step the
    same rows but its own loop instances; change_step >= 0: one access of that step differs, -2: of
    every step (each step then differs from the one before)."""
    rng = np.random.default_rng(seed)
    blocks = {0: BlockInfo(0, "OUT__1", "entry", False), 1: BlockInfo(1, "OUT__1", "shared_var_trace1", True),
              2: BlockInfo(2, "OUT__1", "for.body", False)}
    body = []  # (addr, store, block, loop of the step, iteration, stack)
    for lp in range(2):
        for _ in range(3):  # outside the loop: every core (three, so a core's window is a multiple of 1, 2 and 3)
            body.append((0x7FF000 - 64 * int(rng.integers(0, 2)), bool(rng.random() < 0.5), 0, lp, -1, True))
        for it in range(n_iters):
            for _ in range(3):  # the same number per iteration, so every core's window has one length
                stack = bool(rng.random() < 0.15)
                addr = 0x7FF000 - 64 * int(rng.integers(0, 3)) if stack else 0x100000 + 64 * int(rng.integers(0, 24))
                body.append((addr, bool(rng.random() < 0.3), 2, lp, it, stack))
    rows, loops, inst = [], [], {0: -1, 1: -1, 2: -1}
    for step in range(steps):
        for j, (addr, store, b, lp, it, stack) in enumerate(body):
            if change_step in (step, -2) and j == len(body) // 2:
                addr += 64 * (40 + step)
            inst[b] += 1
            rows.append((addr, store, b, inst[b], NO_LOOP if it < 0 else 2 * step + lp, it, stack))
        loops += [LoopInstance(2 * step + lp, lp, n_iters, SCHED_STATIC, 0) for lp in range(2)]
    chunk = chunk_from_rows(rows)
    info = TraceInfo("periodic.trace", 1, "prog", [], True, len(chunk), blocks,
                     {b: n + 1 for b, n in inst.items()}, loops=loops)
    return info, chunk


@pytest.mark.parametrize("p,k,chunk_rows,change_step,interleave", [
    (2, 1, 29, -1, "rr"), (3, 1, 64, -1, "rr"), (4, 2, 17, -1, "rr"), (2, 3, 200, 5, "rr"), (4, 1, 41, 6, "rr"),
    (3, 2, 1000, 2, "rr"), (3, 1, 50, -1, "random"), (2, 2, 23, 4, "random"), (3, 1, 64, -2, "rr"),
    (2, 1, 29, -2, "random")])
@pytest.mark.parametrize("coherence", [True, False])
def test_replayed_periodic_traces_match_brute_force(monkeypatch, p, k, chunk_rows, change_step, interleave, coherence):
    """Copies of a repeating window that are not fed, of the shared trace (replay.Replay, round
    robin) and of each private trace (replay.PrivateReplay), give the brute-force per-core
    stacks with invalidations and the brute-force shared and one-core distances; a step that
    differs is fed whole (held-back part included), and steps that all differ are all fed; the upgrades are
    those of holder sets over the whole shared trace."""
    from analysis.profiles import task
    from test_reuse import brute_distances

    skipped: dict[tuple[int, str], int] = {}
    finish = task.CoreCountTask.finish

    def counting_finish(self):
        out = finish(self)
        if self.replay is not None:
            skipped[(self.spec.cores, "crd")] = self.replay.skipped
        skipped[(self.spec.cores, "prd")] = min(r.skipped if r else 0 for r in self.own_replay)
        return out

    monkeypatch.setattr(task.CoreCountTask, "finish", counting_finish)
    monkeypatch.setattr(task, "SHORTEST_COPY", 1)  # this trace's copies are a few dozen references
    monkeypatch.setattr(task, "SHORTEST_PRIVATE_COPY", 1)
    info, ch = periodic_trace(p + 10 * k, 16, 12, change_step)
    ps = compute_profiles_from(info, chunker(ch, chunk_rows), [1, p], "iteration", interleave, seed=5,
                               refs_per_turn=k, coherence=coherence)
    least = 0 if change_step == -2 else 3  # the replays did leave copies out (none that differ)
    assert skipped[(1, "prd")] >= least and skipped[(p, "prd")] >= least and skipped.get((p, "crd"), 3) >= least
    if change_step == -2:
        assert not any(skipped.values())
    private = private_tagged(info, ch, p, "iteration")
    shared, core = interleave_arrays(private, interleave, seed=5, refs_per_turn=k)
    assert same(ps.crd[p], profile_of(brute_distances(strip(shared))))
    assert same(ps.prd[(1, 0)], profile_of(brute_distances(ch.addr >> np.uint64(6))))
    if coherence:
        want = brute_coherent([int(x) for x in shared], [int(c) for c in core], p)
        assert sum(prof.coherence for (q, _), prof in ps.prd.items() if q == p) > 0
        assert ps.upgrades[p] == _upgrades_by_holder_sets(shared, core, p) and sum(ps.upgrades[p]) > 0
    else:
        want = [brute_distances(strip(lines)) for lines in private]
    for c in range(p):
        assert same(ps.prd[(p, c)], profile_of(want[c])), c


def test_loop_period_of_the_loop_table():
    """The smallest shift that maps the loop table onto itself, if it repeats at least three times."""
    from analysis.profiles.sweep import loop_period

    def table(ids, trips=None):
        trips = trips or [10] * len(ids)
        return TraceInfo("t", 1, "p", [], True, 0, {}, {},
                         loops=[LoopInstance(i, x, n, SCHED_STATIC, 0) for i, (x, n) in enumerate(zip(ids, trips))])

    assert loop_period(table([0, 1] * 5)) == 2
    assert loop_period(table([0] * 4)) == 1
    assert loop_period(table([0] * 6, [10, 11] * 3)) == 2
    assert loop_period(table([0, 1, 2, 0, 1])) == 0  # fewer than three repeats
    assert loop_period(table([])) == 0


@pytest.mark.parametrize("p, plen", [(3, 5), (70, 70), (4, 1)])
def test_stale_of_a_core_pattern_matches_brute_force_sharer_sets(p, plen):
    """Directory.stale_of (access i by core pattern[i % len]) finds the accesses a brute-force set of
    valid copies calls stale, across table growth and in pieces that continue the pattern's phase."""
    rng = np.random.default_rng(p + plen)
    n = 12_000
    lines = rng.integers(0, 3000, n).astype(np.uint64)
    store = rng.random(n) < 0.25
    pattern = rng.integers(0, p, plen)
    holders: dict[int, set[int]] = {}
    want = []
    for i, (line, s) in enumerate(zip(lines.tolist(), store.tolist())):
        c = int(pattern[i % plen])
        if line in holders and c not in holders[line]:
            want.append(i)
        if s:
            holders[line] = set()
        if line in holders:
            holders[line].add(c)
    d = Directory(p, initial_lines=16)
    tagged = tag_stores(lines, store)
    cut = 5 * plen  # a second call starts where the pattern starts again
    got = np.concatenate([d.stale_of(tagged[:cut], pattern), cut + d.stale_of(tagged[cut:], pattern)])
    assert got.tolist() == want
