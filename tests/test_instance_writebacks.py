"""Write-back profiles per instance of a last level serving groups of threads (an L3 per CCX), against
brute-force dirty-bit LRU caches per instance with write-invalidate between them (a store frees the line's
way in the other instances, a dirty copy moves to the storer unwritten): exactly when fully associative,
by hand, and within 10 % of the set-associative simulator on traced kernels."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from analysis.hitrates.dram import dram_per_instance, dram_traffic
from analysis.hitrates.rates import predict_hit_rates
from analysis.hitrates.sdcm import expected_hits
from analysis.hitrates.writeback_sim import WritebackSim, simulate_dram
from analysis.profiles.depth_stack import DepthStack
from analysis.profiles.groups import grouping_name, groupings_for
from analysis.profiles.profileset import ProfileSet
from analysis.profiles.reuse import STORE_TAG
from analysis.profiles.sweep import compute_profiles_from
from analysis.profiles.writebacks import InstanceWritebacks
from common.errors import InputError
from instrument.trace_types import SCHED_DYNAMIC, SCHED_STATIC
from machines.model import CacheLevel, Machine, Ram
from test_coherence import random_trace
from test_groups import shared_stream
from test_private_traces import chunker
from test_writebacks import brute_writebacks

TAG = int(STORE_TAG)


class DirtyLru:
    """Fully associative LRU caches of `cap` lines with dirty bits, one per instance; counts evicted dirty lines."""

    def __init__(self, n: int, cap: int) -> None:
        self.caches = [OrderedDict() for _ in range(n)]
        self.cap, self.writebacks, self.misses = cap, [0] * n, [0] * n

    def touch(self, i: int, x: int, store: bool) -> None:
        cache = self.caches[i]
        if x in cache:
            cache.move_to_end(x)
            cache[x] = cache[x] or store
            return
        self.misses[i] += 1
        cache[x] = store
        if len(cache) > self.cap:
            _, dirty = cache.popitem(last=False)
            self.writebacks[i] += dirty


def brute_hardware(lines, inst, n, cap):
    """Write-invalidate as hardware does it: a store removes the line from every other instance (its way is
    free again, a dirty copy goes to the storer unwritten; a load leaves the other copies, a dirty one stays
    dirty). (misses, write-backs) per instance."""
    sim = DirtyLru(n, cap)
    for raw, i in zip(lines.tolist(), inst.tolist()):
        x, store = raw & ~TAG, bool(raw & TAG)
        if store:
            for o, cache in enumerate(sim.caches):
                if o != i:
                    cache.pop(x, None)
        sim.touch(i, x, store)
    return sim.misses, sim.writebacks


def tagged(lines, stores):
    return np.asarray(lines, dtype=np.uint64) | (np.asarray(stores, dtype=np.uint64) << np.uint64(63))


def predicted(pairs, cap, ways=0):
    return [expected_hits(s, ways, cap) - expected_hits(e, ways, cap) for s, e in pairs]


@pytest.mark.parametrize("seed", [0, 1])
def test_depth_stack_matches_a_list_stack(seed):
    """Largest depths since each line's last access, with lines leaving the stack, and the final ones,
    against a Python list as the LRU stack; a tiny start makes the tables grow and the time axis compact.
    Turnover: the distinct lines that came above a line in its gap minus its largest depth; removals: the
    lines that left from above it; position: the mean share of its arrivals (counted as they come) come by
    each."""
    rng = np.random.default_rng(seed)
    lines = np.where(rng.random(4000) < 0.7, rng.integers(0, 50, 4000), rng.integers(0, 2000, 4000))
    drop = rng.random(4000) < 0.2
    stack: list[int] = []  # most recent last
    peak: dict[int, int] = {}
    came: dict[int, int] = {}  # lines that came above each stacked line since its last access
    seen: dict[int, set] = {}  # the distinct ones
    left: dict[int, list[int]] = {}  # for each line that left from above: how many had come by then
    want: list[tuple] = []

    def gap(y: int) -> tuple:
        shares = [c / (came[y]) for c in left[y]]
        return peak[y], len(seen[y]) - peak[y], len(shares), np.mean(shares) if shares else 0.5

    for x, leave in zip(lines.tolist(), drop.tolist()):
        held = x in stack
        want.append(gap(x) if held else (-1, 0, 0, 0.5))
        pos = stack.index(x) if held else -1
        if held:
            stack.remove(x)
        if held and leave:
            for y in stack[:pos]:  # the lines below x move up
                left[y].append(came[y])
        if not leave:
            for y in stack[pos:] if held else stack:  # x arrives above the lines it was below (all, if new)
                came[y] += 1
                seen[y].add(x)
            stack.append(x)
            came[x], seen[x], left[x] = 0, set(), []
        for k, y in enumerate(stack):
            peak[y] = 0 if y == x else max(peak[y], len(stack) - 1 - k)
    engine, plain = DepthStack(initial_lines=4), DepthStack(initial_lines=4)
    tags = tagged(lines, rng.random(4000) < 0.5)  # store tags are ignored
    cuts = ((0, 7), (7, 1500), (1500, 4000))
    got = [engine.feed_gaps(tags[a:b], drop=drop[a:b]) for a, b in cuts]
    for j, name in enumerate(("distance", "turnover", "left")):
        assert np.concatenate([getattr(g, name) for g in got]).tolist() == [w[j] for w in want], name
    assert np.concatenate([g.position for g in got]) == pytest.approx([w[3] for w in want], abs=1e-12)
    assert np.concatenate([plain.feed_distances(tags[a:b], drop=drop[a:b]) for a, b in cuts]).tolist() == [
        w[0] for w in want]
    ids, end = engine.stack_gaps()
    final = {y: gap(y) for y in stack}
    assert dict(zip(ids.tolist(), zip(end.distance.tolist(), end.turnover.tolist(), end.left.tolist()))) == {
        y: g[:3] for y, g in final.items()}
    assert dict(zip(ids.tolist(), end.position.tolist())) == pytest.approx({y: g[3] for y, g in final.items()})


@pytest.mark.parametrize("seed,n", [(0, 2), (1, 3), (2, 4)])
def test_instance_write_backs_match_hardware_for_every_capacity(seed, n):
    """Exact for fully associative LRU caches of any size with write-invalidate between them."""
    rng = np.random.default_rng(seed)
    size = 6000
    lines = np.where(rng.random(size) < 0.5, rng.integers(0, 150, size), rng.integers(0, 40, size))
    inst = rng.integers(0, n, size)
    stream = tagged(lines, rng.random(size) < 0.3)
    prof = InstanceWritebacks(n)
    prof.trackers = [type(t)(16, DepthStack(4)) for t in prof.trackers]  # small tables: they grow on the way
    for a, b in ((0, 1000), (1000, 1001), (1001, size)):
        prof.feed(stream[a:b], inst[a:b])
    pairs = prof.profiles()
    for cap in (1, 2, 5, 17, 39, 40, 41, 90, 149, 150, 400):
        assert predicted(pairs, cap) == pytest.approx(brute_hardware(stream, inst, n, cap)[1], abs=1e-9), cap


def test_without_coherence_each_instance_is_its_own_cache():
    rng = np.random.default_rng(7)
    lines, inst = rng.integers(0, 60, 3000), rng.integers(0, 2, 3000)
    stores = rng.random(3000) < 0.4
    prof = InstanceWritebacks(2, coherent=False)
    prof.feed(tagged(lines, stores), inst)
    for cap in (3, 20, 59):
        want = [brute_writebacks(lines[inst == i].astype(np.uint64), stores[inst == i], cap) for i in range(2)]
        assert predicted(prof.profiles(), cap) == pytest.approx(want, abs=1e-9)


# Hand-made: caches of 2 lines, instances 0 and 1; a, b, c, d are lines 1..4.
HAND = [
    # 0 stores a, 1 stores a (a moves to 1 unwritten), 1 then reads b, c: a leaves 1 dirty
    ([(0, 1, 1), (1, 1, 1), (1, 2, 0), (1, 3, 0)], (0, 1)),
    # 0 stores a, reads b, c (a leaves 0 dirty: written back), then 1 stores a: nothing left to move
    ([(0, 1, 1), (0, 2, 0), (0, 3, 0), (1, 1, 1)], (1, 0)),
    # 0 stores a, 1 reads a (0 keeps it dirty), 0 reads b, c: a leaves 0 dirty; 1's copy is clean
    ([(0, 1, 1), (1, 1, 0), (0, 2, 0), (0, 3, 0), (1, 2, 0), (1, 3, 0)], (1, 0)),
    # ping-pong of a: every store moves it, no write-back; the last owner still holds it at the end
    ([(0, 1, 1), (1, 1, 1), (0, 1, 1), (1, 1, 1), (0, 2, 0)], (0, 0)),
]


@pytest.mark.parametrize("rows,want", HAND)
def test_hand_counted_write_backs_per_instance(rows, want):
    inst = np.array([r[0] for r in rows])
    stream = tagged([r[1] for r in rows], [r[2] for r in rows])
    prof = InstanceWritebacks(2)
    prof.feed(stream, inst)
    assert predicted(prof.profiles(), 2) == pytest.approx(list(want), abs=1e-12)
    assert brute_hardware(stream, inst, 2, 2)[1] == list(want)
    sim = WritebackSim(CacheLevel("L3", 2 * 64, 64, 0, 40.0, 4.0, True, "hashed", 2), instances=2)
    sim.feed(stream, inst)
    assert [w for _, w in sim.per_instance()] == list(want)


@pytest.mark.parametrize("seed,n,ways", [(3, 2, 0), (4, 3, 0), (5, 4, 4)])
def test_the_simulator_matches_hardware_brute_force(seed, n, ways):
    """writeback_sim's instances against the pure-Python write-invalidate caches (fully associative), and
    its set-associative instances with one set per instance (every way in one set: the same)."""
    rng = np.random.default_rng(seed)
    lines, inst = rng.integers(0, 80, 4000), rng.integers(0, n, 4000)
    stream = tagged(lines, rng.random(4000) < 0.3)
    level = CacheLevel("L3", 16 * 64, 64, ways if ways else 0, 40.0, 4.0, True, "hashed", 2)
    if ways:  # 4 sets of 4 ways: compare with one brute-force cache per (instance, set) via virtual indexing
        level = CacheLevel("L3", 16 * 64, 64, 4, 40.0, 4.0, True, "virtual", 2)
    sim = WritebackSim(level, instances=n)
    sim.feed(stream[:1500], inst[:1500])
    sim.feed(stream[1500:], inst[1500:])
    if not ways:
        misses, wbs = brute_hardware(stream, inst, n, 16)
    else:
        parts = [brute_hardware(stream[lines % 4 == s], inst[lines % 4 == s], n, 4) for s in range(4)]
        misses = [sum(p[0][i] for p in parts) for i in range(n)]
        wbs = [sum(p[1][i] for p in parts) for i in range(n)]
    assert sim.per_instance() == list(zip(misses, wbs))


def level(name, lines, ways, shared=False, per=0):
    return CacheLevel(name, lines * 64, 64, ways, 4.0, 1.0, shared, "hashed" if shared else "virtual", per)


CCX = Machine("ccx", "synthetic", 8, 2.0, (level("L1", 2, 0), level("L3", 8, 0, shared=True, per=2)),
              Ram(80.0, 10.0, 40.0), 8, 256, {})


@pytest.mark.parametrize("placement,sched", [("close", SCHED_STATIC), ("spread", SCHED_DYNAMIC)])
def test_profiles_of_a_grouped_last_level_match_hardware(placement, sched, tmp_path):
    """The whole profile pass (mimicked shared traces, groupings, store tags) against the brute force, per
    instance; dram_traffic sums the instances; saved and loaded unchanged."""
    info, ch = random_trace(12, 40, True, sched)
    cores = [1, 4]
    ps = compute_profiles_from(info, chunker(ch, 11), cores, "iteration", "rr", seed=3,
                               groupings=groupings_for([CCX], cores, placement), writebacks=True)
    grouping = (0, 0, 1, 1) if placement == "close" else (0, 1, 2, 3)
    lines, threads = shared_stream(info, chunker(ch, 11), 4, "rr", 3, 1)
    inst = np.asarray(grouping)[threads.astype(np.int64)]
    want = brute_hardware(lines, inst, max(grouping) + 1, 8)[1]
    table = dram_per_instance(ps, CCX, 4, placement)
    assert table["writebacks"].tolist() == pytest.approx(want, abs=1e-9)
    assert sum(want) > 0
    total = dram_traffic(ps, predict_hit_rates(ps, CCX, placement=placement), CCX, placement)
    assert total.set_index("cores").loc[4, "writebacks"] == pytest.approx(sum(want), abs=1e-9)
    assert total.set_index("cores").loc[4, "dram_read_bytes"] == pytest.approx(table["dram_read_bytes"].sum())
    back = ProfileSet.load(ps.save(tmp_path / "p"))
    name = grouping_name(grouping)
    turns = lambda pairs: [(p.turnover_sum is None, [a.tolist() for a in p.path_sums()])  # noqa: E731
                           for pair in pairs for p in pair]
    assert [(s.total, e.cold, e.count.tolist()) for s, e in back.instance_writebacks(name)] == \
        [(s.total, e.cold, e.count.tolist()) for s, e in ps.instance_writebacks(name)]
    assert turns(back.instance_writebacks(name)) == turns(ps.instance_writebacks(name))
    assert dram_per_instance(back, CCX, 4, placement).equals(table)


def test_dram_traffic_asks_for_per_instance_profiles():
    info, ch = random_trace(12, 40, True, SCHED_STATIC)
    ps = compute_profiles_from(info, chunker(ch, 11), [4], "iteration", "rr",
                               groupings=groupings_for([CCX], [4], "close"), writebacks=False)
    with pytest.raises(InputError, match="--writebacks"):
        dram_per_instance(ps, CCX, 4, "close")


def test_hardware_simulation_of_the_profiles_shared_traces():
    """simulate_dram walks the same shared traces as the profiles: equal to the hardware brute force."""
    info, ch = random_trace(12, 40, True, SCHED_STATIC)
    ps = compute_profiles_from(info, chunker(ch, 11), [4], "iteration", "rr", seed=3,
                               groupings=groupings_for([CCX], [4], "spread"), writebacks=True)
    got = simulate_dram(info, chunker(ch, 11), CCX, ps, [4], "spread")
    lines, threads = shared_stream(info, chunker(ch, 11), 4, "rr", 3, 1)
    misses, wbs = brute_hardware(lines, threads.astype(np.int64), 4, 8)
    assert got["reads"].tolist() == misses and got["writebacks"].tolist() == wbs
    assert got["accesses"].sum() == len(lines)


def test_a_frame_placed_level_is_simulated_under_several_frame_maps():
    """A hashed last level: simulate_dram's figures are the mean (and spread) over FRAME_SEEDS frame maps,
    each map a separate simulator run on the same shared stream; a fully associative one needs one map."""
    from analysis.hitrates.set_index import FRAME_SEEDS

    info, ch = random_trace(12, 40, True, SCHED_STATIC)
    hashed = Machine("ccx-hashed", "synthetic", 8, 2.0,
                     (level("L1", 2, 0), CacheLevel("L3", 8 * 64, 64, 2, 40.0, 4.0, True, "hashed", 2)),
                     Ram(80.0, 10.0, 40.0), 8, 256, {})
    ps = compute_profiles_from(info, chunker(ch, 11), [4], "iteration", "rr", seed=3,
                               groupings=groupings_for([hashed], [4], "close"), writebacks=True)
    got = simulate_dram(info, chunker(ch, 11), hashed, ps, [4], "close")
    lines, threads = shared_stream(info, chunker(ch, 11), 4, "rr", 3, 1)
    inst = threads.astype(np.int64) // 2
    runs = []
    for seed in range(3, 3 + FRAME_SEEDS):
        sim = WritebackSim(hashed.caches[-1], hashed.page_bytes, seed, 2)
        sim.feed(lines, inst)
        runs.append(sim.per_instance())
    runs = np.array(runs, dtype=float)
    assert got["frame_maps"].tolist() == [FRAME_SEEDS] * 2
    assert got["reads"].tolist() == pytest.approx(runs[:, :, 0].mean(axis=0).tolist())
    assert got["writebacks"].tolist() == pytest.approx(runs[:, :, 1].mean(axis=0).tolist())
    assert got["writebacks_sd"].tolist() == pytest.approx(runs[:, :, 1].std(axis=0).tolist())
    assert len({tuple(r) for r in runs[:, :, 0]}) > 1  # the maps differ: a mean of one draw would not
    fa = simulate_dram(info, chunker(ch, 11), CCX, ps, [4], "close")
    assert fa["frame_maps"].tolist() == [1, 1] and fa["reads_sd"].tolist() == [0.0, 0.0]


# ------------------------------------------------------------------ traced kernels, end to end

@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """lu (rows change owner as its loop shrinks: dirty lines move between instances) and jacobi-2d at SMALL,
    translated, instrumented and traced as the pipeline does."""
    import instrument
    from benchmarks.polybench import catalog
    from pptmc.pipeline import build_benchmark_binaries

    root = tmp_path_factory.mktemp("instance-writebacks")
    out = {}
    for name in ("lu", "jacobi-2d"):
        bench = catalog.by_name(name)
        build_benchmark_binaries(bench, "SMALL", root / name, modes=("trace",))
        instrument.run_trace(root / name / "trace.inst", bench.args, root / name / "t.trace")
        out[name] = str(root / name / "t.trace")
    return out


def ccx8(ways: int) -> Machine:
    """8 cores, an 8 KiB L3 per 2 cores (128 lines: both kernels overflow it)."""
    l3 = CacheLevel("L3", 8192, 64, ways, 40.0, 4.0, True, "hashed", 2)
    return Machine("ccx8", "synthetic", 8, 2.0, (level("L1", 16, 8), l3), Ram(80.0, 10.0, 40.0), 8, 256, {})


@pytest.mark.parametrize("name", ["lu", "jacobi-2d"])
def test_traced_kernels_match_the_simulated_instances(traced, name):
    """Per instance, 4 threads close and spread: fully associative, the write-backs are the simulator's
    exactly; 8-way hashed (SDCM), reads and write-backs within 10 %."""
    from analysis.hitrates.writeback_sim import simulate_dram_like
    from analysis.profiles.sweep import compute_profiles

    cores = [4]
    groupings = tuple(sorted({g for pl in ("close", "spread") for g in groupings_for([ccx8(0)], cores, pl)}))
    ps = compute_profiles(traced[name], cores, groupings=groupings, writebacks=True)
    for placement in ("close", "spread"):
        fa = simulate_dram_like(traced[name], ccx8(0), ps, cores, placement)
        assert dram_per_instance(ps, ccx8(0), 4, placement)["writebacks"].tolist() == pytest.approx(
            fa["writebacks"].tolist(), abs=1e-6)
        got = dram_per_instance(ps, ccx8(8), 4, placement)
        want = simulate_dram_like(traced[name], ccx8(8), ps, cores, placement)
        assert len(got) == (2 if placement == "close" else 4) and want["writebacks"].min() > 1000
        for column in ("dram_read_bytes", "dram_writeback_bytes"):
            assert got[column].to_numpy() == pytest.approx(want[column].to_numpy(), rel=0.10), (placement, column)
