"""`pptmc measure`: measure native region times on this host and compare with the runtime model."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pptmc.commands.args import add_model_options, model_options, parse_counts
from common.errors import InputError
from common.io import write_json, write_table

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


def _check_size(size: str) -> str:
    from benchmarks.polybench.catalog import SIZES

    key = size.strip().upper()
    if key not in SIZES:
        raise InputError(f"--size {size!r}: unknown; choose one of {', '.join(SIZES)}")
    return key


def run_measure(args: argparse.Namespace) -> int:
    """Measure, predict, join, and write the validation table, summary and figure."""
    from pptmc.measure import runtime_summary, validate_runtimes, write_runtime_figure

    say = (lambda msg: print(f"measure: {msg}", file=sys.stderr, flush=True))
    threads = parse_threads(args.threads)
    size = _check_size(args.size)
    benches = select(args.benchmarks)
    if args.repeats < 1:
        raise InputError(f"--repeats {args.repeats}: give at least 1")
    outdir = Path(args.output)
    machine = host_machine(args, outdir, say)
    options = model_options(args)
    say(f"model: {options.describe()}")
    df = validate_runtimes(benches, size, threads, outdir, machine, repeats=args.repeats, progress=say,
                           options=options, pin=not args.no_pin)
    summary = runtime_summary(df)
    for ext in ("csv", "parquet"):
        write_table(df, outdir / f"runtime_validation.{ext}")
    write_table(summary, outdir / "runtime_summary.csv")
    write_runtime_figure(df, outdir / "runtime_validation.png")
    write_json(outdir / "runtime_validation.json", {"machine": machine.name, "size": size,
                                                    "model": options.as_dict(),
                                                    "rows": df.to_dict("records"),
                                                    "summary": summary.to_dict("records")})
    if args.json:
        print(json.dumps({"rows": df.to_dict("records"), "summary": summary.to_dict("records")}, indent=2))
    else:
        print(_format(df, summary, machine.name, size))
    return 0


def _format(df, summary, machine: str, size: str) -> str:
    """The validation table and summary as text."""
    cols = ["benchmark", "cores", "measured_s", "measured_min_s", "predicted_s", "t_mem_s", "t_cpu_s",
            "t_incore_s", "t_tlb_s", "t_coherence_s", "t_overhead_s", "contention_s", "rel_error"]
    head = f"runtime validation on {machine}, size {size} (times in seconds, rel_error vs the median)"
    return "\n".join([head, df[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"), "",
                      summary.to_string(index=False, float_format=lambda v: f"{v:.3f}")])


def register(subparsers) -> None:
    """Add `pptmc measure`."""
    from benchmarks.polybench.catalog import MEASURE_SIZE as DEFAULT_SIZE

    p = subparsers.add_parser("measure", help="measure region times on this host and compare with predictions")
    p.add_argument("--benchmarks", help="comma-separated catalog names (default: all 14)")
    p.add_argument("--size", default=DEFAULT_SIZE, help=f"dataset size (default {DEFAULT_SIZE})")
    p.add_argument("--threads", default="1,2", help="comma-separated OpenMP thread counts (default 1,2)")
    p.add_argument("--repeats", type=int, default=5, help="runs per thread count; median, min, max kept")
    p.add_argument("--machine", help="machine file or shipped name (default: detect this host once, cached in DIR)")
    p.add_argument("--detect", action="store_true", help="re-detect the host machine file even if DIR has one")
    p.add_argument("--no-pin", action="store_true",
                   help="leave thread placement to the OS (default: OMP_PROC_BIND=close, OMP_PLACES=cores "
                        "unless the environment sets them)")
    add_model_options(p)
    p.add_argument("-o", "--output", required=True, help="directory for tables, figure, traces and builds")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.set_defaults(run=run_measure)
