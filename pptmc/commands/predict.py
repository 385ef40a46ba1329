"""`pptmc predict`: one trace and one machine in, hit rates and runtimes per core count out (analysis/predict.py)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pptmc.commands.args import add_model_options, add_strict, check_complete, check_pieces, model_options, parse_cores
from common.errors import InputError
from common.io import write_json, write_table

_TIMES = (("t_mem_s", "T_mem[s]"), ("t_cpu_s", "T_CPU[s]"), ("t_incore_s", "of which in-core[s]"),
          ("t_tlb_s", "T_TLB[s]"), ("t_coherence_s", "T_coh[s]"), ("t_strided_s", "T_walk[s]"),
          ("contention_s", "contention[s]"), ("t_overhead_s", "overhead[s]"), ("runtime_s", "runtime[s]"))


def _read_rates(path_text: str):
    """A hit-rate table (csv or parquet) a user gives instead of the predictor's."""
    import pandas as pd

    path = Path(path_text)
    if not path.is_file():
        raise InputError(f"{path}: hit-rate table not found")
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def direct_sources(args: argparse.Namespace, machine, cores: list[int], options):
    """The trace's facts computed on the spot (no cache): profiles, trace terms, page profiles."""
    from analysis.hitrates.rates import profile_needs
    from analysis.predict import RegionSources
    from analysis.profiles.sweep import compute_profiles
    from analysis.runtime.tlb import page_profiles
    from analysis.runtime.trace_terms import trace_terms

    trace = Path(args.trace)
    table = _read_rates(args.hit_rate_table) if args.hit_rate_table else None
    profiles = None if table is not None else compute_profiles(
        trace, cores, mode=options.mode, interleave=options.interleave, seed=options.seed,
        line_size=machine.line_bytes, coherence=options.coherence,
        **profile_needs([machine], cores, options.hit_rates, options.placement)._asdict())
    return RegionSources(
        trace=trace, binary=Path(args.binary) if args.binary else None, profiles=profiles,
        terms_for=lambda m: trace_terms(trace, m, options.cpu_form),
        page_profiles_for=lambda page: page_profiles(trace, cores, page, options.mode, options.interleave,
                                                     options.seed),
        hit_rate_table=table)


def format_table(runtimes, levels: list[str]) -> str:
    """Fixed-width text table: cores, local/cumulative hit rate per level, times."""
    head = ["cores"] + [f"{lv} hit(loc/cum)" for lv in levels] + [h for _, h in _TIMES]
    rows = [[str(int(r["cores"]))]
            + [f"{r[f'{lv}_local_hit_rate']:.4f}/{r[f'{lv}_cumulative_hit_rate']:.4f}" for lv in levels]
            + [f"{r[key]:.4g}" for key, _ in _TIMES] for r in runtimes.to_dict("records")]
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(r, widths)) for r in [head] + rows)


def format_explanation(table) -> str:
    """Per core count: each term's seconds and share of the runtime, the binding one marked."""
    lines = []
    for cores, part in table.groupby("cores", sort=True):
        lines.append(f"{int(cores)} cores:")
        lines += [f"  {'*' if r.binds else ' '} {r.term:<11s} {r.seconds:12.4g} s  {100 * r.share:6.1f} %"
                  for r in part.itertuples()]
    return "\n".join(lines + ["(* binds: the largest term, or contention when the DRAM floor is reached)"])


def run_predict(args: argparse.Namespace) -> int:
    """Predict, print, and write predictions.{csv,json} when -o is given."""
    from analysis.predict import explain_table, predict_machine
    from machines import load_machine

    options = model_options(args)
    machine = load_machine(args.machine)
    cores = parse_cores(args.cores)
    too_many = [c for c in cores if c > machine.cores]
    if too_many:
        raise InputError(f"--cores {args.cores}: {machine.name} has {machine.cores} cores; drop "
                         f"{','.join(map(str, too_many))}")
    sources = direct_sources(args, machine, cores, options)
    complete = bool(sources.record.info.complete)
    check_complete(complete, str(args.trace), args)
    check_pieces(Path(args.trace), cores)
    pred = predict_machine(sources, machine, cores, options)
    runtimes = pred.runtimes.drop(columns="machine").assign(trace_complete=complete)
    rows = runtimes.to_dict("records")
    explained = explain_table(pred).assign(trace_complete=complete)
    if args.output:
        out = Path(args.output)
        write_table(runtimes, out / "predictions.csv")
        write_table(explained, out / "explain.csv")
        write_json(out / "predictions.json", {"machine": machine.name, "trace": str(args.trace),
                                              "trace_complete": complete, "model": options.as_dict(), "rows": rows})
        print(f"wrote {out / 'predictions.csv'}, explain.csv and predictions.json", file=sys.stderr)
    print(f"model: {options.describe()}", file=sys.stderr)
    if args.json:
        print(json.dumps({"rows": rows, "explain": explained.to_dict("records")} if args.explain else rows, indent=2))
    else:
        print(format_table(runtimes, [c.name for c in machine.caches]))
        if args.explain:
            print("\n" + format_explanation(explained))
    return 0


def register(subparsers) -> None:
    """Add `pptmc predict`."""
    p = subparsers.add_parser("predict", help="predict hit rates and runtime per core count from one trace")
    p.add_argument("trace", help="trace file written by `pptmc trace`")
    p.add_argument("--machine", required=True, help="shipped machine name (pptmc machines list) or a .toml file")
    p.add_argument("--cores", default="1,2,4,8", help="comma-separated core counts (default 1,2,4,8)")
    p.add_argument("--binary", help="instrumented binary (default: the program the trace names)")
    p.add_argument("--hit-rate-table", help="use this hit-rate table (csv/parquet with cores, level, "
                                            "local_hit_rate) instead of computing reuse profiles")
    add_model_options(p)
    p.add_argument("--block-bytes", type=float, default=None, help="contiguous block size b (default: mean access)")
    p.add_argument("--gap-bytes", type=float, default=0.0, help="gap v between blocks (non-contiguous layout)")
    p.add_argument("-o", "--output", help="directory for predictions.csv and predictions.json")
    add_strict(p)
    p.add_argument("--explain", action="store_true",
                   help="also print, per core count, each term's seconds and share and the term that binds")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of the table")
    p.set_defaults(run=run_predict)
