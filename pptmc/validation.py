"""`pptmc validate`: the model's predicted hit rates against the ground truth of real multithreaded runs.

The model side runs the pipeline (pptmc/pipeline.py) once per private-trace mode and interleaving,
with the same ModelOptions otherwise; the ground truth and the comparison are analysis/validate/. With a
scheduler the same steps run as Dask tasks (pptmc/cluster.py): one per ground-truth thread count after the
original program's build, one per mode × interleave after the model's shared trace.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from analysis.options import DEFAULT_OPTIONS, ModelOptions
from analysis.validate.compare import MODES, compare, split_evidence
from analysis.options import INTERLEAVES
from analysis.validate.groundtruth import GT_COLUMNS, build_original, ground_truth
from common.errors import InputError
from common.locks import folder_lock
from pptmc.pipeline import (PipelineConfig, hit_rates_step, instrument_step, profile_step, trace_step,
                            translate_step)

if TYPE_CHECKING:
    from machines.model import Machine


@dataclass(frozen=True)
class GroundTruthRun:
    """ground_truth's arguments but the thread counts: one per run, or per cluster task one count."""

    source: Path
    workdir: Path
    machines: tuple[Machine, ...]
    args: tuple = ()
    include_dirs: tuple = ()
    defines: tuple = ()
    extra_sources: tuple = ()
    interleaves: tuple[str, ...] = INTERLEAVES
    seed: int = 0
    refs_per_turn: int = 1
    placement: str = "close"

    def rows(self, cores: list[int], progress: Callable[[str], None] | None = None) -> pd.DataFrame:
        """The ground truth of these thread counts (each count's build, trace and simulation cached)."""
        return ground_truth(self.source, self.workdir, list(self.machines), list(cores), args=self.args,
                            include_dirs=self.include_dirs, defines=self.defines, extra_sources=self.extra_sources,
                            interleaves=self.interleaves, seed=self.seed, progress=progress,
                            refs_per_turn=self.refs_per_turn, placement=self.placement)

    def build(self) -> Path:
        """The original program's instrumented build (cached): made once before the per-count tasks use it."""
        return build_original(self.source, self.workdir, self.include_dirs, self.defines, self.extra_sources)


@dataclass(frozen=True)
class ModelTrace:
    """The model's shared trace task's result: the trace, the modes it can run, and what sizes its tasks."""

    trace: Path
    modes: tuple[str, ...]
    lines: int
    accesses: int


def validate_program(source: Path, workdir: Path, machines: list[str], cores: list[int], size_defines=(), args=(),
                     include_dirs=(), extra_sources=(), modes=MODES, interleaves=INTERLEAVES,
                     options: ModelOptions = DEFAULT_OPTIONS, progress=None, refs_per_turn: int = 1,
                     scheduler: str | None = None, cluster_config: Path | None = None,
                     show_progress: bool = True) -> pd.DataFrame:
    """Predicted vs ground-truth cumulative hit rate per machine, core count, level, mode and interleave.

    `options` is the model's, with its mode and interleaving swept over `modes` and `interleaves` (the
    ground truth merges with the same seed and always simulates write-invalidate coherence);
    `refs_per_turn` only coarsens the ground truth's merge (see VALIDATION.md, "Not the real timing").
    `scheduler` (pptmc.cluster.parse_scheduler's values): run the work as tasks on that Dask cluster, with
    the same table; None runs it in this process."""
    from machines import load_machine

    source, workdir = Path(source), Path(workdir)
    if not source.is_file():
        raise InputError(f"{source}: no such C file")
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise InputError(f"--mode {', '.join(bad) or '(none)'}: expected iteration, paper or both")
    if scheduler is not None:  # the workers may start in another folder, on hosts that see the same files
        source, workdir = source.resolve(), workdir.resolve()
    loaded = tuple(load_machine(m) for m in machines)
    base = PipelineConfig(source=source, workdir=workdir / "model", args=tuple(map(str, args)),
                          include_dirs=tuple(Path(d) for d in include_dirs), defines=tuple(size_defines),
                          extra_sources=tuple(Path(e) for e in extra_sources), machines=tuple(machines),
                          cores=tuple(sorted(set(cores))), options=options)
    gt = GroundTruthRun(source, workdir / "groundtruth", loaded, tuple(args), tuple(include_dirs),
                        tuple(size_defines), tuple(extra_sources), tuple(interleaves), options.seed, refs_per_turn,
                        options.placement)
    with folder_lock(workdir):
        if scheduler is None:
            truth = gt.rows(list(cores), progress)
            model = predict_variants(base, modes, interleaves, progress)
        else:
            truth, model = on_cluster(gt, base, tuple(modes), scheduler, cluster_config,
                                      progress or quiet, show_progress)
    return compare(truth, model, source.stem)


def on_cluster(gt: GroundTruthRun, base: PipelineConfig, modes: tuple[str, ...], scheduler: str,
               cluster_config: Path | None, say: Callable[[str], None], show_progress: bool
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ground truth and the model's tables as Dask tasks: the original build, then one task per thread
    count; beside them the model's translate/instrument/trace, then one task per mode × interleave. The
    tables are put together in the order one process makes them."""
    from pptmc.cluster import TaskCall, open_cluster, parse_scheduler, run_tasks
    from pptmc.suite_tasks import TASK_BASE_BYTES, memory_need

    counts = sorted(set(base.cores))

    def then(call: TaskCall, value: Any) -> list[TaskCall]:
        """The tasks a finished one unblocks."""
        if call.name == "build":  # built once: the per-count tasks only read it
            return [TaskCall(f"groundtruth-{p}", gt.rows, ([p],), TASK_BASE_BYTES) for p in counts]
        if call.name != "model-trace":
            return []
        if value.modes != modes:
            say("no work-shared loop in the program: iteration mode skipped, paper mode only")
        need = memory_need(base.machines, base.cores, base.options, value.lines, value.accesses)
        return [TaskCall(f"model-{m}-{s}", predict_variant, (base, value.trace, m, s), need)
                for m in value.modes for s in gt.interleaves]

    first = [TaskCall("build", gt.build, (), TASK_BASE_BYTES),
             TaskCall("model-trace", model_trace, (base, modes), TASK_BASE_BYTES)]
    with open_cluster(parse_scheduler(scheduler), cluster_config, say) as client:
        done = run_tasks(client, first, "validate", show_progress, then)
    truth = pd.concat([done[f"groundtruth-{p}"] for p in counts], ignore_index=True)[GT_COLUMNS]
    model = pd.concat([done[f"model-{m}-{s}"] for m in done["model-trace"].modes for s in gt.interleaves],
                      ignore_index=True)
    return truth, model


def model_trace(base: PipelineConfig, modes: tuple[str, ...]) -> ModelTrace:
    """The cluster's shared model task: translate, instrument and trace once (cached), the modes the trace
    can run, and its distinct lines (which size the per-variant tasks)."""
    from pptmc.suite_tasks import memory_lines

    trace = trace_step(base, instrument_step(base, translate_step(base, quiet), quiet), quiet)
    lines, accesses = memory_lines(trace, base.line_size)
    return ModelTrace(trace, usable_modes(trace, modes, quiet), lines, accesses)


def quiet(_msg: str) -> None:
    """A step's progress messages, dropped: a worker has no terminal (the client shows the tasks)."""


def predict_variants(base: PipelineConfig, modes, interleaves, progress=None) -> pd.DataFrame:
    """The pipeline's hit-rate tables for every mode × interleave; translate/instrument/trace run once."""
    say = progress or (lambda _msg: None)
    translated = translate_step(base, say)
    binary = instrument_step(base, translated, say)
    trace = trace_step(base, binary, say)
    modes = usable_modes(trace, tuple(modes), say)
    return pd.concat([predict_variant(base, trace, mode, strategy, say) for mode in modes for strategy in interleaves],
                     ignore_index=True)


def predict_variant(base: PipelineConfig, trace: Path, mode: str, strategy: str,
                    say: Callable[[str], None] | None = None) -> pd.DataFrame:
    """The hit-rate table of one mode and interleave, with the profiles' split evidence (profiles cached in
    their own folder, so variants can run at the same time)."""
    say = say or quiet
    options = dataclasses.replace(base.options, mode=mode, interleave=strategy)
    cfg = dataclasses.replace(base, workdir=base.workdir / f"{mode}-{strategy}", options=options)
    profiles = profile_step(cfg, trace, say)
    hits = hit_rates_step(cfg, profiles, trace)
    return hits.merge(split_evidence(profiles), on="cores", how="left").assign(mode=mode, interleave=strategy)


def validate_benchmark(bench, size: str, machines, cores, workdir, **kw) -> pd.DataFrame:
    """validate_program for a catalog Benchmark at a dataset size."""
    from benchmarks.polybench.catalog import size_macro

    return validate_program(bench.source, Path(workdir), list(machines), list(cores),
                            size_defines=(size_macro(size),), args=tuple(bench.args),
                            include_dirs=(bench.include_dir,), extra_sources=tuple(bench.harness_sources), **kw)


def usable_modes(trace: Path, modes: tuple[str, ...], say) -> tuple[str, ...]:
    """Iteration mode needs loop markers (work-shared loops); without them only paper mode can run."""
    import instrument

    if "iteration" not in modes or instrument.open_trace(trace).info.loops:
        return modes
    if modes == ("iteration",):
        raise InputError(f"{trace}: the program has no work-shared loop, so iteration mode cannot run; "
                         f"use --mode paper")
    say("no work-shared loop in the program: iteration mode skipped, paper mode only")
    return tuple(m for m in modes if m != "iteration")
