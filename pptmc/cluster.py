"""Where `pptmc suite` runs its Dask tasks: a local cluster, a running scheduler, or workers asked of a
batch system (Slurm, PBS) through dask-jobqueue with the queue options of a small TOML file.

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

from common.errors import InputError

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
