"""`pptmc measure`: native region times joined with predictions, error math, CLI input errors."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

import pytest

from benchmarks.polybench.catalog import by_name
from machines import load_machine
from analysis.options import ModelOptions
from pptmc import cli
from common.errors import InputError, PptmcError
from pptmc.measure import (median_noise, runtime_errors, runtime_summary, sample_table, validate_runtimes,
                           write_runtime_figure)


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    """One tiny benchmark, one thread, one run: the whole measure-predict-join path."""
    work = tmp_path_factory.mktemp("measure")
    df = validate_runtimes([by_name("atax")], "MINI", (1,), work, load_machine("haswell-i7-5960x"), repeats=1)
    return work, df


def test_validate_runtimes_joins_positive_times(validated):
    _, df = validated
    assert list(df["benchmark"]) == ["atax"] and list(df["cores"]) == [1]
    row = df.iloc[0]
    assert row["error"] == ""
    assert row["measured_s"] > 0 and row["predicted_s"] > 0
    assert row["measured_min_s"] == row["measured_s"] == row["measured_max_s"]   # one repeat
    assert row["predicted_s"] == pytest.approx(row["t_mem_s"] + row["t_cpu_s"] + row["contention_s"]
                                               + row["t_overhead_s"])
    assert row["rel_error"] == pytest.approx(abs(row["predicted_s"] - row["measured_s"]) / row["measured_s"])


def test_cli_writes_tables_and_figure(validated, capsys):
    work, _ = validated
    code = cli.run(["measure", "--benchmarks", "atax", "--size", "MINI", "--threads", "1", "--repeats", "1",
                    "--machine", "haswell-i7-5960x", "-o", str(work), "--json"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    table = pd.read_csv(work / "runtime_validation.csv")
    assert list(table["benchmark"]) == ["atax"] and printed["rows"][0]["benchmark"] == "atax"
    assert pd.read_parquet(work / "runtime_validation.parquet").shape == table.shape
    assert list(pd.read_csv(work / "runtime_summary.csv")["cores"].astype(str)) == ["1", "all"]
    assert (work / "runtime_validation.png").read_bytes()[:4] == b"\x89PNG"


def test_runtime_errors_hand_case():
    predicted = pd.DataFrame({"benchmark": ["a", "a", "b"], "cores": [1, 2, 1], "runtime_s": [2.0, 1.0, 3.0]})
    measured = pd.DataFrame({"benchmark": ["a", "a"], "cores": [1, 2], "measured_s": [1.6, 1.25],
                             "measured_min_s": [1.0, 1.25]})
    out = runtime_errors(predicted, measured)
    assert list(zip(out["benchmark"], out["cores"])) == [("a", 1), ("a", 2)]   # b was not measured
    assert list(out["rel_error"]) == pytest.approx([0.25, 0.2])
    assert list(out["rel_error_min"]) == pytest.approx([1.0, 0.2])


def test_median_noise_hand_cases():
    # odd rounds 1.0, 1.0 (median 1.0), even rounds 1.2, 1.4 (median 1.3), all four: median 1.1
    assert median_noise([1.0, 1.2, 1.0, 1.4]) == pytest.approx(0.3 / 1.1)
    assert median_noise([2.0, 2.0, 2.0, 2.0, 9.0]) == 0.0           # one outlier moves neither half's median
    assert math.isnan(median_noise([1.0, 2.0, 3.0]))                  # too few runs to split
    table = sample_table({("a", 1): [1.0, 1.2, 1.0, 1.4], ("a", 2): [0.5]}).set_index("cores")
    assert table.loc[1, "measured_noise"] == pytest.approx(0.3 / 1.1) and math.isnan(table.loc[2, "measured_noise"])
    assert table.loc[1, "measured_s"] == pytest.approx(1.1) and table.loc[1, "repeats"] == 4


def test_runtime_summary_hand_case(tmp_path):
    df = pd.DataFrame({"benchmark": ["a", "b", "a", "b", "c"], "cores": [1, 1, 2, 2, 2],
                       "rel_error": [0.1, 0.3, 0.2, 0.6, float("nan")], "rel_error_min": [0.0] * 5,
                       "measured_s": [1.0] * 5, "measured_min_s": [1.0] * 5, "measured_max_s": [1.0] * 5,
                       "predicted_s": [1.0, 1.0, 1.0, 1.0, float("nan")]})
    s = runtime_summary(df).set_index("cores")
    assert s.loc["1", "mean_abs_error"] == pytest.approx(0.2)
    assert s.loc["2", "mean_abs_error"] == pytest.approx(0.4) and s.loc["2", "benchmarks"] == 2
    assert s.loc["all", "mean_abs_error"] == pytest.approx(0.3) and s.loc["all", "max_abs_error"] == 0.6
    noisy = runtime_summary(df.assign(measured_noise=[0.1, float("nan"), 0.3, 0.5, 0.9])).set_index("cores")
    assert noisy.loc["1", "mean_measured_noise"] == pytest.approx(0.1)   # b has too few runs to tell
    assert noisy.loc["2", "mean_measured_noise"] == pytest.approx(0.4)   # c has no prediction: not in the summary
    assert write_runtime_figure(df, tmp_path / "f.png").stat().st_size > 0


@pytest.mark.parametrize("args,message", [
    (["--benchmarks", "nosuch"], "unknown nosuch"),
    (["--threads", "1,x"], "--threads '1,x'"),
    (["--threads", "0"], "--threads '0'"),
    (["--size", "HUGE"], "--size 'HUGE'"),
    (["--repeats", "0"], "--repeats 0"),
    (["--machine", "pentium"], "unknown machine 'pentium'"),
])
def test_cli_bad_input(args, message, tmp_path):
    with pytest.raises(PptmcError, match=message):
        cli.run(["measure", "--benchmarks", "atax", "--machine", "haswell-i7-5960x", "-o", str(tmp_path), *args])


def test_more_threads_than_the_machine_has(tmp_path):
    with pytest.raises(InputError, match="has only 8 cores"):
        validate_runtimes([by_name("atax")], "MINI", (1, 16), tmp_path, load_machine("haswell-i7-5960x"))


def test_pinned_environment_binds_threads_unless_the_user_chose():
    from pptmc.measure import pinned_environment

    env = pinned_environment({"PATH": "/bin"})
    assert env == {"PATH": "/bin", "OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}
    mine = pinned_environment({"OMP_PROC_BIND": "spread", "OMP_PLACES": "threads"})
    assert mine == {"OMP_PROC_BIND": "spread", "OMP_PLACES": "threads"}


def test_measure_runs_pinned_by_default_and_not_with_pin_off(tmp_path, monkeypatch):
    """The native runs get the pinned environment; pin=False passes none (the OS places threads)."""
    import benchmarks.polybench.build as build
    from pptmc.measure import MeasureConfig, measure_benchmark

    seen = []

    def fake_run(exe, threads, cold=False, dump=False, env=None, timeout=600.0):
        seen.append(env)
        return build.NativeRun(checksums={}, arrays={}, region_seconds=1e-3)

    monkeypatch.setattr(build, "build_native", lambda bench, size, exe: exe)
    monkeypatch.setattr(build, "run_native", fake_run)
    monkeypatch.delenv("OMP_PROC_BIND", raising=False)
    measure_benchmark(by_name("atax"), MeasureConfig(workdir=tmp_path, threads=(2,), repeats=2))
    assert len(seen) == 2 and all(e["OMP_PROC_BIND"] == "close" and e["OMP_PLACES"] == "cores" for e in seen)
    seen.clear()
    measure_benchmark(by_name("atax"), MeasureConfig(workdir=tmp_path, threads=(2,), repeats=1, pin=False))
    assert len(seen) == 1 and "OMP_PROC_BIND" not in seen[0]


def test_cold_runs_flush_beyond_the_last_level_cache(tmp_path, monkeypatch):
    """Cold native runs flush more than the host's largest cache (read here from sysfs), at least the
    harness's 64 MiB, so a measured region starts as cold as detect's figures."""
    import glob

    import benchmarks.polybench.build as build
    from pptmc.measure import MeasureConfig, measure_benchmark

    sizes = []
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        text = open(path).read().strip()
        sizes.append(int(text[:-1]) << {"K": 10, "M": 20, "G": 30}[text[-1]] if text[-1] in "KMG" else int(text))
    if not sizes:
        pytest.skip("no cache description in sysfs")
    seen = []
    monkeypatch.setattr(build, "build_native", lambda bench, size, exe: exe)
    monkeypatch.setattr(build, "run_native", lambda exe, threads, cold=False, dump=False, env=None, timeout=600.0:
                        seen.append(env) or build.NativeRun(checksums={}, arrays={}, region_seconds=1e-3))
    measure_benchmark(by_name("atax"), MeasureConfig(workdir=tmp_path, threads=(1,), repeats=1))
    flush = int(seen[0]["PBENCH_FLUSH_BYTES"])
    assert flush >= 64 << 20 and flush > max(sizes)


def test_measure_suite_interleaves_rounds_and_takes_each_pairs_median(tmp_path, monkeypatch):
    """Every round runs each (benchmark, threads) once before any runs again, and each row's median,
    min and max come from that pair's own samples only."""
    import benchmarks.polybench.build as build
    from pptmc.measure import MeasureConfig, measure_suite

    order = []

    def fake_run(exe, threads, cold=False, dump=False, env=None, timeout=600.0):
        order.append((Path(exe).name, threads))
        base = {"atax-MINI": 1.0, "bicg-MINI": 10.0}[Path(exe).name]
        round_no = sum(1 for o in order if o == order[-1])
        return build.NativeRun(checksums={}, arrays={}, region_seconds=base * threads * [3, 1, 2][round_no - 1])

    monkeypatch.setattr(build, "build_native", lambda bench, size, exe: exe)
    monkeypatch.setattr(build, "run_native", fake_run)
    df = measure_suite([by_name("atax"), by_name("bicg")],
                       MeasureConfig(workdir=tmp_path, size="MINI", threads=(1, 2), repeats=3))
    pairs = [("atax-MINI", 1), ("atax-MINI", 2), ("bicg-MINI", 1), ("bicg-MINI", 2)]
    assert order == pairs * 3
    got = {(r.benchmark, r.cores): (r.measured_s, r.measured_min_s, r.measured_max_s) for r in df.itertuples()}
    assert got == {("atax", 1): (2.0, 1.0, 3.0), ("atax", 2): (4.0, 2.0, 6.0),
                   ("bicg", 1): (20.0, 10.0, 30.0), ("bicg", 2): (40.0, 20.0, 60.0)}


def test_simulated_hit_rates_equal_sdcm_for_fully_associative_caches(validated):
    """The simulated variant runs the simulator on the traces the profiles came from: with fully
    associative caches SDCM is exact, so both give the same prediction; with the real 8-way L1 they differ."""
    from dataclasses import replace

    from pptmc.measure import predict_benchmark

    work, _ = validated
    haswell = load_machine("haswell-i7-5960x")
    full = replace(haswell, name="haswell-fully-assoc",
                   caches=tuple(replace(c, associativity=c.size_bytes // c.line_bytes) for c in haswell.caches))
    runs = {(m.name, src): predict_benchmark(by_name("atax"), "MINI", (1,), work, m, ModelOptions(hit_rates=src)).iloc[0]
            for m in (full, haswell) for src in ("sdcm", "simulated")}
    assert runs[(full.name, "simulated")]["runtime_s"] == pytest.approx(runs[(full.name, "sdcm")]["runtime_s"],
                                                                         rel=1e-12)
    assert runs[(haswell.name, "simulated")]["L1_local_hit_rate"] != runs[(haswell.name, "sdcm")]["L1_local_hit_rate"]
    with pytest.raises(InputError, match="--hit-rates 'counters'"):
        ModelOptions(hit_rates="counters")


def test_set_aware_hit_rates_match_the_simulated_l1_and_sdcm_when_fully_associative(validated):
    """set-aware: the virtually indexed L1 exactly as the set-associative simulator has it; fully
    associative levels have no set bits, so there it is SDCM."""
    from dataclasses import replace

    from pptmc.measure import predict_benchmark

    work, _ = validated
    haswell = load_machine("haswell-i7-5960x")
    full = replace(haswell, name="haswell-fully-assoc",
                   caches=tuple(replace(c, associativity=c.size_bytes // c.line_bytes) for c in haswell.caches))
    runs = {(m.name, src): predict_benchmark(by_name("atax"), "MINI", (1,), work, m, ModelOptions(hit_rates=src)).iloc[0]
            for m in (full, haswell) for src in ("sdcm", "simulated", "set-aware")}
    assert runs[(full.name, "set-aware")]["runtime_s"] == pytest.approx(runs[(full.name, "sdcm")]["runtime_s"],
                                                                        rel=1e-12)
    aware, sim = (runs[(haswell.name, s)] for s in ("set-aware", "simulated"))
    assert aware["L1_cumulative_hit_rate"] == pytest.approx(sim["L1_cumulative_hit_rate"], abs=1e-12)