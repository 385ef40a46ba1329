"""Whole-pipeline commands: `pptmc run` for one program and `pptmc suite` for the PolyBench suite."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pptmc.commands.args import add_model_options, add_strict, check_complete, model_options, parse_cores
from common.errors import InputError

if TYPE_CHECKING:  # pandas loads in ~0.3 s: only the commands that run import it
    import pandas as pd

    from pptmc.suite import SuiteConfig

DEFAULT_MACHINES = "haswell-i7-5960x,broadwell-e5-2699v4,zen2-epyc-7702p"


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def checked_machines(text: str) -> tuple[str, ...]:
    """The --machines names, each loaded once before any work starts (a bad name fails in a second,
    not after translate, instrument, trace and profile)."""
    from machines import load_machine

    names = _names(text)
    if not names:
        raise InputError("--machines: give at least one machine name or file (see pptmc machines list)")
    for name in names:
        load_machine(name)
    return names


def checked_output_folder(text: str) -> Path:
    """-o must name a folder (or nothing yet): checked before any work starts."""
    out = Path(text)
    if out.exists() and not out.is_dir():
        raise InputError(f"-o {out}: a file of that name exists; give a folder for the results")
    return out


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--machines", default=DEFAULT_MACHINES, help="comma-separated machine names or files")
    parser.add_argument("--cores", default="1,2,4,8,16", help="core counts, e.g. 1,2,4,8,16")
    add_model_options(parser)
    add_strict(parser)
    parser.add_argument("--json", action="store_true", help="print machine-readable results")


def summary_table(hits: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (benchmark, size, machine, cores): cumulative hit rate per level and predicted runtime."""
    import pandas as pd

    if hits.empty:
        return pd.DataFrame()
    keys = [k for k in ("benchmark", "size", "machine", "cores") if k in hits.columns]
    wide = hits.pivot_table(index=keys, columns="level", values="cumulative_hit_rate").reset_index()
    wide.columns = [c if c in keys else f"{c}_hit" for c in wide.columns]
    if not runs.empty and "runtime_s" in runs.columns:
        wide = wide.merge(runs[keys + ["runtime_s"]], on=keys, how="left")
    return wide


def program_files(args: argparse.Namespace) -> tuple[list[Path], list[str], list[str], list[str]]:
    """The program's C files, include folders, macros and arguments: the positionals ending in .c (or the
    compilation database's files) are the program's files, the rest and what follows `--` its arguments."""
    from instrument.compile_commands import read_compile_commands

    cut = len(args.program_args) - getattr(args, "after_dashes", 0)
    before, after = args.program_args[:cut], args.program_args[cut:]
    files = [Path(p) for p in before if p.endswith(".c")]
    rest = [p for p in before if not p.endswith(".c")] + after
    includes, defines = list(args.include), list(args.define)
    if args.compile_commands:
        db = read_compile_commands(Path(args.compile_commands))
        files += [f for f in db.sources if f not in files]
        includes += [str(d) for d in db.include_dirs]
        defines += list(db.defines)
    if not files:
        raise InputError("pptmc run: give the program's C file(s), or --compile-commands compile_commands.json")
    for f in files:
        if not f.is_file():
            raise InputError(f"{f}: no such file; give the path of an OpenMP C program")
    return files, includes, defines, rest


def run_program(args: argparse.Namespace) -> int:
    """`pptmc run`: the whole pipeline for one program (one C file, or several)."""
    from pptmc.pipeline import PipelineConfig, run_pipeline

    files, includes, defines, program_args = program_files(args)
    source = files[0]
    cfg = PipelineConfig(
        source=source, more_sources=tuple(files[1:]), workdir=checked_output_folder(args.output),
        args=tuple(program_args), include_dirs=tuple(Path(d) for d in includes), defines=tuple(defines),
        extra_sources=tuple(Path(s) for s in args.extra_source), machines=checked_machines(args.machines),
        cores=tuple(parse_cores(args.cores)), options=model_options(args), dram_traffic=args.dram_traffic)
    print(f"[pptmc] model: {cfg.options.describe()}", file=sys.stderr)
    result = run_pipeline(cfg, progress=lambda step: print(f"[pptmc] {source.name}: {step}", file=sys.stderr),
                          bars=not args.json)
    check_complete(result.trace_complete, source.name, args)
    table = summary_table(result.hit_rates, result.runtimes)
    print(table.to_json(orient="records", indent=2) if args.json else table.to_string(index=False))
    return 0


def parse_sizes(text: str | None, validate: bool) -> tuple[str, ...]:
    """--size's comma list, canonical and checked before any work starts; without it MINI, and with
    --validate also POW2 (the power-of-two variants, for the kernels that have one)."""
    from benchmarks.polybench.catalog import size_macro

    if text is None:
        return ("MINI", "POW2") if validate else ("MINI",)
    names = _names(text)
    if not names:
        raise InputError("--size: give one or more dataset sizes, e.g. MINI or MINI,POW2")
    try:
        return tuple(dict.fromkeys(size_macro(n).removesuffix("_DATASET") for n in names))
    except InputError as exc:
        raise InputError(f"--size: {exc}") from None


def suite_config(args: argparse.Namespace) -> "SuiteConfig":
    """The suite's configuration from its command line."""
    from benchmarks.polybench.catalog import sizes_of
    from pptmc.suite import SuiteConfig, select_benchmarks, size_tasks

    sizes = parse_sizes(args.size, args.validate)
    scheduler, cluster_config = checked_scheduler(args)
    cfg = SuiteConfig(outdir=checked_output_folder(args.output), size=sizes[0], sizes=sizes,
                       benchmarks=_names(args.benchmarks or ""), machines=checked_machines(args.machines), cores=tuple(parse_cores(args.cores)),
                       jobs=args.jobs or 1, scheduler=scheduler, cluster_config=cluster_config,
                       options=model_options(args), validate=args.validate, measure=args.measure,
                       measure_size=args.measure_size, measure_threads=tuple(parse_cores(args.measure_threads, "--measure-threads")),
                       host_machine=args.host_machine)
    if args.size is None:  # the default adds POW2 only where a selected benchmark has it
        have = {s for bench in select_benchmarks(cfg) for s in sizes_of(bench)}
        cfg = dataclasses.replace(cfg, sizes=tuple(s for s in sizes if s in have))
    size_tasks(cfg)  # a size no selected benchmark has fails now, not after the first pipelines
    return cfg


def checked_scheduler(args: argparse.Namespace) -> tuple[str | None, Path | None]:
    """--scheduler (default `local`: a Dask cluster on this machine) or --jobs (local processes, no Dask),
    and --cluster-config, checked before any work starts; a batch system's config file is read now."""
    from pptmc.cluster import (BATCH_SYSTEMS, DEFAULT_CLUSTER_CONFIG, check_batch_system, parse_scheduler,
                               read_cluster_config)

    if args.jobs is not None and args.scheduler is not None:
        raise InputError("--jobs runs local processes and --scheduler a Dask cluster: give one of them")
    if args.jobs is not None and args.jobs < 1:
        raise InputError(f"--jobs {args.jobs}: give a positive number of processes")
    if args.jobs is not None:
        scheduler = None
    else:
        scheduler = args.scheduler or "local"
        spec = parse_scheduler(scheduler)
    config = Path(args.cluster_config) if args.cluster_config else None
    if scheduler is None or spec.kind not in BATCH_SYSTEMS:
        if config is not None:
            raise InputError("--cluster-config: only --scheduler slurm or pbs reads a cluster file")
        return scheduler, None
    config = config or Path(DEFAULT_CLUSTER_CONFIG)
    read_cluster_config(config, spec.kind)
    check_batch_system(spec.kind)
    return scheduler, config


def run_suite_command(args: argparse.Namespace) -> int:
    """`pptmc suite`: every benchmark, tables + figures + index.html; non-zero if any benchmark failed."""
    from pptmc.suite import label, run_measurement, run_suite_and_validation, write_results

    from common.locks import folder_lock

    cfg = suite_config(args)
    _stderr(f"model: {cfg.options.describe()}")
    with folder_lock(cfg.outdir):
        outcomes, validation = run_suite_and_validation(cfg, show_progress=not args.json, say=_stderr)
        measured = run_measurement(cfg, say=_stderr) if cfg.measure else None
        tables = write_results(cfg, outcomes, validation, measured)
    failed = {label(cfg, o.name, o.size): o.error for o in outcomes if o.error}
    failed |= {f"{label(cfg, o.name, o.size)} (validate)": o.error for o in validation or () if o.error}
    if measured is not None and "error" in measured:
        failed |= {f"{b} (measure)": e for b, e in zip(measured["benchmark"], measured["error"]) if e}
    summary = summary_table(tables["hit_rates"], tables["runtimes"])
    if args.json:
        extra = {k: tables[k].to_dict(orient="records") for k in ("validation_accuracy", "runtime_summary")
                 if k in tables}
        print(json.dumps({"results": summary.to_dict(orient="records"), **extra, "failures": failed},
                         indent=2, default=str))
    else:
        _print_suite_report(summary, tables, failed, cfg.outdir)
    return 1 if failed else 0


def _stderr(message: str) -> None:
    print(f"[pptmc] {message}", file=sys.stderr)


def _print_suite_report(summary: pd.DataFrame, tables: dict[str, pd.DataFrame], failed: dict[str, str],
                        outdir: Path) -> None:
    """The summary table, then validation and measurement summaries when present, then failures."""
    import pandas as pd

    with pd.option_context("display.max_rows", None, "display.width", 200):
        print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        for name, title in (("validation_accuracy", "hit-rate error vs ground truth (percentage points)"),
                            ("runtime_summary", "runtime error vs measured on this host")):
            if name in tables and not tables[name].empty:
                print(f"\n{title}:\n" + tables[name].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for name, error in failed.items():
        print(f"\nFAILED {name}: {error}", file=sys.stderr)
    print(f"\nresults: {outdir / 'index.html'}")


def register(sub) -> None:
    """Add `run` and `suite` to the pptmc command line."""
    run = sub.add_parser("run", help="whole pipeline for one OpenMP C file: translate, instrument, trace, profile, predict")
    run.add_argument("-o", "--output", default="pptmc-out", help="work and results folder")
    run.add_argument("-I", dest="include", action="append", default=[], help="include folder")
    run.add_argument("-D", dest="define", action="append", default=[], help="preprocessor define NAME[=VAL]")
    run.add_argument("--extra-source", action="append", default=[],
                     help="C file linked as it is, never translated or traced (a harness)")
    run.add_argument("--compile-commands", metavar="JSON",
                     help="take the program's C files, -I and -D from a compilation database")
    run.add_argument("--dram-traffic", action="store_true",
                     help="also predict the bytes read from and written back to DRAM per core count "
                          "(dram_traffic.csv; one more pass over the trace)")
    _add_model_options(run)
    run.add_argument("program_args", nargs="*", metavar="FILE.c ... [-- ARGS]",
                     help="the program's C files (the first names it), then its arguments after --")
    run.set_defaults(run=run_program)

    suite = sub.add_parser("suite", help="the paper's experiment over the built-in PolyBench suite")
    suite.add_argument("--benchmarks", default="", help="comma-separated names (default: all)")
    suite.add_argument("--size", "--sizes", dest="size", default=None, metavar="SIZE[,SIZE...]",
                       help="dataset sizes, comma-separated: MINI, SMALL, MEDIUM, LARGE, EXTRALARGE, PAPER, or POW2 "
                            "(power-of-two variants of the kernels that walk matrices down columns: "
                            "benchmarks/polybench/README.md); each benchmark runs at each listed size it has, and "
                            "every table has a `size` column (default: MINI, and with --validate MINI,POW2)")
    suite.add_argument("-o", "--output", default="results/suite", help="results folder")
    suite.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                       help="run N benchmarks at a time in local processes, without Dask (default: Dask, "
                            "--scheduler local)")
    suite.add_argument("--scheduler", default=None, metavar="WHERE",
                       help="the Dask cluster the tasks run on: local (default: one worker per core of this "
                            "machine), local:N (N workers), tcp://HOST:PORT (a running scheduler whose workers "
                            "see the -o folder), slurm or pbs (workers started as batch jobs, with the queue "
                            "options of --cluster-config); README.md, \"Running on a cluster\"")
    suite.add_argument("--cluster-config", default=None, metavar="FILE",
                       help="TOML file with a [slurm] or [pbs] table of queue options for --scheduler slurm|pbs "
                            "(default: ./pptmc-cluster.toml)")
    suite.add_argument("--validate", action="store_true",
                       help="also compare hit rates with the simulated ground truth (analysis/VALIDATION.md)")
    suite.add_argument("--measure", action="store_true",
                       help="also time the native programs on this host and compare with the predictions")
    suite.add_argument("--measure-size", default="MEDIUM", choices=("MINI", "SMALL", "MEDIUM", "LARGE"),
                       help="dataset size for --measure (default MEDIUM: regions long enough to time)")
    suite.add_argument("--measure-threads", default="1,2", help="thread counts for --measure (default 1,2)")
    suite.add_argument("--host-machine", help="machine file of this host for --measure (default: detect once "
                                              "into the results folder)")
    _add_model_options(suite)
    suite.set_defaults(run=run_suite_command)
