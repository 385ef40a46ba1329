"""What a user waits for: the CLI's start-up, the fixed cost of the stage commands, and `pptmc run`
end to end beside cachegrind simulating one configuration of the same program (issue #29).

Every figure is a wall time of a child process, best of REPEATS, measured in this one run so that the
shared host's noise hits both sides of each ratio. numba's cache is warm (`make setup` fills it), so
the figures are what a user sees after the first run.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.polybench.build import build_native
from benchmarks.polybench.catalog import by_name

ROOT = Path(__file__).resolve().parents[1]
POLY = ROOT / "benchmarks" / "polybench"
REPEATS = 3
TINY = ("atax", "MINI")            # a trace of ~25 K references: the commands' work is negligible
LARGE = ("lu", "MEDIUM")           # a real kernel of ~18 M references
MACHINES = "haswell-i7-5960x,broadwell-e5-2699v4,zen2-epyc-7702p"
CORES = "1,2,4,8,16"


def _seconds(command: list[str], env: dict | None = None) -> float:
    """Best wall time of REPEATS runs of a command that must succeed."""
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)
        best = min(best, time.perf_counter() - start)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(command[:4])} ... failed: {proc.stderr.strip()[-400:]}")
    return best


def _pptmc(*args: str) -> list[str]:
    return [sys.executable, "-m", "pptmc.cli", *args]


def _row(metric: str, value: float, target: float | None, unit: str = "s") -> dict:
    return {"benchmark": "cli", "metric": metric, "value": round(value, 3), "unit": unit,
            "target": "" if target is None else f"<= {target}", "ok": True if target is None else value <= target}


def _program_args(name: str, size: str) -> list[str]:
    """`pptmc run`'s flags for a catalog benchmark at a size."""
    bench = by_name(name)
    return [str(bench.source), "-I", str(bench.include_dir), "-D", f"{size}_DATASET",
            *[a for h in bench.harness_sources for a in ("--extra-source", str(h))]]


def _stage_rows(work: Path) -> list[dict]:
    """--help, and trace / profile / hitrates on a tiny trace: their time is all fixed cost."""
    rows = [_row("pptmc --help", _seconds(_pptmc("--help")), 0.5)]
    run = work / "tiny"
    subprocess.run(_pptmc("run", *_program_args(*TINY), "--machines", "haswell-i7-5960x", "--cores", "1",
                          "-o", str(run)), check=True, capture_output=True, cwd=ROOT)
    binary = next((run / "instrument").glob("*.inst"))
    trace = work / "tiny.pptrace"
    rows.append(_row("trace, fixed cost (tiny program)",
                     _seconds(_pptmc("trace", str(binary), "-o", str(trace))), 1.0))
    rows.append(_row("profile --cores 1, fixed cost (tiny trace)",
                     _seconds(_pptmc("profile", str(trace), "--cores", "1", "-o", str(work / "prof"))), 1.0))
    rows.append(_row("hitrates, fixed cost (tiny profiles)",
                     _seconds(_pptmc("hitrates", str(work / "prof"), "--machine", "haswell-i7-5960x",
                                     "-o", str(work / "hits.csv"))), 1.0))
    return rows


def _end_to_end_rows(work: Path) -> list[dict]:
    """`pptmc run` on a real kernel for 3 machines x 5 core counts (fresh output folder each time, warm
    numba cache), beside cachegrind simulating one cache configuration of the native program."""
    name, size = LARGE
    def fresh_run() -> list[str]:
        shutil.rmtree(work / "large", ignore_errors=True)
        return _pptmc("run", *_program_args(name, size), "--machines", MACHINES, "--cores", CORES,
                      "-o", str(work / "large"))
    subprocess.run(fresh_run(), check=True, capture_output=True, cwd=ROOT)  # build once: the timed runs rebuild too
    best = float("inf")
    for _ in range(REPEATS):
        command = fresh_run()
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
        best = min(best, time.perf_counter() - start)
    rows = [_row(f"pptmc run {name} {size}, 3 machines x 5 core counts", best, 5.0)]
    if shutil.which("valgrind"):
        exe = build_native(by_name(name), size, work / f"{name}.native").exe
        grind = _seconds(["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--cachegrind-out-file={work}/cg.out",
                          str(exe)], env={**os.environ, "OMP_NUM_THREADS": "1"})
        rows += [_row(f"cachegrind {name} {size}, one configuration", grind, None),
                 _row("pptmc run / cachegrind", best / grind, None, "x")]
    return rows


def run() -> list[dict]:
    """The CLI rows; a failure is a failing row, not a crash of the whole bench."""
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        rows: list[dict] = []
        for part in (_stage_rows, _end_to_end_rows):
            try:
                rows += part(Path(tmp))
            except Exception as exc:  # keep the other part's figures
                rows.append({"benchmark": "cli", "metric": part.__name__, "value": float("nan"), "unit": "",
                             "target": "", "ok": False, "error": str(exc)[:300]})
        return rows
