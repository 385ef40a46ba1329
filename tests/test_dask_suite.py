"""`pptmc suite` on Dask (issue #33): the same tables as --jobs 1 on the default local cluster, on a cluster
the test starts and after a worker is killed mid-run; failures reported with benchmark and stage; memory
asked for and never overcommitted; bad --scheduler values and cluster files refused with one clear line."""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from common.errors import InputError
from common.manifest import check_results
from pptmc import cli, cluster, suite

MACHINE = "haswell-i7-5960x"
BENCHES = ("atax", "jacobi-2d")
TABLES = ("hit_rates.csv", "runtimes.csv", "validation.csv", "validation_accuracy.csv", "validation_outliers.csv")
RUN_TABLES = ("hit_rates.csv", "runtimes.csv", "regions.csv")


def _args(outdir: Path, *extra: str, validate: bool = True) -> list[str]:
    return ["suite", "--benchmarks", ",".join(BENCHES), "--size", "MINI", "--machines", MACHINE, "--cores", "1,2",
            "-o", str(outdir), "--json", *(["--validate"] if validate else []), *extra]


def _same_tables(expected: Path, got: Path) -> None:
    """Byte-identical suite and run tables; the status table without its timings."""
    for name in TABLES:
        assert (got / name).read_bytes() == (expected / name).read_bytes(), name
    for bench in BENCHES:
        for name in RUN_TABLES:
            assert (got / "work" / bench / name).read_bytes() == (expected / "work" / bench / name).read_bytes()
    status = [pd.read_csv(d / "status.csv").filter(regex="^(?!seconds_)") for d in (expected, got)]
    pd.testing.assert_frame_equal(*status)
    assert status[1]["ok"].all() and status[1]["validation"].eq("ok").all()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The suite with --jobs 1: today's path, one pipeline run per benchmark in a local process."""
    out = tmp_path_factory.mktemp("jobs1") / "out"
    assert cli.run(_args(out, "--jobs", "1")) == 0
    return out


@pytest.fixture()
def local_cluster():
    """A LocalCluster of two single-threaded workers, started by the test."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as started:
        yield started


def test_default_local_cluster_gives_the_tables_of_jobs_1(reference, tmp_path):
    out = tmp_path / "out"
    assert cli.run(_args(out)) == 0
    _same_tables(reference, out)
    check_results(out, ["hit_rates.csv", "status.csv", "validation.csv"], "rerun pptmc suite")
    check_results(out / "work" / "atax", ["hit_rates.csv", "runtimes.csv", "regions.csv"], "rerun")
    # two traces on two workers: each benchmark's core counts were profiled as parts, one per core count
    assert sorted(p.name for p in (out / "work" / "atax" / "parts").iterdir()) == ["all", "c1", "c2"]


def test_explicit_cluster_gives_the_same_tables_and_a_rerun_reuses_the_cache(reference, tmp_path, local_cluster):
    out = tmp_path / "out"
    assert cli.run(_args(out, "--scheduler", local_cluster.scheduler_address)) == 0
    _same_tables(reference, out)
    stamps = sorted((out / "work").rglob(".key"))
    assert stamps
    before = {p: p.stat().st_mtime_ns for p in [*stamps, *(out / "work").rglob("*.pptrace")]}
    assert cli.run(_args(out, "--scheduler", local_cluster.scheduler_address)) == 0
    assert {p: p.stat().st_mtime_ns for p in before} == before  # every cached step was reused
    _same_tables(reference, out)


def _kill_a_busy_worker(address: str, stop: threading.Event, killed: list) -> None:
    """Kill (SIGKILL, with the processes it started) a worker while it runs one of the suite's trace tasks."""
    import psutil
    from distributed import Client

    with Client(address) as client:
        while not stop.is_set():
            busy = [w for w, keys in client.processing().items() if any(k.startswith("pptmc-trace") for k in keys)]
            if busy:
                time.sleep(0.3)  # well into the task (a fresh worker's trace task takes seconds)
                if any(k.startswith("pptmc-") for k in client.processing().get(busy[0], ())):
                    pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                    worker = psutil.Process(pid)
                    for proc in [*worker.children(recursive=True), worker]:
                        proc.kill()
                    killed.append(busy[0])
                    return
            time.sleep(0.05)


def test_a_worker_killed_mid_run_loses_nothing(reference, tmp_path, local_cluster):
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_a_busy_worker, args=(local_cluster.scheduler_address, stop, killed))
    killer.start()
    try:
        code = cli.run(_args(tmp_path / "out", "--scheduler", local_cluster.scheduler_address))
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was running a trace task"
    assert code == 0
    _same_tables(reference, tmp_path / "out")


def test_profile_jobs_inside_a_dask_worker_run_the_groups_in_turn(reference, local_cluster):
    """A Dask worker's process is daemonic and may not fork: --jobs' groups run one after another there,
    with the profiles one process makes."""
    from distributed import Client

    from analysis.profiles.sweep import compute_profiles

    trace = next((reference / "work" / "atax" / "trace").glob("*.pptrace"))
    with Client(local_cluster) as client:
        remote = client.submit(compute_profiles, trace, [1, 2, 4], jobs=2).result()
    alone = compute_profiles(trace, [1, 2, 4])
    assert sorted(remote.prd) == sorted(alone.prd) and sorted(remote.crd) == [1, 2, 4]
    for key, profile in [*alone.prd.items(), *alone.crd.items()]:
        other = remote.prd[key] if isinstance(key, tuple) else remote.crd[key]
        assert (profile.total, profile.cold) == (other.total, other.cold)
        assert np.array_equal(profile.count, other.count) and np.array_equal(profile.lower, other.lower)


def test_a_failing_task_names_benchmark_and_stage_and_the_others_finish(tmp_path, monkeypatch, capsys):
    broken = tmp_path / "atax.c"
    broken.write_text("int main(void) { return 0 }\n")  # missing semicolon: the translate stage fails
    real = suite.pipeline_config

    def with_broken_atax(cfg, bench):  # the configurations are made here, on the client, and sent as they are
        pcfg = real(cfg, bench)
        return pcfg if bench.name != "atax" else type(pcfg)(**{**pcfg.__dict__, "source": broken})

    monkeypatch.setattr(suite, "pipeline_config", with_broken_atax)
    code = cli.run(_args(tmp_path / "out", validate=False))
    assert code == 1
    status = pd.read_csv(tmp_path / "out" / "status.csv").set_index("benchmark")
    assert not status.loc["atax", "ok"] and status.loc["jacobi-2d", "ok"]
    assert status.loc["atax", "error"].startswith("translate failed: InputError:")
    assert "atax.c" in status.loc["atax", "error"]
    assert set(pd.read_csv(tmp_path / "out" / "hit_rates.csv")["benchmark"]) == {"jacobi-2d"}
    failures = json.loads(capsys.readouterr().out)["failures"]
    assert list(failures) == ["atax"] and "translate failed" in failures["atax"]


def test_a_task_that_needs_more_memory_than_any_worker_is_refused_at_once(tmp_path):
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None,
                      resources={"memory": 100 * 2**20}) as small:
        code = cli.run(_args(tmp_path / "out", "--scheduler", small.scheduler_address, validate=False))
    assert code == 1
    errors = pd.read_csv(tmp_path / "out" / "status.csv")["error"]
    assert errors.str.contains(r"trace failed: needs 0\.25 GiB of memory, but the largest worker has 0\.10 GiB").all()


def _spans(tmp_path: Path, worker_memory: int, jobs: int = 3) -> list[tuple[float, float]]:
    """Run `jobs` half-second trace tasks (no-ops that record when they ran) on one worker of two
    threads that declares `worker_memory` bytes; their (start, end) times."""
    from distributed import Client, LocalCluster

    from benchmarks.bench_dask import noop_assemble, noop_part, sleeping_trace
    from pptmc.dask_suite import Job, TaskFunctions, run_jobs
    from pptmc.pipeline import PipelineConfig

    batch = [Job(f"j{i}", PipelineConfig(source=tmp_path / "x.c", workdir=tmp_path / f"j{i}", machines=(MACHINE,),
                                         cores=(1,))) for i in range(jobs)]
    with LocalCluster(n_workers=1, threads_per_worker=2, dashboard_address=None,
                      resources={"memory": worker_memory}) as one, Client(one) as client:
        run_jobs(client, batch, TaskFunctions(sleeping_trace, noop_part, None, noop_assemble), False, None)
    assert all(job.error is None for job in batch), [job.error for job in batch]
    spans = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("j*/span-*.json"))]
    return sorted((s["start"], s["end"]) for s in spans)


def test_the_scheduler_never_runs_more_than_a_worker_holds(tmp_path):
    from pptmc.suite_tasks import TASK_BASE_BYTES

    # a trace task asks for TASK_BASE_BYTES: a worker of 1.5 times that runs one at a time
    alone = _spans(tmp_path / "small", int(1.5 * TASK_BASE_BYTES))
    assert len(alone) == 3 and all(a_end <= b_start for (_, a_end), (b_start, _) in zip(alone, alone[1:]))
    # the same worker with room for two runs two at once (the check above can see an overlap)
    together = _spans(tmp_path / "large", 3 * TASK_BASE_BYTES)
    assert any(b_start < a_end for (_, a_end), (b_start, _) in zip(together, together[1:]))


def test_parts_and_memory_needs_are_the_hand_computed_ones():
    from analysis.options import ModelOptions
    from pptmc.suite_tasks import TASK_BASE_BYTES, memory_need, plan_parts

    machines = ("m1", "m2", "m3")
    # many traces: one part each, every machine and core count together
    assert [(p.machines, p.cores, p.tag) for p in plan_parts(machines, (1, 2, 4, 8, 16), 60, 16)] == \
        [(machines, (1, 2, 4, 8, 16), "c1-2-4-8-16")]
    # two traces on two workers: two parts each, split by core counts
    assert [p.cores for p in plan_parts(("m1",), (1, 2), 2, 2)] == [(1,), (2,)]
    # one trace on four workers wants eight parts: five core counts alone, then two machine groups
    parts = plan_parts(machines, (1, 2, 4, 8, 16), 1, 4)
    assert len(parts) == 10 and {p.machines for p in parts} == {("m1", "m2"), ("m3",)}
    # haswell with the sdcm predictor: no set classes, one L3 instance (no groupings); cores 1 and 2 hold
    # 1 + 2 engines of 48 B per line, 256 KiB per core, and 8 B per waiting access (1000 lines, 10000 accesses)
    need = memory_need((MACHINE,), (1, 2), ModelOptions(hit_rates="sdcm"), 1000, 10_000)
    assert need == TASK_BASE_BYTES + 3 * 48 * 1000 + 3 * 256 * 1024 + 8 * 10_000


def test_distinct_lines_match_a_brute_force_count(reference):
    import instrument
    from pptmc.suite_tasks import distinct_lines

    trace = next((reference / "work" / "atax" / "trace").glob("*.pptrace"))
    addr = np.concatenate([ch.addr for ch in instrument.open_trace(trace).chunks()])
    assert distinct_lines(trace) == (len(np.unique(addr >> 6)), len(addr))
    assert distinct_lines(trace) == (len(np.unique(addr >> 6)), len(addr))  # the kept count, read back


def _one_line_error(capsys, argv: list[str]) -> str:
    """The message of a command that must fail with one `pptmc: error:` line and exit code 2."""
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("pptmc: error:"), err
    return err


@pytest.mark.parametrize("value, match", [
    ("bogus", "unknown; give local, local:N"), ("local:0", "local:N takes a positive number"),
    ("10.0.0.5:8786", "tcp://HOST:PORT"), ("tcp://host", "tcp://HOST:PORT"), ("http://host:80", "tcp://HOST:PORT")])
def test_bad_scheduler_values_are_one_clear_line(tmp_path, capsys, value, match):
    assert match in _one_line_error(capsys, _args(tmp_path / "out", "--scheduler", value))


def test_scheduler_flag_conflicts_are_one_clear_line(tmp_path, capsys):
    assert "give one of them" in _one_line_error(capsys, _args(tmp_path / "o", "--scheduler", "local", "-j", "2"))
    config = tmp_path / "c.toml"
    config.write_text("[slurm]\ncores = 4\nmemory = \"8GB\"\n")
    assert "only --scheduler slurm or pbs" in _one_line_error(capsys, _args(tmp_path / "o", "--cluster-config",
                                                                            str(config)))


def test_a_scheduler_that_does_not_answer_is_one_clear_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 1)
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    err = _one_line_error(capsys, _args(tmp_path / "out", "--scheduler", f"tcp://127.0.0.1:{port}"))
    assert "no Dask scheduler answered" in err


@pytest.mark.parametrize("text, match", [
    ("[slurm\n", "not valid TOML"), ("[sge]\ncores = 1\n", r"unknown table \[sge\]"),
    ("[pbs]\ncores = 1\nmemory = \"1GB\"\n", r"no \[slurm\] table"),
    ("[slurm]\ncores = 4\n", "has no memory"), ("[slurm]\nmemory = \"8GB\"\n", "has no cores"),
    ("[slurm]\ncores = 4\nmemory = \"8GB\"\nqueu = \"x\"\n", "queu: unknown key"),
    ("[slurm]\ncores = \"4\"\nmemory = \"8GB\"\n", "cores = '4': give a positive whole number"),
    ("[slurm]\ncores = 0\nmemory = \"8GB\"\n", "give a positive whole number"),
    ("[slurm]\ncores = 4\nmemory = \"lots\"\n", "not an amount of memory"),
    ("[slurm]\ncores = 4\nmemory = \"8GB\"\nwalltime = \"2 hours\"\n", "HH:MM:SS"),
    ("[slurm]\ncores = 4\nmemory = \"8GB\"\njob_extra_directives = \"-C x\"\n", "list of strings"),
    ("[slurm]\ncores = 4\nmemory = \"8GB\"\nresource_spec = \"x\"\n", "resource_spec: unknown key")])
def test_bad_cluster_files_name_the_file_and_field(tmp_path, text, match):
    config = tmp_path / "cluster.toml"
    config.write_text(text)
    with pytest.raises(InputError, match=match) as err:
        cluster.read_cluster_config(config, "slurm")
    assert str(config) in str(err.value)


def test_a_batch_scheduler_checks_its_cluster_file_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no pptmc-cluster.toml here
    assert "pptmc-cluster.toml: no such file" in _one_line_error(capsys, _args(tmp_path / "o", "--scheduler", "slurm"))
    (tmp_path / "bad.toml").write_text("[pbs]\ncores = 4\nmemory = \"8GB\"\njobs = -1\n")
    err = _one_line_error(capsys, _args(tmp_path / "o", "--scheduler", "pbs", "--cluster-config", "bad.toml"))
    assert "bad.toml: [pbs] jobs = -1: give a positive whole number" in err
    (tmp_path / "pptmc-cluster.toml").write_text("[slurm]\ncores = 4\nmemory = \"8GB\"\n")
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    assert "`sbatch` is not on PATH" in _one_line_error(capsys, _args(tmp_path / "o", "--scheduler", "slurm"))
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind, expected", [
    ("slurm", ["#SBATCH -p compute", "#SBATCH -A proj42", "#SBATCH -t 01:30:00", "#SBATCH --constraint=haswell",
               "module load clang/19", "--nworkers 4", "--nthreads 1"]),
    ("pbs", ["#PBS -q compute", "#PBS -A proj42", "#PBS -l walltime=01:30:00", "#PBS --constraint=haswell",
             "module load clang/19", "--nworkers 4", "--nthreads 1"])])
def test_a_cluster_file_reaches_the_batch_job_script(tmp_path, kind, expected):
    pytest.importorskip("dask_jobqueue")
    config = tmp_path / "cluster.toml"
    config.write_text(f"[{kind}]\nqueue = \"compute\"\naccount = \"proj42\"\nwalltime = \"01:30:00\"\ncores = 4\n"
                      f"memory = \"16GB\"\njobs = 2\njob_extra_directives = [\"--constraint=haswell\"]\n"
                      f"job_script_prologue = [\"module load clang/19\"]\n")
    options = cluster.read_cluster_config(config, kind)
    assert options["jobs"] == 2
    with cluster.jobqueue_cluster(kind, options) as batch:
        script = batch.job_script()
    for line in expected:
        assert line in script, (line, script)
