"""`pptmc validate` end to end on a small benchmark, the summary and outlier rules, and bad input."""
from __future__ import annotations

import json
import types

import numpy as np
import pandas as pd
import pytest

from analysis.validate.compare import COLUMNS, accuracy_summary, diagnose, outliers
from analysis.validate.report import write_validation_figures
from pptmc import cli
from common.errors import InputError, PptmcError

MACHINE = "haswell-i7-5960x"


@pytest.fixture(scope="module")
def atax(tmp_path_factory):
    """atax at MINI size, 1-4 threads, both modes, rr and random, through the CLI (tables written to -o)."""
    out = tmp_path_factory.mktemp("val")
    code = cli.run(["validate", "atax", "--machine", MACHINE, "--cores", "1,2,4", "--size", "MINI", "-o", str(out)])
    assert code == 0
    return out, pd.read_parquet(out / "validation.parquet")


def test_table_shape_and_error_range(atax):
    _, df = atax
    assert list(df.columns[:len(COLUMNS)]) == COLUMNS
    assert len(df) == 3 * 3 * 2 * 2  # cores x levels x modes x interleaves
    assert set(df["mode"]) == {"iteration", "paper"} and set(df["interleave"]) == {"rr", "random"}
    assert df["abs_error_pp"].between(0, 100).all()
    assert np.allclose(df["abs_error_pp"], 100 * (df["predicted"] - df["ground_truth"]).abs())
    assert df["ground_truth"].between(0, 1).all()


def test_single_thread_ground_truth_close_to_prediction(atax):
    """One thread: both sides see the same program's references (original vs translated build of the
    same kernel), so the remaining gap is what the model itself gets wrong on one core. At MINI size
    atax's 32 KiB matrix fills L1 exactly and its power-of-two rows cause conflict misses, which the
    set-aware hit rates see (SDCM, random set mapping, would miss them by 2.4 points). 1 point is the
    paper's per-level error budget."""
    _, df = atax
    one = df[(df["cores"] == 1) & (df["mode"] == "iteration")]
    assert (one["abs_error_pp"] < 1.0).all()
    l1 = one[one["level"] == "L1"]
    assert (100 * (l1["gt_fully_assoc"] - l1["ground_truth"]).abs() > 1.0).all()  # conflicts are there
    # and the accesses agree within the translation's few extra loads
    assert (abs(one["model_accesses"] / one["gt_accesses"] - 1) < 0.05).all()


def test_ground_truth_does_not_depend_on_mode(atax):
    """The ground truth is one measurement; only the prediction changes with the model's mode."""
    _, df = atax
    piv = df.pivot_table(index=["machine", "cores", "level", "interleave"], columns="mode", values="ground_truth")
    assert np.allclose(piv["iteration"], piv["paper"])


def test_outputs_written(atax):
    out, df = atax
    for name in ("validation", "accuracy", "outliers"):
        assert (out / f"{name}.csv").is_file() and (out / f"{name}.parquet").is_file()
    figs = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert figs == ["validation_atax.png", "validation_errors.png", "validation_scatter.png"]
    summary = pd.read_csv(out / "accuracy.csv")
    overall = summary[(summary["machine"] == "all")].set_index(["level", "mode", "interleave"])
    want = df.groupby(["level", "mode", "interleave"])["abs_error_pp"].mean()
    assert np.allclose(overall.loc[want.index, "mean_abs_error_pp"], want)


def test_cli_prints_table_and_json(atax, capsys):
    out, df = atax
    args = ["validate", "atax", "--machine", MACHINE, "--cores", "1,2", "--size", "MINI", "--mode", "iteration",
            "--interleave", "rr", "--workdir", str(out / "work")]
    assert cli.run(args) == 0
    text = capsys.readouterr().out
    assert "mean absolute error" in text and "truth rr" in text and "iter-rr err_pp" in text
    assert cli.run(args + ["--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 2 * 3 and {r["mode"] for r in rows} == {"iteration"}
    cached = df[(df["cores"] <= 2) & (df["mode"] == "iteration") & (df["interleave"] == "rr")]
    assert sorted(r["ground_truth"] for r in rows) == pytest.approx(sorted(cached["ground_truth"]))


def row(**kw):
    base = dict(benchmark="b", machine="m", cores=4, level="L1", mode="iteration", interleave="rr", predicted=0.9,
                ground_truth=0.8, abs_error_pp=10.0, gt_invalidation_pp=0.0, gt_fully_assoc=0.8,
                gt_no_coherence=0.8, gt_thread_imbalance=1.0, model_core_imbalance=1.0, gt_distinct_lines=100,
                model_shared_cold=100, shared_level=False, gt_accesses=1000, model_accesses=1000)
    base.update(kw)
    return types.SimpleNamespace(**base)


@pytest.mark.parametrize("kw,want", [
    ({"gt_fully_assoc": 0.86}, "conflict misses"),
    ({"gt_invalidation_pp": 6.0}, "sharing"),
    ({"gt_no_coherence": 0.87}, "sharing"),
    ({"shared_level": True, "level": "L3", "model_shared_cold": 200}, "sharing"),
    ({"gt_thread_imbalance": 1.5}, "load imbalance"),
    ({}, "none of the four: translation or hierarchy effects"),
    ({"model_accesses": 500}, "none of the four: translation (the model's trace has 0.50x the real accesses)"),
])
def test_diagnosis_rules(kw, want):
    assert diagnose(row(**kw)) == want


def test_diagnosis_single_core_only_conflict_can_apply():
    assert diagnose(row(cores=1, gt_invalidation_pp=9.0, gt_thread_imbalance=3.0), True).startswith("none")
    assert diagnose(row(cores=1, gt_fully_assoc=0.9)) == "conflict misses"


def test_outliers_and_schedule_rule():
    """Paper mode above the threshold while iteration mode is within it: the schedule is named."""
    rows = [vars(row(mode="paper", abs_error_pp=5.0, predicted=0.85)),
            vars(row(mode="iteration", abs_error_pp=1.0, predicted=0.81)),
            vars(row(mode="iteration", level="L2", abs_error_pp=2.9))]
    df = pd.DataFrame(rows)
    out = outliers(df, 3.0)
    assert len(out) == 1 and out.loc[0, "mode"] == "paper" and out.loc[0, "diagnosis"] == "schedule"
    assert len(outliers(df, 0.5)) == 3
    summary = accuracy_summary(df)
    assert set(summary["machine"]) == {"all", "m"}


def test_bad_input(tmp_path):
    with pytest.raises(PptmcError, match="no such C file"):
        cli.run(["validate", str(tmp_path / "missing.c"), "--machine", MACHINE])
    with pytest.raises(PptmcError, match="unknown benchmark|unknown"):
        cli.run(["validate", "nosuchbench", "--machine", MACHINE])
    with pytest.raises(PptmcError, match="unknown machine"):
        cli.run(["validate", "atax", "--machine", "nope", "--size", "MINI", "--workdir", str(tmp_path)])
    with pytest.raises(PptmcError, match="--machine"):
        cli.run(["validate", "atax"])
    with pytest.raises(PptmcError, match="--cores"):
        cli.run(["validate", "atax", "--machine", MACHINE, "--cores", "0,x"])
    with pytest.raises(PptmcError, match="dataset size"):
        cli.run(["validate", "atax", "--machine", MACHINE, "--size", "HUGE"])
    with pytest.raises(PptmcError, match="unrecognized arguments: --bogus"):
        cli.run(["validate", "atax", "--machine", MACHINE, "--bogus"])
    with pytest.raises(InputError, match="lacks columns"):
        write_validation_figures(pd.DataFrame({"x": [1]}), tmp_path)


def test_options_after_program_and_program_args(tmp_path, capsys):
    """Options may follow the program; program arguments follow `--` and reach the run (a crash here)."""
    src = tmp_path / "crash.c"
    src.write_text("#include <stdlib.h>\nint main(int c, char **v) { if (c > 1) abort();\n"
                   "#pragma omp parallel\n { volatile int x = 0; (void)x; }\n return 0; }\n")
    with pytest.raises(PptmcError, match="abort|SIGABRT|killed|status"):
        cli.run(["validate", str(src), "--machine", MACHINE, "--cores", "1", "--mode", "paper",
                 "--interleave", "rr", "--workdir", str(tmp_path / "w"), "--", "boom"])


def test_builtin_resolution_from_name_or_path(tmp_path):
    """A bare name and a path under benchmarks/polybench both take the catalog's harness and size."""
    import argparse

    from pptmc.commands.validate import resolve_program
    from benchmarks.polybench.catalog import by_name

    bench = by_name("mvt")
    for spelling in ("mvt", str(bench.source)):
        ns = argparse.Namespace(program=spelling, define=None, include=None, extra_source=None, size="MINI")
        prog = resolve_program(ns, ["7"])
        assert prog.source == bench.source and prog.defines == ["MINI_DATASET"]
        assert prog.extra_sources == bench.harness_sources and prog.include_dirs[0] == bench.include_dir
        assert prog.args == ["7"]
    own = tmp_path / "mine.c"
    own.write_text("int main(void){return 0;}\n")
    ns = argparse.Namespace(program=str(own), define=["X=1"], include=None, extra_source=None, size=None)
    prog = resolve_program(ns, [])
    assert prog.source == own and prog.defines == ["X=1"] and prog.extra_sources == []


def test_placement_reaches_the_model_and_the_ground_truth(tmp_path):
    """zen2 puts 8 close threads on 2 CCX L3s and 8 spread ones on 8: L3 hits on lines a thread of another
    CCX brought in vanish under spread, on both sides, and the model follows the ground truth in each."""
    tables = {}
    for placement in ("close", "spread"):
        out = tmp_path / placement
        assert cli.run(["validate", "atax", "--machine", "zen2-epyc-7702p", "--cores", "8", "--size", "MINI",
                        "--mode", "iteration", "--interleave", "rr", "--placement", placement,
                        "--workdir", str(tmp_path / "work"), "-o", str(out)]) == 0
        df = pd.read_csv(out / "validation.csv")
        tables[placement] = df[df["level"] == "L3"].iloc[0]
    close, spread = tables["close"], tables["spread"]
    assert spread["ground_truth"] < close["ground_truth"] and spread["predicted"] < close["predicted"]
    assert close["abs_error_pp"] < 1 and spread["abs_error_pp"] < 1
