"""`pptmc suite` and `pptmc run` end to end: tables, figures, caching, and failure isolation."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.options import ModelOptions
from pptmc import cli, suite
from common.errors import InputError

REPO = Path(__file__).resolve().parents[1]
MACHINE = "haswell-i7-5960x"
BENCHES = ("atax", "jacobi-2d")
CORES = (1, 2)


def _suite_args(outdir: Path, benches=BENCHES) -> list[str]:
    return ["suite", "--benchmarks", ",".join(benches), "--size", "MINI", "--machines", MACHINE,
            "--cores", ",".join(map(str, CORES)), "-o", str(outdir), "-j", "2"]


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory):
    """One suite run on two benchmarks and its exit code."""
    outdir = tmp_path_factory.mktemp("suite")
    return outdir, cli.run(_suite_args(outdir))


def test_suite_succeeds_and_writes_every_table(suite_run):
    outdir, code = suite_run
    assert code == 0
    for name in ("hit_rates", "runtimes", "status"):
        csv = pd.read_csv(outdir / f"{name}.csv")
        parquet = pd.read_parquet(outdir / f"{name}.parquet")
        assert len(csv) == len(parquet) > 0
    status = pd.read_csv(outdir / "status.csv")
    assert sorted(status["benchmark"]) == sorted(BENCHES)
    assert status["ok"].all()


def test_suite_hit_rates_cover_every_benchmark_core_count_and_level(suite_run):
    outdir, _ = suite_run
    hits = pd.read_csv(outdir / "hit_rates.csv")
    assert set(hits["benchmark"]) == set(BENCHES)
    assert set(hits["cores"]) == set(CORES)
    assert set(hits["level"]) == {"L1", "L2", "L3"}
    assert len(hits) == len(BENCHES) * len(CORES) * 3
    assert hits["cumulative_hit_rate"].between(0, 1).all()
    # Cumulative rates can only grow down the hierarchy (Table 6 definition).
    for _, group in hits.groupby(["benchmark", "cores"]):
        by_level = group.set_index("level")["cumulative_hit_rate"]
        assert by_level["L1"] <= by_level["L2"] + 1e-12 <= by_level["L3"] + 2e-12


def test_suite_accesses_match_the_trace(suite_run):
    """The one-core profile counts every traced access exactly once (none lost or duplicated)."""
    import instrument

    outdir, _ = suite_run
    hits = pd.read_csv(outdir / "hit_rates.csv")
    for bench in BENCHES:
        trace = next((outdir / "work" / bench / "trace").glob("*.pptrace"))
        n = instrument.open_trace(trace).info.n_accesses
        counted = hits[hits["benchmark"] == bench].groupby("cores")["accesses"].first()
        assert counted[1] == n
        # With more cores, blocks run once per region (shared-variable unpacking) run on every core.
        assert n <= counted[2] < n * 1.01


def test_suite_runtimes_fall_with_cores_for_a_parallel_kernel(suite_run):
    outdir, _ = suite_run
    runs = pd.read_csv(outdir / "runtimes.csv")
    assert (runs["runtime_s"] > 0).all()
    jac = runs[runs["benchmark"] == "jacobi-2d"].set_index("cores")["runtime_s"]
    assert jac[2] < jac[1]


def test_suite_report_links_existing_figures(suite_run):
    outdir, _ = suite_run
    html = (outdir / "index.html").read_text()
    figures = list((outdir / "figures").glob("*.png"))
    assert figures
    for fig in figures:
        assert fig.name in html


def test_program_output_is_kept_in_a_log(suite_run):
    outdir, _ = suite_run
    log = outdir / "work" / "atax" / "trace" / "program.out"
    assert "PBENCH_CHECKSUM" in log.read_text()


def test_second_run_reuses_cached_trace_and_gives_identical_tables(suite_run, capsys):
    outdir, _ = suite_run
    trace = next((outdir / "work" / "atax" / "trace").glob("*.pptrace"))
    before = trace.stat().st_mtime_ns
    first = pd.read_csv(outdir / "hit_rates.csv")
    assert cli.run(_suite_args(outdir)) == 0
    assert trace.stat().st_mtime_ns == before
    pd.testing.assert_frame_equal(first, pd.read_csv(outdir / "hit_rates.csv"))


def test_one_failing_benchmark_does_not_stop_the_others(tmp_path, monkeypatch, capsys):
    broken = tmp_path / "atax.c"
    broken.write_text("int main(void) { return 0 }\n")  # missing semicolon
    real = suite.pipeline_config

    def with_broken_atax(cfg, bench):
        pcfg = real(cfg, bench)
        return pcfg if bench.name != "atax" else type(pcfg)(**{**pcfg.__dict__, "source": broken})

    monkeypatch.setattr(suite, "pipeline_config", with_broken_atax)
    code = cli.run(_suite_args(tmp_path / "out"))
    assert code == 1
    status = pd.read_csv(tmp_path / "out" / "status.csv").set_index("benchmark")
    assert not status.loc["atax", "ok"] and status.loc["jacobi-2d", "ok"]
    assert "atax.c" in status.loc["atax", "error"]
    hits = pd.read_csv(tmp_path / "out" / "hit_rates.csv")
    assert set(hits["benchmark"]) == {"jacobi-2d"}
    assert "FAILED atax" in capsys.readouterr().err


def test_unknown_benchmark_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="unknown nosuch"):
        cli.run(_suite_args(tmp_path, benches=("nosuch",)))


def test_run_command_predicts_one_program(tmp_path, capsys):
    source = REPO / "tests" / "translate_cases" / "parallel_for.c"
    code = cli.run(["run", str(source), "-o", str(tmp_path), "--machines", MACHINE, "--cores", "1,4", "--json"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted(r["cores"] for r in rows) == [1, 4]
    for row in rows:
        assert 0 <= row["L1_hit"] <= row["L2_hit"] <= row["L3_hit"] <= 1
        assert row["runtime_s"] > 0
    assert (tmp_path / "hit_rates.csv").is_file() and (tmp_path / "runtimes.csv").is_file()


def test_run_command_names_a_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        cli.run(["run", str(tmp_path / "absent.c"), "-o", str(tmp_path)])


def test_suite_validate_and_measure_add_tables_and_report_sections(tmp_path, capsys):
    outdir = tmp_path / "out"
    code = cli.run(["suite", "--benchmarks", "jacobi-2d", "--size", "MINI", "--machines", MACHINE, "--cores", "1,2",
                    "-o", str(outdir), "--validate", "--measure", "--measure-size", "MINI",
                    "--measure-threads", "1", "--host-machine", MACHINE])
    assert code == 0
    rows = pd.read_csv(outdir / "validation.csv")
    assert set(rows["cores"]) == {1, 2} and set(rows["mode"]) == {"iteration", "paper"}
    assert rows["abs_error_pp"].between(0, 100).all()
    # The error column is what it says: the distance between the two hit rates, in points.
    assert ((rows["predicted"] - rows["ground_truth"]).abs() * 100 - rows["abs_error_pp"]).abs().max() < 1e-9
    accuracy = pd.read_csv(outdir / "validation_accuracy.csv")
    assert {"L1", "L2", "L3"} <= set(accuracy["level"])
    measured = pd.read_csv(outdir / "runtime_validation.csv")
    assert (measured["measured_s"] > 0).all() and (measured["predicted_s"] > 0).all()
    html = (outdir / "index.html").read_text()
    assert "Validation" in html and "predicted vs measured" in html
    assert pd.read_csv(outdir / "status.csv")["validation"].eq("ok").all()
    out = capsys.readouterr().out
    assert "hit-rate error vs ground truth" in out and "runtime error vs measured" in out


def test_suite_validation_models_with_the_suites_coherence_choice(tmp_path, monkeypatch):
    """--no-coherence reaches the validated model (the ground truth keeps simulating coherence)."""
    import pptmc.validation as validate

    seen = {}

    def fake_validate_benchmark(bench, size, machines, cores, workdir, **kw):
        seen.update(kw)
        return pd.DataFrame()

    monkeypatch.setattr(validate, "validate_benchmark", fake_validate_benchmark)
    cfg = suite.SuiteConfig(outdir=tmp_path, benchmarks=("atax",), options=ModelOptions(coherence=False))
    outcome = suite._validate_one((cfg, suite.select_benchmarks(cfg)[0]))
    assert outcome.error in (None, "") and seen["options"].coherence is False
