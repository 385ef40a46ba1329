"""Per-set-class profiles and the set-aware hit rates, against brute force and the LRU simulator."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from analysis.hitrates.cachesim import simulate_hierarchy
from analysis.hitrates.rates import class_widths, predict_hit_rates
from analysis.profiles.profileset import ProfileSet
from analysis.profiles.set_classes import ClassEngine
from analysis.profiles.sweep import compute_profiles_from
from analysis.profiles.sweep_pass import SweepPass
from common.errors import InputError
from instrument.trace_types import SCHED_DYNAMIC, SCHED_STATIC
from machines.model import CacheLevel, Machine, Ram
from test_private_traces import chunker, make_trace


def brute_class_distances(lines: np.ndarray, bits: int) -> list[int]:
    """Distinct lines of the same class since the last access to the line (-1: first touch)."""
    stacks: dict[int, OrderedDict] = {}
    out = []
    for x in lines.tolist():
        od = stacks.setdefault(x & ((1 << bits) - 1), OrderedDict())
        if x in od:
            keys = list(od)
            out.append(len(keys) - 1 - keys.index(x))
            od.move_to_end(x)
        else:
            out.append(-1)
            od[x] = True
    return out


@pytest.mark.parametrize("bits", [1, 3, 6])
def test_class_distances_match_brute_force(bits):
    rng = np.random.default_rng(bits)
    lines = np.concatenate([rng.integers(0, 300, 4000), np.arange(0, 64 * 40, 64)]).astype(np.uint64)
    engine = ClassEngine(bits)
    got = np.concatenate([engine.feed_distances(lines[:1500]), engine.feed_distances(lines[1500:])])
    assert got.tolist() == brute_class_distances(lines, bits)
    prof = engine.histogram()
    assert prof.total == len(lines) and prof.cold == int((got < 0).sum())


def level(name, lines, ways, shared=False, indexing="virtual"):
    return CacheLevel(name, lines * 64, 64, ways, 4.0, 1.0, shared, indexing)


# every level's sets are fixed by the line id's low bits: 8 sets (3 bits), 16 sets (4 bits)
VIRTUAL = Machine("virtual", "synthetic", 16, 2.0, (level("L1", 16, 2), level("L2", 64, 4),
                                                    level("L3", 128, 8, shared=True)), Ram(80.0, 10.0, 40.0), 8, 256, {})


@pytest.mark.parametrize("mode,interleave,k,sched", [("iteration", "rr", 1, SCHED_STATIC),
                                                     ("iteration", "random", 3, SCHED_DYNAMIC),
                                                     ("paper", "rr", 2, SCHED_STATIC)])
def test_set_aware_equals_the_set_associative_simulator(mode, interleave, k, sched):
    """Sets fixed by the address: the set-aware rate is exact at every level and core count (SDCM is not)."""
    info, ch = make_trace(trip=150, schedule=sched, n_loops=3, seed=4)
    cores = [1, 2, 3, 4, 8]
    ps = compute_profiles_from(info, chunker(ch, 41), cores, mode, interleave, seed=9, refs_per_turn=k,
                               coherence=False, class_bits=class_widths([VIRTUAL]))
    assert ps.class_bits == [3, 4]
    sim = simulate_hierarchy(info, chunker(ch, 67), VIRTUAL, cores, mode, interleave, seed=9, refs_per_turn=k)
    aware = predict_hit_rates(ps, VIRTUAL, set_aware=True)
    assert aware["level_hit_rate"].to_numpy() == pytest.approx(sim["level_hit_rate"].to_numpy(), abs=1e-12)
    sdcm = predict_hit_rates(ps, VIRTUAL)
    assert np.abs(sdcm["level_hit_rate"].to_numpy() - sim["level_hit_rate"].to_numpy()).max() > 0.05


def assert_first_level_is_the_coherent_simulators(ps, info, ch, cores) -> None:
    """The set-aware L1 rates of `ps` equal the coherent hierarchical set-associative simulator's exactly."""
    sim = simulate_hierarchy(info, chunker(ch, 67), VIRTUAL, cores, "iteration", "rr", hierarchical=True,
                             coherent=True)
    aware = predict_hit_rates(ps, VIRTUAL, set_aware=True)
    first = (aware["level"] == "L1").to_numpy()
    assert aware["cumulative_hit_rate"].to_numpy()[first] == pytest.approx(
        sim["cumulative_hit_rate"].to_numpy()[first], abs=1e-12)


def test_set_aware_first_level_with_coherence_equals_the_coherent_simulator():
    info, ch = make_trace(trip=200, schedule=SCHED_DYNAMIC, n_loops=3, seed=7)
    cores = [1, 2, 4, 8]
    ps = compute_profiles_from(info, chunker(ch, 53), cores, "iteration", "rr", class_bits=(3, 4))
    assert_first_level_is_the_coherent_simulators(ps, info, ch, cores)


def test_class_profiles_survive_save_and_load(tmp_path):
    info, ch = make_trace(trip=60, n_loops=2, seed=1)
    ps = compute_profiles_from(info, chunker(ch, 29), [1, 2], class_bits=(6,))
    ps.save(tmp_path / "p")
    from common.manifest import write_manifest

    write_manifest(tmp_path / "p", "test")
    back = ProfileSet.load(tmp_path / "p")
    assert back.class_bits == [6]
    for key, prof in ps.class_prd.items():
        assert back.class_prd[key].count.tolist() == prof.count.tolist() and back.class_prd[key].cold == prof.cold
    assert predict_hit_rates(back, VIRTUAL, set_aware=True).equals(predict_hit_rates(ps, VIRTUAL, set_aware=True))


def test_set_aware_without_class_profiles_says_what_to_rerun():
    info, ch = make_trace(trip=30, seed=2)
    ps = compute_profiles_from(info, chunker(ch, 29), [1])
    with pytest.raises(InputError, match="--set-bits 3.*--hit-rates sdcm"):
        predict_hit_rates(ps, VIRTUAL, set_aware=True)


def test_class_widths_follow_indexing_and_page_size():
    """Virtual: every set bit; physical: those inside the page; hashed: none."""
    l2 = level("L2", 8192, 8, indexing="physical")  # 1024 sets
    llc = level("L3", 16384, 16, shared=True, indexing="hashed")
    small = Machine("m", "", 4, 2.0, (level("L1", 512, 8), l2, llc), Ram(80.0, 10.0, 40.0), 8, 256, {})
    assert class_widths([small]) == (6,)
    huge = Machine("m", "", 4, 2.0, (level("L1", 512, 8), l2, llc), Ram(80.0, 10.0, 40.0), 8, 256, {},
                   page_bytes=2 << 20)
    assert class_widths([huge]) == (6, 10)
    assert class_widths([small], "sdcm") == ()


def test_class_prds_without_class_crds_are_the_same():
    """crds=False skips the shared traces' class engines; the PRDs (coherence misses included) do not change."""
    from test_coherence import random_trace

    info, ch = random_trace(12, 40, True, SCHED_STATIC)
    full = compute_profiles_from(info, chunker(ch, 11), [1, 2, 4], "iteration", class_bits=(3,))
    lean = compute_profiles_from(info, chunker(ch, 11), [1, 2, 4], "iteration", class_bits=(3,), class_crds=False)
    for key, prof in full.class_prd.items():
        other = lean.class_prd[key]
        assert prof.count.tolist() == other.count.tolist() and prof.coherence == other.coherence
    assert sum(p.coherence for p in lean.class_prd.values()) > 0
    assert (3, 2) not in lean.class_crd and (3, 1) in lean.class_crd
    with pytest.raises(InputError, match="no per-set-class CRD"):
        lean.crd_of(2, 3)


def test_class_profiles_replay_repeated_loops_exactly(monkeypatch):
    """Loop instances that repeat each core's private trace are replayed by the class engines (their
    counts added, not fed again): the profiles equal those of feeding every access."""
    from analysis.profiles import set_classes
    from instrument.trace_types import NO_LOOP, BlockInfo, LoopInstance
    from test_private_traces import HEAP, SHARED, STACK, rows_to_trace

    blocks = {0: BlockInfo(0, "OUT__1", "entry", False), 1: BlockInfo(1, "OUT__1", "shared_var_trace1", True),
              2: BlockInfo(2, "OUT__1", "for.body", False)}
    trip, rows, loops = 12_000, [], []
    for lp in range(6):  # the same loop six times: every core's stretch repeats
        rows += [(STACK, 0, NO_LOOP, -1, True), (SHARED, 1, NO_LOOP, -1, False)]
        loops.append(LoopInstance(lp, 0, trip, SCHED_STATIC, 0))
        for it in range(trip):
            rows.append((HEAP + 64 * it, 2, lp, it, False))
            rows.append((HEAP + (1 << 24) + 64 * ((it * 37) % trip), 2, lp, it, False))
    info, ch = rows_to_trace(rows, blocks, loops)
    replays = []
    original = set_classes.ClassEngine.add_tally
    monkeypatch.setattr(set_classes.ClassEngine, "add_tally",
                        lambda self, counts, sums: replays.append(1) or original(self, counts, sums))
    replayed = compute_profiles_from(info, chunker(ch, 5000), [1, 2, 4], "iteration", class_bits=(6,))
    assert replays, "no copy was replayed: the test no longer covers the replay"
    monkeypatch.setattr(SweepPass, "_watch", lambda self, prep, splits: None)
    fed = compute_profiles_from(info, chunker(ch, 5000), [1, 2, 4], "iteration", class_bits=(6,))
    for key, prof in fed.class_prd.items():
        other = replayed.class_prd[key]
        assert (prof.count.tolist(), prof.dist_sum.tolist(), prof.cold) == (other.count.tolist(),
                                                                            other.dist_sum.tolist(), other.cold)


def test_class_engine_tables_start_at_the_estimates_share():
    """Hand-computed: 32000 lines over 64 classes is 500 a class for one core; p cores start at 2/p of that."""
    from analysis.profiles.set_classes import class_lines
    from instrument.trace_types import TraceInfo

    def info(estimate):
        return TraceInfo(path="t", format_version=1, program="p", args=[], complete=True, n_accesses=1, blocks={},
                         block_counts={}, distinct_lines_estimate=estimate)

    assert class_lines(info(32000), 64, 6, 1) == 500
    assert class_lines(info(32000), 64, 6, 4) == 250
    assert class_lines(info(32000), 128, 6, 1) == 250   # 128-byte lines: half as many
    assert class_lines(info(None), 64, 6, 1) == 16      # no estimate: the engines' smallest table
    assert class_lines(info(10 ** 12), 64, 1, 1) == 1 << 16


def test_class_engine_copy_and_relabel_continue_exactly():
    """A copy continues as the original would; a relabelled copy (per-core offset, a multiple of 2^bits) gives the
    brute-force class distances of the relabelled stream; an offset that moves lines between classes is refused."""
    rng = np.random.default_rng(3)
    head, tail = rng.integers(0, 200, 1500).astype(np.uint64), rng.integers(0, 200, 1500).astype(np.uint64)
    engine = ClassEngine(3)
    engine.feed_distances(head)
    twin = engine.copy()
    delta = 5 << 41
    moved = engine.copy()
    moved.relabel(0, delta)
    want = brute_class_distances(np.concatenate([head, tail]), 3)[len(head):]
    assert engine.feed_distances(tail).tolist() == want
    assert twin.feed_distances(tail).tolist() == want
    assert moved.feed_distances(tail + np.uint64(delta)).tolist() == want
    assert twin.histogram().count.tolist() == engine.histogram().count.tolist()
    with pytest.raises(ValueError, match="between 3-bit classes"):
        twin.relabel(0, 12)


def test_class_pass_shares_engines_of_coinciding_traces(monkeypatch):
    """With a static schedule, core 2c of 2p runs the first half of core c of p's block: the class pass feeds one
    engine for both and forks it (ClassEngine.copy) where they part; the set-aware rates stay the set-associative
    simulator's exactly (every set bit known), with coherence on."""
    copies = []
    original = ClassEngine.copy
    monkeypatch.setattr(ClassEngine, "copy", lambda self: copies.append(1) or original(self))
    info, ch = make_trace(trip=150, schedule=SCHED_STATIC, n_loops=3, seed=4)
    cores = [1, 2, 4, 8]
    ps = compute_profiles_from(info, chunker(ch, 41), cores, "iteration", class_bits=class_widths([VIRTUAL]))
    assert copies, "no class engine was shared between coinciding private traces"
    assert_first_level_is_the_coherent_simulators(ps, info, ch, cores)
