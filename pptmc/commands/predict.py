"""`pptmc predict`: glue a trace, its block table and a machine into runtime predictions per core count."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from analysis.runtime.model import (CONTENTIONS, CPU_FORMS, LAYOUTS, RuntimePrediction, in_core_bounds,
                                    local_rates_by_cores, predict_many, region_inputs)
from analysis.runtime.trace_terms import trace_terms
from machines import Machine, load_machine
from pptmc.commands.args import parse_counts
from common.errors import InputError
from common.io import write_json, write_table

_TIMES = (("t_mem_s", "T_mem[s]"), ("t_cpu_s", "T_CPU[s]"), ("t_incore_s", "of which in-core[s]"),
          ("t_tlb_s", "T_TLB[s]"), ("t_coherence_s", "T_coh[s]"), ("t_strided_s", "T_walk[s]"),
          ("contention_s", "contention[s]"), ("t_overhead_s", "overhead[s]"), ("runtime_s", "runtime[s]"))


def parse_cores(text: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]; a clear error for anything else."""
    return parse_counts(text, "--cores")


def hit_rates_for(args: argparse.Namespace, machine: Machine, cores: list[int]):
    """The hit-rate table and the coherence-miss fractions (None when the table is read from
    --hit-rates), or both computed from the trace's reuse profiles."""
    import pandas as pd

    if args.hit_rates:
        path = Path(args.hit_rates)
        if not path.is_file():
            raise InputError(f"{path}: hit-rate table not found")
        return (pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)), None
    from analysis.hitrates.rates import coherence_miss_rates, predict_hit_rates
    from analysis.profiles.sweep import compute_profiles

    profiles = compute_profiles(args.trace, cores, line_size=machine.line_bytes, seed=args.seed)
    return predict_hit_rates(profiles, machine), coherence_miss_rates(profiles)


def tlb_rates_for(args: argparse.Namespace, machine: Machine, cores: list[int]):
    """TLB miss rates per core count from page-granular profiles of the trace (None: no [[tlbs]])."""
    if not machine.tlbs:
        return None
    from analysis.runtime.tlb import miss_rates_by_cores, page_profiles, page_sizes, tlb_miss_rates

    sets = {page: page_profiles(args.trace, cores, page, seed=args.seed) for page in page_sizes(machine)}
    return miss_rates_by_cores(tlb_miss_rates(sets, machine))


def format_table(preds: Sequence[RuntimePrediction]) -> str:
    """Fixed-width text table: cores, local/cumulative hit rate per level, times."""
    levels = list(preds[0].local_hit_rates) if preds else []
    head = ["cores"] + [f"{lv} hit(loc/cum)" for lv in levels] + [h for _, h in _TIMES]
    rows = [[str(p.cores)] + [f"{p.local_hit_rates[lv]:.4f}/{p.cumulative_hit_rates[lv]:.4f}" for lv in levels]
            + [f"{getattr(p, key):.4g}" for key, _ in _TIMES] for p in preds]
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(r, widths)) for r in [head] + rows)


def run_predict(args: argparse.Namespace) -> int:
    """Predict, print, and write predictions.{csv,json} when -o is given."""
    import pandas as pd

    machine = load_machine(args.machine)
    cores = parse_cores(args.cores)
    too_many = [c for c in cores if c > machine.cores]
    if too_many:
        raise InputError(f"--cores {args.cores}: {machine.name} has {machine.cores} cores; drop "
                         f"{','.join(map(str, too_many))}")
    hits, coherence = hit_rates_for(args, machine, cores)
    rates = local_rates_by_cores(hits)
    binary = Path(args.binary) if args.binary else None
    facts, term_args = region_inputs(machine, Path(args.trace), binary,
                                     trace_terms(Path(args.trace), machine, args.cpu_form))
    bounds = in_core_bounds(machine, Path(args.trace), binary) if args.cpu_form == "critical-path" else ()
    preds = predict_many(machine, cores, rates, facts, tlb_rates_for(args, machine, cores), coherence,
                         loop_bounds=bounds, block_bytes=args.block_bytes, gap_bytes=args.gap_bytes,
                         layout=args.layout, cpu_form=args.cpu_form, contention=args.contention, **term_args)
    rows = [p.as_row() for p in preds]
    if args.output:
        out = Path(args.output)
        write_table(pd.DataFrame(rows), out / "predictions.csv")
        write_json(out / "predictions.json", {"machine": machine.name, "trace": str(args.trace), "rows": rows})
        print(f"wrote {out / 'predictions.csv'} and predictions.json", file=sys.stderr)
    print(json.dumps(rows, indent=2) if args.json else format_table(preds))
    return 0


def register(subparsers) -> None:
    """Add `pptmc predict`."""
    p = subparsers.add_parser("predict", help="predict hit rates and runtime per core count from one trace")
    p.add_argument("trace", help="trace file written by `pptmc trace`")
    p.add_argument("--machine", required=True, help="shipped machine name (pptmc machines list) or a .toml file")
    p.add_argument("--cores", default="1,2,4,8", help="comma-separated core counts (default 1,2,4,8)")
    p.add_argument("--binary", help="instrumented binary (default: the program the trace names)")
    p.add_argument("--hit-rates", help="use this hit-rate table (csv/parquet with cores, level, local_hit_rate) "
                                       "instead of computing reuse profiles")
    p.add_argument("--layout", choices=LAYOUTS, default="contiguous",
                   help="Eq. 5 block size (Sec. 3.4.1/3.4.2); pipelined = n x beta_avg (out-of-order cores)")
    p.add_argument("--cpu-form", choices=CPU_FORMS, default="throughput", help="T_CPU form")
    p.add_argument("--contention", choices=CONTENTIONS, default="roofline",
                   help="DRAM contention: roofline floor (default) or closed queuing network (MVA)")
    p.add_argument("--block-bytes", type=float, default=None, help="contiguous block size b (default: mean access)")
    p.add_argument("--gap-bytes", type=float, default=0.0, help="gap v between blocks (non-contiguous layout)")
    p.add_argument("--seed", type=int, default=0, help="seed of the interleaving in the reuse profiles")
    p.add_argument("-o", "--output", help="directory for predictions.csv and predictions.json")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of the table")
    p.set_defaults(run=run_predict)
