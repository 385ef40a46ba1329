"""`pptmc profile` (PRD/CRD reuse profiles) and `pptmc hitrates` (SDCM cache hit rates)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from analysis.options import PLACEMENTS, INTERLEAVES, MODES
from analysis.sampling.options import DEFAULT_WINDOW_LENGTH, SOURCE_WINDOW, STREAM_METHODS, STREAM_WINDOW
from pptmc.commands.args import add_strict, check_complete, check_pieces, parse_cores, seed
from common.errors import InputError, PptmcError
from common.io import write_json, write_table


def register(subparsers) -> None:
    """Add the profile and hitrates subcommands."""
    p = subparsers.add_parser("profile", help="private (PRD) and shared (CRD) reuse profiles for core counts")
    p.add_argument("trace", help="trace file written by `pptmc trace`")
    p.add_argument("--cores", default="1,2,4,8,16", help="comma-separated core counts (default 1,2,4,8,16)")
    p.add_argument("--interleave", choices=INTERLEAVES, default="rr", help="shared-trace interleaving")
    p.add_argument("--seed", type=seed, default=0, help="seed for --interleave random and for --sample-rate")
    p.add_argument("--refs-per-turn", type=int, default=1, help="references each core issues per turn")
    p.add_argument("--mode", choices=MODES, default="auto",
                   help="iteration: per-iteration schedule (default with loop markers); paper: Algorithm 1")
    p.add_argument("--line-size", type=int, default=64, help="cache line size in bytes")
    p.add_argument("--paper-chunk", type=int, default=0,
                   help="paper mode: deal block instances to cores in runs of this many (0: even contiguous split)")
    p.add_argument("--no-coherence", dest="coherence", action="store_false",
                   help="private profiles ignore write-invalidate coherence misses (the model before it)")
    p.add_argument("--set-bits", default="6", metavar="B[,B...]",
                   help="also profile distances within each line's set class of B low line-id bits, for the "
                        "set-aware hit rates (default 6: the 64 line slots of a 4 KiB page, which fix the sets "
                        "of a 64-set L1 and the in-page set bits of L2s; 0: none)")
    p.add_argument("--machines", default="", metavar="M[,M...]",
                   help="also make what these machines' hit rates read: their levels' set-class widths, and one "
                        "CRD per occupied instance of a shared level serving a group of cores (an L3 per CCX)")
    p.add_argument("--placement", choices=PLACEMENTS, default="close",
                   help="with --machines: threads on cores, as OpenMP's proc_bind (default close)")
    p.add_argument("--writebacks", action="store_true",
                   help="also profile each core count's write-back gaps (DRAM write traffic; one more pass)")
    p.add_argument("--sample-rate", type=float, default=None, metavar="R",
                   help="estimate every profile from a sample of about R of each stream (e.g. 0.01); "
                        "default: exact profiles")
    p.add_argument("--sample-method", choices=("source",) + STREAM_METHODS, default="source",
                   help="source (default): sample the sequential trace's lines before mimicking and "
                        "interleaving (windows for short private reuses + SHARDS; --interleave random falls "
                        "back to window); window / spatial / exact: build every stream in full and sample it "
                        "(exact time windows + SHARDS, SHARDS only, no sampling)")
    p.add_argument("--sample-window", type=int, default=None, metavar="G",
                   help=f"source and window methods: reuses at most G accesses apart are measured exactly "
                        f"(default {SOURCE_WINDOW} for source, {STREAM_WINDOW} for window)")
    p.add_argument("--window-length", type=int, default=DEFAULT_WINDOW_LENGTH, metavar="L",
                   help=f"source and window methods: accesses per sampled window (default {DEFAULT_WINDOW_LENGTH})")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="worker processes for groups of core counts (default 1); each re-reads the trace, "
                        "same profiles, more CPU time in total but less wall time")
    p.add_argument("--scheduler", default=None, metavar="WHERE",
                   help="run the groups of core counts as Dask tasks, one group per worker, each re-reading the "
                        "trace (same profiles): local (one worker per core), local:N, tcp://HOST:PORT (a running "
                        "scheduler whose workers see the trace), slurm or pbs (README.md, \"Running on a "
                        "cluster\"); instead of --jobs")
    p.add_argument("--cluster-config", default=None, metavar="FILE",
                   help="TOML file of queue options for --scheduler slurm|pbs (default ./pptmc-cluster.toml)")
    p.add_argument("-o", "--output", required=True, help="output directory")
    p.add_argument("--json", action="store_true", help="print a machine-readable summary")
    add_strict(p)
    p.set_defaults(run=run_profile)

    h = subparsers.add_parser("hitrates", help="predict cache hit rates from reuse profiles (SDCM)")
    h.add_argument("profiles", help="directory written by `pptmc profile`")
    h.add_argument("--machine", required=True, help="machine name or machine TOML file")
    h.add_argument("--hit-rates", choices=("set-aware", "sdcm"), default="set-aware",
                   help="set-aware (default; needs profiles made with --set-bits) or sdcm (the paper's)")
    h.add_argument("--placement", choices=PLACEMENTS, default="close",
                   help="threads on cores (default close): which instances of a cache shared by a group of cores "
                        "they use, in the model and the simulator (the profiles need that grouping: pptmc "
                        "profile --machines M --placement P)")
    h.add_argument("--simulate", metavar="TRACE", help="also run the LRU cache simulator on this trace (one "
                   "instance of a shared level per group of cores, threads placed by --placement)")
    h.add_argument("--hierarchical", action="store_true",
                   help="simulator: a level sees only the misses of the level above (default: every access, "
                        "as SDCM assumes)")
    h.add_argument("--coherent", action="store_true",
                   help="simulator: write-invalidate between the private caches and between the instances of a "
                        "shared level, as the ground truth of pptmc validate (implies --hierarchical)")
    h.add_argument("-o", "--output", required=True, help="output table; FILE.csv and FILE.parquet are both written")
    h.add_argument("--json", action="store_true", help="print the table as JSON")
    add_strict(h)
    h.set_defaults(run=run_hitrates)


def run_profile(args: argparse.Namespace) -> int:
    """Compute and save a ProfileSet."""
    from analysis.profiles.sweep import compute_profiles
    from common.locks import output_folder
    from pptmc.commands.validate import checked_cluster

    if not Path(args.trace).is_file():
        raise InputError(f"{args.trace}: trace file not found; record one with `pptmc trace`")
    if args.paper_chunk < 0:
        raise InputError(f"--paper-chunk {args.paper_chunk}: must be 0 (even split) or a positive chunk size")
    cores = parse_cores(args.cores)
    scheduler, cluster_config = checked_cluster(args.scheduler, args.cluster_config,
                                                None if args.jobs == 1 else args.jobs)
    if scheduler is not None and args.sample_rate is not None:
        raise InputError("--scheduler runs the exact sweep's groups of core counts; --sample-rate samples in "
                         "this process: give one of them")
    if args.sample_rate is None:
        from analysis.profiles.limits import check_memory

        needs = _for_machines(args, cores)
        check_memory(cores, str(args.trace), args.line_size, needs["class_bits"], needs.get("groupings", ()))
        sweep = dict(mode=args.mode, interleave=args.interleave, seed=args.seed, refs_per_turn=args.refs_per_turn,
                     line_size=args.line_size, paper_chunk=args.paper_chunk, coherence=args.coherence,
                     writebacks=args.writebacks, **needs)
        if scheduler is None:
            ps = compute_profiles(args.trace, cores, progress=True, jobs=args.jobs, **sweep)
        else:
            from pptmc.cluster import open_cluster, parse_scheduler, profiles_on_cluster

            say = (lambda msg: print(f"[profile] {msg}", file=sys.stderr))
            with open_cluster(parse_scheduler(scheduler), cluster_config, say) as client:
                ps = profiles_on_cluster(client, Path(args.trace), cores, not args.json, **sweep)
        extra: dict = {}
    else:
        from analysis.sampling.confidence import check_sample_size, sample_warning

        ps, extra = _sampled(args, cores)
        accesses = ps.crd[min(ps.cores)].total
        check_sample_size(accesses, args.sample_rate, str(args.trace))
        warning = sample_warning(accesses, args.sample_rate)
        if warning:
            print(f"pptmc: warning: {args.trace}: {warning}", file=sys.stderr)
    check_complete(ps.trace_complete, str(args.trace), args)  # before writing: --strict leaves nothing
    check_pieces(Path(args.trace), cores)
    with output_folder(Path(args.output), "pptmc profile") as folder:  # the folder is replaced whole, never mixed
        ps.save(folder)
        if extra:  # label the directory: hitrates predicted from it are estimates of estimates
            write_json(folder / "profiles.json", {**ps.metadata(), **extra})
    out = Path(args.output)
    summary, _ = ps.tables()
    if args.json:
        print(json.dumps({"output": str(out), **ps.metadata(), **extra,
                          "profiles": summary.to_dict(orient="records")}, indent=2, default=_plain))
    else:
        note = "" if ps.trace_complete else "; the trace is incomplete"
        label = f", sampled at {args.sample_rate:g} ({args.sample_method})" if extra else ""
        print(f"wrote {out} ({len(summary)} profiles, mode {ps.mode}{label}){note}")
    return 0


def _for_machines(args: argparse.Namespace, cores: list[int]) -> dict:
    """compute_profiles' class widths, groupings and class-CRD flag: --set-bits's, plus what --machines need."""
    bits = parse_set_bits(args.set_bits)
    if not args.machines:
        return {"class_bits": bits}
    from analysis.hitrates.rates import profile_needs
    from machines import load_machine

    machines = [load_machine(name.strip()) for name in args.machines.split(",") if name.strip()]
    needs = profile_needs(machines, cores, placement=args.placement)
    return {**needs._asdict(), "class_bits": tuple(sorted(set(bits) | set(needs.class_bits)))}


def parse_set_bits(text: str) -> tuple[int, ...]:
    """--set-bits: a comma list of class widths; 0 alone means none."""
    try:
        bits = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--set-bits {text!r}: give comma-separated bit counts, e.g. 6 (or 0 for none)") from None
    return () if bits == [0] else tuple(bits)


def _sampled(args: argparse.Namespace, cores: list[int]):
    """The sampled ProfileSet and its metadata label."""
    from analysis.sampling.streams import StreamSampling, sampled_profiles

    if args.sample_method == "source":
        from analysis.sampling.source import HEAVY_SHARE_WARN, SourceSampling, sampled_profile_set

        needs = _for_machines(args, cores)  # the set-class widths and groupings the exact sweep would make
        ps, meta = sampled_profile_set(args.trace, cores,
                                       SourceSampling(args.sample_rate, args.seed,
                                                      window=_or(args.sample_window, SOURCE_WINDOW),
                                                      length=args.window_length),
                                       args.mode, args.interleave, args.seed, args.refs_per_turn, args.line_size,
                                       args.paper_chunk, args.coherence, class_bits=needs["class_bits"],
                                       class_crds=needs.get("class_crds", True),
                                       groupings=needs.get("groupings", ()))
        if meta.get("heaviest_line_share", 0.0) > HEAVY_SHARE_WARN:  # not measured by the random fallback
            print(f"note: one sampled line takes {100 * meta['heaviest_line_share']:.1f}% of the sample; SHARDS "
                  f"weighs it 1/{args.sample_rate:g}, so this seed's estimate may be off by several points "
                  f"(try another --seed or a higher --sample-rate)", file=sys.stderr)
        return ps, {"sampling": meta}
    sampling = StreamSampling(args.sample_rate, args.sample_method, args.seed,
                              _or(args.sample_window, STREAM_WINDOW), args.window_length)
    ps = sampled_profiles(args.trace, cores, sampling, args.mode, args.interleave, args.seed, args.refs_per_turn,
                          args.line_size, args.paper_chunk)
    return ps, {"sampling": sampling.metadata()}


def _or(value: int | None, default: int) -> int:
    """An option's value, or its method's default when not given."""
    return default if value is None else value


def with_intervals(table, rate: float):
    """Sampled hit rates with their 95 % interval (analysis/sampling/confidence.py): ci_low, ci_high."""
    from analysis.sampling.confidence import expected_sample, wilson_interval

    bounds = [wilson_interval(p, expected_sample(n, rate))
              for p, n in zip(table["cumulative_hit_rate"], table["accesses"])]
    return table.assign(ci_low=[lo for lo, _ in bounds], ci_high=[hi for _, hi in bounds])


def sampling_of(directory: str | Path) -> dict | None:
    """The sampling label of a profile directory (None: exact profiles)."""
    meta = Path(directory) / "profiles.json"
    try:
        return json.loads(meta.read_text()).get("sampling") if meta.is_file() else None
    except ValueError:
        return None


def hit_rate_files(out: Path) -> list[Path]:
    """`-o X` writes X.csv and X.parquet (X itself when it names one of them): distinct -o, distinct files
    (x_0.01 and x_0.0001 no longer both become x_0.csv)."""
    base = out.with_suffix("") if out.suffix in (".csv", ".parquet") else out
    return [Path(f"{base}.csv"), Path(f"{base}.parquet")]


def run_hitrates(args: argparse.Namespace) -> int:
    """Predict (and optionally simulate) hit rates; write one table."""
    import pandas as pd

    from analysis.hitrates.rates import predict_hit_rates, with_mpki
    from analysis.profiles.profileset import ProfileSet
    from machines import load_machine

    ps = ProfileSet.load(args.profiles)
    check_complete(ps.trace_complete, str(args.profiles), args)
    machine = load_machine(args.machine)
    sampled = sampling_of(args.profiles)
    if sampled:
        print(f"note: {args.profiles} holds sampled profiles (rate {sampled.get('rate')}, "
              f"{sampled.get('method')}); the hit rates are estimates", file=sys.stderr)
    table = with_mpki(predict_hit_rates(ps, machine, set_aware=args.hit_rates == "set-aware",
                                        placement=args.placement),
                      _operations(ps.trace)).assign(source=args.hit_rates)
    if sampled and sampled.get("rate"):
        table = with_intervals(table, float(sampled["rate"]))
    if args.simulate:
        from analysis.hitrates.cachesim import simulate_like

        sim = simulate_like(args.simulate, machine, ps, hierarchical=args.hierarchical or args.coherent,
                            coherent=args.coherent, placement=args.placement)
        table = pd.concat([table, sim.assign(source="simulator")], ignore_index=True)
    table["trace_complete"] = ps.trace_complete
    for target in hit_rate_files(Path(args.output)):
        write_table(table, target)
    if args.json:
        print(table.to_json(orient="records", indent=2))
    else:
        print(table.to_string(index=False))
    return 0


def _operations(trace: str) -> float:
    """The traced regions' counted operations, for mpki; 0 (mpki NaN, with a note) when the trace or the
    instrumented binary it names is gone."""
    from analysis.runtime.facts import RegionRecord, operation_count

    try:
        return operation_count(RegionRecord.load(Path(trace)))
    except (PptmcError, OSError) as exc:
        print(f"note: mpki left empty: {exc}", file=sys.stderr)
        return 0.0


def _plain(obj):
    """JSON fallback for numpy scalars."""
    return obj.item() if hasattr(obj, "item") else str(obj)
