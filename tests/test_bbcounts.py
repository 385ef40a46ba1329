"""Block-count solving against hand-computed loops and an independent random-walk simulation."""
from __future__ import annotations

import json

import numpy as np
import pytest

from analysis.counts import bbcounts as bc
from common.errors import InputError

# entry(0) -> ocond(1) -> obody(2) -> icond(3) -> ibody(4) -> icond ; icond -> oinc(5) -> ocond ; ocond -> exit(6)
NESTED = {"version": 1, "functions": {"main": {
    "entry": 0, "calls": 1, "blocks": [0, 1, 2, 3, 4, 5, 6],
    "edges": [[0, 1], [1, 2], [1, 6], [2, 3], [3, 4], [4, 3], [3, 5], [5, 1]],
    "labels": {"0": "entry", "1": "for.cond", "2": "for.body", "3": "for.cond2", "4": "for.body2",
               "5": "for.inc", "6": "for.end"}}}}


def _write(tmp_path, name, obj):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def test_nested_loops_hand_computed(tmp_path):
    """Outer loop 10 trips, inner 5: cond blocks run trips+1 times per entry."""
    cfg = bc.load_cfg(_write(tmp_path, "cfg.json", NESTED))
    pfile = _write(tmp_path, "p.json", {"edges": [
        {"from": "main:for.cond", "to": "main:for.body", "p": 10 / 11},
        {"from": 3, "to": 4, "p": 5 / 6}]})
    probs, calls = bc.probabilities_from_file(cfg, pfile)
    assert probs[(1, 6)] == pytest.approx(1 / 11) and probs[(3, 5)] == pytest.approx(1 / 6)
    res = bc.solve_counts(cfg, probs, calls)
    expect = {0: 1, 1: 11, 2: 10, 3: 60, 4: 50, 5: 10, 6: 1}
    assert res.counts == pytest.approx(expect)
    assert sum(res.probabilities().values()) == pytest.approx(1.0)
    assert res.probabilities()[4] == pytest.approx(50 / 143)


def test_heuristic_is_estimate_and_loops_get_trip_count(tmp_path):
    """With trip guess T, each loop header runs T times per entry (p_stay = 1 - 1/T)."""
    cfg = bc.load_cfg(_write(tmp_path, "cfg.json", NESTED))
    probs = bc.heuristic_probabilities(cfg, trip_count=10)
    assert probs[(1, 2)] == pytest.approx(0.9) and probs[(1, 6)] == pytest.approx(0.1)
    res = bc.solve_counts(cfg, probs, source="heuristic", estimate=True)
    assert res.estimate
    assert res.counts[1] == pytest.approx(10) and res.counts[3] == pytest.approx(9 * 10)


def _random_cfg(rng: np.random.Generator, n: int) -> dict:
    """A random function: forward DAG edges plus back edges, with switch-like fan-out."""
    edges = set()
    for i in range(n - 1):
        for j in rng.choice(np.arange(i + 1, n), size=min(n - 1 - i, rng.integers(1, 4)), replace=False):
            edges.add((i, int(j)))
        if i > 0 and rng.random() < 0.4:
            edges.add((i, int(rng.integers(0, i + 1))))
    return {"entry": 0, "calls": None, "blocks": list(range(n)), "edges": [list(e) for e in sorted(edges)]}


def _simulate(cfg: bc.Cfg, probs, calls: int, rng) -> tuple[dict, dict]:
    """Random walks through each function: the independent oracle for measured counts."""
    blocks, edges = {}, {}
    for f in cfg.functions.values():
        succ = {b: [j for (i, j) in f.edges if i == b] for b in f.blocks}
        for _ in range(calls):
            b = f.entry
            while True:
                blocks[b] = blocks.get(b, 0) + 1
                p = np.array([probs[(b, j)] for j in succ[b]])
                if p.size == 0 or rng.random() >= p.sum():
                    break  # return
                j = succ[b][int(rng.choice(p.size, p=p / p.sum()))]
                edges[(b, j)] = edges.get((b, j), 0) + 1
                b = j
    return blocks, edges


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_counts_from_run_reproduce_measured_counts(seed):
    """Probabilities from a counting run give back exactly the counts that were measured."""
    rng = np.random.default_rng(seed)
    raw = {"functions": {f"f{k}": _random_cfg(rng, 12) for k in range(3)}}
    for k, f in enumerate(raw["functions"].values()):  # make block ids unique across functions
        off = 100 * k
        f["entry"] += off
        f["blocks"] = [b + off for b in f["blocks"]]
        f["edges"] = [[a + off, b + off] for a, b in f["edges"]]
        f["edges"].append([f["blocks"][-2], f["blocks"][-1]])
    cfg = bc.parse_cfg(raw)
    probs = bc.heuristic_probabilities(cfg, trip_count=3)
    blocks, edges = _simulate(cfg, probs, 40, rng)
    res = bc.counts_from_run(cfg, blocks, edges)
    for b in res.counts:
        assert res.counts[b] == pytest.approx(blocks.get(b, 0), rel=1e-9, abs=1e-9)


def test_solved_counts_match_simulation_mean():
    """Solved expected counts agree with the mean of many random walks."""
    rng = np.random.default_rng(7)
    cfg = bc.parse_cfg({"functions": {"f": _random_cfg(rng, 10)}})
    probs = bc.heuristic_probabilities(cfg, trip_count=4)
    calls = 3000
    blocks, _ = _simulate(cfg, probs, calls, rng)
    res = bc.solve_counts(cfg, probs, {"f": calls})
    for b, n in res.counts.items():
        assert blocks.get(b, 0) == pytest.approx(n, rel=0.08, abs=calls * 0.02)


def test_singular_cycle_is_diagnosed(tmp_path):
    """A loop whose exit probability is 0 names the function and the blocks of the cycle."""
    cfg = bc.load_cfg(_write(tmp_path, "cfg.json", NESTED))
    pfile = _write(tmp_path, "p.json", {"edges": [{"from": 3, "to": 4, "p": 1.0}]})
    probs, _ = bc.probabilities_from_file(cfg, pfile)
    with pytest.raises(InputError, match=r"main.*for.cond2.*for.body2.*exit probability is 0"):
        bc.solve_counts(cfg, probs)


def test_unreachable_block_counts_zero(tmp_path):
    """A block only reachable through a p=0 edge runs 0 times."""
    cfg = bc.parse_cfg({"functions": {"g": {"entry": 0, "calls": 5, "blocks": [0, 1, 2, 3],
                                            "edges": [[0, 1], [0, 2], [2, 2], [1, 3]]}}})
    probs = {(0, 1): 1.0, (0, 2): 0.0, (2, 2): 1.0, (1, 3): 1.0}
    res = bc.solve_counts(cfg, probs)  # the closed self-loop at 2 is dead, so not singular
    assert res.counts == pytest.approx({0: 5, 1: 5, 2: 0, 3: 5})


@pytest.mark.parametrize("bad, match", [
    ({"edges": [{"from": 1, "to": 4, "p": 0.5}]}, "not in the CFG"),
    ({"edges": [{"from": 1, "to": 2, "p": 1.5}]}, r"edges\[0\].p"),
    ({"edges": [{"from": 1, "to": 2, "p": 0.7}, {"from": 1, "to": 6, "p": 0.7}]}, "sum to"),
    ({"edges": [{"from": "main:nope", "to": 2, "p": 0.5}]}, "unknown block name"),
])
def test_bad_probability_files(tmp_path, bad, match):
    """Bad probability files raise InputError naming the field."""
    cfg = bc.load_cfg(_write(tmp_path, "cfg.json", NESTED))
    with pytest.raises(InputError, match=match):
        bc.probabilities_from_file(cfg, _write(tmp_path, "p.json", bad))


def test_bad_cfg(tmp_path):
    """A CFG edge to a block of another function is rejected with its field path."""
    bad = {"functions": {"f": {"entry": 0, "blocks": [0], "edges": [[0, 9]]}}}
    with pytest.raises(InputError, match=r"functions.f.edges\[0\]"):
        bc.load_cfg(_write(tmp_path, "cfg.json", bad))


def test_operation_totals():
    """Totals are the static mix times the counts."""
    tot = bc.count_weighted_totals({1: {"fadd": 2, "load": 1}, 2: {"load": 3}}, {1: 10, 2: 4})
    assert tot == {"fadd": 20, "load": 22}


def test_callee_count_comes_from_call_sites():
    """f is called from main's loop body (run 4 times) and twice from main's exit: 4 + 2 = 6 calls."""
    cfg = bc.parse_cfg({"functions": {
        "f": {"entry": 10, "calls": None, "blocks": [10, 11], "edges": [[10, 11]]},
        "main": {"entry": 0, "calls": 1, "blocks": [0, 1, 2, 3], "edges": [[0, 1], [1, 2], [2, 1], [1, 3]],
                 "call_sites": [[2, "f"], [3, "f"], [3, "f"]]}}})
    probs = {(0, 1): 1.0, (1, 2): 0.8, (1, 3): 0.2, (2, 1): 1.0, (10, 11): 1.0}
    res = bc.solve_counts(cfg, probs)
    assert res.counts[2] == pytest.approx(4) and res.counts[10] == pytest.approx(6)
    assert res.assumed_calls == []


def test_recursion_without_count_is_diagnosed():
    cfg = bc.parse_cfg({"functions": {
        "a": {"entry": 0, "calls": None, "blocks": [0], "edges": [], "call_sites": [[0, "b"]]},
        "b": {"entry": 1, "calls": None, "blocks": [1], "edges": [], "call_sites": [[1, "a"]]}}})
    with pytest.raises(InputError, match="recursive calls a -> b|recursive calls b -> a"):
        bc.solve_counts(cfg, {})
    assert bc.solve_counts(cfg, {}, {"a": 3}).counts == {0: 3, 1: 3}


# ------------------------------------------------------------------ every built-in benchmark, end to end

@pytest.fixture(scope="module")
def polybench_runs(tmp_path_factory):
    """Each benchmark at MINI, translated as the pipeline does, built in count and trace mode and run once."""
    import instrument
    from benchmarks.polybench import catalog
    from pptmc.pipeline import build_benchmark_binaries

    root = tmp_path_factory.mktemp("bbcounts-e2e")
    runs = {}
    for bench in catalog.benchmarks():
        d = root / bench.name
        build_benchmark_binaries(bench, "MINI", d)
        counted = instrument.run_counts(d / "count.inst", bench.args)
        info = instrument.run_trace(d / "trace.inst", bench.args, d / "t.trace")
        runs[bench.name] = (counted, info, bc.parse_cfg(instrument.load_cfg(d / "trace.inst")),
                            instrument.load_block_table(d / "trace.inst"))
    return runs


def test_solved_counts_equal_tracer_counts_on_every_benchmark(polybench_runs):
    """Counts solved from the counting run's branch probabilities equal the tracer's block counts, every
    block of every benchmark (the counting run takes the trace-marker branches too, as the traced run does)."""
    assert len(polybench_runs) == 14
    for name, (counted, info, cfg, table) in polybench_runs.items():
        solved = bc.add_hosted_blocks(bc.counts_from_run(cfg, counted.block_counts, counted.edge_counts), table)
        assert {b: solved.counts.get(b) for b in info.block_counts} == dict(info.block_counts), name
        assert not any(n for b, n in solved.counts.items() if b not in info.block_counts), name
        memory_blocks = [b for b in info.block_counts if table[b].ops["load"] + table[b].ops["store"]]
        assert len(memory_blocks) >= 2, name  # the comparison covers blocks that touch memory


def test_solved_from_trace_edges_equal_every_tracer_count(polybench_runs):
    """With the trace run's own edge counts as probabilities, every block count is reproduced exactly."""
    for name, (_, info, cfg, table) in polybench_runs.items():
        solved = bc.add_hosted_blocks(bc.counts_from_run(cfg, info.block_counts, info.edge_counts), table)
        assert {b: solved.counts.get(b) for b in info.block_counts} == dict(info.block_counts), name


def test_explicit_barriers_from_the_block_table(polybench_runs):
    """durbin runs its `#pragma omp barrier` once per k = 1..N-1 (N = 120 at MINI), adi once per time step
    (TSTEPS = 5); no other benchmark has one, and only adi and bicg have nowait loops. The runtime model's overhead term counts them (block table
    `barriers` x block counts)."""
    def executed(field: str) -> dict[str, int]:
        return {name: sum(n * getattr(table[b], field) for b, n in info.block_counts.items() if b in table.blocks)
                for name, (_, info, _, table) in polybench_runs.items()}

    assert executed("barriers") == {name: {"durbin": 119, "adi": 5}.get(name, 0) for name in polybench_runs}
    # nowait loops: adi's column sweep (once per time step), bicg's first loop (once)
    assert executed("nowait") == {name: {"adi": 5, "bicg": 1}.get(name, 0) for name in polybench_runs}
