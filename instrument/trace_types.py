"""The typed interface between the tracer and the analysis: what a trace reader yields.

The on-disk format is private to instrument/ (documented in instrument/FORMAT.md); analysis
code sees only these objects. One row of a TraceChunk is one memory access, already
decorated with the block, schedule and stack facts the analysis needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Schedule kinds of a work-shared construct, as recorded by the translator's loop markers.
SCHED_STATIC = 0
SCHED_DYNAMIC = 1
SCHED_GUIDED = 2
SCHED_MASTER = 3  # `master`: one "iteration" that core 0 runs
SCHED_SINGLE = 4  # `single`: one "iteration" that the first arriving thread runs (analysis/profiles/handouts.py)
SCHED_BARRIER = 5  # a barrier: no iterations; every thread waits there for all (instrument/FORMAT.md, "Barriers")
SCHED_NAMES = {SCHED_STATIC: "static", SCHED_DYNAMIC: "dynamic", SCHED_GUIDED: "guided",
               SCHED_MASTER: "master", SCHED_SINGLE: "single", SCHED_BARRIER: "barrier"}

NO_LOOP = -1  # `loop` value of an access made outside any work-shared iteration


@dataclass(frozen=True)
class BlockInfo:
    """One instrumented basic block: a stable id and its `function:label` name."""

    block_id: int
    function: str
    label: str
    is_shared_var_block: bool  # the translator's shared_var_trace<n> unpacking block

    @property
    def name(self) -> str:
        return f"{self.function}:{self.label}"


@dataclass(frozen=True)
class LoopInstance:
    """One execution of a work-shared construct (a loop, master or single) inside a region."""

    instance: int        # 0-based, counts every loop start in the trace
    loop_id: int         # the translator's static loop id
    trip_count: int      # number of (collapsed) iterations
    schedule: int        # SCHED_* constant
    chunk: int           # 0 = default chunk


@dataclass
class TraceInfo:
    """Header and footer facts of one trace file."""

    path: str
    format_version: int
    program: str
    args: list[str]
    complete: bool                   # False when the run crashed or the file was cut short
    n_accesses: int
    blocks: dict[int, BlockInfo]
    block_counts: dict[int, int]     # block id -> times entered
    edge_counts: dict[tuple[int, int], int] = field(default_factory=dict)  # (from, to) -> times taken
    loops: list[LoopInstance] = field(default_factory=list)
    n_threads: int = 1
    extra: dict = field(default_factory=dict)
    # distinct 64-byte lines the accesses touch, from the footer's sketch (instrument/distinct_lines.py;
    # standard error RELATIVE_ERROR there); None for traces recorded without it
    distinct_lines_estimate: int | None = None


@dataclass
class TraceChunk:
    """A batch of memory accesses in program order; every array has the same length."""

    addr: np.ndarray            # uint64 byte address
    size: np.ndarray            # uint32 bytes accessed
    is_store: np.ndarray        # bool
    block: np.ndarray           # int32 block id (BlockInfo.block_id)
    block_instance: np.ndarray  # int64 0-based count of earlier entries into the same block
    thread: np.ndarray          # uint16 recording thread (0 in a sequential trace)
    region: np.ndarray          # int32 0-based OUT__ invocation index
    loop: np.ndarray            # int32 LoopInstance.instance, or NO_LOOP
    iteration: np.ndarray       # int64 0-based iteration within that loop instance, -1 with NO_LOOP
    is_stack: np.ndarray        # bool: address is on the recording thread's stack (thread-private)

    def __len__(self) -> int:
        return int(self.addr.shape[0])

    @staticmethod
    def empty() -> "TraceChunk":
        """A zero-length chunk with the right dtypes."""
        return TraceChunk(*(np.zeros(0, dtype=d) for d in CHUNK_DTYPES.values()))


CHUNK_DTYPES = {
    "addr": np.uint64, "size": np.uint32, "is_store": np.bool_, "block": np.int32,
    "block_instance": np.int64, "thread": np.uint16, "region": np.int32, "loop": np.int32,
    "iteration": np.int64, "is_stack": np.bool_,
}
