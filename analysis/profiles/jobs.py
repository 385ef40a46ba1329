"""Worker processes for groups of core counts (profile_configs with jobs > 1): which counts go
together, and running the groups in forked processes, or through a runner the caller installs
(`groups_run_by`: pptmc profile --scheduler runs them as cluster tasks)."""
from __future__ import annotations

import contextlib
import itertools
from contextvars import ContextVar
from typing import Callable, Iterator

from analysis.profiles.profileset import ReuseProfile
from common.errors import PptmcError

GroupResults = list[tuple[list[ReuseProfile], ReuseProfile]]  # one group's (PRDs, CRD) per core count
# runner(groups, run, budget) -> each group's results, in the groups' order; run(group, budget, progress)
GroupRunner = Callable[[list[list[int]], Callable, int], list[GroupResults]]
_RUNNER: ContextVar[GroupRunner | None] = ContextVar("pptmc_group_runner", default=None)


@contextlib.contextmanager
def groups_run_by(runner: GroupRunner) -> Iterator[None]:
    """Inside this block (in this thread), run_groups hands its groups to `runner` instead of forking
    processes: the caller decides where they run (a cluster's tasks) without the sweep knowing of it."""
    token = _RUNNER.set(runner)
    try:
        yield
    finally:
        _RUNNER.reset(token)


def job_groups(counts: list[int], jobs: int) -> list[list[int]]:
    """Split the core counts into at most `jobs` runs of neighbouring counts (sorted), with the
    largest estimated cost as small as possible.

    Cost estimate: one trace's worth of engine work for p = 1, two for p > 1 (private
    engines and the CRD). Neighbours stay together because p and 2p share engines
    (`Mirrors`), e.g. {1, 2, 4, 8, 16} on 2 jobs gives {1, 2, 4} and {8, 16}."""
    order = sorted(counts)
    cost = [1 if p == 1 else 2 for p in order]
    n_groups = max(1, min(jobs, len(order)))
    best: tuple[int, list[list[int]]] | None = None
    for cuts in itertools.combinations(range(1, len(order)), n_groups - 1):
        bounds = (0, *cuts, len(order))
        worst = max(sum(cost[a:b]) for a, b in zip(bounds, bounds[1:]))
        if best is None or worst < best[0]:
            best = (worst, [order[a:b] for a, b in zip(bounds, bounds[1:])])
    return best[1] if best else [order]


def run_groups(groups: list[list[int]], counts: list[int], run: Callable, memory_budget: int,
                progress: bool) -> list[tuple[list[ReuseProfile], ReuseProfile]]:
    """run(group, budget, progress) for every group: the first in this process, the others in
    forked worker processes (each re-reads the trace), started first; results in `counts` order.
    Inside `groups_run_by(runner)`, runner(groups, run, budget) runs them all instead.

    fork: the chunk factory (often a closure) reaches the workers without pickling. Where
    fork is unavailable, or this process may not start any (a daemonic one, such as a Dask
    worker's), the groups run one after another here (same results)."""
    import multiprocessing as mp

    budget = memory_budget // len(groups)  # the processes run at the same time
    runner = _RUNNER.get()
    if runner is not None:
        done = {p: r for g, results in zip(groups, runner(groups, run, budget)) for p, r in zip(g, results)}
        return [done[p] for p in counts]
    if "fork" not in mp.get_all_start_methods() or mp.current_process().daemon:
        done = {p: r for g in groups for p, r in zip(g, run(g, budget, progress))}
        return [done[p] for p in counts]
    ctx = mp.get_context("fork")
    workers = []
    for group in groups[1:]:
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=(run, group, budget, send), daemon=True)
        proc.start()
        send.close()
        workers.append((group, proc, recv))
    try:
        done = dict(zip(groups[0], run(groups[0], budget, progress)))
        for group, proc, recv in workers:
            ok, value = _receive(recv, proc)
            if not ok:
                raise value
            done.update(zip(group, value))
    finally:
        for _, proc, recv in workers:
            recv.close()
            if proc.is_alive():
                proc.terminate()
            proc.join()
    return [done[p] for p in counts]


def _worker(run: Callable, group: list[int], budget: int, send) -> None:
    """Body of a worker process: send (True, results) or (False, the exception)."""
    try:
        result: tuple[bool, object] = (True, run(group, budget, False))
    except BaseException as exc:  # noqa: BLE001 - handed to the parent, which re-raises it
        result = (False, exc if isinstance(exc, Exception) else PptmcError(f"worker stopped: {exc!r}"))
    try:
        try:
            send.send(result)
        except Exception as exc:  # noqa: BLE001 - e.g. an exception that does not pickle: send its text
            send.send((False, PptmcError(f"profiling worker for cores {group}: {result[1]!r} ({exc})")))
    finally:
        send.close()


def _receive(recv, proc) -> tuple[bool, object]:
    """A worker's message, or an error naming how it ended when it died without one."""
    try:
        return recv.recv()
    except EOFError:
        proc.join()
        return False, PptmcError(f"profiling worker process ended with exit code {proc.exitcode} before "
                                 f"sending its profiles (out of memory?); rerun with --jobs 1")
