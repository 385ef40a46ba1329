"""The worker plugin that makes every Dask worker declare its memory as a resource (pptmc/cluster.py):
a module of its own because defining it imports distributed, which only the cluster commands load."""
from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin

MEMORY = "memory"  # the worker resource every suite task asks for, in bytes


class MemoryResource(WorkerPlugin):
    """Declares the worker's memory as its `memory` resource, unless the worker was started with one
    (`dask worker --resources memory=BYTES`); workers that join later (a restarted one) get it too."""

    name = "pptmc-memory"

    async def setup(self, worker) -> None:
        """Declare the resource on this worker (and so to the scheduler)."""
        if MEMORY not in worker.state.total_resources:
            await worker.set_resources(**{MEMORY: float(worker_memory(worker))})


def worker_memory(worker) -> int:
    """A worker's memory limit, or the machine's memory where it has none."""
    limit = getattr(getattr(worker, "memory_manager", None), "memory_limit", None)
    if limit:
        return int(limit)
    import psutil

    return int(psutil.virtual_memory().total)
