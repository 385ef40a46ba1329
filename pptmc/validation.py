"""`pptmc validate`: the model's predicted hit rates against the ground truth of real multithreaded runs.

The model side runs the pipeline (pptmc/pipeline.py) once per private-trace mode and interleaving,
with the same ModelOptions otherwise; the ground truth and the comparison are analysis/validate/.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from analysis.options import DEFAULT_OPTIONS, ModelOptions
from analysis.validate.compare import MODES, compare, split_evidence
from analysis.options import INTERLEAVES
from analysis.validate.groundtruth import ground_truth
from common.errors import InputError
from common.locks import folder_lock
from pptmc.pipeline import (PipelineConfig, hit_rates_step, instrument_step, profile_step, trace_step,
                            translate_step)


def validate_program(source: Path, workdir: Path, machines: list[str], cores: list[int], size_defines=(), args=(),
                     include_dirs=(), extra_sources=(), modes=MODES, interleaves=INTERLEAVES,
                     options: ModelOptions = DEFAULT_OPTIONS, progress=None, refs_per_turn: int = 1) -> pd.DataFrame:
    """Predicted vs ground-truth cumulative hit rate per machine, core count, level, mode and interleave.

    `options` is the model's, with its mode and interleaving swept over `modes` and `interleaves` (the
    ground truth merges with the same seed and always simulates write-invalidate coherence);
    `refs_per_turn` only coarsens the ground truth's merge (see VALIDATION.md, "Not the real timing")."""
    from machines import load_machine

    source, workdir = Path(source), Path(workdir)
    if not source.is_file():
        raise InputError(f"{source}: no such C file")
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise InputError(f"--mode {', '.join(bad) or '(none)'}: expected iteration, paper or both")
    loaded = [load_machine(m) for m in machines]
    base = PipelineConfig(source=source, workdir=workdir / "model", args=tuple(map(str, args)),
                          include_dirs=tuple(Path(d) for d in include_dirs), defines=tuple(size_defines),
                          extra_sources=tuple(Path(e) for e in extra_sources), machines=tuple(machines),
                          cores=tuple(sorted(set(cores))), options=options)
    with folder_lock(workdir):
        gt = ground_truth(source, workdir / "groundtruth", loaded, list(cores), args=args, include_dirs=include_dirs,
                          defines=size_defines, extra_sources=extra_sources, interleaves=interleaves,
                          seed=options.seed, progress=progress, refs_per_turn=refs_per_turn,
                          placement=options.placement)
        model = predict_variants(base, modes, interleaves, progress)
    return compare(gt, model, source.stem)


def predict_variants(base: PipelineConfig, modes, interleaves, progress=None) -> pd.DataFrame:
    """The pipeline's hit-rate tables for every mode × interleave; translate/instrument/trace run once."""
    say = progress or (lambda _msg: None)
    translated = translate_step(base, say)
    binary = instrument_step(base, translated, say)
    trace = trace_step(base, binary, say)
    modes = usable_modes(trace, tuple(modes), say)
    frames = []
    for mode in modes:
        for strategy in interleaves:
            options = dataclasses.replace(base.options, mode=mode, interleave=strategy)
            cfg = dataclasses.replace(base, workdir=base.workdir / f"{mode}-{strategy}", options=options)
            profiles = profile_step(cfg, trace, say)
            hits = hit_rates_step(cfg, profiles, trace)
            frames.append(hits.merge(split_evidence(profiles), on="cores", how="left")
                          .assign(mode=mode, interleave=strategy))
    return pd.concat(frames, ignore_index=True)


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
