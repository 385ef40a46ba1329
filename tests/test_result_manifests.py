"""`pptmc run` and `pptmc suite` results carry results.json, written last; check_results refuses tables that
were changed, are not listed, or whose manifest is missing. Oracle: the files on disk, hashed here."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from common.errors import InputError
from common.manifest import RESULTS, check_results
from pptmc import __version__, cli, pipeline, suite

HERE = Path(__file__).parent
MACHINE = "haswell-i7-5960x"


def _on_disk(folder: Path, names: list[str]) -> dict:
    """Each named file's size and SHA-256, computed from its bytes."""
    return {n: {"bytes": (folder / n).stat().st_size, "sha256": hashlib.sha256((folder / n).read_bytes()).hexdigest()}
            for n in names}


def _run(folder: Path, out: str = "out") -> int:
    """`pptmc run` of the two-file dot-product program into folder/out."""
    return cli.run(["run", str(folder / "main.c"), "--machines", MACHINE, "--cores", "1,2", "--json",
                    "-o", str(folder / out)])


@pytest.fixture()
def program(tmp_path: Path) -> Path:
    """A copy of the tiny outside-corpus program (tests/outside/dot)."""
    for f in (HERE / "outside" / "dot").iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def test_run_manifest_lists_exactly_the_result_tables(program, capsys):
    """Every table at the top of -o, and nothing from the cache folders, with its size and SHA-256."""
    assert _run(program) == 0
    out = program / "out"
    tables = sorted(p.name for p in out.glob("*.csv"))
    assert {"hit_rates.csv", "runtimes.csv", "regions.csv"} <= set(tables)
    record = json.loads((out / RESULTS).read_text())
    assert record["files"] == _on_disk(out, tables)
    assert record["pptmc_version"] == __version__ and len(record["run_id"]) == 32
    assert record["inputs"]["step_keys"]["trace"] == (out / "trace" / ".key").read_text().strip()
    assert record["inputs"]["step_keys"]["profile"] == (out / "profiles" / ".key").read_text().strip()
    assert check_results(out, ["hit_rates.csv", "runtimes.csv"], "rerun")["run_id"] == record["run_id"]
    assert _run(program) == 0  # a rerun from the cache is a new run with its own id, over the same tables
    again = json.loads((out / RESULTS).read_text())
    assert again["run_id"] != record["run_id"] and again["files"] == _on_disk(out, tables)


def test_checker_refuses_a_changed_table_an_unlisted_one_and_a_missing_manifest(program, capsys):
    """One byte changed: refused naming the file; a stray table: not this run's; no manifest: incomplete."""
    assert _run(program) == 0
    out = program / "out"
    (out / "tlb_miss_rates.csv").write_text("cores,level,miss_rate\n1,L1,0.5\n")  # haswell has no TLB table
    with pytest.raises(InputError, match=r"tlb_miss_rates\.csv is not one of this run's results.*rerun pptmc run"):
        check_results(out, ["hit_rates.csv", "tlb_miss_rates.csv"], "rerun pptmc run")
    data = bytearray((out / "runtimes.csv").read_bytes())
    data[-2] = ord("7") if data[-2] != ord("7") else ord("3")
    (out / "runtimes.csv").write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"runtimes\.csv is not the file this run wrote.*rerun pptmc run"):
        check_results(out, ["hit_rates.csv"], "rerun pptmc run")
    (out / RESULTS).unlink()
    with pytest.raises(InputError, match=r"results are incomplete.*rerun pptmc run"):
        check_results(out, ["hit_rates.csv"], "rerun pptmc run")


def test_a_run_stopped_between_tables_leaves_no_manifest(program, monkeypatch, capsys):
    """The old manifest goes before the first new table: a crash after it leaves the folder unvouched."""
    assert _run(program) == 0
    real, calls = pipeline.write_table, []

    def first_then_crash(df, path: Path) -> Path:
        """Write the run's first table, then fail as a crash would."""
        calls.append(Path(path).name)
        if len(calls) > 1:
            raise RuntimeError("simulated crash")
        return real(df, path)

    monkeypatch.setattr(pipeline, "write_table", first_then_crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        _run(program)
    assert calls[0] in ("regions.csv", "hit_rates.csv", "runtimes.csv") and len(calls) == 2
    assert not (program / "out" / RESULTS).exists()
    with pytest.raises(InputError, match="results are incomplete"):
        check_results(program / "out", ["hit_rates.csv"], "rerun")
    monkeypatch.undo()
    assert _run(program) == 0
    check_results(program / "out", ["hit_rates.csv", "runtimes.csv", "regions.csv"], "rerun")


def _suite(outdir: Path) -> int:
    """`pptmc suite` of one PolyBench kernel at MINI into outdir."""
    return cli.run(["suite", "--benchmarks", "atax", "--size", "MINI", "--machines", MACHINE, "--cores", "1,2",
                    "-o", str(outdir), "-j", "1", "--json"])


def test_suite_manifest_lists_its_tables_and_report_and_a_crash_leaves_none(tmp_path, monkeypatch, capsys):
    """Every file of the suite's folder outside work/ (tables, model.json, index.html, figures) is listed with
    its size and SHA-256; a suite stopped after its first table leaves no manifest."""
    outdir = tmp_path / "suite"
    assert _suite(outdir) == 0
    made = sorted(p.relative_to(outdir).as_posix() for p in outdir.rglob("*") if p.is_file()
                  and p.parts[len(outdir.parts)] != "work" and not p.name.startswith(".") and p.name != RESULTS)
    assert {"hit_rates.csv", "status.parquet", "model.json", "index.html"} <= set(made)
    assert any(m.startswith("figures/") for m in made)
    record = json.loads((outdir / RESULTS).read_text())
    assert record["files"] == _on_disk(outdir, made)
    run = json.loads((outdir / "work" / "atax" / RESULTS).read_text())
    assert record["inputs"]["benchmark_runs"] == {"atax": run["run_id"]}
    check_results(outdir, ["hit_rates.csv", "status.csv"], "rerun pptmc suite")
    with pytest.raises(InputError, match=r"validation\.csv is not one of this run's results"):
        check_results(outdir, ["validation.csv"], "rerun pptmc suite --validate")

    real = suite.write_table

    def first_then_crash(df, path: Path) -> Path:
        """Write hit_rates.csv (the suite's first table), then fail as a crash would."""
        if Path(path).name != "hit_rates.csv":
            raise RuntimeError("simulated crash")
        return real(df, path)

    monkeypatch.setattr(suite, "write_table", first_then_crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        _suite(outdir)
    assert not (outdir / RESULTS).exists()


def test_compare_runs_refuses_a_suite_folder_that_does_not_match_its_manifest(tmp_path, capsys):
    """benchmarks.compare_runs reads suite tables back: a table changed after results.json is refused (exit 2),
    an intact pair compares, and a folder from before results.json existed is compared as it is."""
    from benchmarks.compare_runs import main
    from common.manifest import write_manifest

    for name in ("old", "new"):
        d = tmp_path / name
        d.mkdir()
        (d / "status.csv").write_text("benchmark,ok\natax,True\n")
        (d / "hit_rates.csv").write_text("benchmark,cores,level,cumulative_hit_rate\natax,1,L1,0.5\n")
    write_manifest(tmp_path / "new", "pptmc suite results", files=["status.csv", "hit_rates.csv"], name=RESULTS)
    assert main([str(tmp_path / "old"), str(tmp_path / "new")]) == 0
    (tmp_path / "new" / "hit_rates.csv").write_text("benchmark,cores,level,cumulative_hit_rate\natax,1,L1,0.6\n")
    assert main([str(tmp_path / "old"), str(tmp_path / "new")]) == 2
    assert "hit_rates.csv" in capsys.readouterr().err
