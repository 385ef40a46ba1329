"""Run an instrumented binary once: `pptmc trace` (memory trace) and `pptmc count` (counters only)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from instrument.build import load_block_table, side_paths
from instrument.trace_types import TraceInfo
from instrument.trace_format import FORMAT_VERSION, read_footer
from instrument.tracefile import mark_incomplete, open_trace
from common.errors import InputError, RunError
from common.io import atomic_path


@dataclass
class CountResult:
    """Block and edge execution counts of one count-mode run."""

    block_counts: dict[int, int]
    edge_counts: dict[tuple[int, int], int]
    n_threads: int = 1


def _check_binary(binary: Path, mode: str):
    """The binary must exist and have been built in `mode`; returns its block table."""
    binary = Path(binary)
    if not binary.is_file():
        raise InputError(f"{binary}: no such binary; build it with pptmc instrument")
    table = load_block_table(binary)
    if table.mode != mode:
        raise InputError(f"{binary}: built in {table.mode!r} mode, this needs {mode!r}; rebuild with "
                         f"pptmc instrument --mode {mode}")
    return table


def _describe(code: int) -> str:
    """'exited with status 3' or 'was killed by SIGSEGV'."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _env(threads: int, env: dict | None) -> dict:
    if threads < 1:
        raise InputError(f"threads={threads}: must be at least 1")
    out = dict(os.environ if env is None else env)
    out["OMP_NUM_THREADS"] = str(threads)
    return out


# Core counts whose schedules cut a translated loop into pieces when the caller names none: those the
# commands predict by default (translate/README.md, "Pieces")
DEFAULT_PIECE_CORES = (1, 2, 4, 8, 16)


def piece_cores_value(cores) -> str:
    """PPTMC_PIECE_CORES for the trace runtime: the distinct core counts, ascending, comma-separated."""
    values = sorted({int(c) for c in cores})
    if not values or values[0] < 1:
        raise InputError(f"piece core counts {list(cores)}: need at least one, each 1 or more")
    return ",".join(map(str, values))


def unlisted_piece_cores(listed: list[int] | None, cores) -> str | None:
    """A warning when some core counts are not among those a trace's pieces were cut for (`listed`; None when
    all are, or when the trace predates pieces): a piece that straddles such a count's block boundary goes
    whole to the core of its first iteration."""
    missing = sorted({int(c) for c in cores} - set(listed)) if listed else []
    if not missing:
        return None
    return (f"its translated loops were cut into pieces for cores {','.join(map(str, listed))}; at "
            f"{','.join(map(str, missing))} cores a piece that straddles a core's block boundary is given whole to "
            f"one core; re-trace with pptmc trace --cores {','.join(map(str, sorted(set(listed) | set(missing))))}")


def run_trace(binary: Path, args: list[str], output: Path, threads: int = 1, env=None,
              piece_cores=DEFAULT_PIECE_CORES) -> TraceInfo:
    """Run `binary args` once and write its trace to `output`; RunError if the program failed.
    `piece_cores`: the core counts whose schedules cut a translated loop into vectorisable pieces
    (each piece runs on one core for every listed count; the header records them)."""
    binary, output = Path(binary), Path(output)
    table = _check_binary(binary, "trace")
    pieces = piece_cores_value(piece_cores)
    header = {"format_version": FORMAT_VERSION, "program": str(binary), "args": list(args),
              "block_table_hash": table.table_hash, "threads_requested": threads,
              "piece_cores": [int(c) for c in pieces.split(",")],
              "blocks": [{"id": b.block_id, "function": b.function, "label": b.label,
                          "is_shared_var_block": b.is_shared_var_block, "host_block": b.host_block}
                         for b in table.blocks.values()],
              "sites": table.sites}
    run_env = _env(threads, env)
    with tempfile.TemporaryDirectory(prefix="pptmc-trace-") as tmp, atomic_path(output) as part:
        hdr_file = Path(tmp) / "header.json"
        hdr_file.write_text(json.dumps(header))
        # PPTMC_STACK_PAD: the runtime fixes the address layout, so the trace does not depend on
        # randomisation, the environment or these paths (pptmc_rt.c, canonical_addresses)
        run_env.update(PPTMC_TRACE_OUT=str(part), PPTMC_TRACE_HEADER=str(hdr_file), PPTMC_STACK_PAD="0",
                       PPTMC_PIECE_CORES=pieces)
        start = time.perf_counter()
        proc = subprocess.run([str(binary.resolve()), *map(str, args)], env=run_env, check=False)
        elapsed = time.perf_counter() - start
        if part.stat().st_size == 0:
            raise RunError(f"{binary}: {_describe(proc.returncode)} before the trace runtime started; "
                           f"no trace written")
        failure = None
        footer = _runtime_footer(part)
        if proc.returncode != 0:
            failure = f"the program {_describe(proc.returncode)}"
        elif footer is None:
            failure = "the trace runtime did not write its footer"
        elif not footer.get("complete"):
            failure = "the trace runtime marked the trace incomplete"
        if failure:
            try:
                failure = mark_incomplete(part, failure, proc.returncode)
            except InputError as exc:
                raise RunError(f"{binary}: {failure}, and no usable trace was left ({exc})") from exc
    if failure:
        raise RunError(f"{binary} {' '.join(map(str, args))}: {failure}; the partial trace {output} is "
                       f"marked incomplete (fix the program or its arguments and re-run pptmc trace)")
    info = open_trace(output).info
    info.extra["elapsed_s"] = elapsed
    return info


def _runtime_footer(path: Path) -> dict | None:
    """The footer the runtime wrote, or None when it wrote none (killed, or the file was cut)."""
    with open(path, "rb") as f:
        try:
            return read_footer(f, path, path.stat().st_size)[0]
        except InputError:
            return None


def run_counts(binary: Path, args, threads: int = 1, env=None, piece_cores=DEFAULT_PIECE_CORES) -> CountResult:
    """Run a count-mode binary once and return its block and edge counts (`piece_cores` as for
    run_trace: the same list gives the traced run's block counts)."""
    binary = Path(binary)
    table = _check_binary(binary, "count")
    run_env = _env(threads, env)
    run_env["PPTMC_PIECE_CORES"] = piece_cores_value(piece_cores)
    with tempfile.TemporaryDirectory(prefix="pptmc-count-") as tmp:
        out = Path(tmp) / "counts.json"
        run_env["PPTMC_COUNTS_OUT"] = str(out)
        proc = subprocess.run([str(binary.resolve()), *map(str, args)], env=run_env, check=False)
        if proc.returncode != 0:
            raise RunError(f"{binary} {' '.join(map(str, args))}: the program {_describe(proc.returncode)}; "
                           f"no counts written")
        if not out.is_file():
            raise RunError(f"{binary}: the count runtime wrote no counts; rebuild with pptmc instrument --mode count")
        data = json.loads(out.read_text())
    if data["table_hash"] != table.table_hash:
        raise InputError(f"{side_paths(binary)['blocks']}: does not match {binary}; rebuild it")
    blocks = {i: int(c) for i, c in enumerate(data["block_counts"])}
    for b in table.blocks.values():
        if b.is_shared_var_block:
            blocks[b.block_id] = blocks.get(b.host_block, 0)
    edges: dict[tuple[int, int], int] = {}
    for a, b, n in data["edge_counts"]:
        edges[(int(a), int(b))] = edges.get((int(a), int(b)), 0) + int(n)
    return CountResult(blocks, edges, int(data.get("n_threads", 1)))
