"""CLI for block counts, sampled per-block profiles and input scaling: bbcounts, sample-profile, scale-profile.

Output directory of `sample-profile` and `scale-profile`:

* `bins.csv`        the combined profile P(D): lower (inclusive), upper (exclusive), count, dist_sum.
* `blocks.csv`      per block: block, count N_i, accesses_per_instance m_i, p_bb (Eq. 3), sampled, cold.
* `block_bins.csv`  per-block conditional profiles: block, lower, upper, count, dist_sum.
* `profile.json`    parameters, totals, cold accesses and SDCM hit rates at the reference levels.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from typing import TYPE_CHECKING

from analysis.sampling.options import DEFAULT_WINDOW, METHODS
from common.errors import InputError
from pptmc.commands.args import seed
from common.io import write_json, write_table

if TYPE_CHECKING:  # scipy, networkx, pandas and numba load in about a second: only the commands that run do
    import pandas as pd

    from analysis.counts import bbcounts
    from analysis.profiles.profileset import ReuseProfile
    from analysis.sampling.amm.blocks import SampledProfile


def register(subparsers) -> None:
    """Add the bbcounts, sample-profile and scale-profile subcommands."""
    p = subparsers.add_parser("bbcounts", help="solve basic-block execution counts from branch probabilities")
    p.add_argument("cfg", help="CFG JSON file, or an instrumented binary whose CFG the tracer wrote")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--probabilities", metavar="FILE", help='JSON {"edges": [{"from", "to", "p"}], "calls": {}}')
    src.add_argument("--counts", metavar="FILE", help='JSON {"block_counts": {id: n}, "edge_counts": [[a, b, n]]}')
    src.add_argument("--heuristic", action="store_true", help="static guess (results are estimates)")
    p.add_argument("--trip-count", type=float, default=None,
                   help="heuristic: guessed iterations per loop entry (default 10, i.e. p=0.9)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the count file (JSON)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run_bbcounts)

    s = subparsers.add_parser("sample-profile", help="AMM sampled per-block reuse profiles of a trace")
    s.add_argument("trace")
    _sampling_args(s, default_rate=None, default_method="hybrid")
    s.add_argument("-o", "--output", metavar="DIR", required=True)
    s.set_defaults(run=run_sample_profile)

    c = subparsers.add_parser("scale-profile", help="predict a larger input's reuse profile from a small trace")
    c.add_argument("trace", help="trace of the small input")
    c.add_argument("--counts", metavar="FILE", required=True, help="block counts at the large input (count file)")
    c.add_argument("--compare", metavar="LARGE_TRACE", help="trace of the large input: report the accuracy")
    _sampling_args(c, default_rate=1.0, default_method="exact")
    c.add_argument("-o", "--output", metavar="DIR", required=True)
    c.set_defaults(run=run_scale_profile)


def _sampling_args(p: argparse.ArgumentParser, default_rate: float | None, default_method: str) -> None:
    """Options shared by sample-profile and scale-profile."""
    p.add_argument("--sample-rate", type=float, default=default_rate, required=default_rate is None,
                   help="fraction of block instances (or lines, --method spatial) sampled, e.g. 0.01")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="instance/hybrid: accesses looked back (default 4096)")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--line-size", type=int, default=64)
    p.add_argument("--method", choices=METHODS, default=default_method,
                   help=f"instance (AMM), spatial (SHARDS), hybrid (instance within the window, SHARDS "
                        f"beyond) or exact (every access); default {default_method}")
    p.add_argument("--sample-size", type=int, default=None, help="instance/hybrid: at most this many instances per block")


def run_bbcounts(args: argparse.Namespace) -> int:
    """Solve and print (or write) block counts."""
    from analysis.counts import bbcounts

    cfg = bbcounts.load_cfg(args.cfg)
    if args.counts:
        blocks, edges = bbcounts.load_counts(args.counts)
        if not edges:
            raise InputError(f"{args.counts}: field 'edge_counts' is empty; a counting run's edge counts are "
                             "needed to derive branch probabilities")
        result = bbcounts.counts_from_run(cfg, blocks, edges)
    elif args.probabilities:
        probs, calls = bbcounts.probabilities_from_file(cfg, args.probabilities)
        result = bbcounts.solve_counts(cfg, probs, calls, source="probabilities")
    else:
        trips = bbcounts.DEFAULT_TRIP_COUNT if args.trip_count is None else args.trip_count
        probs = bbcounts.heuristic_probabilities(cfg, trips)
        result = bbcounts.solve_counts(cfg, probs, source="heuristic", estimate=True)
    table = bbcounts.block_table(Path(args.cfg))
    if table is not None:
        bbcounts.add_hosted_blocks(result, table)
    doc = result.to_json()
    if table is not None:  # operation totals: the static instruction mix times the counts
        doc["op_totals"] = bbcounts.count_weighted_totals({b: e.ops for b, e in table.blocks.items()}, result.counts)
    if args.output:
        write_json(args.output, doc)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _print_counts(cfg, result)
        for op, n in sorted(doc.get("op_totals", {}).items()):
            print(f"# {op}: {n:.6g}")
    return 0


def _print_counts(cfg: bbcounts.Cfg, result: bbcounts.BlockCounts) -> None:
    """A readable table of counts and P(BB_i)."""
    label = "ESTIMATE (static heuristic)" if result.estimate else f"from {result.source}"
    print(f"# block counts {label}")
    probs = result.probabilities()
    print(f"{'block':>8}  {'count':>14}  {'P(BB)':>8}  name")
    for b in sorted(result.counts):
        f = cfg.functions.get(result.function_of[b])
        name = f.block_name(b) if f is not None and b in f.blocks else f"{result.function_of[b]}:(hosted)"
        print(f"{b:>8}  {result.counts[b]:>14.6g}  {probs[b]:>8.4f}  {name}")
    if result.assumed_calls:
        print(f"# call count assumed 1 for: {', '.join(result.assumed_calls)}", file=sys.stderr)


def _sample(path: str, args: argparse.Namespace) -> SampledProfile:
    """Per-block profiles of one trace file with the chosen method."""
    from analysis.sampling.amm.blocks import sample_trace_file

    return sample_trace_file(path, args.sample_rate, args.window, args.seed, args.line_size, args.method,
                             args.sample_size)


def run_sample_profile(args: argparse.Namespace) -> int:
    """`pptmc sample-profile`: write the per-block and combined sampled profiles."""
    sp = _sample(args.trace, args)
    out = save_sampled(sp, sp.combined(), args.output, {"trace": args.trace})
    print(f"wrote {out} ({sp.n_sampled} of {sp.n_accesses} accesses measured)")
    return 0


def run_scale_profile(args: argparse.Namespace) -> int:
    """`pptmc scale-profile`: predict the large input's profile; compare with its trace if given."""
    import numpy as np

    from analysis.counts import bbcounts
    from analysis.counts.scaling import compare, scale_profile

    counts, _ = bbcounts.load_counts(args.counts)
    small = _sample(args.trace, args)
    scaled = scale_profile(small, counts)
    meta = {"trace": args.trace, "counts": args.counts, "missing_blocks": scaled.missing_blocks,
            "expected_accesses": scaled.expected_accesses}
    if args.compare:
        from analysis.profiles.sweep import open_chunks
        from analysis.profiles.reuse import ReuseEngine

        info, factory = open_chunks(args.compare)
        engine = ReuseEngine()
        shift = np.uint64(args.line_size.bit_length() - 1)
        for chunk in factory():
            engine.feed(chunk.addr >> shift)
        table = compare(scaled.profile, engine.histogram())
        write_table(table, Path(args.output) / "accuracy.csv")
        meta["accuracy"] = table.to_dict(orient="records")
        print(table.to_string(index=False))
    save_sampled(small, scaled.profile, args.output, meta, counts)
    if scaled.missing_blocks:
        print(f"warning: {len(scaled.missing_blocks)} blocks run at the large input but never ran in the small "
              f"trace; their accesses are missing: {scaled.missing_blocks[:10]}", file=sys.stderr)
    return 0


def save_sampled(sp: SampledProfile, combined: ReuseProfile, directory: str | Path, meta: dict,
                 counts: dict[int, float] | None = None) -> Path:
    """Write the documented output directory, every file atomically."""
    import pandas as pd

    from analysis.counts.scaling import hit_rates

    out = Path(directory)
    counts = sp.block_counts if counts is None else counts
    write_table(_bins_frame(combined), out / "bins.csv")
    p_bb = sp.block_probabilities(counts)
    rows = [{"block": b, "count": counts.get(b, 0.0), "accesses_per_instance": sp.accesses_per_instance.get(b, 0.0),
             "p_bb": p_bb.get(b, 0.0), "sampled": sp.per_block[b].total if b in sp.per_block else 0,
             "cold": sp.per_block[b].cold if b in sp.per_block else 0} for b in sorted(counts)]
    write_table(pd.DataFrame(rows, columns=["block", "count", "accesses_per_instance", "p_bb", "sampled", "cold"]),
                out / "blocks.csv")
    parts = [_bins_frame(p).assign(block=b) for b, p in sorted(sp.per_block.items())]
    cols = ["block", "lower", "upper", "count", "dist_sum"]
    write_table(pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols),
                out / "block_bins.csv")
    write_json(out / "profile.json", {**meta, "method": sp.method, "sample_rate": sp.sample_rate,
                                      "window": sp.window, "seed": sp.seed, "line_size": sp.line_size,
                                      "n_accesses": sp.n_accesses, "n_sampled": sp.n_sampled,
                                      "total": combined.total, "cold": combined.cold,
                                      "hit_rates": hit_rates(combined) if combined.total else {}})
    return out


def _bins_frame(p: ReuseProfile) -> pd.DataFrame:
    """The bins of one profile as a table."""
    import pandas as pd

    return pd.DataFrame({"lower": p.lower, "upper": p.upper, "count": p.count, "dist_sum": p.dist_sum})
