"""`pptmc validate`: predicted vs ground-truth hit rates of one program, per machine, core count and level."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from analysis.options import DEFAULT_OPTIONS, HIT_RATE_MODELS, INTERLEAVES, PLACEMENTS, ModelOptions
from common.errors import InputError
from pptmc.commands.args import parse_cores, seed

CHOICES = {"mode": ("iteration", "paper", "both"), "interleave": (*INTERLEAVES, "both")}
_SHORT = {"iteration": "iter", "random": "rand"}  # column labels of the printed table


@dataclass
class Program:
    """What to build and run: a C file with its include dirs, defines, harness and arguments."""

    source: Path
    include_dirs: list[Path] = field(default_factory=list)
    defines: list[str] = field(default_factory=list)
    extra_sources: list[Path] = field(default_factory=list)
    args: list[str] = field(default_factory=list)


def _add_options(p: argparse.ArgumentParser) -> None:
    """The options of `pptmc validate` (they may come before or after the program)."""
    p.add_argument("--machine", action="append", default=None, help="machine name or .toml (repeatable)")
    p.add_argument("--cores", default="1,2,4,8,16", help="comma-separated thread counts (default 1,2,4,8,16)")
    p.add_argument("--size", default=None, help="dataset size (MINI, SMALL, ...); built-ins default to SMALL")
    p.add_argument("-I", dest="include", action="append", default=None, type=Path, help="include directory")
    p.add_argument("-D", dest="define", action="append", default=None, help="preprocessor define X or X=Y")
    p.add_argument("--extra-source", action="append", default=None, type=Path,
                   help="C file linked uninstrumented (e.g. a harness)")
    p.add_argument("--mode", choices=CHOICES["mode"], default="both", help="model mode(s) (default both)")
    p.add_argument("--interleave", choices=CHOICES["interleave"], default="both",
                   help="interleaving of threads, for the model's shared trace and the ground truth (default both)")
    p.add_argument("--seed", type=seed, default=DEFAULT_OPTIONS.seed, help="seed of the random interleaving")
    p.add_argument("--hit-rates", choices=HIT_RATE_MODELS, default=DEFAULT_OPTIONS.hit_rates,
                   help=f"the model's hit-rate predictor (default {DEFAULT_OPTIONS.hit_rates})")
    p.add_argument("--no-coherence", dest="coherence", action="store_false", default=DEFAULT_OPTIONS.coherence,
                   help="the model ignores write-invalidate coherence (the ground truth always simulates it)")
    p.add_argument("--placement", choices=PLACEMENTS, default=DEFAULT_OPTIONS.placement,
                   help=f"threads on cores, as OpenMP's proc_bind, for the model and the ground truth alike (default "
                        f"{DEFAULT_OPTIONS.placement}): which instances of a cache shared by a group of cores they use")
    p.add_argument("--refs-per-turn", type=int, default=1,
                   help="ground truth: references each thread makes per merge turn (default 1, lockstep)")
    p.add_argument("-o", "--output", type=Path, default=None, help="directory for tables and figures")
    p.add_argument("--workdir", type=Path, default=None,
                   help="cache of builds and traces (default OUTPUT/work, else a temporary directory)")
    p.add_argument("--threshold", type=float, default=3.0, help="outlier threshold in points (default 3)")
    p.add_argument("--json", action="store_true", default=False, help="print JSON instead of tables")
    p.add_argument("--scheduler", default=None, metavar="WHERE",
                   help="run the ground truth's thread counts and the model's variants as Dask tasks: local "
                        "(one worker per core), local:N, tcp://HOST:PORT (a running scheduler whose workers see "
                        "--workdir), slurm or pbs (README.md, \"Running on a cluster\"); default: in this process")
    p.add_argument("--cluster-config", default=None, metavar="FILE",
                   help="TOML file of queue options for --scheduler slurm|pbs (default ./pptmc-cluster.toml)")


def register(subparsers) -> None:
    """Add `pptmc validate`."""
    p = subparsers.add_parser(
        "validate", help="compare predicted hit rates with a simulated ground truth of real multithreaded runs",
        description="Builds the original OpenMP program, traces it with N threads, merges the threads' "
                    "streams and simulates a coherent multicore hierarchy (analysis/VALIDATION.md); "
                    "compares the model's cumulative hit rates with it. Program arguments follow `--`.")
    p.add_argument("program", help="C file, or a built-in benchmark name (e.g. atax)")
    _add_options(p)
    p.add_argument("program_args", nargs="*", help="the program's arguments (after --)")
    p.set_defaults(run=run_validate)


def resolve_program(a: argparse.Namespace, prog_args: list[str]) -> Program:
    """A built-in benchmark (bare name or a file under benchmarks/polybench) or a user C file."""
    from benchmarks.polybench.catalog import DEFAULT_SIZE, HERE, by_name, size_macro

    path = Path(a.program)
    bench = None
    if path.is_file() and path.resolve().parent == HERE and path.suffix == ".c":
        bench = by_name(path.stem)
    elif not path.exists() and path.suffix != ".c":
        bench = by_name(a.program)
    elif not path.is_file():
        raise InputError(f"{path}: no such C file (or give a built-in benchmark name such as atax)")
    defines = list(a.define or [])
    if bench is not None:
        defines.append(size_macro(a.size or DEFAULT_SIZE))
        return Program(bench.source, [bench.include_dir, *(a.include or [])], defines,
                       [*bench.harness_sources, *(a.extra_source or [])], [*bench.args, *prog_args])
    if a.size:
        defines.append(size_macro(a.size))
    for f in a.extra_source or []:
        if not Path(f).is_file():
            raise InputError(f"--extra-source {f}: no such file")
    return Program(path, list(a.include or []), defines, list(a.extra_source or []), prog_args)


def _both(value: str, all_: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v for v in all_ if v != "both") if value == "both" else (value,)


def format_rows(df) -> str:
    """One line per machine / cores / level: the ground truth per interleave, then the prediction and its error
    (pp) per mode and interleave (iter-rr = iteration mode, round-robin); then the mean error per level."""
    import pandas as pd

    keys = ["machine", "cores", "level"]
    truth = df.pivot_table(index=keys, columns="interleave", values="ground_truth", aggfunc="first")
    truth.columns = [f"truth {c}" for c in truth.columns]
    parts = [truth]
    for (mode, inter), g in df.groupby(["mode", "interleave"]):
        part = g.set_index(keys)[["predicted", "abs_error_pp"]]
        tag = f"{_SHORT.get(mode, mode)}-{_SHORT.get(inter, inter)}"
        part.columns = [tag, f"{tag} err_pp"]
        parts.append(part)
    wide = pd.concat(parts, axis=1).reset_index()
    fmt = {c: (lambda x: f"{x:.2f}") if c.endswith("err_pp") else (lambda x: f"{x:.4f}")
           for c in wide.columns if c not in keys}
    means = df.groupby(["level", "mode", "interleave"])["abs_error_pp"].mean().rename("mean_error_pp")
    return (wide.to_string(index=False, formatters=fmt)
            + "\n\nmean absolute error (percentage points):\n"
            + means.reset_index().to_string(index=False, float_format=lambda x: f"{x:.3f}")
            + f"\nmean over all rows: {df['abs_error_pp'].mean():.3f} pp")


def run_validate(a: argparse.Namespace) -> int:
    """Validate, print, and write the tables (and figures) to -o."""
    from analysis.validate.compare import accuracy_summary, outliers
    from pptmc.validation import validate_program

    prog_args = list(a.program_args)
    if not a.machine:
        raise InputError("pptmc validate: give at least one --machine (see pptmc machines list)")
    cores = parse_cores(a.cores)
    scheduler, cluster_config = checked_cluster(a.scheduler, a.cluster_config)
    program = resolve_program(a, prog_args)
    say = (lambda msg: print(f"[validate] {msg}", file=sys.stderr))
    options = ModelOptions(seed=a.seed, hit_rates=a.hit_rates, coherence=a.coherence, placement=a.placement)
    say(f"model: {options.describe()} (mode and interleave swept as asked)")
    with tempfile.TemporaryDirectory(prefix="pptmc-validate-") as tmp:
        workdir = a.workdir or (a.output / "work" if a.output else Path(tmp))
        df = validate_program(program.source, workdir, a.machine, cores, size_defines=tuple(program.defines),
                              args=tuple(program.args), include_dirs=tuple(program.include_dirs),
                              extra_sources=tuple(program.extra_sources), modes=_both(a.mode, CHOICES["mode"]),
                              interleaves=_both(a.interleave, CHOICES["interleave"]), progress=say,
                              options=options, refs_per_turn=a.refs_per_turn, scheduler=scheduler,
                              cluster_config=cluster_config, show_progress=not a.json)
    summary, bad = accuracy_summary(df), outliers(df, a.threshold)
    if a.output:
        _write(a.output, {"validation": df, "accuracy": summary, "outliers": bad}, say)
    if a.json:
        print(json.dumps({"rows": df.to_dict("records"), "accuracy": summary.to_dict("records"),
                          "outliers": bad.to_dict("records")}, indent=2, default=float))
        return 0
    print(format_rows(df))
    if len(bad):
        print(f"\nabove {a.threshold:g} points:")
        print(bad[["machine", "cores", "level", "mode", "interleave", "abs_error_pp", "diagnosis"]]
              .to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    return 0


def checked_cluster(scheduler: str | None, cluster_config: str | None, jobs: int | None = None
                    ) -> tuple[str | None, Path | None]:
    """--scheduler and --cluster-config checked before any work, as `pptmc suite` checks them (none: no
    cluster, the work runs in this process or --jobs' processes)."""
    from pptmc.commands.pipeline import checked_scheduler

    if scheduler is None:
        if cluster_config is not None:
            raise InputError("--cluster-config: only --scheduler slurm or pbs reads a cluster file")
        return None, None
    return checked_scheduler(argparse.Namespace(jobs=jobs, scheduler=scheduler, cluster_config=cluster_config))


def _write(out: Path, tables: dict, say) -> None:
    """Each table as CSV and Parquet, then the figures; every file atomically."""
    from analysis.validate.report import write_validation_figures
    from common.io import write_table

    for name, table in tables.items():
        write_table(table, out / f"{name}.csv")
        write_table(table, out / f"{name}.parquet")
    figs = write_validation_figures(tables["validation"], out / "figures")
    say(f"wrote {len(tables)} tables (csv, parquet) and {len(figs)} figures to {out}")
