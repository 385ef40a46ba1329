"""ProfileSet: PRD/CRD against brute force on the mimicked traces, storage, hit rates, CLI."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import instrument
import machines
from analysis.hitrates.rates import predict_hit_rates
from analysis.profiles.interleave import interleave_arrays
from analysis.profiles.private_traces import core_streams
from analysis.profiles.sweep import compute_profiles_from
from analysis.profiles.profileset import ProfileSet, ReuseProfile
from instrument.trace_types import SCHED_DYNAMIC, SCHED_GUIDED, SCHED_STATIC
from machines.model import CacheLevel, Machine, Ram
from pptmc.cli import run
from common.errors import InputError
from test_private_traces import chunker, make_trace
from test_reuse import brute_distances


def exact(lines) -> ReuseProfile:
    return ReuseProfile.from_distances(np.array(brute_distances(lines), dtype=np.int64))


def same(a: ReuseProfile, b: ReuseProfile) -> bool:
    return (a.cold, a.total) == (b.cold, b.total) and a.lower.tolist() == b.lower.tolist() \
        and a.count.tolist() == b.count.tolist() and a.dist_sum.tolist() == b.dist_sum.tolist()


@pytest.fixture(scope="module")
def trace():
    return make_trace(trip=60, schedule=SCHED_STATIC, n_loops=2, seed=11)


def test_profiles_match_brute_force_on_mimicked_traces(trace):
    info, ch = trace
    ps = compute_profiles_from(info, chunker(ch, 13), [1, 3], "iteration", "random", seed=5, refs_per_turn=2)
    assert same(ps.crd[1], exact(ch.addr >> np.uint64(6)))
    private = [np.concatenate(list(s)) for s in core_streams(info, chunker(ch, 50), 3, "iteration")]
    for c in range(3):
        assert same(ps.prd[(3, c)], exact(private[c]))
    shared, _ = interleave_arrays(private, "random", seed=5, refs_per_turn=2)
    assert same(ps.crd[3], exact(shared))
    assert ps.crd[3].total == sum(p.total for c, p in ps.prd.items() if c[0] == 3)


def test_save_load_roundtrip(trace, tmp_path):
    info, ch = trace
    ps = compute_profiles_from(info, chunker(ch, 64), [1, 2, 4], "paper")
    ps.save(tmp_path)
    for name in ("summary.csv", "summary.parquet", "bins.csv", "bins.parquet", "profiles.json"):
        assert (tmp_path / name).is_file()
    back = ProfileSet.load(tmp_path)
    assert back.metadata() == ps.metadata() and back.mode == "paper"
    assert set(back.prd) == set(ps.prd) and all(same(back.prd[k], ps.prd[k]) for k in ps.prd)
    assert all(same(back.crd[k], ps.crd[k]) for k in ps.crd)
    (tmp_path / "bins.parquet").unlink()  # CSV fallback reads the same numbers
    assert all(same(ProfileSet.load(tmp_path).crd[k], ps.crd[k]) for k in ps.crd)


def test_load_errors(tmp_path):
    with pytest.raises(InputError, match="profiles.json"):
        ProfileSet.load(tmp_path)


def lv(name, lines, ways=0, shared=False, line=64):
    return CacheLevel(name, lines * line, line, ways, 4.0, 1.0, shared)


def mach(*levels):
    return Machine("m", "", 8, 2.0, tuple(levels), Ram(80.0, 10.0, 40.0), 8, 256, {})


def test_hit_rates_hand_computed():
    ps = ProfileSet(64, "iteration", "rr", 0, 1, "t")
    # core 0: distances 0,1,5 + 1 cold; core 1: distance 0 x 6, 2 cold; CRD: 2,9 + 2 cold
    ps.prd[(2, 0)] = ReuseProfile.from_distances(np.array([0, 1, 5, -1]))
    ps.prd[(2, 1)] = ReuseProfile.from_distances(np.array([0] * 6 + [-1, -1]))
    ps.crd[2] = ReuseProfile.from_distances(np.array([2, 9, -1, -1]))
    table = predict_hit_rates(ps, mach(lv("L1", 2), lv("L2", 8), lv("L3", 16, shared=True)))
    l1, l2, l3 = table.to_dict(orient="records")
    assert l1["cumulative_hit_rate"] == pytest.approx(8 / 12)  # weighted by accesses, not averaged
    assert l2["cumulative_hit_rate"] == pytest.approx(9 / 12)
    assert l2["local_hit_rate"] == pytest.approx((9 / 12 - 8 / 12) / (4 / 12))
    assert l3["cumulative_hit_rate"] == pytest.approx(2 / 4)
    assert l3["local_hit_rate"] == pytest.approx((0.5 - 0.75) / 0.25)  # CRD dilation: reported as is
    assert list(table.columns[:4]) == ["cores", "level", "cumulative_hit_rate", "local_hit_rate"]


def test_line_size_mismatch_is_an_error():
    ps = ProfileSet(64, "paper", "rr", 0, 1, "t", crd={1: ReuseProfile.empty()},
                    prd={(1, 0): ReuseProfile.empty()})
    with pytest.raises(InputError, match="--line-size 128"):
        predict_hit_rates(ps, mach(lv("L1", 8, line=128)))


class FakeReader:
    def __init__(self, info, chunk):
        self.info, self._chunk = info, chunk

    def chunks(self, max_rows):
        return chunker(self._chunk, min(max_rows, 17))()


def test_cli_profile_and_hitrates(trace, tmp_path, monkeypatch, capsys):
    info, ch = trace
    path = tmp_path / "prog.trace"
    path.write_bytes(b"fake")
    monkeypatch.setattr(instrument, "open_trace", lambda p: FakeReader(info, ch), raising=False)
    m = mach(lv("L1", 8, 2), lv("L2", 32, 4), lv("L3", 64, 8, shared=True))
    monkeypatch.setattr(machines, "load_machine", lambda name: m)
    out = tmp_path / "prof"
    assert run(["profile", str(path), "--cores", "4,1,2", "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["cores"] == [1, 2, 4] and summary["mode"] == "iteration"
    table = tmp_path / "rates.csv"
    assert run(["hitrates", str(out), "--machine", "m", "--simulate", str(path), "-o", str(table), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    df = pd.read_parquet(tmp_path / "rates.parquet")
    assert len(rows) == len(df) == 2 * 3 * 3 and set(df["source"]) == {"set-aware", "simulator"}
    assert df["cumulative_hit_rate"].between(-1, 1).all()


def test_cli_errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        run(["profile", str(tmp_path / "missing.trace"), "-o", str(tmp_path / "o")])
    (tmp_path / "t").write_bytes(b"")
    with pytest.raises(InputError, match="--cores"):
        run(["profile", str(tmp_path / "t"), "--cores", "2,x", "-o", str(tmp_path / "o")])


def straightforward_profiles(info, factory, cores, mode, interleave, seed, k):
    """The plain path: materialise each core count's private and shared traces with mimic()
    and run a fresh engine over each (what profile_configs must reproduce exactly)."""
    from analysis.profiles.private_traces import InterleaveSpec, mimic
    from analysis.profiles.reuse import ReuseEngine

    specs = [InterleaveSpec(p, interleave, seed, k) for p in cores]
    private = {p: [[] for _ in range(p)] for p in cores}
    shared = {p: [] for p in cores}
    for i, batch in mimic(info, factory, specs, mode, 64):
        p = cores[i]
        shared[p].append(batch.lines)
        for core, piece in batch.pieces:
            private[p][core].append(piece)
    out = {}
    for p in cores:
        def prof(parts):
            engine = ReuseEngine()
            engine.feed(np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64))
            return engine.histogram()
        out[p] = ([prof(parts) for parts in private[p]], prof(shared[p]))
    return out


@pytest.mark.parametrize("mode,interleave,k,sched,chunk", [
    ("iteration", "rr", 1, SCHED_STATIC, 0), ("iteration", "random", 2, SCHED_STATIC, 0),
    ("iteration", "rr", 3, SCHED_DYNAMIC, 2), ("iteration", "random", 1, SCHED_GUIDED, 1),
    ("paper", "rr", 1, SCHED_STATIC, 0), ("paper", "random", 2, SCHED_STATIC, 0)])
def test_fast_sweep_is_bit_identical_to_straightforward_path(mode, interleave, k, sched, chunk):
    from test_private_traces import make_trace as mk

    info, ch = mk(trip=90, schedule=sched, chunk=chunk, n_loops=3, seed=2)
    cores = [1, 2, 3, 4, 8, 16]
    ps = compute_profiles_from(info, chunker(ch, 37), cores, mode, interleave, seed=13, refs_per_turn=k)
    ref = straightforward_profiles(info, chunker(ch, 53), cores, mode, interleave, 13, k)
    without_one = compute_profiles_from(info, chunker(ch, 37), [3, 8], mode, interleave, seed=13, refs_per_turn=k)
    for p in cores:
        assert all(same(ps.prd[(p, c)], ref[p][0][c]) for c in range(p))
        assert same(ps.crd[p], ref[p][1])
    for p in (3, 8):  # no one-core task to fork core 0 from
        assert all(same(without_one.prd[(p, c)], ref[p][0][c]) for c in range(p))
        assert same(without_one.crd[p], ref[p][1])
    # and both against brute force for one core count
    private = [np.concatenate(list(s)) for s in core_streams(info, chunker(ch, 50), 4, mode)]
    shared, _ = interleave_arrays(private, interleave, seed=13, refs_per_turn=k)
    assert same(ps.crd[4], exact(shared)) and all(same(ps.prd[(4, c)], exact(private[c])) for c in range(4))


def test_spilled_sweep_matches_in_memory(trace, tmp_path):
    """A tiny interleaving budget forces lanes to disk; the profiles must not change."""
    from analysis.profiles.sweep import SweepSettings, profile_configs

    info, ch = trace
    args = (info, chunker(ch, 11), [1, 2, 4], SweepSettings("iteration", "rr", 0, 1, 64))
    small = profile_configs(*args, memory_budget=64, spill_dir=str(tmp_path))
    big = profile_configs(*args)
    for (prd_a, crd_a, *_), (prd_b, crd_b, *_) in zip(small, big):
        assert same(crd_a, crd_b) and all(same(a, b) for a, b in zip(prd_a, prd_b))


@pytest.mark.parametrize("mode,interleave,k", [("iteration", "rr", 1), ("paper", "random", 2)])
def test_sweep_without_coherence_ignores_stores_and_matches_straightforward_path(mode, interleave, k):
    """coherence=False: stores change nothing, and the shared sweep equals the plain path (as before)."""
    from instrument.trace_types import CHUNK_DTYPES, TraceChunk
    from test_private_traces import make_trace as mk

    info, ch = mk(trip=90, schedule=SCHED_STATIC, n_loops=3, seed=4)
    stores = np.random.default_rng(1).random(len(ch)) < 0.4
    ch = TraceChunk(*(stores if name == "is_store" else getattr(ch, name) for name in CHUNK_DTYPES))
    cores = [1, 2, 4, 8]
    ps = compute_profiles_from(info, chunker(ch, 37), cores, mode, interleave, seed=3, refs_per_turn=k,
                               coherence=False)
    ref = straightforward_profiles(info, chunker(ch, 53), cores, mode, interleave, 3, k)
    for p in cores:
        assert all(same(ps.prd[(p, c)], ref[p][0][c]) and ps.prd[(p, c)].coherence == 0 for c in range(p))
        assert same(ps.crd[p], ref[p][1])
    on = compute_profiles_from(info, chunker(ch, 37), cores, mode, interleave, seed=3, refs_per_turn=k)
    assert all(same(on.crd[p], ps.crd[p]) for p in cores)  # the shared cache is not affected


def test_job_groups_keep_neighbours_and_balance():
    from analysis.profiles.sweep import job_groups

    assert job_groups([16, 1, 4, 2, 8], 2) == [[1, 2, 4], [8, 16]]  # costs 5 and 4 (hand-computed)
    assert job_groups([1, 2, 4, 8, 16], 3) == [[1], [2, 4], [8, 16]]
    assert job_groups([1, 2, 4, 8, 16], 1) == [[1, 2, 4, 8, 16]]
    assert job_groups([2, 4], 9) == [[2], [4]] and job_groups([3], 4) == [[3]]


def test_jobs_errors_reach_the_caller(trace):
    """A failing worker's error is raised in the parent; jobs < 1 is rejected."""
    from analysis.profiles.sweep import SweepSettings, profile_configs

    info, ch = trace
    with pytest.raises(InputError, match="--jobs 0"):
        compute_profiles_from(info, chunker(ch, 13), [1, 2], jobs=0)

    def broken():
        raise InputError("chunks: cannot read")

    with pytest.raises(InputError, match="cannot read"):
        profile_configs(info, broken, [1, 2, 4], SweepSettings("iteration", "rr", 0, 1, 64), jobs=2)


def test_cli_jobs_same_profiles(trace, tmp_path, monkeypatch):
    info, ch = trace
    path = tmp_path / "prog.trace"
    path.write_bytes(b"fake")
    monkeypatch.setattr(instrument, "open_trace", lambda p: FakeReader(info, ch), raising=False)
    for jobs in ("1", "2"):
        assert run(["profile", str(path), "--cores", "1,2,4,8", "--jobs", jobs, "-o", str(tmp_path / jobs)]) == 0
    a, b = ProfileSet.load(tmp_path / "1"), ProfileSet.load(tmp_path / "2")
    assert all(x.equals(y) for x, y in zip(a.tables(), b.tables()))


def test_cli_profile_for_machines_makes_their_instance_crds(trace, tmp_path, monkeypatch, capsys):
    """`profile --machines M --placement P` makes the per-instance CRDs `hitrates --placement P` reads on M;
    without them hitrates says what to rerun."""
    from dataclasses import replace

    info, ch = trace
    path = tmp_path / "prog.trace"
    path.write_bytes(b"fake")
    monkeypatch.setattr(instrument, "open_trace", lambda p: FakeReader(info, ch), raising=False)
    m = replace(mach(lv("L1", 8, 2), lv("L3", 64, 8, shared=True)), cores=4)
    m = replace(m, caches=(m.caches[0], replace(m.caches[1], cores_per_instance=2)))
    monkeypatch.setattr(machines, "load_machine", lambda name: m)
    grouped, plain = tmp_path / "grouped", tmp_path / "plain"
    assert run(["profile", str(path), "--cores", "1,2,4", "--machines", "m", "--placement", "spread",
                "-o", str(grouped)]) == 0
    assert run(["profile", str(path), "--cores", "1,2,4", "-o", str(plain)]) == 0
    assert ProfileSet.load(grouped).instance_crds("0.0.1.1") and ProfileSet.load(grouped).instance_crds("0.1")
    assert run(["hitrates", str(grouped), "--machine", "m", "--placement", "spread", "-o", str(tmp_path / "r")]) == 0
    with pytest.raises(InputError, match="pptmc profile --machines"):
        run(["hitrates", str(plain), "--machine", "m", "--placement", "spread", "-o", str(tmp_path / "r2")])
    capsys.readouterr()
