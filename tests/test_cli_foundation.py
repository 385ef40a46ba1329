"""The CLI entry points, doctor, and atomic output helpers behave as the README promises."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pptmc import __version__, cli, doctor
from common.errors import PptmcError
from common.io import atomic_open, write_table

REPO = Path(__file__).resolve().parents[1]


def test_version_flag_prints_package_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.run(["--version"])
    assert exc.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_help_lists_doctor(capsys):
    with pytest.raises(SystemExit):
        cli.run(["--help"])
    assert "doctor" in capsys.readouterr().out


def test_doctor_reports_versions_of_required_tools():
    checks = {c.name: c for c in doctor.collect()}
    for name in ("python", "clang-19", "libomp", "llvmlite", "numba"):
        assert name in checks
        assert checks[name].ok, f"{name} missing: {checks[name].fix}"
    assert "LLVM" in checks["llvmlite"].version


def test_doctor_names_fix_command_when_clang_missing(monkeypatch):
    monkeypatch.setattr(doctor.tc, "find_clang", lambda: None)
    checks = {c.name: c for c in doctor.collect()}
    assert not checks["clang-19"].ok
    assert "apt-get install" in checks["clang-19"].fix
    assert "fix: apt-get install" in doctor.report(list(checks.values()))


def test_doctor_exit_code_nonzero_when_required_missing(monkeypatch, capsys):
    monkeypatch.setattr(doctor.tc, "find_clang", lambda: None)
    assert cli.run(["doctor"]) == 1


def test_main_turns_pptmc_error_into_message_and_exit_code(monkeypatch, capsys):
    def boom(args):
        raise PptmcError("in.c:3: something broke; do X")

    monkeypatch.setattr(cli, "run_doctor", boom)
    with pytest.raises(SystemExit) as exc:
        cli.main(["doctor"])
    assert exc.value.code == 2
    assert "pptmc: error: in.c:3: something broke" in capsys.readouterr().err


def test_atomic_open_leaves_no_partial_file_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic_open(target) as handle:
            handle.write("half")
            raise RuntimeError("disk full")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_atomic_open_replaces_existing_file_only_on_success(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with atomic_open(target) as handle:
        handle.write("new")
    assert target.read_text() == "new"


def test_write_table_roundtrips_csv_and_parquet(tmp_path):
    df = pd.DataFrame({"cores": [1, 2], "hit": [0.5, 0.25]})
    pd.testing.assert_frame_equal(pd.read_csv(write_table(df, tmp_path / "t.csv")), df)
    pd.testing.assert_frame_equal(pd.read_parquet(write_table(df, tmp_path / "t.parquet")), df)


def test_ci_wrapper_fails_when_no_tests_are_collected(tmp_path):
    empty = tmp_path / "empty_tests"
    empty.mkdir()
    result = subprocess.run(["bash", str(REPO / ".ci" / "pytest.sh"), str(empty)], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "no tests" in result.stderr


def test_console_script_runs_as_subprocess():
    result = subprocess.run([sys.executable, "-m", "pptmc.cli", "--version"], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0 and __version__ in result.stdout


def test_program_arguments_follow_the_first_double_dash(monkeypatch, tmp_path):
    """`pptmc run prog.c -o DIR ... -- ARGS` (the README's form): options before `--` are pptmc's, the rest
    the program's, even when they look like options; a command without program arguments refuses them."""
    from pptmc.commands.pipeline import program_files

    seen = {}
    monkeypatch.setattr("pptmc.commands.pipeline.run_program", lambda a: seen.update(files=program_files(a)) or 0)
    monkeypatch.chdir(tmp_path)
    for name in ("prog.c", "util.c"):
        (tmp_path / name).write_text("int x;\n")
    assert cli.run(["run", "prog.c", "util.c", "-o", "D", "--cores", "1,2", "--", "100", "-v", "in.c", "--"]) == 0
    files, _, _, program_args = seen["files"]
    assert files == [Path("prog.c"), Path("util.c")]
    assert program_args == ["100", "-v", "in.c", "--"]  # after `--` nothing is pptmc's, not even a .c name
    with pytest.raises(PptmcError, match="takes no program arguments"):
        cli.run(["doctor", "--", "x"])
    with pytest.raises(PptmcError, match="unrecognized arguments: --bogus"):
        cli.run(["run", "prog.c", "--bogus"])


def test_run_checks_machines_and_output_before_any_work(tmp_path, monkeypatch):
    """A bad --machines name or an -o that is a file fails at once, before the pipeline starts."""
    import pptmc.pipeline

    monkeypatch.setattr(pptmc.pipeline, "run_pipeline", lambda *a, **k: pytest.fail("the pipeline started"))
    source = tmp_path / "p.c"
    source.write_text("int main(void) { return 0; }\n")
    with pytest.raises(PptmcError, match="unknown machine 'bogus'"):
        cli.run(["run", str(source), "--machines", "haswell-i7-5960x,bogus", "-o", str(tmp_path / "out")])
    with pytest.raises(PptmcError, match="a file of that name exists"):
        cli.run(["run", str(source), "-o", str(source)])
    with pytest.raises(PptmcError, match="unknown machine 'bogus'"):
        cli.run(["suite", "--machines", "bogus", "-o", str(tmp_path / "s")])


def test_results_honour_the_umask(tmp_path):
    """Atomic writes give a file the mode open() would: 0644 under umask 022, 0600 under 077."""
    import os

    from common.io import write_text

    old = os.umask(0o022)
    try:
        write_text(tmp_path / "a.txt", "x")
        os.umask(0o077)
        write_text(tmp_path / "b.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.txt").stat().st_mode & 0o777 == 0o600
    from common.io import atomic_path

    with atomic_path(tmp_path / "prog") as tmp:  # a linker's output keeps its execute bits
        tmp.write_text("#!/bin/sh\n")
        tmp.chmod(0o700)
    assert (tmp_path / "prog").stat().st_mode & 0o777 == 0o755
