"""`pptmc suite`: the paper's experiment over the built-in PolyBench suite, one pipeline per benchmark.

Benchmarks run in parallel processes; a failing benchmark is reported with its cause and does
not stop the others. Machine-readable tables are written first, the human report (figures and
index.html) is built from those tables alone.
"""
from __future__ import annotations

import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pptmc.io import write_table
from pptmc.pipeline import PipelineConfig, PipelineResult, run_pipeline


@dataclass(frozen=True)
class SuiteConfig:
    """The suite's parameters, shared by every benchmark."""

    outdir: Path
    size: str = "MINI"
    benchmarks: tuple[str, ...] = ()       # empty: all
    machines: tuple[str, ...] = ("haswell-i7-5960x", "broadwell-e5-2699v4", "zen2-epyc-7702p")
    cores: tuple[int, ...] = (1, 2, 4, 8, 16)
    mode: str = "auto"
    interleave: str = "rr"
    seed: int = 0
    jobs: int = 2


@dataclass
class BenchmarkOutcome:
    """One benchmark's result, or the reason it failed."""

    name: str
    result: PipelineResult | None
    error: str | None = None


def select_benchmarks(cfg: SuiteConfig):
    """The catalog entries requested, in catalog order; unknown names are an input error."""
    from benchmarks.polybench.catalog import benchmarks
    from pptmc.errors import InputError

    catalog = benchmarks()
    if not cfg.benchmarks:
        return catalog
    known = {b.name: b for b in catalog} | {b.abbrev: b for b in catalog}
    unknown = [n for n in cfg.benchmarks if n not in known]
    if unknown:
        raise InputError(f"--benchmarks: unknown {', '.join(unknown)}; choose from {', '.join(b.name for b in catalog)}")
    return [known[n] for n in cfg.benchmarks]


def pipeline_config(cfg: SuiteConfig, bench) -> PipelineConfig:
    """The pipeline configuration of one catalog benchmark."""
    from benchmarks.polybench.catalog import size_define

    return PipelineConfig(
        source=bench.source, workdir=cfg.outdir / "work" / bench.name, args=tuple(bench.args),
        include_dirs=(bench.include_dir,), defines=(size_define(cfg.size).removeprefix("-D"),),
        extra_sources=tuple(bench.harness_sources), machines=cfg.machines, cores=cfg.cores,
        mode=cfg.mode, interleave=cfg.interleave, seed=cfg.seed)


def _run_one(pcfg: PipelineConfig) -> BenchmarkOutcome:
    """Worker: one benchmark's pipeline, with failures captured as text."""
    try:
        return BenchmarkOutcome(pcfg.source.stem, run_pipeline(pcfg))
    except Exception as exc:  # reported per benchmark; the suite goes on
        detail = str(exc) if hasattr(exc, "exit_code") else "".join(traceback.format_exception(exc))
        return BenchmarkOutcome(pcfg.source.stem, None, f"{type(exc).__name__}: {detail}")


def run_suite(cfg: SuiteConfig, show_progress: bool = True) -> list[BenchmarkOutcome]:
    """Run every selected benchmark, in parallel processes, with a progress bar."""
    from tqdm import tqdm

    configs = [pipeline_config(cfg, b) for b in select_benchmarks(cfg)]
    outcomes: list[BenchmarkOutcome] = []
    with ProcessPoolExecutor(max_workers=max(1, cfg.jobs)) as pool:
        futures = {pool.submit(_run_one, pc): pc.source.stem for pc in configs}
        bar = tqdm(total=len(futures), desc="suite", unit="benchmark", disable=not show_progress)
        for future in as_completed(futures):
            outcome = future.result()
            bar.set_postfix_str(f"{outcome.name} {'ok' if outcome.error is None else 'FAILED'}")
            bar.update(1)
            outcomes.append(outcome)
        bar.close()
    order = {pc.source.stem: i for i, pc in enumerate(configs)}
    return sorted(outcomes, key=lambda o: order[o.name])


def combine(outcomes: list[BenchmarkOutcome]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Suite-wide hit-rate, runtime and status tables."""
    hits = [o.result.hit_rates.assign(benchmark=o.name) for o in outcomes if o.result]
    runs = [o.result.runtimes.assign(benchmark=o.name) for o in outcomes if o.result]
    status = pd.DataFrame([{
        "benchmark": o.name, "ok": o.error is None, "error": o.error or "",
        "accesses": o.result.n_accesses if o.result else 0,
        **({f"seconds_{k}": round(v, 3) for k, v in o.result.timings.items()} if o.result else {}),
    } for o in outcomes])
    return (pd.concat(hits, ignore_index=True) if hits else pd.DataFrame(),
            pd.concat(runs, ignore_index=True) if runs else pd.DataFrame(), status)


def write_results(cfg: SuiteConfig, outcomes: list[BenchmarkOutcome]) -> dict[str, pd.DataFrame]:
    """Write the tables (CSV and Parquet), then the figures and index.html built from them."""
    from analysis import report

    hits, runs, status = combine(outcomes)
    tables = {"hit_rates": hits, "runtimes": runs, "status": status}
    for name, table in tables.items():
        write_table(table, cfg.outdir / f"{name}.csv")
        if not table.empty:
            write_table(table, cfg.outdir / f"{name}.parquet")
    profile_dirs = {o.name: o.result.profiles_dir for o in outcomes if o.result}
    report.write_report(cfg.outdir, hits, runs, status, profile_dirs)
    return tables
