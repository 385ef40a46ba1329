"""`pptmc suite` on a Dask cluster: the trace tasks first, each trace's part tasks (and its validation)
as soon as it is done, every task asking for the memory it needs; failures are collected with their
benchmark and stage while the other tasks go on, and progress counts tasks done and running cluster-wide.

The tasks are pptmc/suite_tasks.py's; the cluster is pptmc/cluster.py's. A worker that dies takes its
running tasks with it: the scheduler reruns them on the others (their steps are cached files, so a rerun
redoes only what was not finished), and a task whose workers keep dying is reported as failed.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from distributed import Client, Future, wait

from common.errors import PptmcError
from pptmc.cluster import worker_capacity
from pptmc.dask_plugin import MEMORY
from pptmc.pipeline import PipelineConfig, PipelineResult
from pptmc.suite_tasks import (TASK_BASE_BYTES, TaskFailure, TraceDone, assemble, describe, memory_need,
                               part_task, plan_parts, trace_task)

POLL_S = 0.5         # how often the progress line asks the scheduler what runs
CAPACITY_TTL_S = 2.0  # how long the workers' memory is taken as known


@dataclass(frozen=True)
class TaskFunctions:
    """What the tasks run (the benchmarks swap in no-ops to time the scheduling alone)."""

    trace: Callable = trace_task              # on a worker: PipelineConfig -> TraceDone
    part: Callable = part_task                # on a worker: (PipelineConfig, Part, TraceDone) -> PartDone
    validate: Callable | None = None          # on a worker: (suite config, benchmark) -> ValidationOutcome
    assemble: Callable = assemble             # here: (PipelineConfig, TraceDone, [PartDone]) -> PipelineResult


@dataclass
class Job:
    """One benchmark at one size: its pipeline configuration, the validation's arguments (or none), and
    what its tasks have given so far."""

    label: str
    cfg: PipelineConfig
    validate_args: Any = None
    done: TraceDone | None = None
    parts: list = field(default_factory=list)
    waiting: int = 0
    result: PipelineResult | None = None
    error: str | None = None
    validation: Any = None


class SuiteRun:
    """The client's side of one suite run: submits tasks, collects results, keeps the progress line."""

    def __init__(self, client: Client, jobs: list[Job], functions: TaskFunctions, progress: bool,
                 workers: int, failed_validation: Callable[[Job, str], Any]) -> None:
        """Nothing submitted yet; the parts every job is cut into are planned for `workers` workers."""
        from tqdm import tqdm

        self.client, self.jobs, self.fn = client, jobs, functions
        self.failed_validation = failed_validation
        self.pending: dict[Future, tuple[str, int, Any]] = {}
        self.parts = plan_parts(jobs[0].cfg.machines, jobs[0].cfg.cores, len(jobs), workers) if jobs else []
        self.bar = tqdm(total=0, desc="suite", unit="task", disable=not progress)
        self.failures = 0
        self._shown = ""
        self._capacity: tuple[float, float] = (0.0, -1.0)  # (largest worker's memory, when asked)

    def run(self) -> None:
        """Every task to its end; Ctrl-C cancels what is left."""
        try:
            for i, job in enumerate(self.jobs):
                self._submit("trace", i, None, self.fn.trace, (job.cfg,), TASK_BASE_BYTES)
            while self.pending:
                try:
                    done, _ = wait(list(self.pending), timeout=POLL_S, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    done = set()
                for future in done:
                    self._collect(future)
                self._show()
        except BaseException:
            self.client.cancel(list(self.pending))
            raise
        finally:
            self.bar.close()

    def _submit(self, kind: str, index: int, extra: Any, fn: Callable, args: tuple, need: int) -> None:
        """One task asking for `need` bytes, or its failure at once when no worker has that much."""
        largest = self._largest_worker()
        if need > largest:
            failure = TaskFailure(kind, f"needs {need / 2**30:.2f} GiB of memory, but the largest worker has "
                                        f"{largest / 2**30:.2f} GiB; give fewer core counts or machines, fewer "
                                        f"workers per machine (--scheduler local:N), or workers with more memory")
            self._record(kind, index, extra, failure)
            return
        key = f"pptmc-{kind}-{self.jobs[index].label}-{uuid.uuid4().hex[:8]}"
        future = self.client.submit(fn, *args, key=key, resources={MEMORY: need}, pure=False)
        self.pending[future] = (kind, index, extra)
        self.bar.total += 1

    def _largest_worker(self) -> float:
        """The most memory one worker declares (asked again every CAPACITY_TTL_S)."""
        largest, asked = self._capacity
        if time.monotonic() - asked > CAPACITY_TTL_S:
            largest = max(worker_capacity(self.client).values(), default=0.0)
            self._capacity = (largest, time.monotonic())
        return largest

    def _collect(self, future: Future) -> None:
        """A finished task's result (a worker's death past the scheduler's retries is its failure)."""
        kind, index, extra = self.pending.pop(future)
        try:
            value = future.result()
        except Exception as exc:  # the task itself never raises: its workers died, or it could not be sent
            why = ("every worker that ran it died (out of memory?)" if type(exc).__name__ == "KilledWorker"
                   else "the cluster could not run it (is pptmc installed on the workers?)")
            value = TaskFailure(kind, f"{why}: {type(exc).__name__}: {exc}")
        future.release()
        self.bar.update(1)
        self._record(kind, index, extra, value)

    def _record(self, kind: str, index: int, extra: Any, value: Any) -> None:
        """File one task's result under its job and submit what it unblocks."""
        job = self.jobs[index]
        if isinstance(value, TaskFailure):
            self.failures += 1
            if kind == "validate":
                job.validation = self.failed_validation(job, value.describe())
            elif job.error is None:
                job.error = value.describe()
            if kind == "trace":
                self._submit_validation(index, None)
            return
        if kind == "trace":
            self._trace_done(index, value)
        elif kind == "part":
            job.parts.append(value)
            if len(job.parts) == job.waiting and job.error is None:
                self._assemble(job)
        else:
            job.validation = value
            self.failures += getattr(value, "error", None) is not None

    def _trace_done(self, index: int, done: TraceDone) -> None:
        """A trace is ready: its parts and its validation can start."""
        job = self.jobs[index]
        job.done, job.waiting = done, len(self.parts)
        for part in self.parts:
            need = memory_need(part.machines, part.cores, job.cfg.options, done.lines, done.accesses)
            self._submit("part", index, part, self.fn.part, (job.cfg, part, done), need)
        self._submit_validation(index, done)

    def _submit_validation(self, index: int, done: TraceDone | None) -> None:
        """The job's validation task, sized by its trace (or by the base need when the trace failed)."""
        job = self.jobs[index]
        if job.validate_args is None or self.fn.validate is None:
            return
        need = TASK_BASE_BYTES if done is None else memory_need(
            job.cfg.machines, job.cfg.cores, job.cfg.options, done.lines, done.accesses)
        self._submit("validate", index, None, self.fn.validate, (job.validate_args,), need)

    def _assemble(self, job: Job) -> None:
        """Put a job's parts together and write its run's tables (here, on the client)."""
        try:
            job.result = self.fn.assemble(job.cfg, job.done, sorted(job.parts, key=lambda p: self.parts.index(p.part)))
        except Exception as exc:  # reported like a task's failure
            job.error = TaskFailure("assemble", describe(exc)).describe()
            self.failures += 1

    def _show(self) -> None:
        """The progress line: tasks done of those known, and how many run now on the whole cluster (a
        worker holds more than it runs while its threads or memory are taken)."""
        if self.bar.disable:
            return
        mine = {f.key for f in self.pending}
        threads = self.client.nthreads()
        running = sum(min(threads.get(worker, 1), sum(1 for k in keys if k in mine))
                      for worker, keys in self.client.processing().items())
        text = f"running {running}, failed {self.failures}"
        if text != self._shown:
            self._shown = text
            self.bar.set_postfix_str(text)


def run_jobs(client: Client, jobs: list[Job], functions: TaskFunctions, progress: bool,
             failed_validation: Callable[[Job, str], Any]) -> list[Job]:
    """Run every job's tasks on the client's cluster; each job comes back with its result or error (and
    its validation outcome when it has one)."""
    workers = max(1, len(client.scheduler_info(n_workers=-1)["workers"]))
    if not jobs:
        return jobs
    try:
        SuiteRun(client, jobs, functions, progress, workers, failed_validation).run()
    except (OSError, TimeoutError) as exc:
        raise PptmcError(f"--scheduler: lost the connection to the Dask scheduler ({type(exc).__name__}: {exc})"
                         ) from None
    return jobs
