"""`pptmc predict` glue: fake trace reader and block table, hit rates from a table, outputs written."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

import instrument
from analysis.runtime import model as rm
from pptmc.commands.predict import parse_cores
from instrument.trace_types import SCHED_STATIC, LoopInstance
from machines import load_machine
from pptmc import cli
from common.errors import InputError


@pytest.fixture
def fake_stage(monkeypatch, tmp_path):
    binary = tmp_path / "prog.inst"
    binary.write_text("")
    cfg = {"version": 1, "functions": {"OUT__1__1__": {"entry": 1, "blocks": [1, 2], "edges": [[1, 2]], "calls": 1}}}
    (tmp_path / "prog.inst.cfg.json").write_text(json.dumps(cfg))  # the CFG side file: no loops
    info = SimpleNamespace(program=str(binary), complete=True, n_accesses=4000, block_counts={1: 1000, 2: 10},
                           loops=[LoopInstance(0, 0, 1000, SCHED_STATIC, 0)])
    # Shaped like instrument.BlockTable: .blocks maps id -> entry with an .ops dict.
    table = SimpleNamespace(blocks={1: SimpleNamespace(ops={"fp_add": 1, "fp_mul": 1, "load": 3, "store": 1,
                                                            "load_bytes": 24, "store_bytes": 8}),
                                    2: SimpleNamespace(ops={"int_div": 2})})
    monkeypatch.setattr(instrument, "open_trace", lambda path: SimpleNamespace(info=info), raising=False)
    monkeypatch.setattr(instrument, "load_block_table", lambda path: table, raising=False)
    rows = [{"cores": c, "level": lv, "cumulative_hit_rate": 0.0, "local_hit_rate": h}
            for c in (1, 2, 4) for lv, h in (("L1", 0.9), ("L2", 0.5), ("L3", 0.5 if c < 4 else 0.2))]
    rates = tmp_path / "rates.csv"
    pd.DataFrame(rows).to_csv(rates, index=False)
    trace = tmp_path / "t.trace"
    trace.write_text("")
    return trace, rates


def test_predict_cli_matches_model(fake_stage, tmp_path, capsys):
    trace, rates = fake_stage
    out = tmp_path / "out"
    assert cli.run(["predict", str(trace), "--machine", "haswell-i7-5960x", "--cores", "4,1,2",
                    "--hit-rate-table", str(rates), "--layout", "contiguous", "--cpu-form", "throughput",
                    "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "runtime[s]" in printed and "L3 hit(loc/cum)" in printed
    table = pd.read_csv(out / "predictions.csv")
    assert list(table["cores"]) == [1, 2, 4]
    m = load_machine("haswell-i7-5960x")
    ops = rm.OpCounts(fp_add=1000, fp_mul=1000, int_div=20, load=3000, store=1000, load_bytes=24000,
                      store_bytes=8000)
    want = rm.predict_runtime(m, 4, {"L1": 0.9, "L2": 0.5, "L3": 0.2}, ops, 4000, 32000, work_share=250 / 1000)
    row = table[table["cores"] == 4].iloc[0]
    assert row["runtime_s"] == pytest.approx(want.runtime_s)
    assert row["L3_local_hit_rate"] == pytest.approx(0.2)
    assert json.loads((out / "predictions.json").read_text())["machine"] == "haswell-i7-5960x"


def test_predict_cli_errors(fake_stage):
    """Bad cores and a missing binary; the fake trace has no chunks, so the CPU form is one without
    trace terms."""
    trace, rates = fake_stage
    with pytest.raises(InputError, match="none for 8 cores"):
        cli.run(["predict", str(trace), "--machine", "haswell-i7-5960x", "--cores", "8",
                 "--hit-rate-table", str(rates), "--cpu-form", "throughput"])
    with pytest.raises(InputError, match="has 8 cores; drop 16"):
        cli.run(["predict", str(trace), "--machine", "haswell-i7-5960x", "--cores", "8,16",
                 "--hit-rate-table", str(rates), "--cpu-form", "throughput"])
    with pytest.raises(InputError, match="--cores"):
        parse_cores("1,two")
    with pytest.raises(InputError, match="not found; pass it with --binary"):
        cli.run(["predict", str(trace), "--machine", "haswell-i7-5960x", "--cores", "1",
                 "--hit-rate-table", str(rates), "--cpu-form", "throughput", "--binary", str(trace.parent / "nope")])


def test_predict_table_for_the_pipeline(fake_stage):
    """The DataFrame entry point: rows per core count in the hit table, capped at the machine's cores."""
    trace, rates = fake_stage
    hits = pd.read_csv(rates)
    hits = pd.concat([hits, hits[hits["cores"] == 4].assign(cores=16)], ignore_index=True)
    m = load_machine("haswell-i7-5960x")
    table = rm.prediction_table(rm.predict_runtimes(m, hits, rm.RegionRecord.load(trace)))
    assert list(table["cores"]) == [1, 2, 4]
    row = table[table["cores"] == 2].iloc[0]
    assert row["work_share"] == pytest.approx(0.5)
    assert row["runtime_s"] == pytest.approx(row["t_mem_s"] + row["t_cpu_s"] + row["contention_s"])


def test_predict_explain_adds_up_to_the_runtime(fake_stage, tmp_path, capsys):
    """--explain: per core count the terms' seconds add up to the predicted runtime, the shares to 1, and
    exactly one term binds; the same table is written as explain.csv."""
    trace, rates = fake_stage
    out = tmp_path / "out"
    assert cli.run(["predict", str(trace), "--machine", "haswell-i7-5960x", "--cores", "1,4", "--hit-rate-table",
                    str(rates), "--cpu-form", "throughput", "--explain", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "4 cores:" in printed and "memory" in printed and "* " in printed
    explain = pd.read_csv(out / "explain.csv")
    runtime = pd.read_csv(out / "predictions.csv").set_index("cores")["runtime_s"]
    for cores, part in explain.groupby("cores"):
        assert part["seconds"].sum() == pytest.approx(runtime[cores], rel=1e-9)
        assert part["share"].sum() == pytest.approx(1.0, rel=1e-9)
        assert part["binds"].sum() == 1
