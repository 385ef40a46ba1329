"""Output folders are written by one pptmc at a time, and a step interrupted mid-write is redone."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.cache import mark_done, reuse_or_invalidate
from common.errors import InputError
from common.locks import LOCK_NAME, folder_lock


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path):
    """While one process holds a folder, another gets an error naming it; afterwards the lock is gone."""
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": holder.pid, "host": os.uname().nodename,
                                                      "command": "pptmc run x.c -o out"}))
        with pytest.raises(InputError, match=rf"pid {holder.pid} .*pptmc run x\.c -o out.*is writing there"):
            with folder_lock(tmp_path):
                pytest.fail("took a lock another process holds")
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_holders_lock_is_taken_over_and_released(tmp_path):
    """A lock left by a process that died (SIGKILL) does not block the next run, which removes its own."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename}))
    with folder_lock(tmp_path) as lock:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not (tmp_path / LOCK_NAME).exists()


def test_an_interrupted_step_is_never_taken_as_done(tmp_path):
    """The stamp goes before outputs are rewritten and comes back last: outputs half-rewritten for a new
    key are redone by a rerun with either key."""
    stamp, out = tmp_path / ".key", tmp_path / "table.csv"
    out.write_text("old\n")
    mark_done(stamp, "k1")
    assert reuse_or_invalidate(stamp, "k1", [out])        # done for k1
    assert not reuse_or_invalidate(stamp, "k2", [out])    # k2 starts rewriting ...
    out.write_text("half of k2\n")                        # ... and is interrupted here
    assert not reuse_or_invalidate(stamp, "k1", [out])    # neither key takes the mixed output
    assert not reuse_or_invalidate(stamp, "k2", [out])


def test_an_incomplete_trace_is_flagged_downstream_and_refused_under_strict(tmp_path, monkeypatch, capsys):
    """A crashed run leaves a trace marked incomplete: predict, profile and hitrates warn, every result row
    says trace_complete = false, and --strict makes each an error (exit code, no traceback)."""
    import pandas as pd

    from common.errors import RunError
    from pptmc import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "crash.c").write_text("#include <stdlib.h>\n#include <stdio.h>\nint main(void) { double a[64];\n"
                                      "#pragma omp parallel for\n for (int i = 0; i < 64; i++) a[i] = i;\n"
                                      "printf(\"%f\\n\", a[3]); fflush(stdout); abort(); }\n")
    assert cli.run(["translate", "crash.c", "-o", "x.c"]) == 0
    assert cli.run(["instrument", "x.c", "-o", "x.inst"]) == 0
    with pytest.raises(RunError, match="marked incomplete"):
        cli.run(["trace", "x.inst", "-o", "t.pptrace"])
    capsys.readouterr()
    machine = ["--machine", "haswell-i7-5960x"]
    assert cli.run(["predict", "t.pptrace", *machine, "--cores", "1,2", "-o", "pred"]) == 0
    assert "the trace is incomplete" in capsys.readouterr().err
    assert not pd.read_csv("pred/predictions.csv")["trace_complete"].any()
    assert cli.run(["profile", "t.pptrace", "--cores", "1,2", "-o", "prof"]) == 0
    assert cli.run(["hitrates", "prof", *machine, "-o", "hits"]) == 0
    assert "the trace is incomplete" in capsys.readouterr().err
    assert not pd.read_csv("hits.csv")["trace_complete"].any()
    for argv in (["predict", "t.pptrace", *machine, "--cores", "1"], ["hitrates", "prof", *machine, "-o", "h2"],
                 ["profile", "t.pptrace", "--cores", "1", "-o", "p2"], ["trace-export", "t.pptrace", "-o", "t.txt"]):
        with pytest.raises(InputError, match="trace is incomplete.*--strict"):
            cli.run([*argv, "--strict"])


def test_an_output_folder_is_replaced_whole_or_not_at_all(tmp_path):
    """A run that fails while writing leaves the previous folder exactly as it was; one that succeeds leaves
    only its own files (none of the previous run's), and no temporary folder or lock behind."""
    from common.locks import output_folder

    target = tmp_path / "profiles"
    with output_folder(target) as work:
        (work / "a.csv").write_text("first\n")
        (work / "stale.csv").write_text("only in the first run\n")
    with pytest.raises(RuntimeError):
        with output_folder(target) as work:
            (work / "a.csv").write_text("second, half written\n")
            raise RuntimeError("killed while writing")
    assert (target / "a.csv").read_text() == "first\n" and (target / "stale.csv").exists()
    with output_folder(target) as work:
        (work / "a.csv").write_text("third\n")
    assert sorted(p.name for p in target.iterdir()) == ["a.csv", "manifest.json"]
    assert (target / "a.csv").read_text() == "third\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profiles"]


def test_absurd_core_counts_and_seeds_are_refused_before_any_work(monkeypatch, tmp_path):
    """More cores than the sweep takes, a sweep that cannot fit in the free memory, a negative seed: each an
    InputError naming the limit or the estimate, before anything is computed."""
    from analysis.profiles import limits
    from pptmc import cli

    (tmp_path / "x.c").write_text("int main(void) { return 0; }\n")
    with pytest.raises(InputError, match=r"--cores 1024: .*at most 256 cores"):
        cli.run(["run", str(tmp_path / "x.c"), "--cores", "1,1024", "-o", str(tmp_path / "out")])
    monkeypatch.setattr(limits, "available_bytes", lambda: 1 << 30)
    assert limits.estimated_bytes([1, 2, 4]) == 7 * (256 << 10)  # hand-computed: 1.75 MiB
    with pytest.raises(InputError, match=r"need at least 1\.2 GiB .* but 1\.0 GiB is free"):
        limits.check_memory(list(range(1, 101)), "t.pptrace")  # 5050 cores of buffers
    limits.check_memory([1, 2, 4, 8, 16], "t.pptrace")
    with pytest.raises(InputError, match="--seed: '-5' is not a non-negative integer"):
        cli.run(["profile", "t.pptrace", "--seed", "-5", "-o", "p"])


def _pptmc_limited(argv: list[str], max_file_bytes: int | None, cwd) -> subprocess.CompletedProcess:
    """`pptmc ARGV` in a child whose files may not grow past `max_file_bytes` (ulimit -f: a full disk
    as far as the writes see it)."""
    import resource

    def limit() -> None:
        if max_file_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    return subprocess.run([sys.executable, "-m", "pptmc.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          preexec_fn=limit)


def _dot_trace(tmp_path: Path) -> str:
    """The outside-corpus `dot` program copied into tmp_path and run cleanly (1 and 2 cores); its trace."""
    import shutil

    from pptmc import cli

    for f in (Path(__file__).parent / "outside" / "dot").iterdir():
        shutil.copy(f, tmp_path / f.name)
    assert cli.run(["run", str(tmp_path / "main.c"), "--machines", "haswell-i7-5960x", "--cores", "1,2",
                    "-o", str(tmp_path / "clean")]) == 0
    return str(next((tmp_path / "clean" / "trace").glob("*.pptrace")))


def test_a_full_disk_leaves_no_result_and_a_rerun_recovers(tmp_path):
    """Writes that fail (the file-size limit stands in for a full disk) end in pptmc's message and a
    non-zero exit, no traceback and no folder that passes for a result; the rerun gives the clean run's
    bytes."""
    trace = _dot_trace(tmp_path)
    profile = ["profile", trace, "--cores", "1,2", "-o", "prof"]
    full = _pptmc_limited(profile, 4096, tmp_path)
    assert full.returncode != 0 and "Traceback" not in full.stderr, full.stderr
    assert "could not write" in full.stderr and not (tmp_path / "prof").exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".prof")]  # no temporary folder, no lock
    assert _pptmc_limited(profile, None, tmp_path).returncode == 0
    assert _pptmc_limited(["profile", trace, "--cores", "1,2", "-o", "ref"], None, tmp_path).returncode == 0
    for name in ("bins.csv", "summary.csv"):
        assert (tmp_path / "prof" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()


def test_a_full_tmpfs_leaves_no_result_and_a_rerun_recovers(tmp_path):
    """The same on a real full file system: a 16 KiB tmpfs (where this test may mount one: root with
    CAP_SYS_ADMIN; skipped elsewhere, where the file-size limit above stands in)."""
    small = tmp_path / "small"
    small.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(small)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        trace = _dot_trace(tmp_path)
        full = _pptmc_limited(["profile", trace, "--cores", "1,2", "-o", str(small / "prof")], None, tmp_path)
        assert full.returncode != 0 and "Traceback" not in full.stderr, full.stderr
        assert "could not write" in full.stderr and "No space left" in full.stderr, full.stderr
        assert not (small / "prof").exists() and not list(small.iterdir())  # nothing left, the space given back
        ref = _pptmc_limited(["profile", trace, "--cores", "1,2", "-o", "ref"], None, tmp_path)
        assert ref.returncode == 0 and (tmp_path / "ref" / "manifest.json").is_file()
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGKILL"])
def test_a_run_stopped_midway_recovers_to_the_clean_runs_bytes(tmp_path, signal_name):
    """`pptmc run` stopped by SIGINT or SIGKILL part-way (wherever it is when the signal lands), then run
    again into the same folder: its result tables equal a clean run's byte for byte, and SIGINT leaves no
    traceback."""
    import shutil
    import signal
    import time

    source = Path(__file__).parent / "outside" / "dot"
    for f in source.iterdir():
        shutil.copy(f, tmp_path / f.name)

    def argv(out: str) -> list[str]:
        return [sys.executable, "-m", "pptmc.cli", "run", "main.c", "--machines", "haswell-i7-5960x",
                "--cores", "1,2", "--json", "-o", out]

    stopped = subprocess.Popen(argv("out"), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    stopped.send_signal(getattr(signal, signal_name))
    _, err = stopped.communicate()
    assert "Traceback" not in err or signal_name == "SIGKILL", err
    for out in ("out", "clean"):
        assert subprocess.run(argv(out), cwd=tmp_path, capture_output=True).returncode == 0
    for table in ("hit_rates.csv", "runtimes.csv", "regions.csv"):
        assert (tmp_path / "out" / table).read_bytes() == (tmp_path / "clean" / table).read_bytes()


def test_a_folder_that_does_not_match_its_manifest_is_refused(tmp_path):
    """A profile folder whose file was changed, or lost, after pptmc wrote it is refused by the reader,
    saying what to rerun; the untouched folder loads."""
    import numpy as np

    from analysis.profiles.profileset import ProfileSet, ReuseProfile
    from common.locks import output_folder

    ps = ProfileSet(64, "iteration", "rr", 0, 1, "t.pptrace")
    ps.crd[1] = ReuseProfile.from_distances(np.array([-1, 0, 1, 0, -1]))
    ps.prd[(1, 0)] = ps.crd[1]
    with output_folder(tmp_path / "prof", "test") as work:
        ps.save(work)
    assert ProfileSet.load(tmp_path / "prof").cores == [1]
    bins = tmp_path / "prof" / "bins.csv"
    bins.write_text(bins.read_text().replace("\n1,", "\n2,", 1) + "\n")
    with pytest.raises(InputError, match=r"bins\.csv is not the file this run wrote.*rerun `pptmc profile`"):
        ProfileSet.load(tmp_path / "prof")
    bins.unlink()
    with pytest.raises(InputError, match=r"bins\.csv is missing"):
        ProfileSet.load(tmp_path / "prof")
