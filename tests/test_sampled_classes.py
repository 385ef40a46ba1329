"""Per-set-class profiles of source sampling (analysis/sampling/shards/class_shards.py, windows.class_walk).

Oracles: at rate 1 the exact per-set-class ProfileSet (set_classes.ClassEngine, itself pinned against brute
force in test_set_classes.py); the windows' class distances against a brute-force per-class LRU stack; below rate
1, the set-associative LRU simulator's L1 hit rates on power-of-two column walks (the set-aware L1 model is exact
there), with SDCM's answer from the same sampled profiles as the contrast the test must be able to tell apart.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from analysis.profiles.handouts import chunk_costs
from analysis.hitrates.cachesim import simulate_hierarchy
from analysis.hitrates.rates import predict_hit_rates
from analysis.profiles.profileset import ProfileSet
from analysis.profiles.sweep import compute_profiles_from
from analysis.sampling.shards import class_shards as CS
from analysis.sampling.shards import class_tail as CT
from analysis.sampling.shards import replay as R
from analysis.sampling import source as SS
from analysis.sampling.near import windows as W
from instrument.trace_types import (CHUNK_DTYPES, SCHED_DYNAMIC, SCHED_STATIC, BlockInfo, LoopInstance, TraceChunk,
                                    TraceInfo)
from machines import load_machine
from test_private_traces import chunker
from test_source_replay import periodic_trace, replays  # noqa: F401 (fixture)
from fake_source import fake_source_traces  # noqa: F401 (fixture)
from test_source_sampling import exact_and_full_rate, random_trace, same

CORES = [1, 2, 3, 4, 8]
BITS = (1, 3)


def sampled_classes(info, factory, cores, mode, k, coherence, sampling, bits=BITS, crds=True):
    """The source sampler's class profiles as {(kind, bits, p, c): profile}."""
    req = SS.ClassRequest(bits, crds)
    SS.source_profiles(info, factory(), cores, sampling, mode, k, 64, 0, coherence, classes=req,
                       costs=chunk_costs(info, factory, mode))
    out = {}
    for b, res in req.results.items():
        for p, (prd, crd) in zip(cores, res):
            out.update({("prd", b, p, c): x for c, x in enumerate(prd)})
            if crds or p == 1:
                out[("crd", b, p, -1)] = crd
    return out


def exact_classes(info, factory, cores, mode, k, coherence, bits=BITS, crds=True):
    """The exact sweep's class profiles, keyed as sampled_classes."""
    ps = compute_profiles_from(info, factory, cores, mode, "rr", 0, k, 64, paper_chunk=0, coherence=coherence,
                               class_bits=bits, class_crds=crds)
    return {**{("prd", b, p, c): x for (b, p, c), x in ps.class_prd.items()},
            **{("crd", b, p, -1): x for (b, p), x in ps.class_crd.items()}}


@pytest.mark.parametrize("mode", ["iteration", "paper"])
@pytest.mark.parametrize("schedule,chunk", [(SCHED_STATIC, 0), (SCHED_DYNAMIC, 2)])
@pytest.mark.parametrize("k,coherence,crds", [(1, True, True), (3, True, False), (1, False, True)])
@pytest.mark.parametrize("rows", [13, 10_000])
def test_full_rate_classes_equal_exact(mode, schedule, chunk, k, coherence, crds, rows):
    """Rate 1: every class PRD and class CRD (coherence misses included) is the exact sweep's, bit for bit."""
    info, ch = random_trace(11 + rows, 40, mode == "iteration", schedule, chunk)
    factory = chunker(ch, rows)
    got = sampled_classes(info, factory, CORES, mode, k, coherence, SS.SourceSampling(1.0, seed=3), crds=crds)
    want = exact_classes(info, factory, CORES, mode, k, coherence, crds=crds)
    assert got.keys() == want.keys()
    assert [key for key in want if not same(got[key], want[key])] == []
    if coherence:
        assert sum(want[key].coherence for key in want) > 0  # the case exercises coherence misses


def test_full_rate_classes_with_replay_equal_exact(replays):  # noqa: F811 (the fixture)
    """Rate 1 on a periodic trace: copies are skipped (the class counts repeated with the plain ones) and the class
    profiles are still the exact sweep's."""
    info, ch = periodic_trace(5, 14, 12, SCHED_STATIC, 0, 6)
    factory = chunker(ch, 97)
    got = sampled_classes(info, factory, [1, 2, 3, 4], "iteration", 1, True, SS.SourceSampling(1.0, seed=3))
    want = exact_classes(info, factory, [1, 2, 3, 4], "iteration", 1, True)
    assert [key for key in want if not same(got[key], want[key])] == []
    assert replays and all(r.skipped > 0 for r in replays)


def test_sampled_classes_with_replay_equal_feeding_every_copy(monkeypatch):
    """Below rate 1 (windows and SHARDS tails): replay on and off give the same class profiles, bit for bit."""
    monkeypatch.setattr(R, "MIN_COPY_ROWS", 1)
    info, ch = periodic_trace(8, 40, 24, SCHED_STATIC, 0, odd_step=20)
    sampling = SS.SourceSampling(0.5, 2, window=16, length=8)
    got = sampled_classes(info, chunker(ch, 131), [1, 2, 4], "iteration", 1, True, sampling)
    monkeypatch.setattr(SS, "REPLAY", False)
    want = sampled_classes(info, chunker(ch, 131), [1, 2, 4], "iteration", 1, True, sampling)
    assert [key for key in want if not same(got[key], want[key])] == []


def brute_near_class(lines, pos, start, look, bits):
    """Brute force: class distance of each access from index `start` on whose previous use of its line is at
    most `look` positions back (else nothing), counted with a per-class LRU list over the segment."""
    stacks: dict[int, OrderedDict] = {}
    last: dict[int, int] = {}
    out = {}
    for i, x in enumerate(lines.tolist()):
        od = stacks.setdefault(x & ((1 << bits) - 1), OrderedDict())
        if x in od and i >= start and pos[i] - pos[last[x]] <= look:
            keys = list(od)
            d = len(keys) - 1 - keys.index(x)
            out[d] = out.get(d, 0) + 1
        od.pop(x, None)
        od[x] = True
        last[x] = i
    return out


@pytest.mark.parametrize("bits", [1, 3, 6])
def test_class_walk_matches_brute_force(bits):
    """The windows' near class distances (window from `start`, lookback `look` positions) against brute force,
    with gap positions that skip (turns of a shared segment)."""
    rng = np.random.default_rng(bits)
    n = 700
    lines = rng.integers(0, 90, n).astype(np.uint64) * np.uint64(7)
    pos = np.cumsum(rng.integers(0, 3, n)).astype(np.int64)
    for start, look in ((0, 10_000), (150, 40), (333, 7)):
        cs = W.class_scratch((bits,), n)
        hist = np.zeros(n + 1, np.int64)
        W.class_walk(lines, pos, n, start, look, cs.masks[0], cs, W.walk_table(4096, n), hist)
        got = {int(d): int(c) for d, c in enumerate(hist) if c}
        assert got == brute_near_class(lines, pos, start, look, bits)


def column_walks(n_rows: int = 256, n_cols: int = 64, steps: int = 3):
    """y[j] += A[i][j] * x[i] with A's rows 4 KiB apart: each work-shared iteration j walks column j (every line
    of it in one 64-set L1 set) and the vector x; `steps` time steps (about 100K accesses)."""
    i = np.arange(n_rows)
    addr, it, lp = [], [], []
    for step in range(steps):
        for j in range(n_cols):
            a = (1 << 30) + i * 4096 + j * 8
            x = (2 << 30) + i * 8
            addr.append(np.stack([a, x], -1).ravel())
            it.append(np.full(2 * n_rows, j))
            lp.append(np.full(2 * n_rows, step))
    return loop_trace("columns.trace", np.concatenate(addr).astype(np.uint64), np.concatenate(it),
                      np.concatenate(lp), n_cols, steps)


def loop_trace(name: str, addr: np.ndarray, it: np.ndarray, lp: np.ndarray, n_it: int, steps: int):
    """One thread's loads at addr, access k in iteration it[k] of static loop instance lp[k] (`steps` instances
    of n_it iterations each, one block): the TraceInfo and the one chunk."""
    n = addr.shape[0]
    cols = {"addr": addr, "size": np.full(n, 8), "is_store": np.zeros(n, bool), "block": np.zeros(n),
            "block_instance": it + lp * n_it, "thread": np.zeros(n), "region": np.zeros(n), "loop": lp,
            "iteration": it, "is_stack": np.zeros(n, bool)}
    ch = TraceChunk(*(np.asarray(cols[k]).astype(d) for k, d in CHUNK_DTYPES.items()))
    loops = [LoopInstance(s, 0, n_it, SCHED_STATIC, 0) for s in range(steps)]
    info = TraceInfo(name, 1, "prog", [], True, n, {0: BlockInfo(0, "OUT__1", "body", False)},
                     {0: n_it * steps}, loops=loops)
    return info, ch


def l1_rates(table) -> dict[int, float]:
    """cores -> L1 hit rate of a hit-rate table."""
    rows = table[table["level"] == "L1"]
    return dict(zip(rows["cores"].astype(int), rows["cumulative_hit_rate"].astype(float)))


@pytest.mark.parametrize("seed", [1, 2])
def test_sampled_set_aware_l1_matches_the_simulator_on_column_walks(seed, monkeypatch):
    """At rate 0.1 the set-aware L1 hit rates from the sampled class profiles are within 1 pp of the simulated
    L1's (haswell: 32 KiB, 8 ways, 64 sets, virtually indexed), where SDCM on the same sampled profiles is
    tens of points off (the column walk's 256 lines fit the L1 but share one set)."""
    info, ch = column_walks()
    cores = [1, 2, 4]
    monkeypatch.setattr(SS, "source_trace", lambda path: (info, lambda rows, columns: chunker(ch, 1 << 14)(), None))
    machine = load_machine("haswell-i7-5960x")
    sim = l1_rates(simulate_hierarchy(info, chunker(ch, 1 << 14), machine, cores, "iteration"))
    ps, _ = SS.sampled_profile_set("columns.trace", cores, SS.SourceSampling(0.1, seed), "iteration",
                                   coherence=False, class_bits=(6,), class_crds=False)
    assert ps.class_bits == [6]
    aware = l1_rates(predict_hit_rates(ps, machine, set_aware=True))
    sdcm = l1_rates(predict_hit_rates(ps, machine, set_aware=False))
    for p in cores:
        assert abs(aware[p] - sim[p]) < 0.01, (p, aware[p], sim[p])
        assert abs(sdcm[p] - sim[p]) > 0.2, (p, sdcm[p], sim[p])


def test_cli_sampled_profiles_carry_the_class_profiles(tmp_path, fake_source_traces):  # noqa: F811 (the fixture)
    """`pptmc profile --sample-rate 1 --set-bits 2,3` writes the exact command's tables, class rows included."""
    import pandas as pd

    exact, full, _ = exact_and_full_rate(tmp_path, fake_source_traces, "2,3")
    for name in ("summary", "bins"):
        a, b = (pd.read_csv(d / f"{name}.csv") for d in (exact, full))
        assert a.equals(b)
        assert set(a["class_bits"]) == {0, 2, 3}
    assert ProfileSet.load(tmp_path / "full").class_bits == [2, 3]


def test_a_level_read_at_fewer_set_bits_says_so():
    """Profiles with 3-bit classes only: haswell's L1 and L2 (6 known set bits each) are read at 3 bits and their
    rows carry a note; the L3 (hashed) does not; with 6-bit classes there is no note column."""
    info, ch = random_trace(4, 30, True, SCHED_STATIC)
    machine = load_machine("haswell-i7-5960x")
    narrow = compute_profiles_from(info, chunker(ch, 1000), [1, 2], "iteration", class_bits=(3,))
    table = predict_hit_rates(narrow, machine, set_aware=True)
    notes = dict(zip(table["level"], table["note"]))
    assert "read at 3 of its 6 known set bits" in notes["L1"] and "--set-bits 6" in notes["L2"]
    assert notes["L3"] == ""
    full = compute_profiles_from(info, chunker(ch, 1000), [1, 2], "iteration", class_bits=(6,))
    assert "note" not in predict_hit_rates(full, machine, set_aware=True).columns


def test_class_posterior_hand_computed_case():
    """The far tail's posterior (class_tail.posterior) for class count 0 of plain count 2 at rate 1/2 and 1-bit
    classes: D = 4, 2 unseen lines, share Beta(1, 1 + 2): d = BetaBinomial(2, 1, 3) = [3/5, 3/10, 1/10]."""
    d, p = CT.posterior(0, 2.0, 0.5, 1)
    assert d.tolist() == [0, 1, 2]
    assert np.allclose(p, [3 / 5, 3 / 10, 1 / 10])


def test_class_posterior_matches_bayes_by_enumeration():
    """The posterior against Bayes' rule summed over the model: d ~ Bin(D, s) with the class share s ~ Beta(1,
    2^b - 1) (a numerical integral), the sample's k ~ Bin(d, R) class lines and K - k ~ Bin(D - d, R) others."""
    from scipy import integrate, stats

    rate, bits, k, big = 0.25, 2, 1, 6
    n_lines = int(big / rate)
    prior = np.array([integrate.quad(lambda s, d=d: stats.binom.pmf(d, n_lines, s) * stats.beta.pdf(s, 1, 3), 0, 1)[0]
                      for d in range(n_lines + 1)])
    d = np.arange(n_lines + 1)
    post = prior * stats.binom.pmf(k, d, rate) * stats.binom.pmf(big - k, n_lines - d, rate)
    got_d, got_p = CT.posterior(k, float(big), rate, bits)
    want = {int(x): float(y) for x, y in zip(d, post / post.sum()) if y > 1e-15}
    assert got_d.tolist() == list(range(k, k + len(got_d)))
    assert np.allclose([want.get(int(x), 0.0) for x in got_d], got_p, atol=1e-12)
    assert sum(want.values()) == pytest.approx(float(got_p[got_d <= max(want)].sum()))


def row_sweeps(n_lines: int = 2560, steps: int = 16):
    """a[i] += 1 over a contiguous array of n_lines lines (not a power of two's worth of classes' worth of
    rows: every 6-bit class holds n_lines / 64 = 40 of them), `steps` times: each line's reuse across steps is
    far (gap 8 * n_lines accesses) with a class distance of 40, between an L1 set's 8 ways and 1/R at 1%."""
    n_it = 64
    idx = np.arange(8 * n_lines)
    addr = np.tile((1 << 30) + idx * 8, steps).astype(np.uint64)
    it = np.tile(idx // (8 * n_lines // n_it), steps)
    lp = np.repeat(np.arange(steps), 8 * n_lines)
    return loop_trace("sweeps.trace", addr, it, lp, n_it, steps)


def test_far_class_tail_is_not_biased_to_hits_on_row_sweeps(monkeypatch):
    """At rate 0.01 on row sweeps (class distance 40 > 8 ways, far reuses): the set-aware L1 hit rate from the
    sampled class profiles is within 4 pp of the simulated L1's; with every far sample at k / R (class_tail.FEW
    0, the estimate without plain counts) most far reuses see no sampled class line and count as hits: 6+ pp off."""
    info, ch = row_sweeps()
    cores = [1]
    monkeypatch.setattr(SS, "source_trace", lambda path: (info, lambda rows, columns: chunker(ch, 1 << 14)(), None))
    machine = load_machine("haswell-i7-5960x")
    sim = l1_rates(simulate_hierarchy(info, chunker(ch, 1 << 14), machine, cores, "iteration"))[1]

    def aware() -> float:
        ps, _ = SS.sampled_profile_set("sweeps.trace", cores, SS.SourceSampling(0.01, 1), "iteration",
                                       coherence=False, class_bits=(6,), class_crds=False)
        return l1_rates(predict_hit_rates(ps, machine, set_aware=True))[1]

    new = aware()
    monkeypatch.setattr(CS, "FEW", 0)
    old = aware()
    assert abs(new - sim) < 0.04 and abs(old - sim) > 0.06, (new, old, sim)
