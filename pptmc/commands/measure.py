"""`pptmc measure`: measure native region times on this host and compare with the runtime model."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pptmc.commands.args import add_model_options, model_options, parse_counts
from common.errors import InputError
from common.io import write_json, write_table

if TYPE_CHECKING:
    from machines.model import Machine

def parse_threads(text: str) -> tuple[int, ...]:
    """'1,2' -> (1, 2); a clear error for anything else."""
    return tuple(parse_counts(text, "--threads", "1,2"))


def select(names: str | None):
    """Catalog benchmarks named in --benchmarks (all when None), in catalog order."""
    from pptmc.suite import SuiteConfig, select_benchmarks

    wanted = tuple(n.strip() for n in (names or "").split(",") if n.strip())
    return select_benchmarks(SuiteConfig(outdir=Path("."), benchmarks=wanted))


def host_machine(args: argparse.Namespace, outdir: Path, say):
    """--machine if given; else the host file cached in DIR, detected once (again with --detect)."""
    from pptmc.measure import cached_host_machine

    return cached_host_machine(outdir, args.machine, args.detect, say)


def check_size(size: str, benches=()) -> str:
    """A dataset size name, upper-cased, that every one of `benches` defines; InputError listing the sizes
    otherwise (POW2 exists only for the kernels that walk matrices down their columns)."""
    from benchmarks.polybench import catalog

    key = size.strip().upper()
    if key not in catalog.ALL_SIZES:
        raise InputError(f"--size {size!r}: unknown; choose one of {', '.join(catalog.ALL_SIZES)}")
    for bench in benches:
        catalog.check_size(bench, key)
    return key


def run_measure(args: argparse.Namespace) -> int:
    """Measure (or take a probe kit's times), predict, join, and write the validation table, summary and figures."""
    say = (lambda msg: print(f"measure: {msg}", file=sys.stderr, flush=True))
    if args.repeats < 1:
        raise InputError(f"--repeats {args.repeats}: give at least 1")
    outdir = Path(args.output)
    options = model_options(args)
    if args.ingest:
        df, machine, size = _ingested(args, outdir, options, say)
    else:
        from pptmc.measure import validate_runtimes

        threads = parse_threads(args.threads or "1,2")
        benches = select(args.benchmarks)
        size = check_size(args.size, benches)
        machine = host_machine(args, outdir, say)
        say(f"model: {options.describe()}")
        df = validate_runtimes(benches, size, threads, outdir, machine, repeats=args.repeats, progress=say,
                               options=options, pin=not args.no_pin)
    return _report(df, outdir, machine, size, options, args.json)


def _ingested(args: argparse.Namespace, outdir: Path, options, say) -> tuple:
    """(table, machine, size) for a probe kit's results: its times against predictions on --machine, or on
    the machine file its own microbenchmark figures make (as `pptmc machines ingest`)."""
    from machines import load_machine
    from machines.loader import validate_machine_dict
    from pptmc.measure import compare_runtimes
    from pptmc.probekit import ingested_runs, load_results, results_machine

    res = load_results(Path(args.ingest))
    size = res.native["size"]
    benches, threads, measured = ingested_runs(res, select, args.benchmarks,
                                               parse_threads(args.threads) if args.threads else None)
    machine = (load_machine(args.machine) if args.machine
               else validate_machine_dict(results_machine(res), str(res.path / "probes.json")))
    say(f"{res.path}: {len(benches)} benchmarks at {size} on {','.join(map(str, threads))} threads, measured on "
        f"{res.record['host']['model_name']}; predicting on {machine.name}; model: {options.describe()}")
    return compare_runtimes(benches, measured, size, threads, outdir, machine, options, say), machine, size


def _report(df, outdir: Path, machine: "Machine", size: str, options, as_json: bool) -> int:
    """Write the tables and figures into outdir and print the table (or JSON), naming the machine's curves
    that did not settle."""
    from analysis.runtime.terms.core_curves import unsettled_curves
    from pptmc.measure import runtime_summary, write_runtime_figure, write_speedup_figure

    summary = runtime_summary(df)
    for ext in ("csv", "parquet"):
        write_table(df, outdir / f"runtime_validation.{ext}")
    write_table(summary, outdir / "runtime_summary.csv")
    write_runtime_figure(df, outdir / "runtime_validation.png")
    if df["measured_speedup"].notna().any() and df["cores"].nunique() > 1:
        write_speedup_figure(df, outdir / "runtime_speedup.png")
    unsettled = unsettled_curves(machine)
    write_json(outdir / "runtime_validation.json", {"machine": machine.name, "size": size, "model": options.as_dict(),
                                                    "unsettled_curves": unsettled, "rows": df.to_dict("records"),
                                                    "summary": summary.to_dict("records")})
    if as_json:
        print(json.dumps({"rows": df.to_dict("records"), "summary": summary.to_dict("records"),
                          "unsettled_curves": unsettled}, indent=2))
    else:
        print(_format(df, summary, machine.name, size, unsettled))
    return 0


def _format(df, summary, machine: str, size: str, unsettled: list[str]) -> str:
    """The validation table and summary as text, and the curves that did not settle."""
    cols = ["benchmark", "cores", "measured_s", "measured_min_s", "predicted_s", "t_mem_s", "t_cpu_s",
            "t_incore_s", "t_tlb_s", "t_coherence_s", "t_overhead_s", "contention_s", "rel_error",
            "measured_noise", "measured_speedup", "predicted_speedup"]
    head = f"runtime validation on {machine}, size {size} (times in seconds, rel_error vs the median)"
    note = ([f"machine curves whose repeats did not agree within 5% (the predictions are that uncertain): "
             f"{'; '.join(unsettled)}"] if unsettled else [])
    return "\n".join([head, df[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"), "",
                      summary.to_string(index=False, float_format=lambda v: f"{v:.3f}"), *note])


def register(subparsers) -> None:
    """Add `pptmc measure`."""
    from benchmarks.polybench.catalog import MEASURE_SIZE as DEFAULT_SIZE

    p = subparsers.add_parser("measure", help="measure region times on this host and compare with predictions")
    p.add_argument("--benchmarks", help="comma-separated catalog names (default: all 14)")
    p.add_argument("--size", default=DEFAULT_SIZE, help=f"dataset size (default {DEFAULT_SIZE})")
    p.add_argument("--threads", help="comma-separated OpenMP thread counts, any up to the machine's cores (default "
                                     "1,2; with --ingest, those the results have)")
    p.add_argument("--repeats", type=int, default=5, help="runs per thread count; median, min, max kept")
    p.add_argument("--machine", help="machine file or shipped name (default: detect this host once, cached in DIR; "
                                     "with --ingest, the machine file of the results' own figures)")
    p.add_argument("--ingest", metavar="RESULTS",
                   help="compare with the native times a probe kit measured (python3 KIT/run.py -o RESULTS) instead "
                        "of measuring here; --size, --repeats and --no-pin do not apply")
    p.add_argument("--detect", action="store_true", help="re-detect the host machine file even if DIR has one")
    p.add_argument("--no-pin", action="store_true",
                   help="leave thread placement to the OS (default: OMP_PROC_BIND=close, OMP_PLACES=cores "
                        "unless the environment sets them)")
    add_model_options(p)
    p.add_argument("-o", "--output", required=True, help="directory for tables, figure, traces and builds")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.set_defaults(run=run_measure)
