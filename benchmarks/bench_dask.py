"""`pptmc suite` on Dask (issue #33): the suite's wall time at SMALL on a local cluster of 1 and of 2
workers, and the scheduling overhead per task of a no-op task graph of the suite's shape.

The wall times are of child processes on a fresh results folder each (numba's cache warm, as after
`make setup`); the overhead runs the suite's own driver (pptmc/dask_suite.py) with tasks that do nothing.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pptmc.pipeline import PipelineConfig
    from pptmc.suite_tasks import Part, PartDone, TraceDone

ROOT = Path(__file__).resolve().parents[1]
SMALL_BENCHMARKS = ("atax", "jacobi-2d", "mvt", "bicg")
MACHINE = "haswell-i7-5960x"
OVERHEAD_TARGET_MS = 50.0


def noop_trace(cfg: PipelineConfig) -> TraceDone:
    """A trace task that does nothing: a TraceDone naming the source for every file."""
    from pptmc.pipeline import Translation
    from pptmc.suite_tasks import TraceDone

    return TraceDone(Translation(cfg.source), cfg.source, cfg.source, lines=1000, accesses=10_000,
                     seconds={"translate": 0.0, "instrument": 0.0, "trace": 0.0})


def sleeping_trace(cfg: PipelineConfig, seconds: float = 0.5) -> TraceDone:
    """noop_trace after `seconds`, leaving cfg.workdir/span-*.json with its worker and its start and end."""
    from distributed import get_worker

    start = time.time()
    time.sleep(seconds)
    span = {"worker": get_worker().address, "start": start, "end": time.time()}
    cfg.workdir.mkdir(parents=True, exist_ok=True)
    (cfg.workdir / f"span-{uuid.uuid4().hex}.json").write_text(json.dumps(span))
    return noop_trace(cfg)


def noop_part(cfg: PipelineConfig, part: Part, done: TraceDone) -> PartDone:
    """A part task that does nothing."""
    from pptmc.suite_tasks import PartDone

    return PartDone(part, [], [], [], {}, {}, done.accesses, True, cfg.workdir)


def noop_validate(args: object) -> None:
    """A validation task that does nothing."""
    return None


def noop_assemble(cfg: PipelineConfig, done: TraceDone, parts: list) -> None:
    """Nothing to put together."""
    return None


def suite_jobs(outdir: Path, validate: bool = True, **fields: object) -> list:
    """The Dask jobs of the whole suite (MINI and POW2, as `pptmc suite --validate` runs it)."""
    from pptmc.dask_suite import Job
    from pptmc.suite import SuiteConfig, label, pipeline_config, size_tasks

    cfg = SuiteConfig(outdir=outdir, size="MINI", sizes=("MINI", "POW2"), validate=validate, **fields)
    return [Job(label(scfg, bench.name, scfg.size), pipeline_config(scfg, bench), (scfg, bench) if validate else None)
            for scfg, bench in size_tasks(cfg)]


def scheduling_overhead(workers: int = 2) -> tuple[float, int]:
    """(ms per task, tasks) of the suite's graph with no-op tasks on a local cluster of `workers`."""
    from distributed import Client, LocalCluster

    from pptmc.dask_plugin import MemoryResource
    from pptmc.dask_suite import TaskFunctions, run_jobs

    functions = TaskFunctions(noop_trace, noop_part, noop_validate, noop_assemble)
    with tempfile.TemporaryDirectory() as tmp, \
            LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.register_plugin(MemoryResource(), name=MemoryResource.name)
        jobs = suite_jobs(Path(tmp))
        run_jobs(client, suite_jobs(Path(tmp) / "warm")[:2], functions, False, lambda job, err: None)
        start = time.perf_counter()
        run_jobs(client, jobs, functions, False, lambda job, err: None)
        seconds = time.perf_counter() - start
    tasks = len(jobs) * 3  # trace, one part (the suite's shape on 2 workers), validation
    return 1000 * seconds / tasks, tasks


def suite_seconds(workers: int) -> float:
    """Wall time of `pptmc suite` at SMALL on a fresh folder, on a local cluster of `workers`."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pptmc.cli", "suite", "--size", "SMALL", "--benchmarks",
                               ",".join(SMALL_BENCHMARKS), "--machines", MACHINE, "--cores", "1,2,4,8,16",
                               "--scheduler", f"local:{workers}", "-o", str(Path(tmp) / "out"), "--json"],
                              capture_output=True, text=True, cwd=ROOT)
        seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"pptmc suite on local:{workers} failed: {proc.stderr.strip()[-400:]}")
    return seconds


def run() -> list[dict]:
    """The bench rows (benchmarks/run_all.py)."""
    names = "+".join(SMALL_BENCHMARKS)
    rows = []
    one, two = suite_seconds(1), suite_seconds(2)
    for workers, seconds in ((1, one), (2, two)):
        rows.append({"benchmark": "dask", "metric": f"suite SMALL {names}, cores 1-16, {MACHINE}: wall time, "
                                                    f"{workers} worker(s)", "value": round(seconds, 2), "unit": "s",
                     "target": "", "ok": True})
    rows.append({"benchmark": "dask", "metric": "suite SMALL: 1-worker time / 2-worker time",
                 "value": round(one / two, 2), "unit": "x", "target": "", "ok": True})
    ms, tasks = scheduling_overhead()
    rows.append({"benchmark": "dask", "metric": f"scheduling overhead per task, no-op suite graph ({tasks} tasks, "
                                                f"2 workers)", "value": round(ms, 2), "unit": "ms",
                 "target": f"< {OVERHEAD_TARGET_MS:g}", "ok": ms < OVERHEAD_TARGET_MS})
    return rows
