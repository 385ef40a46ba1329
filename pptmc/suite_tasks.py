"""The suite's work cut into cluster tasks (pptmc/dask_suite.py runs them): per benchmark and size one
trace task (translate, instrument, trace, the trace facts of every machine, its distinct lines at most),
then one part task per group of machines × group of core counts (profile and predict those), then the
benchmark's tables put back together in the order one pipeline run writes them.

Tasks meet through files under the suite's folder (a path every worker sees) and return small results;
each step is the pipeline's own (pptmc/pipeline.py), with its cache keys, so a re-run reuses what is done.
A task never raises: a failure comes back as a TaskFailure naming the stage.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from pptmc.pipeline import (PipelineConfig, PipelineResult, Predictions, Translation, instrument_step,
                            page_profile_step, profile_step, trace_step, trace_terms_step, translate_step,
                            write_run_results)

TASK_BASE_BYTES = 256 << 20   # a task's own arrays beside the engines: decoded chunks, tables, numba's
BUFFER_BYTES_PER_ACCESS = 8   # a waiting reference of an interleaved trace (analysis/profiles/interleave.py)


@dataclass(frozen=True)
class TaskFailure:
    """A task that failed: the stage it was in and the error, as text (exceptions need not pickle)."""

    stage: str
    error: str

    def describe(self) -> str:
        """The failure as the status table and the summary show it: the stage first."""
        return f"{self.stage} failed: {self.error}"


@dataclass(frozen=True)
class TraceDone:
    """A trace task's result: the files later tasks read and what sizes their memory."""

    translation: Translation
    binary: Path
    trace: Path
    lines: int                      # distinct cache lines of the trace, at most (memory_lines)
    accesses: int
    seconds: dict[str, float]       # translate, instrument, trace


@dataclass(frozen=True)
class Part:
    """A group of machines and a group of core counts of one benchmark and size, profiled together."""

    machines: tuple[str, ...]
    cores: tuple[int, ...]
    tag: str                        # its folder under the benchmark's work folder: parts/<tag>


@dataclass
class PartDone:
    """A part task's predictions, one table per machine of the part (in its order)."""

    part: Part
    hit_rates: list[pd.DataFrame]
    runtimes: list[pd.DataFrame]
    tlb_rates: list[pd.DataFrame | None]
    coherence: dict[int, float]
    terms: dict
    accesses: int
    complete: bool
    profiles_dir: Path
    seconds: dict[str, float] = field(default_factory=dict)   # profile, predict


def describe(exc: BaseException) -> str:
    """A user error's own message; a traceback for anything unexpected."""
    detail = str(exc) if hasattr(exc, "exit_code") else "".join(traceback.format_exception(exc))
    return f"{type(exc).__name__}: {detail}"


def _noop(_: str) -> None:
    """A step's progress messages, dropped: a worker has no terminal (the client shows the tasks)."""
    return None


class _Stages:
    """Times each stage of a task and remembers which one is running (for the failure's message)."""

    def __init__(self) -> None:
        """No stage run yet."""
        self.current, self.seconds = "start", {}

    def run(self, name: str, fn: Callable, *args) -> Any:
        """fn(*args) as stage `name`, its time added to the stage's."""
        self.current = name
        start = time.perf_counter()
        value = fn(*args)
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
        return value


def trace_task(cfg: PipelineConfig) -> TraceDone | TaskFailure:
    """Translate, instrument and trace one benchmark at one size (each step cached), compute the trace
    facts every machine prices (read back by the part tasks) and bound the trace's distinct lines (memory_lines)."""
    from machines import load_machine

    stages = _Stages()
    try:
        translation = stages.run("translate", translate_step, cfg, _noop)
        binary = stages.run("instrument", instrument_step, cfg, translation, _noop)
        trace = stages.run("trace", trace_step, cfg, binary, _noop)
        for name in cfg.machines:
            stages.run("trace terms", trace_terms_step, cfg, trace, load_machine(name), _noop)
        lines, accesses = stages.run("count lines", memory_lines, trace, cfg.line_size)
    except Exception as exc:  # reported with its stage; the other tasks go on
        return TaskFailure(stages.current, describe(exc))
    seconds = {k: stages.seconds[k] for k in ("translate", "instrument", "trace")}
    return TraceDone(translation, binary, trace, lines, accesses, seconds)


def memory_lines(trace: Path, line_size: int = 64) -> tuple[int, int]:
    """(distinct cache lines at most, accesses) of a trace, to size its tasks' memory: the footer's
    distinct-line estimate to three standard errors (analysis.profiles.limits.lines_bound) where the trace
    has one, the exact pass (distinct_lines) for a trace without it."""
    import instrument
    from analysis.profiles.limits import lines_bound

    info = instrument.open_trace(trace).info
    if info.distinct_lines_estimate is None:
        return distinct_lines(trace, line_size)
    return lines_bound(info.distinct_lines_estimate, line_size), int(info.n_accesses)


def distinct_lines(trace: Path, line_size: int = 64) -> tuple[int, int]:
    """(distinct cache lines, accesses) of a trace: one pass, kept beside it until the trace changes
    (its step stamp) or the line size does."""
    import instrument
    from analysis.profiles.line_index import LineIndex

    stamp = trace.parent / ".key"
    key = stamp.read_text().strip() if stamp.is_file() else ""
    kept = trace.with_name(trace.name + ".lines.json")
    if key and kept.is_file():
        record = json.loads(kept.read_text())
        if record.get("key") == key and record.get("line_size") == line_size:
            return int(record["lines"]), int(record["accesses"])
    index, at = LineIndex(), 0
    shift = int(math.log2(line_size))
    for chunk in instrument.open_trace(trace).chunks(columns=("addr",)):
        index.number(chunk.addr, None, shift, at, neighbours=False)
        at += len(chunk.addr)
    if key:
        from common.io import write_json

        write_json(kept, {"key": key, "line_size": line_size, "lines": index.count, "accesses": at})
    return index.count, at


def part_config(cfg: PipelineConfig, part: Part) -> PipelineConfig:
    """The pipeline configuration of one part: its machines and core counts, its own work folder."""
    return dataclasses.replace(cfg, workdir=cfg.workdir / "parts" / part.tag, machines=part.machines,
                               cores=part.cores)


def part_task(cfg: PipelineConfig, part: Part, done: TraceDone) -> PartDone | TaskFailure:
    """Profile one part's core counts for its machines (cached in parts/<tag>) and predict them; the
    trace facts are the trace task's (read from the benchmark's work folder)."""
    from analysis.predict import RegionSources, predict_machine
    from analysis.profiles.profileset import ProfileSet
    from machines import load_machine

    stages, pcfg = _Stages(), part_config(cfg, part)
    try:
        profiles_dir = stages.run("profile", profile_step, pcfg, done.trace, _noop)
        sources = RegionSources(
            trace=done.trace, binary=done.binary, profiles=ProfileSet.load(profiles_dir),
            terms_for=lambda machine: trace_terms_step(cfg, done.trace, machine, _noop),
            page_profiles_for=lambda page: ProfileSet.load(page_profile_step(pcfg, done.trace, page, _noop)))
        preds = [stages.run("predict", predict_machine, sources, load_machine(name), part.cores, cfg.options)
                 for name in part.machines]
        info = sources.record.info
    except Exception as exc:  # reported with its stage and part; the other tasks go on
        where = f"{stages.current} (cores {','.join(map(str, part.cores))}; {', '.join(part.machines)})"
        return TaskFailure(where, describe(exc))
    return PartDone(part, [p.hit_rates for p in preds], [p.runtimes for p in preds], [p.tlb_rates for p in preds],
                    preds[0].coherence, {p.machine.name: p.terms for p in preds}, int(info.n_accesses),
                    bool(info.complete), profiles_dir, dict(stages.seconds))


def plan_parts(machines: tuple[str, ...], cores: tuple[int, ...], n_traces: int, workers: int) -> list[Part]:
    """The parts of each benchmark and size: enough that every worker has about two tasks, split first
    by core counts (job_groups: neighbouring counts share engines) and only then by machines (each
    machine group profiles the trace again)."""
    from analysis.profiles.jobs import job_groups

    wanted = max(1, min(len(cores) * len(machines), math.ceil(2 * workers / max(n_traces, 1))))
    core_groups = job_groups(list(cores), min(wanted, len(cores)))
    n_machine_groups = min(len(machines), math.ceil(wanted / len(core_groups)))
    size = math.ceil(len(machines) / n_machine_groups)
    machine_groups = [machines[i:i + size] for i in range(0, len(machines), size)]
    parts = []
    for group in machine_groups:
        mtag = "" if len(machine_groups) == 1 else "_m" + hashlib.sha256(",".join(group).encode()).hexdigest()[:8]
        parts += [Part(tuple(group), tuple(cg), "c" + "-".join(map(str, cg)) + mtag) for cg in core_groups]
    return parts


def memory_need(machines: tuple[str, ...], cores: tuple[int, ...], options, lines: int, accesses: int) -> int:
    """Bytes a profiling pass over these core counts for these machines holds at most: the engines (at
    most BYTES_PER_LINE per distinct line each: one trace's worth for one core, two for more, again per
    set-class width, one per grouping of shared instances), the per-core buffers, the waiting references
    (up to the pass's budget) and the task's own arrays (TASK_BASE_BYTES)."""
    from analysis.hitrates.rates import profile_needs
    from analysis.profiles.interleave import default_memory_budget
    from analysis.profiles.limits import BYTES_PER_LINE, estimated_bytes
    from machines import load_machine

    needs = profile_needs([load_machine(name) for name in machines], cores, options.hit_rates, options.placement)
    widths, groupings = needs.class_bits, needs.groupings
    engines = sum(1 if p == 1 else 2 for p in cores) * (1 + len(widths)) + len(groupings)
    passes = 1 + bool(widths or groupings)  # the class and grouping passes run beside the plain one
    waiting = passes * min(default_memory_budget(), BUFFER_BYTES_PER_ACCESS * accesses)
    return TASK_BASE_BYTES + engines * BYTES_PER_LINE * lines + estimated_bytes(cores) + waiting


def assemble(cfg: PipelineConfig, done: TraceDone, parts: list[PartDone]) -> PipelineResult:
    """One benchmark's result from its parts, its tables in the order one pipeline run gives them (each
    machine in turn, core counts ascending), written into its work folder as `pptmc run` writes them."""
    first = parts[0]
    hits = _in_run_order(cfg, parts, lambda p: p.hit_rates, ["cores"])
    runs = _in_run_order(cfg, parts, lambda p: p.runtimes, ["cores"])
    tlb = _in_run_order(cfg, parts, lambda p: p.tlb_rates, ["level", "cores"])  # tlb.py: level by level
    coherence = {c: f for p in parts if p.part.machines[0] == first.part.machines[0] for c, f in p.coherence.items()}
    terms = {name: t for p in parts for name, t in p.terms.items()}
    pred = Predictions(hits, runs, tlb, dict(sorted(coherence.items())), terms, first.accesses, first.complete)
    write_run_results(cfg, done.translation, pred)
    timings = {**done.seconds, "profile": sum(p.seconds.get("profile", 0.0) for p in parts),
               "predict": sum(p.seconds.get("predict", 0.0) for p in parts)}
    return PipelineResult(cfg.source.stem, pred.hit_rates, pred.runtimes, done.trace, _merged_profiles(cfg, parts),
                          pred.n_accesses, timings, pred.tlb_rates, pred.coherence, pred.terms, pred.trace_complete)


def _in_run_order(cfg: PipelineConfig, parts: list[PartDone], tables: Callable, keys: list[str]
                  ) -> pd.DataFrame | None:
    """One table from the parts' per-machine tables: machine by machine as cfg lists them, and within a
    machine the parts' rows ordered by `keys` as the predictor loops over them (core counts ascending,
    other keys in the order they first appear); stable, so the rows of one key keep their order."""
    frames = []
    for name in cfg.machines:
        mine = [t for p in parts for m, t in zip(p.part.machines, tables(p)) if m == name and t is not None]
        if not mine:
            continue
        # a part's core counts may all exceed the machine's cores (no runtime rows): an empty table would
        # turn the integer columns of the others to floats, which one run never concatenates
        mine = [t for t in mine if not t.empty] or mine[:1]
        table = pd.concat(mine, ignore_index=True)
        ranks = [table[k] if k == "cores" else table[k].map({v: i for i, v in enumerate(dict.fromkeys(table[k]))})
                 for k in keys if k in table.columns]
        if ranks:
            order = pd.DataFrame({i: r for i, r in enumerate(ranks)}).sort_values(list(range(len(ranks))),
                                                                                 kind="stable").index
            table = table.loc[order].reset_index(drop=True)
        frames.append(table)
    return pd.concat(frames, ignore_index=True) if frames else None


def _merged_profiles(cfg: PipelineConfig, parts: list[PartDone]) -> Path:
    """The profiles of every core count in one folder (the report's reuse figure reads one): a lone
    part's own folder, else parts/all, written from the parts' folders."""
    from analysis.profiles.profileset import ProfileSet
    from common.locks import output_folder

    own = [p for p in parts if p.part.machines == parts[0].part.machines]
    if len(own) == 1:
        return own[0].profiles_dir
    sets = [ProfileSet.load(p.profiles_dir) for p in own]
    merged = dataclasses.replace(sets[0], prd={}, crd={}, class_prd={}, class_crd={}, group_crd={})
    for ps in sets:
        for name in ("prd", "crd", "class_prd", "class_crd", "group_crd"):
            getattr(merged, name).update(getattr(ps, name))
    out = cfg.workdir / "parts" / "all"
    with output_folder(out, "pptmc suite (profiles of every part)") as folder:
        merged.save(folder)
    return out
