"""Where `pptmc suite` (and `pptmc validate` and `profile` given --scheduler) runs its Dask tasks: a local
cluster, a running scheduler, or workers asked of a batch system (Slurm, PBS) through dask-jobqueue with the
queue options of a small TOML file; and run_tasks, which runs validate's and profile's tasks.

Every worker declares a `memory` resource (its memory limit, or what it was started with via
`--resources memory=BYTES`), and each suite task asks for what it needs, so the scheduler never runs
more on a worker than its memory holds. Dask is imported only here and in pptmc/dask_suite.py, by the
commands that use it.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from common.errors import InputError, PptmcError

if TYPE_CHECKING:  # dask loads in ~0.5 s: only the commands that run on it import it
    from distributed import Client

DEFAULT_CLUSTER_CONFIG = "pptmc-cluster.toml"
BATCH_SYSTEMS = ("slurm", "pbs")
SUBMIT_COMMANDS = {"slurm": "sbatch", "pbs": "qsub"}
SCHEDULER_CHOICES = "local, local:N, tcp://HOST:PORT (a running Dask scheduler), slurm or pbs"
CONNECT_TIMEOUT_S = 15

# the queue options a cluster file may set, by kind: key -> (type, what it is); dask-jobqueue's names
_COMMON_KEYS: dict[str, tuple[type, str]] = {
    "cores": (int, "cores of one batch job"), "memory": (str, "memory of one batch job, e.g. \"64GB\""),
    "processes": (int, "Dask workers per job (default: one single-threaded worker per core)"),
    "jobs": (int, "batch jobs to start (default 1)"), "queue": (str, "queue or partition"),
    "account": (str, "account to charge"), "walltime": (str, "run time limit, HH:MM:SS"),
    "job_extra_directives": (list, "more #SBATCH / #PBS lines, e.g. [\"--constraint=haswell\"]"),
    "job_script_prologue": (list, "shell lines run before the worker starts, e.g. [\"module load clang\"]"),
    "local_directory": (str, "a worker's scratch folder"), "log_directory": (str, "where job logs go"),
    "interface": (str, "network interface the workers and scheduler talk over, e.g. \"ib0\""),
    "python": (str, "the Python that has pptmc installed (default: this one)"),
}
CONFIG_KEYS = {"slurm": dict(_COMMON_KEYS),
               "pbs": {**_COMMON_KEYS, "resource_spec": (str, "the -l resource request, e.g. \"select=1:ncpus=16\"")}}
_REQUIRED = ("cores", "memory")
_WALLTIME = re.compile(r"^\d+(:\d{2}){0,2}$")


@dataclass(frozen=True)
class SchedulerSpec:
    """What --scheduler names: kind "local" (with `workers`), "address" (with `address`), "slurm" or "pbs"."""

    kind: str
    address: str = ""
    workers: int = 0


def parse_scheduler(text: str) -> SchedulerSpec:
    """--scheduler's value, checked before any work starts."""
    value = text.strip()
    if value == "local":
        return SchedulerSpec("local", workers=os.cpu_count() or 1)
    if value.startswith("local:"):
        count = value.removeprefix("local:")
        if not count.isdigit() or int(count) < 1:
            raise InputError(f"--scheduler {text}: local:N takes a positive number of workers, e.g. local:4")
        return SchedulerSpec("local", workers=int(count))
    if value in BATCH_SYSTEMS:
        return SchedulerSpec(value)
    if re.match(r"^(tcp|tls)://[^\s/:]+:\d+/?$", value):
        return SchedulerSpec("address", address=value.rstrip("/"))
    if "://" in value or re.match(r"^[^\s/:]+:\d+$", value):
        raise InputError(f"--scheduler {text}: a scheduler address is tcp://HOST:PORT (or tls://HOST:PORT), "
                         f"e.g. tcp://10.0.0.5:8786")
    raise InputError(f"--scheduler {text}: unknown; give {SCHEDULER_CHOICES}")


def read_cluster_config(path: Path, kind: str) -> dict[str, Any]:
    """The [slurm] or [pbs] table of a cluster file, every key and value checked; the file and the field
    are named in each error."""
    if not path.is_file():
        raise InputError(f"--cluster-config {path}: no such file; write one with a [{kind}] table "
                         f"(README.md, \"Running on a cluster\")")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid TOML ({exc})") from None
    unknown = sorted(set(data) - set(BATCH_SYSTEMS))
    if unknown:
        raise InputError(f"{path}: unknown table [{unknown[0]}]; the tables are [slurm] and [pbs]")
    table = data.get(kind)
    if not isinstance(table, dict):
        raise InputError(f"{path}: no [{kind}] table; --scheduler {kind} reads its queue options from it")
    return {key: _checked_value(path, kind, key, value) for key, value in _with_required(path, kind, table).items()}


def _with_required(path: Path, kind: str, table: dict) -> dict:
    """The table, refused when it misses a required key or has one dask-jobqueue does not take."""
    allowed = CONFIG_KEYS[kind]
    for key in table:
        if key not in allowed:
            raise InputError(f"{path}: [{kind}] {key}: unknown key; the keys are {', '.join(sorted(allowed))}")
    for key in _REQUIRED:
        if key not in table:
            raise InputError(f"{path}: [{kind}] has no {key} ({allowed[key][1]}); add it")
    return table


def _checked_value(path: Path, kind: str, key: str, value: Any) -> Any:
    """One key's value, of its type and in its range."""
    from dask.utils import parse_bytes

    want, what = CONFIG_KEYS[kind][key]
    where = f"{path}: [{kind}] {key} = {value!r}"
    if want is int and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InputError(f"{where}: give a positive whole number ({what})")
    if want is str and not isinstance(value, str):
        raise InputError(f"{where}: give a string ({what})")
    if want is list and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
        raise InputError(f"{where}: give a list of strings ({what})")
    if key == "memory":
        try:
            if parse_bytes(value) < 1:
                raise ValueError(value)
        except (ValueError, TypeError):
            raise InputError(f"{where}: not an amount of memory; write it as \"64GB\" or \"512MiB\"") from None
    if key == "walltime" and not _WALLTIME.match(value):
        raise InputError(f"{where}: write the time limit as HH:MM:SS")
    return value


def check_batch_system(kind: str) -> None:
    """Refuse a batch system whose submit command this node lacks (its jobs would never start)."""
    submit = SUBMIT_COMMANDS[kind]
    if shutil.which(submit) is None:
        raise InputError(f"--scheduler {kind}: `{submit}` is not on PATH; run pptmc on a node that submits "
                         f"{kind} jobs (a login node)")


def jobqueue_cluster(kind: str, config: dict[str, Any]) -> Any:
    """A dask-jobqueue cluster of `kind` with the file's queue options (no job submitted yet)."""
    try:
        import dask_jobqueue
    except ImportError:
        raise InputError(f"--scheduler {kind}: dask-jobqueue is not installed; pip install 'pptmc[cluster]'") from None
    import sys

    options = {k: v for k, v in config.items() if k != "jobs"}
    options.setdefault("processes", options["cores"])  # one single-threaded worker per core, like `local`
    options.setdefault("python", sys.executable)
    cls = dask_jobqueue.SLURMCluster if kind == "slurm" else dask_jobqueue.PBSCluster
    return cls(dashboard_address=None, **options)


def worker_capacity(client: Client) -> dict[str, float]:
    """Each worker's `memory` resource, by address (0 for a worker that has none yet)."""
    from pptmc.dask_plugin import MEMORY

    workers = client.scheduler_info(n_workers=-1)["workers"]
    return {address: float(info.get("resources", {}).get(MEMORY, 0)) for address, info in workers.items()}


@contextlib.contextmanager
def open_cluster(spec: SchedulerSpec, config_path: Path | None, say: Callable[[str], None]) -> Iterator[Client]:
    """A Dask client on the cluster `spec` names, its workers declaring their memory; a cluster this
    function started is shut down on the way out (its batch jobs cancelled)."""
    from distributed import Client, LocalCluster

    from pptmc.dask_plugin import MemoryResource

    with contextlib.ExitStack() as stack:
        if spec.kind == "address":
            client = stack.enter_context(_connect(spec.address))
        elif spec.kind == "local":
            cluster = stack.enter_context(LocalCluster(n_workers=spec.workers, threads_per_worker=1, processes=True,
                                                       dashboard_address=None, silence_logs=40))
            client = stack.enter_context(Client(cluster))
        else:
            config = read_cluster_config(config_path or Path(DEFAULT_CLUSTER_CONFIG), spec.kind)
            check_batch_system(spec.kind)
            cluster = stack.enter_context(jobqueue_cluster(spec.kind, config))
            cluster.scale(jobs=config.get("jobs", 1))
            client = stack.enter_context(Client(cluster))
        client.register_plugin(MemoryResource(), name=MemoryResource.name)
        if not client.scheduler_info(n_workers=-1)["workers"]:
            say(f"waiting for the first Dask worker to join {client.scheduler.address}")
        client.wait_for_workers(1)
        yield client


@contextlib.contextmanager
def _connect(address: str) -> Iterator[Client]:
    """A client of the scheduler at `address`, or an InputError when none answers."""
    from distributed import Client

    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise InputError(f"--scheduler {address}: no Dask scheduler answered within {CONNECT_TIMEOUT_S} s "
                         f"({type(exc).__name__}); start one (`dask scheduler`) or check the address") from None
    with client:
        yield client


# --- tasks of `pptmc validate` and `pptmc profile` (the suite's own graph is pptmc/dask_suite.py) ---------

POLL_S = 0.5  # how often the progress line asks the scheduler what runs


@dataclass(frozen=True)
class TaskCall:
    """One cluster task: its name (in its key and its errors), what it runs, and the memory it asks for."""

    name: str
    fn: Callable
    args: tuple
    need: int  # bytes of the workers' `memory` resource


@dataclass(frozen=True)
class UserError:
    """A task's user-facing error (a PptmcError), sent back as its value: the client raises it as this
    process would have, and the worker does not log a traceback for what is the user's to fix."""

    error: PptmcError


def user_errors_returned(fn: Callable, *args: Any) -> Any:
    """fn(*args) on a worker: its value, or its PptmcError wrapped in a UserError (bugs still raise)."""
    try:
        return fn(*args)
    except PptmcError as exc:
        return UserError(exc)


def running_tasks(client: Client, keys: set) -> int:
    """How many of `keys` run now on the whole cluster (a worker holds more than it runs while its threads
    or its memory are taken)."""
    threads = client.nthreads()
    return sum(min(threads.get(worker, 1), sum(1 for k in held if k in keys))
               for worker, held in client.processing().items())


def run_tasks(client: Client, calls: list[TaskCall], desc: str, progress: bool,
              then: Callable[[TaskCall, Any], list[TaskCall]] | None = None) -> dict[str, Any]:
    """Run `calls`, and the calls then(call, result) adds as each one finishes; their results by name.
    The first task that fails stops the others and raises: its own error (a user error reads as it would
    in this process), or a PptmcError naming the task when its workers died or the cluster was lost."""
    run = TaskRun(client, desc, progress)
    try:
        run.submit(calls)
        while run.pending:
            for call, value in run.finished():
                run.submit(then(call, value) if then else [])
        return run.results
    except BaseException:
        client.cancel(list(run.pending))
        raise
    finally:
        run.bar.close()


class TaskRun:
    """The client's side of run_tasks: what is submitted, what came back, and the progress line (tasks done
    of those known, and how many run now on the whole cluster)."""

    def __init__(self, client: Client, desc: str, progress: bool) -> None:
        """Nothing submitted yet."""
        from tqdm import tqdm

        self.client, self.desc, self.progress = client, desc, progress
        self.pending: dict[Any, TaskCall] = {}
        self.results: dict[str, Any] = {}
        self.bar = tqdm(total=0, desc=desc, unit="task", disable=not progress)

    def submit(self, calls: list[TaskCall]) -> None:
        """Submit each call asking for its memory; one that no worker has the memory for is refused at once."""
        import uuid

        from pptmc.dask_plugin import MEMORY

        if not calls:
            return
        with self._connection():
            largest = max(worker_capacity(self.client).values(), default=0.0)
            for call in calls:
                if call.need > largest:
                    raise PptmcError(f"{self.desc} task {call.name} needs {call.need / 2**30:.2f} GiB of memory, "
                                     f"but the largest worker has {largest / 2**30:.2f} GiB; give fewer core counts "
                                     f"or machines, fewer workers per machine (--scheduler local:N), or workers "
                                     f"with more memory")
                key = f"pptmc-{self.desc}-{call.name}-{uuid.uuid4().hex[:8]}"
                future = self.client.submit(user_errors_returned, call.fn, *call.args, key=key,
                                            resources={MEMORY: call.need}, pure=False)
                self.pending[future] = call
                self.bar.total += 1
        self.bar.refresh()

    def finished(self) -> list[tuple[TaskCall, Any]]:
        """The tasks that finished within POLL_S, with their values (each filed under results)."""
        from distributed import wait

        with self._connection():
            try:
                done, _ = wait(list(self.pending), timeout=POLL_S, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            if self.progress:
                self.bar.set_postfix_str(f"running {running_tasks(self.client, {f.key for f in self.pending})}")
        out = []
        for future in done:
            call = self.pending.pop(future)
            self.results[call.name] = value = self._value(future, call)
            self.bar.update(1)
            out.append((call, value))
        return out

    def _value(self, future: Any, call: TaskCall) -> Any:
        """A finished task's value; its own exception re-raised, a PptmcError when its workers died."""
        try:
            value = future.result()
        except Exception as exc:
            if type(exc).__name__ != "KilledWorker":
                raise
            raise PptmcError(f"{self.desc} task {call.name}: every worker that ran it died (out of memory?): "
                             f"{exc}") from None
        finally:
            future.release()
        if isinstance(value, UserError):
            raise value.error
        return value

    @contextlib.contextmanager
    def _connection(self) -> Iterator[None]:
        """The client's own calls: a lost scheduler is one PptmcError."""
        try:
            yield
        except (OSError, TimeoutError) as exc:
            raise PptmcError(f"--scheduler: lost the connection to the Dask scheduler ({type(exc).__name__}: "
                             f"{exc})") from None


def profiles_on_cluster(client: Client, trace: Path, cores: list[int], progress: bool, **options: Any) -> Any:
    """analysis.profiles.sweep.compute_profiles with its groups of core counts (job_groups) as cluster tasks,
    one per worker (two at least, so that a lone worker still does the work), each re-reading the trace as
    --jobs' processes do and asking for the memory its engines take; the set-class and shared-level passes
    run here beside them, as with --jobs. Same ProfileSet as in one process; its `trace` is `trace` as given
    (the tasks read it at its absolute path, which every worker must see)."""
    import dataclasses

    from analysis.profiles.jobs import groups_run_by
    from analysis.profiles.sweep import compute_profiles

    workers = len(client.scheduler_info(n_workers=-1)["workers"])
    with groups_run_by(group_runner(client, trace.resolve(), options.get("line_size", 64), progress)):
        ps = compute_profiles(trace.resolve(), cores, progress=progress, jobs=max(2, workers), **options)
    return dataclasses.replace(ps, trace=str(trace))


def group_runner(client: Client, trace: Path, line_size: int, progress: bool) -> Callable:
    """run_groups' runner on the cluster: one task per group of core counts, sized by the trace's distinct
    lines (pptmc.suite_tasks.memory_need: the engines of the group's core counts, its buffers, its share of
    the waiting references)."""
    from analysis.options import DEFAULT_OPTIONS
    from pptmc.suite_tasks import memory_lines, memory_need

    def runner(groups: list[list[int]], run: Callable, budget: int) -> list:
        """Each group's results, in the groups' order."""
        lines, accesses = memory_lines(trace, line_size)
        calls = [TaskCall("c" + "-".join(map(str, g)), run, (g, budget, False),
                          memory_need((), tuple(g), DEFAULT_OPTIONS, lines, accesses)) for g in groups]
        results = run_tasks(client, calls, "profile", progress)
        return [results[call.name] for call in calls]

    return runner
