"""Sampled per-block reuse profiles against a brute-force reuse-distance oracle."""
from __future__ import annotations

import numpy as np
import pytest

from analysis.sampling.amm import blocks as S
from analysis.sampling import streams as ST
from analysis.profiles.profileset import ReuseProfile
from instrument.trace_types import TraceInfo
from common.errors import InputError
from fake_source import fake_source_traces  # noqa: F401 (fixture)


def brute_distances(lines, window=None):
    """Distinct lines since the previous use of the same line (-1: none, or none within `window`)."""
    out = []
    for t, x in enumerate(lines):
        seen = set()
        d = -1
        lo = 0 if window is None else max(0, t - window)
        for u in range(t - 1, lo - 1, -1):
            if lines[u] == x:
                d = len(seen)
                break
            seen.add(lines[u])
        out.append(d)
    return np.array(out, dtype=np.int64)


def make_trace(rng, n_instances=400, line_size=64):
    """Random blocks; each instance makes its block's fixed number of accesses into a few arrays."""
    per = {1: 1, 2: 3, 5: 2}
    blocks, addrs, inst = [], [], []
    seen = dict.fromkeys(per, 0)
    for _ in range(n_instances):
        b = int(rng.choice(list(per)))
        for _ in range(per[b]):
            blocks.append(b)
            addrs.append(int(rng.integers(0, 60)) * line_size + int(rng.integers(0, line_size)) + (b << 20))
            inst.append(seen[b])
        seen[b] += 1
    info = TraceInfo("mem", 1, "p", [], True, len(addrs), {}, {b: c for b, c in seen.items()})
    return info, np.array(addrs, np.uint64), np.array(blocks, np.int32), np.array(inst, np.int64)


@pytest.fixture(scope="module")
def trace():
    return make_trace(np.random.default_rng(3))


def _as_dict(p: ReuseProfile) -> dict:
    return {"cold": p.cold, "total": p.total, **dict(zip(p.lower.tolist(), p.count.tolist()))}


@pytest.mark.parametrize("rows", [7, 1000])
def test_full_rate_instance_matches_brute_force_per_block(trace, rows, chunks_of):
    """Rate 1 with an unbounded window gives every block's exact distances, whatever the chunking."""
    info, addr, block, inst = trace
    lines = (addr >> np.uint64(6)).tolist()
    ref = brute_distances(lines)
    sp = S.sample_profile(info, chunks_of(addr, block, inst, rows), 1.0, window=10**6, seed=0, method="instance")
    for b in (1, 2, 5):
        assert _as_dict(sp.per_block[b]) == _as_dict(ReuseProfile.from_distances(ref[block == b]))
    assert sp.accesses_per_instance == {1: 1.0, 2: 3.0, 5: 2.0}
    mixed = sp.combined()  # Eq. 2 with the trace's own counts rebuilds the whole-trace histogram
    assert _as_dict(mixed) == _as_dict(ReuseProfile.from_distances(ref))


@pytest.mark.parametrize("rows", [11, 60])
def test_window_bias_marks_far_reuse_beyond_window(trace, rows, chunks_of):
    """A previous use more than `window` accesses back is binned as cold (-1), across chunk borders."""
    info, addr, block, inst = trace
    ref = brute_distances((addr >> np.uint64(6)).tolist(), window=25)
    sp = S.sample_profile(info, chunks_of(addr, block, inst, rows), 1.0, window=25, seed=0, method="instance")
    for b in (1, 2, 5):
        assert _as_dict(sp.per_block[b]) == _as_dict(ReuseProfile.from_distances(ref[block == b]))


def test_sampling_is_seeded_and_samples_whole_instances(trace, chunks_of):
    """Same seed, same sample; the sample is whole instances at about the requested rate."""
    info, addr, block, inst = trace
    ch = chunks_of(addr, block, inst, 50)
    a, b, c = (S.sample_profile(info, ch, 0.3, window=10**6, seed=s, method="instance") for s in (5, 5, 6))
    assert {k: _as_dict(v) for k, v in a.per_block.items()} == {k: _as_dict(v) for k, v in b.per_block.items()}
    assert {k: _as_dict(v) for k, v in a.per_block.items()} != {k: _as_dict(v) for k, v in c.per_block.items()}
    assert a.per_block[2].total % 3 == 0 and a.per_block[5].total % 2 == 0
    assert 0.2 * len(addr) < a.n_sampled < 0.4 * len(addr)


def test_sample_size_caps_instances(trace, chunks_of):
    """At most sample_size instances per block are measured."""
    info, addr, block, inst = trace
    sp = S.sample_profile(info, chunks_of(addr, block, inst, 64), 1.0, window=100, sample_size=4, method="instance")
    assert sp.per_block[2].total == 4 * 3 and sp.per_block[1].total == 4


def test_line_granularity(chunks_of):
    """Two addresses in one 64-byte line reuse at distance 0; with 32-byte lines they are distinct."""
    addr = np.array([0, 40, 0, 40], np.uint64)
    block = np.zeros(4, np.int32)
    inst = np.arange(4, dtype=np.int64)
    info = TraceInfo("m", 1, "p", [], True, 4, {}, {0: 4})
    p64 = S.sample_profile(info, chunks_of(addr, block, inst, 4), 1.0, line_size=64, method="instance").per_block[0]
    p32 = S.sample_profile(info, chunks_of(addr, block, inst, 4), 1.0, line_size=32, method="instance").per_block[0]
    assert _as_dict(p64) == {"cold": 1, "total": 4, 0: 3}
    assert _as_dict(p32) == {"cold": 2, "total": 4, 1: 2}


def test_spatial_full_rate_is_exact(trace, chunks_of):
    """SHARDS at rate 1 keeps every line, so distances are exact (brute-force oracle as the engine)."""
    info, addr, block, inst = trace
    ref = brute_distances((addr >> np.uint64(6)).tolist())
    sp = S.sample_profile(info, chunks_of(addr, block, inst, 33), 1.0, method="spatial",
                          distance_fn=lambda x: brute_distances(x.tolist()))
    assert _as_dict(sp.combined()) == _as_dict(ReuseProfile.from_distances(ref))


def test_spatial_sampled_hit_rate_close_to_exact(chunks_of):
    """At 10% of lines the scaled profile's fully-associative hit rates stay close to the exact ones."""
    from analysis.profiles.reuse import reuse_distances
    from analysis.hitrates.sdcm import expected_hits

    rng = np.random.default_rng(0)
    n = 200_000
    hot = rng.integers(0, 300, n)            # block 0: a small hot set
    cold = rng.integers(0, 20_000, n)        # block 1: a large set
    which = rng.random(n) < 0.5
    lines = np.where(which, hot, cold + 1000).astype(np.uint64)
    block = which.astype(np.int32) ^ 1
    inst = np.zeros(n, np.int64)
    for b in (0, 1):
        inst[block == b] = np.arange((block == b).sum())
    info = TraceInfo("m", 1, "p", [], True, n, {}, {0: int((block == 0).sum()), 1: int((block == 1).sum())})
    ch = chunks_of(lines << np.uint64(6), block, inst, 1 << 16)
    exact = ReuseProfile.from_distances(reuse_distances(lines))
    est = S.sample_profile(info, ch, 0.1, method="spatial", seed=2).combined()
    for size in (256, 4096, 16384):
        e = expected_hits(exact, 0, size) / exact.total
        s = expected_hits(est, 0, size) / est.total
        assert abs(e - s) < 0.02, (size, e, s)


@pytest.mark.parametrize("kw, match", [({"sample_rate": 0.0}, "sample-rate"), ({"sample_rate": 1.5}, "sample-rate"),
                                       ({"window": 0}, "window"), ({"line_size": 48}, "line-size"),
                                       ({"method": "x"}, "method")])
def test_bad_parameters(trace, kw, match, chunks_of):
    info, addr, block, inst = trace
    args = {"sample_rate": 0.5, **kw}
    with pytest.raises(InputError, match=match):
        S.sample_profile(info, chunks_of(addr, block, inst, 64), **args)


@pytest.mark.parametrize("method", S.METHODS)
def test_block_missing_from_counts_is_an_input_error(trace, method, chunks_of):
    """An access whose block has no footer count means a cut trace: a clear error, not a crash."""
    info, addr, block, inst = trace
    bad = TraceInfo("cut.trace", 1, "p", [], False, len(addr), {}, {1: info.block_counts[1]})
    with pytest.raises(InputError, match="cut.trace.*re-run the tracer"):
        S.sample_profile(bad, chunks_of(addr, block, inst, 64), 0.5, method=method)


def test_exact_method_matches_brute_force(trace, chunks_of):
    """The exact method (engine on every access) gives the oracle's per-block profiles."""
    info, addr, block, inst = trace
    ref = brute_distances((addr >> np.uint64(6)).tolist())
    sp = S.sample_profile(info, chunks_of(addr, block, inst, 13), 1.0, method="exact")
    for b in (1, 2, 5):
        assert _as_dict(sp.per_block[b]) == _as_dict(ReuseProfile.from_distances(ref[block == b]))


def _probs(p: ReuseProfile) -> dict:
    return {"cold": p.cold / p.total, **{d: c / p.total for d, c in zip(p.lower.tolist(), p.count.tolist())}}


def test_hybrid_full_rate_recovers_beyond_window_distances(trace, chunks_of):
    """At rate 1 the hybrid's beyond-window share is the exact far distances: per-block P(D) is exact."""
    info, addr, block, inst = trace
    ref = brute_distances((addr >> np.uint64(6)).tolist())
    sp = S.sample_profile(info, chunks_of(addr, block, inst, 17), 1.0, window=25, method="hybrid",
                          distance_fn=lambda x: brute_distances(x.tolist()))
    for b in (1, 2, 5):
        got, want = _probs(sp.per_block[b]), _probs(ReuseProfile.from_distances(ref[block == b]))
        assert got.keys() == want.keys()
        assert all(got[k] == pytest.approx(want[k]) for k in want)
    windowed = S.sample_profile(info, chunks_of(addr, block, inst, 17), 1.0, window=25, method="instance")
    assert windowed.per_block[2].cold / windowed.per_block[2].total > _probs(sp.per_block[2])["cold"]


def test_first_access_with_unknown_block_is_an_input_error(chunks_of):
    """The block id of a chunk's very first access is checked too (no out-of-bounds count)."""
    addr = np.arange(6, dtype=np.uint64) * 64
    block = np.array([5, 1, 1, 1, 1, 1], np.int32)
    inst = np.array([0, 0, 1, 2, 3, 4], np.int64)
    info = TraceInfo("bad.trace", 1, "p", [], True, 6, {}, {1: 5})
    for method in S.METHODS:
        with pytest.raises(InputError, match="bad.trace"):
            S.sample_profile(info, chunks_of(addr, block, inst, 6), 0.5, method=method)


def test_every_block_keeps_a_sample_at_tiny_rates(trace, chunks_of):
    """Each executed block gets at least one sampled instance, so Eq. 2 covers every access."""
    info, addr, block, inst = trace
    sp = S.sample_profile(info, chunks_of(addr, block, inst, 64), 1e-6, method="instance")
    assert set(sp.per_block) == {1, 2, 5}
    assert sp.combined().total == len(addr)


@pytest.mark.parametrize("kw, match", [({"sample_size": 0}, "sample-size"), ({"seed": -1}, "seed")])
def test_bad_sample_size_and_seed(trace, kw, match, chunks_of):
    info, addr, block, inst = trace
    with pytest.raises(InputError, match=match):
        S.sample_profile(info, chunks_of(addr, block, inst, 64), 0.5, **kw)


# ------------------------------------------------------------------ sampled streams and `pptmc profile --sample-rate`

def _stream(n=30_000, seed=0):
    """A line stream with short reuses (a hot set), medium ones (a sweep) and random far ones."""
    rng = np.random.default_rng(seed)
    hot = rng.integers(0, 40, n)
    sweep = np.arange(n) % 3000 + 10_000
    far = rng.integers(50_000, 80_000, n)
    pick = rng.integers(0, 3, n)
    return np.choose(pick, [hot, sweep, far]).astype(np.uint64)


def _feed(sampler, lines, piece):
    for s in range(0, len(lines), piece):
        sampler.feed(lines[s:s + piece])
    return sampler.histogram()


@pytest.mark.parametrize("method", ST.STREAM_METHODS)
@pytest.mark.parametrize("piece", [1, 997, 40_000])
def test_stream_sampler_full_rate_is_exact(method, piece):
    """A 100% "sample" gives the exact profile (brute-force oracle), however the stream is cut."""
    lines = _stream(4000)
    ref = ReuseProfile.from_distances(brute_distances(lines.tolist()))
    got = _feed(ST.StreamSampler(1.0, seed=3, method=method, window=64, length=50), lines, piece)
    assert _as_dict(got) == _as_dict(ref)
    assert got.dist_sum.sum() == ref.dist_sum.sum()


def test_window_method_measures_windows_exactly():
    """At rate < 1 the near part is exactly the in-window accesses whose reuse gap is <= window."""
    lines = _stream(20_000, seed=1)
    g, length = 100, 40
    s = ST.StreamSampler(0.05, seed=7, method="window", window=g, length=length)
    start, period = s.next_start, s.period
    _feed(s, lines, 333)
    d = brute_distances(lines.tolist())
    gap = ST.gaps(lines)
    idx = np.concatenate([np.arange(st, min(st + length, len(lines))) for st in range(start, len(lines), period)])
    near = (gap[idx] > 0) & (gap[idx] <= g)
    vals, cnt = np.unique(d[idx][near], return_counts=True)
    assert s.near == dict(zip(vals.tolist(), cnt.tolist()))
    assert s.n_far == int((~near).sum()) and s.n_measured == len(idx)
    assert 0.03 * len(lines) < len(idx) < 0.07 * len(lines)


def test_window_sampled_hit_rates_close_to_exact():
    """At 10% the window estimate's fully-associative hit rates stay within 2 pp of the exact ones at
    every size, and every access is accounted for.

    SHARDS alone misses here (5 pp at 1024 lines): a third of the accesses go to 40 hot lines, of
    which a 10% line sample holds a handful, so their weight is a coin toss. Windows measure them."""
    method, sizes = "window", (32, 1024, 8192)
    from analysis.profiles.reuse import reuse_distances
    from analysis.hitrates.sdcm import expected_hits

    lines = _stream(200_000, seed=2)
    exact = ReuseProfile.from_distances(reuse_distances(lines))
    est = _feed(ST.StreamSampler(0.1, seed=5, method=method, window=256, length=256), lines, 1 << 14)
    assert est.total == exact.total
    for size in sizes:
        e = expected_hits(exact, 0, size) / exact.total
        s = expected_hits(est, 0, size) / est.total
        assert abs(e - s) < 0.02, (size, e, s)


def test_bad_stream_parameters():
    with pytest.raises(InputError, match="sample-rate"):
        ST.StreamSampler(0.0)
    with pytest.raises(InputError, match="sample-method"):
        ST.StreamSampler(0.5, method="instance")
    with pytest.raises(InputError, match="window"):
        ST.StreamSampler(0.5, window=0)


def _two_loop_trace():
    """Two blocks over a private and a shared array, enough accesses for several windows per stream."""
    rng = np.random.default_rng(11)
    n = 6000
    block = (np.arange(n) % 3 == 0).astype(np.int32)
    addr = np.where(block == 1, (1 << 30) + rng.integers(0, 4000, n) * 8, (2 << 30) + (np.arange(n) % 900) * 64)
    inst = np.zeros(n, np.int64)
    for b in (0, 1):
        inst[block == b] = np.arange((block == b).sum())
    info = TraceInfo("mem.trace", 1, "p", [], True, n, {}, {0: int((block == 0).sum()), 1: int((block == 1).sum())})
    return info, addr.astype(np.uint64), block, inst


def _dir_tables(d):
    import pandas as pd

    return pd.read_csv(d / "summary.csv"), pd.read_csv(d / "bins.csv")


def test_profile_full_sample_equals_exact_profile_set(tmp_path, fake_trace_files):
    """`pptmc profile --sample-rate 1 --sample-method window` (the stream sampler) writes the same PRDs and CRDs
    as the exact command, labelled as sampled (the default source method: tests/test_source_sampling.py)."""
    import json

    from analysis.profiles.profileset import ProfileSet
    from pptmc import cli

    trace = tmp_path / "mem.trace"
    trace.touch()
    fake_trace_files[str(trace)] = _two_loop_trace()
    common = ["profile", str(trace), "--cores", "1,2,4", "--mode", "paper", "--set-bits", "0"]
    assert cli.run([*common, "-o", str(tmp_path / "exact")]) == 0
    assert cli.run([*common, "--sample-rate", "1", "--sample-method", "window", "--sample-window", "50",
                    "--window-length", "30", "-o", str(tmp_path / "full")]) == 0
    for a, b in zip(_dir_tables(tmp_path / "exact"), _dir_tables(tmp_path / "full")):
        assert a.equals(b)
    meta = json.loads((tmp_path / "full" / "profiles.json").read_text())
    assert meta["sampling"] == {"sampled": True, "rate": 1.0, "method": "window", "seed": 0, "window": 50,
                                "window_length": 30}
    assert "sampling" not in json.loads((tmp_path / "exact" / "profiles.json").read_text())
    assert ProfileSet.load(tmp_path / "full").cores == [1, 2, 4]


def test_profile_sampling_is_seeded(tmp_path, fake_source_traces):  # noqa: F811 (the fixture)
    """Same seed, same sampled profiles; another seed, other ones; every stream keeps its access total."""
    from pptmc import cli

    trace = tmp_path / "mem.trace"
    trace.touch()
    fake_source_traces[str(trace)] = _two_loop_trace()
    for name, seed in (("a", 4), ("b", 4), ("c", 5)):
        assert cli.run(["profile", str(trace), "--cores", "2", "--mode", "paper", "--sample-rate", "0.2",
                        "--sample-window", "64", "--window-length", "32", "--seed", str(seed), "--set-bits", "0",
                        "-o", str(tmp_path / name)]) == 0
    (sa, ba), (sb, bb), (sc, bc) = (_dir_tables(tmp_path / n) for n in "abc")
    assert sa.equals(sb) and ba.equals(bb)
    assert not ba.equals(bc)
    cli.run(["profile", str(trace), "--cores", "2", "--mode", "paper", "--set-bits", "0", "-o", str(tmp_path / "x")])
    sx, _ = _dir_tables(tmp_path / "x")
    assert sa["total"].tolist() == sx["total"].tolist()


@pytest.mark.parametrize("rate", [0.0, 0.013, 0.5, 1.0])
def test_hash_forms_agree(rate):
    """The SHARDS filter's three forms (scalar uint64, 32-bit lanes, hash_pick) keep the same lines, the
    documented ((x ^ x >> 32 ^ salt) mod 2^32) * 0x9E3779B1 mod 2^32 < threshold; rate 1 keeps every line."""
    import numba

    from analysis.sampling.hashing import draw_salt, hash_pick, shards_keep, shards_threshold

    @numba.njit
    def keep_all(lines, salt, threshold):
        return np.array([shards_keep(x, salt, threshold) for x in lines])

    rng = np.random.default_rng(9)
    lines = np.concatenate([rng.integers(0, 1 << 62, 5000), np.arange(3000)]).astype(np.uint64)
    salt, threshold = draw_salt(np.random.default_rng(3)), shards_threshold(rate)
    want = [(((x ^ (x >> 32) ^ int(salt)) & 0xFFFFFFFF) * 0x9E3779B1 & 0xFFFFFFFF) < int(threshold)
            for x in lines.tolist()]
    assert keep_all(lines, salt, threshold).tolist() == want
    assert hash_pick(lines, salt, threshold).tolist() == np.flatnonzero(want).tolist()
    assert rate < 1.0 or all(want)
