"""`pptmc validate` and `pptmc profile` on Dask (issue #33): the same tables as in one process (validate) and
as --jobs 1 (profile), the groups of core counts run as cluster tasks, a task's user error read as in one
process, a task no worker has the memory for refused at once, and bad --scheduler values one clear line."""
from __future__ import annotations

from pathlib import Path

import pytest

from common.errors import PptmcError
from pptmc import cli, cluster

MACHINE = "haswell-i7-5960x"
VALIDATE = ["validate", "atax", "--machine", MACHINE, "--cores", "1,2,4", "--size", "MINI"]
TABLES = ("validation.csv", "validation.parquet", "accuracy.csv", "accuracy.parquet", "outliers.csv",
          "outliers.parquet")


@pytest.fixture(scope="module")
def in_process(tmp_path_factory) -> tuple[Path, str]:
    """atax at MINI, 1-4 threads, both modes and interleaves, in this process (no --scheduler): its -o folder
    and what it printed."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("inproc") / "out"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.run([*VALIDATE, "-o", str(out)]) == 0
    return out, printed.getvalue()


@pytest.fixture(scope="module")
def small_cluster():
    """A LocalCluster of one single-threaded worker that declares 100 MiB, started by the test."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None,
                      resources={"memory": 100 * 2**20}) as started:
        yield started


def test_validate_on_a_local_cluster_gives_the_tables_of_one_process(in_process, tmp_path, capsys):
    reference, printed = in_process
    out = tmp_path / "out"
    assert cli.run([*VALIDATE, "-o", str(out), "--scheduler", "local:2"]) == 0
    assert capsys.readouterr().out == printed
    for name in TABLES:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    # the work folder holds what the tasks made: one ground-truth trace per thread count, one model
    # profile folder per mode x interleave, beside one build and one model trace
    work = out / "work"
    assert sorted(p.name for p in (work / "groundtruth").glob("trace-*")) == ["trace-1", "trace-2", "trace-4"]
    assert sorted(p.name for p in (work / "model").glob("*-*") if (p / "profiles").is_dir()) == \
        ["iteration-random", "iteration-rr", "paper-random", "paper-rr"]


def test_profile_groups_on_a_local_cluster_give_the_profiles_of_jobs_1(in_process, tmp_path, monkeypatch):
    trace = in_process[0] / "work" / "model" / "trace" / "atax.pptrace"
    base = ["profile", str(trace), "--cores", "1,2,4", "--json"]
    assert cli.run([*base, "--jobs", "1", "-o", str(tmp_path / "jobs1")]) == 0
    ran: list[list[str]] = []
    real = cluster.run_tasks

    def spy(client, calls, *rest, **kw):
        ran.append([call.name for call in calls])
        return real(client, calls, *rest, **kw)

    monkeypatch.setattr(cluster, "run_tasks", spy)
    assert cli.run([*base, "--scheduler", "local:2", "-o", str(tmp_path / "dask")]) == 0
    # two workers, two groups: costs 1 (one core), 2 and 2 (PRDs and a CRD) cut where the larger part is least
    assert ran == [["c1-2", "c4"]]
    names = sorted(p.name for p in (tmp_path / "jobs1").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "dask").iterdir())
    for name in names:
        if name != "manifest.json":  # it names the writing process and the time
            assert (tmp_path / "dask" / name).read_bytes() == (tmp_path / "jobs1" / name).read_bytes(), name


def test_a_task_that_needs_more_memory_than_any_worker_is_refused_at_once(small_cluster, tmp_path):
    with pytest.raises(PptmcError, match=r"validate task build needs 0\.25 GiB of memory, but the largest worker "
                                         r"has 0\.10 GiB"):
        cli.run([*VALIDATE, "--workdir", str(tmp_path / "w"), "--scheduler", small_cluster.scheduler_address])


def test_a_tasks_user_error_reads_as_in_one_process(tmp_path, capfd):
    """The program aborts when it gets an argument: the traced run's error comes back from the worker (from
    the model's trace task or the ground truth's, whichever ends first), and no worker logs a traceback."""
    src = tmp_path / "crash.c"
    src.write_text("#include <stdlib.h>\nint main(int c, char **v) { if (c > 1) abort();\n"
                   "#pragma omp parallel\n { volatile int x = 0; (void)x; }\n return 0; }\n")
    argv = ["validate", str(src), "--machine", MACHINE, "--cores", "1", "--mode", "paper", "--interleave", "rr",
            "--workdir", str(tmp_path / "w"), "--json", "--", "boom"]
    with pytest.raises(PptmcError) as alone:
        cli.run(argv)
    capfd.readouterr()
    with pytest.raises(PptmcError) as remote:
        cli.run([*argv[:-2], "--scheduler", "local:1", *argv[-2:]])
    assert type(remote.value) is type(alone.value)
    for error in (alone.value, remote.value):
        assert "crash.gt boom: the program was killed by SIGABRT" in str(error) or \
            "crash.inst boom: the program was killed by SIGABRT" in str(error)
    assert "Traceback" not in capfd.readouterr().err


def _one_line_error(capsys, argv: list[str]) -> str:
    """The message of a command that must fail with one `pptmc: error:` line and exit code 2."""
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("pptmc: error:"), err
    return err


@pytest.mark.parametrize("extra, match", [
    (["--scheduler", "bogus"], "unknown; give local, local:N"), (["--scheduler", "local:0"], "positive number"),
    (["--scheduler", "10.0.0.5:8786"], "tcp://HOST:PORT"),
    (["--cluster-config", "c.toml"], "only --scheduler slurm or pbs")])
def test_bad_scheduler_values_are_one_clear_line(tmp_path, capsys, extra, match):
    assert match in _one_line_error(capsys, [*VALIDATE, "--workdir", str(tmp_path / "w"), *extra])
    assert not (tmp_path / "w").exists()  # refused before any work


@pytest.mark.parametrize("extra, match", [
    (["--scheduler", "bogus"], "unknown; give local, local:N"),
    (["--scheduler", "local:2", "--jobs", "2"], "give one of them"),
    (["--scheduler", "local:2", "--sample-rate", "0.5"], "give one of them")])
def test_bad_profile_scheduler_values_are_one_clear_line(in_process, tmp_path, capsys, extra, match):
    trace = in_process[0] / "work" / "model" / "trace" / "atax.pptrace"
    argv = ["profile", str(trace), "--cores", "1,2", "-o", str(tmp_path / "p"), *extra]
    assert match in _one_line_error(capsys, argv)
    assert not (tmp_path / "p").exists()
