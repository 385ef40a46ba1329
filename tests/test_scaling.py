"""Input scaling (small trace + large counts) and the counts/sampling CLI."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from analysis.sampling.amm import blocks as S
from analysis.profiles.profileset import ReuseProfile
from analysis.profiles.reuse import reuse_distances
from analysis.counts.scaling import compare, hit_rates, scale_profile
from instrument.trace_types import TraceInfo
from machines.model import CacheLevel
from pptmc import cli
from common.errors import InputError


def table_program(reps: int, table: int = 100):
    """Block 1 touches a table once (init), block 2 sweeps it `reps` times: per-block profiles do not depend on reps."""
    lines = np.concatenate([np.arange(table), np.tile(np.arange(table), reps)]).astype(np.uint64)
    block = np.concatenate([np.full(table, 1), np.full(table * reps, 2)]).astype(np.int32)
    inst = np.concatenate([np.arange(table), np.arange(table * reps)]).astype(np.int64)
    info = TraceInfo("t", 1, "p", [], True, len(lines), {}, {1: table, 2: table * reps})
    return info, lines << np.uint64(6), block, inst


def matmul(n: int):
    """ijk matmul at line granularity of 8-byte elements: body block (A, B) and C-update block."""
    i, j, k = np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij")
    body = np.stack([(1 << 30) + (i * n + k) * 8, (2 << 30) + (k * n + j) * 8], -1).reshape(n, n, 2 * n)
    c = np.repeat(((3 << 30) + np.arange(n * n) * 8).reshape(n, n, 1), 2, -1)
    addr = np.concatenate([body, c], -1).ravel().astype(np.uint64)
    block = np.concatenate([np.full((n, n, 2 * n), 1), np.full((n, n, 2), 2)], -1).ravel().astype(np.int32)
    inst = np.zeros(len(addr), np.int64)
    for b in (1, 2):
        inst[block == b] = np.arange((block == b).sum()) // 2
    info = TraceInfo("mm", 1, "p", [], True, len(addr), {}, {1: n ** 3, 2: n * n})
    return info, addr, block, inst


def exact_of(addr):
    return ReuseProfile.from_distances(reuse_distances(addr >> np.uint64(6)))


def test_scaling_exact_when_block_profiles_do_not_change(chunks_of):
    """Re-weighting the small input's per-block profiles with large counts gives the large input's profile."""
    small = table_program(5)
    large = table_program(60)
    sp = S.sample_profile(small[0], chunks_of(*small[1:], 64), 1.0, window=10**6, method="instance")
    pred = scale_profile(sp, large[0].block_counts)
    exact = exact_of(large[1])
    assert pred.profile.total == exact.total and pred.profile.cold == exact.cold
    assert dict(zip(pred.profile.lower.tolist(), pred.profile.count.tolist())) == \
        dict(zip(exact.lower.tolist(), exact.count.tolist()))
    assert pred.missing_blocks == []


def test_scaling_breaks_when_distances_grow_with_input(chunks_of):
    """Matmul 8 -> 40: B's reuse distance grows with n^2, so scaling over-predicts a mid-size cache's hits."""
    small, large = matmul(8), matmul(40)
    sp = S.sample_profile(small[0], chunks_of(*small[1:], 4096), 1.0, window=10**6, method="instance")
    pred = scale_profile(sp, large[0].block_counts).profile
    level = (CacheLevel("L", 32 * 64, 64, 0, 1.0, 1.0, False),)  # 32 lines: holds the n=8 set, not n=40
    table = compare(pred, exact_of(large[1]), level)
    assert table.loc[0, "predicted"] > 0.95
    assert table.loc[0, "error_pp"] > 10


def test_missing_blocks_are_reported(chunks_of):
    small = table_program(2)
    sp = S.sample_profile(small[0], chunks_of(*small[1:], 64), 1.0, method="exact")
    res = scale_profile(sp, {1: 100, 2: 400, 9: 7})
    assert res.missing_blocks == [9]
    assert res.expected_accesses == pytest.approx(500)


# ------------------------------------------------------------------ CLI

CFG = {"version": 1, "functions": {"main": {"entry": 0, "calls": 1, "blocks": [0, 1, 2, 3],
                                            "edges": [[0, 1], [1, 2], [2, 1], [1, 3]]}}}


def test_cli_bbcounts_modes(tmp_path, capsys):
    """--counts reproduces measured counts, --probabilities solves, --heuristic is labelled an estimate."""
    cfg = tmp_path / "prog.cfg.json"
    cfg.write_text(json.dumps(CFG))
    counts = tmp_path / "c.json"
    counts.write_text(json.dumps({"block_counts": {"0": 1, "1": 8, "2": 7, "3": 1},
                                  "edge_counts": [[0, 1, 1], [1, 2, 7], [2, 1, 7], [1, 3, 1]]}))
    out = tmp_path / "out.json"
    assert cli.run(["bbcounts", str(cfg), "--counts", str(counts), "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["block_counts"] == {"0": 1.0, "1": 8.0, "2": 7.0, "3": 1.0} and not data["estimate"]
    capsys.readouterr()
    probs = tmp_path / "p.json"
    probs.write_text(json.dumps({"edges": [{"from": 1, "to": 3, "p": 0.25}]}))
    assert cli.run(["bbcounts", str(cfg), "--probabilities", str(probs), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["block_counts"]["2"] == pytest.approx(3.0)
    assert cli.run(["bbcounts", str(cfg), "--heuristic"]) == 0
    assert "ESTIMATE" in capsys.readouterr().out


def test_cli_bbcounts_singular(tmp_path):
    cfg = tmp_path / "prog.cfg.json"
    cfg.write_text(json.dumps(CFG))
    probs = tmp_path / "p.json"
    probs.write_text(json.dumps({"edges": [{"from": 1, "to": 3, "p": 0.0}]}))
    with pytest.raises(InputError, match=r"main.*#1.*#2.*exit probability is 0"):
        cli.run(["bbcounts", str(cfg), "--probabilities", str(probs)])


@pytest.fixture()
def fake_traces(fake_trace_files):
    """A small and a large input of the table program, opened by path."""
    fake_trace_files.update({"small.trace": table_program(3), "large.trace": table_program(30)})
    return fake_trace_files


def test_cli_sample_and_scale_profile(tmp_path, fake_traces):
    """sample-profile writes the documented files; scale-profile reports exact accuracy for this program."""
    out = tmp_path / "s"
    assert cli.run(["sample-profile", "small.trace", "--sample-rate", "1", "-o", str(out)]) == 0
    bins = pd.read_csv(out / "bins.csv")
    meta = json.loads((out / "profile.json").read_text())
    assert meta["total"] == 400 and meta["cold"] == 100 and int(bins["count"].sum()) == 300
    blocks = pd.read_csv(out / "blocks.csv").set_index("block")
    assert blocks.loc[2, "p_bb"] == pytest.approx(0.75)
    large = tmp_path / "large.json"
    large.write_text(json.dumps({"block_counts": {str(b): n for b, n in fake_traces["large.trace"][0].block_counts.items()}}))
    out2 = tmp_path / "scaled"
    assert cli.run(["scale-profile", "small.trace", "--counts", str(large), "--compare", "large.trace",
                    "-o", str(out2)]) == 0
    acc = pd.read_csv(out2 / "accuracy.csv")
    assert acc["error_pp"].abs().max() < 1e-9
    assert json.loads((out2 / "profile.json").read_text())["total"] == 3100


def test_hit_rates_follow_profile():
    """Fully associative: hits are exactly the distances below the line count."""
    prof = ReuseProfile.from_distances(np.array([-1, 0, 5, 63, 64, 100]))
    lv = (CacheLevel("X", 64 * 64, 64, 0, 1.0, 1.0, False),)
    assert hit_rates(prof, lv)["X"] == pytest.approx(3 / 6)
