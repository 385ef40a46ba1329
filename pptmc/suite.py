"""`pptmc suite`: the paper's experiment over the built-in PolyBench suite, one pipeline per benchmark and size.

Each selected benchmark runs at each suite size it defines (POW2 only for catalog.POW2_KERNELS), and
every table has a `size` column. The work runs as Dask tasks (pptmc/dask_suite.py: a local cluster by
default, or the one --scheduler names), or with `jobs` in local processes, one benchmark each; a failing
benchmark is reported with its cause and does not stop the others. Machine-readable tables are written
first, the human report (figures and index.html) is built from those tables alone.
"""
from __future__ import annotations

import dataclasses
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pandas as pd

from analysis.options import DEFAULT_OPTIONS, ModelOptions
from common.io import program_output_to, write_json, write_table
from pptmc.pipeline import PipelineConfig, PipelineResult, benchmark_config, run_pipeline
from pptmc.suite_tasks import describe

if TYPE_CHECKING:  # dask loads in ~0.5 s: only a suite run on it imports it
    from pptmc.dask_suite import Job


@dataclass(frozen=True)
class SuiteConfig:
    """The suite's parameters, shared by every benchmark."""

    outdir: Path
    size: str = "MINI"                     # the size of one run; the suite loops over `sizes`
    sizes: tuple[str, ...] = ()            # every size the suite runs, first one first; empty: (size,)
    benchmarks: tuple[str, ...] = ()       # empty: all
    machines: tuple[str, ...] = ("haswell-i7-5960x", "broadwell-e5-2699v4", "zen2-epyc-7702p")
    cores: tuple[int, ...] = (1, 2, 4, 8, 16)
    jobs: int = 2                          # local processes, one benchmark each (without a scheduler)
    scheduler: str | None = None           # Dask: local, local:N, tcp://HOST:PORT, slurm or pbs (pptmc/cluster.py)
    cluster_config: Path | None = None     # the queue options of --scheduler slurm|pbs
    options: ModelOptions = DEFAULT_OPTIONS   # the model (analysis/options.py)
    validate: bool = False                 # also compare hit rates with the simulated ground truth
    measure: bool = False                  # also time the native programs on this host
    measure_size: str = "MEDIUM"           # regions long enough to time (pptmc measure's default)
    measure_threads: tuple[int, ...] = (1, 2)
    host_machine: str | None = None        # machine file of this host; detected into outdir if absent


@dataclass
class BenchmarkOutcome:
    """One benchmark's result, or the reason it failed."""

    name: str
    result: PipelineResult | None
    error: str | None = None
    size: str = ""


def select_benchmarks(cfg: SuiteConfig):
    """The catalog entries requested, in catalog order; unknown names are an input error."""
    from benchmarks.polybench.catalog import benchmarks
    from common.errors import InputError

    catalog = benchmarks()
    if not cfg.benchmarks:
        return catalog
    known = {b.name: b for b in catalog} | {b.abbrev: b for b in catalog}
    unknown = [n for n in cfg.benchmarks if n not in known]
    if unknown:
        raise InputError(f"--benchmarks: unknown {', '.join(unknown)}; choose from {', '.join(b.name for b in catalog)}")
    return [known[n] for n in cfg.benchmarks]


def suite_sizes(cfg: SuiteConfig) -> tuple[str, ...]:
    """The sizes the suite runs, canonical ("mini" -> "MINI"); unknown names are an input error."""
    from benchmarks.polybench.catalog import size_macro

    return tuple(dict.fromkeys(size_macro(s).removesuffix("_DATASET") for s in cfg.sizes or (cfg.size,)))


def size_tasks(cfg: SuiteConfig) -> list[tuple[SuiteConfig, object]]:
    """(one size's config, benchmark) for each selected benchmark at each suite size it defines, size by
    size; a size no selected benchmark has, or a named benchmark with none of the sizes, is an input error."""
    from benchmarks.polybench.catalog import check_size, sizes_of
    from common.errors import InputError

    chosen, sizes = select_benchmarks(cfg), suite_sizes(cfg)
    for bench in chosen if cfg.benchmarks else ():
        if not set(sizes) & set(sizes_of(bench)):
            check_size(bench, sizes[0])  # raises, naming the benchmark and the sizes it has
    tasks = []
    for size in sizes:
        have = [b for b in chosen if size in sizes_of(b)]
        if not have:
            raise InputError(f"--size {size}: none of the selected benchmarks defines it "
                             f"({', '.join(b.name for b in chosen)}); see benchmarks/polybench/README.md")
        tasks += [(dataclasses.replace(cfg, size=size, sizes=sizes), b) for b in have]
    return tasks


def label(cfg: SuiteConfig, name: str, size: str) -> str:
    """A benchmark's name at one size, for work folders, figures and messages: the suite's first size
    keeps the plain name (a one-size suite is laid out as before sizes existed), the others `name@SIZE`."""
    return name if size == suite_sizes(cfg)[0] else f"{name}@{size}"


def pipeline_config(cfg: SuiteConfig, bench) -> PipelineConfig:
    """The pipeline configuration of one catalog benchmark at cfg.size, in outdir/work/<label>."""
    pcfg = benchmark_config(bench, cfg.size, cfg.outdir, machines=cfg.machines, cores=cfg.cores,
                            options=cfg.options)
    return dataclasses.replace(pcfg, workdir=cfg.outdir / "work" / label(cfg, bench.name, cfg.size))


def _run_one(task: tuple[str, PipelineConfig]) -> BenchmarkOutcome:
    """Worker: one benchmark's pipeline at one size, with failures captured as text."""
    size, pcfg = task
    try:
        return BenchmarkOutcome(pcfg.source.stem, run_pipeline(pcfg), size=size)
    except Exception as exc:  # reported per benchmark; the suite goes on
        return BenchmarkOutcome(pcfg.source.stem, None, describe(exc), size=size)


def _in_parallel(worker, tasks: list, jobs: int, desc: str, show_progress: bool) -> list:
    """Run worker(task) in processes with a progress bar; results in task order. Each result has
    `.name` and `.error` (None on success), so failures are reported without stopping the others."""
    from tqdm import tqdm

    results = [None] * len(tasks)
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(worker, task): i for i, task in enumerate(tasks)}
        bar = tqdm(total=len(futures), desc=desc, unit="benchmark", disable=not show_progress)
        for future in as_completed(futures):
            outcome = future.result()
            bar.set_postfix_str(f"{outcome.name} {'ok' if outcome.error is None else 'FAILED'}")
            bar.update(1)
            results[futures[future]] = outcome
        bar.close()
    return results


def run_suite(cfg: SuiteConfig, show_progress: bool = True) -> list[BenchmarkOutcome]:
    """Run every selected benchmark at each suite size it has, in parallel processes, with a progress bar."""
    configs = [(scfg.size, pipeline_config(scfg, b)) for scfg, b in size_tasks(cfg)]
    return _in_parallel(_run_one, configs, cfg.jobs, "suite", show_progress)


@dataclass
class ValidationOutcome:
    """One benchmark's predicted-vs-ground-truth rows, or the reason validation failed."""

    name: str
    table: pd.DataFrame | None
    error: str | None = None
    size: str = ""


def _validate_one(task: tuple[SuiteConfig, object]) -> ValidationOutcome:
    """Worker: `pptmc validate` of one catalog benchmark at cfg.size, in the suite's work folder."""
    from pptmc.validation import validate_benchmark

    cfg, bench = task
    workdir = cfg.outdir / "work" / label(cfg, bench.name, cfg.size) / "validate"
    try:
        with program_output_to(workdir / "program.out"):  # the traced runs' own output, kept apart
            table = validate_benchmark(bench, cfg.size, list(cfg.machines), list(cfg.cores), workdir,
                                       interleaves=(cfg.options.interleave,), options=cfg.options)
        return ValidationOutcome(bench.name, table.assign(size=cfg.size), size=cfg.size)
    except Exception as exc:  # reported per benchmark; the others go on
        return ValidationOutcome(bench.name, None, describe(exc), size=cfg.size)


def run_validation(cfg: SuiteConfig, show_progress: bool = True) -> list[ValidationOutcome]:
    """Hit-rate validation of every selected benchmark, at each suite size it has, against the simulated
    ground truth."""
    tasks = size_tasks(cfg)
    return _in_parallel(_validate_one, tasks, cfg.jobs, "validate", show_progress)


def run_suite_and_validation(cfg: SuiteConfig, show_progress: bool = True,
                             say: Callable[[str], None] = lambda _msg: None) -> tuple[list[BenchmarkOutcome], list[ValidationOutcome] | None]:
    """The suite's pipelines and, with cfg.validate, their validation: on the Dask cluster cfg.scheduler
    names (one task graph), or in cfg.jobs local processes (the pipelines, then the validations)."""
    if cfg.scheduler is None:
        return run_suite(cfg, show_progress), run_validation(cfg, show_progress) if cfg.validate else None
    return _on_cluster(cfg, show_progress, say)


def _on_cluster(cfg: SuiteConfig, show_progress: bool, say: Callable[[str], None]
                ) -> tuple[list[BenchmarkOutcome], list[ValidationOutcome] | None]:
    """run_suite_and_validation on Dask: one job per benchmark and size, its folders on absolute paths
    (the workers may start in another folder, on other hosts that see the same file system)."""
    from pptmc.cluster import open_cluster, parse_scheduler
    from pptmc.dask_suite import Job, TaskFunctions, run_jobs

    shared = dataclasses.replace(cfg, outdir=cfg.outdir.resolve())
    items = size_tasks(shared)
    jobs = [Job(label(shared, bench.name, scfg.size), pipeline_config(scfg, bench),
                (scfg, bench) if cfg.validate else None) for scfg, bench in items]
    with open_cluster(parse_scheduler(cfg.scheduler), cfg.cluster_config, say) as client:
        run_jobs(client, jobs, TaskFunctions(validate=_validate_one), show_progress, _failed_validation)
    outcomes = [BenchmarkOutcome(job.cfg.source.stem, job.result, job.error, size=scfg.size)
                for job, (scfg, _) in zip(jobs, items)]
    return outcomes, [job.validation for job in jobs] if cfg.validate else None


def _failed_validation(job: Job, error: str) -> ValidationOutcome:
    """The outcome of a validation task that did not run to its end (its worker died, or it was refused)."""
    scfg, bench = job.validate_args
    return ValidationOutcome(bench.name, None, error, size=scfg.size)


def run_measurement(cfg: SuiteConfig, say=lambda _msg: None) -> pd.DataFrame:
    """Native region times on this host against the predictions from its machine file, one benchmark
    at a time (timings must not disturb each other)."""
    from pptmc.measure import cached_host_machine, validate_runtimes

    machine = cached_host_machine(cfg.outdir, cfg.host_machine, say=say)
    threads = tuple(t for t in cfg.measure_threads if t <= machine.cores)
    return validate_runtimes(select_benchmarks(cfg), cfg.measure_size, threads, cfg.outdir, machine,
                             progress=say, options=cfg.options)


def combine(outcomes: list[BenchmarkOutcome]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Suite-wide hit-rate, runtime and status tables, each with the benchmark's size."""
    hits = [o.result.hit_rates.assign(benchmark=o.name, size=o.size) for o in outcomes if o.result]
    runs = [o.result.runtimes.assign(benchmark=o.name, size=o.size) for o in outcomes if o.result]
    status = pd.DataFrame([{
        "benchmark": o.name, "size": o.size, "ok": o.error is None, "error": o.error or "",
        "accesses": o.result.n_accesses if o.result else 0,
        "trace_complete": o.result.trace_complete if o.result else None,
        **({f"seconds_{k}": round(v, 3) for k, v in o.result.timings.items()} if o.result else {}),
    } for o in outcomes])
    return (pd.concat(hits, ignore_index=True) if hits else pd.DataFrame(),
            pd.concat(runs, ignore_index=True) if runs else pd.DataFrame(), status)


def _write_tables(outdir: Path, tables: dict[str, pd.DataFrame]) -> list[str]:
    """Each table as CSV, and as Parquet when it has rows; the names of the files written."""
    written = []
    for name, table in tables.items():
        write_table(table, outdir / f"{name}.csv")
        written.append(f"{name}.csv")
        if not table.empty:
            write_table(table, outdir / f"{name}.parquet")
            written.append(f"{name}.parquet")
    return written


def validation_tables(outcomes: list[ValidationOutcome]) -> dict[str, pd.DataFrame]:
    """All predicted-vs-ground-truth rows, the accuracy summary and the >3 pp outliers, size by size."""
    from analysis.validate.compare import accuracy_summary, outliers

    frames = [o.table for o in outcomes if o.table is not None and not o.table.empty]
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if rows.empty:
        return {"validation": rows}
    return {"validation": rows, "validation_accuracy": _per_size(accuracy_summary, rows),
            "validation_outliers": _per_size(outliers, rows)}


def _per_size(summary: Callable[[pd.DataFrame], pd.DataFrame], rows: pd.DataFrame) -> pd.DataFrame:
    """summary(rows) of each size apart, with the size as the first column (sizes never pool)."""
    parts = [summary(group).drop(columns="size", errors="ignore").assign(size=size)
             for size, group in rows.groupby("size", sort=False)]
    table = pd.concat(parts, ignore_index=True)
    return table[["size", *(c for c in table.columns if c != "size")]]


def _labelled(cfg: SuiteConfig, table: pd.DataFrame) -> pd.DataFrame:
    """The table with each benchmark named by its label (figures group rows by benchmark alone)."""
    if table.empty or not {"benchmark", "size"} <= set(table.columns):
        return table
    return table.assign(benchmark=[label(cfg, b, s) for b, s in zip(table["benchmark"], table["size"])])


def _validation_section(outdir: Path, tables: dict[str, pd.DataFrame]):
    from pptmc.report import ReportSection
    from analysis.validate.report import write_validation_figures

    rows = tables["validation"].drop(columns="size", errors="ignore")
    figures = write_validation_figures(rows, outdir / "figures" / "validation") if not rows.empty else []
    return ReportSection("Validation: predicted vs simulated ground truth (analysis/VALIDATION.md)",
                         figures=[(p.stem, p) for p in figures],
                         tables=[(name, t) for name, t in tables.items() if name != "validation"])


def _measurement_section(outdir: Path, tables: dict[str, pd.DataFrame]):
    from pptmc.report import ReportSection
    from pptmc.measure import write_runtime_figure

    rows = tables["runtime_validation"]
    figure = write_runtime_figure(rows, outdir / "figures" / "runtime_validation.png")
    return ReportSection("Runtime: predicted vs measured on this host", figures=[("predicted vs measured", figure)],
                         tables=[(name, t) for name, t in tables.items()])


def write_results(cfg: SuiteConfig, outcomes: list[BenchmarkOutcome],
                  validation: list[ValidationOutcome] | None = None,
                  measured: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """Write the tables (CSV and Parquet), then the figures and index.html built from them, then
    results.json naming them all (common/manifest.py); the old one goes first, so a suite stopped
    mid-write leaves none and readers call its results incomplete."""
    from common.manifest import RESULTS
    from pptmc import report

    (cfg.outdir / RESULTS).unlink(missing_ok=True)
    hits, runs, status = combine(outcomes)
    if validation is not None:
        errors = {(o.name, o.size): o.error for o in validation}
        status["validation"] = [("FAILED: " + errors[k]) if errors.get(k) else "ok"
                                for k in zip(status["benchmark"], status["size"])]
    tables = {"hit_rates": hits, "runtimes": runs, "status": status}
    written = _write_tables(cfg.outdir, tables)
    sections = []
    if validation is not None:
        vtables = validation_tables(validation)
        written += _write_tables(cfg.outdir, vtables)
        sections.append(_validation_section(cfg.outdir, {k: _labelled(cfg, v) for k, v in vtables.items()}))
        tables.update(vtables)
    if measured is not None:
        from pptmc.measure import runtime_summary

        mtables = {"runtime_validation": measured, "runtime_summary": runtime_summary(measured)}
        written += _write_tables(cfg.outdir, mtables)
        sections.append(_measurement_section(cfg.outdir, mtables))
        tables.update(mtables)
    profile_dirs = {label(cfg, o.name, o.size): o.result.profiles_dir for o in outcomes if o.result}
    write_json(cfg.outdir / "model.json", cfg.options.as_dict())
    index = report.write_report(cfg.outdir, _labelled(cfg, hits), _labelled(cfg, runs), status, profile_dirs,
                                extra=sections, model=cfg.options.describe())
    _write_suite_manifest(cfg, outcomes, [*written, "model.json", *_report_files(index), index.name])
    return tables


def _report_files(index: Path) -> list[str]:
    """The figures index.html shows (not older ones left in figures/), relative to its folder."""
    import re

    return list(dict.fromkeys(re.findall(r"<img src='([^']+)'", index.read_text())))


def _write_suite_manifest(cfg: SuiteConfig, outcomes: list[BenchmarkOutcome], names: list[str]) -> None:
    """results.json over the suite's tables and report, written last; its inputs name each benchmark's
    run (the run id of its work folder's results.json) and the suite's parameters."""
    from common.manifest import RESULTS, read_manifest, write_manifest

    runs = {}
    for o in outcomes:
        if o.result is not None:
            workdir = o.result.trace_path.parent.parent  # <workdir>/trace/<name>.pptrace
            record = read_manifest(workdir, RESULTS, "rerun `pptmc suite`")
            runs[label(cfg, o.name, o.size)] = record.get("run_id") if record else None
    inputs = {"sizes": list(suite_sizes(cfg)), "machines": list(cfg.machines), "cores": list(cfg.cores),
              "model": cfg.options.as_dict(), "benchmark_runs": runs}
    write_manifest(cfg.outdir, "pptmc suite results", files=names, name=RESULTS, inputs=inputs)
